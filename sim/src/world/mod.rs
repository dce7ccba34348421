//! The simulated world: candidates, their client libraries, the links, the
//! server, the clock, the fenced resource — and the checkers, run after every
//! step.
//!
//! # The step
//!
//! The world is an event heap keyed by `(virtual time, sequence number)`. A step
//! pops the earliest event, moves the clock to it, and delivers it: to the
//! server model (a request, a ping), to a process's client library (a reply, a
//! watch event, its heartbeat tick, a reconnect attempt), to a candidate (its
//! timer), or to the world (a fault, the end of a pause). Whenever a candidate
//! handled something, the world drains it — notices, then commands, then
//! `poll_timeout` — and sends what it asked for. Every command is answered
//! exactly once: by the server's reply, or with `ConnectionLoss` by the client
//! library when the connection drops or the client is closed first. After every
//! step every [`Invariant`](crate::invariant::Invariant) runs.
//!
//! # The client library
//!
//! See [`crate::client`]: pings and the silence check of the library the
//! process runs ([`Library`](crate::client::Library): zookeeper-client or
//! zookeeper-async for a zkelect candidate, by the seed's `session_ids` knob;
//! the Java client or kazoo for a foreign model), reconnect, `Expired` learned on
//! reconnecting, watches lost with the connection. Messages on one connection
//! are FIFO in each direction; with `reorder` a reply may overtake watch events
//! sent before it (zookeeper-async does this). A paused process (candidate and
//! client library alike) handles nothing until it resumes, then its backlog in
//! order; the server and everyone else go on meanwhile.
//!
//! # The world around the candidates
//!
//! The swarm's [`Env`](crate::swarm::Env) sets the server's session limits,
//! the candidates' interop scheme, the foreign contenders (processes that run
//! a model of Curator's or kazoo's recipe, [`Foreign`](crate::foreign::Foreign),
//! pids after the zkelect candidates) and the persistent look-alikes an
//! operator creates before anyone joins (and, by
//! [`Fault::Lookalike`](crate::swarm::Fault::Lookalike), later). Canaries
//! apply to zkelect candidates only.
//!
//! # Phases
//!
//! Chaos (the fault plan), then the faults stop ([`Phase::Healed`]); after
//! [`View::liveness_bound`] the leaders must be there and stay
//! ([`Phase::Settled`]); then every candidate closes ([`Phase::Closing`]) and,
//! once dead sessions had time to expire, the run ends with the leak check.
//!
//! # Its parts
//!
//! [`View`] is what checkers read; [`World`] is the view with its engine
//! around it (`engine`: the event queue, the loop, the step). The other
//! modules add the engine's behaviour by concept: `spawn` (starting
//! processes), `deliver` (one event to its handler), `client` (the client
//! library), `startup` (a zookeeper-async host's start-up machine after
//! its plan: its asks, and the `Connected` that waits for its bound),
//! `hosting` (the core session each zkelect
//! process runs on, driven as the library's pump drives it; `told` holds
//! what one drain of it told), `faults`, `app`
//! (the application around each machine), `judges` (running the checkers),
//! `census` (the counts the checkers read). Each imports its siblings,
//! never this module, so the imports have no cycle.

mod agent;
mod app;
mod census;
mod client;
mod deliver;
mod engine;
mod ev;
mod faults;
mod hosting;
mod judges;
mod multi;
mod proc;
mod replay;
mod spawn;
mod spec;
mod startup;
mod stats;
mod text;
mod told;
mod view;

pub use crate::invariant::Violation;
pub use agent::Agent;
pub use census::Census;
pub use engine::{World, STALL_STEPS};
pub use spec::{Phase, QueueSpec, EVENT_LAG_MAX_MS, PATH, SETTLE};
pub use stats::RunStats;
pub use view::{AclChanged, Process, Refused, View};
#[cfg(feature = "planted")]
pub use zkelect_core::Planted;
