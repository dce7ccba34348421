//! zkelect's fuzz targets, as plain functions of the fuzzer's bytes.
//!
//! Each target turns any bytes into an input for one part of zkelect, runs
//! it, and panics (a finding) if a promise breaks. The same functions run
//! under the coverage-guided engine (cargo-fuzz and libFuzzer: `sim/fuzz/`,
//! one one-line binary per target, started by `scripts/fuzz.sh TARGET`)
//! and under `cargo test` (`tests/corpus.rs` replays every file of
//! `fuzz/corpus/<target>/`), so every input the engine ever kept, and every
//! finding, is a regression test on the stable toolchain.
//!
//! | target | what it drives | the promise |
//! |---|---|---|
//! | `sim` | the simulator's entry ([`zkelect_sim::fuzz`]): a scenario, faults and the world's choices | every checker holds |
//! | `name` | node-name parsing and queue order ([`zkelect_core::name`]) | no panic; agrees with a simple reference parser and order |
//! | `candidate` | a [`Candidate`](zkelect_core::Candidate) fed arbitrary replies, events, intents and timeouts | no panic (debug assertions on); its promises hold |
//! | `observer` | an [`Observer`](zkelect_core::Observer) fed the same | no panic; every report is a well-formed queue |
//! | `connect` | a connect string and both transports' timeouts and delays | a value or a typed error before any traffic, never a panic; a parsed string prints back to itself |
//! | `session` | a [`Session`](zkelect_core::Session) of several machines over the simulator's server model, the simultaneous inputs of each instant in any order | virtual time always advances; no panic |
//! | `cli` | the `zkelect` command line ([`zkelect_cli::parse`]): subcommands, options and values drawn around the real ones, or any words | a value or a typed error with its documented exit code, never a panic, the same verdict twice; what is accepted is usable (connect string, path, time bounds, seeds) |
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod candidate;
pub mod cli;
pub mod connect;
pub mod name;
pub mod observer;
mod read;
pub mod session;

/// A fuzz target: any bytes in, a panic out if a promise breaks.
pub type Target = fn(&[u8]);

/// Every target by its name (the name of its binary in `sim/fuzz/` and of
/// its corpus folder).
pub const TARGETS: &[(&str, Target)] = &[
    ("sim", sim),
    ("name", name::run),
    ("candidate", candidate::run),
    ("observer", observer::run),
    ("session", session::run),
    ("connect", connect::run),
    ("cli", cli::run),
];

/// The `sim` target: [`zkelect_sim::fuzz::fuzz_one`], every checker on.
pub fn sim(data: &[u8]) {
    zkelect_sim::fuzz::fuzz_one(data);
}

/// The target called `name`, if there is one.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}
