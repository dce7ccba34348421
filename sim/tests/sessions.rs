//! Several machines on one session, and observers: worlds whose
//! candidates share sessions and carry observers hold every checker, and the
//! planted bugs of `world::Planted` are caught.

use zkelect_sim::swarm::{FaultMix, Hosting, Overrides, Queue, Swarm};
use zkelect_sim::world::{Planted, World};

/// Six candidates at the start, the first four on p0's session, with two
/// observers on p0's session and one on its own (a queue of `queue`).
fn crowded(seed: u64, faults: FaultMix, queue: Queue, k: u32) -> Swarm {
    let mut swarm = riders_only(seed, faults, queue, k);
    swarm.env.hosting.observers = vec![Some(0), Some(0), None];
    swarm
}

/// The same without observers.
fn riders_only(seed: u64, faults: FaultMix, queue: Queue, k: u32) -> Swarm {
    let overrides = Overrides {
        candidates: Some(6),
        faults,
        queue: Some(queue),
        leaders: Some(k),
    };
    let mut swarm = Swarm::from_seed(seed, overrides);
    swarm.env.hosting = Hosting {
        riders: vec![(1, 0), (2, 0), (3, 0)],
        ..Hosting::default()
    };
    swarm
}

fn run(seed: u64, swarm: Swarm, planted: Option<Planted>) -> Option<(&'static str, String)> {
    let mut world = World::new(seed, swarm, None, false);
    if let Some(bug) = planted {
        world.plant(bug);
    }
    world.run().map(|v| (v.invariant, v.detail))
}

#[test]
fn crowded_sessions_hold_every_checker() {
    for seed in 0..40 {
        for (faults, queue, k) in [
            (FaultMix::Standard, Queue::Election, 2),
            (FaultMix::Standard, Queue::ReadWrite { writers: 40 }, 1),
            (FaultMix::None, Queue::Semaphore, 3),
            // Four mutex contenders of one session on one path: the core's
            // side of a non-reentrant mutex (`reentrant(false)`), each
            // acquisition a machine and a node of its own.
            (FaultMix::Standard, Queue::Mutex, 1),
        ] {
            let swarm = crowded(seed, faults, queue, k);
            assert_eq!(run(seed, swarm, None), None, "seed {seed} {queue:?}");
        }
    }
}

/// The swarm draws non-reentrant mutexes at the core's level: worlds whose
/// mutex queue (the first, or a side queue) has two contenders of one
/// session — what `reentrant(false)` acquisitions on one `Session` are.
#[test]
fn the_swarm_draws_mutex_contenders_sharing_a_session() {
    let (mut first, mut side) = (0, 0);
    for seed in 0..2_000 {
        let swarm = Swarm::from_seed(seed, Overrides::default());
        let hosting = &swarm.env.hosting;
        if swarm.env.queue == Queue::Mutex && !hosting.riders.is_empty() {
            first += 1;
        }
        for q in hosting.queues.iter().filter(|q| q.queue == Queue::Mutex) {
            let hosts: Vec<usize> = q
                .machines
                .iter()
                .filter(|m| !m.observer)
                .filter_map(|m| m.on)
                .map(|h| hosting.host(h))
                .collect();
            if (0..hosts.len()).any(|i| hosts[i + 1..].contains(&hosts[i])) {
                side += 1;
            }
        }
    }
    assert!(
        first > 0 && side > 0,
        "first queue {first}, side queues {side}"
    );
}

#[test]
fn drawn_hosting_shares_sessions_and_draws_observers() {
    let drawn: Vec<Hosting> = (0..200).map(|seed| Hosting::draw(seed, 8)).collect();
    assert!(drawn.iter().any(|h| !h.riders.is_empty()));
    assert!(drawn
        .iter()
        .any(|h| h.observers.iter().any(Option::is_some)));
    assert!(drawn
        .iter()
        .any(|h| h.observers.iter().any(Option::is_none)));
    for h in &drawn {
        for &(pid, host) in &h.riders {
            assert!(host < pid && h.host(host) == host);
        }
        for host in 0..8 {
            let load = 1
                + h.riders.iter().filter(|(_, on)| *on == host).count()
                + h.observers.iter().filter(|on| **on == Some(host)).count();
            assert!(load <= Hosting::PER_SESSION);
        }
    }
}

/// A shared watch handed to one machine only: the second observer on p0's
/// session never hears the queue change again, or a candidate never hears
/// its own node deleted (the watch on it went to another machine).
#[test]
fn a_shared_watch_given_to_one_machine_is_caught() {
    let caught = (0..20).find_map(|seed| {
        let swarm = crowded(seed, FaultMix::None, Queue::Election, 2);
        assert_eq!(run(seed, swarm.clone(), None), None, "seed {seed} passes");
        run(seed, swarm, Some(Planted::SharedWatchToOne))
    });
    let (invariant, detail) = caught.expect("caught within 20 seeds");
    assert!(
        ["observers", "liveness", "revocation"].contains(&invariant),
        "{invariant}: {detail}"
    );
}

/// Observers that never list the queue again after their first listing.
#[test]
fn an_observer_that_skips_its_relists_is_caught() {
    let caught = (0..20).find_map(|seed| {
        let swarm = crowded(seed, FaultMix::Standard, Queue::Mutex, 1);
        run(seed, swarm, Some(Planted::ObserverSkipsRelist))
    });
    let (invariant, detail) = caught.expect("caught within 20 seeds");
    assert_eq!(invariant, "observers", "{detail}");
}

/// Ordinary seeds with observers that start before the queue's path exists
/// (every other session connects 1–3 s late) or watch while the queue is
/// wiped (every node, then the path): those seeds pass, and an observer on
/// a session of its own that started before the path listed a missing path
/// and set its creation watch.
fn observers_through_absence(range: std::ops::Range<u64>) -> Vec<(u64, Swarm)> {
    range
        .filter_map(|seed| {
            let swarm = Swarm::from_seed(seed, Overrides::default());
            let wipes = swarm
                .plan
                .iter()
                .any(|(_, f)| *f == zkelect_sim::swarm::Fault::WipeElection);
            let through = swarm.env.late_start.is_some() || wipes;
            (through && !swarm.env.hosting.observers.is_empty()).then_some((seed, swarm))
        })
        .collect()
}

#[test]
fn drawn_observers_before_the_path_and_through_wipes_hold() {
    let seeds = observers_through_absence(0..400);
    let late = seeds
        .iter()
        .filter(|(_, s)| s.env.late_start.is_some())
        .count();
    assert!(
        seeds.len() >= 50 && late >= 20,
        "{} seeds, {late} late",
        seeds.len()
    );
    let mut waited = 0;
    for (seed, swarm) in &seeds {
        let mut world = World::new(*seed, swarm.clone(), None, false);
        // Read the observers while they run: at the end of the run they
        // have left their sessions.
        let due = world.healed_at() + world.liveness_bound();
        assert_eq!(
            world.run_until(due).map(|v| (v.invariant, v.detail)),
            None,
            "seed {seed}"
        );
        let mut observed = Vec::new();
        for p in world.processes().filter(|p| p.observer && p.host == p.pid) {
            let Some(o) = p.agent.observer() else {
                // It crashed or stopped on its own: nothing to count.
                continue;
            };
            // Unless the world made the path before anyone started (for
            // candidates that make no parents, or for look-alikes), or it
            // crashed first.
            let made = !world.knobs().options.create_parents || !swarm.env.lookalikes.is_empty();
            if swarm.env.late_start.is_some() && p.queue == 0 && !made && !p.crashed {
                observed.push((p.pid, o.stats().exists_watches));
            }
        }
        for (pid, exists_watches) in observed {
            assert!(exists_watches >= 1, "seed {seed} p{pid}");
            waited += 1;
        }
        assert_eq!(
            world.run().map(|v| (v.invariant, v.detail)),
            None,
            "seed {seed}"
        );
    }
    assert!(waited >= 10, "{waited} observers waited for their path");
}

/// An observer that sets no watch with its `exists` on a missing path (so
/// it never hears the path created) is caught by `observers` in those
/// ordinary seeds.
#[test]
fn an_observer_that_sets_no_creation_watch_is_caught() {
    let seeds = observers_through_absence(0..400);
    let caught: Vec<u64> = seeds
        .iter()
        .filter_map(|(seed, swarm)| {
            let (invariant, detail) = run(
                *seed,
                swarm.clone(),
                Some(Planted::ObserverSetsNoCreationWatch),
            )?;
            assert_eq!(invariant, "observers", "seed {seed}: {detail}");
            Some(*seed)
        })
        .collect();
    println!(
        "caught in {} of {} seeds: {caught:?}",
        caught.len(),
        seeds.len()
    );
    assert!(
        caught.len() >= 5,
        "caught in {} of {}",
        caught.len(),
        seeds.len()
    );
}
