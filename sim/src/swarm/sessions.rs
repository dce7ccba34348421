//! How a library user sets up each zkelect session and each machine on it,
//! as a seed draws it: the core `SessionConfig` (the request window, the
//! close timeout, the request timeout) and how each machine is run
//! (`Machine::election` or `Machine::lock`, its close timeout, whether its
//! session ends with it). Drawn per process from streams of their own
//! (labels 29, 30 and 31), so every other draw of a seed stays put.

use std::time::Duration;

use zkelect_core::{Machine, Rule, SessionConfig, REQUESTS_OUT};

use super::hosting::Hosting;
use crate::rng::SimRng;

/// How long a session's or an election's close waits unless set, as the
/// library's handles default it.
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// The close timeouts a user may give besides the default: none at all
/// (give up at once), short, and long.
const CLOSE_TIMEOUTS: [Duration; 4] = [
    Duration::ZERO,
    Duration::from_millis(500),
    Duration::from_secs(2),
    Duration::from_secs(30),
];

/// The request timeouts a user may set (the transports' `op_timeout`):
/// shorter than a partition or a pause the world draws, so requests really
/// time out while the server may still apply them, up to a few seconds.
const REQUEST_TIMEOUTS: [Duration; 3] = [
    Duration::from_millis(300),
    Duration::from_secs(1),
    Duration::from_secs(3),
];

/// One session's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionSettings {
    /// How many requests may be out at once
    /// ([`SessionConfig::with_requests_out`]).
    pub requests_out: usize,
    /// How long closing the session waits for its machines
    /// ([`SessionConfig::with_close_timeout`]).
    pub close_timeout: Duration,
    /// How long a request may be out before the session answers it
    /// `OperationTimeout` ([`SessionConfig::with_request_timeout`]; `None`:
    /// the negotiated session timeout, the library's default).
    pub request_timeout: Option<Duration>,
}

impl Default for SessionSettings {
    /// What the library's `Session` runs with.
    fn default() -> Self {
        Self {
            requests_out: REQUESTS_OUT,
            close_timeout: CLOSE_TIMEOUT,
            request_timeout: None,
        }
    }
}

impl SessionSettings {
    /// Draws the settings of the session process `pid` hosts: 1 in 4 a
    /// window of 1–3 requests (the rest wait their turn, in order), else
    /// the default 1,000; 1 in 4 a close timeout of 0, 0.5, 2 or 30 s, else
    /// the default 5 s; 1 in 4 a request timeout of 0.3, 1 or 3 s, else the
    /// negotiated session timeout (from a stream of its own, label 29).
    pub fn draw(seed: u64, pid: usize) -> Self {
        let mut rng = SimRng::new(seed ^ (pid as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15), 30);
        let requests_out = if rng.chance(0.25) {
            rng.range(1, 3) as usize
        } else {
            REQUESTS_OUT
        };
        let close_timeout = if rng.chance(0.25) {
            CLOSE_TIMEOUTS[rng.range(0, 3) as usize]
        } else {
            CLOSE_TIMEOUT
        };
        let mut own = SimRng::new(seed ^ (pid as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15), 29);
        let request_timeout = own
            .chance(0.25)
            .then(|| REQUEST_TIMEOUTS[own.range(0, 2) as usize]);
        Self {
            requests_out,
            close_timeout,
            request_timeout,
        }
    }

    /// The core's configuration, with the world's `seed` for the watch
    /// table's keys.
    pub fn config(self, seed: u64) -> SessionConfig {
        let config = SessionConfig::new(seed)
            .with_requests_out(self.requests_out)
            .with_close_timeout(self.close_timeout);
        match self.request_timeout {
            Some(bound) => config.with_request_timeout(bound),
            None => config,
        }
    }
}

/// How one machine is run on its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineSettings {
    /// Run as a lock (`Machine::lock`: it leaves the queue once it has held
    /// and lost the hold), as the library's `Mutex`, `Semaphore` and
    /// `RwLock` handles run one; else as an election's candidate.
    pub lock: bool,
    /// Its close timeout (`None`: as long as the session lives, as a lock's).
    pub close_timeout: Option<Duration>,
    /// Its session closes once it is done, as an election's or an
    /// observation's that made its own session.
    pub ending: bool,
}

impl MachineSettings {
    /// What the library's `Election` runs by default: an election's
    /// candidate with the default close timeout, ending its session when
    /// it is `alone` on it.
    pub fn election(alone: bool) -> Self {
        Self {
            lock: false,
            close_timeout: Some(CLOSE_TIMEOUT),
            ending: alone,
        }
    }

    /// Draws how process `pid` is run: a candidate of a lock's rule as a
    /// lock 3 in 4 (the lock handles' way; else through an `Election` with
    /// that rule); an election's candidate or an observer with a close
    /// timeout of 0, 0.5, 2 or 30 s 1 in 4, else the default 5 s; one
    /// `alone` on its session ends it 1 in 2.
    pub fn draw(seed: u64, pid: usize, rule: Option<Rule>, alone: bool) -> Self {
        let mut rng = SimRng::new(seed ^ (pid as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15), 31);
        let lockable = rule.is_some_and(|r| !matches!(r, Rule::Election { .. }));
        if lockable && rng.chance(0.75) {
            return Self {
                lock: true,
                close_timeout: None,
                ending: false,
            };
        }
        let close_timeout = if rng.chance(0.25) {
            CLOSE_TIMEOUTS[rng.range(0, 3) as usize]
        } else {
            CLOSE_TIMEOUT
        };
        Self {
            lock: false,
            close_timeout: Some(close_timeout),
            ending: alone && rng.chance(0.5),
        }
    }

    /// `machine` set up this way (`lock` is the caller's choice of
    /// constructor).
    pub fn apply(self, mut machine: Machine) -> Machine {
        if let Some(timeout) = self.close_timeout {
            machine = machine.with_close_timeout(timeout);
        }
        if self.ending {
            machine = machine.ending_session();
        }
        machine
    }
}

impl Hosting {
    /// Whether any other machine rides on the session of process `pid`
    /// (a candidate, an observer or a side queue's machine).
    pub fn carries(&self, pid: usize) -> bool {
        self.riders.iter().any(|&(_, host)| host == pid)
            || self.observers.contains(&Some(pid))
            || self
                .queues
                .iter()
                .flat_map(|q| &q.machines)
                .any(|m| m.on == Some(pid))
    }
}
