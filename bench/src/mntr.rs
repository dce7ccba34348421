//! The server's own counters, read with four-letter words.
//!
//! ZooKeeper counts every packet it receives and sends (`srvr`'s `Received:`
//! and `Sent:`, the same counters as `mntr`'s `zk_packets_received` and
//! `zk_packets_sent`), pings and four-letter words included. The bench reads
//! the counters before and after each failover; to attribute the difference
//! to the failover it removes two things that are not failover work:
//!
//! * the bench's own probes. Packet probes use `srvr`, whose reply is small
//!   and so always costs the same packets (measured by
//!   [`Monitor::calibrate`]; one received, one sent on ZooKeeper 3.8), and
//!   the number of probes in a window is known exactly. `mntr` is *not* used
//!   for that: its reply (~16 KiB) is sent in a number of packets that grows
//!   with the length of the metrics' values, 2 or 3 on the same server;
//! * the candidates' pings: every idle session pings every ⅔ of its session
//!   timeout. The failover rounds count a control window before each round
//!   for that (see [`crate::failover`]) and report it next to the raw figure,
//!   never hidden in it.
//!
//! `mntr` serves only for the number of watchers triggered, which probes do
//! not change ([`Monitor::watches_fired`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How often the bench probes the counters while it counts a window (and
/// while it calibrates, so the probes' own packets are measured the same way).
pub const PROBE_EVERY: Duration = Duration::from_millis(10);

/// Metric names whose sums count watchers triggered (ZooKeeper ≥ 3.6 keeps a
/// summary per event type; the `_sum_` is the number of watchers fired).
const WATCH_SUMS: [&str; 4] = [
    "zk_sum_node_created_watch_count",
    "zk_sum_node_deleted_watch_count",
    "zk_sum_node_changed_watch_count",
    "zk_sum_node_children_watch_count",
];

/// One reading of the packet counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// When the reply was complete (the bench's monotonic clock).
    pub at: Instant,
    /// Packets received so far.
    pub received: u64,
    /// Packets sent so far.
    pub sent: u64,
    /// Requests in the server's pipeline.
    pub outstanding: u64,
}

/// Packets, as `(received, sent)`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Packets {
    /// Packets the server received.
    pub received: f64,
    /// Packets the server sent.
    pub sent: f64,
}

/// Reads the counters of one server.
#[derive(Debug, Clone)]
pub struct Monitor {
    addr: SocketAddr,
    timeout: Duration,
    overhead: Packets,
}

impl Monitor {
    /// A monitor for the server at `addr`; call [`Monitor::calibrate`] before
    /// relying on [`Monitor::probe_overhead`].
    pub fn new(addr: SocketAddr) -> Monitor {
        Monitor {
            addr,
            timeout: Duration::from_secs(5),
            overhead: Packets::default(),
        }
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sends a four-letter word and returns the whole reply.
    ///
    /// # Errors
    ///
    /// When the server cannot be reached, does not answer in time, or answers
    /// with something other than UTF-8.
    pub async fn four_letter_word(&self, command: &str) -> Result<String> {
        let exchange = async {
            let mut stream = TcpStream::connect(self.addr).await?;
            stream.set_nodelay(true)?;
            stream.write_all(command.as_bytes()).await?;
            let mut reply = Vec::new();
            stream.read_to_end(&mut reply).await?;
            Ok::<_, std::io::Error>(reply)
        };
        let reply = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| {
                anyhow!(
                    "`{command}` to {}: no reply in {:?}",
                    self.addr,
                    self.timeout
                )
            })?
            .with_context(|| format!("`{command}` to {}", self.addr))?;
        String::from_utf8(reply).with_context(|| format!("`{command}` reply is not UTF-8"))
    }

    /// Reads the packet counters (`srvr`).
    ///
    /// # Errors
    ///
    /// When `srvr` fails or its reply lacks the counters (a server that does
    /// not allow it: set `4lw.commands.whitelist=srvr,mntr`).
    pub async fn sample(&self) -> Result<Sample> {
        let reply = self.four_letter_word("srvr").await?;
        let at = Instant::now();
        let field = |name: &str| -> Result<u64> {
            let value = reply
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .with_context(|| {
                    format!(
                        "`srvr` from {} has no {name:?} (is srvr in 4lw.commands.whitelist?): {:?}",
                        self.addr,
                        reply.lines().next().unwrap_or("")
                    )
                })?
                .trim();
            value
                .parse()
                .with_context(|| format!("`srvr` {name} {value:?} is not a number"))
        };
        Ok(Sample {
            at,
            received: field("Received:")?,
            sent: field("Sent:")?,
            outstanding: field("Outstanding:").unwrap_or(0),
        })
    }

    /// Watchers the server has triggered since it started (sum of `mntr`'s
    /// four watch-count summaries); `None` when the server lacks them
    /// (before ZooKeeper 3.6).
    ///
    /// # Errors
    ///
    /// When `mntr` fails.
    pub async fn watches_fired(&self) -> Result<Option<u64>> {
        let reply = self.four_letter_word("mntr").await?;
        Ok(watches_fired(&zkelect_tests::parse_mntr(&reply)))
    }

    /// Measures the packets one probe adds, on a server with no other
    /// traffic: the median difference of samples [`PROBE_EVERY`] apart (the
    /// median ignores the odd ping of a stray session).
    ///
    /// # Errors
    ///
    /// When `srvr` fails, or the counters go backwards (a restarted server).
    pub async fn calibrate(&mut self) -> Result<Packets> {
        let mut received = Vec::new();
        let mut sent = Vec::new();
        let mut last = self.sample().await?;
        for _ in 0..21 {
            tokio::time::sleep(PROBE_EVERY).await;
            let next = self.sample().await?;
            let (r, s) = delta(&last, &next)?;
            received.push(r as f64);
            sent.push(s as f64);
            last = next;
        }
        let median = |v: &[f64]| crate::stats::Summary::of(v).map_or(0.0, |s| s.median);
        self.overhead = Packets {
            received: median(&received),
            sent: median(&sent),
        };
        Ok(self.overhead)
    }

    /// Packets one probe adds (after [`Monitor::calibrate`]; zero before).
    pub fn probe_overhead(&self) -> Packets {
        self.overhead
    }
}

/// The difference of the packet counters between two samples.
///
/// # Errors
///
/// When a counter went backwards (the server restarted or was reset).
pub fn delta(before: &Sample, after: &Sample) -> Result<(u64, u64)> {
    match (
        after.received.checked_sub(before.received),
        after.sent.checked_sub(before.sent),
    ) {
        (Some(r), Some(s)) => Ok((r, s)),
        _ => bail!("the server's packet counters went backwards (restarted or `srst`?)"),
    }
}

fn watches_fired(map: &BTreeMap<String, String>) -> Option<u64> {
    WATCH_SUMS
        .iter()
        .map(|key| map.get(*key).and_then(|v| v.parse::<u64>().ok()))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_fired_needs_all_four_sums() {
        let mut map: BTreeMap<String, String> = WATCH_SUMS
            .iter()
            .enumerate()
            .map(|(i, k)| ((*k).to_owned(), i.to_string()))
            .collect();
        assert_eq!(watches_fired(&map), Some(6));
        map.remove(WATCH_SUMS[0]);
        assert_eq!(watches_fired(&map), None);
    }
}
