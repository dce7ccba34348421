//! Multi-locks in the world: each drawn [`MultiLockDraw`] is a multi-lock
//! of one candidate's core `Session` ([`Session::add_multi_lock`]), as the
//! library's handle makes one: the session decides and steps it over its
//! parts' machines and reports through `Event::Group`; the world only
//! starts and releases it, as its application, and keeps a process for
//! each part. Its application holds a while once it holds, releases, and
//! starts again a while after the release.
//!
//! [`Session::add_multi_lock`]: zkelect_core::Session::add_multi_lock

use std::time::Duration;

use zkelect_core::multilock::{GroupNotice, MultiLock};
use zkelect_core::{GroupId, Role, Timestamp};

use crate::swarm::MultiLockDraw;

use super::engine::World;
use super::ev::Ev;
use super::hosting::Woken;
use super::spec::Phase;
use super::view::Group;

impl World {
    /// Adds multi-lock `draw` to its candidate's session (its parts out of
    /// their queues), a process for each part, and starts its application a
    /// little later.
    pub(super) fn spawn_multi_lock(&mut self, draw: &MultiLockDraw) {
        let host = self.view.procs[draw.on].host;
        if self.view.procs[host].session.is_none() {
            return;
        }
        // Each part's configuration as any candidate's of its queue is
        // drawn, for the pid its process will have.
        let base = self.view.procs.len();
        let mut configs = Vec::with_capacity(draw.queues.len());
        for (i, &q) in draw.queues.iter().enumerate() {
            self.joining = q;
            let Some((config, rule)) = self.candidate_config(base + i) else {
                self.joining = 0;
                return;
            };
            configs.push((config, rule, q));
        }
        self.joining = 0;
        let now = self.view.now;
        let Some(session) = self.view.procs[host].session.as_mut() else {
            return;
        };
        let made = session.add_multi_lock(now, configs.iter().map(|(c, _, _)| c.clone()).collect());
        let gid = match made {
            Ok(gid) => gid,
            Err(e) => return self.fail("multi-lock", format!("{e}")),
        };
        let machines = session.group(gid).unwrap_or_default();
        // Each part's process, in the order named (its pid as drawn).
        let mut parts = vec![0; machines.len()];
        for (config, rule, q) in configs {
            let Some(at) = machines
                .iter()
                .position(|&m| session_path(self, host, m).as_deref() == Some(config.path()))
            else {
                return self.fail("multi-lock", format!("no part on {}", config.path()));
            };
            let pid = self.attach_machine(host, machines[at], q, config);
            self.drawn_options(pid, rule);
            parts[at] = pid;
        }
        self.drain(host, &Woken::default(), || "multi-lock added".into());
        let g = self.view.groups.len();
        self.view.groups.push(Group {
            host,
            gid,
            parts,
            give_up: draw.give_up,
        });
        let at = Timestamp::from_millis(self.rng.range(0, 2_000));
        self.push(at, Ev::GroupStart { g });
    }

    /// The multi-lock whose part process `pid` is, if any.
    pub(super) fn group_of(&self, pid: usize) -> Option<usize> {
        self.view.groups.iter().position(|g| g.parts.contains(&pid))
    }

    /// The world's multi-lock that is group `gid` of host `h`'s session.
    pub(super) fn group_named(&self, h: usize, gid: GroupId) -> Option<usize> {
        self.view
            .groups
            .iter()
            .position(|g| g.host == h && g.gid == gid)
    }

    /// Its application starts acquiring multi-lock `g`, while the faults
    /// run (unless its session's process crashed, or a fault closed a part
    /// for good: that multi-lock is over): once they stop, each finishes
    /// what it started, and `multi-lock` judges that it did.
    pub(super) fn group_start(&mut self, g: usize) {
        let Group {
            host, gid, give_up, ..
        } = self.view.groups[g];
        let over = self.view.groups[g].parts.iter().any(|&p| {
            matches!(
                super::proc::agent(&self.view.procs, p).role(),
                Role::Closed | Role::Failed
            )
        });
        if over || self.view.procs[host].crashed || self.view.phase != Phase::Chaos {
            return;
        }
        let now = self.view.now;
        if let Some(session) = self.view.procs[host].session.as_mut() {
            // Gone with its session: nothing to start.
            let _ = session.acquire_group(now, gid, give_up);
        }
        self.drain(host, &Woken::default(), || {
            format!("multi-lock g{g} acquires")
        });
    }

    /// Its application releases multi-lock `g` (once the liveness bound
    /// passed it holds on: a handover then would look like a queue without
    /// its holder to `liveness`).
    pub(super) fn group_release(&mut self, g: usize) {
        if matches!(self.view.phase, Phase::Settled | Phase::Closing) {
            return;
        }
        let Group { host, gid, .. } = self.view.groups[g];
        let now = self.view.now;
        if let Some(session) = self.view.procs[host].session.as_mut() {
            let _ = session.release_group(now, gid);
        }
        self.drain(host, &Woken::default(), || {
            format!("multi-lock g{g} releases")
        });
    }

    /// What multi-lock `g`'s session said of it.
    pub(super) fn group_notice(&mut self, g: usize, notice: GroupNotice) {
        let line = format!("multi-lock g{g}: {notice:?}");
        self.trace.note(self.view.now, None, 'G', || line.clone());
        self.tell(line);
        match notice {
            GroupNotice::Held { .. } => {
                self.view.stats.multi_lock_holds += 1;
                // Shorter once the faults stop, so every multi-lock waiting
                // then has its turn well within the liveness bound.
                let hold = match self.view.phase {
                    Phase::Chaos => Duration::from_millis(self.rng.range(100, 1_500)),
                    _ => Duration::from_millis(self.rng.range(50, 300)),
                };
                self.push(self.view.now + hold, Ev::GroupRelease { g });
            }
            GroupNotice::GaveUp => self.view.stats.multi_lock_give_ups += 1,
            GroupNotice::Lost { .. } | GroupNotice::Failed { .. } => {}
            GroupNotice::Released => {
                let pause = Duration::from_millis(self.rng.range(200, 2_000));
                self.push(self.view.now + pause, Ev::GroupStart { g });
            }
        }
    }
}

/// The path of machine `id` of host `h`'s session.
fn session_path(world: &World, h: usize, id: zkelect_core::MachineId) -> Option<String> {
    let session = world.view.procs[h].session.as_ref()?;
    Some(session.machine(id)?.path().to_owned())
}

impl super::View {
    /// The multi-locks that last on their sessions: each one's decisions
    /// and its parts' pids, in the lock's order.
    pub(crate) fn multi_locks(&self) -> impl Iterator<Item = (&MultiLock, &[usize])> + '_ {
        self.groups.iter().filter_map(|g| {
            let lock = self.procs[g.host].session.as_ref()?.group_lock(g.gid)?;
            Some((lock, g.parts.as_slice()))
        })
    }
}
