//! How `zkelect lock` ends before its command runs: a failure is exit 125
//! with its kind in words, and a stopping signal is 128 + its number. Both
//! ways to lock (one path, and several as a multi-lock) end the same way, so
//! the two live here rather than in either.

use std::process::ExitCode;

use nix::sys::signal::Signal;
use tracing::info;

use crate::exit::{Code, Failure};
use crate::signals::shell_status;

/// Any failure before the command ran is exit 125; the message names its
/// kind in words, since the exit code cannot.
pub(crate) fn before_cmd(f: Failure) -> Failure {
    let kind = match f.code {
        Code::Usage => "usage",
        Code::Config => "an invalid setting",
        Code::Unreachable => "ZooKeeper unreachable",
        Code::Auth => "authentication, ACL or TLS certificate refused",
        Code::Namespace => "a missing or ephemeral chroot",
        Code::Election => "ZooKeeper refused the lock's requests for good",
        _ => "an unexpected failure",
    };
    Failure::new(
        Code::LockFailed,
        f.error.context(format!(
            "zkelect lock failed before the command ran ({kind})"
        )),
    )
}

/// What `lock` exits with after a stopping signal: 128 + its number, as a
/// shell reports a process the signal killed (the command, if it ran, is
/// stopped, and the node deleted, by the caller).
pub(crate) fn interrupted(signal: Signal, when: &str) -> ExitCode {
    if when.is_empty() {
        info!(%signal, "stopped");
    } else {
        info!(%signal, "stopped {when}");
    }
    ExitCode::from(shell_status(signal))
}
