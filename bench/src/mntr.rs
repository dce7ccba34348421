//! The server's own counters, read with the `mntr` four-letter word.
//!
//! ZooKeeper counts every packet it receives and sends (`zk_packets_received`,
//! `zk_packets_sent`), pings and four-letter words included. The bench reads
//! the counters before and after each failover; to attribute the difference
//! to the failover it removes two things that are not failover work:
//!
//! * the bench's own `mntr` probes: each probe adds a fixed number of packets
//!   (measured by [`Monitor::calibrate`] on an idle server), and the number of
//!   probes in a window is known exactly;
//! * the candidates' pings: every idle session pings every ⅔ of its session
//!   timeout, so N sessions add a steady background whose rate
//!   [`Monitor::background_rate`] measures while the candidates are idle.
//!   Pings are random per round, so that part is an estimate (reported
//!   separately, never hidden in the raw figures).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Metric names whose sums count watchers triggered (ZooKeeper ≥ 3.6 keeps a
/// summary per event type; the `_sum_` is the number of watchers fired).
const WATCH_SUMS: [&str; 4] = [
    "zk_sum_node_created_watch_count",
    "zk_sum_node_deleted_watch_count",
    "zk_sum_node_changed_watch_count",
    "zk_sum_node_children_watch_count",
];

/// One reading of the counters the bench uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// When the reply was complete (the bench's monotonic clock).
    pub at: Instant,
    /// `zk_packets_received`.
    pub received: u64,
    /// `zk_packets_sent`.
    pub sent: u64,
    /// Watchers triggered so far (sum of the four watch-count summaries);
    /// `None` on servers without these metrics.
    pub watches_fired: Option<u64>,
    /// `zk_outstanding_requests`.
    pub outstanding: u64,
}

/// Packets per unit of time or per window, as `(received, sent)`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Packets {
    /// Packets the server received.
    pub received: f64,
    /// Packets the server sent.
    pub sent: f64,
}

/// Reads `mntr` from one server.
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

    /// Reads the counters.
    ///
    /// # Errors
    ///
    /// When `mntr` fails or lacks the packet counters (a server that does not
    /// allow `mntr`: set `4lw.commands.whitelist=mntr,srvr,...`).
    pub async fn sample(&self) -> Result<Sample> {
        let reply = self.four_letter_word("mntr").await?;
        let at = Instant::now();
        let map = zkelect_tests::parse_mntr(&reply);
        let int = |key: &str| -> Result<u64> {
            let value = map.get(key).with_context(|| {
                format!(
                    "`mntr` from {} has no {key} (is `mntr` in 4lw.commands.whitelist?): {}",
                    self.addr,
                    reply.lines().next().unwrap_or("")
                )
            })?;
            value
                .parse()
                .with_context(|| format!("`mntr` {key} = {value:?} is not a number"))
        };
        Ok(Sample {
            at,
            received: int("zk_packets_received")?,
            sent: int("zk_packets_sent")?,
            watches_fired: watches_fired(&map),
            outstanding: int("zk_outstanding_requests").unwrap_or(0),
        })
    }

    /// Measures the packets one `mntr` probe adds, on a server with no other
    /// traffic: the median difference of back-to-back samples (the median
    /// ignores the odd ping of a stray session).
    ///
    /// # Errors
    ///
    /// When `mntr` fails, or the counters go backwards (a restarted server).
    pub async fn calibrate(&mut self) -> Result<Packets> {
        let mut received = Vec::new();
        let mut sent = Vec::new();
        let mut last = self.sample().await?;
        for _ in 0..21 {
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

    /// Measures the background packet rate (per second) over `span`, minus
    /// the probes' own packets: with idle candidates this is their pings.
    ///
    /// # Errors
    ///
    /// When `mntr` fails or the counters go backwards.
    pub async fn background_rate(&self, span: Duration) -> Result<Packets> {
        let first = self.sample().await?;
        tokio::time::sleep(span).await;
        let last = self.sample().await?;
        let (r, s) = delta(&first, &last)?;
        let secs = last.at.duration_since(first.at).as_secs_f64().max(1e-3);
        Ok(Packets {
            received: ((r as f64 - self.overhead.received) / secs).max(0.0),
            sent: ((s as f64 - self.overhead.sent) / secs).max(0.0),
        })
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
