//! A digest of many seeds' outcomes, to show a refactor kept behaviour: for
//! every fault mix and every canary, each seed's verdict (which checker, at
//! which step), its step and server-operation counts and, unless `--verdicts`
//! is given, its trace hash are folded into one FNV-1a digest per row.
//!
//! Run: `cargo run --release -p zkelect-sim --example fingerprint -- [SEEDS] [--verdicts] [--per-seed]`
//! (SEEDS defaults to 300). Compare the output before and after a change.
//! With `--per-seed`, each seed's own line (row, seed, trace hash, steps,
//! server operations, elections, verdict) comes before its row's digest:
//! a diff of two such outputs names the seeds a change moved, to show that
//! a new draw moved only the seeds that draw it.

use zkelect_sim::canary::Canary;
use zkelect_sim::run::{run_seed, RunOptions};
use zkelect_sim::swarm::{FaultMix, Overrides};

fn fold(digest: &mut u64, value: u64) {
    for byte in value.to_le_bytes() {
        *digest ^= u64::from(byte);
        *digest = digest.wrapping_mul(0x0100_0000_01b3);
    }
}

fn row(label: &str, options: RunOptions, seeds: u64, with_hash: bool, per_seed: bool) {
    let mut digest = 0xcbf2_9ce4_8422_2325_u64;
    let mut failures = 0;
    for seed in 0..seeds {
        let report = run_seed(seed, options);
        if with_hash {
            fold(&mut digest, report.hash);
        }
        fold(&mut digest, report.stats.steps);
        fold(&mut digest, report.stats.server_ops);
        fold(&mut digest, report.stats.elections);
        if per_seed {
            println!(
                "{label} {seed} {:016x} {} {} {} {}",
                report.hash,
                report.stats.steps,
                report.stats.server_ops,
                report.stats.elections,
                report
                    .violation
                    .as_ref()
                    .map_or("-".to_owned(), |v| format!("{}@{}", v.invariant, v.step))
            );
        }
        if let Some(v) = &report.violation {
            failures += 1;
            fold(&mut digest, v.step);
            for byte in v.invariant.bytes() {
                fold(&mut digest, u64::from(byte));
            }
        }
    }
    println!("{label:<28} {seeds} seeds, {failures:>4} violations, digest {digest:016x}");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seeds = args
        .iter()
        .find_map(|a| a.parse::<u64>().ok())
        .unwrap_or(300);
    let with_hash = !args.iter().any(|a| a == "--verdicts");
    let per_seed = args.iter().any(|a| a == "--per-seed");
    for faults in FaultMix::ALL {
        let options = RunOptions {
            overrides: Overrides {
                faults,
                ..Overrides::default()
            },
            ..RunOptions::default()
        };
        row(faults.flag(), options, seeds, with_hash, per_seed);
    }
    for canary in Canary::ALL {
        let options = RunOptions {
            canary: Some(canary),
            ..RunOptions::default()
        };
        row(canary.flag(), options, seeds / 5, with_hash, per_seed);
    }
}
