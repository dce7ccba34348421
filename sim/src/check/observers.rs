//! Observers report the queue as the server has it (`observers`).

use std::collections::BTreeMap;

use zkelect_core::FencingToken;

use crate::invariant::{Event, Invariant, Kinds};
use crate::world::View;

/// Once the world is quiet ([`Event::Quiet`]: the end of the settled phase,
/// before anyone closes), every live observer has reported, and its
/// participant list is the server's queue: its live (ephemeral) nodes in
/// queue order, each with its czxid as token and whether the recipe says it
/// holds ([`View::queue_truth`]). Observers are never contenders: the
/// other checkers leave them out.
#[derive(Debug, Default)]
pub struct Observers;

impl Invariant<View> for Observers {
    fn name(&self) -> &'static str {
        "observers"
    }

    fn kinds(&self) -> Kinds {
        Kinds::QUIET
    }

    fn check(&mut self, world: &View, event: &Event<'_>) -> Result<(), String> {
        if !matches!(event, Event::Quiet) {
            return Ok(());
        }
        let mut truths: BTreeMap<usize, Vec<(String, FencingToken, bool)>> = BTreeMap::new();
        let nothing = Vec::new();
        for p in world.processes().filter(|p| p.observer && !p.crashed) {
            // Under a bad chroot the queue's path is missing, for good: the
            // truth there is an empty queue.
            let truth = match world.bad_chroot(p.pid) {
                Some(_) => &nothing,
                None => truths
                    .entry(p.queue)
                    .or_insert_with(|| world.queue_truth_of(p.queue)),
            };
            // A closed observer keeps its last list; it is no longer live.
            let Some(o) = p
                .agent
                .observer()
                .filter(|o| !o.is_closed() && !o.is_failed())
            else {
                continue;
            };
            let seen: Vec<(String, FencingToken, bool)> = o
                .participants()
                .iter()
                .map(|x| (x.node.clone(), x.token, x.holds))
                .collect();
            if !o.has_reported() || seen != *truth {
                return Err(format!(
                    "observer p{} of {} (on p{}'s session) reports {seen:?} (reported: {}), the queue is {truth:?}",
                    p.pid,
                    world.queues()[p.queue].path,
                    p.host,
                    o.has_reported()
                ));
            }
        }
        Ok(())
    }
}
