//! Who holds: at most the rule's holders at once (`safety`), a revoked
//! holder learns in time (`revocation`), the fenced resource never lets a
//! deposed holder in (`fencing`), and tokens grow (`tokens-grow`).

use std::collections::BTreeMap;

use zkelect_core::{FencingToken, Notice, Recipe, Role};

use super::belief::{
    exclusive, holds_by_lease, revoked_foreign, revoked_in_grace, rule_of, who, REQUEST_GRACE,
};
use crate::invariant::{Event, Holds, Invariant, Kinds};
use crate::world::{Process, View};

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
/// [`REVOKE_GRACE`](super::REVOKE_GRACE) session timeouts ([`Revocation`] fails after that): the
/// revoked candidate and its successor learn of the deletion at different
/// moments, and a listing the server sent just before the deletion can even
/// make the revoked candidate believe it leads after its successor does (a
/// "ghost" election).
#[derive(Debug, Default)]
pub struct Safety;

impl Invariant<View> for Safety {
    fn name(&self) -> &'static str {
        "safety"
    }

    fn kinds(&self) -> Kinds {
        Kinds::STEP
    }

    fn check_step(&mut self, world: &View) -> Result<Holds, String> {
        // The census counts alone rule a breach out until they change; the
        // full count reads the clock (grace, leases), so its pass is for
        // this step only.
        let mut holds = Holds::UntilCountsChange;
        // Each queue on its own (several recipes on one session).
        for q in 0..world.queues().len() {
            let k = world.leaders_of(q) as usize;
            // The holders counted below are some of the believed leaders:
            // when those are few enough, nothing can be broken (the common
            // step).
            let rw = world.recipe_of(q) == Recipe::ReadWrite;
            let census = world.queue_census(q);
            // Every holder counts its weight (1 but in a weighted semaphore).
            if census.leading_weight <= if rw { 1 } else { k }
                || (rw && census.leading_exclusive == 0)
            {
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
    fn count(world: &View, q: usize, k: usize, rw: bool) -> Result<(), String> {
        let pauses = world.swarm().pauses;
        let counted = |p: &Process<'_>| {
            p.queue == q
                && !p.crashed
                && !revoked_in_grace(world, p)
                && !revoked_foreign(p)
                && (!pauses || holds_by_lease(world, p))
        };
        // One pass over the queue's live believed leaders (the count runs
        // on every step while a paused holder's successor leads).
        let (mut holders, mut weight, mut any_exclusive) = (0usize, 0usize, false);
        for p in world.live_leaders_of(q).filter(counted) {
            holders += 1;
            weight += p.weight as usize;
            any_exclusive |= rw && exclusive(&p);
        }
        // Shared holders (readers) may be any number, but never beside a
        // writer; everyone else: at most k (1 for a mutex or a writer).
        let broken = if rw {
            holders > 1 && any_exclusive
        } else {
            weight > k
        };
        if broken {
            let leaders: Vec<_> = world
                .live_leaders_of(q)
                .filter(counted)
                .map(|p| {
                    format!(
                        "{} {:?} weight {} {:?}",
                        who(&p),
                        rule_of(&p),
                        p.weight,
                        p.agent.role()
                    )
                })
                .collect();
            let rule = match world.recipe_of(q) {
                Recipe::ReadWrite => "a writer holds alone".to_owned(),
                Recipe::Semaphore { .. } => format!("permits asked for at most {k}"),
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
/// [`REVOKE_GRACE`](super::REVOKE_GRACE) session timeouts of its own awake time after the deletion
/// reached it (a paused process cannot learn anything, nor a client whose
/// server has not applied the deletion yet: see
/// [`Process::revoke_reached`](crate::world::Process::revoke_reached)).
#[derive(Debug, Default)]
pub struct Revocation;

impl Invariant<View> for Revocation {
    fn name(&self) -> &'static str {
        "revocation"
    }

    fn kinds(&self) -> Kinds {
        Kinds::STEP
    }

    fn check_step(&mut self, world: &View) -> Result<Holds, String> {
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

/// A revocable holder hears a cooperative revocation request written into
/// its node (`Notice::RevocationRequested`) within
/// [`REQUEST_GRACE`](super::REQUEST_GRACE) session timeouts of its own
/// awake time, as long as it still holds that node and nothing else wrote
/// over the request: the request travels as a data
/// change of a node it watches, so only a machine that does not watch its
/// own node's data (or drops the change) misses it.
#[derive(Debug, Default)]
pub struct RevocationHeard;

impl Invariant<View> for RevocationHeard {
    fn name(&self) -> &'static str {
        "revocation-heard"
    }

    fn kinds(&self) -> Kinds {
        Kinds::STEP
    }

    fn check_step(&mut self, world: &View) -> Result<Holds, String> {
        if world.census().asked == 0 {
            return Ok(Holds::UntilCountsChange);
        }
        for p in world.processes() {
            let Some((node, at)) = p.asked else {
                continue;
            };
            let holds_it =
                matches!(p.agent.role(), Role::Leader(_)) && p.agent.node() == Some(node);
            let since = at.max(p.resumed_at);
            let late = !p.paused && world.now() >= since + p.session_timeout * REQUEST_GRACE;
            if holds_it && !p.crashed && late {
                return Err(format!(
                    "p{} still holds {node} and has not heard the revocation request written into it at {at}",
                    p.pid
                ));
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

impl Invariant<View> for Fencing {
    fn name(&self) -> &'static str {
        "fencing"
    }

    fn kinds(&self) -> Kinds {
        Kinds::REVOKED | Kinds::NOTICE | Kinds::WRITE
    }

    fn check(&mut self, world: &View, event: &Event<'_>) -> Result<(), String> {
        let (Event::Revoked { pid, .. } | Event::Notice { pid, .. } | Event::Write { pid, .. }) =
            *event
        else {
            return Ok(());
        };
        let q = world.queue_of(pid);
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
    fn check(&mut self, world: &View, event: &Event<'_>) -> Result<(), String> {
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

impl Invariant<View> for TokensGrow {
    fn name(&self) -> &'static str {
        "tokens-grow"
    }

    fn kinds(&self) -> Kinds {
        Kinds::NOTICE
    }

    fn check(&mut self, world: &View, event: &Event<'_>) -> Result<(), String> {
        let Event::Notice {
            pid,
            notice: Notice::Elected { token },
        } = *event
        else {
            return Ok(());
        };
        let q = world.queue_of(pid);
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
