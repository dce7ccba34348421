//! What the bench needs from an election implementation, and how contenders
//! report leadership with one clock.

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Result;
use async_trait::async_trait;
use tokio::sync::Notify;

/// Which nodes a zkelect follower watches (`zkelect_core::WatchStrategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Strategy {
    /// Watch only the next lower node (no herd).
    Predecessor,
    /// Watch the election node's children (every change wakes everyone).
    Parent,
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Strategy::Predecessor => "predecessor",
            Strategy::Parent => "parent",
        })
    }
}

impl FromStr for Strategy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "predecessor" => Ok(Strategy::Predecessor),
            "parent" => Ok(Strategy::Parent),
            other => Err(format!(
                "unknown strategy {other:?} (expected predecessor or parent)"
            )),
        }
    }
}

/// Where contenders connect and how.
#[derive(Debug, Clone)]
pub struct ConnectSettings {
    /// The ZooKeeper connect string (`host:port`).
    pub connect: String,
    /// The session timeout every contender requests.
    pub session_timeout: Duration,
    /// How long a connect may take before the bench gives up.
    pub connect_timeout: Duration,
}

/// One moment a contender was told it leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderEvent {
    /// The contender's id.
    pub contender: u64,
    /// When it was told (the bench's one monotonic clock).
    pub at: Instant,
    /// For polled implementations: how long before `at` the previous poll
    /// (which still saw a follower) ran, i.e. the uncertainty of `at`.
    pub poll_gap: Option<Duration>,
}

/// Collects [`LeaderEvent`]s from every contender of a run and wakes whoever
/// waits for one. Contenders report only rising edges (follower → leader).
#[derive(Debug, Default)]
pub struct LeaderBoard {
    events: Mutex<Vec<LeaderEvent>>,
    notify: Notify,
}

impl LeaderBoard {
    /// An empty board.
    pub fn new() -> Arc<LeaderBoard> {
        Arc::new(LeaderBoard::default())
    }

    /// Records that `contender` was told it leads at `at`. Callable from any
    /// thread, async or not.
    pub fn report(&self, event: LeaderEvent) {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event);
        self.notify.notify_waiters();
    }

    /// Waits until an event matching `wanted` is on the board and returns the
    /// earliest such; `None` after `timeout`.
    pub async fn wait_for(
        &self,
        wanted: impl Fn(&LeaderEvent) -> bool,
        timeout: Duration,
    ) -> Option<LeaderEvent> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Register before looking, so a report between the look and the
            // wait is not missed.
            notified.as_mut().enable();
            if let Some(event) = self.find(&wanted) {
                return Some(event);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.find(&wanted);
            }
        }
    }

    fn find(&self, wanted: &impl Fn(&LeaderEvent) -> bool) -> Option<LeaderEvent> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|e| wanted(e))
            .min_by_key(|e| e.at)
            .copied()
    }

    /// Forgets every event (between rounds).
    pub fn clear(&self) {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// One candidate with its own ZooKeeper session.
#[async_trait]
pub trait Contender: Send + Sync {
    /// The id the bench gave it (also its order of joining).
    fn id(&self) -> u64;

    /// Whether it currently believes it leads.
    fn is_leader(&self) -> bool;

    /// Its state in a word or two, for diagnostics (e.g. zkelect's role).
    fn describe(&self) -> String;

    /// Closes its ZooKeeper session (a real `closeSession`, so the server
    /// removes its ephemeral node at once) and drops it.
    async fn kill(self: Box<Self>) -> Result<()>;
}

/// An election implementation under test: makes contenders.
#[async_trait]
pub trait Implementation: Send + Sync {
    /// Its name in reports (`latch`, `zkelect`).
    fn name(&self) -> &'static str;

    /// The watch strategy, for implementations that have one.
    fn strategy(&self) -> Option<Strategy>;

    /// Told when this implementation's round starts (`true`) and ends
    /// (`false`), so that helpers such as a polling thread need not run
    /// during other implementations' rounds. The default does nothing.
    fn focus(&self, _on: bool) {}

    /// Connects a new session and joins the election at `path` as contender
    /// `id`; returns once it has joined (its node exists and it has looked at
    /// the queue). Leadership changes go to `board`.
    async fn start(
        &self,
        id: u64,
        path: &str,
        board: Arc<LeaderBoard>,
    ) -> Result<Box<dyn Contender>>;
}

/// Turns a zookeeper-client error into one that says what was being done.
pub(crate) fn zk_err(
    what: impl Into<String>,
) -> impl FnOnce(zookeeper_client::Error) -> anyhow::Error {
    let what = what.into();
    move |e| anyhow::anyhow!("{what}: {e}")
}

/// Creates the persistent node `path` with an open ACL (every directory and
/// parent the bench makes), with an error that names the path.
pub(crate) async fn create_dir(client: &zookeeper_client::Client, path: &str) -> Result<()> {
    let options =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    client
        .create(path, b"", &options)
        .await
        .map(drop)
        .map_err(zk_err(format!("create({path})")))
}

/// Deletes `path` and everything under it (children first); a node already
/// gone is no error.
pub(crate) async fn delete_tree(client: &zookeeper_client::Client, path: &str) -> Result<()> {
    let children = match client.list_children(path).await {
        Ok(children) => children,
        Err(zookeeper_client::Error::NoNode) => return Ok(()),
        Err(e) => return Err(zk_err(format!("list_children({path})"))(e)),
    };
    for child in children {
        Box::pin(delete_tree(client, &format!("{path}/{child}"))).await?;
    }
    match client.delete(path, None).await {
        Ok(()) | Err(zookeeper_client::Error::NoNode) => Ok(()),
        Err(e) => Err(zk_err(format!("delete({path})"))(e)),
    }
}

/// A zookeeper-client session for the baselines of the recipe benchmarks,
/// within the settings' connect timeout.
pub(crate) async fn zkc_connect(settings: &ConnectSettings) -> Result<zookeeper_client::Client> {
    tokio::time::timeout(
        settings.connect_timeout,
        zookeeper_client::Client::connector()
            .with_session_timeout(settings.session_timeout)
            .connect(&settings.connect),
    )
    .await
    .map_err(|_| anyhow::anyhow!("zookeeper-client: no session within the connect timeout"))?
    .map_err(zk_err("zookeeper-client: connecting"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn board_wakes_waiters_and_picks_the_earliest_match() {
        let board = LeaderBoard::new();
        let t0 = Instant::now();
        let b = board.clone();
        let reporter = tokio::spawn(async move {
            tokio::task::yield_now().await;
            b.report(LeaderEvent {
                contender: 1,
                at: t0,
                poll_gap: None,
            });
            b.report(LeaderEvent {
                contender: 2,
                at: t0 + Duration::from_millis(1),
                poll_gap: None,
            });
        });
        let got = board
            .wait_for(|e| e.contender == 2, Duration::from_secs(5))
            .await;
        reporter.await.unwrap();
        assert_eq!(got.map(|e| e.contender), Some(2));
        assert_eq!(
            board
                .wait_for(|_| true, Duration::ZERO)
                .await
                .map(|e| e.contender),
            Some(1)
        );
        board.clear();
        assert!(board.wait_for(|_| true, Duration::ZERO).await.is_none());
    }

    #[test]
    fn strategies_parse_and_print() {
        for s in [Strategy::Predecessor, Strategy::Parent] {
            assert_eq!(s.to_string().parse::<Strategy>(), Ok(s));
        }
        assert!("herd".parse::<Strategy>().is_err());
    }
}
