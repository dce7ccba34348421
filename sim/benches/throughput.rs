//! Simulator throughput on one core, printed as `sim: …` lines:
//!
//! - the ZooKeeper model alone: requests applied per second, in the mix an
//!   election makes (create ephemeral-sequential, list, getData with a watch,
//!   delete, which fires the watch);
//! - whole seeded runs (candidates, client libraries, faults, every checker after
//!   every step): seeds per second, and simulated ZooKeeper operations per second
//!   (requests the model applied), with mixed faults and with process pauses:
//!   2,000 seeds each, timed in passes of 400 on this thread's CPU clock, so
//!   the total rate comes with the spread of its passes (a busy machine shows
//!   as a wide one).
//!
//! Run: `cargo bench -p zkelect-sim --bench throughput`
// This file measures wall time around simulated work; the simulation itself never reads a clock.
#![allow(clippy::disallowed_methods)]

use std::collections::VecDeque;
use std::hint::black_box;
use std::time::{Duration, Instant};

use zkelect_core::{Acl, CreateMode, Reply, Request, Timestamp};
use zkelect_sim::run::{run_seed, RunOptions};
use zkelect_sim::swarm::{FaultMix, Overrides};
use zkelect_sim::zk::ZkModel;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The model alone: 20 sessions take turns joining and leaving an election.
fn model_ops_per_second() -> (u64, f64) {
    let mut zk = ZkModel::default();
    let now = Timestamp::ZERO;
    let sessions: Vec<_> = (0..20)
        .map(|_| zk.open_session(now, Duration::from_secs(4), None).0)
        .collect();
    let parent = "/e".to_owned();
    zk.apply(
        now,
        sessions[0],
        &Request::Create {
            path: parent.clone(),
            data: vec![],
            mode: CreateMode::Persistent,
            acl: Acl::Open,
        },
    )
    .0
    .unwrap();
    let create = Request::Create {
        path: "/e/n_".into(),
        data: b"candidate".to_vec(),
        mode: CreateMode::EphemeralSequential,
        acl: Acl::Open,
    };
    let list = Request::GetChildren {
        path: parent,
        watch: false,
    };
    let rounds = 200_000u64;
    let started = Instant::now();
    // A queue of 20 nodes: each round one joins at the back (create, list,
    // watch its predecessor) and the front one leaves (delete, firing the
    // watch of the node behind it).
    let mut queue: VecDeque<String> = VecDeque::new();
    for i in 0..rounds {
        let s = sessions[(i % 20) as usize];
        let Ok(Reply::Created { path, .. }) = zk.apply(now, s, &create).0 else {
            panic!("create failed");
        };
        black_box(zk.apply(now, s, &list).0.ok());
        if let Some(prev) = queue.back() {
            let watch = Request::GetData {
                path: prev.clone(),
                watch: true,
            };
            black_box(zk.apply(now, s, &watch).0.ok());
        }
        queue.push_back(path);
        if queue.len() > 20 {
            let front = queue.pop_front().unwrap_or_default();
            let (r, fired) = zk.apply(
                now,
                s,
                &Request::Delete {
                    path: front,
                    version: None,
                },
            );
            black_box((r.ok(), fired));
        }
    }
    let secs = started.elapsed().as_secs_f64();
    (zk.ops(), secs)
}

/// This thread's CPU time so far, from Linux's `/proc/thread-self/schedstat`
/// (nanoseconds on a CPU): on a shared machine wall time also counts the time
/// other processes held the core, so seeds/s are reported per CPU-second too.
fn cpu_time() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// Seeds per pass: a pass is timed on its own, so the spread between passes
/// shows how much the machine disturbed the figure.
const PASS: u64 = 400;

fn whole_runs(label: &str, faults: FaultMix, seeds: std::ops::Range<u64>) {
    let options = RunOptions {
        overrides: Overrides {
            faults,
            ..Overrides::default()
        },
        ..RunOptions::default()
    };
    // Warm up caches and the allocator.
    for seed in 0..20 {
        let _ = run_seed(seed, options);
    }
    let n = seeds.end - seeds.start;
    let started = Instant::now();
    let (mut ops, mut steps) = (0u64, 0u64);
    let (mut cpu_total, mut passes) = (Some(Duration::ZERO), Vec::new());
    let mut first = seeds.start;
    while first < seeds.end {
        let pass = first..(first + PASS).min(seeds.end);
        let cpu_started = cpu_time();
        for seed in pass.clone() {
            let report = run_seed(seed, options);
            assert!(report.violation.is_none(), "{report}");
            ops += report.stats.server_ops;
            steps += report.stats.steps;
        }
        match (cpu_started, cpu_time()) {
            (Some(a), Some(b)) => {
                let cpu = b.saturating_sub(a);
                cpu_total = cpu_total.map(|t| t + cpu);
                passes.push((pass.end - pass.start) as f64 / cpu.as_secs_f64());
            }
            _ => cpu_total = None,
        }
        first = pass.end;
    }
    let secs = started.elapsed().as_secs_f64();
    let cpu = match cpu_total {
        Some(total) if !passes.is_empty() => {
            let low = passes.iter().copied().fold(f64::INFINITY, f64::min);
            let high = passes.iter().copied().fold(0.0, f64::max);
            format!(
                ", {:.0} seeds per CPU-second ({} passes of {PASS}: {low:.0}–{high:.0})",
                n as f64 / total.as_secs_f64(),
                passes.len()
            )
        }
        _ => String::new(),
    };
    println!(
        "sim: {n} seeds with {label} in {secs:.2}s: {:.0} seeds/s{cpu}, {:.0} simulated ZooKeeper ops/s, {:.0} events/s ({ops} ops, {steps} events)",
        n as f64 / secs,
        ops as f64 / secs,
        steps as f64 / secs
    );
}

fn main() {
    let (ops, secs) = model_ops_per_second();
    println!(
        "sim: ZooKeeper model alone: {ops} requests in {secs:.2}s: {:.0} ops/s (a queue of 20: create-sequential, list, getData+watch on the predecessor, delete the front firing a watch)",
        ops as f64 / secs
    );
    whole_runs("mixed faults", FaultMix::Standard, 0..2000);
    whole_runs("process pauses", FaultMix::WithPauses, 10_000..12_000);
}
