//! Locks on a session: [`Mutex`], [`Semaphore`], [`RwLock`], and the
//! [`LockGuard`] each of them hands out.
//!
//! Each acquisition that needs a node runs a machine on the session: the
//! core's lock machine (`Machine::lock`: a `Candidate` under a lock's
//! [`Rule`] that, once it has held and lost the hold, leaves the queue
//! instead of queueing again — a lock is acquired by the application, never
//! behind its back). A hold —
//! one node, one machine — lives as long as something points at it: the
//! guards, and the `acquire` futures waiting on it. When the last one goes
//! the machine is closed, and its node is deleted in the background,
//! retried through connection loss until it succeeds or the session ends
//! (Curator's guaranteed delete). So a dropped guard releases, and a
//! cancelled `acquire` leaves no node behind.
//!
//! A [`Mutex`] handle is reentrant, as Curator's `InterProcessMutex` is per
//! thread: while it holds, another `acquire` on the same handle returns at
//! once with a guard of the same hold (the same node, the same token), and
//! the hold ends with its last guard. Acquisitions on one handle that wait
//! at the same time wait for one node together; built
//! [`reentrant(false)`](Mutex::reentrant) (Curator's
//! `InterProcessSemaphoreMutex`) every acquisition takes a place of its own
//! and a second one on a handle that holds is refused. A [`Semaphore`] is
//! not reentrant: every acquisition takes a permit of its own.

use std::future::Future;
use std::sync::{Arc, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio::time::Instant;
use zkelect_core::{
    Access, Acl, Candidate, Config, DemotionReason, FencingToken, Interop, Machine, Notice, Role,
    Rule, Stat, Takeover, ZkCode,
};

use crate::election::{set_data_result, Writer};
use crate::error::{DowngradeError, GuardedWriteError, LockError};
use crate::hub::Board;
use crate::session::{random_seed, Link, Session};
use crate::status::{role_now, Outputs, Status};
use crate::transport::{MultiOp, MultiOpResult};

impl Session {
    /// A fair, reentrant lock on `path` (its nodes are the children of
    /// `path`, created with its ancestors if missing). Every call makes a
    /// new contender; reentrancy is per handle.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = zkelect::memory::MemoryServer::new();
    /// # let session = zkelect::Session::connect(server.settings(std::time::Duration::from_secs(4))).await?;
    /// let guard = session.mutex("/svc/locks/report").acquire().await?;
    /// println!("holding with fencing token {}", guard.token());
    /// # Ok(())
    /// # }
    /// ```
    pub fn mutex(&self, path: impl Into<String>) -> Mutex {
        Mutex::new(self.clone(), path.into(), Rule::Mutex)
    }

    /// A counting semaphore on `path`: at most `permits` holders at once
    /// (every participant of the path must use the same number).
    pub fn semaphore(&self, path: impl Into<String>, permits: u32) -> Semaphore {
        Semaphore::new(self.clone(), path.into(), permits)
    }

    /// A fair read-write lock on `path`: [`RwLock::read`] and
    /// [`RwLock::write`] are its two sides.
    pub fn rw_lock(&self, path: impl Into<String>) -> RwLock {
        RwLock::new(self, path.into())
    }
}

/// How long [`LockGuard::release`] and a timed-out
/// [`Mutex::try_acquire`] wait for the node's deletion before returning
/// (it goes on in the background).
pub(crate) const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// What a lock handle needs to start a hold: where, under which rule, as whom.
#[derive(Debug, Clone)]
struct Spec {
    session: Session,
    /// Shared with every hold's writer.
    path: Arc<str>,
    id: String,
    rule: Rule,
    interop: Interop,
    takeover: Takeover,
    /// Hear of cooperative revocation requests ([`LockGuard::revocation_requested`]).
    revocable: bool,
    /// Stored in every node after the id (Curator's lock-node data,
    /// kazoo's `identifier`), for observers and `zkelect status` to show.
    data: Vec<u8>,
    /// The ACL of the nodes (and of the path's levels it creates).
    acl: Acl,
}

impl Spec {
    fn new(session: Session, path: String, rule: Rule) -> Self {
        Self {
            session,
            path: path.into(),
            id: format!("pid-{}", std::process::id()),
            rule,
            interop: Interop::None,
            takeover: Takeover::default(),
            revocable: false,
            data: Vec::new(),
            acl: Acl::default(),
        }
    }

    /// Starts a machine that queues for one hold (of one permit).
    fn start(&self) -> Result<Arc<Hold>, LockError> {
        self.start_weighted(1)
    }

    /// Starts a machine that queues for one hold of `weight` permits (a
    /// weight the rule does not allow is refused here, before any request).
    fn start_weighted(&self, weight: u32) -> Result<Arc<Hold>, LockError> {
        let config = Config::builder(self.path.to_string(), self.id.clone())
            .rule(self.rule)
            .weight(weight)
            .interop(self.interop)
            .takeover(self.takeover)
            .revocable(self.revocable)
            .data(self.data.clone())
            .acl(self.acl.clone())
            .nonce_seed(random_seed())
            .build()?;
        let outputs = Outputs::new();
        let board = Board::metered(Arc::clone(&outputs), &self.path);
        // Its close waits for its node's deletion as long as the session lives.
        let link = self
            .session
            .add(Machine::lock(Candidate::new(config)), board);
        if link
            .intent(|session, now, id| session.join(now, id))
            .is_err()
        {
            return Err(LockError::Closed);
        }
        Ok(Arc::new(Hold {
            link,
            outputs,
            writer: Writer {
                transport: self.session.transport(),
            },
            path: Arc::clone(&self.path),
            refused: std::sync::OnceLock::new(),
        }))
    }
}

/// One node in a lock's queue and the machine that keeps it. Dropping the
/// last `Arc` drops the link, which closes the machine (its node is deleted
/// in the background).
struct Hold {
    link: Link,
    outputs: Arc<Outputs>,
    writer: Writer,
    /// The lock's path (for logs).
    path: Arc<str>,
    /// Why the server refused this writer's downgrade, once a
    /// [`LockGuard::downgrade`] call heard it.
    refused: std::sync::OnceLock<ZkCode>,
}

/// What a hold was granted with.
#[derive(Debug, Clone)]
struct Held {
    token: FencingToken,
    node: Box<str>,
}

impl Hold {
    /// Held once and no longer, or stopped, or a writer's hold that
    /// downgrades: no acquisition can use it (a write acquisition on a
    /// handle whose hold reads now queues anew, as any upgrade does).
    fn spent(&self) -> bool {
        let reads_now = self.link.read(|m| {
            m.as_candidate()
                .is_some_and(|c| c.config().rule() == Rule::Write && c.access() == Access::Shared)
        });
        if reads_now == Some(true) {
            return true;
        }
        self.outputs.read(|s| match s.role {
            Role::Leader(_) | Role::Suspended(_) => false,
            Role::Closed | Role::Failed => true,
            Role::Idle | Role::Follower | Role::Observer => s.stats.elections > 0,
        })
    }

    /// Waits until the hold is granted (at once if it is).
    async fn wait(&self) -> Result<Held, LockError> {
        let mut status = self.outputs.wait();
        loop {
            {
                let s = status.borrow_and_update();
                match s.role {
                    Role::Leader(token) | Role::Suspended(token) => {
                        let node = s.node.as_deref().unwrap_or_default().into();
                        return Ok(Held { token, node });
                    }
                    Role::Closed | Role::Failed => {
                        return Err(s.error.clone().map_or(LockError::Closed, LockError::Fatal))
                    }
                    Role::Idle | Role::Follower | Role::Observer => {}
                }
            }
            if status.changed().await.is_err() {
                return Err(LockError::Closed);
            }
        }
    }

    /// Lets go of one reference; the last one closes the machine and waits
    /// (at most [`RELEASE_WAIT`]) for its node's deletion.
    ///
    /// The close is applied in this task, and the core's close of a holder
    /// sends its node's delete in the same step, so the delete that lets
    /// the next holder in is on its way before this task awaits anything.
    async fn let_go(hold: Arc<Hold>) {
        let Some(hold) = Arc::into_inner(hold) else {
            return;
        };
        let Some(deleted) = hold.link.close() else {
            return;
        };
        if tokio::time::timeout(RELEASE_WAIT, deleted).await.is_err() {
            tracing::debug!(
                path = &*hold.path,
                "release: the node's deletion goes on in the background"
            );
        }
    }
}

/// A fair, reentrant mutual-exclusion lock on a ZooKeeper path, from
/// [`Session::mutex`] (or [`RwLock::read`] / [`RwLock::write`]).
///
/// Holders are served in the order their nodes were created (FIFO). Each
/// handle is one contender: another [`acquire`](Self::acquire) on a handle
/// that holds returns at once with a guard of the same hold and counts, and
/// the last guard's drop releases (Curator's `InterProcessMutex`, per
/// handle instead of per thread). To contend from two places in one
/// process, make two handles; to share one hold, share the handle
/// (`Arc<Mutex>`).
///
/// On the in-memory [`MemoryServer`](memory/struct.MemoryServer.html)
/// (feature `memory`), so that it runs as a test.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use zkelect::{memory::MemoryServer, Session};
///
/// let server = MemoryServer::new();
/// let session = Session::connect(server.settings(Duration::from_secs(4))).await?;
/// let lock = session.mutex("/svc/locks/report");
/// let outer = lock.acquire().await?;
/// let inner = lock.acquire().await?; // reentrant: the same hold
/// assert_eq!(outer.token(), inner.token());
/// drop(inner);
/// drop(outer); // the last guard releases
/// # session.close().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Mutex {
    spec: Spec,
    /// Whether a second acquisition on this handle shares the hold.
    reentrancy: Reentrancy,
    /// The hold this handle holds or waits for, while anything points at it.
    current: std::sync::Mutex<Weak<Hold>>,
}

/// What a second acquisition on a [`Mutex`] handle that holds or waits does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reentrancy {
    /// It shares the hold (Curator's `InterProcessMutex`, per handle).
    PerHandle,
    /// It is refused with [`LockError::InUse`] (Curator's
    /// `InterProcessSemaphoreMutex` would block forever).
    Refused,
}

impl Mutex {
    pub(crate) fn new(session: Session, path: String, rule: Rule) -> Self {
        Self {
            spec: Spec::new(session, path, rule),
            reentrancy: Reentrancy::PerHandle,
            current: std::sync::Mutex::new(Weak::new()),
        }
    }

    /// Whether the handle is reentrant (default true).
    ///
    /// `reentrant(false)` is Curator's `InterProcessSemaphoreMutex`: every
    /// acquisition takes a place of its own in the queue, with a node of
    /// its own — nothing is shared with an earlier hold of the handle. A
    /// second [`acquire`](Self::acquire) on a handle that holds, or still
    /// waits, fails at once with [`LockError::InUse`]. Curator's
    /// non-reentrant mutex blocks such a call forever (the thread waits for
    /// itself); zkelect is stricter because a handle is one contender: the
    /// second acquisition could only ever be granted after the first is
    /// released, by the same code that is waiting, so it is a program error
    /// and says so, instead of a hang. To contend from two tasks, give each
    /// its own handle (they are cheap: one path and an id).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use zkelect::{memory::MemoryServer, LockError, Session};
    ///
    /// let server = MemoryServer::new();
    /// let session = Session::connect(server.settings(Duration::from_secs(4))).await?;
    /// let lock = session.mutex("/svc/locks/report").reentrant(false);
    /// let first = lock.acquire().await?;
    /// // The handle holds: a second acquisition would wait for itself.
    /// assert!(matches!(lock.acquire().await, Err(LockError::InUse)));
    /// let token = first.token();
    /// first.release().await;
    /// // Released: the next acquisition queues a node of its own.
    /// let again = lock.acquire().await?;
    /// assert!(again.token() > token);
    /// # drop(again);
    /// # session.close().await;
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn reentrant(mut self, yes: bool) -> Self {
        self.reentrancy = if yes {
            Reentrancy::PerHandle
        } else {
            Reentrancy::Refused
        };
        self
    }

    /// Data stored in this handle's nodes after the id (as Curator keeps the
    /// holder's address in its lock nodes and kazoo its `identifier`):
    /// [`Observation::participants`](crate::Observation::participants) and
    /// `zkelect status` show it. Default none.
    #[must_use]
    pub fn data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.spec.data = data.into();
        self
    }

    /// The ACL of this handle's nodes and of the levels of the path it
    /// creates (default [`Acl::Open`]; `CreatorAll*` needs credentials on
    /// the transport). A bad [`Acl::Custom`] list fails the first
    /// acquisition with [`LockError::Config`].
    #[must_use]
    pub fn acl(mut self, acl: Acl) -> Self {
        self.spec.acl = acl;
        self
    }

    /// The id stored in this handle's nodes, for others to read (default
    /// `pid-<process id>`).
    #[must_use]
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.spec.id = id.into();
        self
    }

    /// Share the lock with Curator's `InterProcessMutex` /
    /// `InterProcessReadWriteLock` or kazoo's `Lock` / `ReadLock` /
    /// `WriteLock` on the same path (default [`Interop::None`]).
    #[must_use]
    pub fn interop(mut self, scheme: Interop) -> Self {
        self.spec.interop = scheme;
        self
    }

    /// How the next in line takes the lock when its predecessor lets go
    /// (default [`Takeover::OnNotification`]: on the notice alone, at 3
    /// requests and 6 packets out per hand-off; [`Takeover::Relist`]: one
    /// round trip later, at Curator's and kazoo's 2 requests and 3 packets).
    #[must_use]
    pub fn takeover(mut self, takeover: Takeover) -> Self {
        self.spec.takeover = takeover;
        self
    }

    /// Hear of cooperative revocation requests (default false): anyone may
    /// then ask this handle's holds to let go — another zkelect process
    /// with [`Session::request_revocation`], an operator with `zkelect
    /// revoke --ask`, Curator's `Revoker.attemptRevoke` — and the guard's
    /// [`revocation_requested`](LockGuard::revocation_requested) resolves.
    /// The holder decides: nothing is released by the request itself
    /// (Curator's `makeRevocable`). Costs one more read per hold (its own
    /// node's data is watched).
    #[must_use]
    pub fn revocable(mut self, yes: bool) -> Self {
        self.spec.revocable = yes;
        self
    }

    /// The lock's path.
    pub fn path(&self) -> &str {
        &self.spec.path
    }

    /// Waits for the lock and returns a guard; at once if this handle holds it.
    ///
    /// Cancel-safe: dropping the future before it resolves removes its node
    /// (in the background) unless another acquisition on this handle waits
    /// for the same node. Fails with [`LockError::Config`] for a bad path or
    /// id, [`LockError::Fatal`] if the server refuses the lock's nodes for
    /// good (`NoAuth`, credentials), [`LockError::Closed`] once the session is closed.
    pub async fn acquire(&self) -> Result<LockGuard, LockError> {
        let hold = self.hold()?;
        let held = hold.wait().await?;
        Ok(LockGuard { hold, held })
    }

    /// [`acquire`](Self::acquire), giving up after `timeout`: `Ok(None)` if
    /// the lock was not acquired in time. Before it returns `None` the node
    /// it queued with is deleted (if no other acquisition on this handle
    /// waits for it; the wait for the deletion is bounded, after which it
    /// goes on in the background).
    pub async fn try_acquire(&self, timeout: Duration) -> Result<Option<LockGuard>, LockError> {
        let hold = self.hold()?;
        try_hold(hold, timeout).await
    }

    /// The hold this handle holds or waits for, or a new one.
    fn hold(&self) -> Result<Arc<Hold>, LockError> {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(hold) = current.upgrade() {
            if !hold.spent() {
                return match self.reentrancy {
                    Reentrancy::PerHandle => Ok(hold),
                    Reentrancy::Refused => Err(LockError::InUse),
                };
            }
        }
        let hold = self.spec.start()?;
        *current = Arc::downgrade(&hold);
        Ok(hold)
    }
}

async fn try_hold(hold: Arc<Hold>, timeout: Duration) -> Result<Option<LockGuard>, LockError> {
    match tokio::time::timeout(timeout, hold.wait()).await {
        Ok(Ok(held)) => Ok(Some(LockGuard { hold, held })),
        Ok(Err(e)) => Err(e),
        Err(_) => {
            Hold::let_go(hold).await;
            Ok(None)
        }
    }
}

/// A counting semaphore on a ZooKeeper path, from [`Session::semaphore`]:
/// at most `permits` permits held at once, served in the order they were
/// asked for.
///
/// Every acquisition takes permits of its own (not reentrant, as Curator's
/// `InterProcessSemaphoreV2` leases are not): one with
/// [`acquire`](Self::acquire), `n` at once with
/// [`acquire_many`](Self::acquire_many). Every participant of one path
/// must use the same number of permits. No other library's semaphore can
/// share the path (ours are named `s_`).
///
/// On the in-memory [`MemoryServer`](memory/struct.MemoryServer.html)
/// (feature `memory`), so that it runs as a test.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use zkelect::{memory::MemoryServer, Session};
///
/// let server = MemoryServer::new();
/// let session = Session::connect(server.settings(Duration::from_secs(4))).await?;
/// let slots = session.semaphore("/svc/encoders", 2);
/// let a = slots.acquire().await?;
/// let b = slots.acquire().await?;
/// // Both permits are taken: a third waits.
/// assert!(slots.try_acquire(Duration::from_millis(100)).await?.is_none());
/// drop(a);
/// let c = slots.acquire().await?;
/// # drop((b, c));
/// # session.close().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Semaphore {
    spec: Spec,
}

impl Semaphore {
    pub(crate) fn new(session: Session, path: String, permits: u32) -> Self {
        Self {
            spec: Spec::new(session, path, Rule::Semaphore { permits }),
        }
    }

    /// Data stored in this handle's nodes after the id (see [`Mutex::data`]).
    #[must_use]
    pub fn data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.spec.data = data.into();
        self
    }

    /// The ACL of this handle's nodes (see [`Mutex::acl`]).
    #[must_use]
    pub fn acl(mut self, acl: Acl) -> Self {
        self.spec.acl = acl;
        self
    }

    /// The id stored in this handle's nodes (default `pid-<process id>`).
    #[must_use]
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.spec.id = id.into();
        self
    }

    /// How the next in line takes a permit when a holder lets go (see
    /// [`Mutex::takeover`]).
    #[must_use]
    pub fn takeover(mut self, takeover: Takeover) -> Self {
        self.spec.takeover = takeover;
        self
    }

    /// Hear of cooperative revocation requests (default false; see
    /// [`Mutex::revocable`]).
    #[must_use]
    pub fn revocable(mut self, yes: bool) -> Self {
        self.spec.revocable = yes;
        self
    }

    /// The semaphore's path.
    pub fn path(&self) -> &str {
        &self.spec.path
    }

    /// Waits for a permit. Cancel-safe: dropping the future removes its node
    /// (in the background). Errors as [`Mutex::acquire`]'s; zero permits,
    /// or more than an election may have leaders, is a [`LockError::Config`].
    pub async fn acquire(&self) -> Result<LockGuard, LockError> {
        let hold = self.spec.start()?;
        let held = hold.wait().await?;
        Ok(LockGuard { hold, held })
    }

    /// [`acquire`](Self::acquire), giving up after `timeout` (`Ok(None)`),
    /// as [`Mutex::try_acquire`] does.
    pub async fn try_acquire(&self, timeout: Duration) -> Result<Option<LockGuard>, LockError> {
        try_hold(self.spec.start()?, timeout).await
    }

    /// Waits for `n` permits at once and returns one guard for all of them
    /// (Curator's `InterProcessSemaphoreV2.acquire(qty)`, as one node that
    /// weighs `n`; its drop or [`release`](LockGuard::release) gives all `n`
    /// back — stricter than Curator's `n` leases, which go back one by one:
    /// a part of a hold cannot be given back, ask for two holds instead).
    /// Fair in arrival order: a request for 3 is served before later
    /// requests for 1 even while 1 permit would be free for them, so it is
    /// never starved (Curator's leases are taken one at a time, and a
    /// request for 3 can be overtaken). The weight is written in the node's
    /// name, so every participant reads it from the listing it makes
    /// anyway: no extra reads.
    ///
    /// `n` = 0, or more than the semaphore's permits, is refused at once
    /// with [`LockError::Config`] ([`ConfigError::InvalidWeight`](zkelect_core::ConfigError::InvalidWeight)),
    /// never a wait that cannot end. Cancel-safe and otherwise as
    /// [`acquire`](Self::acquire).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use zkelect::{memory::MemoryServer, ConfigError, LockError, Session};
    ///
    /// let server = MemoryServer::new();
    /// let session = Session::connect(server.settings(Duration::from_secs(4))).await?;
    /// let slots = session.semaphore("/svc/encoders", 4);
    /// let three = slots.acquire_many(3).await?; // one guard, three permits
    /// let one = slots.acquire().await?; // the fourth
    /// // Nothing is left: a request for 2 waits until the three come back.
    /// assert!(slots.try_acquire_many(2, Duration::from_millis(100)).await?.is_none());
    /// three.release().await;
    /// let two = slots.acquire_many(2).await?;
    /// // Asking for more than there are is an error, not a wait.
    /// assert!(matches!(
    ///     slots.acquire_many(5).await,
    ///     Err(LockError::Config(ConfigError::InvalidWeight { weight: 5, .. }))
    /// ));
    /// # drop((one, two));
    /// # session.close().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn acquire_many(&self, n: u32) -> Result<LockGuard, LockError> {
        let hold = self.spec.start_weighted(n)?;
        let held = hold.wait().await?;
        Ok(LockGuard { hold, held })
    }

    /// [`acquire_many`](Self::acquire_many), giving up after `timeout`
    /// (`Ok(None)`, its node deleted), as [`Mutex::try_acquire`] does.
    pub async fn try_acquire_many(
        &self,
        n: u32,
        timeout: Duration,
    ) -> Result<Option<LockGuard>, LockError> {
        try_hold(self.spec.start_weighted(n)?, timeout).await
    }
}

/// A fair read-write lock on a ZooKeeper path, from [`Session::rw_lock`]:
/// readers share it, a writer holds it alone, and everyone is served in
/// the order they queued (a reader that queued behind a writer waits for
/// that writer).
///
/// [`read`](Self::read) and [`write`](Self::write) are [`Mutex`] handles,
/// each reentrant on its own, as Curator's `InterProcessReadWriteLock` hands
/// out two `InterProcessMutex`es. Unlike Curator's, a writer cannot take the
/// read side while it holds (its reader would queue behind its own writer).
///
/// On the in-memory [`MemoryServer`](memory/struct.MemoryServer.html)
/// (feature `memory`), so that it runs as a test.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use zkelect::{memory::MemoryServer, Session};
///
/// let server = MemoryServer::new();
/// let session = Session::connect(server.settings(Duration::from_secs(4))).await?;
/// let (one, two) = (session.rw_lock("/svc/catalog"), session.rw_lock("/svc/catalog"));
/// let r1 = one.read().acquire().await?;
/// let r2 = two.read().acquire().await?; // readers share
/// // A writer waits for both.
/// let writer = session.rw_lock("/svc/catalog");
/// assert!(writer.write().try_acquire(Duration::from_millis(100)).await?.is_none());
/// drop((r1, r2));
/// let w = writer.write().acquire().await?;
/// # drop(w);
/// # session.close().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct RwLock {
    read: Mutex,
    write: Mutex,
}

impl RwLock {
    pub(crate) fn new(session: &Session, path: String) -> Self {
        Self {
            read: Mutex::new(session.clone(), path.clone(), Rule::Read),
            write: Mutex::new(session.clone(), path, Rule::Write),
        }
    }

    /// The id stored in both sides' nodes (default `pid-<process id>`).
    #[must_use]
    pub fn id(self, id: impl Into<String>) -> Self {
        let id = id.into();
        Self {
            read: self.read.id(id.clone()),
            write: self.write.id(id),
        }
    }

    /// Data stored in both sides' nodes after the id (see [`Mutex::data`]).
    #[must_use]
    pub fn data(self, data: impl Into<Vec<u8>>) -> Self {
        let data = data.into();
        Self {
            read: self.read.data(data.clone()),
            write: self.write.data(data),
        }
    }

    /// The ACL of both sides' nodes (see [`Mutex::acl`]).
    #[must_use]
    pub fn acl(self, acl: Acl) -> Self {
        Self {
            read: self.read.acl(acl.clone()),
            write: self.write.acl(acl),
        }
    }

    /// Share the lock with Curator's `InterProcessReadWriteLock` or kazoo's
    /// `ReadLock`/`WriteLock` (default [`Interop::None`]).
    #[must_use]
    pub fn interop(self, scheme: Interop) -> Self {
        Self {
            read: self.read.interop(scheme),
            write: self.write.interop(scheme),
        }
    }

    /// How both sides take the lock when what they wait for lets go (see
    /// [`Mutex::takeover`]).
    #[must_use]
    pub fn takeover(self, takeover: Takeover) -> Self {
        Self {
            read: self.read.takeover(takeover),
            write: self.write.takeover(takeover),
        }
    }

    /// Hear of cooperative revocation requests on both sides (default
    /// false; see [`Mutex::revocable`]).
    #[must_use]
    pub fn revocable(self, yes: bool) -> Self {
        Self {
            read: self.read.revocable(yes),
            write: self.write.revocable(yes),
        }
    }

    /// The read side: shared with other readers, excluded by writers.
    pub fn read(&self) -> &Mutex {
        &self.read
    }

    /// The write side: excludes everyone.
    pub fn write(&self) -> &Mutex {
        &self.write
    }
}

/// A held lock (or permit). Dropping the last guard of a hold releases it:
/// the node is deleted in the background, retried until it succeeds or the
/// session ends. [`release`](Self::release) does the same and waits for the
/// deletion.
///
/// Holding can end without a release — the session expired, an operator
/// deleted the node, the server went quiet for longer than the lease allows
/// — and [`lost`](Self::lost) resolves when it does. While the connection
/// is in doubt the lock may still be held but must not be acted on: the
/// [`lease`](Self::lease) is `None` then, and work done under the lock
/// should stop by the lease's instant. Pass [`token`](Self::token) to every
/// write to a resource the lock guards, so a holder that learned too late
/// is still refused there, or write through [`guarded`](Self::guarded).
#[must_use = "dropping the guard releases the lock"]
pub struct LockGuard {
    hold: Arc<Hold>,
    held: Held,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("path", &self.hold.path)
            .field("node", &self.held.node)
            .field("token", &self.held.token)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl LockGuard {
    /// The fencing token of this hold: the czxid of its node, higher for
    /// every later holder.
    pub fn token(&self) -> FencingToken {
        self.held.token
    }

    /// The node's name (not the full path).
    pub fn node(&self) -> &str {
        &self.held.node
    }

    /// Whether the lock is held now: false while the connection is in doubt,
    /// for good once it is lost, and from the instant the lease has run out
    /// by the clock — even before the pump has said so, as after a freeze
    /// (GC pause, SIGSTOP) past the lease, when the pump has not run yet.
    pub fn is_held(&self) -> bool {
        self.hold.outputs.read(role_now) == Role::Leader(self.held.token)
    }

    /// While held: when holding lapses unless the server answers again
    /// (`None` while the connection is in doubt and once the hold is lost),
    /// as [`Election::lease`](crate::Election::lease). A lease in the past
    /// has run out even while it is still the value here (until the pump
    /// runs again after a freeze); [`is_held`](Self::is_held) compares it
    /// with the clock.
    pub fn lease(&self) -> watch::Receiver<Option<Instant>> {
        self.hold.outputs.lease()
    }

    /// The status of this hold's machine (role, node, lease, counters).
    pub fn status(&self) -> watch::Receiver<Status> {
        self.hold.outputs.status()
    }

    /// Resolves when the hold is lost for good, with why: the session
    /// expired, the node was deleted by someone else, contact was lost for
    /// longer than the lease, the session was closed. A suspension that
    /// heals (the connection back on the same session) is not a loss; watch
    /// the [`lease`](Self::lease) for it. Independent of the guard's
    /// lifetime, so it can be spawned or selected on.
    ///
    /// ```no_run
    /// # async fn example(guard: zkelect::LockGuard) {
    /// tokio::select! {
    ///     reason = guard.lost() => eprintln!("lock lost: {reason}; stopping"),
    ///     () = async { /* the work under the lock */ } => {}
    /// }
    /// # }
    /// ```
    pub fn lost(&self) -> impl Future<Output = DemotionReason> + Send + 'static {
        let mut status = self.hold.outputs.status();
        let token = self.held.token;
        async move {
            loop {
                {
                    let s = status.borrow_and_update();
                    let holds =
                        matches!(s.role, Role::Leader(t) | Role::Suspended(t) if t == token);
                    // A lock machine holds once: any demotion ended it,
                    // even one the role's watch coalesced away.
                    if !holds || s.stats.demotions > 0 {
                        return s.last_demotion.unwrap_or(match s.role {
                            Role::Failed => DemotionReason::Failed,
                            _ => DemotionReason::Closed,
                        });
                    }
                }
                if status.changed().await.is_err() {
                    return DemotionReason::Closed;
                }
            }
        }
    }

    /// Resolves once someone has asked this hold to let go: a cooperative
    /// revocation request ([`Session::request_revocation`], `zkelect revoke
    /// --ask`, Curator's `Revoker.attemptRevoke`) heard by a handle made
    /// [`revocable`](Mutex::revocable) — at once if one was heard already,
    /// while the hold still waited or since it holds. The holder decides:
    /// release the guard to honour it, or go on holding (nothing is
    /// released by the request). Never resolves on a handle that is not
    /// revocable, nor for a hold that ends without a request: select it
    /// with [`lost`](Self::lost) and the work. Each request is counted in
    /// the [`status`](Self::status)'s `stats.revocations_requested`, for
    /// a holder that ignored one and waits for the next.
    /// Independent of the guard's lifetime, as [`lost`](Self::lost) is.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use zkelect::{memory::MemoryServer, Session};
    ///
    /// let server = MemoryServer::new();
    /// let session = Session::connect(server.settings(Duration::from_secs(4))).await?;
    /// let lock = session.mutex("/svc/locks/report").revocable(true);
    /// let guard = lock.acquire().await?;
    ///
    /// // Anyone else (here, another session) asks the holder to let go.
    /// let other = Session::connect(server.settings(Duration::from_secs(4))).await?;
    /// other.request_revocation("/svc/locks/report", guard.node()).await?;
    ///
    /// // The holder hears of it and decides to honour it.
    /// tokio::select! {
    ///     () = guard.revocation_requested() => guard.release().await,
    ///     reason = guard.lost() => panic!("lost first: {reason}"),
    /// }
    /// # other.close().await;
    /// # session.close().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn revocation_requested(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut status = self.hold.outputs.status();
        async move {
            loop {
                if status.borrow_and_update().stats.revocations_requested > 0 {
                    return;
                }
                if status.changed().await.is_err() {
                    // The hold is gone without a request: none will come.
                    return std::future::pending().await;
                }
            }
        }
    }

    /// Turns this write hold into a read hold, in place: Curator's
    /// downgrade (the write holder takes the read lock, then releases the
    /// write lock), in one step that leaves no moment without a hold and
    /// lets no waiting writer in between. Returns once the node says it
    /// reads: from then on readers queued behind it may hold beside it,
    /// and writers behind it still wait for it. Every guard of this hold
    /// reads from now on (the hold is one node); the guard's token and node
    /// stay the same, and its release releases the read hold. Another
    /// write acquisition on the same handle queues anew (behind this hold,
    /// as an upgrade would).
    ///
    /// Only a [`RwLock::write`] guard that holds can downgrade; a second
    /// call once it is done returns at once. Waits while the connection is
    /// in doubt; cancel-safe (the downgrade goes on and a later call waits
    /// for it).
    ///
    /// Stricter than Curator in one way: Curator's and kazoo's readers do
    /// not read our nodes' data, so in a queue shared with them
    /// ([`RwLock::interop`]) their readers behind a downgraded zkelect
    /// writer still wait until it releases.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use zkelect::{memory::MemoryServer, Session};
    ///
    /// let server = MemoryServer::new();
    /// let session = Session::connect(server.settings(Duration::from_secs(4))).await?;
    /// let (mine, reader) = (session.rw_lock("/svc/catalog"), session.rw_lock("/svc/catalog"));
    /// let held = mine.write().acquire().await?;
    /// // ... write the catalog, then keep reading it while others read too:
    /// held.downgrade().await?;
    /// let shared = reader.read().acquire().await?;
    /// assert!(held.is_held() && shared.is_held());
    /// # drop((held, shared));
    /// # session.close().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn downgrade(&self) -> Result<(), DowngradeError> {
        let hold = &self.hold;
        // Subscribed before the intent, so its notice cannot be missed.
        let mut notices = hold.outputs.notices();
        let mut status = hold.outputs.status();
        let started = hold
            .link
            .intent(|session, now, id| session.downgrade(now, id).map(|_| ()));
        let writer = hold
            .link
            .read(|m| m.as_candidate().map(|c| c.config().rule()))
            .flatten();
        if started.is_err() {
            return Err(DowngradeError::NotHolding);
        }
        if writer != Some(Rule::Write) {
            return Err(DowngradeError::NotWriter);
        }
        let token = self.held.token;
        loop {
            // What the machine says now: done, or no downgrade under way.
            let now = hold.link.read(|m| {
                m.as_candidate().map(|c| {
                    (
                        c.is_downgraded(),
                        c.is_downgrade_refused(),
                        c.access() == Access::Shared,
                    )
                })
            });
            match now.flatten() {
                Some((true, _, _)) => return Ok(()),
                Some((_, true, _)) => {
                    return Err(DowngradeError::Refused(hold.refused.get().copied()))
                }
                Some((false, false, true)) => {}
                Some((false, false, false)) | None => {
                    let s = status.borrow_and_update();
                    let holds =
                        matches!(s.role, Role::Leader(t) | Role::Suspended(t) if t == token);
                    return Err(match (holds, s.last_demotion) {
                        (false, Some(reason)) => DowngradeError::Lost(reason),
                        _ => DowngradeError::NotHolding,
                    });
                }
            }
            {
                let s = status.borrow_and_update();
                let holds = matches!(s.role, Role::Leader(t) | Role::Suspended(t) if t == token);
                if !holds || s.stats.demotions > 0 {
                    return Err(DowngradeError::Lost(
                        s.last_demotion.unwrap_or(DemotionReason::Closed),
                    ));
                }
            }
            tokio::select! {
                notice = notices.recv() => match notice {
                    Ok(Notice::Downgraded) => return Ok(()),
                    Ok(Notice::DowngradeRefused { code }) => {
                        let _ = hold.refused.set(code);
                        return Err(DowngradeError::Refused(Some(code)));
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => {
                        return Err(DowngradeError::Lost(DemotionReason::Closed))
                    }
                },
                changed = status.changed() => {
                    if changed.is_err() {
                        return Err(DowngradeError::Lost(DemotionReason::Closed));
                    }
                }
            }
        }
    }

    /// Releases this guard; if it is the hold's last, deletes the node and
    /// waits for the deletion (at most 5 s; it goes on in the background).
    pub async fn release(self) {
        Hold::let_go(self.hold).await;
    }

    /// Applies `ops` only if this hold's node still exists — it still holds
    /// — in one atomic `multi`, as [`Election::guarded`](crate::Election::guarded)
    /// does for a leader. Nothing is sent while the lock is not held.
    pub async fn guarded(
        &self,
        ops: Vec<MultiOp>,
    ) -> Result<Vec<MultiOpResult>, GuardedWriteError> {
        let token = self.held.token;
        // Past the lease by the clock, nothing is sent, even before the
        // pump has demoted (a process resumed after a freeze).
        if let Role::Suspended(_) = self.hold.outputs.read(role_now) {
            return Err(GuardedWriteError::NotHolding);
        }
        let own = self.hold.link.read(|m| match (m.role(), m.own_path()) {
            (Role::Leader(t), Some(own)) if t == token => Ok(own),
            (Role::Closed | Role::Failed, _) => Err(GuardedWriteError::Closed),
            _ => Err(GuardedWriteError::NotHolding),
        });
        let own = own.unwrap_or(Err(GuardedWriteError::Closed))?;
        self.hold.writer.guarded(token, own, ops).await
    }

    /// Sets the data of `path` only if the lock is still held (see
    /// [`guarded`](Self::guarded)), and returns the node's new stat.
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
}

#[cfg(test)]
#[path = "lock_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "lock_family_tests.rs"]
mod family_tests;
