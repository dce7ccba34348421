//! Exit codes: one per kind of failure, so scripts can tell them apart.

use std::fmt;
use std::process::ExitCode;

/// A failure with the exit code it maps to.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: Code,
    pub(crate) error: anyhow::Error,
}

/// The distinct exit codes of `zkelect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Code {
    /// Anything not listed below.
    Other = 1,
    /// Command-line usage (clap uses 2 as well).
    Usage = 2,
    /// An invalid election path, id, prefix or setting.
    Config = 3,
    /// The server could not be reached within the connect timeout, or a
    /// server did not answer the session-timeout handshake (zookeeper-async).
    Unreachable = 4,
    /// Authentication failed, an ACL refused us, or a TLS certificate was refused.
    Auth = 5,
    /// The simulator found an invariant violated.
    Violation = 6,
    /// The supervised command could not be started.
    Spawn = 7,
    /// The election stopped with a fatal ZooKeeper error.
    Election = 8,
}

impl Failure {
    pub(crate) fn new(code: Code, error: impl Into<anyhow::Error>) -> Self {
        Self {
            code,
            error: error.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

impl From<Code> for ExitCode {
    fn from(code: Code) -> Self {
        Self::from(code as u8)
    }
}

/// Shorthand for attaching an exit code to any error.
pub(crate) trait WithCode<T> {
    fn code(self, code: Code) -> Result<T, Failure>;
}

impl<T, E: Into<anyhow::Error>> WithCode<T> for Result<T, E> {
    fn code(self, code: Code) -> Result<T, Failure> {
        self.map_err(|e| Failure::new(code, e))
    }
}
