//! Errors of the async API.

use std::time::Duration;

use zkelect_core::{CandidateError, ConfigError};

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
    /// The requested session timeout is too short for the transport's client
    /// (zookeeper-async reconnects in a storm below 1.5 s).
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
        /// Why.
        reason: String,
    },
    /// The server rejected the credentials.
    #[error("authentication failed: {0}")]
    Auth(String),
    /// The election stopped with a fatal error (for example `NoAuth` on its
    /// nodes, or the server rejecting the session's credentials).
    #[error(transparent)]
    Fatal(#[from] CandidateError),
    /// The election is closed.
    #[error("the election is closed")]
    Closed,
    /// Something did not happen in time.
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(Duration, &'static str),
}
