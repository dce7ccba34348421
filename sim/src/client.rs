//! The client-library rules the world applies to every simulated process,
//! separated so they can be tested against the model alone.
//!
//! What a real ZooKeeper client does, and so what the world does for each
//! process: it pings and notices silence as its library does ([`Library`]:
//! zookeeper-client drops at the first T/20 tick after 2/5 T without any bytes
//! received; zookeeper-async never drops for silence, only on EOF; the Java
//! client and kazoo after 2/3 T); a dropped connection fails every request in
//! flight with `ConnectionLoss`; it
//! reconnects, and on reconnecting learns whether the server expired the session
//! meanwhile (then it reports `Expired` and opens a new session). The watches of
//! the old connection are gone after a reconnect: zookeeper-async does not set
//! them again, so neither does this model, and the core must re-arm them.

use std::time::Duration;

use zkelect_core::{SessionId, Timestamp};

pub use crate::net::Link;
use crate::zk::ZkModel;

/// The client library's rule: nothing from the server for two thirds of the
/// session timeout means the connection is lost (the real client's read timeout).
pub fn connection_lost(now: Timestamp, last_from_server: Timestamp, timeout: Duration) -> bool {
    now.saturating_since(last_from_server) >= timeout * 2 / 3
}

/// What a client learns when it reconnects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reconnected {
    /// The same session is still alive.
    Same(SessionId),
    /// The server had expired the old session (reported to the application as
    /// `Expired`); a new one was opened.
    Expired {
        /// The new session.
        new: SessionId,
        /// Its negotiated timeout.
        timeout: Duration,
    },
    /// A first session.
    New {
        /// The session.
        session: SessionId,
        /// Its negotiated timeout.
        timeout: Duration,
    },
}

/// Reconnects `session` (if any) to the server at `now`, authenticating as
/// `identity` when a new session is opened. Reconnecting to a live session
/// replaces its connection, which drops the watches set over the old one.
pub fn reconnect(
    zk: &mut ZkModel,
    now: Timestamp,
    session: Option<SessionId>,
    requested: Duration,
    identity: Option<&str>,
) -> Reconnected {
    match session {
        Some(s) if zk.session_alive(s) => {
            zk.connection_closed(s);
            zk.touch(now, s);
            Reconnected::Same(s)
        }
        Some(_) => {
            let (new, timeout) = zk.open_session(now, requested, identity.map(str::to_owned));
            Reconnected::Expired { new, timeout }
        }
        None => {
            let (session, timeout) = zk.open_session(now, requested, identity.map(str::to_owned));
            Reconnected::New { session, timeout }
        }
    }
}

/// How a client library learns the session timeout it reports to the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutSource {
    /// From the session it opened (zookeeper-client, and the Java client).
    Session,
    /// From a handshake of its own on a throw-away connection to every server
    /// in the connect string, the smallest answer (zookeeper-async does not
    /// expose the negotiated value). With one server, the same value.
    Handshake,
}

/// A handshake on a throw-away connection (a ConnectRequest answered by a
/// ConnectResponse): the server opens a session for `requested`, the client
/// reads the negotiated timeout and closes it at once.
pub fn handshake(
    zk: &mut ZkModel,
    now: Timestamp,
    requested: Duration,
    identity: Option<&str>,
) -> Duration {
    let (session, timeout) = zk.open_session(now, requested, identity.map(str::to_owned));
    zk.close_session(session);
    timeout
}

/// The client library a process runs, which decides when it pings and when
/// it declares a silent connection lost (read from each library's source; see
/// the README's "When real clients notice silence").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Library {
    /// zookeeper-client 0.11.2 (reports session ids): a tick every T/20; a
    /// ping when nothing was sent for 3 ticks (at most 10 s) and none is
    /// outstanding; the connection is lost at the first tick at or after the
    /// last bytes received + 8 ticks (2/5 T). Any bytes received (replies,
    /// pongs, watch events) restart the silence clock.
    ZookeeperClient,
    /// zookeeper-async 5.0.0 (does not report session ids): one ping after 2/3 T
    /// with nothing sent and nothing in flight; never drops a connection for
    /// silence, only on EOF or a socket error (the server closing an expired
    /// session's connection, a restart, a dropped connection).
    ZookeeperAsync,
    /// The Java client and kazoo (the foreign models): a ping every third of
    /// the timeout; the read timeout (2/3 T after the last message) is checked
    /// exactly by its own event, and at each ping.
    Java,
}

/// What the client library's timer sees of its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    /// When the connection was made (the ticks count from it).
    pub connected_at: Timestamp,
    /// The last bytes received from the server.
    pub last_recv: Timestamp,
    /// The last message sent to the server (request or ping).
    pub last_sent: Timestamp,
    /// A ping is unanswered.
    pub ping_out: bool,
    /// No request is in flight.
    pub idle: bool,
    /// The session timeout the library times itself by.
    pub timeout: Duration,
}

/// What the client library's timer does at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick {
    /// Declare the connection lost.
    Lost,
    /// Go on: send a ping now or not, and look again at `next`.
    Go {
        /// Send a ping now.
        ping: bool,
        /// When the timer looks next (after `now`).
        next: Timestamp,
    },
}

/// A library's timing for one session timeout, worked out once: the values
/// [`Library::tick`] derives from the timeout on every call (each a few
/// `Duration` multiplications and divisions, and the ticks were a tenth of a
/// run's events), as whole milliseconds where a [`Timestamp`] takes them.
/// [`Library::tick_paced`] with these gives exactly what `tick` gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// The timeout these are for.
    timeout: Duration,
    /// Silence for at least this many ms loses the connection (2/3 T,
    /// rounded up: a whole-ms silence reaches 2/3 T from there on).
    lost_after_ms: u64,
    /// The Java client: a ping every max(T/3, 1 ms), in ms.
    java_every_ms: u64,
    /// zookeeper-client: the tick (max(T/20, 1 ms)) in ns and in whole ms.
    tick_ns: u128,
    tick_ms: u64,
    /// zookeeper-client: eight ticks, in ms.
    eight_ticks_ms: u64,
    /// zookeeper-client: the idle time before a ping (3 ticks, at most 10 s), in ms.
    client_idle_ms: u64,
    /// zookeeper-async: the idle time before a ping (max(2/3 T, 1 ms)), in ms.
    async_idle_ms: u64,
}

/// Whole milliseconds in `d`, as a [`Timestamp`] adds it (truncated).
fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Pace {
    /// The timing of a session with `timeout`.
    pub fn new(timeout: Duration) -> Self {
        let one = Duration::from_millis(1);
        let tick = (timeout / 20).max(one);
        Self {
            timeout,
            lost_after_ms: u64::try_from((timeout * 2 / 3).as_nanos().div_ceil(1_000_000))
                .unwrap_or(u64::MAX),
            java_every_ms: ms((timeout / 3).max(one)),
            tick_ns: tick.as_nanos(),
            tick_ms: ms(tick),
            eight_ticks_ms: ms(tick * 8),
            client_idle_ms: ms((tick * 3).min(Duration::from_secs(10))),
            async_idle_ms: ms((timeout * 2 / 3).max(one)),
        }
    }

    /// The timeout these are for.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

/// `t` plus `ms` milliseconds, as `Timestamp + Duration` (saturating).
fn plus(t: Timestamp, ms: u64) -> Timestamp {
    Timestamp::from_millis(t.as_millis().saturating_add(ms))
}

impl Library {
    /// The library a zkelect candidate runs, by whether its client reports
    /// session ids (the swarm's `Knobs::session_ids`, drawn 7 in 10).
    pub fn for_candidate(session_ids: bool) -> Self {
        if session_ids {
            Library::ZookeeperClient
        } else {
            Library::ZookeeperAsync
        }
    }

    /// [`tick`](Self::tick) with the timing worked out beforehand
    /// (`pace` is [`Pace::new`] of `c.timeout`): the same answer in whole
    /// milliseconds, without a `Duration` operation.
    pub fn tick_paced(self, now: Timestamp, c: &Clock, pace: &Pace) -> Tick {
        debug_assert_eq!(pace.timeout, c.timeout, "a pace for another timeout");
        let silent = now.as_millis().saturating_sub(c.last_recv.as_millis());
        match self {
            Library::Java => {
                if silent >= pace.lost_after_ms {
                    Tick::Lost
                } else {
                    Tick::Go {
                        ping: true,
                        next: plus(now, pace.java_every_ms),
                    }
                }
            }
            Library::ZookeeperClient => {
                // As `tick`: the ticks fall at connected_at + n·tick, n ≥ 1,
                // the product in ns then truncated to ms.
                let at_tick = |x: Timestamp| {
                    let since = x.as_millis().saturating_sub(c.connected_at.as_millis());
                    // Truncation as in `tick` (`n as u32`).
                    let n = since.div_ceil(pace.tick_ms).max(1) as u32;
                    let offset = pace.tick_ns * u128::from(n) / 1_000_000;
                    plus(c.connected_at, u64::try_from(offset).unwrap_or(u64::MAX))
                };
                let lost_at = at_tick(plus(c.last_recv, pace.eight_ticks_ms));
                if now >= lost_at {
                    return Tick::Lost;
                }
                let idle_until = plus(c.last_sent, pace.client_idle_ms);
                let ping = !c.ping_out && now >= idle_until;
                let next = if c.ping_out || ping {
                    lost_at
                } else {
                    lost_at.min(at_tick(idle_until))
                };
                Tick::Go { ping, next }
            }
            Library::ZookeeperAsync => {
                let due = plus(c.last_sent, pace.async_idle_ms);
                if now < due {
                    return Tick::Go {
                        ping: false,
                        next: due,
                    };
                }
                Tick::Go {
                    ping: c.idle && !c.ping_out,
                    next: plus(now, pace.async_idle_ms),
                }
            }
        }
    }

    /// The timer's verdict at `now` (a moment it asked for, or later if the
    /// process was paused).
    pub fn tick(self, now: Timestamp, c: &Clock) -> Tick {
        match self {
            Library::Java => {
                if connection_lost(now, c.last_recv, c.timeout) {
                    Tick::Lost
                } else {
                    let every = (c.timeout / 3).max(Duration::from_millis(1));
                    Tick::Go {
                        ping: true,
                        next: now + every,
                    }
                }
            }
            Library::ZookeeperClient => {
                let tick = (c.timeout / 20).max(Duration::from_millis(1));
                // The ticks fall at connected_at + n·tick, n ≥ 1.
                // In u64: a u128 division was a few percent of a run, and
                // milliseconds since the start of a run fit.
                let tick_ms = u64::try_from(tick.as_millis()).unwrap_or(u64::MAX);
                let at_tick = |x: Timestamp| {
                    let since = x.saturating_since(c.connected_at).as_millis();
                    let n = u64::try_from(since)
                        .unwrap_or(u64::MAX)
                        .div_ceil(tick_ms)
                        .max(1);
                    c.connected_at + tick * n as u32
                };
                let lost_at = at_tick(c.last_recv + tick * 8);
                if now >= lost_at {
                    return Tick::Lost;
                }
                let idle_for = (tick * 3).min(Duration::from_secs(10));
                let ping = !c.ping_out && now >= c.last_sent + idle_for;
                let next = if c.ping_out || ping {
                    lost_at
                } else {
                    lost_at.min(at_tick(c.last_sent + idle_for))
                };
                Tick::Go { ping, next }
            }
            Library::ZookeeperAsync => {
                let idle_for = (c.timeout * 2 / 3).max(Duration::from_millis(1));
                let due = c.last_sent + idle_for;
                if now < due {
                    return Tick::Go {
                        ping: false,
                        next: due,
                    };
                }
                Tick::Go {
                    ping: c.idle && !c.ping_out,
                    next: now + idle_for,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The paced tick is the tick, for every library, any clock and any
        /// timeout (whole milliseconds or not).
        #[test]
        fn paced_tick_is_the_tick(
            timeout_ns in 1_000_000u64..120_000_000_000,
            whole_ms in proptest::bool::ANY,
            connected in 0u64..100_000,
            recv in 0u64..100_000,
            sent in 0u64..100_000,
            later in 0u64..200_000,
            ping_out in proptest::bool::ANY,
            idle in proptest::bool::ANY,
        ) {
            let timeout = Duration::from_nanos(if whole_ms {
                timeout_ns / 1_000_000 * 1_000_000
            } else {
                timeout_ns
            });
            let t = Timestamp::from_millis;
            let clock = Clock {
                connected_at: t(connected),
                last_recv: t(connected + recv),
                last_sent: t(connected + sent),
                ping_out,
                idle,
                timeout,
            };
            let now = t(connected + later);
            let pace = Pace::new(timeout);
            for library in [Library::Java, Library::ZookeeperClient, Library::ZookeeperAsync] {
                proptest::prop_assert_eq!(
                    library.tick_paced(now, &clock, &pace),
                    library.tick(now, &clock)
                );
            }
        }
    }
}
