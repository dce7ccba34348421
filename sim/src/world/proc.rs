//! One simulated process as the world keeps it: what it runs, and on the
//! process that hosts its session the core `Session` and the client
//! library's state.

use std::rc::Rc;
use std::time::Duration;

use zkelect_core::{
    Config, Exit, FencingToken, MachineId, OpId, Request, Session, SessionId, Timestamp, WatchClass,
};

use super::agent::Agent;
use crate::foreign::Foreign;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Conn {
    Connected,
    Disconnected,
}

/// A client's requests in flight by their op on the wire, in op order: a
/// map over a sorted vector (a client has a handful at a time, and a
/// `BTreeMap`'s node work was a percent of a run).
#[derive(Debug, Clone, Default)]
pub(super) struct WireTable(Vec<(OpId, OnWire)>);

impl WireTable {
    pub(super) fn insert(&mut self, op: OpId, sent: OnWire) {
        match self.0.binary_search_by_key(&op, |(o, _)| *o) {
            Ok(i) => self.0[i].1 = sent,
            Err(i) => self.0.insert(i, (op, sent)),
        }
    }

    pub(super) fn remove(&mut self, op: &OpId) -> Option<OnWire> {
        let i = self.0.binary_search_by_key(op, |(o, _)| *o).ok()?;
        Some(self.0.remove(i).1)
    }

    pub(super) fn get_mut(&mut self, op: &OpId) -> Option<&mut OnWire> {
        let i = self.0.binary_search_by_key(op, |(o, _)| *o).ok()?;
        self.0.get_mut(i).map(|(_, sent)| sent)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &OnWire> + '_ {
        self.0.iter().map(|(_, sent)| sent)
    }

    pub(super) fn into_entries(self) -> impl Iterator<Item = (OpId, OnWire)> {
        self.0.into_iter()
    }
}

/// A request on the wire.
#[derive(Debug, Clone)]
pub(super) struct OnWire {
    pub(super) request: Rc<Request>,
    /// The server has it.
    pub(super) arrived: bool,
    /// The machine that sent it (`None`: the session's own liveness probe).
    pub(super) from: Option<usize>,
    /// The watch it arms, as the machine asked for it (for `no-herd`'s
    /// books: which change woke whom).
    pub(super) arms: Option<(String, WatchClass)>,
}

/// What a process runs.
#[derive(Debug, Clone)]
pub(super) enum Member {
    /// A zkelect machine on its host's core `Session`, under this id, and
    /// how it left the session once it has.
    Zkelect { id: MachineId, exit: Option<Exit> },
    /// A model of another library's recipe, driven by the world directly.
    Foreign(Box<Foreign>),
}

/// One process, and — on the process that hosts its session — the core
/// `Session` and the client library: the connection fields below are read
/// on the host only (`host == pid`); a rider's stay at their defaults.
#[derive(Debug, Clone)]
pub(super) struct Proc {
    pub(super) member: Member,
    /// It was started as an observer.
    pub(super) observer: bool,
    /// A zkelect candidate's configuration (kept past its stop).
    pub(super) config: Option<Rc<Config>>,
    /// The process whose client and session this one runs on (itself,
    /// unless it rides on another's session).
    pub(super) host: usize,
    /// The queue it is a machine of (an index into `View::queues`).
    pub(super) queue: usize,
    /// On a host: the machines on its session (itself first), in pid order.
    pub(super) machines: Vec<usize>,
    /// On a zkelect host: the core session its machines run on.
    pub(super) session: Option<Box<Session>>,
    /// Per watch the machine armed: the newest server change when the
    /// server applied its first arming since the watch last fired (for
    /// `no-herd`: a machine whose watch was set after a change was not
    /// woken by it).
    pub(super) armed_at: Vec<(String, WatchClass, u64)>,
    pub(super) crashed: bool,
    pub(super) session_id: Option<SessionId>,
    pub(super) timeout: Duration,
    /// The timeout the client learned by its own handshake (zookeeper-async).
    pub(super) handshaken: Option<Duration>,
    /// zookeeper-async's replay of its credentials on the current
    /// connection, under way (`Connected` not reported yet).
    pub(super) replay: Option<Box<Replay>>,
    /// A zookeeper-async host's start-up machine after its plan (against an
    /// ensemble): it confirms the bound at every connection.
    pub(super) asker: Option<Box<Asker>>,
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
    pub(super) on_wire: WireTable,
    pub(super) paused_until: Option<Timestamp>,
    pub(super) resumed_at: Timestamp,
    /// When the client library's event thread is done with the events it has.
    pub(super) event_tail: Timestamp,
    /// Until when its event thread lags.
    pub(super) lag_until: Option<Timestamp>,
    /// When its session (or foreign model) asked to be woken.
    pub(super) timer_at: Option<Timestamp>,
    pub(super) session_closed: bool,
    pub(super) writing: bool,
    /// The node an operator deleted, while the process may still believe
    /// it is its own.
    pub(super) revoked: Option<Revoked>,
    /// How many permits it asks for (its semaphore's drawn weight, else 1):
    /// what `safety` counts it as while it holds.
    pub(super) weight: u32,
    /// It was drawn `revocable`: a revocation request written into its
    /// node must reach it.
    pub(super) revocable: bool,
    /// It downgrades to a reader once it holds (a writer).
    pub(super) downgrades: bool,
    /// A revocation request written into this node while it held, and when,
    /// not yet heard.
    pub(super) asked: Option<(String, Timestamp)>,
}

impl Proc {
    /// A process with nothing run yet, its client not connected.
    pub(super) fn new(member: Member, host: usize, queue: usize, now: Timestamp) -> Self {
        Self {
            member,
            observer: false,
            config: None,
            host,
            queue,
            machines: Vec::new(),
            session: None,
            armed_at: Vec::new(),
            crashed: false,
            session_id: None,
            timeout: Duration::ZERO,
            handshaken: None,
            replay: None,
            asker: None,
            started: None,
            conn: Conn::Disconnected,
            gen: 0,
            last_from_server: now,
            last_to_server: now,
            connected_at: now,
            ping_out: false,
            tick_at: None,
            on_wire: WireTable::default(),
            paused_until: None,
            resumed_at: Timestamp::ZERO,
            event_tail: Timestamp::ZERO,
            lag_until: None,
            timer_at: None,
            session_closed: false,
            writing: false,
            revoked: None,
            weight: 1,
            revocable: false,
            downgrades: false,
            asked: None,
        }
    }

    /// Its machine's id on its host's session, if it is a zkelect machine
    /// still on it.
    pub(super) fn machine_id(&self) -> Option<MachineId> {
        match self.member {
            Member::Zkelect { id, exit: None } => Some(id),
            _ => None,
        }
    }
}

/// What process `pid` runs, read-only.
pub(super) fn agent(procs: &[Proc], pid: usize) -> Agent<'_> {
    let p = &procs[pid];
    match &p.member {
        Member::Foreign(f) => Agent::Foreign(f),
        Member::Zkelect {
            exit: Some(exit), ..
        } => Agent::Stopped(*exit),
        Member::Zkelect { id, exit: None } => {
            match procs[p.host].session.as_ref().and_then(|s| s.machine(*id)) {
                Some(m) => Agent::Machine(m),
                // It left its session in the step being handled; the world
                // reads how at the end of it.
                None => Agent::Stopped(Exit::Closed),
            }
        }
    }
}

/// An operator's deletion of a process's node.
#[derive(Debug, Clone)]
pub(super) struct Revoked {
    /// The node's name and czxid (a recreated container parent can give a
    /// new node the same name).
    pub(super) node: String,
    pub(super) token: Option<FencingToken>,
    /// When the ensemble committed it.
    pub(super) at: Timestamp,
    /// The newest zxid the operator's act committed: a member that has not
    /// applied it still shows the node, and answers as if it stood.
    pub(super) zxid: i64,
    /// The last moment the process's session was on a member that had not
    /// applied it (`at` while none was behind).
    pub(super) reached: Timestamp,
}

/// The deletion of the node process `pid` still believes is its own
/// ([`Process::revoked_at`](super::Process::revoked_at)).
pub(super) fn revoked(procs: &[Proc], pid: usize) -> Option<&Revoked> {
    // Most processes were never revoked: the agent is looked up only then.
    let revoked = procs[pid].revoked.as_ref()?;
    let agent = agent(procs, pid);
    // The token first: an integer, and it differs whenever the node does
    // but for a recreated parent's namesake (so the name is compared too).
    (agent.token() == revoked.token && agent.node() == Some(revoked.node.as_str()))
        .then_some(revoked)
}

/// When an operator deleted the node process `pid` still believes is its
/// own ([`Process::revoked_at`](super::Process::revoked_at)).
pub(super) fn revoked_at(procs: &[Proc], pid: usize) -> Option<Timestamp> {
    revoked(procs, pid).map(|r| r.at)
}

/// A replay under way on a process's current connection (driven by
/// `replay.rs`; kept here, with the process that holds it, so that the
/// process's module imports nothing that imports it back).
#[derive(Debug, Clone)]
pub(super) struct Replay {
    /// The core's machine: it decides when to try again and when to stop.
    pub(super) machine: zkelect_core::setup::SetUp,
    /// What is reported to the core when the credentials are back on.
    pub(super) report: zkelect_core::SessionEvent,
    /// When the machine asked to be woken (only that wake counts).
    pub(super) wake: Option<Timestamp>,
}

/// A host's start-up machine after its plan, as its transport keeps it
/// (driven in `startup.rs`; kept here, with the process that holds it, as
/// [`Replay`] is).
#[derive(Debug, Clone)]
pub(super) struct Asker {
    /// The core's machine: it decides whom to ask and when the bound holds.
    pub(super) machine: zkelect_core::startup::Startup,
    /// When the machine asked to be woken (only that wake counts).
    pub(super) wake: Option<Timestamp>,
    /// The connection (its generation) whose `Connected` waits for the
    /// bound, with the session id it reports and whether the credentials'
    /// replay follows.
    pub(super) holding: Option<(u64, Option<SessionId>, bool)>,
    /// Asks on their way: (member, attempt).
    pub(super) out: Vec<(usize, u32)>,
    /// The canary's asks that stand for a later attempt of the same member:
    /// (member, attempt sent, attempt it answers for).
    pub(super) standing: Vec<(usize, u32, u32)>,
}
