//! A downgraded writer's read mark: a writer that tells its application it
//! downgraded without writing the mark (`Planted::DowngradeWithoutMark`) is
//! caught by the simulator's `read-mark` in read-write lock seeds whose
//! writers downgrade, which pass without the bug.

use zkelect_sim::swarm::{Options, Overrides, Queue, Swarm};
use zkelect_sim::world::{Planted, Violation, World};

/// Seed `seed`'s world as a read-write lock, with `bug` planted if any.
fn run(seed: u64, bug: Option<Planted>) -> Option<Violation> {
    let overrides = Overrides {
        queue: Some(Queue::ReadWrite { writers: 50 }),
        ..Overrides::default()
    };
    let mut world = World::new(seed, Swarm::from_seed(seed, overrides), None, false);
    if let Some(bug) = bug {
        world.plant(bug);
    }
    world.run()
}

#[test]
fn a_downgrade_that_writes_no_mark_is_caught() {
    // The seeds whose writers downgrade (a third of them draw it).
    let seeds: Vec<u64> = (0..60)
        .filter(|&s| Options::draw(s).downgrade > 0)
        .collect();
    assert!(seeds.len() >= 10, "{seeds:?}");
    let mut caught = Vec::new();
    let mut other = Vec::new();
    for &seed in &seeds {
        match run(seed, Some(Planted::DowngradeWithoutMark)) {
            Some(v) if v.invariant == "read-mark" => caught.push(seed),
            Some(v) => other.push((seed, v)),
            None => {}
        }
    }
    let unplanted: Vec<(u64, Violation)> = caught
        .iter()
        .chain(other.iter().map(|(s, _)| s))
        .filter_map(|&s| run(s, None).map(|v| (s, v)))
        .collect();
    assert!(unplanted.is_empty(), "fail without the bug: {unplanted:?}");
    println!("read-mark caught seeds {caught:?}; other checkers {other:?}");
    assert!(caught.len() >= 3, "caught {caught:?}, other {other:?}");
}

/// Seeds of the mixed sweep (300,000 seeds) where a downgraded writer's
/// node was written over while the writer was cut off from the server for
/// longer than the grace: its lease ran out, so it no longer believed it
/// held, and could not write the mark back until it was in touch again.
/// Readers waiting meanwhile is safe; the checker counts the grace only
/// while the writer believes it holds, and these seeds pass.
#[test]
fn a_writer_cut_off_past_its_lease_is_not_held_to_the_grace() {
    use zkelect_sim::run::{run_seed, RunOptions};
    use zkelect_sim::swarm::FaultMix;
    for seed in [265_901, 275_657, 282_802, 298_386] {
        let options = RunOptions {
            overrides: Overrides {
                faults: FaultMix::Standard,
                ..Overrides::default()
            },
            ..RunOptions::default()
        };
        let report = run_seed(seed, options);
        assert!(
            report.stats.downgrades > 0,
            "seed {seed} no longer downgrades: {report}"
        );
        assert!(report.violation.is_none(), "{report}");
    }
}
