//! The `connect` target: the connect string and the settings of both
//! transports, as they are checked before any traffic.
//!
//! The bytes become a connect string built from the pieces real ones are
//! made of (host names, IPv4 and bracketed IPv6 addresses, ports valid,
//! zero, too large or not numbers, the `tcp://` and `tcp+tls://` schemes,
//! commas, blanks, chroots good and bad, up to 60 servers) or raw text, and
//! the timeouts and delays of [`ZkAsyncOptions`] and [`ZkClientOptions`]
//! (zero, a millisecond, ordinary, 2^31 − 1 ms and past it, `u64::MAX` ms,
//! `Duration::MAX`).
//!
//! [`ConnectString::parse`] and each transport's `validate` must give a
//! value or a typed error, never a panic. A parsed string has at least one
//! server, every host non-empty, every port non-zero, a chroot the server
//! accepts (and not `/`), and prints back to a string that parses to the
//! same value. Settings a transport accepts have a connect string that
//! parses, timeouts within the documented bounds, and a deadline
//! (`now + connect timeout`) that cannot overflow; a refusal is one of the
//! errors that come before any traffic.

use std::time::{Duration, Instant};

use zkelect::zk_client::ZkClientOptions;
use zkelect::{
    ConnectFailure, SessionError, ZkAsyncOptions, CONNECT_TIMEOUT_MAX, RECONNECT_DELAY_MAX,
    SESSION_TIMEOUT_MAX, SESSION_TIMEOUT_MIN,
};
use zkelect_core::config::validate_chroot;
use zkelect_core::connect_string::ConnectString;

use crate::read::Bytes;

const HOSTS: &[&str] = &[
    "zk1",
    "127.0.0.1",
    "localhost",
    "[::1]",
    "::1",
    "[fe80::1%eth0]",
    "zk-2.example.org",
    "",
    " ",
    "[",
    "]",
    "a:b",
    "é",
];

const PORTS: &[&str] = &[
    "", ":2181", ":1", ":0", ":65535", ":65536", ":-1", ":x", "::", ":+1", ":02181",
];

const CHROOTS: &[&str] = &[
    "",
    "/",
    "/apps",
    "/apps/x",
    "/apps//x",
    "/apps/",
    "/.",
    "/a/./b",
    "/zookeeper",
    "/\u{1F600}",
    "/a\u{0}b",
    "//",
    "/a,b",
];

fn duration(b: &mut Bytes<'_>) -> Duration {
    match b.u8() % 10 {
        0 => Duration::ZERO,
        1 => Duration::from_millis(1),
        2 => Duration::from_millis(i32::MAX as u64),
        3 => Duration::from_millis(i32::MAX as u64 + 1),
        4 => Duration::from_millis(u64::MAX),
        5 => Duration::MAX,
        6 => Duration::new(b.u64(), b.u32() % 1_000_000_000),
        _ => Duration::from_millis(u64::from(b.u32() % 100_000)),
    }
}

fn connect_string(b: &mut Bytes<'_>) -> String {
    if b.u8() % 6 == 0 {
        return b.text(80);
    }
    let servers = match b.u8() % 8 {
        0 => 60,
        n => usize::from(n % 4) + 1,
    };
    let mut s = String::new();
    for i in 0..servers {
        if i > 0 {
            s.push_str(b.pick(&[",", ", ", " ,", ",,"]));
        }
        match b.u8() % 5 {
            0 => s.push_str("tcp://"),
            1 => s.push_str("tcp+tls://"),
            _ => {}
        }
        s.push_str(b.pick(HOSTS));
        s.push_str(b.pick(PORTS));
        if b.u8() % 16 == 0 {
            // A chroot in the middle.
            s.push_str(b.pick(CHROOTS));
        }
    }
    match b.u8() % 4 {
        0 => s.push_str(&b.text(12)),
        1 => {}
        _ => s.push_str(b.pick(CHROOTS)),
    }
    s
}

fn check_parsed(hosts: &str, parsed: &ConnectString) {
    assert!(!parsed.servers.is_empty(), "{hosts:?}: no servers");
    for server in &parsed.servers {
        assert!(!server.host.is_empty(), "{hosts:?}: an empty host");
        assert_ne!(server.port, 0, "{hosts:?}: port 0");
    }
    if let Some(chroot) = &parsed.chroot {
        assert_ne!(chroot, "/", "{hosts:?}");
        assert!(
            validate_chroot(chroot).is_ok(),
            "{hosts:?}: chroot {chroot:?}"
        );
    }
    let printed: Vec<String> = parsed.servers.iter().map(ToString::to_string).collect();
    let again = format!(
        "{}{}",
        printed.join(","),
        parsed.chroot.as_deref().unwrap_or("")
    );
    match ConnectString::parse(&again) {
        Ok(back) => assert_eq!(&back, parsed, "{hosts:?} printed as {again:?}"),
        Err(e) => panic!("{hosts:?} printed as {again:?}, which does not parse: {e}"),
    }
}

/// A refusal before any traffic: a setting or the connect string.
fn refused_early(e: &SessionError) -> bool {
    match e {
        SessionError::Config(_) | SessionError::SessionTimeoutTooShort { .. } => true,
        SessionError::Connect { kind, .. } => *kind == ConnectFailure::BadAddress,
        _ => false,
    }
}

/// What any accepted settings promise, whichever transport.
fn check_accepted(hosts: &str, session: Duration, connect: Duration, delay: Duration) {
    assert!(
        ConnectString::parse(hosts).is_ok(),
        "{hosts:?} accepted, yet it does not parse"
    );
    assert!(
        session <= SESSION_TIMEOUT_MAX,
        "session timeout {session:?}"
    );
    assert!(
        !connect.is_zero() && connect <= CONNECT_TIMEOUT_MAX,
        "connect timeout {connect:?}"
    );
    assert!(
        !delay.is_zero() && delay <= RECONNECT_DELAY_MAX,
        "reconnect delay {delay:?}"
    );
    assert!(Instant::now().checked_add(connect).is_some());
}

/// The target: see the module docs.
pub fn run(data: &[u8]) {
    let mut b = Bytes::new(data);
    let hosts = connect_string(&mut b);
    let (session, connect, delay) = (duration(&mut b), duration(&mut b), duration(&mut b));
    let op = b.bool().then(|| duration(&mut b));
    let assume = b.bool().then(|| duration(&mut b));

    if let Ok(parsed) = ConnectString::parse(&hosts) {
        check_parsed(&hosts, &parsed);
    }

    let mut zk_async = ZkAsyncOptions::new(hosts.clone())
        .session_timeout(session)
        .connect_timeout(connect)
        .reconnect_delay(delay);
    if let Some(op) = op {
        zk_async = zk_async.op_timeout(op);
    }
    if let Some(assume) = assume {
        zk_async = zk_async.assume_session_timeout(assume);
    }
    match zk_async.validate() {
        Ok(()) => {
            check_accepted(&hosts, session, connect, delay);
            assert!(
                session >= SESSION_TIMEOUT_MIN,
                "zookeeper-async took {session:?}"
            );
        }
        Err(e) => assert!(refused_early(&e), "zookeeper-async: {e:?}"),
    }

    let mut zk_client = ZkClientOptions::new(hosts.clone())
        .session_timeout(session)
        .connect_timeout(connect)
        .reconnect_delay(delay);
    if let Some(op) = op {
        zk_client = zk_client.op_timeout(op);
    }
    match zk_client.validate() {
        Ok(()) => {
            check_accepted(&hosts, session, connect, delay);
            assert!(!session.is_zero(), "zookeeper-client took a zero timeout");
        }
        Err(e) => assert!(refused_early(&e), "zookeeper-client: {e:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_short_inputs_run() {
        run(&[]);
        run(&[1, 2, 3]);
        run(&[0x33; 90]);
    }
}
