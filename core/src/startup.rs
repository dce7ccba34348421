//! The start-up decision: which servers of a connect string to ask, how long
//! to wait for each, when the answers suffice, which servers the client may
//! use, the session-timeout bound the core may rely on, when to ask again,
//! and when to give up with which error. A sans-IO machine, as
//! [`Candidate`](crate::Candidate) is: no clock, no I/O, no randomness (the
//! backoff's jitter is seeded); the adapter resolves names, opens
//! connections and runs the client, and feeds what happened back with `now`.
//!
//! # Why ask at all
//!
//! - **The negotiated session timeout** ([`Learn::SessionTimeout`]). A
//!   server clamps the timeout a client requests into its
//!   `[minSessionTimeout, maxSessionTimeout]`; the core's lease must rest on
//!   the real session's timeout, or a bound no greater than it, never on the
//!   requested one. zookeeper-async reads the server's answer but does not
//!   expose it, so the adapter asks each server itself: a ConnectRequest
//!   with the same requested timeout on a connection of its own, whose
//!   answer is what that server negotiates for the real session too.
//! - **Liveness** ([`Learn::Liveness`]). A server that accepts TCP and never
//!   answers (frozen, SIGSTOPped, a black hole) costs a client that tries it
//!   a whole connection timeout (zookeeper-client shuffles its servers, so
//!   one frozen member of three delays one start in three by 4 s at a 10 s
//!   session). zookeeper-client reports the negotiated timeout itself; the
//!   adapter only needs to know who answers.
//!
//! # The decision
//!
//! 1. Every server is resolved, then asked, all at once, each with its own
//!    deadline ([`StartupConfig::ask_timeout`]). A name that does not
//!    resolve is left out with a warning ([`StartupNotice::LeftOut`]); only
//!    when no name resolves is the connect string refused
//!    ([`StartupError::Unresolvable`]).
//! 2. The answers suffice when at least one server has answered and either
//!    every server has an outcome (answered, refused, silent past its
//!    deadline, unresolvable) or [`StartupConfig::grace`] has passed since
//!    the first answer. So one frozen member costs at most the grace, never
//!    a connect timeout.
//! 3. The client is given ([`Plan::servers`]) the servers that answered, in
//!    connect-string order, then those that refused the connection (nothing
//!    listens there now: a client fails over from them at once, and a member
//!    being restarted is back in the list when it returns). A server that
//!    accepted the connection but gave no answer in time, or that does not
//!    speak ZooKeeper, is left out with a warning: a client would stall on
//!    it for its connection timeout at every attempt.
//! 4. Failed servers are asked again with jittered exponential backoff
//!    ([`StartupConfig::backoff_min`] up to [`GATHERING_BACKOFF_MAX`] before
//!    the start, up to [`StartupConfig::backoff_max`] after it) until
//!    the answers suffice; if none has answered by the connect timeout, the
//!    start is refused ([`StartupError::NoAnswer`], naming each server's last
//!    failure).
//! 5. A client attempt that fails ([`Startup::client_failed`]) is made again
//!    after the same kind of pause (up to [`GATHERING_BACKOFF_MAX`]), until
//!    the connect timeout ([`StartupError::ClientFailed`]).
//!
//! # Why the bound holds ([`Learn::SessionTimeout`])
//!
//! The bound is the smallest answer of the servers in the client's list.
//! A server's answer to our ConnectRequest is the value it negotiates for
//! any ConnectRequest with that requested timeout (clamping is a pure
//! function of the request and the server's configuration). The real
//! session is created by the server the client reaches first; after a
//! reconnect the client sends the timeout it was given and the new server
//! clamps it again. Clamping is monotone, and a server that answered `a`
//! maps any value `v ≥ m` (`m` the smallest answer, `m ≤ a ≤` its
//! maximum) to at least `min(v, a) ≥ m`. So as long as every server the
//! session is ever on has answered, its timeout never drops below `m`.
//!
//! The client's list holds only servers that answered or refused the
//! connection at start. Those that refused are asked again in the
//! background (backoff), and at every (re)connection of the client
//! ([`Startup::client_connected`]) each of them that has still not answered
//! is asked again at once (one already being asked too: an ask sent before
//! the connection may fail for a reason older than it); the adapter reports
//! `Connected` only with [`Startup::confirmed_bound`], which waits until
//! every such ask has answered or failed. The server the client just
//! connected to has just answered the client, so it answers an ask sent
//! after that too: its answer is in the bound before the core hears of the
//! connection, and an answer below the bound lowers it
//! ([`StartupNotice::Lowered`]). What this cannot see: a
//! server that answers the client and then turns silent before our ask
//! reaches it (the client's connection stalls too, and the core suspends
//! within two thirds of the bound), and a server restarted with a lower
//! `maxSessionTimeout` after it answered (lower the reported bound by hand
//! ahead of such a change).
//!
//! ```
//! use std::time::Duration;
//! use zkelect_core::startup::*;
//! use zkelect_core::Timestamp;
//!
//! let ms = Timestamp::from_millis;
//! let config = StartupConfig::new(3, Learn::SessionTimeout, Duration::from_secs(10));
//! let mut s = Startup::new(ms(0), config);
//! // Resolve all three at once.
//! let resolves: Vec<_> = std::iter::from_fn(|| s.poll_command()).collect();
//! assert_eq!(resolves.len(), 3);
//! for server in 0..3 {
//!     s.resolved(ms(1), server, Ok(()));
//! }
//! // Then ask all three at once.
//! let asks: Vec<_> = std::iter::from_fn(|| s.poll_command()).collect();
//! assert!(matches!(asks[0], StartupCommand::Ask { server: 0, attempt: 1, .. }));
//! // Server 0 is frozen; 1 and 2 answer.
//! s.answered(ms(5), 1, 1, Ok(Some(Duration::from_secs(4))));
//! s.answered(ms(6), 2, 1, Ok(Some(Duration::from_secs(6))));
//! assert_eq!(s.poll_command(), None); // waiting for server 0 …
//! s.handle_timeout(ms(5) + config.grace); // … for the grace only
//! let Some(StartupCommand::Connect { plan, .. }) = s.poll_command() else { panic!() };
//! assert_eq!(plan.servers, [1, 2]); // the silent server is left out
//! assert_eq!(plan.bound, Some(Duration::from_secs(4)));
//! // The client connects: the bound is confirmed (no listed server unanswered).
//! s.client_connected(ms(300));
//! assert_eq!(s.confirmed_bound(), Some(Duration::from_secs(4)));
//! ```

use std::fmt;
use std::time::Duration;

use crate::time::Timestamp;
use crate::timer::Backoff;

/// The longest pause between asks of one server before the start: a
/// member that comes back while the caller waits is asked within a second.
pub const GATHERING_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// What the start-up must learn from each server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Learn {
    /// The session timeout it negotiates (a session opened and closed at
    /// once): for a client that does not report it (zookeeper-async).
    SessionTimeout,
    /// Only whether it answers (no session is created): for a client that
    /// reports the negotiated timeout itself (zookeeper-client).
    Liveness,
}

/// The machine's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartupConfig {
    /// How many servers the connect string lists (at least one).
    pub servers: usize,
    /// What to learn from each.
    pub learn: Learn,
    /// The connect timeout: with no answer by then, the start is refused.
    pub connect_timeout: Duration,
    /// How long one resolution or one ask may take (default 1 s, never more
    /// than the connect timeout): a server that has not answered by then is
    /// silent for this attempt.
    pub ask_timeout: Duration,
    /// How long to wait for the other servers after the first answer
    /// (default 250 ms).
    pub grace: Duration,
    /// The first pause before asking a failed server again (default 100 ms).
    pub backoff_min: Duration,
    /// The longest pause between asks (default 10 s).
    pub backoff_max: Duration,
    /// The shortest negotiated timeout the client can keep
    /// ([`StartupError::TooShort`] below it; zero: no limit).
    pub min_timeout: Duration,
    /// Seeds the backoff's jitter.
    pub seed: u64,
}

impl StartupConfig {
    /// Defaults for `servers` servers, learning `learn`, within `connect_timeout`.
    pub fn new(servers: usize, learn: Learn, connect_timeout: Duration) -> Self {
        Self {
            servers,
            learn,
            connect_timeout,
            ask_timeout: Duration::from_secs(1).min(connect_timeout),
            grace: Duration::from_millis(250),
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(10),
            min_timeout: Duration::ZERO,
            seed: 0,
        }
    }
}

/// Why an ask failed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AskFailure {
    /// The connection was refused: nothing listens there now.
    Refused(String),
    /// The connection was made (or is still being made) but no answer came
    /// before the ask's deadline.
    Silent,
    /// An answer that is not a ZooKeeper ConnectResponse, or the connection
    /// closed or failed otherwise.
    Broken(String),
}

impl fmt::Display for AskFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Refused(why) => write!(f, "refused the connection: {why}"),
            Self::Silent => f.write_str("accepted the connection but did not answer in time"),
            Self::Broken(why) => write!(f, "gave no ZooKeeper answer: {why}"),
        }
    }
}

/// What the adapter must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartupCommand {
    /// Resolve server `server`'s name; answer with [`Startup::resolved`].
    Resolve {
        /// Index into the connect string's servers.
        server: usize,
        /// Give up on it at this time.
        deadline: Timestamp,
    },
    /// Ask server `server` (a ConnectRequest of our own); answer with
    /// [`Startup::answered`], quoting `attempt`.
    Ask {
        /// Index into the connect string's servers.
        server: usize,
        /// Which ask of this server this is (from 1).
        attempt: u32,
        /// Give up on it at this time (then answer [`AskFailure::Silent`]).
        deadline: Timestamp,
    },
    /// Start the client on these servers; answer with
    /// [`Startup::client_connected`] or [`Startup::client_failed`].
    Connect {
        /// What to start with.
        plan: Plan,
        /// The attempt must end by then (the connect timeout).
        deadline: Timestamp,
    },
}

/// How the client starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The servers to give the client, in this order (indices into the
    /// connect string): those that answered, then those that refused.
    pub servers: Vec<usize>,
    /// The session-timeout bound ([`Learn::SessionTimeout`]): the smallest
    /// answer of the listed servers. `None` under [`Learn::Liveness`].
    pub bound: Option<Duration>,
}

/// Why a server is not in the client's list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LeftOut {
    /// Its name did not resolve.
    Unresolvable(String),
    /// It accepted the connection but gave no answer in time, or no
    /// ZooKeeper answer.
    NoAnswer(AskFailure),
}

/// What the adapter should log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartupNotice {
    /// A server is not given to the client (a warning).
    LeftOut {
        /// Index into the connect string.
        server: usize,
        /// Why.
        why: LeftOut,
    },
    /// A server answered after the start with less than the bound: the bound
    /// is lowered (reported with the next `Connected`).
    Lowered {
        /// Index into the connect string.
        server: usize,
        /// The old bound.
        from: Duration,
        /// The new bound.
        to: Duration,
    },
}

/// Why the start is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartupError {
    /// No server name resolves: each server's reason.
    Unresolvable(Vec<(usize, String)>),
    /// No server answered before the connect timeout: each server's last
    /// failure (`None`: still being resolved or asked).
    NoAnswer(Vec<(usize, Option<LeftOut>)>),
    /// The servers negotiate a session timeout shorter than the client can keep.
    TooShort {
        /// The server that negotiated it.
        server: usize,
        /// What it negotiated.
        negotiated: Duration,
        /// The shortest the client can keep.
        min: Duration,
    },
    /// The answers sufficed but the client did not connect before the
    /// connect timeout: its last failure.
    ClientFailed(String),
}

/// Where the start-up is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Resolving and asking; no plan yet.
    Gathering,
    /// The client is starting on the plan.
    Connecting(Plan),
    /// The client is up; failed listed servers are asked in the background.
    Running(Plan),
    /// Refused, for good.
    Refused(StartupError),
}

/// One server's state.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Server {
    Resolving {
        until: Timestamp,
    },
    Unresolvable(String),
    /// Resolved, waiting to be asked (again) at `at`; `last` is the last
    /// failure, if any.
    Waiting {
        at: Timestamp,
        last: Option<AskFailure>,
    },
    Asking {
        until: Timestamp,
        last: Option<AskFailure>,
    },
    /// Resolved and not to be asked again (left out of the client's list).
    Dropped(AskFailure),
    Answered(Option<Duration>),
}

/// The start-up machine. See the module docs.
#[derive(Debug, Clone)]
pub struct Startup {
    config: StartupConfig,
    started: Timestamp,
    servers: Vec<Server>,
    attempts: Vec<u32>,
    backoffs: Vec<Backoff>,
    first_answer: Option<Timestamp>,
    phase: Phase,
    bound: Option<Duration>,
    /// Servers asked again at the client's last connection whose outcome is
    /// still out (the bound is not confirmed until it is in).
    recheck: Vec<usize>,
    commands: Vec<StartupCommand>,
    notices: Vec<StartupNotice>,
    /// The client's next attempt, after a failed one.
    client_retry: Option<Timestamp>,
    /// The pauses between the client's attempts.
    client_backoff: Backoff,
    /// Why the client's last attempt failed.
    last_client_failure: Option<String>,
}

impl Startup {
    /// A start-up at `now`: every server is to be resolved at once.
    pub fn new(now: Timestamp, config: StartupConfig) -> Self {
        let n = config.servers;
        let deadline = now + config.ask_timeout;
        let commands = (0..n)
            .map(|server| StartupCommand::Resolve { server, deadline })
            .collect();
        let mut seed = config.seed;
        let backoffs = (0..n)
            .map(|_| {
                seed = crate::name::splitmix64(seed);
                Backoff::new(seed)
            })
            .collect();
        let client_backoff = Backoff::new(crate::name::splitmix64(seed));
        let mut startup = Self {
            config,
            started: now,
            servers: vec![Server::Resolving { until: deadline }; n],
            attempts: vec![0; n],
            backoffs,
            first_answer: None,
            phase: Phase::Gathering,
            bound: None,
            recheck: Vec::new(),
            commands,
            notices: Vec::new(),
            client_retry: None,
            client_backoff,
            last_client_failure: None,
        };
        if n == 0 {
            startup.phase = Phase::Refused(StartupError::Unresolvable(Vec::new()));
            startup.commands.clear();
        }
        startup
    }

    /// The next thing to do, in order.
    pub fn poll_command(&mut self) -> Option<StartupCommand> {
        if self.commands.is_empty() {
            None
        } else {
            Some(self.commands.remove(0))
        }
    }

    /// The next thing to log, in order.
    pub fn poll_notice(&mut self) -> Option<StartupNotice> {
        if self.notices.is_empty() {
            None
        } else {
            Some(self.notices.remove(0))
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next due.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        if matches!(self.phase, Phase::Refused(_)) {
            return None;
        }
        let mut next: Option<Timestamp> = None;
        let mut at = |t: Timestamp| next = Some(next.map_or(t, |n| n.min(t)));
        for server in &self.servers {
            match server {
                Server::Resolving { until } | Server::Asking { until, .. } => at(*until),
                Server::Waiting { at: when, .. } if self.asks_again() => at(*when),
                _ => {}
            }
        }
        match &self.phase {
            Phase::Gathering => {
                at(self.give_up_at());
                if let Some(first) = self.first_answer {
                    at(first + self.config.grace);
                }
            }
            // While the client's attempt is under way the adapter bounds it
            // by the `Connect` command's deadline, and the machine has
            // nothing to do at the connect timeout: only a failed attempt
            // waiting for its retry gives up then. Naming that moment
            // otherwise would wake an adapter that drives the machine in
            // the meantime, at once and again, for nothing.
            Phase::Connecting(_) => {
                if let Some(retry) = self.client_retry {
                    at(retry);
                    at(self.give_up_at());
                }
            }
            Phase::Running(_) | Phase::Refused(_) => {}
        }
        next
    }

    /// Where the start-up is.
    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    /// The current session-timeout bound, `None` before the plan or under
    /// [`Learn::Liveness`].
    pub fn bound(&self) -> Option<Duration> {
        self.bound
    }

    /// The bound the adapter may report with `Connected`: `None` while an
    /// ask made at the client's last connection is still out (see the
    /// module docs), or when there is no bound.
    pub fn confirmed_bound(&self) -> Option<Duration> {
        if self.recheck.is_empty() {
            self.bound
        } else {
            None
        }
    }

    /// The outcome of a [`StartupCommand::Resolve`].
    pub fn resolved(&mut self, now: Timestamp, server: usize, result: Result<(), String>) {
        let Some(Server::Resolving { .. }) = self.servers.get(server) else {
            return;
        };
        match result {
            Ok(()) => {
                self.servers[server] = Server::Waiting {
                    at: now,
                    last: None,
                };
                self.ask_due(now);
            }
            Err(reason) => {
                self.servers[server] = Server::Unresolvable(reason.clone());
                self.notices.push(StartupNotice::LeftOut {
                    server,
                    why: LeftOut::Unresolvable(reason),
                });
            }
        }
        self.decide(now);
    }

    /// The outcome of ask `attempt` of `server`: `Ok(Some(timeout))` (the
    /// negotiated timeout), `Ok(None)` (it answered; [`Learn::Liveness`]), or
    /// why it failed. Outcomes of an older attempt are ignored.
    pub fn answered(
        &mut self,
        now: Timestamp,
        server: usize,
        attempt: u32,
        result: Result<Option<Duration>, AskFailure>,
    ) {
        if self.attempts.get(server) != Some(&attempt)
            || !matches!(self.servers[server], Server::Asking { .. })
        {
            return;
        }
        match result {
            Ok(answer) => self.on_answer(now, server, answer),
            Err(failure) => self.on_failure(now, server, failure),
        }
        self.recheck.retain(|&s| s != server);
        self.decide(now);
    }

    /// Time passed: asks and resolutions past their deadline fail, due
    /// re-asks go out, and the grace or the connect timeout may end the
    /// gathering.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        for server in 0..self.servers.len() {
            match &self.servers[server] {
                Server::Resolving { until } if *until <= now => {
                    let reason = "resolving it took too long".to_owned();
                    self.notices.push(StartupNotice::LeftOut {
                        server,
                        why: LeftOut::Unresolvable(reason.clone()),
                    });
                    self.servers[server] = Server::Unresolvable(reason);
                }
                Server::Asking { until, .. } if *until <= now => {
                    self.on_failure(now, server, AskFailure::Silent);
                    self.recheck.retain(|&s| s != server);
                }
                _ => {}
            }
        }
        if matches!(self.phase, Phase::Connecting(_)) {
            if now >= self.give_up_at() && self.client_retry.is_some() {
                let reason = self
                    .last_client_failure
                    .take()
                    .unwrap_or_else(|| "no session in time".to_owned());
                self.refuse(StartupError::ClientFailed(reason));
                return;
            }
            if self.client_retry.is_some_and(|at| at <= now) {
                self.client_retry = None;
                if let Phase::Connecting(plan) = &self.phase {
                    self.commands.push(StartupCommand::Connect {
                        plan: plan.clone(),
                        deadline: self.give_up_at(),
                    });
                }
            }
        }
        self.ask_due(now);
        self.decide(now);
    }

    /// The client connected (first time or again): every listed server that
    /// has not answered is asked again at once, and
    /// [`confirmed_bound`](Self::confirmed_bound) waits for those asks.
    pub fn client_connected(&mut self, now: Timestamp) {
        let plan = match &self.phase {
            Phase::Connecting(plan) | Phase::Running(plan) => plan.clone(),
            _ => return,
        };
        self.client_retry = None;
        self.phase = Phase::Running(plan.clone());
        if self.config.learn != Learn::SessionTimeout {
            return;
        }
        for &server in &plan.servers {
            match &self.servers[server] {
                Server::Waiting { .. } => {}
                // An ask sent before this connection may fail for a reason
                // older than it (the server was still starting when it
                // arrived), and that failure says nothing of the server the
                // client may now be on: it is sent again, and the older
                // outcome is ignored (asks are numbered).
                Server::Asking { last, .. } => {
                    self.servers[server] = Server::Waiting {
                        at: now,
                        last: last.clone(),
                    };
                }
                _ => continue,
            }
            self.ask(now, server);
            if !self.recheck.contains(&server) {
                self.recheck.push(server);
            }
        }
    }

    /// The client could not connect (`reason`): it is tried again after a
    /// jittered pause that doubles from [`StartupConfig::backoff_min`] up to
    /// [`GATHERING_BACKOFF_MAX`] (the caller is waiting to start), until the
    /// connect timeout. A client whose servers all refuse at once fails
    /// fast, and a fixed pause would send a fleet's attempts in lock-step,
    /// ten a second each.
    pub fn client_failed(&mut self, now: Timestamp, reason: String) {
        if !matches!(self.phase, Phase::Connecting(_)) {
            return;
        }
        if now >= self.give_up_at() {
            self.refuse(StartupError::ClientFailed(reason));
            return;
        }
        let max = self.config.backoff_max.min(GATHERING_BACKOFF_MAX);
        let pause = self.client_backoff.next_delay(self.config.backoff_min, max);
        self.client_retry = Some((now + pause).min(self.give_up_at()));
        self.last_client_failure = Some(reason);
    }

    fn give_up_at(&self) -> Timestamp {
        self.started + self.config.connect_timeout
    }

    fn on_answer(&mut self, now: Timestamp, server: usize, answer: Option<Duration>) {
        self.servers[server] = Server::Answered(answer);
        self.backoffs[server].reset();
        self.first_answer.get_or_insert(now);
        let (Some(answer), Phase::Connecting(plan) | Phase::Running(plan)) =
            (answer, &mut self.phase)
        else {
            return;
        };
        // A listed server answered after the plan: it may lower the bound.
        if let Some(bound) = self.bound {
            if answer < bound && plan.servers.contains(&server) {
                self.bound = Some(answer);
                plan.bound = Some(answer);
                self.notices.push(StartupNotice::Lowered {
                    server,
                    from: bound,
                    to: answer,
                });
            }
        }
    }

    fn on_failure(&mut self, now: Timestamp, server: usize, failure: AskFailure) {
        let listed = match &self.phase {
            Phase::Gathering => true,
            Phase::Connecting(plan) | Phase::Running(plan) => plan.servers.contains(&server),
            Phase::Refused(_) => false,
        };
        if !listed {
            self.servers[server] = Server::Dropped(failure);
            return;
        }
        // While the caller waits to start, a server coming back is asked
        // within a second; after the start, the pauses grow to the maximum.
        let max = if self.phase == Phase::Gathering {
            self.config.backoff_max.min(GATHERING_BACKOFF_MAX)
        } else {
            self.config.backoff_max
        };
        let pause = self.backoffs[server].next_delay(self.config.backoff_min, max);
        self.servers[server] = Server::Waiting {
            at: now + pause,
            last: Some(failure),
        };
    }

    /// Sends every ask that is due. Once the plan is made, only
    /// [`Learn::SessionTimeout`] asks again (for the bound); liveness only
    /// mattered for the plan.
    fn ask_due(&mut self, now: Timestamp) {
        if !self.asks_again() {
            return;
        }
        for server in 0..self.servers.len() {
            if matches!(self.servers[server], Server::Waiting { at, .. } if at <= now) {
                self.ask(now, server);
            }
        }
    }

    /// Whether failed servers are still asked again.
    fn asks_again(&self) -> bool {
        match self.phase {
            Phase::Refused(_) => false,
            Phase::Gathering => true,
            Phase::Connecting(_) | Phase::Running(_) => self.config.learn == Learn::SessionTimeout,
        }
    }

    fn ask(&mut self, now: Timestamp, server: usize) {
        let last = match &self.servers[server] {
            Server::Waiting { last, .. } => last.clone(),
            _ => return,
        };
        self.attempts[server] += 1;
        let until = now + self.config.ask_timeout;
        self.servers[server] = Server::Asking { until, last };
        self.commands.push(StartupCommand::Ask {
            server,
            attempt: self.attempts[server],
            deadline: until,
        });
    }

    /// Ends the gathering when the answers suffice or time is up.
    fn decide(&mut self, now: Timestamp) {
        if self.phase != Phase::Gathering {
            return;
        }
        if self
            .servers
            .iter()
            .all(|s| matches!(s, Server::Unresolvable(_)))
        {
            let reasons = self
                .servers
                .iter()
                .enumerate()
                .filter_map(|(i, s)| match s {
                    Server::Unresolvable(why) => Some((i, why.clone())),
                    _ => None,
                })
                .collect();
            self.refuse(StartupError::Unresolvable(reasons));
            return;
        }
        let Some(first) = self.first_answer else {
            if now >= self.give_up_at() {
                let failures = self
                    .servers
                    .iter()
                    .enumerate()
                    .map(|(i, s)| (i, Self::left_out(s)))
                    .collect();
                self.refuse(StartupError::NoAnswer(failures));
            }
            return;
        };
        let settled = self.servers.iter().all(|s| match s {
            Server::Resolving { .. } => false,
            Server::Asking { last, .. } => last.is_some(),
            _ => true,
        });
        if !settled && now < first + self.config.grace {
            return;
        }
        self.plan(now);
    }

    fn left_out(server: &Server) -> Option<LeftOut> {
        match server {
            Server::Unresolvable(why) => Some(LeftOut::Unresolvable(why.clone())),
            Server::Waiting { last, .. } | Server::Asking { last, .. } => {
                last.clone().map(LeftOut::NoAnswer)
            }
            Server::Dropped(failure) => Some(LeftOut::NoAnswer(failure.clone())),
            Server::Resolving { .. } | Server::Answered(_) => None,
        }
    }

    fn plan(&mut self, _now: Timestamp) {
        let mut answered = Vec::new();
        let mut refused = Vec::new();
        let mut bound: Option<(usize, Duration)> = None;
        for server in 0..self.servers.len() {
            match self.servers[server].clone() {
                Server::Answered(answer) => {
                    answered.push(server);
                    if let Some(t) = answer {
                        if bound.is_none_or(|(_, b)| t < b) {
                            bound = Some((server, t));
                        }
                    }
                }
                Server::Waiting {
                    last: Some(AskFailure::Refused(_)),
                    ..
                }
                | Server::Asking {
                    last: Some(AskFailure::Refused(_)),
                    ..
                } => refused.push(server),
                Server::Unresolvable(_) => {}
                other => {
                    let failure = match other {
                        Server::Waiting { last, .. } | Server::Asking { last, .. } => {
                            last.unwrap_or(AskFailure::Silent)
                        }
                        _ => AskFailure::Silent,
                    };
                    self.notices.push(StartupNotice::LeftOut {
                        server,
                        why: LeftOut::NoAnswer(failure.clone()),
                    });
                    self.servers[server] = Server::Dropped(failure);
                }
            }
        }
        if self.config.learn == Learn::SessionTimeout {
            if let Some((server, negotiated)) = bound {
                if negotiated < self.config.min_timeout {
                    self.refuse(StartupError::TooShort {
                        server,
                        negotiated,
                        min: self.config.min_timeout,
                    });
                    return;
                }
            }
        }
        answered.extend(refused);
        let plan = Plan {
            servers: answered,
            bound: bound.map(|(_, t)| t),
        };
        self.bound = plan.bound;
        self.phase = Phase::Connecting(plan.clone());
        self.commands.push(StartupCommand::Connect {
            plan,
            deadline: self.give_up_at(),
        });
    }

    fn refuse(&mut self, error: StartupError) {
        self.phase = Phase::Refused(error);
        self.commands.clear();
        self.recheck.clear();
    }
}
