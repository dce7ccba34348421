//! What happens in a world: its events, each with the process that handles
//! it and the link it crosses.

use std::rc::Rc;

use zkelect_core::{FencingToken, OpId, Reply, Request, Timestamp, WatchEvent, ZkCode};

use crate::net::Way;

/// An ask's outcome as it reaches the start-up machine: (member, attempt,
/// outcome).
pub(super) type AskAnswer = (
    usize,
    u32,
    Result<Option<std::time::Duration>, zkelect_core::startup::AskFailure>,
);
use crate::swarm::Fault;

/// An event of the world. Its payloads (a request, a reply) live behind a
/// pointer, so an event is small: a step moves it from the queue's slab to
/// its handler a few times, and at 112 bytes those moves were a few percent
/// of a run. Its kind is a plain tag byte (not folded into a niche of a
/// field), which every step reads several times.
#[derive(Debug, Clone)]
#[repr(u8)]
pub(super) enum Ev {
    /// A request reaches the server; `cause` is the server change whose watch
    /// event made the candidate send it, if it was sent on waking. The client
    /// keeps the same request among those in flight.
    Request {
        pid: usize,
        gen: u64,
        op: OpId,
        request: Rc<Request>,
        cause: Option<u64>,
    },
    /// A reply reaches the client.
    Reply {
        pid: usize,
        gen: u64,
        op: OpId,
        result: Box<Result<Reply, ZkCode>>,
    },
    /// A watch event reaches the client; `cause` names the server change.
    Watch {
        pid: usize,
        gen: u64,
        event: WatchEvent,
        cause: u64,
    },
    /// The client library hands a received watch event to the application
    /// late (its event thread lagged).
    Event {
        pid: usize,
        event: WatchEvent,
        cause: u64,
    },
    /// A ping reaches the server.
    Ping { pid: usize, gen: u64 },
    /// The server's answer to a ping reaches the client.
    Pong { pid: usize, gen: u64 },
    /// Try `attempt` of zookeeper-async's replay of the credentials
    /// (`addAuth`) reaches the server.
    AddAuth { pid: usize, gen: u64, attempt: u32 },
    /// The server's answer to that `addAuth` reaches the client.
    AuthAnswer { pid: usize, gen: u64, attempt: u32 },
    /// The replay's machine asked to be woken.
    ReplayWake { pid: usize, gen: u64 },
    /// The outcome of an ask of host `pid`'s start-up machine reaches it:
    /// (member, attempt, outcome).
    AskAnswer { pid: usize, answer: Box<AskAnswer> },
    /// Host `pid`'s start-up machine asked to be woken.
    AskWake { pid: usize },
    /// The client library's timer: pings and the silence check (only the
    /// one the process last asked for counts, see `Proc::tick_at`).
    ClientTick { pid: usize, gen: u64, at: Timestamp },
    /// A foreign model's client library checks its read timeout (exactly two
    /// thirds of the session timeout after the last message from the server).
    ReadTimeout { pid: usize, gen: u64 },
    /// The client library tries to (re)connect.
    Reconnect { pid: usize },
    /// The candidate asked to be woken.
    Timer { pid: usize },
    /// The server checks for expired sessions (every tick).
    Expiry,
    /// A planned fault or intent.
    Fault(Fault),
    /// The server is back.
    ServerUp,
    /// End of a process pause.
    Resume { pid: usize },
    /// A message its link held (a partition, a paused receiver, or a message
    /// sent before it still held), offered again (see [`Net::verdict`]).
    Held(Box<Ev>),
    /// The server closed the connection (it expired the session, or restarted).
    Closed { pid: usize, gen: u64 },
    /// The client library fails a request locally (not connected, or closed).
    LocalFail { pid: usize, op: OpId },
    /// A canary's client answers a request itself ([`Canary::answers_locally`]).
    LocalReply {
        pid: usize,
        op: OpId,
        result: Box<Result<Reply, ZkCode>>,
    },
    /// A leader's application checks its role and, if leading, writes.
    AppWrite { pid: usize },
    /// The application honours a revocation request it heard: it resigns
    /// (and queues again).
    Honour { pid: usize },
    /// An operator takes write permission on downgraded writer `pid`'s
    /// node away and writes over its mark
    /// ([`AclChange`](crate::swarm::AclChange)).
    AclChange { pid: usize },
    /// The drawn multi-locks are added to their sessions (the run's first
    /// event, so a bug planted before the run is in their sessions).
    AddMultiLocks,
    /// Multi-lock `g`'s application starts acquiring it.
    GroupStart { g: usize },
    /// Multi-lock `g`'s application releases it.
    GroupRelease { g: usize },
    /// A write reaches the fenced resource.
    Write { pid: usize, token: FencingToken },
    /// The faults stop.
    Heal,
    /// The liveness bound has passed.
    LivenessDue,
    /// The world has been quiet for a while (the end of the settled
    /// phase, just before the candidates close): observers are checked.
    Quiet,
    /// Close every candidate.
    CloseAll,
    /// The end: leak check and the last checks.
    End,
}

// Kept small: see `Ev`.
const _: () = assert!(size_of::<Ev>() <= 64);

impl Ev {
    /// The process that handles this event (and so waits while it is paused,
    /// and never handles it if it crashed).
    pub(super) fn handler(&self) -> Option<usize> {
        match self {
            Self::Reply { pid, .. }
            | Self::Watch { pid, .. }
            | Self::Pong { pid, .. }
            | Self::AuthAnswer { pid, .. }
            | Self::ReplayWake { pid, .. }
            | Self::AskAnswer { pid, .. }
            | Self::AskWake { pid }
            | Self::ClientTick { pid, .. }
            | Self::ReadTimeout { pid, .. }
            | Self::Reconnect { pid }
            | Self::Timer { pid }
            | Self::LocalFail { pid, .. }
            | Self::LocalReply { pid, .. }
            | Self::Closed { pid, .. }
            | Self::Event { pid, .. }
            | Self::AppWrite { pid }
            | Self::Honour { pid }
            | Self::Write { pid, .. } => Some(*pid),
            _ => None,
        }
    }

    /// The process whose network link this message crosses, and which way
    /// (a held reply keeps its place behind earlier watch events).
    pub(super) fn crossing(&self) -> Option<(usize, Way)> {
        match self {
            Self::Request { pid, .. } | Self::Ping { pid, .. } | Self::AddAuth { pid, .. } => {
                Some((*pid, Way::ToServer))
            }
            Self::Reply { pid, .. } | Self::AuthAnswer { pid, .. } => {
                Some((*pid, Way::Reply { overtake: false }))
            }
            Self::Watch { pid, .. } | Self::Pong { pid, .. } | Self::Closed { pid, .. } => {
                Some((*pid, Way::ToClient))
            }
            _ => None,
        }
    }
}
