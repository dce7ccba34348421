//! The client-library rules the world applies to every simulated process,
//! separated so they can be tested against the model alone.

use std::time::Duration;

use zkelect_core::{SessionId, Timestamp};

use crate::zk::ZkModel;

/// One connection's two directions, each FIFO: a message never overtakes one
/// sent earlier in the same direction, so a watch event the server sent before
/// a reply reaches the client before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Link {
    to_server_tail: Timestamp,
    to_client_tail: Timestamp,
}

impl Link {
    /// When a message sent to the server now, with this latency, arrives.
    pub fn to_server(&mut self, now: Timestamp, latency: Duration) -> Timestamp {
        self.to_server_tail = (now + latency).max(self.to_server_tail);
        self.to_server_tail
    }

    /// When a message sent to the client now, with this latency, arrives.
    pub fn to_client(&mut self, now: Timestamp, latency: Duration) -> Timestamp {
        self.to_client_tail = (now + latency).max(self.to_client_tail);
        self.to_client_tail
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

/// Reconnects `session` (if any) to the server at `now`.
pub fn reconnect(
    zk: &mut ZkModel,
    now: Timestamp,
    session: Option<SessionId>,
    requested: Duration,
) -> Reconnected {
    match session {
        Some(s) if zk.session_alive(s) => {
            zk.touch(now, s);
            Reconnected::Same(s)
        }
        Some(_) => {
            let (new, timeout) = zk.open_session(now, requested, None);
            Reconnected::Expired { new, timeout }
        }
        None => {
            let (session, timeout) = zk.open_session(now, requested, None);
            Reconnected::New { session, timeout }
        }
    }
}
