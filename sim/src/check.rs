//! The checkers: every [`Invariant`] sees every step of the [`World`] and every
//! [`Event`] it reports, and says whether its property still holds.
//!
//! # Clock assumptions
//!
//! The checkers rely on the client library's timing, as a real client has it:
//! the client pings every third of the session timeout and declares the
//! connection lost after two thirds without a message from the server; the
//! server expires a session a full timeout after it last heard from it. A
//! candidate therefore learns it is cut off (or, under the `SessionAware`
//! policy, gives up at nine tenths of the timeout, counted from the *send* time
//! of its last answered request) before the server can expire its session and
//! let a successor in. [`Safety`] holds only if that ordering is honoured.
//!
//! # What each checker allows
//!
//! A world may run several queues on other paths, whose machines share
//! sessions (issue 17, [`World::queues`]): every checker judges each queue
//! on its own, by that queue's rule and k, with a fenced resource per queue.
//!
//! Per the queue's rule (issue 13; "leads" below means "holds"): `safety`
//! counts at most k holders for an election or a semaphore, one for a mutex,
//! and in a read-write lock never a writer beside another holder; `fencing`
//! and `tokens-grow` (k = 1 queues) order exclusive holders, a reader's token
//! only against the last exclusive holder's; `liveness` in a read-write lock
//! wants exactly the rule's holders among the live nodes to hold; `no-herd`
//! allows what [`World::herd_bound`] says of the changed node.
//!
//! | checker | fails when |
//! |---|---|
//! | [`Safety`] `safety` | more than k processes believe they lead at once: zkelect candidates holding [`Role::Leader`] and foreign models whose recipe says they hold (in runs with pauses only while their lease holds too; a candidate whose node an operator deleted is not counted until it learns, for at most [`REVOKE_GRACE`] session timeouts; a foreign model so revoked is not counted, it never learns) |
//! | [`Revocation`] `revocation` | a candidate whose node an operator deleted still leads one session timeout (of its own awake time) later |
//! | [`Fencing`] `fencing` | (k = 1) the fenced resource accepts a write from a leader elected before the leader of a write it had already received (a revoked leader's term ends at the deletion) |
//! | [`TokensGrow`] `tokens-grow` | (k = 1) an `Elected` token is lower than the one before it, or equal but for another candidate (a revoked candidate's elections before it learns are not counted) |
//! | [`Liveness`] `liveness` | from [`World::liveness_bound`] after the faults stop until the candidates are closed, fewer than `min(k, live)` leaders (foreign models counted by their own belief) |
//! | [`NoHerd`] `no-herd` | one server change (a deletion, a creation, a data change) makes more than k zkelect candidates (those the swarm drew with the `Parent` strategy left out: they herd by design) send a read that reaches the server (own-node watches, not-yet-informed revoked candidates, and machines whose watch the server set after the change — a shared session's older watch fired — excluded) |
//! | [`NoLeaks`] `no-leaks` | every process is closed or dead with its session gone, and the election path still has children other than the operator's persistent look-alikes |
//! | [`OneAnswer`] `one-answer` | a command is answered twice or never emitted, or (at the end) a live process has a command never answered |
//! | [`StaleReply`] `stale-reply` | a reply to a request the candidate no longer waits for changes its role |
//! | [`NoError`] `no-error` | a candidate reports a fatal error (nothing in the simulation should cause one) |

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use zkelect_core::name::Access;
use zkelect_core::{
    CandidateError, FencingToken, NamespaceFault, Notice, OpId, Recipe, Role, Rule, Timestamp,
    WatchStrategy, ZkCode,
};

use crate::swarm::ChrootRoot;

use crate::invariant::Holds;
pub use crate::invariant::{Event, Invariant, Kinds, Violation};
use crate::world::{Phase, Process, World};

/// A checker of a [`World`], as the world holds it.
pub type Checker = Box<dyn Invariant<World>>;

/// How many session timeouts a revoked leader may go on leading while the
/// deletion's notification reaches it.
pub const REVOKE_GRACE: u32 = 1;

/// The standard checkers for a run.
pub fn standard() -> Vec<Checker> {
    vec![
        // Revocation first: past its grace a revoked leader also counts for
        // safety, and the more specific report is the useful one.
        Box::new(Revocation),
        Box::new(Safety),
        Box::new(Fencing::default()),
        Box::new(TokensGrow::default()),
        Box::new(Liveness::default()),
        Box::new(NoHerd::default()),
        Box::new(NoLeaks::default()),
        Box::new(OneAnswer::default()),
        Box::new(StaleReply),
        Box::new(NoError),
        Box::new(Observers),
        Box::new(crate::server::SingleSystemImage),
        Box::new(NoStorm::default()),
    ]
}

/// Whether `p` is a candidate whose node an operator deleted, which has not
/// learned it yet and is still within its grace: [`REVOKE_GRACE`] session
/// timeouts of its own awake time since the deletion.
fn revoked_in_grace(world: &World, p: &Process<'_>) -> bool {
    p.revoked_at.is_some_and(|at| {
        let since = at.max(p.resumed_at);
        p.paused || world.now() < since + p.session_timeout * REVOKE_GRACE
    })
}

/// Whether `p` is a foreign model whose node an operator deleted: its recipe
/// never learns it (Curator and kazoo do not watch their own node), so its
/// belief is stale for good, until it takes a new node. Not zkelect's to
/// answer for, and not a contender.
fn revoked_foreign(p: &Process<'_>) -> bool {
    p.foreign.is_some() && p.revoked_at.is_some()
}

/// The rule `p` holds by: a zkelect candidate's own, a foreign model's a
/// one-leader election (foreign models share election queues only).
pub fn rule_of(p: &Process<'_>) -> Rule {
    p.candidate.map_or(Rule::default(), |c| c.config().rule())
}

/// Whether `p` holds alone when it holds (an exclusive node of a rule with
/// limit 1: a one-leader election, a mutex, a writer).
fn exclusive(p: &Process<'_>) -> bool {
    rule_of(p).access() == Access::Exclusive
}

/// `p` as a checker names it: `p3`, or `p3(curator)` for a foreign model.
fn who(p: &Process<'_>) -> String {
    match p.foreign {
        Some(scheme) => format!("p{}({scheme})", p.pid),
        None => format!("p{}", p.pid),
    }
}

/// In a run with pauses, whether `p` (which believes it holds) holds by its
/// lease as well: a zkelect candidate while its lease has not run out now (a
/// paused one cannot act on the lapse, so its belief alone says nothing; the
/// lease is what it and whatever acts for it go by); a foreign model, which
/// has no lease, only if it was never paused (a paused Curator or kazoo
/// holder keeps believing past its session: the fenced resource is the
/// answer there, and [`Fencing`] judges it).
fn holds_by_lease(world: &World, p: &Process<'_>) -> bool {
    match p.candidate {
        Some(c) => c.lease_expiry().is_some_and(|until| world.now() < until),
        None => !p.paused && p.resumed_at == Timestamp::ZERO,
    }
}

/// At most k processes believe they lead at once: zkelect
/// candidates holding `Role::Leader`, and foreign models whose own recipe says
/// they hold (with them k is 1). In runs with pauses a process counts only
/// while it also holds by its lease (a zkelect candidate while its lease
/// runs, a foreign model only if never paused): a paused leader whose lease
/// ran out while it was frozen does not count, one still within its lease
/// does.
///
/// A crashed process is not counted (it does nothing), nor a foreign model
/// whose node an operator deleted (it never learns). Nor is a candidate
/// whose node an operator deleted and which has not learned it yet, for at most
/// [`REVOKE_GRACE`] session timeouts ([`Revocation`] fails after that): the
/// revoked candidate and its successor learn of the deletion at different
/// moments, and a listing the server sent just before the deletion can even
/// make the revoked candidate believe it leads after its successor does (a
/// "ghost" election).
#[derive(Debug, Default)]
pub struct Safety;

impl Invariant<World> for Safety {
    fn name(&self) -> &'static str {
        "safety"
    }

    fn kinds(&self) -> Kinds {
        Kinds::STEP
    }

    fn check(&mut self, world: &World, event: &Event<'_>) -> Result<(), String> {
        if !matches!(event, Event::Step) {
            return Ok(());
        }
        self.check_step(world).map(|_| ())
    }

    fn check_step(&mut self, world: &World) -> Result<Holds, String> {
        // The census counts alone rule a breach out until they change; the
        // full count reads the clock (grace, leases), so its pass is for
        // this step only.
        let mut holds = Holds::UntilCountsChange;
        // Each queue on its own (issue 17: several recipes on one session).
        for q in 0..world.queues().len() {
            let k = world.leaders_of(q) as usize;
            // The holders counted below are some of the believed leaders:
            // when those are few enough, nothing can be broken (the common
            // step).
            let rw = world.recipe_of(q) == Recipe::ReadWrite;
            let census = world.queue_census(q);
            if census.leading <= if rw { 1 } else { k } || (rw && census.leading_exclusive == 0) {
                continue;
            }
            Self::count(world, q, k, rw)?;
            holds = Holds::ThisStep;
        }
        Ok(holds)
    }
}

impl Safety {
    /// The full count, when the fast path in `check` cannot rule a breach out
    /// (kept out of line, so the common step's call stays small).
    #[inline(never)]
    fn count(world: &World, q: usize, k: usize, rw: bool) -> Result<(), String> {
        let pauses = world.swarm().pauses;
        let counted = |p: &Process<'_>| {
            p.queue == q
                && !p.crashed
                && !revoked_in_grace(world, p)
                && !revoked_foreign(p)
                && (!pauses || holds_by_lease(world, p))
        };
        let holders = world.believed_leaders().filter(counted).count();
        // Shared holders (readers) may be any number, but never beside a
        // writer; everyone else: at most k (1 for a mutex or a writer).
        let broken = if rw {
            holders > 1
                && world
                    .believed_leaders()
                    .filter(counted)
                    .any(|p| exclusive(&p))
        } else {
            holders > k
        };
        if broken {
            let leaders: Vec<_> = world
                .believed_leaders()
                .filter(counted)
                .map(|p| format!("{} {:?} {:?}", who(&p), rule_of(&p), p.agent.role()))
                .collect();
            let rule = match world.recipe_of(q) {
                Recipe::ReadWrite => "a writer holds alone".to_owned(),
                _ => format!("at most {k}"),
            };
            return Err(format!(
                "{} holders at once in {}, {rule}: {}",
                leaders.len(),
                world.queues()[q].path,
                leaders.join(", ")
            ));
        }
        Ok(())
    }
}

/// A candidate whose node an operator deleted does not lead for more than
/// [`REVOKE_GRACE`] session timeouts of its own awake time after the deletion
/// (a paused process cannot learn anything).
#[derive(Debug, Default)]
pub struct Revocation;

impl Invariant<World> for Revocation {
    fn name(&self) -> &'static str {
        "revocation"
    }

    fn kinds(&self) -> Kinds {
        Kinds::STEP
    }

    fn check(&mut self, world: &World, event: &Event<'_>) -> Result<(), String> {
        if !matches!(event, Event::Step) {
            return Ok(());
        }
        self.check_step(world).map(|_| ())
    }

    fn check_step(&mut self, world: &World) -> Result<Holds, String> {
        // No revoked leader: nothing to judge until the census counts
        // change. With one, the grace reads the clock.
        if world.census().leading_revoked == 0 {
            return Ok(Holds::UntilCountsChange);
        }
        for p in world.revoked_leaders() {
            if let (Some(at), Role::Leader(token)) = (p.revoked_at, p.agent.role()) {
                if !p.crashed && !revoked_in_grace(world, &p) {
                    return Err(format!(
                        "p{} still leads with token {token} although an operator deleted its node at {at}",
                        p.pid
                    ));
                }
            }
        }
        Ok(Holds::ThisStep)
    }
}

/// With k = 1, the fenced resource never accepts a write from a deposed leader.
///
/// Every leader's application writes to a resource now and then, with its
/// fencing token; a write travels for a while and is held up while its process
/// is paused (the process froze between checking its role and writing). The
/// resource accepts a write whose token is not lower than the highest it has
/// seen. A violation is an accepted write from a leadership that was *elected
/// before* the leadership of a write the resource had already received
/// (accepted or not): the resource heard from the newer leader and still let
/// the older one in. Election order is the order of `Elected` notices, not
/// token order, so tokens that fail to grow are caught here (the newer leader's
/// lower token is refused, the deposed leader's higher one let in).
///
/// A revoked candidate's leadership ended when its node was deleted: its
/// writes count as of the election before the deletion, and an election it
/// "wins" before it learns of the deletion (a ghost election, see [`Safety`])
/// counts as that old one too — so the resource may take its writes only until
/// it has accepted one from a leader elected after the deletion.
#[derive(Debug, Default)]
pub struct Fencing {
    /// Per queue: each guards a resource of its own.
    queues: Vec<FencingQueue>,
}

/// [`Fencing`]'s record of one queue.
#[derive(Debug, Default)]
struct FencingQueue {
    /// (pid, token) → election number.
    terms: BTreeMap<(usize, FencingToken), u64>,
    elections: u64,
    /// pid → the election count when an operator deleted its node.
    revoked: BTreeMap<usize, u64>,
    /// The newest election whose write the resource received (accepted or
    /// not), by whom, with which token.
    newest_seen: Option<(u64, usize, FencingToken)>,
}

impl Invariant<World> for Fencing {
    fn name(&self) -> &'static str {
        "fencing"
    }

    fn kinds(&self) -> Kinds {
        Kinds::REVOKED | Kinds::NOTICE | Kinds::WRITE
    }

    fn check(&mut self, world: &World, event: &Event<'_>) -> Result<(), String> {
        let (Event::Revoked { pid, .. } | Event::Notice { pid, .. } | Event::Write { pid, .. }) =
            *event
        else {
            return Ok(());
        };
        let q = world.process(pid).queue;
        if world.leaders_of(q) != 1 {
            return Ok(());
        }
        if self.queues.len() <= q {
            self.queues.resize_with(q + 1, FencingQueue::default);
        }
        self.queues[q].check(world, event)
    }
}

impl FencingQueue {
    fn check(&mut self, world: &World, event: &Event<'_>) -> Result<(), String> {
        match *event {
            Event::Revoked { pid, .. } => {
                self.revoked.insert(pid, self.elections);
            }
            Event::Notice {
                pid,
                notice: Notice::Elected { token },
            } if exclusive(&world.process(pid)) => {
                let term = match (world.process(pid).revoked_at, self.revoked.get(&pid)) {
                    (Some(_), Some(&then)) => then,
                    _ => {
                        self.elections += 1;
                        self.elections
                    }
                };
                self.terms.insert((pid, *token), term);
            }
            Event::Write {
                pid,
                token,
                accepted,
            } => {
                let term = self.terms.get(&(pid, token)).copied().unwrap_or(0);
                if let Some((newest, by, their)) = self.newest_seen {
                    if accepted && term < newest {
                        return Err(format!(
                            "the resource accepted p{pid}'s write with token {token} (election #{term}) after it had seen p{by}'s with token {their} (election #{newest})"
                        ));
                    }
                }
                if self.newest_seen.is_none_or(|(newest, _, _)| term > newest) {
                    self.newest_seen = Some((term, pid, token));
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// With k = 1, each `Elected` carries a higher token than the one before (the
/// same token again only for the same candidate re-verifying its own node).
/// Ghost elections of a revoked candidate (see [`Safety`]) are not counted.
///
/// Per rule (k = 1): an exclusive holder's token (a mutex's, a writer's) is
/// higher than every token elected before it, readers' included (it is
/// above them in the queue, or they came after a node of its that left); a
/// reader's only higher than the last *exclusive* holder's — readers share,
/// and a higher reader may learn it holds before a lower one does.
#[derive(Debug, Default)]
pub struct TokensGrow {
    /// Per queue (tokens are zxids: they grow per queue, interleaved
    /// across queues).
    queues: Vec<TokensQueue>,
}

/// [`TokensGrow`]'s record of one queue.
#[derive(Debug, Default, Clone, Copy)]
struct TokensQueue {
    /// The newest holder of any kind.
    last: Option<(usize, FencingToken)>,
    /// The highest token any holder had, by whom.
    highest: Option<(usize, FencingToken)>,
    /// The newest exclusive holder.
    last_exclusive: Option<(usize, FencingToken)>,
}

impl Invariant<World> for TokensGrow {
    fn name(&self) -> &'static str {
        "tokens-grow"
    }

    fn kinds(&self) -> Kinds {
        Kinds::NOTICE
    }

    fn check(&mut self, world: &World, event: &Event<'_>) -> Result<(), String> {
        let Event::Notice {
            pid,
            notice: Notice::Elected { token },
        } = *event
        else {
            return Ok(());
        };
        let q = world.process(pid).queue;
        if world.leaders_of(q) != 1 || world.process(pid).revoked_at.is_some() {
            return Ok(());
        }
        if self.queues.len() <= q {
            self.queues.resize(q + 1, TokensQueue::default());
        }
        let exclusive = exclusive(&world.process(pid));
        let this = &mut self.queues[q];
        let before = if exclusive {
            this.highest
        } else {
            this.last_exclusive
        };
        if let Some((last_pid, last)) = before {
            if *token < last || (*token == last && last_pid != pid) {
                return Err(format!(
                    "p{pid} elected with token {token} after p{last_pid} had {last}"
                ));
            }
        }
        this.last = Some((pid, *token));
        if this.highest.is_none_or(|(_, t)| *token > t) {
            this.highest = Some((pid, *token));
        }
        if exclusive {
            this.last_exclusive = Some((pid, *token));
        }
        Ok(())
    }
}

/// Once the faults stop, within [`World::liveness_bound`] there are
/// `min(k, live)` leaders in each queue, and there stay that many until the
/// candidates are closed. Live: not crashed, and joined (not idle, closed or
/// failed); a foreign model counts as any candidate (its own belief), unless
/// an operator deleted its node.
#[derive(Debug, Default)]
pub struct Liveness {
    /// Per read-write queue: the live processes' node names (pid order) the
    /// rule was last applied to, and the names it says must hold:
    /// read-write runs check after every settled step, and the queue rarely
    /// changes between two steps.
    must: BTreeMap<usize, (Vec<String>, Vec<String>)>,
    /// The world's [`generation`](World::generation) when the full look last
    /// passed: until a process changes, it would pass again.
    passed: Option<u64>,
}

impl Liveness {
    /// The nodes that must hold among `live`'s (queue `q`'s), by the
    /// read-write rule in queue order (every reader below the lowest writer,
    /// or that writer).
    fn must_hold(&mut self, world: &World, q: usize, live: &[Process<'_>]) -> &[String] {
        let nodes = || live.iter().filter_map(|p| p.agent.node());
        let (names, must) = self.must.entry(q).or_default();
        if !nodes().eq(names.iter().map(String::as_str)) {
            *names = nodes().map(str::to_owned).collect();
            let interop = world.queues()[q].scheme.interop();
            let (queue, _) = zkelect_core::name::queue(names, "", interop, Recipe::ReadWrite);
            *must = Recipe::ReadWrite
                .holders(&queue)
                .into_iter()
                .map(|i| queue[i].name.clone())
                .collect();
        }
        must
    }
}

impl Invariant<World> for Liveness {
    fn name(&self) -> &'static str {
        "liveness"
    }

    fn kinds(&self) -> Kinds {
        Kinds::STEP | Kinds::LIVENESS_DUE
    }

    fn check_step(&mut self, world: &World) -> Result<Holds, String> {
        // Before the settled phase nothing is due (the phase is among the
        // counts); after, a pass on the counts alone stands until they
        // change, and a full look's until a process changes (the census
        // generation and `passed` say so).
        if world.phase() != Phase::Settled {
            return Ok(Holds::UntilCountsChange);
        }
        let counts_alone = (0..world.queues().len()).all(|q| Self::counts_pass(world, q));
        self.check(world, &Event::Step)?;
        Ok(if counts_alone {
            Holds::UntilCountsChange
        } else {
            Holds::UntilChange
        })
    }

    fn check(&mut self, world: &World, event: &Event<'_>) -> Result<(), String> {
        let due = match event {
            Event::LivenessDue => true,
            Event::Step => world.phase() == Phase::Settled,
            _ => false,
        };
        if !due || self.passed == Some(world.generation()) {
            return Ok(());
        }
        // The common settled step: enough leaders in every queue, and (for a
        // read-write lock, where the rule names who must hold) no live node
        // waiting, by the world's running counts; anything else takes the
        // full look.
        let mut verdict = Ok(());
        for q in 0..world.queues().len() {
            if Self::counts_pass(world, q) {
                continue;
            }
            let rw = world.recipe_of(q) == Recipe::ReadWrite;
            verdict = verdict.and_then(|()| self.look(world, q, rw));
        }
        if verdict.is_ok() {
            self.passed = Some(world.generation());
        }
        verdict
    }
}

impl Liveness {
    /// Whether the census counts of queue `q` alone show it live: enough
    /// leaders and (in a read-write lock) no live node waiting.
    fn counts_pass(world: &World, q: usize) -> bool {
        let census = world.queue_census(q);
        let rw = world.recipe_of(q) == Recipe::ReadWrite;
        census.live_leading >= census.live.min(world.leaders_of(q) as usize)
            && !(rw && census.waiting > 0)
    }

    /// The full look at queue `q`, when the census cannot rule a miss out
    /// (kept out of line, so the common step's call stays small).
    #[inline(never)]
    fn look(&mut self, world: &World, q: usize, rw: bool) -> Result<(), String> {
        let is_live = |p: &Process<'_>| {
            p.queue == q
                && !p.crashed
                && !p.observer
                && !revoked_foreign(p)
                && !matches!(p.agent.role(), Role::Idle | Role::Closed | Role::Failed)
        };
        let live: Vec<_> = world.processes().filter(is_live).collect();
        let leaders = live.iter().filter(|p| p.agent.role().is_leader()).count();
        let want = live.len().min(world.leaders_of(q) as usize);
        let path = world.queues()[q].path.as_str();
        let which = if q == 0 {
            String::new()
        } else {
            format!(" in {path}")
        };
        if rw {
            // Who must hold: the rule over the live processes' nodes.
            let must = self.must_hold(world, q, &live);
            let missing: Vec<String> = live
                .iter()
                .filter(|p| {
                    !p.agent.role().is_leader()
                        && p.agent.node().is_some_and(|n| must.iter().any(|m| m == n))
                })
                .map(|p| who(p))
                .collect();
            if !missing.is_empty() || leaders < want {
                let roles: Vec<String> = live
                    .iter()
                    .map(|p| {
                        format!(
                            "{}:{:?}:{}:{:?}",
                            who(p),
                            rule_of(p),
                            p.agent.node().unwrap_or("-"),
                            p.agent.role()
                        )
                    })
                    .collect();
                return Err(format!(
                    "{}ms after the faults stopped{which}, {} should hold and do not (or nobody holds); live: {}; the server's queue: {:?}",
                    world.now().saturating_since(world.healed_at()).as_millis(),
                    missing.join(" "),
                    roles.join(" "),
                    world
                        .children_of(q)
                        .iter()
                        .map(|c| {
                            let owner = world
                                .zk()
                                .stat(&format!("{path}/{c}"))
                                .map_or(0, |s| s.ephemeral_owner);
                            let pid = world
                                .processes()
                                .find(|p| p.session.is_some_and(|s| s.0 == owner))
                                .map(|p| p.pid);
                            format!("{c}@{owner:#x}:{pid:?}")
                        })
                        .collect::<Vec<_>>()
                ));
            }
            return Ok(());
        }
        if leaders < want {
            let roles: Vec<String> = live
                .iter()
                .map(|p| format!("{}:{:?}", who(p), p.agent.role()))
                .collect();
            return Err(format!(
                "{leaders} leader(s) {}ms after the faults stopped{which}, want {want}; live: {}",
                world.now().saturating_since(world.healed_at()).as_millis(),
                roles.join(" ")
            ));
        }
        Ok(())
    }
}

/// One server change wakes at most k followers (the predecessor recipe: each
/// node is watched by the k nodes above it), judged by what the server sees:
/// reads sent on waking from a watch event of that change that reach it. A
/// candidate's own-node watch does not count (the change was to its own node),
/// nor does the watch of a candidate whose node an operator deleted and which
/// has not learned it yet (it is out of the queue, but the watch it set on its
/// old predecessor is still on the server, so it and the deleted node's
/// successor may both watch that predecessor). Nor does a machine whose
/// watch the server set only after the change: on a shared session the
/// change fired the session's older watch, and a lagging event thread hands
/// its event to every machine armed when it arrives (lag seeds 37589, 54755).
/// Only zkelect candidates are counted: the foreign models act on stale
/// watches as their libraries do.
#[derive(Debug, Default)]
pub struct NoHerd {
    woken: BTreeMap<u64, BTreeSet<usize>>,
}

impl Invariant<World> for NoHerd {
    fn name(&self) -> &'static str {
        "no-herd"
    }

    fn kinds(&self) -> Kinds {
        Kinds::WOKEN
    }

    fn check(&mut self, world: &World, event: &Event<'_>) -> Result<(), String> {
        let Event::Woken {
            pid,
            cause,
            allowed,
        } = *event
        else {
            return Ok(());
        };
        // The Parent strategy wakes every watcher of the parent by design:
        // only what the application asked for is allowed (a candidate that
        // herds although it asked for its predecessor is still caught).
        let options = world.knobs().options;
        if options.parent > 0
            && options.process(world.seed(), pid).strategy == WatchStrategy::Parent
        {
            return Ok(());
        }
        let woken = self.woken.entry(cause).or_default();
        woken.insert(pid);
        let k = allowed.max(world.leaders_of(world.process(pid).queue) as usize);
        if woken.len() > k {
            return Err(format!(
                "one server change (#{cause}) made {} candidates read (at most {k}): {:?}",
                woken.len(),
                woken.iter().map(|p| format!("p{p}")).collect::<Vec<_>>()
            ));
        }
        Ok(())
    }
}

/// Once every process has closed, or died and had its session expired, the
/// election path has no children but the persistent look-alikes an operator
/// put there; checked after every step and at the end.
#[derive(Debug, Default)]
pub struct NoLeaks {
    /// The server's zxid and the world's [`generation`](World::generation)
    /// when a look after a step last passed: until the tree or a process
    /// changes (every change of the tree takes a zxid), it would pass again.
    passed: Option<(i64, u64)>,
}

impl Invariant<World> for NoLeaks {
    fn name(&self) -> &'static str {
        "no-leaks"
    }

    fn kinds(&self) -> Kinds {
        Kinds::STEP | Kinds::END
    }

    fn check_step(&mut self, world: &World) -> Result<Holds, String> {
        // Until every process is gone, a function of the census counts and
        // the number of processes; then of the tree too (every change of
        // which takes a zxid).
        if world.census().gone != world.processes().len() {
            return Ok(Holds::UntilCountsChange);
        }
        self.check(world, &Event::Step).map(|()| Holds::UntilChange)
    }

    fn check(&mut self, world: &World, event: &Event<'_>) -> Result<(), String> {
        let check = match event {
            Event::End => true,
            Event::Step => world.census().gone == world.processes().len(),
            _ => false,
        };
        if !check {
            return Ok(());
        }
        let now = Some((world.zk().zxid(), world.generation()));
        if matches!(event, Event::Step) && self.passed == now {
            return Ok(());
        }
        let verdict = Self::look(world, matches!(event, Event::End));
        if verdict.is_ok() {
            self.passed = now;
        }
        verdict
    }
}

impl NoLeaks {
    /// The look at the election path, once every process is gone or at the
    /// end (kept out of line, so the common step's call stays small).
    #[inline(never)]
    fn look(world: &World, end: bool) -> Result<(), String> {
        for q in 0..world.queues().len() {
            Self::look_at(world, q, end)?;
        }
        Ok(())
    }

    /// The look at queue `q`'s path.
    fn look_at(world: &World, q: usize, end: bool) -> Result<(), String> {
        let gone = |p: Process<'_>| {
            p.session_closed
                || (p.crashed && p.session.is_none_or(|s| !world.zk().session_alive(s)))
        };
        let all_gone = || world.processes().all(gone);
        let path = world.queues()[q].path.as_str();
        let left = world.zk().stat(path).map_or(0, |s| s.num_children);
        if left == 0 {
            return Ok(());
        }
        let lookalike = |name: &String| {
            let full = format!("{path}/{name}");
            let listed = match q {
                0 => world.lookalikes().contains(name),
                _ => world.side_lookalikes().contains(&full),
            };
            listed
                && world
                    .zk()
                    .stat(&full)
                    .is_some_and(|s| s.ephemeral_owner == 0)
        };
        // Before the end, a node whose session the server still holds is
        // not leaked yet: a client closed while the server was down (or its
        // close was lost) leaves its session to expire on its own, and the
        // node goes with it (seed 20428 of the lag mix: a kazoo model closed
        // during a server restart). At the end every such session is gone.
        let expiring = |name: &String| {
            !end && world.zk().stat(&format!("{path}/{name}")).is_some_and(|s| {
                s.ephemeral_owner != 0
                    && world
                        .zk()
                        .session_alive(zkelect_core::SessionId(s.ephemeral_owner))
            })
        };
        let leaked: Vec<String> = world
            .zk()
            .children(path)
            .into_iter()
            .filter(|c| !lookalike(c) && !expiring(c))
            .collect();
        if leaked.is_empty() {
            return Ok(());
        }
        if all_gone() {
            return Err(format!(
                "every candidate closed or expired, and {path} still holds {leaked:?}"
            ));
        }
        Err(format!(
            "at the end of the run {path} still holds {leaked:?}"
        ))
    }
}

/// Every command is answered exactly once: never twice, never one that was not
/// emitted, and by the end of the run every command of a process still alive has
/// its answer.
#[derive(Debug, Default)]
pub struct OneAnswer {
    /// Per process, its ops emitted and not yet answered (a handful at a
    /// time, checked twice per request: a vector per process, searched
    /// from its end, where the latest are).
    pending: Vec<Vec<OpId>>,
}

impl Invariant<World> for OneAnswer {
    fn name(&self) -> &'static str {
        "one-answer"
    }

    fn kinds(&self) -> Kinds {
        Kinds::EMITTED | Kinds::ANSWERED | Kinds::END
    }

    fn check(&mut self, world: &World, event: &Event<'_>) -> Result<(), String> {
        match *event {
            Event::Emitted { pid, op } => {
                if self.pending.len() <= pid {
                    self.pending.resize_with(pid + 1, Vec::new);
                }
                let ops = &mut self.pending[pid];
                if ops.iter().rev().any(|&o| o == op) {
                    return Err(format!("p{pid} emitted op {op} twice"));
                }
                ops.push(op);
            }
            Event::Answered { pid, op, .. } => {
                let answered = self.pending.get_mut(pid).and_then(|ops| {
                    let i = ops.iter().rposition(|&o| o == op)?;
                    ops.remove(i);
                    Some(())
                });
                if answered.is_none() {
                    return Err(format!("p{pid} op {op} answered twice (or never emitted)"));
                }
            }
            Event::End => {
                let unanswered: Vec<String> = self
                    .pending
                    .iter()
                    .enumerate()
                    .filter(|&(pid, _)| !world.process(pid).crashed)
                    .flat_map(|(pid, ops)| {
                        let mut ops = ops.clone();
                        ops.sort_unstable();
                        ops.into_iter().map(move |op| format!("p{pid} {op}"))
                    })
                    .collect();
                if !unanswered.is_empty() {
                    return Err(format!("never answered: {}", unanswered.join(", ")));
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// A reply to a request the candidate no longer waits for does not change its
/// role (compared with the same candidate given only the time).
#[derive(Debug, Default)]
pub struct StaleReply;

impl Invariant<World> for StaleReply {
    fn name(&self) -> &'static str {
        "stale-reply"
    }

    fn kinds(&self) -> Kinds {
        Kinds::ANSWERED
    }

    fn check(&mut self, _world: &World, event: &Event<'_>) -> Result<(), String> {
        if let Event::Answered {
            pid,
            op,
            stale: true,
            role_before,
            role_after,
        } = *event
        {
            if role_before != role_after {
                return Err(format!(
                    "p{pid}: the stale reply to {op} changed its role from {role_before:?} to {role_after:?}"
                ));
            }
        }
        Ok(())
    }
}

/// No candidate stops on a fatal error: the simulation gives none a reason to
/// (every session is authenticated when the ACL needs it, every path is valid).
#[derive(Debug, Default)]
pub struct NoError;

impl Invariant<World> for NoError {
    fn name(&self) -> &'static str {
        "no-error"
    }

    fn kinds(&self) -> Kinds {
        Kinds::NOTICE | Kinds::LIVENESS_DUE
    }

    fn check(&mut self, world: &World, event: &Event<'_>) -> Result<(), String> {
        match event {
            Event::Notice {
                pid,
                notice: Notice::Error(e),
            } => match (world.bad_chroot(*pid), e) {
                // What a session under a bad chroot must end with, naming the
                // chroot's fault: `/` is the ephemeral chroot itself, the
                // topmost level of the path has no parent under a missing one.
                (
                    Some(root),
                    CandidateError::Namespace {
                        path,
                        fault: NamespaceFault::Ephemeral,
                    },
                ) if root == ChrootRoot::Ephemeral && path == "/" => Ok(()),
                (
                    Some(root),
                    CandidateError::Namespace {
                        path,
                        fault: NamespaceFault::RootMissing,
                    },
                ) if root == ChrootRoot::Missing && path.matches('/').count() == 1 => Ok(()),
                // A candidate that makes no parents (`create_parents(false)`)
                // cannot tell a missing chroot from a missing path: its
                // election path is missing, as far as it can see.
                (
                    Some(_),
                    CandidateError::Refused {
                        path,
                        code: ZkCode::NoNode,
                        ..
                    },
                ) if world
                    .process(*pid)
                    .candidate
                    .is_some_and(|c| !c.config().create_parents() && c.config().path() == path) =>
                {
                    Ok(())
                }
                _ => Err(format!("p{pid} failed: {e}")),
            },
            // Long before this, every candidate under a bad chroot stopped
            // with that error (an observer there waits on its missing path),
            // unless it left first (closed, resigned, crashed).
            Event::LivenessDue => {
                for p in world.processes() {
                    let Some(c) = p.candidate else { continue };
                    if world.bad_chroot(p.pid).is_some()
                        && !p.crashed
                        && !matches!(c.role(), Role::Failed | Role::Closed | Role::Idle)
                    {
                        return Err(format!(
                            "p{} runs under a bad chroot and has not stopped: {:?}",
                            p.pid,
                            c.role()
                        ));
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// Once the world is quiet ([`Event::Quiet`]: the end of the settled phase,
/// before anyone closes), every live observer has reported, and its
/// participant list is the server's queue: its live (ephemeral) nodes in
/// queue order, each with its czxid as token and whether the recipe says it
/// holds ([`World::queue_truth`]). Observers are never contenders: the
/// other checkers leave them out.
#[derive(Debug, Default)]
pub struct Observers;

impl Invariant<World> for Observers {
    fn name(&self) -> &'static str {
        "observers"
    }

    fn kinds(&self) -> Kinds {
        Kinds::QUIET
    }

    fn check(&mut self, world: &World, event: &Event<'_>) -> Result<(), String> {
        if !matches!(event, Event::Quiet) {
            return Ok(());
        }
        let mut truths: BTreeMap<usize, Vec<(String, FencingToken, bool)>> = BTreeMap::new();
        let nothing = Vec::new();
        for p in world.processes().filter(|p| p.observer && !p.crashed) {
            // Under a bad chroot the queue's path is missing, for good: the
            // truth there is an empty queue.
            let truth = match world.bad_chroot(p.pid) {
                Some(_) => &nothing,
                None => truths
                    .entry(p.queue)
                    .or_insert_with(|| world.queue_truth_of(p.queue)),
            };
            // A closed observer keeps its last list; it is no longer live.
            let Some(o) = p
                .agent
                .observer()
                .filter(|o| !o.is_closed() && !o.is_failed())
            else {
                continue;
            };
            let seen: Vec<(String, FencingToken, bool)> = o
                .participants()
                .iter()
                .map(|x| (x.node.clone(), x.token, x.holds))
                .collect();
            if !o.has_reported() || seen != *truth {
                return Err(format!(
                    "observer p{} of {} (on p{}'s session) reports {seen:?} (reported: {}), the queue is {truth:?}",
                    p.pid,
                    world.queues()[p.queue].path,
                    p.host,
                    o.has_reported()
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swarm::{Overrides, Swarm};

    #[test]
    fn one_answer_catches_a_second_emission_and_a_second_answer() {
        let world = World::new(1, Swarm::from_seed(1, Overrides::default()), None, false);
        let mut checker = OneAnswer::default();
        let answered = |pid, op| Event::Answered {
            pid,
            op: OpId(op),
            stale: false,
            role_before: Role::Idle,
            role_after: Role::Idle,
        };
        let emitted = |pid, op| Event::Emitted { pid, op: OpId(op) };
        assert!(checker.check(&world, &emitted(1, 7)).is_ok());
        assert!(checker.check(&world, &emitted(0, 7)).is_ok());
        assert!(checker.check(&world, &emitted(1, 8)).is_ok());
        assert!(
            checker.check(&world, &emitted(1, 7)).is_err(),
            "emitted twice"
        );
        assert!(checker.check(&world, &answered(1, 7)).is_ok());
        assert!(
            checker.check(&world, &answered(1, 7)).is_err(),
            "answered twice"
        );
        assert!(
            checker.check(&world, &answered(2, 7)).is_err(),
            "never emitted"
        );
        assert!(checker.check(&world, &answered(0, 7)).is_ok());
        assert!(checker.check(&world, &answered(1, 8)).is_ok());
    }
}

/// How long a window [`NoStorm`] counts a session's requests over.
pub const STORM_WINDOW: Duration = Duration::from_secs(10);

/// The requests a zkelect candidate (or a foreign model) may send in one
/// [`STORM_WINDOW`]: 30 a second, sustained. Its main lane sends at most
/// one request per answer and every retry waits a backoff, so the busiest
/// candidate of 40,000 seeds sent 77 in ten seconds (wipes, churn and
/// reconnects included); a loop without a backoff sends one request per
/// round trip, 100 a second and more in the simulator, thousands on a real
/// link.
pub const STORM_PER_MACHINE: usize = 300;

/// What an observer may send in one [`STORM_WINDOW`] besides
/// [`STORM_PER_MACHINE`], per process ever started in its queue (and
/// look-alike): it reads every listed node after each listing, so a change
/// costs it a listing and a read per node. The busiest observer of 40,000
/// seeds sent 454 in ten seconds, its session's other machines included.
pub const STORM_PER_OBSERVED: usize = 100;

/// No session storms the server: the requests that reach the server from
/// one session within any [`STORM_WINDOW`] (a sliding window: a burst at
/// connecting or relisting is absorbed, a loop that goes on is not) stay
/// under the session's budget: [`STORM_PER_MACHINE`] per machine on it, and
/// [`STORM_PER_OBSERVED`] more per process of an observer's queue. In every
/// phase of every seed, persistent errors included (a candidate under a
/// missing or ephemeral chroot must stop, not loop).
#[derive(Debug, Default)]
pub struct NoStorm {
    /// Per session (its host), the arrival times of its requests within
    /// the window, oldest first.
    windows: BTreeMap<usize, VecDeque<Timestamp>>,
    /// Per session, its budget and the process count it was worked out at.
    budgets: BTreeMap<usize, (usize, usize)>,
}

impl NoStorm {
    fn budget(world: &World, host: usize) -> usize {
        let mut budget = 0;
        for p in world.processes().filter(|p| p.host == host) {
            budget += STORM_PER_MACHINE;
            if p.observer {
                let observed = world.processes().filter(|q| q.queue == p.queue).count()
                    + world.lookalikes().len();
                budget += STORM_PER_OBSERVED * observed;
            }
        }
        budget.max(STORM_PER_MACHINE)
    }
}

impl Invariant<World> for NoStorm {
    fn name(&self) -> &'static str {
        "no-storm"
    }

    fn kinds(&self) -> Kinds {
        Kinds::REQUEST
    }

    fn check(&mut self, world: &World, event: &Event<'_>) -> Result<(), String> {
        let Event::Request { host, .. } = event else {
            return Ok(());
        };
        let now = world.now();
        let window = self.windows.entry(*host).or_default();
        window.push_back(now);
        while window.front().is_some_and(|&t| t + STORM_WINDOW <= now) {
            window.pop_front();
        }
        let sent = window.len();
        if sent <= STORM_PER_MACHINE {
            return Ok(());
        }
        // Processes only come (spawns): the budget is worked out again when
        // their number changed.
        let procs = world.processes().len();
        let budget = match self.budgets.get(host) {
            Some(&(at, budget)) if at == procs => budget,
            _ => {
                let budget = Self::budget(world, *host);
                self.budgets.insert(*host, (procs, budget));
                budget
            }
        };
        if sent > budget {
            let first = window.front().copied().unwrap_or(now);
            return Err(format!(
                "p{host}'s session sent {sent} requests in {} ms (from {first} to {now}), more than its {budget} for {} s",
                now.as_millis() - first.as_millis(),
                STORM_WINDOW.as_secs()
            ));
        }
        Ok(())
    }
}
