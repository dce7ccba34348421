//! Core benchmarks: how long the machine takes to digest a children listing of
//! 10, 1,000 and 10,000 names, a whole join → elected transcript, and how many
//! bytes an idle `Candidate` holds.
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
    let config = Config::builder(PATH, "bench")
        .nonce_seed(1)
        .build()
        .expect("valid");
    let mut c = Candidate::new(config);
    let t = Timestamp::ZERO;
    c.join(t);
    c.handle(t, connected());
    let create = take(&mut c, Verb::Create);
    let own = format!("_c_0000000000000001-n_{:010}", n - 1);
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
        .map(|i| format!("_c_{:016x}-n_{:010}", i * 7919, i))
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

criterion_group!(benches, listing, transcript);
criterion_main!(benches);
