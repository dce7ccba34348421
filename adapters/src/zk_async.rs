//! The transport over `zookeeper-async` 5.0.0, with what it takes to make up
//! for that client's measured defects (see `shared/zk-clients.md`):
//!
//! - **Watches lost on reconnect.** Every `Connected` is reported to the core,
//!   which re-lists and re-arms every watch. Each watch callback carries the
//!   connection generation it was set in; callbacks from an older generation
//!   are dropped (the client keeps dead callbacks and can fire two for one event).
//! - **Expiry only as the deprecated `NotConnected`.** Mapped to `Expired`; the
//!   client then silently opens a new session, reported as `Connected`, which
//!   the core treats as a new session. The core also checks its own node's
//!   `ephemeralOwner` after every reconnect and learns the session id from it.
//! - **Dead servers noticed late.** The core probes every third of the session
//!   timeout and suspends after two thirds without an answer; every operation
//!   here is bounded by a timeout so a silent server cannot hold a request.
//! - **Auth lost on reconnect.** Credentials are replayed before `Connected` is
//!   reported, so the core's re-listing runs authenticated.
//! - **Reconnect storms below 1.5 s.** Shorter session timeouts are refused.
//! - **`connect()` spins forever on a dead server.** It is bounded by a timeout.
//! - **Containers silently created as persistent nodes.** Mapped to persistent
//!   on purpose, so nothing pretends otherwise.
//! - **Callbacks.** The state listener and watch callbacks only send into
//!   channels; they never block and never run logic.
//!
//! Limits: no TLS or SASL (use a transport over another client for those); the
//! negotiated session timeout is not exposed by the client, so the requested
//! one is reported unless [`ConnectOptions::assume_session_timeout`] says
//! otherwise — keep the request within the server's bounds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};
use zkelect_core::{
    Acl, CreateMode, Reply, Request, SessionEvent, Stat, WatchEvent, WatchKind, ZkCode,
};
use zookeeper_async as zka;

use crate::error::ElectionError;
use crate::transport::{EventStream, Transport, TransportEvent};

/// The shortest session timeout this transport accepts: below it the client
/// truncates its ping timer to zero and reconnects in a storm.
pub const SESSION_TIMEOUT_MIN: Duration = Duration::from_millis(1_500);

/// How to reach the server.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// `host:port[,host:port…]`.
    pub hosts: String,
    /// Requested session timeout (default 10 s).
    pub session_timeout: Duration,
    /// How long to try before giving up (default 10 s).
    pub connect_timeout: Duration,
    /// Bound on each operation (default: the session timeout).
    pub op_timeout: Option<Duration>,
    /// Credentials, e.g. `("digest", b"user:pass")`, replayed after every reconnect.
    pub auth: Vec<(String, Vec<u8>)>,
    /// Reported to the core as the negotiated timeout instead of the requested one.
    pub assume_session_timeout: Option<Duration>,
}

impl ConnectOptions {
    /// Defaults for `hosts`.
    pub fn new(hosts: impl Into<String>) -> Self {
        Self {
            hosts: hosts.into(),
            session_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            op_timeout: None,
            auth: Vec::new(),
            assume_session_timeout: None,
        }
    }

    /// Digest credentials `user:password`.
    #[must_use]
    pub fn digest(mut self, user_password: impl Into<String>) -> Self {
        self.auth
            .push(("digest".into(), user_password.into().into_bytes()));
        self
    }

    /// The requested session timeout.
    #[must_use]
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// How long to try to connect.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }
}

struct Shared {
    generation: AtomicU64,
    events: mpsc::UnboundedSender<TransportEvent>,
}

/// A [`Transport`] over one `zookeeper-async` client (one session at a time).
pub struct ZkAsyncTransport {
    zk: Arc<zka::ZooKeeper>,
    shared: Arc<Shared>,
    op_timeout: Duration,
    session_task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for ZkAsyncTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkAsyncTransport").finish_non_exhaustive()
    }
}

struct Quiet;
impl zka::Watcher for Quiet {
    fn handle(&self, _: zka::WatchedEvent) {}
}

impl ZkAsyncTransport {
    /// Connects, authenticates, proves the session works, and returns the
    /// transport with its event stream (which starts with `Connected`).
    pub async fn connect(options: ConnectOptions) -> Result<(Self, EventStream), ElectionError> {
        let fail = |reason: String| ElectionError::Connect {
            hosts: options.hosts.clone(),
            reason,
        };
        if options.session_timeout < SESSION_TIMEOUT_MIN {
            return Err(fail(format!(
                "session timeout {:?} is below {:?}: zookeeper-async reconnects in a storm below it",
                options.session_timeout, SESSION_TIMEOUT_MIN
            )));
        }
        if options.hosts.trim().is_empty() {
            return Err(fail("no hosts given".into()));
        }
        let connecting = zka::ZooKeeper::connect_with_retry_time(
            &options.hosts,
            options.session_timeout,
            Quiet,
            Duration::from_millis(200),
        );
        let zk = match tokio::time::timeout(options.connect_timeout, connecting).await {
            Ok(Ok(zk)) => Arc::new(zk),
            Ok(Err(e)) => return Err(fail(format!("{e} (is the address host:port?)"))),
            Err(_) => {
                return Err(fail(format!(
                    "no server answered within {:?}",
                    options.connect_timeout
                )))
            }
        };
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            generation: AtomicU64::new(0),
            events: events_tx,
        });
        // The listener runs on the client's I/O task: it only records the new
        // generation and forwards the state.
        let (states_tx, states_rx) = mpsc::unbounded_channel();
        let listener_shared = Arc::clone(&shared);
        zk.add_listener(move |state| {
            if !matches!(
                state,
                zka::ZkState::Connected | zka::ZkState::ConnectedReadOnly
            ) {
                listener_shared.generation.fetch_add(1, Ordering::SeqCst);
            }
            let _ = states_tx.send(state);
        });
        let timeout = options
            .assume_session_timeout
            .unwrap_or(options.session_timeout);
        // Prove the session works (and authenticate) before reporting it.
        let ready = async {
            for (scheme, auth) in &options.auth {
                zk.add_auth(scheme.clone(), auth.clone())
                    .await
                    .map_err(|e| match e {
                        zka::ZkError::AuthFailed => {
                            ElectionError::Auth(format!("{scheme} credentials were rejected"))
                        }
                        e => fail(format!("authentication: {e}")),
                    })?;
            }
            loop {
                match zk.exists("/", false).await {
                    Ok(_) => return Ok(()),
                    Err(zka::ZkError::ConnectionLoss) => {
                        tokio::time::sleep(Duration::from_millis(50)).await
                    }
                    Err(zka::ZkError::AuthFailed) => {
                        return Err(ElectionError::Auth("credentials were rejected".into()))
                    }
                    Err(e) => return Err(fail(e.to_string())),
                }
            }
        };
        match tokio::time::timeout(options.connect_timeout, ready).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let _ = zk.close().await;
                return Err(e);
            }
            Err(_) => {
                let _ = tokio::time::timeout(Duration::from_secs(1), zk.close()).await;
                return Err(fail(format!(
                    "the session was not usable within {:?}",
                    options.connect_timeout
                )));
            }
        }
        let _ = shared
            .events
            .send(TransportEvent::Session(SessionEvent::Connected {
                session_id: None,
                timeout,
            }));
        let session_task = tokio::spawn(session_task(
            Arc::clone(&zk),
            Arc::clone(&shared),
            states_rx,
            options.auth.clone(),
            timeout,
        ));
        let op_timeout = options.op_timeout.unwrap_or(options.session_timeout);
        Ok((
            Self {
                zk,
                shared,
                op_timeout,
                session_task,
            },
            events_rx,
        ))
    }

    /// A watch callback that reports only if no reconnect happened since it was set.
    fn watcher(&self) -> impl FnOnce(zka::WatchedEvent) + Send + 'static {
        let shared = Arc::clone(&self.shared);
        let generation = shared.generation.load(Ordering::SeqCst);
        move |event| {
            if shared.generation.load(Ordering::SeqCst) != generation {
                debug!(?event, "dropping a watch event from before a reconnect");
                return;
            }
            if let Some(event) = map_watch(&event) {
                let _ = shared.events.send(TransportEvent::Watch(event));
            }
        }
    }

    async fn perform_unbounded(&self, request: Request) -> Result<Reply, ZkCode> {
        let zk = &self.zk;
        let result = match request {
            Request::Create {
                path,
                data,
                mode,
                acl,
            } => zk
                .create2(&path, data, map_acl(acl), map_mode(mode))
                .await
                .map(|(path, stat)| Reply::Created {
                    path,
                    stat: map_stat(&stat),
                }),
            Request::GetChildren { path, watch: false } => {
                zk.get_children(&path, false).await.map(Reply::Children)
            }
            Request::GetChildren { path, watch: true } => zk
                .get_children_w(&path, self.watcher())
                .await
                .map(Reply::Children),
            Request::GetData { path, watch: false } => {
                zk.get_data(&path, false)
                    .await
                    .map(|(data, stat)| Reply::Data {
                        data,
                        stat: map_stat(&stat),
                    })
            }
            Request::GetData { path, watch: true } => zk
                .get_data_w(&path, self.watcher())
                .await
                .map(|(data, stat)| Reply::Data {
                    data,
                    stat: map_stat(&stat),
                }),
            Request::Exists { path, watch: false } => zk
                .exists(&path, false)
                .await
                .map(|s| Reply::Exists(s.as_ref().map(map_stat))),
            Request::Exists { path, watch: true } => zk
                .exists_w(&path, self.watcher())
                .await
                .map(|s| Reply::Exists(s.as_ref().map(map_stat))),
            Request::Delete { path, version } => {
                zk.delete(&path, version).await.map(|()| Reply::Deleted)
            }
        };
        result.map_err(map_error)
    }
}

#[async_trait]
impl Transport for ZkAsyncTransport {
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode> {
        match tokio::time::timeout(self.op_timeout, self.perform_unbounded(request)).await {
            Ok(result) => result,
            Err(_) => Err(ZkCode::OperationTimeout),
        }
    }

    async fn close(&self) {
        self.session_task.abort();
        match tokio::time::timeout(Duration::from_secs(2), self.zk.close()).await {
            Ok(Ok(())) => info!("session closed"),
            Ok(Err(e)) => debug!(error = %e, "close: the session was already gone"),
            Err(_) => warn!("close: the server did not answer; the session will expire on its own"),
        }
        let _ = self
            .shared
            .events
            .send(TransportEvent::Session(SessionEvent::Closed));
    }
}

impl Drop for ZkAsyncTransport {
    fn drop(&mut self) {
        self.session_task.abort();
    }
}

/// Turns the client's state changes into session events, replaying credentials
/// before each `Connected` so the core's re-listing runs authenticated.
async fn session_task(
    zk: Arc<zka::ZooKeeper>,
    shared: Arc<Shared>,
    mut states: mpsc::UnboundedReceiver<zka::ZkState>,
    auth: Vec<(String, Vec<u8>)>,
    timeout: Duration,
) {
    let mut connected = true;
    while let Some(state) = states.recv().await {
        let Some(event) = map_state(state, connected) else {
            continue;
        };
        if let SessionEvent::Connected { .. } = event {
            for (scheme, bytes) in &auth {
                if let Err(e) = zk.add_auth(scheme.clone(), bytes.clone()).await {
                    warn!(error = %e, scheme, "replaying credentials after reconnect failed");
                }
            }
        }
        connected = matches!(event, SessionEvent::Connected { .. });
        let event = match event {
            SessionEvent::Connected { session_id, .. } => SessionEvent::Connected {
                session_id,
                timeout,
            },
            other => other,
        };
        info!(?event, "session");
        let _ = shared.events.send(TransportEvent::Session(event));
    }
}

/// Maps a client state to a session event, given whether we were connected.
#[allow(deprecated)]
pub(crate) fn map_state(state: zka::ZkState, was_connected: bool) -> Option<SessionEvent> {
    use zka::ZkState as S;
    match state {
        S::Connected | S::ConnectedReadOnly if !was_connected => Some(SessionEvent::Connected {
            session_id: None,
            timeout: Duration::ZERO,
        }),
        S::Connected | S::ConnectedReadOnly => None,
        S::Connecting if was_connected => Some(SessionEvent::Disconnected),
        S::Connecting | S::Associating => None,
        // The only sign of expiry this client gives; it opens a new session next.
        S::NotConnected => Some(SessionEvent::Expired),
        S::AuthFailed => Some(SessionEvent::AuthFailed),
        S::Closed => Some(SessionEvent::Closed),
    }
}

/// Maps a client error to the core's code.
pub(crate) fn map_error(e: zka::ZkError) -> ZkCode {
    use zka::ZkError as E;
    match e {
        E::ConnectionLoss => ZkCode::ConnectionLoss,
        E::OperationTimeout => ZkCode::OperationTimeout,
        E::SessionExpired => ZkCode::SessionExpired,
        E::SessionMoved => ZkCode::SessionMoved,
        E::NoNode => ZkCode::NoNode,
        E::NodeExists => ZkCode::NodeExists,
        E::NotEmpty => ZkCode::NotEmpty,
        E::BadVersion => ZkCode::BadVersion,
        E::NoAuth => ZkCode::NoAuth,
        E::AuthFailed => ZkCode::AuthFailed,
        E::InvalidACL => ZkCode::InvalidAcl,
        E::BadArguments => ZkCode::BadArguments,
        E::NoChildrenForEphemerals => ZkCode::NoChildrenForEphemerals,
        E::Unimplemented => ZkCode::Unimplemented,
        // Marshalling failures mean a broken connection or frame: retry after reconnect.
        E::MarshallingError => ZkCode::ConnectionLoss,
        other => ZkCode::Other(other as i32),
    }
}

/// Maps a fired watch to the core's event; session-only notifications carry no path.
pub(crate) fn map_watch(e: &zka::WatchedEvent) -> Option<WatchEvent> {
    use zka::WatchedEventType as T;
    let kind = match e.event_type {
        T::NodeCreated => WatchKind::NodeCreated,
        T::NodeDeleted => WatchKind::NodeDeleted,
        T::NodeDataChanged => WatchKind::NodeDataChanged,
        T::NodeChildrenChanged => WatchKind::NodeChildrenChanged,
        T::None | T::DataWatchRemoved | T::ChildWatchRemoved => return None,
    };
    Some(WatchEvent {
        kind,
        path: e.path.clone()?,
    })
}

fn map_stat(s: &zka::Stat) -> Stat {
    Stat {
        czxid: s.czxid,
        mzxid: s.mzxid,
        pzxid: s.pzxid,
        version: s.version,
        cversion: s.cversion,
        ephemeral_owner: s.ephemeral_owner,
        data_length: s.data_length,
        num_children: s.num_children,
    }
}

fn map_acl(acl: Acl) -> Vec<zka::Acl> {
    match acl {
        Acl::Open => zka::Acl::open_unsafe().clone(),
        Acl::CreatorAll => zka::Acl::creator_all().clone(),
        Acl::CreatorAllWorldRead => {
            let mut list = zka::Acl::creator_all().clone();
            list.push(zka::Acl::new(zka::Permission::READ, "world", "anyone"));
            list
        }
    }
}

fn map_mode(mode: CreateMode) -> zka::CreateMode {
    match mode {
        CreateMode::Persistent => zka::CreateMode::Persistent,
        CreateMode::Ephemeral => zka::CreateMode::Ephemeral,
        CreateMode::PersistentSequential => zka::CreateMode::PersistentSequential,
        CreateMode::EphemeralSequential => zka::CreateMode::EphemeralSequential,
        // zookeeper-async sends the container flag with a plain create, so the
        // server makes a persistent node anyway; say so rather than pretend.
        CreateMode::Container => zka::CreateMode::Persistent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(deprecated)]
    fn states_map_to_session_events() {
        use zka::ZkState as S;
        assert!(matches!(
            map_state(S::Connected, false),
            Some(SessionEvent::Connected { .. })
        ));
        assert_eq!(map_state(S::Connected, true), None);
        assert_eq!(
            map_state(S::Connecting, true),
            Some(SessionEvent::Disconnected)
        );
        assert_eq!(map_state(S::Connecting, false), None);
        assert_eq!(
            map_state(S::NotConnected, true),
            Some(SessionEvent::Expired)
        );
        assert_eq!(
            map_state(S::NotConnected, false),
            Some(SessionEvent::Expired)
        );
        assert_eq!(
            map_state(S::AuthFailed, true),
            Some(SessionEvent::AuthFailed)
        );
        assert_eq!(map_state(S::Closed, true), Some(SessionEvent::Closed));
        assert_eq!(map_state(S::Associating, true), None);
    }

    #[test]
    fn every_error_maps_and_faults_stay_faults() {
        use zka::ZkError as E;
        let table = [
            (E::ConnectionLoss, ZkCode::ConnectionLoss),
            (E::OperationTimeout, ZkCode::OperationTimeout),
            (E::SessionExpired, ZkCode::SessionExpired),
            (E::SessionMoved, ZkCode::SessionMoved),
            (E::NoNode, ZkCode::NoNode),
            (E::NodeExists, ZkCode::NodeExists),
            (E::NotEmpty, ZkCode::NotEmpty),
            (E::BadVersion, ZkCode::BadVersion),
            (E::NoAuth, ZkCode::NoAuth),
            (E::AuthFailed, ZkCode::AuthFailed),
            (E::InvalidACL, ZkCode::InvalidAcl),
            (E::BadArguments, ZkCode::BadArguments),
            (E::NoChildrenForEphemerals, ZkCode::NoChildrenForEphemerals),
            (E::Unimplemented, ZkCode::Unimplemented),
            (E::MarshallingError, ZkCode::ConnectionLoss),
            (E::SystemError, ZkCode::Other(-1)),
            (E::NotReadOnly, ZkCode::Other(-119)),
        ];
        for (from, to) in table {
            assert_eq!(map_error(from), to, "{from:?}");
        }
        assert!(map_error(E::NoAuth).is_fatal());
        assert!(map_error(E::ConnectionLoss).is_connection_fault());
    }

    #[test]
    fn watches_map_and_session_notifications_are_dropped() {
        let event = |event_type, path: Option<&str>| zka::WatchedEvent {
            event_type,
            keeper_state: zka::KeeperState::SyncConnected,
            path: path.map(str::to_owned),
        };
        assert_eq!(
            map_watch(&event(zka::WatchedEventType::NodeDeleted, Some("/e/n"))),
            Some(WatchEvent {
                kind: WatchKind::NodeDeleted,
                path: "/e/n".into()
            })
        );
        assert_eq!(map_watch(&event(zka::WatchedEventType::None, None)), None);
        assert_eq!(
            map_watch(&event(zka::WatchedEventType::DataWatchRemoved, Some("/e"))),
            None
        );
        assert_eq!(
            map_watch(&event(
                zka::WatchedEventType::NodeChildrenChanged,
                Some("/e")
            ))
            .map(|e| e.kind),
            Some(WatchKind::NodeChildrenChanged)
        );
    }

    #[test]
    fn acls_and_modes_map_without_containers() {
        assert_eq!(map_acl(Acl::Open), *zka::Acl::open_unsafe());
        assert_eq!(map_acl(Acl::CreatorAll), *zka::Acl::creator_all());
        assert_eq!(
            map_acl(Acl::CreatorAllWorldRead).len(),
            zka::Acl::creator_all().len() + 1
        );
        assert_eq!(map_mode(CreateMode::Container), zka::CreateMode::Persistent);
        assert_eq!(
            map_mode(CreateMode::EphemeralSequential),
            zka::CreateMode::EphemeralSequential
        );
    }

    #[tokio::test]
    async fn short_session_timeouts_and_empty_hosts_are_refused() {
        let short =
            ConnectOptions::new("127.0.0.1:1").session_timeout(Duration::from_millis(1_000));
        assert!(matches!(
            ZkAsyncTransport::connect(short).await,
            Err(ElectionError::Connect { .. })
        ));
        let empty = ConnectOptions::new(" ");
        assert!(matches!(
            ZkAsyncTransport::connect(empty).await,
            Err(ElectionError::Connect { .. })
        ));
    }

    #[tokio::test]
    async fn unreachable_server_fails_within_the_connect_timeout() {
        // Nothing listens on port 1; connect() alone would spin forever.
        let opts = ConnectOptions::new("127.0.0.1:1")
            .session_timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_millis(500));
        let started = std::time::Instant::now();
        let result = ZkAsyncTransport::connect(opts).await;
        assert!(
            matches!(result, Err(ElectionError::Connect { .. })),
            "{result:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
