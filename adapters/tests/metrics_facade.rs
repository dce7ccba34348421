//! What an election tells the metrics facade, through a recorder:
//!
//! * its counters, the leader gauge and the latency histograms reach it.
//!   The driver tells the facade on the turn after the one whose requests
//!   went out (so that the facade's work is not on a hand-off's path); it
//!   is told all the same, in order, and a machine that stops still has
//!   its last word;
//! * an observation of an election this process takes part in leaves the
//!   election's series alone: they are labelled by path only, and an
//!   observer's counters (zero) or its close (the leader gauge to 0) would
//!   otherwise overwrite the candidate's.
//!
//! One binary for every test of the facade: the recorder is global, so
//! they share it, each on a path of its own.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use zkelect::core::{Recipe, Reply, Request, SessionEvent, ZkCode};
use zkelect::memory::MemoryServer;
use zkelect::{Session, Transport, TransportEvent};

const PATH: &str = "/svc/metered";

/// Counters and gauges (their last value), and histograms (how many
/// samples), by path and name.
#[derive(Default)]
struct Store(Mutex<BTreeMap<(String, String), Arc<Cell>>>);

/// The one recorder of this binary, installed by the first test to ask.
fn store() -> Arc<Store> {
    static STORE: OnceLock<Arc<Store>> = OnceLock::new();
    Arc::clone(STORE.get_or_init(|| {
        let store = Arc::new(Store::default());
        metrics::set_global_recorder(Rec(Arc::clone(&store))).expect("the only recorder");
        store
    }))
}

#[derive(Default)]
struct Cell(AtomicU64);

impl HistogramFn for Cell {
    fn record(&self, _: f64) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Store {
    fn cell(&self, key: &Key) -> Arc<Cell> {
        let path = key
            .labels()
            .find(|l| l.key() == "path")
            .map(|l| l.value().to_owned())
            .unwrap_or_default();
        let mut cells = self.0.lock().unwrap();
        Arc::clone(cells.entry((path, key.name().to_owned())).or_default())
    }

    fn get(&self, path: &str, name: &str) -> u64 {
        self.0
            .lock()
            .unwrap()
            .get(&(path.to_owned(), name.to_owned()))
            .map_or(0, |c| c.0.load(Ordering::SeqCst))
    }

    fn gauge(&self, path: &str, name: &str) -> f64 {
        f64::from_bits(self.get(path, name))
    }
}

struct Rec(Arc<Store>);

impl Recorder for Rec {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(Arc::new(Forward(self.0.cell(key))))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(Arc::new(Forward(self.0.cell(key))))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.0.cell(key))
    }
}

/// A counter's or gauge's handle on a cell (the cell's own atomic).
struct Forward(Arc<Cell>);

impl metrics::CounterFn for Forward {
    fn increment(&self, value: u64) {
        self.0 .0.fetch_add(value, Ordering::SeqCst);
    }
    // Two elections on one path share a series: the larger count stands.
    fn absolute(&self, value: u64) {
        self.0 .0.fetch_max(value, Ordering::SeqCst);
    }
}

impl metrics::GaugeFn for Forward {
    fn increment(&self, _: f64) {}
    fn decrement(&self, _: f64) {}
    fn set(&self, value: f64) {
        self.0 .0.store(value.to_bits(), Ordering::SeqCst);
    }
}

#[tokio::test(start_paused = true)]
async fn counters_the_leader_gauge_and_the_histograms_reach_the_recorder() {
    let store = store();
    let server = MemoryServer::new();
    let session = Session::connect(server.settings(Duration::from_secs(4)))
        .await
        .unwrap();
    let a = session.election(PATH).id("a").join().await.unwrap();
    a.wait_leader().await.unwrap();
    let b = session.election(PATH).id("b").join().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(store.get(PATH, "zkelect_elections_total"), 1);
    assert_eq!(store.gauge(PATH, "zkelect_leader"), 1.0);
    assert_eq!(
        store.get(PATH, "zkelect_time_to_elect_seconds"),
        1,
        "a sample"
    );

    // a steps down and queues again, b takes over: a's demotion, then b's
    // election (the gauge's last word is b's: the series are labelled by
    // path only), and a sees its successor lead.
    a.resign(true).await.unwrap();
    b.wait_leader().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(store.get(PATH, "zkelect_demotions_total"), 1);
    assert_eq!(store.gauge(PATH, "zkelect_leader"), 1.0, "b leads");
    assert_eq!(store.get(PATH, "zkelect_time_to_elect_seconds"), 2);
    assert_eq!(
        store.get(PATH, "zkelect_handoff_seconds"),
        1,
        "a saw its successor lead"
    );

    // The last word of a machine that stops (its close's requests) is told
    // before it goes.
    a.close().await;
    b.close().await;
    let ops = a.metrics().ops.max(b.metrics().ops);
    assert!(ops > 0);
    assert_eq!(store.get(PATH, "zkelect_ops_total"), ops);
    assert_eq!(store.gauge(PATH, "zkelect_leader"), 0.0);
    session.close().await;
}

/// A server that refuses every create for want of rights (a fatal error),
/// and answers nothing else.
struct Refusing;

#[async_trait]
impl Transport for Refusing {
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode> {
        match request {
            Request::Create { .. } => Err(ZkCode::NoAuth),
            _ => std::future::pending().await,
        }
    }

    async fn close(&self) {}
}

#[tokio::test(start_paused = true)]
async fn a_machine_that_stops_on_the_turn_its_counters_move_still_tells_the_facade() {
    const REFUSED: &str = "/svc/refused";
    let store = store();
    let (events_tx, events) = tokio::sync::mpsc::unbounded_channel();
    events_tx
        .send(TransportEvent::Session(SessionEvent::Connected {
            session_id: None,
            timeout: Duration::from_secs(4),
        }))
        .unwrap();
    let session = Session::from_transport(Refusing, events);
    // The create's refusal is counted as an op error, and the candidate
    // stops on it, in one turn of the driver: the machine is gone before
    // the facade's next turn.
    let joined = session.election(REFUSED).id("x").join().await;
    assert!(joined.is_err(), "a refused create stops the election");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(store.get(REFUSED, "zkelect_op_errors_total"), 1);
    assert!(store.get(REFUSED, "zkelect_ops_total") >= 1);
    session.close().await;
}

#[tokio::test(start_paused = true)]
async fn an_observation_leaves_the_elections_metrics_alone() {
    const OBSERVED: &str = "/svc/observed";
    let store = store();
    let server = MemoryServer::new();
    let session = Session::connect(server.settings(Duration::from_secs(4)))
        .await
        .unwrap();
    let election = session.election(OBSERVED).id("a").join().await.unwrap();
    election.wait_leader().await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let ops = election.metrics().ops;
    assert!(ops > 0);
    assert_eq!(store.get(OBSERVED, "zkelect_ops_total"), ops);
    assert_eq!(store.gauge(OBSERVED, "zkelect_leader"), 1.0);

    let observation = session
        .observe(OBSERVED, Recipe::Election { leaders: 1 })
        .start()
        .await
        .unwrap();
    assert_eq!(
        observation.leader().and_then(|p| p.id().map(str::to_owned)),
        Some("a".into())
    );
    // The observer has published its own counts by now (it listed and read).
    assert_eq!(
        store.get(OBSERVED, "zkelect_ops_total"),
        election.metrics().ops,
        "the observer's requests are not the election's"
    );
    observation.close().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        store.get(OBSERVED, "zkelect_ops_total"),
        election.metrics().ops
    );
    assert_eq!(
        store.gauge(OBSERVED, "zkelect_leader"),
        1.0,
        "a still leads"
    );
    election.close().await;
    session.close().await;
}
