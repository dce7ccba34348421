//! The `session` target: a [`Session`] carrying several machines (elections,
//! locks of every rule, observers) over the simulator's ZooKeeper model
//! ([`ZkModel`]), fed the simultaneous inputs of each instant in whatever
//! order the bytes pick.
//!
//! At each instant the ready inputs are: the session's timer if it is due,
//! an answer to any request out (the server's own, the server's applied and
//! then lost to `ConnectionLoss`, `ConnectionLoss` or `OperationTimeout`
//! without it, any other error), a watch event the server fired, an answer
//! held back by a dropped connection, and a few inputs from outside
//! (intents on any machine, a new machine, closing the session, a dropped
//! connection, a reconnect, an expiry). The bytes pick which goes first,
//! again and again, until nothing is ready; then time moves to the
//! session's timer or by a step the bytes choose. The server's tick is
//! drawn down to 1 ms, so negotiated timeouts of a few milliseconds occur.
//!
//! Virtual time must always advance, as [`Session`] promises: after any
//! call at `now`, [`Session::poll_timeout`] is later than `now`; an
//! instant's inputs run out (at most a bounded number of them); and a
//! request that fails with `ConnectionLoss` or `OperationTimeout` is not
//! sent again, the same request by the same sender, at the same instant
//! without a session event between. And no panic, debug assertions on; at
//! most the window's requests out, plus the probe.

use std::time::Duration;

use zkelect_core::{
    Candidate, Command, Config, ConnectionPolicy, Input, Machine, MachineId, Observer,
    ObserverConfig, Recipe, Request, Rule, Sender, Session, SessionConfig, SessionEvent, SessionId,
    Takeover, Timestamp, Verb, WatchEvent, WatchStrategy, ZkCode,
};
use zkelect_sim::zk::{ZkModel, ZkSettings};

use crate::candidate::CODES;
use crate::read::Bytes;

/// The queues: one recipe each, as every participant of a queue must agree.
const QUEUES: [(&str, Rule); 5] = [
    ("/q", Rule::Election { leaders: 1 }),
    ("/k", Rule::Election { leaders: 2 }),
    ("/l", Rule::Mutex),
    ("/s", Rule::Semaphore { permits: 2 }),
    ("/rw", Rule::Write),
];

/// Inputs any instant may take, whatever happens in it.
const SPIN: usize = 5_000;

/// Inputs each change at the server (a write, or an event already fired when
/// the instant starts) may add to an instant, per machine and per node a
/// machine may read: one change fans out to every machine watching the path,
/// and each reacts with a listing and, an observer, a read of every
/// participant's data. These are answers to new requests, not retries: a
/// fixed count would call a busy instant (a hundred machines rejoining one
/// queue after an expiry) a stall.
const REACTIONS: usize = 4;

/// Writes each machine may cause at one instant (its node, a stale node's
/// delete, a downgrade, a parent, a release, a rejoin), with a wide margin: a
/// loop that keeps writing is a stall too.
const WRITES_PER_MACHINE: usize = 16;

/// How many inputs from outside (intents, connection changes) an instant may
/// have at most.
const OUTSIDE_PER_INSTANT: usize = 3;

fn machine(b: &mut Bytes<'_>, n: u64) -> Machine {
    let (path, rule) = b.pick(&QUEUES);
    if b.u8() % 6 == 0 {
        let config = ObserverConfig::new(path, rule.recipe());
        let observer = Observer::new(config).unwrap_or_else(|e| panic!("{path}: {e}"));
        return Machine::observer(observer);
    }
    // A read-write lock's node is a reader or a writer.
    let rule = match rule {
        Rule::Write if b.bool() => Rule::Read,
        rule => rule,
    };
    let min = Duration::from_millis(1 + u64::from(b.u16() % 500));
    let config = Config::builder(path, format!("m{n}"))
        .rule(rule)
        .strategy(if b.bool() {
            WatchStrategy::Parent
        } else {
            WatchStrategy::Predecessor
        })
        .policy(if b.bool() {
            ConnectionPolicy::SessionAware
        } else {
            ConnectionPolicy::Standard
        })
        .takeover(if b.bool() {
            Takeover::OnNotification
        } else {
            Takeover::Relist
        })
        .nonce_seed(b.u64())
        .backoff(min, min * (1 + u32::from(b.u8() % 32)))
        .build()
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let candidate = Candidate::new(config);
    let mut m = if rule.recipe() == (Recipe::Election { leaders: 1 }) || b.bool() {
        Machine::election(candidate)
    } else {
        Machine::lock(candidate)
    };
    if b.u8() % 3 == 0 {
        m = m.with_close_timeout(Duration::from_millis(u64::from(b.u16() % 5_000)));
    }
    m
}

/// The world around the session: the server, the link, what is in flight.
struct World {
    s: Session,
    zk: ZkModel,
    now: Timestamp,
    /// The session id on the server, while there is one.
    sid: Option<SessionId>,
    connected: bool,
    requested: Duration,
    /// What the transport reports as the negotiated timeout, if not the
    /// server's (a broken or custom transport may report anything).
    reported: Option<Duration>,
    /// Requests polled and not yet answered.
    out: Vec<Command>,
    /// Answers decided but not yet delivered (a dropped connection's).
    late: Vec<(Command, Result<zkelect_core::Reply, ZkCode>)>,
    /// Watch events the server fired for this session, not yet delivered.
    fired: Vec<WatchEvent>,
    machines: Vec<MachineId>,
    added: u64,
    /// Failed requests of this instant and span: (sender, verb, path).
    failed: Vec<(Sender, Verb, String)>,
}

impl World {
    /// Drains the session and checks what must hold after every call.
    fn drain(&mut self) {
        let trace = std::env::var_os("ZKELECT_FUZZ_TRACE").is_some();
        while let Some(event) = self.s.poll_event() {
            if trace {
                eprintln!("  {event:?}");
            }
        }
        if trace {
            eprintln!("  next timeout {:?}", self.s.poll_timeout());
        }
        while let Some(cmd) = self.s.poll_command() {
            let sender = self.s.sender(cmd.op);
            if let Some(sender) = sender {
                let key = (sender, cmd.request.kind(), cmd.request.path().to_owned());
                assert!(
                    !self.failed.contains(&key),
                    "{sender:?} {:?} {} failed at {} and went out again at once",
                    key.1,
                    key.2,
                    self.now
                );
            }
            if self.connected {
                self.out.push(cmd);
            } else {
                // Sent on a connection that is down: lost at once.
                self.late.push((cmd, Err(ZkCode::ConnectionLoss)));
            }
        }
        if let Some(at) = self.s.poll_timeout() {
            assert!(at > self.now, "due at {at}, not after {}", self.now);
        }
        assert!(
            self.s.requests_out() <= self.s.config().requests_out() + 1,
            "{} requests out, the window is {}",
            self.s.requests_out(),
            self.s.config().requests_out()
        );
    }

    fn session_event(&mut self, event: SessionEvent) {
        if std::env::var_os("ZKELECT_FUZZ_TRACE").is_some() {
            eprintln!("{} {event:?}", self.now);
        }
        self.failed.clear();
        self.s.handle(self.now, Input::Session(event));
        self.drain();
    }

    fn connect(&mut self) {
        let (sid, timeout) = match self.sid {
            Some(sid) if self.zk.session_alive(sid) => {
                (sid, self.zk.session_timeout(sid).unwrap_or(self.requested))
            }
            _ => {
                if self.sid.is_some() {
                    self.session_event(SessionEvent::Expired);
                }
                let (sid, timeout) = self.zk.open_session(self.now, self.requested, None);
                self.sid = Some(sid);
                (sid, timeout)
            }
        };
        self.connected = true;
        self.session_event(SessionEvent::Connected {
            session_id: Some(sid),
            timeout: self.reported.unwrap_or(timeout),
        });
    }

    fn disconnect(&mut self, b: &mut Bytes<'_>) {
        if !self.connected {
            return;
        }
        self.connected = false;
        // Every request out fails; some reached the server first.
        for cmd in std::mem::take(&mut self.out) {
            if b.bool() {
                let _ = self.apply(&cmd.request);
            }
            self.late.push((cmd, Err(ZkCode::ConnectionLoss)));
        }
        self.fired.clear();
        self.session_event(SessionEvent::Disconnected);
    }

    fn apply(&mut self, request: &Request) -> Result<zkelect_core::Reply, ZkCode> {
        let Some(sid) = self.sid else {
            return Err(ZkCode::SessionExpired);
        };
        let (result, fired) = self.zk.apply(self.now, sid, request);
        self.fired.extend(
            fired
                .into_iter()
                .filter(|f| f.session == sid)
                .map(|f| f.event),
        );
        result
    }

    fn answer(&mut self, pick: usize, b: &mut Bytes<'_>) {
        let cmd = self.out.remove(pick);
        let result = match b.u8() % 10 {
            0..=4 => self.apply(&cmd.request),
            5 => {
                let _ = self.apply(&cmd.request);
                Err(ZkCode::ConnectionLoss)
            }
            6 => Err(ZkCode::ConnectionLoss),
            7 => Err(ZkCode::OperationTimeout),
            8 => Err(b.pick(&CODES)),
            _ => {
                let _ = self.apply(&cmd.request);
                Err(ZkCode::OperationTimeout)
            }
        };
        self.deliver(cmd, result);
    }

    fn deliver(&mut self, cmd: Command, result: Result<zkelect_core::Reply, ZkCode>) {
        let sender = self.s.sender(cmd.op);
        if std::env::var_os("ZKELECT_FUZZ_TRACE").is_some() {
            eprintln!("{} {sender:?} {:?} -> {result:?}", self.now, cmd.request);
        }
        let lost = matches!(
            result,
            Err(ZkCode::ConnectionLoss | ZkCode::OperationTimeout)
        );
        self.s.handle(self.now, Input::Reply { op: cmd.op, result });
        if let (true, Some(sender)) = (lost, sender) {
            self.failed
                .push((sender, cmd.request.kind(), cmd.request.path().to_owned()));
        }
        self.drain();
    }

    fn outside(&mut self, b: &mut Bytes<'_>) {
        let trace = std::env::var_os("ZKELECT_FUZZ_TRACE").is_some();
        let pick = |b: &mut Bytes<'_>, ids: &[MachineId]| {
            if ids.is_empty() {
                MachineId(1)
            } else {
                ids[b.below(ids.len())]
            }
        };
        let what = b.u8() % 12;
        if trace {
            eprintln!("{} outside {what}", self.now);
        }
        match what {
            0..=2 => {
                let id = pick(b, &self.machines);
                let _ = self.s.join(self.now, id);
                self.drain();
            }
            3 => {
                let id = pick(b, &self.machines);
                let rejoin = b.bool();
                let _ = self.s.resign(self.now, id, rejoin);
                self.drain();
            }
            4 => {
                let id = pick(b, &self.machines);
                let _ = self.s.close(self.now, id);
                self.drain();
            }
            5 => {
                self.added += 1;
                let m = machine(b, self.added);
                if trace {
                    eprintln!("  add {m:?}");
                }
                let id = self.s.add(self.now, m);
                self.machines.push(id);
                self.drain();
            }
            6 => {
                if b.u8() % 4 == 0 {
                    self.s.close_session(self.now);
                    self.drain();
                }
            }
            7 | 8 => self.disconnect(b),
            9 | 10 => {
                if !self.connected {
                    self.connect();
                }
            }
            _ => {
                // The server expires the session (the client learns it
                // when it reconnects).
                if let Some(sid) = self.sid {
                    self.zk.close_session(sid);
                    self.disconnect(b);
                }
            }
        }
    }

    /// One instant: the ready inputs in the order the bytes pick, until
    /// none is left.
    ///
    /// An instant must end ([`Spin`]). (Retries are checked apart, and at
    /// once: `drain` refuses a failed request sent again at the same instant.)
    fn instant(&mut self, b: &mut Bytes<'_>) {
        self.failed.clear();
        let mut outside = 0;
        let mut spin = Spin::new(
            self.now,
            self.zk.zxid(),
            self.fired.len(),
            self.machines.len(),
        );
        loop {
            spin.input(self.zk.zxid(), self.machines.len());
            let due = self.s.poll_timeout().is_some_and(|at| at <= self.now);
            let fixed = self.out.len() + self.fired.len() + self.late.len() + usize::from(due);
            let ready = fixed + OUTSIDE_PER_INSTANT - outside;
            if fixed == 0 && (outside == OUTSIDE_PER_INSTANT || b.u8() % 2 == 0) {
                return;
            }
            let mut pick = b.below(ready);
            if due {
                if pick == 0 {
                    if std::env::var_os("ZKELECT_FUZZ_TRACE").is_some() {
                        eprintln!("{} timeout", self.now);
                    }
                    self.s.handle_timeout(self.now);
                    self.drain();
                    continue;
                }
                pick -= 1;
            }
            if pick < self.out.len() {
                self.answer(pick, b);
                continue;
            }
            pick -= self.out.len();
            if pick < self.fired.len() {
                let event = self.fired.remove(pick);
                if std::env::var_os("ZKELECT_FUZZ_TRACE").is_some() {
                    eprintln!("{} {event:?}", self.now);
                }
                self.s.handle(self.now, Input::Watch(event));
                self.drain();
                continue;
            }
            pick -= self.fired.len();
            if pick < self.late.len() {
                let (cmd, result) = self.late.remove(pick);
                self.deliver(cmd, result);
                continue;
            }
            outside += 1;
            self.outside(b);
        }
    }
}

/// The count that tells a busy instant from a stall: an instant's inputs
/// may number [`SPIN`] plus, for each change at the server (a write there,
/// or an event already fired when the instant starts), one reaction of every
/// machine ([`REACTIONS`]); and its writes [`WRITES_PER_MACHINE`] per
/// machine. Panics past either.
struct Spin {
    now: Timestamp,
    zxid: i64,
    handled: usize,
    writes: usize,
    budget: usize,
}

impl Spin {
    fn new(now: Timestamp, zxid: i64, fired: usize, machines: usize) -> Self {
        Self {
            now,
            zxid,
            handled: 0,
            writes: 0,
            budget: SPIN + fired * Self::reaction(machines),
        }
    }

    /// What one change may cost: machines are only ever added, and each may
    /// read every node of its queue, its own and the others' (each machine
    /// has at most two there: its live node and one a lost reply orphaned).
    fn reaction(machines: usize) -> usize {
        REACTIONS * (machines + 1) * (2 * machines + 4)
    }

    /// Counts one input, the server at `zxid`, `machines` added so far.
    fn input(&mut self, zxid: i64, machines: usize) {
        // Each transaction the server applied since the last input.
        let applied = usize::try_from(zxid - self.zxid).unwrap_or(0);
        self.zxid = zxid;
        self.writes += applied;
        self.budget += applied * Self::reaction(machines);
        self.handled += 1;
        assert!(
            self.writes <= WRITES_PER_MACHINE * (machines + 1),
            "the instant {} took over {} writes from {machines} machines",
            self.now,
            self.writes
        );
        assert!(
            self.handled <= self.budget,
            "the instant {} took over {} inputs ({} writes, {machines} machines)",
            self.now,
            self.budget,
            self.writes
        );
    }
}

/// The target: see the module docs.
pub fn run(data: &[u8]) {
    let mut b = Bytes::new(data);
    let mut config = SessionConfig::new(b.u64());
    if b.bool() {
        config = config.with_requests_out(1 + b.below(6));
    }
    if b.bool() {
        config = config.with_close_timeout(Duration::from_millis(u64::from(b.u16())));
    }
    let tick = Duration::from_millis(1 + u64::from(b.u8() % 250));
    let zk = ZkModel::new(ZkSettings {
        tick,
        cversion_start: if b.bool() { i32::MAX - 4 } else { 0 },
        ..ZkSettings::default()
    });
    let requested = Duration::from_millis(1 + u64::from(b.u16()));
    let reported = match b.u8() % 16 {
        0 => Some(Duration::MAX),
        1 => Some(Duration::ZERO),
        2 => Some(Duration::from_millis(u64::from(b.u32()))),
        _ => None,
    };
    let mut w = World {
        s: Session::new(config),
        zk,
        now: Timestamp::ZERO,
        sid: None,
        connected: false,
        requested,
        reported,
        out: Vec::new(),
        late: Vec::new(),
        fired: Vec::new(),
        machines: Vec::new(),
        added: 0,
        failed: Vec::new(),
    };
    for _ in 0..1 + b.below(5) {
        w.added += 1;
        let m = machine(&mut b, w.added);
        let id = w.s.add(w.now, m);
        w.machines.push(id);
        if b.u8() % 4 != 0 {
            let _ = w.s.join(w.now, id);
        }
        w.drain();
    }
    w.connect();
    let mut instants = 0;
    while !b.is_empty() && instants < 300 && !w.s.is_finished() {
        w.instant(&mut b);
        let step = Duration::from_millis(1 + u64::from(b.u16() % 2_000));
        let next = w.now + step;
        w.now = w.s.poll_timeout().map_or(next, |at| at.min(next));
        // The server expires sessions silent for their whole timeout.
        let (expired, fired) = w.zk.expire_due(w.now);
        if let Some(sid) = w.sid {
            w.fired.extend(
                fired
                    .into_iter()
                    .filter(|f| f.session == sid)
                    .map(|f| f.event),
            );
            if expired.contains(&sid) {
                let mut b2 = Bytes::new(&[]);
                w.disconnect(&mut b2);
            }
        }
        instants += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `inputs` inputs, one write after every `every` of them.
    fn spin(machines: usize, inputs: usize, every: usize) {
        let mut s = Spin::new(Timestamp::ZERO, 0, 0, machines);
        for i in 0..inputs {
            s.input((i / every) as i64, machines);
        }
    }

    #[test]
    fn a_busy_instant_is_no_stall() {
        // The campaign's finding: 107 machines rejoining one queue after an
        // expiry took 5,305 inputs, 115 of them writes.
        spin(107, 5_305, 46);
        spin(0, SPIN, usize::MAX);
    }

    #[test]
    #[should_panic(expected = "inputs")]
    fn reads_without_end_are_a_stall() {
        // Canary: one write, then the same few machines reading for ever.
        spin(3, 100_000, 100_000);
    }

    #[test]
    #[should_panic(expected = "writes")]
    fn writes_without_end_are_a_stall() {
        // Canary: a loop that writes at every input.
        spin(3, 100_000, 1);
    }

    #[test]
    fn empty_and_short_inputs_run() {
        run(&[]);
        run(&[7; 16]);
        run(&[0xA5; 200]);
    }
}
