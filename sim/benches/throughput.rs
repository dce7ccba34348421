//! Simulator throughput on one core: simulated ZooKeeper operations per second
// This file measures wall time around whole simulated runs; the simulation itself never reads a clock.
#![allow(clippy::disallowed_methods)]
//! (requests the model applied, inside whole seeded runs with faults) and seeds
//! per second.
//!
//! Run: `cargo bench -p zkelect-sim --bench throughput`

use std::time::Instant;

use zkelect_sim::run::{run_seed, RunOptions};

fn main() {
    let seeds = 0..400u64;
    let n = seeds.end - seeds.start;
    // Warm up caches and the allocator.
    for seed in 0..20 {
        let _ = run_seed(seed, RunOptions::default());
    }
    let started = Instant::now();
    let mut ops = 0u64;
    let mut steps = 0u64;
    for seed in seeds {
        let report = run_seed(seed, RunOptions::default());
        assert!(report.violation.is_none(), "{report}");
        ops += report.stats.server_ops;
        steps += report.stats.steps;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "sim: {n} seeds with mixed faults in {secs:.2}s: {:.0} seeds/s, {:.0} simulated ZooKeeper ops/s, {:.0} events/s ({ops} ops, {steps} events)",
        n as f64 / secs,
        ops as f64 / secs,
        steps as f64 / secs
    );
}
