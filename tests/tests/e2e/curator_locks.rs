//! zkelect's lock family beside real Apache Curator 5.4 lock recipes on a
//! real ZooKeeper server: Curator runs as a process of its own
//! (`tests/interop/CuratorLock.java`, driven over stdin by
//! `zkelect_tests::foreign`).
//!
//! * a Curator `InterProcessMultiLock` and a zkelect multi-lock
//!   (`Interop::Curator`, so each part queues with Curator's
//!   `InterProcessMutex` nodes) over the same two paths, each acquiring and
//!   releasing in a loop at once: no holds overlap and every acquisition
//!   ends, with the zkelect multi-lock given the paths in either order
//!   (it takes them sorted). Curator takes its parts in the order it was
//!   given, so it is given them sorted too: given the other order, Curator's
//!   multi-lock can deadlock with any multi-lock that takes them sorted —
//!   with another Curator one as well — which zkelect cannot prevent from
//!   its side;
//! * Curator's `Revoker.attemptRevoke` reaches a revocable zkelect holder
//!   (`LockGuard::revocation_requested` resolves), and zkelect's
//!   `Session::request_revocation` reaches a Curator holder made revocable
//!   with `makeRevocable` (its listener runs); each holder honours the
//!   request by releasing, and the lock passes to the other library.
//!
//! Who holds is each process's own belief: a zkelect holder from when its
//! `acquire` returned until just before its release, a Curator holder from
//! its `LEADER` line (printed when `acquire` returned) to its `FOLLOWER`
//! line (printed before `release`), both stamped with `CLOCK_MONOTONIC`.
//! No two beliefs on a path may overlap; the canary (a zkelect multi-lock
//! without interop, whose nodes Curator does not see) shows the witness
//! catches two holders at once.
//!
//! Run once per real client by `scenarios_on!` (`on_zookeeper_async::…`,
//! `on_zookeeper_client::…`).

use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use zkelect::{Interop, Session};
use zkelect_tests::foreign::{Foreign, Kind, FOREIGN_START};

use crate::harness::{raw, retry, start_server, wait_for_async, Client, SESSION, SETTLE};

/// How long a holder keeps its hold in the loops.
const HOLD: Duration = Duration::from_millis(40);
/// Rounds each side plays in the multi-lock loops.
const ROUNDS: usize = 5;

async fn session(client: Client, hosts: &str) -> Session {
    Session::connect(client.settings(hosts, SESSION, None))
        .await
        .unwrap_or_else(|e| panic!("{client}: cannot open a session on {hosts}: {e}"))
}

async fn in_time<F: std::future::Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(SETTLE, f)
        .await
        .unwrap_or_else(|_| panic!("not within {SETTLE:?}: {what}"))
}

/// Waits (blocking) until `foreign` has printed `n` lines of `kind` (with
/// `detail`, if given); panics with its log if it exits or takes longer
/// than `within`.
fn wait_lines(
    foreign: &mut Foreign,
    kind: &Kind,
    detail: Option<&str>,
    n: usize,
    within: Duration,
) {
    let what = format!("{n} {kind:?} {detail:?} lines");
    let counted = |l: &zkelect_tests::foreign::Line| {
        &l.kind == kind && detail.is_none_or(|d| l.detail.as_deref() == Some(d))
    };
    let deadline = Instant::now() + within;
    loop {
        if foreign.lines().iter().filter(|l| counted(l)).count() >= n {
            return;
        }
        if foreign.exit_status().is_some() || Instant::now() > deadline {
            panic!("waiting for {what}:\n{}", foreign.describe());
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Starts a Curator lock holder and waits until it is connected.
fn curator(hosts: &str, id: &str) -> Foreign {
    let mut foreign = Foreign::spawn_curator_lock(hosts, id)
        .unwrap_or_else(|e| panic!("cannot start the Curator lock holder {id}: {e}"));
    wait_lines(&mut foreign, &Kind::Started, None, 1, FOREIGN_START);
    foreign
}

fn send(foreign: &mut Foreign, command: &str) {
    foreign
        .send(command)
        .unwrap_or_else(|e| panic!("{e}\n{}", foreign.describe()));
}

// ----- the witness -------------------------------------------------------------------

/// Every hold any process believed it had: who, from, until.
#[derive(Debug, Default, Clone)]
struct Beliefs {
    holds: Arc<StdMutex<Vec<(String, Instant, Instant)>>>,
}

impl Beliefs {
    fn add(&self, who: impl Into<String>, from: Instant, until: Instant) {
        self.holds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((who.into(), from, until));
    }

    /// A Curator process's holds, from its own lines.
    fn add_curator(&self, foreign: &Foreign) {
        let mut open: Option<Instant> = None;
        for line in foreign.lines() {
            match line.kind {
                Kind::Leader => open = Some(line.at),
                Kind::Follower | Kind::Closing | Kind::Error | Kind::Eof => {
                    if let Some(from) = open.take() {
                        self.add(format!("curator {}", foreign.id()), from, line.at);
                    }
                }
                _ => {}
            }
        }
        if let Some(from) = open {
            self.add(
                format!("curator {} (still)", foreign.id()),
                from,
                Instant::now(),
            );
        }
    }

    fn count(&self, prefix: &str) -> usize {
        self.holds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(w, _, _)| w.starts_with(prefix))
            .count()
    }

    /// The first two holds that overlap, if any (the holds sorted by
    /// their start: each must end before the next one starts).
    fn overlap(&self) -> Option<String> {
        let mut holds = self
            .holds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        holds.sort_by_key(|(_, from, _)| *from);
        holds.windows(2).find_map(|pair| {
            let ((a, _, a_until), (b, b_from, _)) = (&pair[0], &pair[1]);
            (a_until > b_from).then(|| {
                format!(
                    "{a} still held {:?} after {b} began to hold\n{holds:#?}",
                    a_until.duration_since(*b_from)
                )
            })
        })
    }

    /// No two holds overlap.
    fn assert_disjoint(&self) {
        if let Some(overlap) = self.overlap() {
            panic!("{overlap}");
        }
    }
}

// ----- multi-locks -------------------------------------------------------------------

/// A Curator `InterProcessMultiLock` over (A, B) and a zkelect multi-lock
/// over `zkelect_order`, both looping: every round of both ends, and no
/// holds overlap.
async fn multi_locks_with_curator(client: Client, zkelect_order: [&'static str; 2]) {
    const A: &str = "/curator-multi/a";
    const B: &str = "/curator-multi/b";
    let server = start_server();
    let hosts = server.connect_string();
    let s = session(client, &hosts).await;
    let beliefs = Beliefs::default();
    let mut foreign = curator(&hosts, "multi");

    let ours = {
        let lock = s
            .multi_lock(zkelect_order)
            .interop(Interop::Curator)
            .id("zkelect-multi");
        let beliefs = beliefs.clone();
        tokio::spawn(async move {
            for round in 0..ROUNDS {
                let guard = in_time("the zkelect multi-lock", lock.acquire())
                    .await
                    .unwrap_or_else(|e| panic!("round {round}: {e}"));
                let from = Instant::now();
                tokio::time::sleep(HOLD).await;
                assert!(guard.is_held(), "round {round}: lost meanwhile");
                beliefs.add(format!("zkelect #{round}"), from, Instant::now());
                guard.release().await;
            }
        })
    };
    let theirs = tokio::task::spawn_blocking(move || {
        for round in 1..=ROUNDS {
            send(&mut foreign, &format!("multi {A} {B}"));
            wait_lines(&mut foreign, &Kind::Leader, None, round, SETTLE);
            thread::sleep(HOLD);
            send(&mut foreign, "release");
            wait_lines(&mut foreign, &Kind::Done, Some("release"), round, SETTLE);
        }
        foreign
    });
    in_time("the zkelect rounds", ours)
        .await
        .unwrap_or_else(|e| panic!("the zkelect rounds failed: {e}"));
    let mut foreign = in_time("the Curator rounds", theirs)
        .await
        .unwrap_or_else(|e| panic!("the Curator rounds failed: {e}"));
    beliefs.add_curator(&foreign);
    assert_eq!(beliefs.count("zkelect"), ROUNDS);
    assert_eq!(beliefs.count("curator"), ROUNDS);
    beliefs.assert_disjoint();
    foreign
        .close(SETTLE)
        .unwrap_or_else(|e| panic!("the Curator holder did not close cleanly: {e}"));
    in_time("the session to close", s.close()).await;
}

async fn curator_and_zkelect_multi_locks_share_paths_given_in_order(client: Client) {
    multi_locks_with_curator(client, ["/curator-multi/a", "/curator-multi/b"]).await;
}

async fn curator_and_zkelect_multi_locks_share_paths_given_reversed(client: Client) {
    multi_locks_with_curator(client, ["/curator-multi/b", "/curator-multi/a"]).await;
}

/// The canary: a zkelect multi-lock without interop (zkelect's own node
/// names, which Curator does not see, nor zkelect Curator's) holds both
/// paths, and Curator's multi-lock takes them too: the witness sees the
/// two holds overlap, so it can.
async fn canary_a_multi_lock_without_interop_overlaps_curators(client: Client) {
    const A: &str = "/curator-canary/a";
    const B: &str = "/curator-canary/b";
    let server = start_server();
    let hosts = server.connect_string();
    let s = session(client, &hosts).await;
    let beliefs = Beliefs::default();
    let mut foreign = curator(&hosts, "canary");
    let lock = s.multi_lock([A, B]).interop(Interop::None);
    let guard = in_time("the zkelect multi-lock", lock.acquire())
        .await
        .expect("the zkelect multi-lock");
    let from = Instant::now();
    let mut foreign = tokio::task::spawn_blocking(move || {
        send(&mut foreign, &format!("multi {A} {B}"));
        wait_lines(&mut foreign, &Kind::Leader, None, 1, SETTLE);
        foreign
    })
    .await
    .expect("Curator's multi-lock");
    beliefs.add("zkelect (no interop)", from, Instant::now());
    beliefs.add_curator(&foreign);
    assert!(
        beliefs.overlap().is_some(),
        "the witness missed two holders at once"
    );
    guard.release().await;
    foreign
        .close(SETTLE)
        .unwrap_or_else(|e| panic!("the Curator holder did not close cleanly: {e}"));
    in_time("the session to close", s.close()).await;
}

// ----- revocation --------------------------------------------------------------------

/// A revocable zkelect holder is asked by Curator's `Revoker` to let go and
/// does; a Curator holder made revocable then takes the lock, is asked by
/// zkelect's `request_revocation`, its listener runs and it lets go; the
/// zkelect waiter then holds. The holds never overlap.
async fn revocation_requests_cross_between_curator_and_zkelect(client: Client) {
    const PATH: &str = "/curator-revoke";
    let server = start_server();
    let hosts = server.connect_string();
    let (s1, s2) = (session(client, &hosts).await, session(client, &hosts).await);
    let beliefs = Beliefs::default();
    let mut foreign = curator(&hosts, "revocable");

    // Curator asks a zkelect holder.
    let first = s1
        .mutex(PATH)
        .interop(Interop::Curator)
        .revocable(true)
        .id("zkelect-first");
    let guard = in_time("the zkelect holder", first.acquire())
        .await
        .expect("the first acquire");
    let from = Instant::now();
    let node = format!("{PATH}/{}", guard.node());
    let mut foreign = tokio::task::spawn_blocking(move || {
        send(&mut foreign, &format!("revoke {node}"));
        wait_lines(&mut foreign, &Kind::Done, Some("revoke"), 1, SETTLE);
        foreign
    })
    .await
    .expect("the Curator request");
    in_time(
        "Curator's request to reach the zkelect holder",
        guard.revocation_requested(),
    )
    .await;
    beliefs.add("zkelect first", from, Instant::now());
    guard.release().await;

    // zkelect asks a Curator holder.
    send(&mut foreign, &format!("mutex {PATH} honour"));
    let mut foreign = tokio::task::spawn_blocking(move || {
        wait_lines(&mut foreign, &Kind::Leader, None, 1, SETTLE);
        foreign
    })
    .await
    .expect("the Curator acquire");
    let curator_node = foreign
        .node()
        .unwrap_or_else(|| panic!("no NODE line:\n{}", foreign.describe()));
    let second = Arc::new(
        s2.mutex(PATH)
            .interop(Interop::Curator)
            .id("zkelect-second"),
    );
    let waiting = {
        let second = Arc::clone(&second);
        tokio::spawn(async move {
            let guard = second.acquire().await.expect("the second acquire");
            (guard, Instant::now())
        })
    };
    let zk = raw(&hosts, None).await;
    wait_for_async(
        "the zkelect waiter to queue behind Curator",
        SETTLE,
        || async { (retry(|| zk.get_children(PATH, false)).await.len() == 2).then_some(()) },
        || foreign.describe(),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "Curator holds: the waiter waits");
    in_time(
        "zkelect's request to be delivered to Curator",
        s1.request_revocation(PATH, &curator_node),
    )
    .await
    .unwrap_or_else(|e| panic!("not delivered: {e}\n{}", foreign.describe()));
    let mut foreign = tokio::task::spawn_blocking(move || {
        wait_lines(&mut foreign, &Kind::Revoke, None, 1, SETTLE);
        wait_lines(&mut foreign, &Kind::Done, Some("release"), 1, SETTLE);
        foreign
    })
    .await
    .expect("Curator's listener");
    let (guard, from) = in_time("the zkelect waiter to hold", waiting)
        .await
        .expect("the waiting task");
    beliefs.add("zkelect second", from, Instant::now());
    beliefs.add_curator(&foreign);
    assert_eq!(beliefs.count("curator"), 1, "Curator held once");
    beliefs.assert_disjoint();
    guard.release().await;
    foreign
        .close(SETTLE)
        .unwrap_or_else(|e| panic!("the Curator holder did not close cleanly: {e}"));
    let _ = zk.close().await;
    in_time("a session to close", s1.close()).await;
    in_time("a session to close", s2.close()).await;
}

scenarios_on!(
    on_zookeeper_async,
    super::Client::ZookeeperAsync,
    [
        curator_and_zkelect_multi_locks_share_paths_given_in_order,
        curator_and_zkelect_multi_locks_share_paths_given_reversed,
        canary_a_multi_lock_without_interop_overlaps_curators,
        revocation_requests_cross_between_curator_and_zkelect,
    ]
);
scenarios_on!(
    on_zookeeper_client,
    super::Client::ZookeeperClient,
    [
        curator_and_zkelect_multi_locks_share_paths_given_in_order,
        curator_and_zkelect_multi_locks_share_paths_given_reversed,
        canary_a_multi_lock_without_interop_overlaps_curators,
        revocation_requests_cross_between_curator_and_zkelect,
    ]
);
