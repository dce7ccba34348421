//! Multi-locks on the memory transport, in paused (virtual) time.

use std::time::Duration;

use zkelect_core::{DemotionReason, MultiLockError};

use crate::testkit::TestZk;
use crate::{LockError, Session};

const TIMEOUT: Duration = Duration::from_secs(2);

fn session(zk: &TestZk) -> Session {
    let (transport, events) = zk.connect(TIMEOUT);
    Session::from_transport(transport, events)
}

fn children(zk: &TestZk, path: &str) -> Vec<String> {
    zk.server().children(path)
}

/// Two multi-locks given the same paths in opposite orders, on two
/// sessions, many rounds: never both hold, and both keep getting their
/// turn (no deadlock).
#[tokio::test(start_paused = true)]
async fn two_multi_locks_in_opposite_orders_exclude_and_never_deadlock() {
    let zk = TestZk::new();
    let (s1, s2) = (session(&zk), session(&zk));
    let held = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (s, paths) in [(&s1, ["/m/a", "/m/b"]), (&s2, ["/m/b", "/m/a"])] {
        let lock = s.multi_lock(paths);
        let held = std::sync::Arc::clone(&held);
        tasks.push(tokio::spawn(async move {
            let mut rounds = 0;
            for _ in 0..10 {
                let guard = lock.acquire().await.expect("acquires");
                assert_eq!(guard.tokens().len(), 2);
                let before = held.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                assert_eq!(before, 0, "both multi-locks hold at once");
                tokio::time::sleep(Duration::from_millis(30)).await;
                held.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                guard.release().await;
                rounds += 1;
            }
            rounds
        }));
    }
    for task in tasks {
        let rounds = tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("no deadlock")
            .expect("no panic");
        assert_eq!(rounds, 10);
    }
    assert!(children(&zk, "/m/a").is_empty() && children(&zk, "/m/b").is_empty());
}

/// `try_acquire` gives up when one part is held elsewhere, and releases
/// the part it took.
#[tokio::test(start_paused = true)]
async fn try_acquire_gives_up_and_releases_what_it_took() {
    let zk = TestZk::new();
    let s = session(&zk);
    let other = s.mutex("/m/b");
    let blocker = other.acquire().await.unwrap();
    let both = s.multi_lock(["/m/a", "/m/b"]);
    let got = both.try_acquire(Duration::from_secs(1)).await.unwrap();
    assert!(got.is_none(), "gave up");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(children(&zk, "/m/a").is_empty(), "/m/a released");
    assert_eq!(children(&zk, "/m/b").len(), 1, "only the blocker's node");
    drop(blocker);
    let guard = both.try_acquire(Duration::from_secs(2)).await.unwrap();
    let guard = guard.expect("held once the blocker let go");
    assert!(guard.token("/m/a").is_some() && guard.token("/m/b").is_some());
}

/// A part's node deleted while the whole holds: the guard reports that
/// path lost (revoked) and the other part is released.
#[tokio::test(start_paused = true)]
async fn a_lost_part_is_reported_by_the_guard_and_the_rest_released() {
    let zk = TestZk::new();
    let s = session(&zk);
    let both = s.multi_lock(["/m/a", "/m/b"]);
    let guard = both.acquire().await.unwrap();
    assert!(guard.is_held());
    let node = children(&zk, "/m/b").pop().unwrap();
    zk.delete(&format!("/m/b/{node}")).unwrap();
    let (path, reason) = tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("told");
    assert_eq!((path.as_str(), reason), ("/m/b", DemotionReason::Revoked));
    assert!(!guard.is_held());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(children(&zk, "/m/a").is_empty(), "/m/a released with it");
    // The lost hold no longer counts: the handle is taken again, new
    // tokens, and the stale guard's drop leaves the new hold be.
    let again = both.acquire().await.unwrap();
    assert!(again.token("/m/a") > guard.token("/m/a"));
    drop(guard);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(again.is_held());
    assert_eq!(children(&zk, "/m/a").len(), 1);
    // One acquisition at a time per handle.
    assert!(matches!(both.acquire().await, Err(LockError::InUse)));
}

/// The guard's lease is the parts' earliest, within the session timeout,
/// and its held watch is true; losing one part turns held false and takes
/// the lease away (the whole holds only while every part does).
#[tokio::test(start_paused = true)]
async fn the_guards_lease_and_held_watch_follow_every_part() {
    let zk = TestZk::new();
    let s = session(&zk);
    let both = s.multi_lock(["/m/a", "/m/b"]);
    let guard = both.acquire().await.unwrap();
    let (mut lease, mut held) = (guard.lease(), guard.held());
    // Already so when the acquisition returns: a supervisor reads them at
    // once.
    assert!(*held.borrow_and_update());
    let now = tokio::time::Instant::now();
    let until = lease.borrow_and_update().expect("a lease while held");
    assert!(
        until > now && until <= now + TIMEOUT,
        "{until:?} vs {now:?}"
    );
    let node = children(&zk, "/m/a").pop().unwrap();
    zk.delete(&format!("/m/a/{node}")).unwrap();
    tokio::time::timeout(Duration::from_secs(5), held.wait_for(|h| !h))
        .await
        .expect("told in time")
        .expect("open");
    tokio::time::timeout(Duration::from_secs(5), lease.wait_for(Option::is_none))
        .await
        .expect("told in time")
        .expect("open");
    assert!(!guard.is_held());
}

/// Bad path sets are refused with a typed error.
#[tokio::test(start_paused = true)]
async fn a_multi_lock_without_paths_or_with_a_path_twice_is_refused() {
    let zk = TestZk::new();
    let s = session(&zk);
    let none: [&str; 0] = [];
    assert!(matches!(
        s.multi_lock(none).acquire().await,
        Err(LockError::MultiLock(MultiLockError::Empty))
    ));
    assert!(matches!(
        s.multi_lock(["/m/a", "/m/a"]).acquire().await,
        Err(LockError::MultiLock(MultiLockError::Duplicate(p))) if p == "/m/a"
    ));
    assert!(matches!(
        s.multi_lock(["relative"]).acquire().await,
        Err(LockError::Config(_))
    ));
}
