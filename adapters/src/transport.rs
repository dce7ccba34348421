//! The seam between the driver and a ZooKeeper client.
//!
//! A transport does two things: it performs the few requests the election
//! needs ([`Transport::perform`]), and it reports what nobody asked for —
//! session changes and fired watches — as one ordered stream of
//! [`TransportEvent`]s, handed out when the transport is created (an
//! [`EventStream`]). Everything else (retries, re-listing after a reconnect,
//! the liveness probe, the lease, recovering a create whose reply was lost)
//! is the core's job, so a transport stays a thin translation layer.
//!
//! Three transports fit this shape:
//!
//! - [`ZkAsyncTransport`](../zk_async/struct.ZkAsyncTransport.html) over `zookeeper-async`,
//!   whose callbacks only `send` into the stream;
//! - `memory::MemoryTransport` (feature `memory`) over the simulator's model;
//! - [`ZkClientTransport`](../struct.ZkClientTransport.html) over
//!   `zookeeper-client` (feature `zookeeper-client`), which forwards its
//!   `StateWatcher` and each `OneshotWatcher` into the stream from small
//!   forwarding tasks.
//!
//! # Atomic multi-operations
//!
//! [`Transport::multi`] is the one method the election itself never calls:
//! it serves [`Election::guarded`](crate::Election::guarded), the fencing
//! helper that checks "still leader" atomically with a write (ZooKeeper's
//! `multi`: a check of the leader's own node plus the write, all or nothing).
//! It was added to the trait when the second real transport showed the gap:
//! the write has to go through the session that holds the election's
//! credentials, and only the transport can reach it. It has a default body
//! answering [`MultiError::Unsupported`], so transports over clients without
//! `multi` (zookeeper-async) need no code for it and say so with a typed error.
//!
//! Two helpers ship with the trait: it is implemented for `Arc<T>` and
//! `Box<T>` of any transport, so one transport can be shared with code that
//! also uses it directly (for example to close the session from outside).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;
use zkelect_core::{Acl, CreateMode, Reply, Request, SessionEvent, Stat, WatchEvent, ZkCode};

/// Something a transport reports without being asked: a session change or a fired watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportEvent {
    /// The connection or session changed.
    Session(SessionEvent),
    /// A watch set by an earlier request fired.
    Watch(WatchEvent),
}

/// The receiving end of a transport's events, in the order the transport saw them.
///
/// Unbounded on purpose: client callbacks must never block (a blocked
/// zookeeper-async callback stalls the client's I/O task), and the volume is
/// tiny — a handful of session changes and at most a few watch firings per
/// request.
pub type EventStream = mpsc::UnboundedReceiver<TransportEvent>;

/// The few ZooKeeper operations the election needs.
///
/// A transport is created together with its [`EventStream`]; the driver owns
/// both. The contract:
///
/// - **Every request is answered at most once.** One that failed with the
///   connection answers `Err(ZkCode::ConnectionLoss)`; it may have been
///   applied on the server (the core recovers creates by their protected
///   name). A transport need not bound a request's time: the core's session
///   answers one out past its request timeout `OperationTimeout` itself
///   ([`request_timeout`](Self::request_timeout) says what the transport was
///   given; unset, the negotiated session timeout), and a later answer is
///   dropped. A transport needs no liveness probe of its own either: the
///   core probes and keeps the lease.
/// - `Request::Create` is `create2`: the reply carries the node's `Stat`
///   (its czxid is the fencing token, its `ephemeralOwner` the session id).
/// - **A success is the reply of the request's kind** ([`Reply::kind`]
///   equals [`Request::kind`]): a listing for `GetChildren`, `Deleted` for
///   `Delete`, and so on. A machine answered with another kind stops with
///   [`WrongReply`](zkelect_core::WrongReply): no server sends one, so the
///   transport is broken, and nothing the reply says can be trusted.
/// - **Watches.** A request with `watch: true` that succeeds leaves a one-shot
///   watch; when it fires, a [`TransportEvent::Watch`] arrives on the stream.
///   A watch whose firing the transport cannot deliver must not be reported
///   as set: answer `Err(ConnectionLoss)` instead, so the core sets it again.
///   Replies and watch events need not be ordered against each other.
/// - **Session changes** arrive on the stream, starting with `Connected`:
///   `Connected` (with the session id if the client knows it; the core
///   otherwise learns it from its node), `Disconnected`, `Expired`,
///   `AuthFailed`, `Closed`. After every `Connected` the core re-lists and
///   re-arms its watches, so a client that loses watches on reconnect is fine,
///   provided the stale watches' later firings are not delivered (or are
///   harmless duplicates).
/// - [`close`](Self::close) ends the session so its ephemeral node goes at
///   once; it is idempotent and bounded in time.
///
/// The trait uses `#[async_trait]` rather than native `async fn` because the
/// driver holds it as `Arc<dyn Transport>` (native async trait methods are
/// not object-safe) and spawns its futures (they must be `Send`); mockall's
/// `#[automock]` composes with it.
///
/// ```
/// use async_trait::async_trait;
/// use zkelect::Transport;
/// use zkelect_core::{Reply, Request, ZkCode};
///
/// /// A transport for a server that is always unreachable.
/// struct Nowhere;
///
/// #[async_trait]
/// impl Transport for Nowhere {
///     async fn perform(&self, _request: Request) -> Result<Reply, ZkCode> {
///         Err(ZkCode::ConnectionLoss)
///     }
///     async fn close(&self) {}
/// }
/// ```
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait Transport: Send + Sync + 'static {
    /// Performs one request and answers it, in bounded time.
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode>;

    /// Applies `ops` atomically (ZooKeeper `multi`): all of them or none, in
    /// bounded time. The results are in the order of `ops`.
    ///
    /// Errors: [`MultiError::Op`] when one operation failed (nothing was
    /// applied); [`MultiError::Request`] when the request as a whole failed
    /// (with `ConnectionLoss` or `OperationTimeout` it may or may not have
    /// been applied); [`MultiError::Unsupported`] — the default — when the
    /// client cannot do it.
    async fn multi(&self, ops: Vec<MultiOp>) -> Result<Vec<MultiOpResult>, MultiError> {
        let _ = ops;
        Err(MultiError::Unsupported)
    }

    /// Closes the session (its ephemeral nodes go at once). Idempotent, bounded in time.
    async fn close(&self);

    /// The tag this transport's and its session's [`hop`](crate::hop)
    /// stamps carry: distinct per transport within the process; 0 (the
    /// default) for a transport that stamps nothing of its own.
    fn hop_tag(&self) -> u64 {
        0
    }

    /// The bound its session puts on each request, as the user set it on
    /// the transport's options (`op_timeout`); `None` (the default): the
    /// session timeout negotiated at the last connection. The session
    /// decides and keeps it ([`SessionConfig::with_request_timeout`](zkelect_core::SessionConfig::with_request_timeout)),
    /// so the simulator runs the same rule.
    fn request_timeout(&self) -> Option<Duration> {
        None
    }
}

#[async_trait]
impl<T: Transport + ?Sized> Transport for Arc<T> {
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode> {
        (**self).perform(request).await
    }

    async fn multi(&self, ops: Vec<MultiOp>) -> Result<Vec<MultiOpResult>, MultiError> {
        (**self).multi(ops).await
    }

    async fn close(&self) {
        (**self).close().await;
    }

    fn hop_tag(&self) -> u64 {
        (**self).hop_tag()
    }

    fn request_timeout(&self) -> Option<Duration> {
        (**self).request_timeout()
    }
}

#[async_trait]
impl<T: Transport + ?Sized> Transport for Box<T> {
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode> {
        (**self).perform(request).await
    }

    async fn multi(&self, ops: Vec<MultiOp>) -> Result<Vec<MultiOpResult>, MultiError> {
        (**self).multi(ops).await
    }

    async fn close(&self) {
        (**self).close().await;
    }

    fn hop_tag(&self) -> u64 {
        (**self).hop_tag()
    }

    fn request_timeout(&self) -> Option<Duration> {
        (**self).request_timeout()
    }
}

/// One operation of a [`Transport::multi`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MultiOp {
    /// Fails the whole multi unless the node exists (and, with `version`,
    /// has that data version). Applies nothing itself.
    Check {
        /// Node path.
        path: String,
        /// Expected data version, or `None` for any (existence only).
        version: Option<i32>,
    },
    /// Creates a node (sequential modes append the sequence to `path`).
    Create {
        /// Full path.
        path: String,
        /// The node's data.
        data: Vec<u8>,
        /// Persistent, ephemeral, sequential, container.
        mode: CreateMode,
        /// Access control for the new node.
        acl: Acl,
    },
    /// Replaces a node's data.
    SetData {
        /// Node path.
        path: String,
        /// The new data.
        data: Vec<u8>,
        /// Expected data version, or `None` for any.
        version: Option<i32>,
    },
    /// Deletes a node.
    Delete {
        /// Node path.
        path: String,
        /// Expected data version, or `None` for any.
        version: Option<i32>,
    },
}

impl MultiOp {
    /// The path the operation is about.
    pub fn path(&self) -> &str {
        match self {
            Self::Check { path, .. }
            | Self::Create { path, .. }
            | Self::SetData { path, .. }
            | Self::Delete { path, .. } => path,
        }
    }
}

/// What one [`MultiOp`] did, at the same index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MultiOpResult {
    /// The check passed.
    Checked,
    /// The node was created at `path` (with the sequence, if sequential).
    /// ZooKeeper returns no usable `Stat` for a create inside a multi.
    Created {
        /// Full path of the created node.
        path: String,
    },
    /// The data was replaced; the node's new stat.
    DataSet(Stat),
    /// The node was deleted.
    Deleted,
}

/// Why a [`Transport::multi`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MultiError {
    /// This transport's client has no `multi` (zookeeper-async).
    #[error("this transport cannot apply operations atomically (no multi)")]
    Unsupported,
    /// The operation at `index` failed with `code`; nothing was applied.
    #[error("operation {index} of the multi failed: {code}")]
    Op {
        /// Index into the operations.
        index: usize,
        /// Why it failed (`NoNode`, `BadVersion`, `NodeExists`, `NoAuth`, …).
        code: ZkCode,
    },
    /// The request as a whole failed. With `ConnectionLoss` or
    /// `OperationTimeout` it may or may not have been applied.
    #[error("the multi request failed: {0}")]
    Request(ZkCode),
}
