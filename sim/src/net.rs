//! The network between each client and the server, as a rule per link that
//! gives every message a verdict (in the style of turmoil): pass now, with
//! this latency, through the link's FIFO order; or be held until a partition
//! ends. Pure bookkeeping: the world draws the base latency and schedules the
//! message at the time the verdict names.
//!
//! A link is one client's connection (both directions). Its faults:
//!
//! - a **partition** ([`Cut`]: both ways, or one way) holds messages crossing
//!   it in the cut direction until it ends, as TCP would retransmit them; the
//!   world drops them only if the connection was declared dead meanwhile;
//! - a **slow link** adds latency for a while, which reorders messages across
//!   different links (never within one: each direction is FIFO).

use std::time::Duration;

use zkelect_core::Timestamp;

/// One connection's two directions, each FIFO: a message never overtakes one
/// sent earlier in the same direction, so a watch event the server sent before
/// a reply reaches the client before it — unless the reply is sent with
/// [`Link::reply`]`(…, overtake = true)`, the reordering zookeeper-async shows at
/// its API (replies and watch events travel on different channels there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Link {
    to_server_tail: Timestamp,
    to_client_tail: Timestamp,
    reply_tail: Timestamp,
}

impl Link {
    /// When a message sent to the server now, with this latency, arrives.
    pub fn to_server(&mut self, now: Timestamp, latency: Duration) -> Timestamp {
        self.to_server_tail = (now + latency).max(self.to_server_tail);
        self.to_server_tail
    }

    /// When a message (watch event, ping answer) sent to the client now, with
    /// this latency, arrives.
    pub fn to_client(&mut self, now: Timestamp, latency: Duration) -> Timestamp {
        self.to_client_tail = (now + latency).max(self.to_client_tail);
        self.to_client_tail
    }

    /// When a reply sent to the client now, with this latency, arrives. Replies
    /// never overtake each other; with `overtake` a reply may overtake watch
    /// events sent before it.
    pub fn reply(&mut self, now: Timestamp, latency: Duration, overtake: bool) -> Timestamp {
        let at = if overtake {
            (now + latency).max(self.reply_tail)
        } else {
            // Behind every watch event and every reply sent before it (an
            // earlier reply may have overtaken events and be later than them).
            let at = self.to_client(now, latency).max(self.reply_tail);
            self.to_client_tail = at;
            at
        };
        self.reply_tail = self.reply_tail.max(at);
        at
    }
}

/// Which directions a partition cuts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Nothing crosses.
    Both,
    /// Client → server is cut (the server hears nothing; its events still arrive).
    ToServer,
    /// Server → client is cut.
    ToClient,
}

impl Cut {
    /// Whether a message in this direction is held.
    pub fn blocks(self, way: Way) -> bool {
        match self {
            Cut::Both => true,
            Cut::ToServer => way == Way::ToServer,
            Cut::ToClient => way != Way::ToServer,
        }
    }
}

/// Which way a message crosses a link, and on which of its FIFO channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// A request or ping.
    ToServer,
    /// A watch event, a ping answer, the server closing the connection.
    ToClient,
    /// A reply; with `overtake` it may pass watch events sent before it.
    Reply {
        /// It may overtake earlier watch events (zookeeper-async).
        overtake: bool,
    },
}

/// One link's state: its FIFO tails and its faults.
#[derive(Debug, Clone, Copy, Default)]
struct LinkState {
    /// A partition: until when, and which directions it cuts.
    partition: Option<(Timestamp, Cut)>,
    /// A slow link: until when, and the extra latency.
    slow: Option<(Timestamp, Duration)>,
    link: Link,
}

impl LinkState {
    fn through(&mut self, at: Timestamp, latency: Duration, way: Way) -> Timestamp {
        match way {
            Way::ToServer => self.link.to_server(at, latency),
            Way::ToClient => self.link.to_client(at, latency),
            Way::Reply { overtake } => self.link.reply(at, latency, overtake),
        }
    }
}

/// Every client's link, indexed by process.
#[derive(Debug, Clone, Default)]
pub struct Net {
    links: Vec<LinkState>,
}

impl Net {
    /// Adds a link for the next process.
    pub fn add(&mut self) {
        self.links.push(LinkState::default());
    }

    /// When a message sent now on `pid`'s link, with `base` latency, arrives:
    /// the base plus any slow-link extra, through the link's FIFO order.
    pub fn arrival(&mut self, pid: usize, now: Timestamp, base: Duration, way: Way) -> Timestamp {
        let l = &mut self.links[pid];
        let latency = match l.slow {
            Some((until, extra)) if now < until => base + extra,
            _ => base,
        };
        l.through(now, latency, way)
    }

    /// The verdict on a message about to be delivered now: `None` lets it pass;
    /// `Some(at)` holds it (a partition cuts its direction) until `at`, just
    /// after the partition ends, behind whatever was held before it in its
    /// direction (the FIFO), even if the partition is over by then.
    pub fn held(&mut self, pid: usize, now: Timestamp, way: Way) -> Option<Timestamp> {
        let l = &mut self.links[pid];
        match l.partition {
            Some((until, cut)) if now < until && cut.blocks(way) => {
                let after = until + Duration::from_millis(1);
                // A held reply keeps its place behind earlier watch events.
                let way = match way {
                    Way::Reply { .. } => Way::Reply { overtake: false },
                    other => other,
                };
                Some(l.through(after, Duration::ZERO, way))
            }
            _ => None,
        }
    }

    /// Whether a new connection can be made now: no partition in either
    /// direction (a TCP handshake needs both).
    pub fn open(&self, pid: usize, now: Timestamp) -> bool {
        self.links[pid].partition.is_none_or(|(t, _)| now >= t)
    }

    /// Starts a partition of `ms`; one already on is never cut short (a
    /// message it holds must not be overtaken), and cuts that differ add up to
    /// both ways.
    pub fn partition(&mut self, pid: usize, now: Timestamp, ms: u64, cut: Cut) {
        let until = now + Duration::from_millis(ms);
        let l = &mut self.links[pid];
        l.partition = Some(match l.partition {
            Some((old, old_cut)) if now < old => {
                let cut = if old_cut == cut { cut } else { Cut::Both };
                (old.max(until), cut)
            }
            _ => (until, cut),
        });
    }

    /// Slows the link for `ms` by `extra` (replacing a slowdown already on).
    pub fn slow(&mut self, pid: usize, now: Timestamp, ms: u64, extra: Duration) {
        self.links[pid].slow = Some((now + Duration::from_millis(ms), extra));
    }
}
