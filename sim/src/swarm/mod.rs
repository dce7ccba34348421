//! What one seed decides: the scenario (VOPR's "swarm" testing) and its fault plan.
//!
//! By concept: `scenario` (the [`Swarm`] and how a seed draws it), `plan`
//! (the faults), `env` (the world around the candidates), `recipe`
//! (the queue's recipe), `hosting` (who
//! runs on whose session), `knobs` (the world's settings and the drawn
//! `ConfigBuilder` options), `sessions` (each core session's and machine's
//! settings). Each imports its siblings, never this module.

mod env;
mod hosting;
mod knobs;
mod multi;
mod plan;
mod recipe;
mod scenario;
mod sessions;

pub use crate::foreign::Scheme;
pub use crate::rng::SimRng;
pub use env::{AclChange, BadChroot, ChrootRoot, Env, Refusal, TICK};
pub use hosting::MultiLockDraw;
pub use hosting::{Hosting, SideMachine, SideQueue};
pub use knobs::{AclDraw, Knobs, Options, ProcessOptions, IDENTITY};
pub use plan::{Fault, FaultMix};
pub use recipe::Queue;
pub use scenario::{Overrides, Swarm};
pub use sessions::{MachineSettings, SessionSettings, CLOSE_TIMEOUT};
