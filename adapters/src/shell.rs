//! The shell both real transports share: their settings
//! ([`SessionOptions`]), the bound on every request ([`Shell::perform`]),
//! the guard that tells a request its client connection changed under it
//! ([`ConnectionChanges`]), and the one mapping of a client's states to the core's
//! session events ([`Reporter`]). Each transport file keeps only what its
//! client needs: how its states read as [`ClientState`]s, its requests, and
//! its defect table.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tracing::info;
use zkelect_core::connect_string::ConnectString;
use zkelect_core::{ConfigError, SessionEvent, ZkCode};

use crate::error::{ConnectFailure, SessionError};
use crate::transport::TransportEvent;

/// The core's `Stat` from a client's, whose fields have the same names.
macro_rules! stat_of {
    ($s:expr) => {
        zkelect_core::Stat {
            czxid: $s.czxid,
            mzxid: $s.mzxid,
            pzxid: $s.pzxid,
            version: $s.version,
            cversion: $s.cversion,
            ephemeral_owner: $s.ephemeral_owner,
            data_length: $s.data_length,
            num_children: $s.num_children,
        }
    };
}
pub(crate) use stat_of;

/// The core's permission bits as a client library's `Permission` flags:
/// both clients name their flags alike, so one mapping serves both.
macro_rules! permission_of {
    ($perms:expr, $permission:ty) => {
        [
            (zkelect_core::Perms::READ, <$permission>::READ),
            (zkelect_core::Perms::WRITE, <$permission>::WRITE),
            (zkelect_core::Perms::CREATE, <$permission>::CREATE),
            (zkelect_core::Perms::DELETE, <$permission>::DELETE),
            (zkelect_core::Perms::ADMIN, <$permission>::ADMIN),
        ]
        .into_iter()
        .filter(|(ours, _)| $perms.contains(*ours))
        .fold(<$permission>::NONE, |all, (_, theirs)| all | theirs)
    };
}
pub(crate) use permission_of;

/// How long closing the session may take before it is left to expire.
pub(crate) const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// The longest connect timeout (and request bound) accepted: an hour. Longer
/// is a typo (`--connect-timeout 18446744073709551615`), and a deadline that
/// far off overflows the clock.
pub const CONNECT_TIMEOUT_MAX: Duration = Duration::from_secs(3_600);

/// The longest session timeout accepted: what a ConnectRequest's 32-bit
/// field can carry (a server clamps it to its `maxSessionTimeout` anyway).
pub const SESSION_TIMEOUT_MAX: Duration = Duration::from_millis(i32::MAX as u64);

/// The longest pause between reconnection attempts accepted: a minute.
pub const RECONNECT_DELAY_MAX: Duration = Duration::from_secs(60);

/// How to reach the servers: what both real transports need, plus the
/// client's own settings in `client` — [`ZkAsyncOptions`](zk_async/type.ZkAsyncOptions.html)
/// is `SessionOptions<ZkAsyncExtras>`,
/// [`ZkClientOptions`](crate::ZkClientOptions) is
/// `SessionOptions<ZkClientExtras>`.
///
/// ```
/// use std::time::Duration;
/// use zkelect::ZkAsyncOptions;
///
/// let options = ZkAsyncOptions::new("zk1:2181,zk2:2181,zk3:2181/chroot")
///     .session_timeout(Duration::from_secs(6))
///     .connect_timeout(Duration::from_secs(5))
///     .digest("svc:secret");
/// assert_eq!(options.auth[0].0, "digest");
/// assert!(!format!("{options:?}").contains("secret"));
/// ```
#[derive(Clone)]
pub struct SessionOptions<C> {
    /// `host:port[,host:port…][/chroot]`, tried in order.
    pub hosts: String,
    /// Requested session timeout (default 10 s). The servers may negotiate
    /// it into their `[minSessionTimeout, maxSessionTimeout]`; the core is
    /// told the negotiated value, never the requested one.
    pub session_timeout: Duration,
    /// Bound on the whole set-up: reaching a server, the session, the
    /// credentials (default 10 s).
    pub connect_timeout: Duration,
    /// Bound on each request (default: the negotiated session timeout). A
    /// request that takes longer answers `OperationTimeout`: the session
    /// decides it and answers so itself ([`Transport::request_timeout`](crate::Transport::request_timeout)),
    /// where the simulator runs the same rule.
    pub op_timeout: Option<Duration>,
    /// Credentials as `(scheme, bytes)`, e.g. `("digest", b"user:pass")`,
    /// added at connect and again after every reconnect.
    pub auth: Vec<(String, Vec<u8>)>,
    /// Pause between attempts to reach a server, or to open a new session
    /// after an expiry (default 200 ms).
    pub reconnect_delay: Duration,
    /// The client's own settings.
    pub client: C,
}

impl<C: std::fmt::Debug> std::fmt::Debug for SessionOptions<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print credentials.
        let schemes: Vec<&str> = self.auth.iter().map(|(s, _)| s.as_str()).collect();
        f.debug_struct("SessionOptions")
            .field("hosts", &self.hosts)
            .field("session_timeout", &self.session_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("op_timeout", &self.op_timeout)
            .field("auth_schemes", &schemes)
            .field("reconnect_delay", &self.reconnect_delay)
            .field("client", &self.client)
            .finish()
    }
}

impl<C: Default> SessionOptions<C> {
    /// Defaults for `hosts`.
    pub fn new(hosts: impl Into<String>) -> Self {
        Self {
            hosts: hosts.into(),
            session_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            op_timeout: None,
            auth: Vec::new(),
            reconnect_delay: Duration::from_millis(200),
            client: C::default(),
        }
    }
}

impl<C> SessionOptions<C> {
    /// Adds digest credentials, `user:password`.
    #[must_use]
    pub fn digest(self, user_password: impl Into<String>) -> Self {
        self.auth("digest", user_password.into().into_bytes())
    }

    /// Adds credentials of any scheme.
    #[must_use]
    pub fn auth(mut self, scheme: impl Into<String>, credentials: impl Into<Vec<u8>>) -> Self {
        self.auth.push((scheme.into(), credentials.into()));
        self
    }

    /// The requested session timeout.
    #[must_use]
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// The bound on the whole set-up.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The bound on each request.
    #[must_use]
    pub fn op_timeout(mut self, timeout: Duration) -> Self {
        self.op_timeout = Some(timeout);
        self
    }

    /// The pause between attempts to reach a server or open a new session.
    #[must_use]
    pub fn reconnect_delay(mut self, delay: Duration) -> Self {
        self.reconnect_delay = delay;
        self
    }

    /// Checks every setting before any traffic and returns the split
    /// connect string. Refused: a requested session timeout below `min` or
    /// above [`SESSION_TIMEOUT_MAX`] ([`SessionError::SessionTimeoutTooShort`],
    /// [`SessionError::Config`]), a connect timeout, request bound or
    /// reconnect delay that is zero or absurd ([`SessionError::Config`]), a
    /// connect string no client could use ([`SessionError::Connect`] with
    /// [`ConnectFailure::BadAddress`]), a chroot the server would refuse
    /// ([`SessionError::Config`]).
    pub(crate) fn check(&self, min: Duration) -> Result<ConnectString, SessionError> {
        if self.session_timeout < min || self.session_timeout.is_zero() {
            // A zero timeout would make a client silently use its own default.
            return Err(SessionError::SessionTimeoutTooShort {
                requested: self.session_timeout,
                min: min.max(Duration::from_millis(1)),
            });
        }
        let over = |name, value: Duration, max: Duration, reason| {
            if value > max {
                Err(SessionError::Config(ConfigError::InvalidDuration {
                    name,
                    reason,
                }))
            } else {
                Ok(())
            }
        };
        over(
            "session timeout",
            self.session_timeout,
            SESSION_TIMEOUT_MAX,
            "longer than a ConnectRequest can carry (2^31 - 1 ms)",
        )?;
        for (name, value, max, reason) in [
            (
                "connect timeout",
                self.connect_timeout,
                CONNECT_TIMEOUT_MAX,
                "must be between 1 ms and 1 hour",
            ),
            (
                "request timeout",
                self.op_timeout.unwrap_or(Duration::from_secs(1)),
                CONNECT_TIMEOUT_MAX,
                "must be between 1 ms and 1 hour",
            ),
            (
                "reconnect delay",
                self.reconnect_delay,
                RECONNECT_DELAY_MAX,
                "must be between 1 ms and 1 minute",
            ),
        ] {
            if value.is_zero() {
                return Err(SessionError::Config(ConfigError::InvalidDuration {
                    name,
                    reason,
                }));
            }
            over(name, value, max, reason)?;
        }
        ConnectString::parse(&self.hosts).map_err(|e| match e {
            ConfigError::InvalidConnect { reason, .. } => self.fail(
                ConnectFailure::BadAddress,
                format!("{reason}: expected host:port[,host:port…][/chroot]"),
            ),
            other => SessionError::Config(other),
        })
    }

    pub(crate) fn fail(&self, kind: ConnectFailure, reason: impl Into<String>) -> SessionError {
        SessionError::Connect {
            hosts: self.hosts.clone(),
            kind,
            reason: reason.into(),
        }
    }

    /// The credentials' schemes, for messages (`digest+ip`).
    pub(crate) fn schemes(&self) -> String {
        self.auth
            .iter()
            .map(|(s, _)| s.as_str())
            .collect::<Vec<_>>()
            .join("+")
    }

    /// The rejection of this session's credentials.
    pub(crate) fn rejected(&self) -> SessionError {
        SessionError::Auth(format!(
            "the server rejected the {} credentials",
            self.schemes()
        ))
    }

    /// The bound on each request: as set, or the negotiated session timeout
    /// (never the requested one, which the server may have cut).
    pub(crate) fn op_timeout_or(&self, negotiated: Duration) -> Duration {
        self.op_timeout.unwrap_or(negotiated)
    }
}

/// The changes of this transport's client connection, as the transport
/// itself sees them, so that a request can tell that its connection changed
/// under it: a watch it set may be gone with the old connection, a `NoAuth`
/// or `SessionExpired` it got may be meant for another connection or a
/// replaced client. It is not a count of the session's connection spans:
/// the core's `Session` keeps that one, from the session events it is given,
/// and this value never leaves the transport.
///
/// Why the transport keeps this guard rather than leaving the judgement to
/// the core: the core sees a client's state changes only after they pass a
/// task of the transport (the session task or pump, which also holds
/// `Connected` back while it re-checks the timeout and replays credentials),
/// and it sees each answer after the request's own future resumes, on
/// another task. Neither order is the client's: an answer received on the
/// new connection can reach the core before the `Disconnected` of the old
/// one, and zookeeper-client's state watcher keeps only the latest state, so
/// a blip can reach its reader late or as one change. A reply tagged with
/// the core's span would therefore be judged against a span the client left
/// long ago (a `NoAuth` from a connection whose credentials are not replayed
/// yet would end the session for good). Only the transport can read the
/// client's own state before and after a request (zookeeper-async's listener
/// runs on the client's I/O task, before anything it reads on the new
/// connection); the request then answers `ConnectionLoss`, a fault the core
/// already retries, and the core never needs to know why.
#[derive(Debug, Default)]
pub(crate) struct ConnectionChanges(AtomicU64);

/// A reading of [`ConnectionChanges`], taken before a request (or when a
/// client is swapped in) to ask afterwards whether the connection changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChangeMark(u64);

impl ConnectionChanges {
    /// Where the changes stand now, to compare after a request.
    pub(crate) fn mark(&self) -> ChangeMark {
        ChangeMark(self.0.load(Ordering::SeqCst))
    }

    /// The connection changed (a new one, or none) from here on.
    pub(crate) fn record(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    /// Whether the connection changed since `before`.
    pub(crate) fn changed_since(&self, before: ChangeMark) -> bool {
        self.mark() != before
    }

    /// How many changes there have been, for tests.
    #[cfg(test)]
    pub(crate) fn recorded(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// What a transport and its tasks share whatever the client: the event
/// stream, the closed flag, the request bound and the connection changes.
#[derive(Debug)]
pub(crate) struct Shell {
    events: mpsc::UnboundedSender<TransportEvent>,
    closed: AtomicBool,
    /// The bound in force at set-up (as set, or the negotiated timeout):
    /// a multi's commit and zookeeper-async's credential replay wait no
    /// longer than this.
    op_timeout: Duration,
    /// The bound as the user set it, for the session to keep.
    configured: Option<Duration>,
    pub(crate) connection_changes: ConnectionChanges,
}

impl Shell {
    pub(crate) fn new(
        events: mpsc::UnboundedSender<TransportEvent>,
        op_timeout: Duration,
        configured: Option<Duration>,
    ) -> Self {
        Self {
            events,
            closed: AtomicBool::new(false),
            op_timeout,
            configured,
            connection_changes: ConnectionChanges::default(),
        }
    }

    /// The request bound the user set, for [`Transport::request_timeout`](crate::Transport::request_timeout).
    pub(crate) fn configured_timeout(&self) -> Option<Duration> {
        self.configured
    }

    /// The bound in force at set-up: zookeeper-client's commit of a multi,
    /// zookeeper-async's credential replay and its request gate.
    pub(crate) fn op_timeout(&self) -> Duration {
        self.op_timeout
    }

    /// Runs one request under the transport's contract: refused with
    /// `ConnectionLoss` once closed. Its time is not bounded here: the
    /// session answers a request out past its bound itself, and drops the
    /// answer that comes after (a timer per request here cost the pump a
    /// tenth of its time in a burst of starts).
    pub(crate) async fn perform<T>(
        &self,
        work: impl Future<Output = Result<T, ZkCode>>,
    ) -> Result<T, ZkCode> {
        if self.is_closed() {
            return Err(ZkCode::ConnectionLoss);
        }
        work.await
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Marks the transport closed; true only for the first caller, so
    /// `close` is idempotent.
    pub(crate) fn close_once(&self) -> bool {
        !self.closed.swap(true, Ordering::SeqCst)
    }

    /// Reports a session event.
    pub(crate) fn session(&self, event: SessionEvent) {
        info!(?event, "session");
        let _ = self.events.send(TransportEvent::Session(event));
    }

    /// Reports a fired watch (zookeeper-async's watcher callback;
    /// zookeeper-client's watches go through `events`).
    #[cfg(feature = "zookeeper-async")]
    pub(crate) fn watch(&self, event: zkelect_core::WatchEvent) {
        let _ = self.events.send(TransportEvent::Watch(event));
    }

    /// A sender into the event stream, for tasks that outlive a borrow.
    #[cfg(feature = "zookeeper-client")]
    pub(crate) fn events(&self) -> mpsc::UnboundedSender<TransportEvent> {
        self.events.clone()
    }
}

/// A client's connection state, as each transport reads its client's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientState {
    /// Connected (read-only included).
    Connected,
    /// Looking for a server; the session may still be alive.
    Disconnected,
    /// The session is gone.
    Expired,
    /// The server rejected the credentials.
    AuthFailed,
    /// Closed by us. (Only zookeeper-async's states map to it and to
    /// `Ignored`; zookeeper-client's watcher reports neither.)
    #[cfg_attr(not(feature = "zookeeper-async"), allow(dead_code))]
    Closed,
    /// Says nothing the core needs.
    #[cfg_attr(not(feature = "zookeeper-async"), allow(dead_code))]
    Ignored,
}

/// Turns a client's states into the core's session events, remembering
/// whether `Connected` was the last thing reported.
///
/// | state | after `Connected` | otherwise |
/// |---|---|---|
/// | `Connected` | nothing; `Disconnected`, `Connected` if the client's watcher merges states (a blip it hid) | `Connected` |
/// | `Disconnected` | `Disconnected` | nothing |
/// | `Expired` | `Expired` | `Expired` |
/// | `AuthFailed` | `AuthFailed` | `AuthFailed` |
/// | `Closed` | `Closed` | `Closed` |
/// | `Ignored` | nothing | nothing |
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reporter {
    was_connected: bool,
    merges: bool,
}

impl Reporter {
    /// After the `Connected` that `connect` reports; `merges` says whether
    /// the client's watcher keeps only the latest state (zookeeper-client)
    /// rather than every transition (zookeeper-async's listener).
    pub(crate) fn new(merges: bool) -> Self {
        Self {
            was_connected: true,
            merges,
        }
    }

    /// What `state` means to the core; `connected` is the event a connected
    /// state reports. Nothing is remembered until [`reported`](Self::reported).
    pub(crate) fn map(&self, state: ClientState, connected: SessionEvent) -> Vec<SessionEvent> {
        match state {
            ClientState::Connected if !self.was_connected => vec![connected],
            ClientState::Connected if self.merges => vec![SessionEvent::Disconnected, connected],
            ClientState::Disconnected if self.was_connected => vec![SessionEvent::Disconnected],
            ClientState::Connected | ClientState::Disconnected | ClientState::Ignored => vec![],
            ClientState::Expired => vec![SessionEvent::Expired],
            ClientState::AuthFailed => vec![SessionEvent::AuthFailed],
            ClientState::Closed => vec![SessionEvent::Closed],
        }
    }

    /// Remembers that `event` was reported.
    pub(crate) fn reported(&mut self, event: &SessionEvent) {
        self.was_connected = matches!(event, SessionEvent::Connected { .. });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each of the core's permission bits maps to the client's flag of the
    /// same name, and only those asked for.
    #[test]
    fn permissions_map_bit_by_bit() {
        use zkelect_core::Perms;
        #[cfg(feature = "zookeeper-async")]
        {
            use zookeeper_async::Permission as P;
            assert_eq!(
                permission_of!(Perms::READ | Perms::DELETE, P),
                P::READ | P::DELETE
            );
            assert_eq!(permission_of!(Perms::ADMIN, P), P::ADMIN);
            assert_eq!(
                permission_of!(Perms::WRITE | Perms::CREATE, P),
                P::WRITE | P::CREATE
            );
        }
        #[cfg(feature = "zookeeper-client")]
        {
            use zookeeper_client::Permission as P;
            assert_eq!(
                permission_of!(Perms::READ | Perms::DELETE, P),
                P::READ | P::DELETE
            );
            assert_eq!(permission_of!(Perms::ADMIN, P), P::ADMIN);
            assert_eq!(
                permission_of!(Perms::WRITE | Perms::CREATE, P),
                P::WRITE | P::CREATE
            );
        }
    }

    const T: Duration = Duration::from_secs(4);

    fn connected() -> SessionEvent {
        SessionEvent::Connected {
            session_id: None,
            timeout: T,
        }
    }

    #[test]
    fn every_state_maps_to_the_right_session_event() {
        use ClientState as S;
        use SessionEvent as E;
        let c = connected();
        // (state, after Connected, otherwise, after Connected when the watcher merges)
        let table = [
            (S::Connected, vec![], vec![c], vec![E::Disconnected, c]),
            (
                S::Disconnected,
                vec![E::Disconnected],
                vec![],
                vec![E::Disconnected],
            ),
            (
                S::Expired,
                vec![E::Expired],
                vec![E::Expired],
                vec![E::Expired],
            ),
            (
                S::AuthFailed,
                vec![E::AuthFailed],
                vec![E::AuthFailed],
                vec![E::AuthFailed],
            ),
            (S::Closed, vec![E::Closed], vec![E::Closed], vec![E::Closed]),
            (S::Ignored, vec![], vec![], vec![]),
        ];
        for (state, after, otherwise, merged) in table {
            let mut r = Reporter::new(false);
            assert_eq!(r.map(state, c), after, "{state:?} after Connected");
            assert_eq!(
                Reporter::new(true).map(state, c),
                merged,
                "{state:?} merged"
            );
            r.reported(&E::Disconnected);
            assert_eq!(r.map(state, c), otherwise, "{state:?} otherwise");
        }
    }

    #[test]
    fn an_expiry_then_a_new_session_reads_as_expired_then_connected() {
        use ClientState as S;
        let c = connected();
        let mut r = Reporter::new(false);
        let mut seen = Vec::new();
        for s in [S::Disconnected, S::Expired, S::Disconnected, S::Connected] {
            for e in r.map(s, c) {
                r.reported(&e);
                seen.push(e);
            }
        }
        assert_eq!(seen, [SessionEvent::Disconnected, SessionEvent::Expired, c]);
    }

    #[tokio::test(start_paused = true)]
    async fn requests_are_refused_once_closed_and_bounded_by_the_session_not_here() {
        let (tx, _rx) = mpsc::unbounded_channel();
        let shell = Shell::new(
            tx,
            Duration::from_millis(10),
            Some(Duration::from_millis(10)),
        );
        assert_eq!(shell.configured_timeout(), Some(Duration::from_millis(10)));
        // Past the bound, still waiting: the session answers it, not the
        // transport (the answer that comes later is dropped there).
        let slow = shell.perform(std::future::pending::<Result<(), ZkCode>>());
        assert!(
            tokio::time::timeout(Duration::from_millis(50), slow)
                .await
                .is_err(),
            "the transport answered a slow request itself"
        );
        assert_eq!(shell.perform(async { Ok(1) }).await, Ok(1));
        assert!(shell.close_once());
        assert!(!shell.close_once());
        assert_eq!(
            shell.perform(async { Ok(1) }).await,
            Err(ZkCode::ConnectionLoss)
        );
    }

    #[test]
    fn a_recorded_change_tells_a_request_its_connection_changed_under_it() {
        let changes = ConnectionChanges::default();
        let before = changes.mark();
        assert!(!changes.changed_since(before));
        changes.record();
        assert!(changes.changed_since(before));
        assert_eq!(changes.recorded(), 1);
    }

    #[test]
    fn credentials_never_show_in_debug_output() {
        let options = SessionOptions::<()>::new("h:1").digest("user:hunter2");
        let shown = format!("{options:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("digest"), "{shown}");
    }

    #[test]
    fn short_and_zero_timeouts_and_empty_hosts_are_refused() {
        let zero = SessionOptions::<()>::new("h:1").session_timeout(Duration::ZERO);
        assert!(matches!(
            zero.check(Duration::ZERO),
            Err(SessionError::SessionTimeoutTooShort { .. })
        ));
        let short = SessionOptions::<()>::new("h:1").session_timeout(Duration::from_secs(1));
        assert!(short.check(Duration::from_secs(2)).is_err());
        assert!(short.check(Duration::from_secs(1)).is_ok());
        assert!(matches!(
            SessionOptions::<()>::new(" ").check(Duration::ZERO),
            Err(SessionError::Connect { .. })
        ));
    }

    #[test]
    fn absurd_durations_are_config_errors() {
        let base = || SessionOptions::<()>::new("h:1");
        let refused = [
            base().connect_timeout(Duration::ZERO),
            base().connect_timeout(Duration::from_millis(u64::MAX)),
            base().connect_timeout(CONNECT_TIMEOUT_MAX + Duration::from_millis(1)),
            base().session_timeout(Duration::from_millis(u64::MAX)),
            base().session_timeout(SESSION_TIMEOUT_MAX + Duration::from_millis(1)),
            base().op_timeout(Duration::ZERO),
            base().op_timeout(Duration::MAX),
            base().reconnect_delay(Duration::ZERO),
            base().reconnect_delay(Duration::from_secs(61)),
        ];
        for options in refused {
            assert!(
                matches!(
                    options.check(Duration::ZERO),
                    Err(SessionError::Config(ConfigError::InvalidDuration { .. }))
                ),
                "{options:?}"
            );
        }
        for options in [
            base().connect_timeout(CONNECT_TIMEOUT_MAX),
            base().session_timeout(SESSION_TIMEOUT_MAX),
            base().reconnect_delay(Duration::from_secs(60)),
        ] {
            assert!(options.check(Duration::ZERO).is_ok(), "{options:?}");
        }
    }

    #[test]
    fn bad_connect_strings_are_bad_addresses_and_bad_chroots_config_errors() {
        for hosts in ["h:1,", "h:0", "h:1/x,g:2"] {
            let e = SessionOptions::<()>::new(hosts)
                .check(Duration::ZERO)
                .unwrap_err();
            assert_eq!(
                e.connect_failure(),
                Some(ConnectFailure::BadAddress),
                "{hosts}"
            );
        }
        for hosts in ["h:1/apps//x", "h:1/apps/x/", "h:1/apps/\u{1f680}"] {
            let e = SessionOptions::<()>::new(hosts)
                .check(Duration::ZERO)
                .unwrap_err();
            assert!(
                matches!(e, SessionError::Config(ConfigError::InvalidChroot { .. })),
                "{hosts}: {e:?}"
            );
        }
        let split = SessionOptions::<()>::new("a:1,b:2/apps/x")
            .check(Duration::ZERO)
            .unwrap();
        assert_eq!(split.servers.len(), 2);
        assert_eq!(split.chroot.as_deref(), Some("/apps/x"));
    }
}
