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
//! - [`ZkAsyncTransport`](crate::ZkAsyncTransport) over `zookeeper-async`,
//!   whose callbacks only `send` into the stream;
//! - `memory::MemoryTransport` (feature `memory`) over the simulator's model;
//! - a transport over `zookeeper-client` would forward its `StateWatcher` and
//!   each `OneshotWatcher` into the stream from small forwarding tasks.
//!
//! Two helpers ship with the trait: it is implemented for `Arc<T>` and
//! `Box<T>` of any transport, so one transport can be shared with code that
//! also uses it directly (for example to close the session from outside).

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::mpsc;
use zkelect_core::{Reply, Request, SessionEvent, WatchEvent, ZkCode};

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
/// - **Every request is answered exactly once, in bounded time.** An
///   operation that cannot complete answers `Err(ZkCode::OperationTimeout)`;
///   one that failed with the connection answers `Err(ZkCode::ConnectionLoss)`.
///   Either may have been applied on the server (the core recovers creates by
///   their protected name). A transport needs no liveness probe of its own:
///   the core probes and keeps the lease.
/// - `Request::Create` is `create2`: the reply carries the node's `Stat`
///   (its czxid is the fencing token, its `ephemeralOwner` the session id).
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

    /// Closes the session (its ephemeral nodes go at once). Idempotent, bounded in time.
    async fn close(&self);
}

#[async_trait]
impl<T: Transport + ?Sized> Transport for Arc<T> {
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode> {
        (**self).perform(request).await
    }

    async fn close(&self) {
        (**self).close().await;
    }
}

#[async_trait]
impl<T: Transport + ?Sized> Transport for Box<T> {
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode> {
        (**self).perform(request).await
    }

    async fn close(&self) {
        (**self).close().await;
    }
}
