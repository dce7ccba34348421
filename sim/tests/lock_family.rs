//! The lock family's options in ordinary seeds: weighted semaphores,
//! cooperative revocation requests, writers that downgrade, custom ACLs.
//! Each is drawn by the swarm, ordinary seeds that draw it hold every
//! checker, and the canary that gives its guarantee up is caught by the
//! checker meant for it.

use zkelect_sim::canary::Canary;
use zkelect_sim::run::{run_seed, RunOptions};
use zkelect_sim::swarm::{AclDraw, Knobs, Overrides, Queue, Swarm};
use zkelect_sim::world::{Planted, World};

fn run(seed: u64, canary: Option<Canary>) -> Option<(&'static str, String)> {
    let options = RunOptions {
        canary,
        ..RunOptions::default()
    };
    run_seed(seed, options)
        .violation
        .map(|v| (v.invariant, v.detail))
}

/// The first seeds a canary is caught in, within `limit`; every failure
/// must be its own checker's.
fn caught(canary: Canary, limit: u64) -> Vec<u64> {
    let mut seeds = Vec::new();
    for seed in 0..limit {
        if let Some((invariant, detail)) = run(seed, Some(canary)) {
            assert_eq!(invariant, canary.target(), "seed {seed}: {detail}");
            seeds.push(seed);
        }
    }
    seeds
}

/// Ordinary seeds in `range` whose first queue is a semaphore of k > 1
/// with weighted processes drawn.
fn weighted_seeds(range: std::ops::Range<u64>) -> Vec<u64> {
    range
        .filter(|&seed| {
            let swarm = Swarm::from_seed(seed, Overrides::default());
            swarm.env.hosting.queues.is_empty()
                && swarm.env.queue == Queue::Semaphore
                && swarm.leaders > 1
                && Knobs::from_seed(seed, false).options.weighted > 0
        })
        .collect()
}

#[test]
fn weighted_semaphores_hold_every_checker() {
    let seeds = weighted_seeds(0..1_500);
    assert!(seeds.len() >= 20, "only {} weighted seeds", seeds.len());
    for &seed in &seeds[..30.min(seeds.len())] {
        assert_eq!(run(seed, None), None, "seed {seed}");
    }
}

#[test]
fn a_weight_blind_contender_is_caught_by_safety() {
    let seeds = caught(Canary::WeightBlind, 100);
    assert!(seeds.len() >= 5, "weight-blind caught in {seeds:?} of 100");
    // Without the canary, its world holds.
    for &seed in &seeds[..3] {
        let options = RunOptions::default();
        let swarm = Swarm::for_seed(seed, options.overrides, Some(Canary::WeightBlind));
        let report = zkelect_sim::run::run_swarm(seed, swarm, options);
        assert!(report.violation.is_none(), "{report}");
    }
}

/// Ordinary seeds in `range` that draw revocable processes and requests.
fn revocation_seeds(range: std::ops::Range<u64>) -> Vec<u64> {
    range
        .filter(|&seed| {
            let swarm = Swarm::from_seed(seed, Overrides::default());
            Knobs::from_seed(seed, false).options.revocable > 0
                && swarm
                    .plan
                    .iter()
                    .filter(|(_, f)| matches!(f, zkelect_sim::swarm::Fault::AskRevoke { .. }))
                    .count()
                    >= 2
        })
        .collect()
}

#[test]
fn revocation_requests_are_heard_in_ordinary_seeds() {
    let seeds = revocation_seeds(0..1_000);
    assert!(
        seeds.len() >= 20,
        "only {} seeds with requests",
        seeds.len()
    );
    for &seed in &seeds[..40.min(seeds.len())] {
        assert_eq!(run(seed, None), None, "seed {seed}");
    }
}

#[test]
fn a_contender_deaf_to_revocation_is_caught_by_revocation_heard() {
    let seeds = caught(Canary::DeafToRevocation, 100);
    assert!(
        seeds.len() >= 5,
        "deaf-to-revocation caught in {seeds:?} of 100"
    );
}

#[test]
fn downgrades_and_custom_acls_are_drawn_and_hold_every_checker() {
    let mut downgrading = 0;
    let mut custom = 0;
    for seed in 0..1_500 {
        let knobs = Knobs::from_seed(seed, false);
        let swarm = Swarm::from_seed(seed, Overrides::default());
        let rw = matches!(swarm.env.queue, Queue::ReadWrite { .. });
        let is_custom = matches!(knobs.acl, AclDraw::Digests { .. } | AclDraw::Ip);
        if (rw && knobs.options.downgrade > 0 && downgrading < 25) || (is_custom && custom < 25) {
            assert_eq!(run(seed, None), None, "seed {seed}");
            downgrading += usize::from(rw && knobs.options.downgrade > 0);
            custom += usize::from(is_custom);
        }
    }
    assert!(downgrading >= 20 && custom >= 20, "{downgrading} {custom}");
}

#[test]
fn multi_locks_are_drawn_hold_and_give_up_in_ordinary_seeds() {
    let seeds: Vec<u64> = (0..1_500)
        .filter(|&seed| {
            !Swarm::from_seed(seed, Overrides::default())
                .env
                .hosting
                .multi_locks
                .is_empty()
        })
        .collect();
    assert!(
        seeds.len() >= 150,
        "only {} seeds draw multi-locks",
        seeds.len()
    );
    let opposite = seeds.iter().any(|&seed| {
        let swarm = Swarm::from_seed(seed, Overrides::default());
        let m = &swarm.env.hosting.multi_locks;
        m.iter().any(|a| {
            m.iter()
                .any(|b| a.queues.len() >= 2 && a.queues.iter().rev().eq(b.queues.iter()))
        })
    });
    assert!(opposite, "no seed names the same locks in opposite orders");
    let (mut held, mut given_up) = (0, 0);
    for &seed in &seeds[..60] {
        let report = run_seed(seed, RunOptions::default());
        assert!(report.violation.is_none(), "{report}");
        held += report.stats.multi_lock_holds;
        given_up += report.stats.multi_lock_give_ups;
    }
    assert!(
        held >= 200 && given_up >= 1,
        "held {held}, gave up {given_up}"
    );
}

/// The world of two multi-locks naming two mutexes in opposite orders,
/// for `seed`.
fn opposed(seed: u64) -> Swarm {
    let mut swarm = Swarm::for_seed(seed, Overrides::default(), None);
    swarm.candidates = swarm.candidates.max(2);
    swarm.env.hosting.opposed_multi_locks();
    swarm
}

/// A planted multi-lock that takes its locks in the order given (as
/// Curator's does) deadlocks with another naming them the other way, and
/// `multi-lock` catches it; the real one, which sorts, does not.
#[test]
fn multi_locks_taking_their_locks_in_arrival_order_deadlock_and_are_caught() {
    let mut seeds = Vec::new();
    for seed in 0..100 {
        let mut world = World::new(seed, opposed(seed), None, false);
        world.plant(Planted::MultiLockInGivenOrder);
        if let Some(v) = world.run() {
            assert_eq!(v.invariant, "multi-lock", "seed {seed}: {}", v.detail);
            seeds.push(seed);
        }
    }
    assert!(seeds.len() >= 5, "arrival-order caught in {seeds:?} of 100");
    // The same worlds with the real multi-lock, which sorts: no deadlock.
    for &seed in &seeds[..5] {
        let report = zkelect_sim::run::run_swarm(seed, opposed(seed), RunOptions::default());
        assert!(report.violation.is_none(), "{report}");
        assert!(report.stats.multi_lock_holds > 0, "{report}");
    }
}
