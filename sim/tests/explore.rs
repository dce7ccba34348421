//! Exhaustive small scopes in `cargo test`: every fault plan of at most one
//! fault from the menu, and every combination of the world's branching
//! choices in a window at the start and after the fault, for 2 candidates.
//! Then every run within one deviation of the stream's schedule, anywhere in
//! the run. Bigger scopes (3 candidates, 2 faults, deeper windows, more
//! deviations) are a command:
//! `cargo run -p zkelect-sim --release --example explore -- --candidates 3 --faults 2`.

use zkelect_sim::canary::Canary;
use zkelect_sim::explore::{explore, menu, run_path, Scope, Search};

fn scope(canary: Option<Canary>) -> Scope {
    Scope {
        candidates: 2,
        faults: 1,
        search: Search::Windows { depth: 2 },
        canary,
    }
}

#[test]
fn two_candidates_one_fault_every_checker_holds_in_every_explored_state() {
    let out = explore(scope(None));
    assert!(out.failure.is_none(), "{out}");
    // No fault, or one of the menu at one of three moments.
    assert_eq!(out.plans, 1 + 3 * menu(2).len() as u64, "{out}");
    // Each plan's windows (start, after the fault) branch at least twice.
    assert!(out.runs >= 4 * out.plans, "{out}");
    assert!(out.executions > out.plans, "{out}");
    println!("{out}");
}

/// The search catches what canaries break, each by its own checker.
#[test]
fn the_search_catches_planted_bugs() {
    for canary in [
        Canary::IgnoresDisconnect,
        Canary::DeafToOwnNode,
        Canary::SequenceToken,
    ] {
        let out = explore(scope(Some(canary)));
        let (prefix, report) = out
            .failure
            .unwrap_or_else(|| panic!("{} not caught", canary.flag()));
        let caught = report.violation.as_ref().map(|v| v.invariant);
        assert_eq!(caught, Some(canary.target()), "{}: {report}", canary.flag());
        // The choices printed replay the failing run.
        let (again, _) = run_path(scope(Some(canary)), prefix);
        assert_eq!(again.hash, report.hash);
        assert_eq!(again.violation.map(|v| v.invariant), caught);
    }
}

/// A path is a pure function of its choices.
#[test]
fn a_path_replays() {
    let (a, _) = run_path(scope(None), vec![3, 1, 1, 0, 1]);
    let (b, _) = run_path(scope(None), vec![3, 1, 1, 0, 1]);
    assert_eq!(a.hash, b.hash);
    assert_eq!(a.swarm.plan.len(), 1);
}

/// Every run within one deviation from the stream's schedule, anywhere in the
/// run (not only in windows): each choice point of the stream's run yields
/// one run per other answer, so a run of n branching choices gives more than
/// n runs.
#[test]
fn every_single_deviation_anywhere_in_the_run_holds() {
    let scope = Scope {
        candidates: 2,
        faults: 0,
        search: Search::Deviations { max: 1 },
        canary: None,
    };
    let out = explore(scope);
    assert!(out.failure.is_none(), "{out}");
    let (_, stream) = run_path(scope, Vec::new());
    let choice_points = stream.taken().len() as u64;
    let others: u64 = stream.taken().iter().map(|t| u64::from(t.arity - 1)).sum();
    assert!(
        choice_points > 100,
        "{choice_points} choice points: the whole run branches"
    );
    // The stream's run, then each other answer at each of its choice points.
    assert_eq!(out.runs, 1 + others, "{out}");
    println!("{out}");
}

/// A deviation-bounded search catches a planted bug and replays it from the
/// (short) choice list it prints.
#[test]
fn a_deviation_bounded_search_catches_a_planted_bug() {
    let scope = Scope {
        candidates: 2,
        faults: 1,
        search: Search::Deviations { max: 1 },
        canary: Some(Canary::IgnoresDisconnect),
    };
    let out = explore(scope);
    let (prefix, report) = out.failure.expect("ignores-disconnect not caught");
    assert_eq!(
        report.violation.as_ref().map(|v| v.invariant),
        Some(Canary::IgnoresDisconnect.target())
    );
    assert!(prefix.last() != Some(&0), "{prefix:?}");
    let (again, _) = run_path(scope, prefix);
    assert_eq!(again.hash, report.hash);
}
