//! Real-server test fixtures for zkelect's end-to-end tests.
//!
//! This crate starts **real** Apache ZooKeeper servers (the JVM from Debian's
//! `zookeeper` package) and injects network faults between clients and servers:
//!
//! * [`ZkServer`]: one standalone server (`ZooKeeperServerMain`) on free loopback
//!   ports, with its own config, data dir and log in a temporary directory;
//!   it can be paused (`SIGSTOP`), resumed, killed, stopped and restarted on the
//!   same ports and data dir (sessions survive a restart).
//! * [`ZkEnsemble`]: a quorum of (by default) three `QuorumPeerMain` servers.
//! * [`TestPki`]: a CA and certificates made in the test, for a server with a
//!   TLS client port ([`ZkServerBuilder::tls`]).
//! * [`TransportKind`]: zookeeper-async or zookeeper-client, to run one
//!   scenario over either transport of the `zkelect` crate.
//! * [`foreign`]: real Curator `LeaderLatch` and kazoo `Election`
//!   contenders, each a process of its own that reports its own belief of
//!   leadership (the interop tests' witnesses).
//! * [`Proxy`]: a TCP proxy that can black-hole traffic without closing sockets,
//!   cut connections with an RST, and cut a connection right after the client's
//!   next request reached the server (so that the reply is lost).
//!
//! Nothing is skipped when ZooKeeper or Java is missing: starting a server then
//! fails with [`FixtureError::NotInstalled`], whose message says to run
//! `scripts/test-deps.sh`.
//!
//! # Processes
//!
//! Every JVM is started in its own process group; dropping a [`ZkServer`] (or a
//! [`ZkEnsemble`]) always kills that group with `SIGKILL` (resuming it first if
//! it was paused). In case the test process itself dies without running
//! destructors (a `SIGKILL`, an abort), each JVM is started through
//! `setpriv --pdeathsig KILL` (util-linux) from one long-lived thread, so the
//! kernel kills it when the test process goes away. Every JVM's command line
//! carries `-Dzkelect.fixture=<name>` and its pid is written to
//! `<server dir>/zookeeper.pid`, so a leftover can be found with
//! `pgrep -f zkelect.fixture`.
//!
//! # Timing
//!
//! Servers run with `tickTime=200`, hence session timeouts between 400 ms and
//! 4 s by default (both configurable). On two cores a standalone server serves
//! about 0.4-0.6 s after it is spawned, a three-node ensemble has elected its
//! leader after 1.2-1.9 s, and a new leader is elected 0.3-0.7 s after the old
//! one is killed.
//!
//! # Async tests
//!
//! The server methods block the calling thread (starting a JVM takes a second
//! or two). In `#[tokio::test]`s that also drive ZooKeeper clients, use
//! `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]` so that the
//! client keeps running while the test thread waits for a server, or call the
//! fixture inside `tokio::task::spawn_blocking`. The [`Proxy`] runs on its own
//! runtime thread and works from synchronous and asynchronous tests alike.

#![warn(missing_docs)]

mod error;
mod exit;
pub mod foreign;
mod fourlw;
mod install;
mod ports;
mod process;
mod proxy;
mod server;
mod tls;
pub mod transports;

pub use error::{FixtureError, Result};
pub use exit::assert_exit;
pub use fourlw::{four_letter_word, parse_mntr, ServerMode};
pub use install::{ZkInstall, TEST_DEPS_HINT};
pub use proxy::{ConnectionId, Proxy};
pub use server::{ZkEnsemble, ZkEnsembleBuilder, ZkServer, ZkServerBuilder};
pub use tls::{ClientAuth, TestPki};
pub use transports::TransportKind;
