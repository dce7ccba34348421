//! The friendly API: build, join, watch the role, lead, resign, close.

use std::future::Future;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use tokio::sync::{broadcast, watch, OnceCell};
use tokio::time::Instant;
use zkelect_core::{
    Acl, Candidate, CandidateError, Config, ConfigBuilder, ConnectionPolicy, DemotionReason,
    FencingToken, Interop, Machine, Notice, Participant, Recipe, Role, Stat, Takeover,
    WatchStrategy, ZkCode,
};

use crate::connect::Connect;
use crate::error::{ElectionError, GuardedWriteError, ObserveError, SessionError};
use crate::hub::Board;
use crate::observer::{Observation, ObserveBuilder};
use crate::session::{random_seed, Link, Session};
use crate::status::{role_now, Metrics, Outputs, Status};
use crate::transport::{EventStream, MultiError, MultiOp, MultiOpResult, Transport};

impl Session {
    /// Starts building an election on this session.
    ///
    /// Closing the election deletes its node and leaves the session open.
    pub fn election(&self, path: impl Into<String>) -> ElectionBuilder {
        ElectionBuilder::on_session(self.clone()).path(path)
    }
}

/// Where the builder gets its transport.
enum Source {
    Ready {
        transport: Arc<dyn Transport>,
        events: EventStream,
    },
    Connect(Box<dyn Connect>),
    /// A session shared with other recipes: it outlives this election.
    Session(Session),
}

/// Builds an [`Election`]: from a transport with [`Election::builder`], or from
/// connection settings with [`Election::connect`].
///
/// ```no_run
/// # async fn example() -> Result<(), zkelect::ElectionError> {
/// use std::time::Duration;
/// use zkelect::{ZkAsyncOptions, Election};
///
/// let options = ZkAsyncOptions::new("127.0.0.1:2181").session_timeout(Duration::from_secs(6));
/// let election = Election::connect(options)
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
#[must_use = "an election starts with `join().await` or `start().await`"]
pub struct ElectionBuilder {
    source: Source,
    path: String,
    id: String,
    tune: Vec<Box<dyn FnOnce(ConfigBuilder) -> ConfigBuilder + Send>>,
    close_timeout: Duration,
    join_timeout: Duration,
    /// The election's outputs, made with the builder so that its notices
    /// can be subscribed to before the join goes out.
    outputs: Arc<Outputs>,
}

impl std::fmt::Debug for ElectionBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElectionBuilder")
            .field("path", &self.path)
            .field("id", &self.id)
            .field("close_timeout", &self.close_timeout)
            .field("join_timeout", &self.join_timeout)
            .finish_non_exhaustive()
    }
}

impl ElectionBuilder {
    fn new(source: Source) -> Self {
        Self {
            source,
            path: String::new(),
            id: String::new(),
            tune: Vec::new(),
            close_timeout: Duration::from_secs(5),
            join_timeout: Duration::from_secs(30),
            outputs: Outputs::new(),
        }
    }

    /// Every notice of the election this builder starts, from the first:
    /// subscribe here, before [`start`](Self::start) or [`join`](Self::join),
    /// to miss none. [`Election::notices`] hears what comes after it is
    /// called, and by the time `start` returns, a lone candidate may have
    /// joined and been elected already.
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), zkelect::ElectionError> {
    /// use zkelect::{Election, Notice, ZkAsyncOptions};
    ///
    /// let builder = Election::connect(ZkAsyncOptions::new("127.0.0.1:2181"))
    ///     .path("/svc/leader")
    ///     .id("node-a");
    /// let mut notices = builder.notices();
    /// let election = builder.start().await?;
    /// // Heard even if this candidate was elected before `start` returned.
    /// while let Ok(notice) = notices.recv().await {
    ///     if let Notice::Elected { token } = notice {
    ///         println!("leading with fencing token {token}");
    ///         break;
    ///     }
    /// }
    /// # drop(election);
    /// # Ok(())
    /// # }
    /// ```
    pub fn notices(&self) -> broadcast::Receiver<Notice> {
        self.outputs.notices()
    }

    pub(crate) fn on_session(session: Session) -> Self {
        Self::new(Source::Session(session))
    }

    fn tune(mut self, f: impl FnOnce(ConfigBuilder) -> ConfigBuilder + Send + 'static) -> Self {
        self.tune.push(Box::new(f));
        self
    }

    /// The election path: the parent of the candidates' nodes, created (with
    /// its ancestors, as persistent nodes) if missing.
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// This candidate's id, stored in its node for others to read.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Extra data stored in the node after the id.
    pub fn data(self, data: impl Into<Vec<u8>>) -> Self {
        let data = data.into();
        self.tune(move |c| c.data(data))
    }

    /// How many leaders at once (default 1): the k lowest nodes lead.
    pub fn leaders(self, k: u32) -> Self {
        self.tune(move |c| c.leaders(k))
    }

    /// Which node a follower watches (default: its predecessor only).
    pub fn strategy(self, strategy: WatchStrategy) -> Self {
        self.tune(move |c| c.strategy(strategy))
    }

    /// What a leader does while the connection is suspended (default:
    /// `Standard`, stop leading at once).
    pub fn policy(self, policy: ConnectionPolicy) -> Self {
        self.tune(move |c| c.policy(policy))
    }

    /// The ACL of created nodes; `CreatorAll*` needs credentials on the transport.
    pub fn acl(self, acl: Acl) -> Self {
        self.tune(move |c| c.acl(acl))
    }

    /// How a follower takes over when the node it watches goes (default
    /// [`Takeover::OnNotification`]: on the notice alone; [`Takeover::Relist`]:
    /// one round trip later, at the packet count of Curator's and zookeeper-async's
    /// latches). See [`ConfigBuilder::takeover`].
    pub fn takeover(self, takeover: Takeover) -> Self {
        self.tune(move |c| c.takeover(takeover))
    }

    /// Whether a candidate whose node an operator deleted joins again (default true).
    pub fn rejoin_on_revoke(self, yes: bool) -> Self {
        self.tune(move |c| c.rejoin_on_revoke(yes))
    }

    /// Share the queue with Curator's `LeaderLatch` or kazoo's `Election`
    /// (default [`Interop::None`]): our nodes are named in that library's
    /// scheme, so it orders them as we do, and its nodes queue with ours.
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), zkelect::ElectionError> {
    /// use zkelect::{ZkAsyncOptions, Election, Interop};
    /// let election = Election::connect(ZkAsyncOptions::new("127.0.0.1:2181"))
    ///     .path("/svc/leader") // the path the Curator fleet's LeaderLatch uses
    ///     .id("node-a")
    ///     .interop(Interop::Curator)
    ///     .join()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn interop(self, scheme: Interop) -> Self {
        self.tune(move |c| c.interop(scheme))
    }

    /// Any other core setting.
    ///
    /// ```no_run
    /// # fn example(builder: zkelect::ElectionBuilder) -> zkelect::ElectionBuilder {
    /// use std::time::Duration;
    /// builder.configure(|c| c.backoff(Duration::from_millis(50), Duration::from_secs(2)))
    /// # }
    /// ```
    pub fn configure(
        self,
        f: impl FnOnce(ConfigBuilder) -> ConfigBuilder + Send + 'static,
    ) -> Self {
        self.tune(f)
    }

    /// How long [`Election::close`] waits for the node's deletion before it
    /// closes the session anyway, and again for the session's close (default 5 s).
    pub fn close_timeout(mut self, timeout: Duration) -> Self {
        self.close_timeout = timeout;
        self
    }

    /// How long [`join`](Self::join) waits for the node to be created (default 30 s).
    pub fn join_timeout(mut self, timeout: Duration) -> Self {
        self.join_timeout = timeout;
        self
    }

    fn config(&mut self) -> Result<Config, ElectionError> {
        let mut builder =
            Config::builder(std::mem::take(&mut self.path), std::mem::take(&mut self.id))
                .nonce_seed(random_seed());
        for f in self.tune.drain(..) {
            builder = f(builder);
        }
        Ok(builder.build()?)
    }

    /// Validates the configuration, connects if built from settings, and
    /// starts the driver without waiting for the node.
    pub async fn start(mut self) -> Result<Election, ElectionError> {
        // Bad input is refused before touching the network.
        let config = self.config()?;
        // A session of its own ends with the election.
        let (session, owned) = match self.source {
            Source::Ready { transport, events } => {
                (Session::start(transport, events, self.close_timeout), true)
            }
            Source::Connect(settings) => {
                let (transport, events) = settings.connect().await?;
                (Session::start(transport, events, self.close_timeout), true)
            }
            Source::Session(session) => (session, false),
        };
        let outputs = self.outputs;
        let board = Board::metered(Arc::clone(&outputs), config.path());
        let mut machine =
            Machine::election(Candidate::new(config)).with_close_timeout(self.close_timeout);
        if owned {
            machine = machine.ending_session();
        }
        let link = session.add(machine, board);
        // Just added: it runs.
        let _ = link.intent(|session, now, id| session.join(now, id));
        Ok(Election {
            shared: Arc::new(Shared {
                link,
                outputs,
                owns_session: owned,
                join_timeout: self.join_timeout,
                close_timeout: self.close_timeout,
                roster: OnceLock::new(),
            }),
        })
    }

    /// Starts and waits until this candidate's node is in the queue. Fails on a fatal error (`NoAuth`, rejected
    /// credentials, …) or after the join timeout; the election is then closed
    /// in the background.
    pub async fn join(self) -> Result<Election, ElectionError> {
        let election = self.start().await?;
        election.wait_joined().await?;
        Ok(election)
    }
}

/// How a [`lead`](Election::lead) call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeadOutcome<T> {
    /// The closure finished while still leading.
    Finished(T),
    /// The connection went into doubt: the closure was dropped, but
    /// leadership may come back with the same token once the server answers
    /// again — call [`lead`](Election::lead) again to wait for it.
    Suspended,
    /// Leadership was lost for this reason; the closure was dropped.
    Demoted(DemotionReason),
}

/// A candidate in a running election.
///
/// Cheap to clone: clones share one candidate. The election ends when
/// [`close`](Self::close) is called, or — in the background — when the last
/// handle is dropped.
#[derive(Debug, Clone)]
pub struct Election {
    /// What every clone shares: one allocation per election, as an idle
    /// election of a large session keeps it.
    shared: Arc<Shared>,
}

/// An election's handle state, shared by its clones.
#[derive(Debug)]
struct Shared {
    /// Its machine on the session; dropped with the last clone, which
    /// closes it.
    link: Link,
    outputs: Arc<Outputs>,
    /// The session is this election's own: it closes with it.
    owns_session: bool,
    join_timeout: Duration,
    close_timeout: Duration,
    /// The queue's observer behind [`Election::participants`], once asked:
    /// one pointer until then (most elections are never asked).
    roster: OnceLock<Box<OnceCell<Observation>>>,
}

/// What the observer behind [`Election::participants`] must know of the
/// election, read from its machine's configuration.
struct Roster {
    path: String,
    leaders: u32,
    interop: Interop,
    /// A prefix of its own (without interop), which the observer must know.
    prefix: Option<String>,
}

impl Roster {
    fn of(config: &Config) -> Self {
        let own = config.interop() == Interop::None && config.prefix() != "n_";
        Self {
            path: config.path().to_owned(),
            leaders: config.leaders(),
            interop: config.interop(),
            prefix: own.then(|| config.prefix().to_owned()),
        }
    }
}

/// What guarded writes need: the session's transport (it holds the
/// credentials). The session owns the transport; this is only a weak
/// handle, so a closed session holds nothing.
#[derive(Clone)]
pub(crate) struct Writer {
    pub(crate) transport: Weak<dyn Transport>,
}

impl Writer {
    /// Applies `ops` only if `own` (the own node's path, as the core names
    /// it, which holds with `token`) still exists, in one `multi`: the
    /// results are those of `ops`. Every handle that holds writes through
    /// this: [`Election::guarded`] and the lock guards.
    pub(crate) async fn guarded(
        &self,
        token: FencingToken,
        own: String,
        ops: Vec<MultiOp>,
    ) -> Result<Vec<MultiOpResult>, GuardedWriteError> {
        let transport = self.transport.upgrade().ok_or(GuardedWriteError::Closed)?;
        let mut all = Vec::with_capacity(ops.len() + 1);
        all.push(MultiOp::Check {
            path: own,
            version: None,
        });
        all.extend(ops);
        match transport.multi(all).await {
            Ok(mut results) => {
                if !results.is_empty() {
                    results.remove(0);
                }
                Ok(results)
            }
            Err(e) => Err(guard_error(e, token)),
        }
    }
}

/// The stat of a guarded `setData`, the one operation of its multi.
pub(crate) fn set_data_result(results: Vec<MultiOpResult>) -> Result<Stat, GuardedWriteError> {
    match results.as_slice() {
        [MultiOpResult::DataSet(stat)] => Ok(*stat),
        // The transport answered something else than it was asked: the
        // write may have happened, so say it is unknown.
        _ => Err(GuardedWriteError::Indeterminate(ZkCode::Other(-1))),
    }
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

impl Election {
    /// Starts building an [`Observation`] of the election at `path` over a
    /// new session opened with `settings` (the settings
    /// [`Election::connect`] takes). It needs no id and creates no node; the
    /// session is its own and closes with it.
    ///
    /// On the in-memory [`MemoryServer`](memory/struct.MemoryServer.html)
    /// (feature `memory`), so that it runs as a test.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use zkelect::memory::MemoryServer;
    /// use zkelect::Election;
    ///
    /// let server = MemoryServer::new();
    /// let a = Election::connect(server.settings(Duration::from_secs(4)))
    ///     .path("/svc/leader").id("node-a").join().await?;
    /// let observation = Election::observe(server.settings(Duration::from_secs(4)), "/svc/leader")
    ///     .start()
    ///     .await?;
    /// assert_eq!(observation.wait_leader().await?.id(), Some("node-a"));
    /// observation.close().await;
    /// a.close().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn observe(settings: impl Connect, path: impl Into<String>) -> ObserveBuilder {
        ObserveBuilder::over_new_session(settings, path.into(), Recipe::Election { leaders: 1 })
    }
}

impl Election {
    /// Starts building an election over `transport` and its event stream.
    ///
    /// On the in-memory [`MemoryServer`](memory/struct.MemoryServer.html)
    /// (feature `memory`), so that it runs as a test.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), zkelect::ElectionError> {
    /// use std::time::Duration;
    /// use zkelect::memory::MemoryServer;
    /// use zkelect::Election;
    ///
    /// let server = MemoryServer::new();
    /// let (transport, events) = server.connect(Duration::from_secs(4));
    /// let election = Election::builder(transport, events).path("/svc/leader").id("a").join().await?;
    /// election.wait_leader().await?;
    /// election.close().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn builder(transport: impl Transport, events: EventStream) -> ElectionBuilder {
        ElectionBuilder::new(Source::Ready {
            transport: Arc::new(transport),
            events,
        })
    }

    /// Starts building an election over a new session opened with
    /// `settings` — [`ZkAsyncOptions`](zk_async/type.ZkAsyncOptions.html) for
    /// zookeeper-async, [`ZkClientOptions`](zk_client/type.ZkClientOptions.html)
    /// for zookeeper-client (TLS, SASL, guarded writes). The connection is
    /// made by [`join`](ElectionBuilder::join) (or
    /// [`start`](ElectionBuilder::start)), after the configuration is validated.
    pub fn connect(settings: impl Connect) -> ElectionBuilder {
        ElectionBuilder::new(Source::Connect(Box::new(settings)))
    }

    /// Everything the driver publishes but notices, in one snapshot, and
    /// every change to it: role, node, lease, last demotion, error, counters.
    ///
    /// ```no_run
    /// # async fn example(election: zkelect::Election) {
    /// let mut status = election.status();
    /// while status.changed().await.is_ok() {
    ///     let now = status.borrow_and_update();
    ///     println!("{:?}, lease until {:?}", now.role, now.lease);
    /// }
    /// # }
    /// ```
    pub fn status(&self) -> watch::Receiver<Status> {
        self.shared.outputs.status()
    }

    /// The current role, and every change to it (the role of
    /// [`status`](Self::status), sent in the same step).
    ///
    /// ```no_run
    /// # async fn example(election: zkelect::Election) {
    /// let mut roles = election.changes();
    /// while roles.changed().await.is_ok() {
    ///     println!("now {:?}", *roles.borrow_and_update());
    /// }
    /// # }
    /// ```
    pub fn changes(&self) -> watch::Receiver<Role> {
        self.shared.outputs.role()
    }

    /// The current role, as the clock has it: `Leader` only while the
    /// lease has not run out. A leader whose lease has passed is
    /// `Suspended`, even before the pump has said so (a process frozen past
    /// its lease — GC pause, SIGSTOP, a VM migration — answers from the
    /// moment it resumes, when the pump may not have run yet).
    pub fn role(&self) -> Role {
        self.shared.outputs.read(role_now)
    }

    /// Every notice from now on (`Elected`, `Demoted`, `Suspended`,
    /// `LeaderChanged`, …), published before the driver performs the next
    /// request. A slow receiver that lags 256 notices behind loses the oldest.
    /// To hear every notice from the join on, subscribe with
    /// [`ElectionBuilder::notices`] before starting.
    pub fn notices(&self) -> broadcast::Receiver<Notice> {
        self.shared.outputs.notices()
    }

    /// While leading: when leadership lapses unless the server answers again.
    /// Work done for the leader (a child process, a lease on a resource) must
    /// stop by then; `zkelect run` uses it for its watchdog. (The lease of
    /// [`status`](Self::status), sent in the same step.) Compare it with the
    /// clock (`tokio::time::Instant::now()`): a lease in the past has run
    /// out even while the value is still there, as it is until the pump
    /// runs again after a freeze; [`role`](Self::role) does so.
    pub fn lease(&self) -> watch::Receiver<Option<Instant>> {
        self.shared.outputs.lease()
    }

    /// Every candidate of this election, oldest node first, with who leads
    /// (`holds`): Curator's `LeaderLatch.getParticipants()`, with each
    /// one's id and data as its node stores them.
    ///
    /// The first call starts an [`Observation`] of the election's queue on
    /// this election's session and waits for its first listing (at most
    /// 30 s: [`ObserveError::Timeout`]); later calls answer at once from
    /// what it has seen since, kept current by its watches (no request per
    /// call, so a change is seen a round trip after it happened, as in any
    /// [`Observation`]). The observer ends with the election's last handle.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use zkelect::{memory::MemoryServer, Session};
    ///
    /// let server = MemoryServer::new();
    /// let session = Session::connect(server.settings(Duration::from_secs(4))).await?;
    /// let a = session.election("/svc/leader").id("a").join().await?;
    /// let b = session.election("/svc/leader").id("b").join().await?;
    /// a.wait_leader().await?;
    /// let list = b.participants().await?;
    /// let ids: Vec<(Option<&str>, bool)> = list.iter().map(|p| (p.id(), p.holds)).collect();
    /// assert_eq!(ids, [(Some("a"), true), (Some("b"), false)]);
    /// assert_eq!(b.leader().await?.as_ref().and_then(|p| p.id()), Some("a"));
    /// # session.close().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn participants(&self) -> Result<Vec<Participant>, ObserveError> {
        Ok(self.observation().await?.participants())
    }

    /// The leader now (with `k` leaders, the oldest of them), or `None` if
    /// nobody leads: Curator's `LeaderLatch.getLeader()`. See
    /// [`participants`](Self::participants) for how it is kept.
    pub async fn leader(&self) -> Result<Option<Participant>, ObserveError> {
        Ok(self.observation().await?.leader())
    }

    /// The observer of this election's queue, started at the first call
    /// (on the election's configuration, read from its machine: a closed
    /// election starts none).
    async fn observation(&self) -> Result<&Observation, ObserveError> {
        let link = &self.shared.link;
        self.shared
            .roster
            .get_or_init(Box::default)
            .get_or_try_init(|| async {
                let roster = link
                    .read(|m| m.as_candidate().map(|c| Roster::of(c.config())))
                    .flatten()
                    .ok_or(ObserveError::Closed)?;
                let mut builder = link
                    .session()
                    .observe(
                        roster.path,
                        Recipe::Election {
                            leaders: roster.leaders,
                        },
                    )
                    .interop(roster.interop);
                if let Some(prefix) = roster.prefix {
                    builder = builder.prefix(prefix);
                }
                builder.start().await
            })
            .await
    }

    /// This candidate's node name (not the full path), once known.
    pub fn node(&self) -> Option<String> {
        self.shared.outputs.read(|s| s.node.clone())
    }

    /// The counters so far.
    pub fn metrics(&self) -> Metrics {
        self.shared.outputs.read(|s| s.stats)
    }

    /// The error that stopped the election, if one did.
    pub fn error(&self) -> Option<CandidateError> {
        self.shared.outputs.read(|s| s.error.clone())
    }

    fn fatal(&self) -> ElectionError {
        match self.error() {
            Some(CandidateError::AuthFailed) => {
                ElectionError::Session(SessionError::rejected_later())
            }
            Some(e) => ElectionError::Fatal(e),
            None => ElectionError::Closed,
        }
    }

    /// Waits until this candidate's node is in the queue (at once if it
    /// is), for an election made with [`ElectionBuilder::start`]: what
    /// [`ElectionBuilder::join`] waits for, with the same bound (the join
    /// timeout, [`ElectionError::Timeout`]) and errors. Cancel-safe: the
    /// election goes on, so a caller that stops waiting (a signal) can still
    /// [`close`](Self::close) it, and the node is deleted even if its create
    /// was still on its way.
    pub async fn wait_joined(&self) -> Result<(), ElectionError> {
        let mut status = self.shared.outputs.wait();
        let wait = async {
            loop {
                {
                    let now = status.borrow_and_update();
                    if now.node.is_some() {
                        return Ok(());
                    }
                    if matches!(now.role, Role::Failed | Role::Closed) {
                        drop(now);
                        return Err(self.fatal());
                    }
                }
                if status.changed().await.is_err() {
                    return Err(self.fatal());
                }
            }
        };
        tokio::time::timeout(self.shared.join_timeout, wait)
            .await
            .map_err(|_| {
                ElectionError::Timeout(self.shared.join_timeout, "the node to be created")
            })?
    }

    /// Waits until this candidate leads and returns its fencing token.
    ///
    /// Fails if the election stops first: [`ElectionError::Fatal`] (e.g.
    /// `NoAuth`), [`ElectionError::Session`] (rejected credentials) or [`ElectionError::Closed`].
    /// Cancellation-safe.
    pub async fn wait_leader(&self) -> Result<FencingToken, ElectionError> {
        let mut status = self.shared.outputs.wait();
        loop {
            // Not past the lease: that is a leader who does not know yet.
            let role = role_now(&status.borrow_and_update());
            match role {
                Role::Leader(token) => return Ok(token),
                Role::Failed | Role::Closed => return Err(self.fatal()),
                _ => {}
            }
            if status.changed().await.is_err() {
                return Err(self.fatal());
            }
        }
    }

    /// Waits for leadership, then runs `work` with the fencing token for as
    /// long as this candidate leads that term. The moment leadership is
    /// suspended or lost (a `Suspended` or `Demoted` notice, or any role but
    /// that `Leader`), `work` is dropped — cancelled at its next await point —
    /// and the reason is returned. Dropping the `lead` future drops `work` too.
    ///
    /// `work` should pass the token along with every write to the resource it
    /// guards, so a deposed leader whose cancellation came too late is still
    /// refused there.
    ///
    /// ```no_run
    /// # async fn example(election: zkelect::Election) -> Result<(), zkelect::ElectionError> {
    /// use zkelect::LeadOutcome;
    ///
    /// loop {
    ///     match election.lead(|token| async move { /* act as leader; fence with token */ token }).await? {
    ///         LeadOutcome::Finished(_) => break,
    ///         LeadOutcome::Suspended => println!("connection in doubt; waiting to lead again"),
    ///         LeadOutcome::Demoted(reason) => println!("stopped leading: {reason}; waiting to lead again"),
    ///     }
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
        // Notices catch what the role channel can coalesce away: a
        // suspension and a resumption (same token) between two polls.
        let mut notices = self.notices();
        let mut status = self.status();
        let lost = async {
            loop {
                let now = status.borrow_and_update().role;
                if now != Role::Leader(token) {
                    return self.outcome_of(now);
                }
                tokio::select! {
                    changed = status.changed() => if changed.is_err() {
                        return LeadOutcome::Demoted(DemotionReason::Closed);
                    },
                    notice = notices.recv() => match notice {
                        Ok(Notice::Suspended) => return LeadOutcome::Suspended,
                        Ok(Notice::Demoted { reason }) => return LeadOutcome::Demoted(reason),
                        Ok(_) => {}
                        // Too far behind to know: assume the worst that can heal.
                        Err(broadcast::error::RecvError::Lagged(_)) => return LeadOutcome::Suspended,
                        Err(broadcast::error::RecvError::Closed) => {
                            return LeadOutcome::Demoted(DemotionReason::Closed)
                        }
                    },
                }
            }
        };
        tokio::select! {
            // Losing leadership wins over a closure that finishes in the same poll.
            biased;
            outcome = lost => Ok(outcome),
            out = work(token) => Ok(LeadOutcome::Finished(out)),
        }
    }

    /// Why a role other than the leader's ended a `lead`.
    fn outcome_of<T>(&self, role: Role) -> LeadOutcome<T> {
        match role {
            Role::Suspended(_) => LeadOutcome::Suspended,
            Role::Closed => LeadOutcome::Demoted(DemotionReason::Closed),
            Role::Failed => LeadOutcome::Demoted(DemotionReason::Failed),
            _ => LeadOutcome::Demoted(
                self.shared
                    .outputs
                    .read(|s| s.last_demotion)
                    .unwrap_or(DemotionReason::Lost),
            ),
        }
    }

    /// Steps down: a leader is demoted at once, the node is deleted, and with
    /// `rejoin` the candidate joins again at the back of the queue. Returns
    /// once the demotion is published (the role is no longer `Leader`); the
    /// deletion goes on in the background. Idempotent.
    pub async fn resign(&self, rejoin: bool) -> Result<(), ElectionError> {
        self.shared
            .link
            .intent(|session, now, id| session.resign(now, id, rejoin))
            .map_err(|_| ElectionError::Closed)
    }

    /// Joins again after [`resign(false)`](Self::resign). Idempotent; returns
    /// once the session has taken the intent (use [`changes`](Self::changes) or
    /// [`wait_leader`](Self::wait_leader) to follow what happens next).
    pub async fn join(&self) -> Result<(), ElectionError> {
        self.shared
            .link
            .intent(|session, now, id| session.join(now, id))
            .map_err(|_| ElectionError::Closed)
    }

    /// While leading: this candidate's fencing token and its node's path,
    /// read together from the machine.
    fn leading_node(&self) -> Result<(FencingToken, String), GuardedWriteError> {
        // Past the lease by the clock, nothing is sent, even before the
        // pump has demoted (a process resumed after a freeze).
        if let Role::Suspended(_) = self.role() {
            return Err(GuardedWriteError::NotHolding);
        }
        let read = self.shared.link.read(|m| match (m.role(), m.own_path()) {
            (Role::Leader(token), Some(own)) => Ok((token, own)),
            (Role::Closed | Role::Failed, _) => Err(GuardedWriteError::Closed),
            _ => Err(GuardedWriteError::NotHolding),
        });
        read.unwrap_or(Err(GuardedWriteError::Closed))
    }

    /// Applies `ops` to ZooKeeper only if this candidate still leads, all in
    /// one atomic `multi`: a check that this candidate's own node still
    /// exists, then `ops`. The results are those of `ops`, in order.
    ///
    /// Sequence numbers only grow and the nodes below one's own can only go,
    /// so "my node still exists" means "I still lead this term". If the
    /// session expired or an operator revoked the node, the server refuses
    /// the whole multi and nothing is written: a leader that froze and woke
    /// up after its successor was elected cannot overwrite the successor's
    /// writes, however late its write arrives.
    ///
    /// Errors ([`GuardedWriteError`]): `NotHolding` (nothing sent), `Deposed`
    /// (the server says the node is gone), `Op` (one of `ops` failed),
    /// `Refused` (the server refused the request as a whole), `Indeterminate`
    /// (connection trouble: it may have been applied), `Unsupported` (the
    /// transport has no multi: zookeeper-async), `Closed`. Everything but
    /// `Indeterminate` means nothing was written.
    ///
    /// ```no_run
    /// # async fn example(election: zkelect::Election) -> Result<(), zkelect::GuardedWriteError> {
    /// use zkelect::MultiOp;
    ///
    /// election
    ///     .guarded(vec![
    ///         MultiOp::SetData { path: "/svc/config".into(), data: b"v2".to_vec(), version: None },
    ///         MultiOp::Delete { path: "/svc/pending".into(), version: None },
    ///     ])
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn guarded(
        &self,
        ops: Vec<MultiOp>,
    ) -> Result<Vec<MultiOpResult>, GuardedWriteError> {
        let (token, own) = self.leading_node()?;
        let writer = Writer {
            transport: self.shared.link.session().transport(),
        };
        writer.guarded(token, own, ops).await
    }

    /// Sets the data of `path` only if this candidate still leads (see
    /// [`guarded`](Self::guarded)), and returns the node's new stat.
    ///
    /// ```no_run
    /// # async fn example(election: zkelect::Election) {
    /// use zkelect::GuardedWriteError;
    ///
    /// match election.guarded_set_data("/svc/config", b"v2".to_vec()).await {
    ///     Ok(stat) => println!("written, version {}", stat.version),
    ///     Err(GuardedWriteError::Deposed { token }) => println!("term {token} is over: not written"),
    ///     Err(e) => println!("not written: {e}"),
    /// }
    /// # }
    /// ```
    pub async fn guarded_set_data(
        &self,
        path: impl Into<String>,
        data: impl Into<Vec<u8>>,
    ) -> Result<Stat, GuardedWriteError> {
        let op = MultiOp::SetData {
            path: path.into(),
            data: data.into(),
            version: None,
        };
        set_data_result(self.guarded(vec![op]).await?)
    }

    /// Leaves for good: demotes at once, deletes the node (waiting at most the
    /// close timeout), and — when the session is this election's own (made by
    /// [`Election::connect`] or [`Election::builder`]) — closes it (again at
    /// most the close timeout) and waits until its driver task has ended, so
    /// nothing is left running. An election made with
    /// [`Session::election`] leaves the session open. Idempotent, and safe to
    /// call from several clones at once.
    pub async fn close(&self) {
        if let Some(wait) = self.shared.link.close() {
            // The session bounds the deletion; this outer bound only matters
            // if its pump is stuck, which would be a bug.
            let bound = self.shared.close_timeout * 2 + Duration::from_secs(1);
            if tokio::time::timeout(bound, wait).await.is_err() {
                tracing::warn!("close: the session did not answer in time");
            }
        }
        if self.shared.owns_session {
            self.shared.link.session().close().await;
        }
    }
}

/// Translates a failed guarded multi: index 0 is the leadership check.
fn guard_error(e: MultiError, token: FencingToken) -> GuardedWriteError {
    let in_doubt = |code: ZkCode| code.is_connection_fault() || code == ZkCode::SessionExpired;
    match e {
        MultiError::Unsupported => GuardedWriteError::Unsupported,
        MultiError::Op {
            index: 0,
            code: ZkCode::NoNode | ZkCode::BadVersion,
        } => GuardedWriteError::Deposed { token },
        MultiError::Op { index: 0, code } | MultiError::Request(code) if in_doubt(code) => {
            GuardedWriteError::Indeterminate(code)
        }
        MultiError::Op { index: 0, code } | MultiError::Request(code) => {
            GuardedWriteError::Refused(code)
        }
        MultiError::Op { index, code } => GuardedWriteError::Op {
            index: index - 1,
            code,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_errors_say_whether_anything_was_written() {
        let t = FencingToken(7);
        let table = [
            (MultiError::Unsupported, GuardedWriteError::Unsupported),
            (
                MultiError::Op {
                    index: 0,
                    code: ZkCode::NoNode,
                },
                GuardedWriteError::Deposed { token: t },
            ),
            (
                MultiError::Op {
                    index: 0,
                    code: ZkCode::BadVersion,
                },
                GuardedWriteError::Deposed { token: t },
            ),
            (
                MultiError::Op {
                    index: 0,
                    code: ZkCode::NoAuth,
                },
                GuardedWriteError::Refused(ZkCode::NoAuth),
            ),
            (
                MultiError::Op {
                    index: 2,
                    code: ZkCode::BadVersion,
                },
                GuardedWriteError::Op {
                    index: 1,
                    code: ZkCode::BadVersion,
                },
            ),
            (
                MultiError::Request(ZkCode::ConnectionLoss),
                GuardedWriteError::Indeterminate(ZkCode::ConnectionLoss),
            ),
            (
                MultiError::Request(ZkCode::SessionExpired),
                GuardedWriteError::Indeterminate(ZkCode::SessionExpired),
            ),
            (
                MultiError::Request(ZkCode::BadArguments),
                GuardedWriteError::Refused(ZkCode::BadArguments),
            ),
        ];
        for (from, to) in table {
            assert_eq!(guard_error(from, t), to, "{from:?}");
        }
    }

    /// A receiver taken from the builder hears the election from its first
    /// notice, however far it got before the caller looked; one taken from
    /// the election hears only what comes later.
    #[tokio::test(start_paused = true)]
    async fn the_builders_receiver_hears_every_notice_from_the_join_on() {
        let zk = crate::testkit::TestZk::new();
        let (transport, events) = zk.connect(Duration::from_secs(3));
        let builder = Election::builder(transport, events).path("/e").id("a");
        let mut early = builder.notices();
        let election = builder.start().await.unwrap();
        let token = election.wait_leader().await.unwrap();
        let mut late = election.notices();
        let mut heard = Vec::new();
        while let Ok(notice) = early.try_recv() {
            heard.push(notice);
        }
        assert!(
            matches!(heard.first(), Some(Notice::Joined { .. })),
            "{heard:?}"
        );
        assert!(heard.contains(&Notice::Elected { token }), "{heard:?}");
        assert!(late.try_recv().is_err(), "nothing of the past");
        election.close().await;
    }

    /// The observer behind `participants` and `leader` starts at the first
    /// call, on the machine's configuration: after the election closed there
    /// is none to read, and the call says so rather than watch a queue the
    /// election has left.
    #[tokio::test(start_paused = true)]
    async fn a_first_look_at_the_queue_after_close_is_refused() {
        let zk = crate::testkit::TestZk::new();
        let (transport, events) = zk.connect(Duration::from_secs(3));
        let session = Session::from_transport(transport, events);
        let looked = session.election("/e").id("looked").join().await.unwrap();
        let unlooked = session.election("/e").id("unlooked").join().await.unwrap();
        assert_eq!(looked.participants().await.unwrap().len(), 2);
        unlooked.close().await;
        assert!(
            matches!(unlooked.participants().await, Err(ObserveError::Closed)),
            "participants after close"
        );
        assert!(
            matches!(unlooked.leader().await, Err(ObserveError::Closed)),
            "leader after close"
        );
        looked.close().await;
        session.close().await;
    }
}
