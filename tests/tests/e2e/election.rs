//! The election against real ZooKeeper 3.8 servers under real faults,
//! through the public API of `zkelect`: every
//! candidate is an [`Election`] over its own session, and records what it
//! publishes on one monotonic clock (`harness`).
//!
//! Every scenario is an `async fn(Client)`, run once per real client by the
//! modules `every_scenario_on!` makes at the end of this file
//! (`on_zookeeper_async::…`, `on_zookeeper_client::…`), so the transports
//! are held to the same scenarios.
//!
//! | scenario | tests |
//! |---|---|
//! | five candidates, the leader closes | `five_candidates_*`, and over the `memory` transport `memory_transport_*` |
//! | the leader black-holed past its session | `blackholed_*` |
//! | a create whose reply is lost | `lost_create_reply_*` |
//! | the server paused shorter / longer than the session | `pause_*` |
//! | standalone restart; ensemble follower then leader killed | `standalone_restart_*`, `ensemble_*` |
//! | digest credentials and creator-only ACLs | `digest_*`, `wrong_credentials_*`, `unknown_auth_scheme_*` |
//! | credentials refused at a reconnect: the session closes itself | `refused_credentials_*` |
//!
//! Every test starts its own server(s) (about half a second each), so tests
//! share nothing and may run in parallel. Waits poll a condition until a
//! generous deadline; timing is asserted only as the order of recorded events.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use zkelect::core::CreateMode;
use zkelect::memory::MemoryServer;
use zkelect::{
    Acl, CandidateError, ConnectionPolicy, DemotionReason, Election, ElectionError, EventStream,
    Notice, Reply, Request, Role, SessionError, Transport, ZkCode,
};
use zkelect_tests::{Proxy, ZkEnsemble, ZkServer};
use zookeeper_async::{Acl as ZkAcl, CreateMode as ZkMode, ZkError, ZooKeeperExt};

use crate::harness::{
    assert_terms_disjoint, assert_tokens_grow, children, close_all, describe, join_each, raw, stat,
    transport, wait_for, wait_settled, wait_settled_with, Cand, Client, Credentials, Event,
    Settled, SESSION, SETTLE,
};

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

// ----- 1. five candidates; the leader closes -----------------------------------

/// Five candidates join at once over transports from `connect`: exactly one
/// leads, the oldest node; the leader closes and exactly one successor is
/// elected, the next node in sequence, with a higher fencing token.
/// `list` lists the election path from outside.
async fn five_candidates_then_the_leader_closes<C, CF, L, LF>(path: &str, connect: C, mut list: L)
where
    C: Fn(usize) -> CF,
    CF: Future<Output = (Box<dyn Transport>, EventStream)>,
    L: FnMut() -> LF,
    LF: Future<Output = Vec<String>>,
{
    let mut joins = tokio::task::JoinSet::new();
    for i in 0..5 {
        let (t, events) = connect(i).await;
        let label = format!("c{i}");
        let builder = Election::builder(t, events).path(path).id(label.clone());
        joins.spawn(async move { Cand::join(&label, builder).await });
    }
    let mut cands: Vec<Cand> = Vec::new();
    while let Some(joined) = joins.join_next().await {
        cands.push(joined.expect("a join task panicked"));
    }
    cands.sort_by(|a, b| a.label.cmp(&b.label));
    let all: Vec<&Cand> = cands.iter().collect();

    let first = wait_settled_with(&all, &mut list, SETTLE).await;
    let leader = all[first.leader];
    println!(
        "{} leads with token {} over {:?}",
        leader.label, first.token, first.queue
    );
    for c in &all {
        let led = c.rec.terms().len();
        assert_eq!(
            led,
            usize::from(c.label == leader.label),
            "only the oldest node's candidate ever led\n{}",
            describe(&all)
        );
    }

    leader.close().await;
    assert_eq!(leader.role(), Role::Closed);
    wait_for(
        "the leader's Demoted(Closed) notice",
        SETTLE,
        || {
            leader
                .rec
                .demotions()
                .contains(&DemotionReason::Closed)
                .then_some(())
        },
        || leader.describe(),
    )
    .await;

    let rest: Vec<&Cand> = all
        .iter()
        .copied()
        .filter(|c| c.label != leader.label)
        .collect();
    let second = wait_settled_with(&rest, &mut list, SETTLE).await;
    let successor = rest[second.leader];
    assert_eq!(
        successor.node().as_ref(),
        first.queue.get(1),
        "the successor is the next node in sequence\n{}",
        describe(&all)
    );
    assert_eq!(second.queue, first.queue[1..], "{}", describe(&all));
    assert!(second.token > first.token, "{first:?} then {second:?}");
    for c in &rest {
        let elected = c.rec.elections().len();
        assert_eq!(
            elected,
            usize::from(c.label == successor.label),
            "exactly one successor was elected, once\n{}",
            describe(&all)
        );
    }
    assert_tokens_grow(&all);
    assert_terms_disjoint(&all);
    close_all(&all).await;
    assert!(list().await.is_empty(), "every node is gone after close");
}

async fn five_candidates_elect_one_leader_and_the_next_in_sequence_succeeds(client: Client) {
    let server = crate::harness::start_server();
    let hosts = server.connect_string();
    let path = "/e2e/five/leader";
    five_candidates_then_the_leader_closes(
        path,
        |_| transport(client, &hosts, None),
        || children(&hosts, path),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_transport_five_candidates_elect_one_leader_and_the_next_succeeds() {
    crate::harness::init_tracing();
    let server = MemoryServer::new();
    let path = "/e2e/memory/leader";
    five_candidates_then_the_leader_closes(
        path,
        |_| {
            let (t, events) = server.connect(SESSION);
            async move { (Box::new(t) as Box<dyn Transport>, events) }
        },
        || {
            let mut names = server.children(path);
            names.sort();
            async move { names }
        },
    )
    .await;
}

// ----- 2. the leader black-holed for longer than its session -------------------

/// Starts a server, `a` through a proxy (it joins first, so it leads) and
/// `b`, `c` directly; returns once settled with `a` leading.
async fn leader_behind_a_proxy(
    client: Client,
    path: &str,
    policy: ConnectionPolicy,
) -> (ZkServer, Proxy, [Cand; 3], Settled) {
    let server = crate::harness::start_server();
    let proxy = Proxy::start(server.addr()).expect("start a proxy");
    let hosts = server.connect_string();
    let (t, events) = transport(client, &proxy.connect_string(), None).await;
    let a = Cand::join(
        "a",
        Election::builder(t, events)
            .path(path)
            .id("a")
            .policy(policy),
    )
    .await;
    let mut others = join_each(client, &hosts, path, &["b", "c"]).await;
    let c = others.pop().expect("c");
    let b = others.pop().expect("b");
    let s = wait_settled(&[&a, &b, &c], &hosts, path, SETTLE).await;
    assert_eq!(s.leader, 0, "a joined first and leads");
    (server, proxy, [a, b, c], s)
}

async fn blackholed_leader_is_suspended_before_anyone_else_is_elected_then_rejoins(client: Client) {
    let path = "/e2e/blackhole/leader";
    let (server, proxy, [a, b, c], before) =
        leader_behind_a_proxy(client, path, ConnectionPolicy::Standard).await;
    let hosts = server.connect_string();
    let all = [&a, &b, &c];
    let a_node = a.node().expect("a's node");

    let cut_at = Instant::now();
    proxy.blackhole();
    // The server expires a's session and deletes its node; b, next in line, is elected.
    let (elected_at, b_token) = wait_for(
        "b to be elected after the server expired a's session",
        SESSION * 3 + SETTLE,
        || b.rec.elections().first().copied(),
        || describe(&all),
    )
    .await;
    let heal_at = Instant::now();
    proxy.heal();

    let suspended = a
        .rec
        .first_after(cut_at, |e| matches!(e, Event::Notice(Notice::Suspended)))
        .unwrap_or_else(|| panic!("a never reported Suspended\n{}", describe(&all)));
    let left = a
        .rec
        .first_after(cut_at, |e| matches!(e, Event::Role(r) if !r.is_leader()))
        .unwrap_or_else(|| panic!("a's role never left Leader\n{}", describe(&all)));
    println!(
        "black hole at 0 ms: a Suspended at {} ms, a's role {:?} at {} ms, b Elected at {} ms, healed at {} ms",
        ms(suspended.at - cut_at),
        left.event,
        ms(left.at - cut_at),
        ms(elected_at - cut_at),
        ms(heal_at - cut_at)
    );
    assert_eq!(
        left.event,
        Event::Role(Role::Suspended(before.token)),
        "under the Standard policy a suspended leader's role is Suspended\n{}",
        describe(&all)
    );
    assert!(
        suspended.at < elected_at,
        "a reported Suspended {} ms after b was elected\n{}",
        ms(suspended.at - elected_at),
        describe(&all)
    );
    assert!(
        left.at < elected_at,
        "a still had the Leader role {} ms after b was elected\n{}",
        ms(left.at - elected_at),
        describe(&all)
    );
    assert!(b_token > before.token);
    assert!(c.rec.elections().is_empty(), "{}", describe(&all));

    // Healed: a learns its session is gone, joins again with a new node,
    // behind c; nothing of its old session is left.
    wait_for(
        "a to rejoin with a new node",
        SETTLE,
        || a.node().filter(|n| *n != a_node),
        || describe(&all),
    )
    .await;
    let after = wait_settled(&all, &hosts, path, SETTLE).await;
    assert_eq!(after.leader, 1, "b leads\n{}", describe(&all));
    assert_eq!(after.queue.last(), a.node().as_ref(), "a is at the back");
    assert!(!after.queue.contains(&a_node));
    let demotions = a.rec.demotions();
    assert!(
        matches!(
            demotions.first(),
            Some(DemotionReason::Lost | DemotionReason::Expired)
        ),
        "a was demoted for losing its session: {demotions:?}"
    );
    assert_tokens_grow(&all);
    assert_terms_disjoint(&all);
    close_all(&all).await;
    assert!(children(&hosts, path).await.is_empty());
}

/// Under the SessionAware policy the leader keeps leading while suspended,
/// but demotes itself (`Lost`) at nine tenths of the session timeout after
/// the last answer: still before the server can expire the session, hence
/// before anyone else is elected.
async fn blackholed_session_aware_leader_demotes_itself_before_anyone_else_is_elected(
    client: Client,
) {
    let path = "/e2e/blackhole-aware/leader";
    let (server, proxy, [a, b, c], before) =
        leader_behind_a_proxy(client, path, ConnectionPolicy::SessionAware).await;
    let hosts = server.connect_string();
    let all = [&a, &b, &c];

    let cut_at = Instant::now();
    proxy.blackhole();
    let (elected_at, _) = wait_for(
        "b to be elected after the server expired a's session",
        SESSION * 3 + SETTLE,
        || b.rec.elections().first().copied(),
        || describe(&all),
    )
    .await;
    proxy.heal();
    let suspended = a
        .rec
        .first_after(cut_at, |e| matches!(e, Event::Notice(Notice::Suspended)))
        .unwrap_or_else(|| panic!("a never reported Suspended\n{}", describe(&all)));
    let demoted = a
        .rec
        .first_after(cut_at, |e| {
            matches!(e, Event::Notice(Notice::Demoted { .. }))
        })
        .unwrap_or_else(|| panic!("a was never demoted\n{}", describe(&all)));
    println!(
        "black hole at 0 ms: a Suspended at {} ms, {:?} at {} ms, b Elected at {} ms",
        ms(suspended.at - cut_at),
        demoted.event,
        ms(demoted.at - cut_at),
        ms(elected_at - cut_at)
    );
    assert_eq!(
        demoted.event,
        Event::Notice(Notice::Demoted {
            reason: DemotionReason::Lost
        })
    );
    assert!(
        suspended.at < demoted.at && demoted.at < elected_at,
        "a demoted itself {} ms after b was elected\n{}",
        ms(demoted.at.saturating_duration_since(elected_at)),
        describe(&all)
    );
    // Leading while suspended, as the policy says: the role stayed Leader
    // until the demotion.
    let left = a
        .rec
        .first_after(cut_at, |e| matches!(e, Event::Role(r) if !r.is_leader()))
        .expect("a's role left Leader");
    assert!(left.at >= suspended.at, "{}", describe(&all));
    assert_ne!(left.event, Event::Role(Role::Suspended(before.token)));
    assert!(left.at < elected_at, "{}", describe(&all));

    let a_node = before.queue[0].clone();
    wait_for(
        "a to rejoin with a new node",
        SETTLE,
        || a.node().filter(|n| *n != a_node),
        || describe(&all),
    )
    .await;
    let after = wait_settled(&all, &hosts, path, SETTLE).await;
    assert_eq!(after.leader, 1, "b leads\n{}", describe(&all));
    assert_tokens_grow(&all);
    assert_terms_disjoint(&all);
    close_all(&all).await;
}

// ----- 3. a create whose reply is lost -------------------------------------------

/// A transport that loses the reply of its first ephemeral-sequential
/// create: it arms the proxy's `cut_after_next_request` right before sending
/// it, so the server applies the create, the reply is swallowed, and the
/// connection is reset (the client sees `ConnectionLoss` and reconnects to
/// the same session).
///
/// The core sends its liveness probe and its create at the same time, and
/// the proxy cuts after whichever request comes next; so the create is sent
/// alone: it waits until no other request is in flight, and holds the
/// others back until its answer. Only the timing of the fault is arranged
/// here; every request is performed by the real transport.
struct LoseCreateReply {
    inner: Box<dyn Transport>,
    proxy: Arc<Proxy>,
    armed: AtomicBool,
    alone: tokio::sync::RwLock<()>,
    outcome: Mutex<Option<(String, Result<Reply, ZkCode>)>>,
}

impl LoseCreateReply {
    fn new(inner: Box<dyn Transport>, proxy: Arc<Proxy>) -> Self {
        Self {
            inner,
            proxy,
            armed: AtomicBool::new(true),
            alone: tokio::sync::RwLock::new(()),
            outcome: Mutex::new(None),
        }
    }

    /// The path of the create whose reply was lost, and what the client said.
    fn outcome(&self) -> Option<(String, Result<Reply, ZkCode>)> {
        self.outcome
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[async_trait]
impl Transport for LoseCreateReply {
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode> {
        let target = matches!(
            &request,
            Request::Create {
                mode: CreateMode::EphemeralSequential,
                ..
            }
        );
        if target && self.armed.load(Ordering::SeqCst) {
            let _alone = self.alone.write().await;
            if self.armed.swap(false, Ordering::SeqCst) {
                let path = request.path().to_owned();
                self.proxy.cut_after_next_request();
                let result = self.inner.perform(request).await;
                *self.outcome.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some((path, result.clone()));
                return result;
            }
            return self.inner.perform(request).await;
        }
        let _shared = self.alone.read().await;
        self.inner.perform(request).await
    }

    async fn close(&self) {
        self.inner.close().await;
    }
}

async fn lost_create_reply_leaves_no_orphan_node(client: Client) {
    let server = crate::harness::start_server();
    let proxy = Arc::new(Proxy::start(server.addr()).expect("start a proxy"));
    let hosts = server.connect_string();
    let path = "/e2e/lost-reply/leader";
    // The election path exists beforehand, so the create whose reply is lost
    // is applied (into a missing parent it would only fail with NoNode).
    let zk = raw(&hosts, None).await;
    zk.ensure_path(path)
        .await
        .expect("create the election path");
    let _ = zk.close().await;

    let (t, events) = transport(client, &proxy.connect_string(), None).await;
    let lossy = Arc::new(LoseCreateReply::new(t, Arc::clone(&proxy)));
    let v = Cand::join(
        "v",
        Election::builder(Arc::clone(&lossy), events)
            .path(path)
            .id("v"),
    )
    .await;
    let (create_path, result) = lossy.outcome().expect("the create went through");
    assert_eq!(
        result,
        Err(ZkCode::ConnectionLoss),
        "the create's reply was lost"
    );
    assert_eq!(proxy.cut_count(), 1, "the proxy cut the connection once");
    assert!(
        v.election.metrics().recovered_creates >= 1,
        "the node was found again by its protected name\n{}",
        v.describe()
    );
    // The node v has is the one its lost create made (same protected prefix).
    let protected = create_path.rsplit('/').next().expect("a name");
    let v_node = v.node().expect("v's node");
    assert!(
        v_node.starts_with(protected),
        "{v_node} was made by the create of {protected}"
    );

    let others = join_each(client, &hosts, path, &["b", "c"]).await;
    let all = [&v, &others[0], &others[1]];
    let s = wait_settled(&all, &hosts, path, SETTLE).await;
    assert_eq!(
        s.leader,
        0,
        "v's recovered node is the oldest and leads\n{}",
        describe(&all)
    );
    let listing = children(&hosts, path).await;
    assert_eq!(
        listing.iter().filter(|n| n.starts_with(protected)).count(),
        1,
        "exactly one node of v's session: {listing:?}"
    );
    let owners: std::collections::BTreeSet<i64> = {
        let mut owners = std::collections::BTreeSet::new();
        for name in &listing {
            let st = stat(&hosts, &format!("{path}/{name}"))
                .await
                .expect("a listed node exists");
            owners.insert(st.ephemeral_owner);
        }
        owners
    };
    assert_eq!(owners.len(), 3, "one node per session: {listing:?}");

    // No ghost at the head of the queue: when v goes, b leads.
    v.close().await;
    let rest = [&others[0], &others[1]];
    let after = wait_settled(&rest, &hosts, path, SETTLE).await;
    assert_eq!(after.leader, 0, "b leads after v\n{}", describe(&all));
    assert_eq!(after.queue, s.queue[1..]);
    assert_tokens_grow(&all);
    assert_terms_disjoint(&all);
    close_all(&all).await;
}

// ----- 4. the server paused -----------------------------------------------------

/// The watches a server holds (`wchp`): `(path, session ids in lowercase hex)`.
fn watches_by_path(server: &ZkServer) -> Vec<(String, Vec<String>)> {
    let text = server.four_letter_word("wchp").unwrap_or_default();
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if line.starts_with('/') {
            out.push((line.trim().to_owned(), Vec::new()));
        } else if let (Some(last), session) = (out.last_mut(), line.trim()) {
            if session.starts_with("0x") {
                last.1.push(session.to_lowercase());
            }
        }
    }
    out
}

/// Whether `session` watches `path` on the server.
fn watched_by(watches: &[(String, Vec<String>)], path: &str, session: i64) -> bool {
    let id = format!("0x{session:x}");
    watches
        .iter()
        .any(|(p, sessions)| p == path && sessions.contains(&id))
}

/// The session owning `node`.
async fn owner(hosts: &str, path: &str, node: &str) -> i64 {
    stat(hosts, &format!("{path}/{node}"))
        .await
        .unwrap_or_else(|| panic!("{node} exists"))
        .ephemeral_owner
}

/// Paused for less than the session timeout, with every connection reset
/// during the pause so that each client reconnects to its (still live)
/// session, and the server drops the watches of the old connections:
/// zookeeper-async does not set them again; the core re-lists and re-arms
/// them after every reconnect. Then the leader closes, and its successor is
/// elected on the re-armed predecessor watch.
///
/// A pause alone would not make zookeeper-async reconnect: its idle timer
/// on a first connection is twice the session timeout, so the connection
/// outlives a short pause with its watches. The proxy's reset forces the
/// reconnect the scenario is about.
async fn pause_shorter_than_session_then_leader_closes_and_successor_is_elected(client: Client) {
    let server = crate::harness::start_server();
    let proxy = Proxy::start(server.addr()).expect("start a proxy");
    let hosts = server.connect_string();
    let path = "/e2e/pause-short/leader";
    let cands = join_each(client, &proxy.connect_string(), path, &["l", "f1", "f2"]).await;
    let all: Vec<&Cand> = cands.iter().collect();
    let (l, f1, f2) = (&cands[0], &cands[1], &cands[2]);
    let before = wait_settled(&all, &hosts, path, SETTLE).await;
    assert_eq!(before.leader, 0);
    let (l_node, f1_node) = (before.queue[0].clone(), before.queue[1].clone());
    let (l_path, f1_path) = (format!("{path}/{l_node}"), format!("{path}/{f1_node}"));
    let f1_session = owner(&hosts, path, &f1_node).await;
    let f2_session = owner(&hosts, path, &f2.node().expect("f2's node")).await;
    let predecessors_watched = |server: &ZkServer| {
        let w = watches_by_path(server);
        watched_by(&w, &l_path, f1_session) && watched_by(&w, &f1_path, f2_session)
    };
    wait_for(
        "the predecessor watches on the server",
        SETTLE,
        || predecessors_watched(&server).then_some(()),
        || format!("wchp: {:?}\n{}", watches_by_path(&server), describe(&all)),
    )
    .await;

    let pause = SESSION / 4;
    let paused_at = Instant::now();
    server.pause().expect("pause the server");
    assert_eq!(proxy.cut(), 3, "every client's connection was reset");
    tokio::time::sleep_until((paused_at + pause).into()).await;
    server.resume().expect("resume the server");
    let resumed_at = Instant::now();
    assert!(
        resumed_at - paused_at < SESSION / 2,
        "the pause lasted {} ms: the machine stalled; the scenario needs it well under the session timeout",
        ms(resumed_at - paused_at)
    );

    // Every client reconnected to its session: same nodes, new connections.
    for c in &all {
        wait_for(
            &format!("{} to resume after the reconnect", c.label),
            SETTLE,
            || {
                c.rec
                    .first_after(paused_at, |e| matches!(e, Event::Notice(Notice::Resumed)))
            },
            || describe(&all),
        )
        .await;
    }
    assert!(
        proxy.accepted_count() >= 6,
        "every client made a new connection"
    );
    let resumed = wait_settled(&all, &hosts, path, SETTLE).await;
    assert_eq!(
        resumed.queue, before.queue,
        "the sessions survived: same nodes"
    );
    assert_eq!(resumed.token, before.token);
    // The old connections' watches are gone on the server; the ones there
    // now were set again by the core on the new connections.
    wait_for(
        "the predecessor watches to be set again after the reconnect",
        SETTLE,
        || predecessors_watched(&server).then_some(()),
        || format!("wchp: {:?}\n{}", watches_by_path(&server), describe(&all)),
    )
    .await;

    l.close().await;
    let rest = [f1, f2];
    let after = wait_settled(&rest, &hosts, path, SETTLE).await;
    assert_eq!(
        after.leader,
        0,
        "f1 is elected on its predecessor watch\n{}",
        describe(&all)
    );
    assert!(after.token > before.token);
    assert_tokens_grow(&all);
    assert_terms_disjoint(&all);
    close_all(&all).await;
}

/// Paused for one and a half session timeouts: the leader's core misses two
/// probes' worth of answers and reports Suspended (its role leaving
/// Leader) before the server could have expired its session — the session
/// cannot expire earlier than a session timeout after its last contact,
/// which was before the pause. Afterwards the election carries on.
async fn pause_longer_than_session_suspends_the_leader_before_its_session_could_expire(
    client: Client,
) {
    let server = crate::harness::start_server();
    let hosts = server.connect_string();
    let path = "/e2e/pause-long/leader";
    let cands = join_each(client, &hosts, path, &["l", "f1", "f2"]).await;
    let all: Vec<&Cand> = cands.iter().collect();
    let l = &cands[0];
    let before = wait_settled(&all, &hosts, path, SETTLE).await;
    assert_eq!(before.leader, 0);

    let paused_at = Instant::now();
    server.pause().expect("pause the server");
    let suspended = wait_for(
        "the leader to report Suspended",
        SESSION * 2,
        || {
            l.rec
                .first_after(paused_at, |e| matches!(e, Event::Notice(Notice::Suspended)))
        },
        || describe(&all),
    )
    .await;
    tokio::time::sleep_until((paused_at + SESSION * 3 / 2).into()).await;
    server.resume().expect("resume the server");
    let resumed_at = Instant::now();
    let left = l
        .rec
        .first_after(paused_at, |e| matches!(e, Event::Role(r) if !r.is_leader()))
        .unwrap_or_else(|| panic!("the leader's role never left Leader\n{}", describe(&all)));
    println!(
        "paused at 0 ms: Suspended at {} ms, role {:?} at {} ms, resumed at {} ms (session {} ms)",
        ms(suspended.at - paused_at),
        left.event,
        ms(left.at - paused_at),
        ms(resumed_at - paused_at),
        ms(SESSION)
    );
    assert!(
        suspended.at < paused_at + SESSION,
        "Suspended came {} ms after the pause, at or after the session timeout",
        ms(suspended.at - paused_at)
    );
    assert_eq!(left.event, Event::Role(Role::Suspended(before.token)));
    assert!(left.at < paused_at + SESSION);
    for c in &all[1..] {
        assert!(
            c.rec
                .first_after(paused_at, |e| matches!(e, Event::Role(r) if r.is_leader()))
                .is_none_or(|r| r.at > resumed_at),
            "nobody is elected while the server is paused\n{}",
            describe(&all)
        );
    }

    // Whether the server expired the leader's session on resuming is a race
    // inside the server; either way the election carries on.
    let after = wait_settled(&all, &hosts, path, SETTLE).await;
    println!(
        "after the pause: {} leads with token {} ({})",
        all[after.leader].label,
        after.token,
        if after.queue.contains(&before.queue[0]) {
            "the leader's session survived"
        } else {
            "the leader's session expired"
        }
    );
    assert_tokens_grow(&all);
    assert_terms_disjoint(&all);
    close_all(&all).await;
}

// ----- 5. restarts and killed ensemble members -----------------------------------

/// The fencing token of a leader is its node's czxid.
async fn assert_token_is_czxid(hosts: &str, path: &str, s: &Settled) {
    let st = stat(hosts, &format!("{path}/{}", s.queue[0]))
        .await
        .expect("the leader's node exists");
    assert_eq!(s.token.0, st.czxid, "the token is the leader node's czxid");
}

async fn standalone_restart_keeps_one_leader_and_tokens_only_grow(client: Client) {
    let server = crate::harness::start_server();
    let hosts = server.connect_string();
    let path = "/e2e/restart/leader";
    let cands = join_each(client, &hosts, path, &["a", "b", "c"]).await;
    let all: Vec<&Cand> = cands.iter().collect();
    let before = wait_settled(&all, &hosts, path, SETTLE).await;
    assert_token_is_czxid(&hosts, path, &before).await;

    let restart_at = Instant::now();
    server.restart().expect("restart the server");
    println!("restarted in {} ms", ms(restart_at.elapsed()));
    let after = wait_settled(&all, &hosts, path, SETTLE).await;
    assert!(after.token >= before.token, "{before:?} then {after:?}");
    assert_token_is_czxid(&hosts, path, &after).await;
    println!(
        "before: {} with {}; after the restart: {} with {}",
        all[before.leader].label, before.token, all[after.leader].label, after.token
    );

    // And it goes on: the leader closes, the next one leads with a higher token.
    let leader = all[after.leader];
    leader.close().await;
    let rest: Vec<&Cand> = all
        .iter()
        .copied()
        .filter(|c| c.label != leader.label)
        .collect();
    let last = wait_settled(&rest, &hosts, path, SETTLE).await;
    assert!(last.token > after.token);
    assert_eq!(rest[last.leader].node().as_ref(), after.queue.get(1));
    assert_token_is_czxid(&hosts, path, &last).await;
    let tokens = assert_tokens_grow(&all);
    println!("elections: {tokens:?}");
    assert_terms_disjoint(&all);
    close_all(&all).await;
}

async fn ensemble_follower_then_leader_killed_keeps_one_leader_and_tokens_only_grow(
    client: Client,
) {
    let ensemble = crate::harness::start_ensemble();
    let hosts = ensemble.connect_string();
    let path = "/e2e/ensemble/leader";
    let n = ensemble.len();
    // Candidate i lists server i first. zookeeper-async tries hosts in that
    // order, so every server has a client to lose; zookeeper-client shuffles
    // them, so who is where is read off the servers (`cons`) below.
    let mut cands = Vec::new();
    for i in 0..n {
        let rotated: Vec<String> = (0..n)
            .map(|k| ensemble.servers()[(i + k) % n].connect_string())
            .collect();
        let (t, events) = transport(client, &rotated.join(","), None).await;
        let id = format!("c{i}");
        cands.push(Cand::join(&id, Election::builder(t, events).path(path).id(&*id)).await);
    }
    let all: Vec<&Cand> = cands.iter().collect();
    let first = wait_settled(&all, &hosts, path, SETTLE).await;
    assert_token_is_czxid(&hosts, path, &first).await;
    let mut sessions = Vec::new();
    for c in &all {
        sessions.push(owner(&hosts, path, &c.node().expect("a node")).await);
    }

    // A follower dies (the one serving most candidates): its clients move to
    // another server.
    let zk_leader = ensemble.leader_index().expect("an ensemble leader");
    let on = servers_of(&ensemble, &sessions);
    let follower = (0..n)
        .filter(|&s| s != zk_leader)
        .max_by_key(|&s| on.iter().filter(|&&at| at == Some(s)).count())
        .expect("a follower");
    let moved: Vec<&Cand> = (0..n)
        .filter(|&i| on[i] == Some(follower))
        .map(|i| all[i])
        .collect();
    println!("candidates on servers {on:?}; killing follower {follower}");
    let killed_at = Instant::now();
    ensemble.server(follower).expect("node").kill();
    await_resumed(&moved, killed_at, "on the killed follower", &all).await;
    let second = wait_settled(&all, &hosts, path, SETTLE).await;
    assert!(second.token >= first.token);
    println!(
        "follower {follower} killed: {} leads with {}",
        all[second.leader].label, second.token
    );

    // Back to three, then the ensemble's own leader dies.
    ensemble
        .server(follower)
        .expect("node")
        .restart()
        .expect("restart the follower");
    ensemble
        .wait_for_leader(Duration::from_secs(30))
        .expect("a full ensemble");
    let zk_leader = ensemble.leader_index().expect("an ensemble leader");
    let on = servers_of(&ensemble, &sessions);
    let moved: Vec<&Cand> = (0..n)
        .filter(|&i| on[i] == Some(zk_leader))
        .map(|i| all[i])
        .collect();
    println!("candidates on servers {on:?}; killing the ensemble's leader {zk_leader}");
    let killed_at = Instant::now();
    ensemble.server(zk_leader).expect("node").kill();
    let new_zk_leader = ensemble
        .wait_for_leader(Duration::from_secs(30))
        .expect("a new ensemble leader");
    println!(
        "ensemble leader {zk_leader} killed; {new_zk_leader} leads the ensemble after {} ms",
        ms(killed_at.elapsed())
    );
    await_resumed(&moved, killed_at, "on the killed ensemble leader", &all).await;
    let third = wait_settled(&all, &hosts, path, SETTLE).await;
    assert!(third.token >= second.token);
    assert_token_is_czxid(&hosts, path, &third).await;

    // The election goes on: the leader closes, the next one leads.
    let leader = all[third.leader];
    leader.close().await;
    let rest: Vec<&Cand> = all
        .iter()
        .copied()
        .filter(|c| c.label != leader.label)
        .collect();
    let last = wait_settled(&rest, &hosts, path, SETTLE).await;
    assert!(last.token > third.token);
    assert_eq!(rest[last.leader].node().as_ref(), third.queue.get(1));
    let tokens = assert_tokens_grow(&all);
    println!("elections: {tokens:?}");
    assert_terms_disjoint(&all);
    close_all(&all).await;
}

/// For each session, the index of the ensemble server it is connected to
/// (from each live server's `cons`), if any.
fn servers_of(ensemble: &ZkEnsemble, sessions: &[i64]) -> Vec<Option<usize>> {
    let mut on = vec![None; sessions.len()];
    for (index, server) in ensemble.servers().iter().enumerate() {
        let Ok(cons) = server.four_letter_word("cons") else {
            continue;
        };
        for (i, session) in sessions.iter().enumerate() {
            if cons.contains(&format!("sid=0x{session:x},")) {
                on[i] = Some(index);
            }
        }
    }
    on
}

/// Waits for each of `moved` to report `Resumed` after `since`.
async fn await_resumed(moved: &[&Cand], since: Instant, where_: &str, all: &[&Cand]) {
    for c in moved {
        wait_for(
            &format!("{}, {where_}, to resume elsewhere", c.label),
            SETTLE,
            || {
                c.rec
                    .first_after(since, |e| matches!(e, Event::Notice(Notice::Resumed)))
            },
            || describe(all),
        )
        .await;
    }
}

// ----- 6. digest credentials and creator-only ACLs --------------------------------

const CREDENTIALS: &str = "svc:secret";

/// Two candidates with credentials join a fresh path with `acl`; returns
/// them once settled.
async fn secured_election(
    client: Client,
    hosts: &str,
    path: &str,
    acl: Acl,
) -> (Cand, Cand, Settled) {
    let mut cands = Vec::new();
    for id in ["a", "b"] {
        let (t, events) = transport(client, hosts, Some(CREDENTIALS)).await;
        cands.push(
            Cand::join(
                id,
                Election::builder(t, events)
                    .path(path)
                    .id(id)
                    .acl(acl.clone()),
            )
            .await,
        );
    }
    let b = cands.pop().expect("b");
    let a = cands.pop().expect("a");
    // Listed with credentials: under CreatorAll nobody else may list.
    let s = wait_settled_with(
        &[&a, &b],
        || async {
            let zk = raw(hosts, Some(CREDENTIALS)).await;
            let mut names = crate::harness::retry(|| zk.get_children(path, false)).await;
            let _ = zk.close().await;
            names.sort();
            names
        },
        SETTLE,
    )
    .await;
    (a, b, s)
}

/// The error of an operation that must be refused.
fn refused<T: std::fmt::Debug>(what: &str, result: Result<T, ZkError>) -> ZkError {
    match result {
        Err(e) => e,
        Ok(v) => panic!("{what} was allowed ({v:?}); it must be refused"),
    }
}

async fn digest_creator_acl_keeps_clients_without_the_credentials_out(client: Client) {
    let server = crate::harness::start_server();
    let hosts = server.connect_string();
    let parent = "/e2e/secured";
    let path = "/e2e/secured/leader";
    let (a, b, s) = secured_election(client, &hosts, path, Acl::CreatorAllWorldRead).await;
    let all = [&a, &b];

    let authed = raw(&hosts, Some(CREDENTIALS)).await;
    let (acl, _) = authed
        .get_acl(&format!("{path}/{}", s.queue[0]))
        .await
        .expect("read the ACL");
    println!("the leader's node ACL: {acl:?}");
    assert!(
        acl.iter()
            .any(|a| a.scheme == "digest" && a.id.starts_with("svc:")),
        "{acl:?}"
    );
    assert!(
        acl.iter().any(|a| a.scheme == "world"
            && a.id == "anyone"
            && a.perms == zookeeper_async::Permission::READ),
        "world may read, only: {acl:?}"
    );
    for p in [parent, path] {
        let (acl, _) = authed.get_acl(p).await.expect("read the ACL");
        assert!(
            acl.iter()
                .any(|a| a.scheme == "digest" && a.id.starts_with("svc:")),
            "zkelect created {p} with the election's ACL: {acl:?}"
        );
    }

    // Without credentials, and with wrong ones: may read, may change nothing.
    let anonymous = raw(&hosts, None).await;
    let impostor = raw(&hosts, Some("svc:wrong")).await;
    for (who, zk) in [("anonymous", &anonymous), ("wrong credentials", &impostor)] {
        let listed = zk.get_children(path, false).await.expect("world may list");
        assert_eq!(listed.len(), 2, "{who}: {listed:?}");
        for node in &s.queue {
            let node_path = format!("{path}/{node}");
            zk.get_data(&node_path, false)
                .await
                .expect("world may read");
            let e = refused(
                &format!("{who}: delete {node_path}"),
                zk.delete(&node_path, None).await,
            );
            assert_eq!(e, ZkError::NoAuth, "{who}: delete {node_path}");
            let e = refused(
                &format!("{who}: set_data {node_path}"),
                zk.set_data(&node_path, b"mine".to_vec(), None).await,
            );
            assert_eq!(e, ZkError::NoAuth, "{who}: set_data {node_path}");
        }
        let e = refused(
            &format!("{who}: create in {path}"),
            zk.create(
                &format!("{path}/n_"),
                Vec::new(),
                ZkAcl::open_unsafe().clone(),
                ZkMode::EphemeralSequential,
            )
            .await,
        );
        assert_eq!(e, ZkError::NoAuth, "{who}: create a node in the queue");
        let e = refused(
            &format!("{who}: delete {path}"),
            zk.delete(path, None).await,
        );
        assert_eq!(e, ZkError::NoAuth, "{who}: delete the election path");
    }
    for zk in [anonymous, impostor, authed] {
        let _ = zk.close().await;
    }

    // Untouched: the same leader, the same two nodes.
    let after = wait_settled(&all, &hosts, path, SETTLE).await;
    assert_eq!((after.leader, after.token), (s.leader, s.token));
    assert_eq!(after.queue, s.queue);
    close_all(&all).await;
}

async fn digest_creator_all_acl_hides_the_election_from_clients_without_the_credentials(
    client: Client,
) {
    let server = crate::harness::start_server();
    let hosts = server.connect_string();
    let path = "/e2e/private/leader";
    let (a, b, s) = secured_election(client, &hosts, path, Acl::CreatorAll).await;

    let anonymous = raw(&hosts, None).await;
    let e = refused("list", anonymous.get_children(path, false).await);
    assert_eq!(e, ZkError::NoAuth);
    let node_path = format!("{path}/{}", s.queue[0]);
    let e = refused("read", anonymous.get_data(&node_path, false).await);
    assert_eq!(e, ZkError::NoAuth);
    let e = refused("delete", anonymous.delete(&node_path, None).await);
    assert_eq!(e, ZkError::NoAuth);
    let e = refused(
        "set_data",
        anonymous.set_data(&node_path, b"x".to_vec(), None).await,
    );
    assert_eq!(e, ZkError::NoAuth);
    let _ = anonymous.close().await;
    assert!(a.is_leader() || b.is_leader());
    close_all(&[&a, &b]).await;
}

/// A candidate whose digest credentials are wrong (or missing) cannot join
/// an election protected by creator-only ACLs: `join` fails at once with a
/// fatal `NoAuth` (`InvalidAcl` without credentials; the server accepts any
/// digest, so it is the create that
/// is refused), and leaves nothing behind.
async fn wrong_credentials_fail_to_join_quickly_with_no_auth(client: Client) {
    let server = crate::harness::start_server();
    let hosts = server.connect_string();
    let path = "/e2e/locked/leader";
    let (a, b, s) = secured_election(client, &hosts, path, Acl::CreatorAll).await;

    // Wrong credentials authenticate as another identity, which the ACL
    // refuses (NoAuth); no credentials at all make a creator-only ACL
    // meaningless, which the server refuses as InvalidAcl.
    for (who, digest, code) in [
        ("wrong credentials", Some("svc:wrong"), ZkCode::NoAuth),
        ("no credentials", None, ZkCode::InvalidAcl),
    ] {
        let started = Instant::now();
        let (t, events) = transport(client, &hosts, digest).await;
        let joined = tokio::time::timeout(
            Duration::from_secs(20),
            Election::builder(t, events)
                .path(path)
                .id("intruder")
                .acl(Acl::CreatorAll)
                .join(),
        )
        .await
        .unwrap_or_else(|_| panic!("{who}: join hung for 20 s"));
        let took = started.elapsed();
        let err = match joined {
            Ok(e) => panic!("{who}: joined a protected election: {:?}", e.node()),
            Err(err) => err,
        };
        println!("{who}: join failed after {} ms: {err}", ms(took));
        assert!(
            matches!(
                &err,
                ElectionError::Fatal(CandidateError::Refused { code: c, .. }) if *c == code
            ),
            "{who}: {err:?}"
        );
        assert!(
            err.to_string().contains(&format!("{code:?}")),
            "{who}: the message names the server's refusal: {err}"
        );
        assert!(
            took < SESSION,
            "{who}: failing took {} ms, not at once",
            ms(took)
        );
    }

    // The election is untouched.
    let all = [&a, &b];
    let zk = raw(&hosts, Some(CREDENTIALS)).await;
    let mut listing = zk.get_children(path, false).await.expect("list");
    listing.sort();
    let _ = zk.close().await;
    assert_eq!(
        crate::harness::queue(&listing),
        s.queue,
        "nothing left behind"
    );
    close_all(&all).await;
}

/// Credentials the server rejects outright (an unknown scheme) fail the
/// connection with `SessionError::Auth`, quickly.
async fn unknown_auth_scheme_fails_to_connect_with_an_auth_error(client: Client) {
    let server = crate::harness::start_server();
    let started = Instant::now();
    let connected = tokio::time::timeout(
        Duration::from_secs(20),
        crate::harness::connect(
            client,
            &server.connect_string(),
            Some(Credentials::Scheme("bogus", "svc:secret")),
        ),
    )
    .await
    .expect("connect hung for 20 s");
    let took = started.elapsed();
    let Err(err) = connected else {
        panic!("connected with credentials of an unknown scheme")
    };
    println!("failed after {} ms: {err}", ms(took));
    assert!(matches!(err, SessionError::Auth(_)), "{err:?}");
    assert!(took < SESSION, "failing took {} ms", ms(took));
}

/// A leader whose credentials the server refuses at a reconnect (the
/// server restarted without its digest provider, so the credentials put
/// back on the new connection are answered `AuthFailed`) stops with
/// `SessionError::Auth`, and its session closes itself: its node goes, and
/// the other candidate (no credentials) leads, because the session was
/// closed, not because it expired. The leader's session is the longest the
/// server allows, and the server's log must not say it expired.
async fn refused_credentials_at_a_reconnect_close_the_leaders_session(client: Client) {
    let server = crate::harness::start_server();
    let hosts = server.connect_string();
    let path = "/e2e/refused/leader";
    let (t, events) = client
        .settings(&hosts, crate::harness::MAX_SESSION, Some(CREDENTIALS))
        .connect()
        .await
        .unwrap_or_else(|e| panic!("{client:?}: connect with credentials: {e}"));
    let a = Cand::join("a", Election::builder(t, events).path(path).id("a")).await;
    wait_settled(&[&a], &hosts, path, SETTLE).await;
    let (t, events) = transport(client, &hosts, None).await;
    let b = Cand::join("b", Election::builder(t, events).path(path).id("b")).await;
    let before = wait_settled(&[&a, &b], &hosts, path, SETTLE).await;
    assert_eq!(before.leader, 0, "a joined first");
    let own = format!("{path}/{}", before.queue[0]);
    let owner = stat(&hosts, &own)
        .await
        .map(|s| s.ephemeral_owner)
        .expect("the leader's node");

    // Unknown keys of zoo.cfg become `zookeeper.*` system properties.
    let cfg = server.dir().join("zoo.cfg");
    let mut text = std::fs::read_to_string(&cfg).expect("read zoo.cfg");
    text.push_str("\nDigestAuthenticationProvider.enabled=false\n");
    std::fs::write(&cfg, text).expect("write zoo.cfg");
    server.restart().expect("restart the server");

    wait_for(
        "a to stop on the refusal",
        SETTLE,
        || (a.role() == Role::Failed).then_some(()),
        || describe(&[&a, &b]),
    )
    .await;
    let err = a.election.wait_leader().await.unwrap_err();
    assert!(
        matches!(err, ElectionError::Session(SessionError::Auth(_))),
        "{err:?}"
    );
    let after = wait_settled(&[&b], &hosts, path, SETTLE).await;
    assert_eq!(after.queue, before.queue[1..], "a's node went");
    let expired = format!("Expiring session 0x{owner:x}");
    let log = std::fs::read_to_string(server.log_path()).unwrap_or_default();
    assert!(
        !log.contains(&expired),
        "a's session expired rather than closed:\n{}",
        server.log_tail(40)
    );
    close_all(&[&a, &b]).await;
}

// ----- every scenario on every client ---------------------------------------------

/// Every real-server scenario, on `$client`.
macro_rules! every_scenario_on {
    ($module:ident, $client:expr) => {
        scenarios_on!(
            $module,
            $client,
            [
                five_candidates_elect_one_leader_and_the_next_in_sequence_succeeds,
                blackholed_leader_is_suspended_before_anyone_else_is_elected_then_rejoins,
                blackholed_session_aware_leader_demotes_itself_before_anyone_else_is_elected,
                lost_create_reply_leaves_no_orphan_node,
                pause_shorter_than_session_then_leader_closes_and_successor_is_elected,
                pause_longer_than_session_suspends_the_leader_before_its_session_could_expire,
                standalone_restart_keeps_one_leader_and_tokens_only_grow,
                ensemble_follower_then_leader_killed_keeps_one_leader_and_tokens_only_grow,
                digest_creator_acl_keeps_clients_without_the_credentials_out,
                digest_creator_all_acl_hides_the_election_from_clients_without_the_credentials,
                wrong_credentials_fail_to_join_quickly_with_no_auth,
                unknown_auth_scheme_fails_to_connect_with_an_auth_error,
                refused_credentials_at_a_reconnect_close_the_leaders_session,
            ]
        );
    };
}

every_scenario_on!(on_zookeeper_async, super::Client::ZookeeperAsync);
every_scenario_on!(on_zookeeper_client, super::Client::ZookeeperClient);
