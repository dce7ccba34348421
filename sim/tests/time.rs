//! `time-advances`: virtual time moves. A driver that wakes a machine at a
//! deadline the machine then does nothing about wakes it at once and again
//! at one instant for ever; with a real transport that fails fast that is a
//! hot loop, and in the simulator a run that never ends. The world calls
//! [`STALL_STEPS`] steps at one instant a violation instead of hanging.

use zkelect_sim::run::{run_seed, RunOptions};
use zkelect_sim::world::{Planted, World, STALL_STEPS};

/// A session whose `handle_timeout` does nothing (its deadlines stay due)
/// is caught by `time-advances` in ordinary seeds, which pass without it.
#[test]
fn a_session_that_answers_its_timer_with_nothing_is_caught() {
    let catches = World::catches(Planted::TimerAnsweredByNothing, 0..20);
    assert!(
        catches.unplanted.is_empty(),
        "fail without the bug: {:?}",
        catches.unplanted
    );
    println!("{catches}");
    assert!(catches.by("time-advances") >= 10, "{catches}");
}

/// Ordinary runs take far fewer steps at one instant than the stall bound:
/// the bound cannot be mistaken for a busy moment.
#[test]
fn ordinary_runs_stay_far_below_the_stall_bound() {
    let most = (0..2_000)
        .map(|seed| {
            run_seed(seed, RunOptions::default())
                .stats
                .most_at_one_instant
        })
        .max()
        .unwrap_or(0);
    println!("at most {most} more steps at one instant");
    assert!(most > 0 && most * 10 < STALL_STEPS, "{most}");
}
