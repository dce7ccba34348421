//! # zkelect-sim
//!
//! A deterministic simulator for zkelect. One `u64` seed picks a scenario and
//! runs it in virtual time; the same seed always gives the same trace hash.
//!
//! | module | holds |
//! |---|---|
//! | [`zk`] | [`ZkModel`](zk::ZkModel): an in-memory ZooKeeper server, sans-IO, usable without candidates |
//! | [`client`] | the client-library rules: FIFO links, disconnect detection, reconnect, expiry learned on reconnect |
//! | [`choice`] | [`Choices`](choice::Choices): every nondeterministic choice the world makes, from a seed, a fuzzer's bytes or a search's script |
//! | [`fuzz`] | the fuzz entry: bytes → scenario and choices → every checker |
//! | [`ensemble`] | a multi-server ZooKeeper: lagging followers, reads from the connected server, `sync`, moving sessions, members cut off; its client-side checker |
//! | [`server`] | [`Server`](server::Server): the world's ZooKeeper, one server or an ensemble of 3 or 5 with member faults, members down at start and a member with a lower `maxSessionTimeout`; the `single-system-image` checker |
//! | [`startup`] | the clients' start-up against the members as drawn, by the core's start-up machine; its asks after the plan, with their round trips; the start-up's contract |
//! | [`explore`] | exhaustive small scopes: depth-first search over the choice points |
//! | [`rng`] | [`SimRng`](rng::SimRng): ChaCha8, one stream per subsystem |
//! | [`foreign`] | models of Curator's LeaderLatch and kazoo's Lock/Election, and [`Foreign`](foreign::Foreign): one of them, as the world drives it |
//! | [`swarm`] | what a seed picks: candidates, k, timeouts, fault rates and the fault plan ([`Swarm`](swarm::Swarm), [`Fault`](swarm::Fault), [`Knobs`](swarm::Knobs)) |
//! | [`canary`] | deliberately broken candidates, one per checker |
//! | [`net`] | [`Net`](net::Net): each client's link, partitions and slow links as a rule → verdict per message |
//! | [`queue`] | [`EventQueue`](queue::EventQueue): a heap of (time, sequence, slot) over a slab of events |
//! | [`world`] | [`World`](world::World): the event heap, the processes, the fenced resource, the phases; its client libraries (`world/client.rs`) and faults (`world/faults.rs`) |
//! | [`invariant`] | [`Event`](invariant::Event), [`Invariant`](invariant::Invariant), [`Violation`](invariant::Violation): what the world reports and checkers judge |
//! | [`check`] | the checkers run after every step (with [`server`]'s `single-system-image`) |
//! | [`trace`] | one fixed-column line per step, hashed a word at a time |
//! | [`run`] | [`run_seed`](run::run_seed), sweeps, the failure report with its replay lines, the plan minimiser |
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
pub mod choice;
pub mod client;
pub mod ensemble;
pub mod explore;
pub mod foreign;
pub mod fuzz;
pub mod invariant;
pub mod net;
pub mod queue;
pub mod rng;
pub mod run;
pub mod server;
pub mod startup;
pub mod swarm;
pub mod timeline;
pub mod trace;
pub mod world;
pub mod zk;
