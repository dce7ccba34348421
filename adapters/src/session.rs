//! One ZooKeeper session, many recipes: a [`Session`] owns one transport and
//! one driver task (see the driver's module notes for how replies, watch
//! events and session events are routed), and every election made with
//! [`Session::election`] runs on it, as Curator and kazoo fleets run every
//! recipe of a process on one session.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use zkelect_core::Rule;

use crate::driver::{Clock, Control, Intent, Key, Machine, Outputs, SessionDriver};
use crate::election::{Connect, ElectionBuilder};
use crate::error::SessionError;
use crate::lock::{self, RwLock, Semaphore};
use crate::transport::{EventStream, Transport};

/// How long [`Session::close`] waits for the machines, and again for the
/// transport, unless a builder says otherwise.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// One ZooKeeper session that runs many recipes: one transport, one driver
/// task, any number of elections (and, as they come, locks and observers).
///
/// Cheap to clone: clones share the session. It ends when
/// [`close`](Self::close) is called, or — in the background — when every
/// handle to it and to its recipes is dropped.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use zkelect::memory::MemoryServer;
/// use zkelect::Session;
///
/// let server = MemoryServer::new();
/// let session = Session::connect(server.settings(Duration::from_secs(4))).await?;
/// // One election per partition, all on one session.
/// let mut partitions = Vec::new();
/// for p in 0..8 {
///     partitions.push(session.election(format!("/svc/partition-{p}")).id("node-a").join().await?);
/// }
/// for election in &partitions {
///     election.wait_leader().await?;
/// }
/// session.close().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

struct Inner {
    control: mpsc::UnboundedSender<Control>,
    task: Mutex<Option<JoinHandle<()>>>,
    transport: Weak<dyn Transport>,
    next_key: AtomicU64,
    close_timeout: Duration,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("close_timeout", &self.inner.close_timeout)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Opens a session with `settings`: [`ZkAsyncOptions`](crate::ZkAsyncOptions),
    /// [`ZkClientOptions`](zk_client/type.ZkClientOptions.html), or the memory
    /// transport's [`MemorySettings`](memory/struct.MemorySettings.html).
    pub async fn connect(settings: impl Connect) -> Result<Session, SessionError> {
        let (transport, events) = Box::new(settings).connect().await?;
        Ok(Self::start(transport, events, CLOSE_TIMEOUT))
    }

    /// A session over an open transport and its event stream.
    pub fn from_transport(transport: impl Transport, events: EventStream) -> Session {
        Self::start(Arc::new(transport), events, CLOSE_TIMEOUT)
    }

    pub(crate) fn start(
        transport: Arc<dyn Transport>,
        events: EventStream,
        close_timeout: Duration,
    ) -> Session {
        let (control, control_rx) = mpsc::unbounded_channel();
        let driver = SessionDriver {
            transport: Arc::clone(&transport),
            events,
            control: control_rx,
            clock: Clock::new(),
            close_timeout,
        };
        let task = tokio::spawn(driver.run());
        Session {
            inner: Arc::new(Inner {
                control,
                task: Mutex::new(Some(task)),
                transport: Arc::downgrade(&transport),
                next_key: AtomicU64::new(0),
                close_timeout,
            }),
        }
    }

    /// Starts building an election on this session.
    ///
    /// Closing the election deletes its node and leaves the session open.
    pub fn election(&self, path: impl Into<String>) -> ElectionBuilder {
        ElectionBuilder::on_session(self.clone()).path(path)
    }

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
    pub fn mutex(&self, path: impl Into<String>) -> lock::Mutex {
        lock::Mutex::new(self.clone(), path.into(), Rule::Mutex)
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

    /// The session's transport, while it is open (for guarded writes).
    pub(crate) fn transport(&self) -> Weak<dyn Transport> {
        Weak::clone(&self.inner.transport)
    }

    /// Runs `machine` on the session; its handles reach it through the link.
    pub(crate) fn add(
        &self,
        machine: Box<dyn Machine>,
        outputs: Arc<Outputs>,
        close_timeout: Duration,
        ends_session: bool,
    ) -> Link {
        let key = self.inner.next_key.fetch_add(1, Ordering::Relaxed);
        let _ = self.inner.control.send(Control::Add {
            key,
            machine,
            outputs,
            close_timeout,
            ends_session,
        });
        Link {
            key,
            control: self.inner.control.clone(),
        }
    }

    /// Closes every recipe on the session (each deletes its node, within its
    /// close timeout), then the session itself, and waits until the driver
    /// task has ended. Idempotent, and safe to call from several clones.
    pub async fn close(&self) {
        let graceful = async {
            let (done, wait) = oneshot::channel();
            if self.inner.control.send(Control::Close { done }).is_ok() {
                let _ = wait.await;
            }
        };
        // The driver bounds both steps; this outer bound only matters if the
        // driver task is stuck, which would be a bug.
        let bound = self.inner.close_timeout * 2 + Duration::from_secs(1);
        let finished = tokio::time::timeout(bound, graceful).await.is_ok();
        let task = self.inner.task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            if !finished {
                tracing::warn!("close: the session driver did not stop in time; aborting it");
                task.abort();
            }
            let _ = task.await;
        }
    }
}

/// A recipe handle's line to its machine on the driver. When the last
/// clone goes, the machine is closed.
#[derive(Debug)]
pub(crate) struct Link {
    key: Key,
    control: mpsc::UnboundedSender<Control>,
}

impl Link {
    /// Sends an intent; false once the driver is gone.
    pub(crate) fn send(&self, intent: Intent) -> bool {
        self.control
            .send(Control::Intent {
                key: self.key,
                intent,
            })
            .is_ok()
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = self.control.send(Control::Dropped { key: self.key });
    }
}
