//! Locks on the memory transport, in paused (virtual) time.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use async_trait::async_trait;
use zkelect_core::{ConfigError, DemotionReason, Reply, Request, Role, ZkCode};

use crate::memory::MemoryTransport;
use crate::testkit::TestZk;
use crate::transport::Transport;
use crate::{GuardedWriteError, LockError, LockGuard, Session};

const PATH: &str = "/locks/job";
const TIMEOUT: Duration = Duration::from_secs(2);

fn session(zk: &TestZk) -> (Session, usize) {
    let (transport, events) = zk.connect(TIMEOUT);
    let client = transport.client();
    (Session::from_transport(transport, events), client)
}

/// Lets the session and the server run for a while of virtual time.
async fn run_a_while() {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

fn children(zk: &TestZk, path: &str) -> Vec<String> {
    zk.server().children(path)
}

#[tokio::test(start_paused = true)]
async fn a_mutex_excludes_and_hands_over_in_queue_order() {
    let zk = TestZk::new();
    let (s, _) = session(&zk);
    let (a, b, c) = (s.mutex(PATH), s.mutex(PATH), s.mutex(PATH));
    let ga = a.acquire().await.unwrap();
    let wb = tokio::spawn(async move { (b.acquire().await, b) });
    run_a_while().await;
    let wc = tokio::spawn(async move { (c.acquire().await, c) });
    run_a_while().await;
    assert_eq!(children(&zk, PATH).len(), 3, "one node per contender");
    assert!(
        !wb.is_finished() && !wc.is_finished(),
        "one holder at a time"
    );
    let first = ga.token();
    drop(ga);
    let (gb, _b) = wb.await.unwrap();
    let gb = gb.unwrap();
    assert!(gb.token() > first, "a later holder has a higher token");
    run_a_while().await;
    assert!(!wc.is_finished(), "c queued after b, so waits for b");
    gb.release().await;
    let (gc, _c) = wc.await.unwrap();
    let gc = gc.unwrap();
    assert!(gc.is_held());
    drop(gc);
    run_a_while().await;
    assert!(
        children(&zk, PATH).is_empty(),
        "every release deleted its node"
    );
    s.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_mutex_is_reentrant_on_its_handle_and_the_last_release_deletes() {
    let zk = TestZk::new();
    let (s, _) = session(&zk);
    let lock = s.mutex(PATH);
    let other = s.mutex(PATH);
    let outer = lock.acquire().await.unwrap();
    let inner = tokio::time::timeout(Duration::ZERO, lock.acquire())
        .await
        .expect("a second acquire on the holding handle returns at once")
        .unwrap();
    assert_eq!(outer.token(), inner.token());
    assert_eq!(outer.node(), inner.node());
    assert_eq!(children(&zk, PATH).len(), 1, "one node for both");
    drop(inner);
    run_a_while().await;
    assert_eq!(
        children(&zk, PATH),
        vec![outer.node().to_owned()],
        "still held"
    );
    assert!(outer.is_held());
    assert!(other
        .try_acquire(Duration::from_secs(1))
        .await
        .unwrap()
        .is_none());
    drop(outer);
    let next = other.try_acquire(Duration::from_secs(1)).await.unwrap();
    assert!(next.is_some(), "the last release let the other handle in");
    s.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_non_reentrant_mutex_refuses_a_second_acquire_and_queues_anew_after_release() {
    let zk = TestZk::new();
    let (s, _) = session(&zk);
    let lock = s.mutex(PATH).reentrant(false);
    let other = s.mutex(PATH).reentrant(false);
    let first = lock.acquire().await.unwrap();
    // A second acquisition on the holding handle would wait for itself.
    assert!(matches!(lock.acquire().await, Err(LockError::InUse)));
    assert!(matches!(
        lock.try_acquire(Duration::from_secs(1)).await,
        Err(LockError::InUse)
    ));
    assert_eq!(children(&zk, PATH).len(), 1, "the refusal queued nothing");
    // Another handle of the same session waits behind it: one place each.
    let waiting = tokio::spawn(async move { (other.acquire().await, other) });
    run_a_while().await;
    assert!(
        !waiting.is_finished(),
        "one holder at a time on one session"
    );
    assert_eq!(children(&zk, PATH).len(), 2);
    let token = first.token();
    let node = first.node().to_owned();
    first.release().await;
    let (second, _other) = waiting.await.unwrap();
    let second = second.unwrap();
    assert!(second.token() > token);
    // Released: this handle's next acquisition is a new place, behind the
    // other holder.
    let again = tokio::spawn(async move { (lock.acquire().await, lock) });
    run_a_while().await;
    assert!(
        !again.is_finished(),
        "queued behind the other handle's hold"
    );
    drop(second);
    let (again, _lock) = again.await.unwrap();
    let again = again.unwrap();
    assert_ne!(again.node(), node, "a node of its own, not the old hold's");
    assert!(again.token() > token);
    drop(again);
    run_a_while().await;
    assert!(children(&zk, PATH).is_empty());
    s.close().await;
}

#[tokio::test(start_paused = true)]
async fn lock_handles_store_their_data_after_the_id() {
    let zk = TestZk::new();
    let (s, _) = session(&zk);
    let mutex = s.mutex(PATH).id("worker-1").data(b"10.0.0.7:8080".to_vec());
    let guard = mutex.acquire().await.unwrap();
    let stored = zk.server().data(&format!("{PATH}/{}", guard.node()));
    assert_eq!(stored.as_deref(), Some(&b"worker-1\n10.0.0.7:8080"[..]));
    drop(guard);
    let sem = s.semaphore("/locks/slots", 2).id("w").data(b"s".to_vec());
    let permit = sem.acquire().await.unwrap();
    let stored = zk.server().data(&format!("/locks/slots/{}", permit.node()));
    assert_eq!(stored.as_deref(), Some(&b"w\ns"[..]));
    let rw = s.rw_lock("/locks/rw").id("r").data(b"d".to_vec());
    let read = rw.read().acquire().await.unwrap();
    let stored = zk.server().data(&format!("/locks/rw/{}", read.node()));
    assert_eq!(stored.as_deref(), Some(&b"r\nd"[..]));
    drop((permit, read));
    s.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_bad_custom_acl_on_a_lock_is_a_config_error() {
    let zk = TestZk::new();
    let (s, _) = session(&zk);
    let lock = s.mutex(PATH).acl(zkelect_core::Acl::Custom(Vec::new()));
    assert!(matches!(lock.acquire().await, Err(LockError::Config(_))));
    assert!(children(&zk, PATH).is_empty());
    s.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_downgraded_writer_lets_readers_behind_in_and_no_writer_between() {
    let zk = TestZk::new();
    let (s, _) = session(&zk);
    let (a, r, w) = (s.rw_lock(PATH), s.rw_lock(PATH), s.rw_lock(PATH));
    let held = a.write().acquire().await.unwrap();
    let reader = tokio::spawn(async move { (r.read().acquire().await, r) });
    run_a_while().await;
    let writer = tokio::spawn(async move { (w.write().acquire().await, w) });
    run_a_while().await;
    assert!(!reader.is_finished() && !writer.is_finished());
    held.downgrade().await.unwrap();
    assert!(held.is_held(), "a downgrade keeps the hold");
    held.downgrade().await.unwrap();
    let (read, _r) = reader.await.unwrap();
    let read = read.unwrap();
    assert!(
        read.is_held() && held.is_held(),
        "readers share with it now"
    );
    // A write acquisition on the downgraded handle queues anew.
    assert!(a
        .write()
        .try_acquire(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    held.release().await;
    run_a_while().await;
    assert!(!writer.is_finished(), "the reader still holds");
    drop(read);
    let (wrote, _w) = writer.await.unwrap();
    assert!(wrote.unwrap().is_held());
    s.close().await;
}

#[tokio::test(start_paused = true)]
async fn only_a_holding_write_guard_downgrades() {
    let zk = TestZk::new();
    let (s, client) = session(&zk);
    let m = s.mutex(PATH).acquire().await.unwrap();
    assert_eq!(m.downgrade().await, Err(crate::DowngradeError::NotWriter));
    drop(m);
    let rw = s.rw_lock("/locks/rw");
    let read = rw.read().acquire().await.unwrap();
    assert_eq!(
        read.downgrade().await,
        Err(crate::DowngradeError::NotWriter)
    );
    drop(read);
    let held = rw.write().acquire().await.unwrap();
    zk.expire_session(client);
    held.lost().await;
    assert!(matches!(
        held.downgrade().await,
        Err(crate::DowngradeError::NotHolding | crate::DowngradeError::Lost(_))
    ));
    s.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_acquire_leaves_no_node_behind() {
    let zk = TestZk::new();
    let (s, _) = session(&zk);
    let holder = s.mutex(PATH);
    let waiter = s.mutex(PATH);
    let held = holder.acquire().await.unwrap();
    let pending = tokio::spawn(async move { waiter.acquire().await.map(drop) });
    run_a_while().await;
    assert_eq!(children(&zk, PATH).len(), 2, "the waiter queued");
    pending.abort();
    assert!(pending.await.unwrap_err().is_cancelled());
    run_a_while().await;
    assert_eq!(
        children(&zk, PATH),
        vec![held.node().to_owned()],
        "the cancelled acquire's node is gone"
    );
    // Cancelled while its create is still on its way: the node is deleted
    // once the create's answer names it.
    let waiter = s.mutex(PATH);
    let fut = waiter.acquire();
    let _ = tokio::time::timeout(Duration::ZERO, fut).await;
    run_a_while().await;
    assert_eq!(children(&zk, PATH), vec![held.node().to_owned()]);
    s.close().await;
}

#[tokio::test(start_paused = true)]
async fn try_acquire_times_out_with_no_node_left_behind() {
    let zk = TestZk::new();
    let (s, _) = session(&zk);
    let held = s.mutex(PATH).acquire().await.unwrap();
    let waiter = s.mutex(PATH);
    let got = waiter
        .try_acquire(Duration::from_millis(500))
        .await
        .unwrap();
    assert!(got.is_none());
    // Deleted before it returned, not only in the background.
    assert_eq!(children(&zk, PATH), vec![held.node().to_owned()]);
    drop(held);
    assert!(waiter
        .try_acquire(Duration::from_secs(1))
        .await
        .unwrap()
        .is_some());
    s.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_guard_learns_its_hold_is_lost_and_the_lock_moves_on() {
    let zk = TestZk::new();
    let (ours, client) = session(&zk);
    let (theirs, _) = session(&zk);
    let lock = ours.mutex(PATH);
    let guard = lock.acquire().await.unwrap();
    let lost = tokio::spawn(guard.lost());
    let rival = theirs.mutex(PATH);
    let wait = tokio::spawn(async move { (rival.acquire().await, rival) });
    run_a_while().await;
    assert!(!lost.is_finished() && !wait.is_finished());
    zk.expire_session(client);
    let reason = tokio::time::timeout(Duration::from_secs(10), lost)
        .await
        .expect("lost() resolves")
        .unwrap();
    assert_eq!(reason, DemotionReason::Expired);
    let (got, _rival) = tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("the rival gets the lock")
        .unwrap();
    let got = got.unwrap();
    assert!(got.token() > guard.token());
    assert!(!guard.is_held());
    // The lost hold does not queue again behind the application's back: its
    // machine left, so a new acquire on the handle queues afresh.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(children(&zk, PATH), vec![got.node().to_owned()]);
    assert_eq!(guard.status().borrow().role, Role::Closed);
    let again = lock.try_acquire(Duration::from_secs(1)).await.unwrap();
    assert!(again.is_none(), "the rival holds");
    drop(got);
    assert!(lock
        .try_acquire(Duration::from_secs(5))
        .await
        .unwrap()
        .is_some());
    ours.close().await;
    theirs.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_dropped_guard_is_deleted_after_the_connection_comes_back() {
    let zk = TestZk::new();
    let (s, client) = session(&zk);
    let (rivals, _) = session(&zk);
    let guard = s.mutex(PATH).acquire().await.unwrap();
    let rival = rivals.mutex(PATH);
    let wait = tokio::spawn(async move { (rival.acquire().await, rival) });
    run_a_while().await;
    // The delete cannot get through for a while (shorter than the session).
    zk.partition(client, Duration::from_millis(1_000));
    drop(guard);
    let (got, _rival) = tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .expect("the delete got through after the partition")
        .unwrap();
    assert!(got.unwrap().is_held());
    s.close().await;
    rivals.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_semaphore_lets_k_hold_at_once_and_no_more() {
    let zk = TestZk::new();
    let (s, _) = session(&zk);
    let sem = s.semaphore(PATH, 3);
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(sem.acquire().await.unwrap());
    }
    let tokens: std::collections::BTreeSet<_> = held.iter().map(|g| g.token()).collect();
    assert_eq!(tokens.len(), 3, "a permit each");
    assert!(sem
        .try_acquire(Duration::from_secs(1))
        .await
        .unwrap()
        .is_none());
    assert_eq!(children(&zk, PATH).len(), 3);
    let sem = Arc::new(sem);
    let waiter = {
        let sem = Arc::clone(&sem);
        tokio::spawn(async move { sem.acquire().await })
    };
    run_a_while().await;
    assert!(!waiter.is_finished());
    drop(held.remove(1));
    let fourth = waiter.await.unwrap().unwrap();
    assert!(held.iter().all(LockGuard::is_held) && fourth.is_held());
    assert!(matches!(
        s.semaphore(PATH, 0).acquire().await,
        Err(LockError::Config(ConfigError::InvalidPermits(0)))
    ));
    s.close().await;
}

#[tokio::test(start_paused = true)]
async fn readers_share_a_writer_excludes_and_a_reader_behind_a_writer_waits() {
    let zk = TestZk::new();
    let (s, _) = session(&zk);
    let (r1, r2) = (s.rw_lock(PATH), s.rw_lock(PATH));
    let g1 = r1.read().acquire().await.unwrap();
    let g2 = r2.read().acquire().await.unwrap();
    assert!(g1.is_held() && g2.is_held(), "readers share");
    let w = Arc::new(s.rw_lock(PATH));
    let writer = {
        let w = Arc::clone(&w);
        tokio::spawn(async move { w.write().acquire().await })
    };
    run_a_while().await;
    let r3 = Arc::new(s.rw_lock(PATH));
    let late_reader = {
        let r3 = Arc::clone(&r3);
        tokio::spawn(async move { r3.read().acquire().await })
    };
    run_a_while().await;
    assert!(!writer.is_finished(), "the writer waits for the readers");
    assert!(!late_reader.is_finished(), "a reader behind a writer waits");
    drop(g1);
    run_a_while().await;
    assert!(!writer.is_finished(), "one reader still holds");
    drop(g2);
    let gw = writer.await.unwrap().unwrap();
    run_a_while().await;
    assert!(!late_reader.is_finished(), "the writer holds alone");
    drop(gw);
    let g3 = late_reader.await.unwrap().unwrap();
    assert!(g3.is_held());
    s.close().await;
}

#[tokio::test(start_paused = true)]
async fn guarded_writes_go_through_only_while_the_lock_is_held() {
    let zk = TestZk::new();
    zk.create("/data", b"v0").unwrap();
    let (s, client) = session(&zk);
    let guard = s.mutex(PATH).acquire().await.unwrap();
    guard
        .guarded_set_data("/data", b"v1".to_vec())
        .await
        .unwrap();
    assert_eq!(zk.server().data("/data").as_deref(), Some(&b"v1"[..]));
    zk.expire_session(client);
    tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .unwrap();
    let refused = guard.guarded_set_data("/data", b"v2".to_vec()).await;
    assert!(
        matches!(
            refused,
            Err(GuardedWriteError::NotHolding | GuardedWriteError::Closed)
        ),
        "{refused:?}"
    );
    assert_eq!(zk.server().data("/data").as_deref(), Some(&b"v1"[..]));
    s.close().await;
}

/// Each delete a transport performs: its path and its answer (`None` while
/// unanswered).
type Deletes = Arc<StdMutex<Vec<(String, Option<Result<(), ZkCode>>)>>>;

/// The memory transport, noting its deletes, each bounded by a tokio timer
/// as the real transports bound every request. It has no `multi`: the
/// tests that use it write nothing guarded.
struct NotingDeletes {
    inner: MemoryTransport,
    deletes: Deletes,
}

#[async_trait]
impl Transport for NotingDeletes {
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode> {
        let Request::Delete { path, .. } = &request else {
            return self.inner.perform(request).await;
        };
        let bound = tokio::time::sleep(Duration::from_secs(5));
        let n = {
            let mut deletes = self.deletes.lock().unwrap();
            deletes.push((path.clone(), None));
            deletes.len() - 1
        };
        let result = tokio::select! {
            result = self.inner.perform(request) => result,
            () = bound => Err(ZkCode::OperationTimeout),
        };
        self.deletes.lock().unwrap()[n].1 = Some(result.as_ref().map(|_| ()).map_err(|c| *c));
        result
    }

    async fn close(&self) {
        self.inner.close().await;
    }
}

fn noting_session(zk: &TestZk) -> (Session, Deletes) {
    let (inner, events) = zk.connect(TIMEOUT);
    let deletes = Deletes::default();
    let transport = NotingDeletes {
        inner,
        deletes: Arc::clone(&deletes),
    };
    (Session::from_transport(transport, events), deletes)
}

/// Polls `f` once, as its task's first turn: whatever it does before its
/// first await is done when this returns, and nothing else ran meanwhile.
async fn first_poll<F: Future>(f: F) -> Pin<Box<F>> {
    let mut f = Box::pin(f);
    std::future::poll_fn(|cx| {
        let _ = f.as_mut().poll(cx);
        std::task::Poll::Ready(())
    })
    .await;
    f
}

#[tokio::test(start_paused = true)]
async fn a_release_sends_its_delete_from_the_releasing_task_and_the_server_sees_it_once() {
    let zk = TestZk::new();
    let (s, deletes) = noting_session(&zk);
    let (a, b) = (Arc::new(s.mutex(PATH)), Arc::new(s.mutex(PATH)));
    let mut guard = a.acquire().await.unwrap();
    let mut waiter = Arc::clone(&b);
    let mut waiting = tokio::spawn(async move { waiter.acquire().await });
    // Handed back and forth: the release's delete and its own `NodeDeleted`
    // race in every round, so a hold that read its own delete's event as a
    // revocation would fail here within a few rounds.
    for round in 0..64 {
        run_a_while().await;
        let status = guard.status();
        let node = format!("{PATH}/{}", guard.node());
        // The release's first poll, before any other task runs: its
        // delete is already with the client.
        let release = first_poll(guard.release()).await;
        assert_eq!(
            deletes.lock().unwrap().first().map(|d| d.0.clone()),
            Some(node.clone()),
            "round {round}: the delete went out from the releasing task"
        );
        release.await;
        let next = waiting.await.unwrap().unwrap();
        assert_ne!(
            format!("{PATH}/{}", next.node()),
            node,
            "round {round}: the waiter holds next"
        );
        assert_eq!(
            deletes.lock().unwrap().drain(..).collect::<Vec<_>>(),
            [(node.clone(), Some(Ok(())))],
            "round {round}: one delete of the released node"
        );
        let ended = status.borrow().clone();
        assert_eq!(
            (ended.role, ended.last_demotion),
            (Role::Closed, Some(DemotionReason::Closed)),
            "round {round}: the hold was released, not revoked"
        );
        assert!(
            !children(&zk, PATH)
                .iter()
                .any(|c| format!("{PATH}/{c}") == node),
            "round {round}: the released node is gone"
        );
        guard = next;
        waiter = if round % 2 == 0 {
            Arc::clone(&a)
        } else {
            Arc::clone(&b)
        };
        waiting = tokio::spawn(async move { waiter.acquire().await });
    }
    drop(guard);
    waiting.abort();
    s.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_release_cancelled_at_once_still_deletes_the_node_once() {
    let zk = TestZk::new();
    let (s, deletes) = noting_session(&zk);
    let mutex = s.mutex(PATH);
    let guard = mutex.acquire().await.unwrap();
    let status = guard.status();
    let node = format!("{PATH}/{}", guard.node());
    // The release is dropped after its first poll: its delete is the
    // session's, not the releasing task's, and is seen to the end.
    drop(first_poll(guard.release()).await);
    for _ in 0..50 {
        if status.borrow().role == Role::Closed {
            break;
        }
        run_a_while().await;
    }
    assert_eq!(status.borrow().role, Role::Closed);
    assert_eq!(*deletes.lock().unwrap(), [(node, Some(Ok(())))]);
    assert!(children(&zk, PATH).is_empty(), "no node left behind");
    s.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_guard_dropped_on_a_thread_outside_the_runtime_still_releases() {
    let zk = TestZk::new();
    let (s, deletes) = noting_session(&zk);
    let mutex = s.mutex(PATH);
    let guard = mutex.acquire().await.unwrap();
    let status = guard.status();
    let errors = status.borrow().stats.op_errors;
    let node = format!("{PATH}/{}", guard.node());
    // Its delete cannot be polled there (the transport's timer needs the
    // runtime): the session's pump sends it.
    std::thread::spawn(move || drop(guard)).join().unwrap();
    run_a_while().await;
    assert_eq!(status.borrow().role, Role::Closed);
    assert_eq!(
        status.borrow().stats.op_errors,
        errors,
        "its one delete answered"
    );
    assert_eq!(*deletes.lock().unwrap(), [(node, Some(Ok(())))]);
    assert!(children(&zk, PATH).is_empty());
    s.close().await;
}

/// A holder frozen past its lease (SIGSTOP, a GC pause), then resumed: the
/// clock has jumped, no task has run yet, the status still says it holds.
/// Its answers compare the lease with the clock, so none says "held" past
/// the lease; and once the driver catches up, `lost()` says why.
#[tokio::test(start_paused = true)]
async fn nothing_says_held_past_the_lease_even_before_the_driver_runs() {
    use futures_util::FutureExt;
    use tokio::time::Instant;

    let zk = TestZk::new();
    let (s, _) = session(&zk);
    let guard = s.mutex(PATH).acquire().await.unwrap();
    let election = s.election("/svc/leader").id("a").join().await.unwrap();
    election.wait_leader().await.unwrap();
    run_a_while().await;
    assert!(guard.is_held());
    assert!(election.role().is_leader());
    let lost = tokio::spawn(guard.lost());
    let lease = guard.lease().borrow().expect("a holder has a lease");
    let leading = election.lease().borrow().expect("a leader has a lease");
    // The freeze: the clock moves 2.3 s past the later lease before any
    // task runs again (the first poll of `advance` moves it; the yield
    // after it is never awaited).
    let frozen = lease.max(leading) - Instant::now() + Duration::from_millis(2300);
    assert!(tokio::time::advance(frozen).now_or_never().is_none());
    assert_eq!(
        guard.status().borrow().role,
        Role::Leader(guard.token()),
        "the driver has not run: the status still says it holds"
    );
    assert!(!guard.is_held(), "held 2.3 s past the lease");
    assert!(matches!(election.role(), Role::Suspended(_)));
    assert!(matches!(
        guard.guarded_set_data("/data", b"x".to_vec()).await,
        Err(GuardedWriteError::NotHolding)
    ));
    // The driver catches up: the hold was lost to the silence, and says so.
    let reason = tokio::time::timeout(Duration::from_secs(10), lost)
        .await
        .expect("lost() resolves")
        .unwrap();
    assert_eq!(reason, DemotionReason::Lost);
    // No status ever said the hold had ended without saying why, for a
    // reader on another thread to catch: the step's notices (suspended,
    // demoted for lost contact) are counted before the role moves.
    let token = guard.token();
    let sent = guard.hold.outputs.sent.lock().unwrap().clone();
    let ended: Vec<_> = sent
        .iter()
        .filter(|s| !matches!(s.role, Role::Leader(t) | Role::Suspended(t) if t == token))
        .filter(|s| s.stats.elections > 0)
        .map(|s| (s.role, s.last_demotion))
        .collect();
    assert!(!ended.is_empty());
    assert!(
        ended
            .iter()
            .all(|(_, reason)| *reason == Some(DemotionReason::Lost)),
        "statuses sent after the hold ended: {ended:?}"
    );
    s.close().await;
}

/// `lost()` resolves with the reason the hold ended: expired, revoked,
/// lost contact, closed.
#[tokio::test(start_paused = true)]
async fn lost_says_why_the_hold_ended() {
    // The session expired.
    let zk = TestZk::new();
    let (s, client) = session(&zk);
    let guard = s.mutex(PATH).acquire().await.unwrap();
    zk.expire_session(client);
    let reason = tokio::time::timeout(Duration::from_secs(10), guard.lost()).await;
    assert_eq!(reason.unwrap(), DemotionReason::Expired);
    s.close().await;
    // An operator deleted the node.
    let (s, _) = session(&zk);
    let guard = s.mutex(PATH).acquire().await.unwrap();
    zk.delete(&format!("{PATH}/{}", guard.node())).unwrap();
    let reason = tokio::time::timeout(Duration::from_secs(10), guard.lost()).await;
    assert_eq!(reason.unwrap(), DemotionReason::Revoked);
    s.close().await;
    // The server went quiet for longer than the lease (a partition well past
    // the session timeout: no expiry is heard of first).
    let (s, client) = session(&zk);
    let guard = s.mutex(PATH).acquire().await.unwrap();
    zk.partition(client, Duration::from_secs(30));
    let reason = tokio::time::timeout(Duration::from_secs(10), guard.lost()).await;
    assert_eq!(reason.unwrap(), DemotionReason::Lost);
    zk.heal();
    s.close().await;
    // The session was closed under it.
    let (s, _) = session(&zk);
    let guard = s.mutex(PATH).acquire().await.unwrap();
    let lost = tokio::spawn(guard.lost());
    s.close().await;
    let reason = tokio::time::timeout(Duration::from_secs(10), lost).await;
    assert_eq!(reason.unwrap().unwrap(), DemotionReason::Closed);
}
