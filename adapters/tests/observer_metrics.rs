//! An observation of an election this process takes part in leaves the
//! election's metrics alone: the series are labelled by path only, and an
//! observer's counters (zero) or its close (the leader gauge to 0) would
//! otherwise overwrite the candidate's. Its own binary, for the global
//! recorder.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use zkelect::core::Recipe;
use zkelect::memory::MemoryServer;
use zkelect::Session;

const PATH: &str = "/svc/observed";

/// Counters and gauges by name, for `path = PATH` only.
#[derive(Default)]
struct Store(Mutex<BTreeMap<String, Arc<AtomicU64>>>);

impl Store {
    fn cell(&self, key: &Key) -> Arc<AtomicU64> {
        let ours = key.labels().any(|l| l.key() == "path" && l.value() == PATH);
        let name = if ours {
            key.name().to_owned()
        } else {
            format!("other:{}", key.name())
        };
        let mut cells = self.0.lock().unwrap();
        Arc::clone(cells.entry(name).or_default())
    }

    fn get(&self, name: &str) -> u64 {
        self.0
            .lock()
            .unwrap()
            .get(name)
            .map_or(0, |c| c.load(Ordering::SeqCst))
    }
}

struct Rec(Arc<Store>);

impl Recorder for Rec {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.0.cell(key))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.0.cell(key))
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

#[tokio::test(start_paused = true)]
async fn an_observation_leaves_the_elections_metrics_alone() {
    let store = Arc::new(Store::default());
    metrics::set_global_recorder(Rec(Arc::clone(&store))).expect("the only recorder");
    let server = MemoryServer::new();
    let session = Session::connect(server.settings(Duration::from_secs(4)))
        .await
        .unwrap();
    let election = session.election(PATH).id("a").join().await.unwrap();
    election.wait_leader().await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let ops = election.metrics().ops;
    assert!(ops > 0);
    assert_eq!(store.get("zkelect_ops_total"), ops);
    assert_eq!(f64::from_bits(store.get("zkelect_leader")), 1.0);

    let observation = session
        .observe(PATH, Recipe::Election { leaders: 1 })
        .start()
        .await
        .unwrap();
    assert_eq!(observation.leader().map(|p| p.id), Some("a".into()));
    // The observer has published its own counts by now (it listed and read).
    assert_eq!(
        store.get("zkelect_ops_total"),
        election.metrics().ops,
        "the observer's requests are not the election's"
    );
    observation.close().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(store.get("zkelect_ops_total"), election.metrics().ops);
    assert_eq!(
        f64::from_bits(store.get("zkelect_leader")),
        1.0,
        "a still leads"
    );
    election.close().await;
    session.close().await;
}
