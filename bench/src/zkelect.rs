//! zkelect's own [`Election`] over one of its real transports, behind the
//! bench's [`Implementation`] trait.
//!
//! * Leadership is read from the election's role watch (`changes()`): a task
//!   per contender takes the time the moment the role becomes `Leader`, as an
//!   application awaiting `changes()` would learn it.
//! * The kill is a real session close through the same transport the
//!   election runs on ([`Transport::close`], i.e. zookeeper-async's
//!   `close()`, the same call the latch's kill makes), not
//!   [`Election::close`], which deletes the node first: the failover must be
//!   triggered the same way for both implementations. The election is closed
//!   afterwards, to stop its driver.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use async_trait::async_trait;
use tokio::task::JoinHandle;
use zkelect::{Election, Takeover, Transport, WatchStrategy};
use zkelect_core::{Reply, Request, ZkCode};

use crate::contender::{
    ConnectSettings, Contender, Implementation, LeaderBoard, LeaderEvent, Strategy,
};
use crate::many::ZkelectTransport;

/// Makes zkelect contenders with one watch strategy.
pub struct Zkelect {
    settings: ConnectSettings,
    strategy: Strategy,
    transport: ZkelectTransport,
    takeover: Takeover,
}

impl Zkelect {
    /// zkelect contenders using `strategy`, over the zookeeper-async
    /// transport, taking over on the notification.
    pub fn new(settings: ConnectSettings, strategy: Strategy) -> Zkelect {
        Zkelect::with(
            settings,
            strategy,
            ZkelectTransport::ZookeeperAsync,
            Takeover::OnNotification,
        )
    }

    /// zkelect contenders using `strategy` over `transport`, taking over by
    /// `takeover`.
    pub fn with(
        settings: ConnectSettings,
        strategy: Strategy,
        transport: ZkelectTransport,
        takeover: Takeover,
    ) -> Zkelect {
        Zkelect {
            settings,
            strategy,
            transport,
            takeover,
        }
    }
}

/// The transport, shared between the election (which owns its handle) and
/// the bench (which closes the session to kill the contender).
struct Shared(Arc<dyn Transport>);

#[async_trait]
impl Transport for Shared {
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode> {
        self.0.perform(request).await
    }

    async fn close(&self) {
        self.0.close().await;
    }
}

#[async_trait]
impl Implementation for Zkelect {
    fn name(&self) -> &'static str {
        "zkelect"
    }

    fn strategy(&self) -> Option<Strategy> {
        Some(self.strategy)
    }

    async fn start(
        &self,
        id: u64,
        path: &str,
        board: Arc<LeaderBoard>,
    ) -> Result<Box<dyn Contender>> {
        let (transport, events) = self
            .transport
            .options(&self.settings)
            .connect()
            .await
            .map_err(|e| anyhow::anyhow!("contender {id}: connecting: {e}"))?;
        let joined = Election::builder(Shared(transport.clone()), events)
            .path(path)
            .id(format!("c{id}"))
            .strategy(match self.strategy {
                Strategy::Predecessor => WatchStrategy::Predecessor,
                Strategy::Parent => WatchStrategy::Parent,
            })
            .takeover(self.takeover)
            .close_timeout(Duration::from_secs(1))
            .join_timeout(self.settings.connect_timeout)
            .join()
            .await;
        let election = match joined {
            Ok(election) => election,
            Err(e) => {
                transport.close().await;
                return Err(e).with_context(|| format!("contender {id}: joining {path}"));
            }
        };

        let mut role = election.changes();
        let mut was_leader = role.borrow_and_update().is_leader();
        let watcher = tokio::spawn(async move {
            while role.changed().await.is_ok() {
                let leader = role.borrow_and_update().is_leader();
                if leader && !was_leader {
                    board.report(LeaderEvent {
                        contender: id,
                        at: Instant::now(),
                        poll_gap: None,
                    });
                }
                was_leader = leader;
            }
        });
        Ok(Box::new(ZkelectContender {
            id,
            election,
            transport,
            watcher,
        }))
    }
}

struct ZkelectContender {
    id: u64,
    election: Election,
    transport: Arc<dyn Transport>,
    watcher: JoinHandle<()>,
}

#[async_trait]
impl Contender for ZkelectContender {
    fn id(&self) -> u64 {
        self.id
    }

    fn is_leader(&self) -> bool {
        self.election.role().is_leader()
    }

    fn describe(&self) -> String {
        match self.election.role() {
            zkelect::Role::Leader(_) => "Leader".into(),
            zkelect::Role::Suspended(_) => "Suspended".into(),
            other => format!("{other:?}"),
        }
    }

    async fn kill(self: Box<Self>) -> Result<()> {
        self.transport.close().await;
        self.watcher.abort();
        // The session is gone; this only stops the driver (bounded by the
        // close timeout given at build time).
        let _ = tokio::time::timeout(Duration::from_secs(3), self.election.close()).await;
        Ok(())
    }
}
