//! The scaffolding of the lock tests against a real server (`handles.rs`,
//! `lock_family.rs`, `handle_options.rs`): sessions, waits on the server's
//! children, a bed of one server and two sessions, the holders' witness and
//! a holder task.
//!
//! Who holds is judged by each holder's own belief: a [`Witness`] each
//! holder enters right after its `acquire` returned and leaves right before
//! it releases, so two entries that overlap in the witness overlapped in
//! the holders' minds.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex as StdMutex, PoisonError};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use zkelect::{LockError, LockGuard, Session};
use zkelect_tests::ZkServer;
use zookeeper_async::ZooKeeper;

use crate::harness::{raw, retry, start_server, wait_for, wait_for_async, Client, SESSION, SETTLE};

/// A session of `client` on `hosts`; panics if it cannot be opened.
pub(crate) async fn session(client: Client, hosts: &str) -> Session {
    Session::connect(client.settings(hosts, SESSION, None))
        .await
        .unwrap_or_else(|e| panic!("{client}: cannot open a session on {hosts}: {e}"))
}

/// Closes each of `sessions` (see [`in_time`]).
pub(crate) async fn close(sessions: &[&Session]) {
    for s in sessions {
        in_time("a session to close", s.close()).await;
    }
}

/// Awaits `f`; panics saying `what` was awaited if it takes longer than
/// [`SETTLE`] (a deadlock, for an acquisition).
pub(crate) async fn in_time<F: Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(SETTLE, f)
        .await
        .unwrap_or_else(|_| panic!("not within {SETTLE:?}: {what}"))
}

/// The children of `path`, sorted, as the server lists them now (none if
/// the path does not exist).
pub(crate) async fn children(zk: &ZooKeeper, path: &str) -> Vec<String> {
    if retry(|| zk.exists(path, false)).await.is_none() {
        return Vec::new();
    }
    let mut names = retry(|| zk.get_children(path, false)).await;
    names.sort();
    names
}

/// Waits until the server lists exactly `want` under `path`.
pub(crate) async fn wait_children(zk: &ZooKeeper, path: &str, want: &[&str], what: &str) {
    let want: Vec<String> = want.iter().map(|s| (*s).to_owned()).collect();
    wait_for_async(
        what,
        SETTLE,
        || async {
            let now = children(zk, path).await;
            (now == want).then_some(())
        },
        || format!("{path}: wanted {want:?}"),
    )
    .await;
}

/// Waits until the server lists `n` children under `path`.
pub(crate) async fn wait_count(zk: &ZooKeeper, path: &str, n: usize, what: &str) -> Vec<String> {
    wait_for_async(
        what,
        SETTLE,
        || async {
            let now = children(zk, path).await;
            (now.len() == n).then_some(now)
        },
        || format!("{path}: wanted {n} children"),
    )
    .await
}

/// One server and what every scenario on it uses: an outside client to
/// list the server's children, and two sessions of the client under test.
pub(crate) struct Bed {
    /// Kept for its drop, which stops the server.
    _server: ZkServer,
    pub(crate) zk: ZooKeeper,
    pub(crate) s1: Session,
    pub(crate) s2: Session,
}

impl Bed {
    pub(crate) async fn start(client: Client) -> Bed {
        let server = start_server();
        let hosts = server.connect_string();
        Bed {
            zk: raw(&hosts, None).await,
            s1: session(client, &hosts).await,
            s2: session(client, &hosts).await,
            _server: server,
        }
    }

    pub(crate) async fn finish(self) {
        close(&[&self.s1, &self.s2]).await;
        let _ = self.zk.close().await;
    }
}

// ----- the witness -------------------------------------------------------------------

/// What a holder believes it holds on a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// A read lock: shared with other readers only.
    Read,
    /// A write lock, a mutex or a multi-lock's part: no one beside it.
    Write,
    /// `weight` permits of a semaphore with `of`.
    Permits { weight: u32, of: u32 },
}

impl Side {
    /// What it counts towards the most held at once.
    fn weight(self) -> u32 {
        match self {
            Side::Read | Side::Write => 1,
            Side::Permits { weight, .. } => weight,
        }
    }
}

#[derive(Debug, Default)]
struct Beliefs {
    /// Who believes it holds now, and what, per path.
    holding: BTreeMap<String, Vec<(String, Side)>>,
    /// Everyone who ever entered, in order.
    entered: Vec<String>,
    /// The most weight held at once, per path (a reader or a writer
    /// weighs 1).
    most: BTreeMap<String, u32>,
    /// Every entry that broke the rules, with who held then.
    violations: Vec<String>,
}

/// The holders' own beliefs: each enters right after its `acquire`
/// returned and leaves right before it releases, so two entries that
/// overlap here overlapped in the holders' minds.
#[derive(Debug, Default, Clone)]
pub(crate) struct Witness {
    beliefs: Arc<StdMutex<Beliefs>>,
}

impl Witness {
    fn with<T>(&self, f: impl FnOnce(&mut Beliefs) -> T) -> T {
        f(&mut self.beliefs.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// `who` believes it holds `side` on each of `paths`, from now.
    pub(crate) fn enter(&self, who: &str, paths: &[&str], side: Side) {
        self.with(|b| {
            for path in paths {
                let holders = b.holding.entry((*path).to_owned()).or_default();
                let held: u32 = holders.iter().map(|(_, s)| s.weight()).sum();
                let allowed = match side {
                    Side::Write => holders.is_empty(),
                    Side::Read => holders.iter().all(|(_, s)| *s == Side::Read),
                    Side::Permits { weight, of } => {
                        holders
                            .iter()
                            .all(|(_, s)| matches!(s, Side::Permits { .. }))
                            && held + weight <= of
                    }
                };
                if !allowed {
                    b.violations.push(format!(
                        "{who} ({side:?}) entered {path} while {holders:?} held it"
                    ));
                }
                holders.push((who.to_owned(), side));
                let most = b.most.entry((*path).to_owned()).or_default();
                *most = (*most).max(held + side.weight());
            }
            b.entered.push(who.to_owned());
        });
    }

    /// `who` believes it holds shared from now on where it held a write
    /// lock (its downgrade is done).
    pub(crate) fn downgrade(&self, who: &str) {
        self.with(|b| {
            for (w, side) in b.holding.values_mut().flatten() {
                if w == who && *side == Side::Write {
                    *side = Side::Read;
                }
            }
        });
    }

    /// `who` believes it holds nothing, from now.
    pub(crate) fn leave(&self, who: &str) {
        self.with(|b| {
            for holders in b.holding.values_mut() {
                holders.retain(|(w, _)| w != who);
            }
        });
    }

    pub(crate) fn entered(&self) -> Vec<String> {
        self.with(|b| b.entered.clone())
    }

    pub(crate) fn has_entered(&self, who: &str) -> bool {
        self.with(|b| b.entered.iter().any(|w| w == who))
    }

    /// The most weight held at once on `path`.
    pub(crate) fn most(&self, path: &str) -> u32 {
        self.with(|b| b.most.get(path).copied().unwrap_or(0))
    }

    pub(crate) fn assert_clean(&self) {
        self.with(|b| assert!(b.violations.is_empty(), "{:#?}", b.violations));
    }
}

/// A task that acquires, enters the witness, holds until told, leaves and
/// releases.
pub(crate) struct Holder {
    name: String,
    release: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Holder {
    /// Spawns `name`, which awaits `acquire` and then holds `side` on each
    /// of `paths` in `witness`'s eyes.
    pub(crate) fn spawn<F>(
        name: &str,
        paths: &[&str],
        side: Side,
        witness: &Witness,
        acquire: F,
    ) -> Holder
    where
        F: Future<Output = Result<LockGuard, LockError>> + Send + 'static,
    {
        let (release, released) = oneshot::channel();
        let witness = witness.clone();
        let who = name.to_owned();
        let paths: Vec<String> = paths.iter().map(|p| (*p).to_owned()).collect();
        let task = tokio::spawn(async move {
            let guard = acquire
                .await
                .unwrap_or_else(|e| panic!("{who} could not acquire: {e}"));
            let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
            witness.enter(&who, &paths, side);
            let _ = released.await;
            witness.leave(&who);
            guard.release().await;
        });
        Holder {
            name: name.to_owned(),
            release: Some(release),
            task,
        }
    }

    pub(crate) async fn wait_holds(&self, witness: &Witness) {
        wait_for(
            &format!("{} to hold", self.name),
            SETTLE,
            || witness.has_entered(&self.name).then_some(()),
            || format!("entered so far: {:?}", witness.entered()),
        )
        .await;
    }

    /// Tells it to release and waits until it has (its node deleted, or the
    /// deletion handed to the background after a bounded wait).
    pub(crate) async fn release(mut self) {
        if let Some(tx) = self.release.take() {
            let _ = tx.send(());
        }
        in_time(&format!("{} to release", self.name), &mut self.task)
            .await
            .unwrap_or_else(|e| panic!("{} panicked: {e}", self.name));
    }
}
