//! What a machine publishes to its handles: one [`Status`] snapshot (role,
//! node, lease, last demotion, error, [`Metrics`]) and its notices, kept as
//! cheaply as an idle machine of a large session needs.

use std::sync::{Arc, OnceLock};

use tokio::sync::{broadcast, watch};
use tokio::time::Instant;
use zkelect_core::{CandidateError, DemotionReason, Notice, Role, Stats, Traffic};

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
    /// Listings sent because the farther of the two nodes a waiter watches
    /// went and its books did not name all that was left below (the
    /// two-watch takeover).
    pub second_relists: u64,
    /// Persistent children named like contenders, skipped (once per name).
    pub persistent_skipped: u64,
    /// New nodes whose fencing token was below the last node this candidate
    /// held (`Notice::TokenRegressed`: the ensemble's history restarted, so
    /// a fenced resource will refuse the new tokens; see the README's
    /// "Running in production").
    pub tokens_regressed: u64,
    /// Cooperative revocation requests heard by a revocable lock (each
    /// write of the request into its node, while it waited or held).
    pub revocations_requested: u64,
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
    /// The counters: the machine's own and its requests.
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

/// The role a status gives, as the clock has it: a leader (holder) past its
/// lease is suspended, whether or not the pump has run since. The lease is
/// the instant holding lapses without an answer from the server; a process
/// frozen past it (GC pause, SIGSTOP) resumes with its status still saying
/// `Leader` until the pump's next turn, and every answer a handle gives must
/// already be right then.
pub(crate) fn role_now(status: &Status) -> Role {
    match status.role {
        Role::Leader(token) if status.lease.is_none_or(|end| Instant::now() >= end) => {
            Role::Suspended(token)
        }
        role => role,
    }
}

/// How many notices a slow subscriber may lag behind before it loses the oldest.
const NOTICES_KEPT: usize = 256;

/// What is published for one machine: the one status snapshot and
/// the notices. `role` and `lease` are views of the status for
/// [`Election::changes`](crate::Election::changes) and
/// [`Election::lease`](crate::Election::lease), sent in the same step as the
/// status (never later: `zkelect run`'s watchdog and a `lead` closure must
/// see a demotion before the session's next request goes out).
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
    /// Every status sent, for tests of what a reader could have seen.
    #[cfg(test)]
    pub(crate) sent: std::sync::Mutex<Vec<Status>>,
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
#[derive(Debug)]
enum Published {
    Plain(Packed),
    Watched(watch::Sender<Status>),
}

/// A [`Status`] as an idle machine keeps it while nobody subscribes: the
/// same fields in half the bytes (the rare error boxed, the node's name
/// without spare capacity, the counters in 32 bits, saturating, as the core
/// keeps them). Unpacked, in place and without copying the name, for every
/// read and change.
#[derive(Debug)]
struct Packed {
    role: Role,
    node: Option<Box<str>>,
    lease: Option<Instant>,
    last_demotion: Option<DemotionReason>,
    error: Option<Box<CandidateError>>,
    counters: [u32; 14],
}

impl Default for Packed {
    fn default() -> Self {
        Self::pack(Status::default())
    }
}

impl Packed {
    /// Applies `f` to the status this is.
    fn with<R>(&mut self, f: impl FnOnce(&mut Status) -> R) -> R {
        let mut status = std::mem::take(self).unpack();
        let out = f(&mut status);
        *self = Self::pack(status);
        out
    }

    fn pack(status: Status) -> Self {
        let Status {
            role,
            node,
            lease,
            last_demotion,
            error,
            stats,
        } = status;
        let narrow = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Self {
            role,
            node: node.map(String::into_boxed_str),
            lease,
            last_demotion,
            error: error.map(Box::new),
            counters: counters(&stats).map(narrow),
        }
    }

    fn unpack(self) -> Status {
        let [elections, demotions, failovers, leader_changes, ops, op_errors, op_timeouts, stale_replies, zero_rtt_takeovers, recovered_creates, second_relists, persistent_skipped, tokens_regressed, revocations_requested] =
            self.counters.map(u64::from);
        Status {
            role: self.role,
            node: self.node.map(String::from),
            lease: self.lease,
            last_demotion: self.last_demotion,
            error: self.error.map(|e| *e),
            stats: Metrics {
                elections,
                demotions,
                failovers,
                leader_changes,
                ops,
                op_errors,
                op_timeouts,
                stale_replies,
                zero_rtt_takeovers,
                recovered_creates,
                second_relists,
                persistent_skipped,
                tokens_regressed,
                revocations_requested,
            },
        }
    }
}

/// Every counter of `m`, in [`Packed::unpack`]'s order.
fn counters(m: &Metrics) -> [u64; 14] {
    [
        m.elections,
        m.demotions,
        m.failovers,
        m.leader_changes,
        m.ops,
        m.op_errors,
        m.op_timeouts,
        m.stale_replies,
        m.zero_rtt_takeovers,
        m.recovered_creates,
        m.second_relists,
        m.persistent_skipped,
        m.tokens_regressed,
        m.revocations_requested,
    ]
}

impl Outputs {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            status: std::sync::Mutex::new(Published::Plain(Packed::default())),
            views: OnceLock::new(),
            #[cfg(test)]
            sent: std::sync::Mutex::default(),
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
        match &mut *self.lock() {
            Published::Plain(packed) => packed.with(|status| f(status)),
            Published::Watched(tx) => f(&tx.borrow()),
        }
    }

    /// The status now, and every change to it.
    pub(crate) fn status(&self) -> watch::Receiver<Status> {
        let mut published = self.lock();
        if let Published::Plain(packed) = &mut *published {
            let status = std::mem::take(packed).unpack();
            *published = Published::Watched(watch::channel(status).0);
        }
        match &mut *published {
            Published::Watched(tx) => tx.subscribe(),
            // Made a channel just above.
            Published::Plain(packed) => watch::channel(packed.with(|s| s.clone())).1,
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
                *published = Published::Plain(Packed::pack(status));
            }
        }
    }

    /// Whether any task could be waiting on a change: someone holds a
    /// receiver of the status, of a view or of the notices.
    pub(crate) fn watched(&self) -> bool {
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
    pub(crate) fn send(&self, change: impl FnOnce(&mut Status) -> bool) {
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
        #[cfg(test)]
        let views = |status: &Status| {
            views(status);
            if let Ok(mut sent) = self.sent.lock() {
                sent.push(status.clone());
            }
        };
        match &mut *published {
            Published::Plain(packed) => packed.with(|status| {
                if change(status) {
                    views(status);
                }
            }),
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

/// A machine as its getters read now: what the status mirrors.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Snapshot<'a> {
    pub(crate) role: Role,
    pub(crate) node: Option<&'a str>,
    pub(crate) lease: Option<Instant>,
    pub(crate) stats: Stats,
    pub(crate) traffic: Traffic,
}

impl Outputs {
    /// Applies `count` (a notice counted) to the status and brings the rest
    /// of it up to `now` (the machine as it reads now; `None` to count a
    /// notice alone, the role left as it was until the machine's step is
    /// over, or once it has left its session, whose last word
    /// [`stopped`](Self::stopped) says);
    /// sends it if anything changed. Returns the counters as they were
    /// before, if they moved (for the metrics facade).
    pub(crate) fn publish(
        &self,
        now: Option<&Snapshot<'_>>,
        count: impl FnOnce(&mut Status) -> bool,
    ) -> Option<Metrics> {
        let mut moved = None;
        self.send(|s| {
            let before = s.stats;
            let mut changed = count(s);
            if let Some(now) = now {
                if s.role != now.role {
                    tracing::info!(from = ?s.role, to = ?now.role, "role");
                    s.role = now.role;
                    changed = true;
                }
                if s.node.as_deref() != now.node {
                    s.node = now.node.map(str::to_owned);
                    changed = true;
                }
                changed |= replace(&mut s.lease, now.lease);
                mirror(&mut s.stats, &now.stats, &now.traffic);
            }
            // The counts of a notice alone move the counters too.
            if s.stats != before {
                moved = Some(before);
                changed = true;
            }
            changed
        });
        moved
    }

    /// The machine left its session: its last status. Returns the
    /// counters as they were before, if they moved.
    pub(crate) fn stopped(&self, role: Role, stats: &Stats, traffic: &Traffic) -> Option<Metrics> {
        let mut moved = None;
        self.send(|s| {
            let before = s.stats;
            s.role = role;
            s.node = None;
            s.lease = None;
            mirror(&mut s.stats, stats, traffic);
            moved = (s.stats != before).then_some(before);
            true
        });
        moved
    }

    /// Sends a notice to its subscribers, if any.
    pub(crate) fn notify(&self, notice: Notice) {
        if let Some(notices) = self.views.get().and_then(|v| v.notices.get()) {
            let _ = notices.send(notice);
        }
    }
}

/// Copies the machine's own counters and its requests into the status's
/// (the rest are counted from its notices, in the status itself).
fn mirror(m: &mut Metrics, stats: &Stats, traffic: &Traffic) {
    m.elections = stats.elections;
    m.stale_replies = stats.stale_replies;
    m.zero_rtt_takeovers = stats.zero_rtt_takeovers;
    m.recovered_creates = stats.recovered_creates;
    m.second_relists = stats.second_relists;
    m.persistent_skipped = stats.persistent_skipped;
    m.tokens_regressed = stats.tokens_regressed;
    m.ops = traffic.requests;
    m.op_errors = traffic.errors;
    m.op_timeouts = traffic.timeouts;
}

/// Counts a notice in the status (the counts kept from notices, the last
/// demotion, the error); `failover` as the facade judged it. Returns
/// whether the status changed.
pub(crate) fn count(s: &mut Status, notice: &Notice, failover: bool) -> bool {
    s.stats.failovers += u64::from(failover);
    match notice {
        Notice::Demoted { reason } => {
            s.stats.demotions += 1;
            s.last_demotion = Some(*reason);
        }
        Notice::LeaderChanged { .. } => s.stats.leader_changes += 1,
        Notice::RevocationRequested => s.stats.revocations_requested += 1,
        Notice::Error(e) => s.error = Some(e.clone()),
        _ => return failover,
    }
    true
}

pub(crate) fn replace<T: PartialEq>(slot: &mut T, value: T) -> bool {
    if *slot == value {
        false
    } else {
        *slot = value;
        true
    }
}
