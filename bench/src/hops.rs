//! Where a takeover's time goes (`--hops`): the times of zkelect's stamps
//! along the path (see `zkelect::hop`), each taken from the moment the bench
//! let go (the release, or the leader's close), in one row per hop.
//!
//! The stamps are `tracing` events at `TRACE` level; [`install`] sets a
//! global subscriber whose one layer enables only their target and reads the
//! clock first thing. Without `--hops` no subscriber is set, and each stamp
//! costs zkelect one cached check.
//!
//! A round's stamps are those between its trigger and the moment the new
//! holder was told; of each hop, the first. Only the next holder's session
//! sees a watch fire in that window (every other session waits on a node
//! that stays), and only the releasing or closing session sends a delete or
//! a close, so the first of each is the round's.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use serde::Serialize;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;
use zkelect::hop;

use crate::stats::Summary;

/// zkelect's stamps, in path order.
pub const ZKELECT: [&str; 6] = [
    hop::DELETE_SENT,
    hop::CLOSE_SENT,
    hop::WATCH_CALLBACK,
    hop::WATCH_FORWARDED,
    hop::PUMP_WOKEN,
    hop::PUMP_PUBLISHED,
];

/// The last row of every path: the application's task is told (the bench's
/// own stamp, the one its figures end at).
pub const TOLD: &str = "told";

static STAMPS: Mutex<Vec<(&'static str, Instant)>> = Mutex::new(Vec::new());

/// Sets the global subscriber that records zkelect's stamps.
///
/// # Errors
///
/// When a global subscriber is already set.
pub fn install() -> Result<()> {
    tracing_subscriber::registry()
        .with(Stamper.with_filter(Targets::new().with_target(hop::TARGET, Level::TRACE)))
        .try_init()
        .map_err(|e| anyhow!("--hops: cannot set the stamps' subscriber: {e}"))
}

/// Forgets every stamp so far (called before a trigger).
pub fn clear() {
    STAMPS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}

/// The first stamp of each hop in `[t0, told]`, as time since `t0`, then
/// [`TOLD`]; forgets every stamp.
pub fn take(t0: Instant, told: Instant) -> Vec<(&'static str, Duration)> {
    let stamps = std::mem::take(&mut *STAMPS.lock().unwrap_or_else(PoisonError::into_inner));
    let mut path: Vec<(&'static str, Duration)> = ZKELECT
        .iter()
        .filter_map(|&name| {
            stamps
                .iter()
                .find(|(n, at)| *n == name && *at >= t0 && *at <= told)
                .map(|(_, at)| (name, at.duration_since(t0)))
        })
        .collect();
    path.push((TOLD, told.duration_since(t0)));
    path
}

struct Stamper;

impl<S: Subscriber> Layer<S> for Stamper {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let at = Instant::now();
        let mut name = Name(None);
        event.record(&mut name);
        if let Some(name) = name.0 {
            STAMPS
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((name, at));
        }
    }
}

/// Reads a stamp's `hop` field as one of [`ZKELECT`]'s names.
struct Name(Option<&'static str>);

impl Visit for Name {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "hop" {
            self.0 = ZKELECT.iter().copied().find(|&h| h == value);
        }
    }

    fn record_debug(&mut self, _: &Field, _: &dyn Debug) {}
}

/// The paths of one kind of round, gathered.
#[derive(Debug, Default)]
pub struct Paths {
    /// Per hop: time since the trigger, µs.
    since: BTreeMap<&'static str, Vec<f64>>,
    /// Per hop: time since the hop before it on the same path, µs.
    step: BTreeMap<&'static str, Vec<f64>>,
    /// Hops in the order first seen.
    order: Vec<&'static str>,
}

impl Paths {
    /// Adds one round's path (as [`take`] returns it).
    pub fn add(&mut self, path: &[(&'static str, Duration)]) {
        let mut before = Duration::ZERO;
        for &(name, since) in path {
            if !self.order.contains(&name) {
                self.order.push(name);
            }
            let us = |d: Duration| d.as_secs_f64() * 1e6;
            self.since.entry(name).or_default().push(us(since));
            self.step
                .entry(name)
                .or_default()
                .push(us(since.saturating_sub(before)));
            before = since;
        }
    }

    /// One row per hop, in path order.
    pub fn summary(&self, bench: String) -> HopsRecord {
        let round = |x: f64| (x * 10.0).round() / 10.0;
        let hops = self
            .order
            .iter()
            .filter_map(|&name| {
                let since = Summary::of(self.since.get(name)?)?;
                let step = Summary::of(self.step.get(name)?)?;
                Some(HopRow {
                    hop: name,
                    samples: since.count,
                    median_us: round(since.median),
                    step_median_us: round(step.median),
                    step_p90_us: round(step.p90),
                })
            })
            .collect();
        HopsRecord {
            kind: "hops",
            bench,
            hops,
        }
    }
}

/// One hop's row.
#[derive(Debug, Clone, Serialize)]
pub struct HopRow {
    /// The hop's name.
    pub hop: &'static str,
    /// Rounds in which it was seen.
    pub samples: usize,
    /// Median time since the trigger, µs.
    pub median_us: f64,
    /// Median time since the hop before it on the same round's path, µs.
    pub step_median_us: f64,
    /// 90th percentile of the same, µs.
    pub step_p90_us: f64,
}

/// Where one kind of round's time went, printed as one JSON line.
#[derive(Debug, Clone, Serialize)]
pub struct HopsRecord {
    /// Always `"hops"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Which rounds (bench, side, size).
    pub bench: String,
    /// In path order.
    pub hops: Vec<HopRow>,
}

impl HopsRecord {
    /// A few lines for the terminal.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = format!("{}:\n", self.bench);
        for h in &self.hops {
            let _ = writeln!(
                out,
                "  {:<16} {:>5} rounds  at {:>8.1} µs  step {:>8.1} µs (p90 {:>8.1})",
                h.hop, h.samples, h.median_us, h.step_median_us, h.step_p90_us
            );
        }
        out
    }
}
