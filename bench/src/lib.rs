//! Failover benchmarks for zkelect against a real ZooKeeper server, side by
//! side with zookeeper-async's own `LeaderLatch` recipe.
//!
//! The binary `zkelect-bench` is the entry point (`zkelect-bench failover
//! --help`); this library holds its parts so they can be tested:
//!
//! * [`contender`]: the small trait an election implementation plugs in
//!   behind ([`contender::Implementation`] makes [`contender::Contender`]s),
//!   and the [`contender::LeaderBoard`] where contenders report, on one
//!   monotonic clock, the moment they are told they lead;
//! * [`latch`]: zookeeper-async's `LeaderLatch`, polled every 100 µs;
//! * [`zkelect`]: zkelect's `Election` (Predecessor or Parent strategy);
//! * [`failover`]: the rounds (close the leader's session, time the takeover,
//!   count the server's packets with `mntr`);
//! * [`baseline`]: the physical limits on the same server (`exists` round
//!   trip, delete→notification, close→notification);
//! * [`handoff`]: mutex hand-off at W waiters, side by side with the
//!   delete→notification floor and zookeeper-client's `Client::lock`;
//! * [`many`]: N elections on one session: start-up, memory per idle
//!   recipe, packets per failover (zookeeper-client's baseline so far);
//! * [`economy`]: the server's packets per failover, hand-off, re-queue,
//!   start and idle session-minute, per side (zkelect in each takeover mode
//!   over each transport, zookeeper-async's latch, zookeeper-client's lock);
//! * [`mntr`], [`stats`], [`report`], [`criterion`]: counters, order
//!   statistics, the summary tables, and criterion results as a table.

#![warn(missing_docs)]

pub mod baseline;
pub mod contender;
pub mod criterion;
pub mod economy;
pub mod failover;
pub mod handoff;
pub mod hops;
pub mod latch;
pub mod many;
pub mod mntr;
pub mod report;
pub mod stats;
pub mod zkelect;
