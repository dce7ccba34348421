//! Mutex hand-off: how long after the holder lets go the next waiter is told
//! it holds, with W waiters queued, side by side with its physical floor and
//! with zookeeper-client's own lock recipe, in one run on one server.
//!
//! Per round, in this order (interleaved, so a phase of load on a shared
//! machine hits every side alike):
//!
//! * **floor**: one client deletes a node another client watches with
//!   `get_and_watch_data`; from just before the delete to the watch firing.
//!   A lock hand-off cannot be faster: the next holder learns of the release
//!   from exactly such a notification;
//! * **zookeeper-client**: `Client::lock` with a Curator-style prefix
//!   (`LockPrefix::new_curator(dir, "lock-")`, InterProcessMutex's names),
//!   W + 1 contenders each on its own session; from just before the holder
//!   drops its `LockClient` (the delete goes out in the background) to the
//!   next `lock()` future resolving;
//! * **zkelect**: W + 1 [`zkelect::Mutex`] handles on one path, each on a
//!   `Session` of its own (zookeeper-async transport); from just before the
//!   holder's `LockGuard::release` to the next one's `acquire` returning.
//!
//! Every clock starts in the task that lets go, just before it does, and
//! stops in the task that is told, both on the runtime's worker pool: the
//! bench's order to the holder (a wake-up of another task) is outside the
//! window, as nothing like it precedes the floor's delete.
//!
//! The released contender queues again at the back only after the round is
//! timed, so W stays constant and the window holds nothing but the hand-off.
//!
//! Round trips: the floor is one request (the delete) and one notification.
//! A zkelect release is the same delete; the next holder takes over on the
//! predecessor's `NodeDeleted` alone when its standing allows (the core's
//! zero-round-trip takeover), or lists the children first (one more round
//! trip). Each zkelect hand-off records which it was, from the new hold's
//! own counters (`Stats::zero_rtt_takeovers`), and the summary counts them,
//! so a round trip more than the floor shows in the table, not only in the
//! timings.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use zkelect::Takeover;
use zookeeper_async as zka;
use zookeeper_client as zkc;

use crate::contender::{create_dir, delete_tree, zk_err, zkc_connect, ConnectSettings};
use crate::hops::{HopsRecord, Paths};
use crate::many::{zkelect_session, ZkelectTransport};
use crate::stats::Summary;

/// One side of the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    /// delete → another client's data watch fires.
    Floor,
    /// zookeeper-client's `Client::lock`.
    ZookeeperClient,
    /// zkelect.
    Zkelect,
}

impl Side {
    /// The side's name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Side::Floor => "floor",
            Side::ZookeeperClient => "zookeeper-client",
            Side::Zkelect => "zkelect",
        }
    }
}

/// One timed hand-off (or floor sample), printed as one JSON line.
#[derive(Debug, Clone, Serialize)]
pub struct HandoffRecord {
    /// Always `"handoff"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Which side.
    pub side: Side,
    /// Waiters queued behind the holder.
    pub waiters: usize,
    /// Round number (warm-up rounds are not recorded).
    pub round: usize,
    /// Release → next holder told, microseconds.
    pub micros: f64,
    /// zkelect only: whether the next holder took over on the delete
    /// notification alone (no request between the notification and being
    /// told), as its own counters say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zero_rtt: Option<bool>,
}

/// The medians at one waiter count, printed as one JSON line.
#[derive(Debug, Clone, Serialize)]
pub struct HandoffSummary {
    /// Always `"handoff_summary"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Waiters queued behind the holder.
    pub waiters: usize,
    /// zkelect's transport in this run (the floor and the lock always run
    /// over zookeeper-client).
    pub transport: &'static str,
    /// Recorded rounds.
    pub rounds: usize,
    /// Median floor, µs.
    pub floor_median_us: f64,
    /// Median zookeeper-client hand-off, µs.
    pub zookeeper_client_median_us: f64,
    /// Median zkelect hand-off, µs.
    pub zkelect_median_us: f64,
    /// zookeeper-client's median ÷ the floor's.
    pub zookeeper_client_ratio: f64,
    /// zkelect's median ÷ the floor's (the target: ≤ 1.2).
    pub zkelect_ratio: f64,
    /// The same ratio in each quarter of the rounds, in order: how much one
    /// run's figure moves with the machine's phases (a quarter has a
    /// quarter of the samples, so it spreads wider than the whole).
    pub zkelect_ratio_quarters: Vec<f64>,
    /// 90th percentiles, µs: floor, zookeeper-client, zkelect.
    pub p90_us: [f64; 3],
    /// Recorded zkelect hand-offs taken over on the delete notification
    /// alone (out of `rounds`): the others listed the children first, one
    /// round trip more than the floor.
    pub zkelect_zero_rtt: usize,
}

/// What a run at one waiter count does.
#[derive(Debug, Clone)]
pub struct HandoffSettings {
    /// Where and how to connect.
    pub connect: ConnectSettings,
    /// A fresh persistent parent for this run's nodes (created, then deleted).
    pub dir: String,
    /// Waiters behind the holder.
    pub waiters: usize,
    /// zkelect's transport.
    pub transport: ZkelectTransport,
    /// Recorded rounds.
    pub rounds: usize,
    /// Unrecorded rounds first.
    pub warmup: usize,
    /// Quiet time before each trigger.
    pub idle: Duration,
    /// How long a hand-off may take before the run fails.
    pub timeout: Duration,
    /// Record where zkelect's time goes (see [`crate::hops`]; the stamps'
    /// subscriber must be installed), and time a second floor over zookeeper-async,
    /// stamped both in the client's watcher callback and in the task it
    /// wakes.
    pub hops: bool,
}

/// With `--hops`, how long after a hand-off its stamps are taken: the
/// farther waiter's listing may still be on its way when the new holder is
/// told (outside the timed window; the next round starts later).
const HOPS_AFTER: Duration = Duration::from_millis(30);

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// What the bench tells a contender.
#[derive(Debug)]
pub(crate) enum Order {
    /// Let go of the lock (the timed trigger).
    Release,
    /// Queue again at the back.
    Requeue,
}

/// A contender's "I hold": who, when, and (zkelect) whether it took over on
/// the notification alone.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Told {
    pub(crate) who: usize,
    at: Instant,
    zero_rtt: Option<bool>,
}

/// A queue of contenders of one side: orders go in, "I let go" and "I hold"
/// moments come out.
pub(crate) struct Queue {
    orders: Vec<mpsc::UnboundedSender<Order>>,
    held: mpsc::UnboundedReceiver<Told>,
    released: LetGo,
    tasks: Vec<JoinHandle<Result<()>>>,
}

/// What a contender reports back: when it let go, and when it holds.
#[derive(Clone)]
pub(crate) struct Reports {
    held: mpsc::UnboundedSender<Told>,
    released: LetGo,
}

/// When the holder let go: written by the holder just before it does, read
/// by the bench once the next holder is told. A slot, not a channel: a send
/// would wake the bench's own thread inside the timed window, on the
/// holder's path, a cost neither the floor nor a real hand-off has.
#[derive(Clone, Default)]
struct LetGo(Arc<std::sync::Mutex<Option<Instant>>>);

impl LetGo {
    /// Notes the moment the holder lets go.
    fn mark_now(&self) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Instant::now());
    }

    /// The moment noted since the last take.
    fn take(&self) -> Option<Instant> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

impl Queue {
    pub(crate) async fn next_holder(&mut self, timeout: Duration) -> Result<Told> {
        tokio::time::timeout(timeout, self.held.recv())
            .await
            .map_err(|_| anyhow!("no contender was told it holds within {timeout:?}"))?
            .ok_or_else(|| anyhow!("every contender stopped"))
    }

    pub(crate) fn order(&self, who: usize, order: Order) -> Result<()> {
        self.orders[who]
            .send(order)
            .map_err(|_| anyhow!("contender {who} stopped"))
    }

    /// Times one hand-off: the holder releases, the next is told. The clock
    /// starts in the holder's task just before it lets go (as the floor's
    /// starts in the deleter's task just before the delete), so the bench's
    /// order to the holder is not part of the hand-off.
    async fn handoff(&mut self, holder: usize, timeout: Duration) -> Result<(Told, Duration)> {
        crate::hops::clear();
        self.order(holder, Order::Release)?;
        let told = self.next_holder(timeout).await?;
        if told.who == holder {
            bail!("contender {holder} released and was told it holds again");
        }
        let t0 = self
            .released
            .take()
            .ok_or_else(|| anyhow!("contender {holder} did not note when it let go"))?;
        self.order(holder, Order::Requeue)?;
        Ok((told, told.at.duration_since(t0)))
    }

    /// Closes the order channels: every contender leaves (closing its
    /// election or session properly; aborting them would drop zookeeper-async
    /// clients mid-flight, which panics in its I/O task), aborted only if it
    /// has not left within 5 s.
    pub(crate) async fn stop(self) {
        drop(self.orders);
        for mut task in self.tasks {
            if tokio::time::timeout(Duration::from_secs(5), &mut task)
                .await
                .is_err()
            {
                task.abort();
                let _ = task.await;
            }
        }
    }
}

/// Starts `count` contenders with `start`, one after the other: each has
/// queued (created its node) before the next starts, so contender i's node is
/// below i + 1's.
pub(crate) async fn fill<F, Fut>(count: usize, start: F) -> Result<Queue>
where
    F: Fn(usize, mpsc::UnboundedReceiver<Order>, Reports) -> Fut,
    Fut: std::future::Future<Output = Result<JoinHandle<Result<()>>>>,
{
    let (held_tx, held) = mpsc::unbounded_channel();
    let released = LetGo::default();
    let reports = Reports {
        held: held_tx,
        released: released.clone(),
    };
    let mut orders = Vec::with_capacity(count);
    let mut tasks = Vec::with_capacity(count);
    for i in 0..count {
        let (tx, rx) = mpsc::unbounded_channel();
        orders.push(tx);
        tasks.push(start(i, rx, reports.clone()).await?);
    }
    Ok(Queue {
        orders,
        held,
        released,
        tasks,
    })
}

/// A zookeeper-client contender: lock, report, wait for Release, drop the
/// lock, wait for Requeue, again.
pub(crate) async fn zkc_contender(
    settings: ConnectSettings,
    dir: Arc<str>,
    i: usize,
    mut orders: mpsc::UnboundedReceiver<Order>,
    reports: Reports,
) -> Result<JoinHandle<Result<()>>> {
    let client = zkc_connect(&settings).await?;
    let (queued_tx, queued_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let mut queued = Some(queued_tx);
        loop {
            let prefix = zkc::LockPrefix::new_curator(&dir, "lock-")
                .map_err(zk_err("LockPrefix::new_curator"))?;
            let lock = client.lock(prefix, b"", zkc::Acls::anyone_all());
            tokio::pin!(lock);
            // lock() creates its node first; report "queued" once the node
            // exists, so the next contender queues behind it.
            let guard = match queued.take() {
                Some(tx) => wait_queued(&client, &dir, i, &mut lock, tx).await?,
                None => tokio::select! {
                    guard = lock => guard.map_err(zk_err("lock"))?,
                    // A closed order channel (the run is over) ends the wait.
                    order = orders.recv() => if order.is_none() { return Ok(()) } else { continue },
                },
            };
            let _ = reports.held.send(Told {
                who: i,
                at: Instant::now(),
                zero_rtt: None,
            });
            match orders.recv().await {
                Some(Order::Release) => {
                    reports.released.mark_now();
                    drop(guard);
                }
                _ => return Ok(()),
            }
            match orders.recv().await {
                Some(Order::Requeue) => {}
                _ => return Ok(()),
            }
        }
    });
    queued_rx
        .await
        .map_err(|_| anyhow!("zookeeper-client contender {i} stopped before queueing"))?;
    Ok(task)
}

/// Drives `lock` until this contender's node shows under `dir` (then says so
/// on `queued`) and on until it holds.
async fn wait_queued<'c>(
    client: &'c zkc::Client,
    dir: &str,
    i: usize,
    lock: &mut std::pin::Pin<
        &mut impl std::future::Future<Output = Result<zkc::LockClient<'c>, zkc::Error>>,
    >,
    queued: tokio::sync::oneshot::Sender<()>,
) -> Result<zkc::LockClient<'c>> {
    let before = client
        .list_children(dir)
        .await
        .map_err(zk_err("list_children"))?
        .len();
    let mut queued = Some(queued);
    loop {
        tokio::select! {
            guard = lock.as_mut() => {
                if let Some(tx) = queued.take() { let _ = tx.send(()); }
                return guard.map_err(zk_err(format!("contender {i}: lock")));
            }
            () = tokio::time::sleep(Duration::from_millis(2)), if queued.is_some() => {
                let now = client.list_children(dir).await.map_err(zk_err("list_children"))?.len();
                if now > before {
                    if let Some(tx) = queued.take() { let _ = tx.send(()); }
                }
            }
        }
    }
}

/// How a zkelect contender runs: over which transport, taking over how.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Flavour {
    pub(crate) transport: ZkelectTransport,
    pub(crate) takeover: Takeover,
}

/// A zkelect contender: a [`zkelect::Mutex`] on a session of its own; told
/// it holds when `acquire` returns, releases with `LockGuard::release`,
/// queues again with a new `acquire`. Returns once its first `acquire` has
/// queued (its node shows under `path`, as `lister` sees it).
pub(crate) async fn zkelect_contender(
    settings: ConnectSettings,
    flavour: Flavour,
    lister: zkc::Client,
    path: Arc<str>,
    i: usize,
    mut orders: mpsc::UnboundedReceiver<Order>,
    reports: Reports,
) -> Result<JoinHandle<Result<()>>> {
    let (session, transport) = zkelect_session(flavour.transport, &settings)
        .await
        .with_context(|| format!("zkelect contender {i}: connecting"))?;
    crate::hops::register(i, transport.hop_tag());
    let before = children(&lister, &path).await?;
    let task = {
        let session = session.clone();
        let path = Arc::clone(&path);
        tokio::spawn(async move {
            let mutex = session
                .mutex(&*path)
                .id(format!("w{i}"))
                .takeover(flavour.takeover);
            let result = async {
                loop {
                    // A closed order channel (the run is over) ends the wait.
                    let guard = tokio::select! {
                        guard = mutex.acquire() => guard
                            .with_context(|| format!("contender {i}: acquire"))?,
                        // Orders go to the holder only; one here would cancel
                        // this acquire and queue it again at the back.
                        order = orders.recv() => match order {
                            None => return Ok(()),
                            Some(order) => bail!("contender {i}: {order:?} while it waits"),
                        },
                    };
                    let at = Instant::now();
                    let zero_rtt = guard.status().borrow().stats.zero_rtt_takeovers > 0;
                    let _ = reports.held.send(Told {
                        who: i,
                        at,
                        zero_rtt: Some(zero_rtt),
                    });
                    match orders.recv().await {
                        Some(Order::Release) => {
                            reports.released.mark_now();
                            guard.release().await;
                        }
                        _ => return Ok(()),
                    }
                    match orders.recv().await {
                        Some(Order::Requeue) => {}
                        _ => return Ok(()),
                    }
                }
            }
            .await;
            let _ = tokio::time::timeout(Duration::from_secs(3), session.close()).await;
            result
        })
    };
    let deadline = Instant::now() + settings.connect_timeout;
    while children(&lister, &path).await? <= before {
        if task.is_finished() || Instant::now() > deadline {
            bail!("zkelect contender {i} did not queue on {path}");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(task)
}

/// How many children `path` has (none while it does not exist).
pub(crate) async fn children(client: &zkc::Client, path: &str) -> Result<usize> {
    match client.list_children(path).await {
        Ok(names) => Ok(names.len()),
        Err(zkc::Error::NoNode) => Ok(0),
        Err(e) => Err(zk_err(format!("list_children({path})"))(e)),
    }
}

/// One floor sample: `deleter` deletes `path`, which `watcher` watches.
///
/// As in a hand-off, the delete is sent from one task and the notification
/// awaited in another, each a task of the runtime's worker pool (the
/// contenders' tasks are too): the clock starts in the deleter's task just
/// before the delete and stops in the watcher's task when it fires. Neither
/// runs on the bench's own thread, which `block_on` drives outside the pool
/// and which a wake-up would reach by another path.
async fn floor_sample(
    deleter: &zkc::Client,
    watcher: &zkc::Client,
    path: &str,
    idle: Duration,
) -> Result<Duration> {
    create_dir(deleter, path).await?;
    let (_, _, watch) = watcher
        .get_and_watch_data(path)
        .await
        .map_err(zk_err(format!("get_and_watch_data({path})")))?;
    let fired = tokio::spawn(async move {
        watch.changed().await;
        Instant::now()
    });
    tokio::time::sleep(idle).await;
    let (deleter, owned_path) = (deleter.clone(), path.to_owned());
    let deleted = tokio::spawn(async move {
        let t0 = Instant::now();
        deleter.delete(&owned_path, None).await.map(|()| t0)
    });
    let t0 = deleted
        .await
        .context("the floor's deleter task")?
        .map_err(zk_err(format!("delete({path})")))?;
    let fired = fired.await.context("the floor's watcher task")?;
    Ok(fired.duration_since(t0))
}

/// One floor sample over zookeeper-async (`--hops` only): as
/// [`floor_sample`], with `get_data_w`; stamped in the client's watcher
/// callback (the client's own task) and in the task the callback wakes (as
/// any application, zkelect's pump included, must be woken).
async fn zka_floor_sample(
    deleter: &Arc<zka::ZooKeeper>,
    watcher: &zka::ZooKeeper,
    behind: Option<&zka::ZooKeeper>,
    path: &str,
    idle: Duration,
) -> Result<Vec<(&'static str, Duration)>> {
    deleter
        .create(
            path,
            vec![],
            zka::Acl::open_unsafe().clone(),
            zka::CreateMode::Persistent,
        )
        .await
        .map_err(|e| anyhow!("create({path}): {e:?}"))?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    watcher
        .get_data_w(path, move |_| {
            let _ = tx.send(Instant::now());
        })
        .await
        .map_err(|e| anyhow!("get_data_w({path}): {e:?}"))?;
    if let Some(behind) = behind {
        // The node watched as a two-watch hand-off's is: by a child watch
        // of a third session (the waiter behind the next holder) and one of
        // the deleter's own (its own-node watch), each told of the delete
        // after the data watch (the server fires data watches first).
        for (client, who) in [(behind, "behind"), (&**deleter, "deleter")] {
            client
                .get_children_w(path, |_| {})
                .await
                .map_err(|e| anyhow!("get_children_w({path}) ({who}): {e:?}"))?;
        }
    }
    let fired = tokio::spawn(async move {
        let callback = rx.await.ok();
        (callback, Instant::now())
    });
    tokio::time::sleep(idle).await;
    let (deleter, owned_path) = (Arc::clone(deleter), path.to_owned());
    let deleted = tokio::spawn(async move {
        let t0 = Instant::now();
        deleter.delete(&owned_path, None).await.map(|()| t0)
    });
    let t0 = deleted
        .await
        .context("the zookeeper-async floor's deleter task")?
        .map_err(|e| anyhow!("delete({path}): {e:?}"))?;
    let (callback, woken) = fired
        .await
        .context("the zookeeper-async floor's watcher task")?;
    let callback = callback.ok_or_else(|| anyhow!("the watch on {path} was dropped"))?;
    Ok(vec![
        (zkelect::hop::WATCH_CALLBACK, callback.duration_since(t0)),
        (crate::hops::TOLD, woken.duration_since(t0)),
    ])
}

/// Runs the floor and both locks at one waiter count; returns every recorded
/// hand-off and the medians.
///
/// # Errors
///
/// When a client cannot connect, a request fails, or a hand-off takes longer
/// than `settings.timeout`.
pub async fn run(
    settings: &HandoffSettings,
) -> Result<(Vec<HandoffRecord>, HandoffSummary, Vec<HopsRecord>)> {
    let admin = zkc_connect(&settings.connect).await?;
    let dir_options = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    let base = settings.dir.as_str();
    let zkc_dir: Arc<str> = format!("{base}/zookeeper-client").into();
    let zkelect_dir: Arc<str> = format!("{base}/zkelect").into();
    let floor_dir = format!("{base}/floor");
    for dir in [base, &zkc_dir, &zkelect_dir, &floor_dir] {
        admin
            .mkdir(dir, &dir_options)
            .await
            .map_err(zk_err(format!("mkdir({dir})")))?;
    }
    let result = async {
        let contenders = settings.waiters + 1;
        let mut zkc_queue = fill(contenders, |i, orders, reports| {
            zkc_contender(
                settings.connect.clone(),
                zkc_dir.clone(),
                i,
                orders,
                reports,
            )
        })
        .await?;
        let mut zkelect_queue = fill(contenders, |i, orders, reports| {
            zkelect_contender(
                settings.connect.clone(),
                Flavour {
                    transport: settings.transport,
                    takeover: Takeover::OnNotification,
                },
                admin.clone(),
                zkelect_dir.clone(),
                i,
                orders,
                reports,
            )
        })
        .await?;
        let deleter = zkc_connect(&settings.connect).await?;
        let watcher = zkc_connect(&settings.connect).await?;
        let zka_clients = if settings.hops {
            Some((
                crate::latch::connect(&settings.connect).await?,
                crate::latch::connect(&settings.connect).await?,
                crate::latch::connect(&settings.connect).await?,
            ))
        } else {
            None
        };
        let mut zka_floor3_paths = Paths::default();
        let (mut zkelect_paths, mut zka_floor_paths) = (Paths::default(), Paths::default());
        let (mut farther_paths, mut own_paths) = (Paths::default(), Paths::default());
        let mut zkc_holder = zkc_queue.next_holder(settings.timeout).await?.who;
        let mut zkelect_holder = zkelect_queue.next_holder(settings.timeout).await?.who;
        let mut records = Vec::new();
        for round in 0..settings.warmup + settings.rounds {
            let floor = floor_sample(
                &deleter,
                &watcher,
                &format!("{floor_dir}/d-{round}"),
                settings.idle,
            )
            .await?;
            let zka_floor = match &zka_clients {
                Some((deleter, watcher, behind)) => Some((
                    zka_floor_sample(
                        deleter,
                        watcher,
                        None,
                        &format!("{floor_dir}/a-{round}"),
                        settings.idle,
                    )
                    .await?,
                    zka_floor_sample(
                        deleter,
                        watcher,
                        Some(behind),
                        &format!("{floor_dir}/b-{round}"),
                        settings.idle,
                    )
                    .await?,
                )),
                None => None,
            };
            tokio::time::sleep(settings.idle).await;
            let (next, zkc_took) = zkc_queue.handoff(zkc_holder, settings.timeout).await?;
            zkc_holder = next.who;
            tokio::time::sleep(settings.idle).await;
            let (next, zkelect_took) = zkelect_queue
                .handoff(zkelect_holder, settings.timeout)
                .await?;
            if settings.hops {
                // The farther waiter's listing may end after the new holder
                // is told: its stamps are kept too.
                tokio::time::sleep(HOPS_AFTER).await;
                let stamps = crate::hops::take_handoff(
                    next.at - zkelect_took,
                    next.at,
                    crate::hops::tag(zkelect_holder),
                    crate::hops::tag(next.who),
                );
                if round >= settings.warmup {
                    zkelect_paths.add(&stamps.path);
                    own_paths.add(&stamps.own);
                    for &fact in &stamps.in_window {
                        own_paths.count(fact);
                    }
                    if !stamps.farther.is_empty() {
                        farther_paths.add(&stamps.farther);
                        if stamps.listing_in_window {
                            farther_paths.count("listing answered before the holder was told");
                        }
                        if stamps.listing_same_thread {
                            farther_paths.count("listing handled on the holder's pump thread");
                        }
                    }
                    if let Some((path, path3)) = &zka_floor {
                        zka_floor_paths.add(path);
                        zka_floor3_paths.add(path3);
                    }
                }
            }
            zkelect_holder = next.who;
            if round >= settings.warmup {
                let round = round - settings.warmup;
                for (side, took, zero_rtt) in [
                    (Side::Floor, floor, None),
                    (Side::ZookeeperClient, zkc_took, None),
                    (Side::Zkelect, zkelect_took, next.zero_rtt),
                ] {
                    records.push(HandoffRecord {
                        kind: "handoff",
                        side,
                        waiters: settings.waiters,
                        round,
                        micros: micros(took),
                        zero_rtt,
                    });
                }
            }
        }
        zkc_queue.stop().await;
        zkelect_queue.stop().await;
        drop((deleter, watcher));
        if let Some((deleter, watcher, behind)) = zka_clients {
            let _ = deleter.close().await;
            let _ = watcher.close().await;
            let _ = behind.close().await;
        }
        let summary = summarize(settings.waiters, settings.transport, &records)?;
        let hops = if settings.hops {
            let w = settings.waiters;
            vec![
                zka_floor_paths.summary(format!("hand-off W={w}: floor over zookeeper-async")),
                zka_floor3_paths.summary(format!(
                    "hand-off W={w}: floor over zookeeper-async, the node watched as a \
                     two-watch hand-off's (three sessions told)"
                )),
                zkelect_paths.summary(format!("hand-off W={w}: zkelect, the new holder's path")),
                farther_paths.summary(format!(
                    "hand-off W={w}: zkelect, the waiter behind it (its farther node went)"
                )),
                own_paths.summary(format!(
                    "hand-off W={w}: zkelect, the releasing session's own-node notice"
                )),
            ]
        } else {
            Vec::new()
        };
        Ok((records, summary, hops))
    }
    .await;
    let _ = delete_tree(&admin, base).await;
    result
}

fn summarize(
    waiters: usize,
    transport: ZkelectTransport,
    records: &[HandoffRecord],
) -> Result<HandoffSummary> {
    let of = |side: Side| {
        let samples: Vec<f64> = records
            .iter()
            .filter(|r| r.side == side)
            .map(|r| r.micros)
            .collect();
        Summary::of(&samples).with_context(|| format!("{}: no samples", side.name()))
    };
    let (floor, zkc, zkelect) = (
        of(Side::Floor)?,
        of(Side::ZookeeperClient)?,
        of(Side::Zkelect)?,
    );
    let round = |x: f64| (x * 10.0).round() / 10.0;
    let ratio = |x: f64| (x / floor.median * 100.0).round() / 100.0;
    let rounds = floor.count;
    let quarter = rounds.div_ceil(4);
    let in_quarter = |side: Side, q: usize| -> Vec<f64> {
        records
            .iter()
            .filter(|r| r.side == side && r.round / quarter == q)
            .map(|r| r.micros)
            .collect()
    };
    let mut quarters = Vec::new();
    for q in 0..rounds.div_ceil(quarter) {
        let (Some(f), Some(z)) = (
            Summary::of(&in_quarter(Side::Floor, q)),
            Summary::of(&in_quarter(Side::Zkelect, q)),
        ) else {
            continue;
        };
        quarters.push((z.median / f.median * 100.0).round() / 100.0);
    }
    Ok(HandoffSummary {
        kind: "handoff_summary",
        waiters,
        transport: transport.library(),
        rounds: floor.count,
        floor_median_us: round(floor.median),
        zookeeper_client_median_us: round(zkc.median),
        zkelect_median_us: round(zkelect.median),
        zookeeper_client_ratio: ratio(zkc.median),
        zkelect_ratio: ratio(zkelect.median),
        zkelect_ratio_quarters: quarters,
        p90_us: [round(floor.p90), round(zkc.p90), round(zkelect.p90)],
        zkelect_zero_rtt: records
            .iter()
            .filter(|r| r.side == Side::Zkelect && r.zero_rtt == Some(true))
            .count(),
    })
}

/// The summaries as a Markdown table, with the target's verdict per row.
pub fn markdown(summaries: &[HandoffSummary]) -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "| waiters | zkelect's transport | rounds | floor: delete→notify (median, p90) | zookeeper-client `lock` (median, p90) | zkelect (median, p90) | zookeeper-client ÷ floor | zkelect ÷ floor | zkelect ÷ floor per quarter of the rounds | zkelect on the notification alone | target ≤ 1.2× |\n|---:|:---|---:|---:|---:|---:|---:|---:|:---|---:|:---:|\n",
    );
    for s in summaries {
        let ms = |us: f64| format!("{:.2} ms", us / 1000.0);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {}, {} | {}, {} | {}, {} | {:.2}× | {:.2}× | {} | {} of {} | {} |",
            s.waiters,
            s.transport,
            s.rounds,
            ms(s.floor_median_us),
            ms(s.p90_us[0]),
            ms(s.zookeeper_client_median_us),
            ms(s.p90_us[1]),
            ms(s.zkelect_median_us),
            ms(s.p90_us[2]),
            s.zookeeper_client_ratio,
            s.zkelect_ratio,
            s.zkelect_ratio_quarters
                .iter()
                .map(|r| format!("{r:.2}"))
                .collect::<Vec<_>>()
                .join(", "),
            s.zkelect_zero_rtt,
            s.rounds,
            if s.zkelect_ratio <= 1.2 {
                "met"
            } else {
                "**missed**"
            },
        );
    }
    out
}
