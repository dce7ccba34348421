//! The steps after a connection is up and before the core may use it:
//! proving a new session, putting the credentials on a new connection, and
//! replaying them after a reconnect. Which request to try, when to try it
//! again (a doubling pause, capped), when to give up and with which error,
//! and when a new connection state makes a replay moot. A sans-IO machine,
//! as [`Startup`](crate::startup::Startup) is: no clock, no I/O; the
//! adapter sends the requests, sleeps until [`SetUp::poll_timeout`], and
//! feeds back what happened with `now`.
//!
//! # The three goals
//!
//! - [`Goal::Prove`]: a session without credentials. The client's own
//!   report that it is up ([`SetUp::reported_up`]) is the proof, at no
//!   request; if none comes within [`SetUpConfig::report_wait`] (a report
//!   the adapter's listener missed), an `exists("/")`
//!   ([`SetUpRequest::Probe`]) proves it instead. The report still ends the
//!   set-up while the probe is out or pausing.
//! - [`Goal::Authenticate`]: a session with credentials. Their answer is
//!   the proof (the server reads nothing after a ConnectRequest before the
//!   session exists). [`SetUpEnd::Done`] says whether they are on the
//!   connection in use: not if it changed during the successful try (the
//!   replay after the reconnect puts them on).
//! - [`Goal::Replay`]: the credentials again after a reconnect, before the
//!   core hears `Connected`. Each try is bounded
//!   ([`SetUpConfig::try_timeout`]); a new connection state ends the replay
//!   ([`SetUpEnd::Superseded`]: that state decides what comes next). The
//!   whole replay is bounded too ([`SetUpConfig::within`], the session
//!   timeout): a connection that stays up but cannot take the credentials
//!   (every `addAuth` lost or failing) changes no state, and would
//!   otherwise be tried for as long as it lasts while the application's
//!   requests wait. At the bound it ends in
//!   [`SetUpError::ReplayTimedOut`], naming the last try's failure.
//!
//! # Giving up
//!
//! | answer | prove, authenticate | replay |
//! |---|---|---|
//! | connection loss | try again after a pause | try again after a pause |
//! | credentials rejected | [`SetUpError::Rejected`] (authenticate) | [`SetUpError::Rejected`] |
//! | any other error | [`SetUpError::Failed`] | try again after a pause |
//! | no answer in time | [`SetUpError::TimedOut`] at [`SetUpConfig::within`] | try again after a pause |
//! | none of these by [`SetUpConfig::within`] | [`SetUpError::TimedOut`] | [`SetUpError::ReplayTimedOut`] |
//!
//! The pause before retry `n` (from 0) is `retry_first × 2ⁿ`, capped at
//! `retry_max` (never zero: two tries never share an instant). With a
//! deadline, a pause that would end past it ends there instead, and the
//! set-up fails: a persistent failure ends at the connect timeout (a
//! replay: at the session timeout), never in a loop.
//!
//! ```
//! use std::time::Duration;
//! use zkelect_core::setup::*;
//! use zkelect_core::Timestamp;
//!
//! let ms = Timestamp::from_millis;
//! let mut s = SetUp::new(ms(0), SetUpConfig::authenticate(Duration::from_secs(1)));
//! let Some(SetUpCommand::Send { request, attempt, .. }) = s.poll_command() else { panic!() };
//! assert_eq!(request, SetUpRequest::Credentials);
//! s.answered(ms(3), attempt, SetUpOutcome::ConnectionLoss);
//! assert_eq!(s.poll_command(), None);
//! assert_eq!(s.poll_timeout(), Some(ms(53))); // the first pause: 50 ms
//! s.handle_timeout(ms(53));
//! let Some(SetUpCommand::Send { attempt, .. }) = s.poll_command() else { panic!() };
//! s.answered(ms(60), attempt, SetUpOutcome::Ok);
//! assert_eq!(s.end(), Some(&SetUpEnd::Done { credentials_on: true }));
//! ```

use std::fmt;
use std::time::Duration;

use crate::time::Timestamp;

/// The first pause before the set-up's request (the proof or the
/// credentials) is sent again after a lost connection.
pub const SET_UP_RETRY: Duration = Duration::from_millis(50);

/// The longest pause between two tries of the set-up's request.
pub const SET_UP_RETRY_MAX: Duration = Duration::from_millis(800);

/// The first pause before the credentials are replayed again after a
/// failed replay.
pub const REPLAY_RETRY: Duration = Duration::from_millis(200);

/// The longest pause between two replays: short of the shortest session
/// timeout a transport accepts (1.5 s for zookeeper-async), so a connection
/// whose replay fails for a while is still tried within one.
pub const REPLAY_RETRY_MAX: Duration = Duration::from_millis(1_200);

/// How long [`Goal::Prove`] waits for the client's report before it asks
/// the server: long enough that a handshake with a server under load is
/// heard, so the request is rarely sent, and short enough that a report
/// missed by the listener costs a start little.
pub const REPORT_WAIT: Duration = Duration::from_millis(200);

/// What the set-up is for. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Goal {
    /// Prove a new session without credentials.
    Prove,
    /// Put the credentials on a new session's connection.
    Authenticate,
    /// Put the credentials back on a connection after a reconnect.
    Replay,
}

/// The machine's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetUpConfig {
    /// What for.
    pub goal: Goal,
    /// The first pause before a try again.
    pub retry_first: Duration,
    /// The longest pause between two tries.
    pub retry_max: Duration,
    /// Give up ([`SetUpError::TimedOut`], a replay
    /// [`SetUpError::ReplayTimedOut`]) this long after the start: the
    /// connect timeout left, or for a replay the session timeout. Always
    /// set: a set-up that could go on for ever would hold the
    /// application's requests at the gate without a word.
    pub within: Duration,
    /// How long one try may take before it counts as failed and is tried
    /// again. `None`: until [`within`](Self::within).
    pub try_timeout: Option<Duration>,
    /// [`Goal::Prove`]: how long to wait for the client's report before
    /// the probe is sent.
    pub report_wait: Duration,
}

impl SetUpConfig {
    /// Proving a session without credentials within `within`.
    pub fn prove(within: Duration) -> Self {
        Self {
            goal: Goal::Prove,
            retry_first: SET_UP_RETRY,
            retry_max: SET_UP_RETRY_MAX,
            within,
            try_timeout: None,
            report_wait: REPORT_WAIT,
        }
    }

    /// Putting the credentials on a new session within `within`.
    pub fn authenticate(within: Duration) -> Self {
        Self {
            goal: Goal::Authenticate,
            ..Self::prove(within)
        }
    }

    /// Replaying the credentials after a reconnect, each try bounded by
    /// `try_timeout` (the request timeout), the whole replay by `within`.
    ///
    /// `within` should be the session timeout the core was told. Why that
    /// bound: while the replay runs, the client keeps the session alive
    /// (its pings need no credentials), so the session's ephemeral nodes —
    /// a leader's among them — stay and block every other candidate, while
    /// this one's core, still told `Disconnected`, has suspended itself
    /// and its requests wait. A replay that cannot finish within the
    /// session timeout thus ends no later than the session would expire
    /// had the client gone silent when the replay began; a shorter bound
    /// would give up on a connection a busy server only answers slowly
    /// (each try already has the request timeout, by default the same).
    pub fn replay(try_timeout: Duration, within: Duration) -> Self {
        Self {
            goal: Goal::Replay,
            retry_first: REPLAY_RETRY,
            retry_max: REPLAY_RETRY_MAX,
            within,
            try_timeout: Some(try_timeout),
            report_wait: Duration::ZERO,
        }
    }
}

/// Which request to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SetUpRequest {
    /// Every credential, in order (one `addAuth` each).
    Credentials,
    /// `exists("/")`: any answer of the session proves it.
    Probe,
}

/// What the adapter must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetUpCommand {
    /// Send `request`; answer with [`SetUp::answered`], quoting `attempt`.
    Send {
        /// What to send.
        request: SetUpRequest,
        /// Which try this is (from 1).
        attempt: u32,
        /// The machine stops waiting for the answer then (its
        /// [`poll_timeout`](SetUp::poll_timeout) says so too): the try's
        /// own bound, or the whole set-up's if that comes first.
        deadline: Timestamp,
    },
}

/// How a try ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetUpOutcome {
    /// The request succeeded.
    Ok,
    /// The connection was lost under it.
    ConnectionLoss,
    /// The server rejected the credentials.
    AuthFailed,
    /// Any other error: the client's message.
    Failed(String),
}

/// Why a set-up failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetUpError {
    /// The server rejected the credentials.
    #[error("the server rejected the credentials")]
    Rejected,
    /// A request failed otherwise than by a lost connection.
    #[error("{}: {reason}", match request {
        SetUpRequest::Credentials => "adding credentials failed",
        SetUpRequest::Probe => "the first request failed",
    })]
    Failed {
        /// Which request.
        request: SetUpRequest,
        /// The client's message.
        reason: String,
    },
    /// No try succeeded within [`SetUpConfig::within`].
    #[error("a server accepted the connection but no usable session came within {within:?}")]
    TimedOut {
        /// The bound.
        within: Duration,
    },
    /// [`Goal::Replay`]: the credentials were not back on the connection
    /// within [`SetUpConfig::within`] (the session timeout).
    #[error(
        "the credentials could not be put back on the connection within {within:?} after a reconnect (last try: {})",
        last
    )]
    ReplayTimedOut {
        /// The bound.
        within: Duration,
        /// Why the last try failed: a try still out at the bound failed by
        /// taking that long.
        last: RetryCause,
    },
}

/// How the set-up ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetUpEnd {
    /// The connection is usable.
    Done {
        /// The credentials are on the connection in use (open the
        /// requests' gate): false without credentials, and false when the
        /// connection changed during the try that put them on.
        credentials_on: bool,
    },
    /// A new connection state came first ([`Goal::Replay`]).
    Superseded,
    /// Given up.
    Failed(SetUpError),
}

/// Why a try is made again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetryCause {
    /// The connection was lost under the try.
    ConnectionLoss,
    /// Another error ([`Goal::Replay`] only).
    Failed(String),
    /// No answer within [`SetUpConfig::try_timeout`].
    TimedOut(Duration),
}

impl fmt::Display for RetryCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ConnectionLoss => f.write_str("the connection was lost"),
            Self::Failed(why) => f.write_str(why),
            Self::TimedOut(after) => write!(f, "no answer within {after:?}"),
        }
    }
}

/// What the adapter should log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetUpNotice {
    /// A try failed and is made again after `pause`.
    Retrying {
        /// The try that failed.
        attempt: u32,
        /// Why.
        cause: RetryCause,
        /// The pause before the next try.
        pause: Duration,
    },
}

/// Where the set-up is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// [`Goal::Prove`]: waiting for the client's report until then.
    Awaiting(Timestamp),
    /// A try is out since `since`; its answer is no longer awaited after
    /// `until`.
    Trying {
        attempt: u32,
        since: Timestamp,
        until: Option<Timestamp>,
    },
    /// Pausing before the next try.
    Pausing(Timestamp),
    Ended(SetUpEnd),
}

/// The set-up machine. See the module docs.
#[derive(Debug, Clone)]
pub struct SetUp {
    config: SetUpConfig,
    /// When the set-up gives up.
    deadline: Timestamp,
    phase: Phase,
    /// Tries made so far.
    attempts: u32,
    /// Pauses taken so far (the next one's doubling).
    retries: u32,
    /// Why the last try failed, for [`SetUpError::ReplayTimedOut`].
    last_cause: Option<RetryCause>,
    /// The connection changed during the try out.
    changed: bool,
    command: Option<SetUpCommand>,
    notices: Vec<SetUpNotice>,
}

impl SetUp {
    /// A set-up starting at `now`: the first try at once, or, for
    /// [`Goal::Prove`], a wait for the client's report.
    pub fn new(now: Timestamp, config: SetUpConfig) -> Self {
        let mut setup = Self {
            config,
            deadline: now + config.within,
            phase: Phase::Ended(SetUpEnd::Superseded),
            attempts: 0,
            retries: 0,
            last_cause: None,
            changed: false,
            command: None,
            notices: Vec::new(),
        };
        if config.goal == Goal::Prove {
            setup.phase = Phase::Awaiting(now + config.report_wait);
            setup.handle_timeout(now);
        } else {
            setup.start_try(now);
        }
        setup
    }

    /// The settings.
    pub fn config(&self) -> &SetUpConfig {
        &self.config
    }

    /// The request to send now, if any.
    pub fn poll_command(&mut self) -> Option<SetUpCommand> {
        self.command.take()
    }

    /// The next thing to log, in order.
    pub fn poll_notice(&mut self) -> Option<SetUpNotice> {
        if self.notices.is_empty() {
            None
        } else {
            Some(self.notices.remove(0))
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next due (at the
    /// latest the set-up's bound); `None` once ended.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        let own = match self.phase {
            Phase::Awaiting(at) | Phase::Pausing(at) => Some(at),
            Phase::Trying { until, .. } => until,
            Phase::Ended(_) => return None,
        };
        Some(own.map_or(self.deadline, |own| own.min(self.deadline)))
    }

    /// How the set-up ended, once it has.
    pub fn end(&self) -> Option<&SetUpEnd> {
        match &self.phase {
            Phase::Ended(end) => Some(end),
            _ => None,
        }
    }

    /// Time has passed: a pause or a wait is over, a try has taken too
    /// long, or the set-up's time is up.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        if matches!(self.phase, Phase::Ended(_)) {
            return;
        }
        if now >= self.deadline {
            self.command = None;
            let within = self.config.within;
            let error = match self.config.goal {
                Goal::Replay => SetUpError::ReplayTimedOut {
                    within,
                    last: match (&self.phase, self.last_cause.take()) {
                        (Phase::Trying { since, .. }, _) => {
                            RetryCause::TimedOut(now.saturating_since(*since))
                        }
                        // A pause follows a failed try: its cause is known.
                        (_, last) => last.unwrap_or(RetryCause::TimedOut(within)),
                    },
                },
                Goal::Prove | Goal::Authenticate => SetUpError::TimedOut { within },
            };
            self.phase = Phase::Ended(SetUpEnd::Failed(error));
            return;
        }
        match self.phase {
            Phase::Awaiting(at) | Phase::Pausing(at) if now >= at => self.start_try(now),
            Phase::Trying {
                attempt,
                until: Some(until),
                ..
            } if now >= until => {
                let after = self.config.try_timeout.unwrap_or_default();
                self.retry(now, attempt, RetryCause::TimedOut(after));
            }
            _ => {}
        }
    }

    /// The answer to try `attempt` (a stale one, or one after the end, is
    /// ignored).
    pub fn answered(&mut self, now: Timestamp, attempt: u32, outcome: SetUpOutcome) {
        let Phase::Trying { attempt: out, .. } = self.phase else {
            return;
        };
        if out != attempt {
            return;
        }
        let goal = self.config.goal;
        match outcome {
            SetUpOutcome::Ok => self.end_with(SetUpEnd::Done {
                credentials_on: goal != Goal::Prove && !self.changed,
            }),
            SetUpOutcome::ConnectionLoss => self.retry(now, attempt, RetryCause::ConnectionLoss),
            SetUpOutcome::AuthFailed if goal != Goal::Prove => {
                self.end_with(SetUpEnd::Failed(SetUpError::Rejected));
            }
            SetUpOutcome::Failed(reason) if goal == Goal::Replay => {
                self.retry(now, attempt, RetryCause::Failed(reason));
            }
            // A probe is not authentication: its `AuthFailed` is an error
            // like any other (named as the client names it).
            SetUpOutcome::AuthFailed => self.end_with(SetUpEnd::Failed(SetUpError::Failed {
                request: SetUpRequest::Probe,
                reason: "AuthFailed".to_owned(),
            })),
            SetUpOutcome::Failed(reason) => {
                let request = self.request();
                self.end_with(SetUpEnd::Failed(SetUpError::Failed { request, reason }));
            }
        }
    }

    /// The client reported its session up: the proof of [`Goal::Prove`]
    /// (ignored for the other goals, whose proof is the credentials'
    /// answer).
    pub fn reported_up(&mut self, _now: Timestamp) {
        if self.config.goal == Goal::Prove && self.end().is_none() {
            self.end_with(SetUpEnd::Done {
                credentials_on: false,
            });
        }
    }

    /// The connection changed (a new state was recorded) since the try out
    /// was sent, or during a pause. A replay ends: the new state decides.
    /// Credentials put on by the try out are then not on the connection in
    /// use.
    pub fn connection_changed(&mut self, _now: Timestamp) {
        if self.end().is_some() {
            return;
        }
        match self.config.goal {
            Goal::Replay => self.end_with(SetUpEnd::Superseded),
            Goal::Authenticate => self.changed = true,
            Goal::Prove => {}
        }
    }

    fn request(&self) -> SetUpRequest {
        match self.config.goal {
            Goal::Prove => SetUpRequest::Probe,
            Goal::Authenticate | Goal::Replay => SetUpRequest::Credentials,
        }
    }

    fn end_with(&mut self, end: SetUpEnd) {
        self.command = None;
        self.phase = Phase::Ended(end);
    }

    fn start_try(&mut self, now: Timestamp) {
        self.attempts += 1;
        self.changed = false;
        let until = self.config.try_timeout.map(|t| now + t);
        let deadline = until.map_or(self.deadline, |until| until.min(self.deadline));
        self.phase = Phase::Trying {
            attempt: self.attempts,
            since: now,
            until,
        };
        self.command = Some(SetUpCommand::Send {
            request: self.request(),
            attempt: self.attempts,
            deadline,
        });
    }

    /// The pause before retry `retries` (from 0): doubled at each, capped,
    /// never zero.
    fn pause(&self) -> Duration {
        let first = self.config.retry_first;
        first
            .saturating_mul(1u32 << self.retries.min(16))
            .min(self.config.retry_max)
            .max(Duration::from_millis(1))
    }

    fn retry(&mut self, now: Timestamp, attempt: u32, cause: RetryCause) {
        let pause = self.pause();
        self.retries = self.retries.saturating_add(1);
        self.last_cause = Some(cause.clone());
        self.notices.push(SetUpNotice::Retrying {
            attempt,
            cause,
            pause,
        });
        self.command = None;
        self.phase = Phase::Pausing(now + pause);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Timestamp {
        Timestamp::from_millis(n)
    }

    /// The try to send now, with its attempt number.
    fn sent(s: &mut SetUp) -> (SetUpRequest, u32) {
        match s.poll_command() {
            Some(SetUpCommand::Send {
                request, attempt, ..
            }) => (request, attempt),
            None => panic!("no try to send"),
        }
    }

    #[test]
    fn rejected_credentials_end_the_set_up_at_once_with_their_error() {
        for config in [
            SetUpConfig::authenticate(Duration::from_secs(10)),
            SetUpConfig::replay(Duration::from_secs(1), Duration::from_secs(60)),
        ] {
            let mut s = SetUp::new(ms(0), config);
            let (request, attempt) = sent(&mut s);
            assert_eq!(request, SetUpRequest::Credentials);
            s.answered(ms(2), attempt, SetUpOutcome::AuthFailed);
            assert_eq!(s.end(), Some(&SetUpEnd::Failed(SetUpError::Rejected)));
            assert_eq!(s.poll_command(), None);
            assert_eq!(s.poll_timeout(), None);
            assert_eq!(s.poll_notice(), None, "no retry was planned");
        }
    }

    #[test]
    fn connection_loss_backs_off_doubling_to_the_cap() {
        let mut s = SetUp::new(ms(0), SetUpConfig::authenticate(Duration::from_secs(60)));
        let mut now = ms(0);
        let mut pauses = Vec::new();
        for _ in 0..7 {
            let (_, attempt) = sent(&mut s);
            s.answered(now, attempt, SetUpOutcome::ConnectionLoss);
            let Some(SetUpNotice::Retrying { pause, cause, .. }) = s.poll_notice() else {
                panic!("no retry")
            };
            assert_eq!(cause, RetryCause::ConnectionLoss);
            assert_eq!(s.poll_timeout(), Some(now + pause));
            pauses.push(pause.as_millis());
            now = now + pause;
            s.handle_timeout(now);
        }
        assert_eq!(pauses, [50, 100, 200, 400, 800, 800, 800]);
        let (_, attempt) = sent(&mut s);
        s.answered(now, attempt, SetUpOutcome::Ok);
        assert_eq!(
            s.end(),
            Some(&SetUpEnd::Done {
                credentials_on: true
            })
        );
    }

    #[test]
    fn a_replay_backs_off_from_its_own_first_pause_to_its_cap() {
        let mut s = SetUp::new(
            ms(0),
            SetUpConfig::replay(Duration::from_secs(1), Duration::from_secs(60)),
        );
        let mut now = ms(0);
        let mut pauses = Vec::new();
        for outcome in [
            SetUpOutcome::ConnectionLoss,
            SetUpOutcome::Failed("operation timeout".into()),
            SetUpOutcome::ConnectionLoss,
            SetUpOutcome::ConnectionLoss,
        ] {
            let (_, attempt) = sent(&mut s);
            s.answered(now, attempt, outcome);
            let Some(SetUpNotice::Retrying { pause, .. }) = s.poll_notice() else {
                panic!("no retry")
            };
            pauses.push(pause.as_millis());
            now = now + pause;
            s.handle_timeout(now);
        }
        // A try that never answers counts as failed at the try timeout.
        let (_, attempt) = sent(&mut s);
        assert_eq!(s.poll_timeout(), Some(now + Duration::from_secs(1)));
        now = now + Duration::from_secs(1);
        s.handle_timeout(now);
        let Some(SetUpNotice::Retrying { pause, cause, .. }) = s.poll_notice() else {
            panic!("no retry")
        };
        assert_eq!(cause, RetryCause::TimedOut(Duration::from_secs(1)));
        pauses.push(pause.as_millis());
        assert_eq!(pauses, [200, 400, 800, 1_200, 1_200]);
        // Its late answer is stale.
        s.answered(now, attempt, SetUpOutcome::Ok);
        assert_eq!(s.end(), None);
    }

    #[test]
    fn a_persistent_failure_ends_at_the_connect_timeout_never_in_a_loop() {
        let within = Duration::from_millis(1_000);
        let mut s = SetUp::new(ms(0), SetUpConfig::authenticate(within));
        let mut now = ms(0);
        let mut tries = 0;
        while s.end().is_none() {
            if let Some(SetUpCommand::Send {
                attempt, deadline, ..
            }) = s.poll_command()
            {
                assert!(now < ms(1_000), "a try at {now:?}, past the deadline");
                assert_eq!(deadline, ms(1_000));
                tries += 1;
                s.answered(now, attempt, SetUpOutcome::ConnectionLoss);
            }
            now = s.poll_timeout().expect("a deadline while not ended");
            s.handle_timeout(now);
        }
        // Tries at 0, 50, 150, 350, 750; the next would be at 1,550.
        assert_eq!(tries, 5);
        assert_eq!(now, ms(1_000));
        let Some(SetUpEnd::Failed(e)) = s.end() else {
            panic!("{:?}", s.end())
        };
        assert_eq!(*e, SetUpError::TimedOut { within });
        assert!(e.to_string().contains("no usable session came within 1s"));
    }

    #[test]
    fn a_persistent_connection_loss_ends_a_replay_at_its_deadline_not_before_never_after() {
        let within = Duration::from_millis(4_000);
        let mut s = SetUp::new(ms(0), SetUpConfig::replay(Duration::from_secs(1), within));
        let mut now = ms(0);
        let mut tries = Vec::new();
        while s.end().is_none() {
            if let Some(SetUpCommand::Send {
                attempt, deadline, ..
            }) = s.poll_command()
            {
                assert!(now < ms(4_000), "a try at {now:?}, past the deadline");
                assert!(deadline <= ms(4_000));
                tries.push(now.as_millis());
                s.answered(now, attempt, SetUpOutcome::ConnectionLoss);
            }
            // Not before: every wake-up short of the deadline leaves it going.
            assert!(s.end().is_none() || now == ms(4_000), "ended at {now:?}");
            now = s.poll_timeout().expect("a deadline while not ended");
            s.handle_timeout(now);
        }
        // Pauses 200, 400, 800, 1,200; the next try would be at 3,800 + 1,200.
        assert_eq!(tries, [0, 200, 600, 1_400, 2_600, 3_800]);
        assert_eq!(now, ms(4_000), "ends at the deadline");
        let Some(SetUpEnd::Failed(e)) = s.end() else {
            panic!("{:?}", s.end())
        };
        assert_eq!(
            *e,
            SetUpError::ReplayTimedOut {
                within,
                last: RetryCause::ConnectionLoss
            }
        );
        assert_eq!(
            e.to_string(),
            "the credentials could not be put back on the connection within 4s after a \
             reconnect (last try: the connection was lost)"
        );
        assert_eq!(s.poll_timeout(), None, "never after");
        assert_eq!(s.poll_command(), None);
        // A try still out at the deadline ends there too, named as the
        // last try: no answer for as long as it was out.
        let mut s = SetUp::new(ms(0), SetUpConfig::replay(within, within));
        let (_, attempt) = sent(&mut s);
        s.answered(ms(10), attempt, SetUpOutcome::ConnectionLoss);
        s.handle_timeout(ms(210));
        let (_, attempt) = sent(&mut s);
        assert_eq!(s.poll_timeout(), Some(ms(4_000)));
        s.handle_timeout(ms(3_999));
        assert_eq!(s.end(), None);
        s.handle_timeout(ms(4_000));
        let Some(SetUpEnd::Failed(e)) = s.end() else {
            panic!("{:?}", s.end())
        };
        assert_eq!(
            *e,
            SetUpError::ReplayTimedOut {
                within,
                last: RetryCause::TimedOut(Duration::from_millis(3_790))
            }
        );
        assert!(e
            .to_string()
            .ends_with("(last try: no answer within 3.79s)"));
        s.answered(ms(4_001), attempt, SetUpOutcome::Ok);
        assert!(matches!(s.end(), Some(SetUpEnd::Failed(_))), "too late");
    }

    #[test]
    fn a_replay_that_succeeds_just_before_its_deadline_is_kept() {
        let within = Duration::from_millis(1_000);
        let mut s = SetUp::new(ms(0), SetUpConfig::replay(Duration::from_secs(5), within));
        let (_, attempt) = sent(&mut s);
        s.answered(
            ms(10),
            attempt,
            SetUpOutcome::Failed("operation timeout".into()),
        );
        s.handle_timeout(ms(210));
        let (_, attempt) = sent(&mut s);
        assert_eq!(
            s.poll_timeout(),
            Some(ms(1_000)),
            "the try is cut at the deadline"
        );
        s.answered(ms(999), attempt, SetUpOutcome::Ok);
        assert_eq!(
            s.end(),
            Some(&SetUpEnd::Done {
                credentials_on: true
            })
        );
        s.handle_timeout(ms(1_000));
        assert!(matches!(s.end(), Some(SetUpEnd::Done { .. })), "kept");
        assert_eq!(s.poll_timeout(), None);
    }

    #[test]
    fn any_other_error_fails_a_set_up_at_once_naming_its_request() {
        let mut s = SetUp::new(ms(0), SetUpConfig::authenticate(Duration::from_secs(5)));
        let (_, attempt) = sent(&mut s);
        s.answered(ms(1), attempt, SetUpOutcome::Failed("bad arguments".into()));
        let Some(SetUpEnd::Failed(e)) = s.end() else {
            panic!()
        };
        assert_eq!(e.to_string(), "adding credentials failed: bad arguments");
        let mut s = SetUp::new(ms(0), SetUpConfig::prove(Duration::from_secs(5)));
        s.handle_timeout(ms(200));
        let (request, attempt) = sent(&mut s);
        assert_eq!(request, SetUpRequest::Probe);
        s.answered(ms(201), attempt, SetUpOutcome::Failed("no node".into()));
        let Some(SetUpEnd::Failed(e)) = s.end() else {
            panic!()
        };
        assert_eq!(e.to_string(), "the first request failed: no node");
    }

    #[test]
    fn a_new_connection_state_supersedes_a_replay_in_a_try_or_a_pause() {
        let mut s = SetUp::new(
            ms(0),
            SetUpConfig::replay(Duration::from_secs(1), Duration::from_secs(60)),
        );
        let (_, attempt) = sent(&mut s);
        s.connection_changed(ms(5));
        s.answered(ms(6), attempt, SetUpOutcome::Ok);
        assert_eq!(s.end(), Some(&SetUpEnd::Superseded));
        let mut s = SetUp::new(
            ms(0),
            SetUpConfig::replay(Duration::from_secs(1), Duration::from_secs(60)),
        );
        let (_, attempt) = sent(&mut s);
        s.answered(ms(6), attempt, SetUpOutcome::ConnectionLoss);
        s.connection_changed(ms(100));
        assert_eq!(s.end(), Some(&SetUpEnd::Superseded));
        assert_eq!(s.poll_timeout(), None);
        s.handle_timeout(ms(206));
        assert_eq!(s.poll_command(), None, "no try after the end");
    }

    #[test]
    fn credentials_put_on_a_connection_that_changed_leave_the_gate_shut() {
        let mut s = SetUp::new(ms(0), SetUpConfig::authenticate(Duration::from_secs(5)));
        let (_, attempt) = sent(&mut s);
        s.connection_changed(ms(1));
        s.answered(ms(2), attempt, SetUpOutcome::Ok);
        assert_eq!(
            s.end(),
            Some(&SetUpEnd::Done {
                credentials_on: false
            })
        );
        // A change during an earlier, failed try does not count.
        let mut s = SetUp::new(ms(0), SetUpConfig::authenticate(Duration::from_secs(5)));
        let (_, attempt) = sent(&mut s);
        s.connection_changed(ms(1));
        s.answered(ms(2), attempt, SetUpOutcome::ConnectionLoss);
        s.handle_timeout(ms(52));
        let (_, attempt) = sent(&mut s);
        s.answered(ms(53), attempt, SetUpOutcome::Ok);
        assert_eq!(
            s.end(),
            Some(&SetUpEnd::Done {
                credentials_on: true
            })
        );
    }

    #[test]
    fn a_session_the_client_reports_up_needs_no_probe() {
        let mut s = SetUp::new(ms(0), SetUpConfig::prove(Duration::from_secs(5)));
        assert_eq!(s.poll_command(), None, "the report is awaited first");
        assert_eq!(s.poll_timeout(), Some(ms(200)));
        s.reported_up(ms(150));
        assert_eq!(
            s.end(),
            Some(&SetUpEnd::Done {
                credentials_on: false
            })
        );
        assert_eq!(s.poll_command(), None);
        // Missed: the probe at 200 ms, retried through a lost connection,
        // and the report still wins while it pauses.
        let mut s = SetUp::new(ms(0), SetUpConfig::prove(Duration::from_secs(5)));
        s.handle_timeout(ms(200));
        let (request, attempt) = sent(&mut s);
        assert_eq!(request, SetUpRequest::Probe);
        s.answered(ms(210), attempt, SetUpOutcome::ConnectionLoss);
        assert_eq!(s.poll_timeout(), Some(ms(260)));
        s.reported_up(ms(220));
        assert!(matches!(s.end(), Some(SetUpEnd::Done { .. })));
        // Credentials are their own proof: a report does not end that set-up.
        let mut s = SetUp::new(ms(0), SetUpConfig::authenticate(Duration::from_secs(5)));
        s.reported_up(ms(1));
        assert_eq!(s.end(), None);
    }

    #[test]
    fn a_set_up_shorter_than_the_report_wait_times_out_without_a_probe() {
        let mut s = SetUp::new(ms(0), SetUpConfig::prove(Duration::from_millis(100)));
        assert_eq!(s.poll_timeout(), Some(ms(100)));
        s.handle_timeout(ms(100));
        assert_eq!(s.poll_command(), None);
        assert!(matches!(
            s.end(),
            Some(SetUpEnd::Failed(SetUpError::TimedOut { .. }))
        ));
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// What happens to one try: when its answer comes (after `delay`
        /// ms; `None`: never), what it is, and whether the connection
        /// changed or the client reported up meanwhile.
        #[derive(Debug, Clone)]
        struct Step {
            delay: Option<u64>,
            outcome: SetUpOutcome,
            changed: bool,
            reported: bool,
        }

        fn step() -> impl Strategy<Value = Step> {
            let outcome = prop_oneof![
                1 => Just(SetUpOutcome::Ok),
                4 => Just(SetUpOutcome::ConnectionLoss),
                1 => Just(SetUpOutcome::AuthFailed),
                1 => Just(SetUpOutcome::Failed("boom".into())),
            ];
            (
                proptest::option::weighted(0.9, 0u64..1_500),
                outcome,
                proptest::bool::weighted(0.1),
                proptest::bool::weighted(0.1),
            )
                .prop_map(|(delay, outcome, changed, reported)| Step {
                    delay,
                    outcome,
                    changed,
                    reported,
                })
        }

        /// A configuration and the bound it was given (asserted against as
        /// given, not as the configuration says: a goal that dropped its
        /// bound would go unnoticed otherwise).
        fn config() -> impl Strategy<Value = (SetUpConfig, Duration)> {
            (0..3u8, 1u64..5_000, 1u64..2_000).prop_map(|(goal, within, try_ms)| {
                let within = Duration::from_millis(within);
                let config = match goal {
                    0 => SetUpConfig::prove(within),
                    1 => SetUpConfig::authenticate(within),
                    _ => SetUpConfig::replay(Duration::from_millis(try_ms), within),
                };
                (config, within)
            })
        }

        proptest! {
            /// Over any answers at any times: no two tries at one instant,
            /// no try at or past the set-up's deadline, every pause at
            /// least the one before (up to the cap) and within the
            /// bounds, and the machine always ends, at or before its
            /// deadline (a replay too: else at its first terminal answer
            /// or connection change; here one once the steps run out),
            /// and by giving up only at the deadline itself.
            #[test]
            fn tries_are_spaced_and_the_set_up_always_ends(
                (config, within) in config(),
                start in 0u64..1_000_000,
                steps in proptest::collection::vec(step(), 0..40),
            ) {
                let mut s = SetUp::new(ms(start), config);
                let d = ms(start) + within;
                let mut now = ms(start);
                let mut steps = steps.into_iter();
                let mut last_try: Option<Timestamp> = None;
                let mut last_pause: Option<Duration> = None;
                let mut rounds = 0;
                while s.end().is_none() {
                    rounds += 1;
                    prop_assert!(rounds < 10_000, "no end after {rounds} rounds");
                    if let Some(SetUpCommand::Send { attempt, deadline: try_by, .. }) =
                        s.poll_command()
                    {
                        prop_assert!(last_try.is_none_or(|t| t < now), "two tries at {now:?}");
                        last_try = Some(now);
                        prop_assert!(now < d, "a try at {now:?}, deadline {d:?}");
                        prop_assert!(try_by <= d);
                        let step = match steps.next() {
                            Some(step) => step,
                            None if config.goal == Goal::Replay => {
                                s.connection_changed(now);
                                break;
                            }
                            None => Step {
                                delay: Some(10),
                                outcome: SetUpOutcome::ConnectionLoss,
                                changed: false,
                                reported: false,
                            },
                        };
                        let timeout = s.poll_timeout();
                        let answer_at = step.delay.map(|d| now + Duration::from_millis(d));
                        let late = match (timeout, answer_at) {
                            (Some(t), a) => a.is_none_or(|a| t <= a),
                            (None, _) => false,
                        };
                        if let (true, Some(t)) = (late, timeout) {
                            now = t;
                            s.handle_timeout(now);
                            // Late: ignored, whatever it says.
                            let before = s.end().cloned();
                            s.answered(now, attempt, step.outcome);
                            prop_assert_eq!(s.end().cloned(), before);
                        } else if let Some(a) = answer_at {
                            now = a;
                            if step.changed {
                                s.connection_changed(now);
                            }
                            if step.reported {
                                s.reported_up(now);
                            }
                            s.answered(now, attempt, step.outcome);
                        } else {
                            prop_assert!(false, "a try never answered, with no deadline");
                        }
                    } else {
                        let Some(t) = s.poll_timeout() else {
                            prop_assert!(false, "neither a try nor a deadline: {s:?}");
                            unreachable!()
                        };
                        prop_assert!(t >= now);
                        now = t;
                        s.handle_timeout(now);
                    }
                    while let Some(SetUpNotice::Retrying { pause, .. }) = s.poll_notice() {
                        prop_assert!(pause <= config.retry_max.max(Duration::from_millis(1)));
                        prop_assert!(pause >= config.retry_first.min(config.retry_max));
                        prop_assert!(
                            last_pause.is_none_or(|p| p <= pause),
                            "{last_pause:?} then {pause:?}"
                        );
                        last_pause = Some(pause);
                    }
                }
                prop_assert!(now <= d, "ended at {now:?}, past {d:?}");
                if let Some(SetUpEnd::Failed(
                    SetUpError::TimedOut { .. } | SetUpError::ReplayTimedOut { .. },
                )) = s.end()
                {
                    prop_assert_eq!(now, d, "gave up before the deadline");
                }
                prop_assert!(s.end().is_some());
                prop_assert_eq!(s.poll_command(), None);
                prop_assert_eq!(s.poll_timeout(), None);
            }
        }
    }
}
