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
//! Watches at followers are not modelled here (a read leaves none).
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

use crate::zk::{ZkModel, ZkSettings};

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

/// One member of the ensemble.
#[derive(Debug, Clone)]
struct Member {
    /// How many committed transactions it has applied (index into `log`).
    applied: usize,
    /// Whether it applies commits only when told ([`Ensemble::catch_up`]).
    lagging: bool,
    /// Whether it is cut off from the quorum.
    cut_off: bool,
    /// Bumped when it drops its clients, so their connections go stale.
    epoch: u64,
}

/// A client's connection: the server and the epoch it was made in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    /// The server's index.
    pub server: usize,
    epoch: u64,
    /// Which connection of the session this is (the newest one owns it).
    generation: u64,
}

/// A leader's committed state after each transaction (zxid, tree). Followers
/// serve reads from the entry they have applied.
#[derive(Debug, Clone)]
struct Commit {
    zxid: i64,
    tree: ZkModel,
}

/// A multi-server ZooKeeper (see the module docs).
#[derive(Debug, Clone)]
pub struct Ensemble {
    leader: ZkModel,
    log: Vec<Commit>,
    members: Vec<Member>,
    /// Per session: the generation of the connection that owns it.
    owners: Vec<(SessionId, u64)>,
    generations: u64,
}

impl Ensemble {
    /// `servers` members, all caught up, none lagging.
    pub fn new(servers: usize, settings: ZkSettings) -> Self {
        let leader = ZkModel::new(settings);
        let log = vec![Commit {
            zxid: leader.zxid(),
            tree: leader.clone(),
        }];
        let members = (0..servers.max(1))
            .map(|_| Member {
                applied: 0,
                lagging: false,
                cut_off: false,
                epoch: 0,
            })
            .collect();
        Self {
            leader,
            log,
            members,
            owners: Vec::new(),
            generations: 0,
        }
    }

    /// Members.
    pub fn servers(&self) -> usize {
        self.members.len()
    }

    /// The leader's committed tree.
    pub fn leader(&self) -> &ZkModel {
        &self.leader
    }

    /// The last zxid `server` has applied.
    pub fn last_zxid(&self, server: usize) -> i64 {
        self.members
            .get(server)
            .map_or(0, |m| self.log[m.applied].zxid)
    }

    /// Whether `server` applies commits only when caught up by hand.
    pub fn set_lag(&mut self, server: usize, lagging: bool) {
        if let Some(m) = self.members.get_mut(server) {
            m.lagging = lagging;
            if !lagging && !m.cut_off {
                m.applied = self.log.len() - 1;
            }
        }
    }

    /// `server` applies up to `n` more committed transactions.
    pub fn catch_up(&mut self, server: usize, n: usize) {
        let last = self.log.len() - 1;
        if let Some(m) = self.members.get_mut(server) {
            if !m.cut_off {
                m.applied = (m.applied + n).min(last);
            }
        }
    }

    /// `server` loses the quorum: it stops applying and serving, and its
    /// clients are disconnected.
    pub fn cut_off(&mut self, server: usize) {
        if let Some(m) = self.members.get_mut(server) {
            m.cut_off = true;
            m.epoch += 1;
        }
    }

    /// `server` rejoins the quorum (it syncs with the leader before serving).
    pub fn rejoin(&mut self, server: usize) {
        let last = self.log.len() - 1;
        if let Some(m) = self.members.get_mut(server) {
            m.cut_off = false;
            m.applied = last;
        }
    }

    fn commit(&mut self) {
        self.log.push(Commit {
            zxid: self.leader.zxid(),
            tree: self.leader.clone(),
        });
        let last = self.log.len() - 1;
        for m in &mut self.members {
            if !m.lagging && !m.cut_off {
                m.applied = last;
            }
        }
    }

    fn admit(&self, server: usize, seen: i64) -> Result<(), Refused> {
        let m = self.members.get(server).ok_or(Refused::NoServer)?;
        if m.cut_off {
            return Err(Refused::CutOff);
        }
        let last = self.log[m.applied].zxid;
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
            epoch: self.members[server].epoch,
            generation,
        }
    }

    /// A new session through `server`, for a client that has seen `seen`.
    /// Session creation is a transaction: the leader commits it.
    pub fn open_session(
        &mut self,
        now: Timestamp,
        server: usize,
        timeout: Duration,
        seen: i64,
    ) -> Result<(SessionId, Connection), Refused> {
        self.admit(server, seen)?;
        let (session, _) = self.leader.open_session(now, timeout, None);
        self.commit();
        // The connected server applied the session before answering.
        self.members[server].applied = self.log.len() - 1;
        Ok((session, self.connection(server, session)))
    }

    /// Moves `session` to `server` (a reconnect): the old connection no
    /// longer owns it; requests on it get `SessionMoved`.
    pub fn reconnect(
        &mut self,
        server: usize,
        session: SessionId,
        seen: i64,
    ) -> Result<Connection, Refused> {
        self.admit(server, seen)?;
        Ok(self.connection(server, session))
    }

    fn check(&self, conn: Connection, session: SessionId) -> Result<(), ZkCode> {
        let m = &self.members[conn.server];
        if m.cut_off || m.epoch != conn.epoch {
            return Err(ZkCode::ConnectionLoss);
        }
        let owner = self.owners.iter().find(|(s, _)| *s == session);
        if owner.is_some_and(|(_, g)| *g != conn.generation) {
            return Err(ZkCode::SessionMoved);
        }
        Ok(())
    }

    /// One request over `conn`: writes go to the leader (and the connected
    /// server applies them before answering), reads are served by the
    /// connected server from what it has applied. Returns the reply and the
    /// server's last zxid (the reply header's).
    pub fn request(
        &mut self,
        now: Timestamp,
        conn: Connection,
        session: SessionId,
        request: &Request,
    ) -> Result<(Result<Reply, ZkCode>, i64), ZkCode> {
        self.check(conn, session)?;
        let read = matches!(
            request,
            Request::GetChildren { .. } | Request::GetData { .. } | Request::Exists { .. }
        );
        let at = self.members[conn.server].applied;
        if read {
            // A read on a copy: followers' watches are not modelled.
            let mut tree = self.log[at].tree.clone();
            let (reply, _) = tree.apply(now, session, request);
            return Ok((reply, self.log[at].zxid));
        }
        let (reply, _) = self.leader.apply(now, session, request);
        self.commit();
        let last = self.log.len() - 1;
        self.members[conn.server].applied = last;
        Ok((reply, self.log[last].zxid))
    }

    /// `sync`: the connected server catches up with the leader as of now.
    pub fn sync(&mut self, conn: Connection, session: SessionId) -> Result<i64, ZkCode> {
        self.check(conn, session)?;
        let last = self.log.len() - 1;
        self.members[conn.server].applied = last;
        Ok(self.log[last].zxid)
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
