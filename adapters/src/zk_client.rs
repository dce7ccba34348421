//! The transport over `zookeeper-client` 0.11 (kezhuw), the second real
//! client: it re-registers one-shot watches and replays credentials after a
//! reconnect, reports expiry as a terminal state, returns the session id
//! and a `Stat` on every create, and has `multi`, TLS and SASL. What it
//! still gets wrong (`adapters/CLIENTS.md` in the repository), and where this module makes
//! up for it:
//!
//! | gap | workaround |
//! |---|---|
//! | a request failed by a connection timeout answers `Error::Custom("no response from connection in …")` (also `Timeout`, `UnexpectedError`), not `ConnectionLoss`, although the server may have applied it | `map_error`: those errors are `ConnectionLoss` whenever the session was not `SyncConnected` at the end of the request or changed state during it, so the core recovers a create by its protected name instead of creating a second node; otherwise `Other` |
//! | the `StateWatcher` keeps only the latest state, so `Disconnected → SyncConnected` can reach a reader as one change | `on_state` acts on the current state only, never on a history; a change that reads `SyncConnected` while `Connected` was the last thing reported was a missed blip and is reported as `Disconnected` then `Connected`, so the core re-verifies |
//! | `Expired` is terminal: the client is dead for good | the session task reports `Expired`, opens a new client (retried every [`ZkClientOptions::reconnect_delay`], each attempt bounded by the connect timeout), swaps it in, and only then reports `Connected` with the new session id. A `SessionExpired` answer from a client that has been replaced is `ConnectionLoss`, so it cannot expire the new session in the core |
//! | persistent watches are not re-registered after a reconnect | only one-shot watches are used (`get_and_watch_data`, `list_and_watch_children`, `check_and_watch_stat`) |
//! | a create returns `(Stat, CreateSequence)`, not the path | the path is the requested one plus the sequence (`{prefix}{seq}`, whose `Display` pads to 10 or 19 digits) |
//! | a `OneshotWatcher` per watching read, kept until its path fires: a path read again and again that never changes (a leader's node, read by every follower that comes to stand behind it) keeps one per read (measured: 467 B per watch event on a leader with followers churning behind it) | a read is sent without its watch while a watcher for the same path and kind is pending (the server keeps one watch per session, path and kind anyway, and its event reaches every machine that asked, through the driver): at most one watcher per path and kind (measured after: 0.00 B per event over the first 5,000 events, `tests/tests/soak.rs`) |
//! | no callbacks: state and watch events come from a `StateWatcher` and one `OneshotWatcher` per watch | one session task forwards the state, one forwarder task polls every pending watcher (a set of futures, not a task each: an idle recipe's watches cost the client's watcher and no task), all into the one unbounded [`EventStream`]; session notices on a watcher (expiry, close) are left to the session task |
//! | a dropped client closes its session only once every clone is gone, with no way to wait for it | [`close`](Transport::close) drops the transport's client and waits (bounded) for the state to turn terminal; dropping the transport closes in the background |
//! | a TLS certificate the client rejects is only logged; `connect` then retries until its timeout and answers `Timeout` | before connecting, one TLS handshake per TLS host with the same trust settings (`tls` feature): a rejected certificate fails at once with [`Rejected`](crate::TlsError::Rejected) |
//! | a host name that is not a valid TLS server name makes the client panic in its handshake | refused up front with [`Config`](crate::TlsError::Config) |
//!
//! The session timeout reported to the core with `Connected` is the one the
//! server negotiated for this session (the client reads it from the
//! ConnectResponse and exposes it), never the requested one: a server clamps
//! a request into its `[minSessionTimeout, maxSessionTimeout]`. Limit: after
//! a reconnect (same session) to another server of an ensemble whose
//! `maxSessionTimeout` is lower than the first server's, that server may cut
//! the session's timeout again (it clamps the value the client re-sends)
//! and the client does not expose the new value; give every server the same bounds (or use the zookeeper-async
//! transport, which bounds the timeout by every server's answer).
//!
//! Its socket and timers run on `async-io`, not tokio, so tokio's paused
//! clock does not move them: test it against real servers in real time.
//!
//! ```no_run
//! # async fn example() -> Result<(), zkelect::ElectionError> {
//! use std::time::Duration;
//! use zkelect::zk_client::ZkClientOptions;
//! use zkelect::Election;
//!
//! let options = ZkClientOptions::new("zk1:2181,zk2:2181")
//!     .session_timeout(Duration::from_secs(6))
//!     .digest("svc:secret");
//! let election = Election::connect(options).path("/svc/leader").id("a").join().await?;
//! election.wait_leader().await?;
//! election.close().await;
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, PoisonError, RwLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{debug, info, warn};
use zkelect_core::connect_string::ConnectString;
#[cfg(feature = "zookeeper-client-tls")]
use zkelect_core::connect_string::Scheme;
use zkelect_core::startup::{Learn, StartupConfig};
use zkelect_core::{
    Acl, CreateMode, Perms, Reply, Request, SessionEvent, SessionId, Stat, Verb, WatchEvent,
    WatchKind, ZkCode,
};
/// The `zookeeper-client` crate this transport is built on, for its option
/// types (e.g. `SaslOptions` for GSSAPI).
pub use zookeeper_client as client;
use zookeeper_client as zkc;

#[cfg(feature = "zookeeper-client-tls")]
use crate::error::TlsError;
use crate::error::{ConnectFailure, SessionError};
use crate::shell::{ClientState, Reporter, SessionOptions, Shell, CLOSE_TIMEOUT};
use crate::startup::{self, Asker, Driver};
use crate::transport::{
    EventStream, MultiError, MultiOp, MultiOpResult, Transport, TransportEvent,
};

/// How to reach the servers with the zookeeper-client transport: the shared
/// [`SessionOptions`] with this client's own settings (TLS, SASL).
///
/// A host may be prefixed with `tcp://` (plain) or `tcp+tls://` (TLS);
/// without a prefix it uses TLS if `tls` is set (feature
/// `zookeeper-client-tls`), plain TCP otherwise. The connect timeout also
/// bounds each attempt to open a new session after an expiry, and the
/// reconnect delay is the pause between those attempts.
///
/// ```
/// use std::time::Duration;
/// use zkelect::zk_client::ZkClientOptions;
///
/// let options = ZkClientOptions::new("zk1:2181,zk2:2181/chroot")
///     .session_timeout(Duration::from_secs(6))
///     .connect_timeout(Duration::from_secs(5))
///     .digest("svc:secret");
/// assert_eq!(options.auth[0].0, "digest");
/// assert!(!format!("{options:?}").contains("secret"));
/// ```
pub type ZkClientOptions = SessionOptions<ZkClientExtras>;

/// What only the zookeeper-client transport needs ([`ZkClientOptions::client`]).
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct ZkClientExtras {
    /// TLS settings (feature `zookeeper-client-tls`).
    #[cfg(feature = "zookeeper-client-tls")]
    pub tls: Option<TlsSettings>,
    /// SASL settings (features `zookeeper-client-sasl`, `zookeeper-client-gssapi`).
    #[cfg(any(feature = "zookeeper-client-sasl", feature = "zookeeper-client-gssapi"))]
    pub sasl: Option<zkc::SaslOptions>,
}

impl std::fmt::Debug for ZkClientExtras {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print credentials (the SASL options' own Debug shows the password).
        let mut d = f.debug_struct("ZkClientExtras");
        #[cfg(feature = "zookeeper-client-tls")]
        d.field("tls", &self.tls);
        #[cfg(any(feature = "zookeeper-client-sasl", feature = "zookeeper-client-gssapi"))]
        d.field("sasl", &self.sasl.is_some());
        d.finish()
    }
}

impl SessionOptions<ZkClientExtras> {
    /// Talks TLS to every host not prefixed with `tcp://`.
    #[cfg(feature = "zookeeper-client-tls")]
    #[must_use]
    pub fn tls(mut self, tls: TlsSettings) -> Self {
        self.client.tls = Some(tls);
        self
    }

    /// Authenticates with SASL (DIGEST-MD5 or GSSAPI options built with
    /// [`client::SaslOptions`]).
    #[cfg(any(feature = "zookeeper-client-sasl", feature = "zookeeper-client-gssapi"))]
    #[must_use]
    pub fn sasl(mut self, sasl: impl Into<zkc::SaslOptions>) -> Self {
        self.client.sasl = Some(sasl.into());
        self
    }

    /// Authenticates with SASL DIGEST-MD5 as `user`.
    #[cfg(feature = "zookeeper-client-sasl")]
    #[must_use]
    pub fn sasl_digest_md5(self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.sasl(zkc::SaslOptions::digest_md5(user.into(), password.into()))
    }
}

/// TLS settings: the CA that signs the servers' certificates, and
/// optionally a client certificate for servers that ask for one
/// (`ssl.clientAuth=need`). PEM throughout.
///
/// The server's certificate must name the host as written in the connect
/// string (a DNS name or an IP address in its subject alternative names):
/// the client derives the expected server name from the host, and this
/// crate offers no way around hostname verification — the client has one
/// only as an `unsafe fn`, this workspace forbids `unsafe`, and it would let
/// anyone with a certificate from the same CA stand in for the servers.
#[cfg(feature = "zookeeper-client-tls")]
#[derive(Clone)]
pub struct TlsSettings {
    ca_pem: String,
    identity: Option<(String, String)>,
}

#[cfg(feature = "zookeeper-client-tls")]
impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("ca_pem_bytes", &self.ca_pem.len())
            .field("client_certificate", &self.identity.is_some())
            .finish()
    }
}

#[cfg(feature = "zookeeper-client-tls")]
impl TlsSettings {
    /// Trusts the CA certificate(s) in `ca_pem`. Checked at connect.
    pub fn from_ca_pem(ca_pem: impl Into<String>) -> Self {
        Self {
            ca_pem: ca_pem.into(),
            identity: None,
        }
    }

    /// Trusts the CA certificate(s) in the PEM file at `path`.
    ///
    /// Fails with [`TlsError::Config`] if it cannot be read.
    pub fn from_ca_file(path: impl AsRef<std::path::Path>) -> Result<Self, SessionError> {
        Ok(Self::from_ca_pem(read_pem(path.as_ref(), "CA file")?))
    }

    /// Presents this client certificate (PEM chain) and private key (PEM,
    /// PKCS#8, PKCS#1 or SEC1) to servers that ask for one.
    #[must_use]
    pub fn identity_pem(mut self, cert_pem: impl Into<String>, key_pem: impl Into<String>) -> Self {
        self.identity = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// As [`identity_pem`](Self::identity_pem), from files.
    ///
    /// Fails with [`TlsError::Config`] if one cannot be read.
    pub fn identity_files(
        self,
        cert: impl AsRef<std::path::Path>,
        key: impl AsRef<std::path::Path>,
    ) -> Result<Self, SessionError> {
        let cert = read_pem(cert.as_ref(), "client certificate file")?;
        let key = read_pem(key.as_ref(), "client key file")?;
        Ok(self.identity_pem(cert, key))
    }

    /// The client's TLS options and the pre-flight check's configuration.
    fn build(&self) -> Result<(zkc::TlsOptions, Arc<rustls::ClientConfig>), TlsError> {
        let config = |what: &str, reason: String| TlsError::Config {
            what: what.to_owned(),
            reason,
        };
        let mut options = zkc::TlsOptions::new()
            .with_pem_ca(&self.ca_pem)
            .map_err(|e| config("CA", e.to_string()))?;
        if let Some((cert, key)) = &self.identity {
            options = options
                .with_pem_identity(cert, key)
                .map_err(|e| config("client certificate and key", e.to_string()))?;
        }
        let preflight = preflight::client_config(&self.ca_pem, self.identity.as_ref())?;
        Ok((options, preflight))
    }
}

#[cfg(feature = "zookeeper-client-tls")]
fn read_pem(path: &std::path::Path, what: &str) -> Result<String, SessionError> {
    std::fs::read_to_string(path).map_err(|e| {
        SessionError::Tls(TlsError::Config {
            what: format!("{what} {}", path.display()),
            reason: e.to_string(),
        })
    })
}

/// Everything needed to open a client again (after an expiry).
#[derive(Clone)]
struct Opener {
    options: ZkClientOptions,
    /// The connect string, split.
    split: ConnectString,
    #[cfg(feature = "zookeeper-client-tls")]
    tls: Option<zkc::TlsOptions>,
    /// The TLS configuration of the liveness asks of TLS servers.
    #[cfg(feature = "zookeeper-client-tls")]
    preflight: Option<Arc<rustls::ClientConfig>>,
}

impl Opener {
    fn connector(&self) -> zkc::Connector {
        let mut connector =
            zkc::Client::connector().with_session_timeout(self.options.session_timeout);
        for (scheme, bytes) in &self.options.auth {
            connector = connector.with_auth(scheme, bytes);
        }
        #[cfg(feature = "zookeeper-client-tls")]
        if let Some(tls) = &self.tls {
            connector = connector.with_tls(tls.clone());
        }
        #[cfg(any(feature = "zookeeper-client-sasl", feature = "zookeeper-client-gssapi"))]
        if let Some(sasl) = &self.options.client.sasl {
            connector = connector.with_sasl(sasl.clone());
        }
        connector
    }

    async fn open(&self, hosts: &str) -> Result<zkc::Client, zkc::Error> {
        let connector = self.connector();
        #[cfg(feature = "zookeeper-client-tls")]
        if self.tls.is_some() {
            return connector.secure_connect(hosts).await;
        }
        connector.connect(hosts).await
    }

    /// How each server is asked whether it answers: a ConnectRequest that
    /// makes no session, or a TLS handshake for a TLS server.
    fn asker(&self) -> Asker {
        let plain = startup::liveness_asker(self.options.session_timeout);
        #[cfg(feature = "zookeeper-client-tls")]
        if let Some(config) = &self.preflight {
            let config = Arc::clone(config);
            let tls_default = self.tls.is_some();
            let servers = self.split.servers.clone();
            return Arc::new(move |index, addr, deadline| {
                let server = &servers[index];
                let tls = match server.scheme {
                    Some(Scheme::Tls) => true,
                    Some(Scheme::Plain) => false,
                    None => tls_default,
                };
                if !tls {
                    return plain(index, addr, deadline);
                }
                Box::pin(preflight::alive(
                    server.host.clone(),
                    server.port,
                    Arc::clone(&config),
                    deadline,
                ))
            });
        }
        plain
    }

    /// Asks the servers (see `startup`) and opens a client on those that
    /// answer, retrying the client until `deadline`.
    async fn start(&self, deadline: Instant) -> Result<zkc::Client, SessionError> {
        let options = &self.options;
        let left = deadline.saturating_duration_since(Instant::now());
        let config = StartupConfig::new(0, Learn::Liveness, left.max(Duration::from_millis(1)));
        let mut driver = Driver::new(self.split.clone(), config, self.asker());
        loop {
            let plan = match driver.next_plan().await {
                Ok(plan) => plan,
                Err(e) => {
                    return Err(startup::refusal(
                        &options.hosts,
                        options.connect_timeout,
                        &driver,
                        &e,
                    ))
                }
            };
            let mut hosts = plan
                .servers
                .iter()
                .map(|&i| driver.server(i).to_string())
                .collect::<Vec<_>>()
                .join(",");
            if let Some(chroot) = driver.chroot() {
                hosts.push_str(chroot);
            }
            debug!(hosts, "starting the client");
            match tokio::time::timeout_at(deadline, self.open(&hosts)).await {
                Ok(Ok(client)) => return Ok(client),
                Ok(Err(zkc::Error::AuthFailed)) => return Err(options.rejected()),
                Ok(Err(zkc::Error::BadArguments(reason))) => {
                    return Err(options.fail(
                        ConnectFailure::BadAddress,
                        format!("{reason}: expected host:port[,host:port…][/chroot]"),
                    ))
                }
                // The client gives up after the session timeout (or when it
                // has tried every server): tried again until the connect
                // timeout, which may be longer.
                Ok(Err(e)) => driver.client_failed(e.to_string()),
                Err(_) => driver.client_failed(format!(
                    "no session could be established within {:?}",
                    options.connect_timeout
                )),
            }
        }
    }
}

/// The client in use, and the shell's generation when it was swapped in.
#[derive(Clone)]
struct Current {
    client: zkc::Client,
    generation: u64,
}

/// What the transport and its tasks share.
struct Inner {
    current: RwLock<Option<Current>>,
    /// The event stream, the closed flag, the request bound, and the
    /// generation — bumped when the client is replaced or closed.
    shell: Shell,
    /// New watchers, for the forwarder task.
    watchers: mpsc::UnboundedSender<(zkc::OneshotWatcher, Armed)>,
    /// The watches a watcher is pending for (shared with the forwarder,
    /// which takes each out as its watcher fires).
    armed: Arc<std::sync::Mutex<BTreeSet<Armed>>>,
}

/// A watch the server keeps at most once per session: a path and the kind
/// of read that set it.
type Armed = (String, Verb);

/// The watch `request` would set, if it sets one.
fn armed(request: &Request) -> Option<Armed> {
    match request {
        Request::GetChildren { path, watch: true }
        | Request::GetData { path, watch: true }
        | Request::Exists { path, watch: true } => Some((path.clone(), request.kind())),
        _ => None,
    }
}

impl Inner {
    fn current(&self) -> Option<Current> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether `current` has been replaced (or closed) since it was read.
    fn replaced(&self, current: &Current) -> bool {
        self.shell.generation.changed_since(current.generation)
    }

    /// Hands one watch to the forwarder task.
    fn forward(&self, watcher: zkc::OneshotWatcher, key: Armed) {
        self.armed_set().insert(key.clone());
        // Fails only once the forwarder has stopped (the transport closes).
        let _ = self.watchers.send((watcher, key));
    }

    fn armed_set(&self) -> std::sync::MutexGuard<'_, BTreeSet<Armed>> {
        self.armed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `request`, without its watch if a watcher is already pending for the
    /// same one. The server keeps one watch per session, path and kind, and
    /// fires it once for every read that asked: a second watcher would only
    /// be kept by the client until the path changes, which for a leader's
    /// node that every new follower reads may be never (one watcher per
    /// follower, for good). The pending watcher's event reaches every
    /// machine that asked, through the driver.
    fn unless_armed(&self, request: Request) -> (Request, Option<Armed>) {
        let Some(key) = armed(&request) else {
            return (request, None);
        };
        if !self.armed_set().contains(&key) {
            return (request, Some(key));
        }
        let plain = match request {
            Request::GetChildren { path, .. } => Request::GetChildren { path, watch: false },
            Request::GetData { path, .. } => Request::GetData { path, watch: false },
            Request::Exists { path, .. } => Request::Exists { path, watch: false },
            other => other,
        };
        (plain, None)
    }
}

/// Forwards every watch's event into the stream, from one task per
/// transport: each pending watcher is a future in one set, not a task of
/// its own (a tokio task and its `JoinSet` entry cost an idle recipe some
/// hundreds of bytes per watch). Ends when the transport is gone, or is
/// aborted on close (the pending watchers are dropped with it).
async fn forward_watches(
    mut watchers: mpsc::UnboundedReceiver<(zkc::OneshotWatcher, Armed)>,
    armed: Arc<std::sync::Mutex<BTreeSet<Armed>>>,
    events: mpsc::UnboundedSender<TransportEvent>,
) {
    let mut pending = FuturesUnordered::new();
    loop {
        tokio::select! {
            watcher = watchers.recv() => match watcher {
                Some((watcher, key)) => pending.push(async move { (watcher.changed().await, key) }),
                None => return,
            },
            Some((event, key)) = pending.next(), if !pending.is_empty() => {
                // Out of the set before the event goes on: the reads it
                // prompts set the watch again.
                armed.lock().unwrap_or_else(PoisonError::into_inner).remove(&key);
                forward_one(&events, &event);
            }
        }
    }
}

/// One fired watch into the stream.
fn forward_one(events: &mpsc::UnboundedSender<TransportEvent>, event: &zkc::WatchedEvent) {
    match map_watch(event) {
        Some(event) => {
            let _ = events.send(TransportEvent::Watch(event));
        }
        // The session ended (expired, closed): the session task says so.
        None => debug!(?event, "watch ended with its session"),
    }
}

/// A [`Transport`] over `zookeeper-client`, one session at a time: after an
/// expiry it opens a new client by itself and reports `Connected` with the
/// new session id.
///
/// ```no_run
/// # async fn example() -> Result<(), zkelect::ElectionError> {
/// use std::time::Duration;
/// use zkelect::zk_client::{ZkClientOptions, ZkClientTransport};
/// use zkelect::Election;
///
/// let options = ZkClientOptions::new("127.0.0.1:2181").session_timeout(Duration::from_secs(4));
/// let (transport, events) = ZkClientTransport::connect(options).await?;
/// let election = Election::builder(transport, events).path("/svc/leader").id("a").join().await?;
/// # Ok(())
/// # }
/// ```
pub struct ZkClientTransport {
    inner: Arc<Inner>,
    session_task: tokio::task::JoinHandle<()>,
    forwarder: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for ZkClientTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkClientTransport")
            .field("shell", &self.inner.shell)
            .finish_non_exhaustive()
    }
}

impl ZkClientTransport {
    /// Connects (after a TLS pre-flight check when TLS is on) and returns
    /// the transport with its event stream, which starts with `Connected`
    /// carrying the session id and the negotiated timeout.
    ///
    /// Everything is bounded by [`ZkClientOptions::connect_timeout`].
    /// Errors: [`SessionError::SessionTimeoutTooShort`] for a zero timeout,
    /// [`SessionError::Tls`] (unreadable settings, a rejected certificate;
    /// before or instead of any session), [`SessionError::Connect`] (bad
    /// address, no session in time), [`SessionError::Auth`] (credentials
    /// rejected).
    pub async fn connect(options: ZkClientOptions) -> Result<(Self, EventStream), SessionError> {
        let split = options.check(Duration::ZERO)?;
        let deadline = Instant::now() + options.connect_timeout;
        #[cfg(feature = "zookeeper-client-tls")]
        let (tls, preflight) = match &options.client.tls {
            Some(settings) => {
                let (client_options, preflight_config) = settings.build()?;
                preflight::check(&options.hosts, Arc::clone(&preflight_config), deadline).await?;
                (Some(client_options), Some(preflight_config))
            }
            None => (None, None),
        };
        let opener = Opener {
            options,
            split,
            #[cfg(feature = "zookeeper-client-tls")]
            tls,
            #[cfg(feature = "zookeeper-client-tls")]
            preflight,
        };
        let options = &opener.options;
        let client = opener.start(deadline).await?;
        let (events, events_rx) = mpsc::unbounded_channel();
        let watcher = client.state_watcher();
        let connected = connected(&client);
        let op_timeout = options.op_timeout_or(client.session_timeout());
        let (watchers, watchers_rx) = mpsc::unbounded_channel();
        let armed = Arc::new(std::sync::Mutex::new(BTreeSet::new()));
        let shell = Shell::new(events, op_timeout);
        let forwarder = tokio::spawn(forward_watches(
            watchers_rx,
            Arc::clone(&armed),
            shell.events(),
        ));
        let inner = Arc::new(Inner {
            current: RwLock::new(Some(Current {
                client,
                generation: 0,
            })),
            shell,
            watchers,
            armed,
        });
        info!(hosts = options.hosts, event = ?connected, "connected");
        inner.shell.session(connected);
        let session_task =
            tokio::spawn(run_session(Arc::clone(&inner), opener, watcher, connected));
        Ok((
            Self {
                inner,
                session_task,
                forwarder,
            },
            events_rx,
        ))
    }

    /// The current session's id, if a client is open.
    pub fn session_id(&self) -> Option<SessionId> {
        self.inner
            .current()
            .map(|c| SessionId(c.client.session_id().0))
    }

    async fn perform_on(&self, current: &Current, request: Request) -> Result<Reply, ZkCode> {
        let client = &current.client;
        // Subscribed before the request: whether the state moved during it.
        let mut state = client.state_watcher();
        let (request, key) = self.inner.unless_armed(request);
        let result = perform_raw(client, request).await;
        let (result, watcher) = match result {
            Ok((reply, watcher)) => (Ok(reply), watcher),
            Err(e) => (Err(e), None),
        };
        if let (Some(watcher), Some(key)) = (watcher, key) {
            self.inner.forward(watcher, key);
        }
        let replaced = self.inner.replaced(current);
        result.map_err(|e| settle(map_error(e, in_doubt(&mut state)), replaced))
    }
}

/// Whether the session was not `SyncConnected` at the end of a request, or
/// changed state during it (`state` was subscribed before the request).
fn in_doubt(state: &mut zkc::StateWatcher) -> bool {
    if state.peek_state() != zkc::SessionState::SyncConnected {
        return true;
    }
    // A change since the subscription is ready at once; poll it once.
    let changed = std::pin::pin!(state.changed());
    let mut cx = Context::from_waker(Waker::noop());
    matches!(Future::poll(changed, &mut cx), Poll::Ready(_))
}

/// A `SessionExpired` from a client that has since been replaced must not
/// expire the new session in the core: the request is simply lost.
fn settle(code: ZkCode, replaced: bool) -> ZkCode {
    if replaced && code == ZkCode::SessionExpired {
        ZkCode::ConnectionLoss
    } else {
        code
    }
}

/// The request on the client; a watch request also yields its watcher.
async fn perform_raw(
    client: &zkc::Client,
    request: Request,
) -> Result<(Reply, Option<zkc::OneshotWatcher>), zkc::Error> {
    let data = |data: Vec<u8>, stat: &zkc::Stat| Reply::Data {
        data,
        stat: map_stat(stat),
    };
    Ok(match request {
        Request::Create {
            path,
            data,
            mode,
            acl,
        } => {
            let acls = map_acl(&acl);
            let options = map_mode(mode).with_acls(zkc::Acls::new(&acls));
            let (stat, sequence) = client.create(&path, &data, &options).await?;
            (
                Reply::Created {
                    path: created_path(&path, mode, sequence),
                    stat: map_stat(&stat),
                },
                None,
            )
        }
        Request::GetChildren { path, watch: false } => {
            (Reply::Children(client.list_children(&path).await?), None)
        }
        Request::GetChildren { path, watch: true } => {
            let (children, watcher) = client.list_and_watch_children(&path).await?;
            (Reply::Children(children), Some(watcher))
        }
        Request::GetData { path, watch: false } => {
            let (bytes, stat) = client.get_data(&path).await?;
            (data(bytes, &stat), None)
        }
        Request::GetData { path, watch: true } => {
            let (bytes, stat, watcher) = client.get_and_watch_data(&path).await?;
            (data(bytes, &stat), Some(watcher))
        }
        Request::Exists { path, watch: false } => {
            let stat = client.check_stat(&path).await?;
            (Reply::Exists(stat.as_ref().map(map_stat)), None)
        }
        Request::Exists { path, watch: true } => {
            let (stat, watcher) = client.check_and_watch_stat(&path).await?;
            (Reply::Exists(stat.as_ref().map(map_stat)), Some(watcher))
        }
        Request::Delete { path, version } => {
            client.delete(&path, version).await?;
            (Reply::Deleted, None)
        }
        Request::SetData {
            path,
            data,
            version,
        } => {
            let stat = client.set_data(&path, &data, version).await?;
            (Reply::Set(map_stat(&stat)), None)
        }
        Request::Sync { path } => {
            client.sync(&path).await?;
            (Reply::Synced, None)
        }
    })
}

/// The path of a created node: the requested one, plus the sequence for
/// sequential modes (`Display` pads it to 10 digits, 19 above `i32::MAX`).
fn created_path(requested: &str, mode: CreateMode, sequence: zkc::CreateSequence) -> String {
    if mode.is_sequential() {
        format!("{requested}{sequence}")
    } else {
        requested.to_owned()
    }
}

#[async_trait]
impl Transport for ZkClientTransport {
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode> {
        let Some(current) = self.inner.current() else {
            return Err(ZkCode::ConnectionLoss);
        };
        self.inner
            .shell
            .perform(self.perform_on(&current, request))
            .await
    }

    async fn multi(&self, ops: Vec<MultiOp>) -> Result<Vec<MultiOpResult>, MultiError> {
        if self.inner.shell.is_closed() {
            return Err(MultiError::Request(ZkCode::ConnectionLoss));
        }
        let Some(current) = self.inner.current() else {
            return Err(MultiError::Request(ZkCode::ConnectionLoss));
        };
        let client = &current.client;
        let mut state = client.state_watcher();
        let mut writer = client.new_multi_writer();
        for (index, op) in ops.iter().enumerate() {
            let added = match op {
                MultiOp::Check { path, version } => {
                    writer.add_check_version(path, version.unwrap_or(-1))
                }
                MultiOp::Create {
                    path,
                    data,
                    mode,
                    acl,
                } => {
                    let acls = map_acl(acl);
                    writer.add_create(
                        path,
                        data,
                        &map_mode(*mode).with_acls(zkc::Acls::new(&acls)),
                    )
                }
                MultiOp::SetData {
                    path,
                    data,
                    version,
                } => writer.add_set_data(path, data, *version),
                MultiOp::Delete { path, version } => writer.add_delete(path, *version),
            };
            // Refused by the client before sending (a bad path): nothing sent.
            added.map_err(|e| MultiError::Op {
                index,
                code: map_error(e, false),
            })?;
        }
        let committed = tokio::time::timeout(self.inner.shell.op_timeout(), writer.commit()).await;
        let replaced = self.inner.replaced(&current);
        match committed {
            Err(_) => Err(MultiError::Request(ZkCode::OperationTimeout)),
            Ok(Ok(results)) => Ok(results.into_iter().map(map_multi_result).collect()),
            Ok(Err(zkc::MultiWriteError::OperationFailed { index, source })) => {
                Err(MultiError::Op {
                    index,
                    code: map_error(source, false),
                })
            }
            Ok(Err(zkc::MultiWriteError::RequestFailed { source })) => Err(MultiError::Request(
                settle(map_error(source, in_doubt(&mut state)), replaced),
            )),
        }
    }

    async fn close(&self) {
        if !self.inner.shell.close_once() {
            return;
        }
        self.session_task.abort();
        let current = self
            .inner
            .current
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        self.inner.shell.generation.bump();
        if let Some(current) = current {
            let mut state = current.client.state_watcher();
            // The session closes once the last clone of the client is gone.
            drop(current);
            let closed = async {
                while !state.peek_state().is_terminated() {
                    state.changed().await;
                }
            };
            match tokio::time::timeout(CLOSE_TIMEOUT, closed).await {
                Ok(()) => info!("session closed"),
                Err(_) => {
                    warn!("close: the server did not answer; the session will expire on its own")
                }
            }
        }
        self.forwarder.abort();
        self.inner.shell.session(SessionEvent::Closed);
    }
}

impl Drop for ZkClientTransport {
    fn drop(&mut self) {
        // The session task holds the transport's state, client included:
        // stop it, and the client is dropped with the last handle, which
        // closes the session in the background.
        self.session_task.abort();
        self.forwarder.abort();
    }
}

/// `Connected` with the session's negotiated timeout: `Client::session_timeout`
/// is the server's ConnectResponse value (zookeeper-client 0.11 keeps
/// `max(negotiated, its connection timeout)`, and the latter is at most
/// three fifths of the negotiated one), never the requested one.
fn connected(client: &zkc::Client) -> SessionEvent {
    SessionEvent::Connected {
        session_id: Some(SessionId(client.session_id().0)),
        timeout: client.session_timeout(),
    }
}

/// How zookeeper-client's *current* state reads (the shell's [`Reporter`],
/// told that this client's watcher merges states, turns it into session
/// events: a `SyncConnected` read while `Connected` was the last thing
/// reported is a blip the watcher merged, reported as `Disconnected` then
/// `Connected` so the core re-verifies).
///
/// | state | reads as | then |
/// |---|---|---|
/// | `SyncConnected`, `ConnectedReadOnly` | `Connected` | watch |
/// | `Disconnected` | `Disconnected` | watch |
/// | `Expired` | `Expired` | open a new client |
/// | `Closed` (not by us: the client gave up) | `Expired` | open a new client |
/// | `AuthFailed` | `AuthFailed` | stop |
fn client_state(state: zkc::SessionState) -> ClientState {
    use zkc::SessionState as S;
    match state {
        S::SyncConnected | S::ConnectedReadOnly => ClientState::Connected,
        S::Disconnected => ClientState::Disconnected,
        S::Expired | S::Closed => ClientState::Expired,
        S::AuthFailed => ClientState::AuthFailed,
    }
}

/// The session task: follows the current client's state, reports it, and
/// replaces the client after an expiry.
async fn run_session(
    inner: Arc<Inner>,
    opener: Opener,
    mut watcher: zkc::StateWatcher,
    mut connected: SessionEvent,
) {
    let mut reporter = Reporter::new(true);
    // A change between connect and the subscription is not lost: act on
    // the state now unless it is the connected state already reported.
    let mut state = Some(watcher.state()).filter(|s| *s != zkc::SessionState::SyncConnected);
    loop {
        let now = match state.take() {
            Some(now) => now,
            None => watcher.changed().await,
        };
        if inner.shell.is_closed() {
            return;
        }
        let read = client_state(now);
        for event in reporter.map(read, connected) {
            reporter.reported(&event);
            inner.shell.session(event);
        }
        match read {
            ClientState::Connected | ClientState::Disconnected | ClientState::Ignored => {}
            ClientState::AuthFailed | ClientState::Closed => return,
            ClientState::Expired => {
                let Some(client) = renew(&inner, &opener).await else {
                    return;
                };
                watcher = client.state_watcher();
                connected = self::connected(&client);
                {
                    let mut slot = inner
                        .current
                        .write()
                        .unwrap_or_else(PoisonError::into_inner);
                    if inner.shell.is_closed() {
                        return;
                    }
                    inner.shell.generation.bump();
                    let generation = inner.shell.generation.now();
                    *slot = Some(Current { client, generation });
                }
                // Swapped in before it is announced: a request the core
                // sends after `Connected` goes to the new session.
                inner.shell.session(connected);
                reporter.reported(&connected);
                state = Some(watcher.state()).filter(|s| *s != zkc::SessionState::SyncConnected);
            }
        }
    }
}

/// Opens a new client after an expiry, retrying until it works, the
/// credentials are rejected (reported) or the transport is closed.
async fn renew(inner: &Inner, opener: &Opener) -> Option<zkc::Client> {
    let options = &opener.options;
    loop {
        if inner.shell.is_closed() {
            return None;
        }
        let deadline = Instant::now() + options.connect_timeout;
        match opener.start(deadline).await {
            Ok(client) => return Some(client),
            Err(SessionError::Auth(_)) => {
                inner.shell.session(SessionEvent::AuthFailed);
                return None;
            }
            Err(e) => warn!(error = %e, "opening a new session failed; trying again"),
        }
        tokio::time::sleep(options.reconnect_delay).await;
    }
}

/// Maps a client error to the core's code, given whether the connection was
/// in doubt during the request (see [`in_doubt`]).
///
/// The errors the client gives for a connection that timed out or broke
/// (`Custom`, `Timeout`, `UnexpectedError`, and any new variant) are
/// `ConnectionLoss` when the connection was in doubt — the server may have
/// applied the request — and `Other(-1)` otherwise (ZooKeeper's
/// `SystemError`; the core retries it).
pub(crate) fn map_error(e: zkc::Error, in_doubt: bool) -> ZkCode {
    use zkc::Error as E;
    let unexplained = if in_doubt {
        ZkCode::ConnectionLoss
    } else {
        ZkCode::Other(-1)
    };
    match e {
        // A reply that could not be read, a client that is gone: the
        // request may have been applied.
        E::ConnectionLoss | E::UnmarshalError { .. } | E::NoHosts | E::ClientClosed => {
            ZkCode::ConnectionLoss
        }
        E::SessionExpired => ZkCode::SessionExpired,
        E::SessionMoved => ZkCode::SessionMoved,
        E::NoNode => ZkCode::NoNode,
        E::NodeExists => ZkCode::NodeExists,
        E::NotEmpty => ZkCode::NotEmpty,
        E::BadVersion => ZkCode::BadVersion,
        E::NoAuth => ZkCode::NoAuth,
        E::AuthFailed => ZkCode::AuthFailed,
        E::InvalidAcl => ZkCode::InvalidAcl,
        E::BadArguments(_) => ZkCode::BadArguments,
        E::NoChildrenForEphemerals => ZkCode::NoChildrenForEphemerals,
        E::Unimplemented => ZkCode::Unimplemented,
        // The server's codes for these.
        E::MarshallingError => ZkCode::Other(-5),
        E::RuntimeInconsistent => ZkCode::Other(-2),
        E::NotReadOnly => ZkCode::Other(-119),
        E::NoWatcher => ZkCode::Other(-121),
        E::ReconfigDisabled => ZkCode::Other(-123),
        E::QuotaExceeded => ZkCode::Other(-125),
        E::Throttled => ZkCode::Other(-127),
        E::UnexpectedErrorCode(code) => ZkCode::Other(code),
        E::Timeout | E::UnexpectedError(_) | E::Custom(_) => unexplained,
        _ => unexplained,
    }
}

/// Maps a fired watch; session notices (expiry, close) map to nothing.
pub(crate) fn map_watch(e: &zkc::WatchedEvent) -> Option<WatchEvent> {
    use zkc::EventType as T;
    let kind = match e.event_type {
        T::NodeCreated => WatchKind::NodeCreated,
        T::NodeDeleted => WatchKind::NodeDeleted,
        T::NodeDataChanged => WatchKind::NodeDataChanged,
        T::NodeChildrenChanged => WatchKind::NodeChildrenChanged,
        T::Session => return None,
    };
    Some(WatchEvent {
        kind,
        path: e.path.clone(),
    })
}

fn map_multi_result(result: zkc::MultiWriteResult) -> MultiOpResult {
    match result {
        zkc::MultiWriteResult::Check => MultiOpResult::Checked,
        zkc::MultiWriteResult::Create { path, .. } => MultiOpResult::Created { path },
        zkc::MultiWriteResult::SetData { stat } => MultiOpResult::DataSet(map_stat(&stat)),
        zkc::MultiWriteResult::Delete => MultiOpResult::Deleted,
        // Non-exhaustive upstream; every kind this transport sends is above.
        _ => MultiOpResult::Checked,
    }
}

fn map_stat(s: &zkc::Stat) -> Stat {
    crate::shell::stat_of!(s)
}

/// Maps the core's ACL onto the client's entries (the client borrows them:
/// `zkc::Acls::new(&list)`).
pub(crate) fn map_acl(acl: &Acl) -> Vec<zkc::Acl> {
    acl.entries()
        .iter()
        .map(|e| {
            let perms = [
                (Perms::READ, zkc::Permission::READ),
                (Perms::WRITE, zkc::Permission::WRITE),
                (Perms::CREATE, zkc::Permission::CREATE),
                (Perms::DELETE, zkc::Permission::DELETE),
                (Perms::ADMIN, zkc::Permission::ADMIN),
            ]
            .into_iter()
            .filter(|(ours, _)| e.perms().contains(*ours))
            .fold(zkc::Permission::NONE, |all, (_, theirs)| all | theirs);
            zkc::Acl::new(perms, zkc::AuthId::new(e.scheme().as_str(), e.id()))
        })
        .collect()
}

/// Maps the core's create mode; containers are real containers here.
pub(crate) fn map_mode(mode: CreateMode) -> zkc::CreateMode {
    match mode {
        CreateMode::Persistent => zkc::CreateMode::Persistent,
        CreateMode::Ephemeral => zkc::CreateMode::Ephemeral,
        CreateMode::PersistentSequential => zkc::CreateMode::PersistentSequential,
        CreateMode::EphemeralSequential => zkc::CreateMode::EphemeralSequential,
        CreateMode::Container => zkc::CreateMode::Container,
    }
}

impl ZkClientOptions {
    /// Checks the settings as [`ZkClientTransport::connect`] does before
    /// any traffic (it calls this first): the timeouts and delays within
    /// their bounds, the connect string and its chroot well formed. A typed
    /// error for anything else, never a panic. (TLS settings are read when
    /// connecting: they name files.)
    ///
    /// ```
    /// use zkelect::zk_client::ZkClientOptions;
    /// assert!(ZkClientOptions::new("tcp+tls://[::1]:2281/apps").validate().is_ok());
    /// assert!(ZkClientOptions::new("zk1:0").validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<(), SessionError> {
        self.check(Duration::ZERO).map(drop)
    }
}

impl crate::Connect for ZkClientOptions {
    fn connect(self: Box<Self>) -> crate::Connecting {
        Box::pin(async move {
            let (transport, events) = ZkClientTransport::connect(*self).await?;
            Ok((Arc::new(transport) as Arc<dyn Transport>, events))
        })
    }
}

/// The pre-flight TLS handshake: the client only logs a rejected
/// certificate and retries until its timeout, so one handshake per TLS host
/// (blocking, with rustls directly and the same trust settings) finds out
/// first. The first host that completes a handshake ends the check; if none
/// does and at least one rejected the certificate, that verdict is the
/// error. Hosts that cannot be reached are left to the client.
#[cfg(feature = "zookeeper-client-tls")]
mod preflight {
    use std::io;
    use std::net::{TcpStream, ToSocketAddrs};
    use std::sync::Arc;
    use std::time::Duration;

    use rustls::pki_types::ServerName;
    use rustls::{ClientConfig, ClientConnection, RootCertStore};
    use tokio::time::Instant;
    use tracing::debug;

    use crate::error::{SessionError, TlsError};

    /// One `host:port` of a connect string, and whether it uses TLS.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(super) struct Endpoint {
        pub(super) host: String,
        pub(super) port: u16,
        pub(super) tls: bool,
    }

    impl Endpoint {
        fn label(&self) -> String {
            if self.host.contains(':') {
                format!("[{}]:{}", self.host, self.port)
            } else {
                format!("{}:{}", self.host, self.port)
            }
        }
    }

    /// Parses a connect string as the client does: hosts separated by
    /// commas, an optional `tcp://` or `tcp+tls://` prefix each, port 2181
    /// by default, `[v6]:port`, a chroot after the last host.
    pub(super) fn endpoints(hosts: &str, tls_default: bool) -> Result<Vec<Endpoint>, String> {
        let mut out = Vec::new();
        let count = hosts.split(',').count();
        for (i, item) in hosts.split(',').enumerate() {
            let (item, tls) = if let Some(rest) = item.strip_prefix("tcp://") {
                (rest, false)
            } else if let Some(rest) = item.strip_prefix("tcp+tls://") {
                (rest, true)
            } else {
                (item, tls_default)
            };
            let item = match item.find('/') {
                Some(slash) if i + 1 == count => &item[..slash],
                Some(_) => {
                    return Err(format!("a chroot may only follow the last host: {hosts:?}"))
                }
                None => item,
            };
            let (host, port) = if let Some(rest) = item.strip_prefix('[') {
                let (host, rest) = rest
                    .split_once(']')
                    .ok_or_else(|| format!("unclosed '[' in {item:?}"))?;
                match rest {
                    "" => (host, None),
                    _ => match rest.strip_prefix(':') {
                        Some(port) => (host, Some(port)),
                        None => return Err(format!("bad address {item:?}")),
                    },
                }
            } else {
                match item.rsplit_once(':') {
                    Some((host, port)) => (host, Some(port)),
                    None => (item, None),
                }
            };
            if host.is_empty() {
                return Err(format!("empty host in {hosts:?}"));
            }
            let port = match port {
                None | Some("") => 2181,
                Some(port) => match port.parse::<u16>() {
                    Ok(p) if p != 0 => p,
                    _ => return Err(format!("bad port {port:?} in {item:?}")),
                },
            };
            out.push(Endpoint {
                host: host.to_owned(),
                port,
                tls,
            });
        }
        Ok(out)
    }

    /// The rustls configuration of the check: the same roots (and CRLs)
    /// and client identity as the client's.
    pub(super) fn client_config(
        ca_pem: &str,
        identity: Option<&(String, String)>,
    ) -> Result<Arc<ClientConfig>, TlsError> {
        let config = |what: &str, reason: String| TlsError::Config {
            what: what.to_owned(),
            reason,
        };
        let mut roots = RootCertStore::empty();
        let mut crls = Vec::new();
        for item in rustls_pemfile::read_all(&mut ca_pem.as_bytes()) {
            match item {
                Ok(rustls_pemfile::Item::X509Certificate(cert)) => roots
                    .add(cert)
                    .map_err(|e| config("CA certificate", e.to_string()))?,
                Ok(rustls_pemfile::Item::Crl(crl)) => crls.push(crl),
                Ok(_) => {}
                Err(e) => return Err(config("CA", e.to_string())),
            }
        }
        if roots.is_empty() {
            return Err(config("CA", "no certificate in the PEM".into()));
        }
        let verifier = rustls::client::WebPkiServerVerifier::builder(Arc::new(roots))
            .with_crls(crls)
            .build()
            .map_err(|e| config("CA", e.to_string()))?;
        let builder = ClientConfig::builder().with_webpki_verifier(verifier);
        let config_done = match identity {
            None => builder.with_no_client_auth(),
            Some((cert_pem, key_pem)) => {
                let certs = rustls_pemfile::certs(&mut cert_pem.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| config("client certificate", e.to_string()))?;
                if certs.is_empty() {
                    return Err(config(
                        "client certificate",
                        "no certificate in the PEM".into(),
                    ));
                }
                let key = rustls_pemfile::private_key(&mut key_pem.as_bytes())
                    .map_err(|e| config("client key", e.to_string()))?
                    .ok_or_else(|| config("client key", "no private key in the PEM".into()))?;
                builder
                    .with_client_auth_cert(certs, key)
                    .map_err(|e| config("client certificate and key", e.to_string()))?
            }
        };
        Ok(Arc::new(config_done))
    }

    /// Whether the TLS server `host:port` completes a handshake by
    /// `deadline`: the liveness ask of a TLS server (a frozen server does
    /// not complete one; a plain ConnectRequest would not reach it).
    pub(crate) async fn alive(
        host: String,
        port: u16,
        config: Arc<ClientConfig>,
        deadline: Instant,
    ) -> crate::startup::Answer {
        use zkelect_core::startup::AskFailure;
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(name) = ServerName::try_from(host.clone()) else {
            return Err(AskFailure::Broken(format!(
                "{host:?} is not a TLS server name"
            )));
        };
        if left.is_zero() {
            return Err(AskFailure::Silent);
        }
        let endpoint = Endpoint {
            host,
            port,
            tls: true,
        };
        let outcome = tokio::task::spawn_blocking(move || handshake(&endpoint, name, config, left))
            .await
            .unwrap_or_else(|e| Outcome::Unreachable(e.to_string()));
        match outcome {
            Outcome::Done => Ok(None),
            Outcome::Unreachable(reason) if reason.contains("refused") => {
                Err(AskFailure::Refused(reason))
            }
            Outcome::Unreachable(reason)
                if reason.contains("timed out") || reason.contains("temporarily unavailable") =>
            {
                Err(AskFailure::Silent)
            }
            Outcome::Unreachable(reason) => Err(AskFailure::Broken(reason)),
            Outcome::Refused(e) => Err(AskFailure::Broken(e.to_string())),
        }
    }

    /// How one handshake went.
    #[derive(Debug)]
    enum Outcome {
        Done,
        Unreachable(String),
        Refused(TlsError),
    }

    /// Runs the check (see the module docs) until `deadline`.
    pub(super) async fn check(
        hosts: &str,
        config: Arc<ClientConfig>,
        deadline: Instant,
    ) -> Result<(), SessionError> {
        let endpoints = endpoints(hosts, true).map_err(|reason| SessionError::Connect {
            hosts: hosts.to_owned(),
            kind: crate::ConnectFailure::BadAddress,
            reason,
        })?;
        let mut refused = None;
        for endpoint in endpoints.into_iter().filter(|e| e.tls) {
            let name = ServerName::try_from(endpoint.host.clone()).map_err(|e| {
                SessionError::Tls(TlsError::Config {
                    what: format!("host {:?}", endpoint.host),
                    reason: format!("not a name a certificate can be checked against: {e}"),
                })
            })?;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let config = Arc::clone(&config);
            let probe = endpoint.clone();
            let outcome =
                tokio::task::spawn_blocking(move || handshake(&probe, name, config, left))
                    .await
                    .unwrap_or_else(|e| Outcome::Unreachable(e.to_string()));
            match outcome {
                Outcome::Done => return Ok(()),
                Outcome::Unreachable(reason) => {
                    debug!(
                        host = endpoint.label(),
                        reason, "TLS pre-flight: unreachable"
                    );
                }
                Outcome::Refused(e) => {
                    debug!(host = endpoint.label(), error = %e, "TLS pre-flight: refused");
                    refused.get_or_insert(e);
                }
            }
        }
        match refused {
            Some(e) => Err(SessionError::Tls(e)),
            None => Ok(()),
        }
    }

    fn handshake(
        endpoint: &Endpoint,
        name: ServerName<'static>,
        config: Arc<ClientConfig>,
        timeout: Duration,
    ) -> Outcome {
        let label = endpoint.label();
        let addrs = match (endpoint.host.as_str(), endpoint.port).to_socket_addrs() {
            Ok(addrs) => addrs.collect::<Vec<_>>(),
            Err(e) => return Outcome::Unreachable(e.to_string()),
        };
        let mut stream = None;
        let mut last = String::from("no address");
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, timeout) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = e.to_string(),
            }
        }
        let Some(mut stream) = stream else {
            return Outcome::Unreachable(last);
        };
        if stream.set_read_timeout(Some(timeout)).is_err()
            || stream.set_write_timeout(Some(timeout)).is_err()
        {
            return Outcome::Unreachable("cannot set socket timeouts".into());
        }
        let mut conn = match ClientConnection::new(config, name) {
            Ok(conn) => conn,
            Err(e) => {
                return Outcome::Refused(TlsError::Handshake {
                    host: label,
                    reason: e.to_string(),
                })
            }
        };
        while conn.is_handshaking() {
            if let Err(e) = conn.complete_io(&mut stream) {
                return classify(label, &e);
            }
        }
        // Send our last flight (and a close) so the server does not log a reset.
        conn.send_close_notify();
        let _ = conn.complete_io(&mut stream);
        Outcome::Done
    }

    fn classify(host: String, e: &io::Error) -> Outcome {
        match e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            Some(rustls::Error::InvalidCertificate(reason)) => {
                Outcome::Refused(TlsError::Rejected {
                    host,
                    reason: format!("{reason:?}"),
                })
            }
            Some(other) => Outcome::Refused(TlsError::Handshake {
                host,
                reason: other.to_string(),
            }),
            None => Outcome::Unreachable(e.to_string()),
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn ep(host: &str, port: u16, tls: bool) -> Endpoint {
            Endpoint {
                host: host.into(),
                port,
                tls,
            }
        }

        #[test]
        fn connect_strings_parse_like_the_client_does() {
            assert_eq!(
                endpoints("a:1,tcp://b,tcp+tls://[::1]:3/chroot/x", true),
                Ok(vec![
                    ep("a", 1, true),
                    ep("b", 2181, false),
                    ep("::1", 3, true)
                ])
            );
            assert_eq!(
                endpoints("a:1,b:2", false),
                Ok(vec![ep("a", 1, false), ep("b", 2, false)])
            );
            for bad in ["a:0", "a:x", ":1", "a/x,b", "[::1", "[::1]x", "a:1,"] {
                assert!(endpoints(bad, true).is_err(), "{bad:?}");
            }
        }

        #[test]
        fn unusable_ca_and_keys_are_config_errors() {
            for (ca, identity) in [
                ("", None),
                ("not a pem", None),
                (
                    "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                    None,
                ),
            ] {
                let result = client_config(ca, identity);
                assert!(
                    matches!(result, Err(TlsError::Config { .. })),
                    "{ca:?}: {result:?}"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(4);

    fn connected() -> SessionEvent {
        SessionEvent::Connected {
            session_id: Some(SessionId(0x42)),
            timeout: T,
        }
    }

    #[test]
    fn a_sequence_of_states_reads_as_the_core_needs_it() {
        use zkc::SessionState as S;
        let c = connected();
        let mut reported = Vec::new();
        let mut reporter = Reporter::new(true);
        let mut renewals = 0;
        // A drop and its recovery; a drop and recovery the watcher merged
        // into one change to SyncConnected; an expiry; a client that gave up.
        for state in [
            S::Disconnected,
            S::SyncConnected,
            S::SyncConnected,
            S::Disconnected,
            S::Expired,
            S::Closed,
        ] {
            let read = client_state(state);
            for e in reporter.map(read, c) {
                reporter.reported(&e);
                reported.push(e);
            }
            if read == ClientState::Expired {
                renewals += 1;
                reporter.reported(&c);
            }
        }
        assert_eq!(
            reported,
            [
                SessionEvent::Disconnected,
                c,
                SessionEvent::Disconnected,
                c,
                SessionEvent::Disconnected,
                SessionEvent::Expired,
                SessionEvent::Expired,
            ]
        );
        assert_eq!(renewals, 2);
        assert_eq!(client_state(S::AuthFailed), ClientState::AuthFailed);
    }

    #[test]
    fn connection_timeouts_are_connection_loss_only_when_in_doubt() {
        let custom = || {
            // `Error::Custom` cannot be built outside the crate; the other
            // two unexplained errors stand for it (they share one arm).
            [
                zkc::Error::Timeout,
                zkc::Error::UnexpectedError("no response from connection in 800ms".into()),
            ]
        };
        for e in custom() {
            assert_eq!(map_error(e.clone(), true), ZkCode::ConnectionLoss, "{e:?}");
            assert_eq!(map_error(e.clone(), false), ZkCode::Other(-1), "{e:?}");
            assert!(map_error(e, true).is_connection_fault());
        }
        // Plain codes do not depend on the connection.
        let table = [
            (zkc::Error::ConnectionLoss, ZkCode::ConnectionLoss),
            (zkc::Error::ClientClosed, ZkCode::ConnectionLoss),
            (zkc::Error::SessionExpired, ZkCode::SessionExpired),
            (zkc::Error::SessionMoved, ZkCode::SessionMoved),
            (zkc::Error::NoNode, ZkCode::NoNode),
            (zkc::Error::NodeExists, ZkCode::NodeExists),
            (zkc::Error::NotEmpty, ZkCode::NotEmpty),
            (zkc::Error::BadVersion, ZkCode::BadVersion),
            (zkc::Error::NoAuth, ZkCode::NoAuth),
            (zkc::Error::AuthFailed, ZkCode::AuthFailed),
            (zkc::Error::InvalidAcl, ZkCode::InvalidAcl),
            (zkc::Error::BadArguments(&"bad path"), ZkCode::BadArguments),
            (
                zkc::Error::NoChildrenForEphemerals,
                ZkCode::NoChildrenForEphemerals,
            ),
            (zkc::Error::Unimplemented, ZkCode::Unimplemented),
            (zkc::Error::Throttled, ZkCode::Other(-127)),
            (zkc::Error::UnexpectedErrorCode(-42), ZkCode::Other(-42)),
        ];
        for (from, to) in table {
            for doubt in [false, true] {
                assert_eq!(
                    map_error(from.clone(), doubt),
                    to,
                    "{from:?}, in doubt: {doubt}"
                );
            }
        }
        for e in [
            zkc::Error::NoAuth,
            zkc::Error::AuthFailed,
            zkc::Error::InvalidAcl,
            zkc::Error::BadArguments(&"x"),
        ] {
            assert!(map_error(e.clone(), true).is_fatal(), "{e:?} is fatal");
        }
    }

    #[test]
    fn an_expiry_answer_from_a_replaced_client_is_only_a_lost_request() {
        assert_eq!(settle(ZkCode::SessionExpired, true), ZkCode::ConnectionLoss);
        assert_eq!(
            settle(ZkCode::SessionExpired, false),
            ZkCode::SessionExpired
        );
        assert_eq!(settle(ZkCode::NoNode, true), ZkCode::NoNode);
    }

    #[test]
    fn acls_and_modes_map() {
        assert_eq!(map_acl(&Acl::Open).len(), 1);
        assert_eq!(map_acl(&Acl::CreatorAll).len(), 1);
        let both = map_acl(&Acl::CreatorAllWorldRead);
        assert_eq!(both.len(), 2);
        assert_eq!(both[0].scheme(), "auth");
        assert_eq!(both[0].permission(), zkc::Permission::ALL);
        assert_eq!((both[1].scheme(), both[1].id()), ("world", "anyone"));
        assert_eq!(both[1].permission(), zkc::Permission::READ);
        assert_eq!(map_mode(CreateMode::Container), zkc::CreateMode::Container);
        assert_eq!(
            map_mode(CreateMode::EphemeralSequential),
            zkc::CreateMode::EphemeralSequential
        );
    }

    #[tokio::test]
    async fn bad_settings_are_refused_before_any_traffic() {
        let zero = ZkClientOptions::new("127.0.0.1:1").session_timeout(Duration::ZERO);
        assert!(matches!(
            ZkClientTransport::connect(zero).await,
            Err(SessionError::SessionTimeoutTooShort { .. })
        ));
        let empty = ZkClientOptions::new("  ");
        assert!(matches!(
            ZkClientTransport::connect(empty).await,
            Err(SessionError::Connect { .. })
        ));
    }

    #[tokio::test]
    async fn an_unreachable_server_is_a_connect_error() {
        // Nothing listens on port 1.
        let options = ZkClientOptions::new("127.0.0.1:1")
            .session_timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_millis(500));
        let result = ZkClientTransport::connect(options).await;
        assert!(
            matches!(result, Err(SessionError::Connect { .. })),
            "{result:?}"
        );
    }
}
