//! The zookeeper-client transport against a real server, where it differs
//! from zookeeper-async: a session that expires behind a partition is
//! reported as `Expired`, a new client (a new session) replaces the dead
//! one, and the candidate rejoins with a new node, leaving no orphan.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;
use zkelect::zk_client::{ZkClientOptions, ZkClientTransport};
use zkelect::{
    Election, EventStream, Reply, Request, Role, SessionEvent, Transport, TransportEvent,
};
use zkelect_tests::{Proxy, ZkServer};

const SESSION: Duration = Duration::from_secs(4);
const SETTLE: Duration = Duration::from_secs(40);
const ELECTION: &str = "/zkc/leader";

fn options(hosts: &str) -> ZkClientOptions {
    ZkClientOptions::new(hosts)
        .session_timeout(SESSION)
        .connect_timeout(Duration::from_secs(15))
        .reconnect_delay(Duration::from_millis(100))
}

/// Passes the stream on, keeping a copy of every session event.
fn tapped(mut events: EventStream) -> (EventStream, Arc<Mutex<Vec<SessionEvent>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::unbounded_channel::<TransportEvent>();
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if let TransportEvent::Session(e) = &event {
                log.lock().unwrap_or_else(PoisonError::into_inner).push(*e);
            }
            if tx.send(event).is_err() {
                return;
            }
        }
    });
    (rx, seen)
}

async fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} did not happen within {SETTLE:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn children(zk: &ZkClientTransport) -> Vec<String> {
    match zk
        .perform(Request::GetChildren {
            path: ELECTION.into(),
            watch: false,
        })
        .await
    {
        Ok(Reply::Children(mut names)) => {
            names.sort();
            names
        }
        other => panic!("listing {ELECTION}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_session_is_replaced_by_a_new_client_and_the_candidate_rejoins() {
    let server = ZkServer::builder()
        .max_session_timeout(Duration::from_secs(10))
        .start()
        .unwrap_or_else(|e| panic!("cannot start ZooKeeper: {e}"));
    let proxy = Proxy::start(server.addr()).expect("a proxy");
    let (admin, _admin_events) = ZkClientTransport::connect(options(&server.connect_string()))
        .await
        .expect("an admin client");

    let (a, a_events) = ZkClientTransport::connect(options(&proxy.connect_string()))
        .await
        .expect("a connects through the proxy");
    let first_session = a.session_id().expect("a session");
    let (a_events, seen) = tapped(a_events);
    let a = Election::builder(a, a_events)
        .path(ELECTION)
        .id("a")
        .join()
        .await
        .expect("a joins");
    let a_token = a.wait_leader().await.expect("a leads");
    let a_node = a.node().expect("a's node");
    let b = Election::connect(options(&server.connect_string()))
        .path(ELECTION)
        .id("b")
        .join()
        .await
        .expect("b joins");

    // Cut `a` off until the server has expired its session and `b` leads.
    proxy.blackhole();
    let b_token = tokio::time::timeout(SETTLE, b.wait_leader())
        .await
        .expect("b takes over in time")
        .expect("b leads");
    assert!(b_token > a_token);
    eventually("a to stop leading", || {
        (a.role() != Role::Leader(a_token)).then_some(())
    })
    .await;
    proxy.heal();

    // `a` hears of the expiry, gets a new session and joins again, behind `b`.
    let new_session = eventually("a new session for a", || {
        let seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
        let expired = seen.iter().position(|e| *e == SessionEvent::Expired)?;
        seen[expired..].iter().find_map(|e| match e {
            SessionEvent::Connected {
                session_id: Some(id),
                ..
            } => Some(*id),
            _ => None,
        })
    })
    .await;
    assert_ne!(
        new_session.0, first_session.0,
        "a new session, not the old one"
    );
    let a_new_node = eventually("a to rejoin with a new node", || {
        a.node().filter(|n| *n != a_node)
    })
    .await;
    eventually("a to follow", || (a.role() == Role::Follower).then_some(())).await;
    assert_eq!(b.role(), Role::Leader(b_token), "b still leads");
    // Exactly the two live candidates' nodes: the expired one is gone, and
    // nothing was orphaned by the requests that failed with the old client.
    let b_node = b.node().expect("b's node");
    let mut want = vec![a_new_node, b_node];
    want.sort();
    assert_eq!(children(&admin).await, want);
    a.close().await;
    b.close().await;
    admin.close().await;
}
