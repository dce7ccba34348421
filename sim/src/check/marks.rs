//! A downgraded writer's read mark is on its node (`read-mark`).

use std::collections::BTreeMap;

use zkelect_core::config::is_downgraded;
use zkelect_core::{Notice, Role, SessionId, Timestamp};

use crate::invariant::{Event, Holds, Invariant, Kinds};
use crate::world::View;

/// How many session timeouts a downgraded writer's node may stay unmarked
/// after someone else's write took its mark away (a revocation request,
/// which a revoker writes blind, or an operator's write), while the writer
/// hears of it and writes the mark back. Two, as for hearing a revocation
/// request ([`REQUEST_GRACE`](super::REQUEST_GRACE)), and for the same
/// reasons: the write may come while the writer is cut off, and its read
/// or its write back may be cut off again.
pub const MARK_GRACE: u32 = 2;

/// A zkelect writer that told its application it downgraded to a reader
/// ([`Notice::Downgraded`], and [`Candidate::is_downgraded`] since: its own
/// belief, not a reading of the queue) has its read mark on its node, as the
/// server holds it, so that a reader behind it that lists the queue reads
/// past it, and an observer shows a reader.
///
/// The node's data carries the mark, or the node is not there (gone, or
/// another session's: the writer learns of that on its own), or someone
/// else wrote over the mark: zkelect's own writes of the node are marks,
/// so an unmarked node written since its create was written by another.
/// That is undone within [`MARK_GRACE`] session timeouts of the writer's
/// awake time. A node never written since its create was never marked: a
/// violation at once. A node whose ACL an operator changed so that its
/// owner cannot write it ([`AclChange`](crate::swarm::AclChange)) is left
/// out: the owner's write of the mark back is refused, and the core's
/// documented end (`Unkept`: it reads only, the queue sees a writer again,
/// readers behind wait) is safe.
///
/// [`Candidate::is_downgraded`]: zkelect_core::Candidate::is_downgraded
#[derive(Debug, Default)]
pub struct ReadMark {
    /// The processes that told their application they downgraded and
    /// still believe it, each with the moment its node was first seen
    /// written over (unmarked) since it was last seen marked.
    writers: BTreeMap<usize, Option<Timestamp>>,
}

impl Invariant<View> for ReadMark {
    fn name(&self) -> &'static str {
        "read-mark"
    }

    fn kinds(&self) -> Kinds {
        Kinds::STEP | Kinds::NOTICE
    }

    fn check(&mut self, _world: &View, event: &Event<'_>) -> Result<(), String> {
        if let Event::Notice {
            pid,
            notice: Notice::Downgraded,
        } = event
        {
            self.writers.insert(*pid, None);
        }
        Ok(())
    }

    /// Only a `Downgraded` notice adds a writer to look at; every other
    /// notice leaves its passes as they were (a re-ask after each was most
    /// of what this checker cost a run with no downgrade).
    fn restep_after(&self, event: &Event<'_>) -> bool {
        matches!(
            event,
            Event::Notice {
                notice: Notice::Downgraded,
                ..
            }
        )
    }

    fn check_step(&mut self, world: &View) -> Result<Holds, String> {
        // Most runs have no downgraded writer: nothing to look at until a
        // `Downgraded` notice, which the world follows by asking again
        // (`restep_after`). Saying `ThisStep` here would make the world ask
        // every checker after every step, a third of a run's time.
        if self.writers.is_empty() {
            return Ok(Holds::UntilCountsChange);
        }
        let now = world.now();
        // While every writer's node is marked (or not its own), the pass
        // reads only what the step key covers: the writers' processes (the
        // census generation) and the server's nodes (its zxid). A node
        // written over starts the grace clock, which reads the time and
        // the pauses: then the pass holds for this step only.
        let mut result = Ok(Holds::UntilChange);
        self.writers.retain(|&pid, written_over| {
            let p = world.process(pid);
            let Some(c) = p.candidate.filter(|c| c.is_downgraded() && !p.crashed) else {
                return false;
            };
            // Out of touch with the server for long enough, a holder stops
            // believing it holds (its lease ran out), and it cannot write
            // the mark back until it is in touch again: its node unmarked
            // then keeps readers waiting, which is safe. The grace counts
            // while it believes it holds, as for hearing a revocation
            // request (`revocation-heard`).
            if !matches!(p.agent.role(), Role::Leader(_)) {
                *written_over = None;
                return true;
            }
            if result.is_err() {
                return true;
            }
            let Some(node) = c.node() else {
                return true;
            };
            let path = format!("{}/{node}", world.queues()[p.queue].path);
            let zk = world.zk();
            let Some(stat) = zk
                .stat(&path)
                .filter(|s| Some(SessionId(s.ephemeral_owner)) == p.session_id)
            else {
                *written_over = None;
                return true;
            };
            // An operator changed the node's ACL so that its owner cannot
            // write it (`AclChange`): the core's documented end is
            // `Unkept`, reading only while the queue sees a writer again,
            // so readers behind wait, which is safe.
            if p.session_id.is_some_and(|s| !zk.may_write(s, &path)) {
                *written_over = None;
                return true;
            }
            if zk.data(&path).is_some_and(is_downgraded) {
                *written_over = None;
                return true;
            }
            if stat.version == 0 {
                result = Err(format!(
                    "p{pid} told its application it downgraded, and its node {path} was never marked: readers behind wait for a writer"
                ));
                return true;
            }
            result = Ok(Holds::ThisStep);
            let since = (*written_over.get_or_insert(now)).max(p.resumed_at);
            if !p.paused && now >= since + p.session_timeout * MARK_GRACE {
                result = Err(format!(
                    "p{pid} believes it downgraded, and its node {path} has carried no mark since {since} (written over, version {}): readers behind wait for a writer",
                    stat.version
                ));
            }
            true
        });
        result
    }
}
