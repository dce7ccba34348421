//! The session's requests: one op-id space, the table of requests in
//! flight, and the window that keeps at most so many of them out at once.
//!
//! Each machine mints its own [`OpId`]s; the session gives every request an
//! op id of its own (the transport sees only those) and answers the
//! machine that sent it under the machine's id.
//!
//! At most `limit` requests are out at once; the rest wait here, in order,
//! as plain requests. A burst (ten thousand elections joining at once)
//! would otherwise hold a task and a client future for every request until
//! the server answers, memory the allocator keeps after the burst. It costs
//! no throughput: a ZooKeeper server reads no more from its connections
//! while 1,000 requests are outstanding (`globalOutstandingLimit`). The
//! session's probe never waits here.

use std::collections::{BTreeMap, VecDeque};

use crate::command::{Command, OpId};
use crate::session::machine::MachineId;
use crate::session::watches::Armed;
use crate::time::Timestamp;
use crate::zk::Request;

/// Who sent a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sender {
    /// A machine, under its own op id.
    Machine {
        /// The machine.
        machine: MachineId,
        /// The machine's own id of the request.
        op: OpId,
    },
    /// The session's liveness probe.
    Probe,
}

impl Sender {
    /// The machine that sent the request, unless it is the session's probe.
    pub fn machine(self) -> Option<MachineId> {
        match self {
            Self::Machine { machine, .. } => Some(machine),
            Self::Probe => None,
        }
    }
}

/// One request of the session, from its submission to its answer.
#[derive(Debug, Clone)]
pub(super) struct InFlight {
    pub(super) sender: Sender,
    /// The watch it arms, if any.
    pub(super) arms: Option<Armed>,
    /// When it went out (the latest `now` the session had seen then: never
    /// after the real moment, so the contact its answer proves is never
    /// overstated).
    pub(super) sent_at: Timestamp,
    /// The span it went out in.
    pub(super) span: u64,
    /// Polled by the driver (out), or still waiting for a place.
    pub(super) out: bool,
}

/// The session's requests.
#[derive(Debug, Clone)]
pub(super) struct Window {
    limit: usize,
    /// The last session op id given.
    last_op: u64,
    /// Every request submitted and not yet answered, by session op id.
    table: BTreeMap<u64, InFlight>,
    /// Machines' requests waiting for a place, in order.
    queue: VecDeque<(u64, Request)>,
    /// The probe, waiting to be polled: it never waits for a place.
    probe: Option<(u64, Request)>,
    /// Machines' requests out.
    out: usize,
}

impl Window {
    pub(super) fn new(limit: usize) -> Self {
        Self {
            limit: limit.max(1),
            last_op: 0,
            table: BTreeMap::new(),
            queue: VecDeque::new(),
            probe: None,
            out: 0,
        }
    }

    fn mint(&mut self, sender: Sender) -> u64 {
        self.last_op += 1;
        self.table.insert(
            self.last_op,
            InFlight {
                sender,
                arms: None,
                sent_at: Timestamp::ZERO,
                span: 0,
                out: false,
            },
        );
        self.last_op
    }

    /// Queues a machine's request behind every other.
    pub(super) fn submit(&mut self, sender: Sender, request: Request) {
        let op = self.mint(sender);
        self.queue.push_back((op, request));
    }

    /// Records the watch a request out arms (filed when it goes out: one
    /// still waiting here cannot have set a watch).
    pub(super) fn arms(&mut self, op: OpId, arms: Option<Armed>) {
        if let Some(flight) = self.table.get_mut(&op.0) {
            flight.arms = arms;
        }
    }

    /// Queues the probe, ahead of every machine's request.
    pub(super) fn submit_probe(&mut self, request: Request) {
        let op = self.mint(Sender::Probe);
        self.probe = Some((op, request));
    }

    /// The next request to send: the probe first, then the machines' in
    /// order while fewer than `limit` are out. `now` and `span` are stamped
    /// on it.
    pub(super) fn poll(&mut self, now: Timestamp, span: u64) -> Option<Command> {
        let (op, request) = match self.probe.take() {
            Some(probe) => probe,
            None if self.out < self.limit => {
                let next = self.queue.pop_front()?;
                self.out += 1;
                if self.queue.is_empty() && self.queue.capacity() > 0 {
                    // Give a burst's buffer back.
                    self.queue = VecDeque::new();
                }
                next
            }
            None => return None,
        };
        if let Some(flight) = self.table.get_mut(&op) {
            flight.sent_at = now;
            flight.span = span;
            flight.out = true;
        }
        Some(Command {
            op: OpId(op),
            request,
        })
    }

    /// Takes the request `op` answers, if it is out (an answer to a request
    /// never sent, or answered already, is no answer).
    pub(super) fn answer(&mut self, op: OpId) -> Option<InFlight> {
        if !self.table.get(&op.0).is_some_and(|f| f.out) {
            return None;
        }
        let flight = self.table.remove(&op.0)?;
        if matches!(flight.sender, Sender::Machine { .. }) {
            self.out = self.out.saturating_sub(1);
        }
        Some(flight)
    }

    /// Who sent `op`, while it is unanswered.
    pub(super) fn sender(&self, op: OpId) -> Option<Sender> {
        self.table.get(&op.0).map(|f| f.sender)
    }

    /// Requests out (the probe included).
    pub(super) fn out(&self) -> usize {
        self.table.values().filter(|f| f.out).count()
    }

    /// Requests waiting for a place.
    pub(super) fn waiting(&self) -> usize {
        self.queue.len() + usize::from(self.probe.is_some())
    }
}
