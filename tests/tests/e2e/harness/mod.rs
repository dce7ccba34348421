//! The harness of the election tests against real servers (`election.rs`):
//! candidates that record every notice and role change on one monotonic
//! clock, a raw `zookeeper-async` client to look at the election path from
//! outside, waits that poll a condition until a generous deadline, and the
//! invariants every scenario checks (one leader, the lowest node leads, one
//! node per live candidate, fencing tokens that only grow, leadership terms
//! that never overlap).
//!
//! # Timestamps
//!
//! Every [`Record`] is stamped with [`std::time::Instant::now`] (the
//! process's `CLOCK_MONOTONIC`) by the candidate's recorder task when it
//! receives the notice or the role change, right after the driver published
//! it. The tests stamp their faults (black hole, pause) with the same clock,
//! so "A was suspended before B was elected" compares two readings of one
//! clock. The recorder's own delay can only make an event look *later* than
//! it was published; the scenarios' orderings hold with margins of a third
//! of the session timeout or more.

/// One module of tests per client: each runs a scenario of the including
/// file with that client (`scenarios_on!(on_zookeeper_async, Client::ZookeeperAsync, [a, b])`).
macro_rules! scenarios_on {
    ($module:ident, $client:expr, [$($scenario:ident),* $(,)?]) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario($client).await;
                }
            )*
        }
    };
}

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex, Once, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::broadcast::{self, error::RecvError};
use zkelect::zk_client::ZkClientOptions;
use zkelect::{
    Connect, DemotionReason, Election, ElectionBuilder, EventStream, FencingToken, Notice, Role,
    SessionError, Transport, ZkAsyncOptions,
};
use zkelect_core::name;
use zkelect_tests::transports::{CONNECT_TIMEOUT, RECONNECT_DELAY};
use zkelect_tests::{ZkEnsemble, ZkServer};
use zookeeper_async::{Stat, WatchedEvent, ZkError, ZooKeeper};

/// The session timeout every candidate asks for. zookeeper-async reconnects
/// in a storm below 1.5 s; 4 s leaves the core's probe (every 4/3 s) and
/// suspension (after 8/3 s without an answer) clear of scheduling noise on
/// two cores.
pub(crate) const SESSION: Duration = Duration::from_secs(4);
/// The fixture's servers allow sessions up to this long (their default,
/// 20 ticks of 200 ms, is exactly [`SESSION`]; this leaves room).
pub(crate) const MAX_SESSION: Duration = Duration::from_secs(10);
/// How long an election may take to settle after a fault has ended:
/// several session timeouts, so a slow machine is never mistaken for a bug.
pub(crate) const SETTLE: Duration = Duration::from_secs(30);
/// The label of the election nodes' names (the core's default prefix).
pub(crate) const PREFIX: &str = "n_";

/// Traces from the crates under test when `RUST_LOG` is set
/// (e.g. `RUST_LOG=zkelect=debug`), printed with the failing test's output.
pub(crate) fn init_tracing() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("RUST_LOG").is_some() {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
                .with_test_writer()
                .try_init();
        }
    });
}

/// A standalone server that accepts [`SESSION`].
pub(crate) fn start_server() -> ZkServer {
    init_tracing();
    ZkServer::builder()
        .max_session_timeout(MAX_SESSION)
        .start()
        .unwrap_or_else(|e| panic!("cannot start ZooKeeper: {e}"))
}

/// A three-node ensemble that accepts [`SESSION`].
pub(crate) fn start_ensemble() -> ZkEnsemble {
    init_tracing();
    ZkEnsemble::builder()
        .max_session_timeout(MAX_SESSION)
        .start()
        .unwrap_or_else(|e| panic!("cannot start a ZooKeeper ensemble: {e}"))
}

/// The real ZooKeeper clients a transport can be built on: every
/// real-server scenario runs once on each (`election.rs`'s
/// `every_scenario_on!`).
pub(crate) use zkelect_tests::TransportKind as Client;

/// Credentials a session adds: digest `user:password`, or any scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Credentials<'a> {
    /// `digest` with `user:password`.
    Digest(&'a str),
    /// `(scheme, auth)` as given.
    Scheme(&'a str, &'a str),
}

/// Connects a transport on `client` (its own session, [`SESSION`], the
/// fixture's connect timeout and reconnect delay) with `credentials`.
pub(crate) async fn connect(
    client: Client,
    hosts: &str,
    credentials: Option<Credentials<'_>>,
) -> Result<(Box<dyn Transport>, EventStream), SessionError> {
    let settings: Box<dyn Connect> = match (client, credentials) {
        (_, None) => client.settings(hosts, SESSION, None),
        (_, Some(Credentials::Digest(digest))) => client.settings(hosts, SESSION, Some(digest)),
        (Client::ZookeeperAsync, Some(Credentials::Scheme(scheme, auth))) => Box::new(
            ZkAsyncOptions::new(hosts)
                .session_timeout(SESSION)
                .connect_timeout(CONNECT_TIMEOUT)
                .reconnect_delay(RECONNECT_DELAY)
                .auth(scheme, auth),
        ),
        (Client::ZookeeperClient, Some(Credentials::Scheme(scheme, auth))) => Box::new(
            ZkClientOptions::new(hosts)
                .session_timeout(SESSION)
                .connect_timeout(CONNECT_TIMEOUT)
                .reconnect_delay(RECONNECT_DELAY)
                .auth(scheme, auth.as_bytes().to_vec()),
        ),
    };
    let (t, events) = settings.connect().await?;
    Ok((Box::new(t), events))
}

/// Connects a transport on `client` (its own session), with digest
/// credentials if given; panics if it cannot.
pub(crate) async fn transport(
    client: Client,
    hosts: &str,
    digest: Option<&str>,
) -> (Box<dyn Transport>, EventStream) {
    connect(client, hosts, digest.map(Credentials::Digest))
        .await
        .unwrap_or_else(|e| panic!("{client:?}: cannot connect a transport to {hosts}: {e}"))
}

// ----- recording ---------------------------------------------------------------

/// What a candidate published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// A notice (`Elected`, `Suspended`, `Demoted`, …).
    Notice(Notice),
    /// A new value of the role channel (the first record is its value when
    /// the recorder subscribed).
    Role(Role),
    /// The recorder fell this many notices behind and lost them.
    Lagged(u64),
    /// The test called `close`: from here on the application no longer acts
    /// as leader, whenever the recorder gets to see the role change (the
    /// driver publishes it before it deletes the node, but two recorder
    /// tasks may see two candidates' changes in either order when they are
    /// microseconds apart, as over the memory transport).
    Closing,
}

/// One published event and when the recorder received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) at: Instant,
    pub(crate) event: Event,
}

/// Everything one candidate published since its recorder started.
#[derive(Debug, Clone, Default)]
pub(crate) struct Recorder {
    log: Arc<Mutex<Vec<Record>>>,
}

impl Recorder {
    /// Records `notices` (subscribed before the election started, so none
    /// is missed) and `election`'s role until the election's outputs are
    /// gone.
    pub(crate) fn start(election: &Election, mut notices: broadcast::Receiver<Notice>) -> Recorder {
        let recorder = Recorder::default();
        let mut roles = election.changes();
        let push = {
            let recorder = recorder.clone();
            move |event: Event| recorder.mark(event)
        };
        push(Event::Role(*roles.borrow_and_update()));
        tokio::spawn(async move {
            let (mut roles_open, mut notices_open) = (true, true);
            while roles_open || notices_open {
                tokio::select! {
                    changed = roles.changed(), if roles_open => match changed {
                        Ok(()) => push(Event::Role(*roles.borrow_and_update())),
                        Err(_) => roles_open = false,
                    },
                    notice = notices.recv(), if notices_open => match notice {
                        Ok(notice) => push(Event::Notice(notice)),
                        Err(RecvError::Lagged(n)) => push(Event::Lagged(n)),
                        Err(RecvError::Closed) => notices_open = false,
                    },
                }
            }
        });
        recorder
    }

    /// Records `event` now.
    pub(crate) fn mark(&self, event: Event) {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Record {
                at: Instant::now(),
                event,
            });
    }

    /// A copy of the records so far.
    pub(crate) fn records(&self) -> Vec<Record> {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The first record at or after `since` that `pred` accepts.
    pub(crate) fn first_after(
        &self,
        since: Instant,
        pred: impl Fn(&Event) -> bool,
    ) -> Option<Record> {
        self.records()
            .into_iter()
            .find(|r| r.at >= since && pred(&r.event))
    }

    /// The notices recorded, in order.
    pub(crate) fn notices(&self) -> Vec<Notice> {
        self.records()
            .into_iter()
            .filter_map(|r| match r.event {
                Event::Notice(n) => Some(n),
                _ => None,
            })
            .collect()
    }

    /// Every `Elected` notice with its time.
    pub(crate) fn elections(&self) -> Vec<(Instant, FencingToken)> {
        self.records()
            .into_iter()
            .filter_map(|r| match r.event {
                Event::Notice(Notice::Elected { token }) => Some((r.at, token)),
                _ => None,
            })
            .collect()
    }

    /// The reasons of every `Demoted` notice, in order.
    pub(crate) fn demotions(&self) -> Vec<DemotionReason> {
        self.notices()
            .into_iter()
            .filter_map(|n| match n {
                Notice::Demoted { reason } => Some(reason),
                _ => None,
            })
            .collect()
    }

    /// The terms this candidate held the `Leader` role, from the role
    /// records: `(from, until)`, `until` `None` while it still leads. A term
    /// ends at the first role other than `Leader` or at `Closing`.
    pub(crate) fn terms(&self) -> Vec<(Instant, Option<Instant>, FencingToken)> {
        let mut terms = Vec::new();
        let mut open: Option<(Instant, FencingToken)> = None;
        for r in self.records() {
            if r.event == Event::Closing {
                if let Some((from, token)) = open.take() {
                    terms.push((from, Some(r.at), token));
                }
                continue;
            }
            if let Event::Role(role) = r.event {
                match (role, open) {
                    (Role::Leader(token), None) => open = Some((r.at, token)),
                    (Role::Leader(token), Some((from, old))) if token != old => {
                        terms.push((from, Some(r.at), old));
                        open = Some((r.at, token));
                    }
                    (Role::Leader(_), Some(_)) => {}
                    (_, Some((from, token))) => {
                        terms.push((from, Some(r.at), token));
                        open = None;
                    }
                    (_, None) => {}
                }
            }
        }
        if let Some((from, token)) = open {
            terms.push((from, None, token));
        }
        terms
    }
}

// ----- candidates -----------------------------------------------------------------

/// One candidate: its election handle and its recorder.
#[derive(Debug, Clone)]
pub(crate) struct Cand {
    pub(crate) label: String,
    pub(crate) election: Election,
    pub(crate) rec: Recorder,
}

impl Cand {
    /// Joins with `builder` (path, id and policy already set) and starts
    /// recording. Panics if the join fails.
    pub(crate) async fn join(label: &str, builder: ElectionBuilder) -> Cand {
        // Subscribed before the join goes out: a lone candidate can be
        // elected before `start` returns to a loaded test.
        let notices = builder.notices();
        let election = builder
            .start()
            .await
            .unwrap_or_else(|e| panic!("{label}: cannot start the election: {e}"));
        let rec = Recorder::start(&election, notices);
        wait_for(
            &format!("{label}'s node"),
            SETTLE,
            || election.node(),
            || {
                format!(
                    "{label}: role {:?}, error {:?}",
                    election.role(),
                    election.error()
                )
            },
        )
        .await;
        Cand {
            label: label.to_owned(),
            election,
            rec,
        }
    }

    /// Closes the election, recording [`Event::Closing`] first.
    pub(crate) async fn close(&self) {
        self.rec.mark(Event::Closing);
        self.election.close().await;
    }

    pub(crate) fn role(&self) -> Role {
        self.election.role()
    }

    pub(crate) fn node(&self) -> Option<String> {
        self.election.node()
    }

    pub(crate) fn is_leader(&self) -> bool {
        self.role().is_leader()
    }

    pub(crate) fn token(&self) -> Option<FencingToken> {
        match self.role() {
            Role::Leader(t) => Some(t),
            _ => None,
        }
    }

    /// A line for failure messages.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{}: role {:?}, node {:?}, error {:?}, metrics {:?}\n  notices {:?}",
            self.label,
            self.role(),
            self.node(),
            self.election.error(),
            self.election.metrics(),
            self.rec.notices()
        )
    }
}

/// One candidate per id, joined in order on `client` (each with its own
/// session) to the election at `path`.
pub(crate) async fn join_each(client: Client, hosts: &str, path: &str, ids: &[&str]) -> Vec<Cand> {
    let mut cands = Vec::new();
    for id in ids {
        let (t, events) = transport(client, hosts, None).await;
        cands.push(Cand::join(id, Election::builder(t, events).path(path).id(*id)).await);
    }
    cands
}

/// Every candidate described, for failure messages.
pub(crate) fn describe(cands: &[&Cand]) -> String {
    cands
        .iter()
        .map(|c| c.describe())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Closes every candidate (in parallel, each bounded by its close timeout).
pub(crate) async fn close_all(cands: &[&Cand]) {
    let mut tasks = tokio::task::JoinSet::new();
    for c in cands {
        let c = (*c).clone();
        tasks.spawn(async move { c.close().await });
    }
    while tasks.join_next().await.is_some() {}
}

// ----- waiting ------------------------------------------------------------------

/// Polls `probe` every 10 ms until it yields, or panics after `within`
/// saying what was awaited and `context()`.
pub(crate) async fn wait_for<T>(
    what: &str,
    within: Duration,
    mut probe: impl FnMut() -> Option<T>,
    context: impl FnOnce() -> String,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        if Instant::now() > deadline {
            panic!(
                "timed out after {within:?} waiting for {what}\n{}",
                context()
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Like [`wait_for`] with an async probe.
pub(crate) async fn wait_for_async<T, F, Fut>(
    what: &str,
    within: Duration,
    mut probe: F,
    context: impl FnOnce() -> String,
) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        if Instant::now() > deadline {
            panic!(
                "timed out after {within:?} waiting for {what}\n{}",
                context()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ----- looking from outside --------------------------------------------------------

/// A raw zookeeper-async client, connected and answering, optionally with
/// digest credentials.
pub(crate) async fn raw(hosts: &str, digest: Option<&str>) -> ZooKeeper {
    let zk = tokio::time::timeout(
        Duration::from_secs(20),
        ZooKeeper::connect_with_retry_time(
            hosts,
            SESSION,
            |_: WatchedEvent| {},
            Duration::from_millis(100),
        ),
    )
    .await
    .unwrap_or_else(|_| panic!("a raw client could not reach {hosts}"))
    .unwrap_or_else(|e| panic!("a raw client could not connect to {hosts}: {e}"));
    retry(|| zk.exists("/", false)).await;
    if let Some(credentials) = digest {
        let bytes = credentials.as_bytes().to_vec();
        retry(|| zk.add_auth("digest", bytes.clone())).await;
    }
    zk
}

/// Retries an operation through connection loss (the client reconnects),
/// for at most 20 s.
pub(crate) async fn retry<T, F, Fut>(mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ZkError>>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match tokio::time::timeout(Duration::from_secs(5), op()).await {
            Ok(Ok(value)) => return value,
            Ok(Err(ZkError::ConnectionLoss | ZkError::OperationTimeout)) | Err(_)
                if Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(Err(e)) => panic!("a raw client's request failed: {e:?}"),
            Err(_) => panic!("a raw client's request timed out for 20 s"),
        }
    }
}

/// The children of `path` (sorted by name), from a fresh raw client.
pub(crate) async fn children(hosts: &str, path: &str) -> Vec<String> {
    let zk = raw(hosts, None).await;
    let mut names = retry(|| zk.get_children(path, false)).await;
    let _ = zk.close().await;
    names.sort();
    names
}

/// The stat of `path`, if it exists, from a fresh raw client.
pub(crate) async fn stat(hosts: &str, path: &str) -> Option<Stat> {
    let zk = raw(hosts, None).await;
    let stat = retry(|| zk.exists(path, false)).await;
    let _ = zk.close().await;
    stat
}

/// The election's participants among `children`, oldest first, as the core
/// orders them (`zkelect_core::name::queue`); panics on a foreign child.
pub(crate) fn queue(children: &[String]) -> Vec<String> {
    let (queue, ignored) = name::queue(
        children,
        PREFIX,
        zkelect::Interop::None,
        zkelect_core::Recipe::Election { leaders: 1 },
    );
    assert_eq!(
        ignored, 0,
        "the election path holds children that are not candidates: {children:?}"
    );
    queue.into_iter().map(|n| n.name).collect()
}

// ----- invariants ------------------------------------------------------------------

/// What a settled election looks like.
#[derive(Debug, Clone)]
pub(crate) struct Settled {
    /// Index (in the slice given) of the one leader.
    pub(crate) leader: usize,
    pub(crate) token: FencingToken,
    /// The election path's participants, oldest first.
    pub(crate) queue: Vec<String>,
}

/// Whether the election over `cands` is settled as seen by the candidates
/// and by `listing` (the election path's children): exactly one leader,
/// every other candidate a follower, every candidate with a node, the
/// listing exactly one node per candidate, and the leader's node the oldest.
pub(crate) fn settled(cands: &[&Cand], listing: &[String]) -> Option<Settled> {
    let leaders: Vec<usize> = (0..cands.len()).filter(|&i| cands[i].is_leader()).collect();
    let [leader] = leaders[..] else { return None };
    let token = cands[leader].token()?;
    if cands
        .iter()
        .enumerate()
        .any(|(i, c)| i != leader && c.role() != Role::Follower)
    {
        return None;
    }
    let nodes: Option<BTreeSet<String>> = cands.iter().map(|c| c.node()).collect();
    let nodes = nodes?;
    let listed: BTreeSet<String> = listing.iter().cloned().collect();
    if nodes.len() != cands.len() || nodes != listed || listing.len() != cands.len() {
        return None;
    }
    let queue = queue(listing);
    if queue.first() != cands[leader].node().as_ref() {
        return None;
    }
    Some(Settled {
        leader,
        token,
        queue,
    })
}

/// Waits until the election over `cands` is [`settled`], listing `path` on
/// `hosts` from outside, for at most `within`.
pub(crate) async fn wait_settled(
    cands: &[&Cand],
    hosts: &str,
    path: &str,
    within: Duration,
) -> Settled {
    wait_settled_with(cands, || children(hosts, path), within).await
}

/// Like [`wait_settled`], with any way of listing the election path.
pub(crate) async fn wait_settled_with<F, Fut>(
    cands: &[&Cand],
    mut list: F,
    within: Duration,
) -> Settled
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Vec<String>>,
{
    let mut last = Vec::new();
    let deadline = Instant::now() + within;
    loop {
        // Cheap checks first: list only when the candidates agree.
        let leaders = cands.iter().filter(|c| c.is_leader()).count();
        if leaders == 1 {
            last = list().await;
            if let Some(s) = settled(cands, &last) {
                return s;
            }
        }
        if Instant::now() > deadline {
            panic!(
                "timed out after {within:?} waiting for the election to settle \
                 (one leader, the oldest node; one node per candidate)\nlisting {last:?}\n{}",
                describe(cands)
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Fencing tokens only grow: every `Elected` of every candidate, in time
/// order, carries a token at least as high as every earlier one (equal only
/// for the same node re-elected after a suspension: a czxid names one node).
pub(crate) fn assert_tokens_grow(cands: &[&Cand]) -> Vec<(Instant, String, FencingToken)> {
    let mut all: Vec<(Instant, String, FencingToken)> = cands
        .iter()
        .flat_map(|c| {
            c.rec
                .elections()
                .into_iter()
                .map(|(at, t)| (at, c.label.clone(), t))
        })
        .collect();
    all.sort_by_key(|(at, _, _)| *at);
    for pair in all.windows(2) {
        assert!(
            pair[1].2 >= pair[0].2,
            "a fencing token went down: {} was elected with {} after {} with {}; all: {all:?}",
            pair[1].1,
            pair[1].2,
            pair[0].1,
            pair[0].2
        );
    }
    all
}

/// No two candidates ever held the `Leader` role at the same time, by the
/// recorded role changes.
pub(crate) fn assert_terms_disjoint(cands: &[&Cand]) {
    let mut terms: Vec<(Instant, Option<Instant>, FencingToken, String)> = cands
        .iter()
        .flat_map(|c| {
            c.rec
                .terms()
                .into_iter()
                .map(|(from, until, t)| (from, until, t, c.label.clone()))
        })
        .collect();
    terms.sort_by_key(|t| t.0);
    for pair in terms.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let a_end = a.1.unwrap_or_else(|| {
            panic!(
                "{} still leads (token {}) while {} was elected at a later time (token {}); terms: {terms:?}",
                a.3, a.2, b.3, b.2
            )
        });
        assert!(
            a_end <= b.0,
            "two leaders at once: {} led (token {}) until {:?} after {} became leader (token {}); terms: {terms:?}",
            a.3,
            a.2,
            a_end.duration_since(b.0),
            b.3,
            b.2
        );
    }
}
