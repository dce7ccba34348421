// tests/failover.rs: the same `serve`, over the test kit's in-memory
// ZooKeeper, in virtual time.
use std::time::Duration;

use ticker::{serve, Ledger};
use tokio::sync::oneshot;
use zkelect::testkit::{check_fencing, FencedLog, TestZk};
use zkelect::{Election, FencingToken};

/// The test kit's log as the service's ledger (a wrapper: in a test crate
/// both the trait and the log are foreign).
#[derive(Clone)]
struct Recorded(FencedLog);

impl Ledger for Recorded {
    fn record(&self, token: FencingToken, entry: String) {
        self.0.append(token, entry);
    }
}

// In your crate: `#[tokio::test(start_paused = true)]` above this function.
async fn two_nodes_under_chaos_never_write_with_a_stale_token(
) -> Result<(), Box<dyn std::error::Error>> {
    let zk = TestZk::new();
    let log = FencedLog::new(&zk);
    let mut stops = Vec::new();
    for id in ["a", "b"] {
        let (transport, events) = zk.connect(Duration::from_secs(2));
        let election = Election::builder(transport, events)
            .path("/services/ticker/leader")
            .id(id)
            .join()
            .await?;
        zk.track(id, &election);
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = async {
            let _ = stopped.await;
        };
        tokio::spawn(serve(election, Recorded(log.clone()), shutdown));
        stops.push(stop);
    }
    // Seeded: the same faults at the same virtual instants, every run.
    let chaos = zk.chaos(7);
    tokio::time::sleep(Duration::from_secs(60)).await;
    chaos.stop();
    check_fencing(&log.writes(), &zk.history())?;
    assert!(zk.history().len() > 1, "the chaos caused no failover");
    drop(stops); // both shut down: their nodes are deleted
    Ok(())
}
