//! The swarm: thousands of seeded schedules, every checker after every step.
// The sweeps report their wall time; the simulation itself never reads a clock.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

use zkelect_sim::run::{minimize, run_seed, RunOptions};
use zkelect_sim::swarm::{Canary, FaultMix, Overrides};

fn seeds(default: std::ops::Range<u64>) -> std::ops::Range<u64> {
    std::env::var("ZKELECT_SEEDS")
        .ok()
        .and_then(|s| {
            let (a, b) = s.split_once("..")?;
            Some(a.parse().ok()?..b.parse().ok()?)
        })
        .unwrap_or(default)
}

fn sweep(range: std::ops::Range<u64>, overrides: Overrides) -> (u64, std::time::Duration) {
    let started = Instant::now();
    let mut steps = 0;
    for seed in range {
        let report = run_seed(
            seed,
            RunOptions {
                overrides,
                ..RunOptions::default()
            },
        );
        if report.violation.is_some() {
            let small = minimize(&report).unwrap_or(report);
            panic!("{small}");
        }
        steps += report.stats.steps;
    }
    (steps, started.elapsed())
}

#[test]
fn swarm_with_mixed_faults_holds_every_invariant() {
    let range = seeds(0..1_500);
    let n = range.end - range.start;
    let (steps, took) = sweep(range, Overrides::default());
    eprintln!("{n} seeds with mixed faults, {steps} steps, {took:?}");
}

/// Replays one seed with its whole trace: `ZKELECT_SEED=N cargo test -p zkelect-sim --release --test swarm replay -- --nocapture`.
/// Without the variable it replays seed 1 and checks it twice for the same hash.
#[test]
fn replay() {
    let seed = std::env::var("ZKELECT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let canary = match std::env::var("ZKELECT_CANARY").as_deref() {
        Ok("ignores-disconnect") => Some(Canary::IgnoresDisconnect),
        Ok("unprotected") => Some(Canary::Unprotected),
        Ok("parent-watch") => Some(Canary::ParentWatch),
        _ => None,
    };
    let faults = if std::env::var("ZKELECT_PAUSES").is_ok() {
        FaultMix::WithPauses
    } else {
        FaultMix::Standard
    };
    let options = RunOptions {
        overrides: Overrides {
            faults,
            ..Overrides::default()
        },
        canary,
        keep_trace: true,
    };
    let report = run_seed(seed, options);
    if let Some(lines) = &report.lines {
        let only = std::env::var("ZKELECT_GREP").unwrap_or_default();
        for line in lines.iter().filter(|l| l.contains(&only)) {
            println!("{line}");
        }
    }
    println!("{report}");
    assert_eq!(
        run_seed(seed, options).hash,
        report.hash,
        "same seed, same trace"
    );
    if canary.is_none() {
        assert!(report.violation.is_none(), "{report}");
    }
}

#[test]
fn pauses_never_let_a_deposed_leader_write_to_the_fenced_resource() {
    let range = seeds(10_000..11_200);
    let n = range.end - range.start;
    let overrides = Overrides {
        faults: FaultMix::WithPauses,
        ..Overrides::default()
    };
    let (steps, took) = sweep(range, overrides);
    eprintln!("{n} seeds with process pauses, {steps} steps, {took:?}");
}

#[test]
fn calm_runs_elect_and_hand_over_with_k_one_or_two() {
    for leaders in [1, 2] {
        let overrides = Overrides {
            faults: FaultMix::None,
            leaders: Some(leaders),
            ..Overrides::default()
        };
        sweep(20_000..20_100, overrides);
    }
}

#[test]
fn same_seed_same_trace_and_different_seed_different_trace() {
    for seed in [3, 77, 1_234] {
        let a = run_seed(seed, RunOptions::default());
        let b = run_seed(seed, RunOptions::default());
        assert_eq!(a.hash, b.hash, "seed {seed}");
        assert_eq!(a.trace_len, b.trace_len);
        let other = run_seed(seed + 1, RunOptions::default());
        assert_ne!(a.hash, other.hash, "seeds {seed} and {}", seed + 1);
    }
}

/// Each canary must be caught by the checker it targets within a stated number of seeds.
fn caught_within(canary: Canary, invariant: &str, limit: u64, faults: FaultMix) -> u64 {
    for seed in 0..limit {
        let options = RunOptions {
            overrides: Overrides {
                faults,
                ..Overrides::default()
            },
            canary: Some(canary),
            keep_trace: false,
        };
        let report = run_seed(seed, options);
        if let Some(v) = &report.violation {
            if v.invariant == invariant {
                eprintln!("{canary:?} caught by {invariant} at seed {seed}:\n{report}");
                return seed;
            }
        }
    }
    panic!("{canary:?} was not caught by {invariant} within {limit} seeds");
}

#[test]
fn canary_ignoring_disconnect_is_caught_by_the_safety_checker_within_50_seeds() {
    caught_within(Canary::IgnoresDisconnect, "safety", 50, FaultMix::Standard);
}

#[test]
fn canary_without_protected_create_is_caught_by_the_liveness_checker_within_300_seeds() {
    caught_within(Canary::Unprotected, "liveness", 300, FaultMix::Standard);
}

#[test]
fn canary_watching_the_parent_is_caught_by_the_herd_checker_within_20_seeds() {
    caught_within(Canary::ParentWatch, "no-herd", 20, FaultMix::Standard);
}
