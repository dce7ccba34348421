//! Exhaustive small scopes in `cargo test`: every fault plan of at most one
//! fault from the menu, and every combination of the world's branching
//! choices in a window at the start and after the fault, for 2 candidates.
//! Bigger scopes (3 candidates, 2 faults, deeper windows) are a command:
//! `cargo run -p zkelect-sim --release --example explore -- --candidates 3 --faults 2`.

use zkelect_sim::canary::Canary;
use zkelect_sim::explore::{explore, menu, run_path, Scope};

fn scope(canary: Option<Canary>) -> Scope {
    Scope {
        candidates: 2,
        faults: 1,
        depth: 2,
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
