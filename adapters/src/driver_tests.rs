//! Driver behaviour with a mocked transport: correlation, retries, errors, shutdown.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use zkelect_core::{CandidateError, Reply, Request, Role, SessionEvent, SessionId, Stat, ZkCode};

use async_trait::async_trait;

use crate::transport::{MockTransport, Transport, TransportEvent};
use crate::{Election, ElectionError};

/// A transport whose answers can take time or never come (what mocks returning
/// values cannot express).
struct Scripted {
    slow_creates: bool,
    hang_deletes: bool,
    closes: Arc<AtomicUsize>,
}

#[async_trait]
impl Transport for Scripted {
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode> {
        match request {
            Request::Create { .. } if self.slow_creates => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Request::Delete { .. } if self.hang_deletes => std::future::pending::<()>().await,
            _ => {}
        }
        answer(&request, "n_0000000000")
    }
    async fn close(&self) {
        self.closes.fetch_add(1, Ordering::SeqCst);
    }
}

const PATH: &str = "/svc/leader";

fn connected() -> TransportEvent {
    TransportEvent::Session(SessionEvent::Connected {
        session_id: Some(SessionId(7)),
        timeout: Duration::from_secs(6),
    })
}

fn stat(czxid: i64) -> Stat {
    Stat {
        czxid,
        ephemeral_owner: 7,
        ..Stat::default()
    }
}

/// A mock server good enough for one candidate: answers by request kind.
fn answer(request: &Request, own: &str) -> Result<Reply, ZkCode> {
    match request {
        Request::Create { .. } => Ok(Reply::Created {
            path: format!("{PATH}/{own}"),
            stat: stat(42),
        }),
        Request::GetChildren { .. } => Ok(Reply::Children(vec![own.to_owned()])),
        Request::GetData { .. } => Ok(Reply::Data {
            data: vec![],
            stat: stat(42),
        }),
        Request::Exists { .. } => Ok(Reply::Exists(Some(stat(1)))),
        Request::Delete { .. } => Ok(Reply::Deleted),
    }
}

#[tokio::test(start_paused = true)]
async fn replies_are_correlated_even_when_they_complete_out_of_order() {
    // Creates answer late, everything else at once: completion order differs from issue order.
    let transport = Scripted {
        slow_creates: true,
        hang_deletes: false,
        closes: Arc::default(),
    };
    let (tx, rx) = mpsc::unbounded_channel();
    tx.send(connected()).unwrap();
    let election = Election::builder(transport, rx)
        .path(PATH)
        .id("a")
        .join()
        .await
        .unwrap();
    assert_eq!(election.wait_leader().await.unwrap().0, 42);
    election.close().await;
}

#[tokio::test(start_paused = true)]
async fn connection_loss_is_retried_after_backoff() {
    let creates = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&creates);
    let mut mock = MockTransport::new();
    mock.expect_perform().returning(move |request| {
        let n = if matches!(request, Request::Create { .. }) {
            seen.fetch_add(1, Ordering::SeqCst)
        } else {
            99
        };
        match (&request, n) {
            // The first create fails; the recovery listing finds no node with
            // this session's nonce, so the candidate creates again.
            (Request::Create { .. }, 0) => Err(ZkCode::OperationTimeout),
            (Request::GetChildren { .. }, _) => Ok(Reply::Children(vec!["n_0000000001".into()])),
            _ => answer(&request, "n_0000000001"),
        }
    });
    mock.expect_close().returning(|| ());
    let (tx, rx) = mpsc::unbounded_channel();
    tx.send(connected()).unwrap();
    let election = Election::builder(mock, rx)
        .path(PATH)
        .id("a")
        .join()
        .await
        .unwrap();
    election.wait_leader().await.unwrap();
    assert_eq!(
        creates.load(Ordering::SeqCst),
        2,
        "one failed create, one retry"
    );
    election.close().await;
}

#[tokio::test(start_paused = true)]
async fn no_auth_surfaces_as_an_error_to_the_caller() {
    let mut mock = MockTransport::new();
    mock.expect_perform().returning(|request| match request {
        Request::Create { .. } => Err(ZkCode::NoAuth),
        other => answer(&other, "n_0000000000"),
    });
    mock.expect_close().times(1).returning(|| ());
    let (tx, rx) = mpsc::unbounded_channel();
    tx.send(connected()).unwrap();
    let result = Election::builder(mock, rx).path(PATH).id("a").join().await;
    match result {
        Err(ElectionError::Fatal(CandidateError::Refused {
            code: ZkCode::NoAuth,
            ..
        })) => {}
        other => panic!("expected a NoAuth error, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn close_is_bounded_even_when_the_transport_hangs() {
    let closed = Arc::new(AtomicUsize::new(0));
    let transport = Scripted {
        slow_creates: false,
        hang_deletes: true,
        closes: Arc::clone(&closed),
    };
    let (tx, rx) = mpsc::unbounded_channel();
    tx.send(connected()).unwrap();
    let election = Election::builder(transport, rx)
        .path(PATH)
        .id("a")
        .close_timeout(Duration::from_secs(2))
        .join()
        .await
        .unwrap();
    election.wait_leader().await.unwrap();
    let started = tokio::time::Instant::now();
    election.close().await;
    assert!(
        started.elapsed() <= Duration::from_secs(3),
        "close took {:?}",
        started.elapsed()
    );
    assert_eq!(
        closed.load(Ordering::SeqCst),
        1,
        "the session was closed once"
    );
    assert_eq!(election.role(), Role::Closed);
    // Nothing left running: the driver task is gone, so a second close returns at once.
    election.close().await;
}

#[tokio::test(start_paused = true)]
async fn demotion_is_published_before_the_next_command_is_performed() {
    let order = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log = Arc::clone(&order);
    let mut mock = MockTransport::new();
    mock.expect_perform().returning(move |request| {
        if matches!(request, Request::Delete { .. }) {
            if let Ok(mut l) = log.lock() {
                l.push("delete performed".into());
            }
        }
        answer(&request, "n_0000000000")
    });
    mock.expect_close().returning(|| ());
    let (tx, rx) = mpsc::unbounded_channel();
    tx.send(connected()).unwrap();
    let election = Election::builder(mock, rx)
        .path(PATH)
        .id("a")
        .join()
        .await
        .unwrap();
    election.wait_leader().await.unwrap();
    let mut roles = election.changes();
    let watcher_log = Arc::clone(&order);
    let watcher = tokio::spawn(async move {
        let _ = roles.wait_for(|r| !r.is_leader()).await;
        if let Ok(mut l) = watcher_log.lock() {
            l.push("demotion seen".into());
        }
    });
    election.resign(false);
    watcher.await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let order = order.lock().unwrap().clone();
    assert_eq!(
        order.first().map(String::as_str),
        Some("demotion seen"),
        "{order:?}"
    );
    election.close().await;
}
