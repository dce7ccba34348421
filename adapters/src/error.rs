//! Errors of the async API.

use std::time::Duration;

use zkelect_core::{CandidateError, ConfigError, FencingToken, NamespaceFault, ZkCode};

/// What can go wrong with an [`Election`](crate::Election) or a transport's setup.
///
/// ```
/// use zkelect::ElectionError;
///
/// fn exit_code(e: &ElectionError) -> i32 {
///     match e {
///         ElectionError::Config(_) | ElectionError::SessionTimeoutTooShort { .. } => 2,
///         ElectionError::Connect { .. } | ElectionError::Timeout(..) => 3,
///         ElectionError::Auth(_) => 4,
///         _ => 1,
///     }
/// }
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ElectionError {
    /// The election's configuration is invalid (path, id, prefix, …).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The session timeout is too short for the transport's client
    /// (zookeeper-async reconnects in a storm below 1.5 s): the requested one,
    /// or, with zookeeper-async, the smallest one the servers negotiate.
    #[error("session timeout {requested:?} is below the {min:?} this transport can keep")]
    SessionTimeoutTooShort {
        /// What was asked for.
        requested: Duration,
        /// The shortest the transport accepts.
        min: Duration,
    },
    /// The server could not be reached, or the session could not be set up.
    #[error("cannot connect to ZooKeeper at {hosts}: {reason}")]
    Connect {
        /// The connect string.
        hosts: String,
        /// What kind of failure, as far as the transport can tell.
        kind: ConnectFailure,
        /// Why, in the client library's words.
        reason: String,
    },
    /// The server rejected the credentials.
    #[error("authentication failed: {0}")]
    Auth(String),
    /// The election stopped with a fatal error (for example `NoAuth` on its
    /// nodes, the server rejecting the session's credentials, or a connect
    /// string whose chroot is missing or ephemeral:
    /// [`namespace_fault`](Self::namespace_fault)).
    #[error(transparent)]
    Fatal(#[from] CandidateError),
    /// The election is closed.
    #[error("the election is closed")]
    Closed,
    /// Something did not happen in time.
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(Duration, &'static str),
    /// TLS could not be set up, or the server's certificate was not accepted.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// What kind of failure kept a transport from connecting, for code that
/// must tell a typo from an outage ([`ElectionError::connect_failure`]).
///
/// ```
/// use zkelect::{ConnectFailure, ElectionError};
///
/// fn retry_later(e: &ElectionError) -> bool {
///     matches!(
///         e.connect_failure(),
///         Some(ConnectFailure::Refused | ConnectFailure::Unreachable)
///     )
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectFailure {
    /// The connect string is malformed, empty, or a host does not resolve:
    /// retrying will not help.
    BadAddress,
    /// A server refused the TCP connection: nothing listens on that port.
    Refused,
    /// No server answered in time: down, firewalled, not serving yet, or not
    /// a ZooKeeper server.
    Unreachable,
    /// A server was reached but no usable session came of it (the client
    /// library's first request or its credentials failed).
    Session,
    /// TLS failed: see [`ElectionError::Tls`] for which way.
    Tls,
}

impl ElectionError {
    /// The path and the fault when the connection's namespace cannot hold
    /// the queue's path: the connect string's chroot names no node
    /// ([`NamespaceFault::RootMissing`]; the path is the topmost level that
    /// could not be created under it) or an ephemeral one
    /// ([`NamespaceFault::Ephemeral`]; the path is the ephemeral node, `/`
    /// for the chroot itself). No retry can help; the candidate stopped
    /// after a handful of requests. `None` for every other error.
    ///
    /// ```
    /// use zkelect::ElectionError;
    /// use zkelect::core::{CandidateError, NamespaceFault};
    ///
    /// let e = ElectionError::Fatal(CandidateError::Namespace {
    ///     path: "/svc".into(),
    ///     fault: NamespaceFault::RootMissing,
    /// });
    /// assert_eq!(e.namespace_fault(), Some(("/svc", NamespaceFault::RootMissing)));
    /// assert_eq!(ElectionError::Closed.namespace_fault(), None);
    /// ```
    pub fn namespace_fault(&self) -> Option<(&str, NamespaceFault)> {
        match self {
            Self::Fatal(CandidateError::Namespace { path, fault }) => Some((path, *fault)),
            _ => None,
        }
    }

    /// What kind of connect failure this is; `None` for errors that are not
    /// about reaching the servers.
    pub fn connect_failure(&self) -> Option<ConnectFailure> {
        match self {
            Self::Connect { kind, .. } => Some(*kind),
            Self::Tls(TlsError::Rejected { .. } | TlsError::Handshake { .. }) => {
                Some(ConnectFailure::Tls)
            }
            _ => None,
        }
    }
}

/// Why TLS to ZooKeeper failed (the zookeeper-client transport's TLS).
///
/// ```
/// use zkelect::{ElectionError, TlsError};
///
/// fn explain(e: &ElectionError) -> &'static str {
///     match e {
///         ElectionError::Tls(TlsError::Config { .. }) => "fix the CA, certificate or key files",
///         ElectionError::Tls(TlsError::Rejected { .. }) => "the server's certificate is not trusted",
///         ElectionError::Tls(TlsError::Handshake { .. }) => "the TLS handshake failed",
///         _ => "something else",
///     }
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A CA, certificate or key could not be read or holds nothing usable,
    /// or a host name cannot be checked against a certificate. Found before
    /// any network traffic.
    #[error("TLS settings: {what}: {reason}")]
    Config {
        /// Which setting (a file, a host name).
        what: String,
        /// Why.
        reason: String,
    },
    /// The server's certificate was rejected: not signed by the trusted CA,
    /// not naming the host, expired, revoked, …
    #[error("the TLS certificate of {host} was rejected: {reason}")]
    Rejected {
        /// `host:port` as in the connect string.
        host: String,
        /// The TLS library's verdict.
        reason: String,
    },
    /// The TLS handshake failed otherwise (the server refused our
    /// certificate, no common protocol version, an alert, …).
    #[error("the TLS handshake with {host} failed: {reason}")]
    Handshake {
        /// `host:port` as in the connect string.
        host: String,
        /// The TLS library's verdict.
        reason: String,
    },
}

/// Why a guarded write ([`Election::guarded`](crate::Election::guarded),
/// [`Election::guarded_set_data`](crate::Election::guarded_set_data)) was not applied.
///
/// Only [`Indeterminate`](Self::Indeterminate) leaves the outcome open; every
/// other variant means nothing was written.
///
/// ```
/// use zkelect::GuardedWriteError;
///
/// fn retry_worth_it(e: &GuardedWriteError) -> bool {
///     // Deposed or not leading: another candidate leads now; stop writing.
///     matches!(e, GuardedWriteError::Indeterminate(_))
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GuardedWriteError {
    /// This candidate does not lead (as far as it knows): nothing was sent.
    #[error("not leading: nothing was written")]
    NotLeader,
    /// The server says this candidate's node is gone (its session expired,
    /// it was revoked, it resigned): it no longer leads, and nothing was
    /// written. The token is the one the write was guarded with.
    #[error("deposed: the leader node of term {token} is gone; nothing was written")]
    Deposed {
        /// The fencing token of the term that ended.
        token: FencingToken,
    },
    /// One of the caller's operations failed (index into them); nothing was written.
    #[error("guarded operation {index} failed: {code}; nothing was written")]
    Op {
        /// Index into the caller's operations.
        index: usize,
        /// Why (`NoNode`, `BadVersion`, `NoAuth`, …).
        code: ZkCode,
    },
    /// The server refused the leadership check or the request as a whole
    /// with this code (e.g. `NoAuth`, `BadArguments`); nothing was written.
    #[error("the guarded write was refused: {0}; nothing was written")]
    Refused(ZkCode),
    /// The request failed with the connection (`ConnectionLoss`,
    /// `OperationTimeout`, `SessionExpired`): the write may or may not have
    /// been applied. Read back before retrying.
    #[error("the guarded write's outcome is unknown: {0}")]
    Indeterminate(ZkCode),
    /// The transport cannot apply operations atomically (zookeeper-async has
    /// no multi): use the zookeeper-client or memory transport.
    #[error("this transport has no multi: guarded writes need the zookeeper-client (or memory) transport")]
    Unsupported,
    /// The election is closed.
    #[error("the election is closed")]
    Closed,
}

/// Why a lock, a semaphore permit or a read-write lock side could not be
/// acquired ([`Mutex::acquire`](crate::Mutex::acquire),
/// [`Semaphore::acquire`](crate::Semaphore::acquire)).
///
/// A timeout is not an error: [`Mutex::try_acquire`](crate::Mutex::try_acquire)
/// returns `Ok(None)`.
///
/// ```
/// use zkelect::LockError;
///
/// fn worth_retrying(e: &LockError) -> bool {
///     // A bad path or id, a fatal refusal (NoAuth): retrying will not help.
///     matches!(e, LockError::Closed)
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The lock's configuration is invalid (path, id, permits, interop).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The lock's machine stopped with a fatal error (for example `NoAuth`
    /// on the lock's path, or the server rejecting the session's credentials).
    #[error(transparent)]
    Fatal(#[from] CandidateError),
    /// The session is closed (or closing).
    #[error("the session is closed")]
    Closed,
}
