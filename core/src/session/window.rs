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
//!
//! Two rules order a burst so that its first answers teach the rest:
//!
//! - **Under way first.** A machine that has had an answer (and has no
//!   request of its start still waiting) is under way; its requests go
//!   before those of machines that have had none. A machine's own requests
//!   never overtake one another: until its first answer, and while any of
//!   its first requests waits, it queues with the machines not yet started.
//! - **Opening.** The window opens at [`OPENING`] requests and widens by
//!   one with every answer that proves contact, up to `limit`: it doubles
//!   every round trip, so a full window is ten round trips away.
//!
//! Why: ten thousand elections under one missing parent path all send their
//! create at once. Sent a full window at a time, and with the parents'
//! creates queued behind the thousands of creates not yet sent, every one
//! of them fails, makes the parent itself (one more request, `NodeExists`)
//! and tries again: six requests per start instead of four (measured). With
//! both rules, the first machine's answers come back while a handful of
//! creates are out, its parent creates go next, and the thousands that
//! follow find the path made.

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

/// Requests out at once at the start of a session, before any answer (the
/// window widens by one with every answer that proves contact).
pub const OPENING: usize = 1;

/// Which line a machine's request waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Line {
    /// The machine is under way (it has had an answer, and no request of
    /// its start waits): ahead of machines not yet started.
    UnderWay,
    /// The machine has had no answer yet, or one of its first requests
    /// still waits.
    Starting,
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
    /// How many may be out now: [`OPENING`] at first, one more per answer
    /// that proved contact, up to `limit`.
    open: usize,
    /// The last session op id given.
    last_op: u64,
    /// Every request submitted and not yet answered, by session op id.
    table: BTreeMap<u64, InFlight>,
    /// Requests of machines under way waiting for a place, in order.
    under_way: VecDeque<(u64, Request)>,
    /// Requests of machines not yet under way waiting for a place, in order.
    starting: VecDeque<(u64, Request)>,
    /// The probe, waiting to be polled: it never waits for a place.
    probe: Option<(u64, Request)>,
    /// Machines' requests out.
    out: usize,
}

impl Window {
    pub(super) fn new(limit: usize) -> Self {
        let limit = limit.max(1);
        Self {
            limit,
            open: OPENING.min(limit),
            last_op: 0,
            table: BTreeMap::new(),
            under_way: VecDeque::new(),
            starting: VecDeque::new(),
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

    /// Queues a machine's request behind every other of its line.
    pub(super) fn submit(&mut self, sender: Sender, request: Request, line: Line) {
        let op = self.mint(sender);
        match line {
            Line::UnderWay => self.under_way.push_back((op, request)),
            Line::Starting => self.starting.push_back((op, request)),
        }
    }

    /// An answer proved contact: one more request may be out, up to the
    /// limit.
    pub(super) fn widen(&mut self) {
        self.open = (self.open + 1).min(self.limit);
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

    /// The next request to send and its line (`None` for the probe): the
    /// probe first, then the machines under way, then those starting, each
    /// line in order, while fewer than the window's opening are out. `now`
    /// and `span` are stamped on it.
    pub(super) fn poll(&mut self, now: Timestamp, span: u64) -> Option<(Command, Option<Line>)> {
        let (op, request, line) = match self.probe.take() {
            Some((op, request)) => (op, request, None),
            None if self.out < self.open => {
                let (line, queue) = if self.under_way.is_empty() {
                    (Line::Starting, &mut self.starting)
                } else {
                    (Line::UnderWay, &mut self.under_way)
                };
                let (op, request) = queue.pop_front()?;
                if queue.is_empty() && queue.capacity() > 0 {
                    // Give a burst's buffer back.
                    *queue = VecDeque::new();
                }
                self.out += 1;
                (op, request, Some(line))
            }
            None => return None,
        };
        if let Some(flight) = self.table.get_mut(&op) {
            flight.sent_at = now;
            flight.span = span;
            flight.out = true;
        }
        Some((
            Command {
                op: OpId(op),
                request,
            },
            line,
        ))
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
        self.under_way.len() + self.starting.len() + usize::from(self.probe.is_some())
    }
}
