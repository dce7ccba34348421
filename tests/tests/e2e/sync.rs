//! `sync` on both real transports: zookeeper-client sends the
//! protocol's `sync`; zookeeper-async has none and sends a write that goes
//! through the leader and changes nothing. Both answer `Synced`, on an
//! existing path and on a missing one, and neither changes the tree.

use std::time::Duration;

use zkelect::core::{Acl, CreateMode};
use zkelect::{Reply, Request, Transport};
use zkelect_tests::{TransportKind, ZkServer};

const SESSION: Duration = Duration::from_secs(4);

async fn stat_of(zk: &dyn Transport, path: &str) -> zkelect::core::Stat {
    match zk
        .perform(Request::Exists {
            path: path.into(),
            watch: false,
        })
        .await
    {
        Ok(Reply::Exists(Some(stat))) => stat,
        other => panic!("exists {path}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_answers_synced_and_changes_nothing_on_both_transports() {
    let server = ZkServer::builder()
        .max_session_timeout(Duration::from_secs(10))
        .start()
        .unwrap_or_else(|e| panic!("cannot start ZooKeeper: {e}"));
    let hosts = server.connect_string();
    for kind in TransportKind::ALL {
        let (zk, _events) = kind
            .transport(&hosts, SESSION, None)
            .await
            .unwrap_or_else(|e| panic!("{kind}: cannot connect: {e}"));
        let path = format!("/sync-{}", kind.name());
        let created = zk
            .perform(Request::Create {
                path: path.clone(),
                data: Vec::new(),
                mode: CreateMode::Persistent,
                acl: Acl::Open,
            })
            .await;
        assert!(
            matches!(created, Ok(Reply::Created { .. })),
            "{kind}: {created:?}"
        );
        let before = stat_of(zk.as_ref(), &path).await;
        let synced = zk.perform(Request::Sync { path: path.clone() }).await;
        assert_eq!(synced, Ok(Reply::Synced), "{kind}");
        let missing = zk
            .perform(Request::Sync {
                path: format!("{path}/missing"),
            })
            .await;
        assert_eq!(missing, Ok(Reply::Synced), "{kind} on a missing path");
        let after = stat_of(zk.as_ref(), &path).await;
        assert_eq!(
            (
                after.cversion,
                after.pzxid,
                after.version,
                after.num_children
            ),
            (
                before.cversion,
                before.pzxid,
                before.version,
                before.num_children
            ),
            "{kind}: the sync changed the node"
        );
    }
}
