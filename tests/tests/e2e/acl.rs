//! Custom ACLs (`Acl::Custom`) against a real ZooKeeper server, on both
//! transports: the list a handle is given is the list the server keeps and
//! enforces.
//!
//! * `ip`: a lock whose ACL is `ip:127.0.0.1:cdrwa` holds from the local
//!   client and its node carries exactly that list (getACL); a lock whose
//!   node may be read only from another address (`ip:10.1.2.3:r`, with the
//!   local address allowed everything but reading) still holds (zkelect
//!   never reads its own node) while a local reader of that node is refused
//!   (`NoAuth`): the ACL reached the server;
//! * several digest users: a lock and an election whose ACL is
//!   `[digest alice: cdrwa, digest bob: r]`, made by a session authenticated
//!   as alice: getACL lists both; a client authenticated as bob reads the
//!   node but may not delete it, one as carol may not even read it, one as
//!   alice may do both;
//! * bad lists: an entry the server would refuse cannot be made (typed
//!   `AclError`), and a list without `c` or `d`, or an empty one, fails the
//!   acquisition or the join with the typed config error before anything is
//!   created.
//!
//! Run once per real client by `scenarios_on!` (`on_zookeeper_async::…`,
//! `on_zookeeper_client::…`).

use zkelect::core::{Acl, AclEntry, AclError, ConfigError, Perms};
use zkelect::{ElectionError, LockError, Session};
use zookeeper_async::{CreateMode, Permission, ZkError, ZooKeeper};

use crate::harness::{raw, retry, start_server, Client, SESSION, SETTLE};
use crate::locks::{close, in_time, session};

/// Digest users as `user:password`, and their ids `user:base64(sha1(user:password))`
/// as ZooKeeper's `DigestAuthenticationProvider.generateDigest` writes them.
/// A wrong hash would lock alice out of her own nodes, and the scenarios
/// would fail.
const ALICE: &str = "alice:pw-a";
const ALICE_ID: &str = "alice:uLD5NOZLQJ80mnO9Vlr0fn9L2Fg=";
const BOB: &str = "bob:pw-b";
const BOB_ID: &str = "bob:xsPTa926cuj68HAo44wWaBYu4To=";
const CAROL: &str = "carol:pw-c";

fn entry(text: &str) -> AclEntry {
    text.parse()
        .unwrap_or_else(|e| panic!("{text} is a good entry: {e}"))
}

/// An ACL as the server reports it, as `(scheme, id, perms)` in our terms.
fn reported(acl: &[zookeeper_async::Acl]) -> Vec<(String, String, Perms)> {
    let mut list: Vec<_> = acl
        .iter()
        .map(|a| {
            let bits = [
                (Permission::READ, Perms::READ),
                (Permission::WRITE, Perms::WRITE),
                (Permission::CREATE, Perms::CREATE),
                (Permission::DELETE, Perms::DELETE),
                (Permission::ADMIN, Perms::ADMIN),
            ]
            .into_iter()
            .filter(|(zk, _)| a.perms & *zk == *zk)
            .fold(Perms::NONE, |all, (_, ours)| all | ours);
            (a.scheme.clone(), a.id.clone(), bits)
        })
        .collect();
    list.sort();
    list
}

/// A custom list as `(scheme, id, perms)`, sorted as [`reported`] sorts.
fn expected(entries: &[AclEntry]) -> Vec<(String, String, Perms)> {
    let mut list: Vec<_> = entries
        .iter()
        .map(|e| (e.scheme().as_str().to_owned(), e.id().to_owned(), e.perms()))
        .collect();
    list.sort();
    list
}

/// A session of `client` authenticated with digest `credentials`.
async fn session_as(client: Client, hosts: &str, credentials: &str) -> Session {
    Session::connect(client.settings(hosts, SESSION, Some(credentials)))
        .await
        .unwrap_or_else(|e| panic!("{client}: cannot open a session as {credentials}: {e}"))
}

/// The server's ACL of `path`, read by `zk`.
async fn acl_of(zk: &ZooKeeper, path: &str) -> Vec<(String, String, Perms)> {
    let (acl, _) = retry(|| zk.get_acl(path)).await;
    reported(&acl)
}

fn refused<T: std::fmt::Debug>(what: &str, result: Result<T, ZkError>) {
    match result {
        Err(e) => assert_eq!(
            e,
            ZkError::NoAuth,
            "{what}: refused, but not for want of rights"
        ),
        Ok(v) => panic!("{what} was allowed ({v:?}); the ACL must refuse it"),
    }
}

// ----- scenarios ---------------------------------------------------------------------

/// `ip:127.0.0.1:cdrwa`: the local client holds, and its node (and the
/// levels zkelect made) carry that list as the server reports it. A node
/// readable only from 10.1.2.3 refuses a local reader, though the local
/// holder may still create, hold and delete it.
async fn an_ip_acl_reaches_the_server(client: Client) {
    let server = start_server();
    let hosts = server.connect_string();
    let zk = raw(&hosts, None).await;
    let s = session(client, &hosts).await;

    let local = vec![entry("ip:127.0.0.1:cdrwa")];
    let lock = s.mutex("/ip/local/lock").acl(Acl::Custom(local.clone()));
    let guard = in_time("the local lock", lock.acquire())
        .await
        .unwrap_or_else(|e| panic!("the local client may take an ip:127.0.0.1 lock: {e}"));
    assert!(guard.is_held());
    let node = format!("/ip/local/lock/{}", guard.node());
    for p in ["/ip", "/ip/local", "/ip/local/lock", node.as_str()] {
        assert_eq!(acl_of(&zk, p).await, expected(&local), "the ACL of {p}");
    }
    // The local address has every right: a local reader reads the node.
    retry(|| zk.get_data(&node, false)).await;
    guard.release().await;
    assert!(
        retry(|| zk.exists(&node, false)).await.is_none(),
        "{node} is deleted on release"
    );

    // Another address may read; the local one may do all but read. The
    // queue's levels are made open first (a queue the holder cannot list
    // is refused: NoAuth), so only the node carries the list.
    for level in ["/ip-other", "/ip-other/lock"] {
        retry(|| {
            zk.create(
                level,
                Vec::new(),
                zookeeper_async::Acl::open_unsafe().clone(),
                CreateMode::Persistent,
            )
        })
        .await;
    }
    let elsewhere = vec![entry("ip:10.1.2.3:r"), entry("ip:127.0.0.1:cdwa")];
    let lock = s
        .mutex("/ip-other/lock")
        .acl(Acl::Custom(elsewhere.clone()));
    let guard = in_time("the lock readable elsewhere", lock.acquire())
        .await
        .unwrap_or_else(|e| panic!("the local client holds without reading its node: {e}"));
    let node = format!("/ip-other/lock/{}", guard.node());
    assert_eq!(
        acl_of(&zk, &node).await,
        expected(&elsewhere),
        "the ACL of {node}"
    );
    refused(
        "a local reader of a node only 10.1.2.3 may read",
        zk.get_data(&node, false).await,
    );
    // The queue can still be listed: its level is open.
    let listed = retry(|| zk.get_children("/ip-other/lock", false)).await;
    assert_eq!(listed, [guard.node().to_owned()]);
    guard.release().await;
    assert!(
        retry(|| zk.exists(&node, false)).await.is_none(),
        "{node} is deleted on release (the local address may delete)"
    );

    close(&[&s]).await;
    let _ = zk.close().await;
}

/// `[digest alice: cdrwa, digest bob: r]` on a lock and an election made by
/// alice's session: both entries on every node, bob reads but may not
/// delete, carol may not read, alice may read and delete.
async fn several_digest_users_share_a_queue(client: Client) {
    let server = start_server();
    let hosts = server.connect_string();
    let s = session_as(client, &hosts, ALICE).await;
    let list = vec![
        entry(&format!("digest:{ALICE_ID}:cdrwa")),
        entry(&format!("digest:{BOB_ID}:r")),
    ];
    let alice = raw(&hosts, Some(ALICE)).await;
    let bob = raw(&hosts, Some(BOB)).await;
    let carol = raw(&hosts, Some(CAROL)).await;
    let anonymous = raw(&hosts, None).await;

    let lock = s.mutex("/digest/lock").acl(Acl::Custom(list.clone()));
    let guard = in_time("alice's lock", lock.acquire())
        .await
        .unwrap_or_else(|e| panic!("alice's session takes the lock: {e}"));
    let election = s
        .election("/digest/leader")
        .id("alice")
        .acl(Acl::Custom(list.clone()))
        .join()
        .await
        .unwrap_or_else(|e| panic!("alice's session joins the election: {e}"));
    in_time("alice to lead", election.wait_leader())
        .await
        .unwrap_or_else(|e| panic!("alice leads: {e}"));
    let elected = election.node().expect("a leader has a node");

    for (queue, node) in [
        ("/digest/lock", guard.node().to_owned()),
        ("/digest/leader", elected),
    ] {
        let node = format!("{queue}/{node}");
        for p in ["/digest", queue, node.as_str()] {
            assert_eq!(acl_of(&alice, p).await, expected(&list), "the ACL of {p}");
        }
        let (data, _) = retry(|| bob.get_data(&node, false)).await;
        assert!(!data.is_empty(), "bob reads {node}'s id");
        refused(
            &format!("bob deleting {node}"),
            bob.delete(&node, None).await,
        );
        refused(
            &format!("carol reading {node}"),
            carol.get_data(&node, false).await,
        );
        refused(
            &format!("carol listing {queue}"),
            carol.get_children(queue, false).await,
        );
        refused(
            &format!("anonymous reading {node}"),
            anonymous.get_data(&node, false).await,
        );
        let (by_alice, _) = retry(|| alice.get_data(&node, false)).await;
        assert_eq!(by_alice, data, "alice reads what bob read");
    }

    // Alice's rights include delete: her raw client takes the lock's node
    // away, and the holder learns it has lost the lock.
    let node = format!("/digest/lock/{}", guard.node());
    alice
        .delete(&node, None)
        .await
        .unwrap_or_else(|e| panic!("alice may delete {node}: {e}"));
    crate::harness::wait_for(
        "the holder to see its node gone",
        SETTLE,
        || (!guard.is_held()).then_some(()),
        || format!("{node} deleted by alice"),
    )
    .await;
    guard.release().await;
    election.close().await;
    // Bob may not delete the emptied queue, alice may.
    refused(
        "bob deleting /digest/lock",
        bob.delete("/digest/lock", None).await,
    );
    alice
        .delete("/digest/lock", None)
        .await
        .unwrap_or_else(|e| panic!("alice may delete /digest/lock: {e}"));

    close(&[&s]).await;
    for zk in [alice, bob, carol, anonymous] {
        let _ = zk.close().await;
    }
}

/// An entry the server would refuse cannot be written down, and a list
/// the queue cannot work with fails the acquisition or the join with the
/// typed config error, before anything is created.
async fn a_bad_custom_list_fails_before_any_node(client: Client) {
    // Digest without a hash, a password for a hash, no permissions.
    assert!(matches!(
        AclEntry::new("digest", "alice", Perms::ALL),
        Err(AclError::BadId {
            scheme: "digest",
            ..
        })
    ));
    assert!(matches!(
        "digest:alice:pw-a:cdrwa".parse::<AclEntry>(),
        Err(AclError::BadId {
            scheme: "digest",
            ..
        })
    ));
    assert!(matches!(
        "digest:alice".parse::<AclEntry>(),
        Err(AclError::Syntax(_))
    ));

    let server = start_server();
    let hosts = server.connect_string();
    let zk = raw(&hosts, None).await;
    let s = session(client, &hosts).await;
    for (acl, want) in [
        (Acl::Custom(Vec::new()), AclError::Empty),
        (
            Acl::Custom(vec![entry(&format!("digest:{ALICE_ID}:rw"))]),
            AclError::Missing('c'),
        ),
        (
            Acl::Custom(vec![entry("world:anyone:r"), entry("ip:127.0.0.1:c")]),
            AclError::Missing('d'),
        ),
    ] {
        let lock = s.mutex("/bad/lock").acl(acl.clone());
        match in_time("a refused acquisition", lock.acquire()).await {
            Err(LockError::Config(ConfigError::InvalidAcl(e))) => assert_eq!(e, want, "{acl:?}"),
            other => panic!("{acl:?}: acquire gave {other:?}, not the config error"),
        }
        let joined = s
            .election("/bad/leader")
            .id("a")
            .acl(acl.clone())
            .join()
            .await;
        match joined {
            Err(ElectionError::Config(ConfigError::InvalidAcl(e))) => {
                assert_eq!(e, want, "{acl:?}")
            }
            Err(other) => panic!("{acl:?}: join gave {other:?}, not the config error"),
            Ok(_) => panic!("{acl:?}: the election joined with a bad ACL"),
        }
    }
    assert!(
        retry(|| zk.exists("/bad", false)).await.is_none(),
        "nothing was created for a refused list"
    );
    close(&[&s]).await;
    let _ = zk.close().await;
}

scenarios_on!(
    on_zookeeper_async,
    super::Client::ZookeeperAsync,
    [
        an_ip_acl_reaches_the_server,
        several_digest_users_share_a_queue,
        a_bad_custom_list_fails_before_any_node,
    ]
);
scenarios_on!(
    on_zookeeper_client,
    super::Client::ZookeeperClient,
    [
        an_ip_acl_reaches_the_server,
        several_digest_users_share_a_queue,
        a_bad_custom_list_fails_before_any_node,
    ]
);
