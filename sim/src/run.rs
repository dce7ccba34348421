//! Running seeds, reporting failures with a replay line, minimising fault plans.

use std::fmt;

use crate::canary::Canary;
use crate::check::{self, Checker};
use crate::swarm::{FaultMix, Knobs, Overrides, Swarm};
use crate::timeline::Timeline;
use crate::world::{RunStats, Violation, World};

impl World {
    /// A world for `seed` running `swarm`, optionally with canary candidates,
    /// checked by the [standard](check::standard) invariants. (Defined here,
    /// above both the world and the checkers, so neither imports the other.)
    pub fn new(seed: u64, swarm: Swarm, canary: Option<Canary>, keep_trace: bool) -> Self {
        Self::with_invariants(seed, swarm, canary, keep_trace, check::standard())
    }

    /// Runs `seed`'s own swarm (nothing overridden) with `planted`, a bug
    /// planted in the real core's machines, if any: the first invariant
    /// broken. What a canary test asks of each seed, caught planted and
    /// passing clean.
    #[cfg(feature = "planted")]
    pub fn run_planted(seed: u64, planted: Option<crate::world::Planted>) -> Option<Violation> {
        let mut world = Self::new(
            seed,
            Swarm::from_seed(seed, Overrides::default()),
            None,
            false,
        );
        if let Some(bug) = planted {
            world.plant(bug);
        }
        world.run()
    }

    /// Runs every seed of `seeds` with `bug` planted, and again without it
    /// wherever a checker caught it: what a canary test needs to show that
    /// its checker can fail, and fails for the bug alone.
    #[cfg(feature = "planted")]
    pub fn catches(bug: crate::world::Planted, seeds: std::ops::Range<u64>) -> Catches {
        let mut catches = Catches::default();
        for seed in seeds {
            if let Some(caught) = Self::run_planted(seed, Some(bug)) {
                if let Some(unplanted) = Self::run_planted(seed, None) {
                    catches.unplanted.push((seed, unplanted));
                }
                catches.caught.push((seed, caught));
            }
        }
        catches
    }
}

/// What a planted bug did over a range of seeds ([`World::catches`]).
#[cfg(feature = "planted")]
#[derive(Debug, Default)]
pub struct Catches {
    /// Each seed whose planted run broke an invariant, with the first broken.
    pub caught: Vec<(u64, Violation)>,
    /// Each of those seeds that fails with no bug planted too: a checker
    /// that would blame the bug for what the seed does anyway.
    pub unplanted: Vec<(u64, Violation)>,
}

#[cfg(feature = "planted")]
impl Catches {
    /// How many seeds checker `invariant` caught.
    pub fn by(&self, invariant: &str) -> usize {
        self.caught
            .iter()
            .filter(|(_, v)| v.invariant == invariant)
            .count()
    }
}

#[cfg(feature = "planted")]
impl fmt::Display for Catches {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "caught in {} seeds:", self.caught.len())?;
        for (seed, v) in &self.caught {
            write!(f, " {seed} ({})", v.invariant)?;
        }
        Ok(())
    }
}

/// What to run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Overrides of what the seed picks.
    pub overrides: Overrides,
    /// A broken candidate to run instead of the real one.
    pub canary: Option<Canary>,
    /// Keep every trace line (for `--trace` and replays).
    pub keep_trace: bool,
}

/// The outcome of one seed.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The seed.
    pub seed: u64,
    /// The scenario it picked.
    pub swarm: Swarm,
    /// The world's settings it picked.
    pub knobs: Knobs,
    /// The first invariant broken, if any.
    pub violation: Option<Violation>,
    /// The trace's hash: same seed, same hash.
    pub hash: u64,
    /// Trace lines written.
    pub trace_len: u64,
    /// The last trace lines.
    pub tail: Vec<String>,
    /// Every trace line, if kept.
    pub lines: Option<Vec<String>>,
    /// The run as a picture (one lane per process), if its lines were kept.
    pub timeline: Option<Timeline>,
    /// Counters.
    pub stats: RunStats,
    /// The options it ran with.
    pub options: RunOptions,
}

/// Runs `seed` with its own swarm (shaped for the canary, if any).
pub fn run_seed(seed: u64, options: RunOptions) -> RunReport {
    let swarm = Swarm::for_seed(seed, options.overrides, options.canary);
    run_swarm(seed, swarm, options)
}

/// Runs `seed` with a given scenario (e.g. a minimised plan).
pub fn run_swarm(seed: u64, swarm: Swarm, options: RunOptions) -> RunReport {
    run_checked(seed, swarm, options, check::standard())
}

/// Runs `seed` with a given scenario and a chosen set of checkers (e.g. to
/// show that one checker catches a canary on its own).
pub fn run_checked(
    seed: u64,
    swarm: Swarm,
    options: RunOptions,
    invariants: Vec<Checker>,
) -> RunReport {
    let checkers: Vec<&'static str> = invariants.iter().map(|i| i.name()).collect();
    let world = World::with_invariants(
        seed,
        swarm.clone(),
        options.canary,
        options.keep_trace,
        invariants,
    );
    report(seed, world, options, || {
        // The same checkers, on a world that keeps readable lines.
        let again = check::standard()
            .into_iter()
            .filter(|i| checkers.contains(&i.name()))
            .collect();
        let mut readable = World::with_invariants(seed, swarm, options.canary, true, again);
        readable.run();
        readable
    })
}

/// Runs a world built elsewhere (e.g. with [fuzzed](crate::fuzz) or
/// [scripted](crate::explore) choices) to its end and reports it. If it fails
/// without readable lines, `readable` runs it again keeping them (runs are
/// deterministic), for the report's tail.
pub fn report(
    seed: u64,
    mut world: World,
    options: RunOptions,
    readable: impl FnOnce() -> World,
) -> RunReport {
    let violation = world.run();
    let mut tail: Vec<String> = world.trace.tail().cloned().collect();
    if violation.is_some() && !world.trace.readable() {
        // The run wrote no readable lines (formatting them costs more than the
        // rest of a run); it is deterministic, so run it again, readable, for
        // the failure report's tail.
        tail = readable().trace.tail().cloned().collect();
    }
    let timeline = world.trace.timeline(match &violation {
        Some(v) => format!(
            "seed {seed}: invariant {} violated at {} ms",
            v.invariant,
            v.at.as_millis()
        ),
        None => format!("seed {seed}: every checker held"),
    });
    RunReport {
        seed,
        swarm: world.swarm().clone(),
        knobs: *world.knobs(),
        violation,
        hash: world.trace.hash(),
        trace_len: world.trace.len(),
        tail,
        lines: world.trace.lines().map(<[String]>::to_vec),
        timeline,
        stats: world.stats(),
        options,
    }
}

/// The outcome of a range of seeds.
#[derive(Debug, Clone, Default)]
pub struct Sweep {
    /// Seeds run.
    pub seeds: u64,
    /// Their counters, summed.
    pub stats: RunStats,
    /// The first failing seed's report, minimised, if any.
    pub failure: Option<RunReport>,
}

/// Runs every seed in `seeds` until one fails (then minimises its plan).
pub fn sweep(seeds: std::ops::Range<u64>, options: RunOptions) -> Sweep {
    let mut out = Sweep::default();
    for seed in seeds {
        let report = run_seed(seed, options);
        out.seeds += 1;
        out.stats.add(&report.stats);
        if report.violation.is_some() {
            out.failure = Some(minimize(&report).unwrap_or(report));
            break;
        }
    }
    out
}

/// Drops one fault at a time while the run still breaks the same invariant
/// (greedy delta debugging); returns the smallest failing scenario found.
pub fn minimize(report: &RunReport) -> Option<RunReport> {
    let invariant = report.violation.as_ref()?.invariant;
    let mut best = report.clone();
    let mut i = 0;
    while i < best.swarm.plan.len() {
        let mut swarm = best.swarm.clone();
        swarm.plan.remove(i);
        let attempt = run_swarm(report.seed, swarm, report.options);
        if attempt
            .violation
            .as_ref()
            .is_some_and(|v| v.invariant == invariant)
        {
            best = attempt;
        } else {
            i += 1;
        }
    }
    Some(best)
}

impl fmt::Display for RunReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(v) = &self.violation else {
            return writeln!(
                f,
                "seed {} ok: {} steps, hash {:016x}",
                self.seed, self.stats.steps, self.hash
            );
        };
        writeln!(
            f,
            "invariant {} violated at {} (step {}): {}",
            v.invariant, v.at, v.step, v.detail
        )?;
        writeln!(f, "seed={} (0x{:x})", self.seed, self.seed)?;
        writeln!(f, "swarm: {}", self.swarm)?;
        writeln!(f, "knobs: {}", self.knobs)?;
        writeln!(f, "stats: {}", self.stats)?;
        if let Some(canary) = self.options.canary {
            writeln!(f, "canary: {canary:?}")?;
        }
        writeln!(f, "fault plan ({} entries):", self.swarm.plan.len())?;
        for (at, fault) in &self.swarm.plan {
            writeln!(f, "  {at:>12} {fault}")?;
        }
        writeln!(f, "last {} trace lines:", self.tail.len())?;
        for line in &self.tail {
            writeln!(f, "  {line}")?;
        }
        // Everything that shapes the run goes into the command, or the
        // replay would draw another scenario from the same seed.
        let o = &self.options.overrides;
        let mut flags = String::new();
        if let Some(n) = o.candidates {
            flags.push_str(&format!(" --candidates {n}"));
        }
        if let Some(k) = o.leaders {
            flags.push_str(&format!(" --leaders {k}"));
        }
        if o.faults != FaultMix::default() {
            flags.push_str(&format!(" --faults {}", o.faults.flag()));
        }
        if let Some(c) = self.options.canary {
            flags.push_str(&format!(" --canary {}", canary_flag(c)));
        }
        writeln!(
            f,
            "reproduce: zkelect sim --seed {}{flags} --trace",
            self.seed
        )?;
        let mut env = String::new();
        if o.faults != FaultMix::default() {
            env.push_str(&format!(" ZKELECT_FAULTS={}", o.faults.flag()));
        }
        if let Some(c) = self.options.canary {
            env.push_str(&format!(" ZKELECT_CANARY={}", canary_flag(c)));
        }
        writeln!(
            f,
            "       or: ZKELECT_SEED={}{env} cargo test -p zkelect-sim --release --test swarm replay -- --nocapture",
            self.seed
        )
    }
}

/// The command-line spelling of a canary.
pub fn canary_flag(c: Canary) -> &'static str {
    c.flag()
}
