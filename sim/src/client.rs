//! The client-library rules the world applies to every simulated process,
//! separated so they can be tested against the model alone.
//!
//! What a real ZooKeeper client does, and so what the world does for each
//! process: it pings every third of the session timeout; it declares the
//! connection lost when nothing came from the server for two thirds of it (its
//! read timeout) and fails every request in flight with `ConnectionLoss`; it
//! reconnects, and on reconnecting learns whether the server expired the session
//! meanwhile (then it reports `Expired` and opens a new session). The watches of
//! the old connection are gone after a reconnect: zookeeper-async does not set
//! them again, so neither does this model, and the core must re-arm them.

use std::time::Duration;

use zkelect_core::{SessionId, Timestamp};

use crate::zk::ZkModel;

/// One connection's two directions, each FIFO: a message never overtakes one
/// sent earlier in the same direction, so a watch event the server sent before
/// a reply reaches the client before it — unless the reply is sent with
/// [`Link::reply`]`(…, overtake = true)`, the reordering zookeeper-async shows at
/// its API (replies and watch events travel on different channels there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Link {
    to_server_tail: Timestamp,
    to_client_tail: Timestamp,
    reply_tail: Timestamp,
}

impl Link {
    /// When a message sent to the server now, with this latency, arrives.
    pub fn to_server(&mut self, now: Timestamp, latency: Duration) -> Timestamp {
        self.to_server_tail = (now + latency).max(self.to_server_tail);
        self.to_server_tail
    }

    /// When a message (watch event, ping answer) sent to the client now, with
    /// this latency, arrives.
    pub fn to_client(&mut self, now: Timestamp, latency: Duration) -> Timestamp {
        self.to_client_tail = (now + latency).max(self.to_client_tail);
        self.to_client_tail
    }

    /// When a reply sent to the client now, with this latency, arrives. Replies
    /// never overtake each other; with `overtake` a reply may overtake watch
    /// events sent before it.
    pub fn reply(&mut self, now: Timestamp, latency: Duration, overtake: bool) -> Timestamp {
        let at = if overtake {
            (now + latency).max(self.reply_tail)
        } else {
            self.to_client(now, latency)
        };
        self.reply_tail = self.reply_tail.max(at);
        at
    }
}

/// The client library's rule: nothing from the server for two thirds of the
/// session timeout means the connection is lost (the real client's read timeout).
pub fn connection_lost(now: Timestamp, last_from_server: Timestamp, timeout: Duration) -> bool {
    now.saturating_since(last_from_server) >= timeout * 2 / 3
}

/// What a client learns when it reconnects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reconnected {
    /// The same session is still alive.
    Same(SessionId),
    /// The server had expired the old session (reported to the application as
    /// `Expired`); a new one was opened.
    Expired {
        /// The new session.
        new: SessionId,
        /// Its negotiated timeout.
        timeout: Duration,
    },
    /// A first session.
    New {
        /// The session.
        session: SessionId,
        /// Its negotiated timeout.
        timeout: Duration,
    },
}

/// Reconnects `session` (if any) to the server at `now`, authenticating as
/// `identity` when a new session is opened. Reconnecting to a live session
/// replaces its connection, which drops the watches set over the old one.
pub fn reconnect(
    zk: &mut ZkModel,
    now: Timestamp,
    session: Option<SessionId>,
    requested: Duration,
    identity: Option<&str>,
) -> Reconnected {
    match session {
        Some(s) if zk.session_alive(s) => {
            zk.connection_closed(s);
            zk.touch(now, s);
            Reconnected::Same(s)
        }
        Some(_) => {
            let (new, timeout) = zk.open_session(now, requested, identity.map(str::to_owned));
            Reconnected::Expired { new, timeout }
        }
        None => {
            let (session, timeout) = zk.open_session(now, requested, identity.map(str::to_owned));
            Reconnected::New { session, timeout }
        }
    }
}

/// How a client library learns the session timeout it reports to the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutSource {
    /// From the session it opened (zookeeper-client, and the Java client).
    Session,
    /// From a handshake of its own on a throw-away connection to every server
    /// in the connect string, the smallest answer (zookeeper-async does not
    /// expose the negotiated value). With one server, the same value.
    Handshake,
}

/// A handshake on a throw-away connection (a ConnectRequest answered by a
/// ConnectResponse): the server opens a session for `requested`, the client
/// reads the negotiated timeout and closes it at once.
pub fn handshake(
    zk: &mut ZkModel,
    now: Timestamp,
    requested: Duration,
    identity: Option<&str>,
) -> Duration {
    let (session, timeout) = zk.open_session(now, requested, identity.map(str::to_owned));
    zk.close_session(session);
    timeout
}
