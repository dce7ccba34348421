//! The session's routing as the world does it today: which of the server's
//! watch tables a request arms, the machines armed on a watch, the
//! session-wide op ids, and the bugs a test may plant in it.

use zkelect_core::{OpId, Request, WatchKind};

/// Which of the server's two watch tables a request arms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum WatchClass {
    /// `exists`, `getData`: fired by a create, a delete, a data change.
    Data,
    /// `getChildren`: fired by a child change and by the node's deletion.
    Child,
}

impl WatchClass {
    pub(super) fn of(request: &Request) -> Option<Self> {
        match request {
            Request::GetChildren { watch: true, .. } => Some(Self::Child),
            Request::GetData { watch: true, .. } | Request::Exists { watch: true, .. } => {
                Some(Self::Data)
            }
            _ => None,
        }
    }

    /// The tables an event fires, as the server does.
    pub(super) fn fired_by(kind: WatchKind) -> &'static [Self] {
        match kind {
            WatchKind::NodeCreated | WatchKind::NodeDataChanged => &[Self::Data],
            WatchKind::NodeChildrenChanged => &[Self::Child],
            WatchKind::NodeDeleted => &[Self::Data, Self::Child],
        }
    }
}

/// A watched path and the table its watch is in.
pub(super) type Armed = (String, WatchClass);

/// One machine's arming of one watch since the watch last fired.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Arming {
    /// Its arming requests not yet answered.
    pub(super) pending: u32,
    /// The newest server change (`World::cause`) when the server applied the
    /// first of them, once it has: a change up to this one fired a watch the
    /// session had set before this machine's, and its event, handed to this
    /// machine too when it arrives (a lagging event thread lets the reply
    /// overtake it), is news this machine's own read already showed it.
    pub(super) since: Option<u64>,
}

/// A bug planted in the world's session routing or in an observer, which a
/// checker must catch (`tests/model.rs` shows each caught). Set with
/// [`World::plant`](super::World::plant) before the run; ordinary runs have none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Planted {
    /// A shared watch's event goes to the first machine armed on it only
    /// (the one-watch-per-session rule forgotten): the others never wake.
    /// Caught by `liveness`.
    SharedWatchToOne,
    /// Observers never see the queue's child events, so they never list it
    /// again: their participant lists go stale. Caught by `observers`.
    ObserverSkipsRelist,
    /// The session files its watches per table, forgetting the path across
    /// queues (machines of different queues on one session): a
    /// watch event of one queue's path also goes to the machines armed in
    /// that table on another queue's paths, and disarms them, so they get
    /// an event that is not theirs and miss their own. Within one queue the
    /// routing stays right, so worlds without side queues never see it.
    /// Caught in ordinary seeds that put machines of two queues on one
    /// session (`tests/queues.rs`).
    WatchByTable,
    /// An observer whose path is missing sets no watch with its `exists`
    /// (the request goes out without one): it believes it waits for the
    /// path's creation, and never hears of it, so an observer started
    /// before the path exists, or one whose path was wiped, stays blind
    /// until something else makes it list again. Caught by `observers` in
    /// ordinary seeds that start observers early or wipe the queue
    /// (`tests/sessions.rs`).
    ObserverSetsNoCreationWatch,
}

/// The session-wide id of machine `pid`'s request `op` on host `host`'s
/// session: the host's own ids unchanged (a session with one machine sends
/// exactly what the machine minted), a rider's tagged with its pid above
/// the ids a machine mints.
pub(super) fn wire(host: usize, pid: usize, op: OpId) -> OpId {
    if pid == host {
        op
    } else {
        OpId(op.0 | ((pid as u64 + 1) << 40))
    }
}
