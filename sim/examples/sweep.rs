//! Runs a range of seeds under one fault mix and counts every violation (a
//! sweep that does not stop at the first one), listing the failing seeds.
//!
//! Run: `cargo run --release -p zkelect-sim --example sweep -- FROM..TO [all|pauses|lag|none]`

use std::collections::BTreeMap;
use std::time::Instant;

use zkelect_sim::run::{run_seed, RunOptions};
use zkelect_sim::swarm::{FaultMix, Overrides};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let range = args.first().map_or("0..1000", String::as_str);
    let (from, to) = range.split_once("..").unwrap_or(("0", "1000"));
    let (from, to): (u64, u64) = (from.parse().unwrap_or(0), to.parse().unwrap_or(1000));
    let faults = args
        .get(1)
        .and_then(|f| FaultMix::from_flag(f))
        .unwrap_or_default();
    let options = RunOptions {
        overrides: Overrides {
            faults,
            ..Overrides::default()
        },
        // `ZKELECT_CANARY=<flag>`: sweep a canary instead of the real candidate.
        canary: std::env::var("ZKELECT_CANARY")
            .ok()
            .and_then(|f| zkelect_sim::canary::Canary::from_flag(&f)),
        ..RunOptions::default()
    };
    // Wall time for the report only; the runs themselves take no clock.
    #[allow(clippy::disallowed_methods)]
    let started = Instant::now();
    let mut failures: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    // `ZKELECT_SHOW=1`: print the first failing seed's report (minimised) too.
    let show = std::env::var("ZKELECT_SHOW").is_ok();
    for seed in from..to {
        let report = run_seed(seed, options);
        if let Some(v) = &report.violation {
            if show && failures.is_empty() {
                let small = zkelect_sim::run::minimize(&report).unwrap_or_else(|| report.clone());
                println!("{small}");
            }
            failures.entry(v.invariant).or_default().push(seed);
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let total: usize = failures.values().map(Vec::len).sum();
    println!(
        "{} seeds {from}..{to} faults={}: {total} violations, {secs:.0} s, {:.0} seeds/s",
        to - from,
        faults.flag(),
        (to - from) as f64 / secs
    );
    for (invariant, seeds) in failures {
        let shown: Vec<String> = seeds.iter().take(10).map(u64::to_string).collect();
        println!(
            "  {invariant}: {} (seeds {})",
            seeds.len(),
            shown.join(", ")
        );
    }
}
