//! The driver: one task that owns a [`Candidate`] by value and moves data
//! between it, a [`Transport`] and the application. No election logic lives
//! here; every decision is the core's.
//!
//! Each turn (style.md §4.3):
//!
//! 1. wait for one of four sources — an intent from the API, a transport
//!    event, a completed request (tagged with its [`OpId`]), or the core's
//!    deadline;
//! 2. read the clock once;
//! 3. **fire what is due first**: if the core's deadline has passed, call
//!    `handle_timeout(now)` and publish its notices before feeding the input
//!    that woke us. A process that was frozen (GC pause, SIGSTOP, an
//!    overloaded runtime) thereby learns from the core that its lease ran out
//!    — and tells the application it is no longer leader — before it acts on
//!    anything that queued up meanwhile;
//! 4. feed the input;
//! 5. publish: notices first (role channel and broadcast), then start the
//!    commands, then recompute the deadline.
//!
//! The deadline is checked against the clock, not trusted from the sleep
//! having fired (quinn's `drive_timer` lesson), so a spurious or late wake-up
//! is harmless.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::task::{JoinError, JoinSet};
use tokio::time::Instant;
use tracing::{debug, info, info_span, warn, Instrument};
use zkelect_core::{
    Candidate, CandidateError, Command, DemotionReason, Input, Notice, OpId, Reply, Role,
    Timestamp, ZkCode,
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
}

/// The live counters behind [`Metrics`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    elections: AtomicU64,
    demotions: AtomicU64,
    failovers: AtomicU64,
    leader_changes: AtomicU64,
    ops: AtomicU64,
    op_errors: AtomicU64,
    op_timeouts: AtomicU64,
    stale_replies: AtomicU64,
    zero_rtt_takeovers: AtomicU64,
    recovered_creates: AtomicU64,
    marks_written: AtomicU64,
    marks_seen: AtomicU64,
    persistent_skipped: AtomicU64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> Metrics {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Metrics {
            elections: get(&self.elections),
            demotions: get(&self.demotions),
            failovers: get(&self.failovers),
            leader_changes: get(&self.leader_changes),
            ops: get(&self.ops),
            op_errors: get(&self.op_errors),
            op_timeouts: get(&self.op_timeouts),
            stale_replies: get(&self.stale_replies),
            zero_rtt_takeovers: get(&self.zero_rtt_takeovers),
            recovered_creates: get(&self.recovered_creates),
            marks_written: get(&self.marks_written),
            marks_seen: get(&self.marks_seen),
            persistent_skipped: get(&self.persistent_skipped),
        }
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// What the application asks the driver. Each carries an acknowledgement,
/// sent once the intent has been fed and its notices published.
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
}

/// What the driver publishes.
#[derive(Debug)]
pub(crate) struct Outputs {
    pub(crate) role: watch::Sender<Role>,
    pub(crate) lease: watch::Sender<Option<Instant>>,
    pub(crate) node: watch::Sender<Option<String>>,
    pub(crate) notices: broadcast::Sender<Notice>,
    /// The fatal error, set before the role turns `Failed`.
    pub(crate) error: Mutex<Option<CandidateError>>,
    /// The reason of the latest demotion, set before the role is published.
    pub(crate) demotion: Mutex<Option<DemotionReason>>,
    pub(crate) counters: Counters,
}

impl Outputs {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            role: watch::channel(Role::Idle).0,
            lease: watch::channel(None).0,
            node: watch::channel(None).0,
            notices: broadcast::channel(256).0,
            error: Mutex::new(None),
            demotion: Mutex::new(None),
            counters: Counters::default(),
        })
    }
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
    pub(crate) fn instant(&self, at: Timestamp) -> Instant {
        self.epoch + Duration::from_millis(at.as_millis())
    }
}

/// What woke the driver.
enum Wake {
    Intent(Option<Intent>),
    Event(Option<TransportEvent>),
    Done(Result<(tokio::task::Id, Answer), JoinError>),
    Timer,
}

type Answer = (OpId, Result<Reply, ZkCode>);

/// The driver task's state.
pub(crate) struct Driver {
    pub(crate) candidate: Candidate,
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) events: EventStream,
    pub(crate) intents: mpsc::UnboundedReceiver<Intent>,
    pub(crate) outputs: Arc<Outputs>,
    pub(crate) clock: Clock,
    /// How long `close` waits for the node's deletion before closing the
    /// session anyway, and how long it waits for the session's close.
    pub(crate) close_timeout: Duration,
}

/// The requests in flight: tasks, and which op each answers; and the
/// election's handles in the `metrics` facade.
struct Ops {
    tasks: JoinSet<Answer>,
    ids: HashMap<tokio::task::Id, OpId>,
    facade: Facade,
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
    elections: metrics::Counter,
    demotions: metrics::Counter,
    failovers: metrics::Counter,
    leader_changes: metrics::Counter,
    ops: metrics::Counter,
    op_errors: metrics::Counter,
    op_timeouts: metrics::Counter,
    stale_replies: metrics::Counter,
    zero_rtt_takeovers: metrics::Counter,
    recovered_creates: metrics::Counter,
    marks_written: metrics::Counter,
    marks_seen: metrics::Counter,
    persistent_skipped: metrics::Counter,
    leader: metrics::Gauge,
    time_to_elect: metrics::Histogram,
    failover: metrics::Histogram,
    handoff: metrics::Histogram,
    /// When our node joined the queue, until it is elected.
    joined_at: Option<Instant>,
    /// When we were demoted, until another leader is seen.
    demoted_at: Option<Instant>,
    /// When the leader was last seen gone, until another one is seen.
    leader_lost_at: Option<Instant>,
    /// The last leader seen (a failover is a change from one to another).
    last_leader: Option<String>,
}

impl Facade {
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
        let path = path.to_owned();
        Self {
            elections: counter!("zkelect_elections_total", "path" => path.clone()),
            demotions: counter!("zkelect_demotions_total", "path" => path.clone()),
            failovers: counter!("zkelect_failovers_total", "path" => path.clone()),
            leader_changes: counter!("zkelect_leader_changes_total", "path" => path.clone()),
            ops: counter!("zkelect_ops_total", "path" => path.clone()),
            op_errors: counter!("zkelect_op_errors_total", "path" => path.clone()),
            op_timeouts: counter!("zkelect_op_timeouts_total", "path" => path.clone()),
            stale_replies: counter!("zkelect_stale_replies_total", "path" => path.clone()),
            zero_rtt_takeovers: counter!("zkelect_zero_rtt_takeovers_total", "path" => path.clone()),
            recovered_creates: counter!("zkelect_recovered_creates_total", "path" => path.clone()),
            marks_written: counter!("zkelect_marks_written_total", "path" => path.clone()),
            marks_seen: counter!("zkelect_marks_seen_total", "path" => path.clone()),
            persistent_skipped: counter!("zkelect_persistent_skipped_total", "path" => path.clone()),
            leader: gauge!("zkelect_leader", "path" => path.clone()),
            time_to_elect: histogram!("zkelect_time_to_elect_seconds", "path" => path.clone()),
            failover: histogram!("zkelect_failover_seconds", "path" => path.clone()),
            handoff: histogram!("zkelect_handoff_seconds", "path" => path),
            joined_at: None,
            demoted_at: None,
            leader_lost_at: None,
            last_leader: None,
        }
    }

    /// Mirrors the core's own counters (absolute values).
    fn core_stats(&self, stats: &zkelect_core::Stats) {
        self.stale_replies.absolute(stats.stale_replies);
        self.zero_rtt_takeovers.absolute(stats.zero_rtt_takeovers);
        self.recovered_creates.absolute(stats.recovered_creates);
        self.marks_written.absolute(stats.marks_written);
        self.marks_seen.absolute(stats.marks_seen);
        self.persistent_skipped.absolute(stats.persistent_skipped);
    }

    /// Counts a notice and times what it ends; `own` is our node's name.
    /// Returns whether it was a failover (a change from one leader to another).
    fn notice(&mut self, notice: &Notice, own: Option<&str>, now: Instant) -> bool {
        let since = |t: Option<Instant>| now.saturating_duration_since(t.unwrap_or(now));
        match notice {
            Notice::Joined { .. } => self.joined_at = Some(now),
            Notice::Elected { .. } => {
                self.elections.increment(1);
                self.leader.set(1.0);
                if let Some(joined) = self.joined_at.take() {
                    self.time_to_elect.record(since(Some(joined)));
                }
            }
            Notice::Demoted { .. } => {
                self.demotions.increment(1);
                self.leader.set(0.0);
                self.demoted_at = Some(now);
                self.leader_lost_at.get_or_insert(now);
            }
            Notice::Suspended => {
                self.leader_lost_at.get_or_insert(now);
            }
            Notice::LeaderChanged { leader } => {
                self.leader_changes.increment(1);
                let Some(leader) = leader else {
                    self.leader_lost_at.get_or_insert(now);
                    return false;
                };
                let failover = self.last_leader.as_ref().is_some_and(|last| last != leader);
                if failover {
                    self.failovers.increment(1);
                    self.failover.record(since(self.leader_lost_at));
                }
                if Some(leader.as_str()) != own {
                    if let Some(demoted) = self.demoted_at.take() {
                        self.handoff.record(since(Some(demoted)));
                    }
                }
                self.leader_lost_at = None;
                self.last_leader = Some(leader.clone());
                return failover;
            }
            Notice::Resumed
            | Notice::PersistentSkipped { .. }
            | Notice::Participants(_)
            | Notice::Error(_) => {}
        }
        false
    }
}

impl Driver {
    /// Runs until the candidate is closed (or fails), then closes the transport.
    pub(crate) async fn run(self) {
        let span = info_span!(
            "election",
            path = self.candidate.config().path(),
            id = self.candidate.config().id()
        );
        self.run_inner().instrument(span).await;
    }

    async fn run_inner(mut self) {
        let mut ops = Ops {
            tasks: JoinSet::new(),
            ids: HashMap::new(),
            facade: Facade::new(self.candidate.config().path()),
        };
        let mut acks: Vec<oneshot::Sender<()>> = Vec::new();
        let mut closers: Vec<oneshot::Sender<()>> = Vec::new();
        let mut close_deadline: Option<Instant> = None;
        let mut events_open = true;
        let mut intents_open = true;
        loop {
            self.publish(&mut ops);
            for ack in acks.drain(..) {
                let _ = ack.send(());
            }
            if self.candidate.is_closed() || self.candidate.is_failed() {
                break;
            }
            if close_deadline.is_some_and(|d| Instant::now() >= d) {
                warn!("close: the node's deletion did not complete in time; closing the session instead");
                break;
            }
            let deadline = self.candidate.poll_timeout().map(|t| self.clock.instant(t));
            let wake_at = match (deadline, close_deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let wake = tokio::select! {
                intent = self.intents.recv(), if intents_open => Wake::Intent(intent),
                event = self.events.recv(), if events_open => Wake::Event(event),
                Some(done) = ops.tasks.join_next_with_id(), if !ops.tasks.is_empty() => Wake::Done(done),
                () = sleep_until(wake_at), if wake_at.is_some() => Wake::Timer,
            };
            // One clock reading per turn.
            let now = self.clock.now();
            // Zombie-proofing: whatever woke us, fire what is due before the
            // input is acted on, and let the application hear of it first.
            if self.candidate.poll_timeout().is_some_and(|t| t <= now) {
                self.candidate.handle_timeout(now);
                self.publish(&mut ops);
            }
            match wake {
                Wake::Intent(Some(intent)) => match intent {
                    Intent::Join { done } => {
                        debug!("intent: join");
                        self.candidate.join(now);
                        acks.extend(done);
                    }
                    Intent::Resign { rejoin, done } => {
                        debug!(rejoin, "intent: resign");
                        self.candidate.resign(now, rejoin);
                        acks.push(done);
                    }
                    Intent::Close { done } => {
                        debug!("intent: close");
                        closers.push(done);
                        close_deadline.get_or_insert(Instant::now() + self.close_timeout);
                        self.candidate.close(now);
                    }
                },
                // Every handle is gone: nobody can close us, so close now.
                Wake::Intent(None) => {
                    debug!("every handle dropped: closing");
                    intents_open = false;
                    close_deadline.get_or_insert(Instant::now() + self.close_timeout);
                    self.candidate.close(now);
                }
                Wake::Event(Some(TransportEvent::Session(e))) => {
                    info!(event = ?e, "session");
                    self.candidate.handle(now, Input::Session(e));
                }
                Wake::Event(Some(TransportEvent::Watch(e))) => {
                    debug!(kind = ?e.kind, path = e.path, "watch fired");
                    self.candidate.handle(now, Input::Watch(e));
                }
                Wake::Event(None) => {
                    debug!("the transport's event stream ended");
                    events_open = false;
                }
                Wake::Done(done) => {
                    if let Some((op, result)) = self.answer(&mut ops, done) {
                        self.candidate.handle(now, Input::Reply { op, result });
                    }
                }
                // Already handled above: the deadline is checked against the clock.
                Wake::Timer => {}
            }
        }
        self.publish(&mut ops);
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
        ops.tasks.abort_all();
        if tokio::time::timeout(self.close_timeout, self.transport.close())
            .await
            .is_err()
        {
            warn!(timeout = ?self.close_timeout, "close: the transport did not close in time");
        }
        // Wait for the aborted requests to be dropped, so nothing that holds
        // the transport outlives the driver.
        while ops.tasks.join_next().await.is_some() {}
        let end = if self.candidate.is_failed() {
            Role::Failed
        } else {
            Role::Closed
        };
        ops.facade.leader.set(0.0);
        self.outputs.role.send_replace(end);
        self.outputs.lease.send_replace(None);
        self.outputs.node.send_replace(None);
        for done in closers {
            let _ = done.send(());
        }
        info!(role = ?end, "election stopped");
    }

    /// Turns a finished request task into the reply to feed, if any.
    fn answer(
        &self,
        ops: &mut Ops,
        done: Result<(tokio::task::Id, Answer), JoinError>,
    ) -> Option<Answer> {
        let c = &self.outputs.counters;
        match done {
            Ok((id, (op, result))) => {
                ops.ids.remove(&id);
                match &result {
                    Ok(_) => debug!(%op, "reply"),
                    Err(code) => {
                        bump(&c.op_errors);
                        ops.facade.op_errors.increment(1);
                        if *code == ZkCode::OperationTimeout {
                            bump(&c.op_timeouts);
                            ops.facade.op_timeouts.increment(1);
                        }
                        debug!(%op, %code, "reply: error");
                    }
                }
                Some((op, result))
            }
            // Every request is answered exactly once: a transport that
            // panicked answers as a broken connection (the request may or
            // may not have been applied, which the core knows how to handle).
            Err(e) => {
                let op = ops.ids.remove(&e.id())?;
                warn!(%op, error = %e, "the transport failed to perform a request");
                bump(&c.op_errors);
                ops.facade.op_errors.increment(1);
                Some((op, Err(ZkCode::ConnectionLoss)))
            }
        }
    }

    /// Notices first (a demotion must reach the application before anything
    /// else happens), then the role, node and lease channels, then commands.
    fn publish(&mut self, ops: &mut Ops) {
        let c = &self.outputs.counters;
        // The core's counters first, so whoever reacts to a notice reads
        // metrics that already include what the notice reports.
        let stats = self.candidate.stats();
        c.stale_replies
            .store(stats.stale_replies, Ordering::Relaxed);
        c.zero_rtt_takeovers
            .store(stats.zero_rtt_takeovers, Ordering::Relaxed);
        c.recovered_creates
            .store(stats.recovered_creates, Ordering::Relaxed);
        c.marks_written
            .store(stats.marks_written, Ordering::Relaxed);
        c.marks_seen.store(stats.marks_seen, Ordering::Relaxed);
        c.persistent_skipped
            .store(stats.persistent_skipped, Ordering::Relaxed);
        ops.facade.core_stats(stats);
        let now = Instant::now();
        while let Some(notice) = self.candidate.poll_notice() {
            if ops.facade.notice(&notice, self.candidate.node(), now) {
                bump(&c.failovers);
            }
            match &notice {
                Notice::Elected { token } => {
                    bump(&c.elections);
                    info!(token = token.0, "elected");
                }
                Notice::Demoted { reason } => {
                    bump(&c.demotions);
                    if let Ok(mut slot) = self.outputs.demotion.lock() {
                        *slot = Some(*reason);
                    }
                    info!(%reason, "demoted");
                }
                Notice::Suspended => info!("suspended: no contact with the server"),
                Notice::Resumed => info!("resumed"),
                Notice::Joined { node } => info!(node, "joined the queue"),
                Notice::LeaderChanged { leader } => {
                    bump(&c.leader_changes);
                    info!(leader = leader.as_deref().unwrap_or("-"), "leader changed");
                }
                Notice::PersistentSkipped { node } => warn!(
                    node,
                    "skipping a persistent child that looks like a contender: \
                     no process holds it and it will not go away by itself"
                ),
                // Only an observer reports participants.
                Notice::Participants(_) => {}
                Notice::Error(e) => {
                    warn!(error = %e, "election stopped by a fatal error");
                    if let Ok(mut slot) = self.outputs.error.lock() {
                        *slot = Some(e.clone());
                    }
                }
            }
            // The role goes out with each notice, so a watcher of the role
            // sees a demotion as soon as a subscriber of notices does.
            self.publish_role();
            let _ = self.outputs.notices.send(notice);
        }
        self.publish_role();
        let node = self.candidate.node().map(str::to_owned);
        self.outputs.node.send_if_modified(|n| replace(n, node));
        let lease = self.candidate.lease_expiry().map(|t| self.clock.instant(t));
        self.outputs.lease.send_if_modified(|l| replace(l, lease));
        while let Some(Command { op, request }) = self.candidate.poll_command() {
            bump(&c.ops);
            ops.facade.ops.increment(1);
            debug!(%op, verb = request.verb(), path = request.path(), "perform");
            let transport = Arc::clone(&self.transport);
            let task = ops
                .tasks
                .spawn(async move { (op, transport.perform(request).await) });
            ops.ids.insert(task.id(), op);
        }
    }

    fn publish_role(&self) {
        let role = self.candidate.role();
        self.outputs.role.send_if_modified(|r| {
            if *r == role {
                return false;
            }
            info!(from = ?*r, to = ?role, "role");
            *r = role;
            true
        });
    }
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
