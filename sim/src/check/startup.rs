//! The clients' start-up and the session-timeout bound it gives the core
//! (`start-up`).

use crate::invariant::{Event, Holds, Invariant, Kinds};
use crate::world::View;

/// The start-up machine's contract (see [`crate::startup::check`]: with a
/// member serving it starts within the grace, it lists only members that
/// served or refused, its bound is no greater than the negotiated
/// timeout), and the bound it confirms at every connection: a
/// zookeeper-async host never reports a session timeout above the one its
/// session runs by on the member it is on (a member with a lower
/// `maxSessionTimeout` clamps it again when the client reconnects there).
/// A bound above it lets a lease outlast the session. Caught without the
/// machine's new ask at every connection (the `confirms-on-stale-ask`
/// canary).
#[derive(Debug, Default)]
pub struct StartUp;

impl Invariant<View> for StartUp {
    fn name(&self) -> &'static str {
        "start-up"
    }

    fn kinds(&self) -> Kinds {
        Kinds::STEP
    }

    fn check(&mut self, world: &View, _event: &Event<'_>) -> Result<(), String> {
        match world.start_up_violation() {
            Some(v) => Err(v.to_owned()),
            None => Ok(()),
        }
    }

    fn check_step(&mut self, world: &View) -> Result<Holds, String> {
        // Recording a violation bumps the counts: a pass holds until then.
        self.check(world, &Event::Step)
            .map(|()| Holds::UntilCountsChange)
    }
}
