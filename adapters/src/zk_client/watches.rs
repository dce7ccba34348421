//! The client's one-shot watches: at most one pending watcher per path and
//! kind, and one task that forwards every fired watch into the event
//! stream.
//!
//! An idle recipe keeps two watches pending for as long as it waits, so
//! what this module keeps per pending watch is most of what the transport
//! costs an idle recipe: the client's `changed()` future, alone, in a slot
//! of a group that shares one waker, and a 16-byte digest of the path and
//! kind in the set of armed watches. No copy of the path is kept.

use std::collections::BTreeSet;
use std::hash::BuildHasher;
use std::sync::{Arc, PoisonError};

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;
use tokio::sync::mpsc;
use tracing::debug;
use zkelect_core::{Request, Verb, WatchEvent, WatchKind};
use zookeeper_client as zkc;

use crate::hop::{self, hop};
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
    /// their events into `events`, stamped with the transport's `hop_tag`
    /// (see [`hop`]).
    pub(super) fn start(
        events: mpsc::UnboundedSender<TransportEvent>,
        hop_tag: u64,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (watchers, watchers_rx) = mpsc::unbounded_channel();
        let armed = Arc::new(std::sync::Mutex::new(BTreeSet::new()));
        let digests = Digests::default();
        let forwarder = tokio::spawn(forward_watches(
            watchers_rx,
            Arc::clone(&armed),
            digests.clone(),
            events,
            hop_tag,
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

/// How many pending watchers share one waker (and one allocation of
/// slots): a wake-up polls the few dozen futures of its group, not every
/// pending watcher, and a watcher costs its future and a slot, not a waker
/// and a node of a set of futures of its own.
const GROUP: usize = 32;

/// The groups a wake-up has marked, and the forwarder task to wake.
#[derive(Default)]
struct Woken {
    groups: std::sync::Mutex<Vec<u32>>,
    task: AtomicWaker,
}

/// One group's waker: marks its group (once until the group is polled)
/// and wakes the forwarder.
struct GroupWake {
    group: u32,
    queued: AtomicBool,
    woken: Arc<Woken>,
}

impl Wake for GroupWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            self.woken
                .groups
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(self.group);
            self.woken.task.wake();
        }
    }
}

/// [`GROUP`] slots for pending watchers' futures, and their shared waker.
struct Group<F> {
    wake: Arc<GroupWake>,
    waker: Waker,
    slots: [Option<Pin<Box<F>>>; GROUP],
}

/// The pending watchers' futures: the client's `changed()`, each alone in
/// a slot of a group (see [`GROUP`]). A set of futures (`FuturesUnordered`)
/// keeps each in a node of its own with a waker's worth of links and
/// flags: 64 bytes a watch on top of the future, where a slot is 8.
struct Pending<F> {
    groups: Vec<Group<F>>,
    /// Empty slots (group × [`GROUP`] + index), the last one used first.
    free: Vec<u32>,
    /// Futures in the slots.
    count: usize,
    woken: Arc<Woken>,
}

impl<F: Future> Pending<F> {
    fn new() -> Self {
        Self {
            groups: Vec::new(),
            free: Vec::new(),
            count: 0,
            woken: Arc::default(),
        }
    }

    /// Adds a watcher's future; it is polled on the next [`fired`](Self::fired).
    fn push(&mut self, future: F) {
        let slot = match self.free.pop() {
            Some(slot) => slot as usize,
            None => {
                let group = self.groups.len();
                // Slots are numbered in a u32: 130 million groups of them,
                // 700 GB of pending futures, are out of memory long before.
                let (Ok(id), Ok(end)) = (
                    u32::try_from(group),
                    u32::try_from(group.saturating_add(1).saturating_mul(GROUP)),
                ) else {
                    return;
                };
                let first = end - GROUP as u32;
                let wake = Arc::new(GroupWake {
                    group: id,
                    queued: AtomicBool::new(false),
                    woken: Arc::clone(&self.woken),
                });
                self.groups.push(Group {
                    waker: Waker::from(Arc::clone(&wake)),
                    wake,
                    slots: std::array::from_fn(|_| None),
                });
                // The group's other slots, lowest used first.
                self.free.extend((first + 1..end).rev());
                first as usize
            }
        };
        let group = &mut self.groups[slot / GROUP];
        group.slots[slot % GROUP] = Some(Box::pin(future));
        self.count += 1;
        // Polled once, so that its waker is registered.
        group.wake.wake_by_ref();
    }

    /// Ready once a group has been woken.
    fn poll_woken(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.woken.task.register(cx.waker());
        let any = !self
            .woken
            .groups
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty();
        if any {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Polls every future of the woken groups: the events of those that
    /// fired, in slot order.
    fn fired(&mut self) -> Vec<F::Output> {
        let woken = std::mem::take(
            &mut *self
                .woken
                .groups
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let mut events = Vec::new();
        for id in woken {
            // A group dropped since (all slots emptied) was woken late.
            let Some(group) = self.groups.get_mut(id as usize) else {
                continue;
            };
            // Unmarked before the polls: a wake-up during them marks it again.
            group.wake.queued.store(false, Ordering::Release);
            let mut cx = Context::from_waker(&group.waker);
            for (i, slot) in group.slots.iter_mut().enumerate() {
                let Some(future) = slot else { continue };
                if let Poll::Ready(event) = future.as_mut().poll(&mut cx) {
                    *slot = None;
                    self.free.push(id * GROUP as u32 + i as u32);
                    self.count -= 1;
                    events.push(event);
                }
            }
        }
        if self.count == 0 {
            // Nothing pending (a session ended, or every watch fired): give
            // the groups and the free list back.
            self.groups = Vec::new();
            self.free = Vec::new();
        }
        events
    }
}

/// Forwards every watch's event into the stream, from one task per
/// transport: each pending watcher is a future in a slot of [`Pending`],
/// not a task of its own (a tokio task and its `JoinSet` entry cost an idle
/// recipe some hundreds of bytes per watch). The future is the client's
/// `changed()` alone: its event names the path and type, which say which
/// watches it spent (an `async` block pairing it with its key would keep a
/// second slot for the watcher and the key: 248 bytes a watch against
/// 168). Ends when the transport is gone, or is aborted on close (the
/// pending watchers are dropped with it).
async fn forward_watches(
    mut watchers: mpsc::UnboundedReceiver<zkc::OneshotWatcher>,
    armed: Arc<std::sync::Mutex<BTreeSet<Armed>>>,
    digests: Digests,
    events: mpsc::UnboundedSender<TransportEvent>,
    hop_tag: u64,
) {
    let mut pending = Pending::new();
    loop {
        tokio::select! {
            watcher = watchers.recv() => match watcher {
                Some(watcher) => pending.push(watcher.changed()),
                None => return,
            },
            () = std::future::poll_fn(|cx| pending.poll_woken(cx)) => {
                for event in pending.fired() {
                    // The client's watcher has fired, as seen by the first
                    // task it wakes (this one): its callback, in the terms
                    // of the client that has callbacks.
                    hop!(hop::WATCH_CALLBACK, hop_tag);
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
                    forward_one(&events, &event, hop_tag);
                }
            }
        }
    }
}

/// One fired watch into the stream.
fn forward_one(
    events: &mpsc::UnboundedSender<TransportEvent>,
    event: &zkc::WatchedEvent,
    hop_tag: u64,
) {
    match map_watch(event) {
        Some(event) => {
            hop!(hop::WATCH_FORWARDED, hop_tag);
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

    fn is_woken<F: Future>(pending: &Pending<F>) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        pending.poll_woken(&mut cx).is_ready()
    }

    #[tokio::test]
    async fn pending_futures_are_polled_by_group_and_their_slots_given_back() {
        use tokio::sync::oneshot;
        let mut pending = Pending::new();
        let mut senders = Vec::new();
        let watcher = |i: usize, rx: oneshot::Receiver<usize>| async move {
            rx.await.map_or(usize::MAX, |v| v * 1000 + i)
        };
        // More than one group.
        for i in 0..(GROUP + 8) {
            let (tx, rx) = oneshot::channel::<usize>();
            senders.push(Some(tx));
            pending.push(watcher(i, rx));
        }
        assert_eq!((pending.groups.len(), pending.count), (2, GROUP + 8));
        assert!(is_woken(&pending), "a new future is polled once");
        assert_eq!(pending.fired(), Vec::<usize>::new());
        assert!(!is_woken(&pending), "nothing woke since");
        // One in each group fires: both groups are woken, the rest stay.
        for i in [3, GROUP + 5] {
            senders[i].take().map(|tx| tx.send(7));
        }
        assert!(is_woken(&pending));
        assert_eq!(pending.fired(), [7003, 7000 + GROUP + 5]);
        assert_eq!(pending.count, GROUP + 6);
        // A freed slot is used again before a new group is made.
        let (tx, rx) = oneshot::channel::<usize>();
        pending.push(watcher(0, rx));
        assert_eq!((pending.groups.len(), pending.count), (2, GROUP + 7));
        let _ = pending.fired();
        // Once every future has fired, the groups are given back.
        let _ = tx.send(1);
        senders.clear();
        assert!(is_woken(&pending));
        let fired = pending.fired();
        assert_eq!(fired.len(), GROUP + 7);
        assert_eq!(pending.count, 0);
        assert!(pending.groups.is_empty() && pending.free.is_empty());
    }

    #[tokio::test]
    async fn a_second_read_of_an_armed_watch_goes_without_its_watch() {
        let (events, _events) = mpsc::unbounded_channel();
        let (watches, forwarder) = Watches::start(events, 1);
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
