//! A multi-server ZooKeeper: a leader that orders every write, followers that
//! apply the committed transactions with lag, clients connected to different
//! servers, reads served by the connected server, sessions moving on
//! reconnect, `sync`, and members cut off from the quorum.
//!
//! ## The guarantees modelled, from ZooKeeper's documentation
//!
//! The ZooKeeper Programmer's Guide, "ZooKeeper Consistency Guarantees" (and
//! the Overview's "Guarantees"):
//!
//! - *Sequential Consistency*: "Updates from a client will be applied in the
//!   order that they were sent." Here: one leader applies every write to the
//!   one committed tree ([`ZkModel`]) in the order it receives them, and each
//!   committed write gets the next zxid (linearizable writes).
//! - *Single System Image*: "A client will see the same view of the service
//!   regardless of the server that it connects to. i.e., a client will never
//!   see an older view of the system even if the client fails over to a
//!   different server with the same session." The server enforces it when the
//!   client connects: the client sends the last zxid it has seen, and a server
//!   whose own last zxid is older refuses the connection ("Refusing session
//!   request for client ... as it has seen zxid ..."); the client tries
//!   another server ([`Refused::Behind`]).
//! - *Timeliness* and `sync`: "ZooKeeper does not guarantee that at every
//!   instance in time, two different clients will have identical views ...
//!   Use sync" — a read is served by the connected server from the
//!   transactions it has applied so far, which may be behind the leader;
//!   [`Ensemble::sync`] brings the connected server up to the leader as of
//!   the call.
//! - FIFO client order: a server answers a client's requests in order, and
//!   answers a write only after applying it, so a client reads its own writes.
//! - A server that loses the quorum stops serving: its clients are
//!   disconnected ([`Ensemble::cut_off`]); a session used from a connection
//!   it has left gets `SessionMoved`.
//!
//! Watches are per server: each member keeps its own copy of the tree and
//! its own watch tables, and a watch set by a read at a member fires when
//! THAT member applies the change (so a lagging follower fires late). A
//! session that moves to another member leaves its watches behind;
//! [`Ensemble::set_watches`] re-arms them there as the Java client and
//! zookeeper-client do with `setWatches` (the paths and the last zxid the
//! client has seen: the new member fires at once what changed after it).
//! Fired watches collect in an outbox ([`Ensemble::take_fired`]).
//!
//! Sessions belong to the ensemble: the leader's session tracker is the one
//! that expires them ([`Ensemble::expire_due`]), and the expiry is a
//! transaction every member applies. [`Ensemble::change_leader`] elects a
//! new leader: every member drops its clients (they all go through leader
//! election), the new leader has every committed transaction, and session
//! timers restart there.
//!
//! The checker of the client's side is [`SessionView`]: every reply's zxid
//! (the connected server's last zxid, as ZooKeeper's reply header carries)
//! must be at least the last the client has seen, across reconnects. The
//! canary [`Client::trusting`] forgets what it has seen when it reconnects
//! (it would connect to a server behind it, and trust its reads): the checker
//! catches it.
//!
//! ```
//! use zkelect_core::{Request, Timestamp};
//! use zkelect_sim::ensemble::{Client, Ensemble};
//! let mut zk = Ensemble::new(3, Default::default());
//! let now = Timestamp::ZERO;
//! let mut a = Client::connect(&mut zk, now, 0).unwrap();
//! let mut b = Client::connect(&mut zk, now, 1).unwrap();
//! zk.set_lag(1, true);
//! a.call(&mut zk, now, &Request::Create { path: "/x".into(), data: vec![],
//!     mode: zkelect_core::CreateMode::Persistent, acl: zkelect_core::Acl::Open }).unwrap();
//! let read = Request::Exists { path: "/x".into(), watch: false };
//! assert_eq!(b.call(&mut zk, now, &read).unwrap(), zkelect_core::Reply::Exists(None)); // behind
//! b.sync(&mut zk).unwrap();
//! assert!(matches!(b.call(&mut zk, now, &read).unwrap(), zkelect_core::Reply::Exists(Some(_))));
//! ```

use std::time::Duration;

use zkelect_core::{Reply, Request, SessionId, Timestamp, ZkCode};

use crate::zk::{Fired, ZkModel, ZkSettings};

/// Why a server refused a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The server has not applied the last zxid the client has seen.
    Behind {
        /// The server's last zxid.
        server: i64,
        /// The client's last seen zxid.
        client: i64,
    },
    /// The server is cut off from the quorum (it serves nobody).
    CutOff,
    /// No such server.
    NoServer,
}

/// One committed transaction, as every member applies it in log order.
/// Members replay them on their own tree, so they reach the leader's state
/// (a `ZkModel` is deterministic) and fire their own watches.
#[derive(Debug, Clone)]
enum Txn {
    /// A session's creation, with the timeout the member the client
    /// connected to negotiated (every member's tracker takes it as is).
    Open {
        now: Timestamp,
        granted: Duration,
        identity: Option<String>,
    },
    Write {
        now: Timestamp,
        session: SessionId,
        request: Request,
    },
    SetData {
        now: Timestamp,
        session: SessionId,
        path: String,
        data: Vec<u8>,
        version: Option<i32>,
    },
    Close {
        session: SessionId,
    },
}

/// One member of the ensemble.
#[derive(Debug, Clone)]
struct Member {
    /// Its own copy of the tree, with its own watches.
    tree: ZkModel,
    /// How many committed transactions it has applied (absolute log index).
    applied: usize,
    /// Whether it applies commits only when told ([`Ensemble::catch_up`]).
    lagging: bool,
    /// Whether it is cut off from the quorum.
    cut_off: bool,
    /// How many times it has dropped its clients: a connection made before
    /// the latest drop is stale.
    drops: u64,
}

/// A client's connection: the server, and how many times that server had
/// dropped its clients when it was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    /// The server's index.
    pub server: usize,
    drops: u64,
    /// Which connection of the session this is (the newest one owns it).
    generation: u64,
}

/// A multi-server ZooKeeper (see the module docs).
#[derive(Debug, Clone)]
pub struct Ensemble {
    members: Vec<Member>,
    leader: usize,
    /// Committed transactions from absolute index `base` on (the prefix every
    /// member applied is dropped).
    log: Vec<Txn>,
    base: usize,
    /// Per session: the generation of the connection that owns it.
    owners: Vec<(SessionId, u64)>,
    /// Per session: the log index of its `Open` (a member must have applied
    /// it to serve the session).
    opened: Vec<(SessionId, usize)>,
    generations: u64,
    fired: Vec<Fired>,
}

impl Ensemble {
    /// `servers` members, all caught up, none lagging; member 0 leads.
    pub fn new(servers: usize, settings: ZkSettings) -> Self {
        let members = (0..servers.max(1))
            .map(|_| Member {
                tree: ZkModel::new(settings),
                applied: 0,
                lagging: false,
                cut_off: false,
                drops: 0,
            })
            .collect();
        Self {
            members,
            leader: 0,
            log: Vec::new(),
            base: 0,
            owners: Vec::new(),
            opened: Vec::new(),
            generations: 0,
            fired: Vec::new(),
        }
    }

    /// Member `server` runs with `settings` of its own (a
    /// `maxSessionTimeout` lower than the others'); only before anything
    /// happened on it.
    pub fn with_member_settings(mut self, server: usize, settings: ZkSettings) -> Self {
        if let Some(m) = self.members.get_mut(server) {
            m.tree = ZkModel::new(settings);
        }
        self
    }

    /// What member `server` negotiates for a client requesting `requested`.
    pub fn negotiate_at(&self, server: usize, requested: Duration) -> Duration {
        self.members
            .get(server)
            .map_or(requested, |m| m.tree.negotiate(requested))
    }

    /// Members.
    pub fn servers(&self) -> usize {
        self.members.len()
    }

    /// The leader's index.
    pub fn leader_index(&self) -> usize {
        self.leader
    }

    /// The leader's committed tree (and its session tracker).
    pub fn leader(&self) -> &ZkModel {
        &self.members[self.leader].tree
    }

    /// The leader's tree, for changes that are not transactions (session
    /// timers, restarts).
    pub fn leader_mut(&mut self) -> &mut ZkModel {
        &mut self.members[self.leader].tree
    }

    /// Member `server`'s tree (what it serves reads from).
    pub fn tree(&self, server: usize) -> Option<&ZkModel> {
        self.members.get(server).map(|m| &m.tree)
    }

    /// The last zxid `server` has applied.
    pub fn last_zxid(&self, server: usize) -> i64 {
        self.members.get(server).map_or(0, |m| m.tree.zxid())
    }

    /// The oldest zxid any member has applied: a change committed at or
    /// before it is on every member.
    pub fn slowest_zxid(&self) -> i64 {
        self.members
            .iter()
            .map(|m| m.tree.zxid())
            .min()
            .unwrap_or(0)
    }

    /// Whether `server` is cut off from the quorum.
    pub fn is_cut_off(&self, server: usize) -> bool {
        self.members.get(server).is_some_and(|m| m.cut_off)
    }

    /// Whether `server` is lagging.
    pub fn is_lagging(&self, server: usize) -> bool {
        self.members.get(server).is_some_and(|m| m.lagging)
    }

    /// The watches fired since the last call, each at the member that
    /// applied the change (a session's watches live at its member).
    pub fn take_fired(&mut self) -> Vec<Fired> {
        std::mem::take(&mut self.fired)
    }

    fn end(&self) -> usize {
        self.base + self.log.len()
    }

    /// Applies committed transactions to `server` up to absolute index `to`.
    fn apply_to(&mut self, server: usize, to: usize) {
        let to = to.min(self.end());
        let Some(m) = self.members.get_mut(server) else {
            return;
        };
        while m.applied < to {
            let txn = &self.log[m.applied - self.base];
            let fired = match txn {
                Txn::Open {
                    now,
                    granted,
                    identity,
                } => {
                    m.tree
                        .open_session_granted(*now, *granted, identity.clone());
                    Vec::new()
                }
                Txn::Write {
                    now,
                    session,
                    request,
                } => m.tree.apply(*now, *session, request).1,
                Txn::SetData {
                    now,
                    session,
                    path,
                    data,
                    version,
                } => m.tree.set_data(*now, *session, path, data, *version).1,
                Txn::Close { session } => m.tree.close_session(*session),
            };
            m.applied += 1;
            self.fired.extend(fired);
        }
    }

    /// The leader applied `txn` already: log it, let every follower that
    /// keeps up apply it, and drop the prefix everyone has.
    fn commit(&mut self, txn: Txn) {
        self.log.push(txn);
        let end = self.end();
        self.members[self.leader].applied = end;
        for s in 0..self.members.len() {
            let m = &self.members[s];
            if s != self.leader && !m.lagging && !m.cut_off {
                self.apply_to(s, end);
            }
        }
        let low = self.members.iter().map(|m| m.applied).min().unwrap_or(end);
        if low > self.base {
            self.log.drain(..low - self.base);
            self.base = low;
        }
    }

    /// Whether `server` applies commits only when caught up by hand; ending
    /// the lag catches it up.
    pub fn set_lag(&mut self, server: usize, lagging: bool) {
        if let Some(m) = self.members.get_mut(server) {
            m.lagging = lagging;
            if !lagging && !m.cut_off {
                let end = self.end();
                self.apply_to(server, end);
            }
        }
    }

    /// `server` applies up to `n` more committed transactions.
    pub fn catch_up(&mut self, server: usize, n: usize) {
        if let Some(m) = self.members.get(server) {
            if !m.cut_off {
                let to = m.applied + n;
                self.apply_to(server, to);
            }
        }
    }

    /// `server` loses the quorum: it stops applying and serving, and its
    /// clients are disconnected (and its watches go with their connections).
    pub fn cut_off(&mut self, server: usize) {
        if server == self.leader {
            return;
        }
        if let Some(m) = self.members.get_mut(server) {
            m.cut_off = true;
            m.drops += 1;
            // Its watch tables stay: they stand for the clients' own tables,
            // which zookeeper-client and the Java client re-send
            // (`setWatches`) wherever they reconnect.
        }
    }

    /// `server` rejoins the quorum (it syncs with the leader before serving).
    pub fn rejoin(&mut self, server: usize) {
        if let Some(m) = self.members.get_mut(server) {
            m.cut_off = false;
            let end = self.end();
            self.apply_to(server, end);
        }
    }

    /// A new leader (`server`, if it is a member in the quorum): every member
    /// drops its clients, the new leader syncs every committed transaction,
    /// and its session tracker starts every session's timer afresh at `now`.
    pub fn change_leader(&mut self, now: Timestamp, server: usize) {
        if self.members.get(server).is_none_or(|m| m.cut_off) {
            return;
        }
        let end = self.end();
        self.apply_to(server, end);
        self.members[server].lagging = false;
        self.leader = server;
        for m in &mut self.members {
            m.drops += 1;
        }
        // Watch tables stay (see `cut_off`); the new leader's session
        // tracker starts every timer afresh.
        self.members[server].tree.restart_session_timers(now);
    }

    fn admit(&self, server: usize, seen: i64) -> Result<(), Refused> {
        let m = self.members.get(server).ok_or(Refused::NoServer)?;
        if m.cut_off {
            return Err(Refused::CutOff);
        }
        let last = m.tree.zxid();
        if last < seen {
            return Err(Refused::Behind {
                server: last,
                client: seen,
            });
        }
        Ok(())
    }

    fn connection(&mut self, server: usize, session: SessionId) -> Connection {
        self.generations += 1;
        let generation = self.generations;
        self.owners.retain(|(s, _)| *s != session);
        self.owners.push((session, generation));
        Connection {
            server,
            drops: self.members[server].drops,
            generation,
        }
    }

    /// A new session through `server`, for a client that has seen `seen`:
    /// its id, its negotiated timeout and the connection. Session creation
    /// is a transaction: the leader commits it, and the connected server
    /// applies it before answering.
    pub fn open(
        &mut self,
        now: Timestamp,
        server: usize,
        requested: Duration,
        identity: Option<String>,
        seen: i64,
    ) -> Result<(SessionId, Duration, Connection), Refused> {
        self.admit(server, seen)?;
        // The member the client reached negotiates, by its own limits.
        let granted = self.members[server].tree.negotiate(requested);
        let (session, timeout) = self.commit_open(now, granted, identity);
        let end = self.end();
        self.apply_to(server, end);
        Ok((session, timeout, self.connection(server, session)))
    }

    /// Opens a session at the leader and commits its creation (the one
    /// transaction both ways of opening share).
    fn commit_open(
        &mut self,
        now: Timestamp,
        granted: Duration,
        identity: Option<String>,
    ) -> (SessionId, Duration) {
        let leader = self.leader;
        let session =
            self.members[leader]
                .tree
                .open_session_granted(now, granted, identity.clone());
        let at = self.end();
        self.commit(Txn::Open {
            now,
            granted,
            identity,
        });
        self.opened.retain(|(s, _)| *s != session);
        self.opened.push((session, at));
        (session, granted)
    }

    /// A session opened at the leader (an operator's zkCli there), which
    /// the leader always admits.
    pub fn open_at_leader(
        &mut self,
        now: Timestamp,
        requested: Duration,
        identity: Option<String>,
    ) -> (SessionId, Duration, Connection) {
        let granted = self.members[self.leader].tree.negotiate(requested);
        let (session, timeout) = self.commit_open(now, granted, identity);
        (session, timeout, self.connection(self.leader, session))
    }

    /// The session's connection closed: the watches set over it (at
    /// whichever member) are gone.
    pub fn connection_closed(&mut self, session: SessionId) {
        for m in &mut self.members {
            m.tree.connection_closed(session);
        }
    }

    /// [`open`](Self::open) with the default identity, for tests.
    pub fn open_session(
        &mut self,
        now: Timestamp,
        server: usize,
        timeout: Duration,
        seen: i64,
    ) -> Result<(SessionId, Connection), Refused> {
        self.open(now, server, timeout, None, seen)
            .map(|(s, _, c)| (s, c))
    }

    /// Moves `session` to `server` (a reconnect): the old connection no
    /// longer owns it (requests on it get `SessionMoved`), and the watches
    /// set over it are gone. The new server must have applied what the client
    /// has seen, and the session's creation.
    pub fn reconnect(
        &mut self,
        server: usize,
        session: SessionId,
        seen: i64,
    ) -> Result<Connection, Refused> {
        self.admit(server, seen)?;
        if let Some(&(_, at)) = self.opened.iter().find(|(s, _)| *s == session) {
            // The session's creation zxid is at most what the client has seen.
            self.apply_to(server, at + 1);
        }
        for m in &mut self.members {
            m.tree.connection_closed(session);
        }
        Ok(self.connection(server, session))
    }

    /// The timeout `session` runs by once it is on `server` (after a
    /// [`reconnect`](Self::reconnect) there): that member clamps the
    /// `requested` timeout the client sends into its own limits, and the
    /// session is touched with that value from then on (every member's
    /// tracker takes it, so a leader change keeps it).
    pub fn retime(&mut self, server: usize, session: SessionId, requested: Duration) -> Duration {
        let timeout = self.members[server].tree.negotiate(requested);
        for m in &mut self.members {
            m.tree.retime_session(session, timeout);
        }
        timeout
    }

    /// The watches `session` holds at `server`: data, child and exists paths.
    pub fn watches(&self, server: usize, session: SessionId) -> [Vec<String>; 3] {
        self.members
            .get(server)
            .map(|m| m.tree.watches_of(session))
            .unwrap_or_default()
    }

    /// `setWatches` at `server`: re-arms `watches` (data, child, exists) for
    /// `session`; what changed there after `seen` fires at once.
    pub fn set_watches(
        &mut self,
        server: usize,
        session: SessionId,
        seen: i64,
        watches: [Vec<String>; 3],
    ) {
        if let Some(m) = self.members.get_mut(server) {
            let fired = m.tree.set_watches(session, seen, watches);
            self.fired.extend(fired);
        }
    }

    fn check(&self, conn: Connection, session: SessionId) -> Result<(), ZkCode> {
        let m = self
            .members
            .get(conn.server)
            .ok_or(ZkCode::ConnectionLoss)?;
        if m.cut_off || m.drops != conn.drops {
            return Err(ZkCode::ConnectionLoss);
        }
        let owner = self.owners.iter().find(|(s, _)| *s == session);
        if owner.is_some_and(|(_, g)| *g != conn.generation) {
            return Err(ZkCode::SessionMoved);
        }
        Ok(())
    }

    /// Whether `conn` still reaches its server and owns `session`.
    pub fn usable(&self, conn: Connection, session: SessionId) -> Result<(), ZkCode> {
        self.check(conn, session)
    }

    /// One request over `conn`: writes go to the leader (and the connected
    /// server applies them before answering), reads are served by the
    /// connected server from what it has applied (a watch stays there).
    /// Returns the reply and the server's last zxid (the reply header's).
    pub fn request(
        &mut self,
        now: Timestamp,
        conn: Connection,
        session: SessionId,
        request: &Request,
    ) -> Result<(Result<Reply, ZkCode>, i64), ZkCode> {
        self.check(conn, session)?;
        let server = conn.server;
        if let Request::Sync { .. } = request {
            // The leader answers once the connected server has applied
            // every transaction committed before the sync (the session's
            // liveness is checked by the leader's tracker).
            let leader = self.leader;
            let (reply, _) = self.members[leader].tree.apply(now, session, request);
            let end = self.end();
            self.apply_to(server, end);
            return Ok((reply, self.members[server].tree.zxid()));
        }
        let read = matches!(
            request,
            Request::GetChildren { .. } | Request::GetData { .. } | Request::Exists { .. }
        );
        if read {
            let m = &mut self.members[server];
            let (reply, _) = m.tree.apply(now, session, request);
            // The session's tracker is the leader's.
            self.members[self.leader].tree.touch(now, session);
            return Ok((reply, self.members[server].tree.zxid()));
        }
        let leader = self.leader;
        let (reply, fired) = self.members[leader].tree.apply(now, session, request);
        self.fired.extend(fired);
        self.commit(Txn::Write {
            now,
            session,
            request: request.clone(),
        });
        let end = self.end();
        self.apply_to(server, end);
        Ok((reply, self.members[server].tree.zxid()))
    }

    /// `setData` from an operator's session over `conn` (see
    /// [`ZkModel::set_data`]).
    pub fn set_data(
        &mut self,
        now: Timestamp,
        conn: Connection,
        session: SessionId,
        path: &str,
        data: &[u8],
        version: Option<i32>,
    ) -> Result<Result<zkelect_core::Stat, ZkCode>, ZkCode> {
        self.check(conn, session)?;
        let leader = self.leader;
        let (result, fired) = self.members[leader]
            .tree
            .set_data(now, session, path, data, version);
        self.fired.extend(fired);
        self.commit(Txn::SetData {
            now,
            session,
            path: path.to_owned(),
            data: data.to_vec(),
            version,
        });
        let end = self.end();
        self.apply_to(conn.server, end);
        Ok(result)
    }

    /// Ends `session` (a close): a transaction every member applies.
    pub fn close_session(&mut self, session: SessionId) {
        let leader = self.leader;
        if !self.members[leader].tree.session_alive(session) {
            return;
        }
        let fired = self.members[leader].tree.close_session(session);
        self.fired.extend(fired);
        self.commit(Txn::Close { session });
        self.owners.retain(|(s, _)| *s != session);
        self.opened.retain(|(s, _)| *s != session);
    }

    /// The leader expires every session silent for its timeout at `now`;
    /// each expiry is a transaction. Returns the expired sessions.
    pub fn expire_due(&mut self, now: Timestamp) -> Vec<SessionId> {
        let leader = self.leader;
        let (due, fired) = self.members[leader].tree.expire_due(now);
        self.fired.extend(fired);
        for s in &due {
            self.commit(Txn::Close { session: *s });
            self.owners.retain(|(o, _)| o != s);
            self.opened.retain(|(o, _)| o != s);
        }
        due
    }

    /// `sync`: the connected server catches up with the leader as of now.
    pub fn sync(&mut self, conn: Connection, session: SessionId) -> Result<i64, ZkCode> {
        self.check(conn, session)?;
        let end = self.end();
        self.apply_to(conn.server, end);
        Ok(self.members[conn.server].tree.zxid())
    }
}

/// The client's side of the single-system-image guarantee: the zxids its
/// replies carry never go back, across reconnects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionView {
    /// The last zxid seen.
    pub seen: i64,
}

impl SessionView {
    /// Records a reply's zxid; `Err` (the checker's failure) if it is older
    /// than what was already seen.
    pub fn observe(&mut self, zxid: i64) -> Result<(), String> {
        if zxid < self.seen {
            return Err(format!(
                "a reply from zxid {zxid} after the client had seen {}",
                self.seen
            ));
        }
        self.seen = zxid;
        Ok(())
    }
}

/// A client of the ensemble: a session, its connection, and what it has seen.
#[derive(Debug, Clone)]
pub struct Client {
    /// Its session.
    pub session: SessionId,
    /// Its current connection.
    pub conn: Connection,
    /// The checker of what it has seen.
    pub view: SessionView,
    /// The canary: on reconnecting it sends zxid 0, not what it has seen, so
    /// a server behind it accepts it.
    pub forgets_on_reconnect: bool,
}

impl Client {
    /// Opens a session through `server`.
    pub fn connect(zk: &mut Ensemble, now: Timestamp, server: usize) -> Result<Self, Refused> {
        let (session, conn) = zk.open_session(now, server, Duration::from_secs(4), 0)?;
        // A fresh session starts at the zxid that created it.
        let view = SessionView {
            seen: zk.last_zxid(server),
        };
        Ok(Self {
            session,
            conn,
            view,
            forgets_on_reconnect: false,
        })
    }

    /// The canary: a client that forgets what it has seen when it reconnects.
    pub fn trusting(mut self) -> Self {
        self.forgets_on_reconnect = true;
        self
    }

    /// One request: the server's answer, or a transport error
    /// (`ConnectionLoss`, `SessionMoved`) in the same `Err`. The checker's
    /// verdict is dropped; [`Self::checked`] keeps it.
    pub fn call(
        &mut self,
        zk: &mut Ensemble,
        now: Timestamp,
        request: &Request,
    ) -> Result<Reply, ZkCode> {
        let (reply, _) = self.checked(zk, now, request)?;
        reply
    }

    /// One request, with the checker's verdict on its zxid: `Err` is the
    /// transport's error, `Ok((answer, verdict))` the server's answer.
    #[allow(clippy::type_complexity)] // two results of different layers, named in the doc
    pub fn checked(
        &mut self,
        zk: &mut Ensemble,
        now: Timestamp,
        request: &Request,
    ) -> Result<(Result<Reply, ZkCode>, Result<(), String>), ZkCode> {
        let (reply, zxid) = zk.request(now, self.conn, self.session, request)?;
        Ok((reply, self.view.observe(zxid)))
    }

    /// `sync` on the current connection.
    pub fn sync(&mut self, zk: &mut Ensemble) -> Result<Result<(), String>, ZkCode> {
        let zxid = zk.sync(self.conn, self.session)?;
        Ok(self.view.observe(zxid))
    }

    /// Moves the session to `server`, sending what it has seen (or 0, for
    /// the canary).
    pub fn reconnect(&mut self, zk: &mut Ensemble, server: usize) -> Result<(), Refused> {
        let seen = if self.forgets_on_reconnect {
            0
        } else {
            self.view.seen
        };
        self.conn = zk.reconnect(server, self.session, seen)?;
        Ok(())
    }
}
