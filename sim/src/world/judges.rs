//! The world's checkers as it holds them: which judge which kind of event,
//! and which passes still hold (so a step asks none of them again).

use crate::invariant::{Event, Holds, Invariant, Kinds};

use super::spec::Phase;
use super::view::View;

/// The world's checkers, with per event kind ([`Kinds::index`]) the ones
/// that judge it ([`Invariant::kinds`]), in their order.
pub(super) struct Judges {
    invariants: Vec<Box<dyn Invariant<View>>>,
    by_kind: Vec<Vec<usize>>,
    /// Per checker, whether it judges steps (asked once, as `by_kind`).
    of_steps: Vec<bool>,
    /// Per checker, the key under which its last pass of a step holds
    /// ([`Holds::UntilChange`], [`Holds::UntilCountsChange`]).
    held: Vec<Option<Held>>,
    /// The step key under which every step checker's pass holds: until it
    /// changes, a step asks none of them.
    all_held: Option<StepKey>,
    /// The counts under which every step checker's pass holds (each said
    /// [`Holds::UntilCountsChange`]): until they change, a step asks none.
    counts_held: Option<CountsKey>,
}

/// Under which key a checker's pass of a step holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Held {
    /// [`Holds::UntilChange`].
    Step(StepKey),
    /// [`Holds::UntilCountsChange`].
    Counts(CountsKey),
}

/// What a pass that said [`Holds::UntilCountsChange`] may read: the census
/// counts (their version changes whenever a process's share does), the
/// phase and the number of processes. It changes only when the step key
/// does, so a pass under the step key holds under these too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CountsKey {
    counts: u64,
    phase: Phase,
    procs: usize,
}

/// What a checker's pass of a step may read that a step can change
/// ([`Invariant::check_step`]): while none of it changes, a pass that said
/// [`Holds::UntilChange`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct StepKey {
    generation: u64,
    zxid: i64,
    phase: Phase,
    procs: usize,
}

/// A checker's verdict against the world: its name and what it saw.
pub(super) type Failure = (&'static str, String);

impl Judges {
    /// The judges of `invariants`, each asked for the kinds it judges.
    pub(super) fn new(invariants: Vec<Box<dyn Invariant<View>>>) -> Self {
        let by_kind = Kinds::each()
            .map(|kind| {
                (0..invariants.len())
                    .filter(|&i| invariants[i].kinds().contains(kind))
                    .collect()
            })
            .collect();
        let of_steps = invariants
            .iter()
            .map(|i| i.kinds().contains(Kinds::STEP))
            .collect();
        Self {
            held: vec![None; invariants.len()],
            of_steps,
            all_held: None,
            counts_held: None,
            invariants,
            by_kind,
        }
    }

    /// Runs the step's checkers against `view`, skipping those whose last
    /// pass holds; what failed goes to `failed`.
    pub(super) fn step(&mut self, view: &View, failed: &mut Vec<Failure>) {
        let key = StepKey {
            generation: view.counts.generation,
            zxid: view.zk.zxid(),
            phase: view.phase,
            procs: view.procs.len(),
        };
        let counts = CountsKey {
            counts: view.counts.version,
            phase: view.phase,
            procs: view.procs.len(),
        };
        if self.all_held == Some(key) || self.counts_held == Some(counts) {
            return;
        }
        self.all_held = Some(key);
        let mut all_counts = true;
        if let Some(list) = self.by_kind.get(Kinds::STEP.index()) {
            for &i in list {
                let (Some(invariant), Some(held)) =
                    (self.invariants.get_mut(i), self.held.get_mut(i))
                else {
                    continue;
                };
                match *held {
                    Some(Held::Step(k)) if k == key => {
                        all_counts = false;
                        continue;
                    }
                    Some(Held::Counts(c)) if c == counts => continue,
                    _ => {}
                }
                match invariant.check_step(view) {
                    Ok(Holds::UntilChange) => {
                        *held = Some(Held::Step(key));
                        all_counts = false;
                    }
                    Ok(Holds::UntilCountsChange) => *held = Some(Held::Counts(counts)),
                    Ok(Holds::ThisStep) => {
                        *held = None;
                        self.all_held = None;
                        all_counts = false;
                    }
                    Err(detail) => {
                        *held = None;
                        self.all_held = None;
                        all_counts = false;
                        failed.push((invariant.name(), detail));
                    }
                }
            }
        }
        self.counts_held = all_counts.then_some(counts);
    }

    /// Runs the checkers of `event`'s kind against `view`; what failed goes
    /// to `failed`.
    ///
    /// A checker of steps that also judges `event` may have changed what its
    /// next pass of a step reads (a notice that starts a watch): its last
    /// pass, and with it the step's shortcut, no longer holds, if it says
    /// so ([`Invariant::restep_after`]; most events change nothing of it).
    pub(super) fn event(&mut self, view: &View, event: &Event<'_>, failed: &mut Vec<Failure>) {
        if let Some(list) = self.by_kind.get(event.kind().index()) {
            for &i in list {
                if let Some(invariant) = self.invariants.get_mut(i) {
                    if let Err(detail) = invariant.check(view, event) {
                        failed.push((invariant.name(), detail));
                    }
                    if self.of_steps.get(i).copied().unwrap_or(true)
                        && invariant.restep_after(event)
                    {
                        if let Some(held) = self.held.get_mut(i) {
                            *held = None;
                        }
                        self.all_held = None;
                        self.counts_held = None;
                    }
                }
            }
        }
    }
}
