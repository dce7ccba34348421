//! The fault plan's vocabulary: the mixes of faults a sweep runs, and each
//! fault.

use std::fmt;

use crate::foreign::Scheme;

/// Which faults a run may inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FaultMix {
    /// None: elections and hand-offs only.
    None,
    /// Connection drops, partitions, crashes, server restarts, reordering.
    #[default]
    Standard,
    /// The standard mix plus process pauses (checked with a fenced resource).
    WithPauses,
    /// The standard mix plus client event threads that lag behind replies
    /// (`Fault::LagEvents`).
    WithEventLag,
}

impl FaultMix {
    /// Every mix.
    pub const ALL: [FaultMix; 4] = [
        FaultMix::None,
        FaultMix::Standard,
        FaultMix::WithPauses,
        FaultMix::WithEventLag,
    ];

    /// Its name on the command line (`zkelect sim --faults`) and in
    /// `ZKELECT_FAULTS`.
    pub fn flag(self) -> &'static str {
        match self {
            FaultMix::None => "none",
            FaultMix::Standard => "all",
            FaultMix::WithPauses => "pauses",
            FaultMix::WithEventLag => "lag",
        }
    }

    /// The mix spelled `flag`, if any.
    pub fn from_flag(flag: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.flag() == flag)
    }
}

/// One injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The process's connection drops; its unsent-to-server requests are applied or not.
    DropConnection {
        /// Process index.
        pid: usize,
        /// Whether requests in flight reach the server anyway.
        applied: bool,
    },
    /// Messages to and from the process are lost for a while.
    Partition {
        /// Process index.
        pid: usize,
        /// How long.
        ms: u64,
    },
    /// Messages in one direction only are held for a while (the other way
    /// works): the client and the server find out at different moments.
    PartitionOneWay {
        /// Process index.
        pid: usize,
        /// How long.
        ms: u64,
        /// Cuts client → server (else server → client).
        to_server: bool,
    },
    /// The process stops (candidate and client library); the world goes on.
    Pause {
        /// Process index.
        pid: usize,
        /// How long.
        ms: u64,
    },
    /// The process dies; its session expires on the server later.
    Crash {
        /// Process index.
        pid: usize,
    },
    /// The server goes down and comes back with its sessions.
    RestartServer {
        /// Downtime.
        ms: u64,
    },
    /// The application resigns (and rejoins or not).
    Resign {
        /// Process index.
        pid: usize,
        /// Rejoin at the back.
        rejoin: bool,
    },
    /// The application closes the candidate.
    Close {
        /// Process index.
        pid: usize,
    },
    /// A new candidate starts and joins.
    Spawn,
    /// Whoever leads at that moment crashes.
    CrashLeader,
    /// Whoever leads at that moment is cut off for a while.
    PartitionLeader {
        /// How long.
        ms: u64,
    },
    /// Whoever leads at that moment closes (a graceful exit).
    CloseLeader,
    /// Whoever leads at that moment freezes for a while (pause runs only).
    PauseLeader {
        /// How long.
        ms: u64,
    },
    /// An operator deletes the process's node (a forced hand-off).
    Revoke {
        /// Process index.
        pid: usize,
    },
    /// An operator deletes the node of whoever leads at that moment.
    RevokeLeader,
    /// An operator deletes the whole election: every node, then the path.
    WipeElection,
    /// An operator (or another application) sets the data of the process's
    /// node: its watchers get `NodeDataChanged`, not `NodeDeleted`.
    TouchData {
        /// Process index.
        pid: usize,
    },
    /// The process asks the holder of its lock (itself, if it holds) to let
    /// go: a cooperative revocation request (`__REVOKE__`) written into the
    /// holder's node, as Curator's `Revoker` does. A revocable holder must
    /// hear it (`revocation-heard`); its application honours it (resigns)
    /// one time in two.
    AskRevoke {
        /// Process index.
        pid: usize,
    },
    /// For a while, the process's client library hands watch events to the
    /// application late (up to [`EVENT_LAG_MAX_MS`](crate::world::EVENT_LAG_MAX_MS)),
    /// while replies do not wait for them: a reply can overtake events the
    /// server sent well before it (zookeeper-async's watcher channel).
    LagEvents {
        /// Process index.
        pid: usize,
        /// How long.
        ms: u64,
    },
    /// An operator creates a PERSISTENT node named like a contender of
    /// `scheme` (a sequential create, so it sorts after every node there now).
    Lookalike {
        /// Whose contenders it looks like.
        scheme: Scheme,
    },
    /// A new model of the swarm's foreign library ([`Env::interop`](super::Env::interop)) starts and joins.
    SpawnForeign,
    /// Every message to and from the process takes longer for a while (a slow
    /// link: reorders it against every other session).
    Delay {
        /// Process index.
        pid: usize,
        /// How long.
        ms: u64,
        /// Extra latency per message.
        extra_ms: u64,
    },
}

impl Fault {
    /// The process the fault hits by its number, if it names one (faults of
    /// the server, of the queue, or of whoever leads at the moment name none).
    pub fn target(&self) -> Option<usize> {
        match *self {
            Self::DropConnection { pid, .. }
            | Self::Partition { pid, .. }
            | Self::PartitionOneWay { pid, .. }
            | Self::Pause { pid, .. }
            | Self::Crash { pid }
            | Self::Resign { pid, .. }
            | Self::Close { pid }
            | Self::Revoke { pid }
            | Self::TouchData { pid }
            // The asker's: the holder it asks is whoever holds then.
            | Self::AskRevoke { pid }
            | Self::LagEvents { pid, .. }
            | Self::Delay { pid, .. } => Some(pid),
            Self::RestartServer { .. }
            | Self::Spawn
            | Self::CrashLeader
            | Self::PartitionLeader { .. }
            | Self::CloseLeader
            | Self::PauseLeader { .. }
            | Self::RevokeLeader
            | Self::WipeElection
            | Self::Lookalike { .. }
            | Self::SpawnForeign => None,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DropConnection { pid, applied } => write!(f, "drop p{pid} applied={applied}"),
            Self::Partition { pid, ms } => write!(f, "partition p{pid} {ms}ms"),
            Self::Pause { pid, ms } => write!(f, "pause p{pid} {ms}ms"),
            Self::Crash { pid } => write!(f, "crash p{pid}"),
            Self::RestartServer { ms } => write!(f, "restart-server {ms}ms"),
            Self::Resign { pid, rejoin } => write!(f, "resign p{pid} rejoin={rejoin}"),
            Self::Close { pid } => write!(f, "close p{pid}"),
            Self::Spawn => write!(f, "spawn"),
            Self::CrashLeader => write!(f, "crash the leader"),
            Self::PartitionLeader { ms } => write!(f, "partition the leader {ms}ms"),
            Self::CloseLeader => write!(f, "close the leader"),
            Self::PauseLeader { ms } => write!(f, "pause the leader {ms}ms"),
            Self::Revoke { pid } => write!(f, "revoke p{pid}"),
            Self::RevokeLeader => write!(f, "revoke the leader"),
            Self::WipeElection => write!(f, "delete the election"),
            Self::LagEvents { pid, ms } => write!(f, "lag p{pid}'s watch events for {ms}ms"),
            Self::PartitionOneWay { pid, ms, to_server } => {
                let dir = if *to_server { "to server" } else { "to client" };
                write!(f, "partition p{pid} {dir} only {ms}ms")
            }
            Self::TouchData { pid } => write!(f, "set-data p{pid}"),
            Self::AskRevoke { pid } => write!(f, "p{pid} asks the holder to let go"),
            Self::Delay { pid, ms, extra_ms } => {
                write!(f, "delay p{pid} +{extra_ms}ms for {ms}ms")
            }
            Self::Lookalike { scheme } => write!(f, "persistent {scheme} look-alike"),
            Self::SpawnForeign => write!(f, "spawn a foreign contender"),
        }
    }
}
