//! The world's engine: the [`World`] around its [`View`], the event queue,
//! the loop and the step.

use std::collections::BTreeMap;

use zkelect_core::{Command, SessionId, Timestamp};

use crate::canary::Canary;
use crate::choice::Choices;
use crate::client::Pace;
use crate::foreign::Scheme;
use crate::invariant::{Event, Invariant, Violation};
use crate::net::Net;
use crate::queue::EventQueue;
use crate::server::Server;
use crate::swarm::{ChrootRoot, Knobs, SideQueue, Swarm};
use crate::trace::Trace;

use super::census::Counts;
use super::ev::Ev;
use zkelect_core::{MachineId, OpId};

use super::judges::Judges;
use super::spec::{Phase, QueueSpec, PATH};
use super::stats::RunStats;
use super::told::Told;
use super::view::View;
#[cfg(feature = "planted")]
use zkelect_core::Planted;

/// Steps at one virtual instant after which the world calls it a stall
/// (`time-advances`): something answers an input at once and again, and
/// virtual time never moves (with a real transport that fails fast, a hot
/// loop). Ordinary runs stay far below it (`tests/time.rs` measures the
/// most steps at one instant over 2,000 mixed seeds).
pub const STALL_STEPS: u64 = 100_000;

/// A whole simulated run: its [`View`] (what checkers read) and the
/// engine around it.
pub struct World {
    pub(super) view: View,
    pub(super) rng: Choices,
    pub(super) queue: EventQueue<Ev>,
    /// The next machine started goes to this queue.
    pub(super) joining: usize,
    /// Every process's link to the server.
    pub(super) net: Net,
    pub(super) server_down_until: Option<Timestamp>,
    pub(super) canary: Option<Canary>,
    /// The checkers (a field apart from the view they read).
    judges: Judges,
    /// A machine's commands and their verbs after a step, kept between
    /// steps so draining a machine allocates nothing (`World::after`).
    pub(super) commands: Vec<Command>,
    pub(super) verbs: Vec<&'static str>,
    /// The sender (machine and its own op) of each of a session's commands
    /// in `commands`, kept like it.
    pub(super) senders: Vec<Option<(MachineId, OpId)>>,
    /// What a session told in one drain, kept like `commands`.
    pub(super) told: Told,
    /// A new id per server change, carried by the watch events it fires.
    pub(super) cause: u64,
    pub(crate) trace: Trace,
    violation: Option<Violation>,
    pub(super) done: bool,
    pub(super) narrate: bool,
    story: Vec<(Timestamp, String)>,
    /// Server change → how many followers its watch events may wake (the
    /// rule's bound, see [`View::herd_bound`]).
    pub(super) herd: BTreeMap<u64, usize>,
    /// A bug planted in the world's client for a test ([`Planted`]).
    #[cfg(feature = "planted")]
    pub(super) planted: Option<Planted>,
    /// The operator's session that holds the ephemeral chroot
    /// ([`ChrootRoot::Ephemeral`]) for the whole run.
    pub(super) keeper: Option<SessionId>,
    /// The client libraries' timing for the last session timeout asked
    /// (the processes of a run mostly share one).
    pub(super) pace: Option<Pace>,
    /// Steps taken since the clock last moved (`time-advances`).
    same_instant: u64,
    /// How many times the host the swarm's
    /// [`Refusal`](crate::swarm::Refusal) names reconnected to its live
    /// session so far.
    pub(super) same_reconnects: u32,
    /// The host keeps its client open on a session finished by refused
    /// credentials ([`World::plant_keeps_refused_client`]).
    #[cfg(feature = "planted")]
    pub(super) keeps_refused_client: bool,
}

impl World {
    /// A world for `seed` running `swarm`, optionally with canary candidates,
    /// checked by the given invariants only ([`World::new`], in
    /// [`crate::run`], uses the [standard](crate::check::standard) ones).
    pub fn with_invariants(
        seed: u64,
        swarm: Swarm,
        canary: Option<Canary>,
        keep_trace: bool,
        invariants: Vec<Box<dyn Invariant<View>>>,
    ) -> Self {
        Self::with_choices(
            seed,
            swarm,
            canary,
            keep_trace,
            invariants,
            Choices::seeded(seed),
        )
    }

    /// A world whose nondeterministic choices (latencies, reorderings, how
    /// much of a dropped connection's traffic lands) come from `choices`: the
    /// seed's stream, a fuzzer's bytes or a search's script.
    pub fn with_choices(
        seed: u64,
        swarm: Swarm,
        canary: Option<Canary>,
        keep_trace: bool,
        invariants: Vec<Box<dyn Invariant<View>>>,
        choices: Choices,
    ) -> Self {
        let heal_at = Timestamp::ZERO + swarm.chaos;
        let mut knobs = Knobs::from_seed(seed, canary.is_some_and(Canary::wants_wrap));
        // Curator and kazoo compare sequences as strings, and zkelect refuses
        // a queue it shares with them once a sequence wrapped past 2^31: such
        // a queue never starts near the wrap.
        if swarm.env.interop != Scheme::Ours {
            knobs.cversion_start = 0;
        }
        if let Some(canary) = canary {
            knobs.options = canary.options();
        }
        // A member with a lower `maxSessionTimeout` makes a world for
        // zookeeper-async, which bounds the timeout by every member's
        // answer: zookeeper-client reports the timeout of its session's
        // first member, and documents that every member must have the same
        // limits.
        if swarm
            .env
            .ensemble
            .as_ref()
            .is_some_and(|e| e.lowered.is_some())
        {
            knobs.session_ids = false;
        }
        let mut queues = vec![QueueSpec {
            path: PATH.to_owned(),
            queue: swarm.env.queue,
            leaders: swarm.leaders,
            scheme: swarm.env.interop,
        }];
        for (i, side) in swarm.env.hosting.queues.iter().enumerate() {
            queues.push(QueueSpec {
                path: SideQueue::path(i + 1),
                queue: side.queue,
                leaders: side.leaders,
                scheme: Scheme::Ours,
            });
        }
        let view = View {
            seed,
            now: Timestamp::ZERO,
            zk: Server::new(
                swarm.env.server(knobs.cversion_start),
                swarm.env.ensemble.as_ref(),
            ),
            procs: Vec::new(),
            resource_max: vec![None; queues.len()],
            counts: Counts::new(queues.len()),
            queues,
            revoked: Vec::new(),
            unclaimed: Vec::new(),
            heal_at,
            phase: Phase::Chaos,
            stats: RunStats::default(),
            lookalikes: Vec::new(),
            side_lookalikes: Vec::new(),
            groups: Vec::new(),
            refused: None,
            acl_changed: None,
            lapsed: Vec::new(),
            start_up: None,
            replayed: 0,
            swarm,
            knobs,
        };
        let mut world = Self {
            view,
            rng: choices,
            queue: EventQueue::default(),
            joining: 0,
            net: Net::default(),
            server_down_until: None,
            canary,
            judges: Judges::new(invariants),
            cause: 0,
            commands: Vec::new(),
            same_instant: 0,
            verbs: Vec::new(),
            senders: Vec::new(),
            told: Told::default(),
            trace: Trace::new(keep_trace),
            violation: None,
            done: false,
            narrate: false,
            story: Vec::new(),
            herd: BTreeMap::new(),
            #[cfg(feature = "planted")]
            planted: None,
            keeper: None,
            pace: None,
            same_reconnects: 0,
            #[cfg(feature = "planted")]
            keeps_refused_client: false,
        };
        if !world.view.knobs.options.create_parents {
            for q in 0..world.view.queues.len() {
                world.create_path(q);
            }
        }
        if world
            .view
            .swarm
            .env
            .chroot
            .as_ref()
            .is_some_and(|bad| bad.root == ChrootRoot::Ephemeral)
        {
            world.hold_ephemeral_chroot();
        }
        for scheme in world.view.swarm.env.lookalikes.clone() {
            world.create_lookalike(scheme, true);
        }
        for _ in 0..world.view.swarm.candidates {
            world.spawn();
        }
        for _ in 0..world.view.swarm.env.foreign {
            world.spawn_foreign();
        }
        for on in world.view.swarm.env.hosting.observers.clone() {
            world.spawn_observer(on);
        }
        for (i, side) in world
            .view
            .swarm
            .env
            .hosting
            .queues
            .clone()
            .into_iter()
            .enumerate()
        {
            world.joining = i + 1;
            for m in side.machines {
                match m.observer {
                    true => world.spawn_observer(m.on),
                    false => world.spawn_on(m.on),
                }
            }
        }
        world.joining = 0;
        if !world.view.swarm.env.hosting.multi_locks.is_empty() {
            world.push(Timestamp::ZERO, Ev::AddMultiLocks);
        }
        for (at, fault) in world.view.swarm.plan.clone() {
            world.push(at, Ev::Fault(fault));
        }
        world.push(Timestamp::from_millis(200), Ev::Expiry);
        world.push(heal_at, Ev::Heal);
        world.push(heal_at + world.liveness_bound(), Ev::LivenessDue);
        world
    }

    /// Records a human-readable story of the run (for `zkelect demo`).
    pub fn narrate(&mut self) {
        self.narrate = true;
    }

    /// The story so far: what each candidate was told, and every fault.
    pub fn story(&self) -> &[(Timestamp, String)] {
        &self.story
    }

    pub(super) fn tell(&mut self, line: String) {
        if self.narrate {
            self.story.push((self.view.now, line));
        }
    }

    /// Runs to the end; returns the violation, if any.
    pub fn run(&mut self) -> Option<Violation> {
        while !self.done && self.violation.is_none() {
            if !self.step() {
                break;
            }
        }
        self.violation.clone()
    }

    /// Runs every event due up to `at` (and moves the clock there); returns
    /// the violation, if any.
    pub fn run_until(&mut self, at: Timestamp) -> Option<Violation> {
        while !self.done && self.violation.is_none() {
            match self.queue.next_at() {
                Some(next) if next <= at => {
                    self.step();
                }
                _ => break,
            }
        }
        self.view.now = self.view.now.max(at);
        self.violation.clone()
    }

    /// Where the world's choices come from (a search reads its script back).
    pub fn choices(&self) -> &Choices {
        &self.rng
    }

    /// The same, to steer it mid-run (a search opens a window of branching
    /// choices after each fault).
    pub fn choices_mut(&mut self) -> &mut Choices {
        &mut self.rng
    }

    /// The trace so far.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// The first violation, if any.
    pub fn violation(&self) -> Option<&Violation> {
        self.violation.as_ref()
    }

    /// Handles the next event and runs the checkers; false when nothing is left.
    pub fn step(&mut self) -> bool {
        let Some((at, ev)) = self.queue.pop() else {
            return false;
        };
        if at == self.view.now {
            self.same_instant += 1;
            let most = &mut self.view.stats.most_at_one_instant;
            *most = (*most).max(self.same_instant);
            if self.same_instant == STALL_STEPS {
                self.fail(
                    "time-advances",
                    format!(
                        "{STALL_STEPS} steps at {at} without the clock moving: something answers an input at once and again"
                    ),
                );
            }
        } else {
            self.same_instant = 0;
        }
        self.view.now = at;
        self.view.stats.steps += 1;
        self.deliver(ev);
        if !self.view.revoked.is_empty() {
            self.view.revocations_behind();
        }
        if cfg!(debug_assertions) {
            self.view.check_census();
        }
        self.observe_step();
        true
    }

    /// Runs the step's checkers, skipping those whose last pass holds.
    pub(super) fn observe_step(&mut self) {
        let mut failed = Vec::new();
        self.judges.step(&self.view, &mut failed);
        for (invariant, detail) in failed {
            self.fail(invariant, detail);
        }
    }

    /// Runs the checkers that judge `event`.
    pub(super) fn observe(&mut self, event: &Event<'_>) {
        let mut failed = Vec::new();
        self.judges.event(&self.view, event, &mut failed);
        for (invariant, detail) in failed {
            self.fail(invariant, detail);
        }
    }

    pub(super) fn fail(&mut self, invariant: &'static str, detail: String) {
        if self.violation.is_none() {
            self.trace.note(self.view.now, None, '!', || {
                format!("VIOLATION {invariant}: {detail}")
            });
            self.violation = Some(Violation {
                invariant,
                at: self.view.now,
                step: self.view.stats.steps,
                detail,
            });
        }
    }

    pub(super) fn push(&mut self, at: Timestamp, ev: Ev) {
        self.queue.push(at.max(self.view.now), ev);
    }

    /// Who process `pid`'s sessions (an operator's: `None`) authenticate as.
    pub(super) fn identity(&self, pid: Option<usize>) -> Option<String> {
        self.view.knobs.acl.identity(pid)
    }

    pub(super) fn server_up(&self) -> bool {
        self.server_down_until.is_none()
    }

    /// Whether a message that got past the partition check can be handled:
    /// the process is alive and the server up.
    pub(super) fn linked(&self, pid: usize) -> bool {
        !self.view.procs[self.view.procs[pid].host].crashed && self.server_up()
    }

    /// Whether a new connection can be made: linked, and no partition in
    /// either direction (a TCP handshake needs both).
    pub(super) fn reachable(&self, pid: usize) -> bool {
        self.linked(pid) && self.net.open(pid, self.view.now)
    }
}

impl std::ops::Deref for World {
    type Target = View;

    fn deref(&self) -> &View {
        &self.view
    }
}
