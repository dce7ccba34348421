//! Stamps along a takeover's path, for the benchmarks: each is a `tracing`
//! event at `TRACE` level with target [`TARGET`] and two fields: `hop`, whose
//! value is one of the names below, and `session`, the tag of the session
//! that stamped it ([`Transport::hop_tag`](crate::Transport::hop_tag): one
//! number per transport in the process, 0 for a transport that has none).
//! One release wakes several sessions of a process at once (the next
//! holder, the waiter whose farther node it was, the releasing session's
//! own-node watch), so only the tag tells one session's path from another's.
//!
//! Off (no subscriber enables the target, the default), each costs one
//! cached check of the callsite's interest. A bench that wants the times
//! installs a layer that enables only [`TARGET`] and reads the clock first
//! thing in its `on_event`.
//!
//! In the order a hand-off or a failover passes them:
//!
//! 1. [`DELETE_SENT`] / [`CLOSE_SENT`]: the releasing session hands its
//!    delete, or the closing session its close, to the client library;
//! 2. (the server; the client's I/O task reads the notification);
//! 3. [`WATCH_CALLBACK`]: the client's watcher callback runs in the next
//!    holder's session (over zookeeper-client, which has no callbacks: the
//!    transport's watch task, the first task the client wakes, sees the
//!    watcher fire);
//! 4. [`WATCH_FORWARDED`]: the transport puts the event on the session's
//!    event stream;
//! 5. [`PUMP_WOKEN`]: the session's pump has the event (its clock read);
//! 6. [`PUMP_PUBLISHED`]: the core has handled it and the pump has
//!    published what it emitted (the new role, the hold), waking the
//!    handles;
//! 7. the handle's task wakes (the application's own stamp).
//!
//! And a listing's, wherever it falls: [`LIST_SENT`] (handed to the client
//! library), [`LISTED`] (the pump has the answer, decoded), [`LIST_HANDLED`]
//! (the core has handled it and the pump published what it emitted).

/// The target of every stamp.
pub const TARGET: &str = "zkelect::hop";

/// A delete handed to the client library.
pub const DELETE_SENT: &str = "delete_sent";
/// A session's close handed to the client library.
pub const CLOSE_SENT: &str = "close_sent";
/// The client library's watcher callback runs with a watch event.
pub const WATCH_CALLBACK: &str = "watch_callback";
/// The transport puts a watch event on the session's event stream.
pub const WATCH_FORWARDED: &str = "watch_forwarded";
/// The pump has a watch event in hand.
pub const PUMP_WOKEN: &str = "pump_woken";
/// The pump has published what the core emitted for a watch event.
pub const PUMP_PUBLISHED: &str = "pump_published";

/// A listing (`getChildren`) handed to the client library.
pub const LIST_SENT: &str = "list_sent";
/// The pump has a listing's answer in hand.
pub const LISTED: &str = "listed";
/// The pump has published what the core emitted for a listing's answer.
pub const LIST_HANDLED: &str = "list_handled";

/// A new tag for a transport's stamps: distinct within the process, never 0.
/// The two real clients' transports tag their stamps (the others stamp with
/// the trait's default, 0), so without either nothing calls this.
#[cfg(any(feature = "zookeeper-async", feature = "zookeeper-client"))]
pub(crate) fn next_tag() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Stamps `$name` (one of this module's constants) for the session tagged
/// `$tag` (evaluated only when a subscriber wants the stamp).
macro_rules! hop {
    ($name:expr, $tag:expr) => {
        tracing::trace!(target: $crate::hop::TARGET, hop = $name, session = $tag)
    };
}
pub(crate) use hop;
