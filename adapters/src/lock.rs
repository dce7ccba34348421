//! Locks on a session: [`Mutex`], [`Semaphore`], [`RwLock`], and the
//! [`LockGuard`] each of them hands out.
//!
//! Each acquisition that needs a node runs a machine on the session: the
//! core's `Candidate` under a lock's [`Rule`], wrapped so that once it has
//! held and lost the hold it leaves the queue instead of queueing again (a
//! lock is acquired by the application, never behind its back). A hold —
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
//! at the same time wait for one node together. A [`Semaphore`] is not
//! reentrant: every acquisition takes a permit of its own.

use std::future::Future;
use std::sync::{Arc, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use zkelect_core::{
    Candidate, Command, Config, DemotionReason, FencingToken, Input, Interop, Notice, Request,
    Role, Rule, Stat, Stats, Timestamp,
};

use crate::driver::{answered, Deleting, Intent, Machine, Outputs, Status};
use crate::election::{random_seed, set_data_result, Writer};
use crate::error::{GuardedWriteError, LockError};
use crate::session::{Link, Session};
use crate::transport::{MultiOp, MultiOpResult};

/// A lock machine's close waits for its node's deletion until the session
/// ends (the driver maps this to "never" on its clock).
const UNTIL_SESSION_ENDS: Duration = Duration::MAX;

/// How long [`LockGuard::release`] and a timed-out
/// [`Mutex::try_acquire`] wait for the node's deletion before returning
/// (it goes on in the background).
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// What a lock handle needs to start a hold: where, under which rule, as whom.
#[derive(Debug, Clone)]
struct Spec {
    session: Session,
    /// Shared with every hold's writer.
    path: Arc<str>,
    id: String,
    rule: Rule,
    interop: Interop,
}

impl Spec {
    fn new(session: Session, path: String, rule: Rule) -> Self {
        Self {
            session,
            path: path.into(),
            id: format!("pid-{}", std::process::id()),
            rule,
            interop: Interop::None,
        }
    }

    /// Starts a machine that queues for one hold.
    fn start(&self) -> Result<Arc<Hold>, LockError> {
        let config = Config::builder(self.path.to_string(), self.id.clone())
            .rule(self.rule)
            .interop(self.interop)
            .nonce_seed(random_seed())
            .build()?;
        let outputs = Outputs::new();
        let link = self.session.add(
            Box::new(LockMachine::new(Candidate::new(config))),
            Arc::clone(&outputs),
            UNTIL_SESSION_ENDS,
            false,
        );
        if !link.send(Intent::Join { done: None }) {
            return Err(LockError::Closed);
        }
        Ok(Arc::new(Hold {
            link,
            outputs,
            writer: Writer {
                transport: self.session.transport(),
                path: Arc::clone(&self.path),
            },
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
}

/// What a hold was granted with.
#[derive(Debug, Clone)]
struct Held {
    token: FencingToken,
    node: Box<str>,
}

impl Hold {
    /// Held once and no longer, or stopped: no acquisition can use it.
    fn spent(&self) -> bool {
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
    /// A holder sends that delete itself, before its close reaches the
    /// driver (see [`Deleting`]): the delete is what lets the next holder
    /// in, and nothing of this hold's acts on it any more.
    async fn let_go(hold: Arc<Hold>) {
        let Some(hold) = Arc::into_inner(hold) else {
            return;
        };
        let (done, wait) = oneshot::channel();
        let Some((deleting, delete)) = hold.delete_ahead() else {
            if !hold.link.send(Intent::Close { done }) {
                return;
            }
            // The send woke the driver: one yield lets it run (and send the
            // delete) before this task arms its deadline, not after, so the
            // next holder is told a turn sooner.
            tokio::task::yield_now().await;
            Self::wait_deleted(&hold, wait).await;
            return;
        };
        if !hold.link.send(Intent::Release { done, deleting }) {
            return;
        }
        // The delete is polled after the driver was woken, so the client's
        // writer, woken last, runs first (tokio runs the task woken last
        // next on this thread). Dropped unanswered (this release
        // cancelled, or out of time), the driver hears of a broken
        // connection and the core deletes again: `NoNode` if this one landed.
        Self::wait_deleted(&hold, async {
            delete.await;
            let _ = wait.await;
        })
        .await;
    }

    async fn wait_deleted(hold: &Hold, deleted: impl Future) {
        if tokio::time::timeout(RELEASE_WAIT, deleted).await.is_err() {
            tracing::debug!(
                path = &*hold.writer.path,
                "release: the node's deletion goes on in the background"
            );
        }
    }

    /// While this hold holds (as its status says): its node's delete, ready
    /// to send, and what the driver is to adopt of it.
    fn delete_ahead(&self) -> Option<(Deleting, impl Future<Output = ()>)> {
        let transport = self.writer.transport.upgrade()?;
        let path = self.outputs.read(|s| match (&s.role, &s.node) {
            (Role::Leader(_), Some(node)) => Some(format!("{}/{node}", self.writer.path)),
            _ => None,
        })?;
        let (answer, reply) = oneshot::channel();
        let request = Request::Delete {
            path: path.clone(),
            version: None,
        };
        let delete = async move {
            let _ = answer.send(answered(&*transport, request).await);
        };
        Some((Deleting { path, reply }, delete))
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
    /// The hold this handle holds or waits for, while anything points at it.
    current: std::sync::Mutex<Weak<Hold>>,
}

impl Mutex {
    pub(crate) fn new(session: Session, path: String, rule: Rule) -> Self {
        Self {
            spec: Spec::new(session, path, rule),
            current: std::sync::Mutex::new(Weak::new()),
        }
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
                return Ok(hold);
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
/// at most `permits` holders at once, served in the order they queued.
///
/// Every acquisition takes a permit of its own (not reentrant, as Curator's
/// `InterProcessSemaphoreV2` leases are not); every participant of one path
/// must use the same number of permits. No other library's semaphore can
/// share the path (ours are named `s_`).
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

    /// The id stored in this handle's nodes (default `pid-<process id>`).
    #[must_use]
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.spec.id = id.into();
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

    /// Share the lock with Curator's `InterProcessReadWriteLock` or kazoo's
    /// `ReadLock`/`WriteLock` (default [`Interop::None`]).
    #[must_use]
    pub fn interop(self, scheme: Interop) -> Self {
        Self {
            read: self.read.interop(scheme),
            write: self.write.interop(scheme),
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
            .field("path", &self.hold.writer.path)
            .field("node", &self.held.node)
            .field("token", &self.held.token)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold")
            .field("path", &self.writer.path)
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
    /// and for good once it is lost.
    pub fn is_held(&self) -> bool {
        self.hold.outputs.read(|s| s.role) == Role::Leader(self.held.token)
    }

    /// While held: when holding lapses unless the server answers again
    /// (`None` while the connection is in doubt and once the hold is lost),
    /// as [`Election::lease`](crate::Election::lease).
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
        match self.hold.outputs.read(|s| s.role) {
            Role::Leader(t) if t == self.held.token => {}
            Role::Closed | Role::Failed => return Err(GuardedWriteError::Closed),
            _ => return Err(GuardedWriteError::NotHolding),
        }
        self.hold
            .writer
            .guarded(self.held.token, &self.held.node, ops)
            .await
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

/// A lock's machine: the core's candidate under a lock rule, which leaves
/// the queue once it has held and lost the hold, instead of queueing again
/// as an election's candidate does.
struct LockMachine {
    candidate: Candidate,
    /// The latest time it was given, for the close it decides on itself.
    now: Timestamp,
    holds: bool,
}

impl LockMachine {
    fn new(candidate: Candidate) -> Self {
        Self {
            candidate,
            now: Timestamp::from_millis(0),
            holds: false,
        }
    }

    fn at(&mut self, now: Timestamp) {
        self.now = self.now.max(now);
    }
}

impl Machine for LockMachine {
    fn path(&self) -> &str {
        Machine::path(&self.candidate)
    }
    fn handle(&mut self, now: Timestamp, input: Input) {
        self.at(now);
        Machine::handle(&mut self.candidate, now, input);
    }
    fn handle_timeout(&mut self, now: Timestamp) {
        self.at(now);
        Machine::handle_timeout(&mut self.candidate, now);
    }
    fn poll_command(&mut self) -> Option<Command> {
        Machine::poll_command(&mut self.candidate)
    }
    fn poll_notice(&mut self) -> Option<Notice> {
        let notice = Machine::poll_notice(&mut self.candidate)?;
        match notice {
            Notice::Elected { .. } => self.holds = true,
            Notice::Demoted { .. } if self.holds => {
                self.holds = false;
                // The driver drains notices before commands, so the close's
                // delete goes out in this same step.
                Machine::close(&mut self.candidate, self.now);
            }
            _ => {}
        }
        Some(notice)
    }
    fn poll_timeout(&self) -> Option<Timestamp> {
        Machine::poll_timeout(&self.candidate)
    }
    fn join(&mut self, now: Timestamp) {
        self.at(now);
        Machine::join(&mut self.candidate, now);
    }
    fn resign(&mut self, now: Timestamp, rejoin: bool) {
        self.at(now);
        Machine::resign(&mut self.candidate, now, rejoin);
    }
    fn close(&mut self, now: Timestamp) {
        self.at(now);
        Machine::close(&mut self.candidate, now);
    }
    fn is_done(&self) -> bool {
        Machine::is_done(&self.candidate)
    }
    fn is_failed(&self) -> bool {
        Machine::is_failed(&self.candidate)
    }
    fn role(&self) -> Role {
        Machine::role(&self.candidate)
    }
    fn node(&self) -> Option<&str> {
        Machine::node(&self.candidate)
    }
    fn lease_expiry(&self) -> Option<Timestamp> {
        Machine::lease_expiry(&self.candidate)
    }
    fn stats(&self) -> Stats {
        Machine::stats(&self.candidate)
    }
}

#[cfg(test)]
#[path = "lock_tests.rs"]
mod tests;
