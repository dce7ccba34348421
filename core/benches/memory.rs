//! Bytes held by an idle `Candidate`: a follower that joined, listed a queue of
//! ten and now waits on its predecessor's watch. Counted with dhat's heap
//! profiler (every live allocation) plus the inline size of the struct.
//!
//! Run: `cargo bench -p zkelect-core --bench memory`

use std::time::Duration;

use zkelect_core::*;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const N: usize = 1_000;

fn idle_follower(i: usize) -> Candidate {
    let config = Config::builder("/services/scheduler/leader", format!("node-{i:04}"))
        .nonce_seed(i as u64)
        .build()
        .expect("valid");
    let mut c = Candidate::new(config);
    let t = Timestamp::ZERO;
    c.join(t);
    c.handle(
        t,
        Input::Session(SessionEvent::Connected {
            session_id: Some(SessionId(1)),
            timeout: Duration::from_secs(10),
        }),
    );
    let mut commands: Vec<Command> = std::iter::from_fn(|| c.poll_command()).collect();
    let create = commands
        .iter()
        .find(|c| c.request.kind() == Verb::Create)
        .expect("create")
        .op;
    let own = "_c_00000000000000aa-n_0000000009".to_owned();
    c.handle(
        t,
        Input::Reply {
            op: create,
            result: Ok(Reply::Created {
                path: format!("/services/scheduler/leader/{own}"),
                stat: Stat {
                    czxid: 9,
                    ephemeral_owner: 1,
                    ..Stat::default()
                },
            }),
        },
    );
    commands.extend(std::iter::from_fn(|| c.poll_command()));
    let list = commands
        .iter()
        .find(|c| c.request.kind() == Verb::GetChildren)
        .expect("list")
        .op;
    let children = (0..9)
        .map(|s| format!("_c_{s:016x}-n_{s:010}"))
        .chain([own])
        .collect();
    c.handle(
        t,
        Input::Reply {
            op: list,
            result: Ok(Reply::Children(children)),
        },
    );
    for cmd in std::iter::from_fn(|| c.poll_command()).collect::<Vec<_>>() {
        let result = match cmd.request {
            Request::GetData { .. } => Ok(Reply::Data {
                data: vec![],
                stat: Stat {
                    ephemeral_owner: 1,
                    ..Stat::default()
                },
            }),
            _ => Ok(Reply::Exists(None)),
        };
        c.handle(t, Input::Reply { op: cmd.op, result });
    }
    while c.poll_notice().is_some() {}
    assert_eq!(c.watching(), Some("_c_0000000000000008-n_0000000008"));
    c
}

fn main() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let before = dhat::HeapStats::get().curr_bytes;
    let candidates: Vec<Candidate> = (0..N).map(idle_follower).collect();
    let after = dhat::HeapStats::get().curr_bytes;
    let vec_bytes = candidates.capacity() * size_of::<Candidate>();
    let heap_per = (after - before - vec_bytes) as f64 / N as f64;
    let inline = size_of::<Candidate>();
    println!(
        "idle Candidate: {inline} bytes inline + {heap_per:.0} bytes on the heap = {:.0} bytes",
        inline as f64 + heap_per
    );
    drop(candidates);
}
