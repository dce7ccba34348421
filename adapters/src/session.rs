//! One ZooKeeper session, many recipes: a [`Session`] owns one transport,
//! the core's session machine and one pump task (see `driver.rs`), and
//! every recipe made on it — [`Session::election`], the locks, the
//! observations — runs on it, as Curator and kazoo fleets run every recipe
//! of a process on one session.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use zkelect_core::{ConnectionState, Gone, Machine, MachineId, SessionConfig, Timestamp};

use crate::connect::Connect;
use crate::driver::Pump;
use crate::error::SessionError;
use crate::hub::{Board, Hub};
use crate::transport::{EventStream, Transport};

/// How long [`Session::close`] waits for the machines, and again for the
/// transport, unless a builder says otherwise.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// One ZooKeeper session that runs many recipes: one transport, one pump
/// task, any number of elections, locks and observations.
///
/// Cheap to clone: clones share the session. It ends when
/// [`close`](Self::close) is called, or — in the background — when every
/// handle to it and to its recipes is dropped.
///
/// On the in-memory [`MemoryServer`](memory/struct.MemoryServer.html)
/// (feature `memory`), so that it runs as a test.
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
    hub: Arc<Hub>,
    task: Mutex<Option<JoinHandle<()>>>,
    transport: Weak<dyn Transport>,
    close_timeout: Duration,
}

impl Drop for Inner {
    /// Every handle to the session and its recipes is gone: nobody can
    /// close it, so it closes now (in the background).
    fn drop(&mut self) {
        drop(self.hub.close_session());
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("close_timeout", &self.inner.close_timeout)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Opens a session with `settings`: [`ZkAsyncOptions`](zk_async/type.ZkAsyncOptions.html),
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
        // The watch table's keys: secret, so no path can be chosen to
        // collide in it.
        let config = SessionConfig::new(random_seed()).with_close_timeout(close_timeout);
        // The request bound is the session's to keep (unset: the
        // negotiated session timeout, as the core learns it).
        let config = match transport.request_timeout() {
            Some(bound) => config.with_request_timeout(bound),
            None => config,
        };
        let (hub, handoffs) = Hub::new(&transport, config);
        let pump = Pump {
            hub: Arc::clone(&hub),
            transport: Arc::clone(&transport),
            events,
            handoffs,
            close_timeout,
        };
        let task = tokio::spawn(pump.run());
        Session {
            inner: Arc::new(Inner {
                hub,
                task: Mutex::new(Some(task)),
                transport: Arc::downgrade(&transport),
                close_timeout,
            }),
        }
    }

    /// The session's transport, while it is open (for guarded writes).
    pub(crate) fn hub(&self) -> &Hub {
        &self.inner.hub
    }

    pub(crate) fn transport(&self) -> Weak<dyn Transport> {
        Weak::clone(&self.inner.transport)
    }

    /// Runs `machine` on the session; its handles reach it through the link.
    pub(crate) fn add(&self, machine: Machine, board: Board) -> Link {
        let releases = machine.is_lock();
        let id = self.inner.hub.add(machine, board);
        Link {
            id,
            session: self.clone(),
            releases,
        }
    }

    /// The session's connection state, and every change to it: the
    /// counterpart of Curator's `ConnectionStateListener`, for an
    /// application that wants to know without holding anything (stop
    /// serving from a cache while `Suspended`, rebuild state after
    /// `Expired`).
    ///
    /// The core decides it with the lease the machines keep, from the
    /// session's events and the time since the server last answered:
    /// [`Connected`](ConnectionState::Connected) on a new ZooKeeper
    /// session; [`Suspended`](ConnectionState::Suspended) once the
    /// connection drops or the server has not answered for two thirds of
    /// the session timeout (a lock guard's lease ends then, a leader stops
    /// leading under the default policy);
    /// [`Lost`](ConnectionState::Lost) at nine tenths (the session may have
    /// expired on the server); [`Reconnected`](ConnectionState::Reconnected)
    /// when the same session answers again;
    /// [`Expired`](ConnectionState::Expired) when the server said it is
    /// gone (a new session follows with `Connected`);
    /// [`Closed`](ConnectionState::Closed) once it is closed;
    /// [`AuthFailed`](ConnectionState::AuthFailed) when the server refused
    /// its credentials or they could not be put back after a reconnect:
    /// every recipe on it stopped with
    /// [`SessionError::Auth`](crate::SessionError::Auth), and the session
    /// closed itself (its ephemeral nodes go with it; it stays in that
    /// state, and a recipe started on it later fails the same way). It starts at
    /// [`Connecting`](ConnectionState::Connecting). A `watch` keeps the
    /// latest state: a reader that looks late sees where it is now, not
    /// every step on the way.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use zkelect::{memory::MemoryServer, ConnectionState, Session};
    ///
    /// let server = MemoryServer::new();
    /// let session = Session::connect(server.settings(Duration::from_secs(4))).await?;
    /// let mut states = session.states();
    /// states.wait_for(|s| *s == ConnectionState::Connected).await?;
    /// tokio::spawn(async move {
    ///     while states.changed().await.is_ok() {
    ///         match *states.borrow_and_update() {
    ///             ConnectionState::Suspended => eprintln!("in doubt: stop serving cached reads"),
    ///             ConnectionState::Expired => eprintln!("expired: rebuild what the session held"),
    ///             state => eprintln!("session: {state:?}"),
    ///         }
    ///     }
    /// });
    /// session.close().await;
    /// assert_eq!(*session.states().borrow(), ConnectionState::Closed);
    /// # Ok(())
    /// # }
    /// ```
    pub fn states(&self) -> watch::Receiver<ConnectionState> {
        self.inner.hub.states()
    }

    /// Closes every recipe on the session (each deletes its node, within its
    /// close timeout), then the session itself, and waits until the pump
    /// task has ended. Idempotent, and safe to call from several clones.
    pub async fn close(&self) {
        let closed = self.inner.hub.close_session();
        // The core bounds the machines' closes and the pump the transport's;
        // this outer bound only matters if the pump is stuck, which would be
        // a bug.
        let bound = self.inner.close_timeout * 2 + Duration::from_secs(1);
        let finished = tokio::time::timeout(bound, closed).await.is_ok();
        let task = self.inner.task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            if !finished {
                tracing::warn!("close: the session's pump did not stop in time; aborting it");
                task.abort();
            }
            let _ = task.await;
        }
    }
}

/// A recipe handle's line to its machine on the session. When the last
/// clone goes, the machine is closed.
#[derive(Debug)]
pub(crate) struct Link {
    id: MachineId,
    session: Session,
    /// A lock's: closed by its holder itself (a release), so its demotion
    /// holds nothing back (nothing of the holder's acts on the hold any
    /// more) and its delete goes out at once.
    releases: bool,
}

impl Link {
    /// Applies an intent (`Err` once the machine has left the session).
    pub(crate) fn intent(
        &self,
        apply: impl FnOnce(&mut zkelect_core::Session, Timestamp, MachineId) -> Result<(), Gone>,
    ) -> Result<(), Gone> {
        let id = self.id;
        self.session
            .inner
            .hub
            .intent(|session, now| apply(session, now, id))
    }

    /// Closes the machine: told once it has left the session (`None` if it
    /// already had).
    pub(crate) fn close(&self) -> Option<tokio::sync::oneshot::Receiver<()>> {
        self.session.inner.hub.close(self.id, self.releases)
    }

    /// The session the machine runs on.
    pub(crate) fn session(&self) -> &Session {
        &self.session
    }

    /// Reads the machine, while it runs.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&Machine) -> R) -> Option<R> {
        self.session
            .inner
            .hub
            .read(|session| session.machine(self.id).map(f))
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        drop(self.close());
    }
}

/// A seed drawn afresh: for the protected-name nonces (distinct per process
/// and per election) and the session's watch-table keys.
pub(crate) fn random_seed() -> u64 {
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

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
