//! Weighted permits and cooperative revocation on the lock handles, on the
//! memory transport in paused (virtual) time.

use std::sync::Arc;
use std::time::Duration;

use zkelect_core::ConfigError;

use crate::testkit::TestZk;
use crate::{LockError, RevocationRequestError, Session};

const PATH: &str = "/locks/family";
const TIMEOUT: Duration = Duration::from_secs(2);

fn session(zk: &TestZk) -> Session {
    let (transport, events) = zk.connect(TIMEOUT);
    Session::from_transport(transport, events)
}

async fn run_a_while() {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

#[tokio::test(start_paused = true)]
async fn a_request_for_three_is_not_overtaken_by_later_requests_for_one() {
    let zk = TestZk::new();
    let s = session(&zk);
    let sem = Arc::new(s.semaphore(PATH, 4));
    let two = sem.acquire_many(2).await.unwrap();
    let three = {
        let sem = Arc::clone(&sem);
        tokio::spawn(async move { sem.acquire_many(3).await })
    };
    run_a_while().await;
    let one = {
        let sem = Arc::clone(&sem);
        tokio::spawn(async move { sem.acquire().await })
    };
    run_a_while().await;
    assert!(!three.is_finished(), "2 + 3 > 4: the three wait");
    assert!(
        !one.is_finished(),
        "two permits are free, but the one queued behind the three waits for them"
    );
    assert_eq!(zk.server().children(PATH).len(), 3);
    two.release().await;
    let three = three.await.unwrap().unwrap();
    let one = one.await.unwrap().unwrap();
    assert!(three.is_held() && one.is_held(), "3 + 1 fit in 4");
    // Four permits are taken: even one more waits.
    assert!(sem
        .try_acquire(Duration::from_millis(500))
        .await
        .unwrap()
        .is_none());
    drop(one);
    let again = sem
        .try_acquire_many(1, Duration::from_secs(1))
        .await
        .unwrap();
    assert!(again.is_some(), "the one given back is taken again");
    drop((three, again));
    run_a_while().await;
    assert!(zk.server().children(PATH).is_empty(), "every node deleted");
    s.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_weight_of_zero_or_above_the_permits_is_an_error_at_once_and_leaves_no_node() {
    let zk = TestZk::new();
    let s = session(&zk);
    let sem = s.semaphore(PATH, 3);
    for n in [0, 4, u32::MAX] {
        let refused = tokio::time::timeout(Duration::ZERO, sem.acquire_many(n))
            .await
            .expect("refused at once, not a wait");
        assert!(
            matches!(refused, Err(LockError::Config(ConfigError::InvalidWeight { weight, .. })) if weight == n),
            "{n}: {refused:?}"
        );
        let timed = sem.try_acquire_many(n, Duration::from_secs(1)).await;
        assert!(matches!(timed, Err(LockError::Config(_))), "{n}");
    }
    // All the permits at once is a request like any other.
    let all = sem.acquire_many(3).await.unwrap();
    assert_eq!(zk.server().children(PATH), vec![all.node().to_owned()]);
    drop(all);
    s.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_revocable_holder_hears_each_request_and_decides() {
    let zk = TestZk::new();
    let (s1, s2) = (session(&zk), session(&zk));
    let guard = s1.mutex(PATH).revocable(true).acquire().await.unwrap();
    let requested = guard.revocation_requested();
    tokio::pin!(requested);
    assert!(
        tokio::time::timeout(Duration::from_secs(1), &mut requested)
            .await
            .is_err(),
        "nothing asked yet"
    );
    let waiter = s2.mutex(PATH);
    s2.request_revocation(PATH, guard.node()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(1), &mut requested)
        .await
        .expect("the holder hears the request");
    // Ignored: it still holds, and the waiter stays out.
    assert!(guard.is_held());
    assert!(waiter
        .try_acquire(Duration::from_millis(500))
        .await
        .unwrap()
        .is_none());
    // Asked again: counted again, for a holder that waits for the next one.
    s2.request_revocation(PATH, guard.node()).await.unwrap();
    let mut status = guard.status();
    tokio::time::timeout(
        Duration::from_secs(1),
        status.wait_for(|s| s.stats.revocations_requested == 2),
    )
    .await
    .expect("the second request is heard")
    .unwrap();
    // Honoured: released, and the waiter gets in.
    guard.release().await;
    let next = waiter.try_acquire(Duration::from_secs(1)).await.unwrap();
    assert!(next.is_some());
    drop(next);
    s1.close().await;
    s2.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_holder_that_is_not_revocable_never_hears_a_request() {
    let zk = TestZk::new();
    let s = session(&zk);
    let sem = s.semaphore(PATH, 2);
    let guard = sem.acquire_many(2).await.unwrap();
    s.request_revocation(PATH, guard.node()).await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_secs(2), guard.revocation_requested())
            .await
            .is_err(),
        "delivered, but not listened for"
    );
    assert_eq!(guard.status().borrow().stats.revocations_requested, 0);
    assert!(guard.is_held());
    s.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_request_to_a_gone_node_or_on_a_closed_session_is_a_typed_error() {
    let zk = TestZk::new();
    let s = session(&zk);
    let guard = s
        .rw_lock(PATH)
        .revocable(true)
        .write()
        .acquire()
        .await
        .unwrap();
    let node = guard.node().to_owned();
    guard.release().await;
    let gone = s.request_revocation(PATH, &node).await;
    assert_eq!(
        gone,
        Err(RevocationRequestError::Gone {
            path: format!("{PATH}/{node}")
        })
    );
    assert!(matches!(
        s.request_revocation("no-slash", "n").await,
        Err(RevocationRequestError::Config(
            ConfigError::InvalidPath { .. }
        ))
    ));
    s.close().await;
    let closed = tokio::time::timeout(Duration::from_secs(5), s.request_revocation(PATH, &node))
        .await
        .expect("a closed session answers, it does not hang");
    assert_eq!(closed, Err(RevocationRequestError::Closed));
}

/// On a runtime with threads the request's task may wake on its machine's
/// last status while the pump is still sending the answer: the answer is
/// still the one returned (a task that read the notices too early said
/// `Closed` for a delivered request).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_delivered_request_is_answered_ok_on_a_threaded_runtime() {
    let zk = TestZk::new();
    let s = session(&zk);
    let guard = s.mutex(PATH).revocable(true).acquire().await.unwrap();
    for i in 0..200 {
        let answer = s.request_revocation(PATH, guard.node()).await;
        assert_eq!(answer, Ok(()), "request {i}");
    }
    // Writes that land between a notification and the holder's next read
    // are heard as one: at least one, at most one per write.
    let mut status = guard.status();
    let heard = status
        .wait_for(|s| s.stats.revocations_requested > 0)
        .await
        .unwrap()
        .stats
        .revocations_requested;
    assert!(heard <= 200, "{heard}");
    drop(guard);
    s.close().await;
}

/// A downgrade asked of a hold that is not a write lock's (a mutex's, a
/// read lock's) is refused with `NotWriter`, and the hold goes on as it was.
#[tokio::test(start_paused = true)]
async fn a_downgrade_of_a_hold_that_is_not_a_writers_is_refused_and_the_hold_goes_on() {
    let zk = TestZk::new();
    let s = session(&zk);
    let mutex = s.mutex(PATH).acquire().await.unwrap();
    assert!(matches!(
        mutex.downgrade().await,
        Err(crate::DowngradeError::NotWriter)
    ));
    assert!(mutex.is_held());
    drop(mutex);
    run_a_while().await;
    let rw = s.rw_lock("/locks/rw");
    let read = rw.read().acquire().await.unwrap();
    assert!(matches!(
        read.downgrade().await,
        Err(crate::DowngradeError::NotWriter)
    ));
    assert!(read.is_held());
    drop(read);
    s.close().await;
}
