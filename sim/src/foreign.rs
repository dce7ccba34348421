//! Small models of two other libraries' election recipes, written from their
//! documented behaviour, to share queues with zkelect candidates in the swarm:
//! Curator 5.x `LeaderLatch` ([`CuratorLatch`]) and kazoo 2.8 `Lock`, which
//! `Election` runs ([`KazooLock`]). Each is a sans-IO state machine with the
//! [`Candidate`](zkelect_core::Candidate)'s interface (inputs in; commands, notices and a timer out), so
//! the world drives it through the same client-library model.
//!
//! Each model exposes its *own* belief of leadership ([`Foreign::role`]): what its
//! application would act on. The checkers count that belief, not zkelect's view
//! of the queue.
//!
//! # Curator's LeaderLatch
//!
//! - Creates `_c_<uuid>-latch-` EPHEMERAL_SEQUENTIAL with protection (a fresh
//!   UUID per create), creating missing parents as containers.
//! - Lists the children and sorts *all* of them by the text after the last
//!   `latch-` (a name without it sorts as its whole string), as strings, stably.
//! - Index 0 leads. Otherwise `getData` with a watch on the one just before, and
//!   acts only on `NodeDeleted` (any other event consumes the watch and is
//!   ignored: Curator never sets it again). A `getData` answered `NoNode` lists
//!   again. A listing without its own node resets.
//! - `SUSPENDED` and `LOST` drop leadership. Every (re)connection resets: the old
//!   node is deleted (a guaranteed delete, retried until it succeeds) and a new
//!   one is created at the back. A create whose reply was lost is found again by
//!   its UUID (protection) and deleted, also after the latch left.
//!
//! # kazoo's Lock / Election
//!
//! - The node prefix is `<uuid4 hex>__lock__`, fixed for the Lock object: every
//!   create of one process uses the same UUID.
//! - Only children matching `(?:__lock__)(-?\d{10})$` (searched, so anything may
//!   precede `__lock__`) are contenders, sorted stably by the sequence *string*;
//!   the predecessor is the one just before its own node. None: it holds.
//! - Otherwise `get` with a watch on the predecessor and wait: *any* watch event,
//!   or a change of the session's state, wakes it to list again. A listing
//!   without its own node, and every connection error, retries from the top
//!   after a backoff (kazoo's `KazooRetry`: from 100 ms, doubling; capped at
//!   1.6 s here so the liveness bound holds), looking for its node by prefix
//!   before creating a new one.
//! - A cancelled acquire that did not know its node yet (its create's reply
//!   was lost) still finds it by prefix once connected and deletes it
//!   (`_best_effort_cleanup`).
//! - The application follows kazoo's advice: it stops acting as leader on
//!   `SUSPENDED` and `LOST`, and once connected again releases the lock (deletes
//!   its node) and acquires it anew.
//!
//! # Simplifications
//!
//! Both libraries retry an operation interrupted by a connection loss on their
//! own; here an interrupted operation is dropped and the recipe starts over at
//! the next connection (Curator resets there anyway). Replies to operations of
//! an earlier round are ignored. Neither model watches its own node: like the
//! real recipes, a holder whose node an operator deleted never learns it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::time::Duration;

use zkelect_core::{
    Acl, Command, CreateMode, DemotionReason, FencingToken, Input, Notice, OpId, Reply, Request,
    Role, SessionEvent, Timestamp, WatchKind, ZkCode,
};

use crate::choice::Source;
use crate::rng::SimRng;

/// A naming scheme of election nodes: zkelect's own, Curator LeaderLatch's, or
/// kazoo Lock's. zkelect's interop setting picks one; the foreign models and
/// the persistent look-alikes use one each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Scheme {
    /// zkelect's own: `[_c_<16 hex>-]n_NNNNNNNNNN` (interop off).
    #[default]
    Ours,
    /// Curator LeaderLatch: `_c_<uuid>-latch-NNNNNNNNNN`.
    Curator,
    /// kazoo Lock/Election: `<32 hex>__lock__NNNNNNNNNN`.
    Kazoo,
}

impl Scheme {
    /// Every scheme.
    pub const ALL: [Scheme; 3] = [Scheme::Ours, Scheme::Curator, Scheme::Kazoo];

    /// The stem before the sequence number.
    pub fn stem(self) -> &'static str {
        match self {
            Scheme::Ours => "n_",
            Scheme::Curator => "latch-",
            Scheme::Kazoo => "__lock__",
        }
    }

    /// zkelect's interop setting for this scheme.
    pub fn interop(self) -> zkelect_core::Interop {
        match self {
            Scheme::Ours => zkelect_core::Interop::None,
            Scheme::Curator => zkelect_core::Interop::Curator,
            Scheme::Kazoo => zkelect_core::Interop::Kazoo,
        }
    }

    /// A short name, for traces and reports.
    pub fn label(self) -> &'static str {
        match self {
            Scheme::Ours => "zkelect",
            Scheme::Curator => "curator",
            Scheme::Kazoo => "kazoo",
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Curator's sort key (`StandardLockInternalsDriver.fixForSorting` with the
/// lock name `latch-`): the text after the last `latch-`, or the whole name.
pub fn curator_key(name: &str) -> &str {
    match name.rfind("latch-") {
        Some(i) => &name[i + "latch-".len()..],
        None => name,
    }
}

/// The sequence string kazoo's contender regex `(?:__lock__)(-?\d{10})$`
/// captures when it searches `name`, if it matches. ZooKeeper prints a negative
/// sequence as a sign and nine digits, which the regex does not match (kazoo
/// does not see nodes past the 2^31 wrap), except `-2147483648`.
pub fn kazoo_sequence(name: &str) -> Option<&str> {
    let n = name.len();
    if n < 10 || !name.is_char_boundary(n - 10) {
        return None;
    }
    let (head, digits) = name.split_at(n - 10);
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if head.ends_with("__lock__") {
        return Some(digits);
    }
    if head.ends_with("__lock__-") {
        return Some(&name[n - 11..]);
    }
    None
}

/// Curator's reading of a listing: every child, sorted stably by [`curator_key`].
pub fn curator_order(children: &[String]) -> Vec<&str> {
    let mut sorted: Vec<&str> = children.iter().map(String::as_str).collect();
    sorted.sort_by(|a, b| curator_key(a).cmp(curator_key(b)));
    sorted
}

/// kazoo's reading of a listing: the contenders, sorted stably by their
/// sequence string.
pub fn kazoo_order(children: &[String]) -> Vec<&str> {
    let mut sorted: Vec<(&str, &str)> = children
        .iter()
        .filter_map(|c| kazoo_sequence(c).map(|s| (s, c.as_str())))
        .collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    sorted.into_iter().map(|(_, c)| c).collect()
}

/// A random UUID as Java's `UUID.toString()` prints it.
fn java_uuid(rng: &mut impl Source) -> String {
    let (a, b) = (rng.draw(), rng.draw());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | (b >> 48) & 0x3fff,
        b & 0xffff_ffff_ffff
    )
}

/// A random UUID as Python's `uuid4().hex` prints it.
fn python_uuid_hex(rng: &mut impl Source) -> String {
    format!("{:016x}{:016x}", rng.draw(), rng.draw())
}

/// A name that looks like a contender of `scheme` (for persistent look-alikes),
/// without the sequence the server appends: zkelect's `n_` (bare or
/// protected), Curator's `_c_<uuid>-latch-`, kazoo's `<32 hex>__lock__`.
pub fn lookalike_stem(scheme: Scheme, rng: &mut impl Source) -> String {
    match scheme {
        Scheme::Ours if rng.chance(0.5) => "n_".to_owned(),
        Scheme::Ours => format!("_c_{:016x}-n_", rng.draw()),
        Scheme::Curator => format!("_c_{}-latch-", java_uuid(rng)),
        Scheme::Kazoo => {
            // A first digit other than 0 keeps it after every ten-digit
            // sequence string in Curator's whole-string order (see the swarm).
            let hex = python_uuid_hex(rng);
            format!("{:x}{}__lock__", rng.range(1, 15), &hex[1..])
        }
    }
}

fn name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn parents(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = path[at + 1..].find('/') {
        at += i + 1;
        out.push(path[..at].to_owned());
    }
    out.push(path.to_owned());
    out
}

/// What an operation was for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    /// The node's create (Curator: with its UUID).
    Create { round: u64, uuid: String },
    /// A listing to rank the node.
    List { round: u64 },
    /// kazoo's `_find_node`: a listing to find the node by prefix.
    Find { round: u64 },
    /// Curator's protection: a listing to find nodes of lost creates.
    Orphans { uuids: Vec<String> },
    /// The predecessor read with a watch.
    Watch { round: u64 },
    /// A delete of one of its nodes.
    Delete { node: String },
    /// A parent created if missing (the answer does not matter).
    Parent,
}

/// Op ids, commands, notices and what each pending op was for.
#[derive(Debug, Clone, Default)]
struct Io {
    next_op: u64,
    commands: VecDeque<Command>,
    notices: VecDeque<Notice>,
    pending: BTreeMap<OpId, Op>,
}

impl Io {
    fn send(&mut self, op: Op, request: Request) {
        let id = OpId(self.next_op);
        self.next_op += 1;
        self.pending.insert(id, op);
        self.commands.push_back(Command { op: id, request });
    }

    fn deleting(&self, node: &str) -> bool {
        self.pending
            .values()
            .any(|op| matches!(op, Op::Delete { node: n } if n == node))
    }
}

/// What both models share: where, as whom, and the plumbing.
#[derive(Debug, Clone)]
struct Base {
    path: String,
    acl: Acl,
    data: Vec<u8>,
    rng: SimRng,
    io: Io,
    now: Timestamp,
    started: bool,
    closed: bool,
    connected: bool,
    /// Bumped whenever the recipe starts over; older replies are ignored.
    round: u64,
    node: Option<String>,
    /// Bumped whenever the model takes a node (shown as its "token").
    incarnation: i64,
    leads: bool,
    watching: Option<String>,
    /// Its nodes still to delete (a release or reset whose delete did not get through).
    to_delete: BTreeSet<String>,
}

impl Base {
    fn new(path: &str, id: &str, acl: Acl, seed: u64) -> Self {
        Self {
            path: path.to_owned(),
            acl,
            data: id.as_bytes().to_vec(),
            rng: SimRng::new(seed, 0xF0),
            io: Io::default(),
            now: Timestamp::ZERO,
            started: false,
            closed: false,
            connected: false,
            round: 0,
            node: None,
            incarnation: 0,
            leads: false,
            watching: None,
            to_delete: BTreeSet::new(),
        }
    }

    fn full(&self, name: &str) -> String {
        format!("{}/{name}", self.path)
    }

    fn take_node(&mut self, name: String) {
        if self.node.as_deref() != Some(name.as_str()) {
            self.incarnation += 1;
        }
        self.to_delete.remove(&name);
        self.node = Some(name);
    }

    fn set_leads(&mut self, leads: bool, reason: DemotionReason) {
        if leads == self.leads {
            return;
        }
        self.leads = leads;
        self.io.notices.push_back(if leads {
            Notice::Elected {
                token: FencingToken(self.incarnation),
            }
        } else {
            Notice::Demoted { reason }
        });
    }

    /// Sends the deletes still owed (not already on their way).
    fn flush_deletes(&mut self) {
        if !self.connected {
            return;
        }
        let owed: Vec<String> = self
            .to_delete
            .iter()
            .filter(|n| !self.io.deleting(n))
            .cloned()
            .collect();
        for node in owed {
            let path = self.full(&node);
            self.io.send(
                Op::Delete { node },
                Request::Delete {
                    path,
                    version: None,
                },
            );
        }
    }

    fn drop_node(&mut self) {
        if let Some(node) = self.node.take() {
            self.to_delete.insert(node);
        }
        self.flush_deletes();
    }

    fn create_parents(&mut self, mode: CreateMode) {
        for path in parents(&self.path) {
            self.io.send(
                Op::Parent,
                Request::Create {
                    path,
                    data: Vec::new(),
                    mode,
                    acl: Acl::Open,
                },
            );
        }
    }

    fn list(&mut self, op: Op) {
        let path = self.path.clone();
        self.io
            .send(op, Request::GetChildren { path, watch: false });
    }

    fn watch(&mut self, pred: &str) {
        self.watching = Some(pred.to_owned());
        let path = self.full(pred);
        self.io.send(
            Op::Watch { round: self.round },
            Request::GetData { path, watch: true },
        );
    }

    fn delete_answered(&mut self, node: &str, result: &Result<Reply, ZkCode>) {
        if matches!(result, Ok(_) | Err(ZkCode::NoNode)) {
            self.to_delete.remove(node);
        }
    }

    fn role(&self) -> Role {
        if self.closed {
            Role::Closed
        } else if !self.started {
            Role::Idle
        } else if self.leads {
            Role::Leader(FencingToken(self.incarnation))
        } else {
            Role::Follower
        }
    }
}

/// A model of Curator 5.x `LeaderLatch` (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct CuratorLatch {
    b: Base,
    uuid: String,
    /// UUIDs of creates whose reply was lost: their nodes may exist.
    lost_creates: Vec<String>,
}

impl CuratorLatch {
    /// A latch for `id` at `path`, creating nodes with `acl`; `seed` draws its UUIDs.
    pub fn new(path: &str, id: &str, acl: Acl, seed: u64) -> Self {
        Self {
            b: Base::new(path, id, acl, seed),
            uuid: String::new(),
            lost_creates: Vec::new(),
        }
    }

    fn start(&mut self, now: Timestamp) {
        self.b.now = now;
        if !self.b.closed {
            self.b.started = true;
            if self.b.connected {
                self.reset();
            }
        }
    }

    /// `LeaderLatch.reset()`: leadership off, the old node deleted, a new one created.
    fn reset(&mut self) {
        self.b.set_leads(false, DemotionReason::Displaced);
        self.b.round += 1;
        self.b.watching = None;
        self.b.drop_node();
        if !self.lost_creates.is_empty() {
            let uuids = self.lost_creates.clone();
            self.b.list(Op::Orphans { uuids });
        }
        self.uuid = java_uuid(&mut self.b.rng);
        self.create();
    }

    fn create(&mut self) {
        let path = format!("{}/_c_{}-latch-", self.b.path, self.uuid);
        self.b.io.send(
            Op::Create {
                round: self.b.round,
                uuid: self.uuid.clone(),
            },
            Request::Create {
                path,
                data: self.b.data.clone(),
                mode: CreateMode::EphemeralSequential,
                acl: self.b.acl.clone(),
            },
        );
    }

    /// `LeaderLatch.checkLeadership`.
    fn check(&mut self, children: &[String]) {
        let Some(own) = self.b.node.clone() else {
            return;
        };
        let sorted = curator_order(children);
        match sorted.iter().position(|c| *c == own) {
            None => self.reset(),
            Some(0) => {
                self.b.watching = None;
                self.b.set_leads(true, DemotionReason::Displaced);
            }
            Some(i) => {
                self.b.set_leads(false, DemotionReason::Displaced);
                let pred = sorted[i - 1].to_owned();
                self.b.watch(&pred);
            }
        }
    }

    fn on_reply(&mut self, op: Op, result: Result<Reply, ZkCode>) {
        let live = |b: &Base, round: u64| round == b.round && b.started && !b.closed;
        match (op, result) {
            (Op::Create { round, .. }, Ok(Reply::Created { path, .. })) => {
                let name = name_of(&path).to_owned();
                if live(&self.b, round) {
                    self.b.take_node(name);
                    self.b.list(Op::List { round });
                } else {
                    self.b.to_delete.insert(name);
                    self.b.flush_deletes();
                }
            }
            (Op::Create { round, .. }, Err(ZkCode::NoNode)) if live(&self.b, round) => {
                // `creatingParentContainersIfNeeded`.
                self.b.create_parents(CreateMode::Container);
                self.create();
            }
            (Op::Create { uuid, .. }, Err(ZkCode::ConnectionLoss)) => {
                self.lost_creates.push(uuid);
            }
            (Op::List { round }, Ok(Reply::Children(children))) if live(&self.b, round) => {
                self.check(&children);
            }
            (Op::Orphans { uuids }, Ok(Reply::Children(children))) => {
                for child in children {
                    let lost = uuids.iter().any(|u| child.contains(u.as_str()));
                    if lost && self.b.node.as_deref() != Some(child.as_str()) {
                        self.b.to_delete.insert(child);
                    }
                }
                self.lost_creates.retain(|u| !uuids.contains(u));
                self.b.flush_deletes();
            }
            (Op::Watch { round }, Err(ZkCode::NoNode)) if live(&self.b, round) => {
                self.b.list(Op::List { round });
            }
            (Op::Delete { node }, result) => self.b.delete_answered(&node, &result),
            _ => {}
        }
    }

    fn on_session(&mut self, event: SessionEvent) {
        match event {
            SessionEvent::Connected { .. } => {
                self.b.connected = true;
                self.b.flush_deletes();
                // Every CONNECTED / RECONNECTED resets a started latch.
                if self.b.started && !self.b.closed {
                    self.reset();
                } else {
                    self.find_lost_creates();
                }
            }
            SessionEvent::Disconnected => {
                self.b.connected = false;
                self.b.set_leads(false, DemotionReason::Lost);
            }
            SessionEvent::Expired => {
                self.b.connected = false;
                self.b.set_leads(false, DemotionReason::Expired);
                self.b.node = None;
                self.b.to_delete.clear();
                self.lost_creates.clear();
            }
            SessionEvent::AuthFailed | SessionEvent::Closed => self.b.connected = false,
        }
    }

    fn handle(&mut self, now: Timestamp, input: Input) {
        self.b.now = self.b.now.max(now);
        match input {
            Input::Reply { op, result } => {
                if let Some(purpose) = self.b.io.pending.remove(&op) {
                    self.on_reply(purpose, result);
                }
            }
            // Only `NodeDeleted` matters (of the predecessor: the only node it watches).
            Input::Watch(event) => {
                if event.kind == WatchKind::NodeDeleted
                    && self.b.started
                    && !self.b.closed
                    && self.b.node.is_some()
                {
                    let round = self.b.round;
                    self.b.list(Op::List { round });
                }
            }
            Input::Session(event) => self.on_session(event),
        }
    }

    fn leave(&mut self, now: Timestamp, rejoin: bool, reason: DemotionReason) {
        self.b.now = now;
        self.b.set_leads(false, reason);
        self.b.round += 1;
        self.b.watching = None;
        self.b.drop_node();
        self.b.started = false;
        if rejoin {
            self.start(now);
        } else {
            self.find_lost_creates();
        }
    }

    /// A latch that left still deletes the nodes of its creates whose reply
    /// was lost: Curator retries a protected create until it finds the node
    /// by its UUID, and the create's callback deletes the node of a closed
    /// latch (`LeaderLatch.reset`'s callback: `setNode(name)`, then
    /// `setNode(null)` when the state is `CLOSED`). Without this, such a node
    /// outlived the latch on its live session and blocked the queue for good
    /// (mixed seed 930993: `liveness`).
    fn find_lost_creates(&mut self) {
        if self.b.connected && !self.lost_creates.is_empty() {
            let uuids = self.lost_creates.clone();
            self.b.list(Op::Orphans { uuids });
        }
    }
}

/// Where kazoo's acquire loop is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Not acquiring.
    Idle,
    /// A request of the loop is on its way.
    Busy,
    /// Waiting for the predecessor's watch or a session change.
    Waiting,
    /// Sleeping before a retry.
    Retry,
    /// Waiting for the connection to come back.
    Offline,
    /// Holding the lock.
    Holding,
}

/// A model of kazoo 2.8 `Lock` as `Election.run` uses it (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct KazooLock {
    b: Base,
    /// `<uuid4 hex>__lock__`, fixed for the lock.
    prefix: String,
    create_tried: bool,
    assured_path: bool,
    step: Step,
    /// kazoo's `wake_event`: set by any watch event or session change.
    woken: bool,
    /// The application lost contact while holding: it releases before acquiring again.
    release_first: bool,
    /// It was cancelled while a node of its may exist unknown to it (a create
    /// whose reply was lost): it still looks for the node by prefix and
    /// deletes it, once connected.
    cleanup: bool,
    retry_at: Option<Timestamp>,
    delay: Duration,
}

/// kazoo's retry delay: starts here, doubles, capped at [`KAZOO_MAX_DELAY`].
const KAZOO_DELAY: Duration = Duration::from_millis(100);
/// The cap on kazoo's retry delay in the model (kazoo's own default is 60 s).
const KAZOO_MAX_DELAY: Duration = Duration::from_millis(1_600);

impl KazooLock {
    /// A lock for `id` at `path`, creating nodes with `acl`; `seed` draws its UUID.
    pub fn new(path: &str, id: &str, acl: Acl, seed: u64) -> Self {
        let mut b = Base::new(path, id, acl, seed);
        let prefix = format!("{}__lock__", python_uuid_hex(&mut b.rng));
        Self {
            b,
            prefix,
            create_tried: false,
            assured_path: false,
            step: Step::Idle,
            woken: false,
            release_first: false,
            cleanup: false,
            retry_at: None,
            delay: KAZOO_DELAY,
        }
    }

    /// kazoo's `_best_effort_cleanup` after a cancelled acquire: the node by
    /// prefix (`_find_node`), deleted.
    fn find_and_delete(&mut self) {
        if self.cleanup && self.b.connected {
            self.b.list(Op::Orphans {
                uuids: vec![self.prefix.clone()],
            });
        }
    }

    fn start(&mut self, now: Timestamp) {
        self.b.now = now;
        if !self.b.closed {
            self.b.started = true;
            self.acquire();
        }
    }

    /// `_inner_acquire` from the top.
    fn acquire(&mut self) {
        self.b.round += 1;
        self.b.watching = None;
        self.retry_at = None;
        if !self.b.connected {
            self.step = Step::Offline;
            return;
        }
        if self.release_first {
            self.release_first = false;
            self.b.drop_node();
        }
        self.step = Step::Busy;
        if !self.assured_path {
            self.assured_path = true;
            self.b.create_parents(CreateMode::Persistent);
        }
        let round = self.b.round;
        if self.create_tried {
            self.b.list(Op::Find { round });
        } else {
            self.create_tried = true;
            self.create();
        }
    }

    fn create(&mut self) {
        let path = format!("{}/{}", self.b.path, self.prefix);
        self.b.io.send(
            Op::Create {
                round: self.b.round,
                uuid: String::new(),
            },
            Request::Create {
                path,
                data: self.b.data.clone(),
                mode: CreateMode::EphemeralSequential,
                acl: self.b.acl.clone(),
            },
        );
    }

    /// The loop's top: `wake_event.clear()`, then `_get_predecessor`.
    fn relist(&mut self) {
        self.woken = false;
        self.step = Step::Busy;
        let round = self.b.round;
        self.b.list(Op::List { round });
    }

    fn retry_later(&mut self) {
        self.b.round += 1;
        self.b.watching = None;
        if !self.b.connected {
            self.step = Step::Offline;
            return;
        }
        self.step = Step::Retry;
        self.retry_at = Some(self.b.now + self.delay);
        self.delay = (self.delay * 2).min(KAZOO_MAX_DELAY);
    }

    /// `_get_predecessor` on a listing.
    fn rank(&mut self, children: &[String]) {
        let Some(own) = self.b.node.clone() else {
            return self.retry_later();
        };
        if !children.contains(&own) {
            // ForceRetryError: our node is gone (an expired session, a wipe).
            return self.retry_later();
        }
        let sorted = kazoo_order(children);
        let mut pred = None;
        for c in sorted {
            if c == own {
                break;
            }
            pred = Some(c);
        }
        match pred {
            None => {
                self.step = Step::Holding;
                self.delay = KAZOO_DELAY;
                self.b.watching = None;
                self.b.set_leads(true, DemotionReason::Displaced);
            }
            Some(p) => {
                let p = p.to_owned();
                self.b.watch(&p);
            }
        }
    }

    fn on_reply(&mut self, op: Op, result: Result<Reply, ZkCode>) {
        let round = match &op {
            Op::Delete { node } => return self.b.delete_answered(node, &result),
            Op::Create { round, .. }
            | Op::List { round }
            | Op::Find { round }
            | Op::Watch { round } => *round,
            Op::Orphans { .. } => {
                if let Ok(Reply::Children(children)) = &result {
                    self.cleanup = false;
                    if !self.b.started {
                        let own = children.iter().filter(|c| c.starts_with(&self.prefix));
                        self.b.to_delete.extend(own.cloned());
                        self.b.flush_deletes();
                    }
                }
                return;
            }
            Op::Parent => return,
        };
        if round != self.b.round || !self.b.started || self.b.closed {
            if let (Op::Create { .. }, Ok(Reply::Created { path, .. })) = (&op, &result) {
                self.b.to_delete.insert(name_of(path).to_owned());
                self.b.flush_deletes();
            }
            return;
        }
        match (op, result) {
            (Op::Create { .. }, Ok(Reply::Created { path, .. })) => {
                self.b.take_node(name_of(&path).to_owned());
                self.relist();
            }
            (Op::Find { .. }, Ok(Reply::Children(children))) => {
                match children.iter().find(|c| c.starts_with(&self.prefix)) {
                    Some(found) => {
                        self.b.take_node(found.clone());
                        self.relist();
                    }
                    None => {
                        self.b.node = None;
                        self.create();
                    }
                }
            }
            (Op::List { .. }, Ok(Reply::Children(children))) => self.rank(&children),
            (Op::Watch { .. }, Ok(_)) => {
                if self.woken {
                    self.relist();
                } else {
                    self.step = Step::Waiting;
                }
            }
            // The predecessor is already gone: list again.
            (Op::Watch { .. }, Err(ZkCode::NoNode)) => self.relist(),
            // The election path is gone (NoNodeError is not retried by kazoo;
            // the application starts the election again).
            (_, Err(ZkCode::NoNode)) => {
                self.assured_path = false;
                self.retry_later();
            }
            _ => self.retry_later(),
        }
    }

    fn wake(&mut self) {
        match self.step {
            Step::Waiting => self.relist(),
            Step::Busy => self.woken = true,
            _ => {}
        }
    }

    fn on_session(&mut self, event: SessionEvent) {
        match event {
            SessionEvent::Connected { .. } => {
                self.b.connected = true;
                self.delay = KAZOO_DELAY;
                self.b.flush_deletes();
                if self.b.started && !self.b.closed && self.step != Step::Holding {
                    self.acquire();
                } else {
                    self.find_and_delete();
                }
            }
            SessionEvent::Disconnected
            | SessionEvent::Expired
            | SessionEvent::AuthFailed
            | SessionEvent::Closed => {
                self.b.connected = false;
                if event == SessionEvent::Expired {
                    self.b.node = None;
                    self.b.to_delete.clear();
                    self.cleanup = false;
                }
                if self.step == Step::Holding {
                    let reason = if event == SessionEvent::Expired {
                        DemotionReason::Expired
                    } else {
                        DemotionReason::Lost
                    };
                    self.b.set_leads(false, reason);
                    self.release_first = true;
                    self.step = Step::Offline;
                } else if self.step != Step::Idle {
                    self.wake();
                    self.step = Step::Offline;
                }
            }
        }
    }

    fn handle(&mut self, now: Timestamp, input: Input) {
        self.b.now = self.b.now.max(now);
        match input {
            Input::Reply { op, result } => {
                if let Some(purpose) = self.b.io.pending.remove(&op) {
                    self.on_reply(purpose, result);
                }
            }
            Input::Watch(_) => self.wake(),
            Input::Session(event) => self.on_session(event),
        }
    }

    fn handle_timeout(&mut self, now: Timestamp) {
        self.b.now = self.b.now.max(now);
        if self.retry_at.is_some_and(|t| t <= now) {
            self.retry_at = None;
            if self.step == Step::Retry {
                self.acquire();
            }
        }
    }

    /// When the retry sleep ends, if it sleeps.
    fn timer(&self) -> Option<Timestamp> {
        self.retry_at.filter(|_| self.step == Step::Retry)
    }

    fn leave(&mut self, now: Timestamp, rejoin: bool, reason: DemotionReason) {
        self.b.now = now;
        self.b.set_leads(false, reason);
        self.b.round += 1;
        self.b.watching = None;
        self.retry_at = None;
        self.release_first = false;
        // An acquire cancelled before it knew its node: kazoo's retry loop
        // finds the node by prefix once connected, sees the cancel and
        // `_best_effort_cleanup` deletes it. Without this, a node whose create
        // reply was lost outlived the cancel on the live session and blocked
        // the queue for good (mixed seed 596952: `liveness`).
        if self.b.node.is_none() && self.create_tried && self.step != Step::Idle && !rejoin {
            self.cleanup = true;
        }
        self.b.drop_node();
        self.step = Step::Idle;
        self.b.started = false;
        if rejoin {
            self.start(now);
        } else {
            self.find_and_delete();
        }
    }
}

/// A model of another library's recipe, as the world drives it: Curator's
/// LeaderLatch or kazoo's Lock/Election (zkelect's own machines run on a
/// core `Session`).
#[derive(Debug, Clone)]
pub enum Foreign {
    /// A model of Curator's LeaderLatch.
    Curator(CuratorLatch),
    /// A model of kazoo's Lock/Election.
    Kazoo(KazooLock),
}

impl Foreign {
    /// Which library this models.
    pub fn scheme(&self) -> Scheme {
        match self {
            Foreign::Curator(_) => Scheme::Curator,
            Foreign::Kazoo(_) => Scheme::Kazoo,
        }
    }

    fn base(&self) -> &Base {
        match self {
            Foreign::Curator(m) => &m.b,
            Foreign::Kazoo(m) => &m.b,
        }
    }

    fn base_mut(&mut self) -> &mut Base {
        match self {
            Foreign::Curator(m) => &mut m.b,
            Foreign::Kazoo(m) => &mut m.b,
        }
    }

    /// Its own belief: `Leader` while its recipe says it holds (the "token"
    /// is then its node's incarnation number, not a fencing token: those
    /// libraries have none).
    pub fn role(&self) -> Role {
        self.base().role()
    }

    /// The name of the node it believes is its own.
    pub fn node(&self) -> Option<&str> {
        self.base().node.as_deref()
    }

    /// Its node's incarnation.
    pub fn token(&self) -> Option<FencingToken> {
        let b = self.base();
        b.node.as_ref().map(|_| FencingToken(b.incarnation))
    }

    /// The node it watches to know when to move up.
    pub fn watching(&self) -> Option<&str> {
        self.base().watching.as_deref()
    }

    /// Whether it still waits for the answer to `op`.
    pub fn waits_for(&self, op: OpId) -> bool {
        self.base().io.pending.contains_key(&op)
    }

    /// Joins the election.
    pub fn join(&mut self, now: Timestamp) {
        match self {
            Foreign::Curator(m) => m.start(now),
            Foreign::Kazoo(m) => m.start(now),
        }
    }

    /// Leaves the election (Curator closes the latch and starts a new one to
    /// rejoin; kazoo releases the lock and acquires it again).
    pub fn resign(&mut self, now: Timestamp, rejoin: bool) {
        match self {
            Foreign::Curator(m) => m.leave(now, rejoin, DemotionReason::Resigned),
            Foreign::Kazoo(m) => m.leave(now, rejoin, DemotionReason::Resigned),
        }
    }

    /// Closes it for good (the world then closes its client).
    pub fn close(&mut self, now: Timestamp) {
        match self {
            Foreign::Curator(m) => m.leave(now, false, DemotionReason::Closed),
            Foreign::Kazoo(m) => m.leave(now, false, DemotionReason::Closed),
        }
        self.base_mut().closed = true;
    }

    /// Whether it is closed.
    pub fn is_closed(&self) -> bool {
        self.base().closed
    }

    /// Feeds one input.
    pub fn handle(&mut self, now: Timestamp, input: Input) {
        match self {
            Foreign::Curator(m) => m.handle(now, input),
            Foreign::Kazoo(m) => m.handle(now, input),
        }
    }

    /// Tells it the time.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        match self {
            Foreign::Curator(m) => m.b.now = m.b.now.max(now),
            Foreign::Kazoo(m) => m.handle_timeout(now),
        }
    }

    /// The next notice (`Elected`/`Demoted`, for the trace only).
    pub fn poll_notice(&mut self) -> Option<Notice> {
        self.base_mut().io.notices.pop_front()
    }

    /// The next command.
    pub fn poll_command(&mut self) -> Option<Command> {
        self.base_mut().io.commands.pop_front()
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        match self {
            Foreign::Curator(_) => None,
            Foreign::Kazoo(m) => m.timer(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn curator_sorts_by_the_text_after_the_last_latch_and_whole_names_otherwise() {
        let children = owned(&[
            "n_0000000000",
            "_c_aaaa-latch-0000000007",
            "_c_1234-n_0000000001",
            "_c_bbbb-latch-0000000003",
            "0abc__lock__0000000002",
        ]);
        assert_eq!(
            curator_order(&children),
            [
                "_c_bbbb-latch-0000000003",
                "_c_aaaa-latch-0000000007",
                "0abc__lock__0000000002",
                "_c_1234-n_0000000001",
                "n_0000000000",
            ]
        );
    }

    #[test]
    fn kazoo_counts_only_what_its_regex_finds_and_sorts_the_sequence_strings() {
        assert_eq!(kazoo_sequence("abc__lock__0000000012"), Some("0000000012"));
        assert_eq!(
            kazoo_sequence("_c_0123456789abcdef-__lock__0000000012"),
            Some("0000000012")
        );
        assert_eq!(kazoo_sequence("x__lock__-2147483648"), Some("-2147483648"));
        // ZooKeeper's `%010d` of -1 is `-000000001`: nine digits, no match.
        assert_eq!(kazoo_sequence("x__lock__-000000001"), None);
        assert_eq!(kazoo_sequence("_c_x-latch-0000000001"), None);
        assert_eq!(kazoo_sequence("__rlock__0000000001"), None);
        let children = owned(&["b__lock__0000000009", "n_0000000001", "a__lock__0000000004"]);
        assert_eq!(
            kazoo_order(&children),
            ["a__lock__0000000004", "b__lock__0000000009"]
        );
    }

    #[test]
    fn lookalike_stems_parse_as_their_scheme() {
        let mut rng = SimRng::new(1, 1);
        for _ in 0..50 {
            let curator = format!("{}0000000001", lookalike_stem(Scheme::Curator, &mut rng));
            assert_eq!(curator_key(&curator), "0000000001");
            assert!(zkelect_core::name::never_reused(&curator));
            let kazoo = format!("{}0000000001", lookalike_stem(Scheme::Kazoo, &mut rng));
            assert_eq!(kazoo_sequence(&kazoo), Some("0000000001"));
            // After every sequence string below 10^9 in Curator's order.
            assert!(kazoo.as_str() > "0999999999", "{kazoo}");
            let ours = format!("{}0000000001", lookalike_stem(Scheme::Ours, &mut rng));
            assert!(ours.ends_with("n_0000000001"));
        }
    }

    #[test]
    fn parents_of_a_path_come_top_down() {
        assert_eq!(parents("/svc/leader"), ["/svc", "/svc/leader"]);
        assert_eq!(parents("/e"), ["/e"]);
    }
}
