//! An idle follower under every rule, for the memory benchmark
//! (`benches/memory.rs`) and the test that holds its figures
//! (`tests/idle_memory.rs`): one definition of "idle", so the two measure
//! the same thing.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use zkelect_core::*;

/// The rules measured, with the names the benchmark prints.
pub const RULES: [(&str, Rule); 5] = [
    ("election", Rule::Election { leaders: 1 }),
    ("mutex", Rule::Mutex),
    ("semaphore (3 permits)", Rule::Semaphore { permits: 3 }),
    ("read", Rule::Read),
    ("write", Rule::Write),
];

/// The stem of the `seq`-th node of a queue under `rule`: a read-write lock's
/// even sequences are readers, odd ones writers.
fn stem(rule: Rule, seq: usize) -> &'static str {
    match rule {
        Rule::Read | Rule::Write if seq % 2 == 0 => "r_",
        Rule::Read | Rule::Write => "w_",
        _ => rule
            .stem(Interop::None)
            .expect("every rule has a stem of its own"),
    }
}

/// A follower that joined, listed a queue of ten and set its watches, with
/// every request answered as a driver would: an idle machine has nothing in
/// flight (until its next liveness probe).
pub fn idle_follower(i: usize, rule: Rule) -> Candidate {
    let c = idle_in_queue(i, rule, 9);
    assert_eq!(c.role(), Role::Follower, "{rule:?}");
    assert!(!c.watched().is_empty(), "{rule:?}");
    c
}

/// A machine that holds (alone in its queue), every request answered: what a held lock or an elected leader keeps.
pub fn idle_holder(i: usize, rule: Rule) -> Candidate {
    let c = idle_in_queue(i, rule, 0);
    assert!(c.role().is_leader(), "{rule:?}");
    c
}

/// A machine whose node is the newest of a queue with `below` older nodes,
/// with every request answered.
fn idle_in_queue(i: usize, rule: Rule, below: usize) -> Candidate {
    let config = Config::builder("/services/scheduler/leader", format!("node-{i:04}"))
        .rule(rule)
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
    let own = format!(
        "_c_00000000000000aa-{}0000000009",
        rule.stem(Interop::None).expect("stem")
    );
    let children: Vec<String> = (0..below)
        .map(|s| format!("_c_{s:016x}-{}{s:010}", stem(rule, s)))
        .chain([own.clone()])
        .collect();
    let own_stat = Stat {
        czxid: 9,
        ephemeral_owner: 1,
        ..Stat::default()
    };
    // Answer until nothing more is asked (watches are set one at a time).
    loop {
        let pending: Vec<Command> = std::iter::from_fn(|| c.poll_command()).collect();
        if pending.is_empty() {
            break;
        }
        for cmd in pending {
            let result = match &cmd.request {
                Request::Create { .. } => Ok(Reply::Created {
                    path: format!("/services/scheduler/leader/{own}"),
                    stat: own_stat,
                }),
                Request::GetChildren { .. } => Ok(Reply::Children(children.clone())),
                Request::GetData { path, .. } if path.ends_with(&own) => Ok(Reply::Data {
                    data: vec![],
                    stat: own_stat,
                }),
                Request::GetData { .. } => Ok(Reply::Data {
                    data: vec![],
                    stat: Stat {
                        ephemeral_owner: 1,
                        ..Stat::default()
                    },
                }),
                Request::SetData { .. } => Ok(Reply::Set(Stat {
                    version: 1,
                    ..own_stat
                })),
                Request::Sync { .. } => Ok(Reply::Synced),
                _ => Ok(Reply::Exists(None)),
            };
            c.handle(t, Input::Reply { op: cmd.op, result });
        }
    }
    while c.poll_notice().is_some() {}
    assert_eq!(
        c.in_flight().count(),
        0,
        "{rule:?}: idle means nothing in flight"
    );
    c
}
