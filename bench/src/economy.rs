//! Server economy: the packets each kind of change costs the server, per
//! side, counted with the server's own counters (`srvr`), one side at a time
//! on one server, in one run.
//!
//! Sides: zookeeper-async's `LeaderLatch` (elections), zookeeper-client's
//! `Client::lock` (locks), and zkelect in each [`Takeover`] mode over each
//! of its real transports. The changes:
//!
//! * **failover**: N = W + 1 election candidates, each on its own session;
//!   the leader's session closes (`closeSession`) and another is told it
//!   leads;
//! * **hand-off**: W + 1 lock contenders, each on its own session; the holder
//!   lets go and the next holds;
//! * **re-queue**: the contender that let go queues again at the back;
//! * **start**: a new process's contender (a session of its own, connected
//!   and queued behind the others): from before its connect until the
//!   server is quiet (an election's for the latch, a lock's for the rest);
//! * **idle session-minute**: the W + 1 contenders of the lock rotation (the
//!   latch: of the failover rounds) idle, one holding and W waiting, for
//!   `idle_window`: packets ÷ sessions ÷ minutes. This is the client
//!   library's pings plus zkelect's session probe.
//!
//! Each window opens with a counter sample taken after `idle` of quiet and
//! closes once the server is quiet again (two probes 10 ms apart with no
//! request but the probes' and nothing outstanding, at least `quiet` after
//! the change ended); the probes' own packets are taken off. Idle sessions
//! ping meanwhile (zookeeper-client every 3/20 of the session timeout), so a
//! window can catch a stray ping: the table gives the median over the
//! windows, which a stray ping does not move. Nothing else runs on the
//! server meanwhile: the bench's own session (used to make and clear the
//! paths) is closed before the windows are counted.
//!
//! zookeeper-async's transport learns the negotiated session timeout with a
//! throw-away session once per process, server and requested timeout
//! (`adapters/src/startup.rs`); every start measured here comes after the
//! process's first, so it is not counted (bench/README.md counts it).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use zkelect::Takeover;
use zookeeper_client as zkc;

use crate::contender::{
    delete_tree, zk_err, zkc_connect, ConnectSettings, Contender, Implementation, LeaderBoard,
    Strategy,
};
use crate::failover::{settle_from, sole_leader};
use crate::handoff::{self, Flavour, Order, Queue};
use crate::latch::Latch;
use crate::many::{zkelect_session, ZkelectTransport};
use crate::mntr::{delta, Monitor, Packets};
use crate::stats::Summary;
use crate::zkelect::Zkelect;

/// One side of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// zookeeper-async's `recipes::leader_latch::LeaderLatch` (elections).
    Latch,
    /// zookeeper-client's `Client::lock`, Curator's lock names (locks).
    ZookeeperClientLock,
    /// zkelect over `transport`, taking over by `takeover`.
    Zkelect {
        /// The client library under it.
        transport: ZkelectTransport,
        /// Its [`Takeover`] mode.
        takeover: Takeover,
    },
}

impl Side {
    /// Every side, in the table's order.
    pub fn all() -> Vec<Side> {
        let mut sides = vec![Side::Latch, Side::ZookeeperClientLock];
        for takeover in [Takeover::OnNotification, Takeover::Relist] {
            for transport in [
                ZkelectTransport::ZookeeperClient,
                ZkelectTransport::ZookeeperAsync,
            ] {
                sides.push(Side::Zkelect {
                    transport,
                    takeover,
                });
            }
        }
        sides
    }

    /// The side's name in the table and the JSON lines.
    pub fn name(self) -> String {
        match self {
            Side::Latch => "zookeeper-async LeaderLatch".to_owned(),
            Side::ZookeeperClientLock => "zookeeper-client lock".to_owned(),
            Side::Zkelect {
                transport,
                takeover,
            } => format!(
                "zkelect {} ({})",
                takeover_name(takeover),
                match transport {
                    ZkelectTransport::ZookeeperClient => "zookeeper-client",
                    ZkelectTransport::ZookeeperAsync => "zookeeper-async",
                }
            ),
        }
    }

    fn elections(self) -> bool {
        !matches!(self, Side::ZookeeperClientLock)
    }

    fn locks(self) -> bool {
        !matches!(self, Side::Latch)
    }
}

fn takeover_name(takeover: Takeover) -> &'static str {
    match takeover {
        Takeover::OnNotification => "OnNotification",
        Takeover::Relist => "Relist",
    }
}

/// A kind of change whose packets are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    /// The leader's session closes; another leads.
    Failover,
    /// The lock's holder lets go; the next holds.
    Handoff,
    /// The contender that let go queues again at the back.
    Requeue,
    /// A new contender on a session of its own connects and queues.
    Start,
    /// A minute of an idle session (per session).
    IdleMinute,
}

impl Change {
    /// Every change, in the table's column order.
    pub const ALL: [Change; 5] = [
        Change::Failover,
        Change::Handoff,
        Change::Requeue,
        Change::Start,
        Change::IdleMinute,
    ];
}

/// The packets of one side for one change, as one JSON line.
#[derive(Debug, Clone, Serialize)]
pub struct EconomyRecord {
    /// Always `"economy"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The side's name.
    pub side: String,
    /// The change counted.
    pub change: Change,
    /// Windows counted (for the idle minute: sessions).
    pub samples: usize,
    /// Median packets the server received per change (idle: per session
    /// and minute, the mean over the sessions).
    pub received: f64,
    /// Median packets the server sent per change (idle: per session-minute).
    pub sent: f64,
    /// The smallest and largest window's received and sent packets.
    pub range: [[f64; 2]; 2],
}

/// What a run does.
#[derive(Debug, Clone)]
pub struct EconomySettings {
    /// Where and how to connect (every side requests the same session
    /// timeout).
    pub connect: ConnectSettings,
    /// A fresh persistent parent for this run's paths (made, then deleted).
    pub dir: String,
    /// Waiters behind the holder (W); elections run W + 1 candidates.
    pub waiters: usize,
    /// Counted windows per change.
    pub rounds: usize,
    /// Uncounted rounds first (the server's and the clients' first paths).
    pub warmup: usize,
    /// Quiet before each window opens.
    pub idle: Duration,
    /// Least time a window stays open after the change ended.
    pub quiet: Duration,
    /// How long the idle sessions are counted.
    pub idle_window: Duration,
    /// Longest wait for a change (a new holder, a quiet server).
    pub timeout: Duration,
}

/// Counts one window: `change` runs between a sample and the server's
/// going quiet; the probes' own packets are taken off.
async fn window<F, Fut>(monitor: &Monitor, settings: &EconomySettings, change: F) -> Result<Packets>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    tokio::time::sleep(settings.idle).await;
    let before = monitor.sample().await?;
    change().await?;
    let (after, probes, settled) =
        settle_from(monitor, before, settings.quiet, settings.timeout).await?;
    if !settled {
        bail!("the server did not go quiet within {:?}", settings.timeout);
    }
    let (received, sent) = delta(&before, &after)?;
    let overhead = monitor.probe_overhead();
    // The probe that opened the window is counted in `before`; those after
    // it are the window's.
    Ok(Packets {
        received: (received as f64 - overhead.received * f64::from(probes)).max(0.0),
        sent: (sent as f64 - overhead.sent * f64::from(probes)).max(0.0),
    })
}

fn record(side: Side, change: Change, windows: &[Packets]) -> Result<EconomyRecord> {
    let received: Vec<f64> = windows.iter().map(|p| p.received).collect();
    let sent: Vec<f64> = windows.iter().map(|p| p.sent).collect();
    let (r, s) = (
        Summary::of(&received).context("no windows")?,
        Summary::of(&sent).context("no windows")?,
    );
    Ok(EconomyRecord {
        kind: "economy",
        side: side.name(),
        change,
        samples: windows.len(),
        received: r.median,
        sent: s.median,
        range: [[r.min, r.max], [s.min, s.max]],
    })
}

/// Idle sessions' packets per session-minute.
async fn idle_minute(
    monitor: &Monitor,
    settings: &EconomySettings,
    side: Side,
    sessions: usize,
) -> Result<EconomyRecord> {
    let quiet = monitor.sample().await?;
    let (start, _, _) = settle_from(monitor, quiet, settings.quiet, settings.timeout).await?;
    tokio::time::sleep(settings.idle_window).await;
    let end = monitor.sample().await?;
    let (received, sent) = delta(&start, &end)?;
    let overhead = monitor.probe_overhead();
    let minutes = end.at.duration_since(start.at).as_secs_f64() / 60.0;
    let per = |count: u64, probe: f64| (count as f64 - probe) / sessions as f64 / minutes;
    let (r, s) = (per(received, overhead.received), per(sent, overhead.sent));
    let round = |x: f64| (x * 10.0).round() / 10.0;
    Ok(EconomyRecord {
        kind: "economy",
        side: side.name(),
        change: Change::IdleMinute,
        samples: sessions,
        received: round(r),
        sent: round(s),
        range: [[round(r), round(r)], [round(s), round(s)]],
    })
}

/// Runs every change `side` has, on a path of its own; returns its records.
///
/// # Errors
///
/// When a client cannot connect, a request fails, a change does not happen
/// within `settings.timeout`, or the server's counters cannot be read.
pub async fn run(
    monitor: &Monitor,
    settings: &EconomySettings,
    side: Side,
) -> Result<Vec<EconomyRecord>> {
    let mut records = Vec::new();
    if side.elections() {
        records.extend(
            elections(monitor, settings, side)
                .await
                .with_context(|| format!("{}: elections", side.name()))?,
        );
    }
    if side.locks() {
        records.extend(
            locks(monitor, settings, side)
                .await
                .with_context(|| format!("{}: locks", side.name()))?,
        );
    }
    Ok(records)
}

/// Makes `dir` and its parents (persistent, open ACL).
async fn make_dir(settings: &EconomySettings, dir: &str) -> Result<()> {
    let admin = zkc_connect(&settings.connect).await?;
    let options = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    for path in [settings.dir.as_str(), dir] {
        match admin.mkdir(path, &options).await {
            Ok(()) | Err(zkc::Error::NodeExists) => {}
            Err(e) => return Err(zk_err(format!("mkdir({path})"))(e)),
        }
    }
    Ok(())
}

/// Deletes `dir` and everything under it, with a session of its own.
async fn clear_dir(settings: &EconomySettings, dir: &str) {
    if let Ok(admin) = zkc_connect(&settings.connect).await {
        let _ = delete_tree(&admin, dir).await;
    }
}

// ----- elections: failover, and the latch's start and idle minute -----------

async fn elections(
    monitor: &Monitor,
    settings: &EconomySettings,
    side: Side,
) -> Result<Vec<EconomyRecord>> {
    let implementation: Arc<dyn Implementation> = match side {
        Side::Latch => Arc::new(Latch::new(
            settings.connect.clone(),
            Duration::from_micros(100),
        )?),
        Side::Zkelect {
            transport,
            takeover,
        } => Arc::new(Zkelect::with(
            settings.connect.clone(),
            Strategy::Predecessor,
            transport,
            takeover,
        )),
        Side::ZookeeperClientLock => bail!("zookeeper-client has no election recipe here"),
    };
    let path = format!("{}/election-{}", settings.dir, slug(side));
    make_dir(settings, &path).await?;
    let board = LeaderBoard::new();
    let mut contenders: Vec<Box<dyn Contender>> = Vec::new();
    let mut next_id = 0u64;
    let result = async {
        for _ in 0..=settings.waiters {
            contenders.push(implementation.start(next_id, &path, board.clone()).await?);
            next_id += 1;
        }
        let mut failovers = Vec::new();
        let mut starts = Vec::new();
        for round in 0..settings.warmup + settings.rounds {
            let leader = sole_leader(&contenders, settings.timeout).await?;
            board.clear();
            let old = contenders.swap_remove(leader);
            let old_id = old.id();
            let packets = window(monitor, settings, || async {
                let t0 = Instant::now();
                old.kill().await.context("closing the leader")?;
                board
                    .wait_for(|e| e.contender != old_id && e.at >= t0, settings.timeout)
                    .await
                    .ok_or_else(|| anyhow!("no new leader within {:?}", settings.timeout))?;
                Ok(())
            })
            .await?;
            // A replacement joins at the back: a start of an election.
            let mut fresh = None;
            let start = window(monitor, settings, || async {
                fresh = Some(implementation.start(next_id, &path, board.clone()).await?);
                Ok(())
            })
            .await?;
            next_id += 1;
            contenders.extend(fresh);
            if round >= settings.warmup {
                failovers.push(packets);
                starts.push(start);
            }
        }
        let mut records = vec![record(side, Change::Failover, &failovers)?];
        if side == Side::Latch {
            // The latch has no lock: its start and idle minute are the
            // election's.
            records.push(record(side, Change::Start, &starts)?);
            records.push(idle_minute(monitor, settings, side, contenders.len()).await?);
        }
        anyhow::Ok(records)
    }
    .await;
    let mut closing = tokio::task::JoinSet::new();
    for c in contenders {
        closing.spawn(c.kill());
    }
    while closing.join_next().await.is_some() {}
    clear_dir(settings, &path).await;
    result
}

// ----- locks: hand-off, re-queue, start and idle minute ----------------------

async fn locks(
    monitor: &Monitor,
    settings: &EconomySettings,
    side: Side,
) -> Result<Vec<EconomyRecord>> {
    let path: Arc<str> = format!("{}/lock-{}", settings.dir, slug(side)).into();
    make_dir(settings, &path).await?;
    let lister = zkc_connect(&settings.connect).await?;
    let contenders = settings.waiters + 1;
    let filled = match side {
        Side::ZookeeperClientLock => {
            handoff::fill(contenders, |i, orders, reports| {
                handoff::zkc_contender(settings.connect.clone(), path.clone(), i, orders, reports)
            })
            .await
        }
        Side::Zkelect {
            transport,
            takeover,
        } => {
            handoff::fill(contenders, |i, orders, reports| {
                handoff::zkelect_contender(
                    settings.connect.clone(),
                    Flavour {
                        transport,
                        takeover,
                    },
                    lister.clone(),
                    path.clone(),
                    i,
                    orders,
                    reports,
                )
            })
            .await
        }
        Side::Latch => bail!("the latch has no lock"),
    };
    // The lister's session pings too: gone before anything is counted.
    drop(lister);
    let mut queue = filled?;
    let result = rotate(monitor, settings, side, &mut queue, &path).await;
    queue.stop().await;
    clear_dir(settings, &path).await;
    result
}

async fn rotate(
    monitor: &Monitor,
    settings: &EconomySettings,
    side: Side,
    queue: &mut Queue,
    path: &str,
) -> Result<Vec<EconomyRecord>> {
    let mut holder = queue.next_holder(settings.timeout).await?.who;
    let mut handoffs = Vec::new();
    let mut requeues = Vec::new();
    for round in 0..settings.warmup + settings.rounds {
        let mut next = None;
        let handoff = window(monitor, settings, || async {
            queue.order(holder, Order::Release)?;
            let told = queue.next_holder(settings.timeout).await?;
            if told.who == holder {
                bail!("contender {holder} released and was told it holds again");
            }
            next = Some(told.who);
            Ok(())
        })
        .await?;
        let requeue = window(monitor, settings, || async {
            queue.order(holder, Order::Requeue)?;
            Ok(())
        })
        .await?;
        holder = next.context("a new holder")?;
        if round >= settings.warmup {
            handoffs.push(handoff);
            requeues.push(requeue);
        }
    }
    let mut starts = Vec::new();
    for round in 0..settings.warmup + settings.rounds.min(10) {
        let mut extra = None;
        let start = window(monitor, settings, || async {
            extra = Some(start_waiter(settings, side, path).await?);
            Ok(())
        })
        .await?;
        if let Some(extra) = extra {
            extra.stop().await;
        }
        if round >= settings.warmup {
            starts.push(start);
        }
    }
    Ok(vec![
        record(side, Change::Handoff, &handoffs)?,
        record(side, Change::Requeue, &requeues)?,
        record(side, Change::Start, &starts)?,
        idle_minute(monitor, settings, side, settings.waiters + 1).await?,
    ])
}

/// A contender started for one start window: a session of its own,
/// queued on the lock; stopped (its node deleted, its session closed)
/// outside the window.
struct Extra {
    stop: tokio::sync::oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Extra {
    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(10), self.task).await;
    }
}

/// Connects a new session and queues it on the lock at `path` (returns once
/// its acquisition is on its way; the window then waits for quiet).
async fn start_waiter(settings: &EconomySettings, side: Side, path: &str) -> Result<Extra> {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (queued_tx, queued) = mpsc::unbounded_channel::<()>();
    let path = path.to_owned();
    let task = match side {
        Side::ZookeeperClientLock => {
            let client = zkc_connect(&settings.connect).await?;
            tokio::spawn(async move {
                let Ok(prefix) = zkc::LockPrefix::new_curator(&path, "lock-") else {
                    return;
                };
                let lock = client.lock(prefix, b"", zkc::Acls::anyone_all());
                let _ = queued_tx.send(());
                tokio::select! {
                    _ = lock => {}
                    _ = stopped => {}
                }
                drop(client);
            })
        }
        Side::Zkelect {
            transport,
            takeover,
        } => {
            let (session, _transport) = zkelect_session(transport, &settings.connect).await?;
            tokio::spawn(async move {
                let mutex = session.mutex(&*path).id("extra").takeover(takeover);
                let _ = queued_tx.send(());
                tokio::select! {
                    _ = mutex.acquire() => {}
                    _ = stopped => {}
                }
                let _ = tokio::time::timeout(Duration::from_secs(5), session.close()).await;
            })
        }
        Side::Latch => bail!("the latch has no lock"),
    };
    let mut queued = queued;
    queued.recv().await;
    Ok(Extra { stop, task })
}

fn slug(side: Side) -> String {
    side.name()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// The records as the economy table: a row per side, a column per change,
/// received / sent per change (medians), with the notes `run.sh` puts
/// under it.
pub fn markdown(records: &[EconomyRecord], settings: &EconomySettings) -> String {
    use std::fmt::Write as _;
    let mut sides: Vec<&str> = Vec::new();
    for r in records {
        if !sides.contains(&r.side.as_str()) {
            sides.push(&r.side);
        }
    }
    let mut out = String::from(
        "| side | failover | hand-off | re-queue | start | idle session-minute |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for side in sides {
        let cell = |change: Change| {
            records
                .iter()
                .find(|r| r.side == side && r.change == change)
                .map_or("–".to_owned(), |r| {
                    let f = |x: f64| {
                        if x.fract() == 0.0 {
                            format!("{x:.0}")
                        } else {
                            format!("{x:.1}")
                        }
                    };
                    format!("{} / {}", f(r.received), f(r.sent))
                })
        };
        let cells: Vec<String> = Change::ALL.iter().map(|&c| cell(c)).collect();
        let _ = writeln!(out, "| {side} | {} |", cells.join(" | "));
    }
    let _ = writeln!(
        out,
        "\nPackets the server received / sent (`srvr`), the median over {} windows per change \
         ({} for starts), W = {} waiters (an election: W + 1 candidates), every session \
         requesting {} ms; the idle column per session and minute over {} s of {} idle sessions. \
         See bench/README.md for the list of every request and notification behind each figure.",
        settings.rounds,
        settings.rounds.min(10),
        settings.waiters,
        settings.connect.session_timeout.as_millis(),
        settings.idle_window.as_secs(),
        settings.waiters + 1,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_side_has_a_name_and_its_changes() {
        let sides = Side::all();
        assert_eq!(sides.len(), 6);
        let names: Vec<String> = sides.iter().map(|s| s.name()).collect();
        for (i, name) in names.iter().enumerate() {
            assert!(!names[..i].contains(name), "{name} twice");
        }
        assert!(sides.iter().all(|s| s.elections() || s.locks()));
        assert!(!Side::Latch.locks() && !Side::ZookeeperClientLock.elections());
    }

    #[test]
    fn the_table_has_a_row_per_side_and_a_cell_per_change() {
        let settings = EconomySettings {
            connect: ConnectSettings {
                connect: "127.0.0.1:2181".into(),
                session_timeout: Duration::from_secs(20),
                connect_timeout: Duration::from_secs(15),
            },
            dir: "/x".into(),
            waiters: 3,
            rounds: 20,
            warmup: 2,
            idle: Duration::from_millis(70),
            quiet: Duration::from_millis(100),
            idle_window: Duration::from_secs(60),
            timeout: Duration::from_secs(10),
        };
        let w = |received, sent| Packets { received, sent };
        let records = vec![
            record(
                Side::Latch,
                Change::Failover,
                &[w(2.0, 2.0), w(3.0, 2.0), w(2.0, 9.0)],
            )
            .unwrap(),
            record(Side::ZookeeperClientLock, Change::Handoff, &[w(2.0, 3.0)]).unwrap(),
        ];
        assert_eq!((records[0].received, records[0].sent), (2.0, 2.0));
        assert_eq!(records[0].range, [[2.0, 3.0], [2.0, 9.0]]);
        let table = markdown(&records, &settings);
        assert!(
            table.contains("| zookeeper-async LeaderLatch | 2 / 2 | – | – | – | – |"),
            "{table}"
        );
        assert!(
            table.contains("| zookeeper-client lock | – | 2 / 3 | – | – | – |"),
            "{table}"
        );
    }
}
