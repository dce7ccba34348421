//! An in-process transport over the simulator's ZooKeeper model: many
//! elections in one process share one [`MemoryServer`], with real ZooKeeper
//! semantics (sequential names, ephemeral owners, one-shot watches, sessions)
//! and no network. Handy for tests of code built on [`Election`](crate::Election),
//! including under `#[tokio::test(start_paused = true)]`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), zkelect::ElectionError> {
//! use std::time::Duration;
//! use zkelect::memory::MemoryServer;
//! use zkelect::Election;
//!
//! let server = MemoryServer::new();
//! let (transport, events) = server.connect(Duration::from_secs(4));
//! let election = Election::builder(transport, events).path("/svc/leader").id("a").join().await?;
//! assert!(election.wait_leader().await.is_ok());
//! election.close().await;
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio::time::Instant;
use zkelect_core::{Reply, Request, SessionEvent, SessionId, Timestamp, ZkCode};
use zkelect_sim::zk::{Fired, ZkModel};

use crate::transport::{EventStream, Transport, TransportEvent};

struct Shared {
    model: ZkModel,
    epoch: Instant,
    sessions: BTreeMap<SessionId, mpsc::UnboundedSender<TransportEvent>>,
}

impl Shared {
    fn now(&self) -> Timestamp {
        let ms = Instant::now()
            .saturating_duration_since(self.epoch)
            .as_millis();
        Timestamp::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
    }

    fn deliver(&mut self, fired: Vec<Fired>) {
        for f in fired {
            if let Some(tx) = self.sessions.get(&f.session) {
                let _ = tx.send(TransportEvent::Watch(f.event));
            }
        }
    }

    /// Expires silent sessions, telling their clients.
    fn expire(&mut self) {
        let now = self.now();
        let (expired, fired) = self.model.expire_due(now);
        for s in expired {
            if let Some(tx) = self.sessions.remove(&s) {
                let _ = tx.send(TransportEvent::Session(SessionEvent::Expired));
            }
        }
        self.deliver(fired);
    }
}

/// One in-memory ZooKeeper, shared by every transport connected to it.
#[derive(Clone)]
pub struct MemoryServer {
    shared: Arc<Mutex<Shared>>,
}

impl std::fmt::Debug for MemoryServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryServer").finish_non_exhaustive()
    }
}

impl Default for MemoryServer {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryServer {
    /// An empty server.
    pub fn new() -> Self {
        Self {
            shared: Arc::new(Mutex::new(Shared {
                model: ZkModel::default(),
                epoch: Instant::now(),
                sessions: BTreeMap::new(),
            })),
        }
    }

    /// Opens a session and returns its transport, whose event stream starts with `Connected`.
    pub fn connect(&self, session_timeout: Duration) -> (MemoryTransport, EventStream) {
        let (tx, rx) = mpsc::unbounded_channel();
        let session = match self.shared.lock() {
            Ok(mut shared) => {
                let now = shared.now();
                let (id, timeout) = shared.model.open_session(now, session_timeout, None);
                shared.sessions.insert(id, tx.clone());
                let _ = tx.send(TransportEvent::Session(SessionEvent::Connected {
                    session_id: Some(id),
                    timeout,
                }));
                Some(id)
            }
            Err(_) => None,
        };
        (
            MemoryTransport {
                server: self.clone(),
                session,
            },
            rx,
        )
    }

    /// The children of `path` right now.
    pub fn children(&self, path: &str) -> Vec<String> {
        self.shared
            .lock()
            .map(|s| s.model.children(path))
            .unwrap_or_default()
    }
}

/// A [`Transport`] holding one session on a [`MemoryServer`].
#[derive(Debug)]
pub struct MemoryTransport {
    server: MemoryServer,
    session: Option<SessionId>,
}

#[async_trait]
impl Transport for MemoryTransport {
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode> {
        let Some(session) = self.session else {
            return Err(ZkCode::ConnectionLoss);
        };
        let Ok(mut shared) = self.server.shared.lock() else {
            return Err(ZkCode::ConnectionLoss);
        };
        shared.expire();
        let now = shared.now();
        let (result, fired) = shared.model.apply(now, session, &request);
        shared.deliver(fired);
        result
    }

    async fn close(&self) {
        let Some(session) = self.session else { return };
        if let Ok(mut shared) = self.server.shared.lock() {
            let fired = shared.model.close_session(session);
            shared.deliver(fired);
            if let Some(tx) = shared.sessions.remove(&session) {
                let _ = tx.send(TransportEvent::Session(SessionEvent::Closed));
            }
        }
    }
}
