//! What a process's belief counts for: whether a revoked one is still in
//! its grace, the rule it holds by, whether it holds by its lease.

use zkelect_core::name::Access;
use zkelect_core::{Rule, Timestamp};

use crate::world::{Process, View};

/// How many session timeouts a revoked leader may go on leading while the
/// deletion's notification reaches it.
pub const REVOKE_GRACE: u32 = 1;

/// How many session timeouts a revocable holder may go on holding before
/// it hears a cooperative revocation request written into its node. Two,
/// not one: a request written while the holder is cut off reaches it only
/// once it is back in contact — within one session timeout it is back, or
/// its lease is gone — and its read of the request may be cut off again,
/// leaving it the rest of its lease (the swarm found both, seed 8661 of
/// `0..200000 all`).
pub const REQUEST_GRACE: u32 = 2;

/// Whether `p` is a candidate whose node an operator deleted, which has not
/// learned it yet and is still within its grace: [`REVOKE_GRACE`](super::REVOKE_GRACE) session
/// timeouts of its own awake time since the deletion reached it (see
/// [`Process::revoke_reached`]): a client cannot hear of a deletion before
/// the server it talks to has applied it.
pub(crate) fn revoked_in_grace(world: &View, p: &Process<'_>) -> bool {
    p.revoked_at.is_some_and(|at| {
        let reached = p.revoke_reached.map_or(at, |r| r.max(at));
        let since = reached.max(p.resumed_at);
        p.paused || world.now() < since + p.session_timeout * REVOKE_GRACE
    })
}

/// Whether `p` is a foreign model whose node an operator deleted: its recipe
/// never learns it (Curator and kazoo do not watch their own node), so its
/// belief is stale for good, until it takes a new node. Not zkelect's to
/// answer for, and not a contender.
pub(crate) fn revoked_foreign(p: &Process<'_>) -> bool {
    p.foreign.is_some() && p.revoked_at.is_some()
}

/// The rule `p` holds by: a zkelect candidate's own, a foreign model's a
/// one-leader election (foreign models share election queues only).
pub fn rule_of(p: &Process<'_>) -> Rule {
    p.config.map_or(Rule::default(), |c| c.rule())
}

/// Whether `p` holds alone when it holds (an exclusive node of a rule with
/// limit 1: a one-leader election, a mutex, a writer), as it believes: a
/// writer that downgraded holds shared.
pub(crate) fn exclusive(p: &Process<'_>) -> bool {
    p.candidate.map_or(rule_of(p).access(), |c| c.access()) == Access::Exclusive
}

/// `p` as a checker names it: `p3`, or `p3(curator)` for a foreign model.
pub(crate) fn who(p: &Process<'_>) -> String {
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
pub(crate) fn holds_by_lease(world: &View, p: &Process<'_>) -> bool {
    match p.candidate {
        Some(c) => c.lease_expiry().is_some_and(|until| world.now() < until),
        None => !p.paused && p.resumed_at == Timestamp::ZERO,
    }
}
