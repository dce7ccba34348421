//! Driver behaviour with mocked transports: correlation, retries, errors,
//! ordering, cancellation and shutdown. All in paused (virtual) time.
//!
//! `MockTransport` (mockall) answers at once and checks call counts; the
//! `Scripted` transport below adds what a mock returning values cannot
//! express: answers that take time, never come, or panic.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio::time::Instant;
use zkelect_core::{
    CandidateError, DemotionReason, Notice, Reply, Request, Role, SessionEvent, SessionId, Stat,
    WatchEvent, WatchKind, ZkCode,
};

use crate::transport::{MockTransport, Transport, TransportEvent};
use crate::{Election, ElectionError, LeadOutcome};

const PATH: &str = "/svc/leader";
const OWN: &str = "n_0000000000";
const TOKEN: i64 = 42;
const SESSION: i64 = 7;

fn connected() -> TransportEvent {
    TransportEvent::Session(SessionEvent::Connected {
        session_id: Some(SessionId(SESSION)),
        timeout: Duration::from_secs(6),
    })
}

fn stat(czxid: i64) -> Stat {
    Stat {
        czxid,
        ephemeral_owner: SESSION,
        ..Stat::default()
    }
}

/// A server good enough for one candidate alone: answers by request kind.
fn answer(request: &Request) -> Result<Reply, ZkCode> {
    match request {
        Request::Create { .. } => Ok(Reply::Created {
            path: format!("{PATH}/{OWN}"),
            stat: stat(TOKEN),
        }),
        Request::GetChildren { .. } => Ok(Reply::Children(vec![OWN.to_owned()])),
        Request::GetData { .. } => Ok(Reply::Data {
            data: vec![],
            stat: stat(TOKEN),
        }),
        Request::Exists { .. } => Ok(Reply::Exists(Some(stat(1)))),
        Request::Delete { .. } => Ok(Reply::Deleted),
        Request::SetData { .. } => Ok(Reply::Set(stat(TOKEN))),
        Request::Sync { .. } => Ok(Reply::Synced),
    }
}

/// Events for a transport that has just connected.
fn events() -> (mpsc::UnboundedSender<TransportEvent>, crate::EventStream) {
    let (tx, rx) = mpsc::unbounded_channel();
    let _ = tx.send(connected());
    (tx, rx)
}

/// A transport with scripted timing: per-verb delays, verbs that never
/// answer, a close that never returns, a first create that panics, and a
/// switch that silences every later request.
#[derive(Default)]
struct Scripted {
    delays: HashMap<&'static str, Duration>,
    /// A delay for the first request of a verb only (later ones use `delays`),
    /// so two requests of one verb in flight together answer in a known order.
    first_delays: HashMap<&'static str, Duration>,
    hang: Vec<&'static str>,
    hang_close: bool,
    panic_first_create: AtomicBool,
    silent: Arc<AtomicBool>,
    closes: Arc<AtomicUsize>,
    /// `issued <verb>` and `answered <verb>`, in order.
    log: Arc<Mutex<Vec<String>>>,
    /// Dropped with the transport: shows when nothing holds it any more.
    alive: Arc<()>,
}

impl Scripted {
    fn note(&self, line: String) {
        if let Ok(mut log) = self.log.lock() {
            log.push(line);
        }
    }
}

/// A mock transport that leaves the request bound to the session's
/// default (every session asks its transport once, at its start).
fn mock_transport() -> MockTransport {
    let mut mock = MockTransport::new();
    mock.expect_request_timeout().return_const(None);
    mock
}

#[async_trait]
impl Transport for Scripted {
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode> {
        let verb = request.verb();
        // The path tells apart two requests of one verb (the listing and a
        // child watch on our own node are both `children`).
        let path = request.path().to_owned();
        self.note(format!("issued {verb} {path}"));
        if matches!(request, Request::Create { .. })
            && self.panic_first_create.swap(false, Ordering::SeqCst)
        {
            panic!("scripted transport bug");
        }
        if self.hang.contains(&verb) || self.silent.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        let first = self
            .log
            .lock()
            .map(|log| {
                let issued = format!("issued {verb} ");
                log.iter().filter(|l| l.starts_with(&issued)).count() == 1
            })
            .unwrap_or(false);
        let delay = match self.first_delays.get(verb) {
            Some(delay) if first => Some(delay),
            _ => self.delays.get(verb),
        };
        if let Some(delay) = delay {
            tokio::time::sleep(*delay).await;
        }
        self.note(format!("answered {verb} {path}"));
        answer(&request)
    }

    async fn close(&self) {
        self.closes.fetch_add(1, Ordering::SeqCst);
        if self.hang_close {
            std::future::pending::<()>().await;
        }
    }
}

async fn join(transport: impl Transport) -> (Election, mpsc::UnboundedSender<TransportEvent>) {
    let (tx, rx) = events();
    let election = Election::builder(transport, rx)
        .path(PATH)
        .id("a")
        .join()
        .await
        .expect("the scripted server accepts the node");
    (election, tx)
}

#[tokio::test(start_paused = true)]
async fn replies_are_correlated_even_when_they_complete_out_of_order() {
    // Two elections on one session join together: after their creates,
    // their listings are out together, and the first one issued answers
    // last. Equal delays for the two would leave their order to the
    // scheduler.
    let transport = Scripted {
        delays: HashMap::from([
            ("exists", Duration::from_millis(300)),
            ("children", Duration::from_millis(100)),
        ]),
        first_delays: HashMap::from([("children", Duration::from_millis(300))]),
        ..Scripted::default()
    };
    let log = Arc::clone(&transport.log);
    let (_tx, rx) = events();
    let session = crate::Session::from_transport(transport, rx);
    let (election, other) = tokio::join!(
        session.election(PATH).id("a").join(),
        session.election("/svc/other").id("b").join()
    );
    let (election, other) = (election.unwrap(), other.unwrap());
    assert_eq!(election.wait_leader().await.unwrap().0, TOKEN);
    assert_eq!(other.wait_leader().await.unwrap().0, TOKEN);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let log = log.lock().unwrap().clone();
    let issued: Vec<_> = log
        .iter()
        .filter_map(|l| l.strip_prefix("issued "))
        .collect();
    let answered: Vec<_> = log
        .iter()
        .filter_map(|l| l.strip_prefix("answered "))
        .collect();
    assert_ne!(issued, answered, "replies overtook each other: {log:?}");
    for e in [&election, &other] {
        let m = e.metrics();
        assert_eq!(m.stale_replies, 0, "every reply matched its request");
        assert_eq!(m.op_errors, 0);
        assert!(e.role().is_leader());
    }
    session.close().await;
}

#[tokio::test(start_paused = true)]
async fn connection_loss_is_retried_after_backoff() {
    let lists = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&lists);
    let mut mock = mock_transport();
    mock.expect_perform()
        .returning(move |request| match request {
            // The first two listings fail with the connection.
            Request::GetChildren { .. } if seen.fetch_add(1, Ordering::SeqCst) < 2 => {
                Err(ZkCode::ConnectionLoss)
            }
            other => answer(&other),
        });
    mock.expect_close().times(1).returning(|| ());
    let (election, _events) = join(mock).await;
    let started = Instant::now();
    election.wait_leader().await.unwrap();
    assert!(
        lists.load(Ordering::SeqCst) >= 3,
        "two failures, then a listing that worked"
    );
    assert!(
        started.elapsed() > Duration::ZERO,
        "the retries waited for the backoff"
    );
    assert_eq!(election.metrics().op_errors, 2);
    election.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_create_lost_to_a_timeout_is_recovered_then_retried() {
    let creates = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&creates);
    let mut mock = mock_transport();
    mock.expect_perform()
        .returning(move |request| match request {
            // The first create's fate is unknown; the recovery listing finds no
            // node with this session's nonce, so the candidate creates again.
            Request::Create { .. } if seen.fetch_add(1, Ordering::SeqCst) == 0 => {
                Err(ZkCode::OperationTimeout)
            }
            other => answer(&other),
        });
    mock.expect_close().returning(|| ());
    let (election, _events) = join(mock).await;
    election.wait_leader().await.unwrap();
    assert_eq!(
        creates.load(Ordering::SeqCst),
        2,
        "one lost create, one retry"
    );
    assert_eq!(election.metrics().op_timeouts, 1);
    election.close().await;
}

#[tokio::test(start_paused = true)]
async fn no_auth_surfaces_as_an_error_to_join() {
    let mut mock = mock_transport();
    mock.expect_perform().returning(|request| match request {
        Request::Create { .. } => Err(ZkCode::NoAuth),
        other => answer(&other),
    });
    // The election stops and closes its session by itself.
    mock.expect_close().times(1).returning(|| ());
    let (_tx, rx) = events();
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
async fn no_auth_surfaces_as_an_error_to_wait_leader() {
    let mut mock = mock_transport();
    mock.expect_perform().returning(|request| match request {
        // The node is created, but the election path cannot be listed.
        Request::GetChildren { .. } => Err(ZkCode::NoAuth),
        other => answer(&other),
    });
    mock.expect_close().times(1).returning(|| ());
    let (_tx, rx) = events();
    // `start`, not `join`: join itself may already see the failure.
    let election = Election::builder(mock, rx)
        .path(PATH)
        .id("a")
        .start()
        .await
        .unwrap();
    let err = election.wait_leader().await.unwrap_err();
    assert!(
        matches!(
            &err,
            ElectionError::Fatal(CandidateError::Refused {
                code: ZkCode::NoAuth,
                ..
            })
        ),
        "{err:?}"
    );
    assert_eq!(election.role(), Role::Failed);
    assert!(election.error().is_some());
    // lead() reports the same error rather than waiting forever.
    assert!(election.lead(|_| async {}).await.is_err());
    election.close().await;
}

#[tokio::test(start_paused = true)]
async fn rejected_credentials_surface_as_an_auth_error() {
    let mut mock = mock_transport();
    mock.expect_perform().returning(|r| answer(&r));
    mock.expect_close().returning(|| ());
    let (election, events) = join(mock).await;
    election.wait_leader().await.unwrap();
    events
        .send(TransportEvent::Session(SessionEvent::AuthFailed))
        .unwrap();
    let _ = election.changes().wait_for(|r| *r == Role::Failed).await;
    let err = election.wait_leader().await.unwrap_err();
    assert!(
        matches!(err, ElectionError::Session(crate::SessionError::Auth(_))),
        "{err:?}"
    );
    election.close().await;
}

#[tokio::test(start_paused = true)]
async fn close_deletes_the_node_and_closes_the_session_once() {
    let mut mock = mock_transport();
    mock.expect_perform()
        .withf(|r| matches!(r, Request::Delete { path, .. } if path == &format!("{PATH}/{OWN}")))
        .times(1)
        .returning(|r| answer(&r));
    mock.expect_perform()
        .withf(|r| !matches!(r, Request::Delete { .. }))
        .returning(|r| answer(&r));
    mock.expect_close().times(1).returning(|| ());
    let (election, _events) = join(mock).await;
    election.wait_leader().await.unwrap();
    let other = election.clone();
    tokio::join!(election.close(), other.close());
    assert_eq!(election.role(), Role::Closed);
    election.close().await;
    assert!(matches!(
        election.wait_leader().await,
        Err(ElectionError::Closed)
    ));
    assert!(matches!(
        election.resign(true).await,
        Err(ElectionError::Closed)
    ));
}

#[tokio::test(start_paused = true)]
async fn close_is_bounded_and_leaves_nothing_running_even_when_the_transport_hangs() {
    let transport = Scripted {
        hang: vec!["delete"],
        hang_close: true,
        ..Scripted::default()
    };
    let closes = Arc::clone(&transport.closes);
    let alive: Weak<()> = Arc::downgrade(&transport.alive);
    let (tx, rx) = events();
    let election = Election::builder(transport, rx)
        .path(PATH)
        .id("a")
        .close_timeout(Duration::from_secs(2))
        .join()
        .await
        .unwrap();
    election.wait_leader().await.unwrap();
    let started = Instant::now();
    election.close().await;
    // Two bounded steps: the delete, then the session's close.
    assert!(
        started.elapsed() <= Duration::from_secs(4) + Duration::from_millis(100),
        "close took {:?}",
        started.elapsed()
    );
    assert_eq!(
        closes.load(Ordering::SeqCst),
        1,
        "the session was closed once"
    );
    assert_eq!(election.role(), Role::Closed);
    // Nothing left running: the driver and every request task are gone, and
    // with them the last reference to the transport.
    drop(tx);
    tokio::task::yield_now().await;
    assert!(alive.upgrade().is_none(), "the transport is still held");
    let again = Instant::now();
    election.close().await;
    assert_eq!(
        again.elapsed(),
        Duration::ZERO,
        "a second close returns at once"
    );
}

#[tokio::test(start_paused = true)]
async fn dropping_every_handle_closes_the_election() {
    let transport = Scripted::default();
    let closes = Arc::clone(&transport.closes);
    let alive: Weak<()> = Arc::downgrade(&transport.alive);
    let log = Arc::clone(&transport.log);
    let (election, _events) = join(transport).await;
    election.wait_leader().await.unwrap();
    drop(election);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(closes.load(Ordering::SeqCst), 1);
    assert!(log
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.starts_with("answered delete ")));
    assert!(alive.upgrade().is_none());
}

#[tokio::test(start_paused = true)]
async fn demotion_is_published_before_the_next_command_is_performed() {
    let order = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = Arc::clone(&order);
    let mut mock = mock_transport();
    mock.expect_perform().returning(move |request| {
        if matches!(request, Request::Delete { .. }) {
            log.lock().unwrap().push("delete performed".into());
        }
        answer(&request)
    });
    mock.expect_close().returning(|| ());
    let (election, _events) = join(mock).await;
    election.wait_leader().await.unwrap();
    let mut roles = election.changes();
    let mut notices = election.notices();
    let watcher_log = Arc::clone(&order);
    let watcher = tokio::spawn(async move {
        let _ = roles.wait_for(|r| !r.is_leader()).await;
        watcher_log.lock().unwrap().push("demotion seen".into());
    });
    election.resign(false).await.unwrap();
    // When resign returns the demotion is out.
    assert!(!election.role().is_leader());
    assert_eq!(
        notices.try_recv().ok(),
        Some(Notice::Demoted {
            reason: DemotionReason::Resigned
        })
    );
    watcher.await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let order = order.lock().unwrap().clone();
    assert_eq!(order, ["demotion seen", "delete performed"]);
    election.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_new_holder_hears_of_its_hold_and_writes_nothing_for_it() {
    let order = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = Arc::clone(&order);
    let created = Arc::new(Mutex::new(String::new()));
    let mut mock = mock_transport();
    mock.expect_perform().returning(move |request| {
        let mut created = created.lock().unwrap();
        match &request {
            Request::Create { path, .. } => {
                *created = format!("{path}0000000000");
                Ok(Reply::Created {
                    path: created.clone(),
                    stat: stat(TOKEN),
                })
            }
            // The lock's queue holds our node and a newer one; our node
            // has no children.
            Request::GetChildren { path, .. } => Ok(Reply::Children(
                created
                    .strip_prefix(&format!("{path}/"))
                    .map(|name| {
                        let newer = format!("{}1", &name[..name.len() - 1]);
                        vec![name.to_owned(), newer]
                    })
                    .unwrap_or_default(),
            )),
            other => {
                if matches!(other, Request::SetData { .. }) {
                    log.lock().unwrap().push("write performed".into());
                }
                answer(other)
            }
        }
    });
    mock.expect_close().returning(|| ());
    let (_tx, rx) = events();
    let session = crate::Session::from_transport(mock, rx);
    let mutex = session.mutex("/locks/job");
    let guard = tokio::time::timeout(Duration::from_secs(10), mutex.acquire())
        .await
        .expect("alone in the queue, the mutex is acquired")
        .unwrap();
    order.lock().unwrap().push("acquired".into());
    tokio::time::sleep(Duration::from_millis(10)).await;
    let order = order.lock().unwrap().clone();
    assert_eq!(
        order,
        ["acquired"],
        "the holder's acquire returns, and its hold writes nothing (no leader marker)"
    );
    drop(guard);
    session.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_stale_lease_demotes_before_a_queued_event_is_acted_on() {
    let transport = Scripted::default();
    let silent = Arc::clone(&transport.silent);
    let (election, events) = join(transport).await;
    election.wait_leader().await.unwrap();
    let mut notices = election.notices();
    // The server goes silent, an event queues up, and the process is not
    // scheduled for longer than the lease (6 s session: suspended after 4 s).
    silent.store(true, Ordering::SeqCst);
    events
        .send(TransportEvent::Watch(WatchEvent {
            kind: WatchKind::NodeDeleted,
            path: format!("{PATH}/{OWN}"),
        }))
        .unwrap();
    tokio::time::advance(Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    let first = notices.recv().await.unwrap();
    assert_eq!(
        first,
        Notice::Suspended,
        "the stale lease is acted on first"
    );
    assert!(!election.role().is_leader());
    election.close().await;
}

#[tokio::test(start_paused = true)]
async fn lead_drops_the_work_the_moment_leadership_is_suspended() {
    let mut mock = mock_transport();
    mock.expect_perform().returning(|r| answer(&r));
    mock.expect_close().returning(|| ());
    let (election, events) = join(mock).await;
    let dropped = Arc::new(AtomicBool::new(false));
    struct Guard(Arc<AtomicBool>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let flag = Arc::clone(&dropped);
    let lead = election.lead(|token| async move {
        let _guard = Guard(flag);
        assert_eq!(token.0, TOKEN);
        std::future::pending::<()>().await;
    });
    let disconnect = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        events
            .send(TransportEvent::Session(SessionEvent::Disconnected))
            .unwrap();
    };
    let (outcome, ()) = tokio::join!(lead, disconnect);
    assert_eq!(outcome.unwrap(), LeadOutcome::Suspended);
    assert_eq!(election.role(), Role::Suspended(crate::FencingToken(TOKEN)));
    assert!(dropped.load(Ordering::SeqCst), "the work was dropped");
    election.close().await;
}

#[tokio::test(start_paused = true)]
async fn lead_returns_what_the_work_returns_and_reports_why_leadership_ended() {
    let mut mock = mock_transport();
    mock.expect_perform().returning(|r| answer(&r));
    mock.expect_close().returning(|| ());
    let (election, _events) = join(mock).await;
    let out = election.lead(|token| async move { token.0 + 1 }).await;
    assert_eq!(out.unwrap(), LeadOutcome::Finished(TOKEN + 1));
    let resigner = election.clone();
    let lead = election.lead(|_| std::future::pending::<()>());
    let (outcome, resigned) = tokio::join!(lead, resigner.resign(true));
    resigned.unwrap();
    // The mock re-elects at once with the same token, so the role channel
    // alone could not show the demotion; the notice does.
    assert_eq!(
        outcome.unwrap(),
        LeadOutcome::Demoted(DemotionReason::Resigned)
    );
    election.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_transport_that_panics_still_answers_its_request() {
    let transport = Scripted {
        panic_first_create: AtomicBool::new(true),
        ..Scripted::default()
    };
    let (election, _events) = join(transport).await;
    // The panicked create answers ConnectionLoss; the core recovers and leads.
    assert_eq!(election.wait_leader().await.unwrap().0, TOKEN);
    assert!(election.metrics().op_errors >= 1);
    election.close().await;
}

#[tokio::test(start_paused = true)]
async fn metrics_count_elections_and_requests() {
    let mut mock = mock_transport();
    mock.expect_perform().returning(|r| answer(&r));
    mock.expect_close().returning(|| ());
    let (election, _events) = join(mock).await;
    election.wait_leader().await.unwrap();
    let m = election.metrics();
    assert_eq!(m.elections, 1);
    assert_eq!(m.leader_changes, 1);
    assert_eq!(m.failovers, 0);
    assert!(m.ops >= 2, "at least a create and a listing: {m:?}");
    election.close().await;
    assert_eq!(election.metrics().demotions, 1);
}

/// Two machines on one session that arm the same watch share the server's
/// one watch, which fires once: the driver hands its one event to both.
#[tokio::test(start_paused = true)]
async fn two_machines_watching_one_path_both_get_its_one_event() {
    // The scripted server gives both the same node, so both watch it.
    let mut mock = mock_transport();
    mock.expect_perform().returning(|request| answer(&request));
    mock.expect_close().returning(|| ());
    let (tx, rx) = events();
    let session = crate::Session::from_transport(mock, rx);
    let mut elections = Vec::new();
    for id in ["a", "b"] {
        let election = session.election(PATH).id(id).join().await.unwrap();
        election.wait_leader().await.unwrap();
        elections.push(election);
    }
    // A holder by its listing watches its own node at its first probe tick
    // (a third of the timeout, at most).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before: Vec<u64> = elections.iter().map(|e| e.metrics().ops).collect();
    // The node is reported deleted: one event for the session. (The
    // scripted server still has it, so each machine looks again and stays.)
    let _ = tx.send(TransportEvent::Watch(WatchEvent {
        kind: WatchKind::NodeDeleted,
        path: format!("{PATH}/{OWN}"),
    }));
    tokio::time::sleep(Duration::from_millis(10)).await;
    for (election, before) in elections.iter().zip(before) {
        assert!(
            election.metrics().ops > before,
            "{:?} did not look again: {before} requests before, {:?} after",
            election.node(),
            election.metrics()
        );
    }
    // And only the event did it.
    let after: Vec<u64> = elections.iter().map(|e| e.metrics().ops).collect();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let idle: Vec<u64> = elections.iter().map(|e| e.metrics().ops).collect();
    assert_eq!(after, idle, "nothing happens without an event");
    session.close().await;
}

/// A hundred elections on one session, a rival session on every path: when
/// the first session expires, every one of its elections fails over.
#[tokio::test(start_paused = true)]
async fn a_hundred_elections_on_one_session_fail_over_when_it_expires() {
    let zk = crate::testkit::TestZk::new();
    let (transport, events) = zk.connect(Duration::from_secs(2));
    let client = transport.client();
    let first = crate::Session::from_transport(transport, events);
    let (transport, events) = zk.connect(Duration::from_secs(2));
    let rival = crate::Session::from_transport(transport, events);
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for p in 0..100 {
        let path = format!("/p/{p}");
        ours.push(first.election(&path).id("first").join().await.unwrap());
        theirs.push(rival.election(&path).id("rival").join().await.unwrap());
    }
    for election in &ours {
        election.wait_leader().await.unwrap();
    }
    assert!(theirs.iter().all(|e| !e.role().is_leader()));
    zk.expire_session(client);
    for election in &theirs {
        tokio::time::timeout(Duration::from_secs(10), election.wait_leader())
            .await
            .expect("every rival leads after the expiry")
            .unwrap();
    }
    for election in &ours {
        assert!(election.metrics().demotions >= 1);
    }
    first.close().await;
    rival.close().await;
    // Every node went with its session.
    for p in 0..100 {
        assert!(
            zk.server().children(&format!("/p/{p}")).is_empty(),
            "/p/{p}"
        );
    }
}

/// A transport that counts what it performs, by whether it is the
/// session's probe (an `exists` of `/`) or a machine's request.
struct Counting<T> {
    inner: T,
    probes: Arc<AtomicUsize>,
    others: Arc<AtomicUsize>,
}

#[async_trait]
impl<T: Transport> Transport for Counting<T> {
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode> {
        let counter = match &request {
            Request::Exists { path, watch: false } if path == "/" => &self.probes,
            _ => &self.others,
        };
        counter.fetch_add(1, Ordering::SeqCst);
        self.inner.perform(request).await
    }

    async fn close(&self) {
        self.inner.close().await;
    }
}

#[tokio::test(start_paused = true)]
async fn one_probe_per_session_keeps_every_lease() {
    const N: usize = 50;
    let timeout = Duration::from_secs(3);
    let zk = crate::testkit::TestZk::new();
    let (inner, events) = zk.connect(timeout);
    let probes = Arc::new(AtomicUsize::new(0));
    let others = Arc::new(AtomicUsize::new(0));
    let transport = Counting {
        inner,
        probes: Arc::clone(&probes),
        others: Arc::clone(&others),
    };
    let session = crate::Session::from_transport(transport, events);
    let mut elections = Vec::new();
    for p in 0..N {
        let election = session
            .election(format!("/p/{p}"))
            .id("a")
            .join()
            .await
            .unwrap();
        election.wait_leader().await.unwrap();
        elections.push(election);
    }
    // Let the start-up's own requests settle: the own-node watches a holder
    // by its listing sets at its first probe tick (each holds alone).
    tokio::time::sleep(timeout).await;
    let (probes_before, others_before) =
        (probes.load(Ordering::SeqCst), others.load(Ordering::SeqCst));
    let idle = timeout * 10;
    tokio::time::sleep(idle).await;
    let sent_by_machines = others.load(Ordering::SeqCst) - others_before;
    let session_probes = probes.load(Ordering::SeqCst) - probes_before;
    // Alone, each machine would probe every third of the timeout: 30 each.
    assert_eq!(sent_by_machines, 0, "no machine probes on its own");
    // One probe per three tenths of the timeout, for the whole session.
    assert!(
        (32..=34).contains(&session_probes),
        "{session_probes} session probes in {idle:?}"
    );
    let now = Instant::now();
    for election in &elections {
        assert!(election.role().is_leader(), "still leading");
        let lease = election
            .status()
            .borrow()
            .lease
            .expect("a lease while leading");
        assert!(
            lease > now,
            "the lease is kept fresh by the session's probe"
        );
        assert_eq!(election.metrics().demotions, 0);
    }
    session.close().await;
}

/// Refused credentials end the session: every recipe on it reports the
/// credentials, the transport is closed without the application asking
/// (so the server drops the session's ephemeral nodes at once), no delete
/// is tried, the session's state says why, and a recipe started on it
/// later fails the same way.
#[tokio::test(start_paused = true)]
async fn refused_credentials_close_the_session_by_themselves() {
    let transport = Scripted::default();
    let (log, closes) = (Arc::clone(&transport.log), Arc::clone(&transport.closes));
    let (tx, rx) = events();
    let session = crate::Session::from_transport(transport, rx);
    let leader = session.election(PATH).id("a").join().await.unwrap();
    let other = session.election("/svc/other").id("b").join().await.unwrap();
    leader.wait_leader().await.unwrap();
    tx.send(TransportEvent::Session(SessionEvent::AuthFailed))
        .unwrap();
    let mut states = session.states();
    let state = states
        .wait_for(|s| *s == crate::ConnectionState::AuthFailed)
        .await
        .map(|s| *s)
        .ok();
    assert_eq!(state, Some(crate::ConnectionState::AuthFailed));
    // The pump ends and closes the transport; give it a turn or two.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(closes.load(Ordering::SeqCst), 1, "closed without a close()");
    for e in [&leader, &other] {
        let err = e.wait_leader().await.unwrap_err();
        assert!(
            matches!(err, ElectionError::Session(crate::SessionError::Auth(_))),
            "{err:?}"
        );
        assert_eq!(e.role(), Role::Failed);
    }
    assert_eq!(
        *session.states().borrow(),
        crate::ConnectionState::AuthFailed,
        "not overwritten by Closed"
    );
    let late = session.election("/svc/late").id("c").join().await;
    assert!(
        matches!(
            late,
            Err(ElectionError::Session(crate::SessionError::Auth(_)))
        ),
        "{late:?}"
    );
    let log = log.lock().unwrap().clone();
    assert!(
        !log.iter().any(|l| l.starts_with("issued delete")),
        "{log:?}"
    );
    session.close().await;
    leader.close().await;
    assert_eq!(closes.load(Ordering::SeqCst), 1);
}
