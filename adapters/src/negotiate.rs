//! The session timeout ZooKeeper servers negotiate, learned by a handshake
//! of our own.
//!
//! A server clamps the timeout a client requests into its
//! `[minSessionTimeout, maxSessionTimeout]` (2 and 20 ticks by default) and
//! says what it chose in its ConnectResponse. zookeeper-async reads that
//! answer but does not expose it; reporting the *requested* timeout to the
//! core instead would let a leader's lease outlast its real session. So, for
//! every server of the connect string, a throw-away TCP connection carries a
//! ConnectRequest with the same requested timeout, reads the server's
//! ConnectResponse, and closes the session it opened (CloseSession) so that
//! it does not linger for its whole timeout.
//!
//! The smallest answer bounds the real session's timeout on every server the
//! client may ever use: the client sends the request to its first server,
//! and after a reconnect it sends the value that server gave it, which the
//! next server clamps again. Clamping is monotone and every server maps the
//! smallest answer `m` to at least `m` (its maximum is at least its own
//! answer, which is at least `m`), so no chain of reconnects goes below `m`.
//!
//! Wire format (ZooKeeper's jute encoding, big-endian; every frame is
//! prefixed with its length as a 4-byte int):
//!
//! | frame | fields |
//! |---|---|
//! | ConnectRequest | `protocolVersion: int = 0`, `lastZxidSeen: long = 0`, `timeOut: int` (ms), `sessionId: long = 0`, `passwd: buffer` (int length, then 16 zero bytes), `readOnly: bool = false` |
//! | ConnectResponse | `protocolVersion: int`, `timeOut: int` (ms), `sessionId: long`, `passwd: buffer`, `readOnly: bool` (absent from servers before 3.4) |
//! | CloseSession | `xid: int`, `type: int = -11`; answered by `xid: int`, `zxid: long`, `err: int` |
//!
//! The handshake costs each server a session created and closed (two
//! logged transactions) and the connect a round trip before the real one.
//! A process that opens many sessions to the same servers (one per
//! election, as `Election::connect` does) reuses an answer while a session
//! that relies on it is still open ([`smallest_shared`]): that session's
//! lease is already only as good as the answer (a server restarted with a
//! lower `maxSessionTimeout` invalidates both alike), so the reuse adds no
//! assumption. Once the last such session has closed, the next connect asks
//! again.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::debug;

use crate::error::{ConnectFailure, ElectionError};

/// ZooKeeper's opcode for closing a session.
const OP_CLOSE_SESSION: i32 = -11;
/// The largest frame accepted from a server during the handshake: a
/// ConnectResponse is 36 to 41 bytes with a 16-byte password, a close
/// reply 16.
const MAX_FRAME: usize = 4_096;
/// How long closing a probe's session may take; after that it is left to
/// expire on its own (its timeout is the one just learned).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// The smallest session timeout the servers negotiate, and who said so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Negotiated {
    /// The smallest answer.
    pub(crate) timeout: Duration,
    /// The server that gave it, as written in the connect string.
    pub(crate) server: String,
}

/// What one server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectResponse {
    /// The server's protocol version.
    pub(crate) protocol_version: i32,
    /// The negotiated session timeout.
    pub(crate) timeout: Duration,
    /// The session the handshake opened.
    pub(crate) session_id: i64,
    /// Whether the session is read-only (`None` from servers that omit it).
    pub(crate) read_only: Option<bool>,
}

/// The servers of a connect string, `host:port[,host:port…][/chroot]`, as
/// written (the chroot cut off where zookeeper-async cuts it: at the first
/// `/`). Empty entries are kept, so that resolving them fails as the client
/// would.
pub(crate) fn servers(hosts: &str) -> Vec<String> {
    let list = hosts.find('/').map_or(hosts, |chroot| &hosts[..chroot]);
    list.split(',').map(|s| s.trim().to_owned()).collect()
}

/// The ConnectRequest frame (length prefix included) for a new session
/// with `timeout` requested.
pub(crate) fn connect_request(timeout: Duration) -> Vec<u8> {
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    let mut body = Vec::with_capacity(45);
    body.extend_from_slice(&0_i32.to_be_bytes()); // protocolVersion
    body.extend_from_slice(&0_i64.to_be_bytes()); // lastZxidSeen
    body.extend_from_slice(&ms.to_be_bytes()); // timeOut
    body.extend_from_slice(&0_i64.to_be_bytes()); // sessionId
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

/// Parses a ConnectResponse body (without its length prefix). A timeout of
/// zero or less (the server's "no session") is an error.
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
    if timeout_ms <= 0 || session_id == 0 {
        return Err(format!(
            "the server gave no session (timeOut {timeout_ms} ms, sessionId {session_id:#x})"
        ));
    }
    Ok(ConnectResponse {
        protocol_version,
        timeout: Duration::from_millis(timeout_ms.unsigned_abs().into()),
        session_id,
        read_only,
    })
}

/// Reads one length-prefixed frame.
async fn read_frame(stream: &mut TcpStream) -> Result<Vec<u8>, String> {
    let mut len = [0; 4];
    stream
        .read_exact(&mut len)
        .await
        .map_err(|e| format!("no ConnectResponse: {e}"))?;
    let len = i32::from_be_bytes(len);
    let len = usize::try_from(len)
        .ok()
        .filter(|n| *n <= MAX_FRAME)
        .ok_or_else(|| format!("not a ZooKeeper server: a frame of {len} bytes"))?;
    let mut body = vec![0; len];
    stream
        .read_exact(&mut body)
        .await
        .map_err(|e| format!("a truncated ConnectResponse: {e}"))?;
    Ok(body)
}

/// One handshake with the server at `addr`: the answer, and the open
/// connection whose session still has to be closed.
async fn handshake(
    addr: SocketAddr,
    requested: Duration,
) -> Result<(ConnectResponse, TcpStream), (ConnectFailure, String)> {
    let unreachable = |e: String| (ConnectFailure::Unreachable, e);
    let mut stream = TcpStream::connect(addr).await.map_err(|e| {
        let kind = if e.kind() == std::io::ErrorKind::ConnectionRefused {
            ConnectFailure::Refused
        } else {
            ConnectFailure::Unreachable
        };
        (kind, format!("cannot connect to {addr}: {e}"))
    })?;
    let _ = stream.set_nodelay(true);
    stream
        .write_all(&connect_request(requested))
        .await
        .map_err(|e| unreachable(format!("cannot send a ConnectRequest to {addr}: {e}")))?;
    let body = read_frame(&mut stream).await.map_err(unreachable)?;
    let response = parse_connect_response(&body).map_err(unreachable)?;
    Ok((response, stream))
}

/// Closes the probe's session, so it does not hold server resources for its
/// whole timeout. Best effort, bounded: a session left behind expires.
async fn close_session(mut stream: TcpStream, session_id: i64) {
    let polite = async {
        stream.write_all(&close_request(1)).await.ok()?;
        read_frame(&mut stream).await.ok()
    };
    match tokio::time::timeout(CLOSE_TIMEOUT, polite).await {
        Ok(Some(_)) => debug!(session = format!("{session_id:#x}"), "probe session closed"),
        _ => debug!(
            session = format!("{session_id:#x}"),
            "probe session not closed; it will expire"
        ),
    }
}

/// Asks `server` (at `addr`) until it answers or `deadline` passes, every
/// `retry`: a server may be restarting, or not serving yet.
async fn ask(
    server: &str,
    addr: SocketAddr,
    requested: Duration,
    deadline: Instant,
    retry: Duration,
) -> Result<Duration, (ConnectFailure, String)> {
    let mut last: Option<(ConnectFailure, String)> = None;
    loop {
        match tokio::time::timeout_at(deadline, handshake(addr, requested)).await {
            Ok(Ok((response, stream))) => {
                debug!(
                    server,
                    timeout = ?response.timeout,
                    protocol = response.protocol_version,
                    read_only = ?response.read_only,
                    "the server's negotiated session timeout"
                );
                close_session(stream, response.session_id).await;
                return Ok(response.timeout);
            }
            Ok(Err(e)) => {
                debug!(server, error = e.1, "session timeout probe failed");
                last = Some(e);
            }
            Err(_) => break,
        }
        if Instant::now() >= deadline {
            break;
        }
        // Until the deadline itself, as long as the client would try.
        tokio::time::sleep_until(deadline.min(Instant::now() + retry)).await;
    }
    Err(match last {
        Some((kind, e)) => (kind, format!("{e} (tried until the connect timeout)")),
        None => (
            ConnectFailure::Unreachable,
            "no ConnectResponse before the connect timeout".to_owned(),
        ),
    })
}

/// The smallest session timeout the servers of `hosts` negotiate for a
/// request of `requested`, each asked on a connection of its own, all at
/// once; each is retried every `retry` until `deadline`.
///
/// Errors: [`ElectionError::Connect`] for a server that does not resolve
/// (as the client would refuse it), [`ElectionError::SessionTimeoutUnknown`]
/// for the first server (in connect-string order) that gave no answer.
pub(crate) async fn smallest(
    hosts: &str,
    requested: Duration,
    deadline: Instant,
    retry: Duration,
) -> Result<Negotiated, ElectionError> {
    let mut probes = JoinSet::new();
    let servers = servers(hosts);
    for (index, server) in servers.iter().enumerate() {
        // The first address, as zookeeper-async takes it.
        let resolved = tokio::time::timeout_at(deadline, tokio::net::lookup_host(server.as_str()))
            .await
            .map_err(|_| "resolving it timed out".to_owned())
            .and_then(|r| r.map_err(|e| e.to_string()))
            .and_then(|mut addrs| addrs.next().ok_or_else(|| "no address".to_owned()));
        let addr = resolved.map_err(|reason| ElectionError::Connect {
            hosts: hosts.to_owned(),
            kind: ConnectFailure::BadAddress,
            reason: format!(
                "bad server {server:?}: {reason}: expected host:port[,host:port…][/chroot]"
            ),
        })?;
        let server = server.clone();
        probes.spawn(async move {
            let answer = ask(&server, addr, requested, deadline, retry).await;
            (index, answer)
        });
    }
    let mut answers: Vec<Option<Result<Duration, (ConnectFailure, String)>>> =
        vec![None; servers.len()];
    while let Some(joined) = probes.join_next().await {
        match joined {
            Ok((index, answer)) => answers[index] = Some(answer),
            Err(e) => debug!(error = %e, "a session timeout probe task ended abnormally"),
        }
    }
    let mut smallest: Option<Negotiated> = None;
    for (server, answer) in servers.into_iter().zip(answers) {
        match answer {
            Some(Ok(timeout)) => {
                if smallest.as_ref().is_none_or(|s| timeout < s.timeout) {
                    smallest = Some(Negotiated { timeout, server });
                }
            }
            Some(Err((kind, reason))) => {
                return Err(ElectionError::SessionTimeoutUnknown {
                    server,
                    kind,
                    reason,
                })
            }
            None => {
                return Err(ElectionError::SessionTimeoutUnknown {
                    server,
                    kind: ConnectFailure::Unreachable,
                    reason: "the probe did not finish".to_owned(),
                })
            }
        }
    }
    smallest.ok_or_else(|| ElectionError::Connect {
        hosts: hosts.to_owned(),
        kind: ConnectFailure::BadAddress,
        reason: "no hosts given".to_owned(),
    })
}

/// What a session that relies on a negotiated answer holds for as long as
/// it is open: while one is held, [`smallest_shared`] gives the answer
/// again without asking.
#[derive(Debug)]
pub(crate) struct Reliance {
    _alive: Arc<()>,
}

/// The answers some open session relies on, by servers and requested timeout.
type InUse = BTreeMap<(Vec<String>, Duration), (Negotiated, Weak<()>)>;

fn in_use() -> &'static Mutex<InUse> {
    static IN_USE: OnceLock<Mutex<InUse>> = OnceLock::new();
    IN_USE.get_or_init(|| Mutex::new(BTreeMap::new()))
}

/// [`smallest`], but an answer an open session of this process relies on
/// (the same servers, the same requested timeout) is given again without a
/// handshake (see the module notes for why that is as safe as the session
/// that holds it). The caller keeps the [`Reliance`] while its session is open.
pub(crate) async fn smallest_shared(
    hosts: &str,
    requested: Duration,
    deadline: Instant,
    retry: Duration,
) -> Result<(Negotiated, Reliance), ElectionError> {
    let key = (servers(hosts), requested);
    let reused = {
        // A poisoned lock only loses the cache: ask again.
        let mut table = in_use().lock().ok();
        table.as_mut().and_then(|t| {
            t.retain(|_, (_, alive)| alive.strong_count() > 0);
            let (negotiated, alive) = t.get(&key)?;
            Some((negotiated.clone(), alive.upgrade()?))
        })
    };
    if let Some((negotiated, alive)) = reused {
        debug!(timeout = ?negotiated.timeout, "the servers' session timeout, as an open session learned it");
        return Ok((negotiated, Reliance { _alive: alive }));
    }
    let negotiated = smallest(hosts, requested, deadline, retry).await?;
    let alive = Arc::new(());
    if let Ok(mut table) = in_use().lock() {
        table.insert(key, (negotiated.clone(), Arc::downgrade(&alive)));
    }
    Ok((negotiated, Reliance { _alive: alive }))
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::{Arc, Mutex};

    use tokio::net::TcpListener;

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
        /// Answers with this negotiated timeout (ms), then answers the close.
        Answer(i32),
        /// Reads the request and closes the connection.
        Close,
        /// Accepts and never answers.
        Silent,
    }

    /// What a fake server received: the requested timeout (ms) of each
    /// ConnectRequest, and how many CloseSession requests.
    #[derive(Debug, Default)]
    struct Seen {
        requested: Vec<i32>,
        closes: usize,
    }

    async fn read_body(stream: &mut TcpStream) -> Option<Vec<u8>> {
        let mut len = [0; 4];
        stream.read_exact(&mut len).await.ok()?;
        let mut body = vec![0; usize::try_from(i32::from_be_bytes(len)).ok()?];
        stream.read_exact(&mut body).await.ok()?;
        Some(body)
    }

    /// A fake ZooKeeper server on loopback: its `host:port`, and what it saw.
    async fn fake(behaviour: Fake) -> (String, Arc<Mutex<Seen>>) {
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
                    log.lock().unwrap().requested.push(requested);
                    match behaviour {
                        Fake::Close => {}
                        Fake::Silent => {
                            tokio::time::sleep(Duration::from_secs(3_600)).await;
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
        (addr.to_string(), seen)
    }

    fn soon(ms: u64) -> Instant {
        Instant::now() + Duration::from_millis(ms)
    }

    const RETRY: Duration = Duration::from_millis(50);
    const REQUESTED: Duration = Duration::from_secs(60);

    #[test]
    fn the_connect_request_is_the_45_bytes_zookeeper_expects() {
        let frame = connect_request(Duration::from_millis(60_000));
        assert_eq!(frame.len(), 4 + 45);
        assert_eq!(frame[..4], 45_i32.to_be_bytes());
        assert_eq!(frame[4..8], [0; 4], "protocolVersion");
        assert_eq!(frame[8..16], [0; 8], "lastZxidSeen");
        assert_eq!(frame[16..20], 60_000_i32.to_be_bytes(), "timeOut");
        assert_eq!(frame[20..28], [0; 8], "sessionId");
        assert_eq!(frame[28..32], 16_i32.to_be_bytes(), "passwd length");
        assert_eq!(frame[32..48], [0; 16], "passwd");
        assert_eq!(frame[48], 0, "readOnly");
        // Absurd requests saturate rather than wrap negative.
        let huge = connect_request(Duration::from_secs(u64::MAX / 2));
        assert_eq!(huge[16..20], i32::MAX.to_be_bytes());
        assert_eq!(
            close_request(9),
            [0, 0, 0, 8, 0, 0, 0, 9, 0xff, 0xff, 0xff, 0xf5]
        );
    }

    #[test]
    fn responses_parse_with_and_without_the_read_only_flag() {
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
    }

    #[test]
    fn truncated_and_sessionless_responses_are_errors() {
        let body = response_body(4_000, 0x77, Some(false));
        for cut in [0, 3, 7, 15, 19, 30] {
            let e = parse_connect_response(&body[..cut]).unwrap_err();
            assert!(e.contains("ends before"), "{cut}: {e}");
        }
        for (ms, id) in [(0, 0x77), (-5, 0x77), (4_000, 0)] {
            let e = parse_connect_response(&response_body(ms, id, Some(false))).unwrap_err();
            assert!(e.contains("no session"), "{ms} {id}: {e}");
        }
        // A password length past the end of the frame.
        let mut lying = response_body(4_000, 0x77, None);
        lying[16..20].copy_from_slice(&1_000_i32.to_be_bytes());
        assert!(parse_connect_response(&lying).is_err());
    }

    #[test]
    fn a_chroot_is_cut_off_and_every_server_is_kept() {
        assert_eq!(servers("a:1"), ["a:1"]);
        assert_eq!(servers("a:1, b:2 ,c:3/svc/x"), ["a:1", "b:2", "c:3"]);
        assert_eq!(
            servers("[::1]:2181,127.0.0.1:2/"),
            ["[::1]:2181", "127.0.0.1:2"]
        );
        assert_eq!(servers("a:1,"), ["a:1", ""]);
    }

    #[tokio::test]
    async fn the_smallest_answer_of_all_servers_is_taken_and_every_probe_session_closed() {
        let (a, seen_a) = fake(Fake::Answer(40_000)).await;
        let (b, seen_b) = fake(Fake::Answer(4_000)).await;
        let (c, seen_c) = fake(Fake::Answer(20_000)).await;
        let hosts = format!("{a},{b},{c}/chroot/path");
        let got = smallest(&hosts, REQUESTED, soon(5_000), RETRY)
            .await
            .unwrap();
        assert_eq!(
            got,
            Negotiated {
                timeout: Duration::from_secs(4),
                server: b,
            }
        );
        for seen in [seen_a, seen_b, seen_c] {
            let seen = seen.lock().unwrap();
            assert_eq!(seen.requested, [60_000], "one ConnectRequest of 60 s");
            assert_eq!(seen.closes, 1, "its session closed");
        }
    }

    #[tokio::test]
    async fn an_answer_is_reused_while_a_session_relies_on_it_and_asked_again_after() {
        let (a, seen) = fake(Fake::Answer(4_000)).await;
        let asks = || seen.lock().unwrap().requested.len();
        let (first, held) = smallest_shared(&a, REQUESTED, soon(5_000), RETRY)
            .await
            .unwrap();
        assert_eq!(first.timeout, Duration::from_secs(4));
        let (again, also) = smallest_shared(&a, REQUESTED, soon(5_000), RETRY)
            .await
            .unwrap();
        assert_eq!((again, asks()), (first.clone(), 1), "reused while held");
        // Another requested timeout is another question.
        let (other, _other) = smallest_shared(&a, Duration::from_secs(30), soon(5_000), RETRY)
            .await
            .unwrap();
        assert_eq!((other.timeout, asks()), (Duration::from_secs(4), 2));
        drop(held);
        let _ = smallest_shared(&a, REQUESTED, soon(5_000), RETRY)
            .await
            .unwrap();
        assert_eq!(asks(), 2, "one session still relies on it");
        drop(also);
        let _ = smallest_shared(&a, REQUESTED, soon(5_000), RETRY)
            .await
            .unwrap();
        assert_eq!(asks(), 3, "asked again once no open session relies on it");
    }

    #[tokio::test]
    async fn a_server_that_raises_a_short_request_is_reported_as_it_answers() {
        // A request below the server's minimum gets the minimum: the real
        // session is that long, whatever was asked.
        let (a, _) = fake(Fake::Answer(6_000)).await;
        let got = smallest(&a, Duration::from_secs(2), soon(5_000), RETRY)
            .await
            .unwrap();
        assert_eq!(got.timeout, Duration::from_secs(6));
    }

    #[tokio::test]
    async fn a_server_that_closes_the_connection_is_retried_then_refused() {
        let (good, _) = fake(Fake::Answer(4_000)).await;
        let (closing, seen) = fake(Fake::Close).await;
        let hosts = format!("{good},{closing}");
        let e = smallest(&hosts, REQUESTED, soon(500), RETRY)
            .await
            .unwrap_err();
        match e {
            ElectionError::SessionTimeoutUnknown { server, reason, .. } => {
                assert_eq!(server, closing);
                assert!(reason.contains("no ConnectResponse"), "{reason}");
            }
            other => panic!("expected SessionTimeoutUnknown, got {other:?}"),
        }
        assert!(seen.lock().unwrap().requested.len() > 1, "retried");
    }

    #[tokio::test]
    async fn a_silent_server_is_refused_at_the_deadline() {
        let (silent, _) = fake(Fake::Silent).await;
        let started = std::time::Instant::now();
        let e = smallest(&silent, REQUESTED, soon(300), RETRY)
            .await
            .unwrap_err();
        assert!(
            matches!(&e, ElectionError::SessionTimeoutUnknown { server, .. } if *server == silent),
            "{e:?}"
        );
        // Bounded: the deadline, not the fake's hour.
        assert!(started.elapsed() < Duration::from_secs(30));
    }

    #[tokio::test]
    async fn a_refused_connection_names_the_server() {
        // Bound and dropped: nothing listens there any more.
        let port = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dead = format!("127.0.0.1:{port}");
        let e = smallest(&dead, REQUESTED, soon(300), RETRY)
            .await
            .unwrap_err();
        match e {
            ElectionError::SessionTimeoutUnknown {
                ref server,
                ref reason,
                ..
            } => {
                assert_eq!(*server, dead);
                assert!(reason.contains("cannot connect"), "{reason}");
                assert_eq!(e.connect_failure(), Some(ConnectFailure::Refused));
            }
            other => panic!("expected SessionTimeoutUnknown, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn an_unresolvable_server_is_a_connect_error() {
        for hosts in ["no-port-here", "127.0.0.1:1,:", "127.0.0.1:1,"] {
            let e = smallest(hosts, REQUESTED, soon(300), RETRY)
                .await
                .unwrap_err();
            assert!(matches!(e, ElectionError::Connect { .. }), "{hosts}: {e:?}");
            assert_eq!(
                e.connect_failure(),
                Some(ConnectFailure::BadAddress),
                "{hosts}"
            );
        }
    }

    #[tokio::test]
    async fn not_a_zookeeper_server_is_refused() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
            }
        });
        let e = smallest(&addr, REQUESTED, soon(300), RETRY)
            .await
            .unwrap_err();
        match e {
            ElectionError::SessionTimeoutUnknown {
                ref reason, kind, ..
            } => {
                assert!(reason.contains("not a ZooKeeper server"), "{reason}");
                assert_eq!(kind, ConnectFailure::Unreachable, "reached, but no answer");
            }
            other => panic!("expected SessionTimeoutUnknown, got {other:?}"),
        }
    }
}
