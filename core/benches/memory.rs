//! Bytes held by an idle `Candidate`: a follower that joined, listed a queue of
//! ten and now waits on its watches (the predecessor; a semaphore of three, the
//! three nearest; a reader, the nearest writer), under every rule. Counted with
//! dhat's heap profiler (every live allocation) plus the inline size of the
//! struct. Prints `idle Candidate: …` for the election (as before), one
//! `idle Candidate per rule: …` line, and one `idle holder per rule: …` line
//! (a machine that holds, alone in its queue: a held lock, an elected leader).
//!
//! Run: `cargo bench -p zkelect-core --bench memory`

use zkelect_core::*;

#[path = "../tests/shared/idle.rs"]
mod idle;

use idle::{idle_follower, idle_holder, RULES};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const N: usize = 1_000;

/// Bytes per idle machine made by `make` under `rule`: (inline, on the heap).
fn measure_with(make: fn(usize, Rule) -> Candidate, rule: Rule) -> (usize, f64) {
    let before = dhat::HeapStats::get().curr_bytes;
    let candidates: Vec<Candidate> = (0..N).map(|i| make(i, rule)).collect();
    let after = dhat::HeapStats::get().curr_bytes;
    let vec_bytes = candidates.capacity() * size_of::<Candidate>();
    let heap_per = (after - before - vec_bytes) as f64 / N as f64;
    drop(candidates);
    (size_of::<Candidate>(), heap_per)
}

/// Bytes per idle follower under `rule`: (inline, on the heap).
fn measure(rule: Rule) -> (usize, f64) {
    measure_with(idle_follower, rule)
}

fn main() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let (inline, heap_per) = measure(Rule::Election { leaders: 1 });
    println!(
        "idle Candidate: {inline} bytes inline + {heap_per:.0} bytes on the heap = {:.0} bytes",
        inline as f64 + heap_per
    );
    let per_rule: Vec<String> = RULES
        .iter()
        .map(|&(name, rule)| {
            let (inline, heap) = measure(rule);
            format!("{name} {:.0} bytes", inline as f64 + heap)
        })
        .collect();
    println!("idle Candidate per rule: {}", per_rule.join(", "));
    let holders: Vec<String> = RULES
        .iter()
        .map(|&(name, rule)| {
            let (inline, heap) = measure_with(idle_holder, rule);
            format!("{name} {:.0} bytes", inline as f64 + heap)
        })
        .collect();
    println!("idle holder per rule: {}", holders.join(", "));
}
