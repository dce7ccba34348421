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

pub use crate::net::Link;
use crate::zk::ZkModel;

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
