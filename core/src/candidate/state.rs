//! The candidate's state: every type a candidate is made of, laid out so
//! that impossible combinations cannot be written down (each side lane an
//! enum, the in-flight map the only record of what is in flight, everything
//! of one ZooKeeper session one [`SessionState`], replaced whole).

use super::*;

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
    /// Listings sent because the farther of the two nodes a waiter watches
    /// went while its books did not show what is left below (the two-watch
    /// takeover, [`Takeover::OnNotification`](crate::Takeover::OnNotification)).
    pub second_relists: u64,
    /// Persistent look-alike children found and skipped (counted once per name).
    pub persistent_skipped: u64,
    /// New nodes of this candidate whose token was below the node it held
    /// before ([`Notice::TokenRegressed`]: the ensemble's history restarted).
    pub tokens_regressed: u64,
}

/// A counter of [`Stats`] as a machine keeps it: 32 bits, saturating, widened
/// by [`Candidate::stats`]. Adding a `u64` (as the counts are written) keeps
/// every `+=` of the machine as it reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(super) struct StatU32(pub(super) u32);

impl std::ops::AddAssign<u64> for StatU32 {
    fn add_assign(&mut self, n: u64) {
        self.0 = self.0.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
    }
}

/// [`Stats`] as a machine keeps them: 48 bytes of every machine, not 96.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(super) struct Counters {
    pub(super) commands: StatU32,
    pub(super) stale_replies: StatU32,
    pub(super) stale_events: StatU32,
    pub(super) ignored_children: StatU32,
    pub(super) elections: StatU32,
    pub(super) zero_rtt_takeovers: StatU32,
    pub(super) listings: StatU32,
    pub(super) recovered_creates: StatU32,
    pub(super) second_relists: StatU32,
    pub(super) persistent_skipped: StatU32,
    pub(super) tokens_regressed: StatU32,
}

impl Counters {
    pub(super) fn widen(&self) -> Stats {
        Stats {
            commands: self.commands.0.into(),
            stale_replies: self.stale_replies.0.into(),
            stale_events: self.stale_events.0.into(),
            ignored_children: self.ignored_children.0.into(),
            elections: self.elections.0.into(),
            zero_rtt_takeovers: self.zero_rtt_takeovers.0.into(),
            listings: self.listings.0.into(),
            recovered_creates: self.recovered_creates.0.into(),
            second_relists: self.second_relists.0.into(),
            persistent_skipped: self.persistent_skipped.0.into(),
            tokens_regressed: self.tokens_regressed.0.into(),
        }
    }
}

/// What the application last asked of the machine, which it works toward
/// (an intent such as [`join`](super::Candidate::join) sets it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Goal {
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
pub(super) enum Step {
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
    /// Setting a watch on a node below: a data watch on one of the nearest
    /// (under the Parent strategy a read with none), a child watch on the
    /// two-watch's farther node ([`Next::Watch`](crate::standing::Next)).
    Watch { pred: Box<str>, class: WatchClass },
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
pub(super) enum End {
    /// Closed by the application or with the client.
    Closed,
    /// Stopped by a fatal error.
    Failed,
}

/// Why a request is in flight. The in-flight map is the one place that says
/// which request a lane waits for: a lane's state never repeats its [`OpId`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Purpose {
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
    /// A read of a node below ours (a data read, or a child watch on the
    /// farther node: the reply's kind says which, as `on_reply` takes only
    /// the kind the request asked for).
    WatchPred(String),
    Delete(String),
    // Side lanes (at most one each in flight).
    /// The watch on our own node (a child watch or a data watch: see
    /// `Candidate::own_watch_kind`).
    WatchOwn {
        name: String,
        /// An event on our node arrived while this request was in flight: its
        /// reply arms nothing (that watch is already spent).
        spent: bool,
    },
    /// A downgrading writer's read of its own node (its data version).
    DowngradeRead(String),
    /// A downgrading writer's `setData` of [`DOWNGRADED`](crate::config::DOWNGRADED),
    /// expecting the version it read.
    DowngradeWrite(String),
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
    pub(super) fn is_main(&self) -> bool {
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
pub(super) struct Past {
    /// Nonces of this candidate's earlier sessions: a node bearing one is ours
    /// from the past (a create applied after its session was given up on, or a
    /// dying session's node) and is deleted when a listing shows it.
    pub(super) old_nonces: VecDeque<String>,
    /// Persistent children already reported, so each is reported once.
    pub(super) persistent_reported: BTreeSet<String>,
    /// The token of the last node this candidate held, once it let go of
    /// one (kept here, not inline: only a candidate that lost or left a
    /// node can compare a new one with it).
    pub(super) last_token: Option<FencingToken>,
}

/// Whether the connected server's reads can be trusted to show what the
/// leader had committed before them.
///
/// ZooKeeper never lets a client connect to a server behind what it has
/// *seen*, but a server may be behind the *leader*: after a reconnect to a
/// lagging follower, a listing can still show our node an operator deleted,
/// or miss our own create that committed while its reply was lost (both
/// found by the simulator's ensemble worlds). The cure the
/// Programmer's Guide gives is `sync` before such a read. It is paid only
/// where a stale read could mislead: the first listing on a connection the
/// session moved to, and every protected-create recovery listing. A new
/// session's listings follow its own create, which the connected server
/// applied (with everything committed before it) before answering, so they
/// need none, and a failover on a notification pays nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Reads {
    /// Reads show at least what this candidate acts on.
    Current,
    /// The next listing must follow a `sync`.
    SyncFirst,
}

/// The watch on our own node, while no request for it is in flight (the
/// in-flight map says when one is).
///
/// It tells a node's owner that someone else deleted it (an operator's
/// revocation). A waiter that takes over without a listing must have it
/// (else its node may be gone unseen, and two would hold), so a waiter
/// under [`Takeover::OnNotification`](crate::Takeover::OnNotification)
/// sets it before its first watch below. Everyone else sets it late
/// ([`Self::Later`]): a holder by its own listing needs it only to learn of
/// a revocation within the grace the lease allows, so a short hold never
/// pays for it (a request, and a notice when the node goes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum OwnWatch {
    /// Not wanted yet: set once the machine's probe timer has ticked this
    /// many more times (a tick falls due every third of the session
    /// timeout or sooner, so two ticks take a third to two thirds of it).
    /// Whatever the node was revoked meanwhile, the request that sets the
    /// watch answers `NoNode` and tells. A holder sets it at its next tick
    /// (in the probe's place), well before its node's lapse (see
    /// [`Own::unwatched_since`]). A reconnect sets it at once (the ticks
    /// stand still while the connection is down).
    Later { ticks: u8 },
    /// Not set: set it when the main lane allows.
    Unarmed,
    /// Not set, and this connection has not shown who owns the node (a
    /// reconnect on a transport that does not report session ids): set it
    /// with a read of the node's stat, which tells a silent move to another
    /// session.
    Recheck,
    /// Set, and not yet fired: a child watch, or a data watch.
    Armed(OwnWatchKind),
    /// The last request failed on the connection: wait for proof the
    /// connection works (any answer, or a new connection) before trying again.
    AwaitProof,
}

/// What a watch on our own node reports (see
/// `Candidate::own_watch_kind`): both report its deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum OwnWatchKind {
    /// A child watch: no write of the node's data fires it.
    Children,
    /// A data watch: every write of the node's data fires it too, and the
    /// read that sets it shows the node's stat and data.
    Data,
}

impl OwnWatch {
    /// A new node's: set at the second tick of the probe timer.
    pub(super) const LATER: Self = Self::Later { ticks: 2 };
}

/// A writer's downgrade to a reader (the read lock taken by the write
/// holder, the write lock then let go, as Curator allows), done in place:
/// the node's data says so, and readers behind it read that. The states
/// while no request is in flight (the in-flight map says when one is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Downgrade {
    /// Not asked for.
    No,
    /// Asked for: read the node (its version, and any revocation request in
    /// it), then write the marker expecting that version. `told` once
    /// [`Notice::Downgraded`](crate::Notice::Downgraded) is out: the marker
    /// was written, and a write over it (a revocation request, an
    /// operator's) took it away, so it is written again.
    Due { told: bool },
    /// The last attempt failed on the connection: wait for proof it works.
    AwaitProof { told: bool },
    /// Written: readers behind may hold.
    Done,
    /// The server refused the write (no write permission on the node): the
    /// machine reads only, but the queue still sees a writer.
    Refused,
    /// The mark was written (and [`Notice::Downgraded`](crate::Notice::Downgraded)
    /// told), a write over it took it away, and the server refused to write
    /// it back: the machine reads only, the queue sees a writer again.
    Unkept,
}

/// What the application was told about contact with the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Suspension {
    /// Nothing outstanding.
    Clear,
    /// A `Suspended` notice went out and its `Resumed` has not yet.
    Suspended,
    /// Suspended, and the link is back: a suspended leader is re-verifying,
    /// and `Resumed` waits for the answer.
    Resuming,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct InFlight {
    pub(super) purpose: Purpose,
    /// The kind of request sent: its reply must be of that kind.
    pub(super) verb: Verb,
    pub(super) sent_at: Timestamp,
}

/// This candidate's own node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Own {
    /// Boxed: it never changes, and every machine holds one.
    pub(super) name: Box<str>,
    pub(super) token: FencingToken,
    /// A writer's downgrade to a reader.
    pub(super) downgrade: Downgrade,
    /// The data version at which a revocation request was last reported
    /// ([`NO_REQUEST`] before any): each write of one is reported once.
    pub(super) revoke_seen: i32,
    /// Since when the node may have been deleted without an event telling
    /// us, as a lower bound on the server's clock: `None` while the own-node
    /// watch stands armed on a connection that has not dropped since. A
    /// leader leads on it for at most nine tenths of the session timeout
    /// (see `Candidate::own_node_lapse`).
    pub(super) unwatched_since: Option<Timestamp>,
}

/// [`Own::revoke_seen`] before any request (a request is a write, so it is
/// seen at a data version of 0 or more).
pub(super) const NO_REQUEST: i32 = -1;

/// Whether the main lane is going round a loop that a successful answer
/// does not end, so that its answers do not reset the backoff and each
/// round waits longer than the last: every retry backs off, and a loop
/// that an answer would otherwise restart at once is a storm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Round {
    /// Nothing outstanding: a successful answer of the main lane ends the
    /// backoff.
    Fresh,
    /// Levels of the election path were made (or found) since our node's
    /// create last succeeded: a create or a level answered `NoNode` now
    /// means the path is being deleted under us.
    MadeParents,
    /// A watched node's read contradicted the listing that showed it below
    /// ours since the candidate last had every watch armed (or led):
    /// another node bears the name, created after ours (the listing
    /// that follows waits a backoff), or the node is gone (the first such
    /// listing goes at once, a second waits). Each round waits longer than
    /// the last.
    Contradicted,
}

/// Everything that belongs to one ZooKeeper session. When the session ends,
/// it is replaced whole: nothing of it can outlive its session by mistake.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct SessionState {
    /// The session id, once known.
    pub(super) id: Option<SessionId>,
    /// Which of this candidate's sessions this is, counted from 0 (scopes
    /// the create nonces).
    pub(super) number: u64,
    /// Creates sent in this session: the last one's nonce is `nonce(seed, number, creates - 1)`.
    pub(super) creates: u64,
    /// A create of this session may have been applied though its reply was lost.
    pub(super) create_uncertain: bool,
    /// Whether the main lane goes round a loop that an answer does not end
    /// (see [`Round`]).
    pub(super) round: Round,
    /// Send time of the newest request the server answered in this session.
    pub(super) last_ack: Option<Timestamp>,
    /// Every request in flight, by op: the one place that says what is in flight.
    pub(super) ops: OpTable<InFlight>,
    /// Nodes of earlier sessions being deleted. Boxed: only a candidate that
    /// lost a session and then found its old node has any.
    // The box is the point (8 bytes inline for the rare list, not 24).
    #[allow(clippy::box_collection)]
    pub(super) clearing: Option<Box<Vec<String>>>,
    pub(super) own: Option<Own>,
    pub(super) own_watch: OwnWatch,
    /// The follower's view of the nodes below ours.
    pub(super) standing: Standing,
    /// Whether the next listing must be preceded by a `sync`.
    pub(super) reads: Reads,
}

impl SessionState {
    pub(super) fn new(number: u64) -> Self {
        Self {
            id: None,
            number,
            creates: 0,
            create_uncertain: false,
            round: Round::Fresh,
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
