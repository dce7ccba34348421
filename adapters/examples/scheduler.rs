//! A small job scheduler tested the way you would test your own service:
//! under seeded chaos, in virtual time, with the test kit (feature `testkit`).
//!
//! ```text
//! cargo run -p zkelect --example scheduler        # a few seeds, printed
//! cargo test -p zkelect --example scheduler       # 1,000 seeds twice each, and the canary
//! ```
//!
//! Three schedulers share one election. The leader runs the jobs: every
//! 100 ms it appends one to a log, with its fencing token, inside
//! [`Election::lead`], which stops the work the moment leadership is
//! suspended or lost. Faults arrive every few seconds (partitions, dropped
//! connections, expired sessions, server restarts, stalled and lagging
//! events). After each run the log must never hold a token lower than one
//! before it, nor a write made after a newer leader began
//! ([`check_fencing`]), and a leader must be back before each next fault.
//!
//! The canary is the same scheduler written carelessly: it keeps writing
//! while suspended, stopping only when it is demoted. The chaos finds it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use zkelect::testkit::{check_fencing, FaultRecord, FencedLog, Term, TestZk, Write};
use zkelect::{Election, Notice, Role};

const SESSION: Duration = Duration::from_secs(2);
const CHAOS: Duration = Duration::from_secs(60);
/// How long leadership may take to come back after the chaos stops.
const RECOVERY: Duration = Duration::from_secs(6);

/// One scheduler: leads, and runs jobs while it leads.
async fn scheduler(election: Election, log: FencedLog, id: &'static str, careless: bool) {
    let mut job = 0u64;
    loop {
        if careless {
            // The canary: leading is checked by the role alone, and a
            // suspended leader is taken for a leader.
            let Ok(token) = election.wait_leader().await else {
                return;
            };
            while matches!(election.role(), Role::Leader(t) | Role::Suspended(t) if t == token) {
                job += 1;
                log.append(token, format!("{id}: job {job}"));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        } else {
            let run = election.lead(|token| {
                let log = log.clone();
                async move {
                    loop {
                        job += 1;
                        log.append(token, format!("{id}: job {job}"));
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            });
            if run.await.is_err() {
                return;
            }
        }
    }
}

/// Every notice a scheduler's election published, when, and whose.
type Notices = Arc<Mutex<Vec<(Duration, &'static str, Notice)>>>;

/// What one seed did: the faults, every term, every write, and every
/// notice, each at its virtual instant.
#[derive(Debug, PartialEq, Eq)]
struct Run {
    faults: Vec<FaultRecord>,
    history: Vec<Term>,
    writes: Vec<Write>,
    notices: Vec<(Duration, &'static str, Notice)>,
}

/// Runs the service under the chaos of `seed`; `Err` says what went wrong.
async fn run(seed: u64, careless: bool) -> Result<Run, String> {
    let zk = TestZk::new();
    let log = FencedLog::new(&zk);
    let notices = Notices::default();
    let mut elections = Vec::new();
    for (n, id) in ["s0", "s1", "s2"].into_iter().enumerate() {
        let (transport, events) = zk.connect(SESSION);
        // Node names carry a nonce drawn afresh by default: seeded here,
        // so that a seed's notices (which name nodes) replay too.
        let nonces = seed.wrapping_mul(3).wrapping_add(n as u64);
        let builder = Election::builder(transport, events)
            .path("/scheduler/leader")
            .id(id)
            .configure(move |c| c.nonce_seed(nonces));
        // Subscribed before the join: every notice, the first included.
        let mut heard = builder.notices();
        let election = builder.join().await.map_err(|e| e.to_string())?;
        zk.track(id, &election);
        let (zk_, notices_) = (zk.clone(), Arc::clone(&notices));
        tokio::spawn(async move {
            while let Ok(notice) = heard.recv().await {
                let at = zk_.elapsed();
                if let Ok(mut n) = notices_.lock() {
                    n.push((at, id, notice));
                }
            }
        });
        tokio::spawn(scheduler(election.clone(), log.clone(), id, careless));
        elections.push(election);
    }
    let chaos = zk.chaos(seed);
    tokio::time::sleep(CHAOS).await;
    let faults = chaos.stop();
    let stopped = zk.elapsed();
    tokio::time::sleep(RECOVERY).await;
    let history = zk.history();
    let writes = log.writes();
    for e in &elections {
        e.close().await;
    }
    check_fencing(&writes, &history).map_err(|v| format!("seed {seed}: {v}"))?;
    // A leader is back before each next fault, and after the last one.
    let mut ends: Vec<_> = faults.iter().skip(1).map(|f| f.at).collect();
    ends.push(stopped + RECOVERY);
    for (fault, end) in faults.iter().zip(ends) {
        let led = history
            .iter()
            .any(|t| t.from < end && t.until.is_none_or(|u| u >= end));
        if !led {
            return Err(format!(
                "seed {seed}: no leader by {end:?} after {fault:?}; history {history:?}"
            ));
        }
    }
    let notices = notices.lock().map(|n| n.clone()).unwrap_or_default();
    Ok(Run {
        faults,
        history,
        writes,
        notices,
    })
}

/// Runs one seed on a runtime of its own, in paused time.
fn run_seed(seed: u64, careless: bool) -> Result<Run, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| e.to_string())?
        .block_on(run(seed, careless))
}

fn main() {
    for seed in 0..5 {
        match run_seed(seed, false) {
            Ok(r) => println!(
                "seed {seed}: {} faults, {} terms, {} jobs, fencing held",
                r.faults.len(),
                r.history.len(),
                r.writes.len()
            ),
            Err(e) => println!("{e}"),
        }
    }
    match (0..100).find_map(|seed| run_seed(seed, true).err()) {
        Some(e) => println!("the careless scheduler is caught: {e}"),
        None => println!("the careless scheduler went unnoticed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1,000 seeds on the machine's cores, each run twice: it survives the
    /// chaos, and the second run replays the first exactly (the faults,
    /// every term, every write and every notice, each at its virtual
    /// instant). Each run is one paused-time runtime.
    #[test]
    fn the_scheduler_survives_a_thousand_seeds_of_chaos_and_replays_each_exactly() {
        let threads = 2;
        let failures: Vec<String> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    scope.spawn(move || {
                        (0..1_000u64)
                            .filter(|seed| seed % threads == t)
                            .filter_map(|seed| {
                                let first = run_seed(seed, false);
                                let again = run_seed(seed, false);
                                match (first, again) {
                                    (Ok(a), Ok(b)) if a == b => None,
                                    (Ok(a), Ok(b)) => Some(format!(
                                        "seed {seed} replayed differently: {} and {} notices, \
                                         {} and {} terms",
                                        a.notices.len(),
                                        b.notices.len(),
                                        a.history.len(),
                                        b.history.len()
                                    )),
                                    (Err(e), _) | (_, Err(e)) => Some(e),
                                }
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        assert!(
            failures.is_empty(),
            "{} seeds failed: {failures:#?}",
            failures.len()
        );
    }

    #[test]
    fn another_seed_gives_other_faults_and_another_history() {
        // A seed whose faults moved leadership: its replay is exact (the
        // test above), and the next seed's run is not the same run.
        let (seed, first) = (0..20)
            .map(|seed| (seed, run_seed(seed, false).unwrap()))
            .find(|(_, run)| run.history.len() > 1)
            .unwrap();
        let next = run_seed(seed + 1, false).unwrap();
        assert!(!first.notices.is_empty());
        assert_ne!(first.faults, next.faults);
        assert_ne!(first, next);
    }

    #[test]
    fn the_careless_scheduler_is_caught() {
        let caught = (0..100).find_map(|seed| run_seed(seed, true).err());
        assert!(caught.is_some(), "no seed caught the canary");
    }
}
