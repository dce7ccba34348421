//! Runs a range of seeds under one fault mix on every core and counts every
//! violation (a sweep that does not stop at the first one): progress with
//! seeds/s and an ETA while it runs, then the failing seeds by checker, the
//! first failures' reports with their replay commands, and a non-zero exit
//! status if any seed failed.
//!
//! Run: `cargo run --release -p zkelect-sim --example sweep -- FROM..TO [all|pauses|lag|none] [--threads N] [--canary NAME]`
//! (a canary shows the failure path: its seeds fail, are reported, and the exit status is 1;
//! `ZKELECT_CANARY=NAME` works too, and `ZKELECT_SHOW=1` minimises the first failure's plan)
//!
//! Seeds are handed out in small chunks from one counter, so the threads stay
//! busy to the end; the outcome (which seeds fail, and how) does not depend on
//! the number of threads, only the wall time does.

// Wall time for progress and the summary only; the runs themselves take no clock.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use zkelect_sim::canary::Canary;
use zkelect_sim::run::{minimize, run_seed, RunOptions, RunReport};
use zkelect_sim::swarm::{FaultMix, Overrides};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Seeds a thread takes at a time: small enough to balance the last ones,
/// large enough that the counter is not contended.
const CHUNK: u64 = 64;

/// Failing seeds whose whole report (with the replay command) is printed.
const REPORTS: usize = 3;

/// What the threads found.
#[derive(Default)]
struct Found {
    /// Checker → failing seeds.
    by_invariant: BTreeMap<&'static str, Vec<u64>>,
    /// The lowest failing seeds' reports.
    reports: BTreeMap<u64, RunReport>,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let range = args
        .iter()
        .find(|a| a.contains(".."))
        .map_or("0..1000", String::as_str);
    let (from, to) = range.split_once("..").unwrap_or(("0", "1000"));
    let (from, to): (u64, u64) = (from.parse().unwrap_or(0), to.parse().unwrap_or(1000));
    let faults = args
        .iter()
        .find_map(|f| FaultMix::from_flag(f))
        .unwrap_or_default();
    let threads = args
        .iter()
        .position(|a| a == "--threads")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    // `--canary NAME` or `ZKELECT_CANARY=NAME`: sweep a canary instead of the
    // real candidate.
    let canary = args
        .iter()
        .position(|a| a == "--canary")
        .and_then(|i| args.get(i + 1))
        .cloned()
        .or_else(|| std::env::var("ZKELECT_CANARY").ok())
        .and_then(|c| Canary::from_flag(&c));
    // `ZKELECT_SHOW=1`: the first failing seed's report is minimised first.
    let minimise = std::env::var("ZKELECT_SHOW").is_ok();
    let options = RunOptions {
        overrides: Overrides {
            faults,
            ..Overrides::default()
        },
        canary,
        ..RunOptions::default()
    };
    let total = to.saturating_sub(from);
    println!(
        "sweep: {total} seeds {from}..{to} faults={} on {threads} threads",
        faults.flag()
    );

    let started = Instant::now();
    let next = AtomicU64::new(from);
    let done = AtomicU64::new(0);
    let found = Mutex::new(Found::default());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let start = next.fetch_add(CHUNK, Ordering::Relaxed);
                if start >= to {
                    break;
                }
                for seed in start..(start + CHUNK).min(to) {
                    let report = run_seed(seed, options);
                    if let Some(v) = &report.violation {
                        let mut found = found.lock().unwrap_or_else(|e| e.into_inner());
                        found
                            .by_invariant
                            .entry(v.invariant)
                            .or_default()
                            .push(seed);
                        found.reports.insert(seed, report);
                        if found.reports.len() > REPORTS {
                            found.reports.pop_last();
                        }
                    }
                }
                done.fetch_add((start + CHUNK).min(to) - start, Ordering::Relaxed);
            });
        }
        // Progress every ten seconds while the threads work.
        let mut last = Instant::now();
        while done.load(Ordering::Relaxed) < total {
            std::thread::sleep(Duration::from_millis(200));
            if last.elapsed() < Duration::from_secs(10) {
                continue;
            }
            last = Instant::now();
            let n = done.load(Ordering::Relaxed);
            let secs = started.elapsed().as_secs_f64();
            let rate = n as f64 / secs;
            let failed: usize = found
                .lock()
                .map_or(0, |f| f.by_invariant.values().map(Vec::len).sum());
            println!(
                "  {n}/{total} seeds, {rate:.0} seeds/s, {failed} failed, ETA {:.0} s",
                (total - n) as f64 / rate.max(1e-9)
            );
        }
    });

    let secs = started.elapsed().as_secs_f64();
    let found = found.into_inner().unwrap_or_else(|e| e.into_inner());
    let failed: usize = found.by_invariant.values().map(Vec::len).sum();
    println!(
        "{total} seeds {from}..{to} faults={}: {failed} violations, {secs:.0} s wall, {:.0} seeds/s on {threads} threads",
        faults.flag(),
        total as f64 / secs.max(1e-9)
    );
    for (invariant, mut seeds) in found.by_invariant {
        seeds.sort_unstable();
        let shown: Vec<String> = seeds.iter().take(10).map(u64::to_string).collect();
        println!(
            "  {invariant}: {} (seeds {})",
            seeds.len(),
            shown.join(", ")
        );
    }
    for (i, report) in found.reports.values().enumerate() {
        if minimise && i == 0 {
            let small = minimize(report).unwrap_or_else(|| report.clone());
            println!("\n{small}");
        } else {
            println!("\n{report}");
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
