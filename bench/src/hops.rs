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
//! holder was told; of each hop, the first. [`take`] keeps them whichever
//! session stamped them: enough where only the next holder's session sees a
//! watch fire in that window. A mutex hand-off under the two-watch takeover
//! wakes three sessions of the process with one delete (the next holder;
//! the waiter behind it, whose farther node went; the releasing session's
//! own-node watch), so [`take_handoff`] keeps the next holder's path by the
//! stamps' session tags, and the other two sessions' stamps beside it
//! (with the worker thread each ran on, to see what shared the window).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
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

/// zkelect's stamps of a listing.
pub const LISTING: [&str; 3] = [hop::LIST_SENT, hop::LISTED, hop::LIST_HANDLED];

/// The last row of every path: the application's task is told (the bench's
/// own stamp, the one its figures end at).
pub const TOLD: &str = "told";

/// One stamp: its name, its session's tag, the worker thread (numbered in
/// the order threads first stamped), when.
#[derive(Debug, Clone, Copy)]
struct Stamp {
    name: &'static str,
    session: u64,
    thread: u64,
    at: Instant,
}

static STAMPS: Mutex<Vec<Stamp>> = Mutex::new(Vec::new());

/// Each contender's session tag, by contender number (see [`register`]).
static TAGS: Mutex<BTreeMap<usize, u64>> = Mutex::new(BTreeMap::new());

/// Notes that contender `who` stamps with session tag `tag`.
pub fn register(who: usize, tag: u64) {
    TAGS.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(who, tag);
}

/// Contender `who`'s session tag (0 when it registered none).
pub fn tag(who: usize) -> u64 {
    TAGS.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&who)
        .copied()
        .unwrap_or(0)
}

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
                .find(|s| s.name == name && s.at >= t0 && s.at <= told)
                .map(|s| (name, s.at.duration_since(t0)))
        })
        .collect();
    path.push((TOLD, told.duration_since(t0)));
    path
}

/// One mutex hand-off's stamps, session by session (see [`take_handoff`]).
#[derive(Debug, Default)]
pub struct Handoff {
    /// The releasing session's delete, then the next holder's path to
    /// [`TOLD`], as [`take`] gives it.
    pub path: Vec<(&'static str, Duration)>,
    /// The waiter behind the next holder (a session other than the two
    /// that stamped a watch): its watch, its listing, each since the trigger.
    pub farther: Vec<(&'static str, Duration)>,
    /// The releasing session's own-node notice, since the trigger.
    pub own: Vec<(&'static str, Duration)>,
    /// What the other two sessions did before the next holder was told,
    /// each a fact [`Paths::count`] counts.
    pub in_window: Vec<&'static str>,
    /// Whether the farther waiter's listing was in the process (answer in
    /// hand to handled) before the next holder was told.
    pub listing_in_window: bool,
    /// Whether it was handled on the worker thread the next holder's pump
    /// woke on.
    pub listing_same_thread: bool,
}

/// A hand-off's stamps from `t0` on, kept by session: `released` is the
/// releasing session's tag, `holder` the next holder's (a session's tag is
/// its transport's [`Transport::hop_tag`](zkelect::Transport::hop_tag));
/// the first stamp of each hop per session. Forgets every stamp.
pub fn take_handoff(t0: Instant, told: Instant, released: u64, holder: u64) -> Handoff {
    let stamps = std::mem::take(&mut *STAMPS.lock().unwrap_or_else(PoisonError::into_inner));
    let first = |session: u64, name: &str, until: Option<Instant>| {
        stamps.iter().find(|s| {
            s.session == session && s.name == name && s.at >= t0 && until.is_none_or(|u| s.at <= u)
        })
    };
    let since = |s: &Stamp| s.at.duration_since(t0);
    let mut path = Vec::new();
    if let Some(s) = first(released, hop::DELETE_SENT, Some(told)) {
        path.push((s.name, since(s)));
    }
    for name in [
        hop::WATCH_CALLBACK,
        hop::WATCH_FORWARDED,
        hop::PUMP_WOKEN,
        hop::PUMP_PUBLISHED,
    ] {
        if let Some(s) = first(holder, name, Some(told)) {
            path.push((s.name, since(s)));
        }
    }
    path.push((TOLD, told.duration_since(t0)));
    let own = [hop::WATCH_CALLBACK, hop::PUMP_WOKEN, hop::PUMP_PUBLISHED]
        .iter()
        .filter_map(|&name| first(released, name, None).map(|s| (name, since(s))))
        .collect();
    let own_in_window = first(released, hop::WATCH_CALLBACK, Some(told)).is_some();
    let mut handoff = Handoff {
        path,
        own,
        ..Handoff::default()
    };
    if own_in_window {
        handoff
            .in_window
            .push("own: its notice came before the holder was told");
    }
    let farther = stamps.iter().find(|s| {
        s.name == hop::WATCH_CALLBACK && s.at >= t0 && s.session != released && s.session != holder
    });
    if let Some(farther) = farther.map(|s| s.session) {
        let names = [hop::WATCH_CALLBACK, hop::PUMP_WOKEN, hop::PUMP_PUBLISHED];
        handoff.farther = names
            .iter()
            .chain(LISTING.iter())
            .filter_map(|&name| first(farther, name, None).map(|s| (name, since(s))))
            .collect();
        let listed = first(farther, hop::LISTED, None);
        handoff.listing_in_window = listed.is_some_and(|s| s.at <= told);
        if first(farther, hop::WATCH_CALLBACK, Some(told)).is_some() {
            handoff
                .in_window
                .push("farther: its notice came before the holder was told");
        }
        if first(farther, hop::LIST_SENT, Some(told)).is_some() {
            handoff
                .in_window
                .push("farther: its listing went out before the holder was told");
        }
        let woken = first(holder, hop::PUMP_WOKEN, Some(told));
        let handled = first(farther, hop::LIST_HANDLED, None);
        handoff.listing_same_thread =
            matches!((woken, handled), (Some(w), Some(h)) if w.thread == h.thread);
    }
    handoff
}

struct Stamper;

impl<S: Subscriber> Layer<S> for Stamper {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let at = Instant::now();
        let mut fields = Fields::default();
        event.record(&mut fields);
        if let Some(name) = fields.name {
            let stamp = Stamp {
                name,
                session: fields.session,
                thread: THREAD.with(|t| *t),
                at,
            };
            STAMPS
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(stamp);
        }
    }
}

thread_local! {
    /// This thread's number, in the order threads first stamped.
    static THREAD: u64 = {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed)
    };
}

/// Reads a stamp's `hop` field as one of [`ZKELECT`]'s or [`LISTING`]'s
/// names, and its `session` tag.
#[derive(Default)]
struct Fields {
    name: Option<&'static str>,
    session: u64,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "hop" {
            self.name = ZKELECT
                .iter()
                .chain(LISTING.iter())
                .copied()
                .find(|&h| h == value);
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "session" {
            self.session = value;
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
    /// Rounds added, and per fact counted, the rounds it held in.
    rounds: usize,
    counts: BTreeMap<&'static str, usize>,
}

impl Paths {
    /// Adds one round's path (as [`take`] returns it).
    pub fn add(&mut self, path: &[(&'static str, Duration)]) {
        self.rounds += 1;
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

    /// Counts `fact` as held in the round last added.
    pub fn count(&mut self, fact: &'static str) {
        *self.counts.entry(fact).or_default() += 1;
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
            rounds: self.rounds,
            counts: self.counts.iter().map(|(&f, &n)| (f, n)).collect(),
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
    /// Rounds added.
    pub rounds: usize,
    /// Facts counted, each with the number of rounds it held in.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub counts: Vec<(&'static str, usize)>,
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
        for (fact, n) in &self.counts {
            let _ = writeln!(out, "  {fact}: {n} of {} rounds", self.rounds);
        }
        out
    }
}
