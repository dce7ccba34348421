//! The driver: one task that owns a [`Candidate`] and moves data between it, a
//! [`Transport`] and the application. No election logic lives here.
//!
//! Each turn: read the clock once, feed one input (an intent, a transport event,
//! a completed operation, or the timer), publish the notices, start the
//! commands, and sleep until the next input or the machine's deadline. On waking
//! the clock is checked against the deadline rather than trusting that the
//! sleep fired (quinn's `drive_timer` lesson), and every input is fed with the
//! current time, so a process that was frozen first learns from the machine
//! whether its lease ran out before it acts on anything queued meanwhile.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{debug, info, info_span, warn, Instrument};
use zkelect_core::{
    Candidate, CandidateError, Command, Input, Notice, OpId, Reply, Role, Timestamp, ZkCode,
};

use crate::transport::{EventStream, Transport, TransportEvent};

/// Counters of one election, cheap to read at any time.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Times this candidate was elected.
    pub elections: AtomicU64,
    /// Times it stopped leading.
    pub demotions: AtomicU64,
    /// Requests performed.
    pub ops: AtomicU64,
    /// Requests that failed.
    pub op_errors: AtomicU64,
    /// Leader changes seen.
    pub leader_changes: AtomicU64,
}

/// What the application asks the driver.
#[derive(Debug)]
pub(crate) enum Intent {
    Join,
    Resign { rejoin: bool },
    Close { done: oneshot::Sender<()> },
}

/// What the driver publishes.
#[derive(Debug)]
pub(crate) struct Outputs {
    pub(crate) role: watch::Sender<Role>,
    pub(crate) lease: watch::Sender<Option<Instant>>,
    pub(crate) node: watch::Sender<Option<String>>,
    pub(crate) notices: broadcast::Sender<Notice>,
    pub(crate) error: Mutex<Option<CandidateError>>,
    pub(crate) metrics: Metrics,
}

impl Outputs {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            role: watch::channel(Role::Idle).0,
            lease: watch::channel(None).0,
            node: watch::channel(None).0,
            notices: broadcast::channel(256).0,
            error: Mutex::new(None),
            metrics: Metrics::default(),
        })
    }
}

/// Maps the runtime's clock onto the machine's.
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
        let ms = Instant::now()
            .saturating_duration_since(self.epoch)
            .as_millis();
        Timestamp::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
    }

    pub(crate) fn instant(&self, at: Timestamp) -> Instant {
        self.epoch + Duration::from_millis(at.as_millis())
    }
}

/// The driver task's state.
pub(crate) struct Driver {
    pub(crate) candidate: Candidate,
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) events: EventStream,
    pub(crate) intents: mpsc::UnboundedReceiver<Intent>,
    pub(crate) outputs: Arc<Outputs>,
    pub(crate) clock: Clock,
    /// How long `close` waits for the node's deletion before closing the session anyway.
    pub(crate) close_timeout: Duration,
}

impl Driver {
    /// Runs until the candidate is closed (or fails) and the transport is closed.
    pub(crate) async fn run(mut self) {
        let span = info_span!(
            "election",
            path = self.candidate.config().path(),
            id = self.candidate.config().id()
        );
        async move {
            let mut ops: JoinSet<(OpId, Result<Reply, ZkCode>)> = JoinSet::new();
            let mut closers: Vec<oneshot::Sender<()>> = Vec::new();
            let mut close_deadline: Option<Instant> = None;
            let mut events_open = true;
            let mut intents_open = true;
            loop {
                self.publish(&mut ops);
                if self.candidate.is_closed() || self.candidate.is_failed() {
                    break;
                }
                if close_deadline.is_some_and(|d| Instant::now() >= d) {
                    warn!("close: the node's deletion did not complete in time; closing the session instead");
                    break;
                }
                let deadline = self.candidate.poll_timeout().map(|t| self.clock.instant(t));
                let wake = match (deadline, close_deadline) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                tokio::select! {
                    intent = self.intents.recv(), if intents_open => match intent {
                        Some(intent) => {
                            let now = self.clock.now();
                            match intent {
                                Intent::Join => self.candidate.join(now),
                                Intent::Resign { rejoin } => self.candidate.resign(now, rejoin),
                                Intent::Close { done } => {
                                    closers.push(done);
                                    close_deadline.get_or_insert(Instant::now() + self.close_timeout);
                                    self.candidate.close(now);
                                }
                            }
                        }
                        // Every handle is gone: nobody can close us, so close now.
                        None => {
                            intents_open = false;
                            close_deadline.get_or_insert(Instant::now() + self.close_timeout);
                            self.candidate.close(self.clock.now());
                        }
                    },
                    event = self.events.recv(), if events_open => match event {
                        Some(TransportEvent::Session(e)) => {
                            debug!(?e, "session event");
                            self.candidate.handle(self.clock.now(), Input::Session(e));
                        }
                        Some(TransportEvent::Watch(e)) => {
                            debug!(?e, "watch event");
                            self.candidate.handle(self.clock.now(), Input::Watch(e));
                        }
                        None => events_open = false,
                    },
                    Some(done) = ops.join_next(), if !ops.is_empty() => {
                        if let Ok((op, result)) = done {
                            if result.is_err() {
                                self.outputs.metrics.op_errors.fetch_add(1, Ordering::Relaxed);
                            }
                            self.candidate.handle(self.clock.now(), Input::Reply { op, result });
                        }
                    }
                    () = sleep_until(wake), if wake.is_some() => {
                        // Trust the clock, not the timer: fire only what is due.
                        let now = self.clock.now();
                        if deadline.is_some_and(|d| self.clock.instant(now) >= d) {
                            self.candidate.handle_timeout(now);
                        }
                    }
                }
            }
            self.publish(&mut ops);
            ops.abort_all();
            self.transport.close().await;
            self.outputs.role.send_replace(if self.candidate.is_failed() { Role::Failed } else { Role::Closed });
            self.outputs.lease.send_replace(None);
            for done in closers {
                let _ = done.send(());
            }
            info!("election closed");
        }
        .instrument(span)
        .await;
    }

    /// Notices first (a demotion must reach the application before anything
    /// else happens), then commands, then the lease and role channels.
    fn publish(&mut self, ops: &mut JoinSet<(OpId, Result<Reply, ZkCode>)>) {
        while let Some(notice) = self.candidate.poll_notice() {
            let m = &self.outputs.metrics;
            match &notice {
                Notice::Elected { token } => {
                    m.elections.fetch_add(1, Ordering::Relaxed);
                    info!(token = token.0, "elected");
                }
                Notice::Demoted { reason } => {
                    m.demotions.fetch_add(1, Ordering::Relaxed);
                    info!(%reason, "demoted");
                }
                Notice::Suspended => info!("connection suspended"),
                Notice::Resumed => info!("connection resumed"),
                Notice::Joined { node } => info!(node, "joined the queue"),
                Notice::LeaderChanged { leader } => {
                    m.leader_changes.fetch_add(1, Ordering::Relaxed);
                    debug!(?leader, "leader changed");
                }
                Notice::Error(e) => {
                    warn!(error = %e, "election stopped");
                    if let Ok(mut slot) = self.outputs.error.lock() {
                        *slot = Some(e.clone());
                    }
                }
            }
            // The role is published with each notice, so a watcher of the role
            // sees a demotion as soon as a subscriber of notices does.
            self.outputs
                .role
                .send_if_modified(|r| replace(r, self.candidate.role()));
            let _ = self.outputs.notices.send(notice);
        }
        self.outputs
            .role
            .send_if_modified(|r| replace(r, self.candidate.role()));
        let node = self.candidate.node().map(str::to_owned);
        self.outputs.node.send_if_modified(|n| replace(n, node));
        let lease = self.candidate.lease_expiry().map(|t| self.clock.instant(t));
        self.outputs.lease.send_if_modified(|l| replace(l, lease));
        while let Some(Command { op, request }) = self.candidate.poll_command() {
            self.outputs.metrics.ops.fetch_add(1, Ordering::Relaxed);
            let transport = Arc::clone(&self.transport);
            debug!(%op, verb = request.verb(), path = request.path(), "perform");
            ops.spawn(async move { (op, transport.perform(request).await) });
        }
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
