//! The election state machine.
//!
//! # Rules of this file
//!
//! - Every transition of a candidate lives here. This file knows nothing of
//!   ZooKeeper client types, clocks, threads or randomness: time comes in as
//!   `now`, randomness as the configured seed, the world as [`Input`]s.
//! - A reply is acted on only if its [`OpId`] is still in flight (`session.ops`);
//!   anything else is stale and counted, never acted on.
//! - The main lane has at most one request in flight; the own-node watch, the
//!   leader marker and the liveness probe each have a lane of their own. The
//!   in-flight map (`ops`, by [`OpId`], each with its `Purpose`) is the one
//!   place that says what is in flight; a lane's state says only what the map
//!   cannot (armed, waiting for proof of contact). So a candidate
//!   never has two requests in flight for the same purpose, and never two watch
//!   requests for the same path.
//! - A create is never sent again while an earlier one may still be applied: a
//!   create whose fate is unknown (ConnectionLoss) is *recovered* by listing the
//!   children and looking for this session's nonce (the "protected" create of the
//!   ZooKeeper recipe and of Curator's `withProtection`).
//! - Arrival order is not trusted: a watch event may overtake the reply that set
//!   the watch, and a reply may overtake an event the server sent first. Every
//!   handler checks the current state rather than assuming a sequence.
//! - Watch events carry a path and nothing else, so an event is taken as news
//!   about the node watched now only when no other node can ever have borne
//!   that path: a protected name, whose nonce is fresh for every create
//!   ([`name::never_reused`]). Anything else is confirmed with a read.
//!
//! # Theory of operation
//!
//! The recipe: create `ELECTION/_c_<nonce>-n_` EPHEMERAL|SEQUENTIAL, list the
//! children, the k lowest lead; a follower watches only the next lower node with
//! `getData` (an `exists` watch on a node already gone would stay behind as a
//! creation watch). Sequence numbers only grow, so the set of nodes below one's
//! own can only shrink: when the predecessor goes and fewer than k nodes of the
//! last listing remain below, the candidate leads on the notification itself
//! (zero-round-trip takeover); otherwise it lists again.
//!
//! "Sequence numbers only grow" holds under one incarnation of the election
//! path: deleted and recreated, it numbers from zero again. Three rules keep
//! the takeover inside that guarantee:
//!
//! - every create draws a fresh nonce, so a protected name is never given to a
//!   second node, and a listing that shows our own name shows our node's
//!   incarnation of the path;
//! - a `NodeDeleted` is acted on at once only for such a name; for any other
//!   name it may be about an older node of that name (a wipe, then a late event:
//!   found by the simulator), so the node is read again and the read decides;
//! - a watched node read with a czxid not below our own node's, or other than
//!   the one read before, was created after our node: it is not the
//!   predecessor our listing showed, and the candidate lists again.
//!
//! # Rules
//!
//! The machine is the same for an election, a mutex, a semaphore and both
//! sides of a read-write lock ([`Rule`](crate::Rule)): "the nodes below" above
//! means the nodes below that *block* ours under its rule, and k its
//! [`limit`](crate::Rule::limit). A reader counts only the writers below it and
//! watches the nearest; everyone else counts every node below. Since blocking
//! nodes below can only go, the zero-round-trip takeover holds for every rule:
//! a reader whose watched writer was the only blocking node its listing showed
//! holds on that writer's `NodeDeleted`.
//!
//! The leader marker: a new leader rewrites its node's data unchanged
//! (`setData` expecting version 0). Its successor's data watch fires, the
//! successor reads the node again and finds data version 1 with the bytes it
//! read at version 0 of the same czxid: the node has led, so fewer than k
//! nodes are below it, for good. A follower that listed before its predecessor
//! led (in a rotation, always) thereby learns that its standing is as good as
//! a fresh listing would show, and the predecessor's deletion elects it on the
//! notification alone. Under the other rules the marker says "this node has
//! held": fewer than k of the nodes blocking *it* were below it, for good. That
//! bounds the nodes blocking *us* only if every node that blocks us blocks it
//! too: true of every exclusive node, and of a reader for a reader (no writer
//! below it, ever), but not of a reader for a writer (readers below it block the
//! writer in any number), so a writer reads a reader's marker past and a reader,
//! watched only by writers, writes none.
//!
//! Contact with the server is tracked as the send time of the newest request the
//! server answered (`last_ack`): the server cannot expire the session before
//! `last_ack + session timeout`. A probe every third of the timeout keeps it
//! fresh; after two thirds without contact the link counts as suspended even if
//! the client library has not noticed, and under the `SessionAware` policy a
//! leader demotes itself at nine tenths, before the server could have expired it.
//!
//! # Where the rest lives
//!
//! - `lease.rs`: the pure rules of contact and leadership over time
//!   (`link_ok`, `session_may_live`, the lease's expiry and next deadline).
//! - `standing.rs`: a follower's books on the nodes below its own (the last
//!   listing, the markers seen, the watched and armed nodes) and the rule of
//!   how many can be below it now.
//! - Here: every transition, and the state, laid out so that impossible
//!   combinations cannot be written down: each side lane is an enum, the
//!   in-flight map is the only record of what is in flight, and everything of
//!   one ZooKeeper session is one `SessionState`, replaced whole on expiry.

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use crate::command::{Command, OpId};
use crate::config::{Config, Interop, WatchStrategy};
use crate::input::{Input, SessionEvent};
use crate::kept::KeptName;
use crate::lease::{Connection, Contact, Leadership};
use crate::name::{self, NodeName, Origin};
use crate::notice::{CandidateError, DemotionReason, FencingToken, Notice, Role};
use crate::ops::OpTable;
use crate::outbox::Outbox;
use crate::standing::{Next, Standing};
use crate::time::Timestamp;
use crate::timer::{Backoff, Timer, TimerTable};
use crate::zk::{CreateMode, Reply, Request, SessionId, Stat, WatchEvent, WatchKind, ZkCode};

/// How many of the nearest lower nodes a follower remembers from a listing,
/// per node it watches: those it watches, and as many to fall back to without
/// listing again. Only a persistent look-alike read in place of a watched node
/// falls back (a watched node that goes costs a listing anyway: others may
/// have gone unseen), so one spare per watch is plenty; each name kept costs
/// every idle follower 16 bytes (packed: `standing.rs`), 56 if not ours.
const KEPT_PER_WATCH: usize = 2;

/// How many past sessions' nonces a candidate remembers, to clear their nodes.
const OLD_NONCES_KEPT: usize = 16;

/// Counters a driver can export as metrics.
///
/// A machine keeps each in 32 bits (a session runs thousands of machines):
/// a counter that reaches `u32::MAX` (four billion events; a probe every
/// second for 136 years) stays there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Stats {
    /// Commands emitted.
    pub commands: u64,
    /// Replies ignored because their op was no longer in flight.
    pub stale_replies: u64,
    /// Watch events ignored because nothing here watched that path any more.
    pub stale_events: u64,
    /// Child names ignored because they do not parse or are foreign.
    pub ignored_children: u64,
    /// Times this candidate was elected.
    pub elections: u64,
    /// Elections won on a notification alone, without a further round trip.
    pub zero_rtt_takeovers: u64,
    /// Children listings requested.
    pub listings: u64,
    /// Lost creates found again by their nonce.
    pub recovered_creates: u64,
    /// Leader markers written on this candidate's own node.
    pub marks_written: u64,
    /// Leader markers found on a watched node that tightened this follower's standing.
    pub marks_seen: u64,
    /// Persistent look-alike children found and skipped (counted once per name).
    pub persistent_skipped: u64,
}

/// A counter of [`Stats`] as a machine keeps it: 32 bits, saturating, widened
/// by [`Candidate::stats`]. Adding a `u64` (as the counts are written) keeps
/// every `+=` of the machine as it reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
struct Count(u32);

impl std::ops::AddAssign<u64> for Count {
    fn add_assign(&mut self, n: u64) {
        self.0 = self.0.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
    }
}

/// [`Stats`] as a machine keeps them: 44 bytes of every machine, not 88.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
struct Counters {
    commands: Count,
    stale_replies: Count,
    stale_events: Count,
    ignored_children: Count,
    elections: Count,
    zero_rtt_takeovers: Count,
    listings: Count,
    recovered_creates: Count,
    marks_written: Count,
    marks_seen: Count,
    persistent_skipped: Count,
}

impl Counters {
    fn widen(&self) -> Stats {
        Stats {
            commands: self.commands.0.into(),
            stale_replies: self.stale_replies.0.into(),
            stale_events: self.stale_events.0.into(),
            ignored_children: self.ignored_children.0.into(),
            elections: self.elections.0.into(),
            zero_rtt_takeovers: self.zero_rtt_takeovers.0.into(),
            listings: self.listings.0.into(),
            recovered_creates: self.recovered_creates.0.into(),
            marks_written: self.marks_written.0.into(),
            marks_seen: self.marks_seen.0.into(),
            persistent_skipped: self.persistent_skipped.0.into(),
        }
    }
}

/// The application's standing intent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Intent {
    /// Not taking part.
    Out,
    /// Taking part (or observing).
    In,
    /// Deleting the node, then rejoining (`true`) or staying out.
    Leave { rejoin: bool },
    /// Deleting the node, then stopping for good.
    Close,
}

/// What the main lane is doing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Step {
    /// Nothing to do.
    Idle,
    /// Creating the ancestors of the election path, `index` into `ancestors()`:
    /// the election path itself first (its own parent is there in the common
    /// case of many elections under one directory: one create, not one per
    /// level, each a logged transaction on the server even when it fails),
    /// then, if that is missing too, every level from the top.
    Parents { index: usize },
    /// Creating this candidate's node.
    Create,
    /// Listing the children to find a create whose reply was lost.
    Recover,
    /// Reading a node found by nonce to check it belongs to this session.
    Adopt { name: Box<str> },
    /// Listing the children to learn the queue.
    List,
    /// Setting a data watch on the predecessor.
    Watch { pred: Box<str> },
    /// Waiting for a watch to fire (a follower).
    Wait,
    /// Leading: nothing to do on the main lane.
    Lead,
    /// Deleting this candidate's node.
    Delete,
    /// Nothing will happen again.
    Done(End),
}

/// How a candidate stopped for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum End {
    /// Closed by the application or with the client.
    Closed,
    /// Stopped by a fatal error.
    Failed,
}

/// Why a request is in flight. The in-flight map is the one place that says
/// which request a lane waits for: a lane's state never repeats its [`OpId`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Purpose {
    // The main lane (at most one in flight).
    Parent(usize),
    Create,
    Recover,
    /// A `sync` before a listing (see [`Reads`]).
    Sync,
    Adopt(String),
    List {
        /// A children event arrived while this watched listing was in
        /// flight: its reply may predate the change, so list once more after
        /// it. Kept with the request, so it goes when the request is
        /// superseded (a later listing sees the change) or answered.
        again: bool,
    },
    WatchPred(String),
    Delete(String),
    // Side lanes (at most one each in flight).
    /// The data watch on our own node.
    WatchOwn {
        name: String,
        /// An event on our node arrived while this request was in flight: its
        /// reply arms nothing (that watch is already spent).
        spent: bool,
    },
    /// The leader marker's `setData`.
    Mark(String),
    /// A liveness probe.
    Probe {
        /// Another probe fell due while this one was in flight: send it as
        /// soon as this one is answered, so a short stall does not cost a
        /// whole third of the timeout of contact (and a needless suspension).
        again: bool,
    },
    // Any number in flight; only the contact they prove matters.
    DeleteExtra,
}

impl Purpose {
    /// Whether the main lane sent it.
    fn is_main(&self) -> bool {
        matches!(
            self,
            Self::Parent(_)
                | Self::Create
                | Self::Recover
                | Self::Sync
                | Self::Adopt(_)
                | Self::List { .. }
                | Self::WatchPred(_)
                | Self::Delete(_)
        )
    }
}

/// What a candidate keeps from its past: most never need any of it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
struct Past {
    /// Nonces of this candidate's earlier sessions: a node bearing one is ours
    /// from the past (a create applied after its session was given up on, or a
    /// dying session's node) and is deleted when a listing shows it.
    old_nonces: VecDeque<String>,
    /// Persistent children already reported, so each is reported once.
    persistent_reported: BTreeSet<String>,
}

/// Whether the connected server's reads can be trusted to show what the
/// leader had committed before them.
///
/// ZooKeeper never lets a client connect to a server behind what it has
/// *seen*, but a server may be behind the *leader*: after a reconnect to a
/// lagging follower, a listing can still show our node an operator deleted,
/// or miss our own create that committed while its reply was lost (both
/// found by the simulator's ensemble worlds, issue 17). The cure the
/// Programmer's Guide gives is `sync` before such a read. It is paid only
/// where a stale read could mislead: the first listing on a connection the
/// session moved to, and every protected-create recovery listing. A new
/// session's listings follow its own create, which the connected server
/// applied (with everything committed before it) before answering, so they
/// need none, and a failover on a notification pays nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Reads {
    /// Reads show at least what this candidate acts on.
    Current,
    /// The next listing must follow a `sync`.
    SyncFirst,
}

/// The data watch on our own node, while no request for it is in flight (the
/// in-flight map says when one is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum OwnWatch {
    /// Not set: set it when the main lane allows.
    Unarmed,
    /// Set, and not yet fired.
    Armed,
    /// The last request failed on the connection: wait for proof the
    /// connection works (any answer, or a new connection) before trying again.
    AwaitProof,
}

/// The leader marker on our own node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Mark {
    /// Not written yet: write it once leading (unless in flight).
    Unwritten,
    /// The last attempt failed on the connection: wait for proof it works again.
    AwaitProof,
    /// Written, or not worth trying again.
    Done,
}

/// What the application was told about contact with the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Suspension {
    /// Nothing outstanding.
    Clear,
    /// A `Suspended` notice went out and its `Resumed` has not yet.
    Suspended,
    /// Suspended, and the link is back: a suspended leader is re-verifying,
    /// and `Resumed` waits for the answer.
    Resuming,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct InFlight {
    purpose: Purpose,
    sent_at: Timestamp,
}

/// This candidate's own node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Own {
    /// Boxed: it never changes, and every machine holds one.
    name: Box<str>,
    token: FencingToken,
    mark: Mark,
}

/// Everything that belongs to one ZooKeeper session. When the session ends,
/// it is replaced whole: nothing of it can outlive its session by mistake.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SessionState {
    /// The session id, once known.
    id: Option<SessionId>,
    /// Which of this candidate's sessions this is (scopes the create nonces).
    epoch: u64,
    /// Creates sent in this session: the last one's nonce is `nonce(seed, epoch, creates - 1)`.
    creates: u64,
    /// A create of this session may have been applied though its reply was lost.
    create_uncertain: bool,
    /// Send time of the newest request the server answered in this session.
    last_ack: Option<Timestamp>,
    /// Every request in flight, by op: the one place that says what is in flight.
    ops: OpTable<InFlight>,
    /// Nodes of earlier sessions being deleted. Boxed: only a candidate that
    /// lost a session and then found its old node has any.
    // The box is the point (8 bytes inline for the rare list, not 24).
    #[allow(clippy::box_collection)]
    clearing: Option<Box<Vec<String>>>,
    own: Option<Own>,
    own_watch: OwnWatch,
    /// The follower's view of the nodes below ours.
    standing: Standing,
    /// Whether the next listing must be preceded by a `sync`.
    reads: Reads,
}

impl SessionState {
    fn new(epoch: u64) -> Self {
        Self {
            id: None,
            epoch,
            creates: 0,
            create_uncertain: false,
            last_ack: None,
            ops: OpTable::default(),
            clearing: None,
            own: None,
            own_watch: OwnWatch::Unarmed,
            standing: Standing::default(),
            reads: Reads::Current,
        }
    }
}

/// One participant in a leader election, as a pure state machine.
///
/// # Method kinds
///
/// - **(A) getters**: [`role`](Self::role), [`node`](Self::node),
///   [`watching`](Self::watching), [`is_closed`](Self::is_closed), [`stats`](Self::stats).
/// - **(B) inputs from the world**: [`handle`](Self::handle) (replies, watch events,
///   session events) and [`handle_timeout`](Self::handle_timeout).
/// - **(C) intents from the application**: [`join`](Self::join),
///   [`resign`](Self::resign), [`close`](Self::close); all idempotent.
/// - **(D) outputs**: [`poll_notice`](Self::poll_notice), [`poll_command`](Self::poll_command),
///   [`poll_timeout`](Self::poll_timeout).
///
/// After any (B) or (C) call, drain the outputs in this order: notices (so a
/// demotion reaches the application at the earliest moment), then commands, then
/// the timeout. The queues are independent: draining after every input or once
/// after many gives the same outputs.
///
/// `now` must not go backwards; a smaller `now` is treated as the last one seen.
/// Every command must be answered exactly once with an [`Input::Reply`] carrying
/// its [`OpId`] (an error such as `ConnectionLoss` is an answer).
///
/// # Panics
///
/// Never, whatever the inputs: a panic here is a bug.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use zkelect_core::*;
///
/// let config = Config::builder("/svc/leader", "node-a").nonce_seed(1).build()?;
/// let mut c = Candidate::new(config);
/// let t = Timestamp::from_millis(0);
/// c.join(t);
/// c.handle(t, Input::Session(SessionEvent::Connected {
///     session_id: Some(SessionId(7)),
///     timeout: Duration::from_secs(10),
/// }));
/// // A liveness probe first, then the create of the candidate's node.
/// let commands: Vec<Command> = std::iter::from_fn(|| c.poll_command()).collect();
/// assert!(matches!(commands[0].request, Request::Exists { .. }));
/// assert!(matches!(commands[1].request, Request::Create { .. }));
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    config: Config,
    now: Timestamp,
    next_op: u64,
    intent: Intent,
    connection: Connection,
    /// The negotiated timeout of the latest connection (zero before the first).
    timeout: Duration,
    /// Whether the latest connection said which session it is on: then a
    /// silent move to another session is caught on connecting (the ids
    /// differ), and the own-node watch need not read the node's owner.
    ids_reported: bool,
    /// Everything that belongs to one ZooKeeper session, replaced whole when
    /// the session ends.
    session: SessionState,
    /// What only a candidate that lost a session or met a look-alike needs;
    /// boxed, so the rest pay 8 bytes for it.
    past: Option<Box<Past>>,
    step: Step,
    leadership: Leadership,
    /// The link's last verdict ([`Self::link_ok`]), to act on its changes.
    link_up: bool,
    suspension: Suspension,
    /// The oldest node of the last listing, as last reported (packed: it is
    /// only compared).
    last_leader: Option<KeptName>,
    timers: TimerTable,
    backoff: Backoff,
    /// Notices and commands waiting to be polled.
    outbox: Outbox,
    stats: Counters,
}

impl Candidate {
    /// A candidate that has not joined yet; call [`join`](Self::join).
    pub fn new(config: Config) -> Self {
        let backoff = Backoff::new(name::splitmix64(
            config.nonce_seed() ^ 0x6a09_e667_f3bc_c908,
        ));
        Self {
            config,
            now: Timestamp::ZERO,
            next_op: 1,
            intent: Intent::Out,
            connection: Connection::Pending,
            timeout: Duration::ZERO,
            ids_reported: false,
            session: SessionState::new(0),
            step: Step::Idle,
            past: None,
            leadership: Leadership::None,
            link_up: false,
            suspension: Suspension::Clear,
            last_leader: None,
            timers: TimerTable::default(),
            backoff,
            outbox: Outbox::default(),
            stats: Counters::default(),
        }
    }

    // ----- (A) getters -----------------------------------------------------

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// What the application should be doing now.
    pub fn role(&self) -> Role {
        match self.step {
            Step::Done(End::Failed) => return Role::Failed,
            Step::Done(End::Closed) => return Role::Closed,
            _ => {}
        }
        match self.leadership {
            Leadership::Active(t) => Role::Leader(t),
            Leadership::Suspended(t) => Role::Suspended(t),
            Leadership::None => match self.intent {
                Intent::Out => Role::Idle,
                _ => Role::Follower,
            },
        }
    }

    /// This candidate's node name (not the full path), once known.
    pub fn node(&self) -> Option<&str> {
        self.session.own.as_ref().map(|o| &*o.name)
    }

    /// The fencing token of this candidate's node, once known.
    pub fn token(&self) -> Option<FencingToken> {
        self.session.own.as_ref().map(|o| o.token)
    }

    /// The nearest node this candidate watches (its predecessor), if any.
    pub fn watching(&self) -> Option<&str> {
        self.session.standing.watched().first().map(String::as_str)
    }

    /// Every node this candidate watches, nearest first (k of them with k leaders).
    pub fn watched(&self) -> &[String] {
        self.session.standing.watched()
    }

    /// The session id, once known.
    pub fn session_id(&self) -> Option<SessionId> {
        self.session.id
    }

    /// True once [`close`](Self::close) has finished (or the client was closed).
    pub fn is_closed(&self) -> bool {
        self.step == Step::Done(End::Closed)
    }

    /// True once a fatal error stopped the candidate.
    pub fn is_failed(&self) -> bool {
        self.step == Step::Done(End::Failed)
    }

    /// Counters (a copy: the machine keeps them in 32 bits each, see [`Stats`]).
    pub fn stats(&self) -> Stats {
        self.stats.widen()
    }

    /// Send time of the newest request the server answered in this session: the
    /// server cannot expire the session before this plus the session timeout.
    pub fn last_contact(&self) -> Option<Timestamp> {
        self.session.last_ack
    }

    /// The session timeout the server negotiated (zero before the first connection).
    pub fn session_timeout(&self) -> Duration {
        self.timeout
    }

    /// While leading: the moment leadership lapses unless the server answers
    /// again (two thirds of the session timeout after [`last_contact`](Self::last_contact)
    /// under the `Standard` policy, nine tenths under `SessionAware`). Anything
    /// acting for the leader (a supervised process, a lease) should stop by then.
    pub fn lease_expiry(&self) -> Option<Timestamp> {
        let Leadership::Active(_) = self.leadership else {
            return None;
        };
        self.contact().expiry(self.config.policy())
    }

    /// The requests emitted and not yet answered, oldest first.
    pub fn in_flight(&self) -> impl Iterator<Item = OpId> + '_ {
        self.session.ops.keys()
    }

    // ----- (C) intents ------------------------------------------------------

    /// Joins the election (or starts observing). Idempotent; after a resign in
    /// progress it turns the resign into resign-and-rejoin.
    pub fn join(&mut self, now: Timestamp) {
        self.enter(now);
        if self.is_done() {
            return;
        }
        match self.intent {
            Intent::In | Intent::Close => {}
            Intent::Leave { .. } => self.intent = Intent::Leave { rejoin: true },
            Intent::Out => {
                self.intent = Intent::In;
                self.step = Step::Create;
            }
        }
        self.advance();
    }

    /// Steps down and leaves the queue: deletes this candidate's node, then
    /// rejoins at the back if `rejoin`. A leader is demoted at once, before the
    /// delete is confirmed. Idempotent.
    pub fn resign(&mut self, now: Timestamp, rejoin: bool) {
        self.enter(now);
        if self.is_done() {
            return;
        }
        match self.intent {
            Intent::Out | Intent::Close => return,
            Intent::Leave { .. } => {
                self.intent = Intent::Leave { rejoin };
                return;
            }
            Intent::In => {}
        }
        self.demote(DemotionReason::Resigned);
        self.intent = Intent::Leave { rejoin };
        self.start_leaving();
        self.advance();
    }

    /// Leaves for good: deletes the node (retrying through connection loss; a
    /// node already gone counts as deleted) and then stops. Idempotent.
    pub fn close(&mut self, now: Timestamp) {
        self.enter(now);
        if self.is_done() {
            return;
        }
        match self.intent {
            Intent::Close => return,
            Intent::Out => {
                self.intent = Intent::Close;
                self.finish_leaving();
                return;
            }
            Intent::In | Intent::Leave { .. } => {}
        }
        self.demote(DemotionReason::Closed);
        self.intent = Intent::Close;
        self.start_leaving();
        self.advance();
    }

    // ----- (B) inputs --------------------------------------------------------

    /// Feeds one input from the world.
    pub fn handle(&mut self, now: Timestamp, input: Input) {
        self.enter(now);
        if self.is_done() {
            if let Input::Reply { op, .. } = &input {
                if self.session.ops.remove(*op).is_none() {
                    self.stats.stale_replies += 1;
                }
            }
            return;
        }
        match input {
            Input::Reply { op, result } => self.on_reply(op, result),
            Input::Watch(event) => self.on_watch(event),
            Input::Session(event) => self.on_session(event),
        }
        self.check_link();
        self.advance();
    }

    /// The server answered a request of this machine's session that was
    /// not this machine's own — another machine's on the same session, or a
    /// driver's one probe for all of them — sent at `sent_at`: the server
    /// cannot expire the session before `sent_at` + its timeout, exactly as
    /// when one of our own requests is answered. So a driver that runs many
    /// machines on one session sends one liveness probe per session, not
    /// one per machine: each machine's probe falls due only when no contact
    /// newer than a third of the timeout is known.
    ///
    /// The caller must only report requests sent on the current connection,
    /// after the last session event it fed (an answer from before a
    /// reconnect proves nothing about this connection). Ignored before the
    /// first `Connected`, after expiry, and once done; a `sent_at` later
    /// than `now` counts as `now`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use zkelect_core::{Candidate, Config, Input, SessionEvent, Timestamp};
    ///
    /// let mut c = Candidate::new(Config::builder("/svc/leader", "a").build().unwrap());
    /// let t = Timestamp::from_millis;
    /// c.handle(t(0), Input::Session(SessionEvent::Connected { session_id: None, timeout: Duration::from_secs(3) }));
    /// c.join(t(0));
    /// while c.poll_command().is_some() {}
    /// // Another request of the session, sent at 900 ms, answered at 950.
    /// c.session_answered(t(950), t(900));
    /// // The probe due at 1 s is not sent: contact is fresh until 1.9 s.
    /// c.handle_timeout(t(1_000));
    /// assert!(c.poll_command().is_none());
    /// assert_eq!(c.poll_timeout(), Some(t(1_900)));
    /// ```
    pub fn session_answered(&mut self, now: Timestamp, sent_at: Timestamp) {
        self.enter(now);
        if self.is_done()
            || !matches!(
                self.connection,
                Connection::Connected | Connection::Disconnected
            )
        {
            return;
        }
        let sent_at = sent_at.min(self.now);
        self.proof_of_contact();
        self.session.last_ack = Some(self.session.last_ack.map_or(sent_at, |t| t.max(sent_at)));
        self.check_link();
        self.advance();
    }

    /// Fires every timer due at `now`. Spurious calls are harmless.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        self.enter(now);
        // Every due timer is stopped before any is acted on. Backoff over
        // (`Retry`): `advance` below re-issues the step. `Lease`: `enter`
        // already re-checked the lease. Checked in place rather than through
        // `take_expired`, whose vector cost an allocation on every timeout.
        let now = self.now;
        let due = |timers: &TimerTable, timer| timers.get(timer).is_some_and(|at| at <= now);
        let probe_due = due(&self.timers, Timer::Probe);
        for timer in [Timer::Retry, Timer::Probe, Timer::Lease] {
            if due(&self.timers, timer) {
                self.timers.stop(timer);
            }
        }
        if probe_due {
            // Contact proven within the last third (an answer to any
            // request of the session: ours, or one fed by `session_answered`)
            // makes the probe needless until it goes stale.
            match self.session.last_ack {
                Some(ack) if ack.plus_fraction(self.timeout, 1, 3) > self.now => {
                    self.timers
                        .set(Timer::Probe, ack.plus_fraction(self.timeout, 1, 3));
                }
                _ => self.send_probe(),
            }
        }
        self.advance();
    }

    // ----- (D) outputs ------------------------------------------------------

    /// The next notice for the application, if any. Drain before commands.
    #[must_use]
    pub fn poll_notice(&mut self) -> Option<Notice> {
        self.outbox.poll_notice()
    }

    /// The next command for the driver to perform, if any.
    #[must_use]
    pub fn poll_command(&mut self) -> Option<Command> {
        self.outbox.poll_command()
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next, if ever.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.timers.next()
    }

    // ----- plumbing ----------------------------------------------------------

    /// Every entry point starts here: time only moves forward, and the lease is
    /// checked against the clock before any input is acted on (a process that
    /// froze must learn it lost contact before it trusts a queued event).
    fn enter(&mut self, now: Timestamp) {
        self.now = self.now.max(now);
        self.check_link();
    }

    fn is_done(&self) -> bool {
        matches!(self.step, Step::Done(_))
    }

    /// How many may hold at once, counting blocking nodes (k, or 1).
    fn limit(&self) -> usize {
        self.config.rule().limit()
    }

    /// Whether a holder marker on the watched node `pred` would bound the
    /// nodes blocking ours (see [`Rule`]'s `learns_from_holder`).
    fn learns_from_marker_on(&self, pred: &str) -> bool {
        let rule = self.config.rule();
        name::access_of(
            pred,
            self.config.prefix(),
            self.config.interop(),
            rule.recipe(),
        )
        .is_some_and(|access| rule.learns_from_holder(access))
    }

    fn own_path(&self) -> Option<String> {
        self.session.own.as_ref().map(|o| self.child_path(&o.name))
    }

    /// `PATH/name`, built without the formatting machinery (a path is built
    /// for nearly every request).
    fn child_path(&self, name: &str) -> String {
        let parent = self.config.path();
        let mut path = String::with_capacity(parent.len() + 1 + name.len());
        path.push_str(parent);
        path.push('/');
        path.push_str(name);
        path
    }

    /// Whether `path` is `PATH/name`, compared in place.
    fn is_child_path(&self, path: &str, name: &str) -> bool {
        path.strip_prefix(self.config.path())
            .and_then(|rest| rest.strip_prefix('/'))
            == Some(name)
    }

    /// The nonce of the last create sent in this session.
    fn last_nonce(&self) -> Option<String> {
        let last = self.session.creates.checked_sub(1)?;
        self.config
            .protected_create()
            .then(|| name::nonce(self.config.nonce_seed(), self.session.epoch, last))
    }

    /// A fresh nonce for a create about to be sent: one per create, so no two
    /// nodes ever bear the same name (see [`name::nonce`]).
    fn next_nonce(&mut self) -> Option<String> {
        self.session.creates += 1;
        self.last_nonce()
    }

    fn emit(&mut self, purpose: Purpose, request: Request) -> OpId {
        let op = OpId(self.next_op);
        self.next_op += 1;
        self.stats.commands += 1;
        if matches!(purpose, Purpose::List { .. } | Purpose::Recover) {
            self.stats.listings += 1;
        }
        self.session.ops.insert(
            op,
            InFlight {
                purpose,
                sent_at: self.now,
            },
        );
        self.outbox.command(Command { op, request });
        op
    }

    /// The request in flight for a purpose, if any (at most one each, but
    /// for `DeleteExtra`).
    fn in_flight_for(&self, which: impl Fn(&Purpose) -> bool) -> Option<OpId> {
        self.session
            .ops
            .iter()
            .find(|(_, f)| which(&f.purpose))
            .map(|(op, _)| op)
    }

    fn main_in_flight(&self) -> bool {
        self.in_flight_for(Purpose::is_main).is_some()
    }

    /// The lanes' invariants: at most one request in flight per lane, and an
    /// own-node watch that is armed or waiting for proof has none in flight
    /// and a node to be about.
    fn lanes_hold(&self) -> bool {
        let count = |which: fn(&Purpose) -> bool| {
            self.session
                .ops
                .values()
                .filter(|f| which(&f.purpose))
                .count()
        };
        count(Purpose::is_main) <= 1
            && count(|p| matches!(p, Purpose::WatchOwn { .. })) <= 1
            && count(|p| matches!(p, Purpose::Mark(_))) <= 1
            && count(|p| matches!(p, Purpose::Probe { .. })) <= 1
            && (self.session.own_watch == OwnWatch::Unarmed
                || (self.own_watch_in_flight().is_none() && self.session.own.is_some()))
    }

    /// Forgets the main lane's request (its reply will be stale), unless it is a
    /// create, which must be waited for: it may still be applied.
    fn supersede_main(&mut self) {
        if let Some(op) = self.in_flight_for(Purpose::is_main) {
            if !matches!(
                self.session.ops.get(op).map(|f| &f.purpose),
                Some(Purpose::Create)
            ) {
                self.session.ops.remove(op);
            }
        }
    }

    fn create_in_flight(&self) -> bool {
        self.in_flight_for(|p| matches!(p, Purpose::Create))
            .is_some()
    }

    fn own_watch_in_flight(&self) -> Option<OpId> {
        self.in_flight_for(|p| matches!(p, Purpose::WatchOwn { .. }))
    }

    /// The own-node watch fired, or may have: set it again (unless waiting for
    /// proof of contact).
    fn own_watch_spent(&mut self) {
        if self.session.own_watch == OwnWatch::Armed {
            self.session.own_watch = OwnWatch::Unarmed;
        }
    }

    /// Forgets the own-node watch request in flight, if any: its reply will be stale.
    fn drop_own_watch(&mut self) {
        self.session.own_watch = OwnWatch::Unarmed;
        if let Some(op) = self.own_watch_in_flight() {
            self.session.ops.remove(op);
        }
    }

    /// Whether the main lane is on `Step::Watch { pred }` (compared without
    /// building that step).
    fn is_watching(&self, pred: &str) -> bool {
        matches!(&self.step, Step::Watch { pred: p } if **p == *pred)
    }

    fn set_step(&mut self, step: Step) {
        self.supersede_main();
        if !matches!(step, Step::Watch { .. } | Step::Wait) {
            self.forget_watched();
        }
        self.step = step;
    }

    fn forget_watched(&mut self) {
        self.session.standing.forget_watched();
    }

    fn forget_lower(&mut self) {
        self.session.standing.forget_lower();
    }

    /// Issues whatever the current state calls for and re-arms the timers.
    fn advance(&mut self) {
        debug_assert!(
            self.step != Step::Lead || self.leadership != Leadership::None,
            "in the leading step without leadership"
        );
        debug_assert!(
            self.lanes_hold(),
            "a lane's state contradicts the in-flight map"
        );
        if self.connection == Connection::Connected && !self.is_done() {
            if !self.main_in_flight() && !self.timers.is_set(Timer::Retry) {
                self.issue_step();
            }
            self.arm_own_watch();
            self.send_marker();
            if self.config.probe()
                && !self.timers.is_set(Timer::Probe)
                && self.intent != Intent::Out
                && !(self.timeout / 3).is_zero()
            {
                self.timers
                    .set(Timer::Probe, self.now.plus_fraction(self.timeout, 1, 3));
            }
        }
        if self.connection != Connection::Connected || self.intent == Intent::Out || self.is_done()
        {
            self.timers.stop(Timer::Probe);
        }
        self.arm_lease_timer();
    }

    fn issue_step(&mut self) {
        // Most calls find nothing to send: return before cloning anything.
        if matches!(
            self.step,
            Step::Idle | Step::Wait | Step::Lead | Step::Done(_)
        ) {
            return;
        }
        let (purpose, request) = match self.step.clone() {
            Step::Idle | Step::Wait | Step::Lead | Step::Done(_) => return,
            Step::Parents { index } => {
                let ancestors = ancestors(self.config.path());
                let Some(target) = ancestors.get(index) else {
                    self.step = Step::Create;
                    return self.issue_step();
                };
                let last = index + 1 == ancestors.len();
                let mode = if last && self.config.container_parent() {
                    CreateMode::Container
                } else {
                    CreateMode::Persistent
                };
                (
                    Purpose::Parent(index),
                    Request::Create {
                        path: target.clone(),
                        data: Vec::new(),
                        mode,
                        acl: self.config.acl(),
                    },
                )
            }
            Step::Create if self.session.create_uncertain => {
                self.step = Step::Recover;
                // The lost create may have committed on the leader and not
                // yet on the server that lists.
                self.session.reads = Reads::SyncFirst;
                return self.issue_step();
            }
            Step::Recover | Step::List if self.session.reads == Reads::SyncFirst => {
                let path = self.config.path().to_owned();
                (Purpose::Sync, Request::Sync { path })
            }
            Step::Create => {
                let nonce = self.next_nonce();
                let prefix = name::create_prefix(self.config.prefix(), nonce.as_deref());
                (
                    Purpose::Create,
                    Request::Create {
                        path: self.child_path(&prefix),
                        data: self.config.node_payload(),
                        mode: CreateMode::EphemeralSequential,
                        acl: self.config.acl(),
                    },
                )
            }
            Step::Recover => (
                Purpose::Recover,
                Request::GetChildren {
                    path: self.config.path().to_owned(),
                    watch: false,
                },
            ),
            Step::Adopt { name } => {
                let path = self.child_path(&name);
                (
                    Purpose::Adopt(name.into()),
                    Request::GetData { path, watch: true },
                )
            }
            Step::List => {
                let watch = self.config.strategy() == WatchStrategy::Parent;
                let path = self.config.path().to_owned();
                (
                    Purpose::List { again: false },
                    Request::GetChildren { path, watch },
                )
            }
            Step::Watch { pred } => {
                let path = self.child_path(&pred);
                // Under Parent the read only checks the node (the parent's
                // watch wakes us), so it sets no watch of its own.
                let watch = self.config.strategy() == WatchStrategy::Predecessor;
                (
                    Purpose::WatchPred(pred.into()),
                    Request::GetData { path, watch },
                )
            }
            Step::Delete => match &self.session.own {
                Some(own) => (
                    Purpose::Delete(own.name.to_string()),
                    Request::Delete {
                        path: self.child_path(&own.name),
                        version: None,
                    },
                ),
                None => return,
            },
        };
        self.emit(purpose, request);
    }

    fn arm_own_watch(&mut self) {
        // The scan of the requests in flight last: it is the dearest test.
        if self.session.own_watch != OwnWatch::Unarmed
            || self.session.own.is_none()
            || self.step == Step::Delete
            || self.own_watch_in_flight().is_some()
        {
            return;
        }
        let Some(own) = &self.session.own else { return };
        let name = own.name.to_string();
        let path = self.child_path(&name);
        let request = if self.own_watch_by_children() {
            Request::GetChildren { path, watch: true }
        } else {
            Request::GetData { path, watch: true }
        };
        self.emit(Purpose::WatchOwn { name, spent: false }, request);
    }

    /// Whether the own-node watch is a child watch. A child watch on our node
    /// fires when the node is deleted, as a data watch does, but not when its
    /// data changes: the leader's own marker then leaves it set, which saves
    /// setting it again (a request, and an event) on every election. It reads
    /// no stat, so it is used only where the stat's checks are moot: with
    /// protected names (which the marker requires) the node bearing our name
    /// is the one we created, and with session ids reported on connecting a
    /// move to another session is caught there.
    fn own_watch_by_children(&self) -> bool {
        self.config.leader_marker() && self.ids_reported
    }

    /// A leader marks its node once (see the theory of operation): the same
    /// bytes, so the application's data in the node (and what Curator or
    /// `zkelect status` read as the id) is untouched, and expecting version 0,
    /// so a node someone else already wrote is left alone, unmarked.
    fn send_marker(&mut self) {
        if !self.config.leader_marker()
            || self.step != Step::Lead
            || !matches!(self.leadership, Leadership::Active(_))
            || self
                .in_flight_for(|p| matches!(p, Purpose::Mark(_)))
                .is_some()
        {
            return;
        }
        let Some(own) = self
            .session
            .own
            .as_ref()
            .filter(|o| o.mark == Mark::Unwritten)
        else {
            return;
        };
        let name = own.name.to_string();
        let path = self.child_path(&name);
        let data = self.config.node_payload();
        self.emit(
            Purpose::Mark(name),
            Request::SetData {
                path,
                data,
                version: Some(0),
            },
        );
    }

    fn send_probe(&mut self) {
        if self.connection != Connection::Connected || self.is_done() {
            return;
        }
        let in_flight = self
            .session
            .ops
            .values_mut()
            .find(|f| matches!(f.purpose, Purpose::Probe { .. }));
        if let Some(InFlight {
            purpose: Purpose::Probe { again },
            ..
        }) = in_flight
        {
            *again = true;
        } else {
            let path = self.config.path().to_owned();
            self.emit(
                Purpose::Probe { again: false },
                Request::Exists { path, watch: false },
            );
        }
        if !(self.timeout / 3).is_zero() {
            self.timers
                .set(Timer::Probe, self.now.plus_fraction(self.timeout, 1, 3));
        }
    }

    /// Called from the main lane's reply handlers: its request is answered.
    fn retry_later(&mut self) {
        if self.connection == Connection::Connected {
            let delay = self
                .backoff
                .next_delay(self.config.backoff_min(), self.config.backoff_max());
            self.timers.set(Timer::Retry, self.now + delay);
        }
    }

    // ----- the lease ----------------------------------------------------------

    /// Contact with the server, for the clock to judge (see [`crate::lease`]).
    fn contact(&self) -> Contact {
        Contact {
            connection: self.connection,
            last_ack: self.session.last_ack,
            timeout: self.timeout,
            probe: self.config.probe(),
        }
    }

    fn link_ok(&self) -> bool {
        self.contact().link_ok(self.now)
    }

    /// Applies what the clock says about contact with the server.
    fn check_link(&mut self) {
        let ok = self.link_ok();
        let was_up = std::mem::replace(&mut self.link_up, ok);
        if self.is_done() || self.intent == Intent::Out {
            return;
        }
        if was_up && !ok && self.suspension == Suspension::Clear {
            self.suspension = Suspension::Suspended;
            self.outbox.notice(Notice::Suspended);
        } else if !was_up && ok && self.suspension != Suspension::Clear {
            match self.leadership {
                // Resumed is said once a fresh listing confirms leadership.
                Leadership::Suspended(_) => {
                    self.suspension = Suspension::Resuming;
                    if !matches!(
                        self.step,
                        Step::List | Step::Create | Step::Recover | Step::Adopt { .. }
                    ) {
                        self.set_step(Step::List);
                    }
                }
                _ => {
                    // The silence may have held watch events back, sent long
                    // before the reply that ends it and queued behind it: the
                    // deletion of a node below, with our own node's deletion
                    // right behind, would elect us on a node an operator
                    // deleted seconds ago (lag seed 38944). A listing sent now
                    // is newer than any of them; until it is answered no
                    // watched node is left for a held event to match.
                    if matches!(self.step, Step::Watch { .. } | Step::Wait) {
                        self.set_step(Step::List);
                    }
                    self.say_resumed();
                }
            }
        }
        if self.leadership == Leadership::None {
            // Nothing for the clock to take away (`Leadership::checked` keeps
            // `None` as it is): most machines, most of the time, follow.
            return;
        }
        let may_live = self.contact().session_may_live(self.now);
        let lost;
        (self.leadership, lost) = self.leadership.checked(self.config.policy(), ok, may_live);
        if lost {
            self.demote(DemotionReason::Lost);
            // The node may well still be ours: look again once the server answers
            // (found by the simulator: a demoted leader that stayed in `Lead` never
            // re-listed and never led again).
            if self.step == Step::Lead {
                self.set_step(Step::List);
            }
        }
    }

    fn say_resumed(&mut self) {
        if self.suspension != Suspension::Clear {
            self.suspension = Suspension::Clear;
            self.outbox.notice(Notice::Resumed);
        }
    }

    fn arm_lease_timer(&mut self) {
        let next = if self.intent != Intent::Out && !self.is_done() {
            let leading = self.leadership != Leadership::None;
            self.contact().deadline(self.now, self.link_up, leading)
        } else {
            None
        };
        match next {
            Some(at) => self.timers.set(Timer::Lease, at),
            None => self.timers.stop(Timer::Lease),
        }
    }

    // ----- leadership ----------------------------------------------------------

    fn become_leader(&mut self, zero_rtt: bool) {
        let Some(token) = self.token() else { return };
        if !self.link_ok() {
            // Proof of contact first: a fresh listing will decide.
            self.set_step(Step::List);
            return;
        }
        self.set_step(Step::Lead);
        self.forget_lower();
        match self.leadership {
            Leadership::Active(_) => {}
            Leadership::Suspended(_) => {
                self.leadership = Leadership::Active(token);
            }
            Leadership::None => {
                self.leadership = Leadership::Active(token);
                self.stats.elections += 1;
                if zero_rtt {
                    self.stats.zero_rtt_takeovers += 1;
                }
                self.outbox.notice(Notice::Elected { token });
            }
        }
        if self.suspension == Suspension::Resuming {
            self.say_resumed();
        }
        if self.config.rule().holds_alone() {
            let me = self.session.own.as_ref().map(|o| o.name.to_string());
            self.leader_seen(me);
        }
    }

    fn demote(&mut self, reason: DemotionReason) {
        if self.leadership != Leadership::None {
            self.leadership = Leadership::None;
            self.outbox.notice(Notice::Demoted { reason });
        }
        if self.suspension == Suspension::Resuming && self.link_up {
            self.say_resumed();
        }
    }

    fn leader_seen(&mut self, leader: Option<String>) {
        let same = match (&self.last_leader, &leader) {
            (Some(kept), Some(leader)) => kept.is(leader),
            (kept, leader) => kept.is_none() && leader.is_none(),
        };
        if !same {
            self.last_leader = leader.as_deref().map(KeptName::new);
            self.outbox.notice(Notice::LeaderChanged { leader });
        }
    }

    fn fail(&mut self, error: CandidateError) {
        self.demote(DemotionReason::Failed);
        self.outbox.notice(Notice::Error(error));
        self.stop(End::Failed);
    }

    /// Stops for good. A closed candidate has nothing left on the server (its
    /// node is deleted, or the client closed its session) and awaits no reply;
    /// a failed one leaves its node and its requests in flight as they were,
    /// for the application to see: the node lives until the session ends.
    fn stop(&mut self, end: End) {
        self.step = Step::Done(end);
        self.forget_watched();
        self.timers = TimerTable::default();
        if end == End::Closed {
            self.session.own = None;
            self.session.own_watch = OwnWatch::Unarmed;
            self.session.ops.clear();
        }
    }

    fn refused(&mut self, request_verb: &str, path: String, code: ZkCode) {
        self.fail(CandidateError::Refused {
            verb: request_verb.to_owned(),
            path,
            code,
        });
    }

    // ----- leaving ---------------------------------------------------------------

    fn start_leaving(&mut self) {
        self.forget_watched();
        self.forget_lower();
        if self.create_in_flight() {
            // The create's reply decides: the node will be deleted when it is known.
            self.step = Step::Create;
        } else if self.session.create_uncertain {
            self.set_step(Step::Recover);
        } else if self.session.own.is_some() {
            self.set_step(Step::Delete);
        } else {
            self.set_step(Step::Idle);
            self.finish_leaving();
        }
    }

    fn leaving(&self) -> bool {
        matches!(self.intent, Intent::Leave { .. } | Intent::Close)
    }

    /// The node is gone (or never was): complete the resign or close.
    fn finish_leaving(&mut self) {
        self.session.own = None;
        self.drop_own_watch();
        match self.intent {
            Intent::Leave { rejoin: true } => {
                self.intent = Intent::In;
                self.set_step(Step::Create);
            }
            Intent::Leave { rejoin: false } => {
                self.intent = Intent::Out;
                self.set_step(Step::Idle);
            }
            Intent::Close => self.stop(End::Closed),
            Intent::In | Intent::Out => {}
        }
    }

    /// Our node vanished without our asking (revoked, or its session is gone).
    fn own_gone(&mut self, reason: DemotionReason) {
        self.demote(reason);
        self.session.own = None;
        self.drop_own_watch();
        self.forget_lower();
        if self.leaving() {
            return self.finish_leaving();
        }
        if reason == DemotionReason::Revoked && !self.config.rejoin_on_revoke() {
            self.intent = Intent::Out;
            self.set_step(Step::Idle);
        } else {
            self.set_step(Step::Create);
        }
    }

    // ----- replies -----------------------------------------------------------------

    fn on_reply(&mut self, op: OpId, result: Result<Reply, ZkCode>) {
        let Some(flight) = self.session.ops.remove(op) else {
            self.stats.stale_replies += 1;
            return;
        };
        let answered = !matches!(
            result,
            Err(ZkCode::ConnectionLoss | ZkCode::OperationTimeout | ZkCode::SessionExpired)
        );
        if answered {
            self.proof_of_contact();
        }
        if answered
            && matches!(
                self.connection,
                Connection::Connected | Connection::Disconnected
            )
        {
            self.session.last_ack = Some(
                self.session
                    .last_ack
                    .map_or(flight.sent_at, |t| t.max(flight.sent_at)),
            );
            self.check_link();
        }
        if matches!(flight.purpose, Purpose::Probe { again: true }) {
            self.send_probe();
        }
        if result == Err(ZkCode::SessionExpired) {
            return self.on_expired();
        }
        if result.is_ok() {
            self.backoff.reset();
        }
        match flight.purpose {
            Purpose::Parent(index) => self.on_parent(index, result),
            Purpose::Create => self.on_create(result),
            Purpose::Recover => self.on_recover(result),
            Purpose::Sync => self.on_sync(result),
            Purpose::Adopt(name) => self.on_adopt(name, result),
            Purpose::List { again } => self.on_list(result, again),
            Purpose::WatchPred(pred) => self.on_watch_pred(pred, result),
            Purpose::WatchOwn { name, spent } => self.on_watch_own(name, spent, result),
            Purpose::Mark(name) => self.on_mark(&name, result),
            Purpose::Delete(_) => self.on_delete(result),
            // Only the contact they prove matters (counted above).
            Purpose::DeleteExtra | Purpose::Probe { .. } => {}
        }
    }

    /// The server answered, or a new connection is up: side lanes that failed
    /// on the connection may try again.
    fn proof_of_contact(&mut self) {
        if self.session.own_watch == OwnWatch::AwaitProof {
            self.session.own_watch = OwnWatch::Unarmed;
        }
        if let Some(own) = self
            .session
            .own
            .as_mut()
            .filter(|o| o.mark == Mark::AwaitProof)
        {
            own.mark = Mark::Unwritten;
        }
    }

    /// Common handling of an error on the main lane.
    fn main_error(&mut self, verb: &str, path: String, code: ZkCode) {
        if code.is_fatal() {
            self.refused(verb, path, code);
        } else {
            self.retry_later();
        }
    }

    fn on_parent(&mut self, index: usize, result: Result<Reply, ZkCode>) {
        if self.step != (Step::Parents { index }) {
            return;
        }
        let ancestors = ancestors(self.config.path());
        match result {
            Ok(_) | Err(ZkCode::NodeExists) => {
                self.step = if index + 1 >= ancestors.len() {
                    Step::Create
                } else {
                    Step::Parents { index: index + 1 }
                };
            }
            // The election path's own parent is missing too (or an ancestor
            // vanished under us): every level from the top.
            Err(ZkCode::NoNode) => self.step = Step::Parents { index: 0 },
            Err(code) => {
                let path = ancestors.get(index).cloned().unwrap_or_default();
                self.main_error("create", path, code);
            }
        }
    }

    fn on_create(&mut self, result: Result<Reply, ZkCode>) {
        match result {
            Ok(Reply::Created { path, stat }) => {
                let name = path.rsplit('/').next().unwrap_or_default().to_owned();
                self.session.create_uncertain = false;
                self.learn_session(stat);
                self.session.own = Some(Own {
                    name: name.as_str().into(),
                    token: FencingToken(stat.czxid),
                    mark: Mark::Unwritten,
                });
                self.session.own_watch = OwnWatch::Unarmed;
                if self.leaving() {
                    self.set_step(Step::Delete);
                    return;
                }
                self.outbox.notice(Notice::Joined { node: name });
                self.set_step(Step::List);
            }
            Ok(_) => self.retry_later(),
            Err(ZkCode::NoNode) if self.config.create_parents() => {
                let deepest = ancestors(self.config.path()).len().saturating_sub(1);
                self.set_step(Step::Parents { index: deepest });
            }
            Err(ZkCode::NoNode) => {
                let path = self.config.path().to_owned();
                self.refused(
                    "create (election path missing, create_parents off)",
                    path,
                    ZkCode::NoNode,
                );
            }
            Err(code) if code.is_connection_fault() => {
                self.session.create_uncertain = self.config.protected_create();
                self.retry_later();
                if self.leaving() && !self.session.create_uncertain {
                    // Unprotected: nothing to find; the node (if any) dies with the session.
                    self.finish_leaving();
                }
            }
            Err(code) => {
                let path = self.config.path().to_owned();
                self.main_error("create", path, code);
            }
        }
    }

    fn on_recover(&mut self, result: Result<Reply, ZkCode>) {
        if self.step != Step::Recover {
            return;
        }
        let children = match result {
            Ok(Reply::Children(children)) => children,
            Ok(_) => return self.retry_later(),
            // No election path, so the lost create cannot have been applied
            // (found by the simulator: listing it again forever).
            Err(ZkCode::NoNode) => Vec::new(),
            Err(code) => {
                let path = self.config.path().to_owned();
                return self.main_error("list", path, code);
            }
        };
        self.clear_old_nodes(&children);
        let nonce = self.last_nonce();
        let mut mine: Vec<NodeName> = children
            .iter()
            .filter_map(|c| {
                let recipe = self.config.rule().recipe();
                name::parse(c, self.config.prefix(), self.config.interop(), recipe)
            })
            .filter(|n| matches!(&n.origin, Origin::Ours { nonce: found } if found.is_some() && *found == nonce))
            .collect();
        name::order(&mut mine);
        let mut mine = mine.into_iter();
        match mine.next() {
            None => {
                self.session.create_uncertain = false;
                if self.leaving() {
                    self.finish_leaving();
                } else {
                    self.set_step(Step::Create);
                }
            }
            Some(found) => {
                // A second node with this session's nonce can only come from a create
                // retried while the first was still pending; it would block the queue.
                for extra in mine {
                    let path = self.child_path(&extra.name);
                    self.emit(
                        Purpose::DeleteExtra,
                        Request::Delete {
                            path,
                            version: None,
                        },
                    );
                }
                self.set_step(Step::Adopt {
                    name: found.name.into(),
                });
            }
        }
    }

    /// A `sync` before a listing: its reply is on this connection (a new
    /// connection supersedes it), so the server has caught up.
    fn on_sync(&mut self, result: Result<Reply, ZkCode>) {
        match result {
            Ok(Reply::Synced) => self.session.reads = Reads::Current,
            Ok(_) => self.retry_later(),
            Err(code) => {
                let path = self.config.path().to_owned();
                self.main_error("sync", path, code);
            }
        }
    }

    fn on_adopt(&mut self, name: String, result: Result<Reply, ZkCode>) {
        if !matches!(&self.step, Step::Adopt { name: n } if **n == *name) {
            return;
        }
        match result {
            Ok(Reply::Data { stat, .. }) if self.owned_by_this_session(stat) => {
                self.learn_session(stat);
                self.session.create_uncertain = false;
                self.stats.recovered_creates += 1;
                self.session.own = Some(Own {
                    name: name.as_str().into(),
                    token: FencingToken(stat.czxid),
                    mark: Mark::Unwritten,
                });
                // The adopting getData left a data watch on the node.
                self.session.own_watch = OwnWatch::Armed;
                if self.leaving() {
                    self.set_step(Step::Delete);
                } else {
                    self.outbox.notice(Notice::Joined { node: name });
                    self.set_step(Step::List);
                }
            }
            // Not ours (a dying session's node) or already gone: the create did not
            // take in this session.
            Ok(_) | Err(ZkCode::NoNode) => {
                self.session.create_uncertain = false;
                if self.leaving() {
                    self.finish_leaving();
                } else {
                    self.set_step(Step::Create);
                }
            }
            Err(code) => {
                let path = self.child_path(&name);
                self.main_error("read", path, code);
            }
        }
    }

    /// Deletes children bearing one of our earlier sessions' nonces. Such a node
    /// can block the queue until its session ends, or forever if a client sent a
    /// queued create on the new session; either way it is ours and useless.
    fn clear_old_nodes(&mut self, children: &[String]) {
        let Some(past) = self.past.as_ref().filter(|p| !p.old_nonces.is_empty()) else {
            return;
        };
        let old: Vec<&String> = children
            .iter()
            .filter(|child| {
                child
                    .strip_prefix(name::PROTECTED_MARKER)
                    .and_then(|rest| rest.get(..name::NONCE_LEN))
                    .is_some_and(|nonce| past.old_nonces.iter().any(|old| old == nonce))
            })
            .collect();
        for child in old {
            let clearing = self.session.clearing.get_or_insert_with(Box::default);
            if !clearing.contains(child) {
                clearing.push(child.clone());
                let path = self.child_path(child);
                self.emit(
                    Purpose::DeleteExtra,
                    Request::Delete {
                        path,
                        version: None,
                    },
                );
            }
        }
    }

    fn past(&mut self) -> &mut Past {
        self.past.get_or_insert_with(Box::default)
    }

    fn owned_by_this_session(&self, stat: Stat) -> bool {
        stat.ephemeral_owner != 0
            && self
                .session
                .id
                .is_none_or(|sid| sid.0 == stat.ephemeral_owner)
    }

    fn learn_session(&mut self, stat: Stat) {
        if self.session.id.is_none() && stat.ephemeral_owner != 0 {
            self.session.id = Some(SessionId(stat.ephemeral_owner));
        }
    }

    fn on_list(&mut self, result: Result<Reply, ZkCode>, again: bool) {
        if self.step != Step::List {
            return;
        }
        let children = match result {
            Ok(Reply::Children(children)) => children,
            Ok(_) => return self.retry_later(),
            // The election path is gone, and our node with it.
            Err(ZkCode::NoNode) if self.session.own.is_some() => {
                return self.own_gone(DemotionReason::Revoked);
            }
            Err(code) => {
                let path = self.config.path().to_owned();
                return self.main_error("list", path, code);
            }
        };
        self.clear_old_nodes(&children);
        let k = self.limit();
        let own_name = self.session.own.as_ref().map_or("", |o| &*o.name);
        let standing = name::standing_under(
            &children,
            own_name,
            self.config.prefix(),
            self.config.interop(),
            self.config.rule(),
            KEPT_PER_WATCH * k,
            self.session.standing.persistent(),
        );
        self.stats.ignored_children += standing.ignored as u64;
        if let Some(node) = standing.negative {
            if self.config.interop() != Interop::None {
                return self.refuse_shared_queue(node);
            }
        }
        self.leader_seen(standing.oldest.clone());
        if self.session.own.is_none() {
            self.set_step(Step::Create);
            return;
        }
        if !standing.found {
            // The session answered, so it is alive: someone deleted our node.
            return self.own_gone(DemotionReason::Revoked);
        }
        if standing.rank < k {
            return self.become_leader(false);
        }
        if self.leadership != Leadership::None {
            self.demote(DemotionReason::Displaced);
        }
        self.session
            .standing
            .listed(standing.rank, standing.nearest_lower);
        match self.config.strategy() {
            WatchStrategy::Predecessor => self.watch_next_lower(),
            // A Parent follower reads its k nearest nodes below too (without a
            // watch), once each while they stay the nearest: a persistent
            // look-alike among them would otherwise hold it back forever
            // (found by the simulator's Parent draw, issue 17). The reads are
            // kept across listings (see `relist_keeping_reads`).
            WatchStrategy::Parent if again => self.relist_keeping_reads(),
            WatchStrategy::Parent => self.watch_next_lower(),
        }
    }

    /// Under the Parent strategy, the parent's children changed: list again,
    /// keeping what the reads of the nearest nodes below said (that each is a
    /// live ephemeral node older than ours). Those reads set no watch, so no
    /// watch is lost with them, and a name the listing still shows among the
    /// nearest is the node that was read: the server never gives a sequential
    /// name twice under one incarnation of the path, and a new incarnation
    /// takes our own node with it (the own-node watch or the listing reports
    /// that, and every other way into a listing forgets the reads). So only
    /// a name new among the nearest is read; without this, each of the
    /// herd's N listings per change cost a read as well.
    fn relist_keeping_reads(&mut self) {
        self.supersede_main();
        self.step = Step::List;
    }

    /// Watches the k nearest nodes below ours that the last listing still knows
    /// of, arming one at a time; leads at once if fewer than k remain below.
    fn watch_next_lower(&mut self) {
        match self.session.standing.next(self.limit()) {
            Next::Lead => self.become_leader(true),
            Next::List => self.set_step(Step::List),
            Next::Watch(pred) => {
                if !self.is_watching(&pred) {
                    self.set_step(Step::Watch { pred: pred.into() });
                }
            }
            Next::Wait => self.step = Step::Wait,
        }
    }

    fn on_watch_pred(&mut self, pred: String, result: Result<Reply, ZkCode>) {
        if !self.is_watching(&pred) {
            return;
        }
        match result {
            // Checked before the czxid: a look-alike an operator creates after
            // our node would otherwise read as a newer node under that name,
            // and every listing would show it again.
            Ok(Reply::Data { stat, .. }) if stat.ephemeral_owner == 0 => {
                self.skip_persistent(pred);
            }
            Ok(Reply::Data { data, stat }) => {
                let own_czxid = self.session.own.as_ref().map_or(i64::MAX, |o| o.token.0);
                let k = self.limit();
                let proves = self.learns_from_marker_on(&pred);
                let Some(tightened) = self
                    .session
                    .standing
                    .learn(&pred, data, stat, own_czxid, k, proves)
                else {
                    // Another node bears the name now, created after ours: the
                    // path was deleted and recreated, and our node with it, or
                    // ours is not what we think. Look again, and check ours.
                    self.own_watch_spent();
                    return self.set_step(Step::List);
                };
                if tightened {
                    self.stats.marks_seen += 1;
                }
                self.session.standing.armed(&pred);
                self.watch_next_lower();
            }
            Ok(_) => {
                self.session.standing.armed(&pred);
                self.watch_next_lower();
            }
            Err(ZkCode::NoNode) => self.pred_gone(&pred, false),
            Err(code) => {
                let path = self.child_path(&pred);
                self.main_error("watch", path, code);
            }
        }
    }

    /// A watched node is persistent: no process holds it, and it goes only when
    /// someone deletes it. Leave it out from now on, as if it were gone, and
    /// watch the next one below (the listing's other nodes are as good as they
    /// were; a fresh listing is not needed).
    fn skip_persistent(&mut self, pred: String) {
        if self.past().persistent_reported.insert(pred.clone()) {
            self.stats.persistent_skipped += 1;
            self.outbox
                .notice(Notice::PersistentSkipped { node: pred.clone() });
        }
        self.session.standing.skip_persistent(pred.clone());
        self.session.standing.remove(&pred);
        self.watch_next_lower();
    }

    /// A queue shared with another library has a negative sequence, where that
    /// library's text order and ours disagree: stop taking part.
    fn refuse_shared_queue(&mut self, node: String) {
        self.demote(DemotionReason::Failed);
        self.outbox
            .notice(Notice::Error(CandidateError::SequenceWrapped { node }));
        self.intent = Intent::Close;
        self.start_leaving();
    }

    /// A watched node is gone: drop it from the last listing; with fewer than k
    /// nodes left below, this candidate leads now (they can only have shrunk).
    /// `zero_rtt`: learned from the notification itself, not from a read.
    fn pred_gone(&mut self, pred: &str, zero_rtt: bool) {
        self.session.standing.remove(pred);
        if self.session.standing.below(self.limit()) < self.limit() {
            return self.become_leader(zero_rtt);
        }
        // Nodes below may have gone unseen since the listing (only the watched
        // ones report): list again, one round trip however stale the listing is,
        // instead of probing remembered names one by one (found by the benchmark:
        // at N = 50 a follower walked through up to 8 dead names).
        self.set_step(Step::List);
    }

    /// A watched node's watch fired with an event that proves nothing by
    /// itself: read the node again, which re-arms the watch; the reply decides.
    fn reread_watched(&mut self, pred: &str) {
        self.session.standing.disarm(pred);
        if self.is_watching(pred) {
            // The read in flight may be the one whose watch just fired: its
            // reply would arm nothing. Send another.
            self.supersede_main();
        }
        self.watch_next_lower();
    }

    /// The answer to the leader marker. Anything but a connection fault ends
    /// the attempt: the marker only saves a successor a round trip, and a node
    /// someone else wrote (BadVersion) or that is gone (the own-node watch will
    /// tell) is not worth another.
    fn on_mark(&mut self, name: &str, result: Result<Reply, ZkCode>) {
        let Some(own) = self.session.own.as_mut().filter(|o| *o.name == *name) else {
            return;
        };
        match result {
            Err(code) if code.is_connection_fault() => own.mark = Mark::AwaitProof,
            Ok(_) => {
                own.mark = Mark::Done;
                self.stats.marks_written += 1;
            }
            Err(_) => own.mark = Mark::Done,
        }
    }

    fn on_watch_own(&mut self, name: String, spent: bool, result: Result<Reply, ZkCode>) {
        if self.session.own.as_ref().map(|o| &*o.name) != Some(name.as_str()) {
            return;
        }
        match result {
            Ok(Reply::Data { stat, .. }) => {
                if !self.owned_by_this_session(stat) {
                    // Our node belongs to another session: ours ended without a word.
                    return self.own_gone(DemotionReason::Expired);
                }
                if self
                    .session
                    .own
                    .as_ref()
                    .is_some_and(|o| o.token.0 != stat.czxid)
                {
                    // Another node of ours bears the name (only possible without
                    // protected names): the one we created is gone.
                    return self.own_gone(DemotionReason::Revoked);
                }
                self.learn_session(stat);
                // An event that overtook this reply already spent the watch.
                if !spent {
                    self.session.own_watch = OwnWatch::Armed;
                }
            }
            // A child watch on our node (see `own_watch_by_children`).
            Ok(Reply::Children(_)) if !spent => self.session.own_watch = OwnWatch::Armed,
            Ok(_) => {}
            Err(ZkCode::NoNode) if self.step != Step::Delete => {
                self.own_gone(DemotionReason::Revoked)
            }
            Err(ZkCode::NoNode) => {}
            Err(code) if code.is_fatal() => {
                let path = self.child_path(&name);
                self.refused("watch", path, code);
            }
            Err(_) => self.session.own_watch = OwnWatch::AwaitProof,
        }
    }

    fn on_delete(&mut self, result: Result<Reply, ZkCode>) {
        if self.step != Step::Delete {
            return;
        }
        match result {
            Ok(_) | Err(ZkCode::NoNode) => self.finish_leaving(),
            Err(code) => {
                let path = self.own_path().unwrap_or_default();
                self.main_error("delete", path, code);
            }
        }
    }

    // ----- watch events ---------------------------------------------------------------

    fn on_watch(&mut self, event: WatchEvent) {
        let own = self.session.own.as_ref().map(|o| &*o.name);
        if own.is_some_and(|own| self.is_child_path(&event.path, own)) {
            self.own_watch_spent();
            for flight in self.session.ops.values_mut() {
                if let Purpose::WatchOwn { spent, .. } = &mut flight.purpose {
                    *spent = true;
                }
            }
            if event.kind == WatchKind::NodeDeleted && self.step != Step::Delete {
                // Stop acting at once, then look before rejoining: after the
                // election path was deleted and recreated, a late event for an
                // old node can name our new one (found by the simulator). A
                // listing that still shows our name (which carries this
                // session's nonce) proves the event stale; one without it
                // confirms the revocation.
                self.demote(DemotionReason::Revoked);
                self.set_step(Step::List);
            }
            return;
        }
        let name = event.path.rsplit('/').next().unwrap_or_default();
        let is_child = self.is_child_path(&event.path, name);
        if is_child && self.session.standing.unskip(name) {
            // Whatever happened to it, the next read decides what it is.
            return;
        }
        if is_child && self.session.standing.is_watched(name) {
            let name = name.to_owned();
            if event.kind == WatchKind::NodeDeleted && name::never_reused(&name) {
                // Only one node ever bore this name: the event is about it,
                // however late it comes.
                self.pred_gone(&name, true);
            } else {
                // The watch is spent (a data change: the leader marker, or an
                // operator), or the deletion may be of an older node of the same
                // name (the path deleted and recreated, the event late): read
                // the node again rather than wait forever or trust the event.
                self.reread_watched(&name);
            }
            return;
        }
        let listens_to_children = self.config.strategy() == WatchStrategy::Parent;
        if event.path == self.config.path()
            && event.kind == WatchKind::NodeChildrenChanged
            && listens_to_children
        {
            match self.step {
                Step::Wait | Step::Watch { .. } => self.relist_keeping_reads(),
                // The event may have overtaken the reply of the listing that set
                // it (found by the benchmark at N = 50: the stale reply consumed
                // the watch and every follower waited forever).
                Step::List => {
                    for flight in self.session.ops.values_mut() {
                        if let Purpose::List { again } = &mut flight.purpose {
                            *again = true;
                        }
                    }
                }
                _ => {}
            }
            return;
        }
        self.stats.stale_events += 1;
    }

    // ----- session events ---------------------------------------------------------------

    fn on_session(&mut self, event: SessionEvent) {
        match event {
            SessionEvent::Connected {
                session_id,
                timeout,
            } => self.on_connected(session_id, timeout),
            SessionEvent::Disconnected => {
                if self.connection == Connection::Connected {
                    self.connection = Connection::Disconnected;
                }
                self.timers.stop(Timer::Retry);
            }
            SessionEvent::Expired => self.on_expired(),
            SessionEvent::AuthFailed => self.fail(CandidateError::AuthFailed),
            SessionEvent::Closed => {
                self.demote(DemotionReason::Closed);
                self.stop(End::Closed);
            }
        }
    }

    fn on_connected(&mut self, session_id: Option<SessionId>, timeout: Duration) {
        if let (Some(new), Some(old)) = (session_id, self.session.id) {
            if new != old && self.connection != Connection::Expired {
                self.on_expired();
            }
        }
        let new_session = matches!(self.connection, Connection::Pending | Connection::Expired);
        self.connection = Connection::Connected;
        self.timeout = timeout;
        self.ids_reported = session_id.is_some();
        if session_id.is_some() {
            self.session.id = session_id;
        }
        self.timers.stop(Timer::Retry);
        self.backoff.reset();
        self.proof_of_contact();
        if self.config.probe() && !timeout.is_zero() && self.intent != Intent::Out {
            // Contact must be proven on this connection before leading again.
            self.send_probe();
        }
        if new_session || self.intent == Intent::Out {
            return;
        }
        // Same session after a disconnect: the client may have lost every watch
        // (zookeeper-async does), so look again and re-arm them. A persistent
        // child's watch is gone too, so it is read again before it is skipped.
        // The reads that told live nodes from persistent look-alikes are
        // repeated as well: cheap (once per reconnect), and what the own-node
        // watch would report of a recreated path while it was down need not be
        // waited for.
        self.session.standing.forget_persistent();
        self.forget_watched();
        self.drop_own_watch();
        // The session may have moved to a server behind the leader.
        self.session.reads = Reads::SyncFirst;
        match self.step {
            Step::Wait | Step::Lead | Step::Watch { .. } => self.set_step(Step::List),
            _ => self.supersede_main(),
        }
    }

    fn on_expired(&mut self) {
        if self.connection == Connection::Expired {
            return;
        }
        self.demote(DemotionReason::Expired);
        self.connection = Connection::Expired;
        // The nodes this session may have left: ours, and the last create's
        // (in flight, or lost with its reply).
        let own_nonce = self
            .session
            .own
            .as_ref()
            .and_then(|o| name::nonce_of(&o.name))
            .map(str::to_owned);
        for nonce in [own_nonce, self.last_nonce()].into_iter().flatten() {
            let old_nonces = &mut self.past().old_nonces;
            if !old_nonces.contains(&nonce) {
                old_nonces.push_back(nonce);
            }
            if old_nonces.len() > OLD_NONCES_KEPT {
                old_nonces.pop_front();
            }
        }
        self.session = SessionState::new(self.session.epoch + 1);
        self.timers.stop(Timer::Retry);
        if self.leaving() {
            return self.finish_leaving();
        }
        if self.intent == Intent::In {
            self.step = Step::Create;
        }
    }
}

/// `/a/b/c` → `["/a", "/a/b", "/a/b/c"]`.
/// Takes the front of an output queue, and gives the queue's buffer back once
/// it is drained: outputs come in bursts, and an idle machine (of thousands on
/// one session) should not keep the buffer of its last burst.
fn ancestors(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, ch) in path.char_indices().skip(1) {
        if ch == '/' {
            out.push(path[..i].to_owned());
        }
    }
    out.push(path.to_owned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_saturate_and_widen_to_the_stats_they_stand_for() {
        let mut c = Count(u32::MAX - 1);
        c += 1;
        assert_eq!(c, Count(u32::MAX));
        c += 1;
        assert_eq!(c, Count(u32::MAX), "saturates, never wraps or panics");
        let mut big = Count(0);
        big += u64::MAX;
        assert_eq!(big, Count(u32::MAX));
        let mut k = Counters::default();
        k.listings += 3;
        k.ignored_children += 7;
        k.persistent_skipped += 1;
        assert_eq!(
            k.widen(),
            Stats {
                listings: 3,
                ignored_children: 7,
                persistent_skipped: 1,
                ..Stats::default()
            }
        );
    }

    #[test]
    fn ancestors_lists_every_prefix() {
        assert_eq!(ancestors("/a"), ["/a"]);
        assert_eq!(ancestors("/a/b/c"), ["/a", "/a/b", "/a/b/c"]);
    }
}
