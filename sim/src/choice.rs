//! Choice points: the one source of every nondeterministic choice the world
//! makes (a message's latency, whether a reply overtakes an event, how many
//! requests a dropped connection still applies, ...).
//!
//! The world asks [`Choices`] and never cares who answers. Three sources answer,
//! one per way of searching:
//!
//! | source | answers from | used by |
//! |---|---|---|
//! | [`Choices::Seeded`] | a [`SimRng`] stream: exactly the draws the world made before choice points existed, so every seed replays the same run | the swarm, `zkelect sim` |
//! | [`Choices::Bytes`] | a byte string, read front to back; once it runs out, every answer is the smallest | the fuzz entry ([`crate::fuzz`]): a coverage-guided fuzzer mutates the bytes |
//! | [`Choices::Script`] | a prefix of option indices, then option 0, in windows of branching choices (a fixed fallback stream outside them); it records every choice's arity so a depth-first search can take the next branch | exhaustive small scopes ([`crate::explore`]), as loom and shuttle do |
//!
//! ```
//! use zkelect_sim::choice::{Choices, Script};
//! // A script answers with the options it was given, then records what it saw.
//! let mut c = Choices::Script(Script::new(vec![1, 0], 8, 0));
//! assert_eq!(c.range(1, 8), 8); // option 1 of {lo, hi}
//! assert!(!c.chance(0.5)); // option 0: false
//! let Choices::Script(s) = c else { unreachable!() };
//! assert_eq!(s.next_prefix(), Some(vec![1, 1]));
//! ```

use crate::rng::SimRng;

/// Anything that answers choices: [`Choices`] and a bare [`SimRng`] (so code
/// that draws names, such as [`lookalike_stem`](crate::foreign::lookalike_stem),
/// takes either).
pub trait Source {
    /// A number in `[lo, hi]` (`lo` if the range is empty).
    fn range(&mut self, lo: u64, hi: u64) -> u64;
    /// True with probability `p` (or as a fuzzer or a search picks).
    fn chance(&mut self, p: f64) -> bool;
    /// A raw draw (names, identities).
    fn draw(&mut self) -> u64;
}

impl Source for SimRng {
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        SimRng::range(self, lo, hi)
    }
    fn chance(&mut self, p: f64) -> bool {
        SimRng::chance(self, p)
    }
    fn draw(&mut self) -> u64 {
        SimRng::draw(self)
    }
}

impl Source for Choices {
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        Choices::range(self, lo, hi)
    }
    fn chance(&mut self, p: f64) -> bool {
        Choices::chance(self, p)
    }
    fn draw(&mut self) -> u64 {
        Choices::draw(self)
    }
}

/// Where the world's nondeterministic choices come from.
#[derive(Debug, Clone)]
pub enum Choices {
    /// A seeded stream (the swarm): unchanged seeds give unchanged runs.
    Seeded(SimRng),
    /// A fuzzer's bytes.
    Bytes(ByteStream),
    /// A depth-first search's script.
    Script(Script),
}

impl Choices {
    /// The seeded stream the world has always drawn from (`SimRng::new(seed, 2)`).
    pub fn seeded(seed: u64) -> Self {
        Self::Seeded(SimRng::new(seed, 2))
    }

    /// A number in `[lo, hi]` (`lo` if the range is empty).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        match self {
            Self::Seeded(rng) => rng.range(lo, hi),
            Self::Bytes(bytes) => bytes.range(lo, hi),
            Self::Script(script) => script.range(lo, hi),
        }
    }

    /// True with probability `p` (for the seeded stream); either outcome a
    /// fuzzer or a search may pick when `0 < p < 1`.
    pub fn chance(&mut self, p: f64) -> bool {
        match self {
            Self::Seeded(rng) => rng.chance(p),
            Self::Bytes(bytes) => bytes.chance(p),
            Self::Script(script) => script.chance(p),
        }
    }

    /// One of `n` options, each explored by a search (unlike [`range`](Self::range),
    /// which a search narrows to its ends): for small menus such as which
    /// fault to inject. `0` when `n` ≤ 1.
    pub fn pick(&mut self, n: u32) -> u32 {
        if n <= 1 {
            return 0;
        }
        let hi = u64::from(n - 1);
        // Every answer is ≤ n - 1 < 2^32.
        let option = match self {
            Self::Seeded(rng) => rng.range(0, hi),
            Self::Bytes(bytes) => bytes.range(0, hi),
            Self::Script(script) => u64::from(script.pick_option(n)),
        };
        option.min(hi) as u32
    }

    /// A raw draw, for names and identities (not a branching choice: a search
    /// does not explore them).
    pub fn draw(&mut self) -> u64 {
        match self {
            Self::Seeded(rng) => rng.draw(),
            Self::Bytes(bytes) => bytes.draw(),
            Self::Script(script) => script.fallback.draw(),
        }
    }
}

/// A fuzzer's bytes as answers: each choice reads as few bytes as its range
/// needs. When the bytes run out every answer is the smallest (`lo`, `false`),
/// as `arbitrary` does, so a short input is a calm run, not an error.
#[derive(Debug, Clone, Default)]
pub struct ByteStream {
    bytes: Vec<u8>,
    pos: usize,
    draws: u64,
}

impl ByteStream {
    /// Answers from `bytes`.
    pub fn new(bytes: Vec<u8>) -> Self {
        Self {
            bytes,
            pos: 0,
            draws: 0,
        }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos.min(self.bytes.len())
    }

    fn byte(&mut self) -> Option<u8> {
        let b = self.bytes.get(self.pos).copied();
        self.pos += 1;
        b
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        let span = hi - lo;
        let mut value = 0u64;
        let mut need = span;
        while need > 0 {
            let Some(b) = self.byte() else { break };
            value = (value << 8) | u64::from(b);
            need >>= 8;
        }
        // A span of u64::MAX would overflow `span + 1`; modulo the span then.
        lo + value % span.checked_add(1).unwrap_or(span)
    }

    fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        if p >= 1.0 {
            return true;
        }
        self.byte()
            .is_some_and(|b| (f64::from(b) + 0.5) / 256.0 < p)
    }

    fn draw(&mut self) -> u64 {
        // Names need not be fuzzed, only distinct and replayable.
        self.draws += 1;
        self.draws.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

/// The options a search explores for a number in `[lo, hi]`: the whole range
/// when it holds at most this many values, else its two ends (the fastest and
/// the slowest latency: together they give every relative order of two
/// messages on different links).
pub const SCRIPT_RANGE_OPTIONS: u64 = 3;

/// One choice a script made: which option of how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// The option taken.
    pub option: u32,
    /// How many there were.
    pub arity: u32,
}

/// A depth-first search's answers: branching choices from a prefix of option
/// indices, then option 0, while a window is open (`depth` of them from the
/// start, and as many as [`open`](Self::open) grants later, e.g. right after
/// a fault); outside a window, answers come from a fixed seeded stream (the
/// same prefix always gives the same run, so those are replayable but not
/// explored).
#[derive(Debug, Clone)]
pub struct Script {
    prefix: Vec<u32>,
    /// Branching choices left in the open window.
    window: usize,
    /// Outside a window: deviations from the fallback stream still allowed
    /// (`None`: the stream answers alone, unexplored).
    deviations: Option<usize>,
    taken: Vec<Taken>,
    fallback: SimRng,
}

impl Script {
    /// A script answering `prefix` first, branching on the next `depth`
    /// choices; past them it draws from a stream seeded by `seed`.
    pub fn new(prefix: Vec<u32>, depth: usize, seed: u64) -> Self {
        Self {
            prefix,
            window: depth,
            deviations: None,
            taken: Vec::new(),
            fallback: SimRng::new(seed, 0x5C),
        }
    }

    /// The choices made so far (branching ones only: a choice with one option
    /// is not recorded).
    pub fn taken(&self) -> &[Taken] {
        &self.taken
    }

    /// Whether the window is closed (choices now are not explored).
    pub fn exhausted(&self) -> bool {
        self.window == 0
    }

    /// Opens a window: the next `depth` branching choices are explored.
    pub fn open(&mut self, depth: usize) {
        self.window = depth;
    }

    /// From now on, outside windows, every choice of the run branches, but a
    /// run may deviate from the fallback stream's answer at most `max` times:
    /// a depth-first search then visits every run within `max` deviations of
    /// the stream's schedule, wherever in the run they fall (the iterative
    /// context bounding of CHESS, loom's preemption bound). Option 0 of every
    /// such choice is the stream's own answer; options 1.. are the others.
    pub fn bound_deviations(&mut self, max: usize) {
        self.deviations = Some(max);
    }

    /// The option the prefix names for the next choice of `arity` (0 past the
    /// prefix, or where the prefix names an option this choice lacks).
    fn next_option(&self, arity: u32) -> u32 {
        self.prefix
            .get(self.taken.len())
            .copied()
            .filter(|o| *o < arity)
            .unwrap_or(0)
    }

    /// Picks one of `arity` options (`arity` ≥ 2) in a window; `None` outside.
    fn pick(&mut self, arity: u32) -> Option<u32> {
        if self.exhausted() {
            return None;
        }
        self.window -= 1;
        let option = self.next_option(arity);
        self.taken.push(Taken { option, arity });
        Some(option)
    }

    /// Outside a window, under a deviation bound: which of `arity` answers to
    /// give, as an offset from the stream's (0 = the stream's own). `None`
    /// when the search does not branch here (no bound, or its budget spent).
    fn deviate(&mut self, arity: u32) -> Option<u32> {
        let left = self.deviations.filter(|left| *left > 0)?;
        let option = self.next_option(arity);
        self.taken.push(Taken { option, arity });
        if option > 0 {
            self.deviations = Some(left - 1);
        }
        Some(option)
    }

    /// One of `n` ≥ 2 options for [`Choices::pick`].
    fn pick_option(&mut self, n: u32) -> u32 {
        if let Some(o) = self.pick(n) {
            return o;
        }
        // Every answer is ≤ n - 1 < 2^32.
        let stream = self
            .fallback
            .range(0, u64::from(n - 1))
            .min(u64::from(n - 1)) as u32;
        match self.deviate(n) {
            Some(offset) => (stream + offset) % n,
            None => stream,
        }
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        let span = hi - lo;
        if span < SCRIPT_RANGE_OPTIONS {
            // span + 1 ≤ SCRIPT_RANGE_OPTIONS fits in u32.
            let arity = (span + 1) as u32;
            if let Some(o) = self.pick(arity) {
                return lo + u64::from(o);
            }
            let stream = self.fallback.range(lo, hi);
            match self.deviate(arity) {
                Some(offset) => lo + (stream - lo + u64::from(offset)) % (span + 1),
                None => stream,
            }
        } else {
            match self.pick(2) {
                Some(0) => return lo,
                Some(_) => return hi,
                None => {}
            }
            // Under a deviation bound: the stream's latency, or either end.
            let stream = self.fallback.range(lo, hi);
            match self.deviate(3) {
                Some(1) => lo,
                Some(2) => hi,
                _ => stream,
            }
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        if p >= 1.0 {
            return true;
        }
        if let Some(o) = self.pick(2) {
            return o == 1;
        }
        let stream = self.fallback.chance(p);
        match self.deviate(2) {
            Some(1) => !stream,
            _ => stream,
        }
    }

    /// The prefix of the next run in depth-first order (the last choice that
    /// has an option left, advanced; everything after it dropped), or `None`
    /// when every branch below this script's prefix is done.
    pub fn next_prefix(&self) -> Option<Vec<u32>> {
        let i = self.taken.iter().rposition(|t| t.option + 1 < t.arity)?;
        let mut next: Vec<u32> = self.taken[..i].iter().map(|t| t.option).collect();
        next.push(self.taken[i].option + 1);
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_choices_are_the_old_stream() {
        let mut old = SimRng::new(42, 2);
        let mut new = Choices::seeded(42);
        for i in 0..1_000u64 {
            assert_eq!(old.range(1, 8 + i % 5), new.range(1, 8 + i % 5));
            assert_eq!(old.chance(0.3), new.chance(0.3));
            assert_eq!(old.draw(), new.draw());
        }
    }

    #[test]
    fn bytes_stay_in_range_and_run_out_calmly() {
        let mut c = Choices::Bytes(ByteStream::new(vec![0xFF, 0x00, 0x07, 0xFF, 0xFF]));
        assert_eq!(c.range(1, 8), 1 + 0xFF % 8);
        assert!(c.chance(0.5)); // 0x00
        assert_eq!(c.range(0, 300), (0x07 << 8 | 0xFF) % 301);
        assert!(!c.chance(0.5)); // 0xFF: above any p < 1
        assert_eq!(c.range(5, 9), 5); // ran out: the smallest
        assert!(!c.chance(0.99));
        assert!(c.chance(1.0));
    }

    #[test]
    fn a_script_enumerates_every_branch_once() {
        // Two binary choices and one of three: 2 × 2 × 3 runs.
        let mut seen = Vec::new();
        let mut prefix = Some(Vec::new());
        while let Some(p) = prefix {
            let mut s = Script::new(p, 10, 0);
            let a = s.chance(0.5);
            let b = s.range(1, 8);
            let c = s.range(0, 2);
            seen.push((a, b, c));
            prefix = s.next_prefix();
        }
        assert_eq!(seen.len(), 12);
        let mut unique = seen.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), 12);
    }

    /// Under a bound of one deviation, a run of five choices has exactly
    /// the stream's schedule plus each single deviation: 1 + 5 × (arity - 1).
    #[test]
    fn a_deviation_bound_visits_every_run_within_it_once() {
        fn run(prefix: Vec<u32>, max: usize) -> (Vec<(bool, u64, u32)>, Script) {
            let mut s = Script::new(prefix, 0, 7);
            s.bound_deviations(max);
            let mut c = Choices::Script(s);
            let out = (0..5)
                .map(|_| (c.chance(0.5), c.range(10, 20), c.pick(3)))
                .collect::<Vec<_>>();
            let Choices::Script(s) = c else {
                unreachable!()
            };
            (out, s)
        }
        let (stream, _) = run(Vec::new(), 0);
        for max in [1, 2] {
            let mut seen = Vec::new();
            let mut prefix = Some(Vec::new());
            while let Some(p) = prefix {
                let (out, s) = run(p, max);
                let differing: usize = out
                    .iter()
                    .zip(&stream)
                    .map(|(a, b)| {
                        usize::from(a.0 != b.0) + usize::from(a.1 != b.1) + usize::from(a.2 != b.2)
                    })
                    .sum();
                assert!(differing <= max, "{out:?} is {differing} from {stream:?}");
                seen.push(out);
                prefix = s.next_prefix();
            }
            let runs = seen.len();
            seen.sort_unstable();
            seen.dedup();
            // Five rounds of (chance: 1 other, range: 2 ends, pick of 3: 2 others) = 25 single deviations.
            let singles = 5 * (1 + 2 + 2);
            // Pairs: any two of the 15 choice points, each with its others.
            let pairs = {
                let others = [1usize, 2, 2].repeat(5);
                let mut n = 0;
                for i in 0..others.len() {
                    for j in i + 1..others.len() {
                        n += others[i] * others[j];
                    }
                }
                n
            };
            let expected = 1 + singles + if max == 2 { pairs } else { 0 };
            assert_eq!(runs, expected, "max {max}");
            // A range end may equal the stream's own latency: runs may coincide, never exceed.
            assert!(seen.len() <= runs);
        }
    }

    #[test]
    fn a_script_stops_branching_at_its_depth() {
        let mut s = Script::new(Vec::new(), 1, 9);
        s.chance(0.5);
        assert!(s.exhausted());
        let _ = s.range(1, 8);
        assert_eq!(s.taken().len(), 1);
        assert_eq!(s.next_prefix(), Some(vec![1]));
    }
}
