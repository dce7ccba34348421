//! The checkers: every [`Invariant`] sees every step of the [`View`] and every
//! [`Event`] it reports, and says whether its property still holds.
//!
//! # Clock assumptions
//!
//! The checkers rely on the client library's timing, as a real client has it:
//! the client pings every third of the session timeout and declares the
//! connection lost after two thirds without a message from the server; the
//! server expires a session a full timeout after it last heard from it. A
//! candidate therefore learns it is cut off (or, under the `SessionAware`
//! policy, gives up at nine tenths of the timeout, counted from the *send* time
//! of its last answered request) before the server can expire its session and
//! let a successor in. [`Safety`] holds only if that ordering is honoured.
//!
//! # What each checker allows
//!
//! A world may run several queues on other paths, whose machines share
//! sessions ([`View::queues`]): every checker judges each queue
//! on its own, by that queue's rule and k, with a fenced resource per queue.
//!
//! Per the queue's rule ("leads" below means "holds"): `safety`
//! counts at most k holders for an election or a semaphore, one for a mutex,
//! and in a read-write lock never a writer beside another holder; `fencing`
//! and `tokens-grow` (k = 1 queues) order exclusive holders, a reader's token
//! only against the last exclusive holder's; `liveness` in a read-write lock
//! wants exactly the rule's holders among the live nodes to hold; `no-herd`
//! allows what [`View::herd_bound`] says of the changed node.
//!
//! | checker | fails when |
//! |---|---|
//! | [`Safety`] `safety` | more than k processes believe they lead at once (in a weighted semaphore: the permits they were drawn to ask for add up to more than k; in a read-write lock a writer that downgraded counts as the reader it believes it is): zkelect candidates holding [`Role::Leader`](zkelect_core::Role::Leader) and foreign models whose recipe says they hold (in runs with pauses only while their lease holds too; a candidate whose node an operator deleted is not counted until it learns, for at most [`REVOKE_GRACE`] session timeouts from the moment the deletion reached the server its session is on; a foreign model so revoked is not counted, it never learns) |
//! | [`Revocation`] `revocation` | a candidate whose node an operator deleted still leads one session timeout (of its own awake time) after the deletion reached it: after the ensemble committed it, or, while its session is on a lagging follower that has not applied it, after that follower did (the follower answers as if the node stood and fires its watch only then: nothing can tell the client sooner) |
//! | [`RevocationHeard`] `revocation-heard` | a candidate drawn revocable still holds the node a cooperative revocation request was written into (and nothing wrote over it since), [`REQUEST_GRACE`] session timeouts (of its own awake time) later, without having heard it |
//! | [`ReadMark`] `read-mark` | a writer that told its application it downgraded to a reader (its own belief) has no read mark on its node as the server holds it: never written since its create, or written over by someone else and not written back within [`MARK_GRACE`] session timeouts (of its own awake time while it believes it holds: a writer whose lease ran out cannot write it back and keeps readers waiting, which is safe; nor is a node whose ACL an operator changed so that its owner may not write it, [`AclChange`](crate::swarm::AclChange): the core's `Unkept`) |
//! | [`Fencing`] `fencing` | (k = 1) the fenced resource accepts a write from a leader elected before the leader of a write it had already received (a revoked leader's term ends at the deletion) |
//! | [`TokensGrow`] `tokens-grow` | (k = 1) an `Elected` token is lower than the one before it, or equal but for another candidate (a revoked candidate's elections before it learns are not counted) |
//! | [`MultiLockProgress`] `multi-lock` | a liveness bound after the faults stop, a multi-lock (on a live session) is still acquiring or releasing: deadlocked, or a part stuck in its queue |
//! | [`Liveness`] `liveness` | from [`View::liveness_bound`] after the faults stop until the candidates are closed, fewer than `min(k, live)` leaders (foreign models counted by their own belief) |
//! | [`NoHerd`] `no-herd` | one server change (a deletion, a creation, a data change) makes more than k zkelect candidates (those the swarm drew with the `Parent` strategy left out: they herd by design) send a read that reaches the server (own-node watches, not-yet-informed revoked candidates, and machines whose watch the server set after the change — a shared session's older watch fired — excluded) |
//! | [`NoLeaks`] `no-leaks` | every process is closed or dead with its session gone, and the election path still has children other than the operator's persistent look-alikes |
//! | [`RefusedLeavesNothing`] `refused-leaves-nothing` | the session whose credentials the server refused at a reconnect ([`Refusal`](crate::swarm::Refusal)), or that zookeeper-async could not replay within the replay's bound, still owns a node after the step that reported the refusal |
//! | [`OneAnswer`] `one-answer` | a command is answered twice or never emitted, or (at the end) a live process has a command never answered |
//! | [`StaleReply`] `stale-reply` | a reply to a request the candidate no longer waits for changes its role |
//! | [`StartUp`] `start-up` | a client's start-up breaks its contract (with a member serving it takes longer than the grace, it gives the client a member that was silent or unresolvable, its bound is above the negotiated timeout), or a zookeeper-async host reports `Connected` with a bound above the timeout its session runs by on the member it is on |
//! | `time-advances` (the world's own, in [`World::step`](crate::world::World::step)) | [`STALL_STEPS`](crate::world::STALL_STEPS) steps at one virtual instant: something answers an input at once and again, and the run would never end |
//! | [`NoError`] `no-error` | a candidate reports a fatal error (nothing in the simulation should cause one but a bad chroot, on its sessions, and refused credentials, on the refused session after the refusal) |

//!
//! The checkers live by concept: `holders` (`safety`, `revocation`,
//! `fencing`, `tokens-grow`), `marks` (`read-mark`), `progress` (`liveness`, `no-herd`,
//! `no-storm`), `books` (`no-leaks`, `refused-leaves-nothing`,
//! `one-answer`, `stale-reply`, `no-error`), `observers`, `image` (`single-system-image`),
//! `startup` (`start-up`); `belief`
//! holds what they share.

mod belief;
mod books;
mod groups;
mod holders;
mod image;
mod marks;
mod observers;
mod progress;
mod startup;

pub use crate::invariant::{Event, Invariant, Kinds, Violation};
use crate::world::View;
pub use belief::{rule_of, REQUEST_GRACE, REVOKE_GRACE};
pub use books::{NoError, NoLeaks, OneAnswer, RefusedLeavesNothing, StaleReply};
pub use groups::MultiLockProgress;
pub use holders::{Fencing, Revocation, RevocationHeard, Safety, TokensGrow};
pub use image::SingleSystemImage;
pub use marks::{ReadMark, MARK_GRACE};
pub use observers::Observers;
pub use progress::{
    Liveness, NoHerd, NoStorm, STORM_PER_MACHINE, STORM_PER_OBSERVED, STORM_WINDOW,
};
pub use startup::StartUp;

/// A checker of a [`View`], as the world holds it.
pub type Checker = Box<dyn Invariant<View>>;

/// The standard checkers for a run.
pub fn standard() -> Vec<Checker> {
    vec![
        // Revocation first: past its grace a revoked leader also counts for
        // safety, and the more specific report is the useful one.
        Box::new(Revocation),
        Box::new(RevocationHeard),
        Box::new(ReadMark::default()),
        Box::new(Safety),
        Box::new(Fencing::default()),
        Box::new(TokensGrow::default()),
        Box::new(Liveness::default()),
        Box::new(MultiLockProgress),
        Box::new(NoHerd::default()),
        Box::new(NoLeaks::default()),
        Box::new(RefusedLeavesNothing),
        Box::new(OneAnswer::default()),
        Box::new(StaleReply),
        Box::new(NoError),
        Box::new(Observers),
        Box::new(SingleSystemImage),
        Box::new(StartUp),
        Box::new(NoStorm::default()),
    ]
}
