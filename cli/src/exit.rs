//! Exit codes: one per kind of failure, so scripts can tell them apart.
//!
//! [`TABLE`] is the one list of them: `zkelect --help` prints it and the
//! README carries it word for word (a test compares the two).
//!
//! `zkelect lock` is the exception: it passes its command's status through
//! and keeps 123–127 for its own outcomes (the table's second block).
//!
//! A supervised command's own exit code is never passed through except 0:
//! its codes would collide with these. A command that exits non-zero (or dies
//! of a signal) makes `zkelect run` exit [`Code::CommandFailed`], and the log
//! says how it ended; 126 and 127, the shell's "cannot execute" and "not
//! found", count as [`Code::Spawn`].

use std::fmt;
use std::process::{ExitCode, ExitStatus};

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
    /// An invalid path, id, prefix or setting.
    Config = 3,
    /// The server could not be reached within the connect timeout, or a
    /// server did not answer the session-timeout handshake (zookeeper-async).
    Unreachable = 4,
    /// Authentication failed, an ACL refused us, or a TLS certificate was refused.
    Auth = 5,
    /// The simulator found an invariant violated.
    Violation = 6,
    /// The supervised command could not be started (not found, not executable).
    Spawn = 7,
    /// The election stopped for good with a fatal ZooKeeper error: leadership
    /// (or the lock) is lost and will not come back in this process.
    Election = 8,
    /// Waiting for leadership (`run --lead-timeout`) or a lock took longer
    /// than allowed.
    LockTimeout = 9,
    /// `revoke` found no candidate with the id (or several, without `--all`).
    UnknownId = 10,
    /// The supervised command exited non-zero, or was killed by a signal, by
    /// itself while leading.
    CommandFailed = 11,
    /// The connect string's chroot does not exist, or it (or a level of the
    /// path) is an ephemeral node, which cannot have children: the path can
    /// never be made, so the election stopped at once.
    Namespace = 12,
    /// `lock`: the lock was lost while the command ran (it was stopped).
    LockLost = 123,
    /// `lock --timeout`: the lock was not acquired in time; the command never ran.
    LockWait = 124,
    /// `lock` itself failed before the command ran.
    LockFailed = 125,
    /// `lock`: the command was found but could not be executed.
    CannotExecute = 126,
    /// `lock`: the command was not found.
    NotFound = 127,
}

/// The exit codes as `zkelect --help` and the README show them.
pub(crate) const TABLE: &str = "\
Exit codes:
   0  success; or the command run by `run` exited 0 while leading; or `run`
      was stopped by SIGTERM, SIGINT, SIGHUP or SIGQUIT, at any moment (its
      command stopped, its node deleted)
   1  any other failure
   2  usage: a bad option or argument
   3  an invalid setting: path, id, timeout, permits, TLS files, a --connect
      that does not parse or resolve
   4  ZooKeeper unreachable within --connect-timeout
   5  authentication, ACL or TLS certificate refused
   6  `sim`: an invariant was violated
   7  `run`: the command could not start (not found, not executable, or it
      exited 126 or 127, the shell's codes for the same)
   8  the election failed for good: leadership (or a lock) lost, not retried
   9  `run --lead-timeout`: not elected in time (the node is deleted)
  10  `revoke`: no node carries that id, or several do (use --all)
  11  `run`: the command exited non-zero or was killed by a signal while
      leading (its own code is logged, not passed through)
  12  the chroot of --connect does not exist, or is an ephemeral node (as is
      a level of the path): nothing can be created under it; create it as a
      persistent node, or fix --connect

Exit codes of `zkelect lock` (it passes the command's own status through,
so its own outcomes use the codes of `timeout` and `env`; a command's own
codes 123 to 127 cannot be told apart from them):
      the command's own exit status (128+N if it was killed by signal N)
      128+N also when `zkelect lock` itself got signal N, at any moment:
      SIGHUP 129, SIGINT 130, SIGQUIT 131, SIGTERM 143 (the command, if it
      ran, was stopped; the node is deleted)
 123  the lock was lost while the command ran (it got SIGTERM, then SIGKILL
      after --grace-ms)
 124  --timeout: the lock was not acquired in time; the command never ran
 125  zkelect lock itself failed before the command ran (usage, invalid
      setting, unreachable, auth, a missing or ephemeral chroot; the log
      says which)
 126  the command was found but could not be executed
 127  the command was not found";

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

/// How a process ended, for people: "exited with code 3", "killed by SIGKILL".
pub(crate) fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        // The lease watchdog reports its command's death by signal the
        // shell's way, as 128 + the signal.
        let signalled = code
            .checked_sub(128)
            .and_then(|n| nix::sys::signal::Signal::try_from(n).ok());
        return match signalled {
            Some(signal) => format!("exited with code {code} (128 + {signal}: killed by {signal})"),
            None => format!("exited with code {code}"),
        };
    }
    match status.signal() {
        Some(n) => match nix::sys::signal::Signal::try_from(n) {
            Ok(signal) => format!("killed by {signal}"),
            Err(_) => format!("killed by signal {n}"),
        },
        None => format!("ended with wait status {}", status.into_raw()),
    }
}

/// What `zkelect run` makes of its command's own exit (see the module docs).
pub(crate) fn of_command(status: ExitStatus) -> Result<ExitCode, Failure> {
    match status.code() {
        Some(0) => Ok(ExitCode::SUCCESS),
        Some(126 | 127) => Err(Failure::new(
            Code::Spawn,
            anyhow::anyhow!("the command could not be started: it {}", describe(status)),
        )),
        _ => Err(Failure::new(
            Code::CommandFailed,
            anyhow::anyhow!("the command {} while leading", describe(status)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn every_code_is_in_the_table_once_and_the_readme_carries_it() {
        let codes = [
            Code::Other,
            Code::Usage,
            Code::Config,
            Code::Unreachable,
            Code::Auth,
            Code::Violation,
            Code::Spawn,
            Code::Election,
            Code::LockTimeout,
            Code::UnknownId,
            Code::CommandFailed,
            Code::Namespace,
            Code::LockLost,
            Code::LockWait,
            Code::LockFailed,
            Code::CannotExecute,
            Code::NotFound,
        ];
        for code in codes {
            let row = format!("\n{:>4}  ", code as u8);
            assert_eq!(TABLE.matches(&row).count(), 1, "{code:?} in\n{TABLE}");
        }
        let readme = include_str!("../../README.md");
        assert!(
            readme.contains(TABLE),
            "README.md must hold exit::TABLE word for word:\n{TABLE}"
        );
    }

    #[test]
    fn statuses_read_as_words_and_only_zero_passes_through() {
        // Raw wait statuses: the code in the high byte, a signal in the low.
        let exited = |code: i32| ExitStatus::from_raw(code << 8);
        assert_eq!(describe(exited(3)), "exited with code 3");
        assert_eq!(
            describe(exited(143)),
            "exited with code 143 (128 + SIGTERM: killed by SIGTERM)"
        );
        assert_eq!(describe(ExitStatus::from_raw(9)), "killed by SIGKILL");
        assert_eq!(of_command(exited(0)).unwrap(), ExitCode::SUCCESS);
        for (status, code) in [
            (exited(3), Code::CommandFailed),
            (exited(1), Code::CommandFailed),
            (exited(127), Code::Spawn),
            (exited(126), Code::Spawn),
            (ExitStatus::from_raw(15), Code::CommandFailed),
        ] {
            let failure = of_command(status).unwrap_err();
            assert_eq!(failure.code, code, "{failure}");
        }
    }
}
