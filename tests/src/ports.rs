//! Free loopback ports for servers that must bind them themselves.

use std::collections::BTreeSet;
use std::hash::{BuildHasher, Hasher};
use std::net::{Ipv4Addr, TcpListener};
use std::sync::{Mutex, PoisonError};

use crate::error::{FixtureError, Result};

/// Ports are drawn below the usual ephemeral range (32768-60999 on Linux) so
/// that outgoing client connections, which take their local port from that
/// range, cannot grab a port between the moment it is picked here and the
/// moment the JVM binds it.
const LOW: u16 = 15_000;
const HIGH: u16 = 32_000;

/// Ports handed out by this process, never handed out twice, so that tests
/// running in parallel threads never race for the same port.
static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// Picks a port on 127.0.0.1 that nothing is bound to right now and that this
/// process has not handed out before.
pub(crate) fn free_port() -> Result<u16> {
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(PoisonError::into_inner);
    // RandomState is seeded from the OS once per process and differs per
    // instance, which is enough to spread parallel test processes apart.
    let state = std::hash::RandomState::new();
    for attempt in 0u64..500 {
        let mut hasher = state.build_hasher();
        hasher.write_u64(attempt);
        hasher.write_u32(std::process::id());
        let span = u64::from(HIGH - LOW);
        let offset = u16::try_from(hasher.finish() % span).unwrap_or(0);
        let port = LOW + offset;
        if handed_out.contains(&port) {
            continue;
        }
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            handed_out.insert(port);
            return Ok(port);
        }
    }
    Err(FixtureError::io(
        "no free loopback port found",
        std::io::Error::new(std::io::ErrorKind::AddrInUse, "500 random ports tried"),
    ))
}
