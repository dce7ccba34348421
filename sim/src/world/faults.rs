//! Faults and operators: what the fault plan injects (drops, partitions, slow
//! links, pauses, crashes, server restarts, application intents) and what an
//! operator does by hand in a one-off session (revoking a node, deleting the
//! election, touching a node's data, creating a persistent look-alike).

use std::rc::Rc;
use std::time::Duration;

use zkelect_core::{
    Acl, AclEntry, CreateMode, FencingToken, Perms, Reply, Request, Role, SessionId, Stat,
    Timestamp, REVOKE_MESSAGE,
};

use super::engine::World;
use super::ev::Ev;
use super::hosting::Intent;
use super::proc::{agent, Conn, Revoked};
use super::spec::Phase;
use super::text::short;
use super::view::AclChanged;
use crate::canary::Canary;
use crate::foreign::{lookalike_stem, Scheme};
use crate::invariant::Event;
use crate::net::Cut;
use crate::server::Server;
use crate::swarm::SideQueue;
use crate::swarm::{ChrootRoot, Fault};
use crate::zk::{Fired, SUPER};

impl World {
    /// An operator's one-off session (zkCli): opened, used, closed.
    pub(super) fn operator<T>(
        &mut self,
        act: impl FnOnce(&mut Server, Timestamp, SessionId) -> (T, Vec<Fired>),
    ) -> Option<T> {
        let identity = self.identity(None);
        self.operator_as(identity, act)
    }

    /// An operator's one-off session authenticated as `identity`.
    fn operator_as<T>(
        &mut self,
        identity: Option<String>,
        act: impl FnOnce(&mut Server, Timestamp, SessionId) -> (T, Vec<Fired>),
    ) -> Option<T> {
        if !self.server_up() {
            return None;
        }
        let (s, _) = self
            .view
            .zk
            .open_session(self.view.now, Duration::from_secs(10), identity);
        let (out, fired) = act(&mut self.view.zk, self.view.now, s);
        self.send_fired(fired);
        let fired = self.view.zk.close_session(s);
        self.send_fired(fired);
        Some(out)
    }

    /// Injects a fault (or an application intent) now, as the plan would;
    /// ignored once the faults have stopped. For hand-written scenarios.
    pub fn inject(&mut self, fault: Fault) {
        if self.view.phase != Phase::Chaos {
            return;
        }
        let valid =
            |pid: usize, w: &Self| pid < w.procs.len() && !w.procs[w.procs[pid].host].crashed;
        let awake = |pid: usize, w: &Self| {
            valid(pid, w) && w.procs[w.procs[pid].host].paused_until.is_none()
        };
        // Faults of the process (its connection, its link, a crash, a pause)
        // hit the machine whose session it runs on, and so every machine
        // there; faults of its node or its recipe hit the machine itself.
        let fault = match fault {
            Fault::DropConnection { pid, applied } if pid < self.view.procs.len() => {
                Fault::DropConnection {
                    pid: self.view.procs[pid].host,
                    applied,
                }
            }
            Fault::Partition { pid, ms } if pid < self.view.procs.len() => Fault::Partition {
                pid: self.view.procs[pid].host,
                ms,
            },
            Fault::PartitionOneWay { pid, ms, to_server } if pid < self.view.procs.len() => {
                Fault::PartitionOneWay {
                    pid: self.view.procs[pid].host,
                    ms,
                    to_server,
                }
            }
            Fault::Pause { pid, ms } if pid < self.view.procs.len() => Fault::Pause {
                pid: self.view.procs[pid].host,
                ms,
            },
            Fault::Crash { pid } if pid < self.view.procs.len() => Fault::Crash {
                pid: self.view.procs[pid].host,
            },
            Fault::LagEvents { pid, ms } if pid < self.view.procs.len() => Fault::LagEvents {
                pid: self.view.procs[pid].host,
                ms,
            },
            Fault::Delay { pid, ms, extra_ms } if pid < self.view.procs.len() => Fault::Delay {
                pid: self.view.procs[pid].host,
                ms,
                extra_ms,
            },
            other => other,
        };
        self.view.stats.faults += 1;
        self.trace
            .fault(self.view.now, fault.target(), || format!("fault: {fault}"));
        let told = match fault {
            Fault::Crash { pid } => Some(format!(
                "p{pid} crashes (its session lives on until the server expires it)"
            )),
            Fault::Partition { pid, ms } => {
                Some(format!("p{pid} is cut off from the server for {ms}ms"))
            }
            Fault::Close { pid } => Some(format!("p{pid} shuts down cleanly")),
            Fault::DropConnection { pid, .. } => Some(format!("p{pid}'s connection drops")),
            Fault::Pause { pid, ms } => Some(format!("p{pid} freezes for {ms}ms")),
            Fault::RestartServer { ms } => Some(format!("the server restarts ({ms}ms down)")),
            Fault::Spawn => Some(format!("a new candidate p{} starts", self.view.procs.len())),
            Fault::Resign { pid, .. } => Some(format!("p{pid} resigns")),
            Fault::Revoke { pid } => Some(format!("an operator deletes p{pid}'s node")),
            Fault::WipeElection => Some("an operator deletes the whole election".to_owned()),
            Fault::SpawnForeign => Some(format!(
                "a new {} contender p{} starts",
                self.view.swarm.env.interop,
                self.view.procs.len()
            )),
            Fault::Lookalike { scheme } => Some(format!(
                "an operator creates a persistent node named like a {scheme} contender"
            )),
            _ => None,
        };
        if let Some(line) = told {
            self.tell(line);
        }
        match fault {
            Fault::DropConnection { pid, applied } if valid(pid, self) => {
                self.drop_connection(pid, applied);
            }
            Fault::Partition { pid, ms } if valid(pid, self) => {
                self.net.partition(pid, self.view.now, ms, Cut::Both);
            }
            Fault::PartitionOneWay { pid, ms, to_server } if valid(pid, self) => {
                let cut = if to_server {
                    Cut::ToServer
                } else {
                    Cut::ToClient
                };
                self.net.partition(pid, self.view.now, ms, cut);
            }
            Fault::Pause { pid, ms } if valid(pid, self) => {
                let until = self.view.now + Duration::from_millis(ms);
                let p = &mut self.view.procs[pid];
                p.paused_until = Some(p.paused_until.map_or(until, |t| t.max(until)));
                self.push(until, Ev::Resume { pid });
            }
            Fault::Crash { pid } if valid(pid, self) => {
                self.view.procs[pid].crashed = true;
                self.view.recount(pid);
            }
            Fault::RestartServer { ms } if self.server_down_until.is_none() => {
                self.server_down_until = Some(self.view.now + Duration::from_millis(ms));
                for pid in 0..self.view.procs.len() {
                    if self.view.procs[pid].crashed || self.view.procs[pid].conn != Conn::Connected
                    {
                        continue;
                    }
                    if self.view.procs[pid].paused_until.is_none() {
                        self.disconnect(pid, "server restarting");
                    } else {
                        // Every connection is reset; a paused process learns it on resuming.
                        let gen = self.view.procs[pid].gen;
                        self.push(self.view.now, Ev::Closed { pid, gen });
                    }
                }
                self.push(self.view.now + Duration::from_millis(ms), Ev::ServerUp);
            }
            // A multi-lock's part is let go of through its multi-lock: its
            // application releases the whole.
            Fault::Resign { pid, .. } if awake(pid, self) && self.group_of(pid).is_some() => {
                if let Some(g) = self.group_of(pid) {
                    self.group_release(g);
                }
            }
            Fault::Resign { pid, rejoin } if awake(pid, self) => {
                self.intent(pid, Intent::Resign { rejoin });
            }
            Fault::Close { pid } if awake(pid, self) => {
                self.intent(pid, Intent::Close);
            }
            Fault::Spawn => self.spawn(),
            Fault::SpawnForeign => self.spawn_foreign(),
            Fault::Lookalike { scheme } => {
                let q = self.pick_queue();
                self.create_lookalike_in(q, scheme, false);
            }
            Fault::Revoke { pid } if valid(pid, self) => self.revoke(pid),
            Fault::LagEvents { pid, ms } if valid(pid, self) => {
                let until = self.view.now + Duration::from_millis(ms);
                let p = &mut self.view.procs[pid];
                p.lag_until = Some(p.lag_until.map_or(until, |t| t.max(until)));
            }
            Fault::WipeElection => {
                let q = self.pick_queue();
                self.wipe(q);
            }
            Fault::TouchData { pid } if valid(pid, self) => self.touch_data(pid),
            Fault::AskRevoke { pid } if valid(pid, self) => self.ask_revoke(pid),
            Fault::Delay { pid, ms, extra_ms } if valid(pid, self) => {
                self.net
                    .slow(pid, self.view.now, ms, Duration::from_millis(extra_ms));
            }
            Fault::CrashLeader
            | Fault::PartitionLeader { .. }
            | Fault::CloseLeader
            | Fault::PauseLeader { .. }
            | Fault::RevokeLeader => {
                let q = self.pick_queue();
                let leader = (0..self.view.procs.len()).find(|&i| {
                    let h = &self.view.procs[self.view.procs[i].host];
                    self.view.procs[i].queue == q
                        && !h.crashed
                        && h.paused_until.is_none()
                        && agent(&self.view.procs, i).role().is_leader()
                });
                if let Some(pid) = leader {
                    let targeted = match fault {
                        Fault::CrashLeader => Fault::Crash { pid },
                        Fault::PartitionLeader { ms } => Fault::Partition { pid, ms },
                        Fault::PauseLeader { ms } => Fault::Pause { pid, ms },
                        Fault::RevokeLeader => Fault::Revoke { pid },
                        _ => Fault::Close { pid },
                    };
                    self.inject(targeted);
                }
            }
            _ => {}
        }
    }

    /// The queue an operator's fault (or a fault aimed at a leader) picks:
    /// the swarm's when it is the only one (no draw, so such seeds run as
    /// before), else any, evenly.
    fn pick_queue(&mut self) -> usize {
        match self.view.queues.len() {
            1 => 0,
            n => self.rng.range(0, n as u64 - 1) as usize,
        }
    }

    /// The connection drops. With `applied`, a prefix (at least one) of the
    /// requests still on their way reaches the server anyway; their replies are
    /// lost. The server sees the connection go, and its watches with it.
    pub(super) fn drop_connection(&mut self, pid: usize, applied: bool) {
        if let (true, Some(s)) = (self.server_up(), self.view.procs[pid].session_id) {
            if self.view.procs[pid].conn == Conn::Connected {
                let pending: Vec<Rc<Request>> = self.view.procs[pid]
                    .on_wire
                    .values()
                    .filter(|sent| !sent.arrived)
                    .map(|sent| Rc::clone(&sent.request))
                    .collect();
                let n = if applied && !pending.is_empty() {
                    self.rng.range(1, pending.len() as u64) as usize
                } else {
                    0
                };
                for request in pending.into_iter().take(n) {
                    let (_, fired) = self.view.zk.apply(self.view.now, s, &request);
                    self.send_fired(fired);
                }
                self.view.zk.connection_closed(s);
            }
        }
        self.disconnect(pid, "connection dropped");
    }

    /// An operator deletes the node the process believes is its own.
    pub(super) fn revoke(&mut self, pid: usize) {
        let Some(node) = agent(&self.view.procs, pid).node().map(str::to_owned) else {
            return;
        };
        let token = match agent(&self.view.procs, pid).role() {
            Role::Leader(t) => Some(t),
            _ => None,
        };
        let path = format!("{}/{node}", self.path_of(pid));
        let deleted = self.operator(|zk, now, s| {
            zk.apply(
                now,
                s,
                &Request::Delete {
                    path: path.clone(),
                    version: None,
                },
            )
        });
        if let Some(Ok(_)) = deleted {
            self.view.stats.revocations += 1;
            self.mark_revoked(pid, node);
            self.trace.note(self.view.now, Some(pid), 'R', || {
                format!("operator deleted {}", short(&path))
            });
            self.view.recount(pid);
            self.observe(&Event::Revoked { pid, token });
        }
    }

    /// An operator deletes the whole election (`deleteall`): every child, then
    /// the path itself. Every candidate with a node there is revoked.
    pub(super) fn wipe(&mut self, q: usize) {
        let root = self.view.queues[q].path.clone();
        let children = self.view.zk.children(&root);
        let owners: Vec<(String, Option<usize>, Option<i64>)> = children
            .into_iter()
            .map(|name| {
                let stat = self.view.zk.stat(&format!("{root}/{name}"));
                let owner = stat.and_then(|stat| self.owner(&name, stat));
                // An ephemeral node no one knows yet is a create whose
                // answer is on its way: its owner learns it after this.
                let unknown = stat.filter(|s| owner.is_none() && s.ephemeral_owner != 0);
                (name, owner, unknown.map(|s| s.czxid))
            })
            .collect();
        let mut deleted = Vec::new();
        let again = !self.view.knobs.options.create_parents;
        let done = self.operator(|zk, now, s| {
            let mut fired = Vec::new();
            for (name, owner, unknown) in &owners {
                let path = format!("{root}/{name}");
                let (r, f) = zk.apply(
                    now,
                    s,
                    &Request::Delete {
                        path,
                        version: None,
                    },
                );
                if r.is_ok() {
                    deleted.push((name.clone(), *owner, *unknown));
                }
                fired.extend(f);
            }
            let (_, f) = zk.apply(
                now,
                s,
                &Request::Delete {
                    path: root.clone(),
                    version: None,
                },
            );
            fired.extend(f);
            if !again {
                return ((), fired);
            }
            // Candidates that do not create parents need the path back, as
            // an operator who resets such an election gives it.
            for path in ["/svc", root.as_str()] {
                let create = Request::Create {
                    path: path.to_owned(),
                    data: Vec::new(),
                    mode: CreateMode::Persistent,
                    acl: Acl::Open,
                };
                fired.extend(zk.apply(now, s, &create).1);
            }
            ((), fired)
        });
        if done.is_none() {
            return;
        }
        let n = deleted.len();
        self.trace.note(self.view.now, None, 'R', || match q {
            0 => format!("operator deleted the election ({n} nodes)"),
            q => format!("operator deleted {} ({n} nodes)", SideQueue::path(q)),
        });
        for (node, owner, unknown) in deleted {
            self.view.stats.revocations += 1;
            if let Some(czxid) = unknown {
                let (now, zxid) = (self.view.now, self.view.zk.zxid());
                self.view.unclaimed.push((node.clone(), czxid, now, zxid));
            }
            let Some(pid) = owner else { continue };
            let token = match agent(&self.view.procs, pid).role() {
                Role::Leader(t) => Some(t),
                _ => None,
            };
            self.mark_revoked(pid, node);
            self.view.recount(pid);
            self.observe(&Event::Revoked { pid, token });
        }
    }

    /// Records that an operator deleted `node`, the node process `pid`
    /// believes is its own, just now.
    fn mark_revoked(&mut self, pid: usize, node: String) {
        let (now, zxid) = (self.view.now, self.view.zk.zxid());
        self.mark_revoked_at(pid, node, now, zxid);
    }

    /// Process `pid` just learned its node `node` (`Joined`): if an
    /// operator deleted it before (the create's answer was on its way), it
    /// is revoked as of that deletion, and judged as any revoked process.
    pub(super) fn claim_deleted(&mut self, pid: usize, node: &str) {
        let token = agent(&self.view.procs, pid).token();
        let Some(i) =
            self.view.unclaimed.iter().position(|(name, czxid, _, _)| {
                name == node && token == Some(FencingToken(*czxid))
            })
        else {
            return;
        };
        let (name, _, at, zxid) = self.view.unclaimed.swap_remove(i);
        self.trace.note(self.view.now, Some(pid), 'R', || {
            format!("learns its node {}, deleted at {at}", short(&name))
        });
        self.mark_revoked_at(pid, name, at, zxid);
        self.view.recount(pid);
        self.observe(&Event::Revoked { pid, token: None });
    }

    /// Records that an operator deleted `node`, the node process `pid`
    /// believes is its own, at `at` (committed as `zxid`).
    fn mark_revoked_at(&mut self, pid: usize, node: String, at: Timestamp, zxid: i64) {
        let now = self.view.now;
        self.view.procs[pid].revoked = Some(Revoked {
            node,
            token: agent(&self.view.procs, pid).token(),
            at,
            zxid,
            reached: now,
        });
        if let Err(at) = self.view.revoked.binary_search(&pid) {
            self.view.revoked.insert(at, pid);
        }
        self.view.revoked_behind(pid);
    }

    /// The live process whose own node this is: a zkelect candidate knows
    /// its node's czxid (a recreated parent can give a new node an old name);
    /// a foreign model's is the one its session owns, and so is a zkelect
    /// candidate's whose token is not its czxid (the `sequence-token`
    /// canary's: its revocations are still revocations).
    pub(super) fn owner(&self, name: &str, stat: Stat) -> Option<usize> {
        (0..self.view.procs.len()).find(|&pid| {
            let p = &self.view.procs[pid];
            let agent = agent(&self.view.procs, pid);
            let session_owns = p.session_id == Some(SessionId(stat.ephemeral_owner));
            !self.view.procs[p.host].crashed
                && agent.node() == Some(name)
                && match agent.foreign() {
                    None => {
                        agent.token() == Some(FencingToken(stat.czxid))
                            || (self.canary == Some(Canary::SequenceToken) && session_owns)
                    }
                    Some(_) => session_owns,
                }
        })
    }

    /// An operator sets the data of the process's node.
    pub(super) fn touch_data(&mut self, pid: usize) {
        let Some(node) = agent(&self.view.procs, pid).node().map(str::to_owned) else {
            return;
        };
        let path = format!("{}/{node}", self.path_of(pid));
        self.operator(|zk, now, s| zk.set_data(now, s, &path, b"touched", None));
        self.request_overwritten(pid, &node);
    }

    /// An operator wrote over process `pid`'s node `node`: a revocation
    /// request written into it before is gone, so nothing is left to hear
    /// (seed 14550 of `0..200000 all`).
    fn request_overwritten(&mut self, pid: usize, node: &str) {
        if self.view.procs[pid]
            .asked
            .as_ref()
            .is_some_and(|(asked, _)| asked == node)
        {
            self.view.procs[pid].asked = None;
            self.view.recount(pid);
        }
    }

    /// An operator, as the super user, sets the ACL of downgraded writer
    /// `pid`'s node to `world:anyone` READ only and writes over its mark
    /// ([`AclChange`](crate::swarm::AclChange)): its owner may read it but
    /// no longer write the mark back. Nothing if the writer no longer
    /// believes it downgraded, or the server is down.
    pub(super) fn change_acl(&mut self, pid: usize) {
        let downgraded = agent(&self.view.procs, pid)
            .candidate()
            .is_some_and(|c| c.is_downgraded());
        let node = agent(&self.view.procs, pid).node().map(str::to_owned);
        let (Some(node), true, false) = (node, downgraded, self.view.acl_changed.is_some()) else {
            return;
        };
        let path = format!("{}/{node}", self.path_of(pid));
        let read_only = Acl::Custom(vec![AclEntry::anyone(Perms::READ)]);
        let changed = self.operator_as(Some(SUPER.to_owned()), |zk, now, s| {
            if zk.set_acl(now, s, &path, &read_only, None).is_err() {
                return (false, Vec::new());
            }
            let (written, fired) = zk.set_data(now, s, &path, b"acl changed", None);
            (written.is_ok(), fired)
        });
        if changed != Some(true) {
            return;
        }
        self.tell(format!(
            "an operator makes p{pid}'s node read-only for everyone and writes over its mark"
        ));
        self.view.acl_changed = Some(AclChanged {
            pid,
            path,
            at: self.view.now,
        });
        self.request_overwritten(pid, &node);
    }

    /// Process `pid` asks the holder of its lock to let go: a cooperative
    /// revocation request written into the node of a holder of `pid`'s queue
    /// (its own, if it holds; else the first that believes it holds). A
    /// revocable holder must hear it (`revocation-heard` watches until it
    /// does, or lets go of that node).
    pub(super) fn ask_revoke(&mut self, asker: usize) {
        let q = self.view.procs[asker].queue;
        let procs = &self.view.procs;
        let holds = |p: usize| procs[p].queue == q && agent(procs, p).role().is_leader();
        let pid = if holds(asker) {
            asker
        } else {
            match (0..procs.len()).find(|&p| holds(p)) {
                Some(p) => p,
                None => return,
            }
        };
        let Some(node) = agent(&self.view.procs, pid).node().map(str::to_owned) else {
            return;
        };
        let path = format!("{}/{node}", self.path_of(pid));
        let written = self.operator(|zk, now, s| {
            let (result, fired) = zk.set_data(now, s, &path, REVOKE_MESSAGE, None);
            (result.is_ok(), fired)
        });
        let leads = agent(&self.view.procs, pid).role().is_leader();
        let p = &mut self.view.procs[pid];
        if written == Some(true) && p.revocable && leads && p.asked.is_none() {
            p.asked = Some((node, self.view.now));
            self.view.stats.revocation_requests += 1;
            self.view.recount(pid);
        }
    }

    /// An operator creates the election path (and its parent) as persistent
    /// nodes before anyone joins: candidates with `create_parents(false)`
    /// need it there.
    pub(super) fn create_path(&mut self, q: usize) {
        let root = self.view.queues[q].path.clone();
        self.operator(|zk, now, s| {
            let mut fired = Vec::new();
            for path in ["/svc", root.as_str()] {
                let create = Request::Create {
                    path: path.to_owned(),
                    data: Vec::new(),
                    mode: CreateMode::Persistent,
                    acl: Acl::Open,
                };
                fired.extend(zk.apply(now, s, &create).1);
            }
            ((), fired)
        });
    }

    /// An operator wipes the server's data directory and restarts it (for
    /// hand-written scenarios; not drawn: a new history lowers every token,
    /// which `tokens-grow` and the fenced resource exist to refuse): every
    /// node, session and watch is gone and zxids start again, so the
    /// candidates' next nodes have lower tokens than the ones they held.
    /// Every connection is reset, as on a restart. Does nothing on an
    /// ensemble.
    pub fn wipe_data(&mut self) {
        if !self.view.zk.wipe() {
            return;
        }
        self.keeper = None;
        self.tell("an operator wipes the server's data and restarts it".to_owned());
        for pid in 0..self.view.procs.len() {
            if self.view.procs[pid].crashed || self.view.procs[pid].conn != Conn::Connected {
                continue;
            }
            let gen = self.view.procs[pid].gen;
            self.push(self.view.now, Ev::Closed { pid, gen });
        }
    }

    /// An operator's process creates the ephemeral node a bad chroot names
    /// ([`ChrootRoot::Ephemeral`]) before anyone joins, and holds its
    /// session for the whole run (kept alive by the world's expiry tick).
    pub(super) fn hold_ephemeral_chroot(&mut self) {
        if !self.server_up() {
            return;
        }
        let (s, _) = self
            .view
            .zk
            .open_session(self.view.now, Duration::from_secs(10), None);
        let create = Request::Create {
            path: ChrootRoot::Ephemeral.path().to_owned(),
            data: Vec::new(),
            mode: CreateMode::Ephemeral,
            acl: Acl::Open,
        };
        let (_, fired) = self.view.zk.apply(self.view.now, s, &create);
        self.send_fired(fired);
        self.keeper = Some(s);
    }

    /// An operator creates a PERSISTENT node named like a contender of
    /// `scheme` under the election path (a sequential create, so it sorts
    /// after every node there now). Before anyone joins (`setup`) it creates
    /// the path first, as the candidates would have; later it does nothing if
    /// the path is gone.
    pub(super) fn create_lookalike(&mut self, scheme: Scheme, setup: bool) {
        self.create_lookalike_in(0, scheme, setup);
    }

    /// [`create_lookalike`](Self::create_lookalike) in queue `q`.
    pub(super) fn create_lookalike_in(&mut self, q: usize, scheme: Scheme, setup: bool) {
        let root = self.view.queues[q].path.clone();
        let stem = lookalike_stem(scheme, &mut self.rng);
        let container = self.view.knobs.container_parent;
        let created = self.operator(|zk, now, s| {
            let mut fired = Vec::new();
            if setup {
                for (path, mode) in [
                    ("/svc", CreateMode::Persistent),
                    (
                        root.as_str(),
                        if container {
                            CreateMode::Container
                        } else {
                            CreateMode::Persistent
                        },
                    ),
                ] {
                    let create = Request::Create {
                        path: path.to_owned(),
                        data: Vec::new(),
                        mode,
                        acl: Acl::Open,
                    };
                    fired.extend(zk.apply(now, s, &create).1);
                }
            }
            let create = Request::Create {
                path: format!("{root}/{stem}"),
                data: b"not a contender".to_vec(),
                mode: CreateMode::PersistentSequential,
                acl: Acl::Open,
            };
            let (result, f) = zk.apply(now, s, &create);
            fired.extend(f);
            (result, fired)
        });
        if let Some(Ok(Reply::Created { path, .. })) = created {
            self.view.stats.lookalikes += 1;
            self.trace.note(self.view.now, None, 'P', || {
                format!(
                    "operator created persistent {scheme} look-alike {}",
                    short(&path)
                )
            });
            match q {
                0 => self.view.lookalikes.push(short(&path).to_owned()),
                _ => self.view.side_lookalikes.push(path),
            }
        }
    }
}
