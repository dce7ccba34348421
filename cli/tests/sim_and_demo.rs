//! The `zkelect sim` and `zkelect demo` commands as a user runs them.

use std::process::Command;

fn zkelect(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_zkelect"))
        .args(args)
        .output()
        .expect("run zkelect");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn sim_over_500_seeds_passes_and_prints_its_summary() {
    let (code, out) = zkelect(&["sim", "--seeds", "1..500"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("499 seed(s) 1..500 passed every checker"),
        "{out}"
    );
}

#[test]
fn a_failing_canary_prints_a_replay_command_that_reproduces_it() {
    let (code, out) = zkelect(&["sim", "--seeds", "0..20", "--canary", "parent-watch"]);
    assert_eq!(code, Some(6), "{out}");
    assert!(out.contains("invariant no-herd violated"), "{out}");
    let replay = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("reproduce: zkelect "))
        .expect("a replay line");
    let args: Vec<&str> = replay.split_whitespace().collect();
    let (again, trace) = zkelect(&args);
    assert_eq!(again, Some(6), "the replay reproduces the failure");
    assert!(trace.contains("invariant no-herd violated"), "{trace}");
}

/// The first "invariant … violated at t=… (step …)" line of a report.
fn violation(out: &str) -> &str {
    out.lines()
        .find(|l| l.starts_with("invariant "))
        .unwrap_or_else(|| panic!("no violation reported:\n{out}"))
}

/// Every canary, under a non-default fault mix and candidate count: caught
/// (exit 6), and the printed replay carries the overrides, so it fails the
/// same way at the same step.
#[test]
fn every_canary_is_caught_and_its_replay_keeps_the_overrides() {
    for canary in [
        "ignores-disconnect",
        "unprotected",
        "parent-watch",
        "sequence-token",
        "deaf-to-own-node",
        "leases-from-request",
        "persistent-contender",
        "one-way-interop",
        "reader-watches-predecessor",
        "writer-ignores-readers",
        "mutex-any-deletion",
        "trusts-behind",
        "storming-parents",
    ] {
        let (code, out) = zkelect(&[
            "sim",
            "--seeds",
            "0..60",
            "--candidates",
            "6",
            "--faults",
            "lag",
            "--canary",
            canary,
        ]);
        assert_eq!(code, Some(6), "{canary}: {out}");
        let replay = out
            .lines()
            .find_map(|l| l.trim().strip_prefix("reproduce: zkelect "))
            .unwrap_or_else(|| panic!("{canary}: no replay line:\n{out}"));
        assert!(
            replay.contains("--candidates 6") && replay.contains("--faults lag"),
            "{canary}: {replay}"
        );
        let args: Vec<&str> = replay.split_whitespace().collect();
        let (again, trace) = zkelect(&args);
        assert_eq!(again, Some(6), "{canary}: the replay fails too");
        assert_eq!(
            violation(&trace),
            violation(&out),
            "{canary}: the same failure"
        );
    }
}

#[test]
fn sim_rejects_a_bad_seed_range_with_a_usage_error() {
    assert_eq!(zkelect(&["sim", "--seeds", "9..3"]).0, Some(2));
    assert_eq!(zkelect(&["sim", "--seeds", "x"]).0, Some(2));
}

#[test]
fn demo_needs_no_server_and_shows_three_leaders_and_a_suspension() {
    let (code, out) = zkelect(&["demo"]);
    assert_eq!(code, Some(0), "{out}");
    let leaders: std::collections::BTreeSet<&str> = out
        .lines()
        .filter(|l| l.contains("is elected leader"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert!(
        leaders.len() >= 3,
        "at least three successive leaders: {leaders:?}\n{out}"
    );
    assert!(out.contains("suspended"), "{out}");
    assert!(out.contains("every checker held: yes"), "{out}");
}

/// Exit 1, "any other failure": the canary's violation is found, but its
/// trace cannot be saved (a directory under /dev/null cannot be made), which
/// is neither a usage error nor the violation itself.
#[test]
fn a_trace_that_cannot_be_saved_exits_1() {
    let out = Command::new(env!("CARGO_BIN_EXE_zkelect"))
        .args(["sim", "--seeds", "0..20", "--canary", "parent-watch"])
        .args(["--save", "/dev/null/traces"])
        .output()
        .expect("run zkelect");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("error"), "{stderr}");
}
