//! Starting processes: zkelect candidates and observers (on a session of
//! their own or riding on another's), foreign models.

use std::rc::Rc;
use std::time::Duration;

use zkelect_core::{
    Candidate, Config, ConfigBuilder, Machine, MachineId, Observer, ObserverConfig, Rule, Session,
    Timestamp,
};

use super::engine::World;
use super::ev::Ev;
use super::hosting::Woken;
use super::proc::{Member, Proc};
use super::spec::PATH;
use crate::foreign::{CuratorLatch, Foreign, KazooLock, Scheme};
use crate::swarm::{MachineSettings, SessionSettings};

impl World {
    pub(super) fn spawn(&mut self) {
        let pid = self.view.procs.len();
        // Candidates at the start may ride on an earlier one's session;
        // spawned ones have their own.
        let host = if pid < self.view.swarm.candidates {
            self.view.swarm.env.hosting.host(pid)
        } else {
            pid
        };
        self.spawn_on(Some(host));
    }

    /// Starts a zkelect candidate of the joining queue on candidate `on`'s
    /// session (`None`, or its own pid: a session of its own).
    pub(super) fn spawn_on(&mut self, on: Option<usize>) {
        let pid = self.view.procs.len();
        let host = on.unwrap_or(pid);
        let Some((config, rule)) = self.candidate_config(pid) else {
            return;
        };
        let settings = self.machine_settings(pid, host, Some(rule));
        let candidate = Candidate::new(config.clone());
        let machine = match settings.lock {
            true => Machine::lock(candidate),
            false => Machine::election(candidate),
        };
        self.start_machine(settings.apply(machine), host, Some(config));
        self.drawn_options(pid, rule);
    }

    /// The configuration of candidate `pid` of the joining queue, and its
    /// rule, as drawn (`None`: the world failed on it).
    pub(super) fn candidate_config(&mut self, pid: usize) -> Option<(Config, Rule)> {
        let spec = &self.view.queues[self.joining];
        let rule = spec.queue.rule(spec.leaders, self.view.seed, pid);
        let scheme = spec.scheme;
        let mut builder = Config::builder(spec.path.clone(), format!("p{pid}"))
            .rule(rule)
            .policy(self.view.swarm.policy)
            .acl(self.view.knobs.acl.acl())
            .container_parent(self.view.knobs.container_parent)
            .nonce_seed(self.view.seed.wrapping_mul(31).wrapping_add(pid as u64));
        let foreign_names = scheme != Scheme::Ours;
        builder =
            self.view
                .knobs
                .options
                .configure(builder, self.view.seed, pid, rule, foreign_names);
        builder = interop(builder, scheme);
        if let Some(canary) = self.canary {
            builder = canary.configure(builder);
        }
        match builder.build() {
            Ok(c) => Some((c, rule)),
            Err(e) => {
                self.fail("config", format!("{e}"));
                None
            }
        }
    }

    /// What the checkers must know of process `pid`'s drawn options: its
    /// weight, whether it hears revocation requests, whether it downgrades.
    pub(super) fn drawn_options(&mut self, pid: usize, rule: Rule) {
        let drawn = self.view.knobs.options.process(self.view.seed, pid);
        let weight = self.view.knobs.options.weight(self.view.seed, pid, rule);
        if let Some(p) = self.view.procs.get_mut(pid) {
            p.weight = weight;
            p.revocable = drawn.revocable;
            p.downgrades = drawn.downgrades && rule == Rule::Write;
            self.view.recount(pid);
        }
    }

    /// Starts an observer of the joining queue, on a session of its own or
    /// riding on candidate `on`'s.
    pub(super) fn spawn_observer(&mut self, on: Option<usize>) {
        let pid = self.view.procs.len();
        let host = on.unwrap_or(pid);
        let spec = &self.view.queues[self.joining];
        let config = ObserverConfig::new(spec.path.clone(), spec.recipe())
            .with_interop(spec.scheme.interop());
        let observer = match Observer::new(config) {
            Ok(o) => o,
            Err(e) => return self.fail("config", format!("{e}")),
        };
        let settings = self.machine_settings(pid, host, None);
        self.start_machine(settings.apply(Machine::observer(observer)), host, None);
    }

    /// How process `pid`, to run on `host`'s session, is set up: as the
    /// library's handles do by default in a canary's world, else as drawn.
    fn machine_settings(&self, pid: usize, host: usize, rule: Option<Rule>) -> MachineSettings {
        let alone = host == pid && !self.view.swarm.env.hosting.carries(pid);
        match self.canary {
            Some(_) => MachineSettings::election(alone),
            None => MachineSettings::draw(self.view.seed, pid, rule, alone),
        }
    }

    /// Starts a model of the swarm's foreign library (Curator when the
    /// candidates do not interoperate with either).
    pub(super) fn spawn_foreign(&mut self) {
        let pid = self.view.procs.len();
        let id = format!("p{pid}");
        let seed = self.view.seed.wrapping_mul(37).wrapping_add(pid as u64);
        let acl = self.view.knobs.acl.acl();
        let mut model = match self.view.swarm.env.interop {
            Scheme::Kazoo => Foreign::Kazoo(KazooLock::new(PATH, &id, acl, seed)),
            Scheme::Curator | Scheme::Ours => {
                Foreign::Curator(CuratorLatch::new(PATH, &id, acl, seed))
            }
        };
        model.join(self.view.now);
        self.net.add();
        let proc = Proc::new(
            Member::Foreign(Box::new(model)),
            pid,
            self.joining,
            self.view.now,
        );
        self.view.procs.push(proc);
        self.connect_later(pid);
    }

    /// Starts zkelect machine `machine` on the session of process `host`
    /// (its own when `host` is its pid, or is no process hosting a zkelect
    /// session): the core session adds it (and tells it of a connection it
    /// missed); a candidate joins.
    fn start_machine(&mut self, machine: Machine, host: usize, config: Option<Config>) {
        let pid = self.view.procs.len();
        self.net.add();
        let host = if host < pid
            && self.view.procs[host].host == host
            && self.view.procs[host].session.is_some()
        {
            host
        } else {
            pid
        };
        let observer = machine.as_observer().is_some();
        let candidate = machine.as_candidate().is_some();
        let member = Member::Zkelect {
            id: MachineId(0),
            exit: None,
        };
        let mut proc = Proc::new(member, host, self.joining, self.view.now);
        proc.observer = observer;
        proc.config = config.map(Rc::new);
        proc.timeout = self.view.swarm.session_timeout;
        if host == pid {
            let settings = match self.canary {
                Some(_) => SessionSettings::default(),
                None => SessionSettings::draw(self.view.seed, pid),
            };
            let seed = self.view.seed.wrapping_mul(41).wrapping_add(pid as u64);
            #[allow(unused_mut)] // only a planted bug changes it
            let mut session = Session::new(settings.config(seed));
            #[cfg(feature = "planted")]
            if let Some(bug) = self.planted {
                session.plant(bug);
            }
            proc.session = Some(Box::new(session));
            proc.machines.push(pid);
        }
        self.view.procs.push(proc);
        if host != pid {
            self.view.procs[host].machines.push(pid);
        }
        let now = self.view.now;
        let Some(session) = self.view.procs[host].session.as_mut() else {
            return;
        };
        let id = session.add(now, machine);
        if candidate {
            // Just added: it runs.
            let _ = session.join(now, id);
        }
        self.view.procs[pid].member = Member::Zkelect { id, exit: None };
        self.view.recount(pid);
        self.drain(host, &Woken::default(), || "start".into());
        if host == pid {
            self.connect_later(pid);
        }
    }

    /// Process `pid` is machine `id`, which the session of process `host`
    /// added itself (a multi-lock's part), in queue `queue`.
    pub(super) fn attach_machine(
        &mut self,
        host: usize,
        id: MachineId,
        queue: usize,
        config: Config,
    ) -> usize {
        let pid = self.view.procs.len();
        self.net.add();
        let mut proc = Proc::new(
            Member::Zkelect { id, exit: None },
            host,
            queue,
            self.view.now,
        );
        proc.config = Some(Rc::new(config));
        proc.timeout = self.view.swarm.session_timeout;
        self.view.procs.push(proc);
        self.view.procs[host].machines.push(pid);
        self.view.recount(pid);
        pid
    }

    /// Process `pid`'s client connects soon: within 50 ms, or later when
    /// the swarm holds back every session that carries more than observers
    /// (so that the observers list the queue before anyone makes its path).
    fn connect_later(&mut self, pid: usize) {
        self.view.recount(pid);
        let mut at = self.view.now + Duration::from_millis(self.rng.range(0, 50));
        if let Some(late) = self.view.swarm.env.late_start {
            if self.view.now == Timestamp::ZERO && !self.view.procs[pid].observer {
                at = at + late;
            }
        }
        self.push(at, Ev::Reconnect { pid });
    }
}

/// Sets the candidates' interop scheme.
fn interop(builder: ConfigBuilder, scheme: Scheme) -> ConfigBuilder {
    builder.interop(scheme.interop())
}
