//! What a [`Candidate`](crate::Candidate) tells the application.
//!
//! Called *notices* rather than events because in ZooKeeper's vocabulary an event
//! is a watch firing, which is an input.

use std::fmt;

use crate::node::Access;
use crate::zk::{SessionId, Verb, ZkCode};

/// A fencing token: the czxid of the leader's node.
///
/// It only grows across leaders (every create gets a higher zxid), unlike the
/// sequence number, which restarts if the election parent is recreated. A resource
/// that remembers the highest token it has seen and rejects lower ones cannot be
/// written by a deposed leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FencingToken(pub i64);

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Why a leader stopped leading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum DemotionReason {
    /// The application resigned.
    Resigned,
    /// The application closed the candidate.
    Closed,
    /// Someone else deleted the leader's node (an operator forcing a hand-off).
    Revoked,
    /// The session expired; the node is gone.
    Expired,
    /// No reply from the server for as long as the policy allows: the session may
    /// have expired on the server even though the client has not said so.
    Lost,
    /// A fatal error stopped the candidate.
    Failed,
    /// A re-check after reconnecting found the node no longer among the leaders.
    Displaced,
}

impl fmt::Display for DemotionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Resigned => "resigned",
            Self::Closed => "closed",
            Self::Revoked => "revoked",
            Self::Expired => "session expired",
            Self::Lost => "lost contact with the server",
            Self::Failed => "failed",
            Self::Displaced => "displaced",
        })
    }
}

/// A fatal problem that stopped a candidate.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum CandidateError {
    /// The server refused an operation with an error no retry can fix.
    #[error("ZooKeeper refused {verb} {path}: {code}")]
    Refused {
        /// The request verb (`create`, `children`, …).
        verb: String,
        /// The path it was about.
        path: String,
        /// The server's error.
        code: ZkCode,
    },
    /// The connection's namespace cannot hold the queue's path, so no retry
    /// can make its parents: the root of the namespace is missing (a chroot
    /// in the connect string that names no node), or a level above the
    /// queue is an ephemeral node, which cannot have children (a chroot
    /// that names one, most often). Found after a bounded number of
    /// requests, each level of the path created at most once.
    #[error("{}", namespace_message(path, *fault))]
    Namespace {
        /// The path concerned, as this connection sees it (under its
        /// chroot): the topmost level of the queue's path, whose parent is
        /// missing ([`NamespaceFault::RootMissing`]), or the ephemeral node
        /// ([`NamespaceFault::Ephemeral`]; `/` is the chroot itself).
        path: String,
        /// Which.
        fault: NamespaceFault,
    },
    /// The session's credentials are not on its connection and will not
    /// be: the server rejected them, or (a transport that must put them
    /// back after a reconnect) they could not be put back within the
    /// session timeout ([`SessionEvent::AuthFailed`](crate::SessionEvent::AuthFailed)).
    #[error(
        "authentication failed: the server rejected this session's credentials, or they could not be put back on its connection after a reconnect"
    )]
    AuthFailed,
    /// A queue shared with another library ([`Interop`](crate::Interop)) holds a
    /// node whose sequence is negative: the parent's counter passed 2^31 − 1,
    /// and Curator and kazoo compare sequences as text, which from there on
    /// orders the queue differently from ZooKeeper's numbers (and from each
    /// other's process to process). The candidate deleted its node and stopped;
    /// recreate the election path to start the counter again.
    #[error(
        "sequence wrapped past 2^31-1 in a queue shared with another library ({node}): \
         Curator and kazoo order negative sequences as text, so the queue cannot be shared safely; \
         recreate the election path"
    )]
    SequenceWrapped {
        /// The first node seen with a negative sequence.
        node: String,
    },
    /// The transport answered a request with a reply of another kind.
    #[error(transparent)]
    WrongReply(#[from] WrongReply),
}

/// A reply of another kind than its request gets: a `getData` answered with
/// a listing, say. No ZooKeeper server sends one, so the transport that
/// delivered it is broken. A machine that gets one stops at once: the reply
/// says nothing it may act on (taken as news, a data reply's empty stat
/// once made a node read as persistent), and asking again would go on for
/// as long as the transport stays broken.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[error(
    "the transport answered a `{request}` request about {path} with a `{reply}` reply, \
     which no ZooKeeper server sends for it: the transport is broken"
)]
pub struct WrongReply {
    /// The kind of request sent.
    pub request: Verb,
    /// The kind of request the reply answers.
    pub reply: Verb,
    /// The path concerned: the queue's (the request was about it or a node
    /// under it), or the node a revocation request was written to.
    pub path: String,
}

/// Why a connection's namespace cannot hold a queue's path
/// ([`CandidateError::Namespace`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum NamespaceFault {
    /// Creating the topmost level of the path found no parent. Without a
    /// chroot that parent is `/`, which always exists, so the connect
    /// string's chroot names a node that does not exist.
    RootMissing,
    /// A level above the queue is an ephemeral node: ephemeral nodes cannot
    /// have children (the server's `NoChildrenForEphemerals`).
    Ephemeral,
}

fn namespace_message(path: &str, fault: NamespaceFault) -> String {
    match fault {
        NamespaceFault::RootMissing => format!(
            "cannot create {path}: the root of this connection's namespace does not exist \
             (the connect string's chroot names no node); create the chroot or fix the connect string"
        ),
        NamespaceFault::Ephemeral if path == "/" => "the root of this connection's namespace \
             (the connect string's chroot) is an ephemeral node, which cannot have children; \
             use a persistent node as the chroot"
            .to_owned(),
        NamespaceFault::Ephemeral => format!(
            "{path} is an ephemeral node, which cannot have children; \
             the queue's path must be under persistent nodes only"
        ),
    }
}

/// Something the application should know. With the `zkelect` crate, every
/// notice of an election is published on `Election::notices()` (a tokio
/// `broadcast`); driving the machine yourself, drain them with
/// [`Candidate::poll_notice`](crate::Candidate::poll_notice).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Notice {
    /// The candidate's node was created (or recovered) and it is in the queue.
    Joined {
        /// The node's name (not the full path).
        node: String,
    },
    /// This candidate is now a leader; act as one, guarding writes with `token`.
    Elected {
        /// The fencing token for this term.
        token: FencingToken,
    },
    /// This candidate is no longer a leader; stop acting as one now.
    Demoted {
        /// Why.
        reason: DemotionReason,
    },
    /// The connection is suspended. Under the `Standard` policy a leader must stop
    /// acting as one until [`Notice::Resumed`].
    Suspended,
    /// The connection is back on the same session and, for a leader, leadership
    /// has been re-verified.
    Resumed,
    /// The lowest node in the queue changed (as far as this candidate has seen).
    LeaderChanged {
        /// Name of the lowest node, or `None` if the queue is empty.
        leader: Option<String>,
    },
    /// A node under the election path that looks like a contender is
    /// persistent (its `ephemeralOwner` is 0): no live process holds it and it
    /// will never go away by itself, so it is skipped. Reported once per node.
    PersistentSkipped {
        /// The node's name (not the full path).
        node: String,
    },
    /// This candidate's new node has a token not above the one of the node
    /// it held before, on this election: the ensemble's history restarted
    /// (its data was wiped, or the connect string now names another
    /// ensemble), and tokens count up from its new start (an equal token is
    /// the same zxid given again: within one history a later node's is
    /// always higher). A fenced resource that remembers the highest token it
    /// accepted will refuse this candidate's writes until its tokens pass
    /// `before` again, or take an equal token for an old holder's; see the
    /// README's "Running in production" on what it must do. Reported once
    /// per regression (the next node is compared with this one), and
    /// counted in [`Stats::tokens_regressed`](crate::Stats::tokens_regressed).
    TokenRegressed {
        /// The token of the node this candidate held before.
        before: FencingToken,
        /// The new node's token, not above it.
        now: FencingToken,
    },
    /// Someone asks this node to let go: a cooperative revocation request
    /// ([`REVOKE_MESSAGE`](crate::config::REVOKE_MESSAGE) written into its
    /// node, by [`Revoker`](crate::Revoker) or Curator's `Revoker`), heard
    /// by a [`revocable`](crate::ConfigBuilder::revocable) machine, once per
    /// request, whether it holds or still waits. Nothing is released: the
    /// application decides (a resign or close lets go).
    RevocationRequested,
    /// A writer's [`downgrade`](crate::Candidate::downgrade) is written:
    /// its node says it reads now, and readers behind it may hold beside it.
    Downgraded,
    /// The server refused a writer's downgrade (no write permission on its
    /// own node): the machine still reads only, but the queue still sees a
    /// writer, so readers behind it wait until it leaves.
    DowngradeRefused {
        /// The server's error.
        code: ZkCode,
    },
    /// A [`Revoker`](crate::Revoker)'s request was written into the node:
    /// its holder (if revocable) hears of it.
    RevocationDelivered {
        /// The node asked to let go.
        path: String,
    },
    /// A [`Revoker`](crate::Revoker)'s request was not delivered, and why.
    RevocationFailed(RevocationError),
    /// An [`Observer`](crate::Observer)'s queue changed: every participant,
    /// oldest first, with its id, token and whether it holds. Reported only
    /// when the list differs from the last one (the first report may be empty).
    Participants(Vec<Participant>),
    /// A fatal error; the candidate has stopped.
    Error(CandidateError),
}

/// What the candidate is doing right now, for the application.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Role {
    /// Not taking part (never joined, or resigned without rejoining).
    Idle,
    /// In the queue, or on its way there, not leading.
    Follower,
    /// Leading, with this term's fencing token.
    Leader(FencingToken),
    /// Was leading, but the connection is suspended: must not act as leader.
    Suspended(FencingToken),
    /// Following the election without a node of its own.
    Observer,
    /// Closed for good.
    Closed,
    /// Stopped by a fatal error.
    Failed,
}

impl Role {
    /// Whether the application may act as leader now.
    pub fn is_leader(self) -> bool {
        matches!(self, Self::Leader(_))
    }
}

/// One node in a queue, as an observer sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Participant {
    /// Who the node says it is: the id and data its owner stored, or a
    /// revocation request written over them.
    pub identity: Identity,
    /// How many permits it asks for: its weight in a weighted semaphore,
    /// 1 otherwise.
    pub weight: u32,
    /// The node's name (not the full path).
    pub node: String,
    /// The node's czxid: the fencing token it leads (or holds) with.
    pub token: FencingToken,
    /// The session that owns the node (its `ephemeralOwner`): the process
    /// holding it, as the server's `cons` and `wchp` name it.
    pub owner: SessionId,
    /// Whether this node holds now: leads, holds the lock or a permit
    /// ([`Recipe::holders`](crate::Recipe::holders)).
    pub holds: bool,
    /// Shared (a read lock's reader, or a writer that downgraded to one) or
    /// exclusive (every other node).
    pub access: Access,
}

impl Participant {
    /// The participant's id, unless a revocation request hid it
    /// ([`Identity::RevocationRequest`]).
    pub fn id(&self) -> Option<&str> {
        match &self.identity {
            Identity::Known { id, .. } => Some(id),
            Identity::RevocationRequest => None,
        }
    }

    /// The application data the participant stored after its id; empty if
    /// none, and when a revocation request hid it.
    pub fn data(&self) -> &[u8] {
        match &self.identity {
            Identity::Known { data, .. } => data,
            Identity::RevocationRequest => &[],
        }
    }

    /// Whether a revocation request was written over the node
    /// ([`Identity::RevocationRequest`]).
    pub fn is_revocation_requested(&self) -> bool {
        self.identity == Identity::RevocationRequest
    }
}

/// What a participant's node data says of it: its id and data, or a
/// revocation request that replaced them. One or the other: a request
/// leaves nothing of the id behind, so there is no id to carry beside it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Identity {
    /// The id and data the participant stored.
    Known {
        /// The participant's id: its node's data up to the first `\n`
        /// (zkelect writes `id\ndata`; Curator's LeaderLatch and kazoo's
        /// Election write the id alone).
        id: String,
        /// The application data the participant stored after its id
        /// (`ConfigBuilder::data`, e.g. its address); empty if none, and for
        /// Curator's and kazoo's nodes.
        data: Vec<u8>,
    },
    /// The node's data is a cooperative revocation request
    /// ([`REVOKE_MESSAGE`](crate::config::REVOKE_MESSAGE), `__REVOKE__`, as
    /// Curator's `Revoker` and [`Revoker`](crate::Revoker) write it): the
    /// request replaced the id and data the participant stored, so both are
    /// unknown. The node is still its owner's ([`Participant::owner`]) until
    /// it lets go.
    RevocationRequest,
}

/// Why a revocation request was not delivered.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum RevocationError {
    /// No such node: it is already gone (released, expired, deleted).
    #[error("no node {path}: it is already gone (released, expired or deleted)")]
    Gone {
        /// The node's path.
        path: String,
    },
    /// The server refused the write for good (no write permission on the
    /// node, a bad path, credentials refused).
    #[error("ZooKeeper refused the revocation request on {path}: {code}")]
    Refused {
        /// The node's path.
        path: String,
        /// The server's error.
        code: ZkCode,
    },
    /// The session was closed (or the request given up) before the write
    /// was answered.
    #[error("the session closed before the revocation request was answered")]
    Closed,
    /// The transport answered the write with a reply of another kind.
    #[error(transparent)]
    WrongReply(#[from] WrongReply),
}
