//! The ZooKeeper model alone, one test per modelled semantic.

use std::time::Duration;

use zkelect_core::{Acl, CreateMode, Reply, Request, SessionId, Timestamp, WatchKind, ZkCode};
use zkelect_sim::zk::{ZkModel, ZkSettings};

const T0: Timestamp = Timestamp::ZERO;

fn create(path: &str, mode: CreateMode) -> Request {
    Request::Create {
        path: path.into(),
        data: b"d".to_vec(),
        mode,
        acl: Acl::Open,
    }
}

fn session(zk: &mut ZkModel) -> SessionId {
    zk.open_session(T0, Duration::from_secs(4), None).0
}

fn created_path(r: Result<Reply, ZkCode>) -> String {
    match r {
        Ok(Reply::Created { path, .. }) => path,
        other => panic!("{other:?}"),
    }
}

#[test]
fn sequential_names_come_from_the_parent_cversion_and_deletes_bump_it() {
    let mut zk = ZkModel::default();
    let s = session(&mut zk);
    zk.apply(T0, s, &create("/e", CreateMode::Persistent))
        .0
        .unwrap();
    let a = created_path(
        zk.apply(T0, s, &create("/e/n_", CreateMode::EphemeralSequential))
            .0,
    );
    assert_eq!(a, "/e/n_0000000000");
    zk.apply(
        T0,
        s,
        &Request::Delete {
            path: a,
            version: None,
        },
    )
    .0
    .unwrap();
    let b = created_path(
        zk.apply(T0, s, &create("/e/n_", CreateMode::EphemeralSequential))
            .0,
    );
    assert_eq!(b, "/e/n_0000000002", "the delete bumped cversion too");
}

#[test]
fn sequence_counter_wraps_to_negative_numbers() {
    let mut zk = ZkModel::new(ZkSettings {
        cversion_start: i32::MAX,
        ..ZkSettings::default()
    });
    let s = session(&mut zk);
    zk.apply(T0, s, &create("/e", CreateMode::Persistent))
        .0
        .unwrap();
    let a = created_path(
        zk.apply(T0, s, &create("/e/n_", CreateMode::EphemeralSequential))
            .0,
    );
    let b = created_path(
        zk.apply(T0, s, &create("/e/n_", CreateMode::EphemeralSequential))
            .0,
    );
    assert_eq!(
        (a.as_str(), b.as_str()),
        ("/e/n_2147483647", "/e/n_-2147483648")
    );
}

#[test]
fn stat_carries_zxids_versions_and_owner() {
    let mut zk = ZkModel::default();
    let s = session(&mut zk);
    zk.apply(T0, s, &create("/e", CreateMode::Persistent))
        .0
        .unwrap();
    let (r, _) = zk.apply(T0, s, &create("/e/x", CreateMode::Ephemeral));
    let Ok(Reply::Created { stat, .. }) = r else {
        panic!()
    };
    assert_eq!(stat.ephemeral_owner, s.0);
    assert_eq!(stat.czxid, zk.zxid());
    let parent = zk.stat("/e").unwrap();
    assert_eq!(
        (parent.cversion, parent.num_children, parent.pzxid),
        (1, 1, stat.czxid)
    );
    assert!(stat.czxid > 1, "zxids grow with every write");
}

#[test]
fn missing_parent_existing_node_and_non_empty_deletes_fail_like_the_server() {
    let mut zk = ZkModel::default();
    let s = session(&mut zk);
    assert_eq!(
        zk.apply(T0, s, &create("/a/b", CreateMode::Persistent)).0,
        Err(ZkCode::NoNode)
    );
    zk.apply(T0, s, &create("/a", CreateMode::Persistent))
        .0
        .unwrap();
    assert_eq!(
        zk.apply(T0, s, &create("/a", CreateMode::Persistent)).0,
        Err(ZkCode::NodeExists)
    );
    zk.apply(T0, s, &create("/a/b", CreateMode::Ephemeral))
        .0
        .unwrap();
    assert_eq!(
        zk.apply(T0, s, &create("/a/b/c", CreateMode::Persistent)).0,
        Err(ZkCode::NoChildrenForEphemerals)
    );
    assert_eq!(
        zk.apply(
            T0,
            s,
            &Request::Delete {
                path: "/a".into(),
                version: None
            }
        )
        .0,
        Err(ZkCode::NotEmpty)
    );
    assert_eq!(
        zk.apply(
            T0,
            s,
            &Request::Delete {
                path: "/a/b".into(),
                version: Some(7)
            }
        )
        .0,
        Err(ZkCode::BadVersion)
    );
    assert_eq!(
        zk.apply(
            T0,
            s,
            &Request::Delete {
                path: "/zz".into(),
                version: None
            }
        )
        .0,
        Err(ZkCode::NoNode)
    );
}

#[test]
fn container_goes_when_its_last_child_goes() {
    let mut zk = ZkModel::default();
    let s = session(&mut zk);
    zk.apply(T0, s, &create("/c", CreateMode::Container))
        .0
        .unwrap();
    let child = created_path(
        zk.apply(T0, s, &create("/c/n_", CreateMode::EphemeralSequential))
            .0,
    );
    zk.apply(
        T0,
        s,
        &Request::Delete {
            path: child,
            version: None,
        },
    )
    .0
    .unwrap();
    assert!(zk.stat("/c").is_none());
}

#[test]
fn creator_acls_refuse_other_identities() {
    let mut zk = ZkModel::default();
    let owner = zk
        .open_session(T0, Duration::from_secs(4), Some("svc:x".into()))
        .0;
    let stranger = zk
        .open_session(T0, Duration::from_secs(4), Some("other:y".into()))
        .0;
    let anonymous = session(&mut zk);
    let acl = |path: &str, mode| Request::Create {
        path: path.into(),
        data: vec![],
        mode,
        acl: Acl::CreatorAllWorldRead,
    };
    assert_eq!(
        zk.apply(T0, anonymous, &acl("/x", CreateMode::Persistent))
            .0,
        Err(ZkCode::InvalidAcl)
    );
    zk.apply(T0, owner, &acl("/e", CreateMode::Persistent))
        .0
        .unwrap();
    let node = created_path(
        zk.apply(T0, owner, &acl("/e/n_", CreateMode::EphemeralSequential))
            .0,
    );
    assert_eq!(
        zk.apply(
            T0,
            stranger,
            &Request::Delete {
                path: node.clone(),
                version: None
            }
        )
        .0,
        Err(ZkCode::NoAuth)
    );
    assert_eq!(
        zk.apply(T0, stranger, &create("/e/m", CreateMode::Persistent))
            .0,
        Err(ZkCode::NoAuth)
    );
    assert!(
        zk.apply(
            T0,
            anonymous,
            &Request::GetData {
                path: node.clone(),
                watch: false
            }
        )
        .0
        .is_ok(),
        "world may read"
    );
    assert!(zk
        .apply(
            T0,
            owner,
            &Request::Delete {
                path: node,
                version: None
            }
        )
        .0
        .is_ok());
}

#[test]
fn session_timeout_is_negotiated_within_the_tick_bounds() {
    let mut zk = ZkModel::default();
    assert_eq!(
        zk.open_session(T0, Duration::from_millis(100), None).1,
        Duration::from_millis(400)
    );
    assert_eq!(
        zk.open_session(T0, Duration::from_secs(60), None).1,
        Duration::from_millis(4_000)
    );
    assert_eq!(
        zk.open_session(T0, Duration::from_secs(3), None).1,
        Duration::from_secs(3)
    );
}

#[test]
fn silent_session_expires_with_its_ephemerals_and_fires_watches() {
    let mut zk = ZkModel::default();
    let a = session(&mut zk);
    let b = session(&mut zk);
    zk.apply(T0, a, &create("/e", CreateMode::Persistent))
        .0
        .unwrap();
    let node = created_path(
        zk.apply(T0, a, &create("/e/n_", CreateMode::EphemeralSequential))
            .0,
    );
    zk.apply(
        T0,
        b,
        &Request::GetData {
            path: node.clone(),
            watch: true,
        },
    )
    .0
    .unwrap();
    let t = Timestamp::from_millis(3_999);
    zk.touch(t, b);
    assert!(zk.expire_due(t).0.is_empty());
    let (expired, fired) = zk.expire_due(Timestamp::from_millis(4_000));
    assert_eq!(expired, [a]);
    assert!(zk.stat(&node).is_none());
    assert_eq!(fired.len(), 1);
    assert_eq!(
        (fired[0].session, fired[0].event.kind),
        (b, WatchKind::NodeDeleted)
    );
    assert_eq!(
        zk.apply(
            t,
            a,
            &Request::Exists {
                path: "/".into(),
                watch: false
            }
        )
        .0,
        Err(ZkCode::SessionExpired)
    );
}

#[test]
fn watches_are_one_shot_and_of_the_right_kind() {
    let mut zk = ZkModel::default();
    let s = session(&mut zk);
    let w = session(&mut zk);
    zk.apply(T0, s, &create("/e", CreateMode::Persistent))
        .0
        .unwrap();
    zk.apply(
        T0,
        w,
        &Request::GetChildren {
            path: "/e".into(),
            watch: true,
        },
    )
    .0
    .unwrap();
    zk.apply(
        T0,
        w,
        &Request::Exists {
            path: "/e/x".into(),
            watch: true,
        },
    )
    .0
    .unwrap();
    let (_, fired) = zk.apply(T0, s, &create("/e/x", CreateMode::Persistent));
    let kinds: Vec<_> = fired
        .iter()
        .map(|f| (f.event.kind, f.event.path.as_str()))
        .collect();
    assert!(kinds.contains(&(WatchKind::NodeCreated, "/e/x")));
    assert!(kinds.contains(&(WatchKind::NodeChildrenChanged, "/e")));
    let (_, again) = zk.apply(T0, s, &create("/e/y", CreateMode::Persistent));
    assert!(again.is_empty(), "one-shot: {again:?}");
    zk.apply(
        T0,
        w,
        &Request::GetData {
            path: "/e/x".into(),
            watch: true,
        },
    )
    .0
    .unwrap();
    let (_, deleted) = zk.apply(
        T0,
        s,
        &Request::Delete {
            path: "/e/x".into(),
            version: None,
        },
    );
    assert_eq!(deleted.len(), 1);
    assert_eq!(deleted[0].event.kind, WatchKind::NodeDeleted);
    assert_eq!(zk.watch_count(w), 0);
}

#[test]
fn closing_a_session_drops_its_watches_without_firing_them() {
    let mut zk = ZkModel::default();
    let s = session(&mut zk);
    let w = session(&mut zk);
    zk.apply(T0, s, &create("/e", CreateMode::Persistent))
        .0
        .unwrap();
    zk.apply(
        T0,
        w,
        &Request::GetChildren {
            path: "/e".into(),
            watch: true,
        },
    )
    .0
    .unwrap();
    assert_eq!(zk.watch_count(w), 1);
    assert!(zk.close_session(w).is_empty());
    let (_, fired) = zk.apply(T0, s, &create("/e/x", CreateMode::Persistent));
    assert!(fired.is_empty());
}

#[test]
fn restart_restores_sessions_with_fresh_timers() {
    let mut zk = ZkModel::default();
    let s = session(&mut zk);
    zk.restart_session_timers(Timestamp::from_millis(3_000));
    assert!(zk.expire_due(Timestamp::from_millis(5_000)).0.is_empty());
    assert_eq!(zk.expire_due(Timestamp::from_millis(7_000)).0, [s]);
}

// ----- the client-library model (sim::client), still without any candidate -----

use zkelect_sim::client::{connection_lost, reconnect, Link, Reconnected};

#[test]
fn each_direction_of_a_link_is_fifo_so_a_watch_event_precedes_a_later_reply() {
    let mut link = Link::default();
    let t = Timestamp::from_millis(100);
    // The server fires a watch (slow path), then replies (fast path) to the same client.
    let event_at = link.to_client(t, Duration::from_millis(8));
    let reply_at = link.to_client(t, Duration::from_millis(1));
    assert!(
        reply_at >= event_at,
        "reply {reply_at} overtook the event {event_at}"
    );
    let first = link.to_server(t, Duration::from_millis(5));
    let second = link.to_server(t, Duration::from_millis(1));
    assert!(second >= first);
}

#[test]
fn client_declares_the_connection_lost_after_two_thirds_of_the_timeout() {
    let heard = Timestamp::from_millis(1_000);
    let timeout = Duration::from_millis(3_000);
    assert!(!connection_lost(
        Timestamp::from_millis(2_999),
        heard,
        timeout
    ));
    assert!(connection_lost(
        Timestamp::from_millis(3_000),
        heard,
        timeout
    ));
}

#[test]
fn reconnect_keeps_a_live_session_and_reports_expiry_of_a_dead_one() {
    let mut zk = ZkModel::default();
    let first = match reconnect(&mut zk, T0, None, Duration::from_secs(2), None) {
        Reconnected::New { session, timeout } => {
            assert_eq!(timeout, Duration::from_secs(2));
            session
        }
        other => panic!("{other:?}"),
    };
    let t = Timestamp::from_millis(1_500);
    assert_eq!(
        reconnect(&mut zk, t, Some(first), Duration::from_secs(2), None),
        Reconnected::Same(first)
    );
    // Silent past its timeout: the server expires it, the reconnecting client learns it.
    let late = Timestamp::from_millis(4_000);
    zk.expire_due(late);
    match reconnect(&mut zk, late, Some(first), Duration::from_secs(2), None) {
        Reconnected::Expired { new, .. } => assert_ne!(new, first),
        other => panic!("{other:?}"),
    }
}
