//! A graceful stop inside the lease, against a real ZooKeeper server.
//!
//! The server freezes (SIGSTOP of its JVM: connections stay open, nothing is
//! answered). Nobody tells the client; only the clock says contact is in
//! doubt. The leader's lease ends two thirds of the session timeout after the
//! last request the server answered, at the latest [`LEASE_MS`] after the
//! freeze, and the watchdog SIGKILLs the command there. So `zkelect run` (and
//! `zkelect lock`) must send SIGTERM a grace before that: the command, which
//! logs its SIGTERM and takes [`WIND_DOWN_MS`] to finish, gets SIGTERM, then
//! exits by itself within `--grace-ms` and before the lease ends — never
//! killed.
//!
//! Both `run` and `lock`, on both transports. And a `--grace-ms` that
//! cannot fit in the lease is refused at start.

use std::time::Duration;

use zkelect_tests::{assert_exit, ZkServer};

use crate::support::{
    mono_ns, ms, run_args, stop_lines, zkelect, Candidate, ChildKind, SESSION_MS,
};

const START: Duration = Duration::from_secs(20);
/// The lease's end at the latest, after the freeze: two thirds of the
/// session timeout after the last answer, which came before the freeze.
const LEASE_MS: f64 = SESSION_MS as f64 * 2.0 / 3.0;
/// The grace asked for: it fits (8/30 of the 4 s session timeout is 1066 ms).
const GRACE_MS: u64 = 900;
/// How long the command takes to finish after SIGTERM.
const WIND_DOWN_MS: u32 = 200;

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("zkelect-graceful-test-")
        .tempdir()
        .expect("a temporary directory")
}

/// Freezes the server under `c`'s running command and checks the stop:
/// SIGTERM, then its own exit within the grace and before the lease's end.
fn frozen_server_stops_the_command_gracefully(server: &ZkServer, c: &Candidate) {
    let run = c.wait_beats(1, 3, START);
    server.pause().expect("freeze the server");
    let frozen = mono_ns();
    let lines = stop_lines(&c.beats, START, |l| l.len() >= 2);
    server.resume().expect("thaw the server");
    let got: Vec<&str> = lines.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(
        got,
        ["term", "done"],
        "the command got SIGTERM and finished\n{}",
        c.log_text()
    );
    let (term, done) = (lines[0].1, lines[1].1);
    println!(
        "{}: SIGTERM {:.0} ms after the freeze, the command done {:.0} ms later; \
         the lease ends {LEASE_MS:.0} ms after the freeze at the latest",
        c.label,
        ms(frozen, term),
        ms(term, done)
    );
    assert!(term > frozen && term > run.start);
    assert!(
        ms(term, done) < GRACE_MS as f64,
        "the command finished within the grace"
    );
    assert!(
        ms(frozen, done) < LEASE_MS,
        "the command finished {:.0} ms after the freeze, after the lease's end\n{}",
        ms(frozen, done),
        c.log_text()
    );
    let log = c.log_text();
    assert!(
        !log.contains("still running: SIGKILL")
            && !log.contains("killed by SIGKILL")
            && !log.contains("lease expired"),
        "nothing was killed:\n{log}"
    );
}

#[test]
fn under_a_frozen_server_the_command_gets_sigterm_and_finishes_before_the_lease_ends() {
    let server = ZkServer::start().expect("a server");
    let zk = server.connect_string();
    let dir = tempdir();
    let grace = GRACE_MS.to_string();
    for transport in ["zookeeper-async", "zookeeper-client"] {
        let with = |verb: &str, path: &str, id: &str| {
            let mut args = run_args(&zk, path, id);
            args[0] = verb.into();
            args.extend(["--grace-ms", &grace, "--transport", transport].map(String::from));
            args
        };
        let args = with("run", &format!("/graceful/{transport}/run"), "a");
        let mut leader = Candidate::spawn(
            dir.path(),
            &format!("run-{transport}"),
            &args,
            ChildKind::Graceful(WIND_DOWN_MS),
        );
        frozen_server_stops_the_command_gracefully(&server, &leader);
        // Thawed within the session: it leads on, and starts the command again.
        leader.wait_run(2, START);
        leader.signal(nix::sys::signal::Signal::SIGTERM);
        let status = leader.wait_exit(START);
        assert_exit("run", status.code(), 0, &leader.log_text(), &[]);

        // `zkelect lock` the same; its command ran once, and was stopped: 123.
        let args = with("lock", &format!("/graceful/{transport}/lock"), "l");
        let mut holder = Candidate::spawn(
            dir.path(),
            &format!("lock-{transport}"),
            &args,
            ChildKind::Graceful(WIND_DOWN_MS),
        );
        frozen_server_stops_the_command_gracefully(&server, &holder);
        let status = holder.wait_exit(START);
        assert_exit(
            "lock",
            status.code(),
            123,
            &holder.log_text(),
            &["contact with the server was in doubt"],
        );
        assert_eq!(holder.runs().len(), 1, "lock runs its command once");
    }
}

#[test]
fn a_grace_that_cannot_fit_in_the_lease_is_refused_at_start() {
    // Nothing listens there: the refusal comes before any connection.
    let nowhere = format!("127.0.0.1:{}", crate::support::closed_port());
    for (verb, want) in [("run", 3), ("lock", 125)] {
        let mut args = run_args(&nowhere, "/graceful/refused", "r");
        args[0] = verb.into();
        args.extend(["--grace-ms", "1500", "--", "true"].map(String::from));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = zkelect(&refs, START);
        assert_exit(
            verb,
            out.code(),
            want,
            &out.stderr,
            &[
                "--grace-ms 1500 does not fit in the lease",
                "--session-timeout 4000",
                "1066 ms",
                "5625 ms or more",
            ],
        );
        assert!(out.took < Duration::from_secs(2), "{:?}", out.took);
    }
    // With the session-aware policy (a lease of nine tenths: 2000 ms fit)
    // it is taken, and only the unreachable server stops it (exit 4).
    let mut args = run_args(&nowhere, "/graceful/refused", "r");
    args.extend(
        [
            "--policy",
            "session-aware",
            "--grace-ms",
            "1500",
            "--connect-timeout",
            "300",
            "--",
            "true",
        ]
        .map(String::from),
    );
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = zkelect(&refs, START);
    assert_exit(
        "run --policy session-aware",
        out.code(),
        4,
        &out.stderr,
        &[],
    );
}
