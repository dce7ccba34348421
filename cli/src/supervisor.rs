//! When to start, stop and kill the command `zkelect run` and `zkelect lock`
//! supervise: a pure machine, no processes and no clock of its own (the pump
//! in [`crate::supervise`] passes `now` and carries out its [`Action`]s).
//!
//! The rules:
//!
//! - **Start** only while holding (`Role::Leader`) with a lease that has more
//!   than the grace left: a command started closer to the lease's end could
//!   not be given its grace.
//! - **SIGTERM** when a stopping signal comes; when the role is anything but
//!   that `Leader` (suspended, demoted, closed); or when the lease has no more
//!   than the grace left, unrenewed — contact is in doubt, and a command sent
//!   SIGTERM now still has its whole grace before the lease ends, where the
//!   watchdog ([`crate::lease`]) kills it. In healthy operation the lease is
//!   renewed long before that ([`grace_budget`] is what makes sure).
//! - **SIGKILL** at the grace's end after the SIGTERM, or at the lease's end
//!   if that comes first (the last lease seen: the watchdog's deadline); at
//!   once on a second stopping signal.
//! - **After the command ends**: `run` waits to lead again (and starts it
//!   again), unless a signal stopped it or the election is over; `lock` is
//!   done (its command runs once).
//!
//! Time is `tokio::time::Instant`, the clock of the election's lease.

use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::time::Instant;
use zkelect_core::{ConnectionPolicy, FencingToken, Role};

/// What the command runs for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `zkelect run`: whenever leading, again on every new term.
    Lead,
    /// `zkelect lock`: once, while holding with this token.
    Hold(FencingToken),
}

/// What the pump is to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Start the command with this token, under a lease of `lease_left`.
    Start {
        token: FencingToken,
        lease_left: Duration,
    },
    /// Tell the watchdog the lease now ends at this instant.
    Renew(Instant),
    /// SIGTERM to the command; SIGKILL follows in `grace` unless it exits.
    Terminate { grace: Duration },
    /// SIGKILL to the command, now.
    Kill,
    /// Supervision is over.
    Done(Outcome),
}

/// How supervision ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A stopping signal came; the command, if it ran, was stopped.
    Signalled(Signal),
    /// The command exited by itself while holding: its status.
    Exited(ExitStatus),
    /// `run`: the election is over (`Closed` or `Failed`); the command, if it
    /// ran, was stopped.
    ElectionOver(Role),
    /// `lock`: the hold was lost, or in doubt, before or while the command
    /// ran; it was stopped.
    Lost,
}

/// Why a running command is being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    Signal,
    /// The role is no longer the leader's of the command's term.
    Role,
    /// The lease has no more than the grace left, unrenewed.
    Doubt,
}

/// The command's life, as far as this machine has acted on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Child {
    /// Not running (not yet, or no longer).
    Idle,
    /// Asked to start; running from the pump's point of view.
    Running { token: FencingToken },
    /// Sent SIGTERM; SIGKILL is due at `kill_at`.
    Terminated { kill_at: Instant, why: Why },
    /// Sent SIGKILL; waiting for it to be reaped.
    Killed { why: Why },
}

/// The supervision machine. Feed it with [`standing`](Self::standing),
/// [`signal`](Self::signal), [`exited`](Self::exited) and
/// [`handle_timeout`](Self::handle_timeout); drain
/// [`poll_action`](Self::poll_action) after each, and wake at
/// [`poll_timeout`](Self::poll_timeout).
#[derive(Debug)]
pub(crate) struct Supervisor {
    mode: Mode,
    grace: Duration,
    /// Whether a lease watchdog stands between the pump and the command: it
    /// kills the command itself when the lease runs out, so a command that
    /// ends while the lease has lapsed was stopped, it did not finish.
    watchdog: bool,
    role: Role,
    lease: Option<Instant>,
    /// The latest lease deadline seen since the command started: the
    /// watchdog's deadline, which a `None` (contact in doubt) does not move.
    last_deadline: Option<Instant>,
    child: Child,
    /// Whether `lock`'s command has run (it runs once).
    ran: bool,
    /// The first stopping signal, once one came.
    signal: Option<Signal>,
    actions: std::collections::VecDeque<Action>,
    done: bool,
}

impl Supervisor {
    pub(crate) fn new(mode: Mode, grace: Duration, watchdog: bool) -> Self {
        Self {
            mode,
            grace,
            watchdog,
            role: Role::Idle,
            lease: None,
            last_deadline: None,
            child: Child::Idle,
            ran: false,
            signal: None,
            actions: std::collections::VecDeque::new(),
            done: false,
        }
    }

    /// The role and the lease now (the election's two views, read together).
    pub(crate) fn standing(&mut self, now: Instant, role: Role, lease: Option<Instant>) {
        let renewed = lease.filter(|&d| lease != self.lease && self.last_deadline < Some(d));
        self.role = role;
        self.lease = lease;
        if let (Some(d), Child::Running { .. } | Child::Terminated { .. }) = (renewed, self.child) {
            self.last_deadline = Some(d);
            self.actions.push_back(Action::Renew(d));
        }
        self.advance(now);
    }

    /// A stopping signal came.
    pub(crate) fn signal(&mut self, now: Instant, signal: Signal) {
        match (self.signal, self.child) {
            // Asked twice: no more grace.
            (Some(_), Child::Terminated { why, .. }) => {
                self.actions.push_back(Action::Kill);
                self.child = Child::Killed { why };
            }
            (Some(_), _) => {}
            (None, _) => self.signal = Some(signal),
        }
        self.advance(now);
    }

    /// The command exited (or the watchdog did, with its status).
    pub(crate) fn exited(&mut self, now: Instant, status: ExitStatus) {
        let why = match self.child {
            Child::Idle => return,
            Child::Running { token } => {
                // The watchdog stops the command when the lease runs out
                // unrenewed: holding lapsed, the command did not finish.
                let lapsed =
                    self.lease.is_none_or(|d| d <= now) || self.role != Role::Leader(token);
                if !(self.watchdog && lapsed) {
                    self.finish(Outcome::Exited(status));
                    return;
                }
                Why::Doubt
            }
            Child::Terminated { why, .. } | Child::Killed { why } => why,
        };
        self.child = Child::Idle;
        self.last_deadline = None;
        match (why, self.signal, self.mode) {
            (_, Some(signal), _) => self.finish(Outcome::Signalled(signal)),
            (_, None, Mode::Hold(_)) => self.finish(Outcome::Lost),
            (Why::Signal, None, Mode::Lead) => {}
            (Why::Role | Why::Doubt, None, Mode::Lead) => {}
        }
        self.advance(now);
    }

    /// Acts on what the clock alone changes: the lease's doubt, a SIGKILL due.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
    }

    /// The next thing to do, if any.
    pub(crate) fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next, if ever.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        if self.done {
            return None;
        }
        match self.child {
            Child::Running { .. } => self.lease.map(|d| d.checked_sub(self.grace).unwrap_or(d)),
            Child::Terminated { kill_at, .. } => Some(kill_at),
            Child::Idle | Child::Killed { .. } => None,
        }
    }

    /// How long the lease has left beyond the grace; `None` if no more than
    /// the grace (or no lease).
    fn lease_left(&self, now: Instant) -> Option<Duration> {
        let left = self.lease?.checked_duration_since(now)?;
        (left > self.grace).then_some(left)
    }

    fn finish(&mut self, outcome: Outcome) {
        if !self.done {
            self.done = true;
            self.actions.push_back(Action::Done(outcome));
        }
    }

    fn terminate(&mut self, now: Instant, why: Why) {
        let mut kill_at = now + self.grace;
        if let Some(d) = self.last_deadline {
            kill_at = kill_at.min(d.max(now));
        }
        self.actions.push_back(Action::Terminate {
            grace: kill_at - now,
        });
        self.child = Child::Terminated { kill_at, why };
    }

    fn advance(&mut self, now: Instant) {
        if self.done {
            return;
        }
        match self.child {
            Child::Idle => {
                if let Some(signal) = self.signal {
                    return self.finish(Outcome::Signalled(signal));
                }
                let token = match (self.mode, self.role) {
                    (Mode::Lead, Role::Closed | Role::Failed) => {
                        return self.finish(Outcome::ElectionOver(self.role))
                    }
                    (Mode::Lead, Role::Leader(token)) => token,
                    (Mode::Lead, _) => return,
                    (Mode::Hold(_), _) if self.ran => return self.finish(Outcome::Lost),
                    (Mode::Hold(held), Role::Leader(token)) if token == held => token,
                    (Mode::Hold(_), _) => return self.finish(Outcome::Lost),
                };
                // Leading, but too close to the lease's end to give the
                // command its grace: wait for a renewal (or a demotion).
                if let Some(lease_left) = self.lease_left(now) {
                    self.ran = true;
                    self.last_deadline = self.lease;
                    self.child = Child::Running { token };
                    self.actions.push_back(Action::Start { token, lease_left });
                }
            }
            Child::Running { token } => {
                if self.signal.is_some() {
                    self.terminate(now, Why::Signal);
                } else if self.role != Role::Leader(token) {
                    self.terminate(now, Why::Role);
                } else if self.lease_left(now).is_none() {
                    self.terminate(now, Why::Doubt);
                }
            }
            Child::Terminated { kill_at, why } => {
                if now >= kill_at {
                    self.actions.push_back(Action::Kill);
                    self.child = Child::Killed { why };
                }
            }
            Child::Killed { .. } => {}
        }
    }
}

/// How much of the lease is left when it is renewed at the latest in healthy
/// operation, as a fraction of the session timeout: the lease is two thirds
/// of the timeout after the newest answered request under the `Standard`
/// policy and nine tenths under `SessionAware` (the core's `lease.rs`); the
/// session is probed every three tenths (the driver's `probe_every`); and an
/// answer up to a tenth late is healthy too. A grace up to what is left can
/// be given in full before the lease ends, when contact is in doubt, without
/// ever stopping the command while the server answers.
const LEASE_STANDARD: (u32, u32) = (2, 3);
const LEASE_SESSION_AWARE: (u32, u32) = (9, 10);
const RENEWED_EVERY: (u32, u32) = (3, 10);
const LATE_BY: (u32, u32) = (1, 10);

/// The lease's length for a session timeout under a policy.
pub(crate) fn lease_length(session_timeout: Duration, policy: ConnectionPolicy) -> Duration {
    let (n, d) = match policy {
        ConnectionPolicy::Standard => LEASE_STANDARD,
        ConnectionPolicy::SessionAware => LEASE_SESSION_AWARE,
    };
    session_timeout * n / d
}

/// The longest grace that fits in the lease: see [`LEASE_STANDARD`]'s notes.
pub(crate) fn grace_budget(session_timeout: Duration, policy: ConnectionPolicy) -> Duration {
    let at = |(n, d): (u32, u32)| session_timeout * n / d;
    let budget =
        lease_length(session_timeout, policy).saturating_sub(at(RENEWED_EVERY) + at(LATE_BY));
    // Whole milliseconds, down: what `--grace-ms` can say.
    Duration::from_millis(budget.as_millis() as u64)
}

/// The grace when none is asked for: the most that fits, up to this.
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// Where a session timeout comes from, for the messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimeoutSource {
    /// `--session-timeout`, before connecting.
    Requested,
    /// The server's, once connected.
    Negotiated,
}

/// [`grace_for`] once connected: checked against the session timeout the
/// server negotiated, or against the one `requested` if the transport
/// reported none in time.
pub(crate) fn grace_once_connected(
    asked: Option<Duration>,
    negotiated: Option<Duration>,
    requested: Duration,
    policy: ConnectionPolicy,
) -> Result<Duration, String> {
    match negotiated {
        Some(timeout) => grace_for(asked, timeout, TimeoutSource::Negotiated, policy),
        None => grace_for(asked, requested, TimeoutSource::Requested, policy),
    }
}

/// The grace to use under a session timeout and policy: the one asked for,
/// if it fits ([`grace_budget`]); without one, the most that fits, up to
/// [`DEFAULT_GRACE`]. A grace asked for that does not fit is refused with
/// the reason and both ways out.
pub(crate) fn grace_for(
    asked: Option<Duration>,
    session_timeout: Duration,
    source: TimeoutSource,
    policy: ConnectionPolicy,
) -> Result<Duration, String> {
    let budget = grace_budget(session_timeout, policy);
    let Some(grace) = asked else {
        return Ok(budget.min(DEFAULT_GRACE));
    };
    if grace <= budget {
        return Ok(grace);
    }
    let policy_name = match policy {
        ConnectionPolicy::Standard => "standard",
        ConnectionPolicy::SessionAware => "session-aware",
    };
    let timeout = match source {
        TimeoutSource::Requested => format!("--session-timeout {}", session_timeout.as_millis()),
        TimeoutSource::Negotiated => format!(
            "the session timeout the server negotiated, {} ms,",
            session_timeout.as_millis()
        ),
    };
    Err(format!(
        "--grace-ms {} does not fit in the lease: with {timeout} and the {policy_name} policy the \
         lease is {} ms, renewed every {} ms while the server answers, so when contact is in \
         doubt the command can be given at most {} ms between SIGTERM and the lease's end; \
         lower --grace-ms to {} or less, or raise the session timeout to {} ms or more",
        grace.as_millis(),
        lease_length(session_timeout, policy).as_millis(),
        (session_timeout * RENEWED_EVERY.0 / RENEWED_EVERY.1).as_millis(),
        budget.as_millis(),
        budget.as_millis(),
        session_timeout_for(grace, policy).as_millis(),
    ))
}

/// The shortest session timeout in which `grace` fits under `policy`.
pub(crate) fn session_timeout_for(grace: Duration, policy: ConnectionPolicy) -> Duration {
    // Whole milliseconds, upwards: the budget is monotonic in the timeout.
    let mut ms = grace.as_millis().max(1) as u64;
    let fits = |ms: u64| grace_budget(Duration::from_millis(ms), policy) >= grace;
    let mut lo = 0;
    while !fits(ms) {
        // A grace near u64::MAX ms: no whole millisecond count fits it,
        // and doubling would overflow (a panic, or a loop without end).
        if ms == u64::MAX {
            return Duration::from_millis(u64::MAX);
        }
        lo = ms;
        ms = ms.saturating_mul(2);
    }
    while ms - lo > 1 {
        let mid = lo + (ms - lo) / 2;
        if fits(mid) {
            ms = mid;
        } else {
            lo = mid;
        }
    }
    Duration::from_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    const GRACE: Duration = Duration::from_millis(1000);
    const T: FencingToken = FencingToken(7);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn exited(code: i32) -> ExitStatus {
        ExitStatus::from_raw(code << 8)
    }

    fn drain(s: &mut Supervisor) -> Vec<Action> {
        std::iter::from_fn(|| s.poll_action()).collect()
    }

    /// A `run` supervisor leading with a lease 4 s ahead of `t0`, its command started.
    fn leading(watchdog: bool) -> (Supervisor, Instant) {
        let t0 = Instant::now();
        let mut s = Supervisor::new(Mode::Lead, GRACE, watchdog);
        s.standing(t0, Role::Leader(T), Some(t0 + ms(4000)));
        assert_eq!(
            drain(&mut s),
            [Action::Start {
                token: T,
                lease_left: ms(4000)
            }]
        );
        (s, t0)
    }

    #[test]
    fn starts_only_while_leading_with_more_than_the_grace_left() {
        let t0 = Instant::now();
        let mut s = Supervisor::new(Mode::Lead, GRACE, true);
        s.standing(t0, Role::Follower, None);
        s.standing(t0, Role::Suspended(T), None);
        assert_eq!(drain(&mut s), []);
        // Leading, but the lease ends within the grace: wait for a renewal.
        s.standing(t0, Role::Leader(T), Some(t0 + ms(900)));
        assert_eq!(drain(&mut s), []);
        assert_eq!(s.poll_timeout(), None, "nothing runs: no deadline");
        s.standing(t0 + ms(100), Role::Leader(T), Some(t0 + ms(3000)));
        assert_eq!(
            drain(&mut s),
            [Action::Start {
                token: T,
                lease_left: ms(2900)
            }]
        );
    }

    #[test]
    fn an_unrenewed_lease_gets_sigterm_a_grace_before_its_end_and_sigkill_at_it() {
        let (mut s, t0) = leading(true);
        // Renewals keep it running, each told to the watchdog.
        s.standing(t0 + ms(1000), Role::Leader(T), Some(t0 + ms(5000)));
        assert_eq!(drain(&mut s), [Action::Renew(t0 + ms(5000))]);
        assert_eq!(s.poll_timeout(), Some(t0 + ms(4000)));
        // The server goes quiet: at the lease's end less the grace, SIGTERM.
        s.handle_timeout(t0 + ms(3999));
        assert_eq!(drain(&mut s), []);
        s.handle_timeout(t0 + ms(4000));
        assert_eq!(drain(&mut s), [Action::Terminate { grace: GRACE }]);
        assert_eq!(
            s.poll_timeout(),
            Some(t0 + ms(5000)),
            "SIGKILL at the lease's end"
        );
        // The core suspends at the lease's end: nothing more to do but kill.
        s.standing(t0 + ms(5000), Role::Suspended(T), None);
        s.handle_timeout(t0 + ms(5000));
        assert_eq!(drain(&mut s), [Action::Kill]);
        s.exited(t0 + ms(5001), ExitStatus::from_raw(9));
        assert_eq!(drain(&mut s), [], "run waits to lead again");
        // Contact back, same term: it starts again.
        s.standing(t0 + ms(6000), Role::Leader(T), Some(t0 + ms(9000)));
        assert_eq!(
            drain(&mut s),
            [Action::Start {
                token: T,
                lease_left: ms(3000)
            }]
        );
    }

    #[test]
    fn a_command_that_exits_within_the_grace_is_not_killed() {
        let (mut s, t0) = leading(true);
        s.handle_timeout(t0 + ms(3000));
        assert_eq!(drain(&mut s), [Action::Terminate { grace: GRACE }]);
        s.exited(t0 + ms(3200), exited(0));
        s.handle_timeout(t0 + ms(4000));
        assert_eq!(drain(&mut s), []);
        assert_eq!(s.poll_timeout(), None);
    }

    #[test]
    fn losing_the_lead_gets_sigterm_and_sigkill_by_the_last_lease_at_the_latest() {
        let (mut s, t0) = leading(true);
        // Suspended with 500 ms of the watchdog's lease left: the command
        // has those, not the whole grace.
        s.standing(t0 + ms(3500), Role::Suspended(T), None);
        assert_eq!(drain(&mut s), [Action::Terminate { grace: ms(500) }]);
        s.handle_timeout(t0 + ms(4000));
        assert_eq!(drain(&mut s), [Action::Kill]);
        // Demoted with the whole lease ahead: the whole grace.
        let (mut s, t0) = leading(true);
        s.standing(t0, Role::Follower, None);
        assert_eq!(drain(&mut s), [Action::Terminate { grace: GRACE }]);
        s.exited(t0 + ms(10), exited(143));
        s.standing(t0 + ms(20), Role::Closed, None);
        let outcome = drain(&mut s);
        assert_eq!(outcome, [Action::Done(Outcome::ElectionOver(Role::Closed))]);
    }

    #[test]
    fn a_signal_stops_the_command_a_second_one_kills_it_and_supervision_ends() {
        let (mut s, t0) = leading(true);
        s.signal(t0, Signal::SIGHUP);
        assert_eq!(drain(&mut s), [Action::Terminate { grace: GRACE }]);
        s.signal(t0 + ms(10), Signal::SIGINT);
        assert_eq!(drain(&mut s), [Action::Kill], "asked twice: no more grace");
        s.exited(t0 + ms(20), ExitStatus::from_raw(9));
        assert_eq!(
            drain(&mut s),
            [Action::Done(Outcome::Signalled(Signal::SIGHUP))]
        );
        // Waiting, a signal ends at once.
        let mut s = Supervisor::new(Mode::Lead, GRACE, true);
        s.standing(t0, Role::Follower, None);
        s.signal(t0, Signal::SIGQUIT);
        assert_eq!(
            drain(&mut s),
            [Action::Done(Outcome::Signalled(Signal::SIGQUIT))]
        );
        // A signal while stopping for another reason: stopped, then over.
        let (mut s, t0) = leading(true);
        s.standing(t0, Role::Follower, None);
        assert_eq!(drain(&mut s), [Action::Terminate { grace: GRACE }]);
        s.signal(t0, Signal::SIGTERM);
        assert_eq!(drain(&mut s), []);
        s.exited(t0 + ms(5), exited(143));
        assert_eq!(
            drain(&mut s),
            [Action::Done(Outcome::Signalled(Signal::SIGTERM))]
        );
    }

    #[test]
    fn a_command_that_ends_by_itself_ends_supervision_unless_the_watchdog_stopped_it() {
        let (mut s, t0) = leading(true);
        s.exited(t0 + ms(100), exited(3));
        assert_eq!(drain(&mut s), [Action::Done(Outcome::Exited(exited(3)))]);
        // Frozen with the process past the lease: the watchdog killed it.
        let (mut s, t0) = leading(true);
        s.exited(t0 + ms(4100), ExitStatus::from_raw(9));
        assert_eq!(drain(&mut s), [], "run leads again once it can");
        // Without a watchdog, an exit is the command's own.
        let (mut s, t0) = leading(false);
        s.exited(t0 + ms(4100), exited(0));
        assert_eq!(drain(&mut s), [Action::Done(Outcome::Exited(exited(0)))]);
    }

    #[test]
    fn lock_runs_its_command_once_and_any_stop_but_a_signal_is_lost() {
        let t0 = Instant::now();
        let mut s = Supervisor::new(Mode::Hold(T), GRACE, true);
        s.standing(t0, Role::Leader(T), Some(t0 + ms(4000)));
        assert!(matches!(drain(&mut s)[..], [Action::Start { .. }]));
        s.handle_timeout(t0 + ms(3000));
        assert_eq!(drain(&mut s), [Action::Terminate { grace: GRACE }]);
        s.exited(t0 + ms(3100), exited(143));
        assert_eq!(drain(&mut s), [Action::Done(Outcome::Lost)]);
        // Not held any more by the time it would start: lost, nothing ran.
        let mut s = Supervisor::new(Mode::Hold(T), GRACE, true);
        s.standing(t0, Role::Suspended(T), None);
        assert_eq!(drain(&mut s), [Action::Done(Outcome::Lost)]);
        // Held with the lease too short: wait; then it runs and exits 42.
        let mut s = Supervisor::new(Mode::Hold(T), GRACE, true);
        s.standing(t0, Role::Leader(T), Some(t0 + ms(500)));
        assert_eq!(drain(&mut s), []);
        s.standing(t0 + ms(100), Role::Leader(T), Some(t0 + ms(4000)));
        assert!(matches!(drain(&mut s)[..], [Action::Start { .. }]));
        s.exited(t0 + ms(200), exited(42));
        assert_eq!(drain(&mut s), [Action::Done(Outcome::Exited(exited(42)))]);
    }

    #[test]
    fn the_grace_budget_leaves_room_for_a_late_renewal() {
        let ten = Duration::from_secs(10);
        assert_eq!(
            grace_budget(ten, ConnectionPolicy::Standard),
            ms(6666 - 3000 - 1000)
        );
        assert_eq!(
            grace_budget(ten, ConnectionPolicy::SessionAware),
            ms(9000 - 3000 - 1000)
        );
        assert_eq!(grace_budget(ms(1), ConnectionPolicy::Standard), ms(0));
        for policy in [ConnectionPolicy::Standard, ConnectionPolicy::SessionAware] {
            for grace in [ms(1), ms(1000), ms(2666), ms(5000), ms(60_000)] {
                let t = session_timeout_for(grace, policy);
                assert!(grace_budget(t, policy) >= grace, "{grace:?} {t:?}");
                assert!(grace_budget(t - ms(1), policy) < grace, "{grace:?} {t:?}");
            }
            // The largest --grace-ms (found by the cli fuzz target: the
            // doubling overflowed): an answer, no panic, no endless loop.
            for grace in [ms(u64::MAX), ms(u64::MAX / 2 + 1)] {
                let t = session_timeout_for(grace, policy);
                assert!(t >= grace, "{grace:?} {t:?}");
            }
        }
    }

    #[test]
    fn a_grace_that_does_not_fit_is_refused_and_none_asked_is_what_fits() {
        let ten = Duration::from_secs(10);
        let standard = ConnectionPolicy::Standard;
        let req = TimeoutSource::Requested;
        assert_eq!(grace_for(None, ten, req, standard), Ok(ms(2666)));
        assert_eq!(
            grace_for(None, Duration::from_secs(60), req, standard),
            Ok(DEFAULT_GRACE)
        );
        assert_eq!(grace_for(Some(ms(2000)), ten, req, standard), Ok(ms(2000)));
        let e = grace_for(Some(ms(5000)), ten, req, standard).unwrap_err();
        for says in [
            "--grace-ms 5000",
            "--session-timeout 10000",
            "2666 ms",
            "18750 ms",
        ] {
            assert!(e.contains(says), "{says:?} in {e}");
        }
        // One sentence, as a terminal shows it: no run of blanks from the
        // source's line breaks.
        assert!(!e.contains("  "), "{e}");
        let e = grace_for(Some(ms(5000)), ten, TimeoutSource::Negotiated, standard).unwrap_err();
        assert!(e.contains("the server negotiated, 10000 ms"), "{e}");
        let aware = ConnectionPolicy::SessionAware;
        assert_eq!(grace_for(Some(ms(5000)), ten, req, aware), Ok(ms(5000)));
    }

    #[test]
    fn once_connected_the_negotiated_timeout_rules_and_else_the_requested_one() {
        let standard = ConnectionPolicy::Standard;
        let (ten, sixty) = (Duration::from_secs(10), Duration::from_secs(60));
        // The server cut 60 s to 10 s: 5 s no longer fits, and the
        // refusal says whose timeout it was.
        let e = grace_once_connected(Some(ms(5000)), Some(ten), sixty, standard).unwrap_err();
        assert!(e.contains("the server negotiated, 10000 ms"), "{e}");
        assert_eq!(
            grace_once_connected(None, Some(ten), sixty, standard),
            Ok(ms(2666))
        );
        // No negotiated timeout came: the requested one is all there is.
        assert_eq!(
            grace_once_connected(Some(ms(5000)), None, sixty, standard),
            Ok(ms(5000))
        );
        let e = grace_once_connected(Some(ms(5000)), None, ten, standard).unwrap_err();
        assert!(e.contains("--session-timeout 10000"), "{e}");
    }

    /// The lease this module assumes is the one the core computes.
    #[test]
    fn the_lease_length_is_the_cores() {
        use zkelect_core::{
            Candidate, Config, Input, Reply, SessionEvent, SessionId, Stat, Timestamp,
        };
        for policy in [ConnectionPolicy::Standard, ConnectionPolicy::SessionAware] {
            let timeout = Duration::from_secs(9);
            let t = Timestamp::from_millis(1000);
            let config = Config::builder("/e", "a").policy(policy).build().unwrap();
            let mut c = Candidate::new(config);
            c.join(t);
            c.handle(
                t,
                Input::Session(SessionEvent::Connected {
                    session_id: Some(SessionId(1)),
                    timeout,
                }),
            );
            // Answer everything as a lone candidate would be answered, until it leads.
            for _ in 0..20 {
                let commands: Vec<_> = std::iter::from_fn(|| c.poll_command()).collect();
                for cmd in commands {
                    let result = match &cmd.request {
                        zkelect_core::Request::Create { path, .. } => Ok(Reply::Created {
                            path: format!("{path}0000000000"),
                            stat: Stat {
                                czxid: 5,
                                ephemeral_owner: 1,
                                ..Stat::default()
                            },
                        }),
                        zkelect_core::Request::GetChildren { .. } => {
                            let own = c.node().map(str::to_owned).into_iter().collect();
                            Ok(Reply::Children(own))
                        }
                        zkelect_core::Request::Exists { .. } => Ok(Reply::Exists(Some(Stat {
                            czxid: 5,
                            ephemeral_owner: 1,
                            ..Stat::default()
                        }))),
                        zkelect_core::Request::Sync { .. } => Ok(Reply::Synced),
                        _ => Err(zkelect_core::ZkCode::Other(-1)),
                    };
                    c.handle(t, Input::Reply { op: cmd.op, result });
                }
            }
            assert!(c.role().is_leader(), "{:?}", c.role());
            let contact = c.last_contact().expect("answered");
            let lease = c.lease_expiry().expect("leading");
            assert_eq!(
                Duration::from_millis(lease.as_millis() - contact.as_millis()),
                lease_length(timeout, policy),
                "{policy:?}"
            );
        }
    }
}
