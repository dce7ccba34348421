//! The election state machine.
//!
//! # Rules of this module
//!
//! - Every transition of a candidate lives in this module (this file and
//!   `state.rs`, `join.rs`, `follow.rs` beside it). It knows nothing of
//!   ZooKeeper client types, clocks, threads or randomness: time comes in as
//!   `now`, randomness as the configured seed, the world as [`Input`]s.
//! - A reply is acted on only if its [`OpId`] is still in flight (`session.ops`);
//!   anything else is stale and counted, never acted on.
//! - The main lane has at most one request in flight; the own-node watch, a
//!   writer's downgrade and the liveness probe each have a lane of their own. The
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
//! The two-watch takeover ([`Takeover::OnNotification`], where
//! [`Config::two_watch`] holds): a waiter watches the k nearest nodes below
//! its own and the next one below them too (with k = 1, its predecessor and
//! the node behind it). The nearest are watched by a data read (its stat
//! shows a contender's node), the farther one by a child watch: only its
//! deletion matters, a leaf has no children, so no write into it (an
//! operator's, a revocation request) spends the watch, and the server fires
//! a node's child watches after its data watches, so on a hand-off the new
//! holder, watching the node by data, is told before the waiter behind it,
//! whose listing would otherwise run beside the takeover. A farther node
//! that becomes one of the nearest (a nearer one went first) is read then.
//! When that farther node goes, the waiter lists again
//! unless its books already name every node that can be below it, each
//! watched (the listing showed just those); the listing keeps the watches
//! that stand and shows what is left, and a new farther node is watched if
//! there is one. So when one of the k nearest goes, the books prove in the
//! common case that fewer than k are left below, and the waiter holds on
//! the notification alone; where they do not (a waiter in the middle gave
//! up), it lists. Nothing is written and no one's cooperation is needed:
//! the books stay what they are under `Relist`, an upper bound on the nodes
//! below that only the server's answers and notices lower.
//!
//! # What a takeover on the notification costs
//!
//! [`Takeover::OnNotification`] (the default) pays for the round trip it
//! saves; [`Takeover::Relist`] does not take it. Per hand-off of a lock in a
//! rotation (H holds, S waits behind it, T behind S, U behind T, each queued
//! at the back, so each listing showed nodes below), counted by the server
//! (bench/README.md lists every request of every change, measured):
//!
//! | | in | out |
//! |---|---:|---:|
//! | H's delete, and its answer | 1 | 1 |
//! | S hears of it | | 1 |
//! | Relist: S lists the children, and the answer (the other libraries do the same) | 1 | 1 |
//! | OnNotification: H hears of its own delete (its own-node watch) | | 1 |
//! | OnNotification: T hears of it (H was the farther node it watched) | | 1 |
//! | OnNotification: T lists the children (its listing showed more below it than H and S), and the answer | 1 | 1 |
//! | **Relist: 2 in, 3 out; OnNotification: 2 in, 5 out** | | |
//!
//! Per re-queue the two-watch pays 5 and 5 (create, listing, own-node
//! watch, two watches below), `Relist` 3 and 3; per cycle (queueing to
//! release) 7 in and 10 out against 5 and 6. The least any takeover on the
//! notification can cost is 6 and 9 per cycle, for two reasons, each a way
//! to be wrong that the simulator draws:
//!
//! - *S must know its own node is still there when it takes over without a
//!   listing.* An operator may have deleted it while S waited; T was then
//!   told, listed, and watches H too, and when H goes both would hold. So a
//!   waiter that may take over on a notification watches its own node (a
//!   child watch, which no write spends), set before the watches below so
//!   that its deletion reports first; it fires once in the node's life, at
//!   the release (H's own delete tells H): 1 in, 2 out per cycle.
//! - *S must learn, before H's node goes, that no other node is left below
//!   it.* Its listing showed nodes below H, and it hears only of the nodes
//!   it watches; watching all of them is the herd. So a notice of an event
//!   after the last of them went must reach it: a watch set for it and the
//!   notice, at least 1 in and 2 out.
//!
//! The listing after the notice (1 in, 1 out) goes: 5 and 6 plus 2 and 4,
//! less 1 and 1. The two-watch pays 1 in and 1 out above that floor: the
//! farther node's notice comes when it goes, and nodes may remain below it
//! (a listing then says so) unless the listing showed just two. The leader
//! marker it replaced (a new holder's `setData` of its node, which the node
//! behind it watched, then read again to re-arm and to tell the marker from
//! anyone's write) cost the same 7 and 10 per cycle, but one of them a
//! write: a quorum's proposal and a disk flush on every member of the
//! ensemble, where the two-watch's extra watch and listing are reads that
//! the one server the session is on answers alone. A persistent watch
//! (`addWatch`, ZooKeeper 3.6+) would save a watch only by leaving one on
//! the server for every deleted node, for the life of the session, unless
//! removed: a request again.
//!
//! The own-node watch is set early only by a waiter under `OnNotification`,
//! which needs it; a holder by its own listing, and every node under
//! `Relist`, sets it two probe ticks on (a holder at its first tick), for
//! revocation's sake, so that a short hold or wait never pays for it (see
//! [`OwnWatch`]); until then a holder leads on its node only until the
//! node's lapse (see *A leader's own node* below). A failover (the
//! leader's session closes) costs 2 in and 3 out (close; S told, holds; T
//! told, lists), under `Relist` 2 and 2 as zookeeper-async's `LeaderLatch`,
//! where the closing client hangs up without waiting (zookeeper-async); a
//! zookeeper-client close waits, and the server sends it the close's answer
//! and, under `OnNotification`, its own node's notice as well: 2 out more.
//!
//! # A leader's own node
//!
//! An operator may delete a holder's node (a revocation); the holder must
//! stop within a session timeout of the deletion reaching the server its
//! session is on, as its session's expiry would make it (a follower that
//! lags applies it late, and until then answers as if the node stood: no
//! client of it can know sooner). Contact does not tell it: the server answers a session
//! whose node is gone. One rule covers it, whatever the holder's watch,
//! strategy or mode: **a leader leads on its node for at most nine tenths
//! of the session timeout after the last moment the server vouched for the
//! node** (`Own::unwatched_since`, demotion in `check_link`, refusal in
//! `become_leader`). The server vouches for the node
//!
//! - by an answer that shows it (a listing, a read of it): it stood when
//!   the server handled that answer, no earlier than the newest contact;
//! - continuously while its watch stands armed on a connection that has not
//!   dropped: a deletion then reaches us before any answer or event the
//!   server sends after it (one connection is FIFO), so nothing is unseen.
//!
//! The bound is moved by nothing else: not by a probe's answer, nor by any
//! other answer or a shared session's contact, each of which may be to a
//! request sent after the node went unseen. It is set when the node is
//! created (its watch comes later), when its watch fires or is dropped,
//! and on a disconnect (an event may be lost with the connection), to the
//! newest contact then, a moment the node was still reported on; it is
//! cleared when the server sets the watch.
//!
//! This one rule covers both ways the simulator found a leader outliving
//! its revocation: a holder by its own listing, its watch not set yet,
//! whose probe was answered after the deletion and whose watch's answer
//! was then lost with the connection (the probe's answer leaves the bound
//! at the listing); and a young leader whose connection dropped every
//! second, each new one answering the probe and dying before the watch
//! queued behind it was answered (each drop keeps the older bound). The
//! lease, which contact alone keeps, stays what it says: when the session
//! may have expired. So a healthy holder whose watch is merely late is
//! neither suspended nor probing on its own.
//!
//! It costs a takeover nothing. A waiter that takes over on the
//! notification has its own node's watch armed before it can
//! (`own_watch_stands`; else it lists, one round trip, as `Relist` does),
//! so its bound is clear and it leads on the notification itself; a leader
//! by its own listing was vouched for by that listing. A holder sets its
//! watch at its first probe tick, a third of the timeout in, far inside
//! the nine tenths; only a watch that cannot be set for that long (the
//! connection failing each time) demotes it, and the listing that follows
//! vouches for the node again.
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
//!   listing, the watched and armed nodes) and the rule of
//!   how many can be below it now.
//! - `candidate/state.rs`: the state, laid out so that impossible
//!   combinations cannot be written down: each side lane is an enum, the
//!   in-flight map is the only record of what is in flight, and everything of
//!   one ZooKeeper session is one `SessionState`, replaced whole on expiry.
//! - `candidate/join.rs`: joining and leaving the queue (the parents, the
//!   protected create and its recovery, the listing, our node's delete).
//! - `candidate/follow.rs`: following and leading (the watches below and on
//!   our own node, contact and the lease, watch and session
//!   events).
//! - Here: the machine's public face (getters, intents, inputs, outputs) and
//!   the main lane's bookkeeping (`emit`, `advance`, `issue_step`).

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use crate::command::{Command, OpId};
use crate::config::{Config, Interop, Takeover, WatchStrategy, REVOKE_MESSAGE};
use crate::input::{Input, SessionEvent};
use crate::kept::{KeptName, NameText};
use crate::lease::{Connection, Contact, Leadership};
use crate::name::{self, NodeName, Origin};
use crate::notice::{
    CandidateError, DemotionReason, FencingToken, NamespaceFault, Notice, Role, WrongReply,
};
use crate::ops::OpTable;
use crate::outbox::Outbox;
use crate::standing::{Limits, Next, Standing};
use crate::time::Timestamp;
use crate::timer::{Backoff, Timer, TimerTable};
use crate::zk::WatchClass;
use crate::zk::{CreateMode, Reply, Request, SessionId, Stat, Verb, WatchEvent, WatchKind, ZkCode};

mod downgrade;
mod follow;
mod join;
mod state;

use join::ancestors;
pub use state::Stats;
use state::*;

/// How many of the nearest lower nodes a follower remembers from a listing,
/// per node of its room: those it watches, and as many to fall back to
/// without listing again. Only a persistent look-alike read in place of a
/// watched node falls back (a watched node that goes costs a listing unless
/// the books name every node left), so one spare per watch is plenty, and
/// the two-watch's farther node is kept beside them with none of its own;
/// each name kept costs every idle follower 16 bytes (packed: `standing.rs`),
/// 56 if not ours.
const KEPT_PER_WATCH: usize = 2;

/// How many past sessions' nonces a candidate remembers, to clear their nodes.
const OLD_NONCES_KEPT: usize = 16;

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
/// // The create of the candidate's node, and nothing else: its answer
/// // proves contact with the server as a probe's would.
/// let commands: Vec<Command> = std::iter::from_fn(|| c.poll_command()).collect();
/// assert_eq!(commands.len(), 1);
/// assert!(matches!(commands[0].request, Request::Create { .. }));
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    config: Config,
    now: Timestamp,
    next_op: u64,
    goal: Goal,
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
    /// A bug planted in this machine ([`Planted`](crate::Planted)), if any.
    #[cfg(feature = "planted")]
    planted: Option<crate::Planted>,
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
            goal: Goal::Out,
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
            #[cfg(feature = "planted")]
            planted: None,
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
            Leadership::None => match self.goal {
                Goal::Out => Role::Idle,
                _ => Role::Follower,
            },
        }
    }

    /// This candidate's node name (not the full path), once known.
    pub fn node(&self) -> Option<&str> {
        self.session.own.as_ref().map(|o| &*o.name)
    }

    /// This candidate's node's full path, once known (what a guarded
    /// write checks, and what a close deletes).
    pub fn own_path(&self) -> Option<String> {
        self.session.own.as_ref().map(|o| self.child_path(&o.name))
    }

    /// The fencing token of this candidate's node, once known.
    pub fn token(&self) -> Option<FencingToken> {
        self.session.own.as_ref().map(|o| o.token)
    }

    /// The nearest node this candidate watches (its predecessor), if any:
    /// its name as text, printed from the packed form the machine keeps
    /// (see [`NameText`]), without an allocation.
    pub fn watching(&self) -> Option<NameText<'_>> {
        self.session.standing.nearest()
    }

    /// Every node this candidate watches, nearest first (k of them with k leaders).
    pub fn watched(&self) -> Vec<String> {
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
        match self.goal {
            Goal::In | Goal::Close => {}
            Goal::Leave { .. } => self.goal = Goal::Leave { rejoin: true },
            Goal::Out => {
                self.goal = Goal::In;
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
        match self.goal {
            Goal::Out | Goal::Close => return,
            Goal::Leave { .. } => {
                self.goal = Goal::Leave { rejoin };
                return;
            }
            Goal::In => {}
        }
        self.demote(DemotionReason::Resigned);
        self.goal = Goal::Leave { rejoin };
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
        match self.goal {
            Goal::Close => return,
            Goal::Out => {
                self.goal = Goal::Close;
                self.finish_leaving();
                return;
            }
            Goal::In | Goal::Leave { .. } => {}
        }
        self.demote(DemotionReason::Closed);
        self.goal = Goal::Close;
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
        // a list of the timers taken out, whose vector would cost an
        // allocation on every timeout.
        let now = self.now;
        let due = |timers: &TimerTable, timer| timers.get(timer).is_some_and(|at| at <= now);
        let probe_due = due(&self.timers, Timer::Probe);
        for timer in [Timer::Retry, Timer::Probe, Timer::Lease] {
            if due(&self.timers, timer) {
                self.timers.stop(timer);
            }
        }
        if probe_due {
            let leading = self.leadership != Leadership::None;
            let mut watch_sent = false;
            if let OwnWatch::Later { ticks } = &mut self.session.own_watch {
                *ticks = ticks.saturating_sub(1);
                // A holder leads on its unwatched node only until the
                // node's lapse (see `own_node_lapse`): it sets the watch
                // at its first tick, far from the lapse, and that request
                // proves contact.
                if *ticks == 0 || leading {
                    self.session.own_watch = OwnWatch::Unarmed;
                    if leading {
                        self.arm_own_watch();
                        watch_sent = self.own_watch_in_flight().is_some();
                    }
                }
            }
            // Contact proven within the last third (an answer to any
            // request of the session: ours, or one fed by `session_answered`)
            // makes the probe needless until it goes stale, and so does the
            // own-node watch just sent, whose answer proves it.
            match self.session.last_ack {
                Some(ack) if ack.plus_fraction(self.timeout, 1, 3) > self.now => {
                    self.timers.set(Timer::Probe, self.next_probe(ack));
                }
                _ if watch_sent && !(self.timeout / 3).is_zero() => {
                    self.timers.set(Timer::Probe, self.next_probe(self.now));
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

    /// What this node's standing is judged against: the queue's limit (k,
    /// 1, or a semaphore's permits) and the room its own weight leaves.
    fn limits(&self) -> Limits {
        Limits {
            room: self.config.room() as usize,
            spare: usize::from(self.config.two_watch()),
        }
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
            .then(|| name::nonce(self.config.nonce_seed(), self.session.number, last))
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
                verb: request.kind(),
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
    /// own-node watch that is armed, waiting for proof or not yet wanted has
    /// none in flight and a node to be about.
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
            && count(|p| matches!(p, Purpose::DowngradeRead(_) | Purpose::DowngradeWrite(_))) <= 1
            && count(|p| matches!(p, Purpose::Probe { .. })) <= 1
            && (matches!(
                self.session.own_watch,
                OwnWatch::Unarmed | OwnWatch::Recheck
            ) || (self.own_watch_in_flight().is_none() && self.session.own.is_some()))
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

    /// Whether the main lane's watch below waits for the own-node watch's
    /// answer (see `advance`).
    fn watch_waits_for_own(&self) -> bool {
        matches!(self.step, Step::Watch { .. }) && self.own_watch_in_flight().is_some()
    }

    /// The own-node watch fired, or may have: set it again (unless waiting for
    /// proof of contact).
    fn own_watch_spent(&mut self) {
        if let OwnWatch::Armed(_) = self.session.own_watch {
            self.session.own_watch = OwnWatch::Unarmed;
        }
        self.own_node_unwatched();
    }

    /// Forgets the own-node watch request in flight, if any: its reply will be stale.
    fn drop_own_watch(&mut self) {
        self.session.own_watch = OwnWatch::Unarmed;
        if let Some(op) = self.own_watch_in_flight() {
            self.session.ops.remove(op);
        }
        self.own_node_unwatched();
    }

    /// The server set the own-node watch: from here on, while the connection
    /// holds, a deletion of our node is reported.
    fn own_watch_armed(&mut self, kind: OwnWatchKind) {
        self.session.own_watch = OwnWatch::Armed(kind);
        if let Some(own) = self.session.own.as_mut() {
            own.unwatched_since = None;
        }
    }

    /// Our node may go unreported from now on (its watch fired, was lost, or
    /// may be lost with the connection). The bound is the newest contact:
    /// replies and events come in the server's order, so a deletion before
    /// the server handled the last request answered would have been reported
    /// before that answer.
    fn own_node_unwatched(&mut self) {
        let since = self.session.last_ack.unwrap_or(self.now);
        if let Some(own) = self.session.own.as_mut() {
            own.unwatched_since.get_or_insert(since);
        }
    }

    /// An answer showed our node (a listing, a read): it was there when the
    /// server handled it, which is no earlier than the newest contact.
    fn own_node_seen(&mut self) {
        let seen = self.session.last_ack.unwrap_or(self.now);
        if let Some(since) = self
            .session
            .own
            .as_mut()
            .and_then(|o| o.unwatched_since.as_mut())
        {
            *since = (*since).max(seen);
        }
    }

    /// When leading on our node stops being safe while no watch stands on it:
    /// nine tenths of the session timeout after the last moment the server
    /// vouched for it. Contact alone does not vouch for the node: a leader
    /// whose connection dropped every second, each new one answering the
    /// probe and dying before the own-node watch behind it was answered, led
    /// on a node an operator had deleted past a session timeout (found by the
    /// simulator). The operator's deletion must reach its owner within a
    /// session timeout; nine tenths leaves the margin the lease leaves.
    fn own_node_lapse(&self) -> Option<Timestamp> {
        let since = self.session.own.as_ref()?.unwatched_since?;
        Some(since.plus_fraction(self.timeout, 9, 10))
    }

    /// Whether the own node has gone unwatched too long to lead on (see
    /// [`Self::own_node_lapse`]).
    fn own_node_lapsed(&self) -> bool {
        self.own_node_lapse().is_some_and(|at| self.now >= at)
    }

    /// The state of an own-node watch that may have been lost with the
    /// connection: to be set again, with a read of the node's owner where
    /// the connection did not say which session it is on.
    fn own_watch_lost(&self) -> OwnWatch {
        if self.ids_reported {
            OwnWatch::Unarmed
        } else {
            OwnWatch::Recheck
        }
    }

    /// Whether a deletion of our node would reach us before any later event,
    /// so that a takeover without a listing is safe (see [`OwnWatch`]): our
    /// own node's watch stands (set, or its request out), or, under the
    /// `Parent` strategy, the parent's child watch that every listing sets
    /// (while it has not fired the follower is not listing again, and an
    /// answer that reaches it while it lists is stale).
    fn own_watch_stands(&self) -> bool {
        matches!(self.session.own_watch, OwnWatch::Armed(_))
            || self.own_watch_in_flight().is_some()
            || self.config.strategy() == WatchStrategy::Parent
    }

    /// Whether this waiter watches its own node from the moment it knows it
    /// waits, to take over on a notification (see [`OwnWatch`]).
    fn watches_own_node_early(&self) -> bool {
        self.config.takeover() == Takeover::OnNotification
            && self.config.strategy() == WatchStrategy::Predecessor
    }

    /// The own-node watch is wanted now (unless it is set or going).
    fn want_own_watch(&mut self) {
        if let OwnWatch::Later { .. } = self.session.own_watch {
            self.session.own_watch = OwnWatch::Unarmed;
        }
    }

    /// Whether the main lane is on `Step::Watch { pred }` (compared without
    /// building that step).
    fn is_watching(&self, pred: &str) -> bool {
        matches!(&self.step, Step::Watch { pred: p, .. } if **p == *pred)
    }

    fn set_step(&mut self, step: Step) {
        self.supersede_main();
        if !matches!(step, Step::Watch { .. } | Step::Wait) {
            self.forget_watched();
        }
        self.step = step;
    }

    /// When the probe is next due, counting from the last contact `from`: a
    /// third of the session timeout later, and never sooner than a
    /// millisecond from now. (A timeout under 3 ms has a third that rounds
    /// to nothing: a probe due the moment it is armed would be due again at
    /// every `handle_timeout`, and a driver would spin without time moving.)
    fn next_probe(&self, from: Timestamp) -> Timestamp {
        from.plus_fraction(self.timeout, 1, 3)
            .max(self.now + Duration::from_millis(1))
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
            // The own-node watch before the main lane's request: a watch
            // below set after it can then report nothing that our node's
            // deletion, if any, would not have reported first (FIFO).
            //
            // A watch below is not sent while the own-node watch is in
            // flight, but once that is answered: the two answers would come
            // back to back, and a client that reads them in one go may pay
            // dearly for it (zookeeper-async reserves 2 MiB behind every
            // frame it reads, so a second frame behind the first makes it
            // reallocate its buffer, and glibc copy all of it into fresh
            // pages, once per connection; a start of 300 candidates spent
            // most of its page faults there). Nothing is lost: a waiter
            // takes over on a notification only with its own watch
            // standing, so a watch below answered sooner serves nothing
            // sooner, and a node below that goes meanwhile shows in the
            // watch's answer. Only the first watch below after queueing
            // meets it: later ones find the own watch standing, or answered
            // before their listing (one connection is FIFO). It goes out on
            // that answer and in no other turn, so no watch event of
            // another change seems to have woken it.
            self.arm_own_watch();
            if !self.main_in_flight()
                && !self.timers.is_set(Timer::Retry)
                && !self.watch_waits_for_own()
            {
                self.issue_step();
            }
            self.send_downgrade();
            if self.config.probe()
                && !self.timers.is_set(Timer::Probe)
                && self.goal != Goal::Out
                && !(self.timeout / 3).is_zero()
            {
                self.timers.set(Timer::Probe, self.next_probe(self.now));
            }
        }
        if self.connection != Connection::Connected || self.goal == Goal::Out || self.is_done() {
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
                let prefix = name::create_prefix_weighted(
                    self.config.prefix(),
                    nonce.as_deref(),
                    self.config.weight(),
                );
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
            Step::Watch { pred, class } => {
                let path = self.child_path(&pred);
                // Under Parent the read only checks the node (the parent's
                // watch wakes us), so it sets no watch of its own.
                let watch = self.config.strategy() == WatchStrategy::Predecessor;
                let request = match class {
                    WatchClass::Data => Request::GetData { path, watch },
                    // The two-watch's farther node: only its deletion
                    // matters, which fires a child watch (a leaf's only
                    // child event), after every data watch on the node:
                    // the nearest node's waiter, the new holder, is told
                    // first. No write spends it (a revocation request, an
                    // operator's setData), and a missing node answers
                    // `NoNode` as a data read does.
                    WatchClass::Child => Request::GetChildren { path, watch },
                };
                (Purpose::WatchPred(pred.into()), request)
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_saturate_and_widen_to_the_stats_they_stand_for() {
        let mut c = StatU32(u32::MAX - 1);
        c += 1;
        assert_eq!(c, StatU32(u32::MAX));
        c += 1;
        assert_eq!(c, StatU32(u32::MAX), "saturates, never wraps or panics");
        let mut big = StatU32(0);
        big += u64::MAX;
        assert_eq!(big, StatU32(u32::MAX));
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

    /// Found by the `candidate` fuzz target: with a negotiated timeout of
    /// 1 ms the probe was armed for `now` itself, so `poll_timeout` never
    /// moved past a `handle_timeout` and a driver would spin in place.
    #[test]
    fn a_probe_is_never_due_at_the_moment_it_is_armed() {
        let config = Config::builder("/e", "a").build().unwrap();
        for timeout_ms in [1, 2, 3, 4, 3_000] {
            let mut c = Candidate::new(config.clone());
            let t = Timestamp::from_millis(0);
            c.handle(
                t,
                Input::Session(SessionEvent::Connected {
                    session_id: Some(SessionId(1)),
                    timeout: Duration::from_millis(timeout_ms),
                }),
            );
            c.join(t);
            let mut now = t;
            for _ in 0..8 {
                c.handle_timeout(now);
                let next = c.poll_timeout().expect("a probe is armed");
                assert!(next > now, "{timeout_ms} ms: due at {next}, now {now}");
                now = next;
            }
        }
    }

    /// Found by the `session` fuzz target: with a session timeout of 1 ms
    /// (two thirds round to nothing, so no contact is fresh enough to lead
    /// on), a candidate first in the queue listed again at once after every
    /// answer: thousands of listings at one instant. It backs off instead.
    #[test]
    fn a_timeout_too_short_to_lead_on_backs_off_instead_of_listing_again_at_once() {
        let config = Config::builder("/e", "a").build().unwrap();
        let mut c = Candidate::new(config);
        let t = Timestamp::from_millis(0);
        c.handle(
            t,
            Input::Session(SessionEvent::Connected {
                session_id: Some(SessionId(1)),
                timeout: Duration::from_millis(1),
            }),
        );
        c.join(t);
        let mut listings = 0;
        for _ in 0..100 {
            let Some(cmd) = c.poll_command() else { break };
            let result = match &cmd.request {
                Request::Create { path, .. } => Ok(Reply::Created {
                    path: format!("{path}0000000000"),
                    stat: Stat {
                        czxid: 1,
                        ephemeral_owner: 1,
                        ..Stat::default()
                    },
                }),
                Request::GetChildren { .. } => {
                    listings += 1;
                    Ok(Reply::Children(
                        c.node().into_iter().map(str::to_owned).collect(),
                    ))
                }
                Request::Exists { .. } => Ok(Reply::Exists(None)),
                _ => Err(ZkCode::ConnectionLoss),
            };
            c.handle(t, Input::Reply { op: cmd.op, result });
        }
        assert!(listings <= 2, "{listings} listings at one instant");
        assert!(
            c.poll_timeout().is_some_and(|at| at > t),
            "a retry is armed"
        );
    }

    #[test]
    fn ancestors_lists_every_prefix() {
        assert_eq!(ancestors("/a"), ["/a"]);
        assert_eq!(ancestors("/a/b/c"), ["/a", "/a/b", "/a/b/c"]);
    }
}
