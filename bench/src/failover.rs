//! One failover configuration: N contenders of one implementation on one fresh
//! election path, R rounds of "the leader closes its session".
//!
//! Each round:
//!
//! 1. read the server's packet counters (`srvr`, see [`crate::mntr`]), then
//!    take `t0 = Instant::now()`;
//! 2. the current leader closes its ZooKeeper session (so the server deletes
//!    its ephemeral node at once, as when a process dies cleanly);
//! 3. wait until another contender is told it leads (its own [`LeaderEvent`](crate::contender::LeaderEvent),
//!    taken on the same clock): `failover = event.at − t0`;
//! 4. let the server settle: probe the counters every 10 ms until at least
//!    `quiet` (50 ms by default) has passed since step 3 **and** two
//!    consecutive probes saw at most one packet besides the probes themselves
//!    with nothing outstanding (so a herd of re-lists is counted in full);
//!    the last probe closes the round's window;
//! 5. the round's server work is the counters' difference over the window,
//!    minus the probes' own packets. Idle sessions ping (zookeeper-async:
//!    every ⅔ of the session timeout; N sessions started together ping in
//!    bursts), so each round also counts a *control* window of the same kind
//!    just before step 1 — nothing happens in it but the background — and
//!    reports it, scaled to the round's window length, next to the raw
//!    figure; the mean of `packets − control` over the rounds is the
//!    failover's own work, without bias;
//! 6. watchers triggered are read with `mntr` just before the control window
//!    and just after the round's window (outside both packet windows, as
//!    `mntr` costs a varying number of packets; the control window triggers
//!    none);
//! 7. a new contender joins at the back (outside the window) so N stays
//!    constant; the server settles again before the next round.
//!
//! [`Config`] holds one configuration's contenders between rounds, so that
//! the binary can interleave the rounds of several configurations.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::contender::{Contender, Implementation, LeaderBoard};
use crate::hops::{HopsRecord, Paths};
use crate::mntr::{delta, Monitor, Packets, Sample, PROBE_EVERY};

/// How one configuration is run.
#[derive(Debug, Clone)]
pub struct RoundSettings {
    /// Contenders at all times (N).
    pub candidates: usize,
    /// Recorded rounds.
    pub rounds: usize,
    /// Rounds run first and not recorded (they warm up both JITs and caches).
    pub warmup: usize,
    /// Minimum quiet period after the new leader is known (step 4).
    pub quiet: Duration,
    /// Longest wait for the server to settle before a round proceeds anyway
    /// (the round is then marked `settled: false`).
    pub settle_timeout: Duration,
    /// Longest wait for a new leader; a round that exceeds it fails the run.
    pub failover_timeout: Duration,
    /// Contenders started at once while filling the election.
    pub start_concurrency: usize,
    /// Length of the control window counted before each round.
    pub control: Duration,
}

/// Which configuration a JSON line is about: its `impl`, `strategy` and `n`
/// fields (flattened into each record).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Setup {
    /// `latch` or `zkelect`.
    #[serde(rename = "impl")]
    pub implementation: &'static str,
    /// The watch strategy (`null` for the latch, which has none).
    pub strategy: Option<String>,
    /// Contenders (N).
    pub n: usize,
}

impl Setup {
    /// `implementation` with `n` contenders.
    pub fn of(implementation: &dyn Implementation, n: usize) -> Setup {
        Setup {
            implementation: implementation.name(),
            strategy: implementation.strategy().map(|s| s.to_string()),
            n,
        }
    }
}

/// One recorded round, printed as one JSON line.
#[derive(Debug, Clone, Serialize)]
pub struct RoundRecord {
    /// Always `"round"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The configuration.
    #[serde(flatten)]
    pub setup: Setup,
    /// Round number, from 1.
    pub round: usize,
    /// Microseconds from just before the close to the new leader's notice.
    pub failover_us: f64,
    /// Packets the server received in the window, less the bench's probes.
    pub packets_received: u64,
    /// Packets the server sent in the window, less the bench's probes.
    pub packets_sent: u64,
    /// Packets received in the control window just before the round (bench
    /// probes removed), scaled to this round's window length.
    pub control_received: f64,
    /// Packets sent in the control window, likewise.
    pub control_sent: f64,
    /// Watchers the server triggered in the window (`null` if the server has
    /// no such metrics).
    pub watches_fired: Option<u64>,
    /// Length of the counting window, microseconds.
    pub window_us: u64,
    /// Whether the server went quiet before `settle_timeout`.
    pub settled: bool,
    /// How many contenders believed they led at the end of the window.
    pub leaders_after: usize,
    /// Latch only: microseconds between the last poll that saw a follower
    /// and the poll that saw the leader (the detection uncertainty).
    pub poll_gap_us: Option<f64>,
    /// The contender that closed its session.
    pub old_leader: u64,
    /// The contender that took over.
    pub new_leader: u64,
}

/// What one configuration produced besides its rounds.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigReport {
    /// Always `"config"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The configuration.
    #[serde(flatten)]
    pub setup: Setup,
    /// Milliseconds to start all N contenders.
    pub startup_ms: f64,
    /// CPU milliseconds this process (every thread; not the server's) spent
    /// meanwhile, to 10 ms (`/proc/self/stat`; `null` where there is none):
    /// on a crowded machine a steadier figure of the clients' own work than
    /// the wall clock.
    pub startup_cpu_ms: Option<f64>,
    /// Minor page faults this process took meanwhile (`null` where unknown).
    pub startup_page_faults: Option<u64>,
}

/// One configuration (implementation, strategy, N) with its contenders
/// running, ready for rounds. Several configurations can be alive at once so
/// their rounds can be interleaved: a phase of load on a shared machine then
/// hits every implementation alike.
pub struct Config {
    implementation: Arc<dyn Implementation>,
    path: String,
    settings: RoundSettings,
    board: Arc<LeaderBoard>,
    contenders: Vec<Box<dyn Contender>>,
    next_id: u64,
    rounds_run: usize,
    report: ConfigReport,
    /// Where the recorded rounds' time went (stamps only with `--hops`).
    paths: Paths,
}

impl Config {
    /// Starts `settings.candidates` contenders of `implementation` on `path`.
    ///
    /// # Errors
    ///
    /// When a contender cannot connect or join (all started ones are closed).
    pub async fn start(
        implementation: Arc<dyn Implementation>,
        path: &str,
        settings: &RoundSettings,
    ) -> Result<Config> {
        let board = LeaderBoard::new();
        let cpu_before = process_cpu_ms();
        let faults_before = process_page_faults();
        let started = Instant::now();
        let contenders = start_all(&implementation, path, settings, &board).await?;
        let report = ConfigReport {
            kind: "config",
            setup: Setup::of(implementation.as_ref(), settings.candidates),
            startup_ms: round_to_tenth(started.elapsed().as_secs_f64() * 1e3),
            startup_cpu_ms: process_cpu_ms()
                .zip(cpu_before)
                .map(|(after, before)| after - before),
            startup_page_faults: process_page_faults()
                .zip(faults_before)
                .map(|(after, before)| after.saturating_sub(before)),
        };
        Ok(Config {
            implementation,
            path: path.to_owned(),
            settings: settings.clone(),
            board,
            contenders,
            next_id: settings.candidates as u64,
            rounds_run: 0,
            report,
            paths: Paths::default(),
        })
    }

    /// What the start-up measured.
    pub fn report(&self) -> &ConfigReport {
        &self.report
    }

    /// Where the recorded rounds' time went, hop by hop (see
    /// [`crate::hops`]).
    pub fn hops(&self) -> HopsRecord {
        self.paths.summary(format!(
            "failover N={}: {}",
            self.settings.candidates,
            self.label()
        ))
    }

    /// `latch`, `zkelect/predecessor`, ...
    pub fn label(&self) -> String {
        match self.implementation.strategy() {
            Some(s) => format!("{}/{s}", self.implementation.name()),
            None => self.implementation.name().to_owned(),
        }
    }

    /// Runs the next round (see the module docs); returns its record, or
    /// `None` for a warm-up round.
    ///
    /// # Errors
    ///
    /// When there is not exactly one leader before the round, no new leader
    /// is seen within `failover_timeout`, a replacement cannot join, or the
    /// server's counters cannot be read.
    pub async fn round(&mut self, monitor: &Monitor) -> Result<Option<RoundRecord>> {
        let round = self.rounds_run;
        self.rounds_run += 1;
        let total = self.settings.warmup + self.settings.rounds;
        self.implementation.focus(true);
        let result = self.round_inner(monitor, round).await;
        self.implementation.focus(false);
        result.with_context(|| format!("round {} of {total}", round + 1))
    }

    async fn round_inner(
        &mut self,
        monitor: &Monitor,
        round: usize,
    ) -> Result<Option<RoundRecord>> {
        let settings = &self.settings;
        let contenders = &mut self.contenders;
        let overhead = monitor.probe_overhead();
        settle(monitor, settings.quiet, settings.settle_timeout).await?;
        let leader = sole_leader(contenders, settings.failover_timeout).await?;
        self.board.clear();
        let old = contenders.swap_remove(leader);
        let old_id = old.id();

        // The control window: the same kind of counting, with nothing done.
        // Probed like the round's window (every 10 ms), so the probes' own
        // packets come off both the same way.
        let watches_before = monitor.watches_fired().await?;
        let control_start = monitor.sample().await?;
        let (before, control_probes) = probe_for(monitor, settings.control).await?;
        crate::hops::clear();
        let t0 = Instant::now();
        let killed = old.kill().await;
        let event = self
            .board
            .wait_for(
                |e| e.contender != old_id && e.at >= t0,
                settings.failover_timeout,
            )
            .await;
        killed.context("closing the leader")?;
        let Some(event) = event else {
            bail!(
                "no contender was told it leads within {:?} after the leader (contender {old_id}) \
                 closed its session; the {} others: {}",
                settings.failover_timeout,
                contenders.len(),
                census(contenders)
            );
        };
        let failover = event.at.duration_since(t0);
        let path = crate::hops::take(t0, event.at);
        if round >= settings.warmup {
            self.paths.add(&path);
        }
        let (after, probes, settled) =
            settle_from(monitor, before, settings.quiet, settings.settle_timeout).await?;
        let leaders_after = contenders.iter().filter(|c| c.is_leader()).count();
        let watches_after = monitor.watches_fired().await?;

        let record = if round >= settings.warmup {
            let (received, sent) = delta(&before, &after)?;
            let window = after.at.duration_since(before.at);
            let (control_received, control_sent) = delta(&control_start, &before)?;
            let control_span = before.at.duration_since(control_start.at).as_secs_f64();
            let scale = window.as_secs_f64() / control_span.max(1e-6);
            let control = |count: u64, per_probe: f64| {
                round_to_tenth((count as f64 - per_probe * control_probes as f64).max(0.0) * scale)
            };
            Some(RoundRecord {
                kind: "round",
                setup: Setup::of(self.implementation.as_ref(), settings.candidates),
                round: round - settings.warmup + 1,
                failover_us: round_to_tenth(failover.as_secs_f64() * 1e6),
                packets_received: received
                    .saturating_sub((overhead.received * probes as f64).round() as u64),
                packets_sent: sent.saturating_sub((overhead.sent * probes as f64).round() as u64),
                control_received: control(control_received, overhead.received),
                control_sent: control(control_sent, overhead.sent),
                watches_fired: watches_after
                    .zip(watches_before)
                    .map(|(a, b)| a.saturating_sub(b)),
                window_us: window.as_micros() as u64,
                settled,
                leaders_after,
                poll_gap_us: event
                    .poll_gap
                    .map(|g| round_to_tenth(g.as_secs_f64() * 1e6)),
                old_leader: old_id,
                new_leader: event.contender,
            })
        } else {
            None
        };

        // Refill at the back, outside the window (the next round settles first).
        let fresh = self
            .implementation
            .start(self.next_id, &self.path, self.board.clone())
            .await
            .context("starting a replacement")?;
        self.next_id += 1;
        self.contenders.push(fresh);
        Ok(record)
    }

    /// Closes every contender's session.
    pub async fn shutdown(mut self) {
        kill_all(std::mem::take(&mut self.contenders)).await;
    }
}

/// Runs one configuration alone: starts it, runs all its rounds, closes it;
/// calls `on_round` with each recorded round as soon as it is done.
///
/// # Errors
///
/// As [`Config::start`] and [`Config::round`].
pub async fn run(
    implementation: Arc<dyn Implementation>,
    monitor: &Monitor,
    path: &str,
    settings: &RoundSettings,
    mut on_round: impl FnMut(&RoundRecord),
) -> Result<(ConfigReport, Vec<RoundRecord>)> {
    let mut config = Config::start(implementation, path, settings).await?;
    let mut records = Vec::with_capacity(settings.rounds);
    let mut outcome = Ok(());
    for _ in 0..settings.warmup + settings.rounds {
        match config.round(monitor).await {
            Ok(Some(record)) => {
                on_round(&record);
                records.push(record);
            }
            Ok(None) => {}
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    let report = config.report().clone();
    config.shutdown().await;
    outcome.map(|()| (report, records))
}

/// The CPU time this process has used (user and system, every thread), in
/// milliseconds, from `/proc/self/stat` (Linux; clock ticks of 10 ms).
fn process_cpu_ms() -> Option<f64> {
    let [utime, stime] = proc_self_stat([13, 14])?;
    // USER_HZ is 100 on every Linux this runs on.
    Some((utime + stime) as f64 * 10.0)
}

/// The minor page faults this process has taken (every thread).
fn process_page_faults() -> Option<u64> {
    proc_self_stat([9]).map(|[faults]| faults)
}

/// Numeric fields of `/proc/self/stat`, by their 0-based position on the
/// line (`proc(5)` numbers them from 1).
fn proc_self_stat<const N: usize>(positions: [usize; N]) -> Option<[u64; N]> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name, field 1, is in parentheses and may hold spaces:
    // count from the field after it (the state, at 0-based position 2).
    let rest: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    let mut out = [0; N];
    for (slot, position) in out.iter_mut().zip(positions) {
        *slot = rest.get(position.checked_sub(2)?)?.parse().ok()?;
    }
    Some(out)
}

/// Starts `settings.candidates` contenders, a few at a time.
async fn start_all(
    implementation: &Arc<dyn Implementation>,
    path: &str,
    settings: &RoundSettings,
    board: &Arc<LeaderBoard>,
) -> Result<Vec<Box<dyn Contender>>> {
    // The first one alone, so that the election path exists before the
    // crowd arrives (both implementations create it on demand).
    let first = implementation
        .start(0, path, board.clone())
        .await
        .context("starting contender 0")?;
    let mut contenders = vec![first];
    let gate = Arc::new(Semaphore::new(settings.start_concurrency.max(1)));
    let mut tasks = JoinSet::new();
    for id in 1..settings.candidates as u64 {
        let implementation = implementation.clone();
        let path = path.to_owned();
        let board = board.clone();
        let gate = gate.clone();
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await?;
            implementation
                .start(id, &path, board)
                .await
                .with_context(|| format!("starting contender {id}"))
        });
    }
    let mut failure = None;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok(c)) => contenders.push(c),
            Ok(Err(e)) => failure = failure.or(Some(e)),
            Err(e) => failure = failure.or(Some(anyhow::Error::new(e))),
        }
    }
    if let Some(e) = failure {
        kill_all(contenders).await;
        return Err(e);
    }
    Ok(contenders)
}

/// Closes every contender's session at once.
async fn kill_all(contenders: Vec<Box<dyn Contender>>) {
    let mut tasks = JoinSet::new();
    for c in contenders {
        tasks.spawn(c.kill());
    }
    while tasks.join_next().await.is_some() {}
}

/// How many contenders are in which state, e.g. `Follower × 48, Leader × 1`.
fn census(contenders: &[Box<dyn Contender>]) -> String {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for c in contenders {
        *counts.entry(c.describe()).or_default() += 1;
    }
    counts
        .iter()
        .map(|(state, n)| format!("{state} × {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Waits until exactly one contender believes it leads, and returns its index.
pub(crate) async fn sole_leader(
    contenders: &[Box<dyn Contender>],
    timeout: Duration,
) -> Result<usize> {
    let deadline = Instant::now() + timeout;
    loop {
        let leaders: Vec<usize> = contenders
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_leader())
            .map(|(i, _)| i)
            .collect();
        if let [only] = leaders[..] {
            return Ok(only);
        }
        if Instant::now() >= deadline {
            bail!(
                "expected exactly one leader among {} contenders, found {} after {timeout:?}: {}",
                contenders.len(),
                leaders.len(),
                census(contenders)
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Probes every [`PROBE_EVERY`] for `span`; returns the last sample and the
/// number of probes.
async fn probe_for(monitor: &Monitor, span: Duration) -> Result<(Sample, u32)> {
    let start = Instant::now();
    let mut probes = 0;
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        let sample = monitor.sample().await?;
        probes += 1;
        if start.elapsed() >= span {
            return Ok((sample, probes));
        }
    }
}

/// Waits for the server to go quiet (see the module docs), starting now.
async fn settle(monitor: &Monitor, quiet: Duration, timeout: Duration) -> Result<Sample> {
    let first = monitor.sample().await?;
    Ok(settle_from(monitor, first, quiet, timeout).await?.0)
}

/// Probes every 10 ms from `from` until quiet; returns the last sample, the
/// number of probes after `from`, and whether it went quiet in time.
pub(crate) async fn settle_from(
    monitor: &Monitor,
    from: Sample,
    quiet: Duration,
    timeout: Duration,
) -> Result<(Sample, u32, bool)> {
    let overhead: Packets = monitor.probe_overhead();
    let start = Instant::now();
    let mut last = from;
    let mut probes = 0u32;
    let mut quiet_probes = 0u32;
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        let next = monitor.sample().await?;
        probes += 1;
        let (received, _) = delta(&last, &next)?;
        if received as f64 - overhead.received <= 1.0 && next.outstanding == 0 {
            quiet_probes += 1;
        } else {
            quiet_probes = 0;
        }
        last = next;
        let elapsed = start.elapsed();
        if elapsed >= quiet && quiet_probes >= 2 {
            return Ok((last, probes, true));
        }
        if elapsed >= timeout {
            return Ok((last, probes, false));
        }
    }
}

fn round_to_tenth(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
