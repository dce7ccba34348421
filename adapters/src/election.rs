//! The friendly API: build, join, watch the role, lead, resign, close.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use zkelect_core::{
    Acl, Candidate, Config, ConfigBuilder, ConnectionPolicy, FencingToken, Mode, Notice, Role,
    WatchStrategy,
};

use crate::driver::{Clock, Driver, Intent, Metrics, Outputs};
use crate::error::ElectionError;
use crate::transport::{EventStream, Transport};

/// Builds an [`Election`] over a transport.
///
/// ```no_run
/// # async fn example() -> Result<(), zkelect::ElectionError> {
/// use std::time::Duration;
/// use zkelect::{ConnectOptions, Election, ZkAsyncTransport};
///
/// let (transport, events) = ZkAsyncTransport::connect(ConnectOptions::new("127.0.0.1:2181")).await?;
/// let election = Election::builder(transport, events)
///     .path("/services/scheduler/leader")
///     .id("node-a")
///     .join()
///     .await?;
/// let token = election.wait_leader().await?;
/// println!("leading with fencing token {token}");
/// election.close().await;
/// # Ok(())
/// # }
/// ```
#[must_use]
pub struct ElectionBuilder {
    transport: Arc<dyn Transport>,
    events: EventStream,
    path: String,
    id: String,
    tune: Vec<Box<dyn FnOnce(ConfigBuilder) -> ConfigBuilder + Send>>,
    close_timeout: Duration,
    join_timeout: Duration,
}

impl std::fmt::Debug for ElectionBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElectionBuilder")
            .field("path", &self.path)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl ElectionBuilder {
    fn tune(mut self, f: impl FnOnce(ConfigBuilder) -> ConfigBuilder + Send + 'static) -> Self {
        self.tune.push(Box::new(f));
        self
    }

    /// The election path (the parent of the candidates' nodes).
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }
    /// This candidate's id, stored in its node.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }
    /// Extra data stored in the node after the id.
    pub fn data(self, data: impl Into<Vec<u8>>) -> Self {
        let data = data.into();
        self.tune(move |c| c.data(data))
    }
    /// How many leaders (default 1).
    pub fn leaders(self, k: u32) -> Self {
        self.tune(move |c| c.leaders(k))
    }
    /// Which node a follower watches.
    pub fn strategy(self, strategy: WatchStrategy) -> Self {
        self.tune(move |c| c.strategy(strategy))
    }
    /// What a leader does on a suspended connection.
    pub fn policy(self, policy: ConnectionPolicy) -> Self {
        self.tune(move |c| c.policy(policy))
    }
    /// Follow the election without a node.
    pub fn observer(self) -> Self {
        self.tune(|c| c.mode(Mode::Observer))
    }
    /// ACL for created nodes (use with credentials given to the transport).
    pub fn acl(self, acl: Acl) -> Self {
        self.tune(move |c| c.acl(acl))
    }
    /// Whether a revoked candidate rejoins (default true).
    pub fn rejoin_on_revoke(self, yes: bool) -> Self {
        self.tune(move |c| c.rejoin_on_revoke(yes))
    }
    /// Let Curator and kazoo nodes queue with ours.
    pub fn interop(self, yes: bool) -> Self {
        self.tune(move |c| c.interop(yes))
    }
    /// Any other core setting.
    pub fn configure(
        self,
        f: impl FnOnce(ConfigBuilder) -> ConfigBuilder + Send + 'static,
    ) -> Self {
        self.tune(f)
    }
    /// How long `close` may take before the session is closed without the delete (default 5 s).
    pub fn close_timeout(mut self, timeout: Duration) -> Self {
        self.close_timeout = timeout;
        self
    }
    /// How long `join` waits for the node to be created (default 30 s).
    pub fn join_timeout(mut self, timeout: Duration) -> Self {
        self.join_timeout = timeout;
        self
    }

    /// Validates the configuration and starts the driver without waiting.
    pub fn start(self) -> Result<Election, ElectionError> {
        let mut builder = Config::builder(self.path, self.id).nonce_seed(random_seed());
        for f in self.tune {
            builder = f(builder);
        }
        let config = builder.build()?;
        let observer = config.mode() == Mode::Observer;
        let outputs = Outputs::new();
        let (intents_tx, intents_rx) = mpsc::unbounded_channel();
        let driver = Driver {
            candidate: Candidate::new(config),
            transport: self.transport,
            events: self.events,
            intents: intents_rx,
            outputs: Arc::clone(&outputs),
            clock: Clock::new(),
            close_timeout: self.close_timeout,
        };
        let task = tokio::spawn(driver.run());
        let _ = intents_tx.send(Intent::Join);
        Ok(Election {
            intents: intents_tx,
            outputs,
            task: Arc::new(std::sync::Mutex::new(Some(task))),
            observer,
            join_timeout: self.join_timeout,
        })
    }

    /// Starts and waits until this candidate's node is in the queue (observers:
    /// returns at once). Fails on a fatal error (bad credentials, NoAuth…).
    pub async fn join(self) -> Result<Election, ElectionError> {
        let election = self.start()?;
        if !election.observer {
            election.wait_joined().await?;
        }
        Ok(election)
    }
}

/// Seeds the protected-name nonces: distinct per process and per election.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded from the OS once per process and varied per instance.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// How a [`lead`](Election::lead) call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeadOutcome<T> {
    /// The closure finished while still leading.
    Finished(T),
    /// Leadership was suspended or lost; the closure was dropped at that moment.
    Interrupted(Role),
}

/// A candidate in a running election. Cheap to clone; the election ends when
/// [`close`](Self::close) is called or the last handle is dropped.
#[derive(Debug, Clone)]
pub struct Election {
    intents: mpsc::UnboundedSender<Intent>,
    outputs: Arc<Outputs>,
    task: Arc<std::sync::Mutex<Option<JoinHandle<()>>>>,
    observer: bool,
    join_timeout: Duration,
}

impl Election {
    /// Starts building an election over `transport` and its event stream.
    pub fn builder(transport: impl Transport, events: EventStream) -> ElectionBuilder {
        ElectionBuilder {
            transport: Arc::new(transport),
            events,
            path: String::new(),
            id: String::new(),
            tune: Vec::new(),
            close_timeout: Duration::from_secs(5),
            join_timeout: Duration::from_secs(30),
        }
    }

    /// The current role, and every change to it.
    pub fn changes(&self) -> watch::Receiver<Role> {
        self.outputs.role.subscribe()
    }

    /// The current role.
    pub fn role(&self) -> Role {
        *self.outputs.role.borrow()
    }

    /// Every notice from now on (Elected, Demoted, Suspended, LeaderChanged, …).
    pub fn notices(&self) -> broadcast::Receiver<Notice> {
        self.outputs.notices.subscribe()
    }

    /// While leading: when leadership lapses unless the server answers again.
    /// Work done for the leader (a child process, a lease on a resource) must
    /// stop by then; see `zkelect run`'s watchdog.
    pub fn lease(&self) -> watch::Receiver<Option<Instant>> {
        self.outputs.lease.subscribe()
    }

    /// This candidate's node name, once known.
    pub fn node(&self) -> Option<String> {
        self.outputs.node.borrow().clone()
    }

    /// Counters.
    pub fn metrics(&self) -> &Metrics {
        &self.outputs.metrics
    }

    fn fatal(&self) -> ElectionError {
        match self.outputs.error.lock().ok().and_then(|e| e.clone()) {
            Some(zkelect_core::CandidateError::AuthFailed) => {
                ElectionError::Auth("the server rejected this session's credentials".into())
            }
            Some(e) => ElectionError::Fatal(e),
            None => ElectionError::Closed,
        }
    }

    async fn wait_joined(&self) -> Result<(), ElectionError> {
        let mut node = self.outputs.node.subscribe();
        let mut role = self.changes();
        let wait = async {
            loop {
                if node.borrow_and_update().is_some() {
                    return Ok(());
                }
                if matches!(*role.borrow_and_update(), Role::Failed | Role::Closed) {
                    return Err(self.fatal());
                }
                tokio::select! {
                    r = node.changed() => if r.is_err() { return Err(self.fatal()) },
                    r = role.changed() => if r.is_err() { return Err(self.fatal()) },
                }
            }
        };
        tokio::time::timeout(self.join_timeout, wait)
            .await
            .map_err(|_| ElectionError::Timeout(self.join_timeout, "the node to be created"))?
    }

    /// Waits until this candidate leads and returns its fencing token.
    pub async fn wait_leader(&self) -> Result<FencingToken, ElectionError> {
        let mut role = self.changes();
        loop {
            match *role.borrow_and_update() {
                Role::Leader(token) => return Ok(token),
                Role::Failed | Role::Closed => return Err(self.fatal()),
                _ => {}
            }
            if role.changed().await.is_err() {
                return Err(self.fatal());
            }
        }
    }

    /// Waits for leadership, then runs `work` with the fencing token for as long
    /// as this candidate leads. The moment the role is anything but that same
    /// `Leader` (suspended, demoted, closed), `work` is dropped — cancelled at
    /// its next await point — and the new role is returned.
    ///
    /// ```no_run
    /// # async fn example(election: zkelect::Election) -> Result<(), zkelect::ElectionError> {
    /// use zkelect::LeadOutcome;
    /// match election.lead(|token| async move { /* act as leader, writes fenced by token */ token }).await? {
    ///     LeadOutcome::Finished(_) => println!("done while leading"),
    ///     LeadOutcome::Interrupted(role) => println!("stopped: now {role:?}"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn lead<F, Fut, T>(&self, work: F) -> Result<LeadOutcome<T>, ElectionError>
    where
        F: FnOnce(FencingToken) -> Fut,
        Fut: Future<Output = T>,
    {
        let token = self.wait_leader().await?;
        let mut role = self.changes();
        let lost = async {
            loop {
                let now = *role.borrow_and_update();
                if now != Role::Leader(token) {
                    return now;
                }
                if role.changed().await.is_err() {
                    return Role::Closed;
                }
            }
        };
        tokio::select! {
            biased;
            now = lost => Ok(LeadOutcome::Interrupted(now)),
            out = work(token) => Ok(LeadOutcome::Finished(out)),
        }
    }

    /// Steps down: a leader is demoted at once; the node is deleted; with
    /// `rejoin` the candidate joins again at the back of the queue.
    pub fn resign(&self, rejoin: bool) {
        let _ = self.intents.send(Intent::Resign { rejoin });
    }

    /// Joins again after a resign without rejoin (idempotent).
    pub fn join(&self) {
        let _ = self.intents.send(Intent::Join);
    }

    /// Leaves for good: deletes the node (bounded by the close timeout), closes
    /// the session and waits until the driver has stopped. Idempotent.
    pub async fn close(&self) {
        let (done, wait) = oneshot::channel();
        if self.intents.send(Intent::Close { done }).is_ok() {
            let _ = wait.await;
        }
        let task = self.task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}
