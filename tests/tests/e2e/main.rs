//! The end-to-end tests against real ZooKeeper servers (and real Curator and
//! kazoo processes), one module per subject, in one test binary.
//!
//! One binary rather than one per file: each test binary links its own copy
//! of tokio, both transports and the fixture, so 28 of them spent about three
//! minutes of CPU compiling the same code again (`cargo test --timings` on two
//! cores: 183 s for the 28; this one binary takes about 60 s).
//! Nextest still runs every test in a process of its own, and every test
//! starts its own servers on ports of its own, so no test shares state with
//! another. The soak (`tests/soak.rs`) stays a binary of its own: it counts
//! every allocation of its process with dhat's global allocator.
//!
//! Run one subject: `cargo test -p zkelect-tests --test e2e election::`.

#[macro_use]
mod harness;
mod locks;
mod support;

mod acl;
mod clamped_timeout;
mod cli;
mod cli_acl;
mod cli_tls;
mod cli_words;
mod curator_locks;
mod election;
mod fixture;
mod graceful;
mod guarded_write;
mod handle_options;
mod handles;
mod interop;
mod lock_cli;
mod lock_family;
mod members_down;
mod observer;
mod persistent;
mod sasl;
mod sessions;
mod signals;
mod status_watch;
mod sync;
mod tls;
mod zk_client;
mod zombie;
