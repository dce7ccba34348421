//! What the world tells a [`Candidate`](crate::Candidate).

use std::time::Duration;

use crate::command::OpId;
use crate::zk::{Reply, SessionId, WatchEvent, ZkCode};

/// One input from the world, fed with [`Candidate::handle`](crate::Candidate::handle).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Input {
    /// The answer to a [`Command`](crate::Command) the machine emitted, matched by its [`OpId`].
    Reply {
        /// The command this answers.
        op: OpId,
        /// The server's answer or error.
        result: Result<Reply, ZkCode>,
    },
    /// A one-shot watch fired.
    Watch(WatchEvent),
    /// The client's connection or session changed.
    Session(SessionEvent),
}

/// A change in the client's connection or session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum SessionEvent {
    /// Connected, to a new session or back to the same one after a disconnect.
    ///
    /// Report `session_id` when the client knows it; when it does not (zookeeper-async),
    /// pass `None` and the machine learns it from its own node's `ephemeralOwner`.
    /// A `Connected` whose `session_id` differs from the one the machine knows is a
    /// new session, exactly as if `Expired` had come first.
    Connected {
        /// The session, if the client knows it.
        session_id: Option<SessionId>,
        /// The session timeout the server negotiated.
        timeout: Duration,
    },
    /// The connection dropped; the session may still be alive on the server.
    Disconnected,
    /// The session is gone; so are its ephemeral nodes and watches.
    Expired,
    /// The server refused the session's credentials, or a transport that
    /// must put them back on every new connection could not within the
    /// session timeout: either way the session cannot be used with them.
    AuthFailed,
    /// The client was closed by the application.
    Closed,
}
