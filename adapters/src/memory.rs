//! An in-process transport over the simulator's ZooKeeper model: many
//! elections in one process share one [`MemoryServer`], with real ZooKeeper
//! semantics (sequential names, ephemeral owners, one-shot watches, sessions)
//! and no network. Handy for tests of code built on [`Election`](crate::Election),
//! including under `#[tokio::test(start_paused = true)]`.
//!
//! Each [`connect`](MemoryServer::connect) is one client, as a real client
//! library would be: it keeps its session alive with (implicit) pings while
//! its connection is up, reconnects after a drop, and opens a new session
//! after an expiry (as zookeeper-async does: `Expired`, then `Connected` with
//! the new session). The faults of the [`testkit`](crate::testkit) (feature
//! `testkit`) act on these clients; without them the server never fails.
//!
//! What it models of a real connection, and why:
//!
//! - **Watches live per connection**, as on the server; a reconnect does not
//!   set them again (zookeeper-async does not), so the core re-arms them
//!   after every `Connected`.
//! - **A client notices a silent server** after two thirds of the session
//!   timeout (the Java client's read timeout), then answers its waiting
//!   requests with `ConnectionLoss` and reports `Disconnected`.
//! - **A session expires** when the server has heard nothing from it for its
//!   negotiated timeout, which the server clamps into
//!   `[min_session_timeout, max_session_timeout]` ([`ServerConfig`]).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), zkelect::ElectionError> {
//! use std::time::Duration;
//! use zkelect::memory::MemoryServer;
//! use zkelect::Election;
//!
//! let server = MemoryServer::new();
//! let (transport, events) = server.connect(Duration::from_secs(4));
//! let election = Election::builder(transport, events).path("/svc/leader").id("a").join().await?;
//! assert!(election.wait_leader().await.is_ok());
//! election.close().await;
//! # Ok(())
//! # }
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;
use zkelect_core::{Reply, Request, SessionEvent, SessionId, Timestamp, ZkCode};
use zkelect_sim::zk::{Fired, ZkModel};

use crate::transport::{
    EventStream, MultiError, MultiOp, MultiOpResult, Transport, TransportEvent,
};

/// The server's settings, as a `zoo.cfg` would give them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerConfig {
    /// The shortest session timeout the server grants (`minSessionTimeout`).
    pub min_session_timeout: Duration,
    /// The longest session timeout the server grants (`maxSessionTimeout`).
    pub max_session_timeout: Duration,
    /// How long a client waits before it reconnects after losing its
    /// connection (a real client's back-off and handshake).
    pub reconnect_delay: Duration,
}

impl Default for ServerConfig {
    /// The simulator model's defaults: a 200 ms tick, so sessions between
    /// 400 ms and 4 s (a real server's default tick is 2 s: 4 s to 40 s).
    fn default() -> Self {
        Self {
            min_session_timeout: Duration::from_millis(400),
            max_session_timeout: Duration::from_secs(4),
            reconnect_delay: Duration::from_millis(50),
        }
    }
}

/// The fate of the request in flight when a connection drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestFate {
    /// The server applied it; only the reply was lost.
    Applied,
    /// It never reached the server.
    NotApplied,
}

/// One client's session on the server (the server's side).
#[derive(Debug, Clone, Copy)]
struct Sess {
    client: usize,
    timeout: Duration,
    /// Since when the server has heard nothing (no request, no ping); `None`
    /// while the connection is up.
    silent_since: Option<Instant>,
}

/// One client library's state.
#[derive(Debug)]
struct Client {
    tx: mpsc::UnboundedSender<TransportEvent>,
    requested: Duration,
    session: Option<SessionId>,
    timeout: Duration,
    connected: bool,
    closed: bool,
    /// Expired on the server while cut off: reported at the next reconnect.
    expired: bool,
    reconnect_at: Option<Instant>,
    partition: Option<(Instant, Instant)>,
    /// Watch events sent while partitioned: TCP delivers them at the end.
    in_transit: Vec<TransportEvent>,
    paused_until: Option<Instant>,
    watch_lag: Duration,
    /// Events for the application, each with when it may be delivered, in order.
    outbox: VecDeque<(Instant, TransportEvent)>,
    drop_next: Option<RequestFate>,
}

/// The memory server: the model, its clients and sessions, and the faults
/// in force (behind [`Inner`]'s mutex, shared by the server handle, every
/// client and the ticker).
pub(crate) struct ServerState {
    pub(crate) model: ZkModel,
    epoch: Instant,
    pub(crate) config: ServerConfig,
    clients: Vec<Client>,
    sessions: BTreeMap<SessionId, Sess>,
    down_until: Option<Instant>,
    operator: Option<SessionId>,
}

impl ServerState {
    pub(crate) fn stamp(&self, at: Instant) -> Timestamp {
        let ms = at.saturating_duration_since(self.epoch).as_millis();
        Timestamp::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
    }

    fn negotiate(&self, requested: Duration) -> Duration {
        let c = &self.config;
        requested.clamp(
            c.min_session_timeout,
            c.max_session_timeout.max(c.min_session_timeout),
        )
    }

    fn open_session(&mut self, client: usize, now: Instant) -> (SessionId, Duration) {
        let timeout = self.negotiate(self.clients[client].requested);
        let stamp = self.stamp(now);
        // The model clamps with its own tick; this server keeps the timeout
        // and the expiry itself, so the model's value is never used.
        let (id, _) = self.model.open_session(stamp, timeout, None);
        self.sessions.insert(
            id,
            Sess {
                client,
                timeout,
                silent_since: None,
            },
        );
        (id, timeout)
    }

    /// Queues an event for the application of `client`.
    fn emit(&mut self, client: usize, event: TransportEvent, now: Instant) {
        let c = &mut self.clients[client];
        let due = match event {
            TransportEvent::Watch(_) => now + c.watch_lag,
            TransportEvent::Session(_) => now,
        };
        c.outbox.push_back((due, event));
    }

    /// Routes fired watches to their clients' connections.
    fn deliver(&mut self, fired: Vec<Fired>, now: Instant) {
        for f in fired {
            let Some(client) = self.sessions.get(&f.session).map(|s| s.client) else {
                continue;
            };
            let c = &mut self.clients[client];
            if !c.connected || c.closed {
                continue;
            }
            if c.partition.is_some() {
                c.in_transit.push(TransportEvent::Watch(f.event));
            } else {
                self.emit(client, TransportEvent::Watch(f.event), now);
            }
        }
    }

    /// The connection of `client` is gone (its end noticed, or the server
    /// dropped it): watches go with it; reconnects after the delay.
    fn disconnect(&mut self, client: usize, now: Instant) {
        let delay = self.config.reconnect_delay;
        let c = &mut self.clients[client];
        if !c.connected || c.closed {
            return;
        }
        c.connected = false;
        c.in_transit.clear();
        c.reconnect_at = Some(now + delay);
        let session = c.session;
        self.emit(
            client,
            TransportEvent::Session(SessionEvent::Disconnected),
            now,
        );
        if let Some(s) = session {
            self.model.connection_closed(s);
            if let Some(sess) = self.sessions.get_mut(&s) {
                sess.silent_since.get_or_insert(now);
            }
        }
    }

    /// Ends the session of `client` on the server (expiry).
    pub(crate) fn expire_session(&mut self, session: SessionId, now: Instant) {
        let Some(sess) = self.sessions.remove(&session) else {
            return;
        };
        let fired = self.model.close_session(session);
        self.deliver(fired, now);
        let delay = self.config.reconnect_delay;
        let c = &mut self.clients[sess.client];
        if c.session != Some(session) || c.closed {
            return;
        }
        c.session = None;
        if c.connected && c.partition.is_none() {
            // The server closes the connection with the news.
            c.connected = false;
            c.reconnect_at = Some(now + delay);
            self.emit(
                sess.client,
                TransportEvent::Session(SessionEvent::Expired),
                now,
            );
        } else {
            c.expired = true;
        }
    }

    fn reconnect(&mut self, client: usize, now: Instant) {
        let c = &mut self.clients[client];
        c.reconnect_at = None;
        c.connected = true;
        let expired = std::mem::take(&mut c.expired);
        let old = c.session;
        if expired {
            self.emit(client, TransportEvent::Session(SessionEvent::Expired), now);
        }
        let (id, timeout) = match old.filter(|s| self.sessions.contains_key(s)) {
            Some(id) => {
                self.model.connection_closed(id);
                if let Some(sess) = self.sessions.get_mut(&id) {
                    sess.silent_since = None;
                }
                (id, self.sessions[&id].timeout)
            }
            None => self.open_session(client, now),
        };
        let c = &mut self.clients[client];
        c.session = Some(id);
        c.timeout = timeout;
        self.emit(
            client,
            TransportEvent::Session(SessionEvent::Connected {
                session_id: Some(id),
                timeout,
            }),
            now,
        );
    }

    /// Brings every client and session up to `now`: partitions end or are
    /// noticed, clients reconnect, sessions expire, events are delivered.
    pub(crate) fn tick(&mut self, now: Instant) {
        if self.down_until.is_some_and(|t| t <= now) {
            self.down_until = None;
            let stamp = self.stamp(now);
            self.model.restart(stamp);
            // The session timers restart now: a client that cannot come back
            // (cut off) expires a timeout from here.
            for sess in self.sessions.values_mut() {
                let c = &self.clients[sess.client];
                if !c.closed && c.partition.is_some() {
                    sess.silent_since = Some(now);
                }
            }
        }
        for i in 0..self.clients.len() {
            if self.clients[i].closed {
                continue;
            }
            if let Some((start, end)) = self.clients[i].partition {
                let detect = start + self.clients[i].timeout * 2 / 3;
                if end <= now && (end < detect || !self.clients[i].connected) {
                    self.clients[i].partition = None;
                    if self.clients[i].connected {
                        // Healed before anyone noticed: TCP delivers what it held.
                        let held = std::mem::take(&mut self.clients[i].in_transit);
                        for e in held {
                            self.emit(i, e, now);
                        }
                        if let Some(s) = self.clients[i].session {
                            if let Some(sess) = self.sessions.get_mut(&s) {
                                sess.silent_since = None;
                            }
                        }
                    }
                } else if detect <= now && self.clients[i].connected {
                    self.disconnect(i, detect);
                }
            }
            let c = &self.clients[i];
            if !c.connected
                && c.partition.is_none()
                && self.down_until.is_none()
                && c.reconnect_at.is_some_and(|t| t <= now)
            {
                self.reconnect(i, now);
            }
        }
        let due: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(id, s)| {
                Some(**id) != self.operator && s.silent_since.is_some_and(|t| t + s.timeout <= now)
            })
            .map(|(id, _)| *id)
            .collect();
        for s in due {
            self.expire_session(s, now);
        }
        for c in &mut self.clients {
            if c.paused_until.is_some_and(|t| t <= now) {
                c.paused_until = None;
            }
            if c.paused_until.is_some() {
                continue;
            }
            while c.outbox.front().is_some_and(|(due, _)| *due <= now) {
                if let Some((_, event)) = c.outbox.pop_front() {
                    let _ = c.tx.send(event);
                }
            }
        }
    }

    /// The next moment [`tick`](Self::tick) has something to do.
    fn next_deadline(&self) -> Option<Instant> {
        let mut next: Option<Instant> = self.down_until;
        let mut at = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        for c in self.clients.iter().filter(|c| !c.closed) {
            if let Some((start, end)) = c.partition {
                at(end);
                if c.connected {
                    at(start + c.timeout * 2 / 3);
                }
            }
            // A reconnect waits for the partition or the server; their ends are deadlines.
            if c.partition.is_none() && self.down_until.is_none() {
                if let Some(t) = c.reconnect_at {
                    at(t);
                }
            }
            if let Some(t) = c.paused_until {
                at(t);
            } else if let Some((t, _)) = c.outbox.front() {
                at(*t);
            }
        }
        for (id, s) in &self.sessions {
            if Some(*id) != self.operator {
                if let Some(t) = s.silent_since {
                    at(t + s.timeout);
                }
            }
        }
        next
    }
}

/// The state behind a [`MemoryServer`], and the ticker's wake-up call.
pub(crate) struct Inner {
    pub(crate) shared: Mutex<ServerState>,
    wake: Arc<Notify>,
    /// Wakes requests held by a partition when it is healed early.
    pub(crate) healed: Notify,
    ticker: Mutex<bool>,
}

/// One in-memory ZooKeeper, shared by every transport connected to it.
#[derive(Clone)]
pub struct MemoryServer {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for MemoryServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryServer").finish_non_exhaustive()
    }
}

impl Default for MemoryServer {
    fn default() -> Self {
        Self::new()
    }
}

/// Connection settings for a [`MemoryServer`]: what
/// [`MemoryServer::settings`] returns.
#[derive(Debug, Clone)]
pub struct MemorySettings {
    server: MemoryServer,
    session_timeout: Duration,
}

impl crate::Connect for MemorySettings {
    fn connect(self: Box<Self>) -> crate::Connecting {
        Box::pin(async move {
            let (transport, events) = self.server.connect(self.session_timeout);
            Ok((Arc::new(transport) as Arc<dyn Transport>, events))
        })
    }
}

/// The server's clock: sleeps until the next deadline (or a change), then
/// ticks. It holds the server weakly and ends at its first wake-up after the
/// server is gone.
async fn ticker(inner: Weak<Inner>, wake: Arc<Notify>) {
    loop {
        let notified = wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let next = {
            let Some(strong) = inner.upgrade() else {
                return;
            };
            let Ok(mut s) = strong.shared.lock() else {
                return;
            };
            s.tick(Instant::now());
            s.next_deadline()
        };
        match next {
            Some(t) => {
                tokio::select! {
                    () = tokio::time::sleep_until(t) => {}
                    () = &mut notified => {}
                }
            }
            None => notified.await,
        }
    }
}

impl MemoryServer {
    /// An empty server with the default [`ServerConfig`].
    pub fn new() -> Self {
        Self::with_config(ServerConfig::default())
    }

    /// An empty server with these settings.
    pub fn with_config(config: ServerConfig) -> Self {
        let mut model = ZkModel::default();
        let epoch = Instant::now();
        let (operator, _) = model.open_session(Timestamp::from_millis(0), Duration::ZERO, None);
        Self {
            inner: Arc::new(Inner {
                shared: Mutex::new(ServerState {
                    model,
                    epoch,
                    config,
                    clients: Vec::new(),
                    sessions: BTreeMap::new(),
                    down_until: None,
                    operator: Some(operator),
                }),
                wake: Arc::new(Notify::new()),
                healed: Notify::new(),
                ticker: Mutex::new(false),
            }),
        }
    }

    pub(crate) fn lock(&self) -> Option<MutexGuard<'_, ServerState>> {
        self.inner.shared.lock().ok()
    }

    /// Wakes the server's clock after a change (starting it if needed: it
    /// needs a tokio runtime, which every caller of a transport has).
    pub(crate) fn kick(&self) {
        if let Ok(mut started) = self.inner.ticker.lock() {
            if !*started && tokio::runtime::Handle::try_current().is_ok() {
                *started = true;
                tokio::spawn(ticker(Arc::downgrade(&self.inner), self.inner.wake.clone()));
            }
        }
        self.inner.wake.notify_one();
    }

    /// Opens a session and returns its transport, whose event stream starts
    /// with `Connected` (with the timeout the server negotiated).
    pub fn connect(&self, session_timeout: Duration) -> (MemoryTransport, EventStream) {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut client = None;
        if let Some(mut s) = self.lock() {
            let now = Instant::now();
            let i = s.clients.len();
            s.clients.push(Client {
                tx,
                requested: session_timeout,
                session: None,
                timeout: session_timeout,
                connected: false,
                closed: false,
                expired: false,
                reconnect_at: None,
                partition: None,
                in_transit: Vec::new(),
                paused_until: None,
                watch_lag: Duration::ZERO,
                outbox: VecDeque::new(),
                drop_next: None,
            });
            s.reconnect(i, now);
            // The first event goes out at once, so a caller without a
            // runtime (or before the clock's first tick) sees it.
            s.tick(now);
            client = Some(i);
        }
        self.kick();
        (
            MemoryTransport {
                server: self.clone(),
                client,
            },
            rx,
        )
    }

    /// Settings that open a session on this server, for
    /// [`Session::connect`](crate::Session::connect) and
    /// [`Election::connect`](crate::Election::connect), as a real
    /// transport's options do.
    pub fn settings(&self, session_timeout: Duration) -> MemorySettings {
        MemorySettings {
            server: self.clone(),
            session_timeout,
        }
    }

    /// The data of `path` right now, if it exists.
    pub fn data(&self, path: &str) -> Option<Vec<u8>> {
        self.lock()
            .and_then(|s| s.model.data(path).map(<[u8]>::to_vec))
    }

    /// The children of `path` right now.
    pub fn children(&self, path: &str) -> Vec<String> {
        self.lock()
            .map(|s| s.model.children(path))
            .unwrap_or_default()
    }

    /// Runs `f` on the state, then wakes the clock.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut ServerState, Instant) -> R) -> Option<R> {
        let out = self.lock().map(|mut s| {
            let now = Instant::now();
            s.tick(now);
            let out = f(&mut s, now);
            s.tick(now);
            out
        });
        self.kick();
        out
    }
}

/// Faults, for the test kit: each acts on one client (by its index in
/// connection order) or on the server.
#[cfg(feature = "testkit")]
impl ServerState {
    pub(crate) fn client_count(&self) -> usize {
        self.clients.len()
    }

    pub(crate) fn client_session(&self, client: usize) -> Option<SessionId> {
        self.clients.get(client).and_then(|c| c.session)
    }

    pub(crate) fn client_live(&self, client: usize) -> bool {
        self.clients.get(client).is_some_and(|c| !c.closed)
    }

    pub(crate) fn fault_expire(&mut self, client: usize, now: Instant) {
        if let Some(s) = self.client_session(client) {
            self.expire_session(s, now);
        }
    }

    pub(crate) fn fault_drop(
        &mut self,
        client: usize,
        in_flight: Option<RequestFate>,
        now: Instant,
    ) {
        match in_flight {
            Some(f) => {
                if let Some(c) = self.clients.get_mut(client) {
                    c.drop_next = Some(f);
                }
            }
            None if client < self.clients.len() => self.disconnect(client, now),
            None => {}
        }
    }

    pub(crate) fn fault_partition(&mut self, client: usize, d: Duration, now: Instant) {
        let Some(c) = self.clients.get_mut(client) else {
            return;
        };
        if c.closed {
            return;
        }
        let start = c.partition.map_or(now, |(s, _)| s);
        let end = c.partition.map_or(now + d, |(_, e)| e.max(now + d));
        c.partition = Some((start, end));
        if let Some(s) = c.session {
            if let Some(sess) = self.sessions.get_mut(&s) {
                sess.silent_since.get_or_insert(now);
            }
        }
    }

    pub(crate) fn fault_pause(&mut self, client: usize, d: Duration, now: Instant) {
        if let Some(c) = self.clients.get_mut(client) {
            c.paused_until = Some(c.paused_until.map_or(now + d, |t| t.max(now + d)));
        }
    }

    pub(crate) fn fault_watch_lag(&mut self, client: usize, lag: Duration) {
        if let Some(c) = self.clients.get_mut(client) {
            c.watch_lag = lag;
        }
    }

    pub(crate) fn fault_restart(&mut self, downtime: Duration, now: Instant) {
        for i in 0..self.clients.len() {
            self.disconnect(i, now);
        }
        // Nobody can be heard while the server is down; the timers restart
        // when it is back (a standalone server reloads its sessions).
        for sess in self.sessions.values_mut() {
            sess.silent_since = None;
        }
        let stamp = self.stamp(now);
        self.model.restart(stamp);
        self.down_until = Some(now + downtime);
    }

    pub(crate) fn heal(&mut self, now: Instant) {
        for c in &mut self.clients {
            if let Some((start, end)) = c.partition {
                c.partition = Some((start, end.min(now)));
            }
            c.paused_until = None;
            c.watch_lag = Duration::ZERO;
            c.drop_next = None;
        }
        if self.down_until.is_some() {
            self.down_until = Some(now);
        }
    }

    pub(crate) fn set_session_bounds(&mut self, min: Duration, max: Duration) {
        self.config.min_session_timeout = min;
        self.config.max_session_timeout = max;
    }

    pub(crate) fn operator(&mut self, request: &Request, now: Instant) -> Result<Reply, ZkCode> {
        let Some(op) = self.operator else {
            return Err(ZkCode::SessionExpired);
        };
        let stamp = self.stamp(now);
        let (result, fired) = self.model.apply(stamp, op, request);
        self.deliver(fired, now);
        result
    }
}

/// A [`Transport`] holding one client's session on a [`MemoryServer`].
#[derive(Debug)]
pub struct MemoryTransport {
    server: MemoryServer,
    client: Option<usize>,
}

impl MemoryTransport {
    /// This client's index on its server (connection order), which the
    /// test kit's faults take.
    pub fn client(&self) -> usize {
        self.client.unwrap_or(usize::MAX)
    }

    /// Runs `op` on the server once the request gets through: at once on a
    /// healthy connection, at the end of a partition (TCP delivers late), or
    /// never (`ConnectionLoss`) if the connection is lost first.
    async fn send<R>(
        &self,
        mut op: impl FnMut(&mut ServerState, SessionId, Timestamp, Instant) -> R,
        loss: impl Fn(ZkCode) -> R,
    ) -> R {
        let Some(client) = self.client else {
            return loss(ZkCode::ConnectionLoss);
        };
        loop {
            // Made before the state is read: a heal between the read and
            // the wait would otherwise wake nobody, and the request would
            // wait out the partition's old end.
            let healed = self.server.inner.healed.notified();
            let wait = {
                let Some(mut s) = self.server.lock() else {
                    return loss(ZkCode::ConnectionLoss);
                };
                let now = Instant::now();
                s.tick(now);
                let down = s.down_until.is_some();
                let c = &mut s.clients[client];
                if c.closed {
                    return loss(ZkCode::SessionExpired);
                }
                if !c.connected || down {
                    return loss(ZkCode::ConnectionLoss);
                }
                let Some(session) = c.session else {
                    return loss(ZkCode::ConnectionLoss);
                };
                match c.partition {
                    Some((start, end)) => end.min(start + c.timeout * 2 / 3),
                    None => {
                        let trap = c.drop_next.take();
                        let stamp = s.stamp(now);
                        let out = match trap {
                            Some(RequestFate::NotApplied) => None,
                            _ => Some(op(&mut s, session, stamp, now)),
                        };
                        let out = match trap {
                            Some(_) => {
                                s.disconnect(client, now);
                                loss(ZkCode::ConnectionLoss)
                            }
                            None => out.unwrap_or_else(|| loss(ZkCode::ConnectionLoss)),
                        };
                        s.tick(now);
                        drop(s);
                        self.server.kick();
                        return out;
                    }
                }
            };
            tokio::select! {
                () = tokio::time::sleep_until(wait) => {}
                () = healed => {}
            }
        }
    }
}

#[async_trait]
impl Transport for MemoryTransport {
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode> {
        self.send(
            |s, session, stamp, now| {
                let (result, fired) = s.model.apply(stamp, session, &request);
                s.deliver(fired, now);
                result
            },
            Err,
        )
        .await
    }

    /// All or nothing over the model: the operations run on a copy, which
    /// replaces the model only if every one succeeded; watches fire then.
    async fn multi(&self, ops: Vec<MultiOp>) -> Result<Vec<MultiOpResult>, MultiError> {
        self.send(
            |s, session, stamp, now| multi(s, session, stamp, now, ops.clone()),
            |code| Err(MultiError::Request(code)),
        )
        .await
    }

    async fn close(&self) {
        let Some(client) = self.client else { return };
        self.server.with(|s, now| {
            let c = &mut s.clients[client];
            if c.closed {
                return;
            }
            c.closed = true;
            let session = c.session.take();
            c.outbox.clear();
            let _ = c.tx.send(TransportEvent::Session(SessionEvent::Closed));
            if let Some(session) = session {
                s.sessions.remove(&session);
                let fired = s.model.close_session(session);
                s.deliver(fired, now);
            }
        });
    }
}

/// A client dropped without [`close`](Transport::close) is a crashed
/// process: it stops pinging, and the server expires its session a timeout
/// later (its ephemerals go then, not at once).
impl Drop for MemoryTransport {
    fn drop(&mut self) {
        let Some(client) = self.client else { return };
        self.server.with(|s, now| {
            let c = &mut s.clients[client];
            if c.closed {
                return;
            }
            c.closed = true;
            c.outbox.clear();
            if let Some(session) = c.session {
                if let Some(sess) = s.sessions.get_mut(&session) {
                    sess.silent_since.get_or_insert(now);
                }
            }
        });
    }
}

fn multi(
    shared: &mut ServerState,
    session: SessionId,
    now: Timestamp,
    at: Instant,
    ops: Vec<MultiOp>,
) -> Result<Vec<MultiOpResult>, MultiError> {
    if !shared.model.session_alive(session) {
        return Err(MultiError::Request(ZkCode::SessionExpired));
    }
    let mut model = shared.model.clone();
    let mut fired = Vec::new();
    let mut results = Vec::with_capacity(ops.len());
    for (index, op) in ops.into_iter().enumerate() {
        let failed = |code| MultiError::Op { index, code };
        let (result, more) = match op {
            MultiOp::Check { path, version } => match model.stat(&path) {
                None => return Err(failed(ZkCode::NoNode)),
                Some(stat) if version.is_some_and(|v| v != stat.version) => {
                    return Err(failed(ZkCode::BadVersion))
                }
                Some(_) => (MultiOpResult::Checked, Vec::new()),
            },
            MultiOp::Create {
                path,
                data,
                mode,
                acl,
            } => {
                let request = Request::Create {
                    path,
                    data,
                    mode,
                    acl,
                };
                match model.apply(now, session, &request) {
                    (Ok(Reply::Created { path, .. }), more) => {
                        (MultiOpResult::Created { path }, more)
                    }
                    (Ok(_), _) => return Err(failed(ZkCode::Other(-2))),
                    (Err(code), _) => return Err(failed(code)),
                }
            }
            MultiOp::SetData {
                path,
                data,
                version,
            } => match model.set_data(now, session, &path, &data, version) {
                (Ok(stat), more) => (MultiOpResult::DataSet(stat), more),
                (Err(code), _) => return Err(failed(code)),
            },
            MultiOp::Delete { path, version } => {
                match model.apply(now, session, &Request::Delete { path, version }) {
                    (Ok(_), more) => (MultiOpResult::Deleted, more),
                    (Err(code), _) => return Err(failed(code)),
                }
            }
        };
        results.push(result);
        fired.extend(more);
    }
    shared.model = model;
    shared.deliver(fired, at);
    Ok(results)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use zkelect_core::{Acl, CreateMode, Request, ZkCode};

    use super::MemoryServer;
    use crate::transport::{MultiError, MultiOp, MultiOpResult, Transport};
    use crate::{Election, GuardedWriteError};

    const SESSION: Duration = Duration::from_secs(4);

    fn create(path: &str) -> Request {
        Request::Create {
            path: path.into(),
            data: Vec::new(),
            mode: CreateMode::Persistent,
            acl: Acl::Open,
        }
    }

    /// One server is its own leader: a sync is answered at once.
    #[tokio::test(start_paused = true)]
    async fn a_sync_is_answered_at_once() {
        let server = MemoryServer::new();
        let (zk, _events) = server.connect(SESSION);
        let sync = Request::Sync { path: "/a".into() };
        assert_eq!(zk.perform(sync).await, Ok(zkelect_core::Reply::Synced));
    }

    #[tokio::test(start_paused = true)]
    async fn a_multi_applies_all_or_nothing() {
        let server = MemoryServer::new();
        let (zk, _events) = server.connect(SESSION);
        assert!(zk.perform(create("/a")).await.is_ok());
        let failing = vec![
            MultiOp::SetData {
                path: "/a".into(),
                data: b"x".to_vec(),
                version: None,
            },
            MultiOp::Check {
                path: "/missing".into(),
                version: None,
            },
        ];
        assert_eq!(
            zk.multi(failing).await,
            Err(MultiError::Op {
                index: 1,
                code: ZkCode::NoNode
            })
        );
        assert_eq!(
            server.data("/a"),
            Some(Vec::new()),
            "the first op was rolled back"
        );
        let passing = vec![
            MultiOp::Check {
                path: "/a".into(),
                version: Some(0),
            },
            MultiOp::SetData {
                path: "/a".into(),
                data: b"y".to_vec(),
                version: Some(0),
            },
        ];
        let results = zk.multi(passing).await.unwrap();
        assert!(
            matches!(results.as_slice(), [MultiOpResult::Checked, MultiOpResult::DataSet(s)] if s.version == 1)
        );
        assert_eq!(server.data("/a"), Some(b"y".to_vec()));
    }

    /// Bad input to a guarded write: the failing operation is named, by its
    /// index among the caller's, and nothing of the multi is applied.
    #[tokio::test(start_paused = true)]
    async fn a_guarded_write_with_a_bad_operation_names_it_and_writes_nothing() {
        let server = MemoryServer::new();
        let (admin, _admin_events) = server.connect(SESSION);
        assert!(admin.perform(create("/fenced")).await.is_ok());
        let (a, a_events) = server.connect(SESSION);
        let leader = Election::builder(a, a_events)
            .path("/svc/leader")
            .id("a")
            .join()
            .await
            .unwrap();
        leader.wait_leader().await.unwrap();
        let set = |path: &str| MultiOp::SetData {
            path: path.to_owned(),
            data: b"x".to_vec(),
            version: None,
        };
        assert_eq!(
            leader.guarded(vec![set("/fenced"), set("/missing")]).await,
            Err(GuardedWriteError::Op {
                index: 1,
                code: ZkCode::NoNode
            })
        );
        assert_eq!(
            leader
                .guarded(vec![MultiOp::SetData {
                    path: "/fenced".to_owned(),
                    data: b"x".to_vec(),
                    version: Some(7),
                }])
                .await,
            Err(GuardedWriteError::Op {
                index: 0,
                code: ZkCode::BadVersion
            })
        );
        assert_eq!(server.data("/fenced"), Some(Vec::new()), "nothing written");
        leader.close().await;
    }

    #[tokio::test(start_paused = true)]
    async fn guarded_writes_pass_for_the_leader_and_fail_for_a_deposed_one() {
        let server = MemoryServer::new();
        let (admin, _admin_events) = server.connect(SESSION);
        assert!(admin.perform(create("/fenced")).await.is_ok());
        let (a, a_events) = server.connect(SESSION);
        let leader = Election::builder(a, a_events)
            .path("/svc/leader")
            .id("a")
            .join()
            .await
            .unwrap();
        let token = leader.wait_leader().await.unwrap();
        let (b, b_events) = server.connect(SESSION);
        let follower = Election::builder(b, b_events)
            .path("/svc/leader")
            .id("b")
            .join()
            .await
            .unwrap();
        assert_eq!(
            follower.guarded_set_data("/fenced", b"b".to_vec()).await,
            Err(GuardedWriteError::NotHolding)
        );
        let stat = leader
            .guarded_set_data("/fenced", b"a1".to_vec())
            .await
            .unwrap();
        assert_eq!(stat.version, 1);
        // An operator revokes the leader's node; the leader writes before
        // its driver has heard of it (nothing yields in between on this
        // single-threaded runtime), so only the server's check stops it.
        let node = leader.node().unwrap();
        assert!(admin
            .perform(Request::Delete {
                path: format!("/svc/leader/{node}"),
                version: None,
            })
            .await
            .is_ok());
        assert_eq!(
            leader.guarded_set_data("/fenced", b"zombie".to_vec()).await,
            Err(GuardedWriteError::Deposed { token })
        );
        assert_eq!(server.data("/fenced"), Some(b"a1".to_vec()));
        follower.wait_leader().await.unwrap();
        follower
            .guarded_set_data("/fenced", b"b".to_vec())
            .await
            .unwrap();
        assert_eq!(server.data("/fenced"), Some(b"b".to_vec()));
        leader.close().await;
        assert_eq!(
            leader.guarded_set_data("/fenced", b"late".to_vec()).await,
            Err(GuardedWriteError::Closed)
        );
        follower.close().await;
    }
}
