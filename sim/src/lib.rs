//! # zkelect-sim
//!
//! A deterministic simulator for zkelect: an in-memory ZooKeeper ([`zk::ZkModel`])
//! with faithful semantics, a client-library model per process (pings, client-side
//! disconnect detection, reconnect, expiry learned on reconnect), seeded fault
//! injection, a virtual clock, invariant checkers after every step, and a trace
//! whose hash proves the run reproducible. One `u64` seed gives one exact run;
//! a failing run prints its seed and how to replay it.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod zk;
