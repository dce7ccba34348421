//! # zkelect-sim
//!
//! A deterministic simulator for zkelect: an in-memory ZooKeeper ([`zk::ZkModel`])
//! with faithful semantics, a client-library model per process (pings, client-side
//! disconnect detection, reconnect, expiry learned on reconnect), seeded fault
//! injection ([`swarm`]), a virtual clock, invariant checkers after every step
//! ([`world`]), and a trace whose hash proves the run reproducible ([`trace`]).
//! One `u64` seed gives one exact run; a failing run prints its seed, its fault
//! plan, the last trace lines and the command that replays it.
//!
//! ```
//! use zkelect_sim::run::{run_seed, RunOptions};
//! let report = run_seed(7, RunOptions::default());
//! assert!(report.violation.is_none(), "{report}");
//! assert_eq!(report.hash, run_seed(7, RunOptions::default()).hash);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod canary;
pub mod check;
pub mod client;
pub mod rng;
pub mod run;
pub mod swarm;
pub mod trace;
pub mod world;
pub mod zk;
