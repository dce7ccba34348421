//! The client's one-shot watches: at most one pending watcher per path and
//! kind, and one task that forwards every fired watch into the event
//! stream.

use std::collections::BTreeSet;
use std::sync::{Arc, PoisonError};

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc;
use tracing::debug;
use zkelect_core::{Request, Verb, WatchEvent, WatchKind};
use zookeeper_client as zkc;

use crate::transport::TransportEvent;

/// A watch the server keeps at most once per session: a path and the kind
/// of read that set it.
pub(super) type Armed = (String, Verb);

/// The watch `request` would set, if it sets one.
fn armed(request: &Request) -> Option<Armed> {
    match request {
        Request::GetChildren { path, watch: true }
        | Request::GetData { path, watch: true }
        | Request::Exists { path, watch: true } => Some((path.clone(), request.kind())),
        _ => None,
    }
}

/// The pending watchers: the channel to the forwarder task and the watches
/// a watcher is pending for (shared with the forwarder, which takes each
/// out as its watcher fires).
pub(super) struct Watches {
    /// New watchers, for the forwarder task.
    watchers: mpsc::UnboundedSender<(zkc::OneshotWatcher, Armed)>,
    /// The watches a watcher is pending for.
    armed: Arc<std::sync::Mutex<BTreeSet<Armed>>>,
}

impl Watches {
    /// The pending watchers, none yet, and the forwarder task that sends
    /// their events into `events`.
    pub(super) fn start(
        events: mpsc::UnboundedSender<TransportEvent>,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (watchers, watchers_rx) = mpsc::unbounded_channel();
        let armed = Arc::new(std::sync::Mutex::new(BTreeSet::new()));
        let forwarder = tokio::spawn(forward_watches(watchers_rx, Arc::clone(&armed), events));
        (Self { watchers, armed }, forwarder)
    }

    /// Hands one watch to the forwarder task.
    pub(super) fn forward(&self, watcher: zkc::OneshotWatcher, key: Armed) {
        self.armed_set().insert(key.clone());
        // Fails only once the forwarder has stopped (the transport closes).
        let _ = self.watchers.send((watcher, key));
    }

    fn armed_set(&self) -> std::sync::MutexGuard<'_, BTreeSet<Armed>> {
        self.armed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `request`, without its watch if a watcher is already pending for the
    /// same one. The server keeps one watch per session, path and kind, and
    /// fires it once for every read that asked: a second watcher would only
    /// be kept by the client until the path changes, which for a leader's
    /// node that every new follower reads may be never (one watcher per
    /// follower, for good). The pending watcher's event reaches every
    /// machine that asked, through the driver.
    pub(super) fn unless_armed(&self, request: Request) -> (Request, Option<Armed>) {
        let Some(key) = armed(&request) else {
            return (request, None);
        };
        if !self.armed_set().contains(&key) {
            return (request, Some(key));
        }
        let plain = match request {
            Request::GetChildren { path, .. } => Request::GetChildren { path, watch: false },
            Request::GetData { path, .. } => Request::GetData { path, watch: false },
            Request::Exists { path, .. } => Request::Exists { path, watch: false },
            other => other,
        };
        (plain, None)
    }
}

/// Forwards every watch's event into the stream, from one task per
/// transport: each pending watcher is a future in one set, not a task of
/// its own (a tokio task and its `JoinSet` entry cost an idle recipe some
/// hundreds of bytes per watch). Ends when the transport is gone, or is
/// aborted on close (the pending watchers are dropped with it).
async fn forward_watches(
    mut watchers: mpsc::UnboundedReceiver<(zkc::OneshotWatcher, Armed)>,
    armed: Arc<std::sync::Mutex<BTreeSet<Armed>>>,
    events: mpsc::UnboundedSender<TransportEvent>,
) {
    let mut pending = FuturesUnordered::new();
    loop {
        tokio::select! {
            watcher = watchers.recv() => match watcher {
                Some((watcher, key)) => pending.push(async move { (watcher.changed().await, key) }),
                None => return,
            },
            Some((event, key)) = pending.next(), if !pending.is_empty() => {
                // Out of the set before the event goes on: the reads it
                // prompts set the watch again.
                armed.lock().unwrap_or_else(PoisonError::into_inner).remove(&key);
                forward_one(&events, &event);
            }
        }
    }
}

/// One fired watch into the stream.
fn forward_one(events: &mpsc::UnboundedSender<TransportEvent>, event: &zkc::WatchedEvent) {
    match map_watch(event) {
        Some(event) => {
            let _ = events.send(TransportEvent::Watch(event));
        }
        // The session ended (expired, closed): the session task says so.
        None => debug!(?event, "watch ended with its session"),
    }
}

/// Maps a fired watch; session notices (expiry, close) map to nothing.
fn map_watch(e: &zkc::WatchedEvent) -> Option<WatchEvent> {
    use zkc::EventType as T;
    let kind = match e.event_type {
        T::NodeCreated => WatchKind::NodeCreated,
        T::NodeDeleted => WatchKind::NodeDeleted,
        T::NodeDataChanged => WatchKind::NodeDataChanged,
        T::NodeChildrenChanged => WatchKind::NodeChildrenChanged,
        T::Session => return None,
    };
    Some(WatchEvent {
        kind,
        path: e.path.clone(),
    })
}
