//! The seam between the driver and a ZooKeeper client.

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
pub type EventStream = mpsc::UnboundedReceiver<TransportEvent>;

/// The few ZooKeeper operations the election needs, plus a stream of events.
///
/// A transport is created together with its [`EventStream`]. Its contract:
///
/// - [`perform`](Self::perform) answers every request exactly once, in bounded
///   time (an operation that cannot complete answers `Err(OperationTimeout)` or
///   `Err(ConnectionLoss)`); a request that may have been applied when the
///   connection failed answers `Err(ConnectionLoss)`.
/// - A request with `watch: true` that succeeds leaves a one-shot watch whose
///   firing arrives on the event stream as [`TransportEvent::Watch`].
/// - Session changes arrive on the stream: `Connected` (with the session id when
///   the client knows it), `Disconnected`, `Expired`, `AuthFailed`, `Closed`.
///   After a `Connected` on the same session the election re-arms every watch,
///   so a client that loses watches on reconnect is fine.
/// - Replies and events need not be ordered against each other.
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait Transport: Send + Sync + 'static {
    /// Performs one request.
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode>;

    /// Closes the session (its ephemeral nodes go at once). Idempotent.
    async fn close(&self);
}
