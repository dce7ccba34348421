//! What each process's application does: drains its machine after every
//! input, reads its notices, and writes to the fenced resource.

use std::time::Duration;

use zkelect_core::name::Access;
use zkelect_core::{Command, FencingToken, Notice, Role};

use crate::foreign::Scheme;
use crate::invariant::Event;

use super::engine::World;
use super::ev::Ev;
use super::hosting::Intent;
use super::proc::{agent, Member};
use super::text::short;

impl World {
    /// Drains foreign model `pid` (notices, commands, timeout) after it
    /// handled something. `text` says what happened, for a readable trace
    /// only (it is not formatted otherwise).
    pub(super) fn after_foreign(&mut self, pid: usize, text: impl FnOnce() -> String) {
        let Member::Foreign(model) = &mut self.view.procs[pid].member else {
            return;
        };
        let scheme = model.scheme();
        let notices: Vec<Notice> = std::iter::from_fn(|| model.poll_notice()).collect();
        // Taken, not borrowed: `send` below needs the whole world.
        let mut commands = std::mem::take(&mut self.commands);
        commands.extend(std::iter::from_fn(|| model.poll_command()));
        let next = model.poll_timeout();
        let closed = model.is_closed();
        // A foreign model's notices are for the trace and the story: its
        // belief is read from its role, and it has no tokens.
        for n in &notices {
            self.on_foreign_notice(pid, scheme, n);
        }
        let mut verbs = std::mem::take(&mut self.verbs);
        verbs.extend(commands.iter().map(|c| c.request.verb()));
        let agent = agent(&self.view.procs, pid);
        self.trace.step(
            self.view.now,
            pid,
            agent.role(),
            agent.node(),
            agent.watching().as_deref(),
            &verbs,
            || format!("{scheme}: {}", text()),
            &notices,
        );
        verbs.clear();
        self.verbs = verbs;
        for Command { op, request } in commands.drain(..) {
            self.observe(&Event::Emitted { pid, op });
            self.send(pid, op, request, Some(pid), None);
        }
        self.commands = commands;
        if closed && !self.view.procs[pid].session_closed {
            self.close_client(pid);
        }
        self.view.recount_one(pid);
        if next.is_some() && next != self.view.procs[pid].timer_at {
            self.view.procs[pid].timer_at = next;
            if let Some(at) = next {
                self.push(at, Ev::Timer { pid });
            }
        }
    }

    pub(super) fn on_foreign_notice(&mut self, pid: usize, scheme: Scheme, notice: &Notice) {
        match notice {
            Notice::Elected { .. } => {
                self.view.stats.foreign_elections += 1;
                self.tell(format!("p{pid} ({scheme}) believes it leads"));
            }
            Notice::Demoted { reason } => {
                self.tell(format!("p{pid} ({scheme}) stops leading: {reason}"));
            }
            _ => {}
        }
    }

    pub(super) fn on_notice(&mut self, pid: usize, notice: &Notice) {
        if self.narrate {
            let line = match notice {
                Notice::Joined { node } => {
                    Some(format!("p{pid} joined the queue as {}", short(node)))
                }
                Notice::Elected { token } => {
                    Some(format!("p{pid} is elected leader (fencing token {token})"))
                }
                Notice::Demoted { reason } => Some(format!("p{pid} stops leading: {reason}")),
                Notice::Suspended => {
                    Some(format!("p{pid} lost contact with the server: suspended"))
                }
                Notice::Resumed => Some(format!("p{pid} is back in contact with the server")),
                Notice::RevocationRequested => {
                    Some(format!("p{pid} is asked to let go (a revocation request)"))
                }
                Notice::Downgraded => Some(format!("p{pid} downgraded to a reader")),
                Notice::DowngradeRefused { code } => {
                    Some(format!("p{pid}'s downgrade was refused: {code}"))
                }
                Notice::RevocationDelivered { path } => {
                    Some(format!("p{pid} asked {} to let go", short(path)))
                }
                Notice::RevocationFailed(e) => Some(format!("p{pid}'s request to let go: {e}")),
                Notice::LeaderChanged { .. } | Notice::Participants(_) => None,
                Notice::PersistentSkipped { node } => Some(format!(
                    "p{pid} skips {}: a persistent node is no contender",
                    short(node)
                )),
                Notice::TokenRegressed { before, now } => Some(format!(
                    "p{pid}'s new token {now} is below its last one, {before}"
                )),
                Notice::Error(e) => Some(format!("p{pid} failed: {e}")),
            };
            if let Some(line) = line {
                self.tell(line);
            }
        }
        if let Notice::PersistentSkipped { .. } = notice {
            self.view.stats.persistent_skipped += 1;
        }
        if let (Notice::Joined { node }, false) = (notice, self.view.unclaimed.is_empty()) {
            self.claim_deleted(pid, node);
        }
        if let Notice::Downgraded = notice {
            self.view.stats.downgrades += 1;
            // The first downgrade of the run sets the drawn operator's
            // clock (the world's own stream is not drawn from: every other
            // draw of the seed stays put).
            if let (Some(change), 1) = (self.view.swarm.env.acl_change, self.view.stats.downgrades)
            {
                self.push(self.view.now + change.after, Ev::AclChange { pid });
            }
        }
        if let Notice::Elected { .. } = notice {
            if self.view.procs[pid].weight > 1 {
                self.view.stats.weighted_holds += 1;
            }
        }
        if let Notice::RevocationRequested = notice {
            self.view.stats.revocations_heard += 1;
            // Heard: the application decides, and honours one request in two.
            let asked = self.view.procs[pid].asked.take().is_some();
            if asked {
                self.view.recount_one(pid);
            }
            if self.rng.chance(0.5) {
                self.push(self.view.now, Ev::Honour { pid });
            }
        }
        if let Notice::Elected { .. } = notice {
            self.view.stats.elections += 1;
            // The new leader's application starts writing to the fenced resource.
            // Readers share: only exclusive holders write (one at a time).
            let exclusive = self.view.procs[pid]
                .config
                .as_ref()
                .is_none_or(|c| c.rule().access() == Access::Exclusive);
            if self.view.queues[self.view.procs[pid].queue].leaders == 1
                && exclusive
                && !self.view.procs[pid].writing
            {
                self.view.procs[pid].writing = true;
                self.push(self.view.now, Ev::AppWrite { pid });
            }
        }
    }

    /// The leader's application: checks its role and, if it leads, writes with
    /// its token. The write takes a while to land, and lands late if the
    /// process is paused meanwhile — the freeze between check and write that
    /// fencing tokens exist for.
    pub(super) fn app_write(&mut self, pid: usize) {
        let Role::Leader(token) = agent(&self.view.procs, pid).role() else {
            self.view.procs[pid].writing = false;
            return;
        };
        let exclusive = agent(&self.view.procs, pid)
            .candidate()
            .is_none_or(|c| c.access() == Access::Exclusive);
        if !exclusive {
            // It downgraded: a reader writes nothing.
            self.view.procs[pid].writing = false;
            return;
        }
        let lands = self.view.now + Duration::from_millis(self.rng.range(1, 30));
        self.push(lands, Ev::Write { pid, token });
        if self.view.procs[pid].downgrades {
            // Its one write done, it goes on reading: the write lock is
            // downgraded to a read lock.
            self.view.procs[pid].writing = false;
            self.intent(pid, Intent::Downgrade);
            return;
        }
        let next = self.view.now + Duration::from_millis(self.rng.range(50, 250));
        self.push(next, Ev::AppWrite { pid });
    }

    pub(super) fn resource_write(&mut self, pid: usize, token: FencingToken) {
        let max = &mut self.view.resource_max[self.view.procs[pid].queue];
        let accepted = max.is_none_or(|m| token >= m);
        if accepted {
            *max = Some(token);
            self.view.stats.fenced_writes += 1;
        } else {
            let seen = max.map_or(0, |t| t.0);
            self.view.stats.fenced_rejections += 1;
            self.trace.note(self.view.now, Some(pid), 'w', || {
                format!("fenced resource rejects token {token} (has seen {seen})")
            });
        }
        self.observe(&Event::Write {
            pid,
            token,
            accepted,
        });
    }
}
