//! The observer: who is in a queue and who holds, without a node of its own.
//!
//! An [`Observer`] is a pure machine like [`Candidate`](crate::Candidate),
//! driven the same way (`handle`, `handle_timeout`, `poll_command`,
//! `poll_notice`, `poll_timeout`, `close`). It lists the queue's children with
//! a child watch, reads every listed node after each listing (its data starts
//! with the participant's id, its czxid is the fencing token; a name alone
//! does not say which node it is, see [`Observer`]), orders the queue as
//! serial numbers ([`name::order`], so the order stays right after the
//! parent's sequence counter wraps past 2^31 − 1) and reports the whole list
//! as [`Notice::Participants`] whenever it changes — and only then. Its
//! reads of the holders' nodes (of every node in a read-write lock) set a
//! data watch, so a revocation request written into a holder's node (or a
//! writer's downgrade) is reported when it is made: that node alone is
//! read again.
//!
//! It follows the queue's path through its absence: a path that does not
//! exist yet, or that is deleted (an operator's `deleteall`, a redeploy),
//! is reported as an empty queue, and the observer sets an `exists` watch
//! on it and waits, sending nothing more, until the server says it was
//! created; then it lists it again. So an observer started before the
//! queue's first member, or one that watches through a wipe, reports every
//! change, and a missing path costs two requests, not a poll.
//!
//! It needs no id, creates nothing and never writes, so it may run with
//! read-only credentials (`Acl::CreatorAllWorldRead` queues can be observed by
//! anyone).
//!
//! ```
//! use std::time::Duration;
//! use zkelect_core::*;
//!
//! let t = Timestamp::ZERO;
//! let mut o = Observer::new(ObserverConfig::election("/svc/leader", 1))?;
//! o.handle(t, Input::Session(SessionEvent::Connected {
//!     session_id: Some(SessionId(9)),
//!     timeout: Duration::from_secs(10),
//! }));
//! let list = o.poll_command().unwrap();
//! assert_eq!(list.request, Request::GetChildren { path: "/svc/leader".into(), watch: true });
//! o.handle(t, Input::Reply { op: list.op, result: Ok(Reply::Children(vec![
//!     "_c_00000000000000bb-n_0000000008".into(),
//!     "_c_00000000000000aa-n_0000000007".into(),
//! ])) });
//! // One read per node; answer them in any order.
//! let reads: Vec<Command> = std::iter::from_fn(|| o.poll_command()).collect();
//! for read in reads {
//!     let (id, czxid) = if read.request.path().ends_with("07") { ("a", 70) } else { ("b", 80) };
//!     let stat = Stat { czxid, ephemeral_owner: 1, ..Stat::default() };
//!     o.handle(t, Input::Reply { op: read.op, result: Ok(Reply::Data { data: id.into(), stat }) });
//! }
//! let Some(Notice::Participants(list)) = o.poll_notice() else { panic!("no list") };
//! assert_eq!(list[0].id(), Some("a"));
//! assert!(list[0].holds && !list[1].holds);
//! assert_eq!(o.leader().map(|p| p.token), Some(FencingToken(70)));
//! # Ok::<(), ConfigError>(())
//! ```

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use crate::command::{Command, OpId};
use crate::config::{
    identity_of, is_downgraded, validate_path, validate_prefix, ConfigError, Interop, LEADERS_MAX,
};
use crate::input::{Input, SessionEvent};
use crate::name::{self, Access, NodeName};
pub use crate::notice::Participant;
use crate::notice::{CandidateError, FencingToken, Identity, Notice, WrongReply};
use crate::rule::Recipe;
use crate::time::Timestamp;
use crate::timer::Backoff;
use crate::zk::{Reply, Request, SessionId, Stat, Verb, WatchEvent, WatchKind, ZkCode};

/// The shortest backoff of an observer after a failed request.
const BACKOFF_MIN: Duration = Duration::from_millis(50);
/// The longest backoff of an observer after a failed request.
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// What an [`Observer`] watches: a validated queue description.
///
/// The fields are private and [`Observer::new`] validates them with the rules
/// candidates' configurations follow, so an observer never meets a bad path;
/// build one with [`ObserverConfig::new`] (or [`ObserverConfig::election`])
/// and the `with_*` methods.
///
/// ```
/// use zkelect_core::{Interop, ObserverConfig, Recipe};
/// let c = ObserverConfig::election("/svc/leader", 2);
/// assert_eq!(c.prefix(), "n_");
/// let curator = ObserverConfig::election("/svc/leader", 1).with_interop(Interop::Curator);
/// assert_eq!(curator.prefix(), "latch-");
/// let lock = ObserverConfig::new("/svc/lock", Recipe::Mutex).with_interop(Interop::Curator);
/// assert_eq!(lock.prefix(), "lock-");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ObserverConfig {
    path: String,
    recipe: Recipe,
    interop: Interop,
    prefix: Option<String>,
}

impl ObserverConfig {
    /// Observes the queue of `recipe` at `path`.
    pub fn new(path: impl Into<String>, recipe: Recipe) -> Self {
        Self {
            path: path.into(),
            recipe,
            interop: Interop::None,
            prefix: None,
        }
    }

    /// Observes the election at `path` in which the `leaders` lowest nodes lead.
    pub fn election(path: impl Into<String>, leaders: u32) -> Self {
        Self::new(path, Recipe::Election { leaders })
    }

    /// Counts the nodes of another library's scheme too, as candidates with
    /// the same [`Interop`] do.
    #[must_use]
    pub fn with_interop(mut self, interop: Interop) -> Self {
        self.interop = interop;
        self
    }

    /// The node-name prefix the candidates were configured with (their
    /// `ConfigBuilder::prefix`), when not the default.
    #[must_use]
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// The queue's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What the queue is for, and so which of its nodes hold.
    pub fn recipe(&self) -> Recipe {
        self.recipe
    }

    /// The interop scheme.
    pub fn interop(&self) -> Interop {
        self.interop
    }

    /// The stem of the nodes that take part, as [`Config::prefix`](crate::Config::prefix)
    /// reads it for the candidates (a read-write lock has two fixed stems, and
    /// this is empty).
    pub fn prefix(&self) -> &str {
        if self.recipe == Recipe::ReadWrite {
            return "";
        }
        let rule = self.recipe.rule(Access::Exclusive);
        let own = rule.stem(Interop::None).unwrap_or("n_");
        match (self.interop, &self.prefix) {
            (Interop::None, Some(prefix)) => prefix,
            (Interop::None, None) => own,
            (interop, _) => rule.stem(interop).unwrap_or(own),
        }
    }

    /// Checks the description with the rules candidates' configurations follow.
    pub fn validate(&self) -> Result<(), ConfigError> {
        validate_path(&self.path)?;
        let k = match self.recipe {
            Recipe::Election { leaders: k } | Recipe::Semaphore { permits: k } => k,
            Recipe::Mutex | Recipe::ReadWrite => 1,
        };
        if k == 0 || k > LEADERS_MAX {
            return Err(match self.recipe {
                Recipe::Semaphore { permits } => ConfigError::InvalidPermits(permits),
                _ => ConfigError::InvalidLeaders(k),
            });
        }
        if let Some(prefix) = &self.prefix {
            if self.interop != Interop::None {
                return Err(ConfigError::InteropPrefix(self.interop));
            }
            if self.recipe == Recipe::ReadWrite {
                return Err(ConfigError::InvalidPrefix {
                    prefix: prefix.chars().take(64).collect(),
                    reason: "a read-write lock's stems are fixed (r_ and w_): they tell readers from writers",
                });
            }
            validate_prefix(prefix)?;
        }
        if self.interop != Interop::None {
            let rule = self.recipe.rule(Access::Exclusive);
            if rule.stem(self.interop).is_none() {
                return Err(ConfigError::InteropRule {
                    interop: self.interop,
                    rule,
                });
            }
            // Candidates refuse it (ConfigError::InteropLeaders), so no such
            // queue exists to observe.
            if k > 1 {
                return Err(ConfigError::InteropLeaders(self.interop));
            }
        }
        Ok(())
    }
}

/// Counters of one observer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ObserverStats {
    /// Children listings sent.
    pub listings: u64,
    /// Node reads sent.
    pub reads: u64,
    /// Replies that matched no request in flight (late, duplicated or from an
    /// expired session), ignored.
    pub stale_replies: u64,
    /// Participant lists reported.
    pub lists: u64,
    /// `exists` watches set on the queue's path while it was missing (once
    /// per absence: before the path is first created, after each deletion).
    pub exists_watches: u64,
}

/// What the children listing is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Listing {
    /// A listing is due (first one, after a children event).
    Due,
    /// A `sync`, then a listing, is due: after a reconnect the server may be
    /// behind the leader (though not behind what this client has seen), and
    /// a listing from it could report a queue older than the last one
    /// reported. ZooKeeper's cure is `sync` before the read.
    SyncDue,
    /// That `sync` is in flight; the listing follows its answer.
    Syncing { op: OpId },
    /// A listing with a watch is in flight; `again` if something changed since
    /// it was sent, so its answer may predate the change.
    InFlight { op: OpId, again: bool },
    /// The last listing left a child watch; wait for it to fire.
    Armed,
    /// The last listing found no path: an `exists` watch on it is due (a
    /// listing of a missing node leaves no watch on the server).
    AbsentDue,
    /// That `exists` is in flight; `again` if an event about the path came
    /// meanwhile (its answer may predate the creation).
    Probing { op: OpId, again: bool },
    /// The `exists` watch is set on the missing path: wait for its
    /// `NodeCreated` (or a reconnect), sending nothing.
    Absent,
}

/// What is known of one listed node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Slot {
    /// Its data is to be read (`op` once the read is sent).
    Reading { op: Option<OpId> },
    /// Read: a live participant.
    Live {
        identity: Identity,
        token: FencingToken,
        /// The session that owns it (its `ephemeralOwner`).
        owner: SessionId,
        /// Its data says its writer downgraded to a reader.
        downgraded: bool,
    },
    /// Persistent (`ephemeralOwner` 0): a look-alike no process holds; skipped.
    Persistent,
    /// Deleted between the listing and the read.
    Gone,
}

/// A listed node read as live, while the list is judged.
struct Live<'a> {
    node: &'a NodeName,
    identity: &'a Identity,
    token: FencingToken,
    owner: SessionId,
    access: Access,
}

/// What a request in flight was for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Op {
    Sync,
    List,
    /// The `exists` watch on the missing path.
    Exists,
    Read(String),
}

/// Whether the machine still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    Running,
    Closed,
    Failed,
}

/// Watches a queue and reports its participants, in order, whenever they change.
///
/// See the [module documentation](crate::observer) for a whole run.
#[derive(Debug, Clone)]
pub struct Observer {
    config: ObserverConfig,
    now: Timestamp,
    next_op: u64,
    phase: Phase,
    /// The session the link is on, if connected.
    link: Option<Option<SessionId>>,
    /// The last session seen, to tell a reconnect from a new session.
    session: Option<SessionId>,
    listing: Listing,
    /// The last listing's queue, ordered oldest first; `None` before the
    /// first listing, so that "not listed yet" is never reported as "nobody".
    queue: Option<Vec<NodeName>>,
    slots: BTreeMap<String, Slot>,
    /// Requests in flight: what each is for, and the kind sent (its reply
    /// must be of that kind).
    ops: BTreeMap<OpId, (Op, Verb)>,
    /// Persistent look-alikes reported, so each is reported once.
    persistent_reported: BTreeSet<String>,
    /// The last list reported, `None` before the first.
    reported: Option<Vec<Participant>>,
    /// Whether the queue or a slot changed since the list was last judged:
    /// the list is a function of those alone, so until one changes there is
    /// nothing new to report (and no list to build on every input).
    changed: bool,
    /// Whether a slot may be waiting for its read to be sent
    /// (`Slot::Reading { op: None }`), so that the slots are scanned only then.
    unsent: bool,
    retry_at: Option<Timestamp>,
    backoff: Backoff,
    notices: VecDeque<Notice>,
    commands: VecDeque<Command>,
    stats: ObserverStats,
}

impl Observer {
    /// An observer of the queue `config` describes; it starts listing once a
    /// [`SessionEvent::Connected`] arrives (a driver adding it to a session
    /// that is already connected feeds one first).
    pub fn new(config: ObserverConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self {
            config,
            now: Timestamp::ZERO,
            next_op: 1,
            phase: Phase::Running,
            link: None,
            session: None,
            listing: Listing::Due,
            queue: None,
            slots: BTreeMap::new(),
            ops: BTreeMap::new(),
            persistent_reported: BTreeSet::new(),
            reported: None,
            changed: false,
            unsent: false,
            retry_at: None,
            backoff: Backoff::new(0x3c6e_f372_fe94_f82b),
            notices: VecDeque::new(),
            commands: VecDeque::new(),
            stats: ObserverStats::default(),
        })
    }

    /// The queue observed.
    pub fn config(&self) -> &ObserverConfig {
        &self.config
    }

    /// The participants last reported, oldest first (empty before the first report).
    pub fn participants(&self) -> &[Participant] {
        self.reported.as_deref().unwrap_or(&[])
    }

    /// Whether a list has been reported yet: before that, an empty
    /// [`participants`](Self::participants) means "not known yet", not "nobody".
    pub fn has_reported(&self) -> bool {
        self.reported.is_some()
    }

    /// The oldest holder last reported (the leader with k = 1, the lock's
    /// holder), if any.
    pub fn leader(&self) -> Option<&Participant> {
        self.participants().iter().find(|p| p.holds)
    }

    /// Counters.
    pub fn stats(&self) -> &ObserverStats {
        &self.stats
    }

    /// True once [`close`](Self::close) was called or the client closed.
    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    /// True once a fatal error stopped the observer.
    pub fn is_failed(&self) -> bool {
        self.phase == Phase::Failed
    }

    /// Stops observing: no more commands; replies still in flight are ignored.
    /// The observer owns no node, so there is nothing to delete.
    pub fn close(&mut self, now: Timestamp) {
        self.enter(now);
        if self.phase == Phase::Running {
            self.phase = Phase::Closed;
        }
        self.stop();
    }

    /// Feeds one input from the world.
    pub fn handle(&mut self, now: Timestamp, input: Input) {
        self.enter(now);
        if self.phase != Phase::Running {
            if let Input::Reply { op, .. } = input {
                if self.ops.remove(&op).is_none() {
                    self.stats.stale_replies += 1;
                }
            }
            return;
        }
        match input {
            Input::Reply { op, result } => self.on_reply(op, result),
            Input::Watch(event) => self.on_watch(&event),
            Input::Session(event) => self.on_session(event),
        }
        self.advance();
    }

    /// Fires the retry timer if it is due. Spurious calls are harmless.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        self.enter(now);
        if self.retry_at.is_some_and(|at| at <= self.now) {
            self.retry_at = None;
        }
        self.advance();
    }

    /// The next notice for the application, if any.
    #[must_use]
    pub fn poll_notice(&mut self) -> Option<Notice> {
        self.notices.pop_front()
    }

    /// The next command for the driver to perform, if any.
    #[must_use]
    pub fn poll_command(&mut self) -> Option<Command> {
        self.commands.pop_front()
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next, if ever.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.retry_at
    }

    // ----- plumbing ----------------------------------------------------------

    fn enter(&mut self, now: Timestamp) {
        self.now = self.now.max(now);
    }

    fn stop(&mut self) {
        self.commands.clear();
        self.retry_at = None;
    }

    fn fail(&mut self, error: CandidateError) {
        self.phase = Phase::Failed;
        self.notices.push_back(Notice::Error(error));
        self.stop();
    }

    /// `PATH/name`, without the formatting machinery (one per read).
    fn child_path(&self, name: &str) -> String {
        let parent = &self.config.path;
        let mut path = String::with_capacity(parent.len() + 1 + name.len());
        path.push_str(parent);
        path.push('/');
        path.push_str(name);
        path
    }

    fn send(&mut self, request: Request, op_kind: Op) -> OpId {
        let op = OpId(self.next_op);
        self.next_op += 1;
        self.ops.insert(op, (op_kind, request.kind()));
        self.commands.push_back(Command { op, request });
        op
    }

    /// Waits a backoff before sending anything more.
    fn back_off(&mut self) {
        if self.retry_at.is_none() {
            self.retry_at = Some(self.now + self.backoff.next_delay(BACKOFF_MIN, BACKOFF_MAX));
        }
    }

    /// A listing is needed: now, or after the one in flight.
    fn relist(&mut self) {
        self.listing = match self.listing {
            Listing::InFlight { op, .. } => Listing::InFlight { op, again: true },
            // The listing after the sync will see the change.
            Listing::SyncDue | Listing::Syncing { .. } => self.listing,
            Listing::Probing { op, .. } => Listing::Probing { op, again: true },
            Listing::Due | Listing::Armed | Listing::AbsentDue | Listing::Absent => Listing::Due,
        };
    }

    /// Forgets every request of a dead session: their answers are stale, and a
    /// watch set by them died with the session.
    fn forget_session(&mut self) {
        self.changed = true;
        self.unsent = true;
        self.ops.clear();
        self.listing = Listing::Due;
        for slot in self.slots.values_mut() {
            if let Slot::Reading { op } = slot {
                *op = None;
            }
        }
    }

    fn on_session(&mut self, event: SessionEvent) {
        match event {
            SessionEvent::Connected { session_id, .. } => {
                let new_session = match (self.session, session_id) {
                    (Some(old), Some(new)) => old != new,
                    _ => false,
                };
                // Not the first connection: what was reported came from
                // another server, perhaps ahead of this one.
                let reconnect = self.session.is_some() || self.queue.is_some();
                if new_session {
                    self.forget_session();
                }
                if session_id.is_some() {
                    self.session = session_id;
                }
                self.link = Some(session_id);
                // A watch may have fired while the link was down (a client
                // re-registers watches, but not every client reports what
                // fired in between): list again on every reconnect.
                self.relist();
                if reconnect {
                    self.listing = Listing::SyncDue;
                }
                self.retry_at = None;
                self.backoff.reset();
            }
            SessionEvent::Disconnected => self.link = None,
            SessionEvent::Expired => {
                self.link = None;
                self.session = None;
                self.forget_session();
            }
            SessionEvent::AuthFailed => self.fail(CandidateError::AuthFailed),
            SessionEvent::Closed => {
                self.phase = Phase::Closed;
                self.stop();
            }
        }
    }

    fn on_watch(&mut self, event: &WatchEvent) {
        if event.path == self.config.path
            && matches!(
                event.kind,
                WatchKind::NodeChildrenChanged | WatchKind::NodeDeleted | WatchKind::NodeCreated
            )
        {
            self.relist();
            return;
        }
        // A data watch of ours fired (see `watches_data`): read that node
        // again, which sets the watch again. The queue is as it was: its
        // changes come by the child watch.
        if event.kind != WatchKind::NodeDataChanged {
            return;
        }
        let Some(name) = event
            .path
            .strip_prefix(self.config.path.as_str())
            .and_then(|rest| rest.strip_prefix('/'))
        else {
            return;
        };
        if let Some(slot) = self.slots.get_mut(name) {
            if *slot != Slot::Persistent {
                *slot = Slot::Reading { op: None };
                self.unsent = true;
                self.changed = true;
            }
        }
    }

    /// The nodes whose reads set a data watch (`None`: every node), so that
    /// what their data says is reported when it changes, not at the next
    /// change of the queue.
    ///
    /// In a read-write lock, every node: a writer that downgrades says so
    /// in its data. In the other recipes, the holders only (the head of the
    /// queue as the listing orders it, persistent look-alikes left out): a
    /// revocation request is written into a holder's node. A node that
    /// holds there holds until it goes, so its watch is set at the read
    /// after the listing that shows it holds. What it costs the server per
    /// observer: one watch entry per holding node (one for a mutex or an
    /// election of one leader, k or the permits at most), one notification
    /// per write into a holder's node (a request), and one more when a
    /// holder goes (its data watch fires beside the parent's child watch).
    fn watches_data(&self) -> Option<BTreeSet<String>> {
        if self.config.recipe == Recipe::ReadWrite {
            return None;
        }
        let Some(queue) = &self.queue else {
            return Some(BTreeSet::new());
        };
        let candidates: Vec<&NodeName> = queue
            .iter()
            .filter(|n| !self.persistent_reported.contains(&n.name))
            .collect();
        let heads = self
            .config
            .recipe
            .holders_of(candidates.iter().map(|n| (n.access, n.weight)));
        Some(
            heads
                .into_iter()
                .map(|i| candidates[i].name.clone())
                .collect(),
        )
    }

    fn on_reply(&mut self, op: OpId, result: Result<Reply, ZkCode>) {
        let Some((kind, verb)) = self.ops.remove(&op) else {
            self.stats.stale_replies += 1;
            return;
        };
        if let Ok(reply) = &result {
            if reply.kind() != verb {
                let error = WrongReply {
                    request: verb,
                    reply: reply.kind(),
                    path: self.config.path.clone(),
                };
                return self.fail(CandidateError::WrongReply(error));
            }
        }
        match kind {
            Op::Sync => self.on_sync(op, result),
            Op::List => self.on_listing(op, result),
            Op::Exists => self.on_exists(op, result),
            Op::Read(name) => self.on_read(op, &name, result),
        }
    }

    fn on_sync(&mut self, op: OpId, result: Result<Reply, ZkCode>) {
        if self.listing != (Listing::Syncing { op }) {
            self.stats.stale_replies += 1;
            return;
        }
        match result {
            Ok(Reply::Synced) => self.listing = Listing::Due,
            Err(code) if code.is_fatal() => self.fail(CandidateError::Refused {
                verb: "sync".into(),
                path: self.config.path.clone(),
                code,
            }),
            Ok(_) | Err(_) => {
                self.listing = Listing::SyncDue;
                self.back_off();
            }
        }
    }

    fn on_listing(&mut self, op: OpId, result: Result<Reply, ZkCode>) {
        let again = match self.listing {
            Listing::InFlight { op: current, again } if current == op => again,
            // An older listing (before a reconnect): its news is older than the
            // one in flight, which will say it all.
            _ => {
                self.stats.stale_replies += 1;
                return;
            }
        };
        match result {
            Ok(Reply::Children(children)) => {
                self.backoff.reset();
                self.listing = if again { Listing::Due } else { Listing::Armed };
                self.take_listing(&children);
            }
            Err(ZkCode::NoNode) => {
                // No queue yet (or it was deleted): nobody takes part. The
                // server leaves no watch on a missing node: set one that
                // waits for its creation. A listing that said the path was
                // there (`again`) is older than this answer's news.
                self.listing = Listing::AbsentDue;
                self.take_listing(&[]);
            }
            Err(code) if code.is_fatal() => self.fail(CandidateError::Refused {
                verb: "children".into(),
                path: self.config.path.clone(),
                code,
            }),
            Ok(_) | Err(_) => {
                self.listing = Listing::Due;
                self.back_off();
            }
        }
    }

    /// The answer to the `exists` watch on the missing path.
    fn on_exists(&mut self, op: OpId, result: Result<Reply, ZkCode>) {
        let again = match self.listing {
            Listing::Probing { op: current, again } if current == op => again,
            _ => {
                self.stats.stale_replies += 1;
                return;
            }
        };
        match result {
            // Still missing, nothing heard meanwhile: the watch is set and
            // will say when the path is created.
            Ok(Reply::Exists(None)) if !again => self.listing = Listing::Absent,
            // Created since the listing (or an event came meanwhile): list
            // it. Not at once: a path created and deleted over and over
            // must not turn listing and probing into a loop, so the next
            // listing waits a backoff (reset by the first listing that
            // finds the path).
            Ok(Reply::Exists(_)) => {
                self.listing = Listing::Due;
                self.back_off();
            }
            Err(code) if code.is_fatal() => self.fail(CandidateError::Refused {
                verb: "exists".into(),
                path: self.config.path.clone(),
                code,
            }),
            // An unexpected reply or a failure: look at the path again
            // after a backoff (a listing, which also watches if it is there).
            Ok(_) | Err(_) => {
                self.listing = Listing::Due;
                self.back_off();
            }
        }
    }

    /// Takes a fresh listing: every listed name is to be read (again),
    /// vanished ones forgotten.
    ///
    /// A name seen before is read again too: between two listings (a slow
    /// link is enough, no disconnect needed) the queue's parent may have been
    /// deleted and recreated, its sequence counter restarted, and a client
    /// that reuses its prefix (kazoo's lock) may have taken the same name
    /// again: another node, another czxid. A listing carries no stat of the
    /// parent to tell, so only a read after the listing says which node a
    /// name is now (pause seed 47360). A read sent before this listing may
    /// have read the old node: its answer is dropped.
    fn take_listing(&mut self, children: &[String]) {
        self.changed = true;
        self.unsent = true;
        // A listing names each child once; a duplicated one is not a second
        // node. Parsed as `name::queue` would (the order is total on distinct
        // names), without copying the listing first.
        let mut unique: Vec<&str> = children.iter().map(String::as_str).collect();
        unique.sort_unstable();
        unique.dedup();
        let mut queue: Vec<NodeName> = unique
            .into_iter()
            .filter_map(|child| {
                name::parse(
                    child,
                    self.config.prefix(),
                    self.config.interop,
                    self.config.recipe,
                )
            })
            .collect();
        // Still in name order here: looked up by binary search.
        let listed = |name: &str| {
            queue
                .binary_search_by(|node| node.name.as_str().cmp(name))
                .is_ok()
        };
        self.slots.retain(|name, _| listed(name));
        for slot in self.slots.values_mut() {
            *slot = Slot::Reading { op: None };
        }
        for node in &queue {
            if !self.slots.contains_key(&node.name) {
                self.slots
                    .insert(node.name.clone(), Slot::Reading { op: None });
            }
        }
        name::order(&mut queue);
        // Reads sent before this listing answer for nobody now.
        self.ops.retain(|_, (kind, _)| !matches!(kind, Op::Read(_)));
        self.queue = Some(queue);
    }

    fn on_read(&mut self, op: OpId, name: &str, result: Result<Reply, ZkCode>) {
        let Some(slot) = self.slots.get_mut(name) else {
            self.stats.stale_replies += 1;
            return;
        };
        if *slot != (Slot::Reading { op: Some(op) }) {
            self.stats.stale_replies += 1;
            return;
        }
        self.changed = true;
        match result {
            Ok(Reply::Data { data, stat }) => {
                self.backoff.reset();
                *slot = Self::slot_of(&data, &stat);
                if *slot == Slot::Persistent && self.persistent_reported.insert(name.to_owned()) {
                    self.notices.push_back(Notice::PersistentSkipped {
                        node: name.to_owned(),
                    });
                    // It may have been counted among the holders whose data
                    // is watched, and a node behind it may hold unwatched:
                    // a new listing leaves the look-alike out (once per one).
                    if self.config.recipe != Recipe::ReadWrite {
                        self.relist();
                    }
                }
            }
            Err(ZkCode::NoNode) => *slot = Slot::Gone,
            Err(code) if code.is_fatal() => {
                let path = self.child_path(name);
                self.fail(CandidateError::Refused {
                    verb: "data".into(),
                    path,
                    code,
                });
            }
            Ok(_) | Err(_) => {
                *slot = Slot::Reading { op: None };
                self.unsent = true;
                self.back_off();
            }
        }
    }

    fn slot_of(data: &[u8], stat: &Stat) -> Slot {
        if stat.ephemeral_owner == 0 {
            Slot::Persistent
        } else {
            Slot::Live {
                identity: identity_of(data),
                token: FencingToken(stat.czxid),
                owner: SessionId(stat.ephemeral_owner),
                downgraded: is_downgraded(data),
            }
        }
    }

    /// Sends what is due and reports the list if it is complete and new.
    fn advance(&mut self) {
        if self.phase != Phase::Running {
            return;
        }
        if self.link.is_some() && self.retry_at.is_none() {
            if self.listing == Listing::SyncDue {
                let path = self.config.path.clone();
                let op = self.send(Request::Sync { path }, Op::Sync);
                self.listing = Listing::Syncing { op };
            }
            if self.listing == Listing::Due {
                self.stats.listings += 1;
                let path = self.config.path.clone();
                let op = self.send(Request::GetChildren { path, watch: true }, Op::List);
                self.listing = Listing::InFlight { op, again: false };
            }
            if self.listing == Listing::AbsentDue {
                self.stats.exists_watches += 1;
                let path = self.config.path.clone();
                let op = self.send(Request::Exists { path, watch: true }, Op::Exists);
                self.listing = Listing::Probing { op, again: false };
            }
            // Reads wait for the sync too: the server may be behind.
            let synced = !matches!(self.listing, Listing::SyncDue | Listing::Syncing { .. });
            let unread: Vec<String> = if synced && self.unsent {
                // Every read due is sent below.
                self.unsent = false;
                self.slots
                    .iter()
                    .filter(|(_, slot)| **slot == Slot::Reading { op: None })
                    .map(|(name, _)| name.clone())
                    .collect()
            } else {
                Vec::new()
            };
            let watched = if unread.is_empty() {
                Some(BTreeSet::new())
            } else {
                self.watches_data()
            };
            for name in unread {
                self.stats.reads += 1;
                let path = self.child_path(&name);
                let watch = watched.as_ref().is_none_or(|heads| heads.contains(&name));
                let op = self.send(Request::GetData { path, watch }, Op::Read(name.clone()));
                if let Some(slot) = self.slots.get_mut(&name) {
                    *slot = Slot::Reading { op: Some(op) };
                }
            }
        }
        self.report();
    }

    fn report(&mut self) {
        if !self.changed {
            return;
        }
        let Some(queue) = &self.queue else {
            return;
        };
        if self
            .slots
            .values()
            .any(|slot| matches!(slot, Slot::Reading { .. }))
        {
            return;
        }
        // Who holds is judged among the live nodes only: persistent
        // look-alikes and vanished nodes hold nothing, as candidates see it.
        // A zkelect writer that downgraded reads: shared, as its readers
        // behind it judge (another library's data means nothing of the kind).
        let access = |node: &NodeName, downgraded: bool| {
            if downgraded && matches!(node.origin, name::Origin::Ours { .. }) {
                Access::Shared
            } else {
                node.access
            }
        };
        let live: Vec<Live<'_>> = queue
            .iter()
            .filter_map(|node| match self.slots.get(&node.name) {
                Some(Slot::Live {
                    identity,
                    token,
                    owner,
                    downgraded,
                }) => Some(Live {
                    node,
                    identity,
                    token: *token,
                    owner: *owner,
                    access: access(node, *downgraded),
                }),
                _ => None,
            })
            .collect();
        let mut holds = vec![false; live.len()];
        for i in self
            .config
            .recipe
            .holders_of(live.iter().map(|l| (l.access, l.node.weight)))
        {
            holds[i] = true;
        }
        // Most changes (a listing read again) leave the list as it was:
        // compared in place, it is built only when it is news.
        let same = self.reported.as_ref().is_some_and(|reported| {
            reported.len() == live.len()
                && reported
                    .iter()
                    .zip(&live)
                    .zip(&holds)
                    .all(|((p, l), &holds)| {
                        p.identity == *l.identity
                            && p.weight == l.node.weight
                            && p.node == l.node.name
                            && p.token == l.token
                            && p.owner == l.owner
                            && p.holds == holds
                            && p.access == l.access
                    })
        });
        if same {
            self.changed = false;
            return;
        }
        let list: Vec<Participant> = live
            .iter()
            .zip(holds)
            .map(|(l, holds)| Participant {
                identity: l.identity.clone(),
                weight: l.node.weight,
                node: l.node.name.clone(),
                token: l.token,
                owner: l.owner,
                holds,
                access: l.access,
            })
            .collect();
        self.changed = false;
        if self.reported.as_ref() != Some(&list) {
            self.stats.lists += 1;
            self.notices.push_back(Notice::Participants(list.clone()));
            self.reported = Some(list);
        }
    }
}
