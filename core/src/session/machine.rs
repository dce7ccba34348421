//! The machines a [`Session`](super::Session) runs, as one enum: an
//! election's candidate, a lock's candidate (which holds once), an observer.
//!
//! An enum rather than trait objects: the session is the one place that
//! calls them, every kind is known here, and the lock's rule — leave the
//! queue once the hold is lost — is a few lines beside the others instead
//! of a wrapper type the adapters would have to write.

use std::fmt;
use std::time::Duration;

use crate::candidate::{Candidate, Stats};
use crate::command::Command;
use crate::input::Input;
use crate::kept::NameText;
use crate::notice::{Notice, Role};
use crate::observer::Observer;
use crate::revoker::Revoker;
use crate::time::Timestamp;

/// A machine's name on its session: handed out by
/// [`Session::add`](super::Session::add), never given to another machine of
/// the same session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MachineId(pub u64);

impl fmt::Display for MachineId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "m{}", self.0)
    }
}

/// One machine, ready to be added to a session, with how the session
/// treats it: how long its close may take, and whether the session closes
/// when it is done.
///
/// ```
/// use std::time::Duration;
/// use zkelect_core::{Candidate, Config, Machine, Rule};
///
/// let config = Config::builder("/svc/lock", "a").rule(Rule::Mutex).build()?;
/// // A lock waits for its node's deletion for as long as the session lives.
/// let lock = Machine::lock(Candidate::new(config));
/// assert_eq!(lock.close_timeout(), None);
/// let config = Config::builder("/svc/leader", "a").build()?;
/// let election = Machine::election(Candidate::new(config)).with_close_timeout(Duration::from_secs(5));
/// assert_eq!(election.close_timeout(), Some(Duration::from_secs(5)));
/// # Ok::<(), zkelect_core::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Machine {
    kind: Kind,
    close_timeout: Option<Duration>,
    ends_session: bool,
}

/// What a machine is.
#[derive(Debug, Clone)]
enum Kind {
    /// Takes part in an election: after a lost term it queues again.
    Election(Candidate),
    /// Queues for a lock once: after a lost hold it leaves the queue (a
    /// lock is acquired by the application, never behind its back).
    Lock { candidate: Candidate, held: bool },
    /// Watches a queue without taking part.
    Observer(Observer),
    /// Asks another node's holder to let go, once.
    Revoker(Revoker),
}

impl Machine {
    /// An election's candidate (any [`Rule`](crate::Rule): it queues again
    /// after a lost term, as long as it has joined).
    pub fn election(candidate: Candidate) -> Self {
        Self::of(Kind::Election(candidate))
    }

    /// A lock's candidate: once it has held and lost the hold, it leaves
    /// the queue (deletes its node and closes) instead of queueing again.
    /// Its close waits until the session ends unless
    /// [`with_close_timeout`](Self::with_close_timeout) says otherwise.
    pub fn lock(candidate: Candidate) -> Self {
        Self::of(Kind::Lock {
            candidate,
            held: false,
        })
    }

    /// An observer of a queue.
    pub fn observer(observer: Observer) -> Self {
        Self::of(Kind::Observer(observer))
    }

    /// A cooperative revocation request ([`Revoker`]): done once answered.
    pub fn revocation(revoker: Revoker) -> Self {
        Self::of(Kind::Revoker(revoker))
    }

    fn of(kind: Kind) -> Self {
        Self {
            kind,
            close_timeout: None,
            ends_session: false,
        }
    }

    /// How long a close of this machine may take before the session gives
    /// up on it (its node, if any, then goes when the session ends).
    /// Without one, a close waits as long as the session lives.
    #[must_use]
    pub fn with_close_timeout(mut self, timeout: Duration) -> Self {
        self.close_timeout = Some(timeout);
        self
    }

    /// The session closes once this machine is done (a session made for
    /// one election).
    #[must_use]
    pub fn ending_session(mut self) -> Self {
        self.ends_session = true;
        self
    }

    /// How long its close may take; `None`: as long as the session lives.
    pub fn close_timeout(&self) -> Option<Duration> {
        self.close_timeout
    }

    /// Whether the session closes once this machine is done.
    pub fn ends_session(&self) -> bool {
        self.ends_session
    }

    /// The candidate, unless this is an observer or a revocation request.
    pub fn as_candidate(&self) -> Option<&Candidate> {
        match &self.kind {
            Kind::Election(c) | Kind::Lock { candidate: c, .. } => Some(c),
            Kind::Observer(_) | Kind::Revoker(_) => None,
        }
    }

    /// The candidate, if this is one, to plant a bug in.
    #[cfg(feature = "planted")]
    pub(super) fn candidate_mut(&mut self) -> Option<&mut Candidate> {
        match &mut self.kind {
            Kind::Election(c) | Kind::Lock { candidate: c, .. } => Some(c),
            Kind::Observer(_) | Kind::Revoker(_) => None,
        }
    }

    /// The observer, if this is one.
    pub fn as_observer(&self) -> Option<&Observer> {
        match &self.kind {
            Kind::Observer(o) => Some(o),
            _ => None,
        }
    }

    /// The revocation request, if this is one.
    pub fn as_revoker(&self) -> Option<&Revoker> {
        match &self.kind {
            Kind::Revoker(r) => Some(r),
            _ => None,
        }
    }

    /// Whether this is a lock's candidate (one that holds once).
    pub fn is_lock(&self) -> bool {
        matches!(self.kind, Kind::Lock { .. })
    }

    /// The queue's path.
    pub fn path(&self) -> &str {
        match &self.kind {
            Kind::Election(c) | Kind::Lock { candidate: c, .. } => c.config().path(),
            Kind::Observer(o) => o.config().path(),
            Kind::Revoker(r) => r.path(),
        }
    }

    /// The role now; an observer's is [`Role::Observer`] while it runs.
    pub fn role(&self) -> Role {
        match &self.kind {
            Kind::Election(c) | Kind::Lock { candidate: c, .. } => c.role(),
            Kind::Observer(o) if o.is_failed() => Role::Failed,
            Kind::Observer(o) if o.is_closed() => Role::Closed,
            Kind::Observer(_) => Role::Observer,
            Kind::Revoker(r) if r.is_failed() => Role::Failed,
            Kind::Revoker(r) if r.is_done() => Role::Closed,
            Kind::Revoker(_) => Role::Idle,
        }
    }

    /// Its node's name (not the full path), once known.
    pub fn node(&self) -> Option<&str> {
        self.as_candidate().and_then(Candidate::node)
    }

    /// Its node's full path, once known.
    pub fn own_path(&self) -> Option<String> {
        self.as_candidate().and_then(Candidate::own_path)
    }

    /// The nearest node it watches, if any.
    pub fn watching(&self) -> Option<NameText<'_>> {
        self.as_candidate().and_then(Candidate::watching)
    }

    /// While it leads (holds): when that lapses unless the server answers again.
    pub fn lease_expiry(&self) -> Option<Timestamp> {
        self.as_candidate().and_then(Candidate::lease_expiry)
    }

    /// Its own counters (an observer's are not [`Stats`]: all zero here).
    pub fn stats(&self) -> Stats {
        self.as_candidate()
            .map(Candidate::stats)
            .unwrap_or_default()
    }

    /// Closed or failed: nothing more will happen.
    pub fn is_done(&self) -> bool {
        match &self.kind {
            Kind::Election(c) | Kind::Lock { candidate: c, .. } => c.is_closed() || c.is_failed(),
            Kind::Observer(o) => o.is_closed() || o.is_failed(),
            Kind::Revoker(r) => r.is_done(),
        }
    }

    /// Failed (rather than closed).
    pub fn is_failed(&self) -> bool {
        match &self.kind {
            Kind::Election(c) | Kind::Lock { candidate: c, .. } => c.is_failed(),
            Kind::Observer(o) => o.is_failed(),
            Kind::Revoker(r) => r.is_failed(),
        }
    }

    // ----- what the session calls ------------------------------------------

    pub(super) fn handle(&mut self, now: Timestamp, input: Input) {
        match &mut self.kind {
            Kind::Election(c) | Kind::Lock { candidate: c, .. } => c.handle(now, input),
            Kind::Observer(o) => o.handle(now, input),
            Kind::Revoker(r) => r.handle(now, input),
        }
    }

    pub(super) fn handle_timeout(&mut self, now: Timestamp) {
        match &mut self.kind {
            Kind::Election(c) | Kind::Lock { candidate: c, .. } => c.handle_timeout(now),
            Kind::Observer(o) => o.handle_timeout(now),
            Kind::Revoker(r) => r.handle_timeout(now),
        }
    }

    pub(super) fn session_answered(&mut self, now: Timestamp, sent_at: Timestamp) {
        match &mut self.kind {
            Kind::Election(c) | Kind::Lock { candidate: c, .. } => {
                c.session_answered(now, sent_at);
            }
            // An observer, a revocation request: no lease.
            Kind::Observer(_) | Kind::Revoker(_) => {}
        }
    }

    pub(super) fn join(&mut self, now: Timestamp) {
        match &mut self.kind {
            Kind::Election(c) | Kind::Lock { candidate: c, .. } => c.join(now),
            Kind::Observer(_) | Kind::Revoker(_) => {}
        }
    }

    pub(super) fn resign(&mut self, now: Timestamp, rejoin: bool) {
        match &mut self.kind {
            Kind::Election(c) | Kind::Lock { candidate: c, .. } => c.resign(now, rejoin),
            Kind::Observer(_) | Kind::Revoker(_) => {}
        }
    }

    pub(super) fn downgrade(&mut self, now: Timestamp) -> bool {
        match &mut self.kind {
            Kind::Election(c) | Kind::Lock { candidate: c, .. } => c.downgrade(now),
            Kind::Observer(_) | Kind::Revoker(_) => false,
        }
    }

    pub(super) fn close(&mut self, now: Timestamp) {
        match &mut self.kind {
            Kind::Election(c) | Kind::Lock { candidate: c, .. } => c.close(now),
            Kind::Observer(o) => o.close(now),
            Kind::Revoker(r) => r.close(now),
        }
    }

    /// The next notice. A lock's candidate that has held and is demoted
    /// closes here, before its commands are polled: the close's delete
    /// goes out with the step that lost the hold.
    pub(super) fn poll_notice(&mut self, now: Timestamp) -> Option<Notice> {
        match &mut self.kind {
            Kind::Election(c) => c.poll_notice(),
            Kind::Lock { candidate, held } => {
                let notice = candidate.poll_notice()?;
                match notice {
                    Notice::Elected { .. } => *held = true,
                    Notice::Demoted { .. } if *held => {
                        *held = false;
                        candidate.close(now);
                    }
                    _ => {}
                }
                Some(notice)
            }
            Kind::Observer(o) => o.poll_notice(),
            Kind::Revoker(r) => r.poll_notice(),
        }
    }

    pub(super) fn poll_command(&mut self) -> Option<Command> {
        match &mut self.kind {
            Kind::Election(c) | Kind::Lock { candidate: c, .. } => c.poll_command(),
            Kind::Observer(o) => o.poll_command(),
            Kind::Revoker(r) => r.poll_command(),
        }
    }

    pub(super) fn poll_timeout(&self) -> Option<Timestamp> {
        match &self.kind {
            Kind::Election(c) | Kind::Lock { candidate: c, .. } => c.poll_timeout(),
            Kind::Observer(o) => o.poll_timeout(),
            Kind::Revoker(r) => r.poll_timeout(),
        }
    }
}
