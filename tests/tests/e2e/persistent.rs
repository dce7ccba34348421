//! Persistent look-alikes against a real ZooKeeper 3.8 server (a
//! persistent child is never a contender).
//!
//! The election path holds PERSISTENT children named like the contenders of
//! every scheme, all older than any node a candidate can create:
//!
//! | look-alike | a contender for |
//! |---|---|
//! | `n_0000000000` | zkelect, `Interop::None` (unprotected) |
//! | `_c_0123456789abcdef-n_0000000000` | zkelect, `Interop::None` (protected) |
//! | `_c_<uuid>-latch-0000000000` | Curator's LeaderLatch: `Interop::Curator` |
//! | `<32 hex>__lock__0000000000` | kazoo's Election: `Interop::Kazoo` |
//!
//! A lone zkelect candidate joins with interop off, with Curator and with
//! kazoo, on both transports. Before look-alikes were skipped it queued behind whichever
//! look-alikes its scheme counted and never led. Now it:
//! * leads soon (well within a couple of seconds of joining) and after a
//!   handful of requests: it reads each look-alike's Stat once, as the node
//!   it would watch, and goes on to the next without listing again;
//! * reports each look-alike its scheme counts, and only those, once, as
//!   `Notice::PersistentSkipped`;
//! * leaves every look-alike untouched: same czxid, mzxid, version and data
//!   after it led and closed.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use zkelect::{Election, Interop, Notice};
use zookeeper_async::{Acl as ZkAcl, CreateMode as ZkMode, ZooKeeperExt};

use crate::harness::{children, raw, retry, transport, Cand, Client, Event, SETTLE};

/// The look-alikes, each with the interop scheme that counts it (`None` is
/// zkelect's own default scheme).
const LOOK_ALIKES: &[(&str, Interop)] = &[
    ("n_0000000000", Interop::None),
    ("_c_0123456789abcdef-n_0000000000", Interop::None),
    (
        "_c_9f1c6f0e-4b5d-4c1e-9a7b-2d8e0f6a1b3c-latch-0000000000",
        Interop::Curator,
    ),
    (
        "0123456789abcdef0123456789abcdef__lock__0000000000",
        Interop::Kazoo,
    ),
];

/// "Soon": a lone candidate needs a create, a listing and one read per
/// look-alike, milliseconds on a local server; the bound leaves room for a
/// loaded two-core machine and is far below forever (the bug).
const LEAD_WITHIN: Duration = Duration::from_secs(3);

/// "A handful" of requests, without the look-alikes' reads: the path's
/// `exists`, the create, one listing and the read of its own node, plus two
/// to spare (a read still in flight as it leads, its own node's watch at its
/// first probe tick). The look-alikes add one read each and nothing more: no
/// listing again after a skip.
const BASE_OPS: u64 = 6;

/// What a look-alike looks like from outside.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Snapshot {
    czxid: i64,
    mzxid: i64,
    version: i32,
    ephemeral_owner: i64,
    data: Vec<u8>,
}

async fn snapshot(zk: &zookeeper_async::ZooKeeper, path: &str) -> Snapshot {
    let (data, stat) = retry(|| zk.get_data(path, false)).await;
    Snapshot {
        czxid: stat.czxid,
        mzxid: stat.mzxid,
        version: stat.version,
        ephemeral_owner: stat.ephemeral_owner,
        data,
    }
}

async fn a_lone_candidate_leads_next_to_persistent_look_alikes(client: Client, interop: Interop) {
    let server = crate::harness::start_server();
    let hosts = server.connect_string();
    let path = format!("/persistent/{interop:?}/leader").to_lowercase();

    let zk = raw(&hosts, None).await;
    retry(|| zk.ensure_path(&path)).await;
    let mut before = Vec::new();
    for (name, _) in LOOK_ALIKES {
        let child = format!("{path}/{name}");
        let data = format!("look-alike {name}").into_bytes();
        retry(|| {
            zk.create(
                &child,
                data.clone(),
                ZkAcl::open_unsafe().clone(),
                ZkMode::Persistent,
            )
        })
        .await;
        let snap = snapshot(&zk, &child).await;
        assert_eq!(snap.ephemeral_owner, 0, "{child} is persistent");
        before.push(snap);
    }

    let (t, events) = transport(client, &hosts, None).await;
    let joined = Instant::now();
    let cand = Cand::join(
        "lone",
        Election::builder(t, events)
            .path(path.as_str())
            .id("lone")
            .interop(interop),
    )
    .await;
    let (elected, _) = crate::harness::wait_for(
        "the lone candidate's election",
        SETTLE,
        || cand.rec.elections().first().copied(),
        || cand.describe(),
    )
    .await;
    let took = elected.saturating_duration_since(joined);
    assert!(
        took <= LEAD_WITHIN,
        "the lone candidate leads soon: {took:?} after joining\n{}",
        cand.describe()
    );
    assert!(cand.is_leader(), "{}", cand.describe());

    let skipped: Vec<String> = cand
        .rec
        .notices()
        .into_iter()
        .filter_map(|n| match n {
            Notice::PersistentSkipped { node } => Some(node),
            _ => None,
        })
        .collect();
    let expected: BTreeSet<String> = LOOK_ALIKES
        .iter()
        .filter(|(_, scheme)| *scheme == interop)
        .map(|(name, _)| (*name).to_owned())
        .collect();
    let reported: BTreeSet<String> = skipped.iter().cloned().collect();
    assert_eq!(
        reported,
        expected,
        "every look-alike its scheme counts, and only those, is reported as skipped\n{}",
        cand.describe()
    );
    assert_eq!(
        skipped.len(),
        reported.len(),
        "each is reported once: {skipped:?}"
    );
    assert!(
        cand.election.error().is_none(),
        "no error: {}",
        cand.describe()
    );

    // It stays the leader while they stay, and then does nothing more.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(cand.is_leader(), "{}", cand.describe());
    let metrics = cand.election.metrics();
    assert_eq!(
        metrics.persistent_skipped,
        expected.len() as u64,
        "the counter agrees with the notices"
    );
    let ops = metrics.ops;
    let node = cand.node().expect("a joined candidate has a node");
    println!(
        "{client} {interop:?}: {node} elected {} ms after joining; {ops} requests, {} look-alikes skipped",
        took.as_millis(),
        expected.len()
    );
    let max_ops = BASE_OPS + expected.len() as u64;
    assert!(
        ops <= max_ops,
        "the lone candidate leads after a handful of requests: {ops} > {max_ops}\n{}",
        cand.describe()
    );
    assert_eq!(
        cand.rec.terms().len(),
        1,
        "one uninterrupted term\n{}",
        cand.describe()
    );
    cand.close().await;
    assert!(
        cand.rec.records().iter().any(|r| r.event == Event::Closing),
        "closed"
    );

    let listed: BTreeSet<String> = children(&hosts, &path).await.into_iter().collect();
    let names: BTreeSet<String> = LOOK_ALIKES.iter().map(|(n, _)| (*n).to_owned()).collect();
    assert_eq!(
        listed, names,
        "after close, the path holds the look-alikes and nothing else"
    );
    for ((name, _), was) in LOOK_ALIKES.iter().zip(&before) {
        let now = snapshot(&zk, &format!("{path}/{name}")).await;
        assert_eq!(&now, was, "{name} is untouched");
    }
    let _ = zk.close().await;
}

async fn interop_none(client: Client) {
    a_lone_candidate_leads_next_to_persistent_look_alikes(client, Interop::None).await;
}

async fn interop_curator(client: Client) {
    a_lone_candidate_leads_next_to_persistent_look_alikes(client, Interop::Curator).await;
}

async fn interop_kazoo(client: Client) {
    a_lone_candidate_leads_next_to_persistent_look_alikes(client, Interop::Kazoo).await;
}

scenarios_on!(
    on_zookeeper_async,
    super::Client::ZookeeperAsync,
    [interop_none, interop_curator, interop_kazoo]
);
scenarios_on!(
    on_zookeeper_client,
    super::Client::ZookeeperClient,
    [interop_none, interop_curator, interop_kazoo]
);
