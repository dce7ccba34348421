//! The physical limits a failover is compared with, measured on the same
//! server in the same run:
//!
//! * `exists_rtt`: one client's `exists("/")` round trip;
//! * `delete_notify`: one client deletes a node that another client watches
//!   with `get_data_w`; from just before the delete to the watcher's callback;
//! * `close_notify`: one client closes its session; another, watching that
//!   session's ephemeral node with `get_data_w`, is told it is gone. This is
//!   exactly what a failover waits for, before any election logic runs.
//!
//! All times are taken with [`Instant`], the clock the failover rounds use;
//! the watch callbacks take their timestamp first thing.
//!
//! The two notification baselines are each reported twice from the same
//! samples: stamped in the client's watcher callback (`delete_notify`,
//! `close_notify`: the client library's own task, where no application
//! code runs), and stamped in a task that the callback wakes
//! (`delete_notify_woken`, `close_notify_woken`). A failover's figure ends in
//! the application's task (zkelect's role watch, the latch's poll), so the
//! woken floor is the like-for-like one: any library must wake its user's
//! task at least once after the client's callback. The callback floors stay
//! as the stricter bound they have always been.
//!
//! The two notification baselines run under the conditions of a failover
//! round: before each trigger, the clients sit idle for the same time as a
//! round's control window while the bench probes the server's counters every
//! 10 ms, exactly as before a round's close. (Measured back to back instead,
//! with every thread still warm, both come out ~0.5 ms faster on a 2-vCPU VM:
//! waking idle threads is part of the cost of any failover.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use serde::Serialize;
use tokio::sync::oneshot;
use zookeeper_async::{Acl, CreateMode, ZooKeeper};

use crate::contender::ConnectSettings;
use crate::latch::connect;
use crate::mntr::{Monitor, PROBE_EVERY};
use crate::stats::Summary;

/// One baseline's result, printed as one JSON line.
#[derive(Debug, Clone, Serialize)]
pub struct BaselineRecord {
    /// Always `"baseline"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `exists_rtt`, `delete_notify` or `close_notify`.
    pub name: &'static str,
    /// Samples taken.
    pub samples: usize,
    /// Median, microseconds.
    pub median_us: f64,
    /// 90th percentile (nearest rank), microseconds.
    pub p90_us: f64,
    /// Smallest sample, microseconds.
    pub min_us: f64,
    /// Largest sample, microseconds.
    pub max_us: f64,
}

impl BaselineRecord {
    fn new(name: &'static str, samples: &[f64]) -> Result<BaselineRecord> {
        let s = Summary::of(samples).with_context(|| format!("baseline {name}: no samples"))?;
        Ok(BaselineRecord {
            kind: "baseline",
            name,
            samples: s.count,
            median_us: tenth(s.median),
            p90_us: tenth(s.p90),
            min_us: tenth(s.min),
            max_us: tenth(s.max),
        })
    }
}

fn tenth(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn zk_err(what: String) -> impl FnOnce(zookeeper_async::ZkError) -> anyhow::Error {
    move |e| anyhow!("{what}: {e:?}")
}

/// Median of `count` `exists("/")` round trips (after 100 not counted).
///
/// # Errors
///
/// When the client cannot connect or a request fails.
pub async fn exists_rtt(settings: &ConnectSettings, count: usize) -> Result<BaselineRecord> {
    let zk = connect(settings).await?;
    let mut samples = Vec::with_capacity(count);
    for i in 0..count + 100 {
        let t0 = Instant::now();
        zk.exists("/", false)
            .await
            .map_err(zk_err("exists(\"/\")".into()))?;
        if i >= 100 {
            samples.push(micros(t0.elapsed()));
        }
    }
    let _ = zk.close().await;
    BaselineRecord::new("exists_rtt", &samples)
}

/// The clients' idle time before a trigger, and the probes that run in it.
#[derive(Debug, Clone, Copy)]
pub struct Idle<'a> {
    /// The server's counters are probed every 10 ms during the idle time.
    pub monitor: &'a Monitor,
    /// How long the clients stay idle before the trigger.
    pub span: Duration,
}

impl Idle<'_> {
    async fn wait(&self) -> Result<()> {
        let start = Instant::now();
        while start.elapsed() < self.span {
            tokio::time::sleep(PROBE_EVERY).await;
            self.monitor.sample().await?;
        }
        Ok(())
    }
}

/// When a watch fired: in the client's callback, and in the task it woke.
type Fired = tokio::task::JoinHandle<Option<(Instant, Instant)>>;

/// Arms a `get_data_w` on `path` from `watcher`; the task yields the instant
/// the callback ran and the instant the task it woke (spawned on the
/// runtime's worker pool, as an application's would be) ran.
async fn watch(watcher: &ZooKeeper, path: &str) -> Result<Fired> {
    let (tx, rx) = oneshot::channel();
    watcher
        .get_data_w(path, move |_| {
            let at = Instant::now();
            let _ = tx.send(at);
        })
        .await
        .map_err(zk_err(format!("get_data_w({path})")))?;
    Ok(tokio::spawn(async move {
        let at = rx.await.ok()?;
        Some((at, Instant::now()))
    }))
}

async fn fired(task: Fired, what: &str) -> Result<(Instant, Instant)> {
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .map_err(|_| anyhow!("{what}: the watch did not fire within 10 s"))?
        .map_err(|_| anyhow!("{what}: the watcher task failed"))?
        .ok_or_else(|| anyhow!("{what}: the watch was dropped without firing"))
}

/// Median delete→notification latency over `count` nodes under `dir` (after
/// 10 not counted), each delete after `idle`. `dir` must exist. Returns
/// `delete_notify` (callback) and `delete_notify_woken` (see the module docs).
///
/// # Errors
///
/// When a client cannot connect, a request fails, or a watch never fires.
pub async fn delete_notify(
    settings: &ConnectSettings,
    dir: &str,
    count: usize,
    idle: Idle<'_>,
) -> Result<[BaselineRecord; 2]> {
    let deleter = connect(settings).await?;
    let watcher = connect(settings).await?;
    let result = async {
        let (mut samples, mut woken) = (Vec::with_capacity(count), Vec::with_capacity(count));
        for i in 0..count + 10 {
            let path = format!("{dir}/d-{i}");
            deleter
                .create(
                    &path,
                    vec![],
                    Acl::open_unsafe().clone(),
                    CreateMode::Persistent,
                )
                .await
                .map_err(zk_err(format!("create({path})")))?;
            let rx = watch(&watcher, &path).await?;
            idle.wait().await?;
            let t0 = Instant::now();
            deleter
                .delete(&path, None)
                .await
                .map_err(zk_err(format!("delete({path})")))?;
            let (at, task) = fired(rx, "delete_notify").await?;
            if i >= 10 {
                samples.push(micros(at.duration_since(t0)));
                woken.push(micros(task.duration_since(t0)));
            }
        }
        Ok([
            BaselineRecord::new("delete_notify", &samples)?,
            BaselineRecord::new("delete_notify_woken", &woken)?,
        ])
    }
    .await;
    let _ = deleter.close().await;
    let _ = watcher.close().await;
    result
}

/// Median session-close→notification latency over `count` sessions (after 3
/// not counted), each with one ephemeral node under `dir`, each close after
/// `idle`. `dir` must exist. Returns `close_notify` (callback) and
/// `close_notify_woken` (see the module docs).
///
/// # Errors
///
/// When a client cannot connect, a request fails, or a watch never fires.
pub async fn close_notify(
    settings: &ConnectSettings,
    dir: &str,
    count: usize,
    idle: Idle<'_>,
) -> Result<[BaselineRecord; 2]> {
    let watcher = connect(settings).await?;
    let result = async {
        let (mut samples, mut woken) = (Vec::with_capacity(count), Vec::with_capacity(count));
        for i in 0..count + 3 {
            let closer: Arc<ZooKeeper> = connect(settings).await?;
            let path = format!("{dir}/c-{i}");
            closer
                .create(
                    &path,
                    vec![],
                    Acl::open_unsafe().clone(),
                    CreateMode::Ephemeral,
                )
                .await
                .map_err(zk_err(format!("create({path})")))?;
            let rx = watch(&watcher, &path).await?;
            idle.wait().await?;
            let t0 = Instant::now();
            closer.close().await.map_err(zk_err("close()".to_owned()))?;
            let (at, task) = fired(rx, "close_notify").await?;
            if i >= 3 {
                samples.push(micros(at.duration_since(t0)));
                woken.push(micros(task.duration_since(t0)));
            }
        }
        Ok([
            BaselineRecord::new("close_notify", &samples)?,
            BaselineRecord::new("close_notify_woken", &woken)?,
        ])
    }
    .await;
    let _ = watcher.close().await;
    result
}
