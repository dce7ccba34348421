//! The lock handles of a [`Session`] against a real ZooKeeper server:
//! `session.mutex`, `session.semaphore` and
//! `session.rw_lock`, in process, through the library's own API.
//!
//! * a mutex is reentrant on its handle: a second `acquire` on the holding
//!   handle returns at once with the same hold, and only the last release
//!   deletes the node (the server's children say so);
//! * a cancelled `acquire` (the future dropped while queued, and a
//!   `try_acquire` that times out) leaves no node behind, and the next waiter
//!   still gets the lock;
//! * readers share, writers exclude, in queue order: a writer waits for the
//!   readers before it, a reader queued behind a writer waits for it;
//! * a semaphore with k permits never has more than k holders;
//! * guarded writes through a `LockGuard` go through while it holds and are
//!   refused once the hold is lost;
//! * `lost()` resolves when the holder's connection is cut until the server
//!   expires its session, before the next holder is told it holds.
//!
//! Who holds is judged by each holder's own belief (a [`Witness`] each holder
//! enters after its `acquire` returned and leaves before it releases), never
//! by reading the queue. One server per test, shared by its sessions.
//!
//! Run once per real client by `scenarios_on!` (`on_zookeeper_async::…`,
//! `on_zookeeper_client::…`).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zkelect::{
    DemotionReason, GuardedWriteError, LockError, LockGuard, RwLock, Semaphore, Session,
};
use zkelect_tests::Proxy;
use zookeeper_async::{Acl, CreateMode};

use crate::harness::{raw, retry, start_server, Client};
use crate::locks::{
    children, close, in_time, session, wait_children, wait_count, Bed, Holder, Side, Witness,
};

/// How long a `try_acquire` that is expected to time out waits.
const SHORT: Duration = Duration::from_millis(300);
/// How long the tests watch a waiter that must not be let in yet.
const QUIET: Duration = Duration::from_millis(400);

/// Awaits an acquisition (see [`in_time`]); panics if it fails.
async fn acquired(what: &str, f: impl Future<Output = Result<LockGuard, LockError>>) -> LockGuard {
    in_time(what, f)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// A holder of `lock`'s read side (see [`Holder::spawn`]).
fn read(name: &'static str, path: &str, lock: &Arc<RwLock>, witness: &Witness) -> Holder {
    let lock = Arc::clone(lock);
    Holder::spawn(name, &[path], Side::Read, witness, async move {
        lock.read().acquire().await
    })
}

/// A holder of `lock`'s write side (see [`Holder::spawn`]).
fn write(name: &'static str, path: &str, lock: &Arc<RwLock>, witness: &Witness) -> Holder {
    let lock = Arc::clone(lock);
    Holder::spawn(name, &[path], Side::Write, witness, async move {
        lock.write().acquire().await
    })
}

// ----- scenarios ---------------------------------------------------------------------

/// A second and third `acquire` on the holding handle return at once with
/// the same hold; the server keeps one node until the last guard is
/// released; another handle is kept out until then and gets in after.
async fn a_mutex_is_reentrant_and_the_last_release_deletes(client: Client) {
    const PATH: &str = "/handles/reentrant";
    let bed = Bed::start(client).await;
    let (zk, s1, s2) = (&bed.zk, &bed.s1, &bed.s2);
    let lock = s1.mutex(PATH);
    let other = s2.mutex(PATH);

    let outer = lock.acquire().await.expect("the first acquire");
    let mut inner = Vec::new();
    for _ in 0..2 {
        let again = tokio::time::timeout(Duration::ZERO, lock.acquire())
            .await
            .expect("an acquire on the holding handle returns at once")
            .expect("an acquire on the holding handle succeeds");
        assert_eq!(again.token(), outer.token(), "the same hold");
        assert_eq!(again.node(), outer.node(), "the same node");
        inner.push(again);
    }
    assert_eq!(children(zk, PATH).await, vec![outer.node().to_owned()]);

    for guard in inner.drain(..) {
        guard.release().await;
        assert!(outer.is_held(), "an inner release does not end the hold");
        assert_eq!(
            children(zk, PATH).await,
            vec![outer.node().to_owned()],
            "an inner release deleted the node"
        );
    }
    let kept_out = other.try_acquire(SHORT).await.expect("try_acquire");
    assert!(
        kept_out.is_none(),
        "another handle got in while it was held"
    );

    let first = outer.token();
    outer.release().await;
    wait_children(zk, PATH, &[], "the last release to delete the node").await;
    let next = acquired(
        "the other handle to get the lock after the last release",
        other.acquire(),
    )
    .await;
    assert!(next.token() > first, "a later hold has a higher token");
    next.release().await;
    bed.finish().await;
}

/// An `acquire` cancelled while queued (its future dropped, and one dropped
/// before its create was answered) and a `try_acquire` that timed out leave
/// no node behind, and the waiter behind them gets the lock.
async fn a_cancelled_acquire_leaves_no_node_and_the_next_waiter_gets_the_lock(client: Client) {
    const PATH: &str = "/handles/cancel";
    let bed = Bed::start(client).await;
    let (zk, s1, s2) = (&bed.zk, &bed.s1, &bed.s2);
    let holder = s1.mutex(PATH).acquire().await.expect("the holder acquires");
    let held = holder.node().to_owned();

    // Queued, then cancelled; the handle outlives the cancelled future.
    let waiter = Arc::new(s2.mutex(PATH));
    let pending = {
        let waiter = Arc::clone(&waiter);
        tokio::spawn(async move { waiter.acquire().await.map(drop) })
    };
    wait_count(zk, PATH, 2, "the waiter to queue").await;
    pending.abort();
    assert!(pending.await.expect_err("aborted").is_cancelled());
    wait_children(zk, PATH, &[&held], "the cancelled acquire's node to go").await;

    // A try_acquire that times out deletes its node before it returns.
    let timed_out = waiter.try_acquire(SHORT).await.expect("try_acquire");
    assert!(timed_out.is_none(), "the holder still holds");
    assert_eq!(
        children(zk, PATH).await,
        vec![held.clone()],
        "the timed-out try_acquire left its node"
    );

    // Dropped at its first poll: its machine is closed before its create
    // can have been answered (perhaps before it was sent).
    let early = s2.mutex(PATH);
    let _ = tokio::time::timeout(Duration::ZERO, early.acquire()).await;

    let next = Arc::new(s2.mutex(PATH));
    let got = {
        let next = Arc::clone(&next);
        tokio::spawn(async move { next.acquire().await })
    };
    let first = holder.token();
    tokio::time::sleep(QUIET).await;
    assert!(!got.is_finished(), "the next waiter got in while held");
    holder.release().await;
    let guard = in_time("the next waiter to get the lock", got)
        .await
        .expect("its task")
        .expect("its acquire");
    assert!(guard.token() > first);
    // Every cancelled acquisition's node is gone: only the new holder's is left.
    wait_children(
        zk,
        PATH,
        &[guard.node()],
        "only the new holder's node to be left",
    )
    .await;
    // The handles of the cancelled acquisitions still work.
    drop(guard);
    let again = acquired("the cancelled handle to acquire later", waiter.acquire()).await;
    again.release().await;
    bed.finish().await;
}

/// Two readers hold at once; a writer queued after them waits for both; a
/// reader queued after the writer waits for the writer; in that order, with
/// never a writer beside anyone in the holders' own beliefs.
async fn readers_share_and_writers_exclude(client: Client) {
    const PATH: &str = "/handles/rw";
    let bed = Bed::start(client).await;
    let (zk, s1, s2) = (&bed.zk, &bed.s1, &bed.s2);
    let witness = Witness::default();
    let lock = |s: &Session| Arc::new(s.rw_lock(PATH));

    let r1 = read("r1", PATH, &lock(s1), &witness);
    r1.wait_holds(&witness).await;
    let r2 = read("r2", PATH, &lock(s2), &witness);
    r2.wait_holds(&witness).await;
    assert_eq!(witness.most(PATH), 2, "two readers hold at once");

    let w = write("w", PATH, &lock(s1), &witness);
    wait_count(zk, PATH, 3, "the writer to queue").await;
    let r3 = read("r3", PATH, &lock(s2), &witness);
    wait_count(zk, PATH, 4, "the late reader to queue").await;
    tokio::time::sleep(QUIET).await;
    assert!(
        !witness.has_entered("w"),
        "the writer got in beside readers"
    );
    assert!(
        !witness.has_entered("r3"),
        "a reader got in ahead of the writer queued before it"
    );

    r1.release().await;
    tokio::time::sleep(QUIET).await;
    assert!(
        !witness.has_entered("w"),
        "the writer got in while a reader held"
    );
    r2.release().await;
    w.wait_holds(&witness).await;
    tokio::time::sleep(QUIET).await;
    assert!(
        !witness.has_entered("r3"),
        "a reader got in while the writer held"
    );
    w.release().await;
    r3.wait_holds(&witness).await;
    r3.release().await;

    witness.assert_clean();
    assert_eq!(witness.entered(), ["r1", "r2", "w", "r3"]);
    wait_children(zk, PATH, &[], "every node to be released").await;
    bed.finish().await;
}

/// Six contenders on two sessions take a 2-permit semaphore four times
/// each: never more than two hold at once in their own beliefs, and two
/// do hold together.
async fn a_semaphore_never_has_more_than_k_holders(client: Client) {
    const PATH: &str = "/handles/semaphore";
    const PERMITS: u32 = 2;
    const CONTENDERS: usize = 6;
    const ROUNDS: usize = 4;
    let bed = Bed::start(client).await;
    let (zk, s1, s2) = (&bed.zk, &bed.s1, &bed.s2);
    let witness = Witness::default();
    let mut tasks = Vec::new();
    for c in 0..CONTENDERS {
        let s = if c % 2 == 0 { s1 } else { s2 };
        let sem: Semaphore = s.semaphore(PATH, PERMITS);
        let witness = witness.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..ROUNDS {
                let who = format!("c{c}/{round}");
                let guard = acquired(&who, sem.acquire()).await;
                witness.enter(
                    &who,
                    &[PATH],
                    Side::Permits {
                        weight: 1,
                        of: PERMITS,
                    },
                );
                tokio::time::sleep(Duration::from_millis(30)).await;
                witness.leave(&who);
                guard.release().await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("a contender panicked");
    }
    witness.assert_clean();
    assert_eq!(witness.entered().len(), CONTENDERS * ROUNDS);
    assert_eq!(witness.most(PATH), PERMITS, "the permits were shared");
    wait_children(zk, PATH, &[], "every permit to be released").await;
    bed.finish().await;
}

/// A holder whose connection is black-holed: its guard's `lost()` resolves
/// (the lease lapsed, or the session expired), before a rival on another
/// session is told it holds; a guarded write through the lost guard is
/// refused and writes nothing, while one through the rival's goes through;
/// once the connection heals, the lost hold's node is gone with its session.
async fn a_lost_hold_is_told_and_its_guarded_writes_are_refused(client: Client) {
    const PATH: &str = "/handles/lost";
    const DATA: &str = "/handles-data";
    let server = start_server();
    let hosts = server.connect_string();
    let zk = raw(&hosts, None).await;
    retry(|| {
        zk.create(
            DATA,
            b"v0".to_vec(),
            Acl::open_unsafe().clone(),
            CreateMode::Persistent,
        )
    })
    .await;
    let proxy = Proxy::start(server.addr()).expect("a proxy");
    let ours = session(client, &proxy.connect_string()).await;
    let theirs = session(client, &hosts).await;
    let guard = ours.mutex(PATH).acquire().await.expect("acquire");

    let written = guard.guarded_set_data(DATA, b"v1".to_vec()).await;
    if client.has_multi() {
        written.expect("a guarded write while holding");
        let (data, _) = retry(|| zk.get_data(DATA, false)).await;
        assert_eq!(data, b"v1");
    } else {
        assert_eq!(written, Err(GuardedWriteError::Unsupported));
    }

    let lost = guard.lost();
    let lost_at = tokio::spawn(async move { (lost.await, Instant::now()) });
    let rival = Arc::new(theirs.mutex(PATH));
    let rival_at = {
        let rival = Arc::clone(&rival);
        tokio::spawn(async move {
            let g = rival.acquire().await;
            (g, Instant::now())
        })
    };
    wait_count(&zk, PATH, 2, "the rival to queue").await;
    tokio::time::sleep(QUIET).await;
    assert!(!lost_at.is_finished(), "lost() resolved while connected");

    proxy.blackhole();
    let (reason, lost_at) = in_time("lost() to resolve once the connection is gone", lost_at)
        .await
        .expect("the lost() task");
    assert!(
        matches!(reason, DemotionReason::Lost | DemotionReason::Expired),
        "{reason:?}"
    );
    assert!(!guard.is_held());
    let refused = guard.guarded_set_data(DATA, b"v2".to_vec()).await;
    assert!(
        matches!(
            refused,
            Err(GuardedWriteError::NotHolding | GuardedWriteError::Closed)
        ),
        "a write through a lost guard: {refused:?}"
    );

    let (next, rival_at) = in_time(
        "the rival to get the lock once the server expired the holder",
        rival_at,
    )
    .await
    .expect("the rival's task");
    let next = next.expect("the rival's acquire");
    assert!(
        lost_at <= rival_at,
        "the rival was told it holds {:?} before the holder learned it lost",
        lost_at - rival_at
    );
    assert!(next.token() > guard.token());
    if client.has_multi() {
        next.guarded_set_data(DATA, b"v3".to_vec())
            .await
            .expect("the new holder's guarded write");
    }
    let (data, _) = retry(|| zk.get_data(DATA, false)).await;
    let want: &[u8] = if client.has_multi() { b"v3" } else { b"v0" };
    assert_eq!(data, want, "the lost guard's write must not land");

    proxy.heal();
    wait_children(&zk, PATH, &[next.node()], "the lost hold's node to be gone").await;
    next.release().await;
    drop(guard);
    close(&[&ours, &theirs]).await;
    let _ = zk.close().await;
}

scenarios_on!(
    on_zookeeper_async,
    super::Client::ZookeeperAsync,
    [
        a_mutex_is_reentrant_and_the_last_release_deletes,
        a_cancelled_acquire_leaves_no_node_and_the_next_waiter_gets_the_lock,
        readers_share_and_writers_exclude,
        a_semaphore_never_has_more_than_k_holders,
        a_lost_hold_is_told_and_its_guarded_writes_are_refused,
    ]
);
scenarios_on!(
    on_zookeeper_client,
    super::Client::ZookeeperClient,
    [
        a_mutex_is_reentrant_and_the_last_release_deletes,
        a_cancelled_acquire_leaves_no_node_and_the_next_waiter_gets_the_lock,
        readers_share_and_writers_exclude,
        a_semaphore_never_has_more_than_k_holders,
        a_lost_hold_is_told_and_its_guarded_writes_are_refused,
    ]
);
