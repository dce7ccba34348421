//! One simulated process as the world keeps it: its machine, and on the
//! machine that hosts its session the client library's state.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use zkelect_core::{FencingToken, OpId, Request, SessionId, Timestamp};

use crate::foreign::Agent;

use super::routing::{Armed, Arming};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Conn {
    Connected,
    Disconnected,
}

/// A client's requests in flight by their op on the wire, in op order: a
/// map over a sorted vector (a client has a handful at a time, and a
/// `BTreeMap`'s node work was a percent of a run).
#[derive(Debug, Clone, Default)]
pub(super) struct InflightTable(Vec<(OpId, Inflight)>);

impl InflightTable {
    pub(super) fn insert(&mut self, op: OpId, sent: Inflight) {
        match self.0.binary_search_by_key(&op, |(o, _)| *o) {
            Ok(i) => self.0[i].1 = sent,
            Err(i) => self.0.insert(i, (op, sent)),
        }
    }

    pub(super) fn remove(&mut self, op: &OpId) -> Option<Inflight> {
        let i = self.0.binary_search_by_key(op, |(o, _)| *o).ok()?;
        Some(self.0.remove(i).1)
    }

    pub(super) fn get_mut(&mut self, op: &OpId) -> Option<&mut Inflight> {
        let i = self.0.binary_search_by_key(op, |(o, _)| *o).ok()?;
        self.0.get_mut(i).map(|(_, sent)| sent)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Inflight> + '_ {
        self.0.iter().map(|(_, sent)| sent)
    }

    pub(super) fn into_values(self) -> impl Iterator<Item = Inflight> {
        self.0.into_iter().map(|(_, sent)| sent)
    }
}

#[derive(Debug, Clone)]
pub(super) struct Inflight {
    pub(super) request: Rc<Request>,
    /// The server has it.
    pub(super) arrived: bool,
    /// The machine that sent it, and under which of its own ids (the wire
    /// id is the session's, see `hosting::wire`).
    pub(super) pid: usize,
    pub(super) op: OpId,
    /// The watch it arms, if any.
    pub(super) arms: Option<Armed>,
}

/// One machine, and — on the machine that hosts its session — the client
/// library and session: the connection fields below are read on the host
/// only (`host == pid`); a rider's stay at their defaults.
#[derive(Debug, Clone)]
pub(super) struct Proc {
    pub(super) c: Agent,
    /// The machine whose client and session this one runs on (itself,
    /// unless it rides on another's session).
    pub(super) host: usize,
    /// The queue it is a machine of (an index into `World::queues`).
    pub(super) queue: usize,
    /// On a host: the machines on its session (itself first), in pid order.
    pub(super) machines: Vec<usize>,
    /// On a host: per watched path and watch table, the machines armed since
    /// it last fired, each with its arming requests still unanswered (the
    /// driver's table: the server keeps one watch per session, path and kind).
    pub(super) watches: BTreeMap<Armed, BTreeMap<usize, Arming>>,
    pub(super) crashed: bool,
    pub(super) session: Option<SessionId>,
    pub(super) timeout: Duration,
    /// The timeout the client learned by its own handshake (zookeeper-async).
    pub(super) handshaken: Option<Duration>,
    /// When its start-up (against an ensemble) made its plan.
    pub(super) started: Option<Timestamp>,
    pub(super) conn: Conn,
    pub(super) gen: u64,
    pub(super) last_from_server: Timestamp,
    /// The last message sent on the current connection (request or ping).
    pub(super) last_to_server: Timestamp,
    /// When the current connection was made (zookeeper-client's ticks count from it).
    pub(super) connected_at: Timestamp,
    /// A ping is unanswered on the current connection.
    pub(super) ping_out: bool,
    /// The client library's next timer moment, if one is set.
    pub(super) tick_at: Option<Timestamp>,
    /// Requests sent on the current connection and not yet answered.
    pub(super) inflight: InflightTable,
    pub(super) paused_until: Option<Timestamp>,
    pub(super) resumed_at: Timestamp,
    /// When the client library's event thread is done with the events it has.
    pub(super) event_tail: Timestamp,
    /// Until when its event thread lags.
    pub(super) lag_until: Option<Timestamp>,
    pub(super) timer_at: Option<Timestamp>,
    pub(super) session_closed: bool,
    pub(super) writing: bool,
    /// The node an operator deleted (its name and czxid: a recreated
    /// container parent can give a new node the same name), and when.
    pub(super) revoked: Option<(String, Option<FencingToken>, Timestamp)>,
}

impl Proc {
    /// When an operator deleted the node this process still believes is
    /// its own ([`Process::revoked_at`](super::Process::revoked_at)).
    pub(super) fn revoked_at(&self) -> Option<Timestamp> {
        self.revoked
            .as_ref()
            .filter(|(node, token, _)| self.c.node() == Some(node) && self.c.token() == *token)
            .map(|(_, _, at)| *at)
    }
}
