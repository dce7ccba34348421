//! A deterministic test kit for your own service: an in-memory ZooKeeper
//! with faults you trigger, seeded chaos, and checkers, all under
//! `#[tokio::test(start_paused = true)]` (feature `testkit`).
//!
//! It lives in this crate, as a feature next to the [`memory`](crate::memory)
//! transport, rather than in a crate of its own: the faults have to reach
//! inside the memory transport's clients (their connections, event queues
//! and in-flight requests), and the server is the simulator's ZooKeeper model
//! (`zkelect_sim::zk::ZkModel`), the one every simulated run of zkelect is
//! checked against. A separate crate would need all of that as public API.
//!
//! [`TestZk`] plays Curator's `TestingServer` and `KillSession`, without
//! a JVM and without timing: every fault happens at a virtual instant, and
//! [`TestZk::chaos`] draws them from a seeded stream, so a failing seed
//! replays exactly.
//!
//! | fault | what a real server and client would do |
//! |---|---|
//! | [`expire_session`](TestZk::expire_session) | the server ends the session: its ephemerals go; the client hears `Expired`, then opens a new session |
//! | [`drop_connection`](TestZk::drop_connection) | the client's next request is in flight when the connection drops: applied or not, it is answered `ConnectionLoss`; `Disconnected`, then `Connected` to the same session, watches lost |
//! | [`partition`](TestZk::partition) | messages are held, not lost (TCP): a healed partition delivers them late; after 2/3 of the timeout the client reports `Disconnected`; if it outlasts the timeout the server expires the session |
//! | [`pause_events`](TestZk::pause_events) | the client's event thread stalls: session and watch events are delivered at the end, replies are not held |
//! | [`restart`](TestZk::restart) | every connection drops; the tree and the sessions survive (a standalone server reloads them, timers restarted); every watch is lost; clients reconnect when it is back |
//! | [`delete`](TestZk::delete) | an operator's `delete` (`zkCli.sh delete`) |
//! | [`set_session_timeouts`](TestZk::set_session_timeouts) | `minSessionTimeout` / `maxSessionTimeout`: new sessions are clamped into them |
//! | [`lag_watches`](TestZk::lag_watches) | the client's watch events arrive late, behind the replies |
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), zkelect::ElectionError> {
//! use std::time::Duration;
//! use zkelect::testkit::TestZk;
//! use zkelect::Election;
//!
//! let zk = TestZk::new();
//! let (transport, events) = zk.connect(Duration::from_secs(2));
//! let client = transport.client();
//! let election = Election::builder(transport, events).path("/svc/leader").id("a").join().await?;
//! zk.track("a", &election);
//! let first = election.wait_leader().await?;
//! zk.expire_session(client);
//! tokio::time::sleep(Duration::from_secs(1)).await;
//! let second = election.wait_leader().await?; // a new session, a new node, a new token
//! assert!(second > first);
//! assert_eq!(zk.history().len(), 2);
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use zkelect_core::{Acl, CreateMode, FencingToken, Request, Role, Stat, Timestamp, ZkCode};
use zkelect_sim::rng::SimRng;
use zkelect_sim::timeline::{MarkKind, Recorder};

pub use crate::memory::RequestFate;
use crate::memory::{MemoryServer, MemoryTransport, ServerConfig};
use crate::{Election, EventStream};

/// One fault, as [`TestZk`] applies it and [`TestZk::faults`] records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The server expired the client's session.
    Expire {
        /// Client index.
        client: usize,
    },
    /// The client's connection dropped with its next request in flight.
    DropConnection {
        /// Client index.
        client: usize,
        /// Whether that request was applied.
        in_flight: RequestFate,
    },
    /// The client was cut off for `ms` milliseconds.
    Partition {
        /// Client index.
        client: usize,
        /// How long.
        ms: u64,
    },
    /// The client's event delivery stalled for `ms` milliseconds.
    PauseEvents {
        /// Client index.
        client: usize,
        /// How long.
        ms: u64,
    },
    /// The client's watch events lag `ms` milliseconds behind (0 ends it).
    LagWatches {
        /// Client index.
        client: usize,
        /// How long.
        ms: u64,
    },
    /// The server restarted, down for `ms` milliseconds.
    Restart {
        /// How long it was down.
        ms: u64,
    },
}

/// A fault and when it happened (virtual time since the [`TestZk`] was made).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FaultRecord {
    /// When.
    pub at: Duration,
    /// What.
    pub fault: Fault,
}

/// One node of [`TestZk::tree`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Znode {
    /// Its data.
    pub data: Vec<u8>,
    /// Its stat (`czxid`, `ephemeralOwner`, versions, …).
    pub stat: Stat,
}

/// One term of one tracked candidate: it led with `token` from `from` until
/// `until` (`None`: still leading), by its own account (its `Role`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Term {
    /// The name given to [`TestZk::track`].
    pub who: String,
    /// The fencing token of the term.
    pub token: FencingToken,
    /// When it became leader.
    pub from: Duration,
    /// When it stopped leading (suspended, demoted, closed), if it did.
    pub until: Option<Duration>,
}

/// How [`TestZk::chaos_with`] draws faults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChaosConfig {
    /// Which clients faults may hit (default: every client connected when
    /// chaos starts).
    pub clients: Option<Vec<usize>>,
    /// The quiet time between two faults, drawn in this range.
    pub gap: (Duration, Duration),
    /// The longest partition, pause, lag or downtime.
    pub max_duration: Duration,
    /// Include forced expiry ([`TestZk::expire_session`]). A forced expiry
    /// is an operator's act (like Curator's `KillSession`): a leader learns
    /// of it only with the event, so a resource without fencing can see a
    /// late write from it.
    pub expiry: bool,
}

impl Default for ChaosConfig {
    fn default() -> Self {
        Self {
            clients: None,
            gap: (Duration::from_secs(4), Duration::from_secs(6)),
            max_duration: Duration::from_secs(3),
            expiry: true,
        }
    }
}

struct Log {
    epoch: Instant,
    faults: Vec<FaultRecord>,
    terms: Vec<Term>,
    /// Every role change of every tracked candidate, for the picture.
    roles: Vec<(Duration, String, Role)>,
}

/// An in-memory ZooKeeper with faults, for tests of your own service. See
/// the [module docs](self).
#[derive(Clone)]
pub struct TestZk {
    server: MemoryServer,
    log: Arc<Mutex<Log>>,
}

impl std::fmt::Debug for TestZk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestZk").finish_non_exhaustive()
    }
}

impl Default for TestZk {
    fn default() -> Self {
        Self::new()
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl TestZk {
    /// A server with the default [`ServerConfig`] (sessions of 400 ms to 4 s).
    pub fn new() -> Self {
        Self::with_config(ServerConfig::default())
    }

    /// A server with these settings.
    pub fn with_config(config: ServerConfig) -> Self {
        Self {
            server: MemoryServer::with_config(config),
            log: Arc::new(Mutex::new(Log {
                epoch: Instant::now(),
                faults: Vec::new(),
                terms: Vec::new(),
                roles: Vec::new(),
            })),
        }
    }

    /// The underlying server (`data`, `children`).
    pub fn server(&self) -> &MemoryServer {
        &self.server
    }

    /// A new client: its transport (whose [`client`](MemoryTransport::client)
    /// index the faults take) and its events, starting with `Connected`.
    pub fn connect(&self, session_timeout: Duration) -> (MemoryTransport, EventStream) {
        self.server.connect(session_timeout)
    }

    fn since(&self) -> Duration {
        self.log
            .lock()
            .map(|l| Instant::now().saturating_duration_since(l.epoch))
            .unwrap_or_default()
    }

    /// Applies `fault` now and records it.
    pub fn inject(&self, fault: Fault) {
        let at = self.since();
        self.server.with(|s, now| match fault {
            Fault::Expire { client } => s.fault_expire(client, now),
            Fault::DropConnection { client, in_flight } => {
                s.fault_drop(client, Some(in_flight), now);
            }
            Fault::Partition { client, ms } => {
                s.fault_partition(client, Duration::from_millis(ms), now);
            }
            Fault::PauseEvents { client, ms } => {
                s.fault_pause(client, Duration::from_millis(ms), now);
            }
            Fault::LagWatches { client, ms } => {
                s.fault_watch_lag(client, Duration::from_millis(ms));
            }
            Fault::Restart { ms } => s.fault_restart(Duration::from_millis(ms), now),
        });
        if let Ok(mut l) = self.log.lock() {
            l.faults.push(FaultRecord { at, fault });
        }
    }

    /// Expires the client's session on the server, as Curator's `KillSession`.
    pub fn expire_session(&self, client: usize) {
        self.inject(Fault::Expire { client });
    }

    /// Drops the client's connection while its next request is in flight;
    /// the server applies that request or not, as `in_flight` says.
    pub fn drop_connection(&self, client: usize, in_flight: RequestFate) {
        self.inject(Fault::DropConnection { client, in_flight });
    }

    /// Cuts the client off for `duration`; messages wait, as on TCP.
    pub fn partition(&self, client: usize, duration: Duration) {
        self.inject(Fault::Partition {
            client,
            ms: ms(duration),
        });
    }

    /// Holds the client's events (session and watch) for `duration`.
    pub fn pause_events(&self, client: usize, duration: Duration) {
        self.inject(Fault::PauseEvents {
            client,
            ms: ms(duration),
        });
    }

    /// Delays each of the client's watch events by `lag` from now on
    /// (`Duration::ZERO` ends it).
    pub fn lag_watches(&self, client: usize, lag: Duration) {
        self.inject(Fault::LagWatches {
            client,
            ms: ms(lag),
        });
    }

    /// Restarts the server, down for `downtime`.
    pub fn restart(&self, downtime: Duration) {
        self.inject(Fault::Restart { ms: ms(downtime) });
    }

    /// Sets `minSessionTimeout` and `maxSessionTimeout`, for sessions opened
    /// from now on (a restart with a new config leaves live sessions as they
    /// were negotiated).
    pub fn set_session_timeouts(&self, min: Duration, max: Duration) {
        self.server.with(|s, _| s.set_session_bounds(min, max));
    }

    /// Deletes a node as an operator would (any version).
    pub fn delete(&self, path: &str) -> Result<(), ZkCode> {
        let request = Request::Delete {
            path: path.to_owned(),
            version: None,
        };
        self.server
            .with(|s, now| s.operator(&request, now).map(|_| ()))
            .unwrap_or(Err(ZkCode::ConnectionLoss))
    }

    /// Creates a persistent node as an operator would.
    pub fn create(&self, path: &str, data: &[u8]) -> Result<(), ZkCode> {
        let request = Request::Create {
            path: path.to_owned(),
            data: data.to_vec(),
            mode: CreateMode::Persistent,
            acl: Acl::Open,
        };
        self.server
            .with(|s, now| s.operator(&request, now).map(|_| ()))
            .unwrap_or(Err(ZkCode::ConnectionLoss))
    }

    /// Ends every partition, pause and lag, and brings the server up.
    pub fn heal(&self) {
        self.server.with(|s, now| s.heal(now));
        // Requests held by a partition go through now, not at its old end.
        self.server.inner.healed.notify_waiters();
    }

    /// The whole tree right now, by path (the root included).
    pub fn tree(&self) -> BTreeMap<String, Znode> {
        let mut out = BTreeMap::new();
        if let Some(s) = self.server.lock() {
            let mut stack = vec!["/".to_owned()];
            while let Some(path) = stack.pop() {
                let (Some(data), Some(stat)) = (s.model.data(&path), s.model.stat(&path)) else {
                    continue;
                };
                for child in s.model.children(&path) {
                    let sep = if path == "/" { "" } else { "/" };
                    stack.push(format!("{path}{sep}{child}"));
                }
                out.insert(
                    path,
                    Znode {
                        data: data.to_vec(),
                        stat,
                    },
                );
            }
        }
        out
    }

    /// Records the terms of `election` under the name `who` (see
    /// [`history`](Self::history)). Call it right after joining.
    ///
    /// The role it has now is recorded before this returns, so a term that
    /// is already running is in the history however soon it ends; the
    /// changes after it are recorded by a task.
    pub fn track(&self, who: impl Into<String>, election: &Election) {
        let who = who.into();
        let log = self.log.clone();
        let mut roles = election.changes();
        record_role(&log, &who, *roles.borrow_and_update());
        tokio::spawn(async move {
            while roles.changed().await.is_ok() {
                let role = *roles.borrow_and_update();
                record_role(&log, &who, role);
            }
        });
    }

    /// Every term of every tracked candidate so far, in the order they began.
    pub fn history(&self) -> Vec<Term> {
        self.log.lock().map(|l| l.terms.clone()).unwrap_or_default()
    }

    /// The history so far as a picture, a standalone SVG document: one lane
    /// per tracked candidate (by the name given to [`track`](Self::track)),
    /// each term a bar labelled with its fencing token, each suspension a
    /// bar of its own, and every fault a mark on the shared time axis. Write
    /// it to a file when a test fails, and open it in a browser.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), zkelect::ElectionError> {
    /// use std::time::Duration;
    /// use zkelect::testkit::{Fault, TestZk};
    /// use zkelect::Election;
    ///
    /// let zk = TestZk::new();
    /// let (transport, events) = zk.connect(Duration::from_secs(6));
    /// let a = Election::builder(transport, events).path("/svc").id("a").start().await?;
    /// zk.track("a", &a);
    /// a.wait_leader().await?;
    /// zk.inject(Fault::Partition { client: 0, ms: 3_000 });
    /// tokio::time::sleep(Duration::from_secs(10)).await;
    /// let svg = zk.timeline_svg();
    /// assert!(svg.contains(r#"<g class="lane" data-lane="a">"#));
    /// assert!(svg.contains(r#"class="suspended""#) && svg.contains(r#"class="fault""#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn timeline_svg(&self) -> String {
        let Ok(log) = self.log.lock() else {
            return Recorder::default().timeline("a poisoned history").to_svg();
        };
        let millis = |d: Duration| Timestamp::from_millis(d.as_millis() as u64);
        let mut recorder = Recorder::default();
        let mut lanes: Vec<&str> = Vec::new();
        for (at, who, role) in &log.roles {
            let lane = match lanes.iter().position(|w| w == who) {
                Some(lane) => lane,
                None => {
                    lanes.push(who);
                    recorder.name(lanes.len() - 1, who.clone());
                    lanes.len() - 1
                }
            };
            recorder.role(millis(*at), lane, *role);
        }
        for fault in &log.faults {
            recorder.mark(
                millis(fault.at),
                None,
                MarkKind::Fault,
                format!("{:?}", fault.fault),
            );
        }
        // The picture runs to now, not to the last change.
        let now = millis(Instant::now().saturating_duration_since(log.epoch));
        recorder.mark_end(now);
        recorder.timeline("TestZk history").to_svg()
    }

    /// Every fault so far, in order.
    pub fn faults(&self) -> Vec<FaultRecord> {
        self.log
            .lock()
            .map(|l| l.faults.clone())
            .unwrap_or_default()
    }

    /// Virtual time since this server was made, the clock of
    /// [`history`](Self::history), [`faults`](Self::faults) and [`FencedLog`].
    pub fn elapsed(&self) -> Duration {
        self.since()
    }

    /// Starts injecting faults drawn from `seed` with the default
    /// [`ChaosConfig`], until [`Chaos::stop`].
    pub fn chaos(&self, seed: u64) -> Chaos {
        self.chaos_with(seed, ChaosConfig::default())
    }

    /// Starts injecting faults drawn from `seed`, until [`Chaos::stop`]. The
    /// same seed gives the same faults at the same virtual instants.
    pub fn chaos_with(&self, seed: u64, config: ChaosConfig) -> Chaos {
        let clients = config.clients.clone().unwrap_or_else(|| {
            self.server
                .lock()
                .map(|s| {
                    (0..s.client_count())
                        .filter(|c| s.client_live(*c))
                        .collect()
                })
                .unwrap_or_default()
        });
        let zk = self.clone();
        let task = tokio::spawn(async move {
            // A label of its own, so the chaos stream is not the simulator's.
            let mut rng = SimRng::new(seed, 0x7e57_c4a0);
            if clients.is_empty() {
                return;
            }
            let max = ms(config.max_duration).max(1);
            loop {
                let gap = rng.range(ms(config.gap.0), ms(config.gap.1));
                tokio::time::sleep(Duration::from_millis(gap)).await;
                let client =
                    clients[usize::try_from(rng.range(0, clients.len() as u64 - 1)).unwrap_or(0)];
                let kinds = if config.expiry { 6 } else { 5 };
                let fault = match rng.range(0, kinds - 1) {
                    0 => Fault::Partition {
                        client,
                        ms: rng.range(100, max),
                    },
                    1 => Fault::DropConnection {
                        client,
                        in_flight: if rng.chance(0.5) {
                            RequestFate::Applied
                        } else {
                            RequestFate::NotApplied
                        },
                    },
                    2 => Fault::Restart {
                        ms: rng.range(50, max),
                    },
                    3 => Fault::PauseEvents {
                        client,
                        ms: rng.range(50, max),
                    },
                    4 => Fault::LagWatches {
                        client,
                        ms: rng.range(0, max / 4),
                    },
                    _ => Fault::Expire { client },
                };
                zk.inject(fault);
            }
        });
        Chaos {
            zk: self.clone(),
            task,
        }
    }
}

/// Running chaos; dropping it stops the faults too (but heals nothing).
#[derive(Debug)]
pub struct Chaos {
    zk: TestZk,
    task: JoinHandle<()>,
}

impl Chaos {
    /// Stops drawing faults, heals every partition, pause, lag and the
    /// server, and returns the faults injected.
    pub fn stop(self) -> Vec<FaultRecord> {
        self.task.abort();
        self.zk.heal();
        self.zk.faults()
    }
}

impl Drop for Chaos {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One write a [`FencedLog`] accepted.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Write {
    /// When (on the [`TestZk::elapsed`] clock).
    pub at: Duration,
    /// The fencing token the writer gave.
    pub token: FencingToken,
    /// What was written.
    pub entry: String,
}

/// A stand-in for your own fenced resource: an append-only log that keeps
/// each write's token and time. It accepts every write on purpose, as a
/// careless resource would, so that [`check_fencing`] sees what a deposed
/// leader managed to write.
#[derive(Debug, Clone)]
pub struct FencedLog {
    zk: TestZk,
    writes: Arc<Mutex<Vec<Write>>>,
}

impl FencedLog {
    /// An empty log on the clock of `zk`.
    pub fn new(zk: &TestZk) -> Self {
        Self {
            zk: zk.clone(),
            writes: Arc::default(),
        }
    }

    /// Appends `entry`, written with `token`.
    pub fn append(&self, token: FencingToken, entry: impl Into<String>) {
        let at = self.zk.elapsed();
        if let Ok(mut w) = self.writes.lock() {
            w.push(Write {
                at,
                token,
                entry: entry.into(),
            });
        }
    }

    /// Every write so far, in order.
    pub fn writes(&self) -> Vec<Write> {
        self.writes.lock().map(|w| w.clone()).unwrap_or_default()
    }
}

/// A write from a deposed holder, found by [`check_fencing`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FencingViolation {
    /// The write came after a newer term had begun.
    #[error("a write with token {} at {:?} came after {} began leading with token {} at {:?}", write.token, write.at, newer.who, newer.token, newer.from)]
    Deposed {
        /// The write.
        write: Write,
        /// The newer term.
        newer: Term,
    },
    /// No tracked term with the write's token covered the write's moment:
    /// its writer was suspended or deposed by its own account.
    #[error("a write with token {} at {:?} came while no term with that token was leading", write.token, write.at)]
    NotLeading {
        /// The write.
        write: Write,
    },
    /// The write's token is lower than an earlier write's.
    #[error("a write with token {} at {:?} follows one with token {}", write.token, write.at, earlier)]
    OutOfOrder {
        /// The write.
        write: Write,
        /// The higher token written before it.
        earlier: FencingToken,
    },
}

/// Checks that `writes` (a resource's accepted writes, in order) never
/// took a write from a deposed holder: none with a token lower than one
/// written before it, none made once a term with a higher token had begun,
/// and none made outside every term with its token (the writer was
/// suspended or demoted, by its own account). `history` is
/// [`TestZk::history`]: track every writer.
pub fn check_fencing(writes: &[Write], history: &[Term]) -> Result<(), FencingViolation> {
    let mut highest: Option<FencingToken> = None;
    for w in writes {
        if let Some(h) = highest.filter(|h| w.token < *h) {
            return Err(FencingViolation::OutOfOrder {
                write: w.clone(),
                earlier: h,
            });
        }
        highest = Some(highest.map_or(w.token, |h| h.max(w.token)));
        let covered = history
            .iter()
            .any(|t| t.token == w.token && t.from <= w.at && t.until.is_none_or(|u| w.at <= u));
        if !covered {
            return Err(FencingViolation::NotLeading { write: w.clone() });
        }
        if let Some(newer) = history.iter().find(|t| t.token > w.token && t.from < w.at) {
            return Err(FencingViolation::Deposed {
                write: w.clone(),
                newer: newer.clone(),
            });
        }
    }
    Ok(())
}

/// Opens, continues or closes `who`'s term in `log` for its role now.
fn record_role(log: &Mutex<Log>, who: &str, role: Role) {
    let Ok(mut l) = log.lock() else {
        return;
    };
    let at = Instant::now().saturating_duration_since(l.epoch);
    l.roles.push((at, who.to_owned(), role));
    let open = l
        .terms
        .iter_mut()
        .rev()
        .find(|t| t.who == who && t.until.is_none());
    match (open, role) {
        (Some(t), Role::Leader(token)) if t.token == token => {}
        (open, Role::Leader(token)) => {
            if let Some(t) = open {
                t.until = Some(at);
            }
            l.terms.push(Term {
                who: who.to_owned(),
                token,
                from: at,
                until: None,
            });
        }
        (Some(t), _) => t.until = Some(at),
        (None, _) => {}
    }
}
