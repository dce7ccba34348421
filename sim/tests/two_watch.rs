//! The two-watch takeover's condition is what keeps it safe: a candidate
//! that holds on its nearest watched node's deletion whatever its books
//! show below it (`Planted::TakeoverBesideSecond`) is caught by the
//! simulator's `safety` in ordinary seeds, which pass without the bug.

use zkelect_sim::world::{Planted, World};

#[test]
fn a_takeover_beside_the_second_watched_node_is_caught() {
    let catches = World::catches(Planted::TakeoverBesideSecond, 0..100);
    assert!(
        catches.unplanted.is_empty(),
        "fail without the bug: {:?}",
        catches.unplanted
    );
    println!("{catches}");
    assert!(catches.by("safety") >= 3, "{catches}");
}
