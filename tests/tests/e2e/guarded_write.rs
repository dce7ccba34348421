//! Guarded writes against a real server: a leader's write goes
//! through only together with a server-side check that its node still
//! exists, in one `multi`. A deposed leader — one whose node is gone while
//! it still believes it leads, as a frozen process would — is refused by
//! the server with a typed error, and the data stays the current leader's.

use std::time::Duration;

use tokio::sync::{mpsc, watch};
use zkelect::core::{Acl, CreateMode};
use zkelect::zk_client::{ZkClientOptions, ZkClientTransport};
use zkelect::{
    Election, EventStream, GuardedWriteError, MultiOp, MultiOpResult, Reply, Request, Role,
    Transport, TransportEvent, ZkCode,
};
use zkelect_tests::{TransportKind, ZkServer};

const SESSION: Duration = Duration::from_secs(4);
/// A generous bound for things that take a round trip or a watch.
const SETTLE: Duration = Duration::from_secs(30);
const ELECTION: &str = "/guarded/leader";
const RESOURCE: &str = "/guarded/resource";

fn start_server() -> ZkServer {
    ZkServer::builder()
        .max_session_timeout(Duration::from_secs(10))
        .start()
        .unwrap_or_else(|e| panic!("cannot start ZooKeeper: {e}"))
}

async fn client(hosts: &str) -> (ZkClientTransport, EventStream) {
    ZkClientTransport::connect(
        ZkClientOptions::new(hosts)
            .session_timeout(SESSION)
            .connect_timeout(Duration::from_secs(15)),
    )
    .await
    .unwrap_or_else(|e| panic!("cannot connect to {hosts}: {e}"))
}

/// An event stream that stops passing events on while `frozen` is true:
/// the driver behind it keeps its last view, as a frozen process does.
fn freezable(mut events: EventStream) -> (EventStream, watch::Sender<bool>) {
    let (tx, rx) = mpsc::unbounded_channel::<TransportEvent>();
    let (frozen, mut gate) = watch::channel(false);
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if gate.wait_for(|frozen| !*frozen).await.is_err() {
                return;
            }
            if tx.send(event).is_err() {
                return;
            }
        }
    });
    (rx, frozen)
}

async fn read(zk: &ZkClientTransport, path: &str) -> Vec<u8> {
    match zk
        .perform(Request::GetData {
            path: path.into(),
            watch: false,
        })
        .await
    {
        Ok(Reply::Data { data, .. }) => data,
        other => panic!("reading {path}: {other:?}"),
    }
}

async fn create_resource(zk: &ZkClientTransport) {
    for path in ["/guarded", RESOURCE] {
        let created = zk
            .perform(Request::Create {
                path: path.into(),
                data: Vec::new(),
                mode: CreateMode::Persistent,
                acl: Acl::Open,
            })
            .await;
        assert!(
            matches!(created, Ok(_) | Err(ZkCode::NodeExists)),
            "creating {path}: {created:?}"
        );
    }
}

async fn wait_role(election: &Election, what: &str, pred: impl Fn(Role) -> bool) {
    let mut roles = election.changes();
    let waited = tokio::time::timeout(SETTLE, roles.wait_for(|r| pred(*r))).await;
    assert!(
        matches!(waited, Ok(Ok(_))),
        "{what}: the role is still {:?}",
        election.role()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_leaders_guarded_write_fails_and_the_current_leaders_succeeds() {
    let server = start_server();
    let hosts = server.connect_string();
    let (admin, _admin_events) = client(&hosts).await;
    create_resource(&admin).await;

    let (a, a_events) = client(&hosts).await;
    let (a_events, freeze_a) = freezable(a_events);
    let a = Election::builder(a, a_events)
        .path(ELECTION)
        .id("a")
        .join()
        .await
        .expect("a joins");
    let a_token = a.wait_leader().await.expect("a leads");
    let b = Election::connect(
        ZkClientOptions::new(&hosts)
            .session_timeout(SESSION)
            .connect_timeout(Duration::from_secs(15)),
    )
    .path(ELECTION)
    .id("b")
    .join()
    .await
    .expect("b joins");

    // The leader writes; the follower may not.
    let stat = a
        .guarded_set_data(RESOURCE, b"a: term 1".to_vec())
        .await
        .expect("the leader's guarded write");
    assert_eq!(stat.version, 1);
    assert_eq!(read(&admin, RESOURCE).await, b"a: term 1");
    assert_eq!(
        b.guarded_set_data(RESOURCE, b"b: too early".to_vec()).await,
        Err(GuardedWriteError::NotHolding)
    );

    // `a` freezes: it hears nothing more. An operator revokes its node, and
    // `b`, which watches it, takes over.
    freeze_a.send_replace(true);
    let a_node = a.node().expect("a's node");
    let deleted = admin
        .perform(Request::Delete {
            path: format!("{ELECTION}/{a_node}"),
            version: None,
        })
        .await;
    assert_eq!(deleted, Ok(Reply::Deleted));
    let b_token = b.wait_leader().await.expect("b takes over");
    assert!(b_token > a_token, "{b_token} after {a_token}");
    assert_eq!(
        a.role(),
        Role::Leader(a_token),
        "the frozen leader still believes it leads"
    );

    // The zombie's write is refused by the server, with a typed error…
    assert_eq!(
        a.guarded_set_data(RESOURCE, b"a: zombie".to_vec()).await,
        Err(GuardedWriteError::Deposed { token: a_token })
    );
    // …a multi of several writes too, and none of it is applied…
    let zombie_multi = a
        .guarded(vec![
            MultiOp::SetData {
                path: RESOURCE.into(),
                data: b"a: zombie again".to_vec(),
                version: None,
            },
            MultiOp::Create {
                path: format!("{RESOURCE}-zombie"),
                data: Vec::new(),
                mode: CreateMode::Persistent,
                acl: Acl::Open,
            },
        ])
        .await;
    assert_eq!(
        zombie_multi,
        Err(GuardedWriteError::Deposed { token: a_token })
    );
    assert_eq!(
        admin
            .perform(Request::Exists {
                path: format!("{RESOURCE}-zombie"),
                watch: false
            })
            .await,
        Ok(Reply::Exists(None)),
        "nothing of the refused multi was applied"
    );
    // …while the new leader's goes through, and the data is what it wrote.
    let results = b
        .guarded(vec![
            MultiOp::SetData {
                path: RESOURCE.into(),
                data: b"b: term 2".to_vec(),
                version: Some(1),
            },
            MultiOp::Create {
                path: format!("{RESOURCE}-b"),
                data: Vec::new(),
                mode: CreateMode::Persistent,
                acl: Acl::Open,
            },
        ])
        .await
        .expect("the new leader's guarded multi");
    assert!(
        matches!(
            results.as_slice(),
            [MultiOpResult::DataSet(stat), MultiOpResult::Created { path }]
                if stat.version == 2 && path == &format!("{RESOURCE}-b")
        ),
        "{results:?}"
    );
    assert_eq!(read(&admin, RESOURCE).await, b"b: term 2");

    // A failing operation of the leader's own is reported by its index,
    // and nothing is written.
    assert_eq!(
        b.guarded(vec![MultiOp::SetData {
            path: RESOURCE.into(),
            data: b"b: stale version".to_vec(),
            version: Some(1),
        },])
            .await,
        Err(GuardedWriteError::Op {
            index: 0,
            code: ZkCode::BadVersion
        })
    );
    assert_eq!(read(&admin, RESOURCE).await, b"b: term 2");

    // Thawed, `a` hears of the revocation and stops believing it leads.
    freeze_a.send_replace(false);
    wait_role(&a, "a after the thaw", |r| r != Role::Leader(a_token)).await;
    a.close().await;
    b.close().await;
    admin.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_writes_need_a_transport_with_multi() {
    let server = start_server();
    let hosts = server.connect_string();
    for kind in TransportKind::ALL {
        let election = kind
            .election(&hosts, SESSION, None)
            .path(ELECTION)
            .id(kind.name())
            .join()
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        election
            .wait_leader()
            .await
            .expect("the only candidate leads");
        let written = election.guarded_set_data(ELECTION, b"x".to_vec()).await;
        if kind.has_multi() {
            assert!(written.is_ok(), "{kind}: {written:?}");
        } else {
            assert_eq!(written, Err(GuardedWriteError::Unsupported), "{kind}");
        }
        election.close().await;
        assert_eq!(
            election.guarded_set_data(ELECTION, b"y".to_vec()).await,
            Err(GuardedWriteError::Closed),
            "{kind}"
        );
    }
}
