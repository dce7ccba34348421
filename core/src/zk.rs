//! ZooKeeper vocabulary owned by the core: requests, replies, stats, error codes.
//!
//! These mirror the ZooKeeper wire protocol closely enough that any client library
//! can be mapped onto them, but they belong to zkelect so the core depends on no
//! client crate.

use std::fmt;

use crate::acl::Acl;

/// A ZooKeeper session id (the server's 64-bit `sessionId`, also a node's `ephemeralOwner`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SessionId(pub i64);

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:x}", self.0)
    }
}

/// The metadata ZooKeeper keeps for a znode (the fields zkelect uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Stat {
    /// Zxid of the transaction that created the node: the fencing token.
    pub czxid: i64,
    /// Zxid of the last change to the node's data.
    pub mzxid: i64,
    /// Zxid of the last change to the node's children.
    pub pzxid: i64,
    /// Version of the node's data.
    pub version: i32,
    /// Version of the node's children list (bumped by every child create and delete).
    pub cversion: i32,
    /// Session that owns the node if it is ephemeral, else 0.
    pub ephemeral_owner: i64,
    /// Length of the node's data in bytes.
    pub data_length: i32,
    /// Number of children.
    pub num_children: i32,
}

/// How a node is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum CreateMode {
    /// Survives its session.
    Persistent,
    /// Removed when its session ends.
    Ephemeral,
    /// Persistent, with a 10-digit sequence appended by the server.
    PersistentSequential,
    /// Ephemeral, with a 10-digit sequence appended by the server: election nodes.
    EphemeralSequential,
    /// Persistent, removed by the server once its last child is gone.
    Container,
}

impl CreateMode {
    /// Whether the server appends a sequence number to the name.
    pub fn is_sequential(self) -> bool {
        matches!(self, Self::PersistentSequential | Self::EphemeralSequential)
    }

    /// Whether the node dies with its session.
    pub fn is_ephemeral(self) -> bool {
        matches!(self, Self::Ephemeral | Self::EphemeralSequential)
    }
}

/// One operation the machine asks the driver to perform.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Request {
    /// `create2`: create a node and return its path and [`Stat`].
    Create {
        /// Full path; for sequential modes the server appends the sequence.
        path: String,
        /// The node's data.
        data: Vec<u8>,
        /// Persistent, ephemeral, sequential, container.
        mode: CreateMode,
        /// Access control for the new node.
        acl: Acl,
    },
    /// `getChildren`, optionally leaving a child watch on `path`.
    GetChildren {
        /// Parent path.
        path: String,
        /// Leave a one-shot child watch.
        watch: bool,
    },
    /// `getData`, optionally leaving a data watch (which also fires on deletion).
    GetData {
        /// Node path.
        path: String,
        /// Leave a one-shot data watch.
        watch: bool,
    },
    /// `exists`, optionally leaving a watch, which on a missing node waits
    /// for its creation. A candidate never sets one (its probe is an
    /// `exists` without a watch): a watch on a node that may never come
    /// stays on the server until the session ends. Only an
    /// [`Observer`](crate::Observer) whose queue's path is missing sets one,
    /// on that path: waiting for its creation is the point, and it is one
    /// watch per absence.
    Exists {
        /// Node path.
        path: String,
        /// Leave a one-shot watch (only an observer of a missing path does).
        watch: bool,
    },
    /// `delete`, with an expected version or any (`None` = -1).
    Delete {
        /// Node path.
        path: String,
        /// Expected data version, or `None` for any.
        version: Option<i32>,
    },
    /// `setData`, with an expected version or any (`None` = -1). zkelect sends
    /// one only for a writer's downgrade to a reader, expecting the version it
    /// read (and a guarded write, through the session).
    SetData {
        /// Node path.
        path: String,
        /// The node's new data.
        data: Vec<u8>,
        /// Expected data version, or `None` for any.
        version: Option<i32>,
    },
    /// `sync`: the connected server catches up with the leader (as of the
    /// request) before answering, so a read sent after it on the same
    /// connection sees every write committed before the sync. ZooKeeper's
    /// Programmer's Guide gives it for a read that must see the latest
    /// state: a server is never behind what the client has seen, but may be
    /// behind the leader (after a reconnect to a lagging follower).
    Sync {
        /// The path (ZooKeeper syncs the whole tree; the path is checked).
        path: String,
    },
}

impl Request {
    /// The path the request is about.
    pub fn path(&self) -> &str {
        match self {
            Self::Create { path, .. }
            | Self::GetChildren { path, .. }
            | Self::GetData { path, .. }
            | Self::Exists { path, .. }
            | Self::Delete { path, .. }
            | Self::SetData { path, .. }
            | Self::Sync { path } => path,
        }
    }

    /// The same request about the path `to` makes of its own (a chroot's
    /// prefix, a rename): everything else is kept.
    pub fn map_path(mut self, to: impl FnOnce(&str) -> String) -> Self {
        let path = match &mut self {
            Self::Create { path, .. }
            | Self::GetChildren { path, .. }
            | Self::GetData { path, .. }
            | Self::Exists { path, .. }
            | Self::Delete { path, .. }
            | Self::SetData { path, .. }
            | Self::Sync { path } => path,
        };
        *path = to(path);
        self
    }

    /// Whether the request leaves a watch on the server.
    pub fn sets_watch(&self) -> bool {
        match self {
            Self::GetChildren { watch, .. }
            | Self::GetData { watch, .. }
            | Self::Exists { watch, .. } => *watch,
            Self::Create { .. }
            | Self::Delete { .. }
            | Self::SetData { .. }
            | Self::Sync { .. } => false,
        }
    }

    /// Which kind of request this is, to match on without its fields.
    pub fn kind(&self) -> Verb {
        match self {
            Self::Create { .. } => Verb::Create,
            Self::GetChildren { .. } => Verb::GetChildren,
            Self::GetData { .. } => Verb::GetData,
            Self::Exists { .. } => Verb::Exists,
            Self::Delete { .. } => Verb::Delete,
            Self::SetData { .. } => Verb::SetData,
            Self::Sync { .. } => Verb::Sync,
        }
    }

    /// A short verb for traces: `create`, `children`, `data`, `exists`, `delete`, `set`, `sync`.
    pub fn verb(&self) -> &'static str {
        self.kind().as_str()
    }
}

/// The kind of a [`Request`], without its fields: what a test or a trace
/// matches on, checked by the compiler rather than spelled as a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Verb {
    /// [`Request::Create`].
    Create,
    /// [`Request::GetChildren`].
    GetChildren,
    /// [`Request::GetData`].
    GetData,
    /// [`Request::Exists`].
    Exists,
    /// [`Request::Delete`].
    Delete,
    /// [`Request::SetData`].
    SetData,
    /// [`Request::Sync`].
    Sync,
}

impl Verb {
    /// The short word traces print: `create`, `children`, `data`, `exists`, `delete`, `set`, `sync`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::GetChildren => "children",
            Self::GetData => "data",
            Self::Exists => "exists",
            Self::Delete => "delete",
            Self::SetData => "set",
            Self::Sync => "sync",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A successful answer to a [`Request`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Reply {
    /// Answer to `Create`: the actual path (with sequence) and the node's stat.
    Created {
        /// Full path of the created node.
        path: String,
        /// Its stat (create2): czxid and ephemeral owner.
        stat: Stat,
    },
    /// Answer to `GetChildren`: child names (not paths), in any order.
    Children(Vec<String>),
    /// Answer to `GetData`.
    Data {
        /// The node's data.
        data: Vec<u8>,
        /// The node's stat.
        stat: Stat,
    },
    /// Answer to `Exists`: the stat if the node exists.
    Exists(Option<Stat>),
    /// Answer to `Delete`.
    Deleted,
    /// Answer to `SetData`: the node's new stat.
    Set(Stat),
    /// Answer to `Sync`: the connected server has caught up with the leader.
    Synced,
}

impl Reply {
    /// The kind of request this reply answers. Each reply answers one kind
    /// only; a transport that answers a request with another kind's reply
    /// breaks its contract, and a machine that gets one stops with
    /// [`WrongReply`](crate::WrongReply).
    ///
    /// ```
    /// use zkelect_core::{Reply, Verb};
    ///
    /// assert_eq!(Reply::Children(vec![]).kind(), Verb::GetChildren);
    /// assert_eq!(Reply::Exists(None).kind(), Verb::Exists);
    /// ```
    pub fn kind(&self) -> Verb {
        match self {
            Self::Created { .. } => Verb::Create,
            Self::Children(_) => Verb::GetChildren,
            Self::Data { .. } => Verb::GetData,
            Self::Exists(_) => Verb::Exists,
            Self::Deleted => Verb::Delete,
            Self::Set(_) => Verb::SetData,
            Self::Synced => Verb::Sync,
        }
    }
}

/// A ZooKeeper error code, as the core sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum ZkCode {
    /// The connection dropped; the request may or may not have been applied.
    ConnectionLoss,
    /// The client gave up waiting; the request may or may not have been applied.
    OperationTimeout,
    /// The session is gone, and with it every ephemeral node it owned.
    SessionExpired,
    /// The session moved to another server.
    SessionMoved,
    /// The node (or, for create, its parent) does not exist.
    NoNode,
    /// The node already exists.
    NodeExists,
    /// The node has children.
    NotEmpty,
    /// Version check failed.
    BadVersion,
    /// The ACL forbids the operation for this session's identities.
    NoAuth,
    /// Authentication failed.
    AuthFailed,
    /// The ACL given is invalid (e.g. `CreatorAll` without any authentication).
    InvalidAcl,
    /// Bad arguments (e.g. an invalid path).
    BadArguments,
    /// Ephemeral nodes cannot have children.
    NoChildrenForEphemerals,
    /// The server does not implement the operation.
    Unimplemented,
    /// Any other server code.
    Other(i32),
}

impl ZkCode {
    /// The request may have been applied and should be retried or recovered.
    pub fn is_connection_fault(self) -> bool {
        matches!(
            self,
            Self::ConnectionLoss | Self::OperationTimeout | Self::SessionMoved
        )
    }

    /// No retry can fix it: the candidate stops and reports the cause.
    pub fn is_fatal(self) -> bool {
        matches!(
            self,
            Self::NoAuth
                | Self::AuthFailed
                | Self::InvalidAcl
                | Self::BadArguments
                | Self::NoChildrenForEphemerals
        )
    }
}

impl fmt::Display for ZkCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ConnectionLoss => f.write_str("connection loss"),
            Self::OperationTimeout => f.write_str("operation timeout"),
            Self::SessionExpired => f.write_str("session expired"),
            Self::SessionMoved => f.write_str("session moved"),
            Self::NoNode => f.write_str("no node"),
            Self::NodeExists => f.write_str("node exists"),
            Self::NotEmpty => f.write_str("not empty"),
            Self::BadVersion => f.write_str("bad version"),
            Self::NoAuth => f.write_str("not authorised (NoAuth)"),
            Self::AuthFailed => f.write_str("authentication failed"),
            Self::InvalidAcl => f.write_str(
                "invalid ACL (InvalidAcl; a creator-only ACL needs credentials on the session)",
            ),
            Self::BadArguments => f.write_str("bad arguments"),
            Self::NoChildrenForEphemerals => f.write_str("ephemeral nodes cannot have children"),
            Self::Unimplemented => f.write_str("unimplemented"),
            Self::Other(code) => write!(f, "server error code {code}"),
        }
    }
}

/// A server's error code is an error in its own right, so `?` can lift it
/// into `anyhow`, `Box<dyn Error>` or a `#[from]` variant.
impl std::error::Error for ZkCode {}

/// What a one-shot watch reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum WatchKind {
    /// The node was created.
    NodeCreated,
    /// The node was deleted.
    NodeDeleted,
    /// The node's data changed.
    NodeDataChanged,
    /// The node's children changed.
    NodeChildrenChanged,
}

/// A fired watch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct WatchEvent {
    /// What happened.
    pub kind: WatchKind,
    /// To which path.
    pub path: String,
}

/// Which of the server's two watch tables a request arms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WatchClass {
    /// `exists`, `getData`: fired by a create, a delete, a data change.
    Data,
    /// `getChildren`: fired by a child change and by the node's deletion.
    Child,
}

impl WatchClass {
    /// The table `request` arms, if it sets a watch.
    pub fn of(request: &Request) -> Option<Self> {
        match request {
            Request::GetChildren { watch: true, .. } => Some(Self::Child),
            Request::GetData { watch: true, .. } | Request::Exists { watch: true, .. } => {
                Some(Self::Data)
            }
            _ => None,
        }
    }

    /// The tables an event fires, as the server does.
    pub fn fired_by(kind: WatchKind) -> &'static [Self] {
        match kind {
            WatchKind::NodeCreated | WatchKind::NodeDataChanged => &[Self::Data],
            WatchKind::NodeChildrenChanged => &[Self::Child],
            WatchKind::NodeDeleted => &[Self::Data, Self::Child],
        }
    }
}
