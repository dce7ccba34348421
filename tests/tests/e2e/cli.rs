//! End-to-end tests of the `zkelect` command against real ZooKeeper
//! servers: `zkelect run` candidates supervising a child that records itself,
//! `status --json`, `revoke`, and every kind of bad input with its exit code
//! and message.
//!
//! The harness (building the binary, the heartbeat child, its clock, the
//! process guards) is in `support/mod.rs`; read its docs first.

use std::time::Duration;

use nix::sys::signal::Signal;
use zkelect_tests::{assert_exit, Proxy, ZkServer};

use crate::support::{
    assert_one_at_a_time, closed_port, mono_ns, ms, queue, queue_ids, run_args, wait_for, zkelect,
    Candidate, ChildKind, Observer, SESSION_MS,
};

/// Exit codes of `zkelect` (cli/src/exit.rs, `zkelect --help`, the README).
/// 6 (a simulator violation) is tested in cli/tests/sim_and_demo.rs.
const USAGE: i32 = 2;
const CONFIG: i32 = 3;
const UNREACHABLE: i32 = 4;
const AUTH: i32 = 5;
const SPAWN: i32 = 7;
const LEAD_TIMEOUT: i32 = 9;
const UNKNOWN_ID: i32 = 10;
const COMMAND_FAILED: i32 = 11;
const NAMESPACE: i32 = 12;
/// `zkelect lock`'s code for its own failures before the command ran.
const LOCK_FAILED: i32 = 125;

/// Ample bound for anything that needs a session to expire first.
const TAKEOVER: Duration = Duration::from_secs(20);
/// Bound for a process that starts and joins (debug binaries on 2 cores).
const START: Duration = Duration::from_secs(20);

fn start_server() -> ZkServer {
    ZkServer::start().unwrap_or_else(|e| panic!("cannot start ZooKeeper: {e}"))
}

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("zkelect-cli-test-")
        .tempdir()
        .expect("a temporary directory")
}

fn logs(candidates: &[&Candidate]) -> String {
    candidates
        .iter()
        .map(|c| c.log_text())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits until the queue holds exactly `ids`, in that order.
fn wait_queue(connect: &str, path: &str, ids: &[&str], logs: impl FnOnce() -> String) {
    let last = std::cell::RefCell::new(Vec::new());
    wait_for(
        &format!("the queue to be {ids:?}"),
        START,
        Duration::from_millis(50),
        || {
            *last.borrow_mut() = queue_ids(connect, path);
            (*last.borrow() == ids).then_some(())
        },
        || format!("{}\nlast queue seen: {:?}", logs(), last.borrow()),
    );
}

/// Two `zkelect run` processes with a child that records itself:
/// never both children alive at once; SIGKILL of the leading zkelect starts
/// the other's child (once the session expired); the token grows; SIGTERM to
/// the leader stops its child, deletes its node and exits 0.
#[test]
fn run_hands_over_on_sigkill_and_sigterm_one_child_at_a_time_with_growing_tokens() {
    let server = start_server();
    let zk = server.connect_string();
    let dir = tempdir();
    let observer = Observer::start(dir.path());
    let path = "/svc/leader";

    let mut a = Candidate::spawn(dir.path(), "a", &run_args(&zk, path, "a"), ChildKind::Beats);
    a.wait_run(1, START);
    let mut b = Candidate::spawn(dir.path(), "b", &run_args(&zk, path, "b"), ChildKind::Beats);
    wait_queue(&zk, path, &["a", "b"], || logs(&[&a, &b]));
    assert!(b.runs().is_empty(), "b follows: its child must not run");
    let run_a = a.wait_beats(1, 3, START);

    // SIGKILL the leading zkelect: its watchdog sees the pipe close and stops
    // the child; b leads once the server has expired a's session.
    let killed = mono_ns();
    a.signal(Signal::SIGKILL);
    let run_b = b.wait_run(1, TAKEOVER);
    let a_child_dead = observer.death_seen(run_a.pid).unwrap_or_else(|| {
        panic!(
            "a's child still alive when b's started\n{}",
            logs(&[&a, &b])
        )
    });
    let a_watchdog_dead = observer.wait_death(run_a.watchdog, "a's watchdog to exit", START);
    println!(
        "SIGKILL: a's child dead {:.0} ms after, watchdog {:.0} ms after; b's child started {:.0} ms after",
        ms(killed, a_child_dead),
        ms(killed, a_watchdog_dead),
        ms(killed, run_b.start)
    );
    assert!(
        a_child_dead < run_b.start,
        "a's child was last seen alive after b's child started"
    );
    assert!(
        ms(killed, run_b.start) < (SESSION_MS + 6_000) as f64,
        "b took over too late"
    );
    assert!(
        run_b.token > run_a.token,
        "the fencing token must grow: a had {}, b got {}",
        run_a.token,
        run_b.token
    );
    assert_eq!(a.wait_exit(START).code(), None, "a died of SIGKILL");
    assert_eq!(a.processes(), Vec::<i32>::new(), "a left processes behind");

    // a comes back (same id) and queues behind b.
    let mut a2 = Candidate::spawn(
        dir.path(),
        "a2",
        &run_args(&zk, path, "a"),
        ChildKind::Beats,
    );
    wait_queue(&zk, path, &["b", "a"], || logs(&[&a2, &b]));
    assert!(a2.runs().is_empty(), "a2 follows: its child must not run");
    let run_b = b.wait_beats(1, 3, START);

    // SIGTERM to the leader: child stopped, node deleted, exit 0; a2 leads at once.
    let termed = mono_ns();
    b.signal(Signal::SIGTERM);
    let status = b.wait_exit(START);
    assert_eq!(
        status.code(),
        Some(0),
        "zkelect exits 0 on SIGTERM\n{}",
        b.log_text()
    );
    let b_child_dead = observer.wait_death(run_b.pid, "b's child to be dead", START);
    assert!(
        b.processes().is_empty(),
        "b's child or watchdog outlived it: {:?}",
        b.processes()
    );
    let run_a2 = a2.wait_run(1, START);
    println!(
        "SIGTERM: b's child dead {:.0} ms after, a2's child started {:.0} ms after",
        ms(termed, b_child_dead),
        ms(termed, run_a2.start)
    );
    assert!(
        run_a2.token > run_b.token,
        "the fencing token must grow: b had {}, a2 got {}",
        run_b.token,
        run_a2.token
    );
    assert_eq!(
        queue_ids(&zk, path),
        ["a"],
        "b's node must be gone once it has exited"
    );

    // SIGINT does what SIGTERM does.
    a2.wait_beats(1, 3, START);
    a2.signal(Signal::SIGINT);
    assert_eq!(a2.wait_exit(START).code(), Some(0), "{}", a2.log_text());
    assert!(a2.processes().is_empty(), "a2 left processes behind");
    assert_eq!(
        queue_ids(&zk, path),
        Vec::<String>::new(),
        "a2's node is gone"
    );

    let runs = assert_one_at_a_time(&[&a.beats, &b.beats, &a2.beats]);
    assert_eq!(runs.len(), 3, "one run per leadership term: {runs:#?}");
    for (name, run) in &runs {
        assert!(
            run.beats > 0,
            "{name}'s child never beat: {run:?}\n{}",
            logs(&[&a, &b, &a2])
        );
    }
}

/// `zkelect status --json` shows the queue with ids, leader and watches;
/// `zkelect revoke --id a` makes the leader step down and rejoin at the back.
#[test]
fn status_shows_the_queue_and_revoke_sends_the_leader_to_the_back() {
    let server = start_server();
    let zk = server.connect_string();
    let dir = tempdir();
    let observer = Observer::start(dir.path());
    let path = "/svc/revoke";

    let a = Candidate::spawn(dir.path(), "a", &run_args(&zk, path, "a"), ChildKind::Beats);
    let run_a = a.wait_run(1, START);
    let mut b = Candidate::spawn(dir.path(), "b", &run_args(&zk, path, "b"), ChildKind::Beats);
    wait_queue(&zk, path, &["a", "b"], || logs(&[&a, &b]));

    let view = queue(&zk, path);
    assert!(view[0].leader && !view[1].leader, "{view:#?}");
    assert_eq!(view[0].watches, None, "the leader watches nobody");
    assert_eq!(
        view[1].watches.as_deref(),
        Some(view[0].node.as_str()),
        "b watches a's node"
    );
    assert!(
        view.iter().all(|e| e.session.is_some()),
        "ephemeral owners shown: {view:#?}"
    );
    let table = zkelect(
        &["status", "--connect", &zk, "--path", path],
        Duration::from_secs(20),
    );
    assert_eq!(table.code(), Some(0), "{}", table.stderr);
    let leader_line = table
        .stdout
        .lines()
        .find(|l| l.contains("LEADER"))
        .unwrap_or_else(|| panic!("no LEADER line:\n{}", table.stdout));
    assert!(
        leader_line.contains(" a ") && leader_line.contains(&view[0].node),
        "{}",
        table.stdout
    );

    let revoked = mono_ns();
    let out = zkelect(
        &["revoke", "--connect", &zk, "--path", path, "--id", "a"],
        Duration::from_secs(20),
    );
    assert_exit("revoke", out.code(), 0, &out.stderr, &["revoked"]);
    let run_b = b.wait_run(1, START);
    let a_dead = observer.wait_death(run_a.pid, "a's child to stop after the revoke", START);
    wait_queue(&zk, path, &["b", "a"], || logs(&[&a, &b]));
    assert!(run_b.token > run_a.token);
    // A revoke deletes the leader's node under it: the old leader hears of it
    // through its own-node watch while its successor hears of it through its
    // predecessor watch, at the same moment; nothing orders the two, so the
    // children may overlap by the old one's stop time (reported, not asserted).
    println!(
        "revoke: b's child started {:.0} ms after, a's child dead {:.0} ms after (overlap {:.0} ms)",
        ms(revoked, run_b.start),
        ms(revoked, a_dead),
        ms(run_b.start, a_dead).max(0.0)
    );
    assert_eq!(a.runs().len(), 1, "a follows again: no second run");

    let missing = zkelect(
        &["revoke", "--connect", &zk, "--path", path, "--id", "nobody"],
        Duration::from_secs(20),
    );
    assert_exit(
        "revoke an unknown id",
        missing.code(),
        UNKNOWN_ID,
        &missing.stderr,
        &["no node carries the id \"nobody\""],
    );

    b.signal(Signal::SIGTERM);
    assert_eq!(b.wait_exit(START).code(), Some(0), "{}", b.log_text());
    let run_a_again = a.wait_run(2, START);
    assert!(run_a_again.token > run_b.token);
}

/// Runs a `zkelect` command that must fail, and checks its exit code and that
/// its stderr holds every one of `needles`.
fn fails_with(args: &[&str], code: i32, needles: &[&str], within: Duration) -> Duration {
    let out = zkelect(args, within);
    let what = format!("`zkelect {}`", args.join(" "));
    assert_exit(&what, out.code(), code, &out.stderr, needles);
    out.took
}

/// Bad input is refused before anything touches the network, so the server
/// given is a closed port (reaching it would fail with another code).
#[test]
fn invalid_path_exits_3_and_names_the_path() {
    let nowhere = format!("127.0.0.1:{}", closed_port());
    for (bad, why) in [
        ("bad//path", "must start with '/'"),
        ("/bad//path", "empty segment"),
        ("/svc/leader/", "must not end with '/'"),
        ("/svc/./leader", ""),
        ("", ""),
    ] {
        let quoted = format!("invalid path {bad:?}");
        let run = ["run", "--connect", &nowhere, "--path", bad, "--id", "a"];
        let mut args = run.to_vec();
        args.extend(["--", "true"]);
        fails_with(&args, CONFIG, &[&quoted, why], Duration::from_secs(5));
        for sub in ["status", "revoke"] {
            let mut args = vec![sub, "--connect", &nowhere, "--path", bad];
            if sub == "revoke" {
                args.extend(["--id", "a"]);
            }
            fails_with(&args, CONFIG, &[&quoted], Duration::from_secs(5));
        }
    }
}

/// A path or a chroot the server would refuse (`PathUtils.validatePath`) is
/// refused before any request: exit 3, on every subcommand and transport.
/// The server given is a closed port, so reaching for it would fail otherwise.
#[test]
fn paths_and_chroots_the_server_would_refuse_exit_3_before_any_request() {
    let nowhere = format!("127.0.0.1:{}", closed_port());
    let emoji = "/svc/\u{1f680}";
    let cases = [
        (nowhere.clone(), emoji, "above U+FFFF"),
        (nowhere.clone(), "/svc/\u{e000}", "ZooKeeper refuses"),
        (
            format!("{nowhere}/apps//x"),
            "/svc/leader",
            "invalid chroot",
        ),
        (
            format!("{nowhere}/apps/x/"),
            "/svc/leader",
            "invalid chroot",
        ),
        (
            format!("{nowhere}/apps/./x"),
            "/svc/leader",
            "invalid chroot",
        ),
        (
            format!("{nowhere}/apps/\u{1f680}"),
            "/svc/leader",
            "above U+FFFF",
        ),
    ];
    for transport in ["zookeeper-async", "zookeeper-client"] {
        for (connect, path, why) in &cases {
            let base = [
                "--connect",
                connect.as_str(),
                "--path",
                path,
                "--transport",
                transport,
            ];
            let runs: Vec<&str> = ["run"]
                .into_iter()
                .chain(base)
                .chain(["--id", "a", "--", "true"])
                .collect();
            let status: Vec<&str> = ["status"].into_iter().chain(base).collect();
            let revoke: Vec<&str> = ["revoke"]
                .into_iter()
                .chain(base)
                .chain(["--id", "a"])
                .collect();
            for args in [&runs, &status, &revoke] {
                let took = fails_with(args, CONFIG, &[why], Duration::from_secs(5));
                assert!(took < Duration::from_secs(2), "{args:?} took {took:?}");
            }
        }
    }
}

/// Absurd timeouts are refused by the argument parser at once, never an
/// overflow or a hang: exit 2, or 125 for `zkelect lock` (its own failures).
#[test]
fn absurd_timeouts_exit_2_at_once() {
    let nowhere = format!("127.0.0.1:{}", closed_port());
    for (flag, value) in [
        ("--connect-timeout", "18446744073709551615"),
        ("--connect-timeout", "0"),
        ("--connect-timeout", "3600001"),
        ("--session-timeout", "18446744073709551615"),
    ] {
        for transport in ["zookeeper-async", "zookeeper-client"] {
            let common = [
                "--connect",
                &nowhere,
                "--path",
                "/svc/leader",
                "--transport",
                transport,
                flag,
                value,
            ];
            let status: Vec<&str> = ["status"].into_iter().chain(common).collect();
            let run: Vec<&str> = ["run", "--id", "a"]
                .into_iter()
                .chain(common)
                .chain(["--", "true"])
                .collect();
            let lock: Vec<&str> = ["lock"]
                .into_iter()
                .chain(common)
                .chain(["--", "true"])
                .collect();
            for (args, code) in [(status, USAGE), (run, USAGE), (lock, LOCK_FAILED)] {
                fails_with(&args, code, &[flag], Duration::from_secs(5));
            }
        }
    }
}

/// A --connect that does not parse or resolve is a setting to fix (3), not
/// an unreachable server (4), on both transports (each resolves every
/// server before connecting; one name that does not resolve among others
/// that do is only a warning, see members_down.rs).
#[test]
fn a_connect_string_that_does_not_resolve_exits_3() {
    for transport in ["zookeeper-async", "zookeeper-client"] {
        for hosts in [
            "no-port-here",
            "zkelect-no-such-host.invalid:2181",
            "zkelect-no-such-host.invalid:2181,zkelect-other.invalid:2181/apps",
            "127.0.0.1:2181,,127.0.0.1:2182",
            "127.0.0.1:0",
        ] {
            let args = [
                "status",
                "--connect",
                hosts,
                "--path",
                "/svc/leader",
                "--transport",
                transport,
                "--connect-timeout",
                "2000",
            ];
            fails_with(
                &args,
                CONFIG,
                &["cannot connect to ZooKeeper"],
                Duration::from_secs(10),
            );
        }
    }
}

#[test]
fn id_that_does_not_fit_a_znode_name_exits_3() {
    let nowhere = format!("127.0.0.1:{}", closed_port());
    let long = "x".repeat(300);
    for (id, why) in [
        ("a/b", "contains '/'"),
        (long.as_str(), "longer than 255 bytes"),
    ] {
        let args = [
            "run",
            "--connect",
            &nowhere,
            "--path",
            "/svc/leader",
            "--id",
            id,
            "--",
            "true",
        ];
        fails_with(
            &args,
            CONFIG,
            &["invalid candidate id", why, "an id must fit a znode name"],
            Duration::from_secs(5),
        );
    }
}

#[test]
fn no_command_after_the_separator_exits_2() {
    let nowhere = format!("127.0.0.1:{}", closed_port());
    let base = [
        "run",
        "--connect",
        &nowhere,
        "--path",
        "/svc/leader",
        "--id",
        "a",
    ];
    let mut with_separator = base.to_vec();
    with_separator.push("--");
    for args in [base.to_vec(), with_separator] {
        fails_with(
            &args,
            USAGE,
            &["required arguments were not provided", "<CMD>..."],
            Duration::from_secs(5),
        );
    }
}

/// A closed port and a server that accepts TCP but never answers (a black
/// hole): `run`, `status` and `lock` give up after the connect timeout with
/// exit 4 (`lock`: 125, its own failure, naming exit 4), no hang, on both
/// transports. The connect timeout is honoured even when it is longer
/// than the session timeout (zookeeper-client alone gives up after the
/// session timeout: the transport tries it again until the connect timeout).
#[test]
fn unreachable_server_exits_4_after_the_connect_timeout() {
    let closed = format!("127.0.0.1:{}", closed_port());
    let hole = Proxy::start(format!("127.0.0.1:{}", closed_port()).parse().unwrap())
        .expect("start a proxy");
    hole.blackhole();
    let hole = hole.connect_string();
    let timing = ["--connect-timeout", "3000", "--session-timeout", "1500"];
    for transport in ["zookeeper-async", "zookeeper-client"] {
        for server in [&closed, &hole] {
            let mut runs = run_args(server, "/svc/leader", "a");
            runs.extend(["--transport", transport].map(str::to_owned));
            // `run_args` asks for a 4 s session already.
            runs.extend(timing[..2].iter().map(|s| (*s).to_owned()));
            runs.extend(["--", "true"].map(str::to_owned));
            let runs: Vec<&str> = runs.iter().map(String::as_str).collect();
            let mut status = vec![
                "status",
                "--connect",
                server,
                "--path",
                "/svc/leader",
                "--transport",
                transport,
            ];
            status.extend(timing);
            let mut lock = vec![
                "lock",
                "--connect",
                server,
                "--path",
                "/svc/lock",
                "--transport",
                transport,
            ];
            lock.extend(timing);
            lock.extend(["--", "true"]);
            // The three at once: each waits out its own connect timeout.
            std::thread::scope(|scope| {
                for (args, code) in [
                    (&runs[..], UNREACHABLE),
                    (&status[..], UNREACHABLE),
                    (&lock[..], LOCK_FAILED),
                ] {
                    scope.spawn(move || {
                        let took = fails_with(
                            args,
                            code,
                            &["cannot connect to ZooKeeper", server.as_str()],
                            Duration::from_secs(15),
                        );
                        println!(
                            "`zkelect {}` on {transport} gave up after {took:?}",
                            args[0]
                        );
                        assert!(
                            took >= Duration::from_millis(2_900) && took < Duration::from_secs(8),
                            "`zkelect {}` against {server} took {took:?} with a 3 s connect timeout",
                            args.join(" ")
                        );
                    });
                }
            });
        }
    }
}

/// The election path made by a candidate with `--auth svc:secret` gets that
/// user's ACL (creator all, world read); a candidate with the wrong password,
/// or none, cannot create its node there: exit 5, naming the refusal.
#[test]
fn wrong_credentials_exit_5() {
    let server = start_server();
    let zk = server.connect_string();
    let dir = tempdir();
    let path = "/svc/secured";
    let with_auth = |id: &str, auth: Option<&str>| {
        let mut args = run_args(&zk, path, id);
        if let Some(auth) = auth {
            args.extend(["--auth".to_owned(), auth.to_owned()]);
        }
        args
    };
    let owner = Candidate::spawn(
        dir.path(),
        "owner",
        &with_auth("owner", Some("svc:secret")),
        ChildKind::Beats,
    );
    let run = owner.wait_run(1, START);

    for (label, auth) in [("wrong", Some("svc:wrong")), ("anonymous", None)] {
        let mut intruder =
            Candidate::spawn(dir.path(), label, &with_auth(label, auth), ChildKind::Beats);
        let status = intruder.wait_exit(START);
        let log = intruder.log_text();
        assert_eq!(status.code(), Some(AUTH), "{label}: exit code\n{log}");
        let error = log
            .lines()
            .find(|l| l.starts_with("error: "))
            .unwrap_or_else(|| panic!("{label}: no `error:` line\n{log}"));
        println!("{label}: {error}");
        assert!(
            error.contains("NoAuth") && error.contains(path),
            "{label}: the message should name the refusal and the path\n{log}"
        );
        assert!(intruder.runs().is_empty(), "{label}'s child must never run");
        assert!(intruder.processes().is_empty());
    }
    assert_eq!(queue_ids(&zk, path), ["owner"]);
    // Nor can the wrong password force the owner out.
    fails_with(
        &[
            "revoke",
            "--connect",
            &zk,
            "--path",
            path,
            "--id",
            "owner",
            "--auth",
            "svc:wrong",
        ],
        AUTH,
        &["NoAuth"],
        Duration::from_secs(20),
    );
    assert_eq!(owner.runs(), owner.runs()[..1], "the owner kept leading");
    assert_eq!(owner.runs()[0].pid, run.pid);

    // The right password joins.
    let peer = Candidate::spawn(
        dir.path(),
        "peer",
        &with_auth("peer", Some("svc:secret")),
        ChildKind::Beats,
    );
    wait_queue(&zk, path, &["owner", "peer"], || logs(&[&owner, &peer]));
}

/// `run ARGS -- COMMAND…` as one list of arguments.
fn run_with(zk: &str, path: &str, id: &str, extra: &[&str], command: &[&str]) -> Vec<String> {
    let mut args = run_args(zk, path, id);
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push("--".into());
    args.extend(command.iter().map(|s| s.to_string()));
    args
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// The codes of `zkelect run` for its command's own end, against a real
/// server: 0 passes through, any other end is 11 with the status in words,
/// a command that cannot start is 7 whether it is caught before joining (not
/// on PATH) or only when run (the shell's 127), and `--lead-timeout` gives up
/// with 9 and leaves the queue.
#[test]
fn run_exit_codes_for_the_command_and_the_wait_are_the_documented_ones() {
    let server = start_server();
    let zk = server.connect_string();
    let path = "/svc/codes";
    let within = Duration::from_secs(30);
    let run = |command: &[&str], extra: &[&str]| {
        zkelect(&strs(&run_with(&zk, path, "a", extra, command)), within)
    };

    let exits = |command: &[&str], want: i32, says: &[&str]| {
        let out = run(command, &[]);
        assert_exit(&command.join(" "), out.code(), want, &out.stderr, says);
        out
    };

    exits(&["true"], 0, &[]);
    // A child's 3 is not zkelect's 3 (invalid setting).
    let three = exits(
        &["sh", "-c", "exit 3"],
        COMMAND_FAILED,
        &["exited with code 3"],
    );
    assert!(
        !three.stderr.contains("unix_wait_status"),
        "{}",
        three.stderr
    );
    exits(
        &["sh", "-c", "kill -KILL $$"],
        COMMAND_FAILED,
        &["killed by SIGKILL"],
    );
    exits(
        &["/nonexistent/zkelect-test-command"],
        SPAWN,
        &["no such file"],
    );
    exits(&["zkelect-test-no-such-command"], SPAWN, &["not found"]);
    exits(
        &["sh", "-c", "exec /nonexistent/zkelect-test-command"],
        SPAWN,
        &["could not be started"],
    );

    // With a leader in place, a bounded wait gives up and deletes its node.
    let dir = tempdir();
    let leader = Candidate::spawn(
        dir.path(),
        "leader",
        &run_args(&zk, path, "leader"),
        ChildKind::Beats,
    );
    leader.wait_run(1, START);
    let gave_up = run(&["true"], &["--lead-timeout", "1000"]);
    assert_exit(
        "run --lead-timeout",
        gave_up.code(),
        LEAD_TIMEOUT,
        &gave_up.stderr,
        &["--lead-timeout"],
    );
    assert_eq!(
        queue_ids(&zk, path),
        ["leader"],
        "the waiter's node is gone"
    );
}

/// An election path under an ephemeral node cannot hold candidates: the
/// server refuses the create for good, and `run` exits 12 (the namespace
/// cannot hold the path) naming the ephemeral node, after a bounded number
/// of creates and without ever starting its command.
#[test]
fn an_election_under_an_ephemeral_node_exits_12() {
    let server = start_server();
    let zk = server.connect_string();
    let dir = tempdir();
    let holder = Candidate::spawn(
        dir.path(),
        "holder",
        &run_args(&zk, "/svc/eph", "holder"),
        ChildKind::Beats,
    );
    holder.wait_run(1, START);
    let node = queue(&zk, "/svc/eph")[0].node.clone();
    let under = format!("/svc/eph/{node}");
    let out = zkelect(
        &strs(&run_with(
            &zk,
            &under,
            "a",
            &[],
            &["sh", "-c", "echo started"],
        )),
        Duration::from_secs(30),
    );
    assert_exit(
        "run under an ephemeral node",
        out.code(),
        NAMESPACE,
        &out.stderr,
        &["is an ephemeral node, which cannot have children"],
    );
    assert!(!out.stdout.contains("started"), "{}", out.stdout);
}

/// Two candidates with the same id: `status` shows both, `revoke --id dup`
/// refuses to guess (exit 10, both nodes named), `--node` revokes exactly one.
#[test]
fn revoke_tells_apart_candidates_that_share_an_id() {
    let server = start_server();
    let zk = server.connect_string();
    let dir = tempdir();
    let path = "/svc/dup";
    let first = Candidate::spawn(
        dir.path(),
        "first",
        &run_args(&zk, path, "dup"),
        ChildKind::Beats,
    );
    first.wait_run(1, START);
    let second = Candidate::spawn(
        dir.path(),
        "second",
        &run_args(&zk, path, "dup"),
        ChildKind::Beats,
    );
    wait_queue(&zk, path, &["dup", "dup"], || logs(&[&first, &second]));
    let view = queue(&zk, path);
    let revoke = ["revoke", "--connect", &zk, "--path", path, "--id", "dup"];
    let refused = fails_with(
        &revoke,
        UNKNOWN_ID,
        &[
            "2 nodes carry the id \"dup\"",
            &view[0].node,
            &view[1].node,
            "--node",
        ],
        Duration::from_secs(20),
    );
    let _ = refused;
    assert_eq!(queue(&zk, path), view, "nothing was revoked");
    // The node named by its sequence alone (`n_0000000001`), as an operator
    // reads it off `status`.
    let sequence = view[1]
        .node
        .rsplit_once('-')
        .map_or(view[1].node.as_str(), |(_, s)| s);
    assert!(sequence.starts_with("n_"), "{}", view[1].node);
    let mut one = revoke.to_vec();
    one.extend(["--node", sequence]);
    let out = zkelect(&one, Duration::from_secs(20));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    wait_for(
        "the second node to go and come back",
        START,
        Duration::from_millis(50),
        || {
            let now = queue(&zk, path);
            (now.len() == 2 && now[0] == view[0] && now[1].node != view[1].node).then_some(())
        },
        || logs(&[&first, &second]),
    );
    assert_eq!(first.runs().len(), 1, "the leader was not touched");
}

/// `-q` governs every log line, the ZooKeeper client library's included: a
/// server restart under a quiet `run` leaves its output empty, while the same
/// restart under a default one logs it (so the restart did make noise). On
/// both transports.
#[test]
fn quiet_prints_nothing_through_a_server_restart() {
    for transport in ["zookeeper-async", "zookeeper-client"] {
        quiet_prints_nothing_through_a_server_restart_on(transport);
    }
}

fn quiet_prints_nothing_through_a_server_restart_on(transport: &str) {
    let server = start_server();
    let zk = server.connect_string();
    let dir = tempdir();
    let path = "/svc/quiet";
    let with = |mut args: Vec<String>| {
        args.extend(["--transport".to_owned(), transport.to_owned()]);
        args
    };
    let mut quiet_args = with(run_args(&zk, path, "quiet"));
    quiet_args.push("-q".into());
    let mut quiet = Candidate::spawn(dir.path(), "quiet", &quiet_args, ChildKind::Beats);
    quiet.wait_run(1, START);
    let mut loud = Candidate::spawn(
        dir.path(),
        "loud",
        &with(run_args(&zk, path, "loud")),
        ChildKind::Beats,
    );
    wait_queue(&zk, path, &["quiet", "loud"], || logs(&[&quiet, &loud]));
    let loud_log = loud.log.clone();
    let loud_lines = || {
        std::fs::read_to_string(&loud_log)
            .expect("the loud log")
            .lines()
            .count()
    };
    let loud_before = loud_lines();

    server.restart().expect("restart the server");
    // Both sessions come back (or are replaced): the queue holds both again
    // and the quiet one leads through it or after it.
    wait_for(
        "both candidates back in the queue",
        TAKEOVER,
        Duration::from_millis(100),
        || {
            let mut ids = queue_ids(&zk, path);
            ids.sort();
            (ids == ["loud", "quiet"]).then_some(())
        },
        || logs(&[&quiet, &loud]),
    );
    std::thread::sleep(Duration::from_secs(1));
    quiet.signal(Signal::SIGTERM);
    loud.signal(Signal::SIGTERM);
    assert_eq!(
        quiet.wait_exit(START).code(),
        Some(0),
        "{}",
        quiet.log_text()
    );
    assert_eq!(loud.wait_exit(START).code(), Some(0), "{}", loud.log_text());
    assert!(
        loud_lines() > loud_before + 2,
        "the restart logged (almost) nothing even without -q:\n{}",
        loud.log_text()
    );
    let loud_text = loud.log_text();
    println!("without -q:\n{loud_text}");
    if transport == "zookeeper-async" {
        assert!(
            loud_text.contains("Failed to connect"),
            "zookeeper-async's own lines (through `log`) show without -q:\n{loud_text}"
        );
    }
    let quiet_log = std::fs::read_to_string(&quiet.log).expect("the quiet log");
    assert!(quiet_log.is_empty(), "-q printed:\n{quiet_log}");
}

/// `status --leaders 2` shows both holders and each follower watching the two
/// nodes below it; `status --watch` prints the table once, then one
/// timestamped line per change of the queue, never a repeat.
#[test]
fn status_with_two_leaders_and_watch_prints_one_line_per_change() {
    let server = start_server();
    let zk = server.connect_string();
    let dir = tempdir();
    let path = "/svc/two";
    let two = |id: &str| {
        let mut args = run_args(&zk, path, id);
        args.extend(["--leaders".to_owned(), "2".to_owned()]);
        args
    };
    let a = Candidate::spawn(dir.path(), "a", &two("a"), ChildKind::Beats);
    a.wait_run(1, START);

    let watch_out = dir.path().join("watch.out");
    let mut watcher = std::process::Command::new(crate::support::zkelect_bin())
        .args([
            "status",
            "--connect",
            &zk,
            "--path",
            path,
            "--leaders",
            "2",
            "--watch",
        ])
        .stdout(std::fs::File::create(&watch_out).expect("watch.out"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start status --watch");
    let printed = || std::fs::read_to_string(&watch_out).unwrap_or_default();
    let stamped = || {
        printed()
            .lines()
            .filter(|l| l.starts_with("20") && l.contains('Z'))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let wait_lines = |n: usize| {
        wait_for(
            &format!("{n} timestamped line(s) from status --watch"),
            START,
            Duration::from_millis(50),
            || (stamped().len() >= n).then_some(()),
            printed,
        )
    };
    wait_for(
        "the first table",
        START,
        Duration::from_millis(50),
        || printed().contains("LEADER").then_some(()),
        printed,
    );

    let b = Candidate::spawn(dir.path(), "b", &two("b"), ChildKind::Beats);
    b.wait_run(1, START);
    wait_lines(1);
    let mut c = Candidate::spawn(dir.path(), "c", &two("c"), ChildKind::Beats);
    wait_queue(&zk, path, &["a", "b", "c"], || logs(&[&a, &b, &c]));
    wait_lines(2);
    assert!(c.runs().is_empty(), "the third of two leaders follows");

    let out = zkelect(
        &[
            "status",
            "--connect",
            &zk,
            "--path",
            path,
            "--leaders",
            "2",
            "--json",
        ],
        Duration::from_secs(20),
    );
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let view: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    let q = &view["queue"];
    assert_eq!(view["leaders"], 2);
    assert_eq!(
        (
            q[0]["leader"].clone(),
            q[1]["leader"].clone(),
            q[2]["leader"].clone()
        ),
        (true.into(), true.into(), false.into())
    );
    assert_eq!(
        q[2]["watched"],
        serde_json::json!([q[1]["node"], q[0]["node"]]),
        "{view}"
    );
    let table = zkelect(
        &["status", "--connect", &zk, "--path", path, "--leaders", "2"],
        Duration::from_secs(20),
    );
    assert_eq!(
        table.stdout.matches("LEADER").count(),
        2,
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.contains("2 leader(s) wanted"),
        "{}",
        table.stdout
    );

    c.signal(Signal::SIGTERM);
    assert_eq!(c.wait_exit(START).code(), Some(0));
    wait_lines(3);
    // Nothing more happens: no line may follow.
    std::thread::sleep(Duration::from_secs(1));
    let _ = watcher.kill();
    let _ = watcher.wait();
    let lines = stamped();
    println!("{}", printed());
    assert_eq!(lines.len(), 3, "one line per change:\n{}", printed());
    assert!(
        lines[0].contains("2 candidate(s)")
            && lines[1].contains("3 candidate(s)")
            && lines[2].contains("2 candidate(s)"),
        "{lines:#?}"
    );
    assert!(lines[1].contains("followers: c ("), "{lines:#?}");
    assert_eq!(
        printed().matches("LEADER").count(),
        1,
        "the table once:\n{}",
        printed()
    );
}

/// Fetches `http://addr/` (the Prometheus exporter's page) with a plain
/// HTTP/1.0 request; `None` while nothing answers.
fn scrape(addr: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream
        .write_all(format!("GET / HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .ok()?;
    let mut page = String::new();
    stream.read_to_string(&mut page).ok()?;
    page.starts_with("HTTP/1").then_some(page)
}

/// The value of one sample line `name{labels} value` on a scraped page.
fn sample(page: &str, series: &str) -> Option<f64> {
    page.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// Asserts that each `(name, value)` is a sample of `page` for the election
/// at `path` (`name{path="…"} value`), showing the page when one is not.
#[track_caller]
fn assert_samples(page: &str, path: &str, want: &[(&str, f64)]) {
    for (name, value) in want {
        let series = format!("{name}{{path=\"{path}\"}}");
        assert_eq!(sample(page, &series), Some(*value), "{series}:\n{page}");
    }
}

/// `run --metrics-addr` serves the election's counters and latency
/// histograms for Prometheus: a follower that takes over counts one
/// election and one failover with their latencies; revoked, it records the
/// hand-off to its successor.
#[test]
fn run_serves_prometheus_metrics_a_scrape_can_read() {
    let server = start_server();
    let zk = server.connect_string();
    let dir = tempdir();
    let path = "/svc/metrics";
    let mut a = Candidate::spawn(dir.path(), "a", &run_args(&zk, path, "a"), ChildKind::Beats);
    a.wait_run(1, START);
    let addr = format!("127.0.0.1:{}", closed_port());
    let mut b_args = run_args(&zk, path, "b");
    b_args.extend(["--metrics-addr".to_owned(), addr.clone()]);
    let b = Candidate::spawn(dir.path(), "b", &b_args, ChildKind::Beats);
    wait_queue(&zk, path, &["a", "b"], || logs(&[&a, &b]));
    let label = format!("{{path=\"{path}\"}}");
    let series = |name: &str| format!("{name}{label}");
    let page = wait_for(
        "b's metrics page",
        START,
        Duration::from_millis(100),
        || scrape(&addr).filter(|p| p.contains("zkelect_ops_total")),
        || b.log_text(),
    );
    assert_samples(
        &page,
        path,
        &[("zkelect_leader", 0.0), ("zkelect_elections_total", 0.0)],
    );

    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(START).code(), Some(0));
    b.wait_run(1, START);
    let page = wait_for(
        "b's election in its metrics",
        START,
        Duration::from_millis(100),
        || scrape(&addr).filter(|p| sample(p, &series("zkelect_leader")) == Some(1.0)),
        || b.log_text(),
    );
    println!("{page}");
    assert_samples(
        &page,
        path,
        &[
            ("zkelect_elections_total", 1.0),
            ("zkelect_failovers_total", 1.0),
            ("zkelect_time_to_elect_seconds_count", 1.0),
            ("zkelect_failover_seconds_count", 1.0),
        ],
    );
    assert!(
        page.contains("zkelect_time_to_elect_seconds_bucket{path=\"/svc/metrics\",le=\"60\"} 1"),
        "histograms have buckets:\n{page}"
    );
    assert!(
        sample(&page, &series("zkelect_ops_total")).is_some_and(|n| n > 2.0),
        "{page}"
    );

    let c = Candidate::spawn(dir.path(), "c", &run_args(&zk, path, "c"), ChildKind::Beats);
    wait_queue(&zk, path, &["b", "c"], || logs(&[&b, &c]));
    let out = zkelect(
        &["revoke", "--connect", &zk, "--path", path, "--id", "b"],
        Duration::from_secs(20),
    );
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    c.wait_run(1, START);
    let page = wait_for(
        "b's hand-off in its metrics",
        START,
        Duration::from_millis(100),
        || {
            scrape(&addr)
                .filter(|p| sample(p, &series("zkelect_handoff_seconds_count")) == Some(1.0))
        },
        || b.log_text(),
    );
    assert_samples(
        &page,
        path,
        &[("zkelect_leader", 0.0), ("zkelect_demotions_total", 1.0)],
    );
}

/// `lock --metrics-addr` serves the same series as `run`: while CMD runs,
/// the holder's gauge is 1 and one acquisition is counted with its latency.
#[test]
fn lock_serves_prometheus_metrics_while_the_command_runs() {
    let server = start_server();
    let zk = server.connect_string();
    let path = "/locks/metrics";
    let addr = format!("127.0.0.1:{}", closed_port());
    let args = [
        "lock",
        "--connect",
        &zk,
        "--path",
        path,
        "--metrics-addr",
        &addr,
        "--",
        "sleep",
        "4",
    ]
    .map(str::to_owned);
    let holder = std::thread::spawn(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        zkelect(&args, Duration::from_secs(60))
    });
    let series = |name: &str| format!("{name}{{path=\"{path}\"}}");
    let page = wait_for(
        "the lock holder's metrics",
        START,
        Duration::from_millis(100),
        || scrape(&addr).filter(|p| sample(p, &series("zkelect_leader")) == Some(1.0)),
        || String::from("(zkelect lock's output is read when it exits)"),
    );
    assert_samples(
        &page,
        path,
        &[
            ("zkelect_elections_total", 1.0),
            ("zkelect_time_to_elect_seconds_count", 1.0),
        ],
    );
    let out = holder.join().expect("the holder thread");
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
}
