//! The options of the lock and election handles that Curator users reach
//! for, against a real ZooKeeper server:
//!
//! * a non-reentrant mutex (`reentrant(false)`, Curator's
//!   `InterProcessSemaphoreMutex`): two handles of one session and one of
//!   another take turns, one node per acquisition, never two holders at
//!   once; a second acquisition on a holding handle is refused (`InUse`);
//! * lock-node data (`.data`): stored after the id, and an observer on
//!   another session shows it;
//! * the session's connection state (`Session::states`): the connection
//!   cut through the test harness's proxy and healed reads `Suspended`, then
//!   `Reconnected`;
//! * `Election::participants()` / `leader()`: the queue in order with who
//!   leads, following a change of leader;
//! * a read-write lock's downgrade (`LockGuard::downgrade`): readers behind
//!   the writer get in beside it, a writer queued behind them does not get
//!   in between, and everyone gets in in queue order after.
//!
//! Who holds is judged by each holder's own belief (a witness each holder
//! enters after its `acquire` returned and leaves before it releases).
//! One server per scenario.
//!
//! Run once per real client by `scenarios_on!` (`on_zookeeper_async::…`,
//! `on_zookeeper_client::…`).

use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::Duration;

use zkelect::core::Recipe;
use zkelect::{ConnectionState, LockError, Session};
use zkelect_tests::Proxy;

use crate::harness::{retry, start_server, wait_for, Client, MAX_SESSION, SETTLE};
use crate::locks::{children, in_time, session, wait_count, Bed, Side, Witness};

/// How long the tests watch a waiter that must not be let in yet.
const QUIET: Duration = Duration::from_millis(600);

// ----- scenarios ---------------------------------------------------------------------

/// Two non-reentrant handles of one session and one of another each
/// acquire five times: every acquisition has a node of its own, no two
/// holders overlap, and a second acquisition on a holding handle is
/// refused at once.
async fn a_non_reentrant_mutex_takes_a_place_per_acquisition(client: Client) {
    const PATH: &str = "/options/semaphore-mutex";
    let bed = Bed::start(client).await;
    let (zk, s1, s2) = (&bed.zk, &bed.s1, &bed.s2);
    let witness = Witness::default();
    let nodes = Arc::new(StdMutex::new(Vec::<String>::new()));
    let mut tasks = Vec::new();
    for (name, s) in [("a", &s1), ("b", &s1), ("c", &s2)] {
        let lock = s.mutex(PATH).id(name).reentrant(false);
        let (witness, nodes) = (witness.clone(), Arc::clone(&nodes));
        tasks.push(tokio::spawn(async move {
            for round in 0..5 {
                let guard = lock
                    .acquire()
                    .await
                    .unwrap_or_else(|e| panic!("{name} round {round}: {e}"));
                witness.enter(name, &[PATH], Side::Write);
                let again = lock.acquire().await;
                assert!(
                    matches!(again, Err(LockError::InUse)),
                    "{name}: a second acquisition on a holding handle: {again:?}"
                );
                nodes
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(guard.node().to_owned());
                tokio::time::sleep(Duration::from_millis(20)).await;
                witness.leave(name);
                guard.release().await;
            }
        }));
    }
    for task in tasks {
        in_time("every acquisition to end", task)
            .await
            .expect("a contender's task");
    }
    witness.assert_clean();
    let mut nodes = nodes.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(nodes.len(), 15);
    nodes.sort();
    nodes.dedup();
    assert_eq!(nodes.len(), 15, "a node of its own per acquisition");
    assert!(children(zk, PATH).await.is_empty(), "every node released");
    bed.finish().await;
}

/// A mutex's and a semaphore's data are stored after the id; an observer
/// on another session shows them.
async fn lock_data_is_stored_and_observed(client: Client) {
    const PATH: &str = "/options/data";
    let bed = Bed::start(client).await;
    let (zk, s1, s2) = (&bed.zk, &bed.s1, &bed.s2);
    let guard = s1
        .mutex(PATH)
        .id("worker-1")
        .data(b"10.0.0.7:8080".to_vec())
        .acquire()
        .await
        .expect("acquire");
    let node = format!("{PATH}/{}", guard.node());
    let (data, _) = retry(|| zk.get_data(&node, false)).await;
    assert_eq!(data, b"worker-1\n10.0.0.7:8080");
    let observation = s2
        .observe(PATH, Recipe::Mutex)
        .start()
        .await
        .expect("observe");
    let holder = observation.leader().expect("a holder");
    assert_eq!(
        (holder.id().unwrap_or_default(), holder.data()),
        ("worker-1", &b"10.0.0.7:8080"[..])
    );
    let permit = s1
        .semaphore("/options/slots", 2)
        .id("encoder")
        .data(b"gpu0".to_vec())
        .acquire()
        .await
        .expect("a permit");
    let slots = s2
        .observe("/options/slots", Recipe::Semaphore { permits: 2 })
        .start()
        .await
        .expect("observe the semaphore");
    let p = &slots.participants()[0];
    assert_eq!(
        (p.id().unwrap_or_default(), p.data(), p.holds),
        ("encoder", &b"gpu0"[..], true)
    );
    drop((guard, permit));
    observation.close().await;
    slots.close().await;
    bed.finish().await;
}

/// The connection cut through the proxy (nothing passes) reads
/// `Suspended`; healed before the session can expire, `Reconnected`.
async fn session_states_read_suspended_then_reconnected(client: Client) {
    let server = start_server();
    let proxy = Proxy::start(server.addr()).expect("a proxy");
    // The longest timeout the server grants, so the session outlives the
    // cut by seconds.
    let s = Session::connect(client.settings(&proxy.connect_string(), MAX_SESSION, None))
        .await
        .expect("a session through the proxy");
    let mut states = s.states();
    in_time(
        "Connected",
        states.wait_for(|s| *s == ConnectionState::Connected),
    )
    .await
    .expect("the session's states");
    // Something on the session, so it is asked things.
    let guard = s.mutex("/options/states").acquire().await.expect("acquire");
    proxy.blackhole();
    in_time(
        "Suspended once the server is silent",
        states.wait_for(|s| *s == ConnectionState::Suspended),
    )
    .await
    .expect("the session's states");
    wait_for(
        "the guard to stop holding while in doubt",
        SETTLE,
        || (!guard.is_held()).then_some(()),
        || format!("{:?}", guard.status().borrow().role),
    )
    .await;
    proxy.heal();
    let back = in_time(
        "Reconnected once healed",
        states.wait_for(|s| s.is_connected()),
    )
    .await
    .expect("the session's states")
    .to_owned();
    assert_eq!(
        back,
        ConnectionState::Reconnected,
        "the same session is back"
    );
    wait_for(
        "the hold to be back on the same session",
        SETTLE,
        || guard.is_held().then_some(()),
        || format!("{:?}", guard.status().borrow().role),
    )
    .await;
    drop(guard);
    s.close().await;
    assert_eq!(*s.states().borrow(), ConnectionState::Closed);
}

/// Three candidates: any of them lists all three in queue order with the
/// first leading; once the leader leaves, the next one leads in the list.
async fn an_election_lists_its_participants_and_leader(client: Client) {
    const PATH: &str = "/options/election";
    let server = start_server();
    let hosts = server.connect_string();
    let (s1, s2) = (session(client, &hosts).await, session(client, &hosts).await);
    let a = s1.election(PATH).id("a").join().await.expect("a joins");
    in_time("a to lead", a.wait_leader())
        .await
        .expect("a leads");
    let b = s2.election(PATH).id("b").join().await.expect("b joins");
    let c = s1
        .election(PATH)
        .id("c")
        .data(b"c-data".to_vec())
        .join()
        .await
        .expect("c joins");
    let ids = |ps: Vec<zkelect::Participant>| -> Vec<(String, bool)> {
        ps.into_iter()
            .map(|p| (p.id().unwrap_or_default().to_owned(), p.holds))
            .collect()
    };
    let listed = ids(b.participants().await.expect("participants"));
    assert_eq!(
        listed,
        [("a".into(), true), ("b".into(), false), ("c".into(), false)]
    );
    let from_c = c.participants().await.expect("participants");
    assert_eq!(from_c[2].data(), b"c-data");
    assert_eq!(
        c.leader()
            .await
            .expect("leader")
            .as_ref()
            .and_then(|p| p.id()),
        Some("a")
    );
    a.close().await;
    let mut next = None;
    for _ in 0..300 {
        next = c
            .leader()
            .await
            .expect("leader")
            .and_then(|p| p.id().map(str::to_owned));
        if next.as_deref() == Some("b") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        next.as_deref(),
        Some("b"),
        "the list follows the new leader"
    );
    let listed = ids(c.participants().await.expect("participants"));
    assert_eq!(listed, [("b".into(), true), ("c".into(), false)]);
    b.close().await;
    c.close().await;
    s1.close().await;
    s2.close().await;
}

/// A writer holds; a reader (r1), a writer (w2) and a reader (r2) queue
/// behind it in that order. The writer downgrades: r1 gets in beside it,
/// w2 does not get in between, and r2 waits behind w2. The downgraded
/// holder releases: w2 still waits for r1; r1 releases: w2 gets in; w2
/// releases: r2 gets in.
async fn a_downgrade_lets_readers_in_and_no_writer_between(client: Client) {
    const PATH: &str = "/options/downgrade";
    let bed = Bed::start(client).await;
    let (zk, s1, s2) = (&bed.zk, &bed.s1, &bed.s2);
    let witness = Witness::default();
    let held = s1
        .rw_lock(PATH)
        .write()
        .acquire()
        .await
        .expect("the writer");
    witness.enter("w1", &[PATH], Side::Write);

    let spawn = |name: &'static str, write: bool, s: &Session| {
        let lock = s.rw_lock(PATH).id(name);
        let witness = witness.clone();
        let (go, release) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let side = if write { lock.write() } else { lock.read() };
            let guard = side
                .acquire()
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            witness.enter(name, &[PATH], if write { Side::Write } else { Side::Read });
            let _ = release.await;
            witness.leave(name);
            guard.release().await;
        });
        (go, task)
    };
    let (r1_go, r1) = spawn("r1", false, s2);
    wait_count(zk, PATH, 2, "r1 to queue").await;
    let (w2_go, w2) = spawn("w2", true, s2);
    wait_count(zk, PATH, 3, "w2 to queue").await;
    let (r2_go, r2) = spawn("r2", false, s1);
    wait_count(zk, PATH, 4, "r2 to queue").await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(witness.entered(), ["w1"], "everyone waits for the writer");

    // The holder believes it holds shared from the moment it asks to
    // downgrade: the server may let r1 in as soon as it sees the change,
    // before the call returns here.
    witness.downgrade("w1");
    in_time("the downgrade", held.downgrade())
        .await
        .expect("the downgrade");
    let r1_in = || witness.entered().contains(&"r1".to_owned()).then_some(());
    wait_for(
        "r1 to get in beside the downgraded writer",
        SETTLE,
        r1_in,
        || format!("{:?}", witness.entered()),
    )
    .await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        witness.entered(),
        ["w1", "r1"],
        "no writer between, r2 behind w2"
    );
    assert!(held.is_held());

    witness.leave("w1");
    held.release().await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(witness.entered(), ["w1", "r1"], "w2 still waits for r1");
    let _ = r1_go.send(());
    in_time("r1 to release", r1).await.expect("r1's task");
    let w2_in = || witness.entered().contains(&"w2".to_owned()).then_some(());
    wait_for("w2 to get in after r1", SETTLE, w2_in, || {
        format!("{:?}", witness.entered())
    })
    .await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(witness.entered(), ["w1", "r1", "w2"], "r2 waits for w2");
    let _ = w2_go.send(());
    in_time("w2 to release", w2).await.expect("w2's task");
    let r2_in = || witness.entered().contains(&"r2".to_owned()).then_some(());
    wait_for("r2 to get in after w2", SETTLE, r2_in, || {
        format!("{:?}", witness.entered())
    })
    .await;
    let _ = r2_go.send(());
    in_time("r2 to release", r2).await.expect("r2's task");
    witness.assert_clean();
    bed.finish().await;
}

scenarios_on!(
    on_zookeeper_async,
    super::Client::ZookeeperAsync,
    [
        a_non_reentrant_mutex_takes_a_place_per_acquisition,
        lock_data_is_stored_and_observed,
        session_states_read_suspended_then_reconnected,
        an_election_lists_its_participants_and_leader,
        a_downgrade_lets_readers_in_and_no_writer_between,
    ]
);
scenarios_on!(
    on_zookeeper_client,
    super::Client::ZookeeperClient,
    [
        a_non_reentrant_mutex_takes_a_place_per_acquisition,
        lock_data_is_stored_and_observed,
        session_states_read_suspended_then_reconnected,
        an_election_lists_its_participants_and_leader,
        a_downgrade_lets_readers_in_and_no_writer_between,
    ]
);
