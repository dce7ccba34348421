//! An in-memory ZooKeeper server, itself sans-IO: requests in, replies and fired
//! watches out, time passed in. Usable without candidates (the `memory`
//! transport and the model tests drive it directly).
//!
//! Semantics kept from the real server: a znode tree with persistent, ephemeral,
//! sequential and container nodes; sequence suffixes taken from the parent's
//! `cversion` (which deletes bump too) and printed as `%010d` of a signed 32-bit
//! counter, so they wrap past 2^31−1 to negative numbers; a global zxid behind
//! every `Stat`; ACLs checked against the session's identities (CREATE and
//! DELETE on the parent, READ and WRITE on the node, checked in the order the
//! server's `PrepRequestProcessor` checks them); sessions with a negotiated
//! timeout clamped to `[minSessionTimeout, maxSessionTimeout]` (by default
//! `[2, 20] × tick`, as the real server), expired when nothing was heard from them
//! for the timeout, taking their ephemerals and watches with them; one-shot data,
//! child and exists watches, kept per connection as the server keeps them (a
//! reconnect or a server restart loses them; zookeeper-async does not set them
//! again, so the model does not either).
//!
//! Simplifications, each on the adversarial side: an empty container is removed
//! at once when its last child goes (the real server reaps it on a timer, so a
//! create under it may still succeed for a while); an `exists` watch on a missing
//! node is kept in a table of its own (the server keeps it with the data watches;
//! the events are the same).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use zkelect_core::{
    Acl, AclScheme, CreateMode, Perms, Reply, Request, SessionId, Stat, Timestamp, WatchEvent,
    WatchKind, ZkCode,
};

/// The identity the server gives every session of the model: its client's
/// address (all of them on the loopback).
pub const CLIENT_IP: &str = "ip:127.0.0.1";

/// The identity of a session that authenticated with the server's super
/// digest (`zookeeper.DigestAuthenticationProvider.superDigest`): the
/// server's `checkACL` grants it everything on every node, whatever the
/// node's ACL (an operator's, who may always change an ACL).
pub const SUPER: &str = "super:";

/// A watch that fired, and the session it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fired {
    /// The session whose watch it was.
    pub session: SessionId,
    /// What happened.
    pub event: WatchEvent,
    /// The server's zxid when it fired: events of one change share it, on
    /// every member of an ensemble (each applies the change in the same
    /// state), so the world can tell changes apart when a lagging follower
    /// applies several at once.
    pub zxid: i64,
}

#[derive(Debug, Clone)]
struct Node {
    data: Vec<u8>,
    stat: Stat,
    /// The node's ACL as the server keeps it: `auth` entries replaced by
    /// the creator session's authenticated identities (`fixupACL`).
    acl: Vec<Grant>,
    /// The ACL's version (`Stat.aversion`, which `zkelect_core::Stat` does
    /// not carry): bumped by every `setACL`, checked by a versioned one.
    aversion: i32,
    children: BTreeSet<String>,
    container: bool,
}

#[derive(Debug, Clone)]
struct Session {
    timeout: Duration,
    last_heard: Timestamp,
    identities: BTreeSet<String>,
    ephemerals: BTreeSet<String>,
}

/// The server's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZkSettings {
    /// The server tick (`tickTime`): the default session limits are 2 and 20 ticks.
    pub tick: Duration,
    /// The `cversion` new nodes start with, so a test can start sequences near 2^31.
    pub cversion_start: i32,
    /// `minSessionTimeout`; `None` is the server's default, 2 × tick.
    pub min_session_timeout: Option<Duration>,
    /// `maxSessionTimeout`; `None` is the server's default, 20 × tick.
    pub max_session_timeout: Option<Duration>,
}

impl Default for ZkSettings {
    fn default() -> Self {
        Self {
            tick: Duration::from_millis(200),
            cversion_start: 0,
            min_session_timeout: None,
            max_session_timeout: None,
        }
    }
}

impl ZkSettings {
    /// The session timeout limits in force: `[minSessionTimeout,
    /// maxSessionTimeout]`, each defaulting as the real server does.
    pub fn session_limits(&self) -> (Duration, Duration) {
        (
            self.min_session_timeout.unwrap_or(self.tick * 2),
            self.max_session_timeout.unwrap_or(self.tick * 20),
        )
    }

    /// The timeout the server grants a request, as its `processConnectRequest`
    /// does: raised to the minimum, then lowered to the maximum (so a maximum
    /// below the minimum wins; the real server refuses such a config at start).
    pub fn negotiate(&self, requested: Duration) -> Duration {
        let (min, max) = self.session_limits();
        requested.max(min).min(max)
    }
}

/// The in-memory ZooKeeper.
#[derive(Debug, Clone)]
pub struct ZkModel {
    settings: ZkSettings,
    nodes: BTreeMap<String, Node>,
    zxid: i64,
    next_session: i64,
    sessions: BTreeMap<SessionId, Session>,
    /// No session expires before this (a lower bound: hearing from a
    /// session only moves its deadline later), so most expiry ticks look at
    /// no session.
    expiry_floor: Timestamp,
    data_watches: BTreeMap<String, BTreeSet<SessionId>>,
    child_watches: BTreeMap<String, BTreeSet<SessionId>>,
    exist_watches: BTreeMap<String, BTreeSet<SessionId>>,
    ops: u64,
}

impl Default for ZkModel {
    fn default() -> Self {
        Self::new(ZkSettings::default())
    }
}

fn parent_of(path: &str) -> Option<&str> {
    let i = path.rfind('/')?;
    Some(if i == 0 { "/" } else { &path[..i] })
}

fn name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Permissions, as ZooKeeper numbers them.
const READ: u8 = 1;
const WRITE: u8 = 2;
const CREATE: u8 = 4;
const DELETE: u8 = 8;
const ADMIN: u8 = 16;

impl ZkModel {
    /// A server with only the root node.
    pub fn new(settings: ZkSettings) -> Self {
        let mut nodes = BTreeMap::new();
        nodes.insert(
            "/".to_owned(),
            Node {
                data: Vec::new(),
                stat: Stat::default(),
                acl: vec![Grant::anyone()],
                aversion: 0,
                children: BTreeSet::new(),
                container: false,
            },
        );
        Self {
            settings,
            nodes,
            zxid: 0,
            next_session: 0x100,
            sessions: BTreeMap::new(),
            expiry_floor: Timestamp::from_millis(0),
            data_watches: BTreeMap::new(),
            child_watches: BTreeMap::new(),
            exist_watches: BTreeMap::new(),
            ops: 0,
        }
    }

    /// Its data directory wiped (and the server restarted on it): every
    /// node, session and watch gone, zxids counted from the start again.
    /// Session ids keep growing, as a real server's (made from the time and
    /// the server's id) differ from the ones before.
    pub fn wipe(&mut self) {
        let next_session = self.next_session;
        *self = Self::new(self.settings);
        self.next_session = next_session;
    }

    /// The server's settings.
    pub fn settings(&self) -> &ZkSettings {
        &self.settings
    }

    /// The timeout a connect request for `requested` would be granted (what a
    /// ConnectResponse carries), without opening a session.
    pub fn negotiate(&self, requested: Duration) -> Duration {
        self.settings.negotiate(requested)
    }

    /// Requests applied so far.
    pub fn ops(&self) -> u64 {
        self.ops
    }

    /// The newest zxid.
    pub fn zxid(&self) -> i64 {
        self.zxid
    }

    /// Opens a session, authenticated as `identity` if given (a digest
    /// `user:password` or any scheme's id); returns its id and the negotiated timeout.
    pub fn open_session(
        &mut self,
        now: Timestamp,
        requested: Duration,
        identity: Option<String>,
    ) -> (SessionId, Duration) {
        let timeout = self.settings.negotiate(requested);
        let id = self.open_session_granted(now, timeout, identity);
        (id, timeout)
    }

    /// Opens a session whose timeout another server negotiated (the member
    /// the client connected to): as ZooKeeper's session tracker takes the
    /// timeout a `createSession` carries, without clamping it again.
    pub fn open_session_granted(
        &mut self,
        now: Timestamp,
        timeout: Duration,
        identity: Option<String>,
    ) -> SessionId {
        self.expiry_floor = self.expiry_floor.min(now + timeout);
        let id = SessionId(self.next_session);
        self.next_session += 1;
        self.sessions.insert(
            id,
            Session {
                timeout,
                last_heard: now,
                // The server adds the client's address to every connection's
                // identities (every client of the model is on 127.0.0.1).
                identities: identity.into_iter().chain([CLIENT_IP.to_owned()]).collect(),
                ephemerals: BTreeSet::new(),
            },
        );
        id
    }

    /// The session now expires by `timeout`: the member a client reconnected
    /// to clamped the timeout the client sent into its own limits, and
    /// every touch of the session through it carries that value (a member
    /// with a lower `maxSessionTimeout` shortens the session).
    pub fn retime_session(&mut self, session: SessionId, timeout: Duration) {
        if let Some(s) = self.sessions.get_mut(&session) {
            s.timeout = timeout;
            self.expiry_floor = self.expiry_floor.min(s.last_heard + timeout);
        }
    }

    /// Adds an authenticated identity to a live session (`addAuthInfo`); a
    /// session may hold several, and a creator ACL grants all of them.
    pub fn add_auth(&mut self, session: SessionId, identity: impl Into<String>) {
        if let Some(s) = self.sessions.get_mut(&session) {
            s.identities.insert(identity.into());
        }
    }

    /// The ephemeral nodes `session` owns (none once it is gone).
    pub fn ephemerals(&self, session: SessionId) -> impl Iterator<Item = &str> + '_ {
        self.sessions
            .get(&session)
            .into_iter()
            .flat_map(|s| s.ephemerals.iter().map(String::as_str))
    }

    /// Whether the session is alive.
    pub fn session_alive(&self, session: SessionId) -> bool {
        self.sessions.contains_key(&session)
    }

    /// The session's negotiated timeout, if alive.
    pub fn session_timeout(&self, session: SessionId) -> Option<Duration> {
        self.sessions.get(&session).map(|s| s.timeout)
    }

    /// Something (a ping or a request) was heard from the session.
    pub fn touch(&mut self, now: Timestamp, session: SessionId) {
        if let Some(s) = self.sessions.get_mut(&session) {
            s.last_heard = s.last_heard.max(now);
        }
    }

    /// Restarts every session's timer at `now`, as a standalone server does
    /// when it reloads sessions from its log after a restart.
    pub fn restart_session_timers(&mut self, now: Timestamp) {
        for s in self.sessions.values_mut() {
            s.last_heard = now;
        }
        self.expiry_floor = self.expiry_floor.min(now);
    }

    /// The server came back from a restart at `now`: the tree, the zxid and
    /// the sessions survive (standalone servers reload them from the snapshot
    /// and log, with fresh timers); every connection was reset and every watch
    /// is gone (watches live in memory, per connection).
    pub fn restart(&mut self, now: Timestamp) {
        self.restart_session_timers(now);
        self.data_watches.clear();
        self.child_watches.clear();
        self.exist_watches.clear();
    }

    /// The session's connection closed (the client reconnected on a new one,
    /// or the server dropped it): the watches registered over it are gone, as
    /// the server keeps watches per connection. The session itself lives on.
    pub fn connection_closed(&mut self, session: SessionId) {
        self.drop_watches(session);
    }

    fn drop_watches(&mut self, session: SessionId) {
        for set in [
            &mut self.data_watches,
            &mut self.child_watches,
            &mut self.exist_watches,
        ] {
            set.retain(|_, watchers| {
                watchers.remove(&session);
                !watchers.is_empty()
            });
        }
    }

    /// Live sessions, in id order.
    pub fn sessions(&self) -> impl Iterator<Item = SessionId> + '_ {
        self.sessions.keys().copied()
    }

    /// The node's data, if it exists.
    pub fn data(&self, path: &str) -> Option<&[u8]> {
        self.nodes.get(path).map(|n| n.data.as_slice())
    }

    /// Sessions holding a watch on `path`: data (or `exists` on an existing
    /// node), child, and `exists` on a missing node, in that order.
    pub fn watchers(&self, path: &str) -> [Vec<SessionId>; 3] {
        let get = |m: &BTreeMap<String, BTreeSet<SessionId>>| {
            m.get(path)
                .map(|w| w.iter().copied().collect())
                .unwrap_or_default()
        };
        [
            get(&self.data_watches),
            get(&self.child_watches),
            get(&self.exist_watches),
        ]
    }

    /// When the next session would expire if nothing more is heard.
    pub fn next_expiry(&self) -> Option<Timestamp> {
        self.sessions
            .values()
            .map(|s| s.last_heard + s.timeout)
            .min()
    }

    /// Expires every session silent for its whole timeout at `now`.
    pub fn expire_due(&mut self, now: Timestamp) -> (Vec<SessionId>, Vec<Fired>) {
        if now < self.expiry_floor {
            return (Vec::new(), Vec::new());
        }
        let due: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.last_heard + s.timeout <= now)
            .map(|(id, _)| *id)
            .collect();
        let mut fired = Vec::new();
        for id in &due {
            fired.extend(self.close_session(*id));
        }
        // With no session left, the next one opened lowers the floor.
        self.expiry_floor = self
            .next_expiry()
            .unwrap_or(Timestamp::from_millis(u64::MAX));
        (due, fired)
    }

    /// Ends a session (close or expiry): its ephemerals go, its watches too.
    pub fn close_session(&mut self, session: SessionId) -> Vec<Fired> {
        let Some(s) = self.sessions.remove(&session) else {
            return Vec::new();
        };
        self.drop_watches(session);
        let mut fired = Vec::new();
        for path in s.ephemerals {
            fired.extend(self.remove(&path));
        }
        fired
    }

    /// Child names of `path` (empty if it does not exist).
    pub fn children(&self, path: &str) -> Vec<String> {
        self.nodes
            .get(path)
            .map(|n| n.children.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The node's stat, if it exists.
    pub fn stat(&self, path: &str) -> Option<Stat> {
        self.nodes.get(path).map(|n| n.stat)
    }

    /// The number of watches registered for `session` (all kinds).
    pub fn watch_count(&self, session: SessionId) -> usize {
        [&self.data_watches, &self.child_watches, &self.exist_watches]
            .iter()
            .flat_map(|m| m.values())
            .filter(|w| w.contains(&session))
            .count()
    }

    /// The paths `session` watches here: data (or `exists` on an existing
    /// node), child, and `exists` on a missing node — what a client re-sends
    /// with `setWatches` when it moves to another server.
    pub fn watches_of(&self, session: SessionId) -> [Vec<String>; 3] {
        let of = |m: &BTreeMap<String, BTreeSet<SessionId>>| {
            m.iter()
                .filter(|(_, w)| w.contains(&session))
                .map(|(p, _)| p.clone())
                .collect()
        };
        [
            of(&self.data_watches),
            of(&self.child_watches),
            of(&self.exist_watches),
        ]
    }

    /// `setWatches`: re-arms `session`'s watches (data, child, exists paths)
    /// for a client that has seen up to zxid `seen`. As the server's
    /// `DataTree.setWatches` does, a watch whose node changed after `seen`
    /// fires at once (data: deleted or mzxid newer; child: deleted or pzxid
    /// newer; exists: the node exists now) instead of being set.
    pub fn set_watches(
        &mut self,
        session: SessionId,
        seen: i64,
        [data, child, exist]: [Vec<String>; 3],
    ) -> Vec<Fired> {
        let mut fired = Vec::new();
        let zxid = self.zxid;
        let mut now = |session, path: String, kind| {
            fired.push(Fired {
                session,
                event: WatchEvent { kind, path },
                zxid,
            });
        };
        for path in data {
            match self.nodes.get(&path).map(|n| n.stat.mzxid) {
                None => now(session, path, WatchKind::NodeDeleted),
                Some(m) if m > seen => now(session, path, WatchKind::NodeDataChanged),
                Some(_) => {
                    self.data_watches.entry(path).or_default().insert(session);
                }
            }
        }
        for path in child {
            match self.nodes.get(&path).map(|n| n.stat.pzxid) {
                None => now(session, path, WatchKind::NodeDeleted),
                Some(p) if p > seen => now(session, path, WatchKind::NodeChildrenChanged),
                Some(_) => {
                    self.child_watches.entry(path).or_default().insert(session);
                }
            }
        }
        for path in exist {
            if self.nodes.contains_key(&path) {
                now(session, path, WatchKind::NodeCreated);
            } else {
                self.exist_watches.entry(path).or_default().insert(session);
            }
        }
        fired
    }

    /// Whether `session` has `perm` on `node`, as the server's
    /// `checkACL` judges: an entry with the bit grants it to `world:anyone`,
    /// or to a session holding an identity of the entry's scheme that the
    /// scheme's provider matches (an `ip` network contains the address; any
    /// other scheme: the same id).
    fn allowed(&self, node: &Node, session: SessionId, perm: u8) -> bool {
        let identities = self.sessions.get(&session).map(|s| &s.identities);
        if identities.is_some_and(|ids| ids.contains(SUPER)) {
            return true;
        }
        node.acl.iter().any(|g| {
            g.perms & perm != 0
                && ((g.scheme == "world" && g.id == "anyone")
                    || identities.is_some_and(|ids| ids.iter().any(|identity| g.matches(identity))))
        })
    }

    fn fire(&mut self, table: Table, path: &str, kind: WatchKind) -> Vec<Fired> {
        let map = match table {
            Table::Data => &mut self.data_watches,
            Table::Child => &mut self.child_watches,
            Table::Exist => &mut self.exist_watches,
        };
        let zxid = self.zxid;
        map.remove(path)
            .into_iter()
            .flatten()
            .map(|session| Fired {
                session,
                event: WatchEvent {
                    kind,
                    path: path.to_owned(),
                },
                zxid,
            })
            .collect()
    }

    /// Removes a node (no checks) and fires what a delete fires.
    fn remove(&mut self, path: &str) -> Vec<Fired> {
        let Some(node) = self.nodes.remove(path) else {
            return Vec::new();
        };
        self.zxid += 1;
        if node.stat.ephemeral_owner != 0 {
            if let Some(s) = self.sessions.get_mut(&SessionId(node.stat.ephemeral_owner)) {
                s.ephemerals.remove(path);
            }
        }
        // As the real server's deleteNode: the data watches first, then the
        // child watches of the sessions not told already (one notice per
        // session; its client hands it to every watcher of the path).
        let mut fired = self.fire(Table::Data, path, WatchKind::NodeDeleted);
        let told: BTreeSet<SessionId> = fired.iter().map(|f| f.session).collect();
        fired.extend(
            self.fire(Table::Child, path, WatchKind::NodeDeleted)
                .into_iter()
                .filter(|f| !told.contains(&f.session)),
        );
        let mut container_empty = None;
        if let Some(parent_path) = parent_of(path) {
            let zxid = self.zxid;
            if let Some(parent) = self.nodes.get_mut(parent_path) {
                parent.children.remove(name_of(path));
                parent.stat.cversion = parent.stat.cversion.wrapping_add(1);
                parent.stat.num_children = parent.children.len() as i32;
                parent.stat.pzxid = zxid;
                if parent.container && parent.children.is_empty() {
                    container_empty = Some(parent_path.to_owned());
                }
            }
            fired.extend(self.fire(Table::Child, parent_path, WatchKind::NodeChildrenChanged));
        }
        // The real server reaps empty containers on a timer; at once is close enough.
        if let Some(container) = container_empty {
            fired.extend(self.remove(&container));
        }
        fired
    }

    /// Applies one request from `session` at `now`.
    pub fn apply(
        &mut self,
        now: Timestamp,
        session: SessionId,
        request: &Request,
    ) -> (Result<Reply, ZkCode>, Vec<Fired>) {
        if !self.sessions.contains_key(&session) {
            return (Err(ZkCode::SessionExpired), Vec::new());
        }
        self.touch(now, session);
        self.ops += 1;
        match request {
            Request::GetChildren { path, watch } => {
                let Some(node) = self.nodes.get(path) else {
                    return (Err(ZkCode::NoNode), Vec::new());
                };
                if !self.allowed(node, session, READ) {
                    return (Err(ZkCode::NoAuth), Vec::new());
                }
                let children = node.children.iter().cloned().collect();
                if *watch {
                    arm(&mut self.child_watches, path, session);
                }
                (Ok(Reply::Children(children)), Vec::new())
            }
            Request::Create {
                path,
                data,
                mode,
                acl,
            } => self.create(session, path, data, *mode, acl),
            Request::GetData { path, watch } => {
                let Some(node) = self.nodes.get(path) else {
                    return (Err(ZkCode::NoNode), Vec::new());
                };
                if !self.allowed(node, session, READ) {
                    return (Err(ZkCode::NoAuth), Vec::new());
                }
                let reply = Reply::Data {
                    data: node.data.clone(),
                    stat: node.stat,
                };
                if *watch {
                    arm(&mut self.data_watches, path, session);
                }
                (Ok(reply), Vec::new())
            }
            Request::Exists { path, watch } => {
                let stat = self.nodes.get(path).map(|n| n.stat);
                if *watch {
                    let table = if stat.is_some() {
                        &mut self.data_watches
                    } else {
                        &mut self.exist_watches
                    };
                    arm(table, path, session);
                }
                (Ok(Reply::Exists(stat)), Vec::new())
            }
            // The server's order: path, parent (NoNode), DELETE on the parent
            // (NoAuth), the node (NoNode), its version, its children.
            Request::Delete { path, version } => {
                if path == "/" || zkelect_core::config::validate_path(path).is_err() {
                    return (Err(ZkCode::BadArguments), Vec::new());
                }
                let Some(parent) = parent_of(path).and_then(|p| self.nodes.get(p)) else {
                    return (Err(ZkCode::NoNode), Vec::new());
                };
                if !self.allowed(parent, session, DELETE) {
                    return (Err(ZkCode::NoAuth), Vec::new());
                }
                let Some(node) = self.nodes.get(path) else {
                    return (Err(ZkCode::NoNode), Vec::new());
                };
                if version.is_some_and(|v| v != node.stat.version) {
                    return (Err(ZkCode::BadVersion), Vec::new());
                }
                if !node.children.is_empty() {
                    return (Err(ZkCode::NotEmpty), Vec::new());
                }
                let fired = self.remove(path);
                (Ok(Reply::Deleted), fired)
            }
            Request::SetData {
                path,
                data,
                version,
            } => {
                let (result, fired) = self.write(session, path, data, *version);
                (result.map(Reply::Set), fired)
            }
            // One server is always the leader: nothing to catch up with.
            Request::Sync { .. } => (Ok(Reply::Synced), Vec::new()),
        }
    }

    /// `setData` from `session` at `now` (a writer's downgrade, a revocation
    /// request, or an operator's write): checks WRITE on the node and the version
    /// (`None` = any), bumps the version and mzxid, and fires the data watches
    /// with `NodeDataChanged`.
    pub fn set_data(
        &mut self,
        now: Timestamp,
        session: SessionId,
        path: &str,
        data: &[u8],
        version: Option<i32>,
    ) -> (Result<Stat, ZkCode>, Vec<Fired>) {
        if !self.sessions.contains_key(&session) {
            return (Err(ZkCode::SessionExpired), Vec::new());
        }
        self.touch(now, session);
        self.ops += 1;
        self.write(session, path, data, version)
    }

    /// `setACL` from `session` at `now` (an operator's, ZooKeeper 3.8's
    /// order): the list as the server stores it (`InvalidACL`), the node
    /// (`NoNode`), ADMIN on it (`NoAuth`; a super session has it on every
    /// node), its ACL version (`None` = any; `BadVersion`). Bumps the
    /// node's `aversion` and the zxid (a transaction), not its `version`
    /// or `mzxid`, and fires no watch: the server's `setACL` triggers no
    /// data or child watch.
    pub fn set_acl(
        &mut self,
        now: Timestamp,
        session: SessionId,
        path: &str,
        acl: &Acl,
        version: Option<i32>,
    ) -> Result<(), ZkCode> {
        if !self.sessions.contains_key(&session) {
            return Err(ZkCode::SessionExpired);
        }
        self.touch(now, session);
        self.ops += 1;
        let none = BTreeSet::new();
        let identities = self.sessions.get(&session).map_or(&none, |s| &s.identities);
        let Some(acl) = fixup_acl(acl, identities) else {
            return Err(ZkCode::InvalidAcl);
        };
        let Some(node) = self.nodes.get(path) else {
            return Err(ZkCode::NoNode);
        };
        if !self.allowed(node, session, ADMIN) {
            return Err(ZkCode::NoAuth);
        }
        if version.is_some_and(|v| v != node.aversion) {
            return Err(ZkCode::BadVersion);
        }
        self.zxid += 1;
        let Some(node) = self.nodes.get_mut(path) else {
            return Err(ZkCode::NoNode);
        };
        node.acl = acl;
        node.aversion = node.aversion.wrapping_add(1);
        Ok(())
    }

    /// Whether `session` may write `path`'s data (WRITE on the node, as
    /// `setData` checks it); false for a missing node or session.
    pub fn may_write(&self, session: SessionId, path: &str) -> bool {
        self.sessions.contains_key(&session)
            && self
                .nodes
                .get(path)
                .is_some_and(|node| self.allowed(node, session, WRITE))
    }

    /// The body of `setData`, for a live session.
    fn write(
        &mut self,
        session: SessionId,
        path: &str,
        data: &[u8],
        version: Option<i32>,
    ) -> (Result<Stat, ZkCode>, Vec<Fired>) {
        let Some(node) = self.nodes.get(path) else {
            return (Err(ZkCode::NoNode), Vec::new());
        };
        if !self.allowed(node, session, WRITE) {
            return (Err(ZkCode::NoAuth), Vec::new());
        }
        if version.is_some_and(|v| v != node.stat.version) {
            return (Err(ZkCode::BadVersion), Vec::new());
        }
        self.zxid += 1;
        let zxid = self.zxid;
        let Some(node) = self.nodes.get_mut(path) else {
            return (Err(ZkCode::NoNode), Vec::new());
        };
        node.data = data.to_vec();
        node.stat.version = node.stat.version.wrapping_add(1);
        node.stat.mzxid = zxid;
        node.stat.data_length = data.len() as i32;
        let stat = node.stat;
        let fired = self.fire(Table::Data, path, WatchKind::NodeDataChanged);
        (Ok(stat), fired)
    }

    fn create(
        &mut self,
        session: SessionId,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        acl: &Acl,
    ) -> (Result<Reply, ZkCode>, Vec<Fired>) {
        if zkelect_core::config::validate_path(path).is_err()
            && !(mode.is_sequential() && path.ends_with('/'))
        {
            return (Err(ZkCode::BadArguments), Vec::new());
        }
        let Some(parent_path) = parent_of(path) else {
            return (Err(ZkCode::BadArguments), Vec::new());
        };
        // The server's order (`pRequest2TxnCreate`): path, ACL (InvalidACL),
        // parent (NoNode), CREATE on the parent (NoAuth), the name (NodeExists),
        // an ephemeral parent (NoChildrenForEphemerals).
        let none = BTreeSet::new();
        let identities = self.sessions.get(&session).map_or(&none, |s| &s.identities);
        let Some(acl) = fixup_acl(acl, identities) else {
            return (Err(ZkCode::InvalidAcl), Vec::new());
        };
        let Some(parent) = self.nodes.get(parent_path) else {
            return (Err(ZkCode::NoNode), Vec::new());
        };
        if !self.allowed(parent, session, CREATE) {
            return (Err(ZkCode::NoAuth), Vec::new());
        }
        let path = if mode.is_sequential() {
            sequential_name(path, parent.stat.cversion)
        } else {
            path.to_owned()
        };
        if self.nodes.contains_key(&path) {
            return (Err(ZkCode::NodeExists), Vec::new());
        }
        if parent.stat.ephemeral_owner != 0 {
            return (Err(ZkCode::NoChildrenForEphemerals), Vec::new());
        }
        self.zxid += 1;
        let owner = if mode.is_ephemeral() { session.0 } else { 0 };
        let stat = Stat {
            czxid: self.zxid,
            mzxid: self.zxid,
            pzxid: self.zxid,
            version: 0,
            cversion: self.settings.cversion_start,
            ephemeral_owner: owner,
            data_length: data.len() as i32,
            num_children: 0,
        };
        self.nodes.insert(
            path.clone(),
            Node {
                data: data.to_vec(),
                stat,
                acl,
                aversion: 0,
                children: BTreeSet::new(),
                container: mode == CreateMode::Container,
            },
        );
        if owner != 0 {
            if let Some(s) = self.sessions.get_mut(&session) {
                s.ephemerals.insert(path.clone());
            }
        }
        let zxid = self.zxid;
        if let Some(parent) = self.nodes.get_mut(parent_path) {
            parent.children.insert(name_of(&path).to_owned());
            parent.stat.cversion = parent.stat.cversion.wrapping_add(1);
            parent.stat.num_children = parent.children.len() as i32;
            parent.stat.pzxid = zxid;
        }
        let mut fired = self.fire(Table::Exist, &path, WatchKind::NodeCreated);
        fired.extend(self.fire(Table::Child, parent_path, WatchKind::NodeChildrenChanged));
        (Ok(Reply::Created { path, stat }), fired)
    }
}

/// Sets `session`'s watch on `path` in `table`; the path is copied only
/// for the path's first watch (a watch set again costs no allocation).
fn arm(table: &mut BTreeMap<String, BTreeSet<SessionId>>, path: &str, session: SessionId) {
    match table.get_mut(path) {
        Some(sessions) => {
            sessions.insert(session);
        }
        None => {
            table.insert(path.to_owned(), BTreeSet::from([session]));
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Table {
    Data,
    Child,
    Exist,
}

/// One entry of a node's ACL as the server keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Grant {
    scheme: String,
    id: String,
    perms: u8,
}

impl Grant {
    fn anyone() -> Self {
        Self {
            scheme: "world".into(),
            id: "anyone".into(),
            perms: Perms::ALL.bits() as u8,
        }
    }

    /// Whether a session identity (`scheme:id`) is granted by this entry.
    fn matches(&self, identity: &str) -> bool {
        let Some((scheme, id)) = identity.split_once(':') else {
            return false;
        };
        scheme == self.scheme
            && match scheme {
                "ip" => zkelect_core::acl::ip_matches(&self.id, id),
                _ => id == self.id,
            }
    }
}

/// The ACL a create asks for, as the server stores it (`fixupACL`): `auth`
/// entries become one entry per authenticated identity of the creating
/// session (every identity but its `ip` one, which the server does not
/// count as authenticated); `None` (`InvalidACL`) for an empty list or an
/// `auth` entry of a session with no such identity.
fn fixup_acl(acl: &Acl, identities: &BTreeSet<String>) -> Option<Vec<Grant>> {
    let entries = acl.entries();
    if entries.is_empty() {
        return None;
    }
    let authenticated: Vec<(&str, &str)> = identities
        .iter()
        .filter_map(|i| i.split_once(':'))
        // Nor its super identity: the server has no provider of that
        // scheme, and `fixupACL` skips an identity without one.
        .filter(|(scheme, _)| *scheme != "ip" && *scheme != "super")
        .collect();
    let mut out = Vec::new();
    for entry in entries {
        let perms = entry.perms().bits() as u8;
        if entry.scheme() == AclScheme::Auth {
            if authenticated.is_empty() {
                return None;
            }
            out.extend(authenticated.iter().map(|(scheme, id)| Grant {
                scheme: (*scheme).to_owned(),
                id: (*id).to_owned(),
                perms,
            }));
        } else {
            out.push(Grant {
                scheme: entry.scheme().as_str().to_owned(),
                id: entry.id().to_owned(),
                perms,
            });
        }
    }
    Some(out)
}

/// `path` with the parent's `cversion` appended as ZooKeeper writes a
/// sequence (`%010d`: ten digits, zero-padded after any sign), as
/// `format!("{path}{cversion:010}")` writes it, without `format!`: one per sequential
/// create, where the formatting machinery was a measurable share of a run.
fn sequential_name(path: &str, cversion: i32) -> String {
    let mut digits = itoa::Buffer::new();
    let magnitude = digits.format(cversion.unsigned_abs());
    let mut out = String::with_capacity(path.len() + 11);
    out.push_str(path);
    let width = if cversion < 0 {
        out.push('-');
        9
    } else {
        10
    };
    for _ in magnitude.len()..width {
        out.push('0');
    }
    out.push_str(magnitude);
    out
}

#[cfg(test)]
mod sequential_name_tests {
    use super::sequential_name;

    #[test]
    fn writes_a_sequence_as_format_pads_it() {
        for n in [
            0,
            1,
            9,
            10,
            42,
            999_999_999,
            1_000_000_000,
            i32::MAX,
            -1,
            -10,
            -999_999_999,
            -1_000_000_000,
            i32::MIN,
        ] {
            assert_eq!(sequential_name("/e/n_", n), format!("/e/n_{n:010}"), "{n}");
        }
    }
}
