//! Asking a holder to let go: [`Session::request_revocation`], over the
//! core's [`Revoker`] machine (one idempotent write of `__REVOKE__` into the
//! holder's node, retried through connection loss, answered once).

use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::broadcast::Receiver;
use zkelect_core::{Machine, Notice, Revoker, Role};

use crate::error::RevocationRequestError;
use crate::hub::Board;
use crate::session::Session;
use crate::status::Outputs;

impl Session {
    /// Asks the holder of `node` (a node's name, as
    /// [`LockGuard::node`](crate::LockGuard::node) or `zkelect status` give
    /// it) in the queue at `path` to let go: a cooperative revocation
    /// request, written into its node as Curator's `Revoker.attemptRevoke`
    /// writes it, so a revocable Curator holder hears it too. The holder
    /// decides ([`LockGuard::revocation_requested`](crate::LockGuard::revocation_requested));
    /// a holder that is not revocable never hears it. For a forced
    /// hand-off, delete the node instead.
    ///
    /// Returns once the request is written (`Ok`: delivered, not honoured),
    /// or with why not: [`RevocationRequestError::Gone`] (no such node),
    /// [`RevocationRequestError::Refused`] (no write permission),
    /// [`RevocationRequestError::Closed`] (the session closed first),
    /// [`RevocationRequestError::Config`] (not a path). A write lost to the
    /// connection is sent again after a backoff, until the session ends.
    /// Cancel-safe: dropping the future gives the request up (a write
    /// already out may still land).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use zkelect::{memory::MemoryServer, RevocationRequestError, Session};
    ///
    /// let server = MemoryServer::new();
    /// let session = Session::connect(server.settings(Duration::from_secs(4))).await?;
    /// let guard = session.mutex("/svc/locks/report").revocable(true).acquire().await?;
    /// let node = guard.node().to_owned();
    /// session.request_revocation("/svc/locks/report", &node).await?;
    /// guard.revocation_requested().await; // heard: the holder lets go
    /// guard.release().await;
    /// // Its node is gone now: a typed answer, not a wait.
    /// assert!(matches!(
    ///     session.request_revocation("/svc/locks/report", &node).await,
    ///     Err(RevocationRequestError::Gone { .. })
    /// ));
    /// # session.close().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn request_revocation(
        &self,
        path: impl AsRef<str>,
        node: impl AsRef<str>,
    ) -> Result<(), RevocationRequestError> {
        let revoker = Revoker::new(node_path(path.as_ref(), node.as_ref()))?;
        let outputs = Outputs::new();
        // Subscribed before the machine runs, so its one answer cannot be
        // sent before anyone listens.
        let mut notices = outputs.notices();
        let mut status = outputs.status();
        let _link = self.add(
            Machine::revocation(revoker),
            Board::unmetered(std::sync::Arc::clone(&outputs)),
        );
        loop {
            tokio::select! {
                notice = notices.recv() => match notice {
                    Ok(notice) => {
                        if let Some(outcome) = outcome(notice) {
                            return outcome;
                        }
                    }
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return Err(RevocationRequestError::Closed),
                },
                changed = status.changed() => {
                    let stopped = matches!(status.borrow_and_update().role, Role::Closed | Role::Failed);
                    if changed.is_err() || stopped {
                        // The machine's last notice is sent in the step
                        // that stops it, just after its status says so and
                        // under the session's lock: once the lock is ours,
                        // that step is over and the notice is in.
                        self.hub().read(|_| ());
                        return drain(&mut notices);
                    }
                }
            }
        }
    }
}

/// The node's full path: the queue's path, `/`, the node's name.
fn node_path(path: &str, node: &str) -> String {
    format!("{}/{node}", path.trim_end_matches('/'))
}

/// The request's answer, if `notice` is it.
fn outcome(notice: Notice) -> Option<Result<(), RevocationRequestError>> {
    match notice {
        Notice::RevocationDelivered { .. } => Some(Ok(())),
        Notice::RevocationFailed(e) => Some(Err(e.into())),
        _ => None,
    }
}

/// The answer among the notices already sent; the session closed if none is.
fn drain(notices: &mut Receiver<Notice>) -> Result<(), RevocationRequestError> {
    loop {
        match notices.try_recv() {
            Ok(notice) => {
                if let Some(outcome) = outcome(notice) {
                    return outcome;
                }
            }
            Err(TryRecvError::Lagged(_)) => {}
            Err(TryRecvError::Empty | TryRecvError::Closed) => {
                return Err(RevocationRequestError::Closed)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_path_joins_the_queue_and_the_name_once() {
        assert_eq!(node_path("/svc/lock", "n_1"), "/svc/lock/n_1");
        assert_eq!(node_path("/svc/lock/", "n_1"), "/svc/lock/n_1");
        assert_eq!(node_path("/", "n_1"), "/n_1");
    }

    #[test]
    fn only_the_requests_answer_ends_the_wait() {
        assert_eq!(outcome(Notice::Suspended), None);
        assert_eq!(
            outcome(Notice::RevocationDelivered {
                path: "/a/b".into()
            }),
            Some(Ok(()))
        );
        assert_eq!(
            outcome(Notice::RevocationFailed(
                zkelect_core::RevocationError::Gone {
                    path: "/a/b".into()
                }
            )),
            Some(Err(RevocationRequestError::Gone {
                path: "/a/b".into()
            }))
        );
    }
}
