//! The fixture's error type.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// Shorthand for results of fixture operations.
pub type Result<T, E = FixtureError> = std::result::Result<T, E>;

/// Everything that can go wrong while starting, controlling or querying the
/// test servers and proxies.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FixtureError {
    /// Java or the ZooKeeper jars are missing on this machine.
    #[error(
        "{what} not found; install the test dependencies with `scripts/test-deps.sh` ({hint})"
    )]
    NotInstalled {
        /// What is missing (with the paths that were looked at).
        what: String,
        /// How the fixture was told where to look.
        hint: String,
    },

    /// A filesystem or socket operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What the fixture was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// The server process could not be spawned.
    #[error("cannot spawn `{program}` for {server}: {source}")]
    Spawn {
        /// The server's name.
        server: String,
        /// The program that was run.
        program: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// The server did not start serving in time.
    #[error("{server} did not start serving within {timeout:?}{}\n--- server log tail ---\n{log_tail}", last_reply.as_deref().map(|r| format!(" (last `srvr` reply: {r:?})")).unwrap_or_default())]
    StartTimeout {
        /// The server's name.
        server: String,
        /// How long the fixture waited.
        timeout: Duration,
        /// The last answer to `srvr`, if any.
        last_reply: Option<String>,
        /// The last lines of the server's log and JVM output.
        log_tail: String,
    },

    /// The server process exited while the fixture waited for it.
    #[error("{server} exited unexpectedly ({status})\n--- server log tail ---\n{log_tail}")]
    Exited {
        /// The server's name.
        server: String,
        /// The exit status, as text.
        status: String,
        /// The last lines of the server's log and JVM output.
        log_tail: String,
    },

    /// An operation needs a running server, and it is not running.
    #[error("{server} is not running")]
    NotRunning {
        /// The server's name.
        server: String,
    },

    /// An operation needs a server that is not paused.
    #[error("{server} is paused (SIGSTOP); resume it first")]
    Paused {
        /// The server's name.
        server: String,
    },

    /// Sending a signal to the server's process group failed.
    #[error("cannot send {signal} to {server} (pgid {pgid}): {source}")]
    Signal {
        /// The server's name.
        server: String,
        /// The signal.
        signal: String,
        /// The process group.
        pgid: i32,
        /// The underlying error (from `killpg(2)`).
        #[source]
        source: io::Error,
    },

    /// A four-letter-word command failed or got an unexpected answer.
    #[error("four-letter word `{command}` to {addr}: {message}")]
    FourLetterWord {
        /// The address that was asked.
        addr: String,
        /// The command (`ruok`, `srvr`, `mntr`, ...).
        command: String,
        /// What went wrong.
        message: String,
    },

    /// The ensemble did not reach the expected state (one leader, the other
    /// live nodes followers) in time.
    #[error(
        "ensemble not ready within {timeout:?}: {state}\n--- server log tails ---\n{log_tail}"
    )]
    Ensemble {
        /// How long the fixture waited.
        timeout: Duration,
        /// The modes last seen, per node.
        state: String,
        /// The last lines of each node's log.
        log_tail: String,
    },

    /// Not exactly one node of the ensemble reports `Mode: leader` right now.
    #[error("expected exactly one leader, saw: {state}")]
    NoLeader {
        /// The modes seen, per node.
        state: String,
    },

    /// An index does not name a node of the ensemble.
    #[error("no node {index} in an ensemble of {len}")]
    NoSuchNode {
        /// The index asked for.
        index: usize,
        /// The ensemble's size.
        len: usize,
    },

    /// The fixture was configured with values that cannot work.
    #[error("invalid fixture configuration: {0}")]
    InvalidConfig(String),

    /// A proxy operation failed.
    #[error("proxy: {0}")]
    Proxy(String),

    /// Waiting for a condition timed out.
    #[error("timed out after {timeout:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long the fixture waited.
        timeout: Duration,
    },
}

impl FixtureError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        FixtureError::Io {
            context: context.into(),
            source,
        }
    }
}
