//! The two-watch takeover's condition is what keeps it safe: a candidate
//! that holds on its nearest watched node's deletion whatever its books
//! show below it (`Planted::TakeoverBesideSecond`) is caught by the
//! simulator's `safety` in ordinary seeds, which pass without the bug.

use zkelect_sim::world::{Planted, World};

fn run(seed: u64, planted: Option<Planted>) -> Option<(&'static str, String)> {
    World::run_planted(seed, planted).map(|v| (v.invariant, v.detail))
}

#[test]
fn a_takeover_beside_the_second_watched_node_is_caught() {
    let mut caught = Vec::new();
    for seed in 0..100 {
        if let Some((invariant, detail)) = run(seed, Some(Planted::TakeoverBesideSecond)) {
            assert_eq!(run(seed, None), None, "seed {seed} fails without the bug");
            caught.push((seed, invariant, detail));
        }
    }
    let safety = caught.iter().filter(|(_, inv, _)| *inv == "safety").count();
    println!(
        "caught in {} of 100 seeds ({safety} by safety): {:?}",
        caught.len(),
        caught.iter().map(|(s, i, _)| (*s, *i)).collect::<Vec<_>>()
    );
    assert!(safety >= 3, "caught: {caught:?}");
}
