//! A TCP proxy that injects network faults between a client and a server.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::{FixtureError, Result};

/// How long a new connection may take to reach the target.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long `cut()` waits for the connections to be closed.
const CUT_WAIT: Duration = Duration::from_secs(2);
/// How long a connection cut after a request waits for the server's reply
/// (which it swallows) before cutting anyway.
const REPLY_WAIT: Duration = Duration::from_secs(2);
/// How long a client waits for its reset when the target refuses.
const REFUSED_RESET_DELAY: Duration = Duration::from_millis(100);
const BUFFER: usize = 64 * 1024;
/// Frames longer than this mean the stream is not ZooKeeper's protocol.
const MAX_FRAME: usize = 16 * 1024 * 1024;

/// Identifies one client connection accepted by a [`Proxy`] (numbered from 1
/// in the order of acceptance).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnectionId(pub u64);

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conn#{}", self.0)
    }
}

/// A TCP proxy on a free loopback port, owned by a test, forwarding every
/// accepted connection to a target address (typically a [`crate::ZkServer`]),
/// with fault injection:
///
/// * [`Proxy::blackhole`]: stop forwarding in both directions without closing
///   anything (no FIN, no RST): the proxy simply stops reading, so bytes queue
///   up in socket buffers, exactly as behind a network partition. New
///   connections are still accepted, but held (not connected to the target)
///   until [`Proxy::heal`], which lets everything that queued flow again in order.
/// * [`Proxy::cut`]: reset (RST) every current connection on both sides.
/// * [`Proxy::cut_after_next_request`]: let the client's next ZooKeeper request
///   reach the server, swallow the server's reply, then reset the connection:
///   the request took effect, but the client sees a connection loss.
/// * [`Proxy::reject_new_connections`]: reset new connections at once.
///
/// When the target refuses a connection (server down), the client's
/// connection is reset after 100 ms.
///
/// The proxy runs on its own single-threaded tokio runtime, so all its methods
/// are synchronous and can be called from synchronous tests and from any async
/// runtime alike; only [`Proxy::cut`] and [`Proxy::cut_connection`] block,
/// for the few microseconds the proxy thread needs to close the sockets.
/// Dropping the proxy closes its listener and all its connections.
pub struct Proxy {
    shared: Arc<Shared>,
    addr: SocketAddr,
    runtime: Option<Runtime>,
}

impl fmt::Debug for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Proxy")
            .field("addr", &self.addr)
            .field("target", &self.target())
            .field("blackholed", &self.is_blackholed())
            .field("connections", &self.connections())
            .finish()
    }
}

struct ConnCtl {
    blackholed: watch::Sender<bool>,
    kill: watch::Sender<bool>,
}

struct Shared {
    target: Mutex<SocketAddr>,
    blackholed: watch::Sender<bool>,
    reject_new: AtomicBool,
    cut_armed: AtomicBool,
    next_id: AtomicU64,
    accepted: AtomicU64,
    cuts: AtomicU64,
    conns: Mutex<BTreeMap<u64, ConnCtl>>,
    conns_changed: Condvar,
    active: watch::Sender<usize>,
}

impl Shared {
    fn conns(&self) -> MutexGuard<'_, BTreeMap<u64, ConnCtl>> {
        self.conns.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn target(&self) -> SocketAddr {
        *self.target.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn register(&self, id: u64, ctl: ConnCtl) {
        let mut conns = self.conns();
        conns.insert(id, ctl);
        self.active.send_replace(conns.len());
        self.conns_changed.notify_all();
    }

    fn unregister(&self, id: u64) {
        let mut conns = self.conns();
        conns.remove(&id);
        self.active.send_replace(conns.len());
        self.conns_changed.notify_all();
    }
}

/// Removes a connection from the registry when its task ends (or is dropped).
struct Registration {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.shared.unregister(self.id);
    }
}

impl Proxy {
    /// Starts a proxy on `127.0.0.1:<free port>` forwarding to `target`.
    ///
    /// # Errors
    ///
    /// [`FixtureError::Io`] when the port or the runtime cannot be set up.
    pub fn start(target: SocketAddr) -> Result<Proxy> {
        Proxy::start_on(Ipv4Addr::LOCALHOST, target)
    }

    /// Starts a proxy on `<listen>:<free port>` forwarding to `target`: a
    /// server reached under another loopback address than its own, e.g. a
    /// TLS server at an address its certificate does not name.
    ///
    /// # Errors
    ///
    /// [`FixtureError::Io`] when the port or the runtime cannot be set up.
    pub fn start_on(listen: Ipv4Addr, target: SocketAddr) -> Result<Proxy> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("zkelect-proxy")
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| FixtureError::io("cannot build the proxy runtime", e))?;
        let std_listener = std::net::TcpListener::bind((listen, 0))
            .map_err(|e| FixtureError::io("cannot bind the proxy port", e))?;
        std_listener
            .set_nonblocking(true)
            .map_err(|e| FixtureError::io("cannot make the proxy port non-blocking", e))?;
        let addr = std_listener
            .local_addr()
            .map_err(|e| FixtureError::io("cannot read the proxy address", e))?;
        let listener = {
            let _context = runtime.enter();
            TcpListener::from_std(std_listener)
                .map_err(|e| FixtureError::io("cannot register the proxy port", e))?
        };
        let shared = Arc::new(Shared {
            target: Mutex::new(target),
            blackholed: watch::Sender::new(false),
            reject_new: AtomicBool::new(false),
            cut_armed: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            accepted: AtomicU64::new(0),
            cuts: AtomicU64::new(0),
            conns: Mutex::new(BTreeMap::new()),
            conns_changed: Condvar::new(),
            active: watch::Sender::new(0),
        });
        runtime.spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(Proxy {
            shared,
            addr,
            runtime: Some(runtime),
        })
    }

    /// Joins the proxies' `connect_string()`s with commas, for a client of an
    /// ensemble reached through one proxy per node.
    pub fn connect_string_of(proxies: &[Proxy]) -> String {
        proxies
            .iter()
            .map(Proxy::connect_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The address clients should connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `127.0.0.1:<port>`, for a ZooKeeper client.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// Where new connections are forwarded to.
    pub fn target(&self) -> SocketAddr {
        self.shared.target()
    }

    /// Changes where *new* connections are forwarded to (current ones keep
    /// their server).
    pub fn set_target(&self, target: SocketAddr) {
        *self
            .shared
            .target
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = target;
    }

    /// Stops forwarding bytes in both directions on every connection, current
    /// and future, without closing any socket. Undo with [`Proxy::heal`].
    pub fn blackhole(&self) {
        self.shared.blackholed.send_replace(true);
    }

    /// Resumes forwarding everywhere (clearing per-connection black holes
    /// too); bytes held meanwhile are delivered in order.
    pub fn heal(&self) {
        self.shared.blackholed.send_replace(false);
        for ctl in self.shared.conns().values() {
            ctl.blackholed.send_replace(false);
        }
    }

    /// Whether [`Proxy::blackhole`] is in force.
    pub fn is_blackholed(&self) -> bool {
        *self.shared.blackholed.borrow()
    }

    /// Black-holes one connection only. Returns `false` if it no longer exists.
    pub fn blackhole_connection(&self, id: ConnectionId) -> bool {
        self.shared
            .conns()
            .get(&id.0)
            .map(|ctl| ctl.blackholed.send_replace(true))
            .is_some()
    }

    /// Resumes one connection black-holed by [`Proxy::blackhole_connection`]
    /// (a global [`Proxy::blackhole`] still holds it). Returns `false` if it no
    /// longer exists.
    pub fn heal_connection(&self, id: ConnectionId) -> bool {
        self.shared
            .conns()
            .get(&id.0)
            .map(|ctl| ctl.blackholed.send_replace(false))
            .is_some()
    }

    /// Resets (RST) every current connection, on the client's side and on the
    /// server's, and returns how many there were. Requests in flight are lost;
    /// a ZooKeeper client sees a connection loss and reconnects (through the
    /// proxy again).
    pub fn cut(&self) -> usize {
        let ids: Vec<u64> = {
            let conns = self.shared.conns();
            for ctl in conns.values() {
                ctl.kill.send_replace(true);
            }
            conns.keys().copied().collect()
        };
        self.wait_gone(&ids);
        ids.len()
    }

    /// Resets one connection. Returns `false` if it no longer exists.
    pub fn cut_connection(&self, id: ConnectionId) -> bool {
        let found = self
            .shared
            .conns()
            .get(&id.0)
            .map(|ctl| ctl.kill.send_replace(true))
            .is_some();
        if found {
            self.wait_gone(&[id.0]);
        }
        found
    }

    fn wait_gone(&self, ids: &[u64]) {
        let conns = self.shared.conns();
        let _ = self
            .shared
            .conns_changed
            .wait_timeout_while(conns, CUT_WAIT, |conns| {
                ids.iter().any(|id| conns.contains_key(id))
            });
    }

    /// Arms a one-shot fault: the next ZooKeeper request a client sends
    /// through this proxy (on any connection; pings, auth and the connect
    /// handshake do not count) is forwarded to the server, the server's reply
    /// is swallowed (the proxy waits up to 2 s for it), and then the connection
    /// is reset on both sides. The request has taken effect on the server, but
    /// the client gets a connection loss.
    ///
    /// This reads ZooKeeper's framing (4-byte length, then `xid`); on another
    /// protocol it never fires.
    pub fn cut_after_next_request(&self) {
        self.shared.cut_armed.store(true, Ordering::SeqCst);
    }

    /// Whether a [`Proxy::cut_after_next_request`] is still waiting for its
    /// request.
    pub fn is_cut_armed(&self) -> bool {
        self.shared.cut_armed.load(Ordering::SeqCst)
    }

    /// Withdraws a pending [`Proxy::cut_after_next_request`].
    pub fn disarm_cut(&self) {
        self.shared.cut_armed.store(false, Ordering::SeqCst);
    }

    /// While `reject` is true, new connections are accepted and immediately
    /// reset (as if the server's port were closed).
    pub fn reject_new_connections(&self, reject: bool) {
        self.shared.reject_new.store(reject, Ordering::SeqCst);
    }

    /// The connections open right now.
    pub fn connections(&self) -> Vec<ConnectionId> {
        self.shared
            .conns()
            .keys()
            .map(|&id| ConnectionId(id))
            .collect()
    }

    /// How many connections are open right now.
    pub fn active_count(&self) -> usize {
        self.shared.conns().len()
    }

    /// How many connections were accepted since the proxy started.
    pub fn accepted_count(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// How many connections the proxy reset on purpose ([`Proxy::cut`],
    /// [`Proxy::cut_connection`], [`Proxy::cut_after_next_request`],
    /// [`Proxy::reject_new_connections`]).
    pub fn cut_count(&self) -> u64 {
        self.shared.cuts.load(Ordering::SeqCst)
    }

    /// Waits (async) until at least `count` connections are open.
    ///
    /// # Errors
    ///
    /// [`FixtureError::Timeout`]. Must run inside a tokio runtime with timers.
    pub async fn wait_for_active(&self, count: usize, timeout: Duration) -> Result<()> {
        let mut active = self.shared.active.subscribe();
        let reached = tokio::time::timeout(timeout, active.wait_for(|n| *n >= count))
            .await
            .is_ok_and(|r| r.is_ok());
        if reached {
            Ok(())
        } else {
            Err(FixtureError::Timeout {
                what: format!("{count} open connection(s) through the proxy"),
                timeout,
            })
        }
    }

    /// Waits (blocking the thread) until at least `count` connections are
    /// open. Do not call it on the runtime thread that drives the client.
    ///
    /// # Errors
    ///
    /// [`FixtureError::Timeout`].
    pub fn wait_for_active_blocking(&self, count: usize, timeout: Duration) -> Result<()> {
        let conns = self.shared.conns();
        let (conns, _) = self
            .shared
            .conns_changed
            .wait_timeout_while(conns, timeout, |conns| conns.len() < count)
            .unwrap_or_else(PoisonError::into_inner);
        if conns.len() >= count {
            Ok(())
        } else {
            Err(FixtureError::Timeout {
                what: format!("{count} open connection(s) through the proxy"),
                timeout,
            })
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            // Never blocks, so dropping a proxy inside an async test is fine.
            runtime.shutdown_background();
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            // E.g. EMFILE: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        if shared.reject_new.load(Ordering::SeqCst) {
            shared.cuts.fetch_add(1, Ordering::SeqCst);
            reset(client);
            continue;
        }
        let (blackholed, blackholed_rx) = watch::channel(false);
        let (kill, kill_rx) = watch::channel(false);
        shared.register(id, ConnCtl { blackholed, kill });
        let registration = Registration {
            shared: Arc::clone(&shared),
            id,
        };
        let flow = Flow {
            global: shared.blackholed.subscribe(),
            local: blackholed_rx,
        };
        tokio::spawn(connection(registration, client, flow, kill_rx));
    }
}

/// Closes a socket with an RST instead of a FIN.
fn reset(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

/// Whether bytes may flow (no global and no per-connection black hole).
#[derive(Clone)]
struct Flow {
    global: watch::Receiver<bool>,
    local: watch::Receiver<bool>,
}

impl Flow {
    async fn wait_flowing(&mut self) {
        loop {
            if !*self.global.borrow_and_update() && !*self.local.borrow_and_update() {
                return;
            }
            tokio::select! {
                r = self.global.changed() => if r.is_err() { std::future::pending::<()>().await },
                r = self.local.changed() => if r.is_err() { std::future::pending::<()>().await },
            }
        }
    }
}

async fn killed(kill: &mut watch::Receiver<bool>) {
    loop {
        if *kill.borrow_and_update() {
            return;
        }
        if kill.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

enum Ending {
    /// Both sides closed normally.
    Graceful,
    /// Reset both sides (an error on one side, or the connection was cut).
    Reset { on_purpose: bool },
}

async fn connection(
    registration: Registration,
    client: TcpStream,
    mut flow: Flow,
    mut kill: watch::Receiver<bool>,
) {
    let shared = Arc::clone(&registration.shared);
    // A connection accepted while black-holed is held: no connection to the
    // target until healed.
    tokio::select! {
        biased;
        () = killed(&mut kill) => {
            shared.cuts.fetch_add(1, Ordering::SeqCst);
            reset(client);
            return;
        }
        () = flow.wait_flowing() => {}
    }
    let target = shared.target();
    let upstream = tokio::select! {
        biased;
        () = killed(&mut kill) => {
            shared.cuts.fetch_add(1, Ordering::SeqCst);
            reset(client);
            return;
        }
        r = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(target)) => r,
    };
    let Ok(Ok(upstream)) = upstream else {
        // Like a closed port, as far as the client can tell; but not at once:
        // clients that reconnect without pausing (zookeeper-async does after
        // a reset) would spin.
        tokio::time::sleep(REFUSED_RESET_DELAY).await;
        reset(client);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let mut client = client;
    let mut upstream = upstream;
    let ending = relay(&shared, &mut client, &mut upstream, flow, &mut kill).await;
    match ending {
        Ending::Graceful => {}
        Ending::Reset { on_purpose } => {
            if on_purpose {
                shared.cuts.fetch_add(1, Ordering::SeqCst);
            }
            reset(client);
            reset(upstream);
        }
    }
    drop(registration);
}

/// How a connection is being cut after a request: once `severed`, nothing
/// more reaches the client, and the server's reply to `xid` ends the
/// connection.
struct CutAfterRequest {
    severed: AtomicBool,
    xid: AtomicI64,
}

enum PumpEnd {
    Eof,
    Error,
    /// The client-to-server pump forwarded the request to cut after.
    Triggered,
    /// The server-to-client pump saw the reply to that request.
    ReplySeen,
}

async fn relay(
    shared: &Shared,
    client: &mut TcpStream,
    upstream: &mut TcpStream,
    flow: Flow,
    kill: &mut watch::Receiver<bool>,
) -> Ending {
    let (mut client_read, mut client_write) = client.split();
    let (mut server_read, mut server_write) = upstream.split();
    let cut = CutAfterRequest {
        severed: AtomicBool::new(false),
        xid: AtomicI64::new(i64::MIN),
    };
    let to_server = pump_to_server(
        shared,
        &mut client_read,
        &mut server_write,
        flow.clone(),
        &cut,
    );
    let to_client = pump_to_client(&mut server_read, &mut client_write, flow, &cut);
    tokio::pin!(to_server, to_client);
    let (mut to_server_done, mut to_client_done) = (false, false);
    let mut reply_deadline: Option<Instant> = None;
    loop {
        let deadline = async {
            match reply_deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = killed(kill) => return Ending::Reset { on_purpose: true },
            end = &mut to_server, if !to_server_done => {
                to_server_done = true;
                match end {
                    PumpEnd::Triggered => reply_deadline = Some(Instant::now() + REPLY_WAIT),
                    PumpEnd::Eof | PumpEnd::ReplySeen => {}
                    PumpEnd::Error => return Ending::Reset { on_purpose: false },
                }
            }
            end = &mut to_client, if !to_client_done => {
                to_client_done = true;
                if reply_deadline.is_some() {
                    return Ending::Reset { on_purpose: true };
                }
                match end {
                    PumpEnd::Eof => {}
                    PumpEnd::Error | PumpEnd::Triggered | PumpEnd::ReplySeen => {
                        return Ending::Reset { on_purpose: false };
                    }
                }
            }
            () = deadline => return Ending::Reset { on_purpose: true },
        }
        if to_server_done && to_client_done {
            return Ending::Graceful;
        }
    }
}

async fn pump_to_server(
    shared: &Shared,
    from: &mut ReadHalf<'_>,
    to: &mut WriteHalf<'_>,
    mut flow: Flow,
    cut: &CutAfterRequest,
) -> PumpEnd {
    let mut framer = Framer::default();
    let mut buf = vec![0u8; BUFFER];
    loop {
        flow.wait_flowing().await;
        let n = match from.read(&mut buf).await {
            Ok(0) => {
                let _ = to.shutdown().await;
                return PumpEnd::Eof;
            }
            Ok(n) => n,
            Err(_) => return PumpEnd::Error,
        };
        let mut trigger_xid = None;
        let split = framer.feed(&buf[..n], |frame| {
            let is_request = frame.index >= 1 && frame.xid.is_some_and(|xid| xid >= 0);
            if is_request
                && shared
                    .cut_armed
                    .compare_exchange(true, false, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            {
                trigger_xid = frame.xid;
                true
            } else {
                false
            }
        });
        // Bytes read just before a black hole began are held too.
        flow.wait_flowing().await;
        if let (Some(end), Some(xid)) = (split, trigger_xid) {
            cut.xid.store(i64::from(xid), Ordering::SeqCst);
            cut.severed.store(true, Ordering::SeqCst);
            if to.write_all(&buf[..end]).await.is_err() {
                return PumpEnd::Error;
            }
            return PumpEnd::Triggered;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return PumpEnd::Error;
        }
    }
}

async fn pump_to_client(
    from: &mut ReadHalf<'_>,
    to: &mut WriteHalf<'_>,
    mut flow: Flow,
    cut: &CutAfterRequest,
) -> PumpEnd {
    let mut framer = Framer::default();
    let mut buf = vec![0u8; BUFFER];
    loop {
        flow.wait_flowing().await;
        let n = match from.read(&mut buf).await {
            Ok(0) => {
                if !cut.severed.load(Ordering::SeqCst) {
                    let _ = to.shutdown().await;
                }
                return PumpEnd::Eof;
            }
            Ok(n) => n,
            Err(_) => return PumpEnd::Error,
        };
        if cut.severed.load(Ordering::SeqCst) {
            // Swallow everything; stop at the reply to the request.
            let want = cut.xid.load(Ordering::SeqCst);
            let seen = framer.feed(&buf[..n], |frame| {
                frame.index >= 1 && frame.xid.map(i64::from) == Some(want)
            });
            if seen.is_some() {
                return PumpEnd::ReplySeen;
            }
            continue;
        }
        // These bytes were received before the request to cut after (if any)
        // was forwarded, so they cannot hold its reply: deliver them.
        framer.feed(&buf[..n], |_| false);
        flow.wait_flowing().await;
        if to.write_all(&buf[..n]).await.is_err() {
            return PumpEnd::Error;
        }
    }
}

/// One complete frame of ZooKeeper's protocol.
#[derive(Debug, Clone, Copy)]
struct Frame {
    /// 0 for the connect request/response, then 1, 2, ...
    index: u64,
    /// The first 4 bytes of the body: the `xid` of requests and replies
    /// (`-2` pings, `-4` auth, `-8` set-watches, `-1` notifications).
    xid: Option<i32>,
}

/// Follows ZooKeeper's length-prefixed framing across reads.
#[derive(Debug, Default)]
struct Framer {
    header: [u8; 4],
    header_len: usize,
    remaining: usize,
    prefix: [u8; 4],
    prefix_len: usize,
    frames: u64,
    broken: bool,
}

impl Framer {
    /// Consumes `data`, calling `on_frame` at the end of each complete frame;
    /// when it returns true, stops and returns the offset just past that frame.
    fn feed(&mut self, data: &[u8], mut on_frame: impl FnMut(Frame) -> bool) -> Option<usize> {
        let mut i = 0;
        while i < data.len() && !self.broken {
            if self.header_len < 4 {
                let take = (4 - self.header_len).min(data.len() - i);
                self.header[self.header_len..self.header_len + take]
                    .copy_from_slice(&data[i..i + take]);
                self.header_len += take;
                i += take;
                if self.header_len == 4 {
                    match usize::try_from(i32::from_be_bytes(self.header)) {
                        Ok(len) if len <= MAX_FRAME => self.remaining = len,
                        _ => {
                            self.broken = true;
                            return None;
                        }
                    }
                    self.prefix_len = 0;
                }
            } else {
                let take = self.remaining.min(data.len() - i);
                let want = (4 - self.prefix_len).min(take);
                self.prefix[self.prefix_len..self.prefix_len + want]
                    .copy_from_slice(&data[i..i + want]);
                self.prefix_len += want;
                self.remaining -= take;
                i += take;
            }
            if self.header_len == 4 && self.remaining == 0 {
                let frame = Frame {
                    index: self.frames,
                    xid: (self.prefix_len == 4).then(|| i32::from_be_bytes(self.prefix)),
                };
                self.frames += 1;
                self.header_len = 0;
                self.prefix_len = 0;
                if on_frame(frame) {
                    return Some(i);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut out = u32::try_from(body.len()).unwrap().to_be_bytes().to_vec();
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn framer_finds_frames_across_chunks() {
        let mut stream = frame(&[0; 40]); // connect
        stream.extend(frame(&[0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 11])); // ping
        stream.extend(frame(&[0, 0, 0, 7, 0, 0, 0, 1, 9, 9])); // xid 7
        let end_of_request = stream.len();
        stream.extend(frame(&[0, 0, 0, 8]));
        for chunk in [1, 3, 5, 1000] {
            let mut framer = Framer::default();
            let mut seen = Vec::new();
            let mut stop = None;
            let mut offset = 0;
            for piece in stream.chunks(chunk) {
                if let Some(end) = framer.feed(piece, |f| {
                    seen.push((f.index, f.xid));
                    f.xid == Some(7) && f.index > 0
                }) {
                    stop = Some(offset + end);
                    break;
                }
                offset += piece.len();
            }
            assert_eq!(stop, Some(end_of_request), "chunk size {chunk}");
            assert_eq!(seen[1], (1, Some(-2)));
            assert_eq!(seen[2], (2, Some(7)));
        }
    }

    #[test]
    fn framer_gives_up_on_other_protocols() {
        let mut framer = Framer::default();
        assert_eq!(framer.feed(b"ruok", |_| true), None);
        assert!(framer.broken);
    }
}
