//! The client's one-shot watches: at most one pending watcher per path and
//! kind, and one task that forwards every fired watch into the event
//! stream.
//!
//! An idle recipe keeps two watches pending for as long as it waits, so
//! what this module keeps per pending watch is most of what the transport
//! costs an idle recipe: the client's `changed()` future, alone, in one
//! set, and a 16-byte digest of the path and kind in the set of armed
//! watches. No copy of the path is kept.

use std::collections::BTreeSet;
use std::hash::BuildHasher;
use std::sync::{Arc, PoisonError};

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc;
use tracing::debug;
use zkelect_core::{Request, Verb, WatchEvent, WatchKind};
use zookeeper_client as zkc;

use crate::transport::TransportEvent;

/// A watch the server keeps at most once per session — a path and the
/// kind of read that set it — as a 128-bit digest under the transport's
/// random keys, not as the path's text: a copy of the path would cost a
/// pending watch an allocation of some 60 bytes, twice (the armed set and
/// the watcher's future). Two watches digest alike by chance about once in
/// 2^128; the keys are the process's secret, so no path can be chosen to
/// collide. A collision would take the watch off a read of the other pair
/// while the first is pending, and that read's machine would miss its
/// event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Armed(u64, u64);

/// The keys [`Armed`] digests are drawn under: one random SipHash key,
/// two domain-separated halves.
#[derive(Debug, Clone, Default)]
struct Digests(std::collections::hash_map::RandomState);

impl Digests {
    fn of(&self, path: &str, verb: Verb) -> Armed {
        Armed(
            self.0.hash_one((0u8, path, verb)),
            self.0.hash_one((1u8, path, verb)),
        )
    }

    /// The watches a fired `event` has spent: every kind of watcher the
    /// client hands an event of its type to (as the server fires every
    /// watch of the tables the type fires). A `getData` watch is counted
    /// spent by a creation too, which cannot reach one: taking a watch
    /// out of the set while its watcher is still pending costs at most a
    /// second watcher, where leaving a spent one in would take the watch
    /// off the next read of its path and kind, and its event would never
    /// come.
    fn spent<'a>(
        &'a self,
        path: &'a str,
        event: zkc::EventType,
    ) -> impl Iterator<Item = Armed> + 'a {
        use zkc::EventType as T;
        let verbs: &'static [Verb] = match event {
            T::NodeChildrenChanged => &[Verb::GetChildren],
            T::NodeCreated | T::NodeDataChanged => &[Verb::GetData, Verb::Exists],
            T::NodeDeleted => &[Verb::GetChildren, Verb::GetData, Verb::Exists],
            T::Session => &[],
        };
        verbs.iter().map(move |&verb| self.of(path, verb))
    }

    /// The watch `request` would set, if it sets one.
    fn armed(&self, request: &Request) -> Option<Armed> {
        match request {
            Request::GetChildren { path, watch: true }
            | Request::GetData { path, watch: true }
            | Request::Exists { path, watch: true } => Some(self.of(path, request.kind())),
            _ => None,
        }
    }
}

/// The pending watchers: the channel to the forwarder task and the watches
/// a watcher is pending for (shared with the forwarder, which takes each
/// out as its watcher fires).
pub(super) struct Watches {
    /// New watchers, for the forwarder task.
    watchers: mpsc::UnboundedSender<zkc::OneshotWatcher>,
    /// The watches a watcher is pending for.
    armed: Arc<std::sync::Mutex<BTreeSet<Armed>>>,
    /// How a watch's path and kind become its [`Armed`].
    digests: Digests,
}

impl Watches {
    /// The pending watchers, none yet, and the forwarder task that sends
    /// their events into `events`.
    pub(super) fn start(
        events: mpsc::UnboundedSender<TransportEvent>,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (watchers, watchers_rx) = mpsc::unbounded_channel();
        let armed = Arc::new(std::sync::Mutex::new(BTreeSet::new()));
        let digests = Digests::default();
        let forwarder = tokio::spawn(forward_watches(
            watchers_rx,
            Arc::clone(&armed),
            digests.clone(),
            events,
        ));
        (
            Self {
                watchers,
                armed,
                digests,
            },
            forwarder,
        )
    }

    /// Hands one watch to the forwarder task.
    pub(super) fn forward(&self, watcher: zkc::OneshotWatcher, key: Armed) {
        self.armed_set().insert(key);
        // Fails only once the forwarder has stopped (the transport closes).
        let _ = self.watchers.send(watcher);
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
        let Some(key) = self.digests.armed(&request) else {
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
/// hundreds of bytes per watch). The future is the client's `changed()`
/// alone: its event names the path and type, which say which watches it
/// spent (an `async` block pairing it with its key would keep a second
/// slot for the watcher and the key: 248 bytes a watch against 168). Ends
/// when the transport is gone, or is aborted on close (the pending
/// watchers are dropped with it).
async fn forward_watches(
    mut watchers: mpsc::UnboundedReceiver<zkc::OneshotWatcher>,
    armed: Arc<std::sync::Mutex<BTreeSet<Armed>>>,
    digests: Digests,
    events: mpsc::UnboundedSender<TransportEvent>,
) {
    let mut pending = FuturesUnordered::new();
    loop {
        tokio::select! {
            watcher = watchers.recv() => match watcher {
                Some(watcher) => pending.push(watcher.changed()),
                None => return,
            },
            Some(event) = pending.next(), if !pending.is_empty() => {
                // Out of the set before the event goes on: the reads it
                // prompts set the watch again.
                let mut set = armed.lock().unwrap_or_else(PoisonError::into_inner);
                if event.event_type == zkc::EventType::Session {
                    // The client's session ended: its watchers are all
                    // spent, each with this event, which names no path.
                    set.clear();
                } else {
                    for key in digests.spent(&event.path, event.event_type) {
                        set.remove(&key);
                    }
                }
                drop(set);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn get_data(path: &str) -> Request {
        Request::GetData {
            path: path.to_owned(),
            watch: true,
        }
    }

    #[test]
    fn a_digest_tells_paths_and_kinds_apart() {
        let digests = Digests::default();
        let data = digests.of("/e/n_0000000001", Verb::GetData);
        assert_eq!(data, digests.of("/e/n_0000000001", Verb::GetData));
        assert_ne!(data, digests.of("/e/n_0000000002", Verb::GetData));
        assert_ne!(data, digests.of("/e/n_0000000001", Verb::Exists));
        assert_ne!(data, digests.of("/e/n_0000000001", Verb::GetChildren));
        // The two halves are not one hash twice.
        assert_ne!(data.0, data.1);
        let plain = Request::GetData {
            path: "/e/n_0000000001".to_owned(),
            watch: false,
        };
        assert_eq!(digests.armed(&plain), None);
    }

    #[test]
    fn an_event_spends_every_kind_of_watch_the_client_hands_it_to() {
        use zkc::EventType as T;
        let digests = Digests::default();
        let spent = |event| digests.spent("/e/a", event).collect::<Vec<_>>();
        let [children, data, exists] =
            [Verb::GetChildren, Verb::GetData, Verb::Exists].map(|verb| digests.of("/e/a", verb));
        assert_eq!(spent(T::NodeChildrenChanged), [children]);
        assert_eq!(spent(T::NodeDataChanged), [data, exists]);
        assert_eq!(spent(T::NodeCreated), [data, exists]);
        assert_eq!(spent(T::NodeDeleted), [children, data, exists]);
        assert_eq!(spent(T::Session), []);
    }

    #[tokio::test]
    async fn a_second_read_of_an_armed_watch_goes_without_its_watch() {
        let (events, _events) = mpsc::unbounded_channel();
        let (watches, forwarder) = Watches::start(events);
        let (first, key) = watches.unless_armed(get_data("/e/a"));
        assert_eq!(first, get_data("/e/a"));
        let key = key.expect("a watch read arms its watch");
        // As `forward` does once the read has answered with its watcher.
        watches.armed_set().insert(key);
        let (again, none) = watches.unless_armed(get_data("/e/a"));
        assert_eq!(
            again,
            Request::GetData {
                path: "/e/a".to_owned(),
                watch: false
            }
        );
        assert_eq!(none, None);
        // Another path, or another kind on the same path, keeps its watch.
        let (other, other_key) = watches.unless_armed(get_data("/e/b"));
        assert_eq!((other, other_key.is_some()), (get_data("/e/b"), true));
        let exists = Request::Exists {
            path: "/e/a".to_owned(),
            watch: true,
        };
        let (kept, kept_key) = watches.unless_armed(exists.clone());
        assert_eq!((kept, kept_key.is_some()), (exists, true));
        forwarder.abort();
    }
}
