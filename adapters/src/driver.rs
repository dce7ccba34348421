//! The session driver: one task that owns a session's [`Transport`] and its
//! event stream, and runs many queue machines on it (each a [`Machine`]:
//! an election's or a lock's [`Candidate`], an observer). No election logic
//! lives here; every decision is the machines'.
//!
//! Routing, because ZooKeeper gives a session one of everything:
//!
//! - **Replies by op id.** Each machine mints its own [`OpId`]s; the driver
//!   gives every request a session-wide id and answers the machine that
//!   sent it with its own id. An answer for a machine that has gone is
//!   dropped.
//! - **Watch events to every machine watching that path.** The server keeps
//!   one watch per session, path and kind, and fires it once: two machines
//!   arming the same path share it. The driver keeps, per path and kind, the
//!   machines armed since the last firing, and hands the one event to each.
//!   A machine whose arming request is still unanswered when the event
//!   comes gets the event and stays armed (its own request may have set a
//!   newer watch); so an event can reach a machine twice, never not at all —
//!   the machines treat a watch event as "look again".
//! - **Session events to all**, and to a machine added later the last
//!   `Connected`, so it starts as the others did. After a reconnect each
//!   machine re-lists and re-arms its own watches, as it does alone.
//! - **One liveness probe per session**, not one per machine: the lease is a
//!   property of the session. The driver sends an `exists` of `/` every
//!   three tenths of the session timeout while machines run, and feeds every
//!   machine the send time of the newest request of the session the server
//!   answered since the last session event
//!   ([`Candidate::session_answered`]); a machine's own probe falls due only
//!   when its contact is a third of the timeout old, which the session's
//!   probe, three tenths apart, keeps from happening while the server
//!   answers promptly.
//!
//! One slow or failed machine never stalls the others: the driver never
//! awaits a machine's consumer. What it publishes goes into a `watch` (the
//! one [`Status`] snapshot per machine) and a bounded `broadcast` (its
//! notices; a receiver that lags loses the oldest).
//!
//! Each turn (style.md §4.3):
//!
//! 1. wait for one of four sources — a control message from the handles
//!    (a machine added, an intent, a machine's last handle dropped, close),
//!    a transport event, a completed request, or the earliest deadline;
//! 2. read the clock once;
//! 3. **fire what is due first**: every machine whose deadline has passed
//!    gets `handle_timeout(now)` and publishes before the input that woke
//!    us is fed. A process that was frozen (GC pause, SIGSTOP) thereby
//!    learns from each machine that its lease ran out before it acts on
//!    anything that queued up meanwhile;
//! 4. feed the input;
//! 5. publish each machine touched: notices first (status and broadcast),
//!    then start its commands, then file its next deadline.
//!
//! Deadlines are checked against the clock, not trusted from the sleep
//! having fired (quinn's `drive_timer` lesson), so a spurious or late
//! wake-up is harmless.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::future::Future;
use std::num::NonZeroU64;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::{debug, info, info_span, warn, Instrument};
use zkelect_core::{
    Candidate, CandidateError, Command, DemotionReason, Input, Notice, OpId, Reply, Request, Role,
    SessionEvent, Stats, Timestamp, WatchEvent, WatchKind, ZkCode,
};

use crate::transport::{EventStream, Transport, TransportEvent};

/// Counters of one election, read with [`Election::metrics`](crate::Election::metrics).
///
/// A snapshot: plain numbers, cheap to copy and export.
///
/// ```
/// # fn example(election: &zkelect::Election) {
/// let m = election.metrics();
/// println!("elected {} times, {} failovers seen, {} requests", m.elections, m.failovers, m.ops);
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Metrics {
    /// Times this candidate was elected.
    pub elections: u64,
    /// Times this candidate stopped leading (any reason, resigning included).
    pub demotions: u64,
    /// Times the leader this candidate knew of was replaced by another node
    /// (the first leader seen does not count).
    pub failovers: u64,
    /// Changes of the leader as seen by this candidate, the first included.
    pub leader_changes: u64,
    /// Requests performed.
    pub ops: u64,
    /// Requests that failed (any error, `NoNode` included).
    pub op_errors: u64,
    /// Requests that failed with `OperationTimeout` (the transport's bound).
    pub op_timeouts: u64,
    /// Replies the core ignored because their request was superseded.
    pub stale_replies: u64,
    /// Elections won on a watch notification alone, without a round trip.
    pub zero_rtt_takeovers: u64,
    /// Creates whose reply was lost and whose node was found again by its nonce.
    pub recovered_creates: u64,
    /// Leader markers this candidate wrote on its node on being elected.
    pub marks_written: u64,
    /// Leader markers found on a watched node, each sparing a later listing.
    pub marks_seen: u64,
    /// Persistent children named like contenders, skipped (once per name).
    pub persistent_skipped: u64,
    /// New nodes whose fencing token was below the last node this candidate
    /// held (`Notice::TokenRegressed`: the ensemble's history restarted, so
    /// a fenced resource will refuse the new tokens; see the README's
    /// "Running in production").
    pub tokens_regressed: u64,
}

/// Everything a machine publishes that is not a notice, in one snapshot:
/// read with [`Election::status`](crate::Election::status).
///
/// ```
/// # fn example(election: &zkelect::Election) {
/// let status = election.status().borrow().clone();
/// println!("{:?} on node {:?}, {} requests", status.role, status.node, status.stats.ops);
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Status {
    /// The role now.
    pub role: Role,
    /// This machine's node name (not the full path), once known.
    pub node: Option<String>,
    /// While leading (holding): when it lapses unless the server answers again.
    pub lease: Option<Instant>,
    /// Why this machine last stopped leading (holding), if it ever did.
    pub last_demotion: Option<DemotionReason>,
    /// The fatal error that stopped it, if one did (set before the role
    /// turns `Failed`).
    pub error: Option<CandidateError>,
    /// The counters: the machine's own and the driver's requests.
    pub stats: Metrics,
}

impl Default for Status {
    fn default() -> Self {
        Self {
            role: Role::Idle,
            node: None,
            lease: None,
            last_demotion: None,
            error: None,
            stats: Metrics::default(),
        }
    }
}

/// How many notices a slow subscriber may lag behind before it loses the oldest.
const NOTICES_KEPT: usize = 256;

/// How many of a session's requests are out at once; the rest wait in the
/// driver, in order, as plain requests. A burst (ten thousand elections
/// joining at once) would otherwise hold a task and a client future for
/// every request until the server answers: some kilobytes each, which the
/// allocator keeps after the burst, so every idle recipe of a large
/// session would carry the start-up's peak. It costs no throughput: a
/// ZooKeeper server reads no more from its connections while 1,000
/// requests are outstanding (`globalOutstandingLimit`). The session's
/// liveness probe never waits here.
const REQUESTS_OUT: usize = 1000;

/// Gives a map's memory back once it holds less than an eighth of what it
/// has room for (a burst's requests are answered): halving at least each
/// time, so the cost is amortised over the removals.
fn shrink_sparse<K: Eq + std::hash::Hash, V>(map: &mut HashMap<K, V>) {
    if map.capacity() > 64 && map.len() * 8 < map.capacity() {
        map.shrink_to(map.len() * 2);
    }
}

/// The epoch of a request the driver did not send itself: no span's, as
/// the driver cannot tell which span it went out in (spans are counted up
/// from 0 and never reach it).
const NO_SPAN: u64 = u64::MAX;

/// Marks `slot`'s machine closing, with `done` told once it is done and a
/// deadline for its node's deletion.
fn close(
    waiters: &mut BTreeMap<Key, Vec<(Waiter, oneshot::Sender<()>)>>,
    slot: &mut Slot,
    key: Key,
    now: Timestamp,
    done: oneshot::Sender<()>,
) {
    waiters.entry(key).or_default().push((Waiter::Closed, done));
    slot.close_deadline.get_or_insert(Timestamp::from_millis(
        now.as_millis().saturating_add(slot.close_timeout),
    ));
    slot.machine.close(now);
}

/// The answer of the delete a releasing holder sent itself, if `request`
/// (of machine `key`) is that delete: taken, so it is adopted once.
fn adopt(
    deleting: &mut Option<(Key, Deleting)>,
    key: Key,
    request: &Request,
) -> Option<oneshot::Receiver<Result<Reply, ZkCode>>> {
    match (request, &*deleting) {
        (Request::Delete { path, .. }, Some((k, d))) if *k == key && *path == d.path => {
            deleting.take().map(|(_, d)| d.reply)
        }
        _ => None,
    }
}

/// One request as the driver polls it, answered under the session's id.
fn perform(transport: &Arc<dyn Transport>, id: u64, request: Request) -> Performing {
    let transport = Arc::clone(transport);
    Box::pin(async move { (id, answered(&*transport, request).await) })
}

/// Performs `request`, answered exactly once: a transport that panicked
/// answers as a broken connection (the request may or may not have been
/// applied, which the core knows how to handle).
pub(crate) async fn answered(transport: &dyn Transport, request: Request) -> Result<Reply, ZkCode> {
    // Unwind-safe: the transport's future is dropped after a panic, and
    // nothing of the caller's is borrowed across it.
    AssertUnwindSafe(transport.perform(request))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("(no message)");
            warn!(
                panic = message,
                "the transport panicked performing a request"
            );
            Err(ZkCode::ConnectionLoss)
        })
}

/// Starts one request: the driver polls it from now on, in its own task.
fn start(
    transport: &Arc<dyn Transport>,
    tasks: &mut FuturesUnordered<Performing>,
    id: u64,
    request: Request,
) {
    tasks.push(perform(transport, id, request));
}

/// What the driver publishes for one machine: the one status snapshot and
/// the notices. `role` and `lease` are views of the status for
/// [`Election::changes`](crate::Election::changes) and
/// [`Election::lease`](crate::Election::lease), sent in the same step as the
/// status (never later: `zkelect run`'s watchdog and a `lead` closure must
/// see a demotion before the driver's next request goes out).
///
/// The status is a plain value until someone subscribes to it, and goes
/// back to one once every subscriber has gone (a `watch` channel is some
/// 570 bytes, most of it tokio's notifiers; an idle machine of a large
/// session has no subscriber). The views and the notices are made on
/// their first subscription too (a `broadcast` of 256 notices is some
/// 20 KB). Every read, send and subscription goes through the status's
/// lock, and the views are brought up to the status under it, so a view
/// made late ends on the newest status whatever the interleaving.
#[derive(Debug)]
pub(crate) struct Outputs {
    status: std::sync::Mutex<Published>,
    /// Made with the first view or notice subscription: one pointer while
    /// none is made, not three.
    views: OnceLock<Box<Views>>,
}

/// A receiver of the status for a wait inside this crate; see
/// [`Outputs::wait`].
pub(crate) struct Waiting<'a> {
    /// Always `Some` until dropped.
    status: Option<watch::Receiver<Status>>,
    outputs: &'a Outputs,
}

impl std::ops::Deref for Waiting<'_> {
    type Target = watch::Receiver<Status>;
    fn deref(&self) -> &Self::Target {
        // Taken only in `drop`.
        self.status.as_ref().unwrap_or_else(|| unreachable!())
    }
}

impl std::ops::DerefMut for Waiting<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.status.as_mut().unwrap_or_else(|| unreachable!())
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        drop(self.status.take());
        Outputs::unwatched(&mut self.outputs.lock());
    }
}

/// The views of the status, and the notices, each made on its first
/// subscription.
#[derive(Debug, Default)]
struct Views {
    role: OnceLock<watch::Sender<Role>>,
    lease: OnceLock<watch::Sender<Option<Instant>>>,
    /// A notice sent before any subscription would have reached nobody
    /// either way.
    notices: OnceLock<broadcast::Sender<Notice>>,
}

/// The status, as a value or, while anyone subscribes, in a channel.
// The large variant is the idle machine's, the one to keep small in all:
// boxing it would add an allocation to save nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Published {
    Plain(Status),
    Watched(watch::Sender<Status>),
}

impl Outputs {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            status: std::sync::Mutex::new(Published::Plain(Status::default())),
            views: OnceLock::new(),
        })
    }

    fn views(&self) -> &Views {
        self.views.get_or_init(Box::default)
    }

    /// The status's lock. A panic while it was held left a whole status
    /// behind (every change is made in place by plain assignments), so a
    /// poisoned lock is still good to read.
    fn lock(&self) -> std::sync::MutexGuard<'_, Published> {
        self.status
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads the status now.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&Status) -> R) -> R {
        match &*self.lock() {
            Published::Plain(status) => f(status),
            Published::Watched(tx) => f(&tx.borrow()),
        }
    }

    /// The status now, and every change to it.
    pub(crate) fn status(&self) -> watch::Receiver<Status> {
        let mut published = self.lock();
        if let Published::Plain(status) = &mut *published {
            let status = std::mem::take(status);
            *published = Published::Watched(watch::channel(status).0);
        }
        match &*published {
            Published::Watched(tx) => tx.subscribe(),
            // Made a channel just above.
            Published::Plain(status) => watch::channel(status.clone()).1,
        }
    }

    /// The status now and every change to it, for a wait inside this crate
    /// (a join, an acquisition): when the wait ends, or is cancelled, the
    /// status goes back to a plain value at once if nobody else
    /// subscribes, rather than at the machine's next change (an idle
    /// machine may have none for a long time, and would keep the channel).
    pub(crate) fn wait(&self) -> Waiting<'_> {
        Waiting {
            status: Some(self.status()),
            outputs: self,
        }
    }

    /// Back to a plain value if nobody subscribes to the status any more
    /// (a new subscriber waits for the lock, and then makes a channel anew).
    fn unwatched(published: &mut Published) {
        if let Published::Watched(tx) = &*published {
            if tx.is_closed() {
                let status = tx.borrow().clone();
                *published = Published::Plain(status);
            }
        }
    }

    /// Whether any task could be waiting on a change: someone holds a
    /// receiver of the status, of a view or of the notices.
    fn watched(&self) -> bool {
        let status = match &*self.lock() {
            Published::Watched(tx) => tx.receiver_count() > 0,
            Published::Plain(_) => false,
        };
        status
            || self.views.get().is_some_and(|v| {
                v.role.get().is_some_and(|tx| tx.receiver_count() > 0)
                    || v.lease.get().is_some_and(|tx| tx.receiver_count() > 0)
                    || v.notices.get().is_some_and(|tx| tx.receiver_count() > 0)
            })
    }

    /// Every notice from now on.
    pub(crate) fn notices(&self) -> broadcast::Receiver<Notice> {
        self.views()
            .notices
            .get_or_init(|| broadcast::channel(NOTICES_KEPT).0)
            .subscribe()
    }

    /// The role now, and every change to it.
    pub(crate) fn role(&self) -> watch::Receiver<Role> {
        let view = self
            .views()
            .role
            .get_or_init(|| watch::channel(Role::Idle).0);
        self.sync(view, |s| s.role);
        view.subscribe()
    }

    /// The lease now, and every change to it.
    pub(crate) fn lease(&self) -> watch::Receiver<Option<Instant>> {
        let view = self.views().lease.get_or_init(|| watch::channel(None).0);
        self.sync(view, |s| s.lease);
        view.subscribe()
    }

    /// Brings a view up to the status. The status's lock is taken before
    /// the view's, here and in [`send`](Self::send) alike (so the two never
    /// wait on each other in a cycle).
    fn sync<T: PartialEq>(&self, view: &watch::Sender<T>, of: impl Fn(&Status) -> T) {
        self.read(|status| view.send_if_modified(|v| replace(v, of(status))));
    }

    /// Sends `change` to the status, and to the views that exist, as one
    /// snapshot: the views are brought up to the new status while the
    /// status's lock is still held, so whoever sees a change in a view and
    /// then reads the status finds it there too, and whoever sees it in the
    /// status finds every view already past it.
    fn send(&self, change: impl FnOnce(&mut Status) -> bool) {
        let mut published = self.lock();
        Self::unwatched(&mut published);
        let views = |status: &Status| {
            let Some(views) = self.views.get() else {
                return;
            };
            if let Some(view) = views.role.get() {
                view.send_if_modified(|v| replace(v, status.role));
            }
            if let Some(view) = views.lease.get() {
                view.send_if_modified(|v| replace(v, status.lease));
            }
        };
        match &mut *published {
            Published::Plain(status) => {
                if change(status) {
                    views(status);
                }
            }
            Published::Watched(tx) => {
                tx.send_if_modified(|status| {
                    let changed = change(status);
                    if changed {
                        views(status);
                    }
                    changed
                });
            }
        }
    }
}

/// What the driver needs of a queue machine: the core's method kinds. The
/// driver holds machines as `Box<dyn Machine>`, so an election's, a lock's
/// and an observer's run side by side on one session.
pub(crate) trait Machine: Send + 'static {
    /// The queue's path (labels logs and metrics).
    fn path(&self) -> &str;
    /// Feeds a reply, a watch event or a session event.
    fn handle(&mut self, now: Timestamp, input: Input);
    /// Fires what is due.
    fn handle_timeout(&mut self, now: Timestamp);
    /// The next request to perform.
    fn poll_command(&mut self) -> Option<Command>;
    /// The next notice to publish.
    fn poll_notice(&mut self) -> Option<Notice>;
    /// When `handle_timeout` is due next.
    fn poll_timeout(&self) -> Option<Timestamp>;
    /// Takes part (again).
    fn join(&mut self, _now: Timestamp) {}
    /// Steps down.
    fn resign(&mut self, _now: Timestamp, _rejoin: bool) {}
    /// Leaves for good.
    fn close(&mut self, now: Timestamp);
    /// The server answered a request of the session sent at `sent_at` (see
    /// [`Candidate::session_answered`]); only machines with a lease care.
    fn session_answered(&mut self, _now: Timestamp, _sent_at: Timestamp) {}
    /// Closed or failed: the driver drops it.
    fn is_done(&self) -> bool;
    /// Failed (rather than closed).
    fn is_failed(&self) -> bool;
    /// The role now.
    fn role(&self) -> Role;
    /// Its node's name.
    fn node(&self) -> Option<&str> {
        None
    }
    /// When its lease lapses.
    fn lease_expiry(&self) -> Option<Timestamp> {
        None
    }
    /// Its counters.
    fn stats(&self) -> Stats {
        Stats::default()
    }
    /// Whether its counters and leader gauge go to the metrics facade: not
    /// an observer's, whose path may be an election this process takes part
    /// in (the series are labelled by path alone).
    fn metered(&self) -> bool {
        true
    }
}

impl Machine for Candidate {
    fn path(&self) -> &str {
        self.config().path()
    }
    fn handle(&mut self, now: Timestamp, input: Input) {
        Candidate::handle(self, now, input);
    }
    fn handle_timeout(&mut self, now: Timestamp) {
        Candidate::handle_timeout(self, now);
    }
    fn poll_command(&mut self) -> Option<Command> {
        Candidate::poll_command(self)
    }
    fn poll_notice(&mut self) -> Option<Notice> {
        Candidate::poll_notice(self)
    }
    fn poll_timeout(&self) -> Option<Timestamp> {
        Candidate::poll_timeout(self)
    }
    fn join(&mut self, now: Timestamp) {
        Candidate::join(self, now);
    }
    fn resign(&mut self, now: Timestamp, rejoin: bool) {
        Candidate::resign(self, now, rejoin);
    }
    fn close(&mut self, now: Timestamp) {
        Candidate::close(self, now);
    }
    fn session_answered(&mut self, now: Timestamp, sent_at: Timestamp) {
        Candidate::session_answered(self, now, sent_at);
    }
    fn is_done(&self) -> bool {
        self.is_closed() || Candidate::is_failed(self)
    }
    fn is_failed(&self) -> bool {
        Candidate::is_failed(self)
    }
    fn role(&self) -> Role {
        Candidate::role(self)
    }
    fn node(&self) -> Option<&str> {
        Candidate::node(self)
    }
    fn lease_expiry(&self) -> Option<Timestamp> {
        Candidate::lease_expiry(self)
    }
    fn stats(&self) -> Stats {
        Candidate::stats(self)
    }
}

/// A machine on a session, as its handles name it.
pub(crate) type Key = u64;

/// What the handles ask the driver. Intents carry an acknowledgement,
/// sent once the intent has been fed and its notices published.
pub(crate) enum Control {
    /// Runs a new machine. With `ends_session`, the session closes when it
    /// is done (a one-election session: `Election::connect`).
    Add {
        key: Key,
        machine: Box<dyn Machine>,
        outputs: Arc<Outputs>,
        close_timeout: Duration,
        ends_session: bool,
    },
    /// An intent for one machine.
    Intent { key: Key, intent: Intent },
    /// Every handle of this machine is gone: nobody can close it, so close it now.
    Dropped { key: Key },
    /// Close every machine, then the session.
    Close { done: oneshot::Sender<()> },
}

/// What the application asks one machine.
#[derive(Debug)]
pub(crate) enum Intent {
    Join {
        done: Option<oneshot::Sender<()>>,
    },
    Resign {
        rejoin: bool,
        done: oneshot::Sender<()>,
    },
    Close {
        done: oneshot::Sender<()>,
    },
    /// A close whose node's delete is already on its way: a lock's holder
    /// that released sent it itself (see [`Deleting`]).
    Release {
        done: oneshot::Sender<()>,
        deleting: Deleting,
    },
}

/// The delete of a lock's own node that its releasing holder sent itself,
/// the moment it let go, instead of waiting for the driver: the control
/// channel, the core's close and the status would otherwise stand between
/// a release and the delete that lets the next holder in (by probes, the
/// delete went out some 50 µs after `release`, and now some 25:
/// bench/README.md).
///
/// It is safe to send ahead because the holder asked: nothing of its own
/// still acts on the hold, and the core's close of a holder deletes exactly
/// this node at once. The driver adopts it as the core's own delete when
/// the close emits one for the same path, so the server sees one delete; if
/// the close does not (the holder's view of its status was a turn behind),
/// the driver drops it, and the core's own delete, when it comes, finds the
/// node gone (`NoNode` ends a close as a delete does). A protected name
/// carries its session's nonce, so a delete sent late can never reach
/// another session's node. The core dates the adopted delete's answer from
/// when it emitted the delete, a little after it went out: that can only
/// lengthen the lease of a machine that has already stopped holding (its
/// close demoted it first), and the session's own contact is not dated
/// from it at all (`NO_SPAN`).
#[derive(Debug)]
pub(crate) struct Deleting {
    /// The node's full path, as the core names it.
    pub(crate) path: String,
    /// Its answer; a sender dropped unanswered (the release was cancelled,
    /// or the transport panicked) answers as a broken connection.
    pub(crate) reply: oneshot::Receiver<Result<Reply, ZkCode>>,
}

/// Maps the runtime's clock onto the machine's: milliseconds since the
/// driver started. Built on `tokio::time::Instant`, so paused test time
/// (`#[tokio::test(start_paused = true)]`) is the machine's time too.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    epoch: Instant,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Self {
            epoch: Instant::now(),
        }
    }

    pub(crate) fn now(&self) -> Timestamp {
        self.at(Instant::now())
    }

    fn at(&self, instant: Instant) -> Timestamp {
        let ms = instant.saturating_duration_since(self.epoch).as_millis();
        Timestamp::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
    }

    /// The instant of a machine timestamp (rounded down to the millisecond
    /// the machine sees, so a sleep until it never wakes before it is due).
    /// A timestamp too far out for the runtime's clock (a close that waits
    /// until the session ends) maps to a century from the epoch.
    pub(crate) fn instant(&self, at: Timestamp) -> Instant {
        const FAR: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
        let after = Duration::from_millis(at.as_millis()).min(FAR);
        self.epoch.checked_add(after).unwrap_or(self.epoch + FAR)
    }
}

/// Which of the server's two watch tables a request arms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum WatchClass {
    /// `exists`, `getData`: fired by a create, a delete, a data change.
    Data,
    /// `getChildren`: fired by a child change and by the node's deletion.
    Child,
}

impl WatchClass {
    fn of(request: &Request) -> Option<Self> {
        match request {
            Request::GetChildren { watch: true, .. } => Some(Self::Child),
            Request::GetData { watch: true, .. } | Request::Exists { watch: true, .. } => {
                Some(Self::Data)
            }
            _ => None,
        }
    }

    /// The tables an event fires, as the server does.
    fn fired_by(kind: WatchKind) -> &'static [Self] {
        match kind {
            WatchKind::NodeCreated | WatchKind::NodeDataChanged => &[Self::Data],
            WatchKind::NodeChildrenChanged => &[Self::Child],
            WatchKind::NodeDeleted => &[Self::Data, Self::Child],
        }
    }
}

/// A path and watch table, as the books know them: a 128-bit digest under
/// keys drawn for each session, not the path's text (a copy of every
/// watched path, some 60 bytes and an allocation each, was the largest
/// part of an idle machine's books).
///
/// Two pairs digest alike by chance about once in 2^128; the keys are
/// secret, so no path can be chosen to collide. A collision would hand one
/// event to the machines of both pairs (harmless: a watch event means
/// "look again") and disarm both (the other pair's next event would then
/// reach nobody).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Armed(u64, u64);

/// The session's digest keys for [`Armed`].
struct Digest(std::hash::RandomState, std::hash::RandomState);

impl Digest {
    fn new() -> Self {
        // Each `RandomState` has keys of its own.
        Self(std::hash::RandomState::new(), std::hash::RandomState::new())
    }

    fn of(&self, path: &str, class: WatchClass) -> Armed {
        use std::hash::BuildHasher;
        Armed(
            self.0.hash_one((path, class)),
            self.1.hash_one((path, class)),
        )
    }
}

/// Whose a request in flight is.
enum Whose {
    /// A machine's, under its own id, and the watch it arms.
    Machine {
        key: Key,
        op: OpId,
        arms: Option<Armed>,
    },
    /// The session's liveness probe.
    Probe,
}

/// A request in flight: whose, and when it went out (in which span between
/// session events), for the contact its answer proves.
struct InFlight {
    whose: Whose,
    sent_at: Timestamp,
    epoch: u64,
}

/// The session's one liveness probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// Not connected (or no timeout known): nothing to prove.
    Off,
    /// Connected: the next probe goes out then.
    Due(Timestamp),
    /// Out, answered or not.
    Sent,
}

/// What a waiter on a machine waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waiter {
    /// The machine's next settling (a join or resign intent acted on).
    Settled,
    /// The machine's end (a close intent).
    Closed,
}

/// One machine on the session. What it has published (its last demotion,
/// its error, the driver's counts of it) lives only in its status: an
/// idle machine keeps each once.
struct Slot {
    machine: Box<dyn Machine>,
    outputs: Arc<Outputs>,
    facade: Facade,
    /// Its entry in the deadline index.
    filed: Option<Timestamp>,
    /// How long a close may take, in the machine's milliseconds.
    close_timeout: u64,
    /// Set by a close intent: past it, the machine is dropped undeleted.
    close_deadline: Option<Timestamp>,
    /// What it armed (a few entries at most: its own node, a predecessor),
    /// a boxed slice: it changes only when a watch is armed or fires.
    armed: Box<[Armed]>,
    ends_session: bool,
}

/// The session driver task's state.
pub(crate) struct SessionDriver {
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) events: EventStream,
    pub(crate) control: mpsc::UnboundedReceiver<Control>,
    pub(crate) clock: Clock,
    /// How long closing the session waits for the machines, and then for
    /// the transport's close.
    pub(crate) close_timeout: Duration,
}

/// What woke the driver.
enum Wake {
    Control(Option<Control>),
    Event(Option<TransportEvent>),
    Done(Answer),
    Timer,
    /// A turn of its own for the metrics (see `State::unmirrored`).
    Flush,
}

type Answer = (u64, Result<Reply, ZkCode>);

/// One request in flight, polled by the driver itself.
type Performing = Pin<Box<dyn Future<Output = Answer> + Send>>;

struct State {
    /// Boxed: a slot is some 200 bytes, and a map's node holds eleven
    /// entries inline but is often half full (a key added last splits it),
    /// so inline slots would cost nearly twice their size.
    slots: BTreeMap<Key, Box<Slot>>,
    deadlines: BTreeSet<(Timestamp, Key)>,
    /// The requests in flight, polled in the driver's own task rather than
    /// spawned: the request goes out on the turn the machine asked for it,
    /// and its answer wakes the driver directly (a task each would cost two
    /// more wake-ups, often across threads, per request).
    tasks: FuturesUnordered<Performing>,
    /// Requests waiting for one of the [`REQUESTS_OUT`] places (their
    /// `in_flight` entries are made, and stamped again when they go out).
    queued: VecDeque<(u64, Request)>,
    in_flight: HashMap<u64, InFlight>,
    next_op: u64,
    /// Per path and kind, and machine: the machines armed since the last
    /// firing, with how many of their arming requests are still unanswered.
    /// One flat map, not a list of machines per path: a path is almost
    /// always watched by one machine, and a list would cost it an
    /// allocation and a map value of its own.
    watches: BTreeMap<(Armed, Key), u32>,
    digest: Digest,
    /// Who waits on a machine, for the machines someone waits on (an
    /// idle machine has no entry, rather than an empty list of its own).
    waiters: BTreeMap<Key, Vec<(Waiter, oneshot::Sender<()>)>>,
    /// The last `Connected`, while connected: what a new machine is told.
    connected: Option<SessionEvent>,
    /// Bumped by every session event: an answer proves contact only for
    /// the span it was sent in.
    epoch: u64,
    /// The send time of the newest request answered in this span.
    answered: Option<Timestamp>,
    probe: Probe,
    closing: bool,
    /// A demotion or an election was published to a subscriber this turn:
    /// the requests it led to (a resign's delete, a new leader's marker)
    /// wait until the tasks it woke have had their turn.
    told: bool,
    /// What metered machines have to tell the metrics facade since it was
    /// last told, in order. It is told at the start of the driver's next
    /// turn, not in this one: the facade builds a key per series (an
    /// allocation, a hash), which would otherwise sit between a release and
    /// its delete, or a takeover and its holder being told. With nothing
    /// else to do, the next turn comes right after the `select!` has sent
    /// this turn's requests (see `Wake::Flush`); under load, it is whatever
    /// wakes the driver next, so the facade is never more than a turn
    /// behind.
    unmirrored: Vec<(Key, Mirror)>,
    /// A releasing holder's delete, from its `Release` to the end of the
    /// settle that follows it: adopted there, or dropped.
    deleting: Option<(Key, Deleting)>,
    closers: Vec<oneshot::Sender<()>>,
}

impl SessionDriver {
    /// Runs until closed (or every handle is gone and every machine done),
    /// then closes the transport.
    pub(crate) async fn run(self) {
        self.run_inner().instrument(info_span!("session")).await;
    }

    async fn run_inner(mut self) {
        let mut st = State {
            slots: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            tasks: FuturesUnordered::new(),
            queued: VecDeque::new(),
            in_flight: HashMap::new(),
            next_op: 0,
            watches: BTreeMap::new(),
            digest: Digest::new(),
            waiters: BTreeMap::new(),
            connected: None,
            epoch: 0,
            answered: None,
            probe: Probe::Off,
            closing: false,
            told: false,
            unmirrored: Vec::new(),
            deleting: None,
            closers: Vec::new(),
        };
        let mut control_open = true;
        let mut events_open = true;
        let mut session_deadline: Option<Instant> = None;
        loop {
            if (st.closing || !control_open) && st.slots.is_empty() {
                break;
            }
            if session_deadline.is_some_and(|d| Instant::now() >= d) {
                warn!("close: the machines did not finish in time; closing the session instead");
                break;
            }
            let next = st.deadlines.first().map(|(t, _)| *t);
            // The session's probe wakes us only while a machine runs (it
            // stays due, and would wake us at once forever, while none does).
            let probe_due = match st.probe {
                Probe::Due(at) if !st.slots.is_empty() => Some(at),
                _ => None,
            };
            let next = match (next, probe_due) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
            .map(|t| self.clock.instant(t));
            let wake_at = match (next, session_deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            // The tasks woken by a published demotion or election run before
            // the requests that follow it go out. For a demotion this is
            // zombie-proofing (a resign's delete lets the successor in). For
            // an election it is speed: the new holder's `acquire` (or `lead`)
            // returns before the driver sends the marker and re-arms, not
            // after (some 30 µs of a lock hand-off, bench/README.md). The
            // requests are polled only in the `select!` below, so one yield
            // here is enough; it costs a turn, not a thread's wake-up.
            if std::mem::take(&mut st.told) {
                tokio::task::yield_now().await;
            }
            let wake = tokio::select! {
                c = self.control.recv(), if control_open => Wake::Control(c),
                e = self.events.recv(), if events_open => Wake::Event(e),
                Some(done) = st.tasks.next(), if !st.tasks.is_empty() => Wake::Done(done),
                () = sleep_until(wake_at), if wake_at.is_some() => Wake::Timer,
                // Pending on its first poll (in which the requests of this
                // turn go out, unless another branch is ready first), ready
                // on the next: a turn for the facade when nothing else
                // comes.
                () = tokio::task::yield_now(), if !st.unmirrored.is_empty() => Wake::Flush,
            };
            self.flush_metrics(&mut st);
            // One clock reading per turn.
            let now = self.clock.now();
            // Zombie-proofing: whatever woke us, fire what is due before the
            // input is acted on, and let the application hear of it first.
            self.fire_due(&mut st, now);
            self.probe_if_due(&mut st, now);
            match wake {
                Wake::Control(Some(c)) => self.control(&mut st, now, c),
                Wake::Control(None) => {
                    debug!("every handle dropped: closing");
                    control_open = false;
                    self.close_all(&mut st, now);
                }
                Wake::Event(Some(TransportEvent::Session(e))) => {
                    info!(event = ?e, machines = st.slots.len(), "session");
                    st.epoch += 1;
                    st.answered = None;
                    st.probe = Probe::Off;
                    match e {
                        SessionEvent::Connected { timeout, .. } => {
                            st.connected = Some(e);
                            // Each machine proves contact on a new connection
                            // itself; the session's probe takes over after.
                            if let Some(every) = probe_every(timeout) {
                                st.probe = Probe::Due(now + every);
                            }
                        }
                        SessionEvent::Expired | SessionEvent::Closed => {
                            st.connected = None;
                            // The server dropped every watch of the session.
                            st.watches.retain(|_, pending| *pending > 0);
                        }
                        SessionEvent::Disconnected | SessionEvent::AuthFailed => {
                            st.connected = None;
                        }
                    }
                    let keys: Vec<Key> = st.slots.keys().copied().collect();
                    for key in keys {
                        self.feed(&mut st, key, now, Input::Session(e));
                    }
                }
                Wake::Event(Some(TransportEvent::Watch(e))) => {
                    // The application's intents sent so far go first: a
                    // releasing holder sends its node's delete itself right
                    // after its `Release` (see `Deleting`), so what that
                    // delete sets off (its own node's `NodeDeleted`) must not
                    // be acted on before the release it follows, or the hold
                    // would read as revoked. Only here: taking every intent
                    // before anything else would hold a burst of joins'
                    // replies back behind the whole burst.
                    while let Ok(c) = self.control.try_recv() {
                        self.control(&mut st, now, c);
                    }
                    self.watch_fired(&mut st, now, e);
                }
                Wake::Event(None) => {
                    debug!("the transport's event stream ended");
                    events_open = false;
                }
                Wake::Done(done) => self.answer(&mut st, now, done),
                // Already handled above: deadlines are checked against the
                // clock, and the facade is told on every turn.
                Wake::Timer | Wake::Flush => {}
            }
            self.start_queued(&mut st);
            if st.closing && session_deadline.is_none() {
                session_deadline = Some(Instant::now() + self.close_timeout);
            }
        }
        // Machines still here (a close that ran out of time): done now.
        let keys: Vec<Key> = st.slots.keys().copied().collect();
        for key in keys {
            self.finish(&mut st, key);
        }
        // The requests still in flight are dropped before the transport
        // closes, so nothing that holds the transport outlives the driver.
        drop(std::mem::take(&mut st.tasks));
        if tokio::time::timeout(self.close_timeout, self.transport.close())
            .await
            .is_err()
        {
            warn!(timeout = ?self.close_timeout, "close: the transport did not close in time");
        }
        for done in st.closers {
            let _ = done.send(());
        }
        info!("session closed");
    }

    fn control(&self, st: &mut State, now: Timestamp, control: Control) {
        match control {
            Control::Add {
                key,
                machine,
                outputs,
                close_timeout,
                ends_session,
            } => {
                let facade = Facade::new(machine.path());
                let slot = Slot {
                    machine,
                    outputs,
                    facade,
                    filed: None,
                    close_timeout: u64::try_from(close_timeout.as_millis()).unwrap_or(u64::MAX),
                    close_deadline: None,
                    armed: Box::default(),
                    ends_session,
                };
                st.slots.insert(key, Box::new(slot));
                if st.closing {
                    self.intent(
                        st,
                        key,
                        now,
                        Intent::Close {
                            done: oneshot::channel().0,
                        },
                    );
                } else if let Some(connected) = st.connected {
                    self.feed(st, key, now, Input::Session(connected));
                }
                self.settle(st, key);
            }
            Control::Intent { key, intent } => self.intent(st, key, now, intent),
            Control::Dropped { key } => {
                debug!(key, "every handle of a machine dropped: closing it");
                self.intent(
                    st,
                    key,
                    now,
                    Intent::Close {
                        done: oneshot::channel().0,
                    },
                );
            }
            Control::Close { done } => {
                st.closers.push(done);
                self.close_all(st, now);
            }
        }
    }

    fn close_all(&self, st: &mut State, now: Timestamp) {
        st.closing = true;
        let keys: Vec<Key> = st.slots.keys().copied().collect();
        for key in keys {
            self.intent(
                st,
                key,
                now,
                Intent::Close {
                    done: oneshot::channel().0,
                },
            );
        }
    }

    fn intent(&self, st: &mut State, key: Key, now: Timestamp, intent: Intent) {
        let Some(slot) = st.slots.get_mut(&key) else {
            // Already done: its handles learn it from the status.
            return;
        };
        match intent {
            Intent::Join { done } => {
                debug!(key, "intent: join");
                slot.machine.join(now);
                if let Some(done) = done {
                    st.waiters
                        .entry(key)
                        .or_default()
                        .push((Waiter::Settled, done));
                }
            }
            Intent::Resign { rejoin, done } => {
                debug!(key, rejoin, "intent: resign");
                slot.machine.resign(now, rejoin);
                st.waiters
                    .entry(key)
                    .or_default()
                    .push((Waiter::Settled, done));
            }
            Intent::Close { done } => {
                debug!(key, "intent: close");
                close(&mut st.waiters, slot, key, now, done);
            }
            Intent::Release { done, deleting } => {
                debug!(
                    key,
                    path = deleting.path,
                    "intent: close, its delete already sent"
                );
                st.deleting = Some((key, deleting));
                close(&mut st.waiters, slot, key, now, done);
            }
        }
        self.settle(st, key);
        // Not the close's own delete: dropped (see `Deleting`).
        st.deleting = None;
    }

    fn feed(&self, st: &mut State, key: Key, now: Timestamp, input: Input) {
        if let Some(slot) = st.slots.get_mut(&key) {
            slot.machine.handle(now, input);
            self.settle(st, key);
        }
    }

    /// Every machine whose deadline has passed: its timeout, or — past its
    /// close deadline — its end.
    fn fire_due(&self, st: &mut State, now: Timestamp) {
        while let Some(&(at, key)) = st.deadlines.first() {
            if at > now {
                break;
            }
            st.deadlines.pop_first();
            let Some(slot) = st.slots.get_mut(&key) else {
                continue;
            };
            slot.filed = None;
            if slot.close_deadline.is_some_and(|d| d <= now) {
                warn!(
                    path = slot.machine.path(),
                    "close: the node's deletion did not complete in time; \
                     it goes when the session ends"
                );
                self.finish(st, key);
                continue;
            }
            if slot.machine.poll_timeout().is_some_and(|t| t <= now) {
                slot.machine.handle_timeout(now);
            }
            self.settle(st, key);
        }
    }

    fn watch_fired(&self, st: &mut State, now: Timestamp, event: WatchEvent) {
        debug!(kind = ?event.kind, path = event.path, "watch fired");
        let mut to = BTreeSet::new();
        for class in WatchClass::fired_by(event.kind) {
            let entry = st.digest.of(&event.path, *class);
            let armed: Vec<(Key, u32)> = st
                .watches
                .range((entry, Key::MIN)..=(entry, Key::MAX))
                .map(|(&(_, key), &pending)| (key, pending))
                .collect();
            // Fired once: disarmed, but for machines whose own arming is
            // still unanswered (it may have set a newer watch).
            for (key, pending) in armed {
                to.insert(key);
                if pending == 0 {
                    st.watches.remove(&(entry, key));
                    if let Some(slot) = st.slots.get_mut(&key) {
                        let mut armed = std::mem::take(&mut slot.armed).into_vec();
                        armed.retain(|a| *a != entry);
                        slot.armed = armed.into_boxed_slice();
                    }
                }
            }
        }
        for key in to {
            self.feed(st, key, now, Input::Watch(event.clone()));
        }
    }

    /// Sends the session's probe if it is due and some machine runs.
    fn probe_if_due(&self, st: &mut State, now: Timestamp) {
        let Probe::Due(at) = st.probe else {
            return;
        };
        if at > now || st.slots.is_empty() {
            return;
        }
        st.probe = Probe::Sent;
        st.next_op += 1;
        let id = st.next_op;
        let request = Request::Exists {
            path: "/".to_owned(),
            watch: false,
        };
        debug!(session_op = id, "perform: the session's probe");
        st.in_flight.insert(
            id,
            InFlight {
                whose: Whose::Probe,
                sent_at: self.clock.now(),
                epoch: st.epoch,
            },
        );
        start(&self.transport, &mut st.tasks, id, request);
    }

    /// Sends waiting requests while fewer than [`REQUESTS_OUT`] are out. A
    /// request's send time (the contact its answer proves) and span are
    /// those of its going out, not of its queueing.
    fn start_queued(&self, st: &mut State) {
        while st.tasks.len() < REQUESTS_OUT {
            let Some((id, request)) = st.queued.pop_front() else {
                break;
            };
            if let Some(flight) = st.in_flight.get_mut(&id) {
                flight.sent_at = self.clock.now();
                flight.epoch = st.epoch;
            }
            start(&self.transport, &mut st.tasks, id, request);
        }
        if st.queued.is_empty() && st.queued.capacity() > 0 {
            st.queued = VecDeque::new();
        }
    }

    /// The session's probe came back: every machine hears of the newest
    /// contact, and the next probe is filed three tenths of the timeout after
    /// the request that proved it went out (after now, if none did: the
    /// machines' own probes cover a server that does not answer).
    fn probe_answered(
        &self,
        st: &mut State,
        now: Timestamp,
        epoch: u64,
        result: Result<Reply, ZkCode>,
    ) {
        if epoch != st.epoch {
            return;
        }
        let Some(SessionEvent::Connected { timeout, .. }) = st.connected else {
            return;
        };
        st.probe = match probe_every(timeout) {
            Some(every) => Probe::Due(st.answered.unwrap_or(now) + every),
            None => Probe::Off,
        };
        let Some(sent_at) = st.answered else {
            debug!(?result, "the session's probe: no answer");
            return;
        };
        let keys: Vec<Key> = st.slots.keys().copied().collect();
        for key in keys {
            if let Some(slot) = st.slots.get_mut(&key) {
                slot.machine.session_answered(now, sent_at);
                self.settle(st, key);
            }
        }
    }

    /// Routes a finished request to its machine.
    fn answer(&self, st: &mut State, now: Timestamp, (id, result): Answer) {
        let Some(InFlight {
            whose,
            sent_at,
            epoch,
        }) = st.in_flight.remove(&id)
        else {
            return;
        };
        shrink_sparse(&mut st.in_flight);
        let answered = !matches!(
            result,
            Err(ZkCode::ConnectionLoss | ZkCode::OperationTimeout | ZkCode::SessionExpired)
        );
        if answered && epoch == st.epoch {
            st.answered = Some(st.answered.map_or(sent_at, |t| t.max(sent_at)));
        }
        let (key, op, arms) = match whose {
            Whose::Machine { key, op, arms } => (key, op, arms),
            Whose::Probe => {
                self.probe_answered(st, now, epoch, result);
                return;
            }
        };
        if let Some(entry) = arms {
            if let Some(pending) = st.watches.get_mut(&(entry, key)) {
                *pending = pending.saturating_sub(1);
            }
        }
        let Some(slot) = st.slots.get_mut(&key) else {
            debug!(%op, "reply for a machine that is gone");
            return;
        };
        match &result {
            Ok(_) => debug!(%op, "reply"),
            Err(code) => {
                let timeout = *code == ZkCode::OperationTimeout;
                let moved = slot.publish(&self.clock, |s| {
                    s.stats.op_errors += 1;
                    s.stats.op_timeouts += u64::from(timeout);
                    true
                });
                note_moved(&mut st.unmirrored, key, moved);
                debug!(%op, %code, "reply: error");
            }
        }
        self.feed(st, key, now, Input::Reply { op, result });
    }

    /// Publishes what one machine has to say, starts its requests, files
    /// its next deadline; drops it once it is done.
    fn settle(&self, st: &mut State, key: Key) {
        let Some(slot) = st.slots.get_mut(&key) else {
            return;
        };
        let now = Moment::now(&self.clock);
        while let Some(notice) = slot.machine.poll_notice() {
            let failover = slot.note(&notice, now, &mut |m| st.unmirrored.push((key, m)));
            // Only news someone may be waiting on is worth a yield (a lock's
            // release usually has no one: its holder asked for it).
            st.told |= matches!(notice, Notice::Demoted { .. } | Notice::Elected { .. })
                && slot.outputs.watched();
            // The status goes out with each notice, so a watcher of the role
            // sees a demotion as soon as a subscriber of notices does.
            let moved = slot.publish(&self.clock, |s| count(s, &notice, failover));
            note_moved(&mut st.unmirrored, key, moved);
            if let Some(notices) = slot.outputs.views.get().and_then(|v| v.notices.get()) {
                let _ = notices.send(notice);
            }
        }
        let mut ops = 0;
        while let Some(Command { op, request }) = slot.machine.poll_command() {
            ops += 1;
            st.next_op += 1;
            let id = st.next_op;
            debug!(%op, session_op = id, verb = request.verb(), path = request.path(), "perform");
            let arms = WatchClass::of(&request).map(|class| st.digest.of(request.path(), class));
            if let Some(entry) = arms {
                *st.watches.entry((entry, key)).or_default() += 1;
                if !slot.armed.contains(&entry) {
                    let mut armed = std::mem::take(&mut slot.armed).into_vec();
                    armed.push(entry);
                    slot.armed = armed.into_boxed_slice();
                }
            }
            if let Some(reply) = adopt(&mut st.deleting, key, &request) {
                // Already out, so not queued; sent before the driver knew, so
                // its answer dates no contact of this span (`NO_SPAN`).
                st.in_flight.insert(
                    id,
                    InFlight {
                        whose: Whose::Machine { key, op, arms },
                        sent_at: self.clock.now(),
                        epoch: NO_SPAN,
                    },
                );
                st.tasks.push(Box::pin(async move {
                    (id, reply.await.unwrap_or(Err(ZkCode::ConnectionLoss)))
                }));
                continue;
            }
            st.in_flight.insert(
                id,
                InFlight {
                    whose: Whose::Machine { key, op, arms },
                    sent_at: self.clock.now(),
                    epoch: st.epoch,
                },
            );
            if st.tasks.len() < REQUESTS_OUT && st.queued.is_empty() {
                start(&self.transport, &mut st.tasks, id, request);
            } else {
                st.queued.push_back((id, request));
            }
        }
        let moved = slot.publish(&self.clock, |s| {
            s.stats.ops += ops;
            ops > 0
        });
        note_moved(&mut st.unmirrored, key, moved);
        if let Some(waiters) = st.waiters.get_mut(&key) {
            if waiters.iter().any(|(w, _)| *w == Waiter::Settled) {
                let (settled, closing): (Vec<_>, Vec<_>) = std::mem::take(waiters)
                    .into_iter()
                    .partition(|(w, _)| *w == Waiter::Settled);
                if closing.is_empty() {
                    st.waiters.remove(&key);
                } else {
                    *waiters = closing;
                }
                for (_, ack) in settled {
                    let _ = ack.send(());
                }
            }
        }
        if slot.machine.is_done() {
            self.finish(st, key);
            return;
        }
        let due = match (slot.machine.poll_timeout(), slot.close_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if due != slot.filed {
            if let Some(old) = slot.filed.take() {
                st.deadlines.remove(&(old, key));
            }
            if let Some(at) = due {
                st.deadlines.insert((at, key));
            }
            slot.filed = due;
        }
    }

    /// Tells the metrics facade what the machines had to tell it.
    fn flush_metrics(&self, st: &mut State) {
        use metrics::{gauge, histogram};
        for (key, mirror) in std::mem::take(&mut st.unmirrored) {
            let Some(slot) = st.slots.get(&key) else {
                continue;
            };
            let path = slot.machine.path();
            match mirror {
                Mirror::Counters(before) => {
                    let after = slot.outputs.read(|s| s.stats);
                    Facade::counters(path, &before, &after);
                }
                Mirror::Leader(value) => {
                    gauge!("zkelect_leader", "path" => path.to_owned()).set(value);
                }
                Mirror::Histogram(name, d) => {
                    histogram!(name, "path" => path.to_owned()).record(d);
                }
            }
        }
    }

    /// Drops a machine that is done (or out of time): its last status, its
    /// closers, its watches and deadline.
    fn finish(&self, st: &mut State, key: Key) {
        // What it has to tell the facade is told before it goes.
        if st.unmirrored.iter().any(|(k, _)| *k == key) {
            self.flush_metrics(st);
        }
        let Some(mut slot) = st.slots.remove(&key) else {
            return;
        };
        if let Some(at) = slot.filed.take() {
            st.deadlines.remove(&(at, key));
        }
        for entry in std::mem::take(&mut slot.armed).into_vec() {
            st.watches.remove(&(entry, key));
        }
        let end = if slot.machine.is_failed() {
            Role::Failed
        } else {
            Role::Closed
        };
        if slot.machine.metered() {
            metrics::gauge!("zkelect_leader", "path" => slot.machine.path().to_owned()).set(0.0);
        }
        let stats = slot.machine.stats();
        slot.outputs.send(|s| {
            s.role = end;
            s.node = None;
            s.lease = None;
            mirror(&mut s.stats, &stats);
            true
        });
        for (_, ack) in st.waiters.remove(&key).into_iter().flatten() {
            let _ = ack.send(());
        }
        if slot.ends_session {
            st.closing = true;
        }
        info!(path = slot.machine.path(), role = ?end, "machine stopped");
    }
}

impl Slot {
    /// Times a notice for the facade (its samples go to `mirror`, unless
    /// the machine is not metered: see [`Machine::metered`]) and logs it.
    /// Returns whether it was a failover (a change from one leader to
    /// another).
    fn note(&mut self, notice: &Notice, now: Moment, mirror: &mut impl FnMut(Mirror)) -> bool {
        let failover = if self.machine.metered() {
            self.facade.notice(notice, self.machine.node(), now, mirror)
        } else {
            self.facade
                .notice(notice, self.machine.node(), now, &mut |_| {})
        };
        match notice {
            Notice::Elected { token } => info!(token = token.0, "elected"),
            Notice::Demoted { reason } => info!(%reason, "demoted"),
            Notice::Suspended => info!("suspended: no contact with the server"),
            Notice::Resumed => info!("resumed"),
            Notice::Joined { node } => info!(node, "joined the queue"),
            Notice::LeaderChanged { leader } => {
                info!(leader = leader.as_deref().unwrap_or("-"), "leader changed");
            }
            Notice::PersistentSkipped { node } => warn!(
                node,
                "skipping a persistent child that looks like a contender: \
                 no process holds it and it will not go away by itself"
            ),
            Notice::TokenRegressed { before, now } => warn!(
                before = before.0,
                now = now.0,
                "fencing token went backwards: the ensemble's history restarted (its data wiped, \
                 or another ensemble); a fenced resource that saw the old tokens will refuse \
                 this leader's until an operator lets it accept the new epoch"
            ),
            // Only an observer reports participants.
            Notice::Participants(_) => {}
            Notice::Error(e) => warn!(error = %e, "stopped by a fatal error"),
        }
        failover
    }

    /// Applies `count` (the driver's own counts: of a notice, of requests)
    /// to the status and brings the rest of it up to the machine; sends it
    /// if anything changed. Returns the counters as they were before, if
    /// they moved and the machine is metered (for [`note_moved`]).
    #[must_use]
    fn publish(
        &mut self,
        clock: &Clock,
        count: impl FnOnce(&mut Status) -> bool,
    ) -> Option<Metrics> {
        let stats = self.machine.stats();
        let role = self.machine.role();
        let node = self.machine.node();
        let lease = self.machine.lease_expiry().map(|t| clock.instant(t));
        let mut moved = None;
        self.outputs.send(|s| {
            let before = s.stats;
            let mut changed = count(s);
            if s.role != role {
                info!(from = ?s.role, to = ?role, "role");
                s.role = role;
                changed = true;
            }
            if s.node.as_deref() != node {
                s.node = node.map(str::to_owned);
                changed = true;
            }
            changed |= replace(&mut s.lease, lease);
            mirror(&mut s.stats, &stats);
            if s.stats != before {
                moved = Some(before);
                changed = true;
            }
            changed
        });
        moved.filter(|_| self.machine.metered())
    }
}

/// One thing a metered machine has to tell the metrics facade.
#[derive(Debug, Clone, Copy)]
enum Mirror {
    /// Its counters moved from these values to the status's.
    Counters(Metrics),
    /// `zkelect_leader` is now this.
    Leader(f64),
    /// A sample of this histogram.
    Histogram(&'static str, Duration),
}

/// Files a metered machine's counters from before they moved, to be
/// mirrored on the driver's next turn (see `State::unmirrored`). A
/// machine's counters move in runs, so a repeat of the last entry is left
/// out; any other repeat only mirrors a value twice.
fn note_moved(unmirrored: &mut Vec<(Key, Mirror)>, key: Key, before: Option<Metrics>) {
    if let Some(before) = before {
        if !matches!(unmirrored.last(), Some((k, Mirror::Counters(_))) if *k == key) {
            unmirrored.push((key, Mirror::Counters(before)));
        }
    }
}

/// Copies the machine's own counters into the status's (the rest are the
/// driver's, counted in the status itself).
fn mirror(m: &mut Metrics, stats: &Stats) {
    m.elections = stats.elections;
    m.stale_replies = stats.stale_replies;
    m.zero_rtt_takeovers = stats.zero_rtt_takeovers;
    m.recovered_creates = stats.recovered_creates;
    m.marks_written = stats.marks_written;
    m.marks_seen = stats.marks_seen;
    m.persistent_skipped = stats.persistent_skipped;
    m.tokens_regressed = stats.tokens_regressed;
}

/// Counts a notice in the status (the driver's counts, the last demotion,
/// the error); `failover` as the facade judged it. Returns whether the
/// status changed.
fn count(s: &mut Status, notice: &Notice, failover: bool) -> bool {
    s.stats.failovers += u64::from(failover);
    match notice {
        Notice::Demoted { reason } => {
            s.stats.demotions += 1;
            s.last_demotion = Some(*reason);
        }
        Notice::LeaderChanged { .. } => s.stats.leader_changes += 1,
        Notice::Error(e) => s.error = Some(e.clone()),
        _ => return failover,
    }
    true
}

/// The election's metrics through the [`metrics`] facade, labelled with the
/// election path: the [`Metrics`] counters under `zkelect_*_total`, a
/// `zkelect_leader` gauge, and three latency histograms in seconds. Without
/// an installed recorder every handle is a no-op.
///
/// - `zkelect_time_to_elect_seconds`: from this candidate's node joining the
///   queue to its election.
/// - `zkelect_failover_seconds`: from the moment this candidate saw the
///   leader gone (no leader, its own demotion, or lost contact) to the moment
///   it saw another leader; 0 when one notice reported both.
/// - `zkelect_handoff_seconds`: from this candidate's own demotion (resign,
///   revoke, loss) to the moment it saw its successor lead.
struct Facade {
    /// When our node joined the queue, until it is elected.
    joined_at: Option<Moment>,
    /// When we were demoted, until another leader is seen.
    demoted_at: Option<Moment>,
    /// When the leader was last seen gone, until another one is seen.
    leader_lost_at: Option<Moment>,
    /// The last leader seen (a failover is a change from one to another).
    last_leader: Option<LeaderSeen>,
}

/// Reads one counter of a [`Metrics`].
type Count = fn(&Metrics) -> u64;

/// Every counter series: its name, and its value in [`Metrics`]. Their
/// handles are fetched when a value moves, not kept: 16 bytes a handle
/// would cost every idle machine more than a fetch costs a busy one.
const COUNTERS: [(&str, Count); 14] = [
    ("zkelect_elections_total", |m| m.elections),
    ("zkelect_demotions_total", |m| m.demotions),
    ("zkelect_failovers_total", |m| m.failovers),
    ("zkelect_leader_changes_total", |m| m.leader_changes),
    ("zkelect_ops_total", |m| m.ops),
    ("zkelect_op_errors_total", |m| m.op_errors),
    ("zkelect_op_timeouts_total", |m| m.op_timeouts),
    ("zkelect_stale_replies_total", |m| m.stale_replies),
    ("zkelect_zero_rtt_takeovers_total", |m| m.zero_rtt_takeovers),
    ("zkelect_recovered_creates_total", |m| m.recovered_creates),
    ("zkelect_marks_written_total", |m| m.marks_written),
    ("zkelect_marks_seen_total", |m| m.marks_seen),
    ("zkelect_persistent_skipped_total", |m| m.persistent_skipped),
    ("zkelect_tokens_regressed_total", |m| m.tokens_regressed),
];

impl Facade {
    /// Registers the machine's series (labelled with `path`), so that a
    /// recorder shows them at zero from the start.
    fn new(path: &str) -> Self {
        use metrics::{counter, describe_histogram, gauge, histogram, Unit};
        describe_histogram!(
            "zkelect_time_to_elect_seconds",
            Unit::Seconds,
            "From joining the queue to being elected"
        );
        describe_histogram!(
            "zkelect_failover_seconds",
            Unit::Seconds,
            "From seeing the leader gone to seeing another one"
        );
        describe_histogram!(
            "zkelect_handoff_seconds",
            Unit::Seconds,
            "From this candidate's demotion to seeing its successor lead"
        );
        for (name, _) in COUNTERS {
            drop(counter!(name, "path" => path.to_owned()));
        }
        drop(gauge!("zkelect_leader", "path" => path.to_owned()));
        for name in [
            "zkelect_time_to_elect_seconds",
            "zkelect_failover_seconds",
            "zkelect_handoff_seconds",
        ] {
            drop(histogram!(name, "path" => path.to_owned()));
        }
        Self {
            joined_at: None,
            demoted_at: None,
            leader_lost_at: None,
            last_leader: None,
        }
    }

    /// Mirrors the counters that moved from `before` to `after` (absolute
    /// values: counted once, in the status); `path` is the machine's, the
    /// series' label.
    fn counters(path: &str, before: &Metrics, after: &Metrics) {
        for (name, of) in COUNTERS {
            let n = of(after);
            if n != of(before) {
                metrics::counter!(name, "path" => path.to_owned()).absolute(n);
            }
        }
    }

    /// Times what a notice ends; `own` is our node's name. What the gauge
    /// and the histograms are to be told goes to `mirror`. Returns whether
    /// it was a failover (a change from one leader to another).
    fn notice(
        &mut self,
        notice: &Notice,
        own: Option<&str>,
        now: Moment,
        mirror: &mut impl FnMut(Mirror),
    ) -> bool {
        let since = |t: Option<Moment>| now.since(t.unwrap_or(now));
        match notice {
            Notice::Joined { .. } => self.joined_at = Some(now),
            Notice::Elected { .. } => {
                mirror(Mirror::Leader(1.0));
                if let Some(joined) = self.joined_at.take() {
                    mirror(Mirror::Histogram(
                        "zkelect_time_to_elect_seconds",
                        since(Some(joined)),
                    ));
                }
            }
            Notice::Demoted { .. } => {
                mirror(Mirror::Leader(0.0));
                self.demoted_at = Some(now);
                self.leader_lost_at.get_or_insert(now);
            }
            Notice::Suspended => {
                self.leader_lost_at.get_or_insert(now);
            }
            Notice::LeaderChanged { leader } => {
                let Some(leader) = leader else {
                    self.leader_lost_at.get_or_insert(now);
                    return false;
                };
                let seen = LeaderSeen::of(leader);
                let failover = self.last_leader.is_some_and(|last| last != seen);
                if failover {
                    mirror(Mirror::Histogram(
                        "zkelect_failover_seconds",
                        since(self.leader_lost_at),
                    ));
                }
                if Some(leader.as_str()) != own {
                    if let Some(demoted) = self.demoted_at.take() {
                        mirror(Mirror::Histogram(
                            "zkelect_handoff_seconds",
                            since(Some(demoted)),
                        ));
                    }
                }
                self.leader_lost_at = None;
                self.last_leader = Some(seen);
                return failover;
            }
            Notice::Resumed
            | Notice::PersistentSkipped { .. }
            | Notice::TokenRegressed { .. }
            | Notice::Participants(_)
            | Notice::Error(_) => {}
        }
        false
    }
}

/// A leader's node name, kept as a 64-bit digest: it is only ever compared
/// with the next leader's, and a copy of every machine's leader's name
/// would cost each idle machine some 60 bytes. Two names digest alike by
/// chance about once in 2^64 comparisons (a failover left uncounted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LeaderSeen(NonZeroU64);

impl LeaderSeen {
    fn of(name: &str) -> Self {
        use std::hash::{Hash, Hasher};
        // Fixed keys: the same name digests alike in every process.
        let mut hasher = std::hash::DefaultHasher::new();
        name.hash(&mut hasher);
        // Non-zero, so that an `Option` of it takes 8 bytes, not 16.
        Self(NonZeroU64::new(hasher.finish()).unwrap_or(NonZeroU64::MIN))
    }
}

/// A moment the facade times from: nanoseconds since the driver's epoch,
/// plus one. Non-zero, so that an `Option` of it takes 8 bytes where an
/// `Option<Instant>` takes 16 (three per machine); good for five centuries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Moment(NonZeroU64);

impl Moment {
    fn now(clock: &Clock) -> Self {
        let nanos = Instant::now()
            .saturating_duration_since(clock.epoch)
            .as_nanos();
        let nanos = u64::try_from(nanos).unwrap_or(u64::MAX).saturating_add(1);
        Self(NonZeroU64::new(nanos).unwrap_or(NonZeroU64::MIN))
    }

    /// The time from `earlier` to this moment (zero if it was later).
    fn since(self, earlier: Self) -> Duration {
        Duration::from_nanos(self.0.get().saturating_sub(earlier.0.get()))
    }
}

/// How often the session probes: three tenths of the timeout, so that a
/// machine, whose own probe falls due a third after its newest contact,
/// hears of a newer one first while round trips take under a thirtieth of
/// the timeout (a slower answer costs only the machines' own probes, which
/// are as safe), and a one-machine session probes hardly more often than
/// the machine did alone.
fn probe_every(timeout: Duration) -> Option<Duration> {
    let every = timeout * 3 / 10;
    (!every.is_zero()).then_some(every)
}

fn replace<T: PartialEq>(slot: &mut T, value: T) -> bool {
    if *slot == value {
        false
    } else {
        *slot = value;
        true
    }
}

async fn sleep_until(wake: Option<Instant>) {
    match wake {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
