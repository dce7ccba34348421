//! `no-herd` on shared sessions: a machine woken by an event its
//! own read had already shown it is no herd, and a herd through a shared
//! session is still caught.

use zkelect_sim::canary::Canary;
use zkelect_sim::run::{run_seed, RunOptions};
use zkelect_sim::swarm::{FaultMix, Hosting, Overrides, Swarm};
use zkelect_sim::world::World;

/// Lag seeds 37589 and 54755 (read-write locks, two machines on one
/// zookeeper-async session): a writer's leader marker fired the session's
/// one data watch on its node; a reader on the same session read that node
/// after the change, setting its watch anew, and the lagging event thread
/// then handed the old event to both. The second reader's read was no herd
/// (its watch was not there when the change was made), and `no-herd` counted
/// it. Their minimised plans are in `fuzz/corpus/lag-*-no-herd.bin`.
#[test]
fn a_stale_event_handed_to_a_machine_armed_after_the_change_is_no_herd() {
    for seed in [37589, 54755] {
        let options = RunOptions {
            overrides: Overrides {
                faults: FaultMix::WithEventLag,
                ..Overrides::default()
            },
            ..RunOptions::default()
        };
        let report = run_seed(seed, options);
        assert!(report.violation.is_none(), "{report}");
    }
}

/// The `parent-watch` canary with its candidates riding on p0's session:
/// the session's one child watch wakes every machine that listed, and
/// `no-herd` still counts each of them.
#[test]
fn a_herd_through_a_shared_session_is_still_caught() {
    let canary = Canary::ParentWatch;
    let caught = (0..20).find(|&seed| {
        let overrides = Overrides {
            candidates: Some(6),
            faults: FaultMix::WithEventLag,
            ..Overrides::default()
        };
        let mut swarm = Swarm::from_seed(seed, overrides).for_canary(Some(canary));
        swarm.env.hosting = Hosting {
            riders: vec![(1, 0), (2, 0), (3, 0), (5, 4)],
            observers: Vec::new(),
            queues: Vec::new(),
            multi_locks: Vec::new(),
        };
        let mut world = World::new(seed, swarm, Some(canary), false);
        world.run().is_some_and(|v| v.invariant == canary.target())
    });
    assert!(
        caught.is_some(),
        "parent-watch on shared sessions not caught in 20 seeds"
    );
}
