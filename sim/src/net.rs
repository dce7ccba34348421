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
//! - a **paused receiver** holds the messages to it until it resumes (its
//!   socket buffers them);
//! - a **slow link** adds latency for a while, which reorders messages across
//!   different links (never within one: each direction is FIFO).
//!
//! A held message keeps its place in its direction's FIFO: every message sent
//! after it waits until it has been delivered ([`Net::verdict`] counts the held
//! messages not yet delivered), whenever the later one would have arrived.
//! Re-timing a held message behind the link's tail is not enough: the tail
//! already counts messages sent after it, and a later message scheduled for the
//! partition's end (or the pause's) would be delivered first — which broke
//! ZooKeeper's FIFO client order in the simulator (a reply at zxid 15
//! after the watch event of zxid 16, mixed seed 98227, pause seed 114649).

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

/// Whether a message reaching the end of its link is new there, or one the
/// link held before (see [`Net::verdict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// It arrives for the first time.
    Fresh,
    /// The link held it and now offers it again.
    Held,
}

/// The messages one direction of a link holds: how many are not yet
/// delivered, and when the last of them is offered again.
#[derive(Debug, Clone, Copy, Default)]
struct Holding {
    pending: u32,
    release: Timestamp,
}

/// One link's state: its FIFO tails, its faults and what it holds.
#[derive(Debug, Clone, Copy, Default)]
struct LinkState {
    /// A partition: until when, and which directions it cuts.
    partition: Option<(Timestamp, Cut)>,
    /// A slow link: until when, and the extra latency.
    slow: Option<(Timestamp, Duration)>,
    link: Link,
    /// What each direction holds: to the server, to the client (watch events,
    /// pongs, closes and replies in one FIFO: a held reply keeps its place
    /// behind earlier watch events).
    holding: [Holding; 2],
}

impl LinkState {
    fn through(&mut self, at: Timestamp, latency: Duration, way: Way) -> Timestamp {
        match way {
            Way::ToServer => self.link.to_server(at, latency),
            Way::ToClient => self.link.to_client(at, latency),
            Way::Reply { overtake } => self.link.reply(at, latency, overtake),
        }
    }

    fn holding(&mut self, way: Way) -> &mut Holding {
        &mut self.holding[usize::from(way != Way::ToServer)]
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

    /// The verdict on a message about to be delivered now on `pid`'s link:
    /// `None` lets it pass; `Some(at)` holds it until `at`, when the world
    /// offers it again as [`Arrival::Held`].
    ///
    /// A message is held while a partition cuts its direction (until just
    /// after the partition ends), while its receiver is paused
    /// (`receiver_paused_until`, until it resumes), and — a fresh one — while
    /// anything sent before it in its direction is still held: then it goes
    /// behind the last of those. Held messages are offered again in the order
    /// they were held, which is the order they were sent, so each direction
    /// stays FIFO through partitions and pauses.
    ///
    /// ```
    /// use std::time::Duration;
    /// use zkelect_core::Timestamp;
    /// use zkelect_sim::net::{Arrival, Cut, Net, Way};
    ///
    /// let ms = Timestamp::from_millis;
    /// let mut net = Net::default();
    /// net.add();
    /// net.partition(0, ms(0), 100, Cut::ToClient);
    /// // An event reaching the cut at 50 ms is held until just after the end.
    /// assert_eq!(net.verdict(0, ms(50), Way::ToClient, Arrival::Fresh, None), Some(ms(101)));
    /// // A reply sent after it that would arrive at 100 ms (the partition is
    /// // over) still waits behind it.
    /// let reply = Way::Reply { overtake: false };
    /// assert_eq!(net.verdict(0, ms(100), reply, Arrival::Fresh, None), Some(ms(101)));
    /// // At 101 ms both pass, in the order they were held.
    /// assert_eq!(net.verdict(0, ms(101), Way::ToClient, Arrival::Held, None), None);
    /// assert_eq!(net.verdict(0, ms(101), reply, Arrival::Held, None), None);
    /// assert_eq!(net.verdict(0, ms(102), reply, Arrival::Fresh, None), None);
    /// # let _ = Duration::ZERO;
    /// ```
    pub fn verdict(
        &mut self,
        pid: usize,
        now: Timestamp,
        way: Way,
        arrival: Arrival,
        receiver_paused_until: Option<Timestamp>,
    ) -> Option<Timestamp> {
        let l = &mut self.links[pid];
        let cut_until = match l.partition {
            Some((until, cut)) if now < until && cut.blocks(way) => {
                Some(until + Duration::from_millis(1))
            }
            _ => None,
        };
        let paused_until = receiver_paused_until.filter(|&t| now < t);
        let h = l.holding(way);
        let behind_held = arrival == Arrival::Fresh && h.pending > 0;
        let not_before = match (cut_until, paused_until) {
            (None, None) if !behind_held => {
                if arrival == Arrival::Held {
                    h.pending = h.pending.saturating_sub(1);
                }
                return None;
            }
            (a, b) => a.max(b).unwrap_or(now),
        };
        if arrival == Arrival::Fresh {
            h.pending += 1;
        }
        // Every message a direction holds is due at one time, `release`, in
        // the order they were held. A fresh message joins them there (and is
        // judged again with them, so its own pause or cut counts then); a held
        // one that is still blocked moves on, and the others at `release`,
        // blocked by the same cut or pause at the same instant, follow it in
        // order. So no held message ever falls behind one sent after it.
        if !behind_held {
            h.release = h.release.max(not_before);
        }
        Some(h.release)
    }

    /// The world will never offer this held message again (its receiver
    /// crashed): later messages no longer wait for it.
    pub fn drop_held(&mut self, pid: usize, way: Way) {
        let h = self.links[pid].holding(way);
        h.pending = h.pending.saturating_sub(1);
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
