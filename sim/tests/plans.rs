//! Proptest over fault plans: hand-sized worlds (1–6 candidates, k ∈ {1, 2})
//! with arbitrary plans of faults and intents at arbitrary times. Proptest
//! shrinks a failing plan to a minimal one and keeps it in
//! `proptest-regressions/plans.txt`.

use std::time::Duration;

use proptest::prelude::*;
use zkelect_core::{ConnectionPolicy, Timestamp};
use zkelect_sim::run::{run_swarm, RunOptions};
use zkelect_sim::swarm::{Env, Fault, Queue, Scheme, Swarm};

const CHAOS_MS: u64 = 15_000;

fn fault(pids: usize, pauses: bool) -> impl Strategy<Value = Fault> {
    let pid = 0..pids;
    let ms = 100u64..9_000;
    let mut options = vec![
        (pid.clone(), any::<bool>())
            .prop_map(|(pid, applied)| Fault::DropConnection { pid, applied })
            .boxed(),
        (pid.clone(), ms.clone())
            .prop_map(|(pid, ms)| Fault::Partition { pid, ms })
            .boxed(),
        (pid.clone(), ms.clone(), any::<bool>())
            .prop_map(|(pid, ms, to_server)| Fault::PartitionOneWay { pid, ms, to_server })
            .boxed(),
        pid.clone().prop_map(|pid| Fault::Crash { pid }).boxed(),
        (100u64..2_000)
            .prop_map(|ms| Fault::RestartServer { ms })
            .boxed(),
        (pid.clone(), any::<bool>())
            .prop_map(|(pid, rejoin)| Fault::Resign { pid, rejoin })
            .boxed(),
        pid.clone().prop_map(|pid| Fault::Close { pid }).boxed(),
        Just(Fault::Spawn).boxed(),
        Just(Fault::CrashLeader).boxed(),
        Just(Fault::CloseLeader).boxed(),
        ms.clone()
            .prop_map(|ms| Fault::PartitionLeader { ms })
            .boxed(),
        pid.clone().prop_map(|pid| Fault::Revoke { pid }).boxed(),
        Just(Fault::RevokeLeader).boxed(),
        Just(Fault::WipeElection).boxed(),
        pid.clone().prop_map(|pid| Fault::TouchData { pid }).boxed(),
        (pid.clone(), ms.clone(), 10u64..1_000)
            .prop_map(|(pid, ms, extra_ms)| Fault::Delay { pid, ms, extra_ms })
            .boxed(),
        scheme()
            .prop_map(|scheme| Fault::Lookalike { scheme })
            .boxed(),
        Just(Fault::SpawnForeign).boxed(),
    ];
    if pauses {
        options.push(
            (pid, ms.clone())
                .prop_map(|(pid, ms)| Fault::Pause { pid, ms })
                .boxed(),
        );
        options.push(ms.prop_map(|ms| Fault::PauseLeader { ms }).boxed());
    }
    proptest::strategy::Union::new(options)
}

/// Cuts a lasting fault to end by the end of the chaos phase: the liveness
/// bound counts from when the faults stop (a slow link drawn at 14 s for 8 s
/// outlasted it by 7 s and failed the liveness check).
fn end_by(fault: &mut Fault, left_ms: u64) {
    match fault {
        Fault::Partition { ms, .. }
        | Fault::PartitionOneWay { ms, .. }
        | Fault::PartitionLeader { ms }
        | Fault::Pause { ms, .. }
        | Fault::PauseLeader { ms }
        | Fault::RestartServer { ms }
        | Fault::Delay { ms, .. }
        | Fault::LagEvents { ms, .. } => *ms = (*ms).min(left_ms),
        _ => {}
    }
}

fn scheme() -> impl Strategy<Value = Scheme> {
    prop_oneof![
        Just(Scheme::Ours),
        Just(Scheme::Curator),
        Just(Scheme::Kazoo)
    ]
}

/// The world around the candidates: interop scheme, foreign models (k = 1
/// only), persistent look-alikes, and a server that clamps the request
/// (`0`: defaults; `1`: maximum below it; `2`: minimum above it).
fn env(leaders: u32, timeout_ms: u64) -> impl Strategy<Value = Env> {
    (
        scheme(),
        0usize..=3,
        proptest::collection::vec(scheme(), 0..3),
        0u8..3,
        40u64..=90,
    )
        .prop_map(move |(interop, foreign, lookalikes, clamp, percent)| {
            // Interop elects one leader, as Curator and kazoo do; more is refused.
            let interop = if leaders > 1 { Scheme::Ours } else { interop };
            let mut env = Env {
                interop,
                foreign: if leaders == 1 && interop != Scheme::Ours {
                    foreign
                } else {
                    0
                },
                ..Env::default()
            };
            let allowed = env.lookalike_schemes();
            env.lookalikes = lookalikes
                .into_iter()
                .filter(|s| allowed.contains(s))
                .collect();
            let at = |pct: u64| Some(Duration::from_millis(timeout_ms * pct / 100));
            match clamp {
                1 => env.max_session_timeout = at(percent).map(|d| d.max(Duration::from_secs(1))),
                2 => {
                    env.min_session_timeout = at(100 + percent);
                    env.max_session_timeout = at(100 + percent);
                }
                _ => {}
            }
            env
        })
}

/// Drops what the foreign models of `env` cannot live with (as the swarm does).
fn fits(env: &Env, fault: &Fault) -> bool {
    let curator = env.library() == Some(Scheme::Curator);
    match fault {
        Fault::SpawnForeign => env.library().is_some(),
        Fault::Lookalike { scheme } => env.lookalike_schemes().contains(scheme),
        Fault::TouchData { .. } | Fault::WipeElection => !curator,
        _ => true,
    }
}

fn scenario() -> impl Strategy<Value = (u64, Swarm)> {
    (
        1usize..=6,
        1u32..=2,
        any::<bool>(),
        20u64..=60,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_flat_map(|(candidates, leaders, pauses, timeout, aware, reorder)| {
            // Fencing is checked with one leader: pauses come with k = 1.
            let leaders = if pauses { 1 } else { leaders };
            let plan = proptest::collection::vec(
                (
                    (0..CHAOS_MS).prop_map(Timestamp::from_millis),
                    fault(candidates + 3, pauses),
                ),
                0..12,
            );
            let env = env(leaders, timeout * 100);
            // Every recipe: election (k as drawn), mutex,
            // semaphore (k 2..5), read-write lock (10–90 % writers).
            let queue = (0u8..4, 2u32..=5, 1u8..=9).prop_map(move |(kind, k, tens)| match kind {
                0 => (Queue::Election, leaders),
                1 => (Queue::Mutex, 1),
                2 if pauses => (Queue::Mutex, 1),
                2 => (Queue::Semaphore, k),
                _ => (Queue::ReadWrite { writers: tens * 10 }, 1),
            });
            (any::<u64>(), plan, env, queue).prop_map(move |(seed, mut plan, env, (queue, k))| {
                plan.retain(|(_, f)| fits(&env, f));
                plan.sort_by_key(|(at, _)| *at);
                for (at, fault) in &mut plan {
                    end_by(fault, CHAOS_MS.saturating_sub(at.as_millis()).max(1));
                }
                let swarm = Swarm {
                    candidates,
                    leaders,
                    session_timeout: Duration::from_millis(timeout * 100),
                    policy: if aware {
                        ConnectionPolicy::SessionAware
                    } else {
                        ConnectionPolicy::Standard
                    },
                    chaos: Duration::from_millis(CHAOS_MS),
                    reorder,
                    pauses,
                    plan,
                    env,
                }
                .with_queue(queue, k);
                (seed, swarm)
            })
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1_000,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_fault_plan_holds_every_invariant((seed, swarm) in scenario()) {
        let report = run_swarm(seed, swarm, RunOptions::default());
        prop_assert!(report.violation.is_none(), "{}", report);
    }
}
