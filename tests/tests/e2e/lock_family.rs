//! The lock family's newer handles against a real ZooKeeper server:
//! multi-locks (`session.multi_lock`), weighted permits
//! (`Semaphore::acquire_many`) and cooperative revocation
//! (`Mutex::revocable`, `LockGuard::revocation_requested`,
//! `Session::request_revocation`).
//!
//! * two multi-locks over overlapping paths, given them in opposite orders,
//!   and a plain mutex on one of the paths, each acquiring again and again:
//!   every acquisition ends (no deadlock) and no path ever has two holders;
//! * a multi-lock's `try_acquire` that times out leaves none of its nodes
//!   behind, and a plain mutex on the path it did take gets in at once;
//! * a weighted semaphore with mixed weights never has more weight held
//!   than it has permits; a request for 3 is not overtaken by requests for
//!   1 that queued after it, even while permits are free for them;
//! * a revocation request reaches a revocable holder, which either lets go
//!   (the waiter gets in) or ignores it (it keeps holding, the waiter stays
//!   out); a request to a node that is gone, or that the server will not
//!   let us write, is a typed error.
//!
//! Who holds is judged by each holder's own belief (a [`Witness`] each
//! holder enters after its `acquire` returned and leaves before it
//! releases), never by reading the queue. One server per scenario.
//!
//! Run once per real client by `scenarios_on!` (`on_zookeeper_async::…`,
//! `on_zookeeper_client::…`).

use std::sync::Arc;
use std::time::Duration;

use zkelect::{RevocationRequestError, Session};
use zookeeper_async::{Acl, CreateMode};

use crate::harness::{retry, Client};
use crate::locks::{in_time, wait_count, Bed, Holder, Side, Witness};

/// How long the tests watch a waiter that must not be let in yet.
const QUIET: Duration = Duration::from_millis(600);
/// How long a `try_acquire` that is expected to time out waits.
const SHORT: Duration = Duration::from_millis(400);

// ----- multi-locks -------------------------------------------------------------------

/// Two multi-locks over the same two paths, given them in opposite orders
/// (the order that deadlocks two hand-made lock pairs), and a plain mutex
/// on one of them, each acquiring and releasing in a loop at once: every
/// acquisition ends within [`SETTLE`], and no path ever has two holders.
async fn multi_locks_in_opposite_orders_never_deadlock_nor_overlap(client: Client) {
    const A: &str = "/family/multi/a";
    const B: &str = "/family/multi/b";
    const ROUNDS: usize = 6;
    let bed = Bed::start(client).await;
    let witness = Witness::default();
    let ab = bed.s1.multi_lock([A, B]).id("ab");
    let ba = bed.s2.multi_lock([B, A]).id("ba");
    let plain = bed.s2.mutex(B).id("b-alone");
    let rounds_ab = {
        let witness = witness.clone();
        tokio::spawn(async move {
            for round in 0..ROUNDS {
                let who = format!("ab#{round}");
                let guard = in_time(&who, ab.acquire())
                    .await
                    .unwrap_or_else(|e| panic!("{who}: {e}"));
                assert_eq!(guard.tokens().len(), 2, "a token per path");
                witness.enter(&who, &[A, B], Side::Write);
                tokio::time::sleep(Duration::from_millis(30)).await;
                assert!(guard.is_held(), "{who} still holds both");
                witness.leave(&who);
                guard.release().await;
            }
        })
    };
    let rounds_ba = {
        let witness = witness.clone();
        tokio::spawn(async move {
            for round in 0..ROUNDS {
                let who = format!("ba#{round}");
                let guard = in_time(&who, ba.acquire())
                    .await
                    .unwrap_or_else(|e| panic!("{who}: {e}"));
                witness.enter(&who, &[A, B], Side::Write);
                tokio::time::sleep(Duration::from_millis(30)).await;
                witness.leave(&who);
                guard.release().await;
            }
        })
    };
    let rounds_plain = {
        let witness = witness.clone();
        tokio::spawn(async move {
            for round in 0..ROUNDS {
                let who = format!("b#{round}");
                let guard = in_time(&who, plain.acquire())
                    .await
                    .unwrap_or_else(|e| panic!("{who}: {e}"));
                witness.enter(&who, &[B], Side::Write);
                tokio::time::sleep(Duration::from_millis(30)).await;
                witness.leave(&who);
                guard.release().await;
            }
        })
    };
    for task in [rounds_ab, rounds_ba, rounds_plain] {
        in_time("a contender's rounds", task)
            .await
            .unwrap_or_else(|e| panic!("a contender failed: {e}"));
    }
    witness.assert_clean();
    assert_eq!(witness.entered().len(), 3 * ROUNDS, "every round held once");
    for path in [A, B] {
        assert_eq!(witness.most(path), 1, "{path}: one holder at most");
        wait_count(&bed.zk, path, 0, "every node deleted").await;
    }
    bed.finish().await;
}

/// A multi-lock whose second path is held by a plain mutex gives up after
/// its timeout: `Ok(None)`, none of its nodes left on either path, and a
/// plain mutex on the path it had taken gets in at once. Once the mutex
/// lets go it takes both, all or none.
async fn a_multi_lock_that_times_out_releases_what_it_took(client: Client) {
    const A: &str = "/family/timeout/a";
    const B: &str = "/family/timeout/b";
    let bed = Bed::start(client).await;
    let witness = Witness::default();
    let blocker = {
        let lock = bed.s2.mutex(B);
        Holder::spawn("b-holder", &[B], Side::Write, &witness, async move {
            lock.acquire().await
        })
    };
    blocker.wait_holds(&witness).await;
    let both = bed.s1.multi_lock([B, A]);
    let gave_up = in_time("a multi-lock's try_acquire", both.try_acquire(SHORT))
        .await
        .expect("try_acquire");
    assert!(gave_up.is_none(), "B is held: the multi-lock gives up");
    let left = wait_count(&bed.zk, A, 0, "the part it took on A to be deleted").await;
    assert!(left.is_empty());
    let b_nodes = wait_count(&bed.zk, B, 1, "only the plain holder's node on B").await;
    assert_eq!(b_nodes.len(), 1);
    let a_alone = bed.s2.mutex(A);
    let a_guard = in_time("A alone", a_alone.try_acquire(SHORT))
        .await
        .expect("try_acquire on A")
        .expect("A is free again at once");
    a_guard.release().await;
    // All or none: acquiring while B is held gives no guard until B is free.
    let taking = {
        let witness = witness.clone();
        tokio::spawn(async move {
            let guard = both.acquire().await.expect("the multi-lock acquires");
            witness.enter("both", &[A, B], Side::Write);
            witness.leave("both");
            guard.release().await;
        })
    };
    tokio::time::sleep(QUIET).await;
    assert!(!witness.has_entered("both"), "no guard while B is held");
    blocker.release().await;
    in_time("the multi-lock to take both", taking)
        .await
        .expect("the multi-lock's task");
    witness.assert_clean();
    bed.finish().await;
}

// ----- weighted permits --------------------------------------------------------------

/// Contenders asking for 3, 1, 2, 1, 3 and 2 of 5 permits, on two
/// sessions, each acquiring and releasing in a loop at once: the weight
/// held never exceeds 5 (and reaches more than 3, so they did share).
async fn mixed_weights_never_exceed_the_permits(client: Client) {
    const PATH: &str = "/family/weights";
    const PERMITS: u32 = 5;
    const ROUNDS: usize = 5;
    let bed = Bed::start(client).await;
    let witness = Witness::default();
    let mut tasks = Vec::new();
    for (i, weight) in [3u32, 1, 2, 1, 3, 2].into_iter().enumerate() {
        let session = if i % 2 == 0 { &bed.s1 } else { &bed.s2 };
        let sem = session
            .semaphore(PATH, PERMITS)
            .id(format!("w{weight}-{i}"));
        let witness = witness.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..ROUNDS {
                let who = format!("c{i}w{weight}#{round}");
                let guard = in_time(&who, sem.acquire_many(weight))
                    .await
                    .unwrap_or_else(|e| panic!("{who}: {e}"));
                witness.enter(
                    &who,
                    &[PATH],
                    Side::Permits {
                        weight,
                        of: PERMITS,
                    },
                );
                tokio::time::sleep(Duration::from_millis(40)).await;
                witness.leave(&who);
                guard.release().await;
            }
        }));
    }
    for task in tasks {
        in_time("a contender's rounds", task)
            .await
            .unwrap_or_else(|e| panic!("a contender failed: {e}"));
    }
    witness.assert_clean();
    let most = witness.most(PATH);
    assert!(
        (4..=PERMITS).contains(&most),
        "the most weight held at once was {most}"
    );
    wait_count(&bed.zk, PATH, 0, "every node deleted").await;
    bed.finish().await;
}

/// With 2 of 4 permits held, a request for 3 queues, then three requests
/// for 1: two permits are free, yet none of the ones gets in before the
/// three; once the two come back, the three and the first one hold
/// (3 + 1 = 4), and the other ones wait for them.
async fn a_request_for_three_is_not_starved_by_later_requests_for_one(client: Client) {
    const PATH: &str = "/family/fair";
    let bed = Bed::start(client).await;
    let witness = Witness::default();
    let sem = |s: &Session| Arc::new(s.semaphore(PATH, 4));
    let two = {
        let sem = sem(&bed.s1);
        Holder::spawn(
            "two",
            &[PATH],
            Side::Permits { weight: 2, of: 4 },
            &witness,
            async move { sem.acquire_many(2).await },
        )
    };
    two.wait_holds(&witness).await;
    let three = {
        let sem = sem(&bed.s2);
        Holder::spawn(
            "three",
            &[PATH],
            Side::Permits { weight: 3, of: 4 },
            &witness,
            async move { sem.acquire_many(3).await },
        )
    };
    wait_count(&bed.zk, PATH, 2, "the three to queue").await;
    let mut ones = Vec::new();
    for i in 0..3 {
        let sem = sem(if i % 2 == 0 { &bed.s1 } else { &bed.s2 });
        let name = format!("one{i}");
        ones.push(Holder::spawn(
            &name,
            &[PATH],
            Side::Permits { weight: 1, of: 4 },
            &witness,
            async move { sem.acquire().await },
        ));
        wait_count(&bed.zk, PATH, 3 + i, "a one to queue").await;
    }
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        witness.entered(),
        ["two"],
        "two permits are free, but the ones queued behind the three"
    );
    two.release().await;
    three.wait_holds(&witness).await;
    ones[0].wait_holds(&witness).await;
    tokio::time::sleep(QUIET).await;
    // The three and the first one are let in by the same release, in
    // either order; the other ones wait.
    let mut entered = witness.entered();
    entered[1..].sort();
    assert_eq!(entered, ["two", "one0", "three"]);
    three.release().await;
    for one in &ones[1..] {
        one.wait_holds(&witness).await;
    }
    for one in ones {
        one.release().await;
    }
    witness.assert_clean();
    wait_count(&bed.zk, PATH, 0, "every node deleted").await;
    bed.finish().await;
}

// ----- cooperative revocation --------------------------------------------------------

/// A revocable holder asked to let go (from the other session) hears it and
/// releases: the waiter gets in. Asked again, the next holder ignores it:
/// it keeps holding and the next waiter stays out. A request to a node that
/// is gone is [`RevocationRequestError::Gone`]; one to a node we may not
/// write is [`RevocationRequestError::Refused`].
async fn a_revocation_request_is_honoured_or_ignored_by_the_holder(client: Client) {
    const PATH: &str = "/family/revoke";
    let bed = Bed::start(client).await;
    let witness = Witness::default();
    let first = bed.s1.mutex(PATH).revocable(true).id("first");
    let guard = in_time("the first holder", first.acquire())
        .await
        .expect("the first acquire");
    witness.enter("first", &[PATH], Side::Write);
    let first_node = guard.node().to_owned();
    let honour = {
        let witness = witness.clone();
        tokio::spawn(async move {
            guard.revocation_requested().await;
            witness.leave("first");
            guard.release().await;
        })
    };
    let second = Arc::new(bed.s2.mutex(PATH).revocable(true).id("second"));
    let waiting = {
        let second = Arc::clone(&second);
        tokio::spawn(async move { second.acquire().await })
    };
    wait_count(&bed.zk, PATH, 2, "the second to queue").await;
    tokio::time::sleep(QUIET).await;
    assert!(!waiting.is_finished(), "not asked yet: the first holds");
    in_time(
        "the request to be delivered",
        bed.s2.request_revocation(PATH, &first_node),
    )
    .await
    .expect("delivered to the first holder");
    in_time("the first to honour it", honour)
        .await
        .expect("the honouring task");
    let guard = in_time("the second to get in", waiting)
        .await
        .expect("the waiting task")
        .expect("the second acquires");
    witness.enter("second", &[PATH], Side::Write);
    assert!(guard.token() > zkelect::FencingToken(0));

    // The second ignores the request: it keeps holding.
    let third = bed.s1.mutex(PATH).id("third");
    in_time(
        "the second request to be delivered",
        bed.s1.request_revocation(PATH, guard.node()),
    )
    .await
    .expect("delivered to the second holder");
    in_time("the second to hear it", guard.revocation_requested()).await;
    assert_eq!(guard.status().borrow().stats.revocations_requested, 1);
    let kept_out = in_time("the third's try", third.try_acquire(QUIET))
        .await
        .expect("try_acquire");
    assert!(kept_out.is_none(), "the holder ignored the request");
    assert!(guard.is_held());

    // The first's node is gone: asking it is a typed error, not a wait.
    let gone = in_time(
        "a request to a gone node",
        bed.s2.request_revocation(PATH, &first_node),
    )
    .await;
    assert_eq!(
        gone,
        Err(RevocationRequestError::Gone {
            path: format!("{PATH}/{first_node}")
        })
    );
    witness.leave("second");
    guard.release().await;
    witness.assert_clean();

    // A node nobody may write to: the server refuses, and says why.
    let read_only = retry(|| {
        bed.zk.create(
            "/family/revoke-read-only",
            b"x".to_vec(),
            Acl::read_unsafe().clone(),
            CreateMode::Persistent,
        )
    })
    .await;
    let refused = in_time(
        "a request the server refuses",
        bed.s1.request_revocation("/family", "revoke-read-only"),
    )
    .await;
    assert_eq!(
        refused,
        Err(RevocationRequestError::Refused {
            path: read_only.clone(),
            code: zkelect::ZkCode::NoAuth
        })
    );
    bed.finish().await;
}

scenarios_on!(
    on_zookeeper_async,
    super::Client::ZookeeperAsync,
    [
        multi_locks_in_opposite_orders_never_deadlock_nor_overlap,
        a_multi_lock_that_times_out_releases_what_it_took,
        mixed_weights_never_exceed_the_permits,
        a_request_for_three_is_not_starved_by_later_requests_for_one,
        a_revocation_request_is_honoured_or_ignored_by_the_holder,
    ]
);
scenarios_on!(
    on_zookeeper_client,
    super::Client::ZookeeperClient,
    [
        multi_locks_in_opposite_orders_never_deadlock_nor_overlap,
        a_multi_lock_that_times_out_releases_what_it_took,
        mixed_weights_never_exceed_the_permits,
        a_request_for_three_is_not_starved_by_later_requests_for_one,
        a_revocation_request_is_honoured_or_ignored_by_the_holder,
    ]
);
