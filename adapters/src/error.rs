//! Errors of the async API.

use std::time::Duration;

use zkelect_core::{
    CandidateError, ConfigError, DemotionReason, FencingToken, NamespaceFault, RevocationError,
    WrongReply, ZkCode,
};

/// What can go wrong opening a ZooKeeper session, and with its credentials
/// later: [`Session::connect`](crate::Session::connect), a transport's
/// `connect`, [`Connect::connect`](crate::Connect::connect), TLS settings.
///
/// The recipes' errors carry it as their `Session` variant
/// ([`ElectionError::Session`], [`ObserveError::Session`]).
///
/// ```
/// use zkelect::SessionError;
///
/// fn exit_code(e: &SessionError) -> i32 {
///     match e {
///         SessionError::Config(_) | SessionError::SessionTimeoutTooShort { .. } => 2,
///         SessionError::Connect { .. } => 3,
///         SessionError::Auth(_) | SessionError::Tls(_) => 4,
///         _ => 1,
///     }
/// }
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The session's settings are invalid: a chroot the server would
    /// refuse, a connect timeout, request bound or reconnect delay that is
    /// zero or absurd, a session timeout too long for the protocol.
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
    /// The server rejected the session's credentials (at connect, or later:
    /// then every recipe on the session stops with this; later also when
    /// they could not be put back on the connection after a reconnect).
    #[error("authentication failed: {0}")]
    Auth(String),
    /// TLS could not be set up, or the server's certificate was not accepted.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

impl SessionError {
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

    /// The error a recipe reports when its session's credentials are
    /// rejected after it started, or could not be put back on the
    /// connection after a reconnect (the transport logs which, and why).
    pub(crate) fn rejected_later() -> Self {
        Self::Auth(
            "the server rejected this session's credentials, or they could not be put back \
             on its connection after a reconnect (the log says which)"
                .into(),
        )
    }
}

/// What can go wrong with an [`Election`](crate::Election): its setup
/// (configuration, its own session's connection) and its end.
///
/// ```
/// use zkelect::{ElectionError, SessionError};
///
/// fn exit_code(e: &ElectionError) -> i32 {
///     match e {
///         ElectionError::Config(_) => 2,
///         ElectionError::Session(SessionError::Auth(_)) => 4,
///         ElectionError::Session(_) | ElectionError::Timeout(..) => 3,
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
    /// The election's session could not be opened
    /// ([`Election::connect`](crate::Election::connect)), or the server
    /// rejected its credentials later (or they could not be put back on its
    /// connection after a reconnect).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The election stopped with a fatal error (for example `NoAuth` on its
    /// nodes, or a connect string whose chroot is missing or ephemeral:
    /// [`namespace_fault`](Self::namespace_fault)).
    #[error(transparent)]
    Fatal(#[from] CandidateError),
    /// The election is closed.
    #[error("the election is closed")]
    Closed,
    /// Something did not happen in time.
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(Duration, &'static str),
}

/// What can go wrong with an [`Observation`](crate::Observation) of any
/// recipe's queue: its setup (the description, its own session's
/// connection, the first listing) and its end.
///
/// ```
/// use zkelect::ObserveError;
///
/// fn worth_retrying(e: &ObserveError) -> bool {
///     matches!(e, ObserveError::Timeout(..) | ObserveError::Session(_))
/// }
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ObserveError {
    /// The description is invalid (path, recipe, prefix, …).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The observation's session could not be opened
    /// ([`Election::observe`](crate::Election::observe)), or the server
    /// rejected its credentials later (or they could not be put back on its
    /// connection after a reconnect).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The observation stopped with a fatal error (for example `NoAuth` on
    /// the queue's path).
    #[error(transparent)]
    Fatal(#[from] CandidateError),
    /// The observation is closed (or its session is).
    #[error("the observation is closed")]
    Closed,
    /// Something did not happen in time.
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(Duration, &'static str),
}

impl ObserveError {
    /// What kind of connect failure this is; `None` for errors that are not
    /// about reaching the servers (see [`SessionError::connect_failure`]).
    pub fn connect_failure(&self) -> Option<ConnectFailure> {
        match self {
            Self::Session(e) => e.connect_failure(),
            _ => None,
        }
    }
}

/// What kind of failure kept a transport from connecting, for code that
/// must tell a typo from an outage ([`SessionError::connect_failure`]).
///
/// ```
/// use zkelect::{ConnectFailure, SessionError};
///
/// fn retry_later(e: &SessionError) -> bool {
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
    /// TLS failed: see [`SessionError::Tls`] for which way.
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
    /// about reaching the servers (see [`SessionError::connect_failure`]).
    pub fn connect_failure(&self) -> Option<ConnectFailure> {
        match self {
            Self::Session(e) => e.connect_failure(),
            _ => None,
        }
    }
}

/// Why TLS to ZooKeeper failed (the zookeeper-client transport's TLS).
///
/// ```
/// use zkelect::{SessionError, TlsError};
///
/// fn explain(e: &SessionError) -> &'static str {
///     match e {
///         SessionError::Tls(TlsError::Config { .. }) => "fix the CA, certificate or key files",
///         SessionError::Tls(TlsError::Rejected { .. }) => "the server's certificate is not trusted",
///         SessionError::Tls(TlsError::Handshake { .. }) => "the TLS handshake failed",
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

/// Why a guarded write was not applied: a write made only while its
/// writer holds — a leader ([`Election::guarded`](crate::Election::guarded),
/// [`Election::guarded_set_data`](crate::Election::guarded_set_data)) or the
/// holder of a lock, a semaphore permit or a read-write lock side
/// ([`LockGuard::guarded`](crate::LockGuard::guarded)).
///
/// Only [`Indeterminate`](Self::Indeterminate) leaves the outcome open; every
/// other variant means nothing was written.
///
/// ```
/// use zkelect::GuardedWriteError;
///
/// fn retry_worth_it(e: &GuardedWriteError) -> bool {
///     // Deposed or not holding: someone else holds now; stop writing.
///     matches!(e, GuardedWriteError::Indeterminate(_))
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GuardedWriteError {
    /// The writer does not hold (as far as it knows: a candidate that does
    /// not lead, a guard whose hold is suspended): nothing was sent.
    #[error("not holding: nothing was written")]
    NotHolding,
    /// The server says the writer's node is gone (its session expired, it
    /// was revoked, it was released): the hold is over, and nothing was
    /// written. The token is the one the write was guarded with.
    #[error(
        "deposed: the node of the hold with fencing token {token} is gone; nothing was written"
    )]
    Deposed {
        /// The fencing token of the hold that ended.
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
    /// The server refused the hold's check or the request as a whole
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
    /// The writer's handle is closed (a closed election, a released guard)
    /// or its session is: it holds nothing any more.
    #[error("the hold is closed (or its session is): nothing was written")]
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
    /// A multi-lock's paths are not a set of locks (none, or one twice).
    #[error(transparent)]
    MultiLock(#[from] zkelect_core::MultiLockError),
    /// This handle already acquires or holds, and is not reentrant: one
    /// acquisition at a time per handle (a multi-lock, a
    /// [`Mutex`](crate::Mutex) built with `reentrant(false)`).
    #[error("this lock handle is already acquiring or held, and is not reentrant")]
    InUse,
}

/// Why a cooperative revocation request was not delivered
/// ([`Session::request_revocation`](crate::Session::request_revocation)).
/// Delivered means written into the holder's node; whether the holder lets
/// go is its own decision.
///
/// ```
/// use zkelect::RevocationRequestError;
///
/// fn worth_retrying(e: &RevocationRequestError) -> bool {
///     // The node is gone (its holder let go already), or the server
///     // refuses for good: asking again will not help.
///     matches!(e, RevocationRequestError::Closed)
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RevocationRequestError {
    /// The node's path is not one ZooKeeper accepts (the lock's path and
    /// the node's name make it).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// No such node: its holder has let go (or never was).
    #[error("no node {path} to ask to let go: it is gone")]
    Gone {
        /// The node's full path.
        path: String,
    },
    /// ZooKeeper refused the write (no write permission on the node, the
    /// session's credentials rejected).
    #[error("ZooKeeper refused the revocation request on {path}: {code}")]
    Refused {
        /// The node's full path.
        path: String,
        /// The server's error.
        code: ZkCode,
    },
    /// The session is closed (or closed before the request was answered).
    #[error("the session is closed: the revocation request was not delivered")]
    Closed,
    /// The transport answered the write with a reply of another kind: it
    /// is broken, and whether the request was delivered is unknown.
    #[error(transparent)]
    WrongReply(#[from] WrongReply),
}

impl From<RevocationError> for RevocationRequestError {
    fn from(e: RevocationError) -> Self {
        match e {
            RevocationError::Gone { path } => Self::Gone { path },
            RevocationError::Refused { path, code } => Self::Refused { path, code },
            RevocationError::Closed => Self::Closed,
            RevocationError::WrongReply(e) => Self::WrongReply(e),
        }
    }
}

/// Why [`LockGuard::downgrade`](crate::LockGuard::downgrade) did not turn a
/// write hold into a read hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DowngradeError {
    /// The guard is not of a read-write lock's write side: only a writer
    /// has something to downgrade.
    #[error("only a write lock's guard can downgrade")]
    NotWriter,
    /// The guard no longer holds (or is in doubt: a downgrade needs the
    /// server, and waits while the connection is suspended).
    #[error("the write lock is not held")]
    NotHolding,
    /// The server refused the write that marks the node as a reader's
    /// (`NoAuth`, …): the holder must only read from now on, but the queue
    /// still sees a writer, so readers behind it wait until it releases.
    /// The server's error is here when this call saw it (a call after a
    /// cancelled one that saw it may not have).
    #[error("the server refused the downgrade{}", .0.map(|c| format!(": {c}")).unwrap_or_default())]
    Refused(Option<ZkCode>),
    /// The hold ended before the downgrade was done.
    #[error("the write lock was lost before the downgrade: {0}")]
    Lost(DemotionReason),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lock holder's errors speak of holds, locks and sessions: none of
    /// them may tell it about an election or a leader it never took part in.
    #[test]
    fn the_errors_a_lock_holder_sees_never_speak_of_elections() {
        let guarded = [
            GuardedWriteError::NotHolding,
            GuardedWriteError::Deposed {
                token: FencingToken(7),
            },
            GuardedWriteError::Op {
                index: 0,
                code: ZkCode::NoNode,
            },
            GuardedWriteError::Refused(ZkCode::NoAuth),
            GuardedWriteError::Indeterminate(ZkCode::ConnectionLoss),
            GuardedWriteError::Unsupported,
            GuardedWriteError::Closed,
        ]
        .map(|e| e.to_string());
        let session = [
            SessionError::SessionTimeoutTooShort {
                requested: Duration::from_millis(10),
                min: Duration::from_millis(1500),
            },
            SessionError::Connect {
                hosts: "zk:2181".into(),
                kind: ConnectFailure::Refused,
                reason: "refused".into(),
            },
            SessionError::Auth("bad password".into()),
        ]
        .map(|e| e.to_string());
        let lock = LockError::Closed.to_string();
        let observe = ObserveError::Closed.to_string();
        for message in guarded.iter().chain(&session).chain([&lock, &observe]) {
            let lower = message.to_lowercase();
            assert!(
                !lower.contains("election") && !lower.contains("leader") && !lower.contains("lead"),
                "{message}"
            );
        }
    }
}
