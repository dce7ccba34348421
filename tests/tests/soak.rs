//! Memory per watch event on a long-lived leader, on both real transports,
//! against a 3-server ensemble (every member listed): a leader holds its
//! election for the whole run while two followers on its session take
//! turns joining behind it and leaving, so that every turn fires one watch
//! (the leaving follower's node is deleted under the other's watch). After
//! a warm-up, at least 10,000 watch events in two halves; live heap counted
//! by dhat's allocator (every allocation and free in the process: the
//! client library's, the transport's, the driver's, the machines'), before
//! and after each half. Anything kept per event grows in both halves alike;
//! the bound is a few bytes per event.
//!
//! Run: `cargo test -p zkelect-tests --test soak -- --nocapture`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zkelect::{Election, EventStream, Role, Session, TransportEvent};
use zkelect_tests::{TransportKind, ZkEnsemble};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// Watch events measured on each transport (`ZKELECT_SOAK_EVENTS` for a
/// longer soak).
fn measured_events() -> u64 {
    std::env::var("ZKELECT_SOAK_EVENTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000)
}
/// Turns before measuring: every pool, map and buffer at its working size.
const WARM_UP: u64 = 3_000;
/// The bound: a few bytes per event. What the process keeps for good is
/// per connection, per session or per path, never per event.
const BYTES_PER_EVENT_MAX: f64 = 4.0;

fn live() -> i64 {
    i64::try_from(dhat::HeapStats::get().curr_bytes).unwrap_or(i64::MAX)
}

/// Passes a transport's events on, counting the watch events.
fn counted(mut events: EventStream) -> (EventStream, Arc<AtomicU64>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let count = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&count);
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if matches!(event, TransportEvent::Watch(_)) {
                seen.fetch_add(1, Ordering::Relaxed);
            }
            if tx.send(event).is_err() {
                return;
            }
        }
    });
    (rx, count)
}

async fn follower(session: &Session, path: &str, id: &str) -> Election {
    let election = session
        .election(path)
        .id(id)
        .join()
        .await
        .unwrap_or_else(|e| panic!("{id} joins: {e}"));
    assert_eq!(election.role(), Role::Follower, "{id} follows the leader");
    election
}

/// One turn: a follower joins behind the one already queued, and the one
/// queued leaves: the newcomer's watch on it fires. Waits for the event.
async fn turn(
    session: &Session,
    path: &str,
    queued: Election,
    id: &str,
    events: &AtomicU64,
) -> Election {
    let before = events.load(Ordering::Relaxed);
    let newcomer = follower(session, path, id).await;
    queued.close().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while events.load(Ordering::Relaxed) == before {
        assert!(
            Instant::now() < deadline,
            "no watch event for a leaving follower"
        );
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    newcomer
}

async fn soak(ensemble: &ZkEnsemble, transport: TransportKind) -> (Vec<Half>, Duration) {
    let (t, events) = transport
        .transport(&ensemble.connect_string(), Duration::from_secs(4), None)
        .await
        .unwrap_or_else(|e| panic!("{transport}: connect: {e}"));
    let (events, count) = counted(events);
    let session = Session::from_transport(t, events);
    let path = format!("/soak/{}", transport.name());
    let leader = session
        .election(&path)
        .id("leader")
        .join()
        .await
        .unwrap_or_else(|e| panic!("{transport}: the leader joins: {e}"));
    leader.wait_leader().await.expect("leads");
    let mut queued = follower(&session, &path, "f0").await;
    let mut i = 0_u64;
    while count.load(Ordering::Relaxed) < WARM_UP {
        i += 1;
        queued = turn(&session, &path, queued, &format!("f{}", i % 2), &count).await;
    }
    // Let the warm-up's last replies and frees settle.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let target = measured_events();
    let started = Instant::now();
    let mut halves = Vec::new();
    for _ in 0..2 {
        let (heap_before, events_before) = (live(), count.load(Ordering::Relaxed));
        while count.load(Ordering::Relaxed) - events_before < target / 2 {
            i += 1;
            queued = turn(&session, &path, queued, &format!("f{}", i % 2), &count).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (heap_after, events_after) = (live(), count.load(Ordering::Relaxed));
        halves.push(Half {
            bytes: heap_after - heap_before,
            events: events_after - events_before,
        });
    }
    let took = started.elapsed();
    assert!(
        leader.role().is_leader(),
        "{transport}: the leader led throughout"
    );
    queued.close().await;
    leader.close().await;
    session.close().await;
    (halves, took)
}

/// Live heap growth over half the measured events.
#[derive(Debug, Clone, Copy)]
struct Half {
    bytes: i64,
    events: u64,
}

impl Half {
    fn per_event(self) -> f64 {
        self.bytes as f64 / self.events as f64
    }
}

#[test]
fn live_heap_per_watch_event_stays_flat_on_a_long_lived_leader() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let ensemble = ZkEnsemble::start().unwrap_or_else(|e| panic!("cannot start the ensemble: {e}"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let mut results = Vec::new();
    for transport in TransportKind::ALL {
        let (halves, took) = runtime.block_on(soak(&ensemble, transport));
        let events: u64 = halves.iter().map(|h| h.events).sum();
        let bytes: i64 = halves.iter().map(|h| h.bytes).sum();
        println!(
            "{transport}: {:.2} B of live heap per watch event over {events} events in {took:?} \
             (first half {:.2} B, second half {:.2} B)",
            bytes as f64 / events as f64,
            halves[0].per_event(),
            halves[1].per_event(),
        );
        results.push((transport, halves));
    }
    // What is kept per event shows in both halves; a pool or a map that
    // grows once to its working size (a client library's buffers) shows in
    // one of them only.
    for (transport, halves) in results {
        let kept = halves[0].per_event().min(halves[1].per_event());
        assert!(
            kept <= BYTES_PER_EVENT_MAX,
            "{transport}: {kept:.1} B of live heap kept per watch event in both halves \
             (at most {BYTES_PER_EVENT_MAX}): {halves:?}"
        );
    }
}
