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
        /// ([`World::herd_bound`](crate::world::World::herd_bound)).
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
}

/// A property checked after every step of a world of type `W` (the checkers in
/// [`crate::check`] are `Invariant<World>`).
///
/// Generic over the world so that this module, which the world uses to report
/// to its checkers, does not itself depend on the world.
pub trait Invariant<W: ?Sized> {
    /// The name a violation is reported under.
    fn name(&self) -> &'static str;
    /// Checks `event` against the world as it is now; `Err` explains the violation.
    fn check(&mut self, world: &W, event: &Event<'_>) -> Result<(), String>;
}
