//! The bytes and clocks of the start-up: resolving names, asking servers
//! with ConnectRequests of our own, and feeding what happened to the core's
//! start-up machine ([`zkelect_core::startup`]), which makes every decision
//! (who to ask, per-server deadlines, when the answers suffice, the servers
//! the client gets, the session-timeout bound, re-asks and their backoff,
//! when to give up). Both real transports start through it: zookeeper-async
//! to learn the negotiated session timeout ([`Learn::SessionTimeout`]),
//! zookeeper-client to leave out servers that accept connections and never
//! answer ([`Learn::Liveness`]).
//!
//! # The asks
//!
//! | ask | request | what the server does | cost to the ensemble |
//! |---|---|---|---|
//! | session timeout | ConnectRequest for a new session with the real requested timeout, then CloseSession | negotiates the timeout as for the real session, answers it, closes the session | a session created and closed (two logged transactions), **once per process, server and requested timeout**: answers are kept for the process's life ([`asked`]) |
//! | liveness | ConnectRequest to re-attach a session id no server issues, with an empty password | refuses it with a ConnectResponse of timeout 0 and closes the connection (`Invalid session … probably expired`, after an `Incorrect password` warning) | no session, no transaction: one warning line in its log |
//! | liveness over TLS | a TLS handshake with the client's trust settings | completes the handshake (a frozen JVM does not) | a TLS connection |
//!
//! Answers kept for the process's life: a server restarted with another
//! `maxSessionTimeout` is not noticed by a running process (nor by its
//! running sessions, whose leases rest on the same answer); lower the bound
//! by hand ahead of such a change (`ZkAsyncOptions::assume_session_timeout`)
//! or restart the clients.
//!
//! Wire format (ZooKeeper's jute encoding, big-endian; every frame is
//! prefixed with its length as a 4-byte int):
//!
//! | frame | fields |
//! |---|---|
//! | ConnectRequest | `protocolVersion: int = 0`, `lastZxidSeen: long = 0`, `timeOut: int` (ms), `sessionId: long`, `passwd: buffer` (int length, then 16 bytes), `readOnly: bool = false` |
//! | ConnectResponse | `protocolVersion: int`, `timeOut: int` (ms), `sessionId: long`, `passwd: buffer`, `readOnly: bool` (absent from servers before 3.4) |
//! | CloseSession | `xid: int`, `type: int = -11`; answered by `xid: int`, `zxid: long`, `err: int` |
// Each transport uses its half: the session-timeout asks are
// zookeeper-async's, the liveness asks zookeeper-client's.
#![cfg_attr(
    not(all(feature = "zookeeper-async", feature = "zookeeper-client")),
    allow(dead_code)
)]

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{debug, warn};
use zkelect_core::connect_string::{ConnectString, Server};
use zkelect_core::startup::{
    AskFailure, LeftOut, Phase, Plan, Startup, StartupCommand, StartupConfig, StartupError,
    StartupNotice,
};
use zkelect_core::Timestamp;

use crate::error::{ConnectFailure, SessionError};

/// ZooKeeper's opcode for closing a session.
const OP_CLOSE_SESSION: i32 = -11;
/// The largest frame accepted from a server during an ask: a
/// ConnectResponse is 36 to 41 bytes with a 16-byte password, a close
/// reply 16.
const MAX_FRAME: usize = 4_096;
/// How long closing an ask's session may take; after that it is left to
/// expire on its own (its timeout is the one just learned).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);
/// The session id a liveness ask asks to re-attach: no server issues it
/// (a server's ids carry its `myid` in the top byte and a time below, and
/// `0x7a…` is `myid` 122 in 1970), and with an empty password the server
/// refuses it without creating anything.
const NO_SUCH_SESSION: i64 = 0x7a6b_656c_6563_7400;

/// What one ask of one server came to.
pub(crate) type Answer = Result<Option<Duration>, AskFailure>;

/// The future of one ask.
pub(crate) type Asking = Pin<Box<dyn Future<Output = Answer> + Send>>;

/// How to ask server `index` (of the connect string) at `addr` by `deadline`.
pub(crate) type Asker = Arc<dyn Fn(usize, SocketAddr, Instant) -> Asking + Send + Sync>;

/// The ConnectRequest frame (length prefix included) asking for a new
/// session (`session_id` 0) or to re-attach `session_id`, with `timeout`
/// requested.
pub(crate) fn connect_request(timeout: Duration, session_id: i64) -> Vec<u8> {
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    let mut body = Vec::with_capacity(45);
    body.extend_from_slice(&0_i32.to_be_bytes()); // protocolVersion
    body.extend_from_slice(&0_i64.to_be_bytes()); // lastZxidSeen
    body.extend_from_slice(&ms.to_be_bytes()); // timeOut
    body.extend_from_slice(&session_id.to_be_bytes()); // sessionId
    body.extend_from_slice(&16_i32.to_be_bytes()); // passwd length
    body.extend_from_slice(&[0; 16]); // passwd
    body.push(0); // readOnly
    frame(&body)
}

/// The CloseSession frame (length prefix included).
pub(crate) fn close_request(xid: i32) -> Vec<u8> {
    let mut body = Vec::with_capacity(8);
    body.extend_from_slice(&xid.to_be_bytes());
    body.extend_from_slice(&OP_CLOSE_SESSION.to_be_bytes());
    frame(&body)
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 4);
    // Bodies built here are a few dozen bytes.
    let len = i32::try_from(body.len()).unwrap_or(i32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// What one server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectResponse {
    /// The server's protocol version.
    pub(crate) protocol_version: i32,
    /// The negotiated session timeout (zero: no session).
    pub(crate) timeout: Duration,
    /// The session the ask opened (zero: none).
    pub(crate) session_id: i64,
    /// Whether the session is read-only (`None` from servers that omit it).
    pub(crate) read_only: Option<bool>,
}

/// Reads big-endian fields off a frame, refusing to run past its end.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8], String> {
        if self.0.len() < n {
            return Err(format!("the ConnectResponse ends before its {what}"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn int(&mut self, what: &str) -> Result<i32, String> {
        let mut b = [0; 4];
        b.copy_from_slice(self.take(4, what)?);
        Ok(i32::from_be_bytes(b))
    }

    fn long(&mut self, what: &str) -> Result<i64, String> {
        let mut b = [0; 8];
        b.copy_from_slice(self.take(8, what)?);
        Ok(i64::from_be_bytes(b))
    }
}

/// Parses a ConnectResponse body (without its length prefix), with or
/// without a session.
pub(crate) fn parse_connect_response(body: &[u8]) -> Result<ConnectResponse, String> {
    let mut f = Fields(body);
    let protocol_version = f.int("protocolVersion")?;
    let timeout_ms = f.int("timeOut")?;
    let session_id = f.long("sessionId")?;
    let passwd_len = f.int("passwd length")?;
    // -1 is jute's null buffer.
    if passwd_len > 0 {
        let n = usize::try_from(passwd_len).map_err(|_| "a bad passwd length".to_owned())?;
        f.take(n, "passwd")?;
    }
    let read_only = match f.0 {
        [] => None,
        [flag, ..] => Some(*flag != 0),
    };
    if timeout_ms < 0 {
        return Err(format!("a negative session timeout ({timeout_ms} ms)"));
    }
    Ok(ConnectResponse {
        protocol_version,
        timeout: Duration::from_millis(timeout_ms.unsigned_abs().into()),
        session_id,
        read_only,
    })
}

/// Reads one length-prefixed frame.
async fn read_frame(stream: &mut TcpStream) -> Result<Vec<u8>, AskFailure> {
    let mut len = [0; 4];
    stream
        .read_exact(&mut len)
        .await
        .map_err(|e| AskFailure::Broken(format!("no ConnectResponse: {e}")))?;
    let len = i32::from_be_bytes(len);
    let len = usize::try_from(len)
        .ok()
        .filter(|n| *n <= MAX_FRAME)
        .ok_or_else(|| {
            AskFailure::Broken(format!("not a ZooKeeper server: a frame of {len} bytes"))
        })?;
    let mut body = vec![0; len];
    stream
        .read_exact(&mut body)
        .await
        .map_err(|e| AskFailure::Broken(format!("a truncated ConnectResponse: {e}")))?;
    Ok(body)
}

/// Opens a connection to `addr`: a refusal is [`AskFailure::Refused`].
async fn open(addr: SocketAddr) -> Result<TcpStream, AskFailure> {
    let stream = TcpStream::connect(addr).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::ConnectionRefused {
            AskFailure::Refused(e.to_string())
        } else {
            AskFailure::Broken(format!("cannot connect: {e}"))
        }
    })?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// One ConnectRequest and its answer.
async fn exchange(
    addr: SocketAddr,
    request: &[u8],
) -> Result<(ConnectResponse, TcpStream), AskFailure> {
    let mut stream = open(addr).await?;
    stream
        .write_all(request)
        .await
        .map_err(|e| AskFailure::Broken(format!("cannot send a ConnectRequest: {e}")))?;
    let body = read_frame(&mut stream).await?;
    let response = parse_connect_response(&body).map_err(AskFailure::Broken)?;
    Ok((response, stream))
}

/// Closes an ask's session, so it does not hold server resources for its
/// whole timeout. Best effort, bounded: a session left behind expires.
async fn close_session(mut stream: TcpStream, session_id: i64) {
    let polite = async {
        stream.write_all(&close_request(1)).await.ok()?;
        read_frame(&mut stream).await.ok()
    };
    match tokio::time::timeout(CLOSE_TIMEOUT, polite).await {
        Ok(Some(_)) => debug!(session = format!("{session_id:#x}"), "ask's session closed"),
        _ => debug!(
            session = format!("{session_id:#x}"),
            "ask's session not closed; it will expire"
        ),
    }
}

/// The session timeout `addr` negotiates for `requested`: a session opened
/// and closed at once.
async fn ask_session_timeout(
    addr: SocketAddr,
    requested: Duration,
) -> Result<Duration, AskFailure> {
    let (response, stream) = exchange(addr, &connect_request(requested, 0)).await?;
    if response.timeout.is_zero() || response.session_id == 0 {
        return Err(AskFailure::Broken(format!(
            "the server gave no session (timeOut {:?}, sessionId {:#x})",
            response.timeout, response.session_id
        )));
    }
    debug!(
        %addr,
        timeout = ?response.timeout,
        protocol = response.protocol_version,
        read_only = ?response.read_only,
        "the server's negotiated session timeout"
    );
    close_session(stream, response.session_id).await;
    Ok(response.timeout)
}

/// Whether `addr` answers a ConnectRequest, without a session being made
/// (see [`NO_SUCH_SESSION`]).
pub(crate) async fn ask_alive(addr: SocketAddr, requested: Duration) -> Result<(), AskFailure> {
    let (response, _stream) = exchange(addr, &connect_request(requested, NO_SUCH_SESSION)).await?;
    debug!(%addr, ?response, "the server answers");
    Ok(())
}

/// One slot per (server address, requested timeout): the answer once
/// known, and a lock so that one ask at a time goes to a server from the
/// whole process.
type Slot = Arc<tokio::sync::Mutex<Option<Duration>>>;

fn slots() -> &'static Mutex<BTreeMap<(SocketAddr, Duration), Slot>> {
    static SLOTS: OnceLock<Mutex<BTreeMap<(SocketAddr, Duration), Slot>>> = OnceLock::new();
    SLOTS.get_or_init(|| Mutex::new(BTreeMap::new()))
}

/// The session timeout `addr` negotiates for `requested`, asked once per
/// process: a known answer is given again at once, and while one ask of
/// `addr` is out, another waits for it instead of opening a second session.
pub(crate) async fn asked(addr: SocketAddr, requested: Duration) -> Result<Duration, AskFailure> {
    let slot = {
        // A poisoned lock only loses the answers: ask again.
        let mut table = slots()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(table.entry((addr, requested)).or_default())
    };
    let mut known = slot.lock().await;
    if let Some(answer) = *known {
        return Ok(answer);
    }
    let answer = ask_session_timeout(addr, requested).await?;
    *known = Some(answer);
    Ok(answer)
}

/// The asker of [`Learn::SessionTimeout`](zkelect_core::startup::Learn):
/// the process-wide [`asked`], bounded by the ask's deadline.
pub(crate) fn session_timeout_asker(requested: Duration) -> Asker {
    Arc::new(move |_, addr, deadline| {
        Box::pin(async move {
            match tokio::time::timeout_at(deadline, asked(addr, requested)).await {
                Ok(answer) => answer.map(Some),
                Err(_) => Err(AskFailure::Silent),
            }
        })
    })
}

/// The asker of [`Learn::Liveness`](zkelect_core::startup::Learn) over plain TCP.
pub(crate) fn liveness_asker(requested: Duration) -> Asker {
    Arc::new(move |_, addr, deadline| {
        Box::pin(async move {
            match tokio::time::timeout_at(deadline, ask_alive(addr, requested)).await {
                Ok(answer) => answer.map(|()| None),
                Err(_) => Err(AskFailure::Silent),
            }
        })
    })
}

/// What a spawned resolution or ask came to.
enum Outcome {
    Resolved(usize, Result<SocketAddr, String>),
    Asked(usize, u32, Answer),
}

/// Runs the core's [`Startup`] machine: performs its commands, feeds their
/// outcomes and the time back, logs its notices.
pub(crate) struct Driver {
    machine: Startup,
    epoch: Instant,
    servers: Vec<Server>,
    chroot: Option<String>,
    addrs: Vec<Option<SocketAddr>>,
    tasks: JoinSet<Outcome>,
    asker: Asker,
}

impl Driver {
    /// A start-up of `split`'s servers under `config`, asking with `asker`.
    pub(crate) fn new(split: ConnectString, mut config: StartupConfig, asker: Asker) -> Self {
        let epoch = Instant::now();
        config.servers = split.servers.len();
        // The jitter only has to differ between processes and connects.
        config.seed = u64::from(std::process::id()) ^ (epoch.elapsed().subsec_nanos() as u64);
        Self {
            machine: Startup::new(Timestamp::ZERO, config),
            epoch,
            addrs: vec![None; split.servers.len()],
            servers: split.servers,
            chroot: split.chroot,
            tasks: JoinSet::new(),
            asker,
        }
    }

    fn now(&self) -> Timestamp {
        Timestamp::from_millis(u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX))
    }

    fn instant(&self, at: Timestamp) -> Instant {
        self.epoch + Duration::from_millis(at.as_millis())
    }

    /// Server `index` as written (scheme, host, port).
    pub(crate) fn server(&self, index: usize) -> &Server {
        &self.servers[index]
    }

    /// Server `index`'s address, once resolved.
    pub(crate) fn addr(&self, index: usize) -> Option<SocketAddr> {
        self.addrs.get(index).copied().flatten()
    }

    /// The connect string's chroot.
    pub(crate) fn chroot(&self) -> Option<&str> {
        self.chroot.as_deref()
    }

    /// The machine, for what the adapter reports (the client's outcome).
    pub(crate) fn machine(&mut self) -> &mut Startup {
        &mut self.machine
    }

    /// The client could not connect: it is tried again, or the start refused.
    pub(crate) fn client_failed(&mut self, reason: String) {
        let now = self.now();
        self.machine.client_failed(now, reason);
    }

    /// The client connected (again): listed servers without an answer are
    /// asked again before the bound is confirmed.
    pub(crate) fn client_connected(&mut self) {
        let now = self.now();
        self.machine.client_connected(now);
    }

    /// Runs until the machine says how to start the client, or refuses.
    pub(crate) async fn next_plan(&mut self) -> Result<Plan, StartupError> {
        loop {
            if let Some(plan) = self.perform() {
                return Ok(plan);
            }
            if let Phase::Refused(e) = self.machine.phase() {
                return Err(e.clone());
            }
            self.wait(None).await;
        }
    }

    /// Runs until the bound is confirmed (after [`client_connected`](Self::client_connected)).
    pub(crate) async fn confirmed(&mut self) -> Option<Duration> {
        loop {
            let _ = self.perform();
            if let Some(bound) = self.machine.confirmed_bound() {
                return Some(bound);
            }
            if self.machine.bound().is_none() || matches!(self.machine.phase(), Phase::Refused(_)) {
                return None;
            }
            self.wait(None).await;
        }
    }

    /// Keeps asking in the background for as long as the transport lives:
    /// each request is a (re)connection of the client, answered with the
    /// bound once confirmed.
    pub(crate) async fn run(
        mut self,
        mut requests: mpsc::UnboundedReceiver<oneshot::Sender<Duration>>,
    ) {
        let mut waiting: Vec<oneshot::Sender<Duration>> = Vec::new();
        loop {
            let _ = self.perform();
            if !waiting.is_empty() {
                if let Some(bound) = self.machine.confirmed_bound() {
                    for reply in waiting.drain(..) {
                        let _ = reply.send(bound);
                    }
                }
            }
            tokio::select! {
                request = requests.recv() => match request {
                    Some(reply) => {
                        self.client_connected();
                        waiting.push(reply);
                    }
                    None => return,
                },
                () = self.wait(Some(())) => {}
            }
        }
    }

    /// Performs the machine's commands; returns a plan if one came.
    fn perform(&mut self) -> Option<Plan> {
        while let Some(notice) = self.machine.poll_notice() {
            self.log(&notice);
        }
        while let Some(command) = self.machine.poll_command() {
            match command {
                StartupCommand::Resolve { server, deadline } => {
                    let name = self.servers[server].host_port();
                    let deadline = self.instant(deadline);
                    self.tasks.spawn(async move {
                        let found =
                            tokio::time::timeout_at(deadline, tokio::net::lookup_host(name))
                                .await
                                .map_err(|_| "resolving it took too long".to_owned())
                                .and_then(|r| r.map_err(|e| e.to_string()))
                                // The first address, as zookeeper-async takes it.
                                .and_then(|mut addrs| {
                                    addrs.next().ok_or_else(|| "no address".to_owned())
                                });
                        Outcome::Resolved(server, found)
                    });
                }
                StartupCommand::Ask {
                    server,
                    attempt,
                    deadline,
                } => {
                    let Some(addr) = self.addr(server) else {
                        continue;
                    };
                    let asking = (self.asker)(server, addr, self.instant(deadline));
                    self.tasks
                        .spawn(async move { Outcome::Asked(server, attempt, asking.await) });
                }
                StartupCommand::Connect { plan, .. } => return Some(plan),
            }
        }
        None
    }

    /// Waits for one outcome or the machine's next deadline and feeds it
    /// in. With `forever`, waits without end when there is nothing to wait
    /// for (the background task, woken by requests).
    async fn wait(&mut self, forever: Option<()>) {
        let deadline = self.machine.poll_timeout().map(|at| self.instant(at));
        if self.tasks.is_empty() && deadline.is_none() {
            if forever.is_some() {
                std::future::pending::<()>().await;
            }
            return;
        }
        tokio::select! {
            Some(joined) = self.tasks.join_next(), if !self.tasks.is_empty() => {
                let now = self.now();
                match joined {
                    Ok(Outcome::Resolved(server, Ok(addr))) => {
                        self.addrs[server] = Some(addr);
                        self.machine.resolved(now, server, Ok(()));
                    }
                    Ok(Outcome::Resolved(server, Err(why))) => self.machine.resolved(now, server, Err(why)),
                    Ok(Outcome::Asked(server, attempt, answer)) => {
                        self.machine.answered(now, server, attempt, answer);
                    }
                    Err(e) => debug!(error = %e, "a start-up task ended abnormally"),
                }
            }
            () = sleep_until(deadline) => {
                let now = self.now();
                self.machine.handle_timeout(now);
            }
        }
    }

    fn log(&self, notice: &StartupNotice) {
        match notice {
            StartupNotice::LeftOut { server, why } => warn!(
                server = %self.servers[*server],
                why = %describe(why),
                "this ZooKeeper server is left out of the client's list (the others are used)"
            ),
            StartupNotice::Lowered { server, from, to } => warn!(
                server = %self.servers[*server],
                ?from,
                ?to,
                "a server negotiates a shorter session timeout than the others: the bound is lowered"
            ),
        }
    }

    /// The refusal as words: each server and what it did.
    pub(crate) fn explain(&self, error: &StartupError) -> String {
        let each = |list: Vec<String>| list.join("; ");
        match error {
            StartupError::Unresolvable(reasons) => each(
                reasons
                    .iter()
                    .map(|(i, why)| format!("{} does not resolve: {why}", self.servers[*i]))
                    .collect(),
            ),
            StartupError::NoAnswer(failures) => each(
                failures
                    .iter()
                    .map(|(i, why)| {
                        let why = why
                            .as_ref()
                            .map_or_else(|| "no answer yet".to_owned(), describe);
                        format!("{}: {why}", self.servers[*i])
                    })
                    .collect(),
            ),
            StartupError::TooShort {
                server,
                negotiated,
                min,
            } => format!(
                "{} negotiates a session timeout of {negotiated:?}, below the {min:?} this client can keep",
                self.servers[*server]
            ),
            StartupError::ClientFailed(reason) => reason.clone(),
        }
    }
}

/// The refusal as the transports report it: no name resolves
/// ([`ConnectFailure::BadAddress`], a setting to fix), no server answered
/// ([`ConnectFailure::Refused`] when every one refused, else
/// [`ConnectFailure::Unreachable`]), a negotiated timeout below the client's
/// minimum ([`SessionError::SessionTimeoutTooShort`]), the client could not
/// connect on the servers that answered ([`ConnectFailure::Unreachable`]).
pub(crate) fn refusal(
    hosts: &str,
    connect_timeout: Duration,
    driver: &Driver,
    error: &StartupError,
) -> SessionError {
    let fail = |kind, reason: String| SessionError::Connect {
        hosts: hosts.to_owned(),
        kind,
        reason,
    };
    let words = driver.explain(error);
    match error {
        StartupError::Unresolvable(_) => fail(
            ConnectFailure::BadAddress,
            format!("no server name resolves: {words}"),
        ),
        StartupError::NoAnswer(failures) => {
            let all_refused = failures
                .iter()
                .all(|(_, why)| matches!(why, Some(LeftOut::NoAnswer(AskFailure::Refused(_)))));
            let kind = if all_refused {
                ConnectFailure::Refused
            } else {
                ConnectFailure::Unreachable
            };
            fail(
                kind,
                format!("no server answered within {connect_timeout:?}: {words}"),
            )
        }
        StartupError::TooShort {
            negotiated, min, ..
        } => SessionError::SessionTimeoutTooShort {
            requested: *negotiated,
            min: *min,
        },
        StartupError::ClientFailed(reason) => fail(
            ConnectFailure::Unreachable,
            format!("no session within {connect_timeout:?}: {reason}"),
        ),
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn describe(why: &LeftOut) -> String {
    match why {
        LeftOut::Unresolvable(reason) => format!("its name does not resolve ({reason})"),
        LeftOut::NoAnswer(failure) => failure.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Mutex;

    use tokio::net::TcpListener;
    use zkelect_core::startup::Learn;

    /// A ConnectResponse body as a 3.8 server writes it.
    fn response_body(timeout_ms: i32, session_id: i64, read_only: Option<bool>) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&0_i32.to_be_bytes());
        body.extend_from_slice(&timeout_ms.to_be_bytes());
        body.extend_from_slice(&session_id.to_be_bytes());
        body.extend_from_slice(&16_i32.to_be_bytes());
        body.extend_from_slice(&[7; 16]);
        if let Some(flag) = read_only {
            body.push(u8::from(flag));
        }
        body
    }

    /// What a fake server does with each connection.
    #[derive(Debug, Clone, Copy)]
    enum Fake {
        /// Answers a new session with this negotiated timeout (ms), a
        /// re-attach with timeout 0, then answers the close.
        Answer(i32),
        /// Reads the request and closes the connection.
        Close,
        /// Accepts and never answers.
        Silent,
    }

    /// What a fake server received: the requested timeout (ms) and session
    /// id of each ConnectRequest, and how many CloseSession requests.
    #[derive(Debug, Default)]
    struct Seen {
        requests: Vec<(i32, i64)>,
        closes: usize,
    }

    async fn read_body(stream: &mut TcpStream) -> Option<Vec<u8>> {
        let mut len = [0; 4];
        stream.read_exact(&mut len).await.ok()?;
        let mut body = vec![0; usize::try_from(i32::from_be_bytes(len)).ok()?];
        stream.read_exact(&mut body).await.ok()?;
        Some(body)
    }

    /// A fake ZooKeeper server on loopback: its address, and what it saw.
    async fn fake(behaviour: Fake) -> (SocketAddr, Arc<Mutex<Seen>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let log = Arc::clone(&seen);
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let log = Arc::clone(&log);
                tokio::spawn(async move {
                    let Some(request) = read_body(&mut stream).await else {
                        return;
                    };
                    let requested = i32::from_be_bytes(request[12..16].try_into().unwrap());
                    let session = i64::from_be_bytes(request[16..24].try_into().unwrap());
                    log.lock().unwrap().requests.push((requested, session));
                    match behaviour {
                        Fake::Close => {}
                        Fake::Silent => {
                            tokio::time::sleep(Duration::from_secs(3_600)).await;
                        }
                        Fake::Answer(_) if session != 0 => {
                            let body = response_body(0, 0, Some(false));
                            let _ = stream.write_all(&frame(&body)).await;
                        }
                        Fake::Answer(ms) => {
                            let body = response_body(ms, 0x1234, Some(false));
                            stream.write_all(&frame(&body)).await.unwrap();
                            if let Some(close) = read_body(&mut stream).await {
                                assert_eq!(close[4..8], OP_CLOSE_SESSION.to_be_bytes());
                                log.lock().unwrap().closes += 1;
                                let mut reply = close[..4].to_vec();
                                reply.extend_from_slice(&[0; 12]);
                                let _ = stream.write_all(&frame(&reply)).await;
                            }
                        }
                    }
                });
            }
        });
        (addr, seen)
    }

    fn closed_addr() -> SocketAddr {
        // Bound and dropped: nothing listens there any more.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    }

    #[test]
    fn the_connect_request_is_the_45_bytes_zookeeper_expects() {
        let frame = connect_request(Duration::from_millis(60_000), 0);
        assert_eq!(frame.len(), 4 + 45);
        assert_eq!(frame[..4], 45_i32.to_be_bytes());
        assert_eq!(frame[4..8], [0; 4], "protocolVersion");
        assert_eq!(frame[8..16], [0; 8], "lastZxidSeen");
        assert_eq!(frame[16..20], 60_000_i32.to_be_bytes(), "timeOut");
        assert_eq!(frame[20..28], [0; 8], "sessionId");
        assert_eq!(frame[28..32], 16_i32.to_be_bytes(), "passwd length");
        assert_eq!(frame[32..48], [0; 16], "passwd");
        assert_eq!(frame[48], 0, "readOnly");
        let liveness = connect_request(Duration::from_millis(60_000), NO_SUCH_SESSION);
        assert_eq!(liveness[20..28], NO_SUCH_SESSION.to_be_bytes());
        // Absurd requests saturate rather than wrap negative.
        let huge = connect_request(Duration::from_secs(u64::MAX / 2), 0);
        assert_eq!(huge[16..20], i32::MAX.to_be_bytes());
        assert_eq!(
            close_request(9),
            [0, 0, 0, 8, 0, 0, 0, 9, 0xff, 0xff, 0xff, 0xf5]
        );
    }

    #[test]
    fn responses_parse_with_and_without_the_read_only_flag_and_a_session() {
        let parsed = parse_connect_response(&response_body(4_000, 0x77, Some(true))).unwrap();
        assert_eq!(
            parsed,
            ConnectResponse {
                protocol_version: 0,
                timeout: Duration::from_secs(4),
                session_id: 0x77,
                read_only: Some(true),
            }
        );
        let old = parse_connect_response(&response_body(2_000, 0x77, None)).unwrap();
        assert_eq!((old.timeout, old.read_only), (Duration::from_secs(2), None));
        let refused = parse_connect_response(&response_body(0, 0, Some(false))).unwrap();
        assert_eq!((refused.timeout, refused.session_id), (Duration::ZERO, 0));
        let body = response_body(4_000, 0x77, Some(false));
        for cut in [0, 3, 7, 15, 19, 30] {
            let e = parse_connect_response(&body[..cut]).unwrap_err();
            assert!(e.contains("ends before"), "{cut}: {e}");
        }
        assert!(parse_connect_response(&response_body(-5, 0x77, None)).is_err());
        // A password length past the end of the frame.
        let mut lying = response_body(4_000, 0x77, None);
        lying[16..20].copy_from_slice(&1_000_i32.to_be_bytes());
        assert!(parse_connect_response(&lying).is_err());
    }

    #[tokio::test]
    async fn a_session_timeout_ask_closes_its_session_and_is_asked_once_per_process() {
        let (addr, seen) = fake(Fake::Answer(4_000)).await;
        let requested = Duration::from_secs(60);
        assert_eq!(asked(addr, requested).await, Ok(Duration::from_secs(4)));
        // Concurrent and later asks of the same server share the answer.
        let (a, b) = tokio::join!(asked(addr, requested), asked(addr, requested));
        assert_eq!(
            (a, b),
            (Ok(Duration::from_secs(4)), Ok(Duration::from_secs(4)))
        );
        {
            let seen = seen.lock().unwrap();
            assert_eq!(
                seen.requests,
                [(60_000, 0)],
                "one ConnectRequest for a new session"
            );
            assert_eq!(seen.closes, 1, "its session closed");
        }
        // Another requested timeout is another question.
        assert_eq!(
            asked(addr, Duration::from_secs(30)).await,
            Ok(Duration::from_secs(4))
        );
        assert_eq!(seen.lock().unwrap().requests.len(), 2);
    }

    #[tokio::test]
    async fn a_liveness_ask_makes_no_session() {
        let (addr, seen) = fake(Fake::Answer(4_000)).await;
        assert_eq!(ask_alive(addr, Duration::from_secs(10)).await, Ok(()));
        let seen = seen.lock().unwrap();
        assert_eq!(seen.requests, [(10_000, NO_SUCH_SESSION)]);
        assert_eq!(seen.closes, 0);
    }

    #[tokio::test]
    async fn failures_read_as_the_machine_needs_them() {
        let (closing, _) = fake(Fake::Close).await;
        assert!(matches!(
            ask_alive(closing, Duration::from_secs(4)).await,
            Err(AskFailure::Broken(_))
        ));
        assert!(matches!(
            ask_alive(closed_addr(), Duration::from_secs(4)).await,
            Err(AskFailure::Refused(_))
        ));
        let (silent, _) = fake(Fake::Silent).await;
        let asker = liveness_asker(Duration::from_secs(4));
        let deadline = Instant::now() + Duration::from_millis(200);
        assert_eq!(asker(0, silent, deadline).await, Err(AskFailure::Silent));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let http = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
            }
        });
        match ask_alive(http, Duration::from_secs(4)).await {
            Err(AskFailure::Broken(why)) => {
                assert!(why.contains("not a ZooKeeper server"), "{why}")
            }
            other => panic!("{other:?}"),
        }
    }

    fn split(servers: &[String], chroot: &str) -> ConnectString {
        ConnectString::parse(&format!("{}{chroot}", servers.join(","))).unwrap()
    }

    #[tokio::test]
    async fn the_driver_starts_on_the_answering_servers_and_leaves_the_silent_out() {
        let (a, _) = fake(Fake::Answer(6_000)).await;
        let (silent, _) = fake(Fake::Silent).await;
        let (b, _) = fake(Fake::Answer(4_000)).await;
        let dead = closed_addr();
        let servers: Vec<String> = [silent, a, dead, b]
            .iter()
            .map(ToString::to_string)
            .collect();
        let mut with_name = servers.clone();
        with_name.push("zkelect-no-such-host.invalid:2181".into());
        let config = StartupConfig::new(0, Learn::SessionTimeout, Duration::from_secs(10));
        let mut driver = Driver::new(
            split(&with_name, "/apps/x"),
            config,
            session_timeout_asker(Duration::from_secs(8)),
        );
        let started = std::time::Instant::now();
        let plan = driver.next_plan().await.unwrap();
        let took = started.elapsed();
        assert_eq!(
            plan.servers,
            [1, 3, 2],
            "answered in order, then the refused one"
        );
        assert_eq!(plan.bound, Some(Duration::from_secs(4)));
        assert!(took < Duration::from_secs(1), "started after {took:?}");
        assert_eq!(driver.chroot(), Some("/apps/x"));
        assert_eq!(driver.addr(1), Some(a));
        driver.client_connected();
        assert_eq!(driver.confirmed().await, Some(Duration::from_secs(4)));
    }

    #[tokio::test]
    async fn no_answer_is_refused_at_the_connect_timeout_naming_each_server() {
        let dead = closed_addr();
        let (silent, _) = fake(Fake::Silent).await;
        let servers = vec![dead.to_string(), silent.to_string()];
        let config = StartupConfig::new(0, Learn::Liveness, Duration::from_millis(600));
        // Read before the driver reads its own epoch: a test thread
        // descheduled between the two on a loaded machine saw the refusal
        // come "early" by the time it lost.
        let started = std::time::Instant::now();
        let mut driver = Driver::new(
            split(&servers, ""),
            config,
            liveness_asker(Duration::from_secs(4)),
        );
        let e = driver.next_plan().await.unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(600));
        let words = driver.explain(&e);
        assert!(
            words.contains(&format!("{dead}: refused"))
                && words.contains(&format!("{silent}: accepted")),
            "{words}"
        );
        let names = vec!["zkelect-no-such-host.invalid:1".to_owned()];
        let mut driver = Driver::new(
            split(&names, ""),
            config,
            liveness_asker(Duration::from_secs(4)),
        );
        let e = driver.next_plan().await.unwrap_err();
        assert!(matches!(e, StartupError::Unresolvable(_)), "{e:?}");
        assert!(driver.explain(&e).contains("does not resolve"));
    }
}
