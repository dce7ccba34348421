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

/// Arms a `get_data_w` on `path` from `watcher`; the receiver yields the
/// instant the watch fired.
async fn watch(watcher: &ZooKeeper, path: &str) -> Result<oneshot::Receiver<Instant>> {
    let (tx, rx) = oneshot::channel();
    watcher
        .get_data_w(path, move |_| {
            let at = Instant::now();
            let _ = tx.send(at);
        })
        .await
        .map_err(zk_err(format!("get_data_w({path})")))?;
    Ok(rx)
}

async fn fired(rx: oneshot::Receiver<Instant>, what: &str) -> Result<Instant> {
    tokio::time::timeout(Duration::from_secs(10), rx)
        .await
        .map_err(|_| anyhow!("{what}: the watch did not fire within 10 s"))?
        .map_err(|_| anyhow!("{what}: the watch was dropped without firing"))
}

/// Median delete→notification latency over `count` nodes under `dir` (after
/// 10 not counted), each delete after `idle`. `dir` must exist.
///
/// # Errors
///
/// When a client cannot connect, a request fails, or a watch never fires.
pub async fn delete_notify(
    settings: &ConnectSettings,
    dir: &str,
    count: usize,
    idle: Idle<'_>,
) -> Result<BaselineRecord> {
    let deleter = connect(settings).await?;
    let watcher = connect(settings).await?;
    let result = async {
        let mut samples = Vec::with_capacity(count);
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
            let at = fired(rx, "delete_notify").await?;
            if i >= 10 {
                samples.push(micros(at.duration_since(t0)));
            }
        }
        BaselineRecord::new("delete_notify", &samples)
    }
    .await;
    let _ = deleter.close().await;
    let _ = watcher.close().await;
    result
}

/// Median session-close→notification latency over `count` sessions (after 3
/// not counted), each with one ephemeral node under `dir`, each close after
/// `idle`. `dir` must exist.
///
/// # Errors
///
/// When a client cannot connect, a request fails, or a watch never fires.
pub async fn close_notify(
    settings: &ConnectSettings,
    dir: &str,
    count: usize,
    idle: Idle<'_>,
) -> Result<BaselineRecord> {
    let watcher = connect(settings).await?;
    let result = async {
        let mut samples = Vec::with_capacity(count);
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
            let at = fired(rx, "close_notify").await?;
            if i >= 3 {
                samples.push(micros(at.duration_since(t0)));
            }
        }
        BaselineRecord::new("close_notify", &samples)
    }
    .await;
    let _ = watcher.close().await;
    result
}
