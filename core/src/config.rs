//! Configuration: validated once, at build time, so the machine never meets a bad path.

use std::fmt;
use std::time::Duration;

use crate::acl::{Acl, AclEntry, AclError};
use crate::notice::Identity;
use crate::rule::Rule;

pub use crate::interop::Interop;

/// Longest candidate id accepted, in bytes.
pub const ID_LEN_MAX: usize = 255;
/// Longest node-name prefix accepted, in bytes.
pub const PREFIX_LEN_MAX: usize = 64;
/// Most leaders a single election may have.
pub const LEADERS_MAX: u32 = 1024;

/// A configuration that cannot be used, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The recipe's path (an election's or a lock's) breaks ZooKeeper's
    /// path rules.
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The path given.
        path: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// The candidate id is empty, too long, or holds characters a node name may not.
    #[error("invalid candidate id {id:?}: {reason}")]
    InvalidId {
        /// The id given (cut to 64 characters).
        id: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// The node-name prefix is unusable.
    #[error("invalid node prefix {prefix:?}: {reason}")]
    InvalidPrefix {
        /// The prefix given.
        prefix: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// A node prefix was set together with an [`Interop`] scheme, which
    /// fixes the name.
    #[error("a node prefix cannot be combined with interop {0:?}: the scheme fixes the node name")]
    InteropPrefix(Interop),
    /// More than one leader together with an [`Interop`] scheme: Curator's
    /// LeaderLatch and kazoo's Election each elect exactly one, so in a shared
    /// queue a second zkelect leader would lead beside a foreign process that
    /// believes it leads alone.
    #[error("interop {0:?} elects one leader, as that library does: leaders must be 1")]
    InteropLeaders(Interop),
    /// An election's `leaders` is 0 or larger than `LEADERS_MAX` (1024).
    #[error("leaders must be between 1 and {LEADERS_MAX}, got {0}")]
    InvalidLeaders(u32),
    /// A semaphore's `permits` is 0 or larger than `LEADERS_MAX` (1024).
    #[error("a semaphore's permits must be between 1 and {LEADERS_MAX}, got {0}")]
    InvalidPermits(u32),
    /// The [`Interop`] scheme's library has no recipe this [`Rule`] could
    /// share a queue with (neither Curator nor kazoo has a semaphore built on
    /// one queue of sequential nodes: both keep leases beside a lock).
    #[error("interop {interop:?} has no recipe to share a queue with for {rule:?}")]
    InteropRule {
        /// The scheme asked for.
        interop: Interop,
        /// The rule it cannot share.
        rule: Rule,
    },
    /// [`ConfigBuilder::probe`]`(false)`: without its own probe the machine
    /// would trust the client library's word that it is connected, and no
    /// client library's silence check bounds how long after the server's last
    /// answer a leader keeps leading. Silence is measured on what the client
    /// *receives*, expiry on what the server receives: under a one-way
    /// partition (client → server cut) watch events still arrive and keep a
    /// zookeeper-client connection "alive" while the server expires the
    /// session; zookeeper-async never drops a connection for silence at all.
    /// Only the probe's answered round trips bound the lease. The safe way to
    /// send fewer requests is to leave the probe on: it goes out only every
    /// third of the session timeout, one at a time.
    #[error("probe(false) is refused: without the probe the lease rests on the client library's silence check, which cannot see a one-way partition (leave the probe on; it costs one exists per third of the session timeout)")]
    ProbeOff,
    /// [`ConfigBuilder::protected_create`]`(false)`: without a nonce in the
    /// node's name, a create whose reply is lost to a dropped connection
    /// leaves a node the machine cannot recognise as its own (its name is a
    /// bare sequence number, like everyone's). That orphan lives as long as
    /// the session, which stays alive, and blocks every node above it: the
    /// queue stops for good (the simulator's `unprotected` canary,
    /// caught by `liveness`). Curator's "protection" exists for the same
    /// reason. There is no safe way to turn it off; the nonce costs 20 bytes
    /// of node name.
    #[error("protected_create(false) is refused: a create whose reply is lost would leave an orphan node no one recognises, blocking the queue for the session's life (leave it on; it adds a 20-byte nonce to the node name)")]
    Unprotected,
    /// The connect string cannot be used by any client: empty, an empty
    /// server, a bad port, a chroot before the last server.
    #[error(
        "invalid connect string {connect:?}: {reason}; expected host:port[,host:port…][/chroot]"
    )]
    InvalidConnect {
        /// The connect string given (cut to 200 characters).
        connect: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The chroot of a connect string (`host:port/chroot`) breaks
    /// ZooKeeper's path rules: the server would refuse every request made
    /// under it.
    #[error("invalid chroot {chroot:?} in the connect string: {reason}")]
    InvalidChroot {
        /// The chroot given (cut to 64 characters).
        chroot: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// The weight asked for ([`ConfigBuilder::weight`]) is 0, more than the
    /// semaphore's permits (it could never hold), or given to a rule other
    /// than a semaphore (only a semaphore has permits to weigh).
    #[error("invalid weight {weight}: {reason}")]
    InvalidWeight {
        /// The weight asked for.
        weight: u32,
        /// Why it cannot be used.
        reason: &'static str,
    },
    /// The custom ACL cannot be used ([`Acl::validate`]).
    #[error("invalid ACL: {0}")]
    InvalidAcl(#[from] AclError),
    /// A duration setting is out of range.
    #[error("invalid {name}: {reason}")]
    InvalidDuration {
        /// The setting.
        name: &'static str,
        /// Why.
        reason: &'static str,
    },
}

/// Which node a follower watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum WatchStrategy {
    /// Watch only the next lower node (the ZooKeeper recipe): one deletion wakes one follower.
    #[default]
    Predecessor,
    /// Watch the parent's children: every change wakes every follower (the herd).
    /// Kept so the cost difference can be measured. A follower also reads its
    /// k nearest nodes below once (no watch), so a persistent look-alike there
    /// is skipped rather than waited behind.
    Parent,
}

/// What a leader does when the connection is suspended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum ConnectionPolicy {
    /// Stop acting as leader at once ([`Role::Suspended`](crate::Role::Suspended));
    /// resume if the same session comes back and the node is still a leader.
    #[default]
    Standard,
    /// Keep leading while the session cannot yet have expired on the server
    /// (measured from the send time of the last request the server answered),
    /// then demote locally with [`DemotionReason::Lost`](crate::DemotionReason::Lost).
    SessionAware,
}

/// How a waiter takes over when a node it watches goes, and what that
/// costs the ensemble (bench/README.md lists every request and
/// notification of each change; the argument for the floor is in the
/// candidate's design notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Takeover {
    /// On the deletion notice alone, with no round trip after it, wherever
    /// the waiter's books prove it holds. Every waiter watches its own node
    /// from the moment it knows it waits (a waiter that takes over without
    /// a listing must know its node is still there), and the two nearest
    /// nodes below its own (k + 1 with k holders): when the farther goes,
    /// it lists again unless its books already name all that is left below,
    /// so that when the nearest goes its books prove it holds (the two-watch
    /// takeover; nothing is written). Per hand-off of a lock in a queue of
    /// three waiters or more the ensemble sees 2 requests and 5 packets out,
    /// and per re-queue 5 and 5; a failover 2 in and 3 out (zookeeper-async,
    /// which hangs up without the close's answer; 2 and 5 over
    /// zookeeper-client). Per cycle (queueing to release) that is one
    /// request and one packet above the least any takeover on the notice
    /// can cost, and only reads above re-listing: an ensemble's writes
    /// (each one a quorum's disk flush) are the peers' (bench/README.md
    /// gives the argument).
    #[default]
    OnNotification,
    /// As Curator, kazoo and zookeeper-client do: the waiter lists the
    /// children again when the node it watches goes (one round trip more),
    /// unless its last listing already proves it holds and its own node is
    /// watched. Only the nearest node below is watched, and a node's own watch is set only
    /// once it has been in the queue for a third to two thirds of the
    /// session timeout, so a short hold or wait never pays for one: per
    /// hand-off 2 requests and 3 packets out, per failover 2 and 2, per
    /// queueing 3 and 3, the peers' counts. A revocation (an operator
    /// deleting the node) reaches the holder within two thirds of the
    /// session timeout instead of at once.
    Relist,
}

/// Lock names of other libraries' recipes: a prefix containing one would make
/// our nodes look like theirs to them while we ignore theirs, so half of an
/// interop. [`Interop`] is the whole of it.
const FOREIGN_STEMS: [&str; 6] = [
    "latch-",
    "lock-",
    "__lock__",
    "__rlock__",
    "__READ__",
    "__WRIT__",
];

/// A validated configuration for one [`Candidate`](crate::Candidate).
///
/// ```
/// use zkelect_core::{Config, WatchStrategy};
/// let config = Config::builder("/services/scheduler/leader", "node-a")
///     .leaders(2)
///     .strategy(WatchStrategy::Predecessor)
///     .build()?;
/// assert_eq!(config.path(), "/services/scheduler/leader");
/// # Ok::<(), zkelect_core::ConfigError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    // Laid out for the thousands of machines a session runs, each holding
    // one: the path and the id in one allocation, what most configurations
    // leave at its default behind one optional box.
    /// The election path, then the id.
    text: Box<str>,
    /// Where the id starts in `text` (a path is at most 4096 bytes).
    id_at: u16,
    /// `None` while every field of [`Rare`] is at its default, so that equal
    /// configurations compare equal.
    rare: Option<Box<Rare>>,
    nonce_seed: u64,
    rule: Rule,
    strategy: WatchStrategy,
    policy: ConnectionPolicy,
    acl: AclKind,
    create_parents: bool,
    container_parent: bool,
    rejoin_on_revoke: bool,
    interop: Interop,
    protected_create: bool,
    probe: bool,
    takeover: Takeover,
    revocable: bool,
}

/// Which [`Acl`] a configuration has, in one byte: a custom list's entries
/// are kept in [`Rare`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AclKind {
    Open,
    CreatorAll,
    CreatorAllWorldRead,
    Custom,
}

/// What most configurations leave at its default ([`Rare::default`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rare {
    data: Box<[u8]>,
    /// A custom ACL's entries (empty unless the ACL is custom).
    acl: Box<[AclEntry]>,
    /// How many permits the node asks for (a semaphore's; 1 otherwise).
    weight: u32,
    /// Set by the user; `None` means the scheme's own (`n_` without interop).
    prefix: Option<Box<str>>,
    backoff_min: Duration,
    backoff_max: Duration,
}

const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

impl Default for Rare {
    fn default() -> Self {
        Self {
            data: Box::default(),
            acl: Box::default(),
            weight: 1,
            prefix: None,
            backoff_min: BACKOFF_MIN,
            backoff_max: BACKOFF_MAX,
        }
    }
}

/// A configuration as the builder collects it, before [`ConfigBuilder::build`]
/// validates and packs it into a [`Config`].
#[derive(Debug, Clone)]
struct Draft {
    path: String,
    id: String,
    data: Box<[u8]>,
    prefix: Option<Box<str>>,
    weight: u32,
    rule: Rule,
    strategy: WatchStrategy,
    policy: ConnectionPolicy,
    acl: Acl,
    create_parents: bool,
    container_parent: bool,
    rejoin_on_revoke: bool,
    interop: Interop,
    protected_create: bool,
    nonce_seed: u64,
    backoff_min: Duration,
    backoff_max: Duration,
    probe: bool,
    takeover: Takeover,
    revocable: bool,
}

impl Draft {
    /// How many hold at once (as [`Config::leaders`]).
    fn leaders(&self) -> u32 {
        match self.rule {
            Rule::Election { leaders: k } | Rule::Semaphore { permits: k } => k,
            Rule::Mutex | Rule::Read | Rule::Write => 1,
        }
    }

    /// Packs a validated draft (its path no longer than 4096 bytes).
    fn pack(self) -> Result<Config, ConfigError> {
        let id_at = u16::try_from(self.path.len()).map_err(|_| ConfigError::InvalidPath {
            path: cut(&self.path),
            reason: "longer than 4096 bytes",
        })?;
        let (acl, entries) = match self.acl {
            Acl::Open => (AclKind::Open, Box::default()),
            Acl::CreatorAll => (AclKind::CreatorAll, Box::default()),
            Acl::CreatorAllWorldRead => (AclKind::CreatorAllWorldRead, Box::default()),
            Acl::Custom(list) => (AclKind::Custom, list.into_boxed_slice()),
        };
        let rare = Rare {
            data: self.data,
            acl: entries,
            weight: self.weight,
            prefix: self.prefix,
            backoff_min: self.backoff_min,
            backoff_max: self.backoff_max,
        };
        let mut text = String::with_capacity(self.path.len() + self.id.len());
        text.push_str(&self.path);
        text.push_str(&self.id);
        Ok(Config {
            text: text.into_boxed_str(),
            id_at,
            rare: (rare != Rare::default()).then(|| Box::new(rare)),
            nonce_seed: self.nonce_seed,
            rule: self.rule,
            strategy: self.strategy,
            policy: self.policy,
            acl,
            create_parents: self.create_parents,
            container_parent: self.container_parent,
            rejoin_on_revoke: self.rejoin_on_revoke,
            interop: self.interop,
            protected_create: self.protected_create,
            probe: self.probe,
            takeover: self.takeover,
            revocable: self.revocable,
        })
    }
}

/// Field by field, as a derived `Debug` of the unpacked fields would print.
impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("path", &self.path())
            .field("id", &self.id())
            .field("data", &self.data())
            .field("prefix", &self.prefix_set())
            .field("rule", &self.rule)
            .field("weight", &self.weight())
            .field("strategy", &self.strategy)
            .field("policy", &self.policy)
            .field("acl", &self.acl())
            .field("create_parents", &self.create_parents)
            .field("container_parent", &self.container_parent)
            .field("rejoin_on_revoke", &self.rejoin_on_revoke)
            .field("interop", &self.interop)
            .field("protected_create", &self.protected_create)
            .field("nonce_seed", &self.nonce_seed)
            .field("backoff_min", &self.backoff_min())
            .field("backoff_max", &self.backoff_max())
            .field("probe", &self.probe)
            .field("takeover", &self.takeover)
            .field("revocable", &self.revocable)
            .finish()
    }
}

impl Config {
    /// Starts a builder for a candidate `id` in the election at `path`.
    pub fn builder(path: impl Into<String>, id: impl Into<String>) -> ConfigBuilder {
        ConfigBuilder {
            config: Draft {
                path: path.into(),
                id: id.into(),
                data: Box::default(),
                prefix: None,
                weight: 1,
                rule: Rule::default(),
                strategy: WatchStrategy::default(),
                policy: ConnectionPolicy::default(),
                acl: Acl::default(),
                create_parents: true,
                container_parent: false,
                rejoin_on_revoke: true,
                interop: Interop::None,
                protected_create: true,
                nonce_seed: 0,
                backoff_min: BACKOFF_MIN,
                backoff_max: BACKOFF_MAX,
                probe: true,
                takeover: Takeover::OnNotification,
                revocable: false,
            },
        }
    }

    fn prefix_set(&self) -> Option<&str> {
        self.rare.as_ref().and_then(|r| r.prefix.as_deref())
    }

    /// The election path (the parent of the candidates' nodes).
    pub fn path(&self) -> &str {
        &self.text[..usize::from(self.id_at)]
    }
    /// This candidate's id, stored as its node's data.
    pub fn id(&self) -> &str {
        &self.text[usize::from(self.id_at)..]
    }
    /// Extra application data stored after the id.
    pub fn data(&self) -> &[u8] {
        self.rare.as_ref().map_or(&[], |r| &r.data)
    }
    /// The node-name prefix (before the sequence): with interop the scheme's
    /// stem for the rule (`latch-`, `lock-`, `__lock__`, …), else the one set,
    /// else the rule's own (`n_`, `m_`, `s_`, `r_`, `w_`; see [`Rule::stem`]).
    pub fn prefix(&self) -> &str {
        let own = self.rule.stem(Interop::None).unwrap_or("n_");
        match (self.interop, self.prefix_set()) {
            (Interop::None, Some(prefix)) => prefix,
            (Interop::None, None) => own,
            (interop, _) => self.rule.stem(interop).unwrap_or(own),
        }
    }
    /// The rule of this machine's node (default a one-leader election).
    pub fn rule(&self) -> Rule {
        self.rule
    }
    /// How many permits this node asks for: its weight in a semaphore
    /// (default 1; always 1 under any other rule).
    pub fn weight(&self) -> u32 {
        self.rare.as_ref().map_or(1, |r| r.weight)
    }
    /// How many permits (or, under other rules, blocking nodes) may be
    /// taken below this node while it still holds, plus one: the node holds
    /// while the weights of the blocking nodes below it are fewer than this
    /// (the limit, less the node's own weight, plus one; the limit itself
    /// for every weight-1 node).
    pub fn room(&self) -> u32 {
        self.leaders() - self.weight() + 1
    }
    /// How many hold at once: the k of an election or a semaphore, 1 otherwise.
    pub fn leaders(&self) -> u32 {
        match self.rule {
            Rule::Election { leaders: k } | Rule::Semaphore { permits: k } => k,
            Rule::Mutex | Rule::Read | Rule::Write => 1,
        }
    }
    /// Which node a follower watches.
    pub fn strategy(&self) -> WatchStrategy {
        self.strategy
    }
    /// What a leader does on a suspended connection.
    pub fn policy(&self) -> ConnectionPolicy {
        self.policy
    }
    /// The ACL for created nodes.
    pub fn acl(&self) -> Acl {
        match self.acl {
            AclKind::Open => Acl::Open,
            AclKind::CreatorAll => Acl::CreatorAll,
            AclKind::CreatorAllWorldRead => Acl::CreatorAllWorldRead,
            AclKind::Custom => Acl::Custom(
                self.rare
                    .as_ref()
                    .map(|r| r.acl.to_vec())
                    .unwrap_or_default(),
            ),
        }
    }
    /// Whether missing parents of the election path are created.
    pub fn create_parents(&self) -> bool {
        self.create_parents
    }
    /// Whether the election path itself is created as a container node.
    pub fn container_parent(&self) -> bool {
        self.container_parent
    }
    /// Whether a revoked candidate rejoins at the back of the queue.
    pub fn rejoin_on_revoke(&self) -> bool {
        self.rejoin_on_revoke
    }
    /// Which other library's naming scheme our nodes follow (see [`Interop`]).
    pub fn interop(&self) -> Interop {
        self.interop
    }
    /// Whether node names carry a nonce (`_c_<nonce>-`), fresh for every node:
    /// always, since [`ConfigBuilder::build`] refuses `protected_create(false)`.
    pub fn protected_create(&self) -> bool {
        self.protected_create
    }
    /// Seed for the node-name nonces and the backoff jitter.
    pub fn nonce_seed(&self) -> u64 {
        self.nonce_seed
    }
    /// Shortest retry delay.
    pub fn backoff_min(&self) -> Duration {
        self.rare.as_ref().map_or(BACKOFF_MIN, |r| r.backoff_min)
    }
    /// Longest retry delay.
    pub fn backoff_max(&self) -> Duration {
        self.rare.as_ref().map_or(BACKOFF_MAX, |r| r.backoff_max)
    }
    /// Whether the machine probes the server every third of the session
    /// timeout: always, since [`ConfigBuilder::build`] refuses `probe(false)`.
    pub fn probe(&self) -> bool {
        self.probe
    }
    /// How a waiter takes over ([`ConfigBuilder::takeover`]).
    pub fn takeover(&self) -> Takeover {
        self.takeover
    }
    /// Whether a waiter watches the node below its nearest ones too (the
    /// two-watch takeover of [`Takeover::OnNotification`]): with the
    /// `Predecessor` strategy (the `Parent` strategy's waiters watch no
    /// node below), protected names (a name still listed after a relisting
    /// must be the node watched, its watch still set), without interop
    /// (a Curator reader may be created below a writer's node after it, and
    /// other libraries' names may be unprotected: the books are then not
    /// the shrinking set the scheme counts on), and for every rule but a
    /// reader's. A reader's blockers are the writers below it; its second
    /// watch would be on the writer below the nearest, so every reader
    /// queued between two writers would list when the lower one goes: a
    /// herd as long as that run of readers, where one writer's deletion
    /// now wakes only the readers right above it (and they hold on it).
    pub fn two_watch(&self) -> bool {
        self.takeover == Takeover::OnNotification
            && self.strategy == WatchStrategy::Predecessor
            && self.protected_create
            && self.interop == Interop::None
            && self.rule != Rule::Read
    }

    /// Whether the holder hears of revocation requests written into its
    /// node (see [`ConfigBuilder::revocable`]).
    pub fn revocable(&self) -> bool {
        self.revocable
    }

    /// The bytes stored in the candidate's node: the id, then `\n` and the data if any.
    pub fn node_payload(&self) -> Vec<u8> {
        let data = self.data();
        let mut payload = self.id().as_bytes().to_vec();
        if !data.is_empty() {
            payload.push(b'\n');
            payload.extend_from_slice(data);
        }
        payload
    }
}

/// The bytes a cooperative revocation request writes into a holder's node:
/// Curator's `LockInternals.REVOKE_MESSAGE`, so that a request from either
/// library reaches a holder of either.
pub const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";

/// What a writer that downgraded to a reader puts before its node's payload
/// ([`Candidate::downgrade`](crate::Candidate::downgrade)): a NUL, which no
/// id may hold, so no zkelect payload starts with it by chance.
pub const DOWNGRADED: &[u8] = b"\0read\n";

/// Whether `payload` (a zkelect node's data) says its writer downgraded to
/// a reader.
///
/// ```
/// use zkelect_core::config::{is_downgraded, DOWNGRADED};
/// assert!(is_downgraded(&[DOWNGRADED, b"node-a"].concat()));
/// assert!(!is_downgraded(b"node-a"));
/// ```
pub fn is_downgraded(payload: &[u8]) -> bool {
    payload.starts_with(DOWNGRADED)
}

/// Whether `payload` (a node's data) is a cooperative revocation request:
/// [`REVOKE_MESSAGE`] alone, as every revoker writes it, or after a
/// downgraded writer's mark ([`downgrade_mark`] keeps both).
///
/// The request itself stays exactly Curator's bytes: a Curator holder
/// compares its node's data with them byte for byte (`Arrays.equals` in
/// `LockInternals`), so a request written any other way would never reach
/// it. The marked form is written only by a zkelect writer that downgraded,
/// into its own node, which no Curator holder reads.
///
/// ```
/// use zkelect_core::config::{is_downgraded, is_revocation_request, DOWNGRADED, REVOKE_MESSAGE};
/// assert!(is_revocation_request(REVOKE_MESSAGE));
/// let marked = [DOWNGRADED, REVOKE_MESSAGE].concat();
/// assert!(is_revocation_request(&marked) && is_downgraded(&marked));
/// assert!(!is_revocation_request(b"__REVOKE__\ndata"));
/// ```
pub fn is_revocation_request(payload: &[u8]) -> bool {
    payload.strip_prefix(DOWNGRADED).unwrap_or(payload) == REVOKE_MESSAGE
}

/// What a downgraded writer writes into its node, whose data is now
/// `current`: the mark, then its own payload (`own`,
/// [`Config::node_payload`]), or the revocation request `current` carries.
///
/// Anyone's write over the node replaces the mark (a revoker's request is
/// Curator's bytes alone, written blind: it cannot know the node was
/// marked), and without the mark a reader behind, a listing after a
/// reconnect and an observer see an exclusive writer again. So the writer
/// writes its mark back; over a request it keeps the request too, so that
/// an observer still shows the request, and readers still read past.
///
/// ```
/// use zkelect_core::config::{downgrade_mark, is_revocation_request, split_payload, REVOKE_MESSAGE};
/// let over_request = downgrade_mark(REVOKE_MESSAGE, b"w\nx");
/// assert!(is_revocation_request(&over_request));
/// let over_other = downgrade_mark(b"an operator's bytes", b"w\nx");
/// assert_eq!(split_payload(&over_other), ("w".to_owned(), b"x".to_vec()));
/// ```
pub fn downgrade_mark(current: &[u8], own: &[u8]) -> Vec<u8> {
    let kept = if is_revocation_request(current) {
        REVOKE_MESSAGE
    } else {
        own
    };
    [DOWNGRADED, kept].concat()
}

/// What a node's data says of its participant, as an observer reads it:
/// a revocation request ([`is_revocation_request`]), which leaves nothing
/// of the id behind, or the id and data [`split_payload`] finds.
///
/// ```
/// use zkelect_core::config::identity_of;
/// use zkelect_core::Identity;
/// assert_eq!(identity_of(b"__REVOKE__"), Identity::RevocationRequest);
/// assert_eq!(identity_of(b"\0read\n__REVOKE__"), Identity::RevocationRequest);
/// assert_eq!(identity_of(b"a\nx"), Identity::Known { id: "a".into(), data: b"x".to_vec() });
/// ```
pub fn identity_of(payload: &[u8]) -> Identity {
    if is_revocation_request(payload) {
        Identity::RevocationRequest
    } else {
        let (id, data) = split_payload(payload);
        Identity::Known { id, data }
    }
}

/// Splits a node payload written by [`Config::node_payload`] into id and data.
///
/// The payload is the id, then, if the candidate was given data
/// ([`ConfigBuilder::data`]), a `\n` and the data. An id cannot hold a `\n`
/// ([`ConfigBuilder::build`] refuses one), so the first `\n` is the split. An id
/// that is not UTF-8 (a foreign writer's) is read lossily. Foreign nodes (a
/// Curator LeaderLatch or a kazoo Election stores its id alone) come back as
/// id only. [`Observer`](crate::Observer) reads participants' ids with it.
///
/// ```
/// use zkelect_core::config::split_payload;
/// assert_eq!(split_payload(b"node-a\nhttp://10.0.0.7:8080"),
///            ("node-a".to_owned(), b"http://10.0.0.7:8080".to_vec()));
/// assert_eq!(split_payload(b"curator-id"), ("curator-id".to_owned(), vec![]));
/// assert_eq!(split_payload(b""), (String::new(), vec![]));
/// // A downgraded writer's payload reads as it was.
/// assert_eq!(split_payload(b"\0read\nnode-a\nx"), ("node-a".to_owned(), b"x".to_vec()));
/// ```
pub fn split_payload(payload: &[u8]) -> (String, Vec<u8>) {
    let payload = payload.strip_prefix(DOWNGRADED).unwrap_or(payload);
    match payload.iter().position(|&b| b == b'\n') {
        Some(i) => (
            String::from_utf8_lossy(&payload[..i]).into_owned(),
            payload[i + 1..].to_vec(),
        ),
        None => (String::from_utf8_lossy(payload).into_owned(), Vec::new()),
    }
}

/// Builds a [`Config`]; [`build`](Self::build) validates it.
#[derive(Debug, Clone)]
#[must_use]
pub struct ConfigBuilder {
    config: Draft,
}

impl ConfigBuilder {
    /// Extra application data stored in the node after the id (at most 512 KiB).
    pub fn data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.config.data = data.into().into_boxed_slice();
        self
    }
    /// Node-name prefix before the sequence (default `n_`).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.config.prefix = Some(prefix.into().into_boxed_str());
        self
    }
    /// Number of leaders: the k lowest nodes lead (default 1). The same as
    /// `rule(Rule::Election { leaders: k })`.
    pub fn leaders(mut self, k: u32) -> Self {
        self.config.rule = Rule::Election { leaders: k };
        self
    }
    /// The rule of this machine's node (default `Rule::Election { leaders: 1 }`):
    /// an election, a mutex, a semaphore, or a read-write lock's reader or
    /// writer. The last of [`leaders`](Self::leaders) and this wins.
    ///
    /// ```
    /// use zkelect_core::{Config, Rule};
    /// let config = Config::builder("/svc/lock", "node-a").rule(Rule::Mutex).build()?;
    /// assert_eq!((config.prefix(), config.leaders()), ("m_", 1));
    /// # Ok::<(), zkelect_core::ConfigError>(())
    /// ```
    pub fn rule(mut self, rule: Rule) -> Self {
        self.config.rule = rule;
        self
    }
    /// How many of a semaphore's permits this node asks for (default 1): it
    /// holds when the permits asked for by the nodes below it, plus its
    /// own, fit in the semaphore's ([`Recipe::holders`](crate::Recipe::holders)):
    /// fair in arrival order, so a request for 3 is never overtaken by later
    /// requests for 1. The weight is written in the node's name
    /// ([`name::weight_token`](crate::name::weight_token)), so every
    /// participant learns it from a listing. Refused (with
    /// [`ConfigError::InvalidWeight`]) if 0, above the permits, or under any
    /// other rule.
    ///
    /// ```
    /// use zkelect_core::{Config, ConfigError, Rule};
    /// let three = Config::builder("/svc/slots", "a").rule(Rule::Semaphore { permits: 10 }).weight(3).build()?;
    /// assert_eq!((three.weight(), three.room()), (3, 8));
    /// let too_many = Config::builder("/svc/slots", "a").rule(Rule::Semaphore { permits: 2 }).weight(3).build();
    /// assert!(matches!(too_many, Err(ConfigError::InvalidWeight { .. })));
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn weight(mut self, weight: u32) -> Self {
        self.config.weight = weight;
        self
    }
    /// Which node a follower watches (default [`WatchStrategy::Predecessor`]).
    pub fn strategy(mut self, strategy: WatchStrategy) -> Self {
        self.config.strategy = strategy;
        self
    }
    /// Connection policy (default [`ConnectionPolicy::Standard`]).
    pub fn policy(mut self, policy: ConnectionPolicy) -> Self {
        self.config.policy = policy;
        self
    }
    /// ACL for created nodes and parents (default [`Acl::Open`]); a custom
    /// list is checked by [`build`](Self::build) ([`Acl::validate`]).
    ///
    /// ```
    /// use zkelect_core::{Acl, AclEntry, Config, ConfigError, Perms};
    /// let ip = AclEntry::new("ip", "10.0.0.0/8", Perms::ALL)?;
    /// let config = Config::builder("/svc/lock", "a").acl(Acl::Custom(vec![ip])).build();
    /// assert!(config.is_ok());
    /// let read_only = Acl::Custom(vec![AclEntry::anyone(Perms::READ)]);
    /// assert!(matches!(Config::builder("/svc/lock", "a").acl(read_only).build(),
    ///     Err(ConfigError::InvalidAcl(_))));
    /// # Ok::<(), zkelect_core::AclError>(())
    /// ```
    pub fn acl(mut self, acl: Acl) -> Self {
        self.config.acl = acl;
        self
    }
    /// Create missing parents of the election path (default true).
    pub fn create_parents(mut self, yes: bool) -> Self {
        self.config.create_parents = yes;
        self
    }
    /// Create the election path itself as a container node (default false).
    pub fn container_parent(mut self, yes: bool) -> Self {
        self.config.container_parent = yes;
        self
    }
    /// Rejoin at the back after an operator deleted this candidate's node (default true).
    pub fn rejoin_on_revoke(mut self, yes: bool) -> Self {
        self.config.rejoin_on_revoke = yes;
        self
    }
    /// Share the queue with another library's recipe (default [`Interop::None`]):
    /// our nodes are named in its scheme and its nodes queue with ours. Cannot
    /// be combined with [`prefix`](Self::prefix).
    pub fn interop(mut self, scheme: Interop) -> Self {
        self.config.interop = scheme;
        self
    }
    /// Put a nonce in node names, fresh for every node, so a create lost to
    /// ConnectionLoss is found again and a name is never reused (default true;
    /// `false` is refused by [`build`](Self::build) with
    /// [`ConfigError::Unprotected`]: an orphan of a lost create would block the
    /// queue; the method stays so that configurations written against it keep
    /// building).
    ///
    /// ```
    /// use zkelect_core::{Config, ConfigError};
    /// let off = Config::builder("/svc/leader", "node-a").protected_create(false).build();
    /// assert_eq!(off, Err(ConfigError::Unprotected));
    /// ```
    pub fn protected_create(mut self, yes: bool) -> Self {
        self.config.protected_create = yes;
        self
    }
    /// Seed for nonces and jitter; drivers pass OS randomness, the simulator its seed.
    pub fn nonce_seed(mut self, seed: u64) -> Self {
        self.config.nonce_seed = seed;
        self
    }
    /// How a waiter takes over when a node it watches goes (default
    /// [`Takeover::OnNotification`]): on the notification alone, at 2
    /// requests and 5 packets out per hand-off, or
    /// [`Takeover::Relist`]ing as the other libraries do, one round trip
    /// later, at their 2 requests and 3 packets out.
    ///
    /// ```
    /// use zkelect_core::{Config, Takeover};
    /// let peers = Config::builder("/svc/lock", "a").takeover(Takeover::Relist).build()?;
    /// assert_eq!(peers.takeover(), Takeover::Relist);
    /// assert!(!peers.two_watch());
    /// # Ok::<(), zkelect_core::ConfigError>(())
    /// ```
    pub fn takeover(mut self, takeover: Takeover) -> Self {
        self.config.takeover = takeover;
        self
    }
    /// Hear of cooperative revocation requests (default false): someone
    /// who wants this node's hold writes [`REVOKE_MESSAGE`] (`__REVOKE__`)
    /// into its node, as Curator's `Revoker.attemptRevoke` does, and the
    /// machine reports [`Notice::RevocationRequested`](crate::Notice::RevocationRequested)
    /// — while it waits or while it holds — once per write. The holder decides
    /// whether to let go; nothing is released by the request itself.
    ///
    /// The machine then watches its own node's data (it watches the node
    /// anyway, to learn of its deletion; without revocation a child watch
    /// serves, which no write into the node spends): each write into the
    /// node spends that watch, and it is set again, a read more per write.
    pub fn revocable(mut self, yes: bool) -> Self {
        self.config.revocable = yes;
        self
    }
    /// Retry delays: exponential from `min` to `max`, with deterministic jitter.
    pub fn backoff(mut self, min: Duration, max: Duration) -> Self {
        self.config.backoff_min = min;
        self.config.backoff_max = max;
        self
    }
    /// Probe the server every third of the session timeout (default true;
    /// `false` is refused by [`build`](Self::build) with
    /// [`ConfigError::ProbeOff`]).
    ///
    /// The probe keeps the machine's own view of server contact fresh, so a leader
    /// stops leading when the server goes quiet even if the client library has not
    /// noticed (zookeeper-async notices only after the session has expired). It is
    /// what makes the lease sound: the server cannot expire the session before
    /// the send time of its last answered request plus the timeout. Turning it
    /// off was unsafe (`safety` and `tokens-grow` failures in the
    /// simulator under one-way partitions), so only `true` is accepted; the
    /// method stays so that configurations written against it keep building.
    ///
    /// ```
    /// use zkelect_core::{Config, ConfigError};
    /// let off = Config::builder("/svc/leader", "node-a").probe(false).build();
    /// assert_eq!(off, Err(ConfigError::ProbeOff));
    /// ```
    pub fn probe(mut self, yes: bool) -> Self {
        self.config.probe = yes;
        self
    }

    /// Validates and returns the configuration.
    pub fn build(self) -> Result<Config, ConfigError> {
        let c = self.config;
        validate_path(&c.path)?;
        validate_id(&c.id)?;
        if let Some(prefix) = &c.prefix {
            if c.interop != Interop::None {
                return Err(ConfigError::InteropPrefix(c.interop));
            }
            if matches!(c.rule, Rule::Read | Rule::Write) {
                return Err(ConfigError::InvalidPrefix {
                    prefix: cut(prefix),
                    reason: "a read-write lock's stems are fixed (r_ and w_): they tell readers from writers",
                });
            }
            validate_prefix(prefix)?;
        }
        let k = c.leaders();
        if k == 0 || k > LEADERS_MAX {
            return Err(match c.rule {
                Rule::Semaphore { permits } => ConfigError::InvalidPermits(permits),
                _ => ConfigError::InvalidLeaders(k),
            });
        }
        if c.interop != Interop::None && c.rule.stem(c.interop).is_none() {
            return Err(ConfigError::InteropRule {
                interop: c.interop,
                rule: c.rule,
            });
        }
        if k > 1 && c.interop != Interop::None {
            return Err(ConfigError::InteropLeaders(c.interop));
        }
        if c.data.len() > 512 * 1024 {
            return Err(ConfigError::InvalidId {
                id: cut(&c.id),
                reason: "data larger than 512 KiB would not fit a znode",
            });
        }
        if !c.probe {
            return Err(ConfigError::ProbeOff);
        }
        c.acl.validate()?;
        let weight_error = |reason| ConfigError::InvalidWeight {
            weight: c.weight,
            reason,
        };
        match c.rule {
            _ if c.weight == 0 => return Err(weight_error("a node asks for at least one permit")),
            Rule::Semaphore { permits } if c.weight > permits => {
                return Err(weight_error(
                    "more than the semaphore's permits: it could never hold",
                ))
            }
            Rule::Semaphore { .. } => {}
            _ if c.weight != 1 => {
                return Err(weight_error("only a semaphore's nodes have a weight"))
            }
            _ => {}
        }
        if !c.protected_create {
            return Err(ConfigError::Unprotected);
        }
        if c.backoff_min.is_zero() || c.backoff_min > c.backoff_max {
            return Err(ConfigError::InvalidDuration {
                name: "backoff",
                reason: "min must be positive and no larger than max",
            });
        }
        c.pack()
    }
}

fn cut(s: &str) -> String {
    s.chars().take(64).collect()
}

/// Checks a path against ZooKeeper's rules (`PathUtils.validatePath`, which
/// the server applies to every path it is sent), so that a path the server
/// would refuse is refused before any request:
///
/// - not empty, starts with `/`, does not end with `/`;
/// - no empty component (`//`), no `.` or `..` component;
/// - no NUL, no control character (U+0001–U+001F, U+007F–U+009F);
/// - no character the server refuses as UTF-16: U+D800–U+F8FF (surrogates
///   and private use: every character above U+FFFF, emoji included, is a
///   surrogate pair in Java, so it is refused too), U+FFF0–U+FFFF.
///
/// zkelect also refuses the root and `/zookeeper` (the server's own).
///
/// ```
/// use zkelect_core::config::validate_path;
/// assert!(validate_path("/a/b").is_ok());
/// assert!(validate_path("/café").is_ok());
/// assert!(validate_path("a/b").is_err());
/// assert!(validate_path("/a/").is_err());
/// assert!(validate_path("/a//b").is_err());
/// assert!(validate_path("/a/./b").is_err());
/// assert!(validate_path("/svc/\u{1f680}").is_err()); // an emoji
/// ```
pub fn validate_path(path: &str) -> Result<(), ConfigError> {
    let bad = |reason| {
        Err(ConfigError::InvalidPath {
            path: cut(path),
            reason,
        })
    };
    if path == "/" {
        return bad("the root cannot hold a queue: its nodes need a parent of their own");
    }
    if let Some(reason) = path_rule_broken(path) {
        return bad(reason);
    }
    Ok(())
}

/// Checks the chroot of a connect string (what follows the first `/` of its
/// last server, e.g. `/apps/x` in `zk1:2181,zk2:2181/apps/x`) against the
/// server's path rules, as [`validate_path`] does. `/` alone means no chroot
/// and is accepted.
///
/// ```
/// use zkelect_core::config::validate_chroot;
/// assert!(validate_chroot("/").is_ok());
/// assert!(validate_chroot("/apps/x").is_ok());
/// assert!(validate_chroot("/apps//x").is_err());
/// assert!(validate_chroot("/apps/x/").is_err());
/// ```
pub fn validate_chroot(chroot: &str) -> Result<(), ConfigError> {
    if chroot == "/" {
        return Ok(());
    }
    match path_rule_broken(chroot) {
        Some(reason) => Err(ConfigError::InvalidChroot {
            chroot: cut(chroot),
            reason,
        }),
        None => Ok(()),
    }
}

/// The first of the server's path rules (and zkelect's `/zookeeper` rule)
/// that `path` breaks; the root passes.
fn path_rule_broken(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("empty");
    }
    if !path.starts_with('/') {
        return Some("must start with '/'");
    }
    if path == "/" {
        return None;
    }
    if path.ends_with('/') {
        return Some("must not end with '/'");
    }
    if path.len() > 4096 {
        return Some("longer than 4096 bytes");
    }
    for segment in path[1..].split('/') {
        if segment.is_empty() {
            return Some("empty segment ('//')");
        }
        if segment == "." || segment == ".." {
            return Some("'.' and '..' segments are not allowed");
        }
        if segment == "zookeeper" && path.starts_with("/zookeeper") {
            return Some("/zookeeper is reserved for the server");
        }
        if let Some(reason) = bad_chars(segment) {
            return Some(reason);
        }
    }
    None
}

/// Characters ZooKeeper refuses in a path segment, or that zkelect refuses for clarity.
fn bad_chars(s: &str) -> Option<&'static str> {
    // Printable ASCII is none of the below, and nearly every path is that:
    // bytes are cheaper to look at than decoded chars (the simulated server
    // checks every path it is sent).
    if s.bytes().all(|b| matches!(b, 0x20..=0x7e)) {
        return None;
    }
    for ch in s.chars() {
        if ch == '\0' {
            return Some("contains NUL");
        }
        if ch.is_control() {
            return Some("contains a control character");
        }
        // The server checks UTF-16 code units: U+D800..U+F8FF (surrogates,
        // which a Rust `char` cannot be, and the private use area) and
        // U+FFF0..U+FFFF. Every character above U+FFFF is a surrogate pair
        // in Java, so the server refuses it too (emoji among them).
        if matches!(ch, '\u{e000}'..='\u{f8ff}' | '\u{fff0}'..='\u{ffff}') {
            return Some("contains a character ZooKeeper refuses (U+E000..U+F8FF, U+FFF0..U+FFFF)");
        }
        if u32::from(ch) > 0xffff {
            return Some(
                "contains a character above U+FFFF (an emoji, say): ZooKeeper refuses them",
            );
        }
    }
    None
}

fn validate_id(id: &str) -> Result<(), ConfigError> {
    let bad = |reason| {
        Err(ConfigError::InvalidId {
            id: cut(id),
            reason,
        })
    };
    if id.is_empty() {
        return bad("empty");
    }
    if id.len() > ID_LEN_MAX {
        return bad("longer than 255 bytes; an id must fit a znode name");
    }
    if id.contains('/') {
        return bad("contains '/'; an id must fit a znode name");
    }
    if id == "." || id == ".." {
        return bad("'.' and '..' are not valid znode names");
    }
    if id.as_bytes() == REVOKE_MESSAGE {
        // A node whose data is exactly this reads as a revocation request
        // (Curator's and ours), not as a participant of that id.
        return bad("is the revocation request's text (`__REVOKE__`); a node carrying it reads as a request, not an id");
    }
    if let Some(reason) = bad_chars(id) {
        return bad(reason);
    }
    Ok(())
}

pub(crate) fn validate_prefix(prefix: &str) -> Result<(), ConfigError> {
    let bad = |reason| {
        Err(ConfigError::InvalidPrefix {
            prefix: cut(prefix),
            reason,
        })
    };
    if prefix.is_empty() {
        return bad("empty");
    }
    if prefix.len() > PREFIX_LEN_MAX {
        return bad("longer than 64 bytes");
    }
    if prefix.contains('/') {
        return bad("contains '/'");
    }
    if prefix.starts_with("_c_") {
        return bad("'_c_' is reserved for protected names");
    }
    if prefix.ends_with(|c: char| c.is_ascii_digit()) {
        return bad("must not end with a digit (the sequence follows it)");
    }
    if let Some(reason) = bad_chars(prefix) {
        return bad(reason);
    }
    if FOREIGN_STEMS.iter().any(|stem| prefix.contains(stem)) {
        return bad("names another library's lock (Curator, kazoo): use Interop instead");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_zookeeper_rules() {
        for good in [
            "/a",
            "/a/b",
            "/svc/leader-1",
            "/é",
            "/a.b/..c/.d",
            "/\u{ffef}",
        ] {
            assert!(validate_path(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "a",
            "/",
            "/a/",
            "//a",
            "/a//b",
            "/a/./b",
            "/a/../b",
            "/a\0b",
            "/zookeeper/x",
            "/zookeeper",
            "/a\nb",
            "/a/..",
            "/.",
            "/a\u{1}",
            "/a\u{7f}",
            "/a\u{9f}",
            "/a\u{e000}",
            "/a\u{f8ff}",
            "/a\u{fff0}",
            "/a\u{ffff}",
            "/svc/\u{1f680}",
            "/\u{10000}",
        ] {
            assert!(validate_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn chroots_follow_the_same_rules_and_the_root_means_none() {
        for good in ["/", "/a", "/apps/x", "/é"] {
            assert_eq!(validate_chroot(good), Ok(()), "{good}");
        }
        for (bad, why) in [
            ("", "empty"),
            ("apps", "must start"),
            ("/apps//x", "empty segment"),
            ("/apps/x/", "must not end"),
            ("/apps/./x", "'.' and '..'"),
            ("/apps/../x", "'.' and '..'"),
            ("/apps/\u{1f680}", "above U+FFFF"),
            ("/a\u{0}b", "NUL"),
            ("/zookeeper", "reserved"),
        ] {
            match validate_chroot(bad) {
                Err(ConfigError::InvalidChroot { reason, .. }) => {
                    assert!(reason.contains(why), "{bad:?}: {reason}");
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    /// ZooKeeper's own check (`PathUtils.validatePath`) over UTF-16 code
    /// units, transcribed, against ours, on every character class it names.
    #[test]
    fn the_character_rules_agree_with_the_servers_over_utf16() {
        fn server_refuses(path: &str) -> bool {
            let units: Vec<u16> = path.encode_utf16().collect();
            let mut last = u16::from(b'/');
            for (i, &c) in units.iter().enumerate().skip(1) {
                let next_is_end_or_slash = i + 1 == units.len() || units[i + 1] == u16::from(b'/');
                if c == 0
                    || (c == u16::from(b'/') && last == u16::from(b'/'))
                    || (c == u16::from(b'.')
                        && last == u16::from(b'.')
                        && units[i - 2] == u16::from(b'/')
                        && next_is_end_or_slash)
                    || (c == u16::from(b'.') && last == u16::from(b'/') && next_is_end_or_slash)
                    || (c > 0 && c <= 0x1f)
                    || (0x7f..=0x9f).contains(&c)
                    || (0xd800..=0xf8ff).contains(&c)
                    || c >= 0xfff0
                {
                    return true;
                }
                last = c;
            }
            units.len() > 1 && units[units.len() - 1] == u16::from(b'/')
        }
        let samples = (0_u32..0x3_0000)
            .step_by(7)
            .chain([
                0xe000, 0xf8ff, 0xfff0, 0xffff, 0x1_0000, 0x1_f680, 0x10_ffff,
            ])
            .filter_map(char::from_u32);
        for ch in samples {
            let path = format!("/svc/a{ch}b");
            assert_eq!(
                validate_chroot(&path).is_err(),
                server_refuses(&path),
                "U+{:04X}",
                u32::from(ch)
            );
        }
        for path in ["/a/.", "/a/..", "/a/...", "/a/.b", "/a//b", "/a/"] {
            assert_eq!(
                validate_chroot(path).is_err(),
                server_refuses(path),
                "{path}"
            );
        }
    }

    #[test]
    fn ids_must_fit_a_node_name() {
        assert!(validate_id("node-a").is_ok());
        for bad in ["", "a/b", ".", "..", "a\0b", "tab\tid", "__REVOKE__"] {
            assert!(validate_id(bad).is_err(), "{bad:?}");
        }
        assert!(validate_id(&"x".repeat(ID_LEN_MAX)).is_ok());
        assert!(matches!(
            validate_id(&"x".repeat(ID_LEN_MAX + 1)),
            Err(ConfigError::InvalidId { .. })
        ));
    }

    #[test]
    fn prefixes_cannot_confuse_the_sequence_parser() {
        assert!(validate_prefix("n_").is_ok());
        for bad in ["", "a/b", "n1", "_c_x", &"p".repeat(65)] {
            assert!(validate_prefix(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn another_librarys_lock_name_is_refused_as_a_prefix() {
        // Half an interop: Curator or kazoo would see our nodes, we would not see theirs.
        for foreign in [
            "latch-",
            "my-lock-",
            "__lock__",
            "x__rlock__",
            "__READ__",
            "__WRIT__",
        ] {
            let err = Config::builder("/e", "a")
                .prefix(foreign)
                .build()
                .unwrap_err();
            assert!(
                matches!(err, ConfigError::InvalidPrefix { .. }),
                "{foreign:?}: {err}"
            );
            assert!(err.to_string().contains("Interop"), "{err}");
        }
    }

    #[test]
    fn interop_fixes_the_node_name() {
        for (scheme, stem) in [
            (Interop::None, "n_"),
            (Interop::Curator, "latch-"),
            (Interop::Kazoo, "__lock__"),
        ] {
            let c = Config::builder("/e", "a").interop(scheme).build().unwrap();
            assert_eq!(c.prefix(), stem);
            assert_eq!(Interop::from_flag(scheme.flag()), Some(scheme));
            assert!(!c.two_watch() || scheme == Interop::None);
        }
        assert_eq!(
            Config::builder("/e", "a")
                .prefix("x_")
                .interop(Interop::Kazoo)
                .build(),
            Err(ConfigError::InteropPrefix(Interop::Kazoo))
        );
        assert_eq!(
            Config::builder("/e", "a")
                .leaders(2)
                .interop(Interop::Curator)
                .build(),
            Err(ConfigError::InteropLeaders(Interop::Curator))
        );
        assert_eq!(
            Config::builder("/e", "a")
                .prefix("x_")
                .build()
                .map(|c| c.prefix().to_owned()),
            Ok("x_".to_owned())
        );
    }

    #[test]
    fn builder_rejects_bad_settings_with_typed_errors() {
        assert_eq!(
            Config::builder("/e", "a").leaders(0).build(),
            Err(ConfigError::InvalidLeaders(0))
        );
        assert!(matches!(
            Config::builder("/e", "a")
                .backoff(Duration::from_secs(2), Duration::from_secs(1))
                .build(),
            Err(ConfigError::InvalidDuration { .. })
        ));
        assert!(matches!(
            Config::builder("e", "a").build(),
            Err(ConfigError::InvalidPath { .. })
        ));
        assert!(matches!(
            Config::builder("/e", "a").data(vec![0; 600 * 1024]).build(),
            Err(ConfigError::InvalidId { .. })
        ));
    }

    /// (rule, interop) → the node's stem, or the typed refusal.
    #[test]
    fn rules_name_their_nodes_per_scheme_and_unsafe_ones_are_refused() {
        let build = |rule, interop| {
            Config::builder("/e", "a")
                .rule(rule)
                .interop(interop)
                .build()
                .map(|c| c.prefix().to_owned())
        };
        let ok = |s: &str| Ok(s.to_owned());
        let cases: &[(Rule, Interop, Result<String, ConfigError>)] = &[
            (Rule::Mutex, Interop::None, ok("m_")),
            (Rule::Semaphore { permits: 3 }, Interop::None, ok("s_")),
            (Rule::Read, Interop::None, ok("r_")),
            (Rule::Write, Interop::None, ok("w_")),
            (Rule::Mutex, Interop::Curator, ok("lock-")),
            (Rule::Read, Interop::Curator, ok("__READ__")),
            (Rule::Write, Interop::Curator, ok("__WRIT__")),
            (Rule::Mutex, Interop::Kazoo, ok("__lock__")),
            (Rule::Read, Interop::Kazoo, ok("__rlock__")),
            (Rule::Write, Interop::Kazoo, ok("__lock__")),
            (
                Rule::Semaphore { permits: 1 },
                Interop::Kazoo,
                Err(ConfigError::InteropRule {
                    interop: Interop::Kazoo,
                    rule: Rule::Semaphore { permits: 1 },
                }),
            ),
            (
                Rule::Semaphore { permits: 2 },
                Interop::Curator,
                Err(ConfigError::InteropRule {
                    interop: Interop::Curator,
                    rule: Rule::Semaphore { permits: 2 },
                }),
            ),
            (
                Rule::Semaphore { permits: 0 },
                Interop::None,
                Err(ConfigError::InvalidPermits(0)),
            ),
            (
                Rule::Election { leaders: 2 },
                Interop::Kazoo,
                Err(ConfigError::InteropLeaders(Interop::Kazoo)),
            ),
        ];
        for (rule, interop, want) in cases {
            assert_eq!(&build(*rule, *interop), want, "{rule:?} {interop:?}");
        }
        assert!(matches!(
            Config::builder("/e", "a")
                .rule(Rule::Read)
                .prefix("x_")
                .build(),
            Err(ConfigError::InvalidPrefix { .. })
        ));
        let sem = Config::builder("/e", "a")
            .rule(Rule::Semaphore { permits: 3 })
            .build()
            .unwrap();
        assert_eq!((sem.leaders(), sem.rule().limit()), (3, 3));
        assert_eq!(
            Config::builder("/e", "a")
                .rule(Rule::Mutex)
                .leaders(2)
                .build()
                .unwrap()
                .rule(),
            Rule::Election { leaders: 2 }
        );
        // The two-watch takeover needs no cooperation from the nodes
        // watched, but a reader's would herd (see `two_watch`).
        let two = |rule, takeover| {
            Config::builder("/e", "a")
                .rule(rule)
                .takeover(takeover)
                .build()
                .unwrap()
                .two_watch()
        };
        for rule in [Rule::Write, Rule::Mutex, Rule::Semaphore { permits: 3 }] {
            assert!(two(rule, Takeover::OnNotification));
            assert!(!two(rule, Takeover::Relist));
        }
        assert!(!two(Rule::Read, Takeover::OnNotification));
    }

    #[test]
    fn probe_off_is_refused() {
        let off = Config::builder("/e", "a").probe(false).build();
        assert_eq!(off, Err(ConfigError::ProbeOff));
        let on = Config::builder("/e", "a").probe(true).build().unwrap();
        assert!(on.probe());
        assert!(Config::builder("/e", "a").build().unwrap().probe());
    }

    #[test]
    fn payload_round_trips() {
        let c = Config::builder("/e", "node-a")
            .data(b"host:1234".to_vec())
            .build()
            .unwrap();
        assert_eq!(
            split_payload(&c.node_payload()),
            ("node-a".into(), b"host:1234".to_vec())
        );
        let plain = Config::builder("/e", "node-b").build().unwrap();
        assert_eq!(plain.node_payload(), b"node-b");
        assert_eq!(split_payload(b"curator-id"), ("curator-id".into(), vec![]));
    }
}
