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

use zkelect_core::{Notice, Role, Timestamp};

/// How many lines a failure report shows.
pub const TAIL: usize = 40;

/// The trace of one run.
#[derive(Debug, Clone)]
pub struct Trace {
    hash: u64,
    lines: u64,
    tail: VecDeque<String>,
    all: Option<Vec<String>>,
}

fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

fn role_text(role: Role) -> String {
    match role {
        Role::Leader(t) => format!("LEADER/{t}"),
        Role::Suspended(t) => format!("susp/{t}"),
        other => format!("{other:?}").to_lowercase(),
    }
}

impl Trace {
    /// A trace that keeps every line if `keep_all`, else only the tail.
    pub fn new(keep_all: bool) -> Self {
        Self {
            hash: 0xcbf2_9ce4_8422_2325,
            lines: 0,
            tail: VecDeque::with_capacity(TAIL),
            all: keep_all.then(Vec::new),
        }
    }

    fn push(&mut self, line: String) {
        self.hash = fnv1a(self.hash, line.as_bytes());
        self.hash = fnv1a(self.hash, b"\n");
        self.lines += 1;
        if self.tail.len() == TAIL {
            self.tail.pop_front();
        }
        self.tail.push_back(line.clone());
        if let Some(all) = &mut self.all {
            all.push(line);
        }
    }

    /// A world event (fault, expiry, violation).
    pub fn note(&mut self, at: Timestamp, pid: Option<usize>, glyph: char, text: String) {
        let who = pid.map_or_else(|| "--".to_owned(), |p| format!("p{p}"));
        self.push(format!("{:>12} {who:<4} {glyph} {text}", at.to_string()));
    }

    /// A candidate's step.
    #[allow(clippy::too_many_arguments)]
    pub fn step(
        &mut self,
        at: Timestamp,
        pid: usize,
        role: Role,
        node: Option<&str>,
        watching: Option<&str>,
        ops: &str,
        text: &str,
        notices: &[Notice],
    ) {
        let glyph = notices.iter().fold('.', |g, n| match n {
            Notice::Elected { .. } => 'E',
            Notice::Demoted { .. } => 'D',
            Notice::Suspended if g == '.' => 's',
            _ => g,
        });
        let seq = |n: Option<&str>| {
            n.map_or_else(
                || "-".to_owned(),
                |n| n.rsplit('_').next().unwrap_or(n).to_owned(),
            )
        };
        let ops = if ops.is_empty() { "-" } else { ops };
        let mut line = format!(
            "{:>12} p{pid:<3} {glyph} {:<12} own={:<11} watch={:<11} op={ops:<15} {text}",
            at.to_string(),
            role_text(role),
            seq(node),
            seq(watching),
        );
        for n in notices {
            let _ = write!(line, " | {n:?}");
        }
        self.push(line);
    }

    /// The hash of every line so far (FNV-1a, stable across platforms and versions).
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

    /// The last lines.
    pub fn tail(&self) -> impl Iterator<Item = &String> {
        self.tail.iter()
    }

    /// Every line, if the trace kept them.
    pub fn lines(&self) -> Option<&[String]> {
        self.all.as_deref()
    }
}
