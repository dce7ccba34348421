//! Asking a holder to let go: a cooperative revocation request.
//!
//! A [`Revoker`] writes [`REVOKE_MESSAGE`] (`__REVOKE__`) into another
//! participant's node, once, as Curator's `Revoker.attemptRevoke` does; a
//! [`revocable`](crate::ConfigBuilder::revocable) holder hears of it
//! ([`Notice::RevocationRequested`]) and decides whether to let go. Nothing
//! is deleted: a forced hand-off deletes the node instead.
//!
//! The write carries no expected version, so it is idempotent and a retry
//! after a lost connection is safe. The outcome is one notice:
//! [`Notice::RevocationDelivered`], or [`Notice::RevocationFailed`] with a
//! typed [`RevocationError`] — the node already gone, the server refusing
//! (no write permission), the session closed first. A machine like the
//! others (`handle`, `handle_timeout`, `poll_*`), run on a
//! [`Session`](crate::Session) as [`Machine::revocation`](crate::Machine::revocation).
//!
//! ```
//! use std::time::Duration;
//! use zkelect_core::*;
//!
//! let t = Timestamp::ZERO;
//! let mut r = Revoker::new("/svc/lock/_c_00000000000000aa-m_0000000003")?;
//! r.handle(t, Input::Session(SessionEvent::Connected {
//!     session_id: Some(SessionId(1)),
//!     timeout: Duration::from_secs(10),
//! }));
//! let write = r.poll_command().unwrap();
//! assert!(matches!(&write.request, Request::SetData { data, version: None, .. } if data == b"__REVOKE__"));
//! // The holder is already gone: a typed answer, not a retry.
//! r.handle(t, Input::Reply { op: write.op, result: Err(ZkCode::NoNode) });
//! assert!(matches!(r.poll_notice(), Some(Notice::RevocationFailed(RevocationError::Gone { .. }))));
//! assert!(r.is_done());
//! # Ok::<(), ConfigError>(())
//! ```

use std::collections::VecDeque;
use std::time::Duration;

use crate::command::{Command, OpId};
use crate::config::{validate_path, ConfigError, REVOKE_MESSAGE};
use crate::input::{Input, SessionEvent};
use crate::notice::{Notice, RevocationError, WrongReply};
use crate::time::Timestamp;
use crate::timer::Backoff;
use crate::zk::{Reply, Request, Verb, ZkCode};

/// The bounds of the backoff after a write lost to the connection.
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Where the request is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Not sent yet (or to be sent again once connected and the backoff over).
    Pending,
    /// Out, unanswered.
    Sent(OpId),
    /// Answered for good.
    Done(Result<(), RevocationError>),
}

/// One cooperative revocation request, as a pure machine (see the module
/// notes).
#[derive(Debug, Clone)]
pub struct Revoker {
    path: String,
    now: Timestamp,
    next_op: u64,
    state: State,
    connected: bool,
    retry_at: Option<Timestamp>,
    backoff: Backoff,
    notices: VecDeque<Notice>,
    commands: VecDeque<Command>,
}

impl Revoker {
    /// A request for the node at `path` (its full path: the queue's path,
    /// `/`, the node's name). A path the server would refuse is a
    /// [`ConfigError::InvalidPath`].
    pub fn new(path: impl Into<String>) -> Result<Self, ConfigError> {
        let path = path.into();
        validate_path(&path)?;
        Ok(Self {
            path,
            now: Timestamp::ZERO,
            next_op: 1,
            state: State::Pending,
            connected: false,
            retry_at: None,
            backoff: Backoff::new(0x510e_527f_ade6_82d1),
            notices: VecDeque::new(),
            commands: VecDeque::new(),
        })
    }

    /// The node asked to let go.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The outcome, once answered.
    pub fn outcome(&self) -> Option<&Result<(), RevocationError>> {
        match &self.state {
            State::Done(outcome) => Some(outcome),
            _ => None,
        }
    }

    /// Answered (delivered or failed): nothing more will happen.
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done(_))
    }

    /// Answered with an error.
    pub fn is_failed(&self) -> bool {
        matches!(self.state, State::Done(Err(_)))
    }

    /// Feeds one input.
    pub fn handle(&mut self, now: Timestamp, input: Input) {
        self.now = self.now.max(now);
        if self.is_done() {
            return;
        }
        match input {
            Input::Reply { op, result } => self.on_reply(op, result),
            Input::Watch(_) => {}
            Input::Session(SessionEvent::Connected { .. }) => self.connected = true,
            Input::Session(SessionEvent::Disconnected | SessionEvent::Expired) => {
                self.connected = false;
            }
            Input::Session(SessionEvent::AuthFailed) => {
                self.finish(Err(RevocationError::Refused {
                    path: self.path.clone(),
                    code: ZkCode::AuthFailed,
                }))
            }
            Input::Session(SessionEvent::Closed) => self.finish(Err(RevocationError::Closed)),
        }
        self.advance();
    }

    /// Fires the retry if it is due.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        self.now = self.now.max(now);
        if self.retry_at.is_some_and(|at| at <= self.now) {
            self.retry_at = None;
        }
        self.advance();
    }

    /// Gives up: a request not yet answered ends as [`RevocationError::Closed`]
    /// (a write already out may still land).
    pub fn close(&mut self, now: Timestamp) {
        self.now = self.now.max(now);
        if !self.is_done() {
            self.finish(Err(RevocationError::Closed));
        }
    }

    /// The next notice.
    #[must_use]
    pub fn poll_notice(&mut self) -> Option<Notice> {
        self.notices.pop_front()
    }

    /// The next command.
    #[must_use]
    pub fn poll_command(&mut self) -> Option<Command> {
        self.commands.pop_front()
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        match self.state {
            State::Pending => self.retry_at,
            _ => None,
        }
    }

    fn advance(&mut self) {
        if self.state == State::Pending && self.connected && self.retry_at.is_none() {
            let op = OpId(self.next_op);
            self.next_op += 1;
            self.commands.push_back(Command {
                op,
                request: Request::SetData {
                    path: self.path.clone(),
                    data: REVOKE_MESSAGE.to_vec(),
                    version: None,
                },
            });
            self.state = State::Sent(op);
        }
    }

    fn on_reply(&mut self, op: OpId, result: Result<Reply, ZkCode>) {
        if self.state != State::Sent(op) {
            return;
        }
        match result {
            Ok(Reply::Set(_)) => self.finish(Ok(())),
            Ok(other) => self.finish(Err(RevocationError::WrongReply(WrongReply {
                request: Verb::SetData,
                reply: other.kind(),
                path: self.path.clone(),
            }))),
            Err(ZkCode::NoNode) => self.finish(Err(RevocationError::Gone {
                path: self.path.clone(),
            })),
            Err(code) if code.is_fatal() => self.finish(Err(RevocationError::Refused {
                path: self.path.clone(),
                code,
            })),
            Err(_) => {
                // Lost to the connection (or a code no retry is known to
                // fix soon): write again after a backoff, the same bytes.
                self.state = State::Pending;
                self.retry_at = Some(self.now + self.backoff.next_delay(BACKOFF_MIN, BACKOFF_MAX));
            }
        }
    }

    fn finish(&mut self, outcome: Result<(), RevocationError>) {
        self.notices.push_back(match &outcome {
            Ok(()) => Notice::RevocationDelivered {
                path: self.path.clone(),
            },
            Err(e) => Notice::RevocationFailed(e.clone()),
        });
        self.state = State::Done(outcome);
        self.retry_at = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zk::{SessionId, Stat};

    const NODE: &str = "/svc/lock/_c_00000000000000aa-m_0000000003";

    fn reply(op: OpId, result: Result<Reply, ZkCode>) -> Input {
        Input::Reply { op, result }
    }

    fn connected() -> Input {
        Input::Session(SessionEvent::Connected {
            session_id: Some(SessionId(1)),
            timeout: Duration::from_secs(10),
        })
    }

    #[test]
    fn a_request_is_written_once_connected_and_delivered() {
        let t = Timestamp::from_millis;
        let mut r = Revoker::new(NODE).unwrap();
        r.handle(t(0), Input::Session(SessionEvent::Disconnected));
        assert!(r.poll_command().is_none(), "nothing before a connection");
        r.handle(t(5), connected());
        let write = r.poll_command().unwrap();
        r.handle(t(6), reply(write.op, Ok(Reply::Set(Stat::default()))));
        assert_eq!(
            r.poll_notice(),
            Some(Notice::RevocationDelivered { path: NODE.into() })
        );
        assert_eq!(r.outcome(), Some(&Ok(())));
    }

    #[test]
    fn a_write_lost_to_the_connection_is_sent_again_after_a_backoff() {
        let t = Timestamp::from_millis;
        let mut r = Revoker::new(NODE).unwrap();
        r.handle(t(0), connected());
        let first = r.poll_command().unwrap();
        r.handle(t(1), reply(first.op, Err(ZkCode::ConnectionLoss)));
        assert!(r.poll_command().is_none(), "not at the same instant");
        let at = r.poll_timeout().unwrap();
        assert!(at > t(1));
        r.handle_timeout(at);
        let second = r.poll_command().unwrap();
        assert_eq!(second.request, first.request);
        // A stale answer to the first is ignored.
        r.handle(at, reply(first.op, Ok(Reply::Set(Stat::default()))));
        assert!(!r.is_done());
        r.handle(at, reply(second.op, Err(ZkCode::NoAuth)));
        assert!(matches!(
            r.poll_notice(),
            Some(Notice::RevocationFailed(RevocationError::Refused {
                code: ZkCode::NoAuth,
                ..
            }))
        ));
        assert!(r.is_failed());
    }

    /// A write answered with another kind's reply (no server sends one:
    /// the transport is broken) is not taken as delivered.
    #[test]
    fn a_reply_of_the_wrong_kind_is_a_typed_failure_not_a_delivery() {
        let t = Timestamp::from_millis;
        let mut r = Revoker::new(NODE).unwrap();
        r.handle(t(0), connected());
        let write = r.poll_command().unwrap();
        r.handle(t(1), reply(write.op, Ok(Reply::Exists(None))));
        let error = RevocationError::WrongReply(WrongReply {
            request: Verb::SetData,
            reply: Verb::Exists,
            path: NODE.into(),
        });
        assert_eq!(r.poll_notice(), Some(Notice::RevocationFailed(error)));
        assert!(r.is_failed());
        assert_eq!(r.poll_timeout(), None);
    }

    #[test]
    fn a_bad_path_is_refused_and_a_close_gives_up() {
        assert!(Revoker::new("no-slash").is_err());
        let mut r = Revoker::new(NODE).unwrap();
        r.close(Timestamp::ZERO);
        assert_eq!(
            r.poll_notice(),
            Some(Notice::RevocationFailed(RevocationError::Closed))
        );
        assert!(r.is_done());
    }
}
