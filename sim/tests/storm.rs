//! Never storm the ensemble: the `no-storm` checker (requests per session
//! over a sliding window), the canary of the core's old parents loop it
//! catches, and the connect strings with a missing or ephemeral chroot that
//! ordinary seeds draw, under which every machine must stop with the core's
//! typed error instead of looping.

mod support;

use zkelect_core::{CandidateError, NamespaceFault, Role};
use zkelect_sim::canary::Canary;
use zkelect_sim::check::{self, Checker, Event, Invariant, STORM_PER_MACHINE};
use zkelect_sim::run::{run_checked, run_seed, run_swarm, RunOptions};
use zkelect_sim::swarm::{BadChroot, ChrootRoot, FaultMix, Overrides, Swarm};
use zkelect_sim::world::World;

use support::{checked_world, ErrorLog, Reported};

fn standard() -> RunOptions {
    RunOptions {
        overrides: Overrides {
            faults: FaultMix::Standard,
            ..Overrides::default()
        },
        ..RunOptions::default()
    }
}

/// The canary restores the loop the core had (a level of the path answered
/// `NoNode`, sent again at once, forever): `no-storm` catches it from the
/// first seed, and no other checker first.
#[test]
fn canary_storming_the_parents_is_caught_by_the_no_storm_checker_within_5_seeds() {
    let c = Canary::StormingParents;
    let options = RunOptions {
        canary: Some(c),
        ..standard()
    };
    let seed = (0..5)
        .find(|&seed| run_seed(seed, options).violation.is_some())
        .expect("caught within 5 seeds");
    let report = run_seed(seed, options);
    let v = report.violation.clone().expect("a violation");
    assert_eq!(v.invariant, c.target(), "{report}");
    assert!(v.detail.contains("requests in"), "{}", v.detail);
    // It replays: the same violation at the same step.
    assert_eq!(run_seed(seed, options).violation, Some(v));
    // `no-storm` alone catches it.
    let swarm = Swarm::for_seed(seed, options.overrides, Some(c));
    let alone: Vec<Checker> = vec![Box::new(check::NoStorm::default())];
    let report = run_checked(seed, swarm, options, alone);
    assert_eq!(report.violation.map(|v| v.invariant), Some("no-storm"));
}

/// The canary's world (every candidate under a missing chroot) holds with
/// the real candidate: each stops with the typed error and sends nothing
/// more.
#[test]
fn the_world_of_the_storming_canary_holds_with_the_real_candidate() {
    for seed in 0..10 {
        let swarm = Swarm::for_seed(seed, Overrides::default(), Some(Canary::StormingParents));
        assert!(swarm.env.chroot.is_some());
        let report = run_swarm(seed, swarm, RunOptions::default());
        assert!(report.violation.is_none(), "{report}");
    }
}

/// Ordinary seeds draw bad chroots (1 in 8, missing or ephemeral, on some
/// sessions or the whole fleet), and pass: every candidate under one stops
/// with `CandidateError::Namespace` naming the fault (a candidate that makes
/// no parents with its own `NoNode` refusal), its session then quiet, and the
/// rest of the world elects as ever.
#[test]
fn drawn_bad_chroots_end_in_the_typed_error_and_the_seeds_pass() {
    let mut drawn = 0;
    let (mut missing, mut ephemeral, mut whole_fleet, mut namespace_errors) = (0, 0, 0, 0);
    for seed in 0..800 {
        let swarm = Swarm::from_seed(seed, standard().overrides);
        let Some(bad) = swarm.env.chroot.clone() else {
            continue;
        };
        drawn += 1;
        match bad.root {
            ChrootRoot::Missing => missing += 1,
            ChrootRoot::Ephemeral => ephemeral += 1,
        }
        let sessions = (0..swarm.candidates)
            .filter(|&p| swarm.env.hosting.host(p) == p)
            .count();
        if bad.hosts.len() == sessions {
            whole_fleet += 1;
        }
        let (log, errors) = ErrorLog::new();
        let mut world = checked_world(seed, swarm, [Box::new(log) as Checker]);
        let violation = world.run();
        assert!(violation.is_none(), "seed {seed}: {violation:?}");
        for Reported { pid, error: e, .. } in errors.take() {
            // A seed may draw refused credentials too (`tests/refused.rs`).
            if matches!(e, CandidateError::AuthFailed) && world.on_refused_session(pid) {
                continue;
            }
            assert_eq!(
                world.bad_chroot(pid),
                Some(bad.root),
                "seed {seed} p{pid}: {e}"
            );
            if let CandidateError::Namespace { fault, .. } = e {
                namespace_errors += 1;
                let want = match bad.root {
                    ChrootRoot::Missing => NamespaceFault::RootMissing,
                    ChrootRoot::Ephemeral => NamespaceFault::Ephemeral,
                };
                assert_eq!(fault, want, "seed {seed} p{pid}");
            }
        }
        for p in world.processes() {
            if let (Some(c), Some(_)) = (p.candidate, world.bad_chroot(p.pid)) {
                assert!(
                    p.crashed || matches!(c.role(), Role::Failed | Role::Closed | Role::Idle),
                    "seed {seed} p{}: {:?}",
                    p.pid,
                    c.role()
                );
                // A handful of requests: the probe, our node's create, the
                // path's levels; the probes that ran until it failed.
                assert!(
                    c.stats().commands <= 12,
                    "seed {seed} p{}: {} commands",
                    p.pid,
                    c.stats().commands
                );
            }
        }
    }
    eprintln!(
        "{drawn} of 800 seeds drew a bad chroot: {missing} missing, {ephemeral} ephemeral, \
         {whole_fleet} on every session; {namespace_errors} typed errors"
    );
    assert!((60..=150).contains(&drawn), "{drawn}");
    assert!(missing >= 20 && ephemeral >= 20 && whole_fleet >= 10);
    assert!(namespace_errors >= drawn, "{namespace_errors}");
}

/// The draw itself: on sessions of the first queue's candidates only, at
/// least one, ascending; none for a canary's seeds.
#[test]
fn the_bad_chroot_draw_is_on_candidate_sessions_and_not_in_canary_seeds() {
    for seed in 0..400 {
        let swarm = Swarm::from_seed(seed, Overrides::default());
        if let Some(BadChroot { hosts, .. }) = &swarm.env.chroot {
            assert!(!hosts.is_empty());
            assert!(hosts.windows(2).all(|w| w[0] < w[1]));
            for &h in hosts {
                assert!(h < swarm.candidates && swarm.env.hosting.host(h) == h);
            }
        }
        let canary = Swarm::for_seed(seed, Overrides::default(), Some(Canary::ParentWatch));
        assert_eq!(canary.env.chroot, None);
        assert_eq!(canary.env.late_start, None);
    }
}

/// The checker's bound: a session of one candidate may send
/// `STORM_PER_MACHINE` requests in any ten seconds, not one more.
#[test]
fn the_no_storm_checker_counts_a_session_over_a_sliding_window() {
    use zkelect_sim::check::NoStorm;
    let swarm = Swarm::from_seed(3, Overrides::default());
    let world = World::new(3, swarm, None, false);
    let mut checker = NoStorm::default();
    let request = Event::Request { host: 0, pid: 0 };
    for _ in 0..STORM_PER_MACHINE {
        assert!(checker.check(&world, &request).is_ok());
    }
    let err = checker.check(&world, &request).expect_err("one too many");
    assert!(err.contains("p0's session"), "{err}");
    // Another session has its own window.
    let other = Event::Request { host: 1, pid: 1 };
    assert!(checker.check(&world, &other).is_ok());
}
