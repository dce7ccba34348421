//! Many elections on one session: N election paths, N contenders on one
//! session A (each the only one on its path, so each holds at once) and N on
//! one session B (each queued behind A's). Measured:
//!
//! * **start-up**: from the first `lock()` on A to the N-th holding;
//! * **memory per idle recipe**, two meters on the same moments: the live
//!   heap (bytes allocated and not yet freed, counted by this binary's
//!   allocator) and this process's resident set (`VmRSS`), after B's N
//!   waiters queued and settled, less before they started, ÷ N (see
//!   bench/README.md for why they differ and which one is the recipe's);
//! * **failover**: A's session is closed (every one of its N nodes goes at
//!   once); the time until all N of B's hold, and the server's packets in that
//!   window (`srvr` counters, less the probes' own) ÷ N.
//!
//! Sides: the zookeeper-client baseline (`Client::lock` with Curator-style
//! `lock-` nodes, which tell contenders of one session apart), and zkelect —
//! N `session.election(path)` on one [`Session`] — over each of its real
//! transports. On both, A's session ends with a bare `closeSession` (the
//! baseline drops its client with the guards forgotten; zkelect closes A's
//! transport under its driver), so no side sends deletes in the failover
//! window and the server's expiry of A's ephemerals is what every waiter sees.

use std::alloc::System;
use std::borrow::Cow;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use zookeeper_client as zkc;

use zkelect::zk_client::ZkClientOptions;
use zkelect::{Connect, Election, Session, Transport, ZkAsyncOptions};

use crate::contender::{create_dir, delete_tree, zk_err, zkc_connect, ConnectSettings};
use crate::mntr::{delta, Monitor, Sample};

/// Every allocation of this binary goes through a counter of the bytes live
/// (one relaxed atomic add per allocation and per free: the same small cost
/// on every side of every benchmark), so `many` can read the live heap: what
/// the recipes hold, without what the allocator keeps of freed memory.
#[global_allocator]
static HEAP: cap::Cap<System> = cap::Cap::new(System, usize::MAX);

/// Bytes allocated and not freed, now.
fn live_heap() -> u64 {
    HEAP.allocated() as u64
}

/// One side's figures, printed as one JSON line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ManyRecord {
    /// Always `"many"`.
    #[serde(rename = "type")]
    pub kind: Cow<'static, str>,
    /// Which implementation.
    pub side: Cow<'static, str>,
    /// Elections on the one session.
    pub elections: usize,
    /// First `lock()` to the N-th holding, ms.
    pub startup_ms: f64,
    /// Requests the server received from the start-up's first `lock()` until
    /// the N-th held, ÷ N: what the start-up costs the server, whatever the
    /// load on the machine (the times are not).
    pub requests_per_start: f64,
    /// This process's CPU time in user mode over the start-up window ÷ N,
    /// µs: what a start costs the client (the server, another process, gets
    /// the rest of the cores).
    pub user_us_per_start: f64,
    /// This process's CPU time in the kernel over the start-up window ÷ N,
    /// µs (its sockets, wake-ups, timers).
    pub sys_us_per_start: f64,
    /// Resident-set growth per queued (idle) waiter, bytes. `None` on a
    /// library's floor, which starts and stops.
    pub bytes_per_idle_recipe: Option<f64>,
    /// Live-heap growth per queued (idle) waiter, bytes. `None` on a
    /// library's floor.
    pub heap_per_idle_recipe: Option<f64>,
    /// Of that, the client library's: the live-heap growth of a fresh raw
    /// client of the side's library while it holds the two watches an idle
    /// waiter sets (a child watch on its own node and a data watch on its
    /// predecessor, set as the transport sets them), ÷ N, bytes. `None` on
    /// the baseline, which is the library itself, and on a library's floor.
    pub client_watches_per_idle_recipe: Option<f64>,
    /// The rest: `heap_per_idle_recipe` less the client library's two
    /// watches, bytes (zkelect's own state per idle recipe). `None` on the
    /// baseline and on a library's floor.
    pub own_heap_per_idle_recipe: Option<f64>,
    /// Session close to all N failed over, ms. `None` on a library's floor.
    pub failover_all_ms: Option<f64>,
    /// Server packets (received + sent) in the failover window ÷ N. `None`
    /// on a library's floor.
    pub packets_per_failover: Option<f64>,
}

/// What a run does.
#[derive(Debug, Clone)]
pub struct ManySettings {
    /// Where and how to connect.
    pub connect: ConnectSettings,
    /// A fresh persistent parent for this run's elections (deleted afterwards).
    pub dir: String,
    /// N.
    pub elections: usize,
    /// How long any phase may take before the run fails.
    pub timeout: Duration,
}

/// This process's resident set, bytes (`VmRSS` of /proc/self/status).
fn rss_bytes() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status").context("/proc/self/status")?;
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .context("no VmRSS in /proc/self/status")?;
    Ok(kb * 1024)
}

/// This process's CPU time so far, every thread's, user and kernel apart
/// (`utime` and `stime` of /proc/self/stat, in clock ticks: 10 ms).
#[derive(Debug, Clone, Copy)]
struct Cpu {
    user: u64,
    sys: u64,
}

impl Cpu {
    /// Clock ticks per second in /proc's figures (`USER_HZ`, 100 on every
    /// Linux architecture this runs on).
    const TICKS_PER_SECOND: f64 = 100.0;

    fn now() -> Result<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").context("/proc/self/stat")?;
        Self::parse(&stat)
    }

    /// utime and stime of a /proc/<pid>/stat line.
    fn parse(stat: &str) -> Result<Self> {
        // The command name (field 2) is in parentheses and may hold spaces
        // and parentheses: count the fields after its last closing one.
        // utime and stime are fields 14 and 15, so the 12th and 13th after it.
        let rest = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .context("no command name in /proc/self/stat")?;
        let mut fields = rest.split_whitespace().skip(11);
        let mut next = |name| {
            fields
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .with_context(|| format!("no {name} in /proc/self/stat"))
        };
        Ok(Self {
            user: next("utime")?,
            sys: next("stime")?,
        })
    }

    /// CPU time since `before` ÷ n, µs: (user, kernel).
    fn per(self, before: Self, n: usize) -> (f64, f64) {
        let per = |a: u64, b: u64| {
            (a.saturating_sub(b) as f64 / Self::TICKS_PER_SECOND * 1e6 / n as f64).round()
        };
        (per(self.user, before.user), per(self.sys, before.sys))
    }
}

/// Starts one `lock()` per election path on `client`; each task reports
/// when it holds and keeps the lock until `release` turns true (then lets it
/// go with the session: the guard is forgotten, so no delete is sent and the
/// session's close is what removes the node).
fn contend(
    set: &mut JoinSet<Result<()>>,
    client: &zkc::Client,
    dir: &str,
    elections: usize,
    held: &mpsc::UnboundedSender<Instant>,
    release: &watch::Receiver<bool>,
) {
    for i in 0..elections {
        let client = client.clone();
        let path = format!("{dir}/e{i}");
        let held = held.clone();
        let mut release = release.clone();
        set.spawn(async move {
            let options = zkc::LockOptions::new(zkc::Acls::anyone_all())
                .with_ancestor_options(zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all()))
                .map_err(zk_err("LockOptions"))?;
            let prefix =
                zkc::LockPrefix::new_curator(&path, "lock-").map_err(zk_err("LockPrefix"))?;
            let lock = tokio::select! {
                lock = client.lock(prefix, b"", options) => lock.map_err(zk_err(format!("lock({path})")))?,
                _ = release.wait_for(|r| *r) => return Ok(()),
            };
            let _ = held.send(Instant::now());
            let _ = release.wait_for(|r| *r).await;
            std::mem::forget(lock);
            Ok(())
        });
    }
}

async fn count_held(
    rx: &mut mpsc::UnboundedReceiver<Instant>,
    n: usize,
    timeout: Duration,
    what: &str,
) -> Result<Instant> {
    let mut last = Instant::now();
    for got in 0..n {
        last = tokio::time::timeout(timeout, rx.recv())
            .await
            .map_err(|_| anyhow!("{what}: only {got} of {n} held within {timeout:?}"))?
            .ok_or_else(|| anyhow!("{what}: the contenders stopped"))?;
    }
    Ok(last)
}

/// One of the server's `mntr` counters.
async fn mntr_value(monitor: &Monitor, key: &str) -> Result<u64> {
    let mntr = monitor.four_letter_word("mntr").await?;
    mntr.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().parse().ok())
        .with_context(|| format!("no {key} in `mntr`"))
}

/// Requests the server received since `start` (less one probe), ÷ n. A
/// request still in flight after the N-th holds (a waiter's second watch)
/// may be counted or not.
async fn requests_per_start(monitor: &Monitor, start: &Sample, n: usize) -> Result<f64> {
    let end = monitor.sample().await?;
    let (received, _) = delta(start, &end)?;
    let received = received as f64 - monitor.probe_overhead().received;
    Ok((received / n as f64 * 100.0).round() / 100.0)
}

/// The server's node count (`mntr`'s `zk_znode_count`).
async fn znodes(monitor: &Monitor) -> Result<u64> {
    mntr_value(monitor, "zk_znode_count").await
}

/// The server's watch count (`mntr`'s `zk_watch_count`: path watches of
/// every session, data and child).
async fn watches(monitor: &Monitor) -> Result<u64> {
    mntr_value(monitor, "zk_watch_count").await
}

/// Waits until the server holds at least `count` watches (B's waiters have
/// all set theirs: every request has reached the server), then 500 ms more.
async fn settled(monitor: &Monitor, count: u64, timeout: Duration) -> Result<()> {
    let by = Instant::now() + timeout;
    loop {
        let now = watches(monitor).await?;
        if now >= count {
            break;
        }
        if Instant::now() > by {
            return Err(anyhow!(
                "only {now} of {count} watches set within {timeout:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    Ok(())
}

/// Waits until the live heap stops moving: two readings 250 ms apart differ
/// by less than a byte per recipe (for at most 10 s). The server holding
/// every watch does not mean this process has handled every answer: on a
/// loaded machine, thousands of answered requests (a client future each,
/// some kilobytes) can still be waiting for the client's tasks, and were
/// counted as the recipes' own.
async fn heap_settled(n: usize) {
    let mut last = live_heap();
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = live_heap();
        if now.abs_diff(last) < n as u64 {
            return;
        }
        last = now;
    }
}

/// This process's memory by both meters at one moment.
#[derive(Debug, Clone, Copy)]
struct Memory {
    rss: u64,
    heap: u64,
}

impl Memory {
    fn now() -> Result<Self> {
        Ok(Self {
            heap: live_heap(),
            rss: rss_bytes()?,
        })
    }

    /// Growth since `before` ÷ n, bytes: (resident set, live heap).
    fn per(self, before: Self, n: usize) -> (f64, f64) {
        let per = |a: u64, b: u64| (a.saturating_sub(b) as f64 / n as f64).round();
        (per(self.rss, before.rss), per(self.heap, before.heap))
    }
}

/// The zookeeper-client baseline.
///
/// # Errors
///
/// When a client cannot connect, a request fails, or a phase takes longer
/// than `settings.timeout`.
pub async fn zookeeper_client(settings: &ManySettings, monitor: &Monitor) -> Result<ManyRecord> {
    let n = settings.elections;
    let admin = zkc_connect(&settings.connect).await?;
    let a = zkc_connect(&settings.connect).await?;
    let b = zkc_connect(&settings.connect).await?;
    let (release_a, release_a_rx) = watch::channel(false);
    let (release_b, release_b_rx) = watch::channel(false);
    let (a_tx, mut a_held) = mpsc::unbounded_channel();
    let (b_tx, mut b_held) = mpsc::unbounded_channel();
    let mut a_tasks = JoinSet::new();
    let mut b_tasks = JoinSet::new();
    let result = async {
        let start = monitor.sample().await?;
        let cpu = Cpu::now()?;
        let t0 = Instant::now();
        contend(&mut a_tasks, &a, &settings.dir, n, &a_tx, &release_a_rx);
        let last = count_held(&mut a_held, n, settings.timeout, "start-up").await?;
        let startup = last.duration_since(t0);
        let (user, sys) = Cpu::now()?.per(cpu, n);
        let requests = requests_per_start(monitor, &start, n).await?;

        tokio::time::sleep(Duration::from_millis(500)).await;
        let nodes_before = znodes(monitor).await?;
        let watches_before = watches(monitor).await?;
        let before = Memory::now()?;
        contend(&mut b_tasks, &b, &settings.dir, n, &b_tx, &release_b_rx);
        let queued_by = Instant::now() + settings.timeout;
        while znodes(monitor).await? < nodes_before + n as u64 {
            if Instant::now() > queued_by {
                return Err(anyhow!(
                    "B's {n} waiters did not queue within {:?}",
                    settings.timeout
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Each waiter watches the node before its own.
        settled(monitor, watches_before + n as u64, settings.timeout).await?;
        heap_settled(n).await;
        let (rss, heap) = Memory::now()?.per(before, n);

        let overhead = monitor.probe_overhead();
        let before = monitor.sample().await?;
        let t1 = Instant::now();
        // A's session closes once its last handle is gone: the tasks forget
        // their guards (no deletes) and drop their clones.
        release_a.send_replace(true);
        while a_tasks.join_next().await.is_some() {}
        drop(a);
        let last = count_held(&mut b_held, n, settings.timeout, "failover").await?;
        let failover = last.duration_since(t1);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after = monitor.sample().await?;
        let (received, sent) = delta(&before, &after)?;
        let packets = (received as f64 - overhead.received) + (sent as f64 - overhead.sent);
        Ok(ManyRecord {
            kind: "many".into(),
            side: "zookeeper-client".into(),
            elections: n,
            startup_ms: (startup.as_secs_f64() * 1e4).round() / 10.0,
            requests_per_start: requests,
            user_us_per_start: user,
            sys_us_per_start: sys,
            bytes_per_idle_recipe: Some(rss),
            heap_per_idle_recipe: Some(heap),
            client_watches_per_idle_recipe: None,
            own_heap_per_idle_recipe: None,
            failover_all_ms: Some((failover.as_secs_f64() * 1e4).round() / 10.0),
            packets_per_failover: Some((packets / n as f64 * 100.0).round() / 100.0),
        })
    }
    .await;
    release_a.send_replace(true);
    release_b.send_replace(true);
    while a_tasks.join_next().await.is_some() {}
    while b_tasks.join_next().await.is_some() {}
    drop(b);
    let _ = delete_tree(&admin, &settings.dir).await;
    result
}

/// Which of zkelect's real transports a [`zkelect()`] run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZkelectTransport {
    /// `ZkClientTransport`, over the baseline's own client crate.
    ZookeeperClient,
    /// `ZkAsyncTransport`, over zookeeper-async.
    ZookeeperAsync,
}

impl ZkelectTransport {
    /// The side's name in the records.
    pub fn side(self) -> &'static str {
        match self {
            ZkelectTransport::ZookeeperClient => "zkelect (zookeeper-client)",
            ZkelectTransport::ZookeeperAsync => "zkelect (zookeeper-async)",
        }
    }

    /// The client library under it, as the tables name it.
    pub fn library(self) -> &'static str {
        match self {
            ZkelectTransport::ZookeeperClient => "zookeeper-client",
            ZkelectTransport::ZookeeperAsync => "zookeeper-async",
        }
    }

    /// The transport's connect options for `settings`.
    pub(crate) fn options(self, settings: &ConnectSettings) -> Box<dyn Connect> {
        match self {
            ZkelectTransport::ZookeeperClient => Box::new(
                ZkClientOptions::new(settings.connect.clone())
                    .session_timeout(settings.session_timeout)
                    .connect_timeout(settings.connect_timeout),
            ),
            ZkelectTransport::ZookeeperAsync => Box::new(
                ZkAsyncOptions::new(settings.connect.clone())
                    .session_timeout(settings.session_timeout)
                    .connect_timeout(settings.connect_timeout),
            ),
        }
    }
}

/// A zkelect session whose transport the bench can close under its driver
/// (a bare `closeSession`, as the baseline's dropped client sends).
pub(crate) async fn zkelect_session(
    transport: ZkelectTransport,
    settings: &ConnectSettings,
) -> Result<(Session, std::sync::Arc<dyn Transport>)> {
    let (t, events) = transport
        .options(settings)
        .connect()
        .await
        .map_err(|e| anyhow!("{}: connecting: {e}", transport.side()))?;
    let session = Session::from_transport(std::sync::Arc::clone(&t), events);
    Ok((session, t))
}

/// Joins one election per path on `session`, all at once; each task sends
/// the moment its election leads if `lead` (A's), and returns the handle.
async fn join_elections(
    session: &Session,
    dir: &str,
    n: usize,
    id: &str,
    lead: Option<&mpsc::UnboundedSender<Instant>>,
    timeout: Duration,
) -> Result<Vec<Election>> {
    let mut joins: JoinSet<Result<Election>> = JoinSet::new();
    for i in 0..n {
        let builder = session
            .election(format!("{dir}/e{i}"))
            .id(id)
            .join_timeout(timeout);
        let lead = lead.cloned();
        joins.spawn(async move {
            let election = builder
                .join()
                .await
                .map_err(|e| anyhow!("joining election {i}: {e}"))?;
            if let Some(lead) = lead {
                tokio::time::timeout(timeout, election.wait_leader())
                    .await
                    .map_err(|_| anyhow!("election {i} did not lead within {timeout:?}"))?
                    .map_err(|e| anyhow!("election {i}: {e}"))?;
                let _ = lead.send(Instant::now());
            }
            Ok(election)
        });
    }
    let mut elections = Vec::with_capacity(n);
    while let Some(joined) = joins.join_next().await {
        elections.push(joined.map_err(|e| anyhow!("a join task failed: {e}"))??);
    }
    Ok(elections)
}

/// zkelect's side: N `session.election(path)` on one [`Session`] A (each
/// leads at once), N on a second session B (each queued behind A's), then
/// A's transport closed.
///
/// # Errors
///
/// When a session cannot connect, an election fails, or a phase takes
/// longer than `settings.timeout`.
pub async fn zkelect(
    settings: &ManySettings,
    monitor: &Monitor,
    transport: ZkelectTransport,
) -> Result<ManyRecord> {
    let n = settings.elections;
    let admin = zkc_connect(&settings.connect).await?;
    let library = client_watches(settings, monitor, transport).await;
    let _ = delete_tree(&admin, &format!("{}-raw", settings.dir)).await;
    let library = library?;
    let (a, a_transport) = zkelect_session(transport, &settings.connect).await?;
    let (b, _b_transport) = zkelect_session(transport, &settings.connect).await?;
    let (a_tx, mut a_held) = mpsc::unbounded_channel();
    let (b_tx, mut b_held) = mpsc::unbounded_channel();
    let mut watchers = JoinSet::new();
    let result = async {
        let watches_at_start = watches(monitor).await?;
        let start = monitor.sample().await?;
        let cpu = Cpu::now()?;
        let t0 = Instant::now();
        let holders =
            join_elections(&a, &settings.dir, n, "a", Some(&a_tx), settings.timeout).await?;
        let last = count_held(&mut a_held, n, settings.timeout, "start-up").await?;
        let startup = last.duration_since(t0);
        let (user, sys) = Cpu::now()?.per(cpu, n);
        let requests = requests_per_start(monitor, &start, n).await?;

        // A leader sets the watch on its own node at its first probe tick,
        // not at once: unless A's N watches are all set (and their answers
        // handled) first, they are set while B's waiters queue, and their
        // cost (a watch each, in the library and in the transport) lands in
        // B's figure: an idle waiter would be charged for a leader's watch.
        settled(monitor, watches_at_start + n as u64, settings.timeout).await?;
        heap_settled(n).await;
        let watches_before = watches(monitor).await?;
        let before = Memory::now()?;
        let waiters = join_elections(&b, &settings.dir, n, "b", None, settings.timeout).await?;
        // Joined means queued (the node is in the queue); the listing and
        // the watches follow: each waiter watches its own node and the one
        // before it.
        settled(monitor, watches_before + 2 * n as u64, settings.timeout).await?;
        heap_settled(n).await;
        let (rss, heap) = Memory::now()?.per(before, n);
        if let Some(i) = waiters.iter().position(|e| e.role().is_leader()) {
            return Err(anyhow!("B's election {i} leads while A holds it"));
        }

        for election in &waiters {
            let mut roles = election.changes();
            let held = b_tx.clone();
            watchers.spawn(async move {
                if roles.wait_for(|r| r.is_leader()).await.is_ok() {
                    let _ = held.send(Instant::now());
                }
            });
        }
        let overhead = monitor.probe_overhead();
        let before = monitor.sample().await?;
        let t1 = Instant::now();
        a_transport.close().await;
        let last = count_held(&mut b_held, n, settings.timeout, "failover").await?;
        let failover = last.duration_since(t1);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after = monitor.sample().await?;
        let (received, sent) = delta(&before, &after)?;
        let packets = (received as f64 - overhead.received) + (sent as f64 - overhead.sent);
        drop(holders);
        drop(waiters);
        Ok(ManyRecord {
            kind: "many".into(),
            side: transport.side().into(),
            elections: n,
            startup_ms: (startup.as_secs_f64() * 1e4).round() / 10.0,
            requests_per_start: requests,
            user_us_per_start: user,
            sys_us_per_start: sys,
            bytes_per_idle_recipe: Some(rss),
            heap_per_idle_recipe: Some(heap),
            client_watches_per_idle_recipe: Some(library),
            own_heap_per_idle_recipe: Some(heap - library),
            failover_all_ms: Some((failover.as_secs_f64() * 1e4).round() / 10.0),
            packets_per_failover: Some((packets / n as f64 * 100.0).round() / 100.0),
        })
    }
    .await;
    watchers.abort_all();
    let bound = settings.timeout;
    let _ = tokio::time::timeout(bound, b.close()).await;
    let _ = tokio::time::timeout(bound, a.close()).await;
    let _ = delete_tree(&admin, &settings.dir).await;
    result
}

/// Which client library a [`floor`] run drives directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloorLibrary {
    /// zookeeper-client's `Client`.
    ZookeeperClient,
    /// zookeeper-async's `ZooKeeper`.
    ZookeeperAsync,
}

impl FloorLibrary {
    /// The row's name in the records.
    pub fn side(self) -> &'static str {
        match self {
            FloorLibrary::ZookeeperClient => "floor: zookeeper-client alone",
            FloorLibrary::ZookeeperAsync => "floor: zookeeper-async alone",
        }
    }
}

/// The four requests of one zkelect start, as its election sends them on a
/// path whose parent is missing: the protected create (`NoNode`), the
/// parent's create, the create again, and the listing.
fn floor_paths(dir: &str, i: usize) -> (String, String) {
    let parent = format!("{dir}/e{i}");
    let node = format!("{parent}/_c_{i:016x}-n_");
    (parent, node)
}

/// A client library alone doing the requests of N zkelect starts: per
/// election, the four requests zkelect's start sends (see `floor_paths`),
/// one after the other, at most `RAW_WINDOW` (1,000) elections at once (the
/// ceiling of zkelect's request window), from a raw client of the library
/// on one session. Start-up is from the first request to the N-th listing
/// answered. A recipe over that library that sends these requests can only
/// add to it: the reference for zkelect's start-up over each transport.
///
/// # Errors
///
/// When the client cannot connect, a request fails, or the run takes longer
/// than `settings.timeout`.
pub async fn floor(
    settings: &ManySettings,
    monitor: &Monitor,
    library: FloorLibrary,
) -> Result<ManyRecord> {
    let n = settings.elections;
    let dir = settings.dir.clone();
    let admin = zkc_connect(&settings.connect).await?;
    create_dir(&admin, &dir).await?;
    let window = std::sync::Arc::new(tokio::sync::Semaphore::new(RAW_WINDOW));
    let mut starts: JoinSet<Result<Instant>> = JoinSet::new();
    // zookeeper-async's client does not close its session when dropped.
    let mut to_close = None;
    let result = async {
        let (start, t0, cpu) = match library {
            FloorLibrary::ZookeeperClient => {
                let client = zkc_connect(&settings.connect).await?;
                let start = monitor.sample().await?;
                let cpu = Cpu::now()?;
                let t0 = Instant::now();
                for i in 0..n {
                    let client = client.clone();
                    let (parent, node) = floor_paths(&dir, i);
                    let window = std::sync::Arc::clone(&window);
                    starts.spawn(async move {
                        let _out = window.acquire_owned().await?;
                        let ephemeral =
                            zkc::CreateMode::EphemeralSequential.with_acls(zkc::Acls::anyone_all());
                        match client.create(&node, b"", &ephemeral).await {
                            Err(zkc::Error::NoNode) => {}
                            other => return Err(anyhow!("create({node}) first: {other:?}")),
                        }
                        create_dir(&client, &parent).await?;
                        client
                            .create(&node, b"", &ephemeral)
                            .await
                            .map_err(zk_err(format!("create({node})")))?;
                        client
                            .list_children(&parent)
                            .await
                            .map_err(zk_err(format!("list_children({parent})")))?;
                        Ok(Instant::now())
                    });
                }
                (start, t0, cpu)
            }
            FloorLibrary::ZookeeperAsync => {
                let zk = crate::latch::connect(&settings.connect).await?;
                to_close = Some(std::sync::Arc::clone(&zk));
                let start = monitor.sample().await?;
                let cpu = Cpu::now()?;
                let t0 = Instant::now();
                for i in 0..n {
                    let zk = std::sync::Arc::clone(&zk);
                    let (parent, node) = floor_paths(&dir, i);
                    let window = std::sync::Arc::clone(&window);
                    starts.spawn(async move {
                        use zookeeper_async::{Acl, CreateMode, ZkError};
                        let _out = window.acquire_owned().await?;
                        let open = || Acl::open_unsafe().clone();
                        match zk
                            .create2(&node, Vec::new(), open(), CreateMode::EphemeralSequential)
                            .await
                        {
                            Err(ZkError::NoNode) => {}
                            other => return Err(anyhow!("create({node}) first: {other:?}")),
                        }
                        zk.create2(&parent, Vec::new(), open(), CreateMode::Persistent)
                            .await
                            .with_context(|| format!("create({parent})"))?;
                        zk.create2(&node, Vec::new(), open(), CreateMode::EphemeralSequential)
                            .await
                            .with_context(|| format!("create({node})"))?;
                        zk.get_children(&parent, false)
                            .await
                            .with_context(|| format!("get_children({parent})"))?;
                        Ok(Instant::now())
                    });
                }
                (start, t0, cpu)
            }
        };
        let mut last = t0;
        let by = tokio::time::Instant::now() + settings.timeout;
        while let Some(done) = tokio::time::timeout_at(by, starts.join_next())
            .await
            .map_err(|_| {
                anyhow!(
                    "the floor's {n} starts took longer than {:?}",
                    settings.timeout
                )
            })?
        {
            last = last.max(done.map_err(|e| anyhow!("a start task failed: {e}"))??);
        }
        let startup = last.duration_since(t0);
        let (user, sys) = Cpu::now()?.per(cpu, n);
        let requests = requests_per_start(monitor, &start, n).await?;
        Ok(ManyRecord {
            kind: "many".into(),
            side: library.side().into(),
            elections: n,
            startup_ms: (startup.as_secs_f64() * 1e4).round() / 10.0,
            requests_per_start: requests,
            user_us_per_start: user,
            sys_us_per_start: sys,
            bytes_per_idle_recipe: None,
            heap_per_idle_recipe: None,
            client_watches_per_idle_recipe: None,
            own_heap_per_idle_recipe: None,
            failover_all_ms: None,
            packets_per_failover: None,
        })
    }
    .await;
    starts.abort_all();
    let _ = delete_tree(&admin, &dir).await;
    if let Some(zk) = to_close {
        let _ = tokio::time::timeout(settings.timeout, zk.close()).await;
    }
    result
}

/// Waiters a raw client in [`client_watches`] serves at once; each sends its
/// two requests in turn, so at most this many are out: zkelect's driver's
/// bound.
const RAW_WINDOW: usize = 1_000;

/// The client library alone holding what N idle waiters make it hold: a
/// fresh raw client of the transport's library sets, per waiter, the two
/// watches an idle waiter that takes over on the notification sets, with
/// exactly the calls the transport makes: a child watch on one node (its
/// own: a child watch, so that no write spends it) and a data watch on
/// another (its predecessor). zookeeper-client: `list_and_watch_children`
/// and `get_and_watch_data`, each `OneshotWatcher` kept alive;
/// zookeeper-async: `get_children` and `get_data` with `watch = true`, the
/// events to the client's default watcher (as the transport's are).
/// Settled as the recipes' phase is (the server
/// holds every watch, then the live heap stops moving); live-heap growth ÷
/// N, bytes. The 2N nodes are ephemerals of another session, under
/// `{dir}-raw`, with paths as long as the recipes' (`…/e{i}/n_…`).
async fn client_watches(
    settings: &ManySettings,
    monitor: &Monitor,
    transport: ZkelectTransport,
) -> Result<f64> {
    let n = settings.elections;
    let dir = format!("{}-raw", settings.dir);
    let owner = zkc_connect(&settings.connect).await?;
    let path = |i: usize, k: usize| format!("{dir}/e{i}/n_{k:010}");
    // The run's own parent first, then per waiter `…/e{i}` and its two nodes.
    create_dir(&owner, &dir).await?;
    let mut creates: JoinSet<Result<()>> = JoinSet::new();
    for i in 0..n {
        let owner = owner.clone();
        let (parent, own, predecessor) = (format!("{dir}/e{i}"), path(i, 1), path(i, 0));
        creates.spawn(async move {
            let ephemeral = zkc::CreateMode::Ephemeral.with_acls(zkc::Acls::anyone_all());
            create_dir(&owner, &parent).await?;
            for node in [predecessor, own] {
                owner
                    .create(&node, b"", &ephemeral)
                    .await
                    .map_err(zk_err(format!("create({node})")))?;
            }
            Ok(())
        });
    }
    while let Some(created) = creates.join_next().await {
        created.map_err(|e| anyhow!("a create task failed: {e}"))??;
    }

    tokio::time::sleep(Duration::from_millis(500)).await;
    let watches_before = watches(monitor).await?;
    // At most as many requests out at once as zkelect's driver sends: the
    // library keeps its in-flight requests in tables that never shrink, so
    // an unbounded burst would leave their high-water mark (which varies
    // with the load: 1,130 or 1,208 B per waiter in five runs) in the figure.
    let window = std::sync::Arc::new(tokio::sync::Semaphore::new(RAW_WINDOW));
    let result = match transport {
        ZkelectTransport::ZookeeperClient => {
            let client = zkc_connect(&settings.connect).await?;
            heap_settled(n).await;
            let before = live_heap();
            let mut sets: JoinSet<Result<[zkc::OneshotWatcher; 2]>> = JoinSet::new();
            for i in 0..n {
                let client = client.clone();
                let (own, predecessor) = (path(i, 1), path(i, 0));
                let window = std::sync::Arc::clone(&window);
                sets.spawn(async move {
                    let _out = window.acquire_owned().await?;
                    let (_, children) = client
                        .list_and_watch_children(&own)
                        .await
                        .map_err(zk_err(format!("list_and_watch_children({own})")))?;
                    let (_, _, data) = client
                        .get_and_watch_data(&predecessor)
                        .await
                        .map_err(zk_err(format!("get_and_watch_data({predecessor})")))?;
                    // Kept, as a user must: a dropped `OneshotWatcher`
                    // removes its watch.
                    Ok([children, data])
                });
            }
            let mut kept = Vec::with_capacity(n);
            while let Some(set) = sets.join_next().await {
                kept.push(set.map_err(|e| anyhow!("a watch task failed: {e}"))??);
            }
            drop(sets);
            settled(monitor, watches_before + 2 * n as u64, settings.timeout).await?;
            heap_settled(n).await;
            let grown = live_heap().saturating_sub(before);
            drop(kept);
            drop(client);
            grown
        }
        ZkelectTransport::ZookeeperAsync => {
            let zk = crate::latch::connect(&settings.connect).await?;
            heap_settled(n).await;
            let before = live_heap();
            let mut sets: JoinSet<Result<()>> = JoinSet::new();
            for i in 0..n {
                let zk = std::sync::Arc::clone(&zk);
                let (own, predecessor) = (path(i, 1), path(i, 0));
                let window = std::sync::Arc::clone(&window);
                sets.spawn(async move {
                    let _out = window.acquire_owned().await?;
                    zk.get_children(&own, true)
                        .await
                        .with_context(|| format!("get_children({own}, watch)"))?;
                    zk.get_data(&predecessor, true)
                        .await
                        .with_context(|| format!("get_data({predecessor}, watch)"))?;
                    Ok(())
                });
            }
            while let Some(set) = sets.join_next().await {
                set.map_err(|e| anyhow!("a watch task failed: {e}"))??;
            }
            drop(sets);
            settled(monitor, watches_before + 2 * n as u64, settings.timeout).await?;
            heap_settled(n).await;
            let grown = live_heap().saturating_sub(before);
            let _ = zk.close().await;
            grown
        }
    };
    drop(owner);
    Ok((result as f64 / n as f64).round())
}

/// `1234 B`, or `–` where a side has no such figure (the baseline is the
/// library itself; a library's floor only starts).
fn bytes_or_dash(bytes: Option<f64>) -> String {
    or_dash(bytes, |b| format!("{b:.0} B"))
}

/// The figure as `show` has it, or `–` where a side has none.
fn or_dash(figure: Option<f64>, show: impl FnOnce(f64) -> String) -> String {
    figure.map_or_else(|| "–".to_owned(), show)
}

/// The records as a Markdown table.
pub fn markdown(records: &[ManyRecord]) -> String {
    table(records, None)
}

/// The table, with `last` as one more column if given: its heading and one
/// cell per record, in order.
fn table(records: &[ManyRecord], last: Option<(&str, &[String])>) -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "| implementation | elections on one session | start-up (all held) | server requests per start | client CPU per start (user + kernel) | live heap per idle recipe | of which the client library's two watches | zkelect's own (heap − library) | resident set per idle recipe | failover of all (session closed) | server packets per failover |",
    );
    if let Some((heading, _)) = last {
        let _ = write!(out, " {heading} |");
    }
    out.push_str("\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    if last.is_some() {
        out.push_str("---:|");
    }
    out.push('\n');
    for (i, r) in records.iter().enumerate() {
        let _ = write!(
            out,
            "| {} | {} | {:.0} ms | {:.2} | {:.0} + {:.0} µs | {} | {} | {} | {} | {} | {} |",
            r.side,
            r.elections,
            r.startup_ms,
            r.requests_per_start,
            r.user_us_per_start,
            r.sys_us_per_start,
            bytes_or_dash(r.heap_per_idle_recipe),
            bytes_or_dash(r.client_watches_per_idle_recipe),
            bytes_or_dash(r.own_heap_per_idle_recipe),
            bytes_or_dash(r.bytes_per_idle_recipe),
            or_dash(r.failover_all_ms, |ms| format!("{ms:.0} ms")),
            or_dash(r.packets_per_failover, |p| format!("{p:.2}")),
        );
        if let Some((_, cells)) = last {
            let _ = write!(out, " {} |", cells.get(i).map_or("", String::as_str));
        }
        out.push('\n');
    }
    out
}

/// The median of `values` (the mean of the middle two when even); `None`
/// when there are none.
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// One side's rounds as one record: each figure's median over the rounds
/// (each figure on its own, so the row need not be any one round's).
fn median_record(rounds: &[&ManyRecord]) -> Option<ManyRecord> {
    let first = rounds.first()?;
    let of = |f: fn(&ManyRecord) -> f64| median(rounds.iter().map(|r| f(r)).collect());
    let of_some =
        |f: fn(&ManyRecord) -> Option<f64>| median(rounds.iter().filter_map(|r| f(r)).collect());
    Some(ManyRecord {
        kind: first.kind.clone(),
        side: first.side.clone(),
        elections: first.elections,
        startup_ms: of(|r| r.startup_ms)?,
        requests_per_start: of(|r| r.requests_per_start)?,
        user_us_per_start: of(|r| r.user_us_per_start)?,
        sys_us_per_start: of(|r| r.sys_us_per_start)?,
        bytes_per_idle_recipe: of_some(|r| r.bytes_per_idle_recipe),
        heap_per_idle_recipe: of_some(|r| r.heap_per_idle_recipe),
        client_watches_per_idle_recipe: of_some(|r| r.client_watches_per_idle_recipe),
        own_heap_per_idle_recipe: of_some(|r| r.own_heap_per_idle_recipe),
        failover_all_ms: of_some(|r| r.failover_all_ms),
        packets_per_failover: of_some(|r| r.packets_per_failover),
    })
}

/// The table of several rounds (`many --rounds`): per side, in the order
/// first run, each figure's median over its rounds, then every round's
/// start-up in the order run.
pub fn markdown_rounds(runs: &[ManyRecord]) -> String {
    let mut sides: Vec<&str> = Vec::new();
    for r in runs {
        if !sides.contains(&&*r.side) {
            sides.push(&r.side);
        }
    }
    let mut medians = Vec::new();
    let mut each = Vec::new();
    for side in sides {
        let rounds: Vec<&ManyRecord> = runs.iter().filter(|r| r.side == side).collect();
        if let Some(m) = median_record(&rounds) {
            medians.push(m);
            each.push(
                rounds
                    .iter()
                    .map(|r| format!("{:.0}", r.startup_ms))
                    .collect::<Vec<_>>()
                    .join(", "),
            );
        }
    }
    table(&medians, Some(("start-up, each round (ms)", &each)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(side: &'static str, startup_ms: f64, heap: Option<f64>) -> ManyRecord {
        ManyRecord {
            kind: "many".into(),
            side: side.into(),
            elections: 10,
            startup_ms,
            requests_per_start: 4.0,
            user_us_per_start: startup_ms / 10.0,
            sys_us_per_start: 1.0,
            bytes_per_idle_recipe: heap,
            heap_per_idle_recipe: heap,
            client_watches_per_idle_recipe: None,
            own_heap_per_idle_recipe: None,
            failover_all_ms: heap,
            packets_per_failover: None,
        }
    }

    #[test]
    fn rounds_are_summed_up_by_each_figures_median_per_side_in_the_order_run() {
        let runs = [
            record("b", 300.0, Some(7.0)),
            record("a", 100.0, None),
            record("b", 100.0, Some(9.0)),
            record("a", 200.0, None),
            record("b", 200.0, Some(8.0)),
            record("a", 900.0, None),
        ];
        let table = markdown_rounds(&runs);
        let rows: Vec<&str> = table.lines().collect();
        assert_eq!(rows.len(), 4, "{table}");
        assert!(
            rows[0].ends_with("| start-up, each round (ms) |"),
            "{table}"
        );
        // b first (run first): medians 200 ms, 8 B, 20 µs user; its rounds in order.
        assert!(
            rows[2].starts_with("| b | 10 | 200 ms | 4.00 | 20 + 1 µs | 8 B |"),
            "{table}"
        );
        assert!(rows[2].ends_with("| 300, 100, 200 |"), "{table}");
        // a: 200 ms, whatever its outlier; no memory figures.
        assert!(rows[3].starts_with("| a | 10 | 200 ms |"), "{table}");
        assert!(rows[3].ends_with("| 100, 200, 900 |"), "{table}");
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
        // A record round-trips through its JSON line (the rounds' children
        // print them; the parent reads them back).
        let r = record("x", 1.5, Some(2.0));
        let back: ManyRecord =
            serde_json::from_str(&serde_json::to_string(&r).expect("serializes")).expect("parses");
        assert_eq!(
            (
                back.side.as_ref(),
                back.startup_ms,
                back.heap_per_idle_recipe
            ),
            ("x", 1.5, Some(2.0))
        );
    }

    #[test]
    fn cpu_times_are_read_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (zk bench (x)) S 1 4242 4242 0 -1 4194304 900 0 0 0 \
                    731 266 0 0 20 0 5 0 1000 2000000 3000 18446744073709551615";
        let cpu = Cpu::parse(stat).expect("a well-formed line");
        assert_eq!((cpu.user, cpu.sys), (731, 266));
        // 700 ticks of 10 ms (7 s) over 1,000 starts: 7,000 µs each.
        let before = Cpu { user: 31, sys: 16 };
        assert_eq!(cpu.per(before, 1000), (7000.0, 2500.0));
    }

    #[test]
    fn a_cut_or_garbled_stat_line_is_an_error() {
        assert!(Cpu::parse("").is_err());
        assert!(Cpu::parse("4242 (zkelect) S 1 2 3").is_err());
        assert!(Cpu::parse("4242 (zkelect) S 1 2 3 4 5 6 7 8 9 10 x y").is_err());
    }
}
