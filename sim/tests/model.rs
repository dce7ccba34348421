//! The ZooKeeper model alone, one test per modelled semantic.

use std::time::Duration;

use zkelect_core::{
    Acl, AclEntry, CreateMode, Perms, Reply, Request, SessionId, Timestamp, WatchKind, ZkCode,
};
use zkelect_sim::zk::{ZkModel, ZkSettings, SUPER};

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

/// `setACL` as ZooKeeper 3.8 has it: ADMIN on the node (the super user
/// has it everywhere), the ACL's own version, no watch fired, and the new
/// list judged at once: a creator's node made `world:anyone` READ only
/// refuses its creator's write.
#[test]
fn set_acl_needs_admin_checks_its_version_and_fires_no_watch() {
    let mut zk = ZkModel::default();
    let owner = zk
        .open_session(T0, Duration::from_secs(4), Some("digest:svc".into()))
        .0;
    let stranger = zk
        .open_session(T0, Duration::from_secs(4), Some("digest:other".into()))
        .0;
    let admin = zk
        .open_session(T0, Duration::from_secs(4), Some(SUPER.into()))
        .0;
    zk.apply(
        T0,
        owner,
        &Request::Create {
            path: "/n".into(),
            data: vec![],
            mode: CreateMode::Persistent,
            acl: Acl::CreatorAllWorldRead,
        },
    )
    .0
    .unwrap();
    assert!(zk.apply(T0, owner, &get_data("/n", true)).0.is_ok());
    let read_only = Acl::Custom(vec![AclEntry::anyone(Perms::READ)]);
    assert_eq!(
        zk.set_acl(T0, stranger, "/n", &read_only, None),
        Err(ZkCode::NoAuth)
    );
    assert_eq!(
        zk.set_acl(T0, admin, "/missing", &read_only, None),
        Err(ZkCode::NoNode)
    );
    assert_eq!(
        zk.set_acl(T0, admin, "/n", &read_only, Some(1)),
        Err(ZkCode::BadVersion)
    );
    let (zxid, stat) = (zk.zxid(), zk.stat("/n"));
    assert!(zk.may_write(owner, "/n"));
    // The super user, whom the ACL does not name.
    assert_eq!(zk.set_acl(T0, admin, "/n", &read_only, Some(0)), Ok(()));
    assert_eq!(zk.zxid(), zxid + 1, "a transaction");
    assert_eq!(zk.stat("/n"), stat, "version and mzxid unchanged");
    assert!(!zk.may_write(owner, "/n"));
    assert_eq!(
        zk.set_data(T0, owner, "/n", b"m", None).0,
        Err(ZkCode::NoAuth)
    );
    assert!(zk.apply(T0, stranger, &get_data("/n", false)).0.is_ok());
    // Now at ACL version 1; and the super user still writes.
    assert_eq!(
        zk.set_acl(T0, admin, "/n", &read_only, Some(0)),
        Err(ZkCode::BadVersion)
    );
    let (written, fired) = zk.set_data(T0, admin, "/n", b"x", None);
    assert!(written.is_ok());
    // The owner's data watch fires for the write, not for the setACL.
    assert_eq!(
        kinds(&fired),
        vec![(owner, WatchKind::NodeDataChanged, "/n")]
    );
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

// ----- more of the server's semantics ----------------------------------------

fn delete(path: &str, version: Option<i32>) -> Request {
    Request::Delete {
        path: path.into(),
        version,
    }
}

fn get_data(path: &str, watch: bool) -> Request {
    Request::GetData {
        path: path.into(),
        watch,
    }
}

fn kinds(fired: &[zkelect_sim::zk::Fired]) -> Vec<(SessionId, WatchKind, &str)> {
    fired
        .iter()
        .map(|f| (f.session, f.event.kind, f.event.path.as_str()))
        .collect()
}

#[test]
fn watches_belong_to_the_connection_and_are_lost_when_the_client_reconnects() {
    let mut zk = ZkModel::default();
    let s = session(&mut zk);
    let w = session(&mut zk);
    zk.apply(T0, s, &create("/e", CreateMode::Persistent))
        .0
        .unwrap();
    zk.apply(T0, w, &get_data("/e", true)).0.unwrap();
    assert_eq!(zk.watch_count(w), 1);
    // Same session, new connection: the session lives, the watch does not.
    let t = Timestamp::from_millis(500);
    assert_eq!(
        reconnect(&mut zk, t, Some(w), Duration::from_secs(4), None),
        Reconnected::Same(w)
    );
    assert!(zk.session_alive(w));
    assert_eq!(zk.watch_count(w), 0);
    let (_, fired) = zk.apply(t, s, &delete("/e", None));
    assert!(fired.is_empty(), "{fired:?}");
}

#[test]
fn a_restarted_server_keeps_its_tree_zxid_and_sessions_but_loses_every_watch() {
    let mut zk = ZkModel::default();
    let s = session(&mut zk);
    zk.apply(T0, s, &create("/e", CreateMode::Persistent))
        .0
        .unwrap();
    zk.apply(T0, s, &create("/e/x", CreateMode::Ephemeral))
        .0
        .unwrap();
    zk.apply(
        T0,
        s,
        &Request::GetChildren {
            path: "/e".into(),
            watch: true,
        },
    )
    .0
    .unwrap();
    let zxid = zk.zxid();
    zk.restart(Timestamp::from_millis(3_000));
    assert_eq!(zk.zxid(), zxid);
    assert!(zk.session_alive(s));
    assert!(
        zk.stat("/e/x").is_some(),
        "ephemerals survive with their session"
    );
    assert_eq!(zk.watch_count(s), 0);
    // The session's timer restarted at the restart.
    assert!(zk.expire_due(Timestamp::from_millis(6_999)).0.is_empty());
    assert_eq!(zk.expire_due(Timestamp::from_millis(7_000)).0, [s]);
    assert!(zk.stat("/e/x").is_none());
}

#[test]
fn set_data_bumps_version_and_mzxid_checks_the_version_and_fires_node_data_changed() {
    let mut zk = ZkModel::default();
    let s = session(&mut zk);
    let w = session(&mut zk);
    zk.apply(T0, s, &create("/e", CreateMode::Persistent))
        .0
        .unwrap();
    zk.apply(T0, w, &get_data("/e", true)).0.unwrap();
    assert_eq!(
        zk.set_data(T0, s, "/e", b"x", Some(3)).0,
        Err(ZkCode::BadVersion)
    );
    assert_eq!(
        zk.set_data(T0, s, "/nope", b"x", None).0,
        Err(ZkCode::NoNode)
    );
    let (stat, fired) = zk.set_data(T0, s, "/e", b"new", Some(0));
    let stat = stat.unwrap();
    assert_eq!(
        (stat.version, stat.mzxid, stat.data_length),
        (1, zk.zxid(), 3)
    );
    assert!(stat.czxid < stat.mzxid);
    assert_eq!(kinds(&fired), [(w, WatchKind::NodeDataChanged, "/e")]);
    assert_eq!(zk.data("/e"), Some(&b"new"[..]));
    // One-shot: the next change fires nothing.
    assert!(zk.set_data(T0, s, "/e", b"again", None).1.is_empty());
}

#[test]
fn a_child_watch_fires_node_deleted_when_its_node_goes_and_children_changed_for_a_child() {
    let mut zk = ZkModel::default();
    let s = session(&mut zk);
    let w = session(&mut zk);
    zk.apply(T0, s, &create("/e", CreateMode::Persistent))
        .0
        .unwrap();
    zk.apply(T0, s, &create("/e/x", CreateMode::Persistent))
        .0
        .unwrap();
    let children = |path: &str| Request::GetChildren {
        path: path.into(),
        watch: true,
    };
    zk.apply(T0, w, &children("/e")).0.unwrap();
    zk.apply(T0, w, &children("/e/x")).0.unwrap();
    let (_, fired) = zk.apply(T0, s, &delete("/e/x", None));
    let mut got = kinds(&fired);
    got.sort_by_key(|k| k.2);
    assert_eq!(
        got,
        [
            (w, WatchKind::NodeChildrenChanged, "/e"),
            (w, WatchKind::NodeDeleted, "/e/x")
        ]
    );
}

#[test]
fn a_delete_tells_data_watchers_before_child_watchers_and_each_session_once() {
    // As the real server's deleteNode: the data watches fire first, then
    // the child watches of the sessions not told yet. The child watcher's
    // session is the oldest, so no session order explains the result.
    let mut zk = ZkModel::default();
    let owner = session(&mut zk);
    let by_children = session(&mut zk);
    let by_data = session(&mut zk);
    let by_both = session(&mut zk);
    zk.apply(T0, owner, &create("/e", CreateMode::Persistent))
        .0
        .unwrap();
    zk.apply(T0, owner, &create("/e/x", CreateMode::Ephemeral))
        .0
        .unwrap();
    let children = Request::GetChildren {
        path: "/e/x".into(),
        watch: true,
    };
    zk.apply(T0, by_children, &children).0.unwrap();
    zk.apply(T0, by_data, &get_data("/e/x", true)).0.unwrap();
    zk.apply(T0, by_both, &children).0.unwrap();
    zk.apply(T0, by_both, &get_data("/e/x", true)).0.unwrap();
    let (_, fired) = zk.apply(T0, owner, &delete("/e/x", None));
    assert_eq!(
        kinds(&fired),
        [
            (by_data, WatchKind::NodeDeleted, "/e/x"),
            (by_both, WatchKind::NodeDeleted, "/e/x"),
            (by_children, WatchKind::NodeDeleted, "/e/x"),
        ]
    );
}

#[test]
fn an_exists_watch_fires_node_created_on_a_missing_node_and_acts_as_a_data_watch_on_an_existing_one(
) {
    let mut zk = ZkModel::default();
    let s = session(&mut zk);
    let w = session(&mut zk);
    let exists = |path: &str| Request::Exists {
        path: path.into(),
        watch: true,
    };
    assert_eq!(zk.apply(T0, w, &exists("/e")).0, Ok(Reply::Exists(None)));
    let (_, fired) = zk.apply(T0, s, &create("/e", CreateMode::Persistent));
    assert_eq!(kinds(&fired), [(w, WatchKind::NodeCreated, "/e")]);
    assert!(matches!(
        zk.apply(T0, w, &exists("/e")).0,
        Ok(Reply::Exists(Some(_)))
    ));
    let (_, fired) = zk.set_data(T0, s, "/e", b"x", None);
    assert_eq!(kinds(&fired), [(w, WatchKind::NodeDataChanged, "/e")]);
    // An exists-watch on a node that never comes stays registered: the leak
    // the core avoids by watching with getData.
    zk.apply(T0, w, &exists("/never")).0.unwrap();
    assert_eq!(zk.watch_count(w), 1);
}

#[test]
fn delete_checks_the_parents_acl_before_the_node_its_version_and_its_children() {
    let mut zk = ZkModel::default();
    let owner = zk
        .open_session(T0, Duration::from_secs(4), Some("digest:a".into()))
        .0;
    let stranger = session(&mut zk);
    let acl = Request::Create {
        path: "/e".into(),
        data: vec![],
        mode: CreateMode::Persistent,
        acl: Acl::CreatorAll,
    };
    zk.apply(T0, owner, &acl).0.unwrap();
    // NoAuth comes first, whatever else is wrong.
    assert_eq!(
        zk.apply(T0, stranger, &delete("/e/missing", Some(9))).0,
        Err(ZkCode::NoAuth)
    );
    // A missing parent is NoNode.
    assert_eq!(
        zk.apply(T0, stranger, &delete("/nope/x", None)).0,
        Err(ZkCode::NoNode)
    );
    // The version is checked before the children.
    zk.apply(T0, owner, &create("/e/x", CreateMode::Persistent))
        .0
        .unwrap();
    zk.apply(T0, owner, &create("/e/x/y", CreateMode::Persistent))
        .0
        .unwrap();
    assert_eq!(
        zk.apply(T0, owner, &delete("/e/x", Some(4))).0,
        Err(ZkCode::BadVersion)
    );
    assert_eq!(
        zk.apply(T0, owner, &delete("/e/x", Some(0))).0,
        Err(ZkCode::NotEmpty)
    );
    assert_eq!(
        zk.apply(T0, owner, &delete("/", None)).0,
        Err(ZkCode::BadArguments)
    );
}

#[test]
fn create_checks_in_the_servers_order() {
    let mut zk = ZkModel::default();
    let owner = zk
        .open_session(T0, Duration::from_secs(4), Some("digest:a".into()))
        .0;
    let anonymous = session(&mut zk);
    let with = |path: &str, mode, acl| Request::Create {
        path: path.into(),
        data: vec![],
        mode,
        acl,
    };
    // A bad path before anything else.
    assert_eq!(
        zk.apply(T0, anonymous, &create("no-slash", CreateMode::Persistent))
            .0,
        Err(ZkCode::BadArguments)
    );
    // InvalidACL (no identity for a creator ACL) before the missing parent.
    assert_eq!(
        zk.apply(
            T0,
            anonymous,
            &with("/none/x", CreateMode::Persistent, Acl::CreatorAll)
        )
        .0,
        Err(ZkCode::InvalidAcl)
    );
    zk.apply(
        T0,
        owner,
        &with("/e", CreateMode::Persistent, Acl::CreatorAllWorldRead),
    )
    .0
    .unwrap();
    zk.apply(T0, owner, &create("/e/x", CreateMode::Persistent))
        .0
        .unwrap();
    // NoAuth (CREATE on the parent) before NodeExists.
    assert_eq!(
        zk.apply(T0, anonymous, &create("/e/x", CreateMode::Persistent))
            .0,
        Err(ZkCode::NoAuth)
    );
    // NodeExists before NoChildrenForEphemerals.
    zk.apply(T0, anonymous, &create("/p", CreateMode::Ephemeral))
        .0
        .unwrap();
    zk.apply(T0, anonymous, &create("/q", CreateMode::Persistent))
        .0
        .unwrap();
    assert_eq!(
        zk.apply(T0, anonymous, &create("/p/c", CreateMode::Persistent))
            .0,
        Err(ZkCode::NoChildrenForEphemerals)
    );
}

#[test]
fn a_session_holding_several_identities_is_granted_by_any_of_them() {
    let mut zk = ZkModel::default();
    let owner = zk
        .open_session(T0, Duration::from_secs(4), Some("digest:a".into()))
        .0;
    let other = zk
        .open_session(T0, Duration::from_secs(4), Some("digest:b".into()))
        .0;
    let acl = Request::Create {
        path: "/e".into(),
        data: vec![],
        mode: CreateMode::Persistent,
        acl: Acl::CreatorAll,
    };
    zk.apply(T0, owner, &acl).0.unwrap();
    assert_eq!(
        zk.apply(T0, other, &get_data("/e", false)).0.err(),
        Some(ZkCode::NoAuth)
    );
    assert_eq!(
        zk.set_data(T0, other, "/e", b"x", None).0.err(),
        Some(ZkCode::NoAuth)
    );
    zk.add_auth(other, "digest:a");
    assert!(zk.apply(T0, other, &get_data("/e", false)).0.is_ok());
    assert!(zk.set_data(T0, other, "/e", b"x", None).0.is_ok());
}

#[test]
fn a_sequential_name_taken_by_a_plain_node_is_node_exists() {
    let mut zk = ZkModel::default();
    let s = session(&mut zk);
    zk.apply(T0, s, &create("/e", CreateMode::Persistent))
        .0
        .unwrap();
    // cversion is 1 after this create, so the next sequential name is n_0000000001.
    zk.apply(T0, s, &create("/e/n_0000000001", CreateMode::Persistent))
        .0
        .unwrap();
    assert_eq!(
        zk.apply(T0, s, &create("/e/n_", CreateMode::EphemeralSequential))
            .0,
        Err(ZkCode::NodeExists)
    );
    // The failed create did not bump cversion: the next one fails the same way.
    assert_eq!(zk.stat("/e").unwrap().cversion, 1);
}

#[test]
fn deletes_bump_the_parents_cversion_and_pzxid_and_persistent_nodes_have_no_owner() {
    let mut zk = ZkModel::default();
    let s = session(&mut zk);
    zk.apply(T0, s, &create("/e", CreateMode::Persistent))
        .0
        .unwrap();
    let (r, _) = zk.apply(T0, s, &create("/e/x", CreateMode::Persistent));
    let Ok(Reply::Created { stat, .. }) = r else {
        panic!("{r:?}")
    };
    assert_eq!(stat.ephemeral_owner, 0);
    zk.apply(T0, s, &delete("/e/x", None)).0.unwrap();
    let parent = zk.stat("/e").unwrap();
    assert_eq!(
        (parent.cversion, parent.num_children, parent.pzxid),
        (2, 0, zk.zxid())
    );
}

#[test]
fn a_container_that_never_had_a_child_stays_and_its_removal_fires_watches() {
    let mut zk = ZkModel::default();
    let s = session(&mut zk);
    let w = session(&mut zk);
    zk.apply(T0, s, &create("/c", CreateMode::Container))
        .0
        .unwrap();
    assert!(zk.stat("/c").is_some());
    zk.apply(T0, s, &create("/c/x", CreateMode::Ephemeral))
        .0
        .unwrap();
    zk.apply(T0, w, &get_data("/c", true)).0.unwrap();
    // The child goes with its session; the container follows it.
    let fired = zk.close_session(s);
    assert!(zk.stat("/c").is_none());
    assert_eq!(kinds(&fired), [(w, WatchKind::NodeDeleted, "/c")]);
}

#[test]
fn a_reply_may_overtake_earlier_watch_events_but_never_an_earlier_reply() {
    let mut link = Link::default();
    let t = Timestamp::from_millis(100);
    let first_reply = link.reply(t, Duration::from_millis(6), false);
    let event = link.to_client(t, Duration::from_millis(8));
    let overtaking = link.reply(t, Duration::from_millis(1), true);
    assert!(overtaking < event, "the reply overtakes the watch event");
    assert!(overtaking >= first_reply, "but not the earlier reply");
    let normal = link.reply(t, Duration::from_millis(1), false);
    assert!(normal >= event, "without overtaking, FIFO again");
}

use zkelect_sim::client::{Clock, Library, Tick};

/// A clock connected at 0 with a 4 s timeout (zookeeper-client ticks every 200 ms).
fn clock(last_recv: u64, last_sent: u64, ping_out: bool, idle: bool) -> Clock {
    Clock {
        connected_at: T0,
        last_recv: Timestamp::from_millis(last_recv),
        last_sent: Timestamp::from_millis(last_sent),
        ping_out,
        idle,
        timeout: Duration::from_secs(4),
    }
}

#[test]
fn zookeeper_client_drops_at_the_first_tick_after_two_fifths_of_silence() {
    let lib = Library::ZookeeperClient;
    let at = Timestamp::from_millis;
    // Last bytes at 1,050 ms: 8 ticks later is 2,650 ms, the first tick at or
    // after it 2,800 ms (ticks every 200 ms from the connection).
    let c = clock(1_050, 2_700, true, false);
    assert_eq!(
        lib.tick(at(2_600), &c),
        Tick::Go {
            ping: false,
            next: at(2_800)
        }
    );
    assert_eq!(lib.tick(at(2_800), &c), Tick::Lost);
    // Any bytes received (a watch event as much as a reply) move it on.
    let heard = clock(2_700, 2_700, true, false);
    assert!(matches!(lib.tick(at(2_800), &heard), Tick::Go { .. }));
}

#[test]
fn zookeeper_client_pings_after_three_quiet_ticks_with_none_outstanding() {
    let lib = Library::ZookeeperClient;
    let at = Timestamp::from_millis;
    // Sent at 1,000 ms: a ping is due 600 ms later, at the 1,600 ms tick.
    let quiet = clock(1_000, 1_000, false, true);
    assert_eq!(
        lib.tick(at(1_200), &quiet),
        Tick::Go {
            ping: false,
            next: at(1_600)
        }
    );
    assert_eq!(
        lib.tick(at(1_600), &quiet),
        Tick::Go {
            ping: true,
            next: at(2_600)
        }
    );
    // One ping outstanding at a time.
    let waiting = clock(1_000, 1_000, true, true);
    assert!(matches!(
        lib.tick(at(1_600), &waiting),
        Tick::Go { ping: false, .. }
    ));
}

#[test]
fn zookeeper_async_never_drops_for_silence_and_pings_once_idle_for_two_thirds() {
    let lib = Library::ZookeeperAsync;
    let at = Timestamp::from_millis;
    // Nothing received for a minute: still connected (only EOF ends it).
    let deaf = clock(0, 0, true, true);
    assert!(matches!(
        lib.tick(at(60_000), &deaf),
        Tick::Go { ping: false, .. }
    ));
    let idle = clock(0, 1_000, false, true);
    assert_eq!(
        lib.tick(at(2_000), &idle),
        Tick::Go {
            ping: false,
            next: at(3_666)
        }
    );
    assert!(matches!(
        lib.tick(at(3_666), &idle),
        Tick::Go { ping: true, .. }
    ));
    // Nothing is pinged while a request is in flight.
    let busy = clock(0, 1_000, false, false);
    assert!(matches!(
        lib.tick(at(3_666), &busy),
        Tick::Go { ping: false, .. }
    ));
}

#[test]
fn java_client_checks_its_read_timeout_at_every_third() {
    let lib = Library::Java;
    let at = Timestamp::from_millis;
    let c = clock(1_000, 1_000, false, true);
    assert_eq!(
        lib.tick(at(2_000), &c),
        Tick::Go {
            ping: true,
            next: at(3_333)
        }
    );
    assert_eq!(lib.tick(at(3_667), &c), Tick::Lost);
}

#[test]
fn custom_acls_grant_each_digest_user_ip_network_and_world_entry_its_own_bits() {
    use zkelect_core::{AclEntry, Perms};
    const HASH: &str = "Dk6RtGyVWTTUyfSa87YMV3jqd5A=";
    let mut zk = ZkModel::default();
    let open = |zk: &mut ZkModel, identity: Option<String>| {
        zk.open_session(T0, Duration::from_secs(4), identity).0
    };
    let alice = open(&mut zk, Some(format!("digest:alice:{HASH}")));
    let bob = open(&mut zk, Some(format!("digest:bob:{HASH}")));
    let carol = open(&mut zk, Some(format!("digest:carol:{HASH}")));
    let anonymous = open(&mut zk, None);
    let acl = Acl::Custom(vec![
        AclEntry::new("digest", &format!("alice:{HASH}"), Perms::ALL).unwrap(),
        AclEntry::new(
            "digest",
            &format!("bob:{HASH}"),
            Perms::READ | Perms::CREATE,
        )
        .unwrap(),
        AclEntry::new("ip", "10.0.0.0/8", Perms::ALL).unwrap(),
        AclEntry::anyone(Perms::READ),
    ]);
    let make = |path: &str, mode, acl: Acl| Request::Create {
        path: path.into(),
        data: vec![],
        mode,
        acl,
    };
    zk.apply(T0, alice, &make("/e", CreateMode::Persistent, acl.clone()))
        .0
        .unwrap();
    // bob may create under /e but not delete there; alice may do both.
    let b = created_path(
        zk.apply(T0, bob, &make("/e/b", CreateMode::Ephemeral, Acl::Open))
            .0,
    );
    assert_eq!(zk.apply(T0, bob, &delete(&b, None)).0, Err(ZkCode::NoAuth));
    assert!(zk.apply(T0, alice, &delete(&b, None)).0.is_ok());
    // carol and an anonymous session may read (world), not create; the
    // model's clients are on 127.0.0.1, outside 10.0.0.0/8.
    assert!(zk.apply(T0, carol, &get_data("/e", false)).0.is_ok());
    assert_eq!(
        zk.apply(
            T0,
            anonymous,
            &make("/e/x", CreateMode::Ephemeral, Acl::Open)
        )
        .0,
        Err(ZkCode::NoAuth)
    );
    // An ip entry that covers the loopback grants every session.
    let lo = Acl::Custom(vec![AclEntry::new("ip", "127.0.0.0/8", Perms::ALL).unwrap()]);
    zk.apply(T0, alice, &make("/lo", CreateMode::Persistent, lo))
        .0
        .unwrap();
    assert!(zk
        .apply(
            T0,
            anonymous,
            &make("/lo/x", CreateMode::Ephemeral, Acl::Open)
        )
        .0
        .is_ok());
    // An auth entry becomes the creator's identities, not its address: a
    // session with none is refused it (InvalidACL), as the server does.
    let auth = Acl::Custom(vec![AclEntry::new("auth", "", Perms::ALL).unwrap()]);
    assert_eq!(
        zk.apply(
            T0,
            anonymous,
            &make("/mine", CreateMode::Persistent, auth.clone())
        )
        .0,
        Err(ZkCode::InvalidAcl)
    );
    zk.apply(T0, bob, &make("/mine", CreateMode::Persistent, auth))
        .0
        .unwrap();
    assert_eq!(
        zk.apply(T0, alice, &get_data("/mine", false)).0.err(),
        Some(ZkCode::NoAuth)
    );
    assert!(zk.apply(T0, bob, &get_data("/mine", false)).0.is_ok());
}
