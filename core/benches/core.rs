//! Core benchmarks: how long the machine takes to digest a children listing of
//! 10, 1,000 and 10,000 names (and of 10,000 under every rule), and a whole
//! join → elected transcript. Bytes per idle machine: `benches/memory.rs`.
//!
//! Run: `cargo bench -p zkelect-core --bench core`

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use zkelect_core::*;

const PATH: &str = "/svc/leader";

fn connected() -> Input {
    Input::Session(SessionEvent::Connected {
        session_id: Some(SessionId(1)),
        timeout: Duration::from_secs(10),
    })
}

fn take(c: &mut Candidate, verb: Verb) -> Command {
    let all: Vec<Command> = std::iter::from_fn(|| c.poll_command()).collect();
    all.into_iter()
        .find(|cmd| cmd.request.kind() == verb)
        .expect("the machine emits this request")
}

/// A candidate whose node is the newest of `n` and whose listing is pending.
fn waiting_for_listing(n: usize) -> (Candidate, OpId, Vec<String>) {
    waiting_under(n, Rule::Election { leaders: 1 })
}

/// The stem of the `i`-th node of a queue under `rule`: in a read-write lock,
/// one node in ten is a writer.
fn stem(rule: Rule, i: usize) -> &'static str {
    match rule {
        Rule::Read | Rule::Write if i % 10 == 3 => "w_",
        Rule::Read | Rule::Write => "r_",
        _ => rule
            .stem(Interop::None)
            .expect("every rule has a stem of its own"),
    }
}

/// [`waiting_for_listing`] under `rule`.
fn waiting_under(n: usize, rule: Rule) -> (Candidate, OpId, Vec<String>) {
    let config = Config::builder(PATH, "bench")
        .rule(rule)
        .nonce_seed(1)
        .build()
        .expect("valid");
    let mut c = Candidate::new(config);
    let t = Timestamp::ZERO;
    c.join(t);
    c.handle(t, connected());
    let create = take(&mut c, Verb::Create);
    let own_stem = rule.stem(Interop::None).expect("stem");
    let own = format!("_c_0000000000000001-{own_stem}{:010}", n - 1);
    c.handle(
        t,
        Input::Reply {
            op: create.op,
            result: Ok(Reply::Created {
                path: format!("{PATH}/{own}"),
                stat: Stat {
                    czxid: 99,
                    ephemeral_owner: 1,
                    ..Stat::default()
                },
            }),
        },
    );
    let list = take(&mut c, Verb::GetChildren);
    // Listings arrive in the server's hash order, not sorted: shuffle deterministically.
    let mut children: Vec<String> = (0..n - 1)
        .map(|i| format!("_c_{:016x}-{}{:010}", i * 7919, stem(rule, i), i))
        .collect();
    children.push(own);
    let len = children.len();
    for i in 0..len {
        children.swap(i, (i * 2_654_435_761) % len);
    }
    (c, list.op, children)
}

fn listing(crit: &mut Criterion) {
    let mut group = crit.benchmark_group("handle_listing");
    for n in [10usize, 1_000, 10_000] {
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter_batched(
                || waiting_for_listing(n),
                |(mut c, op, children)| {
                    c.handle(
                        Timestamp::ZERO,
                        Input::Reply {
                            op,
                            result: Ok(Reply::Children(children)),
                        },
                    );
                    assert_eq!(c.watching().is_some(), n > 1);
                    black_box(c)
                },
                criterion::BatchSize::LargeInput,
            );
        });
    }
    group.finish();
}

fn transcript(crit: &mut Criterion) {
    crit.bench_function("join_to_elected", |b| {
        b.iter(|| {
            let (mut c, op, _) = waiting_for_listing(1);
            c.handle(
                Timestamp::ZERO,
                Input::Reply {
                    op,
                    result: Ok(Reply::Children(vec![
                        "_c_0000000000000001-n_0000000000".into()
                    ])),
                },
            );
            assert!(c.role().is_leader());
            black_box(c)
        });
    });
}

/// A listing of 10,000 children under every rule (a read-write lock's one
/// writer in ten): the one-pass standing counts only the blocking nodes.
fn listing_per_rule(crit: &mut Criterion) {
    let mut group = crit.benchmark_group("handle_listing_10000");
    let rules = [
        ("election", Rule::Election { leaders: 1 }),
        ("mutex", Rule::Mutex),
        ("semaphore_3", Rule::Semaphore { permits: 3 }),
        ("read", Rule::Read),
        ("write", Rule::Write),
    ];
    for (name, rule) in rules {
        group.bench_function(name, |b| {
            b.iter_batched(
                || waiting_under(10_000, rule),
                |(mut c, op, children)| {
                    c.handle(
                        Timestamp::ZERO,
                        Input::Reply {
                            op,
                            result: Ok(Reply::Children(children)),
                        },
                    );
                    assert!(c.watching().is_some(), "{rule:?}");
                    black_box(c)
                },
                criterion::BatchSize::LargeInput,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, listing, listing_per_rule, transcript);
criterion_main!(benches);
