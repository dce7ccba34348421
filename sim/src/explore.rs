//! Exhaustive small scopes: a depth-first search over the world's choice
//! points ([`Choices::Script`]), as loom and shuttle search a program's
//! schedules, with every checker run after every step of every run.
//!
//! A scope is a small world (2–3 candidates, k = 1, a 2 s session timeout,
//! 6 s of chaos, reordering of replies and events on) and a fault budget. The
//! search enumerates:
//!
//! - **the fault plan**: for each of up to `faults` slots, no fault or one of
//!   [`menu`] at one of [`FAULT_TIMES`] (every plan of at most that many
//!   faults from the menu);
//! - **the interleavings around each moment that matters**: a window of
//!   `depth` branching choices of the world (each message's latency as the
//!   fastest or the slowest, so two messages on different links arrive in
//!   either order; whether a reply overtakes earlier events; how many of a
//!   dropped connection's requests land) opens at the start and again right
//!   after each fault. Every combination inside the windows is run.
//!
//! With [`Search::Windows`], choices outside the windows come from a fixed
//! stream: the search is exhaustive over the plan and the windows, not over
//! every message of a run. [`Search::Deviations`] closes that gap the way
//! CHESS's iterative context bounding and loom's preemption bound do: every
//! choice of the whole run branches (the stream's answer, or each other:
//! either latency end, the other order, another count), and the search visits
//! every run that deviates from the stream's schedule at most `max` times,
//! wherever in the run the deviations fall. Runs are not deduplicated by
//! world state; [`Exploration`] counts runs, distinct executions (trace
//! hashes) and steps (states checked).
//!
//! ```
//! use zkelect_sim::explore::{explore, Scope, Search};
//! let scope = Scope { candidates: 2, faults: 0, search: Search::Windows { depth: 2 }, canary: None };
//! let out = explore(scope);
//! assert!(out.failure.is_none());
//! assert_eq!(out.runs, 4); // 2 binary choices at the start, no plan choice
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use zkelect_core::{ConnectionPolicy, Timestamp};

use crate::canary::Canary;
use crate::check;
use crate::choice::{Choices, Script};
use crate::run::{RunOptions, RunReport};
use crate::swarm::{Env, Fault, Swarm};
use crate::world::World;

/// The session timeout of an explored world.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// When a planned fault may strike (ms): during the first election, once it
/// settled, and late in the chaos phase (the last lasting faults end before
/// the liveness bound counts).
pub const FAULT_TIMES: [u64; 3] = [30, 1_500, 4_000];

/// The length of the chaos phase.
pub const CHAOS: Duration = Duration::from_secs(6);

/// A small scope to explore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope {
    /// Candidates (2 or 3 keep it small).
    pub candidates: usize,
    /// At most this many planned faults.
    pub faults: usize,
    /// Which of the world's choices branch.
    pub search: Search,
    /// A broken candidate to run instead of the real one (to show the search
    /// catches what it breaks).
    pub canary: Option<Canary>,
}

/// Which of the world's choices a search branches on (besides the fault plan,
/// which it always enumerates).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Search {
    /// Every combination of `depth` branching choices in a window at the start
    /// and right after each fault; the stream answers the rest.
    Windows {
        /// Branching choices per window.
        depth: usize,
    },
    /// Every run within `max` deviations from the stream's schedule, anywhere
    /// in the run (each choice: the stream's answer, or each other one).
    Deviations {
        /// At most this many choices differ from the stream's.
        max: usize,
    },
}

/// The faults a plan picks from (for `candidates` processes).
pub fn menu(candidates: usize) -> Vec<Fault> {
    let t = TIMEOUT.as_millis() as u64;
    let last = candidates.saturating_sub(1);
    vec![
        Fault::CrashLeader,
        Fault::PartitionLeader { ms: 2 * t },
        Fault::CloseLeader,
        Fault::RevokeLeader,
        Fault::RestartServer { ms: t / 2 },
        Fault::DropConnection {
            pid: 0,
            applied: true,
        },
        Fault::DropConnection {
            pid: last,
            applied: false,
        },
        Fault::PartitionOneWay {
            pid: 0,
            ms: 2 * t,
            to_server: true,
        },
        Fault::PartitionOneWay {
            pid: 0,
            ms: 2 * t,
            to_server: false,
        },
        Fault::Resign {
            pid: 0,
            rejoin: true,
        },
        Fault::WipeElection,
        Fault::Delay {
            pid: last,
            ms: t,
            extra_ms: t / 4,
        },
    ]
}

/// What a search found.
#[derive(Debug, Clone, Default)]
pub struct Exploration {
    /// Runs (paths through the choice tree).
    pub runs: u64,
    /// Distinct executions among them (distinct trace hashes).
    pub executions: u64,
    /// Steps run: every one a world state every checker held in.
    pub steps: u64,
    /// Distinct fault plans run.
    pub plans: u64,
    /// The first failing run (its report and the choice prefix that replays it).
    pub failure: Option<(Vec<u32>, Box<RunReport>)>,
}

impl fmt::Display for Exploration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} runs ({} distinct executions, {} fault plans), {} states checked",
            self.runs, self.executions, self.plans, self.steps
        )?;
        if let Some((prefix, report)) = &self.failure {
            write!(f, "\nFAILED with choices {prefix:?}:\n{report}")?;
        }
        Ok(())
    }
}

/// The scenario for a plan.
fn swarm(scope: Scope, plan: Vec<(Timestamp, Fault)>) -> Swarm {
    Swarm {
        candidates: scope.candidates,
        leaders: 1,
        session_timeout: TIMEOUT,
        policy: ConnectionPolicy::Standard,
        chaos: CHAOS,
        reorder: true,
        pauses: false,
        plan,
        env: Env::default(),
    }
}

/// The seed of every explored world: it only names the knobs (plain: seed 0
/// draws no wrap, an open ACL) and the stream outside the windows.
const SEED: u64 = 0;

/// Builds the world the path `prefix` names and runs it to the end.
fn drive(scope: Scope, prefix: Vec<u32>, keep_trace: bool) -> World {
    let menu = menu(scope.candidates);
    let mut choices = Choices::Script(Script::new(prefix, 2 * scope.faults, SEED));
    let mut plan = Vec::new();
    for _ in 0..scope.faults {
        let kind = choices.pick(menu.len() as u32 + 1) as usize;
        if kind == 0 {
            break;
        }
        let at = FAULT_TIMES[choices.pick(FAULT_TIMES.len() as u32) as usize];
        plan.push((Timestamp::from_millis(at), menu[kind - 1]));
    }
    plan.sort_by_key(|(at, _)| *at);
    let times: BTreeSet<Timestamp> = plan.iter().map(|(at, _)| *at).collect();
    if let Choices::Script(s) = &mut choices {
        match scope.search {
            Search::Windows { depth } => s.open(depth),
            Search::Deviations { max } => {
                // The plan's window may be left open by a short plan.
                s.open(0);
                s.bound_deviations(max);
            }
        }
    }
    let mut world = World::with_choices(
        SEED,
        swarm(scope, plan),
        scope.canary,
        keep_trace,
        check::standard(),
        choices,
    );
    for at in times {
        // Open the window just before the fault, so its own choices (which
        // requests of a dropped connection land) are explored too.
        let before = Timestamp::from_millis(at.as_millis().saturating_sub(1));
        if world.run_until(before).is_some() {
            break;
        }
        if let (Choices::Script(s), Search::Windows { depth }) = (world.choices_mut(), scope.search)
        {
            s.open(depth);
        }
    }
    world.run();
    world
}

/// Runs the path `prefix` names; returns its report and the script it left.
pub fn run_path(scope: Scope, prefix: Vec<u32>) -> (RunReport, Script) {
    let world = drive(scope, prefix.clone(), false);
    let script = match world.choices() {
        Choices::Script(s) => s.clone(),
        // Built as a script in `drive`; nothing swaps it.
        _ => Script::new(Vec::new(), 0, SEED),
    };
    let options = RunOptions {
        canary: scope.canary,
        ..RunOptions::default()
    };
    // A failing path runs again with readable lines (the same prefix gives the
    // same run) for the report's tail.
    let report = crate::run::report(SEED, world, options, || drive(scope, prefix, true));
    (report, script)
}

/// Explores every path of `scope` (depth first) until one fails.
pub fn explore(scope: Scope) -> Exploration {
    let mut out = Exploration::default();
    let mut hashes = BTreeSet::new();
    let mut plans = BTreeSet::new();
    let mut prefix = Some(Vec::new());
    while let Some(p) = prefix {
        let (report, script) = run_path(scope, p.clone());
        out.runs += 1;
        out.steps += report.stats.steps;
        hashes.insert(report.hash);
        plans.insert(format!("{:?}", report.swarm.plan));
        if report.violation.is_some() {
            let mut taken: Vec<u32> = script.taken().iter().map(|t| t.option).collect();
            // Past its prefix a script answers 0: the trailing zeros say nothing.
            while taken.last() == Some(&0) {
                taken.pop();
            }
            out.failure = Some((taken, Box::new(report)));
            break;
        }
        prefix = script.next_prefix();
    }
    out.executions = hashes.len() as u64;
    out.plans = plans.len() as u64;
    out
}
