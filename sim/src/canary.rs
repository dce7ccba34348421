//! Deliberately broken candidates, to prove each checker can fail.
//!
//! A canary is a real [`Candidate`](zkelect_core::Candidate) that is either
//! configured with a real option that gives up a guarantee, or fed a filtered or
//! rewritten view of the world. Nothing here reaches the core's default path.

use std::time::Duration;

use zkelect_core::name::Access;
use zkelect_core::{
    ConfigBuilder, ConnectionPolicy, CreateMode, Recipe, Reply, Request, Rule, SessionEvent,
    WatchEvent, WatchKind, WatchStrategy, ZkCode,
};

use crate::foreign::Scheme;
use crate::swarm::{Fault, Overrides, Queue, Swarm};

/// A deliberately broken candidate, and the checker that must catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Canary {
    /// Never sees `SessionEvent::Disconnected`, and its client answers its
    /// liveness probes itself (what `Config::probe(false)` amounted to before
    /// the core refused it): it trusts the client library's word that it is
    /// connected, and keeps leading through a partition while the server
    /// expires its session and elects a successor. Targets `safety`.
    IgnoresDisconnect,
    /// Unprotected names, what `Config::protected_create(false)` gave before
    /// the core refused it: its client strips the `_c_<nonce>-` head off its
    /// node's name on the way to the server (the server holds `n_…` only),
    /// and puts it back on its own node's name, once the candidate knows it,
    /// on the way in. A create whose reply is lost to a dropped connection
    /// leaves an orphan node owned by the live session, which its recovery
    /// cannot find by nonce and which blocks the queue. Targets `liveness`.
    Unprotected,
    /// `WatchStrategy::Parent`: every follower watches the parent's children, so
    /// one deletion wakes them all. Targets `no-herd`.
    ParentWatch,
    /// Takes its fencing token from the node's sequence number instead of its
    /// czxid (the create and read replies are rewritten): the sequence wraps past
    /// 2^31−1 to negative numbers (and restarts with a recreated parent), so a
    /// newer leader can hold a lower token and a paused old leader's write gets
    /// accepted after it. Targets `tokens-grow`, and `fencing` when run without it.
    SequenceToken,
    /// Never sees a watch event about its own node: a leader whose node an
    /// operator deleted never learns it (its probe checks only the parent).
    /// Targets `revocation`.
    DeafToOwnNode,
    /// Its client reports the *requested* session timeout in `Connected`
    /// instead of the one the server negotiated (what the zookeeper-async
    /// transport used to do). Run on a server whose maximum is half the
    /// request, under the `SessionAware` policy: a cut-off leader's lease
    /// outlasts its session and it leads beside its successor. Targets `safety`.
    LeasesFromRequest,
    /// Fed Stats whose `ephemeralOwner` is rewritten to non-zero, so it takes
    /// PERSISTENT look-alikes for contenders (run with one of its own scheme
    /// in the queue): it waits forever behind a node that never goes away.
    /// Targets `liveness`.
    PersistentContender,
    /// Queues with Curator or kazoo models but names its own node the old way,
    /// `_c_<nonce>-n_…` (its creates are renamed on the way to the server and
    /// the names translated back on the way in, so it sees a consistent
    /// world), which the foreign recipes do not parse: the oldest foreign node
    /// leads beside the oldest zkelect node. Targets `safety`.
    OneWayInterop,
    /// A reader of a read-write lock that watches its predecessor instead of
    /// the nearest writer below it (its watch requests are redirected to the
    /// node right below its own, and that node's events but its deletion
    /// renamed back to the writer it thinks it watches). When the writer
    /// goes first it never wakes; when its predecessor goes first, the
    /// deletion of a node it does not know it watches is stale to it, and it
    /// never wakes either. Targets `liveness`. (Renaming the deletion too
    /// made it take over beside the writer in some seeds, a `safety` trip
    /// that came first or not as the requests' timing fell.)
    ReaderWatchesPredecessor,
    /// A writer of a read-write lock that does not see the readers in its
    /// listings: it holds beside the readers below it. Targets `safety`.
    WriterIgnoresReaders,
    /// A mutex contender that takes over on any deletion of its predecessor,
    /// without the zero-round-trip condition (the predecessor was the only
    /// node below, or had held): its listings show no node below its
    /// predecessor, so it believes the predecessor is the only one, and a
    /// waiting predecessor's exit hands it the lock beside the holder.
    /// Targets `safety`.
    MutexAnyDeletion,
    /// Runs against an ensemble, and its client forgets the last zxid it has
    /// seen when it reconnects (it sends 0), so a follower behind it admits
    /// it and it trusts that follower's reads: it can see an older view than
    /// it has seen. Targets `single-system-image`.
    TrustsBehind,
    /// Makes the levels of its path the way the core did before it learned
    /// to stop: its client hides a level's create answered `NoNode` and sends
    /// it again at once, with no backoff and no end (the core answered
    /// `NoNode` on the topmost level with the same create, thousands of
    /// times a second on a real server). Run where the connect string's
    /// chroot names no node, so no level can ever be made. Targets
    /// `no-storm`.
    StormingParents,
    /// A semaphore contender drawn to ask for several permits that asks for
    /// one (`weight(1)` over its drawn weight): the weights below it plus
    /// its own no longer decide, so it holds where its real weight does not
    /// fit. Run with every process weighted. Targets `safety`, which counts
    /// each holder by the permits it was drawn to ask for.
    WeightBlind,
    /// Drawn `revocable` but built without it (`revocable(false)`): a
    /// cooperative revocation request written into its node is never
    /// reported. Run with every process drawn revocable and requests in the
    /// plan. Targets `revocation-heard`.
    DeafToRevocation,
    /// Its zookeeper-async transport, at a reconnection, keeps an ask of its
    /// start-up machine already on its way to a member that has not
    /// answered, instead of sending the one the machine makes then (what the
    /// machine did before it asked again at every connection): an outcome
    /// older than the connection, a member's refusal from before it was
    /// back, confirms the bound learned from the other members. Run on an
    /// ensemble whose member down at start comes back with a lower
    /// `maxSessionTimeout` while the clients move. Targets `start-up`.
    ConfirmsOnStaleAsk,
}

/// What a canary may know of its candidate and the world when it rewrites
/// (the world builds it, [`View::canary_view`](crate::world::View::canary_view)).
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// The candidate's interop scheme.
    pub scheme: Scheme,
    /// Its rule.
    pub rule: Rule,
    /// Its node's name, once known.
    pub own: Option<String>,
    /// Its node-name prefix.
    pub prefix: String,
    /// The node it believes it watches (nearest).
    pub watching: Option<String>,
    /// The node right below its own on the server now (only for
    /// [`Canary::ReaderWatchesPredecessor`]).
    pub predecessor: Option<String>,
}

impl Swarm {
    /// `seed`'s scenario for a run with `canary` (its queue, then shaped):
    /// what [`run_seed`](crate::run::run_seed) runs.
    pub fn for_seed(seed: u64, mut overrides: Overrides, canary: Option<Canary>) -> Self {
        if overrides.queue.is_none() {
            overrides.queue = canary.and_then(Canary::queue);
        }
        match canary {
            Some(_) => Self::one_queue_from_seed(seed, overrides).for_canary(canary),
            None => Self::from_seed(seed, overrides),
        }
    }

    /// Shapes the scenario so that `canary`'s hazard is there (see
    /// [`Canary::shape`]); unchanged without one.
    pub fn for_canary(mut self, canary: Option<Canary>) -> Self {
        if let Some(canary) = canary {
            // A canary's seeds keep the world they were documented with:
            // every machine on a session of its own, no observers.
            self.env.hosting = Default::default();
            canary.shape(&mut self);
        }
        self
    }
}

impl Canary {
    /// Every canary.
    pub const ALL: [Canary; 16] = [
        Canary::IgnoresDisconnect,
        Canary::Unprotected,
        Canary::ParentWatch,
        Canary::SequenceToken,
        Canary::DeafToOwnNode,
        Canary::LeasesFromRequest,
        Canary::PersistentContender,
        Canary::OneWayInterop,
        Canary::ReaderWatchesPredecessor,
        Canary::WriterIgnoresReaders,
        Canary::MutexAnyDeletion,
        Canary::TrustsBehind,
        Canary::StormingParents,
        Canary::WeightBlind,
        Canary::DeafToRevocation,
        Canary::ConfirmsOnStaleAsk,
    ];

    /// The queue it runs in: the new rule canaries their rule's, every other
    /// an election (its seeds as they were when every seed was one).
    pub fn queue(self) -> Option<Queue> {
        Some(match self {
            Canary::ReaderWatchesPredecessor | Canary::WriterIgnoresReaders => {
                Queue::ReadWrite { writers: 40 }
            }
            Canary::MutexAnyDeletion => Queue::Mutex,
            Canary::WeightBlind => Queue::Semaphore,
            _ => Queue::Election,
        })
    }

    /// The command-line spelling (`zkelect sim --canary …`, `ZKELECT_CANARY=…`).
    pub fn flag(self) -> &'static str {
        match self {
            Canary::IgnoresDisconnect => "ignores-disconnect",
            Canary::Unprotected => "unprotected",
            Canary::ParentWatch => "parent-watch",
            Canary::SequenceToken => "sequence-token",
            Canary::DeafToOwnNode => "deaf-to-own-node",
            Canary::LeasesFromRequest => "leases-from-request",
            Canary::PersistentContender => "persistent-contender",
            Canary::OneWayInterop => "one-way-interop",
            Canary::ReaderWatchesPredecessor => "reader-watches-predecessor",
            Canary::WriterIgnoresReaders => "writer-ignores-readers",
            Canary::MutexAnyDeletion => "mutex-any-deletion",
            Canary::TrustsBehind => "trusts-behind",
            Canary::StormingParents => "storming-parents",
            Canary::WeightBlind => "weight-blind",
            Canary::DeafToRevocation => "deaf-to-revocation",
            Canary::ConfirmsOnStaleAsk => "confirms-on-stale-ask",
        }
    }

    /// The canary spelled `flag`, if any.
    pub fn from_flag(flag: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.flag() == flag)
    }

    /// The checker this canary is built to trip.
    pub fn target(self) -> &'static str {
        match self {
            Canary::IgnoresDisconnect => "safety",
            Canary::Unprotected => "liveness",
            Canary::ParentWatch => "no-herd",
            Canary::SequenceToken => "tokens-grow",
            Canary::DeafToOwnNode => "revocation",
            Canary::LeasesFromRequest => "safety",
            Canary::PersistentContender => "liveness",
            Canary::OneWayInterop => "safety",
            Canary::ReaderWatchesPredecessor => "liveness",
            Canary::WriterIgnoresReaders => "safety",
            Canary::MutexAnyDeletion => "safety",
            Canary::TrustsBehind => "single-system-image",
            Canary::StormingParents => "no-storm",
            Canary::WeightBlind => "safety",
            Canary::DeafToRevocation => "revocation-heard",
            Canary::ConfirmsOnStaleAsk => "start-up",
        }
    }

    /// The configuration change, if this canary is made by one.
    pub fn configure(self, builder: ConfigBuilder) -> ConfigBuilder {
        match self {
            Canary::ParentWatch => builder.strategy(WatchStrategy::Parent),
            Canary::WeightBlind => builder.weight(1),
            Canary::DeafToRevocation => builder.revocable(false),
            Canary::IgnoresDisconnect
            | Canary::Unprotected
            | Canary::SequenceToken
            | Canary::DeafToOwnNode
            | Canary::LeasesFromRequest
            | Canary::PersistentContender
            | Canary::OneWayInterop
            | Canary::ReaderWatchesPredecessor
            | Canary::WriterIgnoresReaders
            | Canary::MutexAnyDeletion
            | Canary::TrustsBehind
            | Canary::StormingParents
            | Canary::ConfirmsOnStaleAsk => builder,
        }
    }

    /// The drawn options its world runs with: none (every canary's seeds
    /// keep the world they were documented with), but the one whose
    /// guarantee it gives up, for every process.
    pub fn options(self) -> crate::swarm::Options {
        let mut options = crate::swarm::Options::default();
        match self {
            Canary::WeightBlind => options.weighted = 100,
            Canary::DeafToRevocation => options.revocable = 100,
            _ => {}
        }
        options
    }

    /// Shapes a seed's scenario so the hazard this canary mishandles is there
    /// (as [`wants_wrap`](Self::wants_wrap) does for the knobs).
    pub fn shape(self, swarm: &mut Swarm) {
        match self {
            Canary::LeasesFromRequest => {
                // Only a lease outlives a cut-off leader's connection: under the
                // `Standard` policy the client's `Disconnected` suspends it first.
                swarm.policy = ConnectionPolicy::SessionAware;
                let half = swarm.session_timeout.as_millis() as u64 / 2 / 100 * 100;
                swarm.env.min_session_timeout = None;
                swarm.env.max_session_timeout = Some(Duration::from_millis(half.max(1_000)));
            }
            Canary::Unprotected => {
                // zkelect's own scheme (its nonce head is what it strips),
                // without foreign models, and no wiped election: sequences
                // restart there, so a bare name comes back on another's node,
                // which its rewrite would take for its own (the hazard here is
                // the lost create, which liveness catches).
                swarm.env.interop = Scheme::Ours;
                swarm.plan.retain(|(_, f)| *f != Fault::WipeElection);
                swarm.env.foreign = 0;
                for (_, fault) in &mut swarm.plan {
                    if *fault == Fault::SpawnForeign {
                        *fault = Fault::Spawn;
                    }
                }
            }
            Canary::PersistentContender => {
                // A look-alike its own scheme parses, below every contender;
                // no foreign models (they would wait behind it too).
                swarm.env.foreign = 0;
                for (_, fault) in &mut swarm.plan {
                    if *fault == Fault::SpawnForeign {
                        *fault = Fault::Spawn;
                    }
                }
                swarm.env.lookalikes.insert(0, swarm.env.interop);
            }
            Canary::OneWayInterop => {
                swarm.leaders = 1;
                if swarm.env.interop == Scheme::Ours {
                    swarm.env.interop = if swarm.session_timeout.as_millis() / 100 % 2 == 0 {
                        Scheme::Curator
                    } else {
                        Scheme::Kazoo
                    };
                }
                swarm.env.foreign = swarm.env.foreign.max(2);
                let allowed = swarm.env.lookalike_schemes();
                swarm.env.lookalikes.retain(|s| allowed.contains(s));
                if swarm.env.interop == Scheme::Curator {
                    swarm.plan.retain(|(_, f)| {
                        !matches!(
                            f,
                            Fault::TouchData { .. } | Fault::WipeElection | Fault::Lookalike { .. }
                        )
                    });
                }
                swarm.plan.retain(
                    |(_, f)| !matches!(f, Fault::Lookalike { scheme } if !allowed.contains(scheme)),
                );
            }
            Canary::WeightBlind => {
                // Permits enough for weights of 2 and more to differ, and a
                // queue long enough to have several waiting.
                swarm.set_queue(Queue::Semaphore, swarm.leaders.clamp(3, 5));
                swarm.candidates = swarm.candidates.max(4);
            }
            Canary::DeafToRevocation => {
                let seed =
                    swarm.session_timeout.as_millis() as u64 ^ swarm.chaos.as_millis() as u64;
                swarm.ask_revocations(seed, 0.15);
            }
            Canary::ReaderWatchesPredecessor
            | Canary::WriterIgnoresReaders
            | Canary::MutexAnyDeletion => {
                // A queue long enough to have waiters behind waiters.
                swarm.candidates = swarm.candidates.max(4);
            }
            Canary::StormingParents => {
                // Every candidate's connect string names a missing chroot
                // (each on a session of its own: canaries share none).
                swarm.env.chroot = Some(crate::swarm::BadChroot {
                    root: crate::swarm::ChrootRoot::Missing,
                    hosts: (0..swarm.candidates).collect(),
                });
            }
            Canary::ConfirmsOnStaleAsk => {
                swarm.env.ensemble = Some(crate::server::EnsembleSpec::member_back(
                    swarm.session_timeout,
                    swarm.chaos,
                ));
            }
            Canary::TrustsBehind => {
                // An ensemble whose followers lag often.
                let seed =
                    swarm.session_timeout.as_millis() as u64 ^ swarm.chaos.as_millis() as u64;
                swarm.env.ensemble = Some(crate::server::EnsembleSpec::lagging(
                    seed,
                    swarm.chaos,
                    swarm.session_timeout,
                ));
            }
            _ => {}
        }
    }

    /// The session timeout its client reports in `Connected`.
    pub fn reported_timeout(self, negotiated: Duration, requested: Duration) -> Duration {
        if self == Canary::LeasesFromRequest {
            requested
        } else {
            negotiated
        }
    }

    /// Rewrites a request on its way to the server.
    pub fn rewrite_request(self, request: Request, view: &Known) -> Request {
        if self == Canary::ReaderWatchesPredecessor && view.rule == Rule::Read {
            return redirect_watch(request, view);
        }
        let rename: fn(&str) -> String = match self {
            Canary::OneWayInterop => to_server,
            Canary::Unprotected => unprotected,
            _ => return request,
        };
        match request {
            // A sync is made on the queue's own path. Children are listed on
            // it too, whose name is never renamed; a child watch on its own
            // node's is.
            Request::Sync { .. } => request,
            other => other.map_path(rename),
        }
    }

    /// Rewrites a watch event before the candidate sees it (`scheme`: its
    /// interop setting).
    pub fn rewrite_watch(self, mut event: WatchEvent, view: &Known) -> WatchEvent {
        if self == Canary::OneWayInterop {
            event.path = from_server(&event.path, view.scheme);
        }
        if self == Canary::Unprotected {
            event.path = reprotected(&event.path, view.own.as_deref());
        }
        if self == Canary::ReaderWatchesPredecessor
            && view.rule == Rule::Read
            && event.kind != WatchKind::NodeDeleted
        {
            // Any event about another node but its deletion is, to it,
            // about the writer it thinks it watches.
            let name = event.path.rsplit('/').next();
            if let Some(watching) = &view.watching {
                if name != view.own.as_deref() && name != Some(watching.as_str()) {
                    if let Some((dir, _)) = event.path.rsplit_once('/') {
                        event.path = format!("{dir}/{watching}");
                    }
                }
            }
        }
        event
    }

    /// Whether its client answers `request` itself, at once, without the
    /// server: the liveness probe (an `exists` without a watch, which only the
    /// probe sends) of [`Canary::IgnoresDisconnect`].
    pub fn answers_locally(self, request: &Request) -> bool {
        self == Canary::IgnoresDisconnect && matches!(request, Request::Exists { watch: false, .. })
    }

    /// Whether its client sends `request` again at once instead of handing
    /// the candidate `result` ([`Canary::StormingParents`]: a level of the
    /// path, created persistent or as a container, answered `NoNode`).
    pub fn retries_at_once(self, request: &Request, result: &Result<Reply, ZkCode>) -> bool {
        self == Canary::StormingParents
            && *result == Err(ZkCode::NoNode)
            && matches!(
                request,
                Request::Create {
                    mode: CreateMode::Persistent | CreateMode::Container,
                    ..
                }
            )
    }

    /// Whether the candidate gets to see this session event.
    pub fn sees(self, event: SessionEvent) -> bool {
        !(self == Canary::IgnoresDisconnect && event == SessionEvent::Disconnected)
    }

    /// Whether the candidate gets to see a watch event about `path`, given the
    /// name of its own node.
    pub fn sees_watch(self, path: &str, own: Option<&str>) -> bool {
        !(self == Canary::DeafToOwnNode && own.is_some() && path.rsplit('/').next() == own)
    }

    /// Whether the world should start the sequence counter near 2^31 for this
    /// canary (the wrap is what it gets wrong).
    pub fn wants_wrap(self) -> bool {
        self == Canary::SequenceToken
    }

    /// Rewrites the answer to `request` before the candidate sees it
    /// (`scheme`: its interop setting).
    pub fn rewrite(
        self,
        request: &Request,
        result: Result<Reply, ZkCode>,
        view: &Known,
    ) -> Result<Reply, ZkCode> {
        let scheme = view.scheme;
        match self {
            Canary::WriterIgnoresReaders if view.rule == Rule::Write => match result {
                Ok(Reply::Children(children)) => Ok(Reply::Children(
                    children
                        .into_iter()
                        .filter(|c| {
                            zkelect_core::name::parse(c, "", scheme.interop(), Recipe::ReadWrite)
                                .is_none_or(|n| n.access == Access::Exclusive)
                        })
                        .collect(),
                )),
                other => other,
            },
            Canary::MutexAnyDeletion if view.rule == Rule::Mutex => match result {
                Ok(Reply::Children(children)) => {
                    Ok(Reply::Children(only_predecessor_below(children, view)))
                }
                other => other,
            },
            Canary::SequenceToken => sequence_token(request, result),
            Canary::PersistentContender => match result {
                Ok(Reply::Data { data, mut stat }) => {
                    stat.ephemeral_owner = claimed_owner(stat.ephemeral_owner);
                    Ok(Reply::Data { data, stat })
                }
                Ok(Reply::Exists(Some(mut stat))) => {
                    stat.ephemeral_owner = claimed_owner(stat.ephemeral_owner);
                    Ok(Reply::Exists(Some(stat)))
                }
                other => other,
            },
            Canary::Unprotected => match result {
                Ok(Reply::Created { path, stat }) => {
                    // Its own name, with the head it asked for.
                    let asked = request.path().rsplit('/').next().unwrap_or("");
                    let own = ours_tail(asked).map(|(head, _)| {
                        let name = path.rsplit('/').next().unwrap_or("");
                        format!("{head}{name}")
                    });
                    let path = match &own {
                        Some(own) => reprotected(&path, Some(own)),
                        None => path,
                    };
                    Ok(Reply::Created { path, stat })
                }
                Ok(Reply::Children(children)) => Ok(Reply::Children(
                    children
                        .iter()
                        .map(|c| reprotected(c, view.own.as_deref()))
                        .collect(),
                )),
                other => other,
            },
            Canary::OneWayInterop => match result {
                Ok(Reply::Created { path, stat }) => Ok(Reply::Created {
                    path: from_server(&path, scheme),
                    stat,
                }),
                Ok(Reply::Children(children)) => Ok(Reply::Children(
                    children.iter().map(|c| from_server(c, scheme)).collect(),
                )),
                other => other,
            },
            _ => result,
        }
    }
}

/// [`Canary::ReaderWatchesPredecessor`]: a watch set on another node goes to
/// the node right below its own instead.
fn redirect_watch(request: Request, view: &Known) -> Request {
    let Some(pred) = &view.predecessor else {
        return request;
    };
    let other = |path: &str| {
        let name = path.rsplit('/').next();
        name != view.own.as_deref() && name != Some(pred.as_str())
    };
    let moved = |path: &str| match path.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/{pred}"),
        None => pred.clone(),
    };
    match request {
        Request::GetData { path, watch: true } if other(&path) => Request::GetData {
            path: moved(&path),
            watch: true,
        },
        Request::Exists { path, watch: true } if other(&path) => Request::Exists {
            path: moved(&path),
            watch: true,
        },
        other => other,
    }
}

/// [`Canary::MutexAnyDeletion`]: the listing without the nodes below its
/// predecessor.
fn only_predecessor_below(children: Vec<String>, view: &Known) -> Vec<String> {
    let Some(own) = &view.own else {
        return children;
    };
    let interop = view.scheme.interop();
    let (queue, _) = zkelect_core::name::queue(&children, &view.prefix, interop, Recipe::Mutex);
    let Some(at) = queue.iter().position(|n| &n.name == own) else {
        return children;
    };
    let hidden: Vec<&str> = queue[..at.saturating_sub(1)]
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    children
        .into_iter()
        .filter(|c| !hidden.contains(&c.as_str()))
        .collect()
}

/// A session id no simulated session has (they start at 0x100), claimed as
/// the owner of a persistent node.
fn claimed_owner(owner: i64) -> i64 {
    if owner == 0 {
        0x7e57
    } else {
        owner
    }
}

/// The length of zkelect's nonce in a protected name.
const NONCE_LEN: usize = zkelect_core::name::NONCE_LEN;

/// The part of a child name after zkelect's `_c_<16 hex>-`, if it is one of
/// zkelect's protected names (Curator's `_c_<uuid>-` has a longer head).
fn ours_tail(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix("_c_")?;
    let nonce = rest.get(..NONCE_LEN)?;
    let tail = rest.get(NONCE_LEN..)?.strip_prefix('-')?;
    nonce
        .bytes()
        .all(|b| b.is_ascii_hexdigit())
        .then(|| (&name[..3 + NONCE_LEN + 1], tail))
}

/// Renames zkelect's node in the last segment of `path` to the old scheme:
/// `_c_<nonce>-latch-…` or `_c_<nonce>-__lock__…` becomes `_c_<nonce>-n_…`.
fn to_server(path: &str) -> String {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    let Some((head, tail)) = ours_tail(name) else {
        return path.to_owned();
    };
    for stem in [Scheme::Curator.stem(), Scheme::Kazoo.stem()] {
        if let Some(seq) = tail.strip_prefix(stem) {
            return format!("{dir}/{head}n_{seq}");
        }
    }
    path.to_owned()
}

/// The inverse of [`to_server`] for a candidate whose scheme is `scheme`.
fn from_server(path: &str, scheme: Scheme) -> String {
    let (dir, name) = match path.rsplit_once('/') {
        Some((dir, name)) => (Some(dir), name),
        None => (None, path),
    };
    let renamed = match ours_tail(name) {
        Some((head, tail)) => match tail.strip_prefix("n_") {
            Some(seq) => format!("{head}{}{seq}", scheme.stem()),
            None => return path.to_owned(),
        },
        None => return path.to_owned(),
    };
    match dir {
        Some(dir) => format!("{dir}/{renamed}"),
        None => renamed,
    }
}

/// [`Canary::Unprotected`]: zkelect's node name in the last segment of
/// `path` without its `_c_<nonce>-` head.
fn unprotected(path: &str) -> String {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    match ours_tail(name) {
        Some((_, tail)) => format!("{dir}/{tail}"),
        None => path.to_owned(),
    }
}

/// [`Canary::Unprotected`]: the last segment of `path` (or `path`, a bare
/// name) renamed to `own` if it is `own` without its head; any other name,
/// an orphan of its own included, stays as the server has it.
fn reprotected(path: &str, own: Option<&str>) -> String {
    let Some((own, (_, tail))) = own.and_then(|o| Some((o, ours_tail(o)?))) else {
        return path.to_owned();
    };
    match path.rsplit_once('/') {
        Some((dir, name)) if name == tail => format!("{dir}/{own}"),
        None if path == tail => own.to_owned(),
        _ => path.to_owned(),
    }
}

/// The [`Canary::SequenceToken`] rewrite.
fn sequence_token(request: &Request, result: Result<Reply, ZkCode>) -> Result<Reply, ZkCode> {
    match result {
        Ok(Reply::Created { path, mut stat }) => {
            stat.czxid = sequence_of(&path).unwrap_or(stat.czxid);
            Ok(Reply::Created { path, stat })
        }
        Ok(Reply::Data { data, mut stat }) => {
            stat.czxid = sequence_of(request.path()).unwrap_or(stat.czxid);
            Ok(Reply::Data { data, stat })
        }
        other => other,
    }
}

/// The signed 32-bit sequence suffix of an election node path (after the
/// default `n_` prefix), as ZooKeeper prints it.
fn sequence_of(path: &str) -> Option<i64> {
    let (_, tail) = path.rsplit_once("n_")?;
    zkelect_core::name::parse_sequence(tail).map(i64::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_suffixes_parse_as_signed_numbers() {
        assert_eq!(sequence_of("/e/_c_x-n_0000000042"), Some(42));
        assert_eq!(sequence_of("/e/n_-000000001"), Some(-1));
        assert_eq!(sequence_of("/e/n_-2147483648"), Some(-2_147_483_648));
        assert_eq!(sequence_of("/e/n_short"), None);
    }

    #[test]
    fn one_way_interop_renames_our_nodes_only() {
        let nonce = "0123456789abcdef";
        assert_eq!(
            to_server(&format!("/e/_c_{nonce}-latch-")),
            format!("/e/_c_{nonce}-n_")
        );
        assert_eq!(
            to_server(&format!("/e/_c_{nonce}-__lock__0000000004")),
            format!("/e/_c_{nonce}-n_0000000004")
        );
        let curator = "/e/_c_9f1c6f0e-4b5d-4c1e-9a7b-2d8e0f6a1b3c-latch-0000000002";
        assert_eq!(to_server(curator), curator);
        assert_eq!(
            from_server(&format!("_c_{nonce}-n_0000000004"), Scheme::Kazoo),
            format!("_c_{nonce}-__lock__0000000004")
        );
        assert_eq!(
            from_server(&format!("/e/_c_{nonce}-n_0000000004"), Scheme::Curator),
            format!("/e/_c_{nonce}-latch-0000000004")
        );
        assert_eq!(from_server("n_0000000001", Scheme::Curator), "n_0000000001");
    }

    #[test]
    fn unprotected_strips_and_restores_its_own_head_only() {
        let own = "_c_0123456789abcdef-n_0000000007";
        assert_eq!(unprotected(&format!("/e/{own}")), "/e/n_0000000007");
        assert_eq!(unprotected("/e/_c_0123456789abcdef-n_"), "/e/n_");
        assert_eq!(unprotected("/e/n_0000000003"), "/e/n_0000000003");
        assert_eq!(reprotected("n_0000000007", Some(own)), own);
        assert_eq!(
            reprotected("/e/n_0000000007", Some(own)),
            format!("/e/{own}")
        );
        // An orphan of a lost create stays bare: it cannot be recognised.
        assert_eq!(reprotected("n_0000000006", Some(own)), "n_0000000006");
        assert_eq!(reprotected("n_0000000007", None), "n_0000000007");
    }

    #[test]
    fn flags_round_trip() {
        for c in Canary::ALL {
            assert_eq!(Canary::from_flag(c.flag()), Some(c));
        }
    }
}
