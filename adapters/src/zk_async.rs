//! The transport over `zookeeper-async` 5.0.0, and what it takes to make up
//! for that client's measured defects (`adapters/CLIENTS.md` in the
//! repository). Each workaround, and where it lives:
//!
//! | defect | workaround |
//! |---|---|
//! | `connect()` spins forever on a dead server | [`ZkAsyncTransport::connect`] runs the whole set-up (TCP, session, credentials) under one deadline; the session is proven by the client's own report of it or by the credentials' answer, at no request of its own (`set_up`), [`SessionOptions::connect_timeout`], and uses `connect_with_retry_time` so a dead server is retried every [`SessionOptions::reconnect_delay`] instead of in a busy loop |
//! | a session timeout under 1.5 s makes it reconnect in a storm | refused: [`SessionError::SessionTimeoutTooShort`], for the requested timeout and for the smallest negotiated one |
//! | the negotiated session timeout is not exposed (a server clamps the request into its `[minSessionTimeout, maxSessionTimeout]`, 2 and 20 ticks by default) | before connecting, every server is asked at once, each with a deadline of its own, with a ConnectRequest on a connection of ours whose session is closed at once, at most once per process, server and requested timeout (`startup`); the core's start-up machine decides when the answers suffice (all in, or 250 ms after the first), which servers the client gets (answered, then refusing; silent ones left out) and the bound (the smallest listed answer), reported on every `Connected`, never the requested value. With no answer before [`SessionOptions::connect_timeout`], `connect` fails with [`SessionError::Connect`] naming each server's failure |
//! | a watch set with a callback (`*_w`) keeps its boxed callback until its path fires, even after the watch is gone with a reconnect, and can fire it with a new watch's event; one per call, so a path watched again and again that never changes (a leader's node, read by every follower that comes to stand behind it) keeps one per read for good (measured: 521 B per watch event on a leader with followers churning behind it) | no callbacks: watch requests are plain `watch = true` reads and the client's default watcher (`Forward`) queues every event; the server keeps one watch per session, path and kind, and the client keeps nothing per request (measured after: 0.00 B per event, `tests/tests/soak.rs`). An event from a watch set before a reconnect is still passed on: it reports what happened, and the core acts on events as facts, never counting them against the watches it set. Every non-`Connected` state records a connection change (`ConnectionChanges`): a watch request that straddled a reconnect answers `ConnectionLoss` (`straddled`) so the core sets it again, and after the reconnect the core re-lists and re-arms every watch on `Connected` |
//! | digest credentials are lost on every reconnect | the pump task replays them before it reports `Connected`, backing off, for at most the session timeout (the core's `SetUp` machine): a replay that cannot finish by then ends in `SessionEvent::AuthFailed` and an error log naming the last try's failure, never a silent loop; until then requests wait (bounded) at a gate, and a `NoAuth` from a request that straddled a reconnect answers `ConnectionLoss` |
//! | session expiry shows only as the deprecated `ZkState::NotConnected`, then a new session opens silently | `map_state`: `NotConnected` → `Expired`, the next `Connected` → `Connected { session_id: None }`, which the core treats as a new session; the core learns the session id from its node's `ephemeralOwner` and re-checks it after every reconnect |
//! | a dead server is noticed only after 2× the session timeout | the core probes every third of the session timeout and suspends after two thirds; here every request is bounded ([`SessionOptions::op_timeout`], kept by the core's session, which answers `OperationTimeout` itself) |
//! | `CreateMode::Container` silently creates a persistent node | mapped to `Persistent` on purpose (`map_mode`), so nothing pretends otherwise |
//! | no close on drop: a dropped client keeps pinging, so its session (and ephemeral node) lives on | `Drop` closes the session in the background if [`close`](Transport::close) was not called; so does a `connect` future dropped half-way |
//! | watch callbacks run on the client's tasks, and a reply can overtake the watch event the server sent first | callbacks and the state listener only `send` into one unbounded channel — never block, never run logic — and one pump task turns it into the event stream in order; the core does not rely on reply/event order |
//!
//! # The session timeout
//!
//! The core's lease, probe interval and suspension all derive from the
//! timeout reported with `Connected`, so it must never exceed the real
//! session's. The start-up machine (`zkelect_core::startup`, whose docs
//! give the whole argument) bounds it by the smallest answer of the servers
//! the client is given, and the client is given only servers that answered
//! or refused the connection: a minority of members stopped, frozen or
//! unresolvable costs the start at most a quarter of a second. A listed
//! server that has not answered yet is asked again in the background, and
//! at once whenever the client (re)connects: the pump reports `Connected`
//! only with the bound confirmed after those asks, so a server that lowers
//! it lowers it before the core hears of the connection.
//! [`ZkAsyncOptions::assume_session_timeout`] can only lower the reported
//! value further (e.g. ahead of a planned change of the servers'
//! `maxSessionTimeout`), never raise it.
//!
//! Limits: no TLS or SASL (a transport over `zookeeper-client` would bring
//! them). A server whose `maxSessionTimeout` is lowered (by a restart with a
//! new `zoo.cfg`) after `connect` is not noticed: lower it with
//! [`ZkAsyncOptions::assume_session_timeout`] beforehand, or restart the
//! clients. If the server is unreachable when [`close`](Transport::close) is
//! called, the client's I/O task keeps retrying (every `reconnect_delay`)
//! until the server is back, then closes; the crate gives no way to stop it
//! sooner.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::{debug, error, info, warn};
use zkelect_core::connect_string::ConnectString;
use zkelect_core::setup::{
    Goal, SetUp, SetUpCommand, SetUpConfig, SetUpEnd, SetUpError, SetUpNotice, SetUpOutcome,
    SetUpRequest, REPLAY_RETRY_MAX,
};
use zkelect_core::startup::{Learn, StartupConfig};
use zkelect_core::{
    Acl, CreateMode, Reply, Request, SessionEvent, Stat, WatchEvent, WatchKind, ZkCode,
};
use zookeeper_async as zka;

use crate::clock::Clock;
use crate::error::{ConnectFailure, SessionError};
use crate::hop::{self, hop};
use crate::shell::{
    ClientState, ConnectionChanges, Reporter, SessionOptions, Shell, CLOSE_TIMEOUT,
};
use crate::startup::{self, Driver};
use crate::transport::{EventStream, Transport, TransportEvent};

/// The shortest session timeout this transport accepts. Below it the client
/// truncates its idle timer (`2 × ⌊⅔ timeout in s⌋`) to zero and reconnects
/// in a storm.
pub const SESSION_TIMEOUT_MIN: Duration = Duration::from_millis(1_500);

// The replay's longest pause must be short of the shortest session timeout,
// so a connection whose replay fails for a while is still tried within one.
const _: () = assert!(REPLAY_RETRY_MAX.as_millis() < SESSION_TIMEOUT_MIN.as_millis());

/// How to reach the servers with the zookeeper-async transport: the shared
/// [`SessionOptions`] with this client's one setting of its own,
/// [`assume_session_timeout`](SessionOptions::assume_session_timeout).
///
/// ```
/// use std::time::Duration;
/// use zkelect::ZkAsyncOptions;
///
/// let options = ZkAsyncOptions::new("zk1:2181,zk2:2181,zk3:2181/chroot")
///     .session_timeout(Duration::from_secs(6))
///     .assume_session_timeout(Duration::from_secs(4));
/// assert_eq!(options.client.assume_session_timeout, Some(Duration::from_secs(4)));
/// ```
pub type ZkAsyncOptions = SessionOptions<ZkAsyncExtras>;

/// What only the zookeeper-async transport needs ([`ZkAsyncOptions::client`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ZkAsyncExtras {
    /// A cap on the session timeout reported to the core: it reports the
    /// smaller of this and the smallest timeout the servers negotiate. It
    /// can only lower the bound the servers gave, never raise it (at least
    /// [`SESSION_TIMEOUT_MIN`]).
    pub assume_session_timeout: Option<Duration>,
}

impl SessionOptions<ZkAsyncExtras> {
    /// Caps the session timeout reported to the core: the smaller of this
    /// and what the servers negotiate is reported. For a server whose
    /// `maxSessionTimeout` is about to be lowered; it never raises the
    /// servers' answer.
    #[must_use]
    pub fn assume_session_timeout(mut self, timeout: Duration) -> Self {
        self.client.assume_session_timeout = Some(timeout);
        self
    }

    /// Checks every setting as [`ZkAsyncTransport::connect`] does before
    /// any traffic (it calls this first): the timeouts and delays within
    /// their bounds ([`SESSION_TIMEOUT_MIN`] and up), the connect string
    /// and its chroot well formed. A typed error for anything else, never a
    /// panic; an application or a command line can refuse bad settings
    /// early with it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use zkelect::ZkAsyncOptions;
    /// assert!(ZkAsyncOptions::new("zk1:2181/apps").validate().is_ok());
    /// assert!(ZkAsyncOptions::new("zk1:2181/apps//x").validate().is_err());
    /// let short = ZkAsyncOptions::new("zk1:2181").session_timeout(Duration::from_millis(10));
    /// assert!(short.validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<(), SessionError> {
        self.checked().map(drop)
    }

    /// [`validate`](Self::validate), keeping the split connect string.
    fn checked(&self) -> Result<ConnectString, SessionError> {
        let split = self.check(SESSION_TIMEOUT_MIN)?;
        if let Some(requested) = self.client.assume_session_timeout {
            if requested < SESSION_TIMEOUT_MIN {
                return Err(SessionError::SessionTimeoutTooShort {
                    requested,
                    min: SESSION_TIMEOUT_MIN,
                });
            }
        }
        Ok(split)
    }
}

impl crate::Connect for ZkAsyncOptions {
    fn connect(self: Box<Self>) -> crate::Connecting {
        Box::pin(async move {
            let (transport, events) = ZkAsyncTransport::connect(*self).await?;
            Ok((Arc::new(transport) as Arc<dyn Transport>, events))
        })
    }
}

/// What the client's callbacks send, in the order they happen: the one
/// channel every callback writes to. Callbacks never block and run no logic.
#[derive(Debug)]
enum Raw {
    /// The state listener saw a new state.
    State(zka::ZkState),
    /// A watch fired (the client's default watcher saw it).
    Watch(zka::WatchedEvent),
}

/// What the client's callbacks share with the transport.
struct ListenerState {
    /// The event stream (written by the pump task and `close`), the closed
    /// flag, the request bound, and the connection changes — recorded by
    /// the state listener on every state but `Connected`: a watch set on an
    /// older connection is dead on the server.
    shell: Shell,
    /// The callbacks' channel, read by the pump task.
    raw: mpsc::UnboundedSender<Raw>,
    /// Whether there are credentials to replay.
    has_auth: bool,
    /// Whether the current connection carries the credentials (always true
    /// without credentials).
    authenticated: watch::Sender<bool>,
    /// The credentials could not be put back (`AuthFailed` was reported):
    /// the close must first reach the server on a connection of its own.
    refused: AtomicBool,
}

impl ListenerState {
    fn new(
        events: mpsc::UnboundedSender<TransportEvent>,
        raw: mpsc::UnboundedSender<Raw>,
        has_auth: bool,
        op_timeout: Duration,
        configured: Option<Duration>,
    ) -> Self {
        Self {
            shell: Shell::new(events, op_timeout, configured),
            raw,
            has_auth,
            authenticated: watch::channel(!has_auth).0,
            refused: AtomicBool::new(false),
        }
    }

    /// The state listener's whole body: it runs on the client's I/O task
    /// under the client's listener lock, so it only records a connection change,
    /// closes the credentials gate and queues the state.
    fn on_state(&self, state: zka::ZkState) {
        if !is_connected(state) {
            self.shell.connection_changes.record();
            if self.has_auth {
                self.authenticated.send_replace(false);
            }
        }
        let _ = self.raw.send(Raw::State(state));
    }
}

/// A [`Transport`] over one `zookeeper-async` client.
///
/// One client, one session at a time: after an expiry the client opens a
/// new session by itself, and the transport reports it as `Connected`.
///
/// ```no_run
/// # async fn example() -> Result<(), zkelect::ElectionError> {
/// use std::time::Duration;
/// use zkelect::{Election, ZkAsyncOptions, ZkAsyncTransport};
///
/// let options = ZkAsyncOptions::new("127.0.0.1:2181").session_timeout(Duration::from_secs(4));
/// let (transport, events) = ZkAsyncTransport::connect(options).await?;
/// let election = Election::builder(transport, events).path("/svc/leader").id("a").join().await?;
/// # Ok(())
/// # }
/// ```
pub struct ZkAsyncTransport {
    zk: Arc<zka::ZooKeeper>,
    shared: Arc<ListenerState>,
    has_auth: bool,
    /// The tag of this transport's [`hop`] stamps.
    hop_tag: u64,
    pump_task: tokio::task::JoinHandle<()>,
    /// The start-up machine in the background (see `startup`).
    background: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for ZkAsyncTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkAsyncTransport")
            .field("shell", &self.shared.shell)
            .finish_non_exhaustive()
    }
}

/// The client's default watcher, which sees every watch event: the
/// transport's watch requests are plain `watch = true` requests, never
/// `*_w` calls with a callback, so the client keeps nothing per request.
/// (With a callback per call, the client keeps every callback until its
/// path fires: a leader's node, watched anew by every follower that comes
/// to stand behind it and never changed, held one per follower, some
/// hundreds of bytes each, for good.) It only queues the event.
/// The second field is the transport's hop tag.
struct Forward(mpsc::UnboundedSender<Raw>, u64);

impl zka::Watcher for Forward {
    fn handle(&self, event: zka::WatchedEvent) {
        hop!(hop::WATCH_CALLBACK, self.1);
        let _ = self.0.send(Raw::Watch(event));
    }
}

impl ZkAsyncTransport {
    /// Learns the session timeout the servers negotiate (see the module
    /// docs), connects on the servers that answered, waits for the session
    /// and authenticates (no request of its own: see `set_up`), and returns the transport with its event stream
    /// (which starts with `Connected`, carrying the bound).
    ///
    /// Everything is bounded by [`SessionOptions::connect_timeout`]. Errors:
    /// [`SessionError::SessionTimeoutTooShort`] (a request refused before
    /// any network traffic, or servers that negotiate less),
    /// [`SessionError::Config`] (a bad chroot or duration),
    /// [`SessionError::Connect`] (a malformed connect string or no name
    /// that resolves: [`ConnectFailure::BadAddress`]; no server answered:
    /// [`ConnectFailure::Refused`] or [`ConnectFailure::Unreachable`]),
    /// [`SessionError::Auth`] (credentials rejected).
    pub async fn connect(options: ZkAsyncOptions) -> Result<(Self, EventStream), SessionError> {
        let split = options.checked()?;
        let deadline = Instant::now() + options.connect_timeout;
        let config = StartupConfig {
            min_timeout: SESSION_TIMEOUT_MIN,
            ..StartupConfig::new(0, Learn::SessionTimeout, options.connect_timeout)
        };
        let mut driver = Driver::new(
            split,
            config,
            startup::session_timeout_asker(options.session_timeout),
        );
        let refused = |driver: &Driver, e| {
            startup::refusal(&options.hosts, options.connect_timeout, driver, &e)
        };
        // The channel the client's watcher and state listener write to.
        let (raw_tx, raw_rx) = mpsc::unbounded_channel();
        let hop_tag = hop::next_tag();
        let zk = loop {
            let plan = match driver.next_plan().await {
                Ok(plan) => plan,
                Err(e) => return Err(refused(&driver, e)),
            };
            // The resolved addresses of the servers the machine listed, in
            // its order (zookeeper-async tries them in the order given):
            // a name resolved once, as the client itself would.
            let mut hosts = plan
                .servers
                .iter()
                .filter_map(|&i| driver.addr(i).map(|a| a.to_string()))
                .collect::<Vec<_>>()
                .join(",");
            if let Some(chroot) = driver.chroot() {
                hosts.push_str(chroot);
            }
            info!(
                requested = ?options.session_timeout,
                bound = ?plan.bound,
                servers = hosts,
                "starting the client"
            );
            let connecting = zka::ZooKeeper::connect_with_retry_time(
                &hosts,
                options.session_timeout,
                Forward(raw_tx.clone(), hop_tag),
                options.reconnect_delay,
            );
            // Dropping `connecting` on timeout is clean: the client spawns its
            // tasks only once a TCP connection is up.
            match tokio::time::timeout_at(deadline, connecting).await {
                Ok(Ok(zk)) => break Arc::new(zk),
                Ok(Err(e)) => driver.client_failed(format!("the client refused {hosts:?}: {e}")),
                Err(_) => driver.client_failed(format!(
                    "no server accepted a connection within {:?}",
                    options.connect_timeout
                )),
            }
        };
        // If this future is dropped from here on (the caller gave up), the
        // client must still be closed: it would keep its session alive.
        let mut guard = CloseOnDrop(Some(Arc::clone(&zk)));
        let has_auth = !options.auth.is_empty();
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        // The bound as planned; it can only go down (see `startup`).
        let planned = driver.machine().bound().unwrap_or(options.session_timeout);
        let op_timeout = options.op_timeout_or(reported_timeout(
            planned,
            options.client.assume_session_timeout,
        ));
        let shared =
            ListenerState::new(events_tx, raw_tx, has_auth, op_timeout, options.op_timeout);
        let shared = Arc::new(shared);
        // The listener runs on the client's I/O task under the client's
        // listener lock: it only records a connection change, closes the auth gate
        // and forwards the state. The pump task does the rest.
        // Whether the client has reported its session up: the set-up's
        // proof of the session, which costs no request (see `set_up`).
        let (up_tx, up) = watch::channel(false);
        let up_listener = zk.add_listener(move |state| {
            if is_connected(state) {
                up_tx.send_replace(true);
            }
        });
        let listener = Arc::clone(&shared);
        zk.add_listener(move |state| listener.on_state(state));
        let within = deadline.saturating_duration_since(Instant::now());
        let failure = set_up(&zk, &shared, &options, up, within).await.err();
        zk.remove_listener(up_listener);
        // Every listed server that has not answered is asked again now that
        // the client is connected, before the bound is reported.
        driver.client_connected();
        let confirmed = tokio::time::timeout_at(deadline, driver.confirmed()).await;
        let failure = failure.or_else(|| match confirmed {
            Ok(Some(_)) => None,
            _ => Some(options.fail(
                ConnectFailure::Unreachable,
                format!(
                    "the servers' session timeout was not confirmed within {:?}",
                    options.connect_timeout
                ),
            )),
        });
        guard.0 = None;
        if let Some(e) = failure {
            let _ = tokio::time::timeout(CLOSE_TIMEOUT, zk.close()).await;
            return Err(e);
        }
        let bound = confirmed.ok().flatten().unwrap_or(planned);
        let timeout = reported_timeout(bound, options.client.assume_session_timeout);
        if bound < SESSION_TIMEOUT_MIN {
            warn!(?bound, min = ?SESSION_TIMEOUT_MIN, "a server negotiates a session timeout this client cannot keep well");
        }
        info!(hosts = options.hosts, requested = ?options.session_timeout, ?bound, reported = ?timeout, "connected");
        shared.shell.session(SessionEvent::Connected {
            session_id: None,
            timeout,
        });
        let replayer = {
            let zk = Arc::clone(&zk);
            let auth = options.auth.clone();
            move || {
                let zk = Arc::clone(&zk);
                let auth = auth.clone();
                async move { replay(&zk, &auth).await }
            }
        };
        // The start-up machine lives on in the background: it keeps asking
        // listed servers that never answered, and at every reconnection it
        // confirms the bound before the pump reports `Connected`.
        let (rechecks, requests) = mpsc::unbounded_channel();
        let background = tokio::spawn(driver.run(requests));
        let cap = options.client.assume_session_timeout;
        let recheck = move || {
            let rechecks = rechecks.clone();
            async move {
                let (reply, bound) = oneshot::channel();
                if rechecks.send(reply).is_err() {
                    return timeout;
                }
                bound
                    .await
                    .map_or(timeout, |bound| reported_timeout(bound, cap))
            }
        };
        let pump_task = tokio::spawn(pump(
            replayer,
            recheck,
            Arc::clone(&shared),
            raw_rx,
            timeout,
            hop_tag,
        ));
        Ok((
            Self {
                zk,
                shared,
                has_auth,
                hop_tag,
                pump_task,
                background,
            },
            events_rx,
        ))
    }

    async fn perform_gated(&self, request: Request) -> Result<Reply, ZkCode> {
        if self.has_auth {
            // Wait until the credentials are replayed on this connection, so
            // a request cannot reach an ACL'd node unauthenticated.
            let mut gate = self.shared.authenticated.subscribe();
            if gate.wait_for(|ok| *ok).await.is_err() {
                return Err(ZkCode::ConnectionLoss);
            }
        }
        let before = self.shared.shell.connection_changes.mark();
        let sets_watch = request.sets_watch();
        let result = self.perform_raw(request).await.map_err(map_error);
        let reconnected = self.shared.shell.connection_changes.changed_since(before);
        straddled(result, sets_watch, self.has_auth, reconnected)
    }

    async fn perform_raw(&self, request: Request) -> Result<Reply, zka::ZkError> {
        let zk = &self.zk;
        let data = |(data, stat): (Vec<u8>, zka::Stat)| Reply::Data {
            data,
            stat: map_stat(&stat),
        };
        let exists = |stat: Option<zka::Stat>| Reply::Exists(stat.as_ref().map(map_stat));
        match request {
            Request::Create {
                path,
                data,
                mode,
                acl,
            } => zk
                .create2(&path, data, map_acl(&acl), map_mode(mode))
                .await
                .map(|(path, stat)| Reply::Created {
                    path,
                    stat: map_stat(&stat),
                }),
            Request::GetChildren { path, watch } => {
                hop!(hop::LIST_SENT, self.hop_tag);
                zk.get_children(&path, watch).await.map(Reply::Children)
            }
            Request::GetData { path, watch: false } => zk.get_data(&path, false).await.map(data),
            Request::GetData { path, watch: true } => zk.get_data(&path, true).await.map(data),
            Request::Exists { path, watch: false } => zk.exists(&path, false).await.map(exists),
            Request::Exists { path, watch: true } => zk.exists(&path, true).await.map(exists),
            Request::Delete { path, version } => {
                hop!(hop::DELETE_SENT, self.hop_tag);
                zk.delete(&path, version).await.map(|()| Reply::Deleted)
            }
            Request::SetData {
                path,
                data,
                version,
            } => zk
                .set_data(&path, data, version)
                .await
                .map(|stat| Reply::Set(map_stat(&stat))),
            Request::Sync { path } => sync_by_write(zk, &path).await,
        }
    }
}

/// The child name [`sync_by_write`] deletes: no recipe's stem, and never
/// created by zkelect.
const SYNC_PROBE: &str = "zkelect-sync-probe";

/// `sync` on zookeeper-async, which has no `sync` (nor `multi`): a write
/// that changes nothing. Every write, failing ones too, goes through the
/// leader: the leader's `PrepRequestProcessor` turns a failing request into
/// an error transaction that is proposed and committed like any other, and
/// the connected server answers the client only once it has applied that
/// commit, so after every transaction committed before it. That is exactly
/// what `sync` gives a following read on the same connection. The write is
/// `delete` of a child no one creates, expecting version -2 (a data version
/// never goes negative short of 2^31 writes): it fails with `NoNode` (or
/// `BadVersion`, or `NoAuth` under a restrictive ACL), and changes nothing.
/// Any answer from the server is the sync's answer; connection faults are
/// the transport's as usual.
async fn sync_by_write(zk: &zka::ZooKeeper, path: &str) -> Result<Reply, zka::ZkError> {
    let probe = format!("{}/{SYNC_PROBE}", path.trim_end_matches('/'));
    match zk.delete(&probe, Some(-2)).await {
        Ok(())
        | Err(
            zka::ZkError::NoNode
            | zka::ZkError::BadVersion
            | zka::ZkError::NotEmpty
            | zka::ZkError::NoAuth,
        ) => Ok(Reply::Synced),
        Err(other) => Err(other),
    }
}

#[async_trait]
impl Transport for ZkAsyncTransport {
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode> {
        self.shared.shell.perform(self.perform_gated(request)).await
    }

    fn hop_tag(&self) -> u64 {
        self.hop_tag
    }

    fn request_timeout(&self) -> Option<Duration> {
        self.shared.shell.configured_timeout()
    }

    async fn close(&self) {
        if !self.shared.shell.close_once() {
            return;
        }
        self.pump_task.abort();
        self.background.abort();
        if self.shared.refused.load(Ordering::SeqCst) {
            reach_after_refusal(&self.zk).await;
        }
        hop!(hop::CLOSE_SENT, self.hop_tag);
        match tokio::time::timeout(CLOSE_TIMEOUT, self.zk.close()).await {
            Ok(Ok(())) => info!("session closed"),
            Ok(Err(e)) => debug!(error = %e, "close: the client was already closed"),
            Err(_) => warn!("close: the server did not answer; the session will expire on its own"),
        }
        self.shared.shell.session(SessionEvent::Closed);
    }
}

impl Drop for ZkAsyncTransport {
    fn drop(&mut self) {
        self.pump_task.abort();
        self.background.abort();
        if self.shared.shell.close_once() {
            close_in_background(Arc::clone(&self.zk));
        }
    }
}

/// Waits, for at most [`CLOSE_TIMEOUT`], until a request of the client is
/// answered after its credentials were refused. A server that refuses
/// credentials drops that connection; zookeeper-async answers a close as
/// soon as it has written it, so a close written there would be lost and
/// the session, with its ephemeral nodes, would stay until it expires. The
/// client reconnects by itself, without the credentials (closing a session
/// needs none); an answer proves the close will reach the server. Tries
/// back off from 50 ms to 400 ms.
async fn reach_after_refusal(zk: &zka::ZooKeeper) {
    let deadline = Instant::now() + CLOSE_TIMEOUT;
    let mut pause = Duration::from_millis(50);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, zk.exists("/", false)).await {
            Ok(Ok(_)) => return,
            Ok(Err(e)) => debug!(error = %e, "close: not on a connection yet"),
            Err(_) => return,
        }
        if Instant::now() + pause >= deadline {
            return;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(400));
    }
}

/// Closes a client that is dropped before it was handed out.
struct CloseOnDrop(Option<Arc<zka::ZooKeeper>>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        if let Some(zk) = self.0.take() {
            close_in_background(zk);
        }
    }
}

/// zookeeper-async has no close on drop, and its I/O task holds a sender to
/// itself for pings: a dropped client keeps its session — and an election
/// node — alive for as long as the runtime runs (measured: the ephemeral
/// node of a dropped client was still there after twice its session timeout).
fn close_in_background(zk: Arc<zka::ZooKeeper>) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(async move {
                let _ = tokio::time::timeout(CLOSE_TIMEOUT, zk.close()).await;
            });
        }
        Err(_) => warn!(
            "a zookeeper-async client dropped outside a runtime: its session lives until the runtime ends"
        ),
    }
}

/// Waits until the session is up and the credentials are on the
/// connection, within `within` (the connect timeout left). The core's
/// [`SetUp`] machine decides which request to send, when to send it again
/// and when to give up (see [`zkelect_core::setup`]); this sends them and
/// sleeps. No request of its own is sent for this:
///
/// - With credentials, their answer is the proof: the server reads nothing
///   a client sends after its ConnectRequest before the session exists, and
///   the credentials must be on the connection before any request anyway.
/// - Without, the client's own report of the session (`up`, from a state
///   listener) is. The listener can only be added once the client exists,
///   when its I/O task may already have read the ConnectResponse (the
///   client has no state getter): if nothing is heard within
///   [`REPORT_WAIT`](zkelect_core::setup::REPORT_WAIT), an `exists("/")`
///   proves the session instead, at one request, and no later than the
///   session allows (it waits behind the handshake on the same connection).
async fn set_up(
    zk: &zka::ZooKeeper,
    shared: &ListenerState,
    options: &ZkAsyncOptions,
    up: watch::Receiver<bool>,
    within: Duration,
) -> Result<(), SessionError> {
    let config = if options.auth.is_empty() {
        SetUpConfig::prove(within)
    } else {
        SetUpConfig::authenticate(within)
    };
    let send = |request| async move {
        match request {
            SetUpRequest::Credentials => outcome(replay(zk, &options.auth).await),
            SetUpRequest::Probe => outcome(zk.exists("/", false).await.map(drop)),
        }
    };
    match run_set_up(config, up, &shared.shell.connection_changes, send).await {
        SetUpEnd::Done { credentials_on } => {
            // Not on: the connection changed meanwhile, and the pump task
            // replays the credentials before it reports `Connected`.
            if credentials_on {
                shared.authenticated.send_replace(true);
            }
            Ok(())
        }
        // A set-up is never superseded: the pump task handles what
        // happened to the connection meanwhile.
        SetUpEnd::Superseded => Ok(()),
        SetUpEnd::Failed(SetUpError::Rejected) => Err(options.rejected()),
        SetUpEnd::Failed(SetUpError::TimedOut { .. }) => Err(options.fail(
            ConnectFailure::Session,
            format!(
                "a server accepted the connection but no usable session came within {:?}",
                options.connect_timeout
            ),
        )),
        SetUpEnd::Failed(e) => Err(options.fail(ConnectFailure::Session, e.to_string())),
    }
}

/// How a request of the set-up or the replay ended, as the machine reads it.
fn outcome(result: Result<(), zka::ZkError>) -> SetUpOutcome {
    match result {
        Ok(()) => SetUpOutcome::Ok,
        Err(zka::ZkError::ConnectionLoss) => SetUpOutcome::ConnectionLoss,
        Err(zka::ZkError::AuthFailed) => SetUpOutcome::AuthFailed,
        Err(e) => SetUpOutcome::Failed(e.to_string()),
    }
}

/// Sleeps until `at`, or for ever.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Logs what the machine says, in order.
fn log_set_up(machine: &mut SetUp, what: &str) {
    while let Some(SetUpNotice::Retrying { cause, pause, .. }) = machine.poll_notice() {
        warn!(error = %cause, ?pause, "{what} failed; trying again");
    }
}

/// Runs a set-up machine ([`Goal::Prove`] or [`Goal::Authenticate`]):
/// `send` sends a request, `up` is the client's report that the session is
/// up (heard by a proof only; a closed channel is no report), `changes`
/// the connection changes.
async fn run_set_up<S, F>(
    config: SetUpConfig,
    mut up: watch::Receiver<bool>,
    changes: &ConnectionChanges,
    send: S,
) -> SetUpEnd
where
    S: Fn(SetUpRequest) -> F,
    F: Future<Output = SetUpOutcome>,
{
    let listens = config.goal == Goal::Prove;
    let clock = Clock::new();
    let mut machine = SetUp::new(clock.now(), config);
    loop {
        log_set_up(&mut machine, "the session's set-up");
        if let Some(end) = machine.end() {
            return end.clone();
        }
        let wake = machine.poll_timeout().map(|t| clock.instant(t));
        let heard = async {
            if !listens || up.wait_for(|up| *up).await.is_err() {
                // The listener is gone with the client: only a request can tell.
                std::future::pending::<()>().await;
            }
        };
        let Some(SetUpCommand::Send {
            request, attempt, ..
        }) = machine.poll_command()
        else {
            tokio::select! {
                () = heard => machine.reported_up(clock.now()),
                () = sleep_until(wake) => machine.handle_timeout(clock.now()),
            }
            continue;
        };
        // The report wins over a request still out: it is dropped.
        let tried = Try {
            attempt,
            wake,
            clock: &clock,
            changes,
        };
        if !tried.feed(&mut machine, send(request), heard).await {
            machine.reported_up(clock.now());
        }
    }
}

/// One try of a set-up or replay machine that the adapter sent, and how it
/// ends: its answer, or the machine's wake-up (`wake`) first.
struct Try<'a> {
    attempt: u32,
    wake: Option<Instant>,
    clock: &'a Clock,
    changes: &'a ConnectionChanges,
}

impl Try<'_> {
    /// Waits for `answer` or the wake-up, and feeds the machine what came
    /// first, after the connection change since the try went out, if any
    /// (a replay then ends; credentials then are not on the connection in
    /// use). False, and nothing fed, when `interrupt` came first.
    async fn feed<A, I>(self, machine: &mut SetUp, answer: A, interrupt: I) -> bool
    where
        A: Future<Output = SetUpOutcome>,
        I: Future<Output = ()>,
    {
        let before = self.changes.mark();
        let answer = tokio::select! {
            () = interrupt => return false,
            answer = answer => Some(answer),
            () = sleep_until(self.wake) => None,
        };
        let now = self.clock.now();
        if self.changes.changed_since(before) {
            machine.connection_changed(now);
        }
        match answer {
            Some(answer) => machine.answered(now, self.attempt, answer),
            None => machine.handle_timeout(now),
        }
        true
    }
}

async fn replay(zk: &zka::ZooKeeper, auth: &[(String, Vec<u8>)]) -> Result<(), zka::ZkError> {
    for (scheme, bytes) in auth {
        zk.add_auth(scheme, bytes.clone()).await?;
    }
    Ok(())
}

/// Why a replay of the credentials ended.
enum Replayed {
    /// The credentials are on the current connection.
    Done,
    /// They are not, and will not be on this connection: the server
    /// rejected them, or they could not be put back within the session
    /// timeout ([`SetUpError::ReplayTimedOut`]).
    Failed(SetUpError),
    /// The connection changed meanwhile; its state is queued.
    Superseded,
    /// The client is gone.
    Ended,
}

/// Replays the credentials until they are on the current connection, the
/// server rejects them, the connection changes again, or `within` (the
/// session timeout) has passed: the core's [`SetUp`] machine
/// ([`Goal::Replay`]) decides when to try again and when the replay is
/// over; this sends and sleeps. Watch events that arrive during a pause
/// are kept in `held`, in order.
async fn replay_until_done<R, F>(
    replay: &R,
    shared: &ListenerState,
    raw: &mut mpsc::UnboundedReceiver<Raw>,
    held: &mut VecDeque<Raw>,
    op_timeout: Duration,
    within: Duration,
) -> Replayed
where
    R: Fn() -> F,
    F: Future<Output = Result<(), zka::ZkError>>,
{
    let changes = &shared.shell.connection_changes;
    let clock = Clock::new();
    let mut machine = SetUp::new(clock.now(), SetUpConfig::replay(op_timeout, within));
    loop {
        log_set_up(&mut machine, "replaying credentials");
        match machine.end() {
            Some(SetUpEnd::Done { .. }) => {
                shared.authenticated.send_replace(true);
                return Replayed::Done;
            }
            // Rejected, or not back within the session timeout.
            Some(SetUpEnd::Failed(e)) => return Replayed::Failed(e.clone()),
            // The listener queued the new state; the pump decides.
            Some(SetUpEnd::Superseded) => return Replayed::Superseded,
            None => {}
        }
        let wake = machine.poll_timeout().map(|t| clock.instant(t));
        if let Some(SetUpCommand::Send { attempt, .. }) = machine.poll_command() {
            let tried = Try {
                attempt,
                wake,
                clock: &clock,
                changes,
            };
            let answer = async { outcome(replay().await) };
            tried
                .feed(&mut machine, answer, std::future::pending())
                .await;
            continue;
        }
        tokio::select! {
            item = raw.recv() => match item {
                Some(state @ Raw::State(_)) => {
                    held.push_back(state);
                    machine.connection_changed(clock.now());
                }
                Some(watch) => held.push_back(watch),
                None => return Replayed::Ended,
            },
            () = sleep_until(wake) => machine.handle_timeout(clock.now()),
        }
    }
}

/// Turns what the callbacks queued into the transport's events, in order:
/// states become session events (credentials replayed before `Connected`
/// is reported, so the core's re-listing runs authenticated), watch events
/// from before the latest reconnect are dropped.
///
/// `replay` adds the credentials to the current connection (the client's
/// `add_auth` for each); it is only called when there are credentials.
async fn pump<R, F, C, G>(
    replay: R,
    recheck: C,
    shared: Arc<ListenerState>,
    mut raw: mpsc::UnboundedReceiver<Raw>,
    timeout: Duration,
    hop_tag: u64,
) where
    R: Fn() -> F,
    F: Future<Output = Result<(), zka::ZkError>>,
    C: Fn() -> G,
    G: Future<Output = Duration>,
{
    let op_timeout = shared.shell.op_timeout();
    // `connect` reported `Connected` already.
    let mut reporter = Reporter::new(false);
    let connected = SessionEvent::Connected {
        session_id: None,
        timeout,
    };
    let mut held: VecDeque<Raw> = VecDeque::new();
    loop {
        let item = match held.pop_front() {
            Some(item) => item,
            None => match raw.recv().await {
                Some(item) => item,
                None => return,
            },
        };
        let state = match item {
            // Every event is passed on, one from a watch set before a
            // reconnect too: it reports what did happen, and the core
            // takes each event as a fact to act on, never as a count of
            // the watches it set (see the module docs).
            Raw::Watch(event) => {
                if let Some(event) = map_watch(&event) {
                    hop!(hop::WATCH_FORWARDED, hop_tag);
                    shared.shell.watch(event);
                }
                continue;
            }
            Raw::State(state) => state,
        };
        // zookeeper-async's listener sees every transition: at most one event.
        let Some(mut event) = reporter.map(client_state(state), connected).pop() else {
            continue;
        };
        if matches!(event, SessionEvent::Connected { .. }) {
            // The bound is confirmed before the core hears of the
            // connection: the server the client is now on may be one that
            // had not answered (see `startup`).
            let before = shared.shell.connection_changes.mark();
            let timeout = recheck().await;
            if shared.shell.connection_changes.changed_since(before) {
                // Disconnected again meanwhile: the listener queued it.
                continue;
            }
            event = SessionEvent::Connected {
                session_id: None,
                timeout,
            };
        }
        if let (SessionEvent::Connected { timeout, .. }, true) = (event, shared.has_auth) {
            let replayed =
                replay_until_done(&replay, &shared, &mut raw, &mut held, op_timeout, timeout).await;
            match replayed {
                Replayed::Done => {}
                // The session cannot be used without its credentials: every
                // machine on it stops with `AuthFailed`, and the requests at
                // the gate (shut until a reconnect replays them) answer
                // `OperationTimeout` at their bound.
                Replayed::Failed(e) => {
                    error!(error = %e, "the session's credentials are not on its connection; reporting AuthFailed");
                    shared.refused.store(true, Ordering::SeqCst);
                    event = SessionEvent::AuthFailed;
                }
                // Not reported: the core still believes what it last heard.
                Replayed::Superseded => continue,
                Replayed::Ended => return,
            }
        }
        reporter.reported(&event);
        debug!(?state, "client state");
        shared.shell.session(event);
    }
}

/// The session timeout to report to the core: what the servers negotiate
/// (their smallest answer), lowered to the user's cap if there is one, never
/// raised.
pub(crate) fn reported_timeout(negotiated: Duration, cap: Option<Duration>) -> Duration {
    cap.map_or(negotiated, |cap| cap.min(negotiated))
}

#[allow(deprecated)]
fn is_connected(state: zka::ZkState) -> bool {
    matches!(
        state,
        zka::ZkState::Connected | zka::ZkState::ConnectedReadOnly
    )
}

/// How zookeeper-async's states read; the shell's [`Reporter`] turns them
/// into session events.
///
/// | state | reads as |
/// |---|---|
/// | `Connected`, `ConnectedReadOnly` | `Connected` (a new session after `Expired`: `session_id: None`) |
/// | `Connecting` | `Disconnected` |
/// | `Associating` (unused) | nothing |
/// | `NotConnected` (expiry: the only sign of it) | `Expired` |
/// | `AuthFailed` | `AuthFailed` |
/// | `Closed` | `Closed` |
#[allow(deprecated)]
pub(crate) fn client_state(state: zka::ZkState) -> ClientState {
    use zka::ZkState as S;
    match state {
        S::Connected | S::ConnectedReadOnly => ClientState::Connected,
        S::Connecting => ClientState::Disconnected,
        S::Associating => ClientState::Ignored,
        // The client then opens a new session silently; its `Connected` is
        // reported as a new one because `Expired` came first.
        S::NotConnected => ClientState::Expired,
        S::AuthFailed => ClientState::AuthFailed,
        S::Closed => ClientState::Closed,
    }
}

/// Maps a client error to the core's code. Exhaustive on purpose: a new
/// variant in the client fails to compile here.
///
/// `MarshallingError` becomes `ConnectionLoss`: it means a broken frame, and
/// a request whose reply could not be read may have been applied.
pub(crate) fn map_error(e: zka::ZkError) -> ZkCode {
    use zka::ZkError as E;
    match e {
        E::ConnectionLoss | E::MarshallingError => ZkCode::ConnectionLoss,
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
        // The client also maps every code it does not know to this one.
        E::Unimplemented => ZkCode::Unimplemented,
        E::APIError
        | E::DataInconsistency
        | E::EphemeralOnLocalSession
        | E::InvalidCallback
        | E::NotReadOnly
        | E::NoWatcher
        | E::RuntimeInconsistency
        | E::SystemError => ZkCode::Other(e as i32),
    }
}

/// Maps a fired watch to the core's event; session-only notifications (no
/// path) and watch-removal notices map to nothing.
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

/// Adjusts a result for a reconnect that happened while the request was in
/// flight (`reconnected`):
///
/// - a watch request that succeeded set its watch on a connection the
///   transport no longer delivers events from: answer `ConnectionLoss`, so
///   the core sets it again;
/// - with credentials, a `NoAuth` may come from a connection they were not
///   replayed on yet: answer `ConnectionLoss`, so the core retries instead
///   of failing for good.
pub(crate) fn straddled(
    result: Result<Reply, ZkCode>,
    sets_watch: bool,
    has_auth: bool,
    reconnected: bool,
) -> Result<Reply, ZkCode> {
    if !reconnected {
        return result;
    }
    match result {
        Ok(_) if sets_watch => Err(ZkCode::ConnectionLoss),
        Err(ZkCode::NoAuth) if has_auth => Err(ZkCode::ConnectionLoss),
        other => other,
    }
}

fn map_stat(s: &zka::Stat) -> Stat {
    crate::shell::stat_of!(s)
}

/// Maps the core's ACL onto ZooKeeper ACL lists.
pub(crate) fn map_acl(acl: &Acl) -> Vec<zka::Acl> {
    acl.entries()
        .iter()
        .map(|e| {
            let perms = crate::shell::permission_of!(e.perms(), zka::Permission);
            zka::Acl::new(perms, e.scheme().as_str(), e.id())
        })
        .collect()
}

/// Maps the core's create mode onto the client's.
///
/// `Container` becomes `Persistent`: zookeeper-async sends the container flag
/// with a plain create opcode, so the server makes a persistent node anyway
/// (measured: it outlived its last child). Saying `Persistent` here keeps the
/// code honest; the core only asks for a container parent when configured to.
pub(crate) fn map_mode(mode: CreateMode) -> zka::CreateMode {
    match mode {
        CreateMode::Persistent | CreateMode::Container => zka::CreateMode::Persistent,
        CreateMode::Ephemeral => zka::CreateMode::Ephemeral,
        CreateMode::PersistentSequential => zka::CreateMode::PersistentSequential,
        CreateMode::EphemeralSequential => zka::CreateMode::EphemeralSequential,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zkelect_core::setup::REPORT_WAIT;

    const T: Duration = Duration::from_secs(4);

    #[test]
    #[allow(deprecated)]
    fn every_state_reads_as_the_right_client_state() {
        use zka::ZkState as S;
        let table = [
            (S::Connected, ClientState::Connected),
            (S::ConnectedReadOnly, ClientState::Connected),
            (S::Connecting, ClientState::Disconnected),
            (S::Associating, ClientState::Ignored),
            (S::NotConnected, ClientState::Expired),
            (S::AuthFailed, ClientState::AuthFailed),
            (S::Closed, ClientState::Closed),
        ];
        for (state, reads) in table {
            assert_eq!(client_state(state), reads, "{state:?}");
        }
    }

    #[test]
    fn an_expiry_then_a_new_session_reads_as_expired_then_connected() {
        // The sequence zookeeper-async gives for an expired session (adapters/CLIENTS.md: expiry).
        #[allow(deprecated)]
        let states = [
            zka::ZkState::Connecting,
            zka::ZkState::NotConnected,
            zka::ZkState::Connecting,
            zka::ZkState::Connected,
        ];
        let c = SessionEvent::Connected {
            session_id: None,
            timeout: T,
        };
        let mut reporter = Reporter::new(false);
        let mut out = Vec::new();
        for s in states {
            for e in reporter.map(client_state(s), c) {
                reporter.reported(&e);
                out.push(e);
            }
        }
        assert_eq!(out, [SessionEvent::Disconnected, SessionEvent::Expired, c]);
    }

    #[test]
    fn every_error_maps_and_faults_stay_faults() {
        use zka::ZkError as E;
        let table = [
            (E::APIError, ZkCode::Other(-100)),
            (E::AuthFailed, ZkCode::AuthFailed),
            (E::BadArguments, ZkCode::BadArguments),
            (E::BadVersion, ZkCode::BadVersion),
            (E::ConnectionLoss, ZkCode::ConnectionLoss),
            (E::DataInconsistency, ZkCode::Other(-3)),
            (E::EphemeralOnLocalSession, ZkCode::Other(-120)),
            (E::InvalidACL, ZkCode::InvalidAcl),
            (E::InvalidCallback, ZkCode::Other(-113)),
            (E::MarshallingError, ZkCode::ConnectionLoss),
            (E::NoAuth, ZkCode::NoAuth),
            (E::NoChildrenForEphemerals, ZkCode::NoChildrenForEphemerals),
            (E::NodeExists, ZkCode::NodeExists),
            (E::NoNode, ZkCode::NoNode),
            (E::NotEmpty, ZkCode::NotEmpty),
            (E::NotReadOnly, ZkCode::Other(-119)),
            (E::NoWatcher, ZkCode::Other(-121)),
            (E::OperationTimeout, ZkCode::OperationTimeout),
            (E::RuntimeInconsistency, ZkCode::Other(-2)),
            (E::SessionExpired, ZkCode::SessionExpired),
            (E::SessionMoved, ZkCode::SessionMoved),
            (E::SystemError, ZkCode::Other(-1)),
            (E::Unimplemented, ZkCode::Unimplemented),
        ];
        assert_eq!(
            table.len(),
            23,
            "every ZkError variant of zookeeper-async 5.0.0"
        );
        for (from, to) in table {
            assert_eq!(map_error(from), to, "{from:?}");
        }
        // What the core retries and what stops it.
        for e in [
            E::ConnectionLoss,
            E::OperationTimeout,
            E::MarshallingError,
            E::SessionMoved,
        ] {
            assert!(map_error(e).is_connection_fault(), "{e:?} is retried");
        }
        for e in [E::NoAuth, E::AuthFailed, E::InvalidACL, E::BadArguments] {
            assert!(map_error(e).is_fatal(), "{e:?} is fatal");
        }
    }

    #[test]
    fn watches_map_and_session_notifications_are_dropped() {
        use zka::WatchedEventType as T;
        let event = |event_type, path: Option<&str>| zka::WatchedEvent {
            event_type,
            keeper_state: zka::KeeperState::SyncConnected,
            path: path.map(str::to_owned),
        };
        let table = [
            (T::NodeCreated, Some(WatchKind::NodeCreated)),
            (T::NodeDeleted, Some(WatchKind::NodeDeleted)),
            (T::NodeDataChanged, Some(WatchKind::NodeDataChanged)),
            (T::NodeChildrenChanged, Some(WatchKind::NodeChildrenChanged)),
            (T::None, None),
            (T::DataWatchRemoved, None),
            (T::ChildWatchRemoved, None),
        ];
        for (kind, want) in table {
            assert_eq!(
                map_watch(&event(kind, Some("/e/n"))),
                want.map(|kind| WatchEvent {
                    kind,
                    path: "/e/n".into()
                }),
                "{kind:?}"
            );
            assert_eq!(
                map_watch(&event(kind, None)),
                None,
                "{kind:?} without a path"
            );
        }
    }

    #[test]
    fn a_reconnect_in_flight_turns_set_watches_and_no_auth_into_connection_loss() {
        let ok = || Ok(Reply::Children(vec![]));
        // No reconnect: untouched.
        assert_eq!(straddled(ok(), true, true, false), ok());
        assert_eq!(
            straddled(Err(ZkCode::NoAuth), false, true, false),
            Err(ZkCode::NoAuth)
        );
        // A watch set across a reconnect would never be delivered: set it again.
        assert_eq!(
            straddled(ok(), true, false, true),
            Err(ZkCode::ConnectionLoss)
        );
        // A read without a watch is still good.
        assert_eq!(straddled(ok(), false, false, true), ok());
        // NoAuth before the credentials were replayed is not fatal…
        assert_eq!(
            straddled(Err(ZkCode::NoAuth), false, true, true),
            Err(ZkCode::ConnectionLoss)
        );
        // …but without credentials it is what it says.
        assert_eq!(
            straddled(Err(ZkCode::NoAuth), false, false, true),
            Err(ZkCode::NoAuth)
        );
        assert_eq!(
            straddled(Err(ZkCode::NoNode), true, true, true),
            Err(ZkCode::NoNode)
        );
    }

    #[test]
    fn acls_map_to_the_zookeeper_lists() {
        let world_all = zka::Acl::new(zka::Permission::ALL, "world", "anyone");
        let creator_all = zka::Acl::new(zka::Permission::ALL, "auth", "");
        let world_read = zka::Acl::new(zka::Permission::READ, "world", "anyone");
        assert_eq!(map_acl(&Acl::Open), vec![world_all]);
        assert_eq!(map_acl(&Acl::CreatorAll), vec![creator_all.clone()]);
        assert_eq!(
            map_acl(&Acl::CreatorAllWorldRead),
            vec![creator_all, world_read]
        );
    }

    #[test]
    fn modes_map_and_containers_are_persistent() {
        let table = [
            (CreateMode::Persistent, zka::CreateMode::Persistent),
            (CreateMode::Ephemeral, zka::CreateMode::Ephemeral),
            (
                CreateMode::PersistentSequential,
                zka::CreateMode::PersistentSequential,
            ),
            (
                CreateMode::EphemeralSequential,
                zka::CreateMode::EphemeralSequential,
            ),
            (CreateMode::Container, zka::CreateMode::Persistent),
        ];
        for (from, to) in table {
            assert_eq!(map_mode(from), to, "{from:?}");
        }
    }

    #[test]
    fn stats_keep_the_token_and_the_owner() {
        let stat = zka::Stat {
            czxid: 0x6,
            mzxid: 7,
            ctime: 1,
            mtime: 2,
            version: 3,
            cversion: 4,
            aversion: 5,
            ephemeral_owner: 0x100_000d_f3eb_0000,
            data_length: 8,
            num_children: 9,
            pzxid: 10,
        };
        let mapped = map_stat(&stat);
        assert_eq!(
            (mapped.czxid, mapped.ephemeral_owner),
            (0x6, 0x100_000d_f3eb_0000)
        );
        assert_eq!((mapped.mzxid, mapped.pzxid), (7, 10));
        assert_eq!((mapped.version, mapped.cversion), (3, 4));
        assert_eq!((mapped.data_length, mapped.num_children), (8, 9));
    }

    #[tokio::test]
    async fn short_session_timeouts_are_refused_before_any_traffic() {
        for ms in [0, 900, 1_000, 1_499] {
            let short =
                ZkAsyncOptions::new("127.0.0.1:1").session_timeout(Duration::from_millis(ms));
            match ZkAsyncTransport::connect(short).await {
                Err(SessionError::SessionTimeoutTooShort { requested, min }) => {
                    assert_eq!(requested, Duration::from_millis(ms));
                    assert_eq!(min, SESSION_TIMEOUT_MIN);
                }
                other => panic!("{ms} ms: expected a refusal, got {other:?}"),
            }
        }
        let assumed =
            ZkAsyncOptions::new("127.0.0.1:1").assume_session_timeout(Duration::from_millis(1_000));
        assert!(matches!(
            ZkAsyncTransport::connect(assumed).await,
            Err(SessionError::SessionTimeoutTooShort { .. })
        ));
    }

    #[tokio::test]
    async fn empty_and_malformed_hosts_are_refused() {
        for hosts in [" ", "no-port-here", "127.0.0.1:1,:"] {
            let result = ZkAsyncTransport::connect(
                ZkAsyncOptions::new(hosts).connect_timeout(Duration::from_secs(5)),
            )
            .await;
            assert!(
                matches!(result, Err(SessionError::Connect { .. })),
                "{hosts:?}: {result:?}"
            );
        }
    }

    #[tokio::test]
    async fn unreachable_server_fails_within_the_connect_timeout() {
        // Nothing listens on port 1; connect() alone would spin forever. The
        // server's session timeout cannot be learned: refused, not guessed.
        let opts = ZkAsyncOptions::new("127.0.0.1:1/chroot")
            .session_timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_millis(500));
        let started = std::time::Instant::now();
        let result = ZkAsyncTransport::connect(opts).await;
        match result {
            Err(SessionError::Connect { kind, reason, .. }) => {
                assert_eq!(kind, ConnectFailure::Refused);
                assert!(reason.contains("127.0.0.1:1: refused"), "{reason}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_set_up_backs_off_through_lost_connections_and_ends_at_its_deadline() {
        let tries = std::sync::Mutex::new(Vec::new());
        let started = Instant::now();
        let (_tx, up) = watch::channel(false);
        let changes = ConnectionChanges::default();
        let send = |request| {
            assert_eq!(request, SetUpRequest::Credentials);
            tries.lock().unwrap().push(started.elapsed().as_millis());
            std::future::ready(SetUpOutcome::ConnectionLoss)
        };
        let config = SetUpConfig::authenticate(Duration::from_secs(2));
        let end = run_set_up(config, up, &changes, send).await;
        assert_eq!(
            end,
            SetUpEnd::Failed(SetUpError::TimedOut {
                within: Duration::from_secs(2)
            })
        );
        // Pauses of 50, 100, 200, 400, 800, 800 ms; none past the deadline.
        assert_eq!(*tries.lock().unwrap(), [0, 50, 150, 350, 750, 1_550]);
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }

    #[test]
    fn the_cap_only_lowers_the_negotiated_timeout() {
        let four = Duration::from_secs(4);
        assert_eq!(reported_timeout(four, None), four);
        assert_eq!(reported_timeout(four, Some(Duration::from_secs(60))), four);
        assert_eq!(
            reported_timeout(four, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
    }

    /// A pump over fake credentials: `replays` answers each replay in turn
    /// (then `Ok`); `during` runs inside each replay (e.g. a connection drop).
    struct Pump {
        shared: Arc<ListenerState>,
        events: mpsc::UnboundedReceiver<TransportEvent>,
        calls: Arc<std::sync::Mutex<u32>>,
        task: tokio::task::JoinHandle<()>,
    }

    impl Pump {
        fn start(
            has_auth: bool,
            replays: Vec<Result<(), zka::ZkError>>,
            during: Option<zka::ZkState>,
        ) -> Self {
            let (events_tx, events) = mpsc::unbounded_channel();
            let (raw_tx, raw) = mpsc::unbounded_channel();
            let shared =
                ListenerState::new(events_tx, raw_tx, has_auth, Duration::from_secs(1), None);
            let shared = Arc::new(shared);
            let calls = Arc::new(std::sync::Mutex::new(0_u32));
            let replay = {
                let shared = Arc::clone(&shared);
                let calls = Arc::clone(&calls);
                let replays = std::sync::Mutex::new(replays.into_iter());
                move || {
                    *calls.lock().unwrap() += 1;
                    if let Some(state) = during {
                        shared.on_state(state);
                    }
                    let answer = replays.lock().unwrap().next().unwrap_or(Ok(()));
                    async move { answer }
                }
            };
            let task = tokio::spawn(pump(replay, || async { T }, Arc::clone(&shared), raw, T, 0));
            Self {
                shared,
                events,
                calls,
                task,
            }
        }

        fn watch(&self, path: &str) {
            let event = zka::WatchedEvent {
                event_type: zka::WatchedEventType::NodeDeleted,
                keeper_state: zka::KeeperState::SyncConnected,
                path: Some(path.to_owned()),
            };
            let _ = self.shared.raw.send(Raw::Watch(event));
        }

        /// Everything the pump has sent so far.
        async fn drain(&mut self) -> Vec<TransportEvent> {
            tokio::time::sleep(Duration::from_secs(2)).await;
            std::iter::from_fn(|| self.events.try_recv().ok()).collect()
        }
    }

    fn deleted(path: &str) -> TransportEvent {
        TransportEvent::Watch(WatchEvent {
            kind: WatchKind::NodeDeleted,
            path: path.into(),
        })
    }

    fn session(e: SessionEvent) -> TransportEvent {
        TransportEvent::Session(e)
    }

    const CONNECTED: SessionEvent = SessionEvent::Connected {
        session_id: None,
        timeout: T,
    };

    #[tokio::test(start_paused = true)]
    async fn the_pump_keeps_order_and_passes_every_watch_event_on() {
        let mut p = Pump::start(false, vec![], None);
        p.watch("/e/a");
        p.shared.on_state(zka::ZkState::Connecting);
        // Queued by the client's watcher after the disconnect (it fired
        // before): still what happened, passed on in order.
        p.watch("/e/late");
        p.shared.on_state(zka::ZkState::Connected);
        p.watch("/e/b");
        assert_eq!(
            p.drain().await,
            [
                deleted("/e/a"),
                session(SessionEvent::Disconnected),
                deleted("/e/late"),
                session(CONNECTED),
                deleted("/e/b"),
            ]
        );
        assert_eq!(*p.calls.lock().unwrap(), 0, "no credentials, no replay");
        p.task.abort();
    }

    #[tokio::test(start_paused = true)]
    #[allow(deprecated)]
    async fn the_pump_reports_an_expiry_and_the_new_session_after_it() {
        let mut p = Pump::start(false, vec![], None);
        for state in [
            zka::ZkState::Connecting,
            zka::ZkState::NotConnected,
            zka::ZkState::Connecting,
            zka::ZkState::Connected,
        ] {
            p.shared.on_state(state);
        }
        assert_eq!(
            p.drain().await,
            [
                session(SessionEvent::Disconnected),
                session(SessionEvent::Expired),
                session(CONNECTED),
            ]
        );
        assert_eq!(p.shared.shell.connection_changes.recorded(), 3);
        p.task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn credentials_are_replayed_before_connected_is_reported_and_the_gate_opens() {
        let mut p = Pump::start(true, vec![], None);
        p.shared.authenticated.send_replace(true);
        p.shared.on_state(zka::ZkState::Connecting);
        assert!(
            !*p.shared.authenticated.borrow(),
            "the gate closes on a disconnect"
        );
        p.shared.on_state(zka::ZkState::Connected);
        assert_eq!(
            p.drain().await,
            [session(SessionEvent::Disconnected), session(CONNECTED)]
        );
        assert_eq!(*p.calls.lock().unwrap(), 1);
        assert!(
            *p.shared.authenticated.borrow(),
            "the gate opens after the replay"
        );
        p.task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_replay_is_retried_and_watch_events_wait_for_it() {
        let mut p = Pump::start(
            true,
            vec![
                Err(zka::ZkError::ConnectionLoss),
                Err(zka::ZkError::OperationTimeout),
            ],
            None,
        );
        p.shared.on_state(zka::ZkState::Connecting);
        p.shared.on_state(zka::ZkState::Connected);
        p.watch("/e/b");
        assert_eq!(
            p.drain().await,
            [
                session(SessionEvent::Disconnected),
                session(CONNECTED),
                deleted("/e/b"),
            ]
        );
        assert_eq!(*p.calls.lock().unwrap(), 3, "two failures, then success");
        p.task.abort();
    }

    /// A proof that counts its starts and answers `answer`.
    fn counted_proof(
        starts: &std::sync::atomic::AtomicUsize,
        answer: SetUpOutcome,
    ) -> impl Fn(SetUpRequest) -> std::future::Ready<SetUpOutcome> + '_ {
        move |request| {
            assert_eq!(request, SetUpRequest::Probe);
            starts.fetch_add(1, Ordering::SeqCst);
            std::future::ready(answer.clone())
        }
    }

    /// Proves a session as `connect` does, within 10 s.
    async fn session_up<S, F>(up: watch::Receiver<bool>, prove: S) -> SetUpEnd
    where
        S: Fn(SetUpRequest) -> F,
        F: Future<Output = SetUpOutcome>,
    {
        let changes = ConnectionChanges::default();
        let config = SetUpConfig::prove(Duration::from_secs(10));
        run_set_up(config, up, &changes, prove).await
    }

    const PROVED: SetUpEnd = SetUpEnd::Done {
        credentials_on: false,
    };

    #[tokio::test(start_paused = true)]
    async fn a_session_the_client_reports_up_costs_no_request() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        // Up before the set-up looks, and up while it waits.
        for delay in [None, Some(Duration::from_millis(150))] {
            let starts = AtomicUsize::new(0);
            let (tx, up) = watch::channel(delay.is_none());
            let started = Instant::now();
            let reporter = tokio::spawn(async move {
                if let Some(delay) = delay {
                    tokio::time::sleep(delay).await;
                    tx.send_replace(true);
                }
                // Kept alive: a closed channel is not a report.
                tokio::time::sleep(Duration::from_secs(10)).await;
            });
            let proof = counted_proof(&starts, SetUpOutcome::Failed("never asked".into()));
            assert_eq!(session_up(up, proof).await, PROVED);
            assert_eq!(started.elapsed(), delay.unwrap_or_default());
            assert_eq!(starts.load(Ordering::SeqCst), 0, "no request was sent");
            reporter.abort();
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_report_missed_by_the_listener_is_made_up_for_by_one_request() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        for answer in [SetUpOutcome::Ok, SetUpOutcome::Failed("NoNode".into())] {
            let starts = AtomicUsize::new(0);
            let (tx, up) = watch::channel(false);
            let started = Instant::now();
            let got = session_up(up, counted_proof(&starts, answer.clone())).await;
            if answer == SetUpOutcome::Ok {
                assert_eq!(got, PROVED);
            } else {
                assert_eq!(
                    got,
                    SetUpEnd::Failed(SetUpError::Failed {
                        request: SetUpRequest::Probe,
                        reason: "NoNode".into()
                    })
                );
            }
            assert_eq!(started.elapsed(), REPORT_WAIT);
            assert_eq!(starts.load(Ordering::SeqCst), 1);
            drop(tx);
        }
        // A listener gone with the client: the request alone decides.
        let starts = AtomicUsize::new(0);
        let (tx, up) = watch::channel(false);
        drop(tx);
        let got = session_up(up, counted_proof(&starts, SetUpOutcome::Ok)).await;
        assert_eq!(got, PROVED);
        assert_eq!(starts.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn rejected_credentials_are_reported_as_auth_failed() {
        let mut p = Pump::start(true, vec![Err(zka::ZkError::AuthFailed)], None);
        p.shared.on_state(zka::ZkState::Connecting);
        p.shared.on_state(zka::ZkState::Connected);
        assert_eq!(
            p.drain().await,
            [
                session(SessionEvent::Disconnected),
                session(SessionEvent::AuthFailed),
            ]
        );
        assert!(!*p.shared.authenticated.borrow());
        p.task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_replay_that_cannot_finish_ends_at_the_session_timeout_as_auth_failed() {
        // Every replay's connection is lost under it, and no new state
        // comes: the connection stays, the credentials never get on.
        let lost = vec![Err(zka::ZkError::ConnectionLoss); 100];
        let mut p = Pump::start(true, lost, None);
        p.shared.on_state(zka::ZkState::Connecting);
        p.shared.on_state(zka::ZkState::Connected);
        let started = Instant::now();
        p.watch("/e/b");
        tokio::time::sleep(T - Duration::from_millis(1)).await;
        assert_eq!(
            std::iter::from_fn(|| p.events.try_recv().ok()).collect::<Vec<_>>(),
            [session(SessionEvent::Disconnected)],
            "nothing more before the session timeout"
        );
        // Tries at 0, 200, 600, 1,400, 2,600, 3,800 ms; none after.
        assert_eq!(*p.calls.lock().unwrap(), 6);
        assert_eq!(
            p.drain().await,
            [session(SessionEvent::AuthFailed), deleted("/e/b")]
        );
        assert_eq!(
            started.elapsed(),
            T + Duration::from_secs(2) - Duration::from_millis(1)
        );
        assert_eq!(*p.calls.lock().unwrap(), 6, "no try after the end");
        assert!(!*p.shared.authenticated.borrow(), "the gate stays shut");
        p.task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_lost_during_the_replay_is_not_reported_as_connected() {
        // Every replay sees the connection drop under it.
        let mut p = Pump::start(true, vec![], Some(zka::ZkState::Connecting));
        p.shared.on_state(zka::ZkState::Connecting);
        p.shared.on_state(zka::ZkState::Connected);
        let events = p.drain().await;
        assert_eq!(events, [session(SessionEvent::Disconnected)]);
        assert!(!*p.shared.authenticated.borrow());
        p.task.abort();
    }
}
