//! The session's tests: transcripts of its rules, and properties over
//! random and adversarial interleavings of inputs.

mod properties;
mod refused;
mod timeouts;
mod transcripts;
mod zk;

use std::time::Duration;

use super::*;
use crate::candidate::Candidate;
use crate::config::Config;
use crate::notice::{Notice, Role};
use crate::rule::Rule;
use crate::zk::{Request, SessionId};

/// The session timeout the harness connects with.
const TIMEOUT: Duration = Duration::from_secs(10);

fn connected() -> SessionEvent {
    SessionEvent::Connected {
        session_id: Some(SessionId(zk::OWNER)),
        timeout: TIMEOUT,
    }
}

fn election(path: &str, id: &str, seed: u64) -> Machine {
    let config = Config::builder(path, id)
        .nonce_seed(seed)
        .build()
        .expect("valid config");
    Machine::election(Candidate::new(config))
}

fn lock(path: &str, id: &str, seed: u64) -> Machine {
    let config = Config::builder(path, id)
        .rule(Rule::Mutex)
        .nonce_seed(seed)
        .build()
        .expect("valid config");
    Machine::lock(Candidate::new(config))
}

/// A session over the tiny server, answered at once: what a driver does,
/// with every command and event kept for the test to read.
struct Harness {
    s: Session,
    zk: zk::Zk,
    now: Timestamp,
    /// Every event polled so far.
    events: Vec<Event>,
    /// Every command polled so far, with its sender.
    sent: Vec<(Command, Sender)>,
    /// Answer commands at once (else they wait in `held`).
    answering: bool,
    held: Vec<Command>,
}

impl Harness {
    fn new(config: SessionConfig) -> Self {
        Self {
            s: Session::new(config),
            zk: zk::Zk::new(),
            now: Timestamp::ZERO,
            events: Vec::new(),
            sent: Vec::new(),
            answering: true,
            held: Vec::new(),
        }
    }

    /// Drains the session: events, then commands (answered at once when
    /// answering, with the watch events each answer fires fed after it),
    /// until it has nothing more to say.
    fn pump(&mut self) {
        loop {
            while let Some(e) = self.s.poll_event() {
                self.events.push(e);
            }
            let Some(cmd) = self.s.poll_command() else {
                break;
            };
            let sender = self.s.sender(cmd.op).expect("a command out has a sender");
            self.sent.push((cmd.clone(), sender));
            if self.answering {
                self.answer(cmd);
            } else {
                self.held.push(cmd);
            }
        }
        if let Some(at) = self.s.poll_timeout() {
            assert!(
                at > self.now,
                "due again at {at} after a call at {}",
                self.now
            );
        }
    }

    fn answer(&mut self, cmd: Command) {
        let result = self.zk.apply(&cmd.request);
        self.s.handle(self.now, Input::Reply { op: cmd.op, result });
        self.fired();
    }

    /// Feeds the watch events the server fired.
    fn fired(&mut self) {
        for e in self.zk.take_fired() {
            self.s.handle(self.now, Input::Watch(e));
        }
    }

    fn connect(&mut self) {
        self.s.handle(self.now, Input::Session(connected()));
        self.pump();
    }

    fn add(&mut self, machine: Machine) -> MachineId {
        let id = self.s.add(self.now, machine);
        self.pump();
        id
    }

    fn join(&mut self, id: MachineId) {
        self.s.join(self.now, id).expect("runs");
        self.pump();
    }

    /// Moves time on to `ms` after the start, firing every deadline on
    /// the way.
    fn until(&mut self, ms: u64) {
        let end = Timestamp::from_millis(ms);
        while let Some(at) = self.s.poll_timeout().filter(|at| *at <= end) {
            self.now = at;
            self.s.handle_timeout(at);
            self.pump();
        }
        self.now = end;
    }

    fn role(&self, id: MachineId) -> Option<Role> {
        self.s.machine(id).map(Machine::role)
    }

    fn notices_of(&self, id: MachineId) -> Vec<Notice> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Notice { machine, notice } if *machine == id => Some(notice.clone()),
                _ => None,
            })
            .collect()
    }

    fn commands_of(&self, id: MachineId) -> Vec<Request> {
        self.sent
            .iter()
            .filter(|(_, s)| s.machine() == Some(id))
            .map(|(c, _)| c.request.clone())
            .collect()
    }
}
