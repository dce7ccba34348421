//! Observing a queue without taking part: who is in it, in queue order, and
//! who leads (or holds). The core's [`Observer`] machine runs on a
//! [`Session`] like any recipe; an [`Observation`] is its handle.
//!
//! An observer needs no id and creates no node, so it may run with read-only
//! credentials, and it never counts as a contender.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use zkelect_core::{
    CandidateError, Interop, Machine, Observer, ObserverConfig, Participant, Recipe, Role,
};

use crate::connect::Connect;
use crate::error::{ObserveError, SessionError};
use crate::hub::{Board, Listing};
use crate::session::{Link, Session};
use crate::status::{Outputs, Status};

/// How long [`ObserveBuilder::start`] waits for the first listing unless told otherwise.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long closing an observation's own session may take.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

impl Session {
    /// Starts building an [`Observation`] of the queue of `recipe` at `path`
    /// on this session (which it leaves open when closed).
    ///
    /// On the in-memory [`MemoryServer`](memory/struct.MemoryServer.html)
    /// (feature `memory`), so that it runs as a test.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use zkelect::core::Recipe;
    /// use zkelect::memory::MemoryServer;
    /// use zkelect::Session;
    ///
    /// let server = MemoryServer::new();
    /// let session = Session::connect(server.settings(Duration::from_secs(4))).await?;
    /// let mut workers = Vec::new();
    /// for id in ["a", "b", "c"] {
    ///     workers.push(session.election("/svc/workers").id(id).leaders(2).join().await?);
    /// }
    /// let observation = session.observe("/svc/workers", Recipe::Election { leaders: 2 }).start().await?;
    /// let list = observation.participants();
    /// let ids: Vec<(Option<&str>, bool)> = list.iter().map(|p| (p.id(), p.holds)).collect();
    /// assert_eq!(ids, [(Some("a"), true), (Some("b"), true), (Some("c"), false)]);
    /// session.close().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn observe(&self, path: impl Into<String>, recipe: Recipe) -> ObserveBuilder {
        ObserveBuilder::new(Source::Session(self.clone()), path.into(), recipe)
    }
}

impl ObserveBuilder {
    /// A builder whose observation opens a session of its own with
    /// `settings` (for [`Election::observe`](crate::Election::observe)).
    pub(crate) fn over_new_session(settings: impl Connect, path: String, recipe: Recipe) -> Self {
        ObserveBuilder::new(Source::Connect(Box::new(settings)), path, recipe)
    }
}

/// Where an observation gets its session.
enum Source {
    Connect(Box<dyn Connect>),
    Session(Session),
}

/// Builds an [`Observation`]: from [`Election::observe`](crate::Election::observe) or [`Session::observe`].
#[must_use = "an observation starts with `start().await`"]
pub struct ObserveBuilder {
    source: Source,
    path: String,
    recipe: Recipe,
    interop: Interop,
    prefix: Option<String>,
    start_timeout: Duration,
}

impl std::fmt::Debug for ObserveBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObserveBuilder")
            .field("path", &self.path)
            .field("recipe", &self.recipe)
            .field("interop", &self.interop)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl ObserveBuilder {
    fn new(source: Source, path: String, recipe: Recipe) -> Self {
        Self {
            source,
            path,
            recipe,
            interop: Interop::None,
            prefix: None,
            start_timeout: START_TIMEOUT,
        }
    }

    /// An election in which the `k` lowest nodes lead (what the candidates'
    /// [`leaders`](crate::ElectionBuilder::leaders) says; default 1).
    pub fn leaders(mut self, k: u32) -> Self {
        self.recipe = Recipe::Election { leaders: k };
        self
    }

    /// What the queue is for, and so who in it holds.
    pub fn recipe(mut self, recipe: Recipe) -> Self {
        self.recipe = recipe;
        self
    }

    /// Counts the nodes of Curator or kazoo too, as the candidates'
    /// [`interop`](crate::ElectionBuilder::interop) does.
    pub fn interop(mut self, scheme: Interop) -> Self {
        self.interop = scheme;
        self
    }

    /// The node-name prefix the candidates were configured with, when not the default.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// How long [`start`](Self::start) waits for the first listing (default 30 s).
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }

    /// Validates the description, connects if built from settings, and
    /// returns once the queue has been listed and read, so that
    /// [`Observation::participants`] is the queue's, not "not known yet".
    /// Fails on an invalid path or recipe ([`ObserveError::Config`]), a
    /// fatal error (`NoAuth`: [`ObserveError::Fatal`]; rejected credentials:
    /// [`ObserveError::Session`]) or after the start timeout
    /// ([`ObserveError::Timeout`]); the observation is then closed in the
    /// background.
    pub async fn start(self) -> Result<Observation, ObserveError> {
        let mut config = ObserverConfig::new(self.path, self.recipe).with_interop(self.interop);
        if let Some(prefix) = self.prefix {
            config = config.with_prefix(prefix);
        }
        // Bad input is refused before touching the network.
        let observer = Observer::new(config)?;
        let (session, owned) = match self.source {
            Source::Connect(settings) => {
                let (transport, events) = settings.connect().await?;
                (Session::start(transport, events, CLOSE_TIMEOUT), true)
            }
            Source::Session(session) => (session, false),
        };
        let list = Arc::new(watch::channel(Vec::new()).0);
        let (listed, first) = oneshot::channel();
        let outputs = Outputs::new();
        let board = Board::listing(
            Arc::clone(&outputs),
            Listing {
                list: Arc::clone(&list),
                first: Some(listed),
            },
        );
        let mut machine = Machine::observer(observer).with_close_timeout(CLOSE_TIMEOUT);
        if owned {
            machine = machine.ending_session();
        }
        let link = session.add(machine, board);
        let observation = Observation {
            link: Arc::new(link),
            outputs,
            list,
            session: owned.then_some(session),
        };
        let mut status = observation.status();
        let stopped = async {
            while !matches!(status.borrow_and_update().role, Role::Failed | Role::Closed) {
                if status.changed().await.is_err() {
                    break;
                }
            }
        };
        let waited = tokio::time::timeout(self.start_timeout, async {
            tokio::select! {
                // Listed (an error here means the machine is gone: see the status).
                first = first => first.map_err(|_| observation.fatal()),
                () = stopped => Err(observation.fatal()),
            }
        })
        .await;
        match waited {
            Ok(Ok(())) => Ok(observation),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ObserveError::Timeout(
                self.start_timeout,
                "the queue to be listed",
            )),
        }
    }
}

/// A running observation of a queue: its participants in queue order, who
/// holds, and every change. Made by [`Election::observe`](crate::Election::observe) or [`Session::observe`].
///
/// Cheap to clone: clones share one observer. It ends when
/// [`close`](Self::close) is called, or — in the background — when the last
/// handle is dropped.
#[derive(Debug, Clone)]
pub struct Observation {
    link: Arc<Link>,
    outputs: Arc<Outputs>,
    list: Arc<watch::Sender<Vec<Participant>>>,
    /// The session, when it is this observation's own.
    session: Option<Session>,
}

impl Observation {
    /// Every participant, oldest node first (queue order); `holds` marks
    /// those that lead or hold now, by the recipe (the `k` lowest of an
    /// election with `k` leaders). Once the observation has stopped, the
    /// last list it saw.
    pub fn participants(&self) -> Vec<Participant> {
        self.list.borrow().clone()
    }

    /// The oldest holder: the leader (with `k` leaders, the first of them),
    /// the lock's holder; `None` if nobody holds now.
    pub fn leader(&self) -> Option<Participant> {
        self.list.borrow().iter().find(|p| p.holds).cloned()
    }

    /// Everyone who holds now, in queue order (the `k` leaders).
    pub fn holders(&self) -> Vec<Participant> {
        self.list
            .borrow()
            .iter()
            .filter(|p| p.holds)
            .cloned()
            .collect()
    }

    /// The participant list and every change to it. It changes only when the
    /// queue does (a node joins or leaves, or who holds changes), never on a
    /// mere re-listing, reconnect or watch event.
    ///
    /// ```no_run
    /// # async fn example(observation: zkelect::Observation) {
    /// let mut queue = observation.changes();
    /// while queue.changed().await.is_ok() {
    ///     // A node whose id a revocation request replaced has none.
    ///     let ids: Vec<Option<String>> =
    ///         queue.borrow_and_update().iter().map(|p| p.id().map(str::to_owned)).collect();
    ///     println!("queue: {ids:?}");
    /// }
    /// # }
    /// ```
    pub fn changes(&self) -> watch::Receiver<Vec<Participant>> {
        self.list.subscribe()
    }

    /// The observer's status: its role is [`Role::Observer`] while it runs,
    /// then `Closed` or `Failed` (with the error).
    pub fn status(&self) -> watch::Receiver<Status> {
        self.outputs.status()
    }

    /// The error that stopped the observation, if one did.
    pub fn error(&self) -> Option<CandidateError> {
        self.outputs.read(|s| s.error.clone())
    }

    /// Waits until someone holds and returns the oldest holder (at once if
    /// someone does now). It waits for as long as the queue has no holder,
    /// and no longer than the observation runs: once it stops it returns
    /// the reason — [`ObserveError::Closed`] (closed, or the session was),
    /// [`ObserveError::Fatal`] (`NoAuth` on the queue) or
    /// [`ObserveError::Session`] (rejected credentials). Bound it with `tokio::time::timeout` to wait
    /// less. Cancellation-safe.
    pub async fn wait_leader(&self) -> Result<Participant, ObserveError> {
        let mut list = self.list.subscribe();
        let mut status = self.status();
        loop {
            // Stopped first: a stopped observation's list is its last, not the queue's.
            if matches!(status.borrow_and_update().role, Role::Failed | Role::Closed) {
                return Err(self.fatal());
            }
            if let Some(p) = list.borrow_and_update().iter().find(|p| p.holds) {
                return Ok(p.clone());
            }
            tokio::select! {
                // The sender lives as long as this handle: never an error.
                _ = list.changed() => {}
                changed = status.changed() => if changed.is_err() {
                    return Err(self.fatal());
                },
            }
        }
    }

    fn fatal(&self) -> ObserveError {
        match self.error() {
            Some(CandidateError::AuthFailed) => {
                ObserveError::Session(SessionError::rejected_later())
            }
            Some(e) => ObserveError::Fatal(e),
            None => ObserveError::Closed,
        }
    }

    /// Stops observing and — when the session is this observation's own
    /// (made by [`Election::observe`](crate::Election::observe)) — closes it. Idempotent.
    pub async fn close(&self) {
        if let Some(wait) = self.link.close() {
            let bound = CLOSE_TIMEOUT * 2 + Duration::from_secs(1);
            if tokio::time::timeout(bound, wait).await.is_err() {
                tracing::warn!("close: the session did not answer in time");
            }
        }
        if let Some(session) = &self.session {
            session.close().await;
        }
    }
}

#[cfg(all(test, feature = "memory"))]
mod tests {
    use std::time::Duration;

    use zkelect_core::{ConfigError, Recipe};

    use super::*;
    use crate::memory::MemoryServer;
    use crate::Election;

    const PATH: &str = "/svc/workers";
    const SESSION: Duration = Duration::from_secs(4);

    fn ids(list: &[Participant]) -> Vec<(&str, bool)> {
        list.iter()
            .map(|p| (p.id().unwrap_or_default(), p.holds))
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn lists_in_queue_order_and_knows_the_k_leaders() {
        let server = MemoryServer::new();
        let session = Session::connect(server.settings(SESSION)).await.unwrap();
        let mut held = Vec::new();
        for id in ["a", "b", "c"] {
            held.push(
                session
                    .election(PATH)
                    .id(id)
                    .leaders(2)
                    .join()
                    .await
                    .unwrap(),
            );
        }
        let o = Election::observe(server.settings(SESSION), PATH)
            .leaders(2)
            .start()
            .await
            .unwrap();
        assert_eq!(
            ids(&o.participants()),
            [("a", true), ("b", true), ("c", false)]
        );
        assert_eq!(
            o.leader().and_then(|p| p.id().map(str::to_owned)),
            Some("a".into())
        );
        assert_eq!(o.holders().len(), 2);
        // Tokens are the nodes' czxids: they grow in queue order.
        let tokens: Vec<i64> = o.participants().iter().map(|p| p.token.0).collect();
        assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
        // The first leader leaves: b leads, and c now holds too.
        held.remove(0).close().await;
        let mut changes = o.changes();
        changes
            .wait_for(|l| ids(l) == [("b", true), ("c", true)])
            .await
            .unwrap();
        assert_eq!(o.wait_leader().await.unwrap().id(), Some("b"));
        o.close().await;
        // Its last list still names b, but a stopped observation knows no leader.
        assert!(matches!(o.wait_leader().await, Err(ObserveError::Closed)));
        session.close().await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_watch_changes_only_when_the_queue_does() {
        let server = MemoryServer::new();
        let session = Session::connect(server.settings(SESSION)).await.unwrap();
        let a = session.election(PATH).id("a").join().await.unwrap();
        a.wait_leader().await.unwrap();
        let o = session
            .observe(PATH, Recipe::Election { leaders: 1 })
            .start()
            .await
            .unwrap();
        let mut changes = o.changes();
        // A node of another queue under the same parent: the child watch
        // fires and the observer lists again, but the queue is the same.
        let other = session
            .election(PATH)
            .id("x")
            .configure(|c| c.prefix("other_"))
            .join()
            .await
            .unwrap();
        assert_eq!(server.children(PATH).len(), 2);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!changes.has_changed().unwrap(), "{:?}", *changes.borrow());
        // A new participant changes it, once.
        let b = session.election(PATH).id("b").join().await.unwrap();
        changes.changed().await.unwrap();
        assert_eq!(
            ids(&changes.borrow_and_update()),
            [("a", true), ("b", false)]
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!changes.has_changed().unwrap());
        for e in [a, b, other] {
            e.close().await;
        }
        session.close().await;
    }

    #[tokio::test(start_paused = true)]
    async fn wait_leader_waits_for_a_leader_and_ends_with_the_observation() {
        let server = MemoryServer::new();
        let session = Session::connect(server.settings(SESSION)).await.unwrap();
        // Nobody yet (the path does not even exist): listed as empty.
        let o = session.observe(PATH, Recipe::Mutex).start().await.unwrap();
        assert!(o.participants().is_empty() && o.leader().is_none());
        let waiting = tokio::spawn({
            let o = o.clone();
            async move { o.wait_leader().await }
        });
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(!waiting.is_finished());
        let holder = session
            .election(PATH)
            .id("h")
            .configure(|c| c.rule(zkelect_core::Rule::Mutex))
            .join()
            .await
            .unwrap();
        assert_eq!(waiting.await.unwrap().unwrap().id(), Some("h"));
        holder.close().await;
        // Nobody holds again; a waiter is told when the observation stops.
        let waiting = tokio::spawn({
            let o = o.clone();
            async move { o.wait_leader().await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished());
        session.close().await;
        assert!(matches!(waiting.await.unwrap(), Err(ObserveError::Closed)));
        assert!(matches!(o.wait_leader().await, Err(ObserveError::Closed)));
    }

    /// The path does not exist when the observation starts, then is
    /// created, wiped (`deleteall`) and created again: each change is
    /// reported, the absence as an empty list, through the session's
    /// `exists` watch (the driver routes its `NodeCreated`), with nothing
    /// polled while the path is missing.
    #[tokio::test(start_paused = true)]
    async fn follows_a_path_that_does_not_exist_yet_and_one_deleted_and_created_again() {
        use zkelect_core::Request;

        use crate::transport::Transport;

        let server = MemoryServer::new();
        let session = Session::connect(server.settings(SESSION)).await.unwrap();
        let o = session
            .observe(PATH, Recipe::Election { leaders: 1 })
            .start()
            .await
            .unwrap();
        let mut changes = o.changes();
        assert!(o.participants().is_empty());
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!changes.has_changed().unwrap());
        // A member that stays out once revoked, so that nobody makes the
        // path again until the redeploy below.
        let a = session
            .election(PATH)
            .id("a")
            .configure(|c| c.rejoin_on_revoke(false))
            .join()
            .await
            .unwrap();
        changes.wait_for(|l| ids(l) == [("a", true)]).await.unwrap();
        // deleteall by an operator: the node, then the path.
        let (operator, _events) = server.connect(SESSION);
        let node = server.children(PATH).pop().unwrap();
        for path in [format!("{PATH}/{node}"), PATH.to_owned()] {
            let delete = Request::Delete {
                path,
                version: None,
            };
            operator.perform(delete).await.unwrap();
        }
        changes.wait_for(|l| l.is_empty()).await.unwrap();
        a.close().await;
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(
            server.children("/svc").is_empty(),
            "nobody made the path again"
        );
        // Redeployed: a new member creates the path again, and the
        // creation's event wakes the observer at once (a poll backing off
        // through 30 s of absence would look seconds later).
        let b = session.election(PATH).id("b").join().await.unwrap();
        tokio::time::timeout(
            Duration::from_millis(100),
            changes.wait_for(|l| ids(l) == [("b", true)]),
        )
        .await
        .expect("woken by the path's creation")
        .unwrap();
        assert!(o.error().is_none());
        b.close().await;
        o.close().await;
        session.close().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_bad_description_is_a_typed_error_before_connecting() {
        let server = MemoryServer::new();
        let e = Election::observe(server.settings(SESSION), PATH)
            .leaders(0)
            .start()
            .await
            .unwrap_err();
        assert!(
            matches!(e, ObserveError::Config(ConfigError::InvalidLeaders(0))),
            "{e:?}"
        );
        let e = Election::observe(server.settings(SESSION), "no-slash")
            .start()
            .await
            .unwrap_err();
        assert!(matches!(e, ObserveError::Config(_)), "{e:?}");
    }
}
