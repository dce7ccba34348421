//! zookeeper-async's own `recipes::leader_latch::LeaderLatch`, as the
//! reference implementation.
//!
//! The latch has no notification API, only `has_leadership()`, so one
//! dedicated thread polls every latch of the run every `poll_interval`
//! (100 µs by default) and reports rising edges. The figure therefore
//! includes up to one poll interval (plus the OS's timer slack) of detection
//! delay; each event carries the measured gap to the previous poll so the
//! report can show it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use async_trait::async_trait;
use zookeeper_async::recipes::leader_latch::LeaderLatch;
use zookeeper_async::{WatchedEvent, ZooKeeper};

use crate::contender::{
    ConnectSettings, Contender, Implementation, LeaderBoard, LeaderEvent, Strategy,
};

/// One latch under the poller's eye.
struct Polled {
    id: u64,
    latch: LeaderLatch,
    board: Arc<LeaderBoard>,
    was_leader: bool,
    last_checked: Instant,
}

type PollList = Arc<Mutex<Vec<Polled>>>;

/// Makes [`LeaderLatch`] contenders and polls them.
pub struct Latch {
    settings: ConnectSettings,
    polled: PollList,
    stop: Arc<AtomicBool>,
    active: Arc<AtomicBool>,
    poller: Option<JoinHandle<()>>,
}

impl Latch {
    /// Starts the polling thread (every `poll_interval`).
    ///
    /// # Errors
    ///
    /// When the thread cannot be spawned.
    pub fn new(settings: ConnectSettings, poll_interval: Duration) -> Result<Latch> {
        let polled: PollList = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let active = Arc::new(AtomicBool::new(true));
        let poller = {
            let polled = polled.clone();
            let stop = stop.clone();
            let active = active.clone();
            std::thread::Builder::new()
                .name("latch-poller".into())
                .spawn(move || poll(&polled, &stop, &active, poll_interval))
                .context("cannot spawn the latch polling thread")?
        };
        Ok(Latch {
            settings,
            polled,
            stop,
            active,
            poller: Some(poller),
        })
    }
}

impl Drop for Latch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(poller) = self.poller.take() {
            let _ = poller.join();
        }
    }
}

fn poll(polled: &Mutex<Vec<Polled>>, stop: &AtomicBool, active: &AtomicBool, interval: Duration) {
    while !stop.load(Ordering::Relaxed) {
        if !active.load(Ordering::Relaxed) {
            // Another implementation's round: stay out of its way.
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        {
            let mut list = polled.lock().unwrap_or_else(PoisonError::into_inner);
            for p in list.iter_mut() {
                let leader = p.latch.has_leadership();
                let now = Instant::now();
                if leader && !p.was_leader {
                    p.board.report(LeaderEvent {
                        contender: p.id,
                        at: now,
                        poll_gap: Some(now.duration_since(p.last_checked)),
                    });
                }
                p.was_leader = leader;
                p.last_checked = now;
            }
        }
        std::thread::sleep(interval);
    }
}

/// Connects one zookeeper-async session, bounded in time (its `connect` can
/// hang on an unreachable server).
///
/// # Errors
///
/// When the connect string is invalid or the connect does not finish within
/// `settings.connect_timeout`.
pub async fn connect(settings: &ConnectSettings) -> Result<Arc<ZooKeeper>> {
    let connecting = ZooKeeper::connect_with_retry_time(
        &settings.connect,
        settings.session_timeout,
        |_: WatchedEvent| {},
        Duration::from_millis(100),
    );
    let zk = tokio::time::timeout(settings.connect_timeout, connecting)
        .await
        .map_err(|_| {
            anyhow!(
                "connecting to {} took longer than {:?}",
                settings.connect,
                settings.connect_timeout
            )
        })?
        .with_context(|| format!("cannot connect to {}", settings.connect))?;
    Ok(Arc::new(zk))
}

#[async_trait]
impl Implementation for Latch {
    fn name(&self) -> &'static str {
        "latch"
    }

    fn strategy(&self) -> Option<Strategy> {
        None
    }

    fn focus(&self, on: bool) {
        self.active.store(on, Ordering::Relaxed);
    }

    async fn start(
        &self,
        id: u64,
        path: &str,
        board: Arc<LeaderBoard>,
    ) -> Result<Box<dyn Contender>> {
        let zk = connect(&self.settings).await?;
        let latch = LeaderLatch::new(zk.clone(), format!("c{id}"), path.to_owned());
        let started = tokio::time::timeout(self.settings.connect_timeout, latch.start()).await;
        match started {
            Ok(Ok(())) => {}
            failed => {
                let _ = zk.close().await;
                return Err(match failed {
                    Ok(Err(e)) => anyhow!("LeaderLatch::start on {path}: {e:?}"),
                    _ => anyhow!("LeaderLatch::start on {path} took too long"),
                });
            }
        }
        let leader = latch.has_leadership();
        self.polled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Polled {
                id,
                latch: latch.clone(),
                board,
                // The first election is not a failover: report only later edges
                // from a known state.
                was_leader: leader,
                last_checked: Instant::now(),
            });
        Ok(Box::new(LatchContender {
            id,
            zk,
            latch,
            polled: self.polled.clone(),
        }))
    }
}

struct LatchContender {
    id: u64,
    zk: Arc<ZooKeeper>,
    latch: LeaderLatch,
    polled: PollList,
}

#[async_trait]
impl Contender for LatchContender {
    fn id(&self) -> u64 {
        self.id
    }

    fn is_leader(&self) -> bool {
        self.latch.has_leadership()
    }

    fn describe(&self) -> String {
        if self.latch.has_leadership() {
            "leader".into()
        } else {
            "not leader".into()
        }
    }

    async fn kill(self: Box<Self>) -> Result<()> {
        let closed = self.zk.close().await;
        self.polled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|p| p.id != self.id);
        closed.map_err(|e| anyhow!("closing contender {}'s session: {e:?}", self.id))
    }
}
