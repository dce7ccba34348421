//! The ZooKeeper the world runs against: one server ([`ZkModel`]) or an
//! ensemble of 3 or 5 ([`Ensemble`]), behind one type with the server's
//! methods, so the world's code does not care which.
//!
//! With an ensemble, [`Server`] also plays the wire between each process's
//! client library and the members: which member a session is connected to,
//! the server list a client walks on reconnecting (the next member each
//! time, as zookeeper-client and the Java client walk their shuffled
//! list), the last zxid the client has seen (what the reply headers
//! carried, counted when a reply reaches the client), and the members' own
//! faults ([`EnsembleSpec`]: a lagging follower, a member cut off from the
//! quorum, a leader change), applied on the server's tick.
//!
//! The checker [`SingleSystemImage`](crate::check::SingleSystemImage) holds
//! every process to ZooKeeper's guarantee that a client never sees an older view than it has seen, even
//! across reconnects to another server; the canary
//! [`Canary::TrustsBehind`](crate::canary::Canary::TrustsBehind) (a client
//! that forgets what it has seen when it reconnects, so a member behind it
//! admits it and it trusts that member's reads) is caught by it.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use zkelect_core::{OpId, Reply, Request, SessionId, Stat, Timestamp, ZkCode};

use crate::client::{self, Reconnected};
use crate::ensemble::{Connection, Ensemble, Refused};
use crate::rng::SimRng;
use crate::zk::{Fired, ZkModel, ZkSettings};

/// The longest a follower lags: ZooKeeper's leader drops a follower more
/// than `syncLimit` ticks behind (5 in the sample `zoo.cfg`; the simulated
/// tick is 200 ms), which is then a member cut off from the quorum.
pub const LAG_MAX: Duration = Duration::from_millis(1_000);

/// A fault of the ensemble's own members (the swarm's [`Fault`](crate::swarm::Fault)s
/// act on processes and links; these on servers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberFault {
    /// The follower applies no committed transaction for `ms` (at most
    /// [`LAG_MAX`]), then catches up (its reads are stale meanwhile, and its
    /// watches fire late).
    Lag {
        /// The member.
        server: usize,
        /// How long.
        ms: u64,
    },
    /// The member loses the quorum for `ms`: it drops its clients and
    /// refuses connections, then rejoins (synced). Never the leader, and
    /// never more than a minority at once.
    CutOff {
        /// The member.
        server: usize,
        /// How long.
        ms: u64,
    },
    /// The ensemble elects `server` leader: every member drops its clients.
    NewLeader {
        /// The new leader.
        server: usize,
    },
}

impl fmt::Display for MemberFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemberFault::Lag { server, ms } => write!(f, "zk{server} lags {ms}ms"),
            MemberFault::CutOff { server, ms } => {
                write!(f, "zk{server} cut off from the quorum {ms}ms")
            }
            MemberFault::NewLeader { server } => write!(f, "zk{server} becomes leader"),
        }
    }
}

/// An ensemble world: how many members, and their faults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnsembleSpec {
    /// 3 or 5.
    pub servers: usize,
    /// When each member fault starts.
    pub faults: Vec<(Timestamp, MemberFault)>,
    /// A member down when the processes start (the connect string still
    /// names it): the clients' start-up machine must start without it.
    pub down_at_start: Option<MemberDown>,
    /// A member whose `maxSessionTimeout` is lower than the others'.
    pub lowered: Option<Lowered>,
}

/// A member whose `maxSessionTimeout` is lower than the others' (an
/// operator lowering it member by member, in a rolling restart): a session
/// on it runs by its clamp, so a bound learned from the others is too high
/// there. Its world runs zookeeper-async (the world sees to it): the
/// zookeeper-client transport reports its session's first member's
/// timeout, and documents that every member must have the same limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lowered {
    /// The member.
    pub server: usize,
    /// Its `maxSessionTimeout` (the world keeps it within the member's
    /// minimum and the others' maximum).
    pub max: Duration,
}

impl Lowered {
    /// Draws (from a stream of its own, so the rest of the scenario stays
    /// put) whether a member of an ensemble of `servers` has a lower
    /// maximum (1 in 2), which (the member `down` at start in 4 of 5 when
    /// there is one: the member the start-up cannot ask before it is back),
    /// and the maximum: 40–90 % of `timeout` (the requested), at least 1 s.
    pub fn draw(
        seed: u64,
        servers: usize,
        timeout: Duration,
        down: Option<MemberDown>,
    ) -> Option<Self> {
        let mut rng = SimRng::new(seed, 20);
        if servers < 2 || !rng.chance(0.5) {
            return None;
        }
        let server = match down {
            Some(down) if rng.chance(0.8) => down.server,
            _ => rng.range(0, servers as u64 - 1) as usize,
        };
        let ms = timeout.as_millis() as u64;
        let max = (ms * rng.range(40, 90) / 100 / 100 * 100).max(1_000);
        Some(Self {
            server,
            max: Duration::from_millis(max),
        })
    }
}

/// How a member is down at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DownHow {
    /// Stopped: nothing listens; connections are refused.
    Stopped,
    /// Frozen (SIGSTOP): connections are accepted and never answered.
    Frozen,
    /// Its name does not resolve for the clients (it serves the quorum).
    Unresolvable,
}

/// A member down at start, and until when (`None`: the whole run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberDown {
    /// The member (never the first leader).
    pub server: usize,
    /// How.
    pub how: DownHow,
    /// When it is back (stopped and frozen members only).
    pub until: Option<Timestamp>,
}

/// What a member does with a client's ConnectRequest at some moment (what
/// the start-up's asks meet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// It answers.
    Serving,
    /// Its name does not resolve.
    Unresolvable,
    /// It refuses the connection.
    Refusing,
    /// It accepts and never answers.
    Silent,
    /// It is out of the quorum: it closes the connection.
    Closing,
}

impl EnsembleSpec {
    /// Draws whether `seed` runs against an ensemble (1 in 4) and its
    /// member faults over the `chaos` phase (none when `faults` is false),
    /// from a stream of its own so the rest of the scenario stays put.
    /// Rates per second, each drawn per seed from 0 up to: lag 0.30 (100 ms
    /// – [`LAG_MAX`]), cut-off 0.15 (T/4 – 2T), leader change 0.03.
    pub fn draw(seed: u64, chaos: Duration, timeout: Duration, faults: bool) -> Option<Self> {
        let mut rng = SimRng::new(seed, 17);
        if !rng.chance(0.25) {
            return None;
        }
        let servers = if rng.chance(0.7) { 3 } else { 5 };
        let mut spec = Self {
            servers,
            faults: Vec::new(),
            down_at_start: None,
            lowered: None,
        };
        if faults {
            spec.add_faults(&mut rng, chaos, timeout, 0.30, 0.15, 0.03);
        }
        spec.down_at_start = MemberDown::draw(seed, servers, timeout);
        spec.lowered = Lowered::draw(seed, servers, timeout, spec.down_at_start);
        Some(spec)
    }

    /// An ensemble of 3 whose followers lag often (the canary's world).
    pub fn lagging(seed: u64, chaos: Duration, timeout: Duration) -> Self {
        let mut rng = SimRng::new(seed, 18);
        let mut spec = Self {
            servers: 3,
            faults: Vec::new(),
            down_at_start: None,
            lowered: None,
        };
        spec.add_faults(&mut rng, chaos, timeout, 0.6, 0.1, 0.0);
        spec
    }

    /// An ensemble of 3 whose member 1 is stopped at start and back after
    /// one to two session timeouts with a `maxSessionTimeout` of half the
    /// requested `timeout` (at least 1 s), with leader changes around its
    /// return that send every client to another member (the
    /// `confirms-on-stale-ask` canary's world; `chaos` picks the moment).
    pub fn member_back(timeout: Duration, chaos: Duration) -> Self {
        let t = timeout.as_millis() as u64;
        let back = t + (chaos.as_millis() as u64 * 7919) % t;
        let faults = (0..8u64)
            .map(|k| {
                let at = Timestamp::from_millis(back - 900 + k * 450);
                let server = if k % 2 == 0 { 2 } else { 0 };
                (at, MemberFault::NewLeader { server })
            })
            .collect();
        Self {
            servers: 3,
            faults,
            down_at_start: Some(MemberDown {
                server: 1,
                how: DownHow::Stopped,
                until: Some(Timestamp::from_millis(back)),
            }),
            lowered: Some(Lowered {
                server: 1,
                max: Duration::from_millis((t / 2 / 100 * 100).max(1_000)),
            }),
        }
    }

    fn add_faults(
        &mut self,
        rng: &mut SimRng,
        chaos: Duration,
        timeout: Duration,
        lag: f64,
        cut: f64,
        leader: f64,
    ) {
        let rate = |rng: &mut SimRng, max: f64| rng.range(0, (max * 100.0) as u64) as f64 / 100.0;
        let (lag, cut, leader) = (rate(rng, lag), rate(rng, cut), rate(rng, leader));
        let t = timeout.as_millis() as u64;
        let n = self.servers as u64;
        for second in 0..chaos.as_secs() {
            for (p, kind) in [(lag, 0), (cut, 1), (leader, 2)] {
                if !rng.chance(p) {
                    continue;
                }
                let at = Timestamp::from_millis(second * 1_000 + rng.range(0, 999));
                let server = rng.range(0, n - 1) as usize;
                let ms = rng.range(t / 4, 2 * t);
                let fault = match kind {
                    0 => MemberFault::Lag {
                        server,
                        ms: rng.range(100, LAG_MAX.as_millis() as u64),
                    },
                    1 => MemberFault::CutOff { server, ms },
                    _ => MemberFault::NewLeader { server },
                };
                self.faults.push((at, fault));
            }
        }
        self.faults.sort_by_key(|(at, _)| *at);
    }
}

impl MemberDown {
    /// Draws (from a stream of its own, so the rest of the scenario stays
    /// put) whether a member of an ensemble of `servers` is down when the
    /// processes start (2 in 5), which one (never member 0, the first
    /// leader), how (stopped, frozen or unresolvable alike), and for how
    /// long (stopped or frozen: back after T/4 to 3T, or never in 3 of 10).
    pub fn draw(seed: u64, servers: usize, timeout: Duration) -> Option<Self> {
        let mut rng = SimRng::new(seed, 19);
        if servers < 3 || !rng.chance(0.4) {
            return None;
        }
        let server = rng.range(1, servers as u64 - 1) as usize;
        let how = match rng.range(0, 2) {
            0 => DownHow::Stopped,
            1 => DownHow::Frozen,
            _ => DownHow::Unresolvable,
        };
        let t = timeout.as_millis() as u64;
        let until = (how != DownHow::Unresolvable && !rng.chance(0.3))
            .then(|| Timestamp::from_millis(rng.range(t / 4, 3 * t)));
        Some(Self { server, how, until })
    }
}

impl fmt::Display for EnsembleSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ensemble of {} ({} member faults)",
            self.servers,
            self.faults.len()
        )?;
        if let Some(down) = self.down_at_start {
            let how = match down.how {
                DownHow::Stopped => "stopped",
                DownHow::Frozen => "frozen",
                DownHow::Unresolvable => "unresolvable",
            };
            write!(f, " zk{} {how} at start", down.server)?;
            if let Some(at) = down.until {
                write!(f, " until {at}")?;
            }
        }
        match self.lowered {
            Some(l) => write!(
                f,
                " zk{} maxSessionTimeout={}ms",
                l.server,
                l.max.as_millis()
            ),
            None => Ok(()),
        }
    }
}

/// What a process's client library keeps about the ensemble.
#[derive(Debug, Clone, Copy, Default)]
struct Record {
    /// The session the record is for (a new session starts from nothing).
    session: Option<SessionId>,
    /// The last zxid a reply carried to the client.
    seen: i64,
    /// The member it last connected to (it tries the next one first).
    server: usize,
}

/// A member's fault in progress, ending at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Lag(usize),
    CutOff(usize),
}

/// The ensemble and the wire to it.
#[derive(Debug, Clone)]
pub struct Multi {
    ens: Ensemble,
    conns: BTreeMap<SessionId, Connection>,
    clients: BTreeMap<usize, Record>,
    /// Answers on their way: (pid, op) → the reply header's zxid.
    pending: BTreeMap<(usize, OpId), i64>,
    /// The reply header's zxid of the last [`Server::apply`], if it had one.
    last_answer: Option<i64>,
    faults: Vec<(Timestamp, MemberFault)>,
    next_fault: usize,
    endings: Vec<(Timestamp, Ending)>,
    /// Per member: lags in progress (overlapping lags end with the last).
    lags: Vec<u32>,
    violation: Option<String>,
    /// Changes the world should note in its trace.
    notes: Vec<String>,
    /// The member down at start, while it is.
    down: Option<MemberDown>,
    /// Per process: the members its start-up machine gave its client.
    plans: BTreeMap<usize, Vec<usize>>,
}

/// The ZooKeeper of a world (see the module docs).
#[derive(Debug, Clone)]
pub enum Server {
    /// One server.
    Single(ZkModel),
    /// An ensemble.
    Ensemble(Box<Multi>),
}

impl Server {
    /// One server with `settings`, or an ensemble as `spec` says.
    pub fn new(settings: ZkSettings, spec: Option<&EnsembleSpec>) -> Self {
        match spec {
            None => Server::Single(ZkModel::new(settings)),
            Some(spec) => {
                let mut ens = Ensemble::new(spec.servers, settings);
                if let Some(lowered) = spec.lowered {
                    let (min, max) = settings.session_limits();
                    let own = ZkSettings {
                        // A server refuses a maximum below its minimum.
                        max_session_timeout: Some(lowered.max.min(max).max(min)),
                        ..settings
                    };
                    ens = ens.with_member_settings(lowered.server, own);
                }
                let mut m = Multi {
                    ens,
                    conns: BTreeMap::new(),
                    clients: BTreeMap::new(),
                    pending: BTreeMap::new(),
                    last_answer: None,
                    faults: spec.faults.clone(),
                    next_fault: 0,
                    endings: Vec::new(),
                    lags: vec![0; spec.servers.max(1)],
                    violation: None,
                    notes: Vec::new(),
                    down: spec.down_at_start,
                    plans: BTreeMap::new(),
                };
                if let Some(down) = spec.down_at_start {
                    if down.how != DownHow::Unresolvable {
                        // Out of the quorum and serving no client until it is back.
                        m.ens.cut_off(down.server);
                        if let Some(until) = down.until {
                            m.endings.push((until, Ending::CutOff(down.server)));
                        }
                    }
                }
                Server::Ensemble(Box::new(m))
            }
        }
    }

    /// How many servers the connect string names.
    pub fn servers(&self) -> usize {
        match self {
            Server::Single(_) => 1,
            Server::Ensemble(m) => m.ens.servers(),
        }
    }

    /// What member `server` does with a ConnectRequest at `now`.
    pub fn member_state(&self, server: usize, now: Timestamp) -> MemberState {
        let Server::Ensemble(m) = self else {
            return MemberState::Serving;
        };
        if let Some(down) = m.down.filter(|d| d.server == server) {
            let back = down.until.is_some_and(|until| until <= now);
            match down.how {
                DownHow::Unresolvable => return MemberState::Unresolvable,
                DownHow::Stopped if !back => return MemberState::Refusing,
                DownHow::Frozen if !back => return MemberState::Silent,
                DownHow::Stopped | DownHow::Frozen => {}
            }
        }
        if m.ens.is_cut_off(server) {
            MemberState::Closing
        } else {
            MemberState::Serving
        }
    }

    /// Process `pid`'s client is given these members only (its start-up
    /// machine's plan).
    pub fn set_plan(&mut self, pid: usize, servers: &[usize]) {
        if let Server::Ensemble(m) = self {
            m.plans.insert(pid, servers.to_vec());
        }
    }

    /// The committed tree and the session tracker: the server, or the
    /// ensemble's leader.
    pub fn zk(&self) -> &ZkModel {
        match self {
            Server::Single(zk) => zk,
            Server::Ensemble(m) => m.ens.leader(),
        }
    }

    /// The ensemble, if this is one.
    pub fn ensemble(&self) -> Option<&Ensemble> {
        match self {
            Server::Single(_) => None,
            Server::Ensemble(m) => Some(&m.ens),
        }
    }

    /// The member `session` is connected to (0 with one server).
    pub fn member_of(&self, session: SessionId) -> Option<usize> {
        match self {
            Server::Single(_) => Some(0),
            Server::Ensemble(m) => m.conns.get(&session).map(|c| c.server),
        }
    }

    /// See [`ZkModel::negotiate`].
    pub fn negotiate(&self, requested: Duration) -> Duration {
        self.zk().negotiate(requested)
    }

    /// What member `server` negotiates for `requested` (its own limits).
    pub fn negotiate_at(&self, server: usize, requested: Duration) -> Duration {
        match self {
            Server::Single(zk) => zk.negotiate(requested),
            Server::Ensemble(m) => m.ens.negotiate_at(server, requested),
        }
    }

    /// The timeout `session` runs by now (the one the member it is on
    /// negotiated), if it is alive.
    pub fn session_timeout(&self, session: SessionId) -> Option<Duration> {
        self.zk().session_timeout(session)
    }

    /// Requests applied by the server (the leader's, for an ensemble).
    pub fn ops(&self) -> u64 {
        self.zk().ops()
    }

    /// The newest committed zxid.
    pub fn zxid(&self) -> i64 {
        self.zk().zxid()
    }

    /// Whether the session is alive (on the leader's tracker).
    pub fn session_alive(&self, session: SessionId) -> bool {
        self.zk().session_alive(session)
    }

    /// Committed children of `path`.
    pub fn children(&self, path: &str) -> Vec<String> {
        self.zk().children(path)
    }

    /// The committed stat of `path`.
    pub fn stat(&self, path: &str) -> Option<Stat> {
        self.zk().stat(path)
    }

    /// A ping from `session` reached its server (which forwards it to the
    /// leader's tracker, if it still serves the session).
    pub fn touch(&mut self, now: Timestamp, session: SessionId) {
        match self {
            Server::Single(zk) => zk.touch(now, session),
            Server::Ensemble(m) => {
                if let Some(conn) = m.conns.get(&session) {
                    if m.ens.usable(*conn, session).is_ok() {
                        m.ens.leader_mut().touch(now, session);
                    }
                }
            }
        }
    }

    /// Wipes a single server's data ([`ZkModel::wipe`]); `false` for an
    /// ensemble (not modelled: every member's data at once).
    pub fn wipe(&mut self) -> bool {
        match self {
            Server::Single(zk) => {
                zk.wipe();
                true
            }
            Server::Ensemble(_) => false,
        }
    }

    /// Keeps `session` alive at the session tracker, whatever its
    /// connection: an operator's process that holds an ephemeral node for
    /// the whole run (reconnecting as it must, which is not modelled).
    pub fn keep_alive(&mut self, now: Timestamp, session: SessionId) {
        match self {
            Server::Single(zk) => zk.touch(now, session),
            Server::Ensemble(m) => m.ens.leader_mut().touch(now, session),
        }
    }

    /// The whole service restarts (see [`ZkModel::restart`]): one server
    /// loses its watches (its clients re-arm nothing: the single-server
    /// model keeps no client-side tables); an ensemble's session timers
    /// restart at the leader, and the members' watch tables stay for the
    /// clients that re-send them (`setWatches`) on reconnecting.
    pub fn restart(&mut self, now: Timestamp) {
        match self {
            Server::Single(zk) => zk.restart(now),
            Server::Ensemble(m) => m.ens.leader_mut().restart_session_timers(now),
        }
    }

    /// The session's connection closed: its watches at its member go.
    pub fn connection_closed(&mut self, session: SessionId) {
        match self {
            Server::Single(zk) => zk.connection_closed(session),
            Server::Ensemble(m) => m.ens.connection_closed(session),
        }
    }

    /// An operator's session (zkCli, connected to the leader).
    pub fn open_session(
        &mut self,
        now: Timestamp,
        requested: Duration,
        identity: Option<String>,
    ) -> (SessionId, Duration) {
        match self {
            Server::Single(zk) => zk.open_session(now, requested, identity),
            Server::Ensemble(m) => {
                let (s, timeout, conn) = m.ens.open_at_leader(now, requested, identity);
                m.conns.insert(s, conn);
                (s, timeout)
            }
        }
    }

    /// Closes a session; returns the watches that fired.
    pub fn close_session(&mut self, session: SessionId) -> Vec<Fired> {
        match self {
            Server::Single(zk) => zk.close_session(session),
            Server::Ensemble(m) => {
                m.ens.close_session(session);
                m.conns.remove(&session);
                m.ens.take_fired()
            }
        }
    }

    /// The session's request, at the member it is connected to.
    pub fn apply(
        &mut self,
        now: Timestamp,
        session: SessionId,
        request: &Request,
    ) -> (Result<Reply, ZkCode>, Vec<Fired>) {
        match self {
            Server::Single(zk) => zk.apply(now, session, request),
            Server::Ensemble(m) => {
                let Some(conn) = m.conns.get(&session).copied() else {
                    return (Err(ZkCode::ConnectionLoss), Vec::new());
                };
                m.last_answer = None;
                let reply = match m.ens.request(now, conn, session, request) {
                    Ok((reply, zxid)) => {
                        m.last_answer = Some(zxid);
                        reply
                    }
                    // The connection's own failure: no reply header.
                    Err(code) => Err(code),
                };
                (reply, m.ens.take_fired())
            }
        }
    }

    /// `setData` (see [`ZkModel::set_data`]).
    pub fn set_data(
        &mut self,
        now: Timestamp,
        session: SessionId,
        path: &str,
        data: &[u8],
        version: Option<i32>,
    ) -> (Result<Stat, ZkCode>, Vec<Fired>) {
        match self {
            Server::Single(zk) => zk.set_data(now, session, path, data, version),
            Server::Ensemble(m) => {
                let Some(conn) = m.conns.get(&session).copied() else {
                    return (Err(ZkCode::ConnectionLoss), Vec::new());
                };
                let result = m
                    .ens
                    .set_data(now, conn, session, path, data, version)
                    .and_then(|r| r);
                (result, m.ens.take_fired())
            }
        }
    }

    /// `setACL` from `session` ([`ZkModel::set_acl`]: it fires no watch).
    /// One server only: an ensemble's log has no such transaction, and no
    /// seed of one draws it (`Unimplemented`).
    pub fn set_acl(
        &mut self,
        now: Timestamp,
        session: SessionId,
        path: &str,
        acl: &zkelect_core::Acl,
        version: Option<i32>,
    ) -> Result<(), ZkCode> {
        match self {
            Server::Single(zk) => zk.set_acl(now, session, path, acl, version),
            Server::Ensemble(_) => Err(ZkCode::Unimplemented),
        }
    }

    /// The session tracker (the leader's) expires silent sessions.
    pub fn expire_due(&mut self, now: Timestamp) -> (Vec<SessionId>, Vec<Fired>) {
        match self {
            Server::Single(zk) => zk.expire_due(now),
            Server::Ensemble(m) => {
                let due = m.ens.expire_due(now);
                for s in &due {
                    m.conns.remove(s);
                }
                (due, m.ens.take_fired())
            }
        }
    }

    /// zookeeper-async's handshake on a throw-away connection (see
    /// [`client::handshake`]).
    pub fn handshake(
        &mut self,
        now: Timestamp,
        requested: Duration,
        identity: Option<&str>,
    ) -> Duration {
        let (session, timeout) = self.open_session(now, requested, identity.map(str::to_owned));
        self.close_session(session);
        timeout
    }

    /// Process `pid`'s client library (re)connects `session` (or opens a
    /// first one). With an ensemble it tries each member in turn from the
    /// one after its last, sending the last zxid it has seen (`forget`: 0,
    /// the canary); a member behind it or cut off refuses, and if every one
    /// does, so does this. With `rearm` it re-sends its watches
    /// (`setWatches`) to the new member.
    #[allow(clippy::too_many_arguments)] // the connect request's fields, named in the doc
    pub fn connect(
        &mut self,
        pid: usize,
        now: Timestamp,
        session: Option<SessionId>,
        requested: Duration,
        identity: Option<&str>,
        forget: bool,
        rearm: bool,
    ) -> Result<Reconnected, Refused> {
        let m = match self {
            Server::Single(zk) => {
                return Ok(client::reconnect(zk, now, session, requested, identity));
            }
            Server::Ensemble(m) => m,
        };
        let record = m.clients.get(&pid).copied().unwrap_or_default();
        let seen = if record.session == session && session.is_some() {
            record.seen
        } else {
            0
        };
        let send = if forget { 0 } else { seen };
        m.pending.retain(|(p, _), _| *p != pid);
        let n = m.ens.servers();
        let mut refused = Refused::NoServer;
        let plan = m.plans.get(&pid).cloned();
        for i in 1..=n {
            let server = (record.server + i) % n;
            if plan.as_ref().is_some_and(|p| !p.contains(&server)) {
                // Not in this client's list: it never tries it.
                continue;
            }
            let outcome = match session {
                Some(s) if m.ens.leader().session_alive(s) => {
                    let old = m.conns.get(&s).map(|c| c.server);
                    let watches = match (rearm, old) {
                        (true, Some(old)) => Some(m.ens.watches(old, s)),
                        _ => None,
                    };
                    m.ens.reconnect(server, s, send).map(|conn| {
                        m.conns.insert(s, conn);
                        m.ens.retime(server, s, requested);
                        if let Some(watches) = watches {
                            m.ens.set_watches(server, s, send, watches);
                        }
                        Reconnected::Same(s)
                    })
                }
                // A new session starts from nothing seen (zookeeper-async
                // zeroes its zxid; the others open a new client).
                _ => m
                    .ens
                    .open(now, server, requested, identity.map(str::to_owned), 0)
                    .map(|(new, timeout, conn)| {
                        m.conns.insert(new, conn);
                        match session {
                            Some(_) => Reconnected::Expired { new, timeout },
                            None => Reconnected::New {
                                session: new,
                                timeout,
                            },
                        }
                    }),
            };
            match outcome {
                Ok(reconnected) => {
                    let session = match reconnected {
                        Reconnected::Same(s) => s,
                        Reconnected::Expired { new, .. } => new,
                        Reconnected::New { session, .. } => session,
                    };
                    let seen = if Some(session) == record.session {
                        seen
                    } else {
                        0
                    };
                    m.clients.insert(
                        pid,
                        Record {
                            session: Some(session),
                            seen,
                            server,
                        },
                    );
                    return Ok(reconnected);
                }
                Err(why) => refused = why,
            }
        }
        let record = m.clients.entry(pid).or_default();
        record.server = (record.server + 1) % n;
        Err(refused)
    }

    /// The fired watches `connect` produced (`setWatches` on a member that
    /// is past the client).
    pub fn take_fired(&mut self) -> Vec<Fired> {
        match self {
            Server::Single(_) => Vec::new(),
            Server::Ensemble(m) => m.ens.take_fired(),
        }
    }

    /// The server answered `pid`'s `op` just now (after [`Self::apply`]):
    /// remember the reply header's zxid until the reply reaches the client.
    pub fn answered(&mut self, pid: usize, op: OpId) {
        if let Server::Ensemble(m) = self {
            if let Some(zxid) = m.last_answer.take() {
                m.pending.insert((pid, op), zxid);
            }
        }
    }

    /// `pid`'s client received the answer to `op`: the zxid it carried is
    /// now seen, and must not be older than what was seen before.
    pub fn arrived(&mut self, pid: usize, op: OpId) {
        if let Server::Ensemble(m) = self {
            let Some(zxid) = m.pending.remove(&(pid, op)) else {
                return;
            };
            let record = m.clients.entry(pid).or_default();
            if zxid < record.seen && m.violation.is_none() {
                m.violation = Some(format!(
                    "p{pid} got a reply from zk{} at zxid {zxid} after it had seen zxid {}",
                    record.server, record.seen
                ));
            }
            record.seen = record.seen.max(zxid);
        }
    }

    /// The first time a client saw an older view than it had seen.
    pub fn violation(&self) -> Option<&str> {
        match self {
            Server::Single(_) => None,
            Server::Ensemble(m) => m.violation.as_deref(),
        }
    }

    /// The ensemble's member faults due at `now`: returns the sessions whose
    /// connection a member dropped (the world closes them), the watches
    /// that fired (a follower catching up), and what happened, for the trace.
    pub fn tick(&mut self, now: Timestamp) -> (Vec<SessionId>, Vec<Fired>, Vec<String>) {
        let Server::Ensemble(m) = self else {
            return (Vec::new(), Vec::new(), Vec::new());
        };
        let mut dropped = Vec::new();
        let mut i = 0;
        while i < m.endings.len() {
            if m.endings[i].0 > now {
                i += 1;
                continue;
            }
            let (_, ending) = m.endings.remove(i);
            match ending {
                Ending::Lag(s) => {
                    m.lags[s] = m.lags[s].saturating_sub(1);
                    if m.lags[s] == 0 {
                        m.ens.set_lag(s, false);
                        m.notes.push(format!("zk{s} caught up"));
                    }
                }
                Ending::CutOff(s) => {
                    m.ens.rejoin(s);
                    m.notes.push(format!("zk{s} rejoined the quorum"));
                }
            }
        }
        while let Some(&(at, fault)) = m.faults.get(m.next_fault) {
            if at > now {
                break;
            }
            m.next_fault += 1;
            let n = m.ens.servers();
            let leader = m.ens.leader_index();
            match fault {
                MemberFault::Lag { server, ms } if server != leader && server < n => {
                    let ms = ms.min(LAG_MAX.as_millis() as u64);
                    m.lags[server] += 1;
                    m.ens.set_lag(server, true);
                    m.endings
                        .push((now + Duration::from_millis(ms), Ending::Lag(server)));
                    m.notes.push(fault.to_string());
                }
                MemberFault::CutOff { server, ms } if server != leader && server < n => {
                    let out = (0..n).filter(|s| m.ens.is_cut_off(*s)).count();
                    if m.ens.is_cut_off(server) || out + 1 > (n - 1) / 2 {
                        continue;
                    }
                    m.ens.cut_off(server);
                    m.endings
                        .push((now + Duration::from_millis(ms), Ending::CutOff(server)));
                    dropped.extend(
                        m.conns
                            .iter()
                            .filter(|(_, c)| c.server == server)
                            .map(|(s, _)| *s),
                    );
                    m.notes.push(fault.to_string());
                }
                MemberFault::NewLeader { server }
                    if server != leader && server < n && !m.ens.is_cut_off(server) =>
                {
                    if m.lags[server] > 0 {
                        m.lags[server] = 0;
                        m.endings.retain(|(_, e)| *e != Ending::Lag(server));
                    }
                    m.ens.change_leader(now, server);
                    dropped.extend(m.conns.keys().copied());
                    m.notes.push(fault.to_string());
                }
                _ => {}
            }
        }
        let notes = std::mem::take(&mut m.notes);
        (dropped, m.ens.take_fired(), notes)
    }
}
