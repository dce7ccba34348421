//! `stale-reply`: a reply to a request a candidate no longer waits for
//! changes nothing, judged against the same machine given only the time.
//!
//! "Only the time" is the session's time, not the candidate's alone: the
//! session acts on its own deadlines (a close it gives up on, its close
//! timeout run out) at the top of every input, and a stale reply that
//! arrives at that very millisecond must not be blamed for the stop. And
//! the checker still catches what it is for: a closing candidate that ends
//! its close on the late answer of a listing it sent before its delete
//! (`Planted::CloseOnStaleListing`) is caught in ordinary seeds, which
//! pass without the bug.

use zkelect_sim::world::{Planted, World};

/// Seeds whose stale reply arrived as the session gave a close up; more
/// join as sweeps find them.
const GIVEN_UP_AS_A_STALE_REPLY_ARRIVES: &[u64] = &[703_642];

/// Seed 703642: an election's candidate, asked to close with a close
/// timeout of 500 ms, had a listing out from before its delete (sent to
/// re-verify its suspended leadership). The session gave the close up at
/// 500 ms, in the same millisecond the listing's late answer arrived; the
/// session's deadline, acted on at the top of that input, stopped the
/// machine, and the candidate ignored the answer. Judged against the
/// candidate alone, the stop looked like the reply's doing.
#[test]
fn a_close_given_up_on_as_a_stale_reply_arrives_is_not_the_replys_doing() {
    for &seed in GIVEN_UP_AS_A_STALE_REPLY_ARRIVES {
        assert_eq!(World::run_planted(seed, None), None, "seed {seed}");
    }
}

#[test]
fn a_close_ended_by_a_stale_listing_is_caught() {
    let catches = World::catches(Planted::CloseOnStaleListing, 0..100);
    assert!(
        catches.unplanted.is_empty(),
        "fail without the bug: {:?}",
        catches.unplanted
    );
    println!("{catches}");
    assert!(catches.by("stale-reply") >= 3, "{catches}");
}
