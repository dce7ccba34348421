//! The session's requests: one op-id space, the table of requests in
//! flight, and the window that keeps at most so many of them out at once.
//!
//! Each machine mints its own [`OpId`]s; the session gives every request an
//! op id of its own (the transport sees only those) and answers the
//! machine that sent it under the machine's id.
//!
//! Every request out has a deadline, its send plus the session's request
//! timeout: past it, the session answers it `OperationTimeout` itself (a
//! later answer from the transport is then no answer). The bound is the
//! session's decision, not each transport's, so the simulator runs it and
//! a driver needs no timer per request, only the session's one deadline.
//!
//! At most `limit` requests are out at once; the rest wait here, in order,
//! as plain requests. A burst (ten thousand elections joining at once)
//! would otherwise hold a task and a client future for every request until
//! the server answers, memory the allocator keeps after the burst. A wider
//! window buys no throughput: a ZooKeeper server stops reading a
//! connection once 1,000 requests are in its pipeline
//! (`globalOutstandingLimit`). Measured at 10,000 elections on one session,
//! a window of 10,000 started them no sooner and left every idle recipe
//! more of the client library's request tables, which keep the burst's
//! high-water mark (bench/README.md, "Many elections", gives the runs and
//! the command). The session's probe never waits here.
//!
//! Three rules order the requests waiting here: the first two so that a
//! burst's first answers teach the rest, the third so that no machine waits
//! for ever.
//!
//! - **Under way first.** A machine that has had an answer (and has no
//!   request of its start still waiting) is under way; its requests go
//!   before those of machines that have had none. A machine's own requests
//!   never overtake one another: until its first answer, and while any of
//!   its first requests waits, it queues with the machines not yet started
//!   (so all its waiting requests are in one line, in order).
//! - **Opening.** The window opens at [`OPENING`] requests and widens by
//!   one with every answer that proves contact, up to `limit`: it doubles
//!   every round trip, so a full window is ten round trips away.
//! - **A share for starting machines.** While a starting machine's request
//!   waits, at least one of every [`STARTING_EVERY`] machines' requests sent
//!   is a starting machine's. Under way first alone would let machines
//!   under way that keep the window full (observers of a busy queue
//!   relisting at every change) hold a starting machine back for as long
//!   as they keep it full, for ever in principle. With the share, the
//!   first request of the starting line goes within [`STARTING_EVERY`]
//!   sends, so the `p`-th in that line goes within `p` × [`STARTING_EVERY`]
//!   sends, and a request under way waits at most one send more than it
//!   would with under way first alone. The probe is not counted: it never
//!   waits.
//!
//! Why: ten thousand elections under one missing parent path all send their
//! create at once. Sent a full window at a time, and with the parents'
//! creates queued behind the thousands of creates not yet sent, every one
//! of them fails, makes the parent itself (one more request, `NodeExists`)
//! and tries again: six requests per start instead of four (measured). With
//! the first two rules, the first machine's answers come back while a
//! handful of creates are out, its parent creates go next, and the
//! thousands that follow find the path made. The share costs that nothing:
//! while the window opens, every answer frees a place and widens the window
//! by one, so the line under way (one request per answer at most) is
//! empty at almost every send and the starting line goes anyway; a parent's
//! create waits at most the one send the share takes.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

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

/// While a starting machine's request waits, at least one machine request
/// in every this many sent is a starting machine's: the first request of
/// the starting line waits behind at most `STARTING_EVERY - 1` requests of
/// machines under way.
pub const STARTING_EVERY: usize = 4;

/// The deadline queue's buffer is kept up to this many entries when it
/// empties.
const DUE_KEPT: usize = 64;

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
    /// Past this, the session answers it `OperationTimeout` (set when it
    /// goes out, if the session knows a request timeout then).
    pub(super) deadline: Option<Timestamp>,
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
    /// Requests of machines under way sent in a row while the starting line
    /// waited: at `STARTING_EVERY - 1`, the starting line goes next.
    passed: usize,
    /// The deadlines of the requests out, earliest first, its front always
    /// a request still out (answered ones further back are skipped when
    /// they reach the front). A queue, not a tree: every request shares
    /// one bound and `now` only grows, so deadlines come in send order and
    /// each goes on the back; a tree's insert and remove per request were
    /// 4 % of a simulated run. Only a reconnect to a shorter negotiated
    /// timeout can make one due before one sent earlier: it is put in its
    /// place.
    due: VecDeque<(Timestamp, u64)>,
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
            passed: 0,
            due: VecDeque::new(),
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
                deadline: None,
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
    /// line in order, while fewer than the window's opening are out; but
    /// the starting line's turn comes at least once in every
    /// [`STARTING_EVERY`] sends while it waits. `now` and `span` are stamped
    /// on it, and its deadline, `now + bound`, if there is a bound.
    pub(super) fn poll(
        &mut self,
        now: Timestamp,
        span: u64,
        bound: Option<Duration>,
    ) -> Option<(Command, Option<Line>)> {
        let (op, request, line) = match self.probe.take() {
            Some((op, request)) => (op, request, None),
            None if self.out < self.open => {
                let line = self.next_line()?;
                let queue = match line {
                    Line::UnderWay => &mut self.under_way,
                    Line::Starting => &mut self.starting,
                };
                let (op, request) = queue.pop_front()?;
                if queue.is_empty() && queue.capacity() > 0 {
                    // Give a burst's buffer back.
                    *queue = VecDeque::new();
                }
                self.passed = match line {
                    Line::UnderWay if !self.starting.is_empty() => self.passed + 1,
                    Line::UnderWay | Line::Starting => 0,
                };
                self.out += 1;
                (op, request, Some(line))
            }
            None => return None,
        };
        if let Some(flight) = self.table.get_mut(&op) {
            flight.sent_at = now;
            flight.span = span;
            flight.out = true;
            flight.deadline = bound.map(|b| now + b);
            if let Some(deadline) = flight.deadline {
                if self.due.back().is_none_or(|&(d, _)| d <= deadline) {
                    self.due.push_back((deadline, op));
                } else {
                    let at = self.due.partition_point(|&(d, _)| d <= deadline);
                    self.due.insert(at, (deadline, op));
                }
            }
        }
        Some((
            Command {
                op: OpId(op),
                request,
            },
            line,
        ))
    }

    /// The line whose turn it is, if any request waits: under way first,
    /// unless the starting line has been passed over `STARTING_EVERY - 1`
    /// times in a row.
    fn next_line(&self) -> Option<Line> {
        match (self.under_way.is_empty(), self.starting.is_empty()) {
            (true, true) => None,
            (false, true) => Some(Line::UnderWay),
            (true, false) => Some(Line::Starting),
            (false, false) if self.passed + 1 >= STARTING_EVERY => Some(Line::Starting),
            (false, false) => Some(Line::UnderWay),
        }
    }

    /// Takes the request `op` answers, if it is out (an answer to a request
    /// never sent, or answered already, is no answer).
    pub(super) fn answer(&mut self, op: OpId) -> Option<InFlight> {
        let flight = match self.table.entry(op.0) {
            Entry::Occupied(e) if e.get().out => e.remove(),
            _ => return None,
        };
        // Keep the front a request still out (most often the front was
        // this one: answers mostly come in send order).
        while self
            .due
            .front()
            .is_some_and(|(_, o)| *o == op.0 || !self.table.get(o).is_some_and(|f| f.out))
        {
            self.due.pop_front();
        }
        if self.due.is_empty() && self.due.capacity() > DUE_KEPT {
            // Give a burst's buffer back; a small one is kept, as most
            // sessions have a few requests out at a time.
            self.due = VecDeque::new();
        }
        if matches!(flight.sender, Sender::Machine { .. }) {
            self.out = self.out.saturating_sub(1);
        }
        Some(flight)
    }

    /// Drops every request still waiting for a place, the probe's too: a
    /// session that ended by itself sends nothing more (what is out is
    /// still answered, and dropped then).
    pub(super) fn drop_waiting(&mut self) {
        let waiting = self.under_way.drain(..).chain(self.starting.drain(..));
        for (op, _) in waiting.chain(self.probe.take()) {
            self.table.remove(&op);
        }
        self.under_way = VecDeque::new();
        self.starting = VecDeque::new();
        self.passed = 0;
    }

    /// The earliest deadline of a request out.
    pub(super) fn next_due(&self) -> Option<Timestamp> {
        self.due.front().map(|&(at, _)| at)
    }

    /// A request out whose deadline is `now` or before, earliest first; it
    /// stays out until it is answered ([`answer`](Self::answer)).
    pub(super) fn overdue(&self, now: Timestamp) -> Option<OpId> {
        self.due
            .front()
            .filter(|&&(at, _)| at <= now)
            .map(|&(_, op)| OpId(op))
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn request() -> Request {
        Request::Sync { path: "/q".into() }
    }

    fn machine(m: u64) -> Sender {
        Sender::Machine {
            machine: MachineId(m),
            op: OpId(0),
        }
    }

    /// A window whose every request out is answered before the next send
    /// (one place), with `under_way` requests under way waiting: the line
    /// of sends, `U` for a machine under way and `S` for one starting.
    fn sends(window: &mut Window, n: usize) -> String {
        let mut line = String::new();
        for _ in 0..n {
            let Some((command, sent)) = window.poll(Timestamp::ZERO, 1, None) else {
                break;
            };
            line.push(match sent {
                Some(Line::UnderWay) => 'U',
                Some(Line::Starting) => 'S',
                None => 'P',
            });
            window.answer(command.op).expect("out");
        }
        line
    }

    #[test]
    fn a_start_waits_behind_at_most_three_requests_under_way() {
        assert_eq!(STARTING_EVERY, 4);
        let mut w = Window::new(1);
        // Machines under way keep their line full: twenty requests wait.
        for m in 0..20 {
            w.submit(machine(m), request(), Line::UnderWay);
        }
        // Two machines start.
        w.submit(machine(100), request(), Line::Starting);
        w.submit(machine(101), request(), Line::Starting);
        // Under way first, but each start's turn comes in every fourth
        // send; the probe goes at once and is not counted.
        assert_eq!(sends(&mut w, 4), "UUUS");
        w.submit_probe(request());
        assert_eq!(sends(&mut w, 5), "PUUUS");
        // The starting line is empty: the machines under way go alone.
        assert_eq!(sends(&mut w, 6), "UUUUUU");
        // A start arriving now waits behind three, not the eight left.
        w.submit(machine(102), request(), Line::Starting);
        assert_eq!(sends(&mut w, 5), "UUUSU");
        assert_eq!(sends(&mut w, 10), "UUUU");
        assert_eq!(w.waiting(), 0);
    }

    #[test]
    fn with_nothing_under_way_starts_go_in_order() {
        let mut w = Window::new(1);
        for m in 0..3 {
            w.submit(machine(m), request(), Line::Starting);
        }
        let first = w.poll(Timestamp::ZERO, 1, None).expect("a request");
        assert_eq!(first.1, Some(Line::Starting));
        // Full (one place): nothing more until the answer.
        assert!(w.poll(Timestamp::ZERO, 1, None).is_none());
        w.answer(first.0.op).expect("out");
        assert_eq!(sends(&mut w, 5), "SS");
    }

    /// One input to the window.
    #[derive(Debug, Clone)]
    enum Step {
        /// A machine's request, in the line under way or starting.
        Submit { under_way: bool },
        /// The probe.
        Probe,
        /// One poll.
        Poll,
        /// The answer of the `pick`-th request out, proving contact or not.
        Answer { pick: usize, contact: bool },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => any::<bool>().prop_map(|under_way| Step::Submit { under_way }),
            1 => Just(Step::Probe),
            6 => Just(Step::Poll),
            3 => (0usize..64, any::<bool>())
                .prop_map(|(pick, contact)| Step::Answer { pick, contact }),
        ]
    }

    /// What the test knows of a request waiting in the starting line.
    struct Waiting {
        /// Its place in the line when it came (1 = first).
        place: usize,
        /// Machines' requests sent since it came.
        since: usize,
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1_024))]

        /// Under any interleaving of submissions in either line, probes,
        /// polls and answers: the `p`-th request of the starting line is
        /// sent within `p` × `STARTING_EVERY` machines' sends; the first
        /// of the starting line waits behind at most `STARTING_EVERY - 1`
        /// requests under way, and the first under way behind at most one
        /// start; each line goes in order; under way goes first unless the
        /// starting line has had its share; the window holds.
        #[test]
        fn a_waiting_request_is_sent_within_the_bound(
            limit in 1usize..6,
            steps in proptest::collection::vec(step(), 1..300),
        ) {
            let mut w = Window::new(limit);
            let mut under_way: VecDeque<u64> = VecDeque::new();
            let mut starting: VecDeque<u64> = VecDeque::new();
            let mut waiting: BTreeMap<u64, Waiting> = BTreeMap::new();
            let mut out: Vec<OpId> = Vec::new();
            let mut machines_out = 0usize;
            let mut opening = OPENING.min(limit);
            // Machines' sends from under way in a row while a start waited.
            let mut passed = 0usize;
            // Machines' sends while the first under way waited.
            let mut under_way_head = 0usize;
            let mut next = 0u64;
            for s in steps {
                match s {
                    Step::Submit { under_way: true } => {
                        next += 1;
                        w.submit(machine(next), request(), Line::UnderWay);
                        under_way.push_back(w.last_op);
                    }
                    Step::Submit { under_way: false } => {
                        next += 1;
                        w.submit(machine(next), request(), Line::Starting);
                        starting.push_back(w.last_op);
                        waiting.insert(w.last_op, Waiting { place: starting.len(), since: 0 });
                    }
                    Step::Probe => w.submit_probe(request()),
                    Step::Answer { pick, contact } => {
                        if out.is_empty() {
                            continue;
                        }
                        let op = out.remove(pick % out.len());
                        let flight = w.answer(op).expect("out");
                        if flight.sender != Sender::Probe {
                            machines_out -= 1;
                        }
                        if contact {
                            w.widen();
                            opening = (opening + 1).min(limit);
                        }
                    }
                    Step::Poll => {
                        let had = (!under_way.is_empty(), !starting.is_empty());
                        let Some((command, line)) = w.poll(Timestamp::ZERO, 1, None) else {
                            prop_assert!(
                                w.probe.is_none()
                                    && (machines_out >= opening || (!had.0 && !had.1)),
                                "nothing sent with room and requests waiting"
                            );
                            continue;
                        };
                        out.push(command.op);
                        let Some(line) = line else {
                            continue;
                        };
                        machines_out += 1;
                        prop_assert!(machines_out <= opening && opening <= limit);
                        match line {
                            Line::UnderWay => {
                                prop_assert_eq!(under_way.pop_front(), Some(command.op.0), "in order");
                                prop_assert!(passed < STARTING_EVERY - 1 || !had.1, "the share skipped");
                                passed = if had.1 { passed + 1 } else { 0 };
                                under_way_head = 0;
                            }
                            Line::Starting => {
                                prop_assert_eq!(starting.pop_front(), Some(command.op.0), "in order");
                                prop_assert!(
                                    !had.0 || passed == STARTING_EVERY - 1,
                                    "a start overtook machines under way before its turn"
                                );
                                passed = 0;
                                if had.0 {
                                    under_way_head += 1;
                                    prop_assert!(under_way_head <= 1, "under way held back twice");
                                }
                                let gone = waiting.remove(&command.op.0).expect("waiting");
                                prop_assert!(
                                    gone.since < gone.place * STARTING_EVERY,
                                    "the {}-th start went after {} sends",
                                    gone.place,
                                    gone.since + 1
                                );
                            }
                        }
                        for still in waiting.values_mut() {
                            still.since += 1;
                        }
                        prop_assert!(
                            passed < STARTING_EVERY,
                            "{} sends under way in a row while a start waited",
                            passed
                        );
                    }
                }
            }
        }
    }
}
