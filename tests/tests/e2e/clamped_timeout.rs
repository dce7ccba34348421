//! The lease never outlasts the real session (a server may grant less than asked), against
//! a real ZooKeeper 3.8 server that clamps the request: candidates ask for a
//! 60 s session from a server whose `maxSessionTimeout` is 4 s (tickTime
//! 200 ms), so the server expires a cut-off leader's session 4 s after its
//! last contact. A transport that told the core "60 s" would let that leader
//! lead (and its supervised child run) for 40 s after its successor was
//! elected.
//!
//! | scenario | tests |
//! |---|---|
//! | both transports report the server's 4 s, not the 60 s asked for | `*::both_candidates_are_told_the_negotiated_timeout_*` |
//! | the leader black-holed: it stops leading before its successor is elected | `*::blackholed_leader_stops_leading_before_its_successor_is_elected` |
//! | `zkelect run`: the black-holed leader's child is stopped before the successor's starts | `cli_*` |
//! | zookeeper-async with a server stopped at start: starts at once on the other; when the client moves to the stopped one (back, with a lower maximum), the lower timeout is reported before the core hears of the connection | `a_server_stopped_at_start_lowers_the_bound_before_the_client_uses_it` |
//! | zookeeper-async's handshake sessions are closed, not left to expire | `the_handshake_leaves_no_session_behind` |
//!
//! Timing is asserted only as the order of recorded events (one monotonic
//! clock; see `harness` and `support`).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use zkelect::{
    Election, EventStream, Notice, SessionEvent, TransportEvent, ZkAsyncOptions, ZkAsyncTransport,
};
use zkelect_tests::{Proxy, ZkServer};

use crate::harness::{describe, wait_for, wait_settled, Cand, Client, Event, SETTLE};
use crate::support::{mono_ns, ms, queue_ids, ChildKind, Observer};

/// What every candidate asks for.
const REQUESTED: Duration = Duration::from_secs(60);
/// What the server grants at most (20 ticks of [`TICK`], set explicitly).
const SERVER_MAX: Duration = Duration::from_secs(4);
const TICK: Duration = Duration::from_millis(200);

/// A standalone server that cuts every request above [`SERVER_MAX`].
fn clamped_server() -> ZkServer {
    crate::harness::init_tracing();
    let server = ZkServer::builder()
        .tick_time(TICK)
        .max_session_timeout(SERVER_MAX)
        .start()
        .unwrap_or_else(|e| panic!("cannot start ZooKeeper: {e}"));
    assert_eq!(server.session_timeout_bounds().1, SERVER_MAX);
    server
}

/// The session timeouts of every `Connected` a transport reported, in order.
type Reported = Arc<Mutex<Vec<Duration>>>;

/// Passes a transport's events on unchanged, noting the timeout of every
/// `Connected`: what the core is told.
fn tap(mut events: EventStream) -> (EventStream, Reported) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let reported = Reported::default();
    let log = Arc::clone(&reported);
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if let TransportEvent::Session(SessionEvent::Connected { timeout, .. }) = &event {
                log.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(*timeout);
            }
            if tx.send(event).is_err() {
                return;
            }
        }
    });
    (rx, reported)
}

fn reported(r: &Reported) -> Vec<Duration> {
    r.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

/// A candidate over its own session on `client`, asking for [`REQUESTED`].
async fn candidate(client: Client, hosts: &str, path: &str, id: &str) -> (Cand, Reported) {
    let (t, events) = client
        .transport(hosts, REQUESTED, None)
        .await
        .unwrap_or_else(|e| panic!("{client}: {id} cannot connect to {hosts}: {e}"));
    let (events, seen) = tap(events);
    let cand = Cand::join(id, Election::builder(t, events).path(path).id(id)).await;
    (cand, seen)
}

/// `a` through a proxy (it joins first and leads), `b` directly.
async fn leader_behind_a_proxy(
    client: Client,
    path: &str,
) -> (ZkServer, Proxy, [(Cand, Reported); 2]) {
    let server = clamped_server();
    let proxy = Proxy::start(server.addr()).expect("start a proxy");
    let hosts = server.connect_string();
    let a = candidate(client, &proxy.connect_string(), path, "a").await;
    wait_for(
        "a to lead",
        SETTLE,
        || a.0.is_leader().then_some(()),
        || a.0.describe(),
    )
    .await;
    let b = candidate(client, &hosts, path, "b").await;
    let s = wait_settled(&[&a.0, &b.0], &hosts, path, SETTLE).await;
    assert_eq!(s.leader, 0, "a joined first and leads");
    (server, proxy, [a, b])
}

async fn both_candidates_are_told_the_negotiated_timeout_not_the_requested_one(client: Client) {
    let path = "/e2e/clamped/told";
    let (_server, _proxy, [(a, a_seen), (b, b_seen)]) = leader_behind_a_proxy(client, path).await;
    for (who, seen) in [("a", &a_seen), ("b", &b_seen)] {
        assert_eq!(
            reported(seen),
            [SERVER_MAX],
            "{client}: {who} asked for {REQUESTED:?} from a server granting at most \
             {SERVER_MAX:?}; the core must be told what the server granted"
        );
    }
    crate::harness::close_all(&[&a, &b]).await;
}

async fn blackholed_leader_stops_leading_before_its_successor_is_elected(client: Client) {
    let path = "/e2e/clamped/blackhole";
    let (_server, proxy, [(a, _), (b, _)]) = leader_behind_a_proxy(client, path).await;
    let all = [&a, &b];

    let cut_at = Instant::now();
    proxy.blackhole();
    // The server expires a's session after SERVER_MAX (not REQUESTED) and
    // deletes its node; b is elected.
    let (elected_at, _) = wait_for(
        "b to be elected after the server expired a's session",
        SERVER_MAX * 3 + SETTLE,
        || b.rec.elections().first().copied(),
        || describe(&all),
    )
    .await;
    proxy.heal();

    let left = a
        .rec
        .first_after(cut_at, |e| matches!(e, Event::Role(r) if !r.is_leader()))
        .unwrap_or_else(|| {
            panic!(
                "{client}: SPLIT BRAIN: a still had the Leader role when b was elected\n{}",
                describe(&all)
            )
        });
    let suspended = a
        .rec
        .first_after(cut_at, |e| {
            matches!(e, Event::Notice(Notice::Suspended | Notice::Demoted { .. }))
        })
        .unwrap_or_else(|| {
            panic!(
                "{client}: a never reported Suspended (or Demoted)\n{}",
                describe(&all)
            )
        });
    println!(
        "{client}: black hole at 0 ms: a {:?} at {} ms, a's role {:?} at {} ms, b Elected at {} ms",
        suspended.event,
        (suspended.at - cut_at).as_millis(),
        left.event,
        (left.at - cut_at).as_millis(),
        (elected_at - cut_at).as_millis(),
    );
    assert!(
        suspended.at < elected_at,
        "{client}: SPLIT BRAIN: a reported {:?} {} ms after b was elected\n{}",
        suspended.event,
        (suspended.at - elected_at).as_millis(),
        describe(&all)
    );
    assert!(
        left.at < elected_at,
        "{client}: SPLIT BRAIN: a still had the Leader role {} ms after b was elected\n{}",
        (left.at - elected_at).as_millis(),
        describe(&all)
    );
    crate::harness::close_all(&all).await;
}

/// One module of tests per transport.
macro_rules! scenarios_on {
    ($module:ident, $client:expr) => {
        mod $module {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn both_candidates_are_told_the_negotiated_timeout_not_the_requested_one() {
                super::both_candidates_are_told_the_negotiated_timeout_not_the_requested_one(
                    $client,
                )
                .await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn blackholed_leader_stops_leading_before_its_successor_is_elected() {
                super::blackholed_leader_stops_leading_before_its_successor_is_elected($client)
                    .await;
            }
        }
    };
}

scenarios_on!(on_zookeeper_async, super::Client::ZookeeperAsync);
scenarios_on!(on_zookeeper_client, super::Client::ZookeeperClient);

// ----- zookeeper-async learns the bound from the servers that answer ---------------

/// Two servers that clamp differently: `a` to 10 s, `b` to 2 s, and `b` is
/// stopped when zookeeper-async connects. The transport starts on `a` at
/// once (reporting `a`'s 10 s, the only answer). Then `b` comes back and `a`
/// goes: the client moves to `b`, and before the core hears of the
/// connection the transport has asked `b` and reports its 2 s: the bound
/// never rests on a server that did not answer.
///
/// `a`'s 10 s (not the 4 s of the other tests) keeps the client on `a`
/// while `b`'s JVM starts: with 4 s, a loaded machine once dropped the
/// connection to `a` then, the client came back to `a` and rightly reported
/// its bound again, and the test took that for `b`'s. Only what is reported
/// after `a` is down must be `b`'s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_stopped_at_start_lowers_the_bound_before_the_client_uses_it() {
    const A_MAX: Duration = Duration::from_secs(10);
    const B_MAX: Duration = Duration::from_secs(2);
    crate::harness::init_tracing();
    let a = ZkServer::builder()
        .tick_time(TICK)
        .max_session_timeout(A_MAX)
        .start()
        .unwrap_or_else(|e| panic!("cannot start ZooKeeper: {e}"));
    let b = ZkServer::builder()
        .tick_time(TICK)
        .max_session_timeout(B_MAX)
        .start()
        .unwrap_or_else(|e| panic!("cannot start ZooKeeper: {e}"));
    b.stop();
    let hosts = format!("{},{}/chroot", a.connect_string(), b.connect_string());
    let started = Instant::now();
    let (transport, events) = ZkAsyncTransport::connect(
        ZkAsyncOptions::new(&hosts)
            .session_timeout(REQUESTED)
            .connect_timeout(Duration::from_secs(10))
            .reconnect_delay(Duration::from_millis(100)),
    )
    .await
    .unwrap_or_else(|e| panic!("connect with one server stopped: {e}"));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "started after {took:?}");
    let (events, reported_timeouts) = tap(events);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(reported(&reported_timeouts), [A_MAX], "a's answer");

    b.restart().unwrap_or_else(|e| panic!("restart b: {e}"));
    a.stop();
    // From here only `b` can answer. A stale bound (a's 10 s reported on
    // `b`) leaves the last report above b's and fails the wait.
    let a_down = reported(&reported_timeouts).len();
    wait_for(
        "a Connected from b with b's bound",
        Duration::from_secs(30),
        || {
            let seen = reported(&reported_timeouts);
            (seen.len() >= 2 && seen.last().is_some_and(|t| *t <= B_MAX)).then_some(())
        },
        || format!("{:?}", reported(&reported_timeouts)),
    )
    .await;
    let seen = reported(&reported_timeouts);
    println!("started in {took:?}; Connected timeouts reported: {seen:?} (a down after {a_down})");
    assert!(
        seen[a_down..].iter().all(|t| *t <= B_MAX),
        "a Connected from b reported more than b's {B_MAX:?}: {seen:?}"
    );
    drop(events);
    zkelect::Transport::close(&transport).await;
}

/// zookeeper-async's handshake opens a session on every server; it closes
/// it at once, so the server holds only the transport's own session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handshake_leaves_no_session_behind() {
    let server = clamped_server();
    let sessions = || {
        server
            .mntr()
            .unwrap_or_else(|e| panic!("mntr: {e}"))
            .get("zk_global_sessions")
            .cloned()
            .unwrap_or_else(|| panic!("no zk_global_sessions in mntr"))
    };
    assert_eq!(sessions(), "0");
    let (transport, events) = ZkAsyncTransport::connect(
        ZkAsyncOptions::new(server.connect_string()).session_timeout(REQUESTED),
    )
    .await
    .expect("connect");
    assert_eq!(
        sessions(),
        "1",
        "the handshake's session was left behind (it would live {SERVER_MAX:?})"
    );
    drop(events);
    zkelect::Transport::close(&transport).await;
}

// ----- zkelect run -----------------------------------------------------------------

/// `zkelect run` options for a candidate asking for [`REQUESTED`] on `transport`.
fn run_args(connect: &str, path: &str, id: &str, transport: &str) -> Vec<String> {
    let requested = REQUESTED.as_millis().to_string();
    [
        "run",
        "--connect",
        connect,
        "--path",
        path,
        "--id",
        id,
        "--session-timeout",
        &requested,
        "--transport",
        transport,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Two `zkelect run` candidates, `a` through a proxy (leading, its child
/// beating), `b` directly; `a` is black-holed; `a`'s child must be dead
/// before `b`'s starts.
fn cli_blackholed_leader_child_is_stopped_before_the_successor_starts(transport: &str) {
    const START: Duration = Duration::from_secs(20);
    let server = clamped_server();
    let proxy = Proxy::start(server.addr()).expect("start a proxy");
    let zk = server.connect_string();
    let dir = tempfile::Builder::new()
        .prefix("zkelect-clamped-test-")
        .tempdir()
        .expect("a temporary directory");
    let observer = Observer::start(dir.path());
    let path = "/svc/clamped";
    let a = crate::support::Candidate::spawn(
        dir.path(),
        "a",
        &run_args(&proxy.connect_string(), path, "a", transport),
        ChildKind::Beats,
    );
    a.wait_run(1, START);
    let b = crate::support::Candidate::spawn(
        dir.path(),
        "b",
        &run_args(&zk, path, "b", transport),
        ChildKind::Beats,
    );
    let logs = || format!("{}\n{}", a.log_text(), b.log_text());
    crate::support::wait_for(
        "b queued behind a",
        START,
        Duration::from_millis(50),
        || (queue_ids(&zk, path) == ["a", "b"]).then_some(()),
        logs,
    );
    let run_a = a.wait_beats(1, 3, START);
    assert!(b.runs().is_empty(), "b follows: its child must not run");

    let at = mono_ns();
    proxy.blackhole();
    let run_b = b.wait_run(1, SERVER_MAX * 3 + START);
    let a_dead = observer.death_seen(run_a.pid).unwrap_or_else(|| {
        panic!(
            "ZOMBIE ({transport}): a's child still alive when b's child started: a's lease \
             outlasted its {SERVER_MAX:?} session\n{}",
            logs()
        )
    });
    let a_last = a.runs()[0].last;
    println!(
        "{transport}: black hole at 0 ms: a's last beat at {:.0} ms, a's child seen dead at \
         {:.0} ms, b's child started at {:.0} ms",
        ms(at, a_last),
        ms(at, a_dead),
        ms(at, run_b.start)
    );
    assert!(
        a_last < run_b.start,
        "{transport}: the heartbeat files overlap: a's child beat {:.0} ms after b's started",
        ms(run_b.start, a_last)
    );
    assert!(
        a_dead < run_b.start,
        "{transport}: a's child was seen alive {:.0} ms after b's child started",
        ms(run_b.start, a_dead)
    );
    proxy.heal();
}

#[test]
fn cli_blackholed_leader_child_is_stopped_before_the_successor_starts_on_zookeeper_async() {
    cli_blackholed_leader_child_is_stopped_before_the_successor_starts("zookeeper-async");
}

#[test]
fn cli_blackholed_leader_child_is_stopped_before_the_successor_starts_on_zookeeper_client() {
    cli_blackholed_leader_child_is_stopped_before_the_successor_starts("zookeeper-client");
}
