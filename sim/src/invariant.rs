//! What a world reports to its checkers, and what a checker is: the
//! vocabulary shared by [`crate::world`] (which reports) and [`crate::check`]
//! (which judges), kept apart so neither imports the other's internals in a
//! cycle: `world` → `invariant`, `check` → `world` + `invariant`.

use zkelect_core::{FencingToken, Notice, OpId, Role, Timestamp};

/// An invariant that did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which checker.
    pub invariant: &'static str,
    /// When.
    pub at: Timestamp,
    /// After which step.
    pub step: u64,
    /// What exactly.
    pub detail: String,
}

/// What the world reports to its checkers besides "a step ended".
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// A step ended; the world is consistent and may be inspected.
    Step,
    /// A candidate told its application something.
    Notice {
        /// Process index.
        pid: usize,
        /// What it said.
        notice: &'a Notice,
    },
    /// A candidate emitted a command.
    Emitted {
        /// Process index.
        pid: usize,
        /// The command's id.
        op: OpId,
    },
    /// A command was answered (the reply was fed to the candidate).
    Answered {
        /// Process index.
        pid: usize,
        /// The command's id.
        op: OpId,
        /// The candidate was no longer waiting for it.
        stale: bool,
        /// The role it would have had at this moment without the reply.
        role_before: Role,
        /// Its role after the reply.
        role_after: Role,
    },
    /// A read (`getChildren` or `getData`) that a candidate sent on waking from
    /// a watch event reached the server; `cause` names the server change that
    /// fired the watch.
    Woken {
        /// Process index.
        pid: usize,
        /// The server change.
        cause: u64,
        /// How many followers that change may wake under the queue's rule
        /// ([`View::herd_bound`](crate::world::View::herd_bound)).
        allowed: usize,
    },
    /// An operator deleted the process's node (the world's
    /// `Process::revoked_at` says so until
    /// the candidate's node changes).
    Revoked {
        /// Process index.
        pid: usize,
        /// Its token, if it was leading.
        token: Option<FencingToken>,
    },
    /// A leader's write reached the fenced resource.
    Write {
        /// Process index.
        pid: usize,
        /// The token it wrote with.
        token: FencingToken,
        /// Whether the resource accepted it (its token was not lower than the
        /// highest it had seen).
        accepted: bool,
    },
    /// The liveness bound after the faults stopped has passed.
    LivenessDue,
    /// The world has been quiet for a while: the end of the settled phase,
    /// just before the candidates close (only in worlds with observers).
    Quiet,
    /// The run is over: every candidate closed, every dead session expired.
    End,
    /// A request reached the server on the session of process `host` (the
    /// machine that runs the session; `pid` sent it, itself or a machine
    /// riding on that session).
    Request {
        /// The session's process.
        host: usize,
        /// The machine that sent it.
        pid: usize,
    },
}

impl Event<'_> {
    /// This event's kind, as a one-element [`Kinds`].
    pub fn kind(&self) -> Kinds {
        Kinds(match self {
            Self::Step => 1,
            Self::Notice { .. } => 1 << 1,
            Self::Emitted { .. } => 1 << 2,
            Self::Answered { .. } => 1 << 3,
            Self::Woken { .. } => 1 << 4,
            Self::Revoked { .. } => 1 << 5,
            Self::Write { .. } => 1 << 6,
            Self::LivenessDue => 1 << 7,
            Self::End => 1 << 8,
            Self::Quiet => 1 << 9,
            Self::Request { .. } => 1 << 10,
        })
    }
}

/// A set of [`Event`] kinds: the ones a checker looks at ([`Invariant::kinds`]),
/// so the world calls it for those only.
///
/// ```
/// use zkelect_sim::invariant::{Event, Kinds};
/// let kinds = Kinds::STEP | Kinds::END;
/// assert!(kinds.contains(Event::End.kind()));
/// assert!(!kinds.contains(Event::LivenessDue.kind()));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kinds(u16);

impl Kinds {
    /// No kind.
    pub const NONE: Self = Self(0);
    /// Every kind.
    pub const ALL: Self = Self(u16::MAX);
    /// [`Event::Step`].
    pub const STEP: Self = Self(1);
    /// [`Event::Notice`].
    pub const NOTICE: Self = Self(1 << 1);
    /// [`Event::Emitted`].
    pub const EMITTED: Self = Self(1 << 2);
    /// [`Event::Answered`].
    pub const ANSWERED: Self = Self(1 << 3);
    /// [`Event::Woken`].
    pub const WOKEN: Self = Self(1 << 4);
    /// [`Event::Revoked`].
    pub const REVOKED: Self = Self(1 << 5);
    /// [`Event::Write`].
    pub const WRITE: Self = Self(1 << 6);
    /// [`Event::LivenessDue`].
    pub const LIVENESS_DUE: Self = Self(1 << 7);
    /// [`Event::End`].
    pub const END: Self = Self(1 << 8);
    /// [`Event::Quiet`].
    pub const QUIET: Self = Self(1 << 9);
    /// [`Event::Request`].
    pub const REQUEST: Self = Self(1 << 10);

    /// A one-kind set's position (0 for [`Kinds::STEP`], 1 for
    /// [`Kinds::NOTICE`], …): an index for tables by kind.
    pub fn index(self) -> usize {
        self.0.trailing_zeros() as usize
    }

    /// Every kind, one at a time, in [`Kinds::index`] order.
    pub fn each() -> impl Iterator<Item = Self> {
        (0..=10).map(|bit| Self(1 << bit))
    }

    /// Whether every kind in `other` is in `self`.
    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Kinds {
    type Output = Self;

    fn bitor(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

/// A property checked after every step of a world of type `W` (the checkers in
/// [`crate::check`] are `Invariant<View>`).
///
/// Generic over the world so that this module, which the world uses to report
/// to its checkers, does not itself depend on the world.
///
/// A checker names the kinds it judges ([`kinds`](Self::kinds)) and judges
/// them in two methods: [`check_step`](Self::check_step) for
/// [`Event::Step`], [`check`](Self::check) for every other kind. Each
/// method's default judges nothing, so a checker of steps alone writes only
/// `check_step`, and one of events alone only `check`; the world never asks
/// either for a kind the checker did not name.
pub trait Invariant<W: ?Sized> {
    /// The name a violation is reported under.
    fn name(&self) -> &'static str;
    /// The kinds of event this checker judges; the world calls it for no
    /// others (most checkers judge a few kinds, and a call per checker per
    /// event was a good part of a run). Asked once, when the world is built.
    /// No default: a checker says what it looks at.
    fn kinds(&self) -> Kinds;
    /// Checks `event` (of a kind in [`kinds`](Self::kinds) other than
    /// [`Event::Step`]) against the world as it is now; `Err` explains the
    /// violation. The default judges nothing (a checker of steps alone).
    fn check(&mut self, world: &W, event: &Event<'_>) -> Result<(), String> {
        let _ = (world, event);
        Ok(())
    }

    /// Judges [`Event::Step`] (for a checker whose [`kinds`](Self::kinds)
    /// name it; the world calls this, not [`check`](Self::check), after each
    /// step) and says how long a pass holds: [`Holds::ThisStep`], or for a
    /// checker whose pass is a function of what the world's step key covers
    /// (for [`World`](crate::world::World): the census generation, the
    /// server's zxid, the phase, the number of processes)
    /// [`Holds::UntilChange`], and the world skips it until that key changes,
    /// which most steps (pings, ticks, timers) do not; one whose pass is a
    /// function of the counts alone says [`Holds::UntilCountsChange`]. The
    /// default judges nothing (a checker of other events alone), a pass that
    /// holds until the counts change.
    fn check_step(&mut self, world: &W) -> Result<Holds, String> {
        let _ = world;
        Ok(Holds::UntilCountsChange)
    }

    /// For a checker of [`Event::Step`] that also judges other kinds:
    /// whether judging `event` ([`check`](Self::check), just called) may
    /// have changed what its next pass of a step reads (a notice that
    /// starts a watch), so that the world asks it again after the next step
    /// even where its last pass still holds. The default says yes; a
    /// checker that keeps such state from a few events only says which,
    /// and spares the world a pass after every other one.
    fn restep_after(&self, event: &Event<'_>) -> bool {
        let _ = event;
        true
    }
}

/// How long a checker's pass of [`Event::Step`] holds
/// ([`Invariant::check_step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holds {
    /// Ask again after the next step.
    ThisStep,
    /// Ask again only once the world's step key has changed: the verdict
    /// reads nothing else that a step can change.
    UntilChange,
    /// Ask again only once the counts the world keeps have changed (for
    /// [`World`](crate::world::World): the census counts, the phase, the
    /// number of processes): the verdict is a function of those alone. Most
    /// steps that change a process (a reply, a timer) leave its counts
    /// alone, and so need not ask such a checker again.
    UntilCountsChange,
}
