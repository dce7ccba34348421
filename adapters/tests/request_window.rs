//! A session's burst of requests goes out at most 1,000 at a time (the
//! driver's window), and every request of the burst is still performed:
//! 1,500 elections joined at once on one session all lead.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use zkelect::core::{Reply, Request, ZkCode};
use zkelect::memory::MemoryTransport;
use zkelect::testkit::TestZk;
use zkelect::{Session, Transport};

const ELECTIONS: usize = 1_500;

/// The memory transport, counting the requests it performs at once (each
/// held for a while, as a loaded server would).
struct Counting {
    inner: MemoryTransport,
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

#[async_trait]
impl Transport for Counting {
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode> {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(5)).await;
        let reply = self.inner.perform(request).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        reply
    }

    async fn close(&self) {
        self.inner.close().await;
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_burst_goes_out_a_thousand_at_a_time_and_every_request_is_performed() {
    let zk = TestZk::new();
    let (inner, events) = zk.connect(Duration::from_secs(10));
    let most = Arc::new(AtomicUsize::new(0));
    let transport = Counting {
        inner,
        now: Arc::new(AtomicUsize::new(0)),
        most: Arc::clone(&most),
    };
    let session = Session::from_transport(transport, events);
    let joins: Vec<_> = (0..ELECTIONS)
        .map(|i| {
            let builder = session.election(format!("/e/{i:05}")).id("a");
            tokio::spawn(async move {
                let election = builder.join().await.expect("joined");
                election.wait_leader().await.expect("leads");
                election
            })
        })
        .collect();
    let mut elections = Vec::with_capacity(ELECTIONS);
    for join in joins {
        elections.push(join.await.expect("join task"));
    }
    let most = most.load(Ordering::SeqCst);
    // The session's own liveness probe may be out beside the window.
    assert!(
        (1_000..=1_001).contains(&most),
        "{most} requests out at once"
    );
    assert!(elections.iter().all(|e| e.role().is_leader()));
    drop(elections);
    session.close().await;
}
