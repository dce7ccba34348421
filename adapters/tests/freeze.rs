//! The library's answers right after a freeze, through its public API alone:
//! a holder frozen past its lease (SIGSTOP, a long GC pause, a VM migration)
//! is resumed with its clock far ahead and not one of its tasks run yet.
//! Its status still says it holds — nothing has told it otherwise — so an
//! answer that read the status alone would say "held". Each must compare
//! the lease with the clock instead: no guard says it holds, no election
//! says it leads, past the lease. All on the memory transport, in paused
//! (virtual) time, where the freeze is the clock moving with no task run.
#![cfg(feature = "testkit")]

use std::time::Duration;

use futures_util::FutureExt;
use tokio::time::Instant;
use zkelect::testkit::TestZk;
use zkelect::{DemotionReason, Role, Session};

const SESSION: Duration = Duration::from_secs(2);

fn session(zk: &TestZk) -> Session {
    let (transport, events) = zk.connect(SESSION);
    Session::from_transport(transport, events)
}

/// Moves the clock by `by` as a frozen process sees it on waking: at once,
/// no task run in between (the first poll of `advance` moves the clock; the
/// yield after it is never awaited).
fn freeze(by: Duration) {
    assert!(
        tokio::time::advance(by).now_or_never().is_none(),
        "advance yields after moving the clock"
    );
}

#[tokio::test(start_paused = true)]
async fn no_guard_holds_and_no_election_leads_right_after_a_resume_past_the_lease() {
    let zk = TestZk::new();
    let s = session(&zk);
    let mutex = s.mutex("/locks/m").acquire().await.unwrap();
    let permit = s.semaphore("/locks/s", 2).acquire().await.unwrap();
    let reader = s.rw_lock("/locks/rw").read().acquire().await.unwrap();
    let election = s.election("/svc/leader").id("a").join().await.unwrap();
    election.wait_leader().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let guards = [&mutex, &permit, &reader];
    assert!(guards.iter().all(|g| g.is_held()), "all held before");
    assert!(election.role().is_leader(), "leads before");
    let lost = tokio::spawn(mutex.lost());

    // The latest of the leases, plus some: every one has lapsed on waking.
    let latest = guards
        .iter()
        .map(|g| g.lease().borrow().expect("a holder has a lease"))
        .chain(election.lease().borrow().iter().copied())
        .max()
        .expect("leases");
    let past = Duration::from_millis(2300);
    freeze(latest - Instant::now() + past);

    // Nothing ran: the status still says "holds" (a check that the freeze
    // is what this test says it is), yet no answer says it.
    assert!(
        matches!(mutex.status().borrow().role, Role::Leader(_)),
        "the driver has not run yet"
    );
    for g in guards {
        assert!(!g.is_held(), "{} is held {past:?} past its lease", g.node());
    }
    assert!(
        !election.role().is_leader(),
        "the election leads {past:?} past its lease: {:?}",
        election.role()
    );
    assert!(matches!(election.role(), Role::Suspended(_)));

    // Once the driver runs, the hold is lost to the silence, and says why.
    let reason = tokio::time::timeout(Duration::from_secs(10), lost)
        .await
        .expect("lost() resolves")
        .expect("the task ran");
    assert_eq!(reason, DemotionReason::Lost);
    assert!(guards.iter().all(|g| !g.is_held()), "still not held");
    s.close().await;
}

/// A freeze shorter than the lease changes nothing: the holder still holds
/// on waking (the lease check is not a guess that fires on any pause).
#[tokio::test(start_paused = true)]
async fn a_freeze_inside_the_lease_still_holds_on_waking() {
    let zk = TestZk::new();
    let s = session(&zk);
    let guard = s.mutex("/locks/m").acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let lease = guard.lease().borrow().expect("a holder has a lease");
    let left = lease - Instant::now();
    assert!(left > Duration::from_millis(100), "lease left: {left:?}");
    freeze(left / 2);
    assert!(guard.is_held(), "held halfway through the lease");
    s.close().await;
}
