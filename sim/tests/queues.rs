//! Machines of different queues on one session: worlds with side
//! queues on other paths, whose machines ride on the first queue's sessions,
//! hold every checker per queue; the session's routing across paths is the
//! adapters' (a planted routing bug that forgets the path is caught in
//! ordinary seeds); digests of seeds without side queues did not move.

use zkelect_sim::run::{run_seed, RunOptions};
use zkelect_sim::swarm::{FaultMix, Hosting, Overrides, Queue, SideMachine, SideQueue, Swarm};
use zkelect_sim::world::{Planted, World};

fn run(seed: u64, swarm: Swarm, planted: Option<Planted>) -> Option<(&'static str, String)> {
    let mut world = World::new(seed, swarm, None, false);
    if let Some(bug) = planted {
        world.plant(bug);
    }
    world.run().map(|v| (v.invariant, v.detail))
}

/// Seeds of `mix` whose swarm draws side queues with at least one machine
/// riding on a session of the first queue.
fn shared_seeds(mix: FaultMix, range: std::ops::Range<u64>) -> Vec<(u64, Swarm)> {
    range
        .map(|seed| {
            let overrides = Overrides {
                faults: mix,
                ..Overrides::default()
            };
            (seed, Swarm::from_seed(seed, overrides))
        })
        .filter(|(_, s)| {
            s.env
                .hosting
                .queues
                .iter()
                .any(|q| q.machines.iter().any(|m| m.on.is_some()))
        })
        .collect()
}

/// Three queues on one session: a mutex on p0's session beside the
/// election, and a read-write lock with an observer, every machine on p0's
/// session but one; the first queue an election of k = `k`.
fn three_queues(seed: u64, faults: FaultMix, k: u32) -> Swarm {
    let overrides = Overrides {
        candidates: Some(3),
        faults,
        queue: Some(Queue::Election),
        leaders: Some(k),
    };
    let mut swarm = Swarm::from_seed(seed, overrides);
    let on = |host: Option<usize>, observer: bool| SideMachine { on: host, observer };
    swarm.env.hosting = Hosting {
        riders: vec![(1, 0)],
        observers: Vec::new(),
        queues: vec![
            SideQueue {
                queue: Queue::Mutex,
                leaders: 1,
                machines: vec![on(Some(0), false), on(Some(0), false)],
            },
            SideQueue {
                queue: Queue::ReadWrite { writers: 50 },
                leaders: 1,
                machines: vec![on(Some(2), false), on(Some(2), true), on(None, false)],
            },
        ],
        multi_locks: Vec::new(),
    };
    swarm
}

#[test]
fn three_queues_on_shared_sessions_hold_every_checker() {
    for seed in 0..40 {
        for (faults, k) in [(FaultMix::Standard, 1), (FaultMix::None, 2)] {
            let swarm = three_queues(seed, faults, k);
            assert_eq!(run(seed, swarm, None), None, "seed {seed} {faults:?}");
        }
    }
}

#[test]
fn every_queue_elects_in_a_calm_world() {
    let swarm = three_queues(7, FaultMix::None, 1);
    let mut world = World::new(7, swarm, None, false);
    let end = zkelect_core::Timestamp::from_millis(20_000);
    assert_eq!(world.run_until(end).map(|v| v.invariant), None);
    assert_eq!(world.queues().len(), 3);
    for q in 0..3 {
        let leaders = world
            .processes()
            .filter(|p| p.queue == q && p.agent.role().is_leader())
            .count();
        assert!(leaders >= 1, "queue {q} has no holder");
        assert!(!world.children_of(q).is_empty(), "queue {q} is empty");
    }
    // The mutex's two machines and p1 ride on p0's session: one session,
    // three machines of two queues.
    let on_p0: Vec<usize> = world
        .processes()
        .filter(|p| p.host == 0)
        .map(|p| p.queue)
        .collect();
    assert_eq!(on_p0, vec![0, 0, 1, 1]);
}

#[test]
fn side_queues_are_drawn_at_their_rate_with_riders_and_own_sessions() {
    let drawn: Vec<Swarm> = (0..400)
        .map(|seed| Swarm::from_seed(seed, Overrides::default()))
        .collect();
    // The side queues with machines of their own (a multi-lock's queues
    // have none: they are drawn with it).
    let with = drawn
        .iter()
        .filter(|s| s.env.hosting.queues.iter().any(|q| !q.machines.is_empty()))
        .count();
    assert!(
        (80..=160).contains(&with),
        "{with} of 400 seeds draw side queues"
    );
    let machines = || {
        drawn
            .iter()
            .flat_map(|s| s.env.hosting.queues.iter().flat_map(|q| q.machines.iter()))
    };
    assert!(machines().any(|m| m.on.is_some()));
    assert!(machines().any(|m| m.on.is_none()));
    assert!(machines().any(|m| m.observer));
    assert!(drawn.iter().any(|s| s.env.hosting.queues.len() == 2));
    for recipe in ["election", "mutex", "semaphore", "rw("] {
        assert!(
            drawn
                .iter()
                .flat_map(|s| s.env.hosting.queues.iter())
                .any(|q| q.queue.label().starts_with(recipe)),
            "{recipe}"
        );
    }
    // The session limit holds with side riders too.
    for s in &drawn {
        let h = &s.env.hosting;
        for host in 0..s.candidates {
            let load = 1
                + h.riders.iter().filter(|(_, on)| *on == host).count()
                + h.observers.iter().filter(|on| **on == Some(host)).count()
                + h.queues
                    .iter()
                    .flat_map(|q| q.machines.iter())
                    .filter(|m| m.on == Some(host))
                    .count();
            assert!(load <= Hosting::PER_SESSION, "seed load {load}");
        }
    }
}

/// A canary's seeds keep their old world: no side queue is drawn for them.
#[test]
fn canary_runs_have_no_side_queues() {
    for seed in 0..200 {
        let options = RunOptions {
            canary: Some(zkelect_sim::canary::Canary::ParentWatch),
            ..RunOptions::default()
        };
        let swarm = Swarm::for_seed(seed, options.overrides, options.canary);
        assert!(swarm.env.hosting.queues.is_empty());
    }
}

/// The planted routing bug (the session files watches per table, forgetting
/// the path) is caught by the checkers in ordinary seeds that put machines
/// of two queues on one session, and those seeds pass without it.
#[test]
fn a_session_that_forgets_the_watch_path_is_caught() {
    let seeds = shared_seeds(FaultMix::Standard, 0..1_000);
    assert!(
        seeds.len() >= 150,
        "only {} seeds share sessions",
        seeds.len()
    );
    let mut caught = Vec::new();
    for (seed, swarm) in seeds.iter().take(150) {
        assert_eq!(run(*seed, swarm.clone(), None), None, "seed {seed}");
        if let Some((invariant, _)) = run(*seed, swarm.clone(), Some(Planted::WatchByTable)) {
            caught.push((*seed, invariant));
        }
    }
    println!("caught in {} of 150 seeds: {caught:?}", caught.len());
    assert!(
        caught.len() >= 8,
        "caught in {} of 150 seeds: {caught:?}",
        caught.len()
    );
}

/// Side queues run through the ordinary swarm: the seeds that draw them
/// pass (every checker per queue), and run deterministically.
#[test]
fn drawn_side_queues_pass_and_replay() {
    for mix in [
        FaultMix::Standard,
        FaultMix::WithPauses,
        FaultMix::WithEventLag,
    ] {
        for (seed, _) in shared_seeds(mix, 0..150) {
            let options = RunOptions {
                overrides: Overrides {
                    faults: mix,
                    ..Overrides::default()
                },
                ..RunOptions::default()
            };
            let report = run_seed(seed, options);
            assert!(report.violation.is_none(), "{report}");
            assert_eq!(run_seed(seed, options).hash, report.hash);
        }
    }
}

/// The corpus keeps two such worlds (`sim/fuzz/corpus/side-queues-*.bin`):
/// each passes, and fails with the planted routing bug.
#[test]
fn the_side_queue_corpus_cases_catch_the_planted_bug() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("corpus") {
        let path = entry.expect("entry").path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if !name.is_some_and(|n| n.starts_with("side-queues-")) {
            continue;
        }
        let case = zkelect_sim::fuzz::FuzzCase::decode(&std::fs::read(&path).expect("read"));
        assert!(
            !case.swarm.env.hosting.queues.is_empty(),
            "{}",
            path.display()
        );
        assert_eq!(run(case.seed, case.swarm.clone(), None), None);
        let caught = run(case.seed, case.swarm, Some(Planted::WatchByTable));
        assert!(caught.is_some(), "{} not caught", path.display());
        n += 1;
    }
    assert_eq!(n, 2);
}
