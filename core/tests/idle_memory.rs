//! Holds the bytes of an idle machine to their figures: a session runs
//! thousands of machines, most of them idle followers, so a field, a kept name
//! or a buffer more per machine is a regression even when every transcript
//! passes. Counted exactly (dhat's count of live heap bytes, plus the inline
//! size), so the limits are the figures measured when they were set; lower
//! them when a change saves bytes.

use zkelect_core::*;

#[path = "support/idle.rs"]
mod idle;

use idle::{idle_follower, RULES};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// Bytes of a `Candidate` itself.
const INLINE_LIMIT: usize = 688;

/// Bytes per idle follower (inline and heap) in a queue of ten, by rule, in
/// the order of [`RULES`].
const LIMITS: [usize; 5] = [995, 995, 1411, 995, 995];

const N: usize = 100;

/// Bytes per idle follower under `rule`, inline and on the heap: the least of
/// two counts, since the test harness's own thread may allocate meanwhile.
fn per_follower(rule: Rule) -> usize {
    count(rule).min(count(rule))
}

fn count(rule: Rule) -> usize {
    let before = dhat::HeapStats::get().curr_bytes;
    let followers: Vec<Candidate> = (0..N).map(|i| idle_follower(i, rule)).collect();
    let after = dhat::HeapStats::get().curr_bytes;
    drop(followers);
    // The vector of followers is the inline part.
    (after - before) / N
}

#[test]
fn an_idle_follower_holds_no_more_bytes_than_its_figure() {
    let _profiler = dhat::Profiler::builder().testing().build();
    assert!(
        size_of::<Candidate>() <= INLINE_LIMIT,
        "a Candidate grew to {} bytes inline (limit {INLINE_LIMIT})",
        size_of::<Candidate>()
    );
    // Once for nothing: the first machines built also pay for one-time
    // allocations (of the test harness and the standard library).
    per_follower(RULES[0].1);
    let measured: Vec<usize> = RULES.iter().map(|&(_, rule)| per_follower(rule)).collect();
    eprintln!("{} bytes inline", size_of::<Candidate>());
    for ((&(name, _), &bytes), &limit) in RULES.iter().zip(&measured).zip(&LIMITS) {
        eprintln!("{name}: {bytes} bytes per idle follower (limit {limit})");
    }
    for ((&(name, _), &bytes), &limit) in RULES.iter().zip(&measured).zip(&LIMITS) {
        assert!(
            bytes <= limit,
            "an idle {name} follower holds {bytes} bytes (limit {limit}): all {measured:?}"
        );
    }
}
