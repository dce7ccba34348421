//! Starting processes: zkelect candidates and observers (on a session of
//! their own or riding on another's), foreign models.

use std::collections::BTreeMap;
use std::time::Duration;

use zkelect_core::{Candidate, Config, ConfigBuilder, Timestamp};

use crate::foreign::{Agent, CuratorLatch, KazooLock, Scheme};

use super::engine::World;
use super::ev::Ev;
use super::proc::{Conn, InflightTable, Proc};
use super::spec::PATH;

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
        let config = match builder.build() {
            Ok(c) => c,
            Err(e) => return self.fail("config", format!("{e}")),
        };
        self.start_on(Agent::Zkelect(Box::new(Candidate::new(config))), host);
    }

    /// Starts a model of the swarm's foreign library (Curator when the
    /// candidates do not interoperate with either).
    pub(super) fn spawn_foreign(&mut self) {
        let pid = self.view.procs.len();
        let id = format!("p{pid}");
        let seed = self.view.seed.wrapping_mul(37).wrapping_add(pid as u64);
        let agent = match self.view.swarm.env.interop {
            Scheme::Kazoo => {
                Agent::Kazoo(KazooLock::new(PATH, &id, self.view.knobs.acl.acl(), seed))
            }
            Scheme::Curator | Scheme::Ours => Agent::Curator(CuratorLatch::new(
                PATH,
                &id,
                self.view.knobs.acl.acl(),
                seed,
            )),
        };
        self.start(agent);
    }

    pub(super) fn start(&mut self, c: Agent) {
        let pid = self.view.procs.len();
        self.start_on(c, pid);
    }

    /// Starts machine `c` on the session of machine `host` (its own when
    /// `host` is its pid).
    pub(super) fn start_on(&mut self, mut c: Agent, host: usize) {
        let pid = self.view.procs.len();
        c.join(self.view.now);
        self.net.add();
        let host = if host < pid && self.view.procs[host].host == host {
            host
        } else {
            pid
        };
        self.view.procs.push(Proc {
            c,
            host,
            queue: self.joining,
            machines: if host == pid { vec![pid] } else { Vec::new() },
            watches: BTreeMap::new(),
            crashed: false,
            session: None,
            timeout: self.view.swarm.session_timeout,
            handshaken: None,
            started: None,
            conn: Conn::Disconnected,
            gen: 0,
            last_from_server: self.view.now,
            last_to_server: self.view.now,
            connected_at: self.view.now,
            ping_out: false,
            tick_at: None,
            inflight: InflightTable::default(),
            paused_until: None,
            resumed_at: Timestamp::ZERO,
            event_tail: Timestamp::ZERO,
            lag_until: None,
            timer_at: None,
            session_closed: false,
            writing: false,
            revoked: None,
        });
        if host != pid {
            self.view.procs[host].machines.push(pid);
            self.view.recount(pid);
            return self.join_session(pid);
        }
        self.view.recount(pid);
        let mut at = self.view.now + Duration::from_millis(self.rng.range(0, 50));
        // A late start holds back every session that carries more than
        // observers (riders join later; the host decides), so that the
        // observers list the queue before anyone makes its path.
        if let Some(late) = self.view.swarm.env.late_start {
            if self.view.now == Timestamp::ZERO && self.view.procs[pid].c.observer().is_none() {
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
