//! Multi-locks finish what they start: none deadlocks.

use zkelect_core::Role;

use crate::invariant::{Event, Invariant, Kinds};
use crate::world::View;

/// Once the faults stop, every multi-lock that is acquiring holds or gives
/// up, and every release completes: a liveness bound after they stop, none
/// is still acquiring or releasing, unless it waits (with no deadline)
/// behind a part of a multi-lock that holds whole (their applications start
/// no new acquisition after the faults stop and hold on from the bound, and
/// their queues have no other machine, so only a cycle of multi-locks each
/// waiting for a lock another holds — a deadlock — or a part that never
/// joins or leaves its queue keeps one there). Multi-locks on a crashed process's
/// session, or with a part a fault closed, are not judged.
#[derive(Debug, Default)]
pub struct MultiLockProgress;

impl Invariant<View> for MultiLockProgress {
    fn name(&self) -> &'static str {
        "multi-lock"
    }

    fn kinds(&self) -> Kinds {
        Kinds::LIVENESS_DUE
    }

    fn check(&mut self, world: &View, event: &Event<'_>) -> Result<(), String> {
        if !matches!(event, Event::LivenessDue) {
            return Ok(());
        }
        let groups: Vec<_> = world.multi_locks().collect();
        // The multi-lock a machine is a part of, and whether it holds whole.
        let held_part = |pid: usize| {
            groups
                .iter()
                .any(|(lock, parts)| lock.is_held() && parts.contains(&pid))
        };
        for (g, (lock, parts)) in groups.iter().enumerate() {
            // A crashed session, or a part closed or failed for good (a
            // fault closed its machine): that multi-lock is over.
            let over = parts.iter().any(|&p| {
                let p = world.process(p);
                p.crashed || matches!(p.agent.role(), Role::Closed | Role::Failed)
            });
            if over || lock.is_held() || lock.is_idle() {
                continue;
            }
            // Acquiring: the first part that does not hold waits behind a
            // multi-lock that holds whole (it holds on from the bound: not
            // this one's fault), or the multi-lock is stuck.
            let waiting = parts
                .iter()
                .map(|&p| world.process(p))
                .find(|p| !p.agent.role().is_leader());
            let holders: Vec<usize> = waiting.as_ref().map_or(Vec::new(), |w| {
                world
                    .processes()
                    .filter(|o| o.queue == w.queue && o.agent.role().is_leader())
                    .map(|o| o.pid)
                    .collect()
            });
            let queued = waiting
                .as_ref()
                .is_some_and(|w| w.agent.role() == Role::Follower);
            if lock.deadline().is_none() && queued && holders.iter().any(|&h| held_part(h)) {
                continue;
            }
            let state: Vec<String> = parts
                .iter()
                .zip(lock.paths())
                .map(|(&pid, path)| {
                    let p = world.process(pid);
                    let holders: Vec<String> = world
                        .processes()
                        .filter(|o| o.queue == p.queue && o.agent.role().is_leader())
                        .map(|o| format!("p{}", o.pid))
                        .collect();
                    format!(
                        "{path}: p{pid} {:?} (held by {})",
                        p.agent.role(),
                        if holders.is_empty() {
                            "nobody".to_owned()
                        } else {
                            holders.join(", ")
                        }
                    )
                })
                .collect();
            return Err(format!(
                "multi-lock g{g} neither holds nor gave up a liveness bound after the faults stopped, nor waits behind one that holds: {}",
                state.join("; ")
            ));
        }
        Ok(())
    }
}
