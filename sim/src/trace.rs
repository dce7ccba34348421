//! The trace: one line per step in fixed columns, hashed as it is written.
//!
//! Columns: virtual time, process, glyph, role after the step, own node,
//! watched node, the requests the step emitted (`op`), then what happened (and
//! any notices). Glyphs: `.` a step of a candidate, `E` it was elected, `D`
//! demoted, `s` suspended, `F` a fault, `R` an operator deleted a node, `d` a
//! client-side disconnect, `x` a server-side expiry, `S` the server came back,
//! `r` a pause ended, `w` the fenced resource rejected a stale write, `P` an
//! operator created a persistent look-alike, `H` the faults stopped, `L` the
//! liveness bound passed, `!` a violation.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};

use zkelect_core::{Notice, Role, Timestamp};

use crate::timeline::{MarkKind, Recorder, Timeline};

/// How many lines a failure report shows.
pub const TAIL: usize = 40;

/// The trace of one run.
///
/// Every step is folded into a hash as a compact record (time, process, glyph,
/// role and token, own and watched node, the verbs sent, the notices' kinds),
/// without formatting anything. Readable lines are written only when the
/// trace keeps them ([`Trace::new`]`(true)`): runs are deterministic, so a
/// failure's readable trace comes from running its seed again
/// ([`run_checked`](crate::run::run_checked) does so for the tail).
#[derive(Debug, Clone)]
pub struct Trace {
    hash: u64,
    lines: u64,
    tail: VecDeque<String>,
    all: Option<Vec<String>>,
    /// The picture of the run, drawn while readable lines are kept.
    picture: Option<Recorder>,
}

/// The hash's multiplier: odd, with its bits spread over the whole word
/// (rustc's `FxHasher` uses it), so one multiply carries every bit of a
/// word up through the hash.
const MUL: u64 = 0x517c_c1b7_2722_0a95;

/// Folds a word in at once. The rotation brings the bits a multiply pushed
/// to the top back to the bottom, so no bit of an input only ever reaches
/// the hash's top bits. A word per multiply, not a byte: hashing paths a
/// byte at a time was a twentieth of a sweep's time.
fn fold(hash: u64, word: u64) -> u64 {
    (hash.rotate_left(5) ^ word).wrapping_mul(MUL)
}

/// Folds `bytes` in, eight to a word (the last word padded with zeros),
/// then their length, so that consecutive strings cannot trade bytes.
fn fold_bytes(mut hash: u64, bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        hash = fold(hash, u64::from_le_bytes(word));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut word = [0; 8];
        word[..rest.len()].copy_from_slice(rest);
        hash = fold(hash, u64::from_le_bytes(word));
    }
    fold(hash, bytes.len() as u64)
}

fn role_text(role: Role) -> String {
    match role {
        Role::Leader(t) => format!("LEADER/{t}"),
        Role::Suspended(t) => format!("susp/{t}"),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// The trace's hash as a [`Hasher`], for the core's `Hash` types (roles,
/// notices): no formatting, no allocation, and every integer (a
/// discriminant, a length, a token) folded in as one word.
struct Words(u64);

impl Hasher for Words {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0 = fold_bytes(self.0, bytes);
    }

    fn write_u8(&mut self, word: u8) {
        self.0 = fold(self.0, u64::from(word));
    }

    fn write_u16(&mut self, word: u16) {
        self.0 = fold(self.0, u64::from(word));
    }

    fn write_u32(&mut self, word: u32) {
        self.0 = fold(self.0, u64::from(word));
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = fold(self.0, word);
    }

    fn write_usize(&mut self, word: usize) {
        self.0 = fold(self.0, word as u64);
    }
}

impl Trace {
    /// A trace that writes (and keeps) every readable line if `keep_all`,
    /// else only the compact hash.
    pub fn new(keep_all: bool) -> Self {
        Self {
            hash: 0xcbf2_9ce4_8422_2325,
            lines: 0,
            tail: VecDeque::with_capacity(if keep_all { TAIL } else { 0 }),
            all: keep_all.then(Vec::new),
            picture: keep_all.then(Recorder::default),
        }
    }

    /// Whether readable lines are written (callers skip formatting otherwise).
    pub fn readable(&self) -> bool {
        self.all.is_some()
    }

    fn push(&mut self, line: String) {
        if self.tail.len() == TAIL {
            self.tail.pop_front();
        }
        self.tail.push_back(line.clone());
        if let Some(all) = &mut self.all {
            all.push(line);
        }
    }

    fn head(&mut self, at: Timestamp, pid: Option<usize>, glyph: char) {
        self.lines += 1;
        self.hash = fold(self.hash, at.as_millis());
        self.hash = fold(self.hash, pid.map_or(u64::MAX, |p| p as u64));
        self.hash = fold(self.hash, u64::from(glyph));
    }

    /// A world event (fault, expiry, violation); `text` is called only if
    /// the trace is readable.
    pub fn note(
        &mut self,
        at: Timestamp,
        pid: Option<usize>,
        glyph: char,
        text: impl FnOnce() -> String,
    ) {
        self.note_on(at, pid, pid, glyph, text);
    }

    /// A fault injected now, as [`note`](Self::note)`(at, None, 'F', text)`
    /// (the same record and line), drawn on the lane of the process it hits
    /// (`target`), if one.
    pub fn fault(&mut self, at: Timestamp, target: Option<usize>, text: impl FnOnce() -> String) {
        self.note_on(at, None, target, 'F', text);
    }

    fn note_on(
        &mut self,
        at: Timestamp,
        pid: Option<usize>,
        lane: Option<usize>,
        glyph: char,
        text: impl FnOnce() -> String,
    ) {
        self.head(at, pid, glyph);
        if self.readable() {
            let who = pid.map_or_else(|| "--".to_owned(), |p| format!("p{p}"));
            let text = text();
            // Faults of the world (F, the server back, an operator's deletion,
            // an expiry, a look-alike node) and the violation are drawn; the
            // rest (a client noticing, the phases of the run) are not.
            let kind = match glyph {
                'F' | 'S' | 'R' | 'x' | 'P' => Some(MarkKind::Fault),
                '!' => Some(MarkKind::Violation),
                _ => None,
            };
            if let (Some(kind), Some(picture)) = (kind, &mut self.picture) {
                picture.mark(at, lane, kind, text.clone());
            }
            self.push(format!("{:>12} {who:<4} {glyph} {text}", at.to_string()));
        }
    }

    /// A candidate's step: `verbs` are the requests it sent; `text` (what
    /// happened) is called only if the trace is readable.
    #[allow(clippy::too_many_arguments)]
    pub fn step(
        &mut self,
        at: Timestamp,
        pid: usize,
        role: Role,
        node: Option<&str>,
        watching: Option<&str>,
        verbs: &[&'static str],
        text: impl FnOnce() -> String,
        notices: &[Notice],
    ) {
        let glyph = notices.iter().fold('.', |g, n| match n {
            Notice::Elected { .. } => 'E',
            Notice::Demoted { .. } => 'D',
            Notice::Suspended if g == '.' => 's',
            _ => g,
        });
        self.head(at, Some(pid), glyph);
        let mut h = Words(self.hash);
        role.hash(&mut h);
        for n in notices {
            n.hash(&mut h);
        }
        self.hash = h.finish();
        self.hash = fold_bytes(self.hash, node.unwrap_or("-").as_bytes());
        self.hash = fold_bytes(self.hash, watching.unwrap_or("-").as_bytes());
        for verb in verbs {
            self.hash = fold_bytes(self.hash, verb.as_bytes());
        }
        if !self.readable() {
            return;
        }
        if let Some(picture) = &mut self.picture {
            picture.role(at, pid, role);
        }
        let seq = |n: Option<&str>| {
            n.map_or_else(
                || "-".to_owned(),
                |n| n.rsplit('_').next().unwrap_or(n).to_owned(),
            )
        };
        let ops = if verbs.is_empty() {
            "-".to_owned()
        } else {
            verbs.join(",")
        };
        let mut line = format!(
            "{:>12} p{pid:<3} {glyph} {:<12} own={:<11} watch={:<11} op={ops:<15} {}",
            at.to_string(),
            role_text(role),
            seq(node),
            seq(watching),
            text(),
        );
        for n in notices {
            let _ = write!(line, " | {n:?}");
        }
        self.push(line);
    }

    /// The hash of every record so far (a word-at-a-time multiplicative
    /// hash, bytes read little-endian: the same whether or not the trace is
    /// readable, and for one toolchain on every platform).
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// How many lines.
    pub fn len(&self) -> u64 {
        self.lines
    }

    /// Whether nothing was traced.
    pub fn is_empty(&self) -> bool {
        self.lines == 0
    }

    /// The last lines (none unless the trace is readable).
    pub fn tail(&self) -> impl Iterator<Item = &String> {
        self.tail.iter()
    }

    /// Every line, if the trace kept them.
    pub fn lines(&self) -> Option<&[String]> {
        self.all.as_deref()
    }

    /// The run as a picture ([`Timeline`]), if the trace kept its lines.
    pub fn timeline(&self, title: impl Into<String>) -> Option<Timeline> {
        self.picture.as_ref().map(|p| p.timeline(title))
    }
}
