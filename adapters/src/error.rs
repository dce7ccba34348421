//! Errors of the async API.

use zkelect_core::{CandidateError, ConfigError};

/// What can go wrong with an [`Election`](crate::Election).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ElectionError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
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
    /// The election stopped with a fatal error.
    #[error(transparent)]
    Fatal(#[from] CandidateError),
    /// The election is closed.
    #[error("the election is closed")]
    Closed,
    /// Something did not happen in time.
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(std::time::Duration, &'static str),
}
