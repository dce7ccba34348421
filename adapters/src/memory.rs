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

use crate::transport::{
    EventStream, MultiError, MultiOp, MultiOpResult, Transport, TransportEvent,
};

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

    /// The data of `path` right now, if it exists.
    pub fn data(&self, path: &str) -> Option<Vec<u8>> {
        self.shared
            .lock()
            .ok()
            .and_then(|s| s.model.data(path).map(<[u8]>::to_vec))
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

    /// All or nothing over the model: the operations run on a copy, which
    /// replaces the model only if every one succeeded; watches fire then.
    async fn multi(&self, ops: Vec<MultiOp>) -> Result<Vec<MultiOpResult>, MultiError> {
        let Some(session) = self.session else {
            return Err(MultiError::Request(ZkCode::ConnectionLoss));
        };
        let Ok(mut shared) = self.server.shared.lock() else {
            return Err(MultiError::Request(ZkCode::ConnectionLoss));
        };
        shared.expire();
        let now = shared.now();
        if !shared.model.session_alive(session) {
            return Err(MultiError::Request(ZkCode::SessionExpired));
        }
        let mut model = shared.model.clone();
        let mut fired = Vec::new();
        let mut results = Vec::with_capacity(ops.len());
        for (index, op) in ops.into_iter().enumerate() {
            let failed = |code| MultiError::Op { index, code };
            let (result, more) = match op {
                MultiOp::Check { path, version } => match model.stat(&path) {
                    None => return Err(failed(ZkCode::NoNode)),
                    Some(stat) if version.is_some_and(|v| v != stat.version) => {
                        return Err(failed(ZkCode::BadVersion))
                    }
                    Some(_) => (MultiOpResult::Checked, Vec::new()),
                },
                MultiOp::Create {
                    path,
                    data,
                    mode,
                    acl,
                } => {
                    let request = Request::Create {
                        path,
                        data,
                        mode,
                        acl,
                    };
                    match model.apply(now, session, &request) {
                        (Ok(Reply::Created { path, .. }), more) => {
                            (MultiOpResult::Created { path }, more)
                        }
                        (Ok(_), _) => return Err(failed(ZkCode::Other(-2))),
                        (Err(code), _) => return Err(failed(code)),
                    }
                }
                MultiOp::SetData {
                    path,
                    data,
                    version,
                } => match model.set_data(now, session, &path, &data, version) {
                    (Ok(stat), more) => (MultiOpResult::DataSet(stat), more),
                    (Err(code), _) => return Err(failed(code)),
                },
                MultiOp::Delete { path, version } => {
                    match model.apply(now, session, &Request::Delete { path, version }) {
                        (Ok(_), more) => (MultiOpResult::Deleted, more),
                        (Err(code), _) => return Err(failed(code)),
                    }
                }
            };
            results.push(result);
            fired.extend(more);
        }
        shared.model = model;
        shared.deliver(fired);
        Ok(results)
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use zkelect_core::{Acl, CreateMode, Request, ZkCode};

    use super::MemoryServer;
    use crate::transport::{MultiError, MultiOp, MultiOpResult, Transport};
    use crate::{Election, GuardedWriteError};

    const SESSION: Duration = Duration::from_secs(4);

    fn create(path: &str) -> Request {
        Request::Create {
            path: path.into(),
            data: Vec::new(),
            mode: CreateMode::Persistent,
            acl: Acl::Open,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_multi_applies_all_or_nothing() {
        let server = MemoryServer::new();
        let (zk, _events) = server.connect(SESSION);
        assert!(zk.perform(create("/a")).await.is_ok());
        let failing = vec![
            MultiOp::SetData {
                path: "/a".into(),
                data: b"x".to_vec(),
                version: None,
            },
            MultiOp::Check {
                path: "/missing".into(),
                version: None,
            },
        ];
        assert_eq!(
            zk.multi(failing).await,
            Err(MultiError::Op {
                index: 1,
                code: ZkCode::NoNode
            })
        );
        assert_eq!(
            server.data("/a"),
            Some(Vec::new()),
            "the first op was rolled back"
        );
        let passing = vec![
            MultiOp::Check {
                path: "/a".into(),
                version: Some(0),
            },
            MultiOp::SetData {
                path: "/a".into(),
                data: b"y".to_vec(),
                version: Some(0),
            },
        ];
        let results = zk.multi(passing).await.unwrap();
        assert!(
            matches!(results.as_slice(), [MultiOpResult::Checked, MultiOpResult::DataSet(s)] if s.version == 1)
        );
        assert_eq!(server.data("/a"), Some(b"y".to_vec()));
    }

    /// Bad input to a guarded write: the failing operation is named, by its
    /// index among the caller's, and nothing of the multi is applied.
    #[tokio::test(start_paused = true)]
    async fn a_guarded_write_with_a_bad_operation_names_it_and_writes_nothing() {
        let server = MemoryServer::new();
        let (admin, _admin_events) = server.connect(SESSION);
        assert!(admin.perform(create("/fenced")).await.is_ok());
        let (a, a_events) = server.connect(SESSION);
        let leader = Election::builder(a, a_events)
            .path("/svc/leader")
            .id("a")
            .join()
            .await
            .unwrap();
        leader.wait_leader().await.unwrap();
        let set = |path: &str| MultiOp::SetData {
            path: path.to_owned(),
            data: b"x".to_vec(),
            version: None,
        };
        assert_eq!(
            leader.guarded(vec![set("/fenced"), set("/missing")]).await,
            Err(GuardedWriteError::Op {
                index: 1,
                code: ZkCode::NoNode
            })
        );
        assert_eq!(
            leader
                .guarded(vec![MultiOp::SetData {
                    path: "/fenced".to_owned(),
                    data: b"x".to_vec(),
                    version: Some(7),
                }])
                .await,
            Err(GuardedWriteError::Op {
                index: 0,
                code: ZkCode::BadVersion
            })
        );
        assert_eq!(server.data("/fenced"), Some(Vec::new()), "nothing written");
        leader.close().await;
    }

    #[tokio::test(start_paused = true)]
    async fn guarded_writes_pass_for_the_leader_and_fail_for_a_deposed_one() {
        let server = MemoryServer::new();
        let (admin, _admin_events) = server.connect(SESSION);
        assert!(admin.perform(create("/fenced")).await.is_ok());
        let (a, a_events) = server.connect(SESSION);
        let leader = Election::builder(a, a_events)
            .path("/svc/leader")
            .id("a")
            .join()
            .await
            .unwrap();
        let token = leader.wait_leader().await.unwrap();
        let (b, b_events) = server.connect(SESSION);
        let follower = Election::builder(b, b_events)
            .path("/svc/leader")
            .id("b")
            .join()
            .await
            .unwrap();
        assert_eq!(
            follower.guarded_set_data("/fenced", b"b".to_vec()).await,
            Err(GuardedWriteError::NotLeader)
        );
        let stat = leader
            .guarded_set_data("/fenced", b"a1".to_vec())
            .await
            .unwrap();
        assert_eq!(stat.version, 1);
        // An operator revokes the leader's node; the leader writes before
        // its driver has heard of it (nothing yields in between on this
        // single-threaded runtime), so only the server's check stops it.
        let node = leader.node().unwrap();
        assert!(admin
            .perform(Request::Delete {
                path: format!("/svc/leader/{node}"),
                version: None,
            })
            .await
            .is_ok());
        assert_eq!(
            leader.guarded_set_data("/fenced", b"zombie".to_vec()).await,
            Err(GuardedWriteError::Deposed { token })
        );
        assert_eq!(server.data("/fenced"), Some(b"a1".to_vec()));
        follower.wait_leader().await.unwrap();
        follower
            .guarded_set_data("/fenced", b"b".to_vec())
            .await
            .unwrap();
        assert_eq!(server.data("/fenced"), Some(b"b".to_vec()));
        leader.close().await;
        assert_eq!(
            leader.guarded_set_data("/fenced", b"late".to_vec()).await,
            Err(GuardedWriteError::Closed)
        );
        follower.close().await;
    }
}
