//! Multi-locks: several mutexes taken all or none, as one (Curator's
//! `InterProcessMultiLock`), from [`Session::multi_lock`]. The decisions are
//! the core's ([`zkelect_core::multilock`]): the parts are taken one at a
//! time in one global order (their paths sorted), so two multi-locks over
//! the same paths never deadlock, whatever order each was given them in.
//! Curator takes them in the order given, and two given in opposite orders
//! can deadlock: zkelect is stricter on purpose. Each part is a fair
//! mutex on its path, so a part may share its path with a Curator
//! `InterProcessMutex` (see [`MultiLock::interop`]).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use zkelect_core::{
    Acl, Config, DemotionReason, FencingToken, GroupId, GroupNotice, Interop, Rule,
};

use crate::error::LockError;
use crate::hub::GroupWatches;
use crate::session::{random_seed, Session};

impl Session {
    /// A multi-lock over the mutexes on `paths`, taken all or none (see
    /// [`MultiLock`]).
    pub fn multi_lock<I, P>(&self, paths: I) -> MultiLock
    where
        I: IntoIterator<Item = P>,
        P: Into<String>,
    {
        MultiLock {
            inner: Arc::new(Inner {
                session: self.clone(),
                paths: paths.into_iter().map(Into::into).collect(),
                id: format!("pid-{}", std::process::id()),
                interop: Interop::None,
                acl: Acl::default(),
                group: StdMutex::new(None),
                epoch: AtomicU64::new(0),
            }),
        }
    }
}

/// Several mutexes taken all or none, as one, from [`Session::multi_lock`].
///
/// [`acquire`](Self::acquire) takes the parts in sorted path order, each
/// once the one before it holds; the guard it returns carries one fencing
/// token per path. A part lost while the whole is held loses the whole
/// ([`MultiLockGuard::lost`] says which path and why) and every other part
/// is released at once. [`try_acquire`](Self::try_acquire) gives up after
/// its timeout and releases what it took. One acquisition at a time per
/// handle: an `acquire` while the handle acquires or holds is refused
/// ([`LockError::InUse`]); unlike Curator's, a multi-lock is not reentrant.
/// A guard whose hold was lost no longer counts: the handle may be
/// acquired again, and dropping the old guard leaves the new hold be.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use zkelect::{memory::MemoryServer, Session};
///
/// let server = MemoryServer::new();
/// let session = Session::connect(server.settings(Duration::from_secs(4))).await?;
/// // Given in any order, taken in sorted order: two such locks never deadlock.
/// let both = session.multi_lock(["/svc/locks/b", "/svc/locks/a"]);
/// let guard = both.acquire().await?;
/// let paths: Vec<&str> = guard.tokens().iter().map(|(p, _)| p.as_str()).collect();
/// assert_eq!(paths, ["/svc/locks/a", "/svc/locks/b"]);
///
/// // Another handle cannot have them while the first holds.
/// let other = session.multi_lock(["/svc/locks/a", "/svc/locks/b"]);
/// assert!(other.try_acquire(Duration::from_millis(200)).await?.is_none());
/// guard.release().await;
/// assert!(other.try_acquire(Duration::from_secs(2)).await?.is_some());
/// # session.close().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct MultiLock {
    inner: Arc<Inner>,
}

struct Inner {
    session: Session,
    paths: Vec<String>,
    id: String,
    interop: Interop,
    acl: Acl,
    /// The session's multi-lock, once first acquired, and its notices.
    group: StdMutex<Option<(GroupId, GroupWatches)>>,
    /// Acquisitions started: a guard releases only its own.
    epoch: AtomicU64,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLock")
            .field("paths", &self.paths)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let group = self.group.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some((gid, _)) = group.take() {
            self.session.hub().release_group(gid, true);
        }
    }
}

impl MultiLock {
    /// Names this contender in its nodes (default: `pid-<process id>`).
    /// Takes effect before the first acquisition.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.id = id.into();
        }
        self
    }

    /// Names every part's nodes as another library's mutex does, so each
    /// part shares its path with that library's mutexes (Curator's
    /// `InterProcessMutex`, which its `InterProcessMultiLock` is made of).
    /// Takes effect before the first acquisition.
    pub fn interop(mut self, scheme: Interop) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.interop = scheme;
        }
        self
    }

    /// The ACL of every part's nodes (default: [`Acl::Open`], as every
    /// lock's). Takes effect before the first acquisition.
    pub fn acl(mut self, acl: Acl) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.acl = acl;
        }
        self
    }

    /// The paths, as given.
    pub fn paths(&self) -> &[String] {
        &self.inner.paths
    }

    /// Waits until every part holds.
    pub async fn acquire(&self) -> Result<MultiLockGuard, LockError> {
        match self.take(None).await? {
            Some(guard) => Ok(guard),
            // Without a deadline it never gives up: only a failed part ends
            // an acquisition, and that is an error.
            None => Err(LockError::Closed),
        }
    }

    /// Waits at most `timeout` for every part; `Ok(None)` if the whole was
    /// not held by then (what was taken is released).
    pub async fn try_acquire(
        &self,
        timeout: Duration,
    ) -> Result<Option<MultiLockGuard>, LockError> {
        self.take(Some(timeout)).await
    }

    async fn take(&self, give_up: Option<Duration>) -> Result<Option<MultiLockGuard>, LockError> {
        let (gid, watches) = self.group()?;
        let mut notices = watches.notices.clone();
        match self.inner.session.hub().acquire_group(gid, give_up) {
            Ok(true) => {
                self.inner.epoch.fetch_add(1, Ordering::SeqCst);
            }
            Ok(false) => return Err(LockError::InUse),
            Err(_) => return Err(LockError::Closed),
        }
        loop {
            let outcome = notices.borrow_and_update().iter().find_map(|n| match n {
                GroupNotice::Held { tokens } => Some(Ok(Some(tokens.clone()))),
                GroupNotice::GaveUp => Some(Ok(None)),
                GroupNotice::Failed { .. } => Some(Err(LockError::Closed)),
                GroupNotice::Lost { .. } | GroupNotice::Released => None,
            });
            match outcome {
                Some(Ok(Some(tokens))) => {
                    return Ok(Some(MultiLockGuard {
                        inner: Arc::clone(&self.inner),
                        epoch: self.inner.epoch.load(Ordering::SeqCst),
                        gid,
                        tokens,
                        notices,
                        lease: watches.lease,
                        held: watches.held,
                    }))
                }
                Some(Ok(None)) => return Ok(None),
                Some(Err(e)) => return Err(e),
                None => {}
            }
            if notices.changed().await.is_err() {
                return Err(LockError::Closed);
            }
        }
    }

    /// The session's multi-lock of this handle, made at the first call.
    fn group(&self) -> Result<(GroupId, GroupWatches), LockError> {
        let mut group = self
            .inner
            .group
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((gid, watches)) = group.as_ref() {
            return Ok((*gid, watches.clone()));
        }
        let configs = self
            .inner
            .paths
            .iter()
            .map(|path| {
                Config::builder(path.clone(), self.inner.id.clone())
                    .rule(Rule::Mutex)
                    .interop(self.inner.interop)
                    .acl(self.inner.acl.clone())
                    .nonce_seed(random_seed())
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (gid, watches) = self.inner.session.hub().add_group(configs)?;
        *group = Some((gid, watches.clone()));
        Ok((gid, watches))
    }
}

/// Every part of a [`MultiLock`] held; dropping it releases them all.
#[derive(Debug)]
pub struct MultiLockGuard {
    inner: Arc<Inner>,
    epoch: u64,
    gid: GroupId,
    tokens: Vec<(String, FencingToken)>,
    notices: watch::Receiver<Vec<GroupNotice>>,
    lease: watch::Receiver<Option<Instant>>,
    held: watch::Receiver<bool>,
}

impl MultiLockGuard {
    /// The earliest lease expiry among the parts, and every change: the
    /// whole is held only while every part is, so it is safe to act on
    /// until then. `None` when any part has no lease (lost, released, or
    /// contact with the server in doubt). The counterpart of
    /// [`Election::lease`](crate::Election::lease), for a supervisor that
    /// must stop its work before the next holder may start.
    pub fn lease(&self) -> watch::Receiver<Option<Instant>> {
        self.lease.clone()
    }

    /// Whether every part holds, and every change: it turns `false` when
    /// any part is lost (and stays so for this hold).
    pub fn held(&self) -> watch::Receiver<bool> {
        self.held.clone()
    }

    /// One fencing token per path, in the order the parts were taken
    /// (sorted by path).
    pub fn tokens(&self) -> &[(String, FencingToken)] {
        &self.tokens
    }

    /// The fencing token of the part on `path`.
    pub fn token(&self, path: &str) -> Option<FencingToken> {
        self.tokens.iter().find(|(p, _)| p == path).map(|(_, t)| *t)
    }

    /// Whether every part still holds (false once any part was lost).
    pub fn is_held(&self) -> bool {
        !self
            .notices
            .borrow()
            .iter()
            .any(|n| matches!(n, GroupNotice::Lost { .. } | GroupNotice::Failed { .. }))
    }

    /// Resolves when a part is lost (every other part is then released):
    /// the part's path and why.
    pub fn lost(&self) -> impl Future<Output = (String, DemotionReason)> + Send + 'static {
        let mut notices = self.notices.clone();
        async move {
            loop {
                let lost = notices.borrow_and_update().iter().find_map(|n| match n {
                    GroupNotice::Lost { path, reason } => Some((path.clone(), *reason)),
                    GroupNotice::Failed { path } => Some((path.clone(), DemotionReason::Closed)),
                    _ => None,
                });
                if let Some(lost) = lost {
                    return lost;
                }
                if notices.changed().await.is_err() {
                    return (String::new(), DemotionReason::Closed);
                }
            }
        }
    }

    /// Releases every part and waits (a short while at most) until none is
    /// left in a queue.
    pub async fn release(self) {
        let mut notices = self.notices.clone();
        drop(self);
        let released = async {
            while !notices.borrow_and_update().contains(&GroupNotice::Released) {
                if notices.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(crate::lock::RELEASE_WAIT, released).await;
    }
}

impl Drop for MultiLockGuard {
    fn drop(&mut self) {
        // Not a later acquisition's hold (this one's was lost, and the
        // handle acquired again).
        if self.inner.epoch.load(Ordering::SeqCst) == self.epoch {
            self.inner.session.hub().release_group(self.gid, false);
        }
    }
}

#[cfg(test)]
#[path = "multi_lock_tests.rs"]
mod tests;
