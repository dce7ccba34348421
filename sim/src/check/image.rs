//! ZooKeeper's single system image, as each client sees it
//! (`single-system-image`).

use crate::invariant::{Event, Holds, Invariant, Kinds};
use crate::world::View;

/// ZooKeeper's single system image, as each client sees it: "a client will
/// never see an older view of the system even if the client fails over to a
/// different server with the same session" (Programmer's Guide, "ZooKeeper
/// Consistency Guarantees"). Every reply that reaches a process carries the
/// zxid of the member that served it; it must not be older than the newest
/// the process had received on the same session. Trivially holds with one
/// server; with an ensemble it catches a client that lets a member behind
/// it serve it (the `trusts-behind` canary).
#[derive(Debug, Default)]
pub struct SingleSystemImage;

impl Invariant<View> for SingleSystemImage {
    fn name(&self) -> &'static str {
        "single-system-image"
    }

    fn kinds(&self) -> Kinds {
        // The violation is recorded as a reply arrives, just before the
        // client hands it on (`Answered`): no other event can see it first.
        Kinds::ANSWERED | Kinds::STEP
    }

    fn check(&mut self, world: &View, _event: &Event<'_>) -> Result<(), String> {
        match world.server().violation() {
            Some(v) => Err(v.to_owned()),
            None => Ok(()),
        }
    }

    fn check_step(&mut self, world: &View) -> Result<Holds, String> {
        // A violation is recorded only as a reply arrives, and the client
        // library then hands the reply to its machine (`Answered`, which
        // this checker judges first, in the same step): a pass of a step
        // adds nothing until then.
        self.check(world, &Event::Step)
            .map(|()| Holds::UntilCountsChange)
    }
}
