//! How `zkelect lock` ends. Before its command runs, a failure is exit 125
//! with its kind in words; at any moment a stopping signal is 128 + its
//! number; after the command, its own status passes through, and a hold
//! lost while it ran is 123. Both ways to lock (one path, and several as a
//! multi-lock) end the same way, so this lives here rather than in either.

use std::process::ExitCode;

use nix::sys::signal::Signal;
use tracing::info;

use crate::exit::{Code, Failure};
use crate::lease::exit_code_of;
use crate::signals::shell_status;
use crate::supervisor::Outcome;

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

/// What `lock` exits with once its command's supervision ended (the hold
/// already released): the command's own status, 128+N after a stopping
/// signal, 123 if `held` (the lock, the permit, "a lock" of several) was
/// lost or in doubt while the command ran, 126 if it could not start.
pub(crate) fn after_cmd(
    supervised: anyhow::Result<Outcome>,
    held: &str,
) -> Result<ExitCode, Failure> {
    match supervised {
        Ok(Outcome::Exited(status)) => Ok(exit_code_of(status)),
        Ok(Outcome::Signalled(signal)) => Ok(interrupted(signal, "")),
        Ok(Outcome::Lost | Outcome::ElectionOver(_)) => Err(Failure::new(
            Code::LockLost,
            anyhow::anyhow!(
                "{held} was lost, or contact with the server was in doubt, while the command \
                 ran; the command was stopped"
            ),
        )),
        Err(e) => Err(Failure::new(Code::CannotExecute, e)),
    }
}
