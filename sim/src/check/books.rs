//! The books balance: nothing is left behind (`no-leaks`), every command
//! is answered once (`one-answer`), a stale reply changes nothing
//! (`stale-reply`), and nothing fails (`no-error`).

use zkelect_core::{CandidateError, NamespaceFault, Notice, OpId, Role, ZkCode};

use crate::invariant::{Event, Holds, Invariant, Kinds};
use crate::swarm::ChrootRoot;
use crate::world::{Agent, Process, View};

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

impl Invariant<View> for NoLeaks {
    fn name(&self) -> &'static str {
        "no-leaks"
    }

    fn kinds(&self) -> Kinds {
        Kinds::STEP | Kinds::END
    }

    fn check_step(&mut self, world: &View) -> Result<Holds, String> {
        // Until every process is gone, a function of the census counts and
        // the number of processes; then of the tree too (every change of
        // which takes a zxid).
        if world.census().gone != world.processes().len() {
            return Ok(Holds::UntilCountsChange);
        }
        self.check(world, &Event::Step).map(|()| Holds::UntilChange)
    }

    fn check(&mut self, world: &View, event: &Event<'_>) -> Result<(), String> {
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
    fn look(world: &View, end: bool) -> Result<(), String> {
        for q in 0..world.queues().len() {
            Self::look_at(world, q, end)?;
        }
        Ok(())
    }

    /// The look at queue `q`'s path.
    fn look_at(world: &View, q: usize, end: bool) -> Result<(), String> {
        let gone = |p: Process<'_>| {
            p.session_closed
                || (p.crashed && p.session_id.is_none_or(|s| !world.zk().session_alive(s)))
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

/// A session whose credentials the server refused at a reconnect
/// ([`Refusal`](crate::swarm::Refusal)) owns no node once the step that
/// reported the refusal is over: the core's session ends on it, its host
/// closes the client, and the server's session goes with its nodes. Else
/// they block the queue until the session expires, or for ever while a
/// client pings it.
#[derive(Debug, Default)]
pub struct RefusedLeavesNothing;

impl Invariant<View> for RefusedLeavesNothing {
    fn name(&self) -> &'static str {
        "refused-leaves-nothing"
    }

    fn kinds(&self) -> Kinds {
        Kinds::STEP | Kinds::END
    }

    fn check_step(&mut self, world: &View) -> Result<Holds, String> {
        // Most runs refuse nothing: the pass then reads only the refusals,
        // which move the census version as they happen, so it holds until
        // the counts change. Saying `UntilChange` here kept the world from
        // ever skipping a step's checkers on the counts alone: asking them
        // again cost 2.3 % of a run's instructions (callgrind, seeds 0..300
        // of `all`).
        if world.refused().is_none() && world.lapsed().is_empty() {
            return Ok(Holds::UntilCountsChange);
        }
        // Then a function of the tree (its zxid), the refusal (which moves
        // the generation) and the processes.
        self.check(world, &Event::Step).map(|()| Holds::UntilChange)
    }

    fn check(&mut self, world: &View, event: &Event<'_>) -> Result<(), String> {
        if !matches!(event, Event::Step | Event::End) {
            return Ok(());
        }
        // A replay that ran out of time leaves the session as unusable.
        for r in world.refused().iter().chain(world.lapsed()) {
            let owned: Vec<&str> = world.zk().ephemerals(r.session).collect();
            if !owned.is_empty() {
                return Err(format!(
                    "p{}'s credentials were refused at {:?} and its session {} still owns {owned:?}",
                    r.host, r.at, r.session
                ));
            }
        }
        Ok(())
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

impl Invariant<View> for OneAnswer {
    fn name(&self) -> &'static str {
        "one-answer"
    }

    fn kinds(&self) -> Kinds {
        Kinds::EMITTED | Kinds::ANSWERED | Kinds::END
    }

    fn check(&mut self, world: &View, event: &Event<'_>) -> Result<(), String> {
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
                    // A machine that left its session (closed, failed)
                    // needs no answer: its session drops any that comes.
                    .filter(|&(pid, _)| {
                        let p = world.process(pid);
                        !p.crashed && !matches!(p.agent, Agent::Stopped(_))
                    })
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
/// role (compared with the same machine given only the time: its whole
/// session, whose own deadlines, such as a close given up on, act at the
/// same moment whatever input comes).
#[derive(Debug, Default)]
pub struct StaleReply;

impl Invariant<View> for StaleReply {
    fn name(&self) -> &'static str {
        "stale-reply"
    }

    fn kinds(&self) -> Kinds {
        Kinds::ANSWERED
    }

    fn check(&mut self, _world: &View, event: &Event<'_>) -> Result<(), String> {
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
/// (every session is authenticated when the ACL needs it, every path is
/// valid), but a bad chroot, on its sessions, and credentials the server
/// refused, on that session after the refusal.
#[derive(Debug, Default)]
pub struct NoError;

impl Invariant<View> for NoError {
    fn name(&self) -> &'static str {
        "no-error"
    }

    fn kinds(&self) -> Kinds {
        Kinds::NOTICE | Kinds::LIVENESS_DUE
    }

    fn check(&mut self, world: &View, event: &Event<'_>) -> Result<(), String> {
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
                    .config
                    .is_some_and(|c| !c.create_parents() && c.path() == path) =>
                {
                    Ok(())
                }
                // The server refused its session's credentials (the swarm's
                // `Refusal`, already drawn and reported), or zookeeper-async
                // could not replay them within the replay's bound (the
                // core's `ReplayTimedOut`, reported): every machine on that
                // session stops with it, and no other machine may.
                (_, CandidateError::AuthFailed) if world.on_refused_session(*pid) => Ok(()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swarm::{Overrides, Swarm};
    use crate::world::World;

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
