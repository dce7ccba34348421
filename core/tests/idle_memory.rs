//! Holds the bytes of an idle machine to their figures: a session runs
//! thousands of machines, most of them idle followers, so a field, a kept name
//! or a buffer more per machine is a regression even when every transcript
//! passes. Counted exactly (dhat's count of live heap bytes, plus the inline
//! size), so the limits are the figures measured when they were set; lower
//! them when a change saves bytes.

use zkelect_core::*;

#[path = "shared/idle.rs"]
mod idle;

use idle::{idle_follower, idle_holder, RULES};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// Bytes of a `Candidate` itself.
const INLINE_LIMIT: usize = 512;

/// Bytes per idle follower (inline and heap) in a queue of ten, by rule, in
/// the order of [`RULES`]. The two-watch takeover's second watch costs 56 of
/// them (the farther node's name and note, and one more name kept).
const LIMITS: [usize; 5] = [763, 763, 987, 763, 763];

/// Bytes per idle holder (inline and heap), alone in its queue, by rule.
const HOLDER_LIMITS: [usize; 5] = [555; 5];

const N: usize = 100;

/// Bytes per machine made by `make` under `rule`, inline and on the heap: the
/// least of two counts, since the test harness's own thread may allocate
/// meanwhile.
fn per_machine(make: fn(usize, Rule) -> Candidate, rule: Rule) -> usize {
    count(make, rule).min(count(make, rule))
}

fn count(make: fn(usize, Rule) -> Candidate, rule: Rule) -> usize {
    let before = dhat::HeapStats::get().curr_bytes;
    let followers: Vec<Candidate> = (0..N).map(|i| make(i, rule)).collect();
    let after = dhat::HeapStats::get().curr_bytes;
    drop(followers);
    // The vector of followers is the inline part.
    (after - before) / N
}

#[test]
fn an_idle_follower_or_holder_keeps_no_more_bytes_than_its_figure() {
    let _profiler = dhat::Profiler::builder().testing().build();
    assert!(
        size_of::<Candidate>() <= INLINE_LIMIT,
        "a Candidate grew to {} bytes inline (limit {INLINE_LIMIT})",
        size_of::<Candidate>()
    );
    // Once for nothing: the first machines built also pay for one-time
    // allocations (of the test harness and the standard library).
    per_machine(idle_follower, RULES[0].1);
    let measured: Vec<usize> = RULES
        .iter()
        .map(|&(_, rule)| per_machine(idle_follower, rule))
        .collect();
    let holders: Vec<usize> = RULES
        .iter()
        .map(|&(_, rule)| per_machine(idle_holder, rule))
        .collect();
    eprintln!("{} bytes inline", size_of::<Candidate>());
    for ((&(name, _), &bytes), &limit) in RULES.iter().zip(&measured).zip(&LIMITS) {
        eprintln!("{name}: {bytes} bytes per idle follower (limit {limit})");
    }
    for ((&(name, _), &bytes), &limit) in RULES.iter().zip(&holders).zip(&HOLDER_LIMITS) {
        eprintln!("{name}: {bytes} bytes per idle holder (limit {limit})");
    }
    for ((&(name, _), &bytes), &limit) in RULES.iter().zip(&measured).zip(&LIMITS) {
        assert!(
            bytes <= limit,
            "an idle {name} follower holds {bytes} bytes (limit {limit}): all {measured:?}"
        );
    }
    for ((&(name, _), &bytes), &limit) in RULES.iter().zip(&holders).zip(&HOLDER_LIMITS) {
        assert!(
            bytes <= limit,
            "an idle {name} holder holds {bytes} bytes (limit {limit}): all {holders:?}"
        );
    }
}
