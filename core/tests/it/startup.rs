//! The start-up machine (`zkelect_core::startup`) in transcripts, and a
//! property test over any ensemble: which servers answer, refuse, stay
//! silent, come back, or do not resolve.

use std::collections::BTreeSet;
use std::time::Duration;

use zkelect_core::startup::*;
use zkelect_core::Timestamp;

use proptest::prelude::*;

fn ms(t: u64) -> Timestamp {
    Timestamp::from_millis(t)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn config(n: usize, learn: Learn) -> StartupConfig {
    StartupConfig {
        min_timeout: Duration::from_millis(1_500),
        ..StartupConfig::new(n, learn, secs(10))
    }
}

fn drain(s: &mut Startup) -> Vec<StartupCommand> {
    std::iter::from_fn(|| s.poll_command()).collect()
}

fn notices(s: &mut Startup) -> Vec<StartupNotice> {
    std::iter::from_fn(|| s.poll_notice()).collect()
}

/// Resolves every server at `t` and returns the asks that follow.
fn resolve_all(s: &mut Startup, t: u64) -> Vec<StartupCommand> {
    let resolves = drain(s);
    for command in resolves {
        let StartupCommand::Resolve { server, .. } = command else {
            panic!("expected a resolve, got {command:?}")
        };
        s.resolved(ms(t), server, Ok(()));
    }
    drain(s)
}

fn connect_plan(commands: &[StartupCommand]) -> Option<&Plan> {
    commands.iter().find_map(|c| match c {
        StartupCommand::Connect { plan, .. } => Some(plan),
        _ => None,
    })
}

#[test]
fn all_answer_the_plan_comes_with_the_last_answer_and_the_smallest_bound() {
    let mut s = Startup::new(ms(0), config(3, Learn::SessionTimeout));
    let asks = resolve_all(&mut s, 1);
    assert_eq!(asks.len(), 3);
    s.answered(ms(3), 0, 1, Ok(Some(secs(6))));
    s.answered(ms(4), 2, 1, Ok(Some(secs(4))));
    assert_eq!(drain(&mut s), [], "one server still out, within the grace");
    s.answered(ms(5), 1, 1, Ok(Some(secs(5))));
    let commands = drain(&mut s);
    let plan = connect_plan(&commands).expect("a plan");
    assert_eq!(plan.servers, [0, 1, 2]);
    assert_eq!(plan.bound, Some(secs(4)));
    assert_eq!(notices(&mut s), []);
    s.client_connected(ms(20));
    assert_eq!(s.confirmed_bound(), Some(secs(4)));
    assert_eq!(drain(&mut s), [], "nothing left to ask");
    assert_eq!(
        s.poll_timeout(),
        None,
        "idle once running with every answer"
    );
}

#[test]
fn a_frozen_member_costs_the_grace_and_is_left_out() {
    let mut s = Startup::new(ms(0), config(3, Learn::SessionTimeout));
    resolve_all(&mut s, 1);
    s.answered(ms(10), 1, 1, Ok(Some(secs(4))));
    s.answered(ms(12), 2, 1, Ok(Some(secs(4))));
    assert_eq!(
        s.poll_timeout(),
        Some(ms(260)),
        "the grace after the first answer"
    );
    s.handle_timeout(ms(260));
    let commands = drain(&mut s);
    let plan = connect_plan(&commands).expect("a plan after the grace");
    assert_eq!(plan.servers, [1, 2]);
    assert_eq!(
        notices(&mut s),
        [StartupNotice::LeftOut {
            server: 0,
            why: LeftOut::NoAnswer(AskFailure::Silent)
        }]
    );
    // The frozen server's late answer changes nothing: it is not listed.
    s.answered(ms(900), 0, 1, Ok(Some(secs(2))));
    s.handle_timeout(ms(1_001));
    assert_eq!(s.bound(), Some(secs(4)));
    assert_eq!(drain(&mut s), [], "a left-out server is not asked again");
}

#[test]
fn a_stopped_member_is_listed_last_asked_again_and_lowers_the_bound_when_it_answers() {
    let mut s = Startup::new(ms(0), config(3, Learn::SessionTimeout));
    resolve_all(&mut s, 1);
    s.answered(
        ms(2),
        0,
        1,
        Err(AskFailure::Refused("connection refused".into())),
    );
    s.answered(ms(3), 1, 1, Ok(Some(secs(6))));
    s.answered(ms(4), 2, 1, Ok(Some(secs(6))));
    let commands = drain(&mut s);
    let plan = connect_plan(&commands).expect("every server has an outcome");
    assert_eq!(plan.servers, [1, 2, 0], "answered first, refused last");
    assert_eq!(plan.bound, Some(secs(6)));
    s.client_connected(ms(10));
    // The stopped server is asked again at once: the bound waits for it.
    let asks = drain(&mut s);
    assert!(
        matches!(
            asks[..],
            [StartupCommand::Ask {
                server: 0,
                attempt: 2,
                ..
            }]
        ),
        "{asks:?}"
    );
    assert_eq!(s.confirmed_bound(), None);
    s.answered(ms(11), 0, 2, Err(AskFailure::Refused("again".into())));
    assert_eq!(s.confirmed_bound(), Some(secs(6)));
    // In the background, with backoff: never sooner than half the minimum.
    let next = s.poll_timeout().expect("a re-ask is due");
    assert!(next >= ms(11 + 50), "{next}");
    s.handle_timeout(next);
    let Some(StartupCommand::Ask { attempt, .. }) = s.poll_command() else {
        panic!("a background ask")
    };
    // It came back with a lower maximum: the bound follows it down.
    s.answered(
        next + Duration::from_millis(1),
        0,
        attempt,
        Ok(Some(secs(4))),
    );
    assert_eq!(s.confirmed_bound(), Some(secs(4)));
    assert_eq!(
        notices(&mut s),
        [StartupNotice::Lowered {
            server: 0,
            from: secs(6),
            to: secs(4)
        }]
    );
}

/// The asks among `commands`: (server, attempt).
fn asked(commands: &[StartupCommand]) -> Vec<(usize, u32)> {
    commands
        .iter()
        .filter_map(|c| match c {
            StartupCommand::Ask {
                server, attempt, ..
            } => Some((*server, *attempt)),
            _ => None,
        })
        .collect()
}

/// Two servers: 0 answers `bound`, 1 refuses; the client connects at
/// `connected` ms, and 1 is being asked again (attempt 2).
fn connected_with_one_down(bound: Duration, connected: u64) -> Startup {
    let mut s = Startup::new(ms(0), config(2, Learn::SessionTimeout));
    resolve_all(&mut s, 0);
    s.answered(ms(1), 0, 1, Ok(Some(bound)));
    s.answered(ms(1), 1, 1, Err(AskFailure::Refused("down".into())));
    drain(&mut s);
    s.client_connected(ms(connected));
    drain(&mut s);
    s
}

#[test]
fn the_bound_waits_for_a_reconnection_recheck_and_a_silent_one_ends_at_its_deadline() {
    let mut s = connected_with_one_down(secs(4), 5);
    assert_eq!(s.confirmed_bound(), None);
    // The re-ask's deadline passes: silent now, and the bound is confirmed.
    s.handle_timeout(ms(5) + secs(1));
    assert_eq!(s.confirmed_bound(), Some(secs(4)));
}

/// An ask already on its way when the client (re)connects can fail for a
/// reason older than the connection (the server was still starting when it
/// arrived), while the client is now on that server: the recheck asks again,
/// and only the new ask confirms the bound. Trusting the old failure kept
/// the other server's higher bound (a real run: 10 s reported on a server
/// that allows 2 s).
#[test]
fn an_ask_in_flight_at_a_reconnection_is_sent_again_and_its_old_failure_confirms_nothing() {
    let mut s = connected_with_one_down(secs(10), 2);
    s.answered(ms(3), 1, 2, Err(AskFailure::Refused("still down".into())));
    assert_eq!(s.confirmed_bound(), Some(secs(10)));
    // The background re-ask goes out ...
    let next = s.poll_timeout().expect("a re-ask is due");
    s.handle_timeout(next);
    assert_eq!(asked(&drain(&mut s)), [(1, 3)]);
    // ... and the client reconnects, to server 1, before it is answered.
    let t = next + Duration::from_millis(1);
    s.client_connected(t);
    assert_eq!(
        asked(&drain(&mut s)),
        [(1, 4)],
        "asked again after the connection"
    );
    assert_eq!(s.confirmed_bound(), None);
    s.answered(
        t + Duration::from_millis(1),
        1,
        3,
        Err(AskFailure::Refused("not running yet".into())),
    );
    assert_eq!(
        s.confirmed_bound(),
        None,
        "an ask older than the connection confirms nothing"
    );
    s.answered(t + Duration::from_millis(2), 1, 4, Ok(Some(secs(2))));
    assert_eq!(s.confirmed_bound(), Some(secs(2)));
}

#[test]
fn an_unresolvable_name_is_a_warning_and_all_unresolvable_a_refusal() {
    let mut s = Startup::new(ms(0), config(2, Learn::SessionTimeout));
    drain(&mut s);
    s.resolved(ms(1), 0, Err("no such host".into()));
    s.resolved(ms(1), 1, Ok(()));
    drain(&mut s);
    s.answered(ms(2), 1, 1, Ok(Some(secs(4))));
    let commands = drain(&mut s);
    assert_eq!(
        connect_plan(&commands).map(|p| p.servers.clone()),
        Some(vec![1])
    );
    assert_eq!(
        notices(&mut s),
        [StartupNotice::LeftOut {
            server: 0,
            why: LeftOut::Unresolvable("no such host".into())
        }]
    );

    let mut s = Startup::new(ms(0), config(2, Learn::Liveness));
    drain(&mut s);
    s.resolved(ms(1), 0, Err("a".into()));
    assert_eq!(s.phase(), &Phase::Gathering);
    s.resolved(ms(2), 1, Err("b".into()));
    assert_eq!(
        s.phase(),
        &Phase::Refused(StartupError::Unresolvable(vec![
            (0, "a".into()),
            (1, "b".into())
        ]))
    );
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn no_answer_by_the_connect_timeout_is_a_refusal_naming_each_failure() {
    let mut s = Startup::new(ms(0), config(2, Learn::SessionTimeout));
    resolve_all(&mut s, 0);
    let mut now = ms(0);
    let mut asks = 0;
    while !matches!(s.phase(), Phase::Refused(_)) {
        for command in drain(&mut s) {
            if let StartupCommand::Ask {
                server, attempt, ..
            } = command
            {
                asks += 1;
                let outcome = if server == 0 {
                    AskFailure::Refused("down".into())
                } else {
                    AskFailure::Broken("not ZooKeeper".into())
                };
                s.answered(now, server, attempt, Err(outcome));
            }
        }
        let next = s.poll_timeout().expect("a deadline while gathering");
        assert!(next > now, "no busy loop: {next} after {now}");
        now = next;
        s.handle_timeout(now);
    }
    assert_eq!(
        now,
        ms(10_000),
        "refused at the connect timeout, not before"
    );
    assert!(asks < 2 * 20, "backed off: {asks} asks in 10 s");
    assert_eq!(
        s.phase(),
        &Phase::Refused(StartupError::NoAnswer(vec![
            (
                0,
                Some(LeftOut::NoAnswer(AskFailure::Refused("down".into())))
            ),
            (
                1,
                Some(LeftOut::NoAnswer(AskFailure::Broken(
                    "not ZooKeeper".into()
                )))
            ),
        ]))
    );
}

#[test]
fn a_timeout_below_the_clients_minimum_is_refused() {
    let mut s = Startup::new(ms(0), config(2, Learn::SessionTimeout));
    resolve_all(&mut s, 0);
    s.answered(ms(1), 0, 1, Ok(Some(secs(4))));
    s.answered(ms(1), 1, 1, Ok(Some(Duration::from_millis(1_200))));
    assert_eq!(
        s.phase(),
        &Phase::Refused(StartupError::TooShort {
            server: 1,
            negotiated: Duration::from_millis(1_200),
            min: Duration::from_millis(1_500),
        })
    );
}

#[test]
fn fifty_servers_forty_nine_silent_start_after_the_grace_on_the_one() {
    let mut s = Startup::new(ms(0), config(50, Learn::Liveness));
    resolve_all(&mut s, 0);
    s.answered(ms(3), 31, 1, Ok(None));
    s.handle_timeout(ms(253));
    let commands = drain(&mut s);
    let plan = connect_plan(&commands).expect("a plan");
    assert_eq!((plan.servers.clone(), plan.bound), (vec![31], None));
    assert_eq!(notices(&mut s).len(), 49);
    s.client_connected(ms(300));
    s.handle_timeout(ms(5_000));
    assert_eq!(drain(&mut s), [], "liveness is not asked after the plan");
}

/// One server under `Liveness`, answered at 1 ms: the client is about to
/// connect.
fn one_server_planned() -> Startup {
    let mut s = Startup::new(ms(0), config(1, Learn::Liveness));
    resolve_all(&mut s, 0);
    s.answered(ms(1), 0, 1, Ok(None));
    assert!(connect_plan(&drain(&mut s)).is_some());
    s
}

#[test]
fn a_failed_client_is_retried_until_the_connect_timeout() {
    let mut s = one_server_planned();
    s.client_failed(ms(100), "connection reset".into());
    assert_eq!(drain(&mut s), []);
    let retry = s.poll_timeout().expect("a retry");
    // Half to all of the first pause (100 ms): jittered.
    assert!(retry >= ms(150) && retry <= ms(200), "{retry}");
    s.handle_timeout(retry);
    assert!(connect_plan(&drain(&mut s)).is_some(), "tried again");
    s.client_failed(ms(9_950), "reset again".into());
    s.handle_timeout(ms(10_000));
    assert_eq!(
        s.phase(),
        &Phase::Refused(StartupError::ClientFailed("reset again".into()))
    );
}

/// A client attempt still under way at the connect timeout is the
/// adapter's to bound (the `Connect` command carries the deadline): the
/// machine names no moment it would do nothing at, so an adapter that
/// drives it meanwhile is never woken at once and again. (It named the
/// connect timeout, and a simulated transport that kept driving it spun at
/// that instant.)
#[test]
fn an_attempt_under_way_at_the_connect_timeout_names_no_idle_moment() {
    let mut s = Startup::new(ms(0), config(2, Learn::SessionTimeout));
    resolve_all(&mut s, 0);
    s.answered(ms(1), 0, 1, Ok(Some(secs(4))));
    s.answered(ms(2), 1, 1, Err(AskFailure::Refused("down".into())));
    assert!(connect_plan(&drain(&mut s)).is_some());
    // Drive it as an adapter would, the refusing server refusing at once.
    let mut now = ms(2);
    let mut wakes = 0;
    while let Some(next) = s.poll_timeout() {
        assert!(next > now, "named {next} at {now}, nothing to do then");
        if next > ms(60_000) {
            break;
        }
        now = next;
        wakes += 1;
        s.handle_timeout(now);
        for (server, attempt) in asked(&drain(&mut s)) {
            s.answered(
                now,
                server,
                attempt,
                Err(AskFailure::Refused("down".into())),
            );
        }
    }
    assert!(matches!(s.phase(), Phase::Connecting(_)), "{:?}", s.phase());
    assert!(wakes < 100, "{wakes} wakes in a minute");
}

/// A client that fails at once (every server it is given refuses) is
/// tried again after pauses that double up to a second, not every 100 ms:
/// a fleet starting against refusing servers does not storm them.
#[test]
fn a_client_that_fails_fast_is_retried_with_growing_pauses() {
    let mut s = one_server_planned();
    let (mut now, mut attempts, mut pauses) = (ms(1), 1, Vec::new());
    loop {
        s.client_failed(now, "refused".into());
        let Some(retry) = s.poll_timeout() else { break };
        assert!(retry > now, "retried at {retry}, failed at {now}");
        pauses.push(retry.saturating_since(now));
        now = retry;
        s.handle_timeout(now);
        if connect_plan(&drain(&mut s)).is_none() {
            break;
        }
        attempts += 1;
    }
    assert!(
        matches!(s.phase(), Phase::Refused(StartupError::ClientFailed(_))),
        "{:?}",
        s.phase()
    );
    assert!(attempts <= 20, "{attempts} attempts in the connect timeout");
    assert!(pauses[4] >= Duration::from_millis(500), "{pauses:?}");
    assert!(
        pauses.iter().all(|p| *p <= Duration::from_secs(1)),
        "{pauses:?}"
    );
}

#[test]
fn stale_and_unknown_outcomes_are_ignored() {
    let mut s = Startup::new(ms(0), config(1, Learn::SessionTimeout));
    resolve_all(&mut s, 0);
    s.answered(ms(1), 0, 7, Ok(Some(secs(1))));
    s.answered(ms(1), 5, 1, Ok(Some(secs(1))));
    s.resolved(ms(1), 9, Ok(()));
    assert_eq!(s.phase(), &Phase::Gathering);
    s.answered(ms(2), 0, 1, Ok(Some(secs(4))));
    assert!(matches!(s.phase(), Phase::Connecting(_)));
}

/// What a simulated server does when asked.
#[derive(Debug, Clone, Copy)]
enum Behaviour {
    /// Answers after `delay` ms with `timeout` ms.
    Answers { delay: u64, timeout: u64 },
    /// Refuses until `up_at` ms, then answers at once with `timeout`.
    Restarts { up_at: u64, timeout: u64 },
    /// Accepts and never answers.
    Silent,
    /// Its name does not resolve.
    Unresolvable,
    /// Answers garbage.
    Broken,
}

fn behaviour() -> impl Strategy<Value = Behaviour> {
    prop_oneof![
        4 => (0_u64..400, 1_500_u64..20_000)
            .prop_map(|(delay, timeout)| Behaviour::Answers { delay, timeout }),
        2 => (0_u64..15_000, 1_500_u64..20_000)
            .prop_map(|(up_at, timeout)| Behaviour::Restarts { up_at, timeout }),
        2 => Just(Behaviour::Silent),
        1 => Just(Behaviour::Unresolvable),
        1 => Just(Behaviour::Broken),
    ]
}

/// What [`run`] saw.
struct Run {
    s: Startup,
    /// (time, server, asked at a reconnection)
    asks: Vec<(u64, usize, bool)>,
    planned: Option<u64>,
    /// The servers whose answer reached the machine.
    answered: BTreeSet<usize>,
}

/// An outcome the adapter will report: when, for which server and ask, what.
type Pending = (u64, usize, u32, Result<Option<Duration>, AskFailure>);

/// Runs a start-up against `servers` to its plan or refusal, then on for
/// a simulated minute with the client connecting `connect_after` ms after
/// the plan (at once if 0) and again every `reconnect_every` ms; returns
/// the machine, the asks (time, server) and the time of the plan. No
/// moment the machine names may leave it idle: time must move.
fn run(
    servers: &[Behaviour],
    learn: Learn,
    seed: u64,
    reconnect_every: u64,
    connect_after: u64,
) -> Run {
    let mut s = Startup::new(
        ms(0),
        StartupConfig {
            seed,
            ..config(servers.len(), learn)
        },
    );
    let mut pending: Vec<Pending> = Vec::new();
    let mut answered = BTreeSet::new();
    let mut asks = Vec::new();
    let mut planned = None;
    let mut now = 0_u64;
    let mut next_reconnect = None;
    let mut same = 0;
    let mut recheck_at = None;
    let end = 60_000;
    loop {
        let commands = drain(&mut s);
        let drained = commands.is_empty();
        for command in commands {
            match command {
                StartupCommand::Resolve { server, .. } => {
                    let ok = !matches!(servers[server], Behaviour::Unresolvable);
                    s.resolved(ms(now), server, if ok { Ok(()) } else { Err("nx".into()) });
                }
                StartupCommand::Ask {
                    server,
                    attempt,
                    deadline,
                } => {
                    let recheck = recheck_at == Some(now);
                    asks.push((now, server, recheck));
                    let answer = |t: u64| match learn {
                        Learn::SessionTimeout => Some(Duration::from_millis(t)),
                        Learn::Liveness => None,
                    };
                    let outcome = match servers[server] {
                        Behaviour::Answers { delay, timeout } => {
                            Some((now + delay, Ok(answer(timeout))))
                        }
                        Behaviour::Restarts { up_at, timeout } if now >= up_at => {
                            Some((now + 1, Ok(answer(timeout))))
                        }
                        Behaviour::Restarts { .. } => {
                            Some((now, Err(AskFailure::Refused("down".into()))))
                        }
                        Behaviour::Broken => {
                            Some((now + 2, Err(AskFailure::Broken("garbage".into()))))
                        }
                        Behaviour::Silent | Behaviour::Unresolvable => None,
                    };
                    let (at, outcome) =
                        outcome.unwrap_or((deadline.as_millis(), Err(AskFailure::Silent)));
                    // The adapter gives up on an ask at its deadline.
                    let (at, outcome) = if at > deadline.as_millis() {
                        (deadline.as_millis(), Err(AskFailure::Silent))
                    } else {
                        (at, outcome)
                    };
                    pending.push((at, server, attempt, outcome));
                }
                StartupCommand::Connect { .. } => {
                    planned.get_or_insert(now);
                    if connect_after == 0 {
                        s.client_connected(ms(now));
                        recheck_at = Some(now);
                        next_reconnect = Some(now + reconnect_every);
                    } else {
                        // The client takes its time (past the connect
                        // timeout, too: the adapter bounds the attempt),
                        // and the machine is driven meanwhile.
                        next_reconnect = Some(now + connect_after);
                    }
                }
            }
        }
        if matches!(s.phase(), Phase::Refused(_)) {
            break;
        }
        if !drained {
            // What the outcomes just fed in asked for, at the same time.
            continue;
        }
        let due_pending = pending.iter().map(|p| p.0).min();
        let next = [
            due_pending,
            s.poll_timeout().map(Timestamp::as_millis),
            next_reconnect,
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else { break };
        assert!(next >= now, "time went back: {next} < {now}");
        same = if next == now { same + 1 } else { 0 };
        assert!(same < 1_000, "no progress at t={now}: {:?}", s.phase());
        if next > end {
            break;
        }
        now = next;
        if let Some(i) = pending.iter().position(|p| p.0 <= now) {
            let (_, server, attempt, outcome) = pending.remove(i);
            if outcome.is_ok() {
                answered.insert(server);
            }
            s.answered(ms(now), server, attempt, outcome);
            continue;
        }
        if next_reconnect == Some(now) {
            s.client_connected(ms(now));
            recheck_at = Some(now);
            next_reconnect = Some(now + reconnect_every);
            continue;
        }
        s.handle_timeout(ms(now));
    }
    Run {
        s,
        asks,
        planned,
        answered,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Whatever the servers do: a start within the grace of the first
    /// answer; a bound no greater than any listed server's answer; only
    /// answering or refusing servers listed; no server asked in a storm;
    /// a refusal exactly when nothing answered in time.
    #[test]
    fn the_decision_holds_for_any_ensemble(
        servers in proptest::collection::vec(behaviour(), 1..8),
        learn in prop_oneof![Just(Learn::SessionTimeout), Just(Learn::Liveness)],
        seed in any::<u64>(),
        reconnect_every in 2_000_u64..20_000,
        connect_after in prop_oneof![Just(0_u64), 1_u64..15_000],
    ) {
        let Run { s, asks, planned, answered } =
            run(&servers, learn, seed, reconnect_every, connect_after);
        let answer_at = |b: &Behaviour| match *b {
            Behaviour::Answers { delay, .. } if delay < 1_000 => Some(delay),
            Behaviour::Restarts { up_at, .. } => Some(up_at),
            _ => None,
        };
        let first_possible = servers.iter().filter_map(answer_at).min();
        match s.phase() {
            Phase::Running(plan) => {
                let planned = planned.expect("planned");
                // Every listed server answered or refused; none is
                // silent, broken or unresolvable.
                for &i in &plan.servers {
                    prop_assert!(
                        matches!(servers[i], Behaviour::Answers { .. } | Behaviour::Restarts { .. }),
                        "listed {:?}", servers[i]
                    );
                }
                // Started within the grace of the first answer (asks
                // are re-sent at most 10 s apart to a restarting one).
                if let Some(first) = servers.iter().filter_map(|b| match *b {
                    Behaviour::Answers { delay, .. } if delay < 1_000 => Some(delay),
                    _ => None,
                }).min() {
                    prop_assert!(planned <= first + 250, "planned at {planned}, first answer at {first}");
                }
                if learn == Learn::SessionTimeout {
                    let bound = s.bound().expect("a bound");
                    for &i in &plan.servers {
                        if let Behaviour::Answers { timeout, .. } | Behaviour::Restarts { timeout, .. } = servers[i] {
                                                        if answered.contains(&i) {
                                prop_assert!(bound <= Duration::from_millis(timeout),
                                    "bound {bound:?} above server {i}'s {timeout} ms");
                            }
                        }
                    }
                    prop_assert!(bound >= Duration::from_millis(1_500));
                } else {
                    prop_assert_eq!(s.bound(), None);
                }
            }
            Phase::Refused(StartupError::TooShort { negotiated, min, .. }) => {
                prop_assert!(negotiated < min);
            }
            Phase::Refused(StartupError::Unresolvable(_)) => {
                prop_assert!(servers.iter().all(|b| matches!(b, Behaviour::Unresolvable)));
            }
            Phase::Refused(StartupError::NoAnswer(_)) => {
                prop_assert!(
                    first_possible.is_none_or(|t| t + 10 >= 10_000 - 1_000),
                    "refused though a server would answer at {first_possible:?}"
                );
            }
            other => prop_assert!(false, "ended in {other:?}"),
        }
        // No storm: apart from the rechecks at reconnections, asks of
        // one server come at least half the minimum backoff apart, and
        // at most one per second on average after the first 10 s.
        for server in 0..servers.len() {
            let times: Vec<u64> = asks.iter()
                .filter(|(_, s, recheck)| *s == server && !recheck)
                .map(|(t, _, _)| *t)
                .collect();
            for pair in times.windows(2) {
                prop_assert!(pair[1] - pair[0] >= 50, "server {server} asked at {pair:?}");
            }
            let late = times.iter().filter(|&&t| t > 10_000).count();
            prop_assert!(late <= 50, "server {server}: {late} asks in the last 50 s");
        }
    }
}
