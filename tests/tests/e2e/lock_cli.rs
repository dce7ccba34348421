//! `zkelect lock -- CMD` end to end, against a real ZooKeeper
//! server, over both transports (`--transport zookeeper-async` and
//! `zookeeper-client`).
//!
//! CMD is the heartbeat child of `support` (`tests/src/bin/heartbeat.rs`): it
//! writes `start <ns> <token> …` and then `alive <ns>` every 50 ms on
//! `CLOCK_MONOTONIC`, so each process's own belief that it holds the lock is
//! on record, on one clock; the death observer bounds when a killed CMD died.
//! The witness: no two CMD runs overlap, and a faulted holder's CMD is seen
//! dead before the next holder's starts.
//!
//! * exit codes: CMD's own status passes through; 124 `--timeout` (CMD never
//!   ran, no node left); 127 CMD not found and 125 unreachable, both without
//!   ever queueing; 128+15 when `zkelect lock` is sent SIGTERM;
//! * three holders queued one after the other hold in that order (FIFO), one
//!   at a time, and each exits 0;
//! * `--permits 2` among three: two hold together, the third waits;
//! * `--read`/`--write`: readers share, a writer excludes, in arrival order;
//! * five processes × twenty rounds (`zkelect lock` in a shell loop): never two
//!   CMDs at once, and every acquisition in arrival order (tokens grow);
//! * the holder is killed (SIGKILL), frozen (SIGSTOP) or partitioned (its
//!   connection black-holed): the lease watchdog stops its CMD before the
//!   waiter's CMD starts; a frozen or partitioned holder, once back, exits
//!   123 (the lock was lost while CMD ran);
//! * `--permits 4 --weight N`: a request that does not fit waits, and a
//!   lighter one queued after it does not overtake it; a weight above the
//!   permits is 125;
//! * `--on-revoke SIGUSR1` with `revoke --ask`: the request reaches CMD as
//!   SIGUSR1 and CMD decides (here it exits 0); without the flag the request
//!   is delivered and goes unheard; an unknown id is 10;
//! * a multi-lock (`--path A --path B`) sent SIGTERM, SIGINT, SIGHUP or
//!   SIGQUIT while it holds A and waits on B, or while its command runs,
//!   exits 128+N; its command, if it ran, is dead; no node is left on A or B;
//! * `--acl ip:127.0.0.1:cdrwa --acl world:anyone:r`: the holder's node and
//!   the queue's level carry exactly that list while CMD runs; a malformed
//!   `--acl` is 125 and creates nothing;
//! * a canary: two locks on different paths overlap, and the witness says so.

use std::time::Duration;

use nix::sys::signal::Signal;
use zkelect_tests::{assert_exit, Proxy, ZkServer};

use crate::support::{
    acls_under, alive, assert_one_at_a_time, child_command, closed_port, mono_ns, ms, node_ids,
    processes_with_env, read_runs, wait_for, zkelect, zkelect_bin, Candidate, ChildKind, Observer,
    BEAT, BEATS_ENV, SESSION_MS,
};

const START: Duration = Duration::from_secs(20);
const TAKEOVER: Duration = Duration::from_secs(20);

fn server() -> ZkServer {
    ZkServer::start().unwrap_or_else(|e| panic!("cannot start ZooKeeper: {e}"))
}

/// The `zkelect lock` options before `--`.
fn lock_args(connect: &str, path: &str, id: &str, transport: &str, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "lock",
        "--connect",
        connect,
        "--path",
        path,
        "--id",
        id,
        "--session-timeout",
        &SESSION_MS.to_string(),
        "--transport",
        transport,
    ]
    .map(str::to_owned)
    .to_vec();
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args
}

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("zkelect-lock-test-")
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

/// The ids of the nodes under `path`, in sequence order ([`node_ids`]).
fn lock_ids(zk: &str, path: &str) -> Vec<String> {
    node_ids(zk, path)
}

/// Waits until the queue at `path` holds exactly `ids`, in that order.
fn wait_queue(zk: &str, path: &str, ids: &[&str], context: impl FnOnce() -> String) {
    wait_for(
        &format!("the queue to be {ids:?}"),
        START,
        Duration::from_millis(50),
        || (lock_ids(zk, path) == ids).then_some(()),
        context,
    );
}

/// Starts one `zkelect lock` per `(label, options)`, in that order, each
/// once the one before has queued (its node shows, or on a slow machine its
/// CMD already runs), with a heartbeat CMD that works `life_ms`; returns them
/// once every one has exited 0.
fn one_after_another(
    zk: &str,
    path: &str,
    transport: &str,
    dir: &std::path::Path,
    queued: &[(&str, &[&str])],
    life_ms: u32,
) -> Vec<Candidate> {
    let mut holders: Vec<Candidate> = Vec::new();
    for (label, options) in queued {
        holders.push(Candidate::spawn(
            dir,
            label,
            &lock_args(zk, path, label, transport, options),
            ChildKind::Lives(life_ms),
        ));
        let refs: Vec<&Candidate> = holders.iter().collect();
        let newest = &holders[holders.len() - 1];
        wait_for(
            &format!("{label} queued"),
            START,
            Duration::from_millis(20),
            || {
                (!newest.runs().is_empty() || lock_ids(zk, path).contains(&(*label).to_owned()))
                    .then_some(())
            },
            || logs(&refs),
        );
    }
    for h in &mut holders {
        let status = h.wait_exit(START);
        assert_exit(&h.label, status.code(), 0, &h.log_text(), &[]);
    }
    holders
}

fn exit_codes(transport: &str) {
    let server = server();
    let zk = server.connect_string();
    let dir = tempdir();
    let path = "/locks/codes";
    let cmd_args = |extra: &[&str], cmd: &[&str]| {
        let mut args = lock_args(&zk, path, "x", transport, extra);
        args.push("--".into());
        args.extend(cmd.iter().map(|s| (*s).to_owned()));
        args
    };
    let exits = |args: Vec<String>, want: i32| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = zkelect(&refs, START);
        let what = format!("`zkelect {}`", args.join(" "));
        assert_exit(&what, out.code(), want, &out.stderr, &[]);
    };

    // CMD's own status passes through, with the token in its environment.
    exits(
        cmd_args(
            &[],
            &["sh", "-c", "test -n \"$ZKELECT_FENCING_TOKEN\" && exit 42"],
        ),
        42,
    );
    exits(cmd_args(&[], &["true"]), 0);
    // Not found: 127, before queueing.
    exits(cmd_args(&[], &["zkelect-no-such-command"]), 127);
    // Found but not executable: 126, before queueing.
    let plain = dir.path().join("not-executable");
    std::fs::write(&plain, "#!/bin/sh\nexit 0\n").expect("write a plain file");
    let plain = plain.to_string_lossy().into_owned();
    exits(cmd_args(&[], &[&plain]), 126);
    // zkelect lock's own failures are 125: a usage error, an unreachable server.
    exits(vec!["lock".into(), "--path".into(), path.into()], 125);
    let nowhere = format!("127.0.0.1:{}", closed_port());
    let mut unreachable = lock_args(
        &nowhere,
        path,
        "x",
        transport,
        &["--connect-timeout", "500"],
    );
    unreachable.extend(["--".into(), "true".into()]);
    exits(unreachable, 125);
    assert!(lock_ids(&zk, path).is_empty(), "no node left behind");

    // --timeout while another holds: 124, CMD never ran, no node left.
    let mut a = Candidate::spawn(
        dir.path(),
        "a",
        &lock_args(&zk, path, "a", transport, &[]),
        ChildKind::Beats,
    );
    a.wait_run(1, START);
    let mut b = Candidate::spawn(
        dir.path(),
        "b",
        &lock_args(&zk, path, "b", transport, &["--timeout", "1"]),
        ChildKind::Beats,
    );
    let code = b.wait_exit(START).code();
    assert_eq!(code, Some(124), "{}", logs(&[&a, &b]));
    assert!(b.runs().is_empty(), "b's CMD must never run");
    assert_eq!(lock_ids(&zk, path), ["a"], "b's node is deleted");
    // SIGTERM to the holder: CMD stopped, lock released, 128 + 15.
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(START).code(), Some(143), "{}", a.log_text());
    assert!(lock_ids(&zk, path).is_empty(), "the lock is released");
}

fn fifo_one_at_a_time(transport: &str) {
    let server = server();
    let zk = server.connect_string();
    let dir = tempdir();
    let path = "/locks/fifo";
    let labels = ["a", "b", "c"];
    let queued: Vec<(&str, &[&str])> = labels.iter().map(|l| (*l, &[][..])).collect();
    let holders = one_after_another(&zk, path, transport, dir.path(), &queued, 2000);
    let files: Vec<&std::path::Path> = holders.iter().map(|h| h.beats.as_path()).collect();
    let runs = assert_one_at_a_time(&files);
    let order: Vec<&str> = runs.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(order, labels, "FIFO: {runs:#?}");
    for pair in runs.windows(2) {
        assert!(pair[0].1.token < pair[1].1.token, "tokens grow: {runs:#?}");
    }
    assert!(lock_ids(&zk, path).is_empty(), "no node left behind");
}

/// Five processes, each taking the lock twenty times in a row (`zkelect lock`
/// in a shell loop, its CMD a heartbeat that works ~50 ms): no two CMDs ever
/// run at once, and the lock goes in arrival order: sorted by start, the
/// holders' tokens (their nodes' creation zxids, i.e. the order they queued
/// in) strictly grow.
fn five_processes_twenty_rounds(transport: &str) {
    const PROCESSES: usize = 5;
    const ROUNDS: usize = 20;
    let server = server();
    let zk = server.connect_string();
    let dir = tempdir();
    let path = "/locks/rounds";
    let heartbeat = child_command(ChildKind::Lives(30));
    let mut loops = Vec::new();
    for p in 0..PROCESSES {
        let beats = dir.path().join(format!("p{p}.beats"));
        let log = std::fs::File::create(dir.path().join(format!("p{p}.log"))).expect("a log");
        let mut args: Vec<std::ffi::OsString> = vec![
            "-c".into(),
            format!("for i in $(seq {ROUNDS}); do \"$0\" \"$@\" || exit $?; done").into(),
        ];
        args.push(zkelect_bin().into());
        args.extend(
            lock_args(&zk, path, &format!("p{p}"), transport, &[])
                .into_iter()
                .map(Into::into),
        );
        args.push("--".into());
        args.extend(heartbeat.iter().cloned());
        let child = std::process::Command::new("sh")
            .args(&args)
            .env(BEATS_ENV, &beats)
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().expect("clone the log"))
            .stderr(log)
            .spawn()
            .expect("spawn a lock loop");
        loops.push((child, beats));
    }
    // Every process a loop starts inherits its BEATS_ENV: that is how they
    // are found and killed if the test gives up.
    let markers: Vec<String> = loops
        .iter()
        .map(|(_, beats)| format!("{BEATS_ENV}={}", beats.display()))
        .collect();
    let kill_all = || {
        for marker in &markers {
            for pid in processes_with_env(marker) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    for (p, (child, beats)) in loops.iter_mut().enumerate() {
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for a loop") {
                break status;
            }
            if std::time::Instant::now() > deadline {
                kill_all();
                panic!("process {p}'s {ROUNDS} rounds took longer than 180 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let log = std::fs::read_to_string(dir.path().join(format!("p{p}.log"))).unwrap_or_default();
        if status.code() != Some(0) {
            kill_all();
            panic!("process {p} ended {status}:\n{log}");
        }
        assert_eq!(
            read_runs(beats).len(),
            ROUNDS,
            "process {p} held {ROUNDS} times"
        );
    }
    let files: Vec<&std::path::Path> = loops.iter().map(|(_, b)| b.as_path()).collect();
    let runs = assert_one_at_a_time(&files);
    assert_eq!(runs.len(), PROCESSES * ROUNDS);
    for pair in runs.windows(2) {
        assert!(
            pair[0].1.token < pair[1].1.token,
            "not FIFO: {} (token {}) held before {} (token {}), which queued first",
            pair[0].0,
            pair[0].1.token,
            pair[1].0,
            pair[1].1.token
        );
    }
    assert!(lock_ids(&zk, path).is_empty(), "no node left behind");
}

/// `--permits 2` among three processes: two CMDs run together, never three,
/// and the third starts once one of the first two is done.
fn two_permits_among_three(transport: &str) {
    let server = server();
    let zk = server.connect_string();
    let dir = tempdir();
    let path = "/locks/permits";
    let permits: &[&str] = &["--permits", "2"];
    let queued = [("a", permits), ("b", permits), ("c", permits)];
    let holders = one_after_another(&zk, path, transport, dir.path(), &queued, 1500);
    let runs: Vec<crate::support::Run> = holders.iter().map(|h| h.runs()[0]).collect();
    let overlap =
        |x: &crate::support::Run, y: &crate::support::Run| x.start < y.last && y.start < x.last;
    assert!(
        overlap(&runs[0], &runs[1]),
        "a and b hold together: {runs:#?}"
    );
    assert!(
        runs[2].start > runs[0].last.min(runs[1].last),
        "c waits for a permit: {runs:#?}"
    );
    let latest_start = runs.iter().map(|r| r.start).max();
    let earliest_end = runs.iter().map(|r| r.last).min();
    assert!(
        latest_start > earliest_end,
        "never three at once: {runs:#?}"
    );
    assert!(lock_ids(&zk, path).is_empty(), "no node left behind");
}

/// `--read` and `--write` in arrival order: two readers hold together, the
/// writer queued after them waits for both, and the reader queued after the
/// writer waits for the writer.
fn readers_share_writers_exclude(transport: &str) {
    let server = server();
    let zk = server.connect_string();
    let dir = tempdir();
    let path = "/locks/rw";
    let (read, write): (&[&str], &[&str]) = (&["--read"], &["--write"]);
    let queued = [("r1", read), ("r2", read), ("w", write), ("r3", read)];
    let holders = one_after_another(&zk, path, transport, dir.path(), &queued, 1500);
    let runs: Vec<crate::support::Run> = holders.iter().map(|h| h.runs()[0]).collect();
    let (r1, r2, w, r3) = (runs[0], runs[1], runs[2], runs[3]);
    assert!(
        r1.start < r2.last && r2.start < r1.last,
        "the readers hold together: {runs:#?}"
    );
    assert!(
        w.start > r1.last.max(r2.last),
        "the writer waits for both readers: {runs:#?}"
    );
    assert!(
        r3.start > w.last,
        "a reader behind the writer waits for it: {runs:#?}"
    );
    assert!(lock_ids(&zk, path).is_empty(), "no node left behind");
}

/// `zkelect status --recipe read-write` on a live lock: two readers hold,
/// the writer behind them waits watching the nearer reader, the reader
/// behind the writer waits watching the writer; then everyone is stopped
/// (SIGTERM: 128 + 15) and nothing is left.
#[test]
fn status_shows_who_holds_a_read_write_lock_and_whom_each_waiter_watches() {
    let server = server();
    let zk = server.connect_string();
    let dir = tempdir();
    let path = "/locks/status";
    let (read, write): (&[&str], &[&str]) = (&["--read"], &["--write"]);
    let mut holders: Vec<Candidate> = Vec::new();
    let mut ids: Vec<&str> = Vec::new();
    for (label, options) in [("r1", read), ("r2", read), ("w", write), ("r3", read)] {
        holders.push(Candidate::spawn(
            dir.path(),
            label,
            &lock_args(&zk, path, label, "zookeeper-async", options),
            ChildKind::Beats,
        ));
        ids.push(label);
        let refs: Vec<&Candidate> = holders.iter().collect();
        wait_queue(&zk, path, &ids, || logs(&refs));
    }
    let status = |extra: &[&str]| {
        let mut args = vec!["status", "--connect", &zk, "--path", path];
        args.extend_from_slice(extra);
        let out = zkelect(&args, Duration::from_secs(20));
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
        out.stdout
    };
    let out = status(&["--recipe", "read-write", "--json"]);
    let view: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON");
    let q = &view["queue"];
    let column =
        |key: &str| -> Vec<serde_json::Value> { (0..4).map(|i| q[i][key].clone()).collect() };
    assert_eq!(view["recipe"], "read-write");
    assert_eq!(column("id"), ["r1", "r2", "w", "r3"], "{view}");
    assert_eq!(column("leader"), [true, true, false, false], "{view}");
    assert_eq!(
        column("access"),
        ["shared", "shared", "exclusive", "shared"],
        "{view}"
    );
    assert_eq!(q[2]["watched"], serde_json::json!([q[1]["node"]]), "{view}");
    assert_eq!(q[3]["watched"], serde_json::json!([q[2]["node"]]), "{view}");
    // Read as an election, the lock's nodes are nobody's. (The flags status
    // refuses are unit-tested in cli/src/status.rs: no server needed.)
    let table = status(&[]);
    assert!(table.contains("nobody leads"), "{table}");

    for h in &holders {
        h.signal(Signal::SIGTERM);
    }
    for h in &mut holders {
        let status = h.wait_exit(START);
        assert_exit(&h.label, status.code(), 128 + 15, &h.log_text(), &[]);
    }
    assert!(lock_ids(&zk, path).is_empty(), "no node left behind");
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Kill,
    Freeze,
    Partition,
}

fn no_overlap_under(fault: Fault, transport: &str) {
    let server = server();
    let proxy = Proxy::start(server.addr()).expect("start a proxy");
    let zk = server.connect_string();
    let dir = tempdir();
    let observer = Observer::start(dir.path());
    let path = "/locks/fault";
    let mut a = Candidate::spawn(
        dir.path(),
        "a",
        &lock_args(&proxy.connect_string(), path, "a", transport, &[]),
        ChildKind::Stubborn,
    );
    let run_a = a.wait_run(1, START);
    let mut b = Candidate::spawn(
        dir.path(),
        "b",
        &lock_args(&zk, path, "b", transport, &[]),
        ChildKind::Lives(500),
    );
    wait_queue(&zk, path, &["a", "b"], || logs(&[&a, &b]));
    a.wait_beats(1, 3, START);
    assert!(b.runs().is_empty(), "b waits: its CMD must not run");

    let at = mono_ns();
    match fault {
        Fault::Kill => a.signal(Signal::SIGKILL),
        Fault::Freeze => a.signal(Signal::SIGSTOP),
        Fault::Partition => proxy.blackhole(),
    }
    let run_b = b.wait_run(1, TAKEOVER);
    let a_dead = observer.death_seen(run_a.pid).unwrap_or_else(|| {
        panic!(
            "OVERLAP ({fault:?}): a's CMD still alive when b's started\n{}",
            logs(&[&a, &b])
        )
    });
    let a_last = a.runs()[0].last;
    println!(
        "{fault:?} over {transport}: a's last beat {:.0} ms after the fault, its CMD seen dead at \
         {:.0} ms, b's CMD started at {:.0} ms",
        ms(at, a_last),
        ms(at, a_dead),
        ms(at, run_b.start)
    );
    assert!(a_last < run_b.start, "{fault:?}: the CMD runs overlap");
    assert!(a_dead < run_b.start, "{fault:?}: a's CMD outlived the hold");
    assert!(
        ms(a_last, run_b.start) > (4 * BEAT.as_millis()) as f64,
        "{fault:?}: only {:.0} ms between a's last beat and b's first",
        ms(a_last, run_b.start)
    );
    assert_eq!(b.wait_exit(START).code(), Some(0), "{}", b.log_text());
    match fault {
        Fault::Kill => assert_eq!(a.wait_exit(START).code(), None, "a died of SIGKILL"),
        Fault::Freeze | Fault::Partition => {
            if fault == Fault::Freeze {
                a.signal(Signal::SIGCONT);
            } else {
                proxy.heal();
            }
            let code = a.wait_exit(START).code();
            assert_eq!(
                code,
                Some(123),
                "a lost the lock while CMD ran\n{}",
                a.log_text()
            );
        }
    }
    assert_eq!(a.runs().len(), 1, "a's CMD ran once");
    assert!(
        a.processes().is_empty(),
        "a left processes: {:?}",
        a.processes()
    );
    assert_one_at_a_time(&[&a.beats, &b.beats]);
    assert!(lock_ids(&zk, path).is_empty(), "no node left behind");
}

/// `--permits 4 --weight N`: a (3) holds; b (2) does not fit beside it
/// and waits; c (1), queued after b, would fit beside a but does not
/// overtake b. A weight above the permits is exit 125, before queueing.
fn weighted_permits_in_arrival_order(transport: &str) {
    let server = server();
    let zk = server.connect_string();
    let dir = tempdir();
    let path = "/locks/weights";
    let w = |n: &'static str| -> Vec<&'static str> { vec!["--permits", "4", "--weight", n] };
    let (wa, wb, wc) = (w("3"), w("2"), w("1"));
    let queued = [("a", &wa[..]), ("b", &wb[..]), ("c", &wc[..])];
    let holders = one_after_another(&zk, path, transport, dir.path(), &queued, 1500);
    let runs: Vec<crate::support::Run> = holders.iter().map(|h| h.runs()[0]).collect();
    assert!(
        runs[1].start > runs[0].last,
        "b (2) waits for a (3): {runs:#?}"
    );
    assert!(
        runs[2].start > runs[0].last,
        "c (1) does not overtake b, though it fits beside a: {runs:#?}"
    );
    assert!(lock_ids(&zk, path).is_empty(), "no node left behind");

    let mut too_heavy = lock_args(
        &zk,
        path,
        "x",
        transport,
        &["--permits", "2", "--weight", "3"],
    );
    too_heavy.extend(["--".into(), "true".into()]);
    let refs: Vec<&str> = too_heavy.iter().map(String::as_str).collect();
    let out = zkelect(&refs, START);
    assert_exit(
        "a weight above the permits",
        out.code(),
        125,
        &out.stderr,
        &[],
    );
    assert!(lock_ids(&zk, path).is_empty(), "nothing queued");
}

/// A command that says when it started and, on SIGUSR1, writes `asked`
/// and exits 0 (a holder that honours a revocation request).
fn honouring(dir: &std::path::Path) -> (Vec<String>, std::path::PathBuf, std::path::PathBuf) {
    let (started, asked) = (dir.join("started"), dir.join("asked"));
    let script = format!(
        "trap 'echo asked > {}; exit 0' USR1; echo up > {}; while :; do sleep 0.05; done",
        asked.display(),
        started.display()
    );
    (vec!["sh".into(), "-c".into(), script], started, asked)
}

/// Starts `zkelect lock` with its log in `log`.
fn spawn_lock(args: &[String], log: &std::path::Path) -> std::process::Child {
    let file = std::fs::File::create(log).expect("a log file");
    std::process::Command::new(zkelect_bin())
        .args(args)
        .env("ZKELECT_LOG", "info")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(file)
        .spawn()
        .expect("spawn zkelect lock")
}

fn wait_child(child: &mut std::process::Child, what: &str) -> Option<i32> {
    wait_for(
        what,
        START,
        Duration::from_millis(20),
        || child.try_wait().ok().flatten(),
        String::new,
    )
    .code()
}

/// `lock --on-revoke SIGUSR1` and `revoke --ask`: the request reaches the
/// command as SIGUSR1, which exits 0 by its own choice, and `zkelect lock`
/// exits with that status; the next holder gets in. Without `--on-revoke`
/// the lock is not revocable: the request is delivered (exit 0) and goes
/// unheard, the command runs on, and `status` shows its node with the
/// request and no id (text and JSON); `revoke --node NAME` without an id
/// then forces it out. A request to an id with no node is exit 10.
fn revocation_requests_reach_the_command(transport: &str) {
    let server = server();
    let zk = server.connect_string();
    let dir = tempdir();
    let path = "/locks/revocable";
    let ask = |id: &str| {
        let args = [
            "revoke",
            "--connect",
            &zk,
            "--path",
            path,
            "--id",
            id,
            "--ask",
            "--transport",
            transport,
        ];
        zkelect(&args, START)
    };

    let (cmd, started, asked) = honouring(dir.path());
    let mut args = lock_args(&zk, path, "a", transport, &["--on-revoke", "SIGUSR1"]);
    args.push("--".into());
    args.extend(cmd);
    let a_log = dir.path().join("a.log");
    let mut a = spawn_lock(&args, &a_log);
    wait_for(
        "a's command to start",
        START,
        Duration::from_millis(20),
        || started.exists().then_some(()),
        String::new,
    );
    let out = ask("a");
    assert_exit("revoke --ask a", out.code(), 0, &out.stderr, &[]);
    assert_eq!(
        wait_child(&mut a, "a to let go"),
        Some(0),
        "the command's own status; a's log:\n{}",
        std::fs::read_to_string(&a_log).unwrap_or_default()
    );
    assert!(asked.exists(), "the command heard the request as SIGUSR1");
    assert!(lock_ids(&zk, path).is_empty(), "released");

    // Not revocable: delivered, unheard.
    let quiet = dir.path().join("quiet");
    std::fs::create_dir_all(&quiet).expect("a directory");
    let (cmd, started, asked) = honouring(&quiet);
    let mut args = lock_args(&zk, path, "b", transport, &[]);
    args.push("--".into());
    args.extend(cmd);
    let mut b = spawn_lock(&args, &quiet.join("b.log"));
    wait_for(
        "b's command to start",
        START,
        Duration::from_millis(20),
        || started.exists().then_some(()),
        String::new,
    );
    let out = ask("b");
    assert_exit("revoke --ask b", out.code(), 0, &out.stderr, &[]);
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        !asked.exists(),
        "a lock that is not revocable hears nothing"
    );
    assert!(b.try_wait().expect("b's status").is_none(), "b still holds");
    // The request is written into the node as Curator's (`__REVOKE__`),
    // where it stays while b holds.
    assert_eq!(lock_ids(&zk, path), ["__REVOKE__"]);
    // `status` shows the holder by its node, the request, and no id: the
    // request replaced the id the node held.
    let status = |extra: &[&str]| {
        let mut args = vec![
            "status",
            "--connect",
            &zk,
            "--path",
            path,
            "--recipe",
            "mutex",
            "--transport",
            transport,
        ];
        args.extend_from_slice(extra);
        let out = zkelect(&args, START);
        assert_exit("status", out.code(), 0, &out.stderr, &[]);
        out.stdout
    };
    let table = status(&[]);
    let row = table.lines().nth(1).unwrap_or_default();
    assert!(
        row.contains("HOLDER")
            && row.contains("(id unknown)")
            && row.contains("revocation requested"),
        "{table}"
    );
    assert!(!table.contains("__REVOKE__"), "{table}");
    let view: serde_json::Value = serde_json::from_str(status(&["--json"]).trim()).expect("JSON");
    let holder = &view["queue"][0];
    assert_eq!(holder["leader"], true, "{view}");
    assert_eq!(holder["identity"], "revocation_request", "{view}");
    assert_eq!(holder.get("id"), None, "{view}");
    let node = holder["node"].as_str().unwrap_or_default().to_owned();
    assert!(!node.is_empty() && row.contains(&node), "{view}\n{table}");
    let out = ask("nobody");
    assert_exit(
        "revoke --ask of an unknown id",
        out.code(),
        10,
        &out.stderr,
        &[],
    );
    // Its id gone from the node, the holder is forced out by its node's
    // name alone: it loses the lock while its command runs (123).
    let out = zkelect(
        &[
            "revoke",
            "--connect",
            &zk,
            "--path",
            path,
            "--node",
            &node,
            "--transport",
            transport,
        ],
        START,
    );
    assert_exit("revoke --node", out.code(), 0, &out.stderr, &[]);
    assert_eq!(wait_child(&mut b, "b to lose its lock"), Some(123));
    assert!(lock_ids(&zk, path).is_empty(), "released");
}

/// `lock --path A --path B`: two multi-locks given the paths in opposite
/// orders and a lone lock on B, started together, all finish (no deadlock)
/// and no two commands ever run at once (each pair shares B); the command
/// finds both tokens in ZKELECT_FENCING_TOKENS in sorted order. One waiting
/// past --timeout while B is held exits 124 and leaves no node on A or B.
fn multi_lock(transport: &str) {
    let server = server();
    let zk = server.connect_string();
    let dir = tempdir();
    let (a, b) = ("/locks/multi-a", "/locks/multi-b");
    let spawn = |label: &str, first: &str, more: &[&str]| {
        Candidate::spawn(
            dir.path(),
            label,
            &lock_args(&zk, first, label, transport, more),
            ChildKind::Lives(1200),
        )
    };
    let mut holders = [
        spawn("ab", a, &["--path", b]),
        spawn("ba", b, &["--path", a]),
        spawn("b", b, &[]),
    ];
    for h in &mut holders {
        let status = h.wait_exit(START);
        assert_exit(&h.label, status.code(), 0, &h.log_text(), &[]);
    }
    let runs = assert_one_at_a_time(
        &holders
            .iter()
            .map(|h| h.beats.as_path())
            .collect::<Vec<_>>(),
    );
    assert_eq!(runs.len(), 3, "every command ran once: {runs:#?}");
    assert!(
        lock_ids(&zk, a).is_empty() && lock_ids(&zk, b).is_empty(),
        "released"
    );

    // The tokens, as the command finds them: sorted by path.
    let seen = dir.path().join("tokens");
    let script = format!(
        "printf '%s|%s' \"$ZKELECT_FENCING_TOKENS\" \"$ZKELECT_FENCING_TOKEN\" > {}",
        seen.display()
    );
    let mut args = lock_args(&zk, b, "t", transport, &["--path", a]);
    args.extend(["--".into(), "sh".into(), "-c".into(), script]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = zkelect(&refs, START);
    assert_exit("the token writer", out.code(), 0, &out.stderr, &[]);
    let text = std::fs::read_to_string(&seen).expect("the tokens written");
    let (pairs, first) = text.split_once('|').expect("two values");
    let pairs: Vec<(&str, u64)> = pairs
        .split(',')
        .map(|p| {
            let (path, token) = p.split_once('=').expect("PATH=TOKEN");
            (path, token.parse().expect("a number"))
        })
        .collect();
    assert_eq!(
        pairs.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
        [a, b],
        "{text}"
    );
    assert_eq!(
        first,
        pairs[0].1.to_string(),
        "the first part's token: {text}"
    );

    // On --timeout nothing is kept.
    let mut holder = Candidate::spawn(
        dir.path(),
        "holder",
        &lock_args(&zk, b, "holder", transport, &[]),
        ChildKind::Lives(6000),
    );
    holder.wait_run(1, START);
    let mut args = lock_args(&zk, a, "late", transport, &["--path", b, "--timeout", "1"]);
    args.extend(["--".into(), "true".into()]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = zkelect(&refs, START);
    assert_exit("the late multi-lock", out.code(), 124, &out.stderr, &[]);
    assert!(lock_ids(&zk, a).is_empty(), "nothing kept on {a}");
    assert_eq!(lock_ids(&zk, b), ["holder"], "only the holder on {b}");
    holder.kill_all();
    wait_for(
        "the holder's node to go",
        START,
        Duration::from_millis(50),
        || lock_ids(&zk, b).is_empty().then_some(()),
        || holder.log_text(),
    );

    // One part lost while the command runs: the command is stopped, the
    // other part released, and the exit status is 123.
    let mut lost = Candidate::spawn(
        dir.path(),
        "lost",
        &lock_args(&zk, a, "lost", transport, &["--path", b]),
        ChildKind::Lives(60_000),
    );
    lost.wait_run(1, START);
    let out = zkelect(
        &["revoke", "--connect", &zk, "--path", b, "--id", "lost"],
        START,
    );
    assert_exit("the forced revoke", out.code(), 0, &out.stderr, &[]);
    let status = lost.wait_exit(START);
    assert_exit(
        "the multi-lock losing a part",
        status.code(),
        123,
        &lost.log_text(),
        &[],
    );
    assert!(lock_ids(&zk, a).is_empty(), "the other part released");
}

/// The stopping signals (cli/src/signals.rs): after each, `zkelect lock`
/// exits 128+N (the README's exit-code table).
const STOPPING: [Signal; 4] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// Sends `signal` to `zkelect lock` alone and checks that it exits 128+N and
/// leaves no process behind (its command and watchdog included).
fn stop_with(c: &mut Candidate, signal: Signal) {
    c.signal(signal);
    let status = c.wait_exit(START);
    assert_exit(
        &format!("{} after {signal}", c.label),
        status.code(),
        128 + signal as i32,
        &c.log_text(),
        &[],
    );
    assert!(
        c.processes().is_empty(),
        "{} left processes behind: {:?}",
        c.label,
        c.processes()
    );
}

/// A multi-lock `lock --path A --path B` stopped by a signal while it
/// waits: each one holds its own A and waits on B behind a lone holder (its
/// node on both paths, read with a plain client) when it gets its signal;
/// it exits 128+N, its command never ran, and it left no node on A or B.
/// The holder held throughout.
fn multi_lock_signalled_while_waiting(transport: &str) {
    let server = server();
    let zk = server.connect_string();
    let dir = tempdir();
    let b = "/locks/signal-wait-b";
    let mut holder = Candidate::spawn(
        dir.path(),
        "holder",
        &lock_args(&zk, b, "holder", transport, &[]),
        ChildKind::Beats,
    );
    holder.wait_run(1, START);
    // Each A sorts before B, so each multi-lock takes its A, then queues on B.
    let mut waiting: Vec<(Candidate, Signal, String)> = STOPPING
        .into_iter()
        .enumerate()
        .map(|(i, signal)| {
            let (a, id) = (format!("/locks/signal-wait-a{i}"), format!("w{i}"));
            let c = Candidate::spawn(
                dir.path(),
                &format!("{id}-{signal}"),
                &lock_args(&zk, &a, &id, transport, &["--path", b]),
                ChildKind::Beats,
            );
            (c, signal, a)
        })
        .collect();
    let mut queue: Vec<String> = std::iter::once("holder".to_owned())
        .chain(waiting.iter().map(|(c, _, _)| c.id.clone()))
        .collect();
    wait_for(
        "every multi-lock to hold its A and wait on B",
        START,
        Duration::from_millis(50),
        || {
            let mut on_b = lock_ids(&zk, b);
            on_b.sort();
            let on_a = waiting
                .iter()
                .all(|(c, _, a)| lock_ids(&zk, a) == [c.id.as_str()]);
            (on_a && on_b == queue).then_some(())
        },
        || logs(&waiting.iter().map(|(c, _, _)| c).collect::<Vec<_>>()),
    );
    for (c, signal, a) in &mut waiting {
        stop_with(c, *signal);
        assert!(c.runs().is_empty(), "{}'s command never ran", c.label);
        assert!(
            lock_ids(&zk, a).is_empty(),
            "{}'s node on {a} is gone",
            c.label
        );
        queue.retain(|q| *q != c.id);
        let mut on_b = lock_ids(&zk, b);
        on_b.sort();
        assert_eq!(on_b, queue, "{}'s node on {b} is gone", c.label);
    }
    assert_eq!(holder.runs().len(), 1, "the holder held throughout");
    stop_with(&mut holder, Signal::SIGTERM);
    assert!(lock_ids(&zk, b).is_empty(), "no node left on {b}");
}

/// A multi-lock `lock --path A --path B` stopped by a signal while its
/// command runs (it has beaten twice): it exits 128+N, the command is dead,
/// and no node is left on A or B (so the next one, on the same paths, takes
/// both).
fn multi_lock_signalled_while_running(transport: &str) {
    let server = server();
    let zk = server.connect_string();
    let dir = tempdir();
    let (a, b) = ("/locks/signal-run-a", "/locks/signal-run-b");
    for (i, signal) in STOPPING.into_iter().enumerate() {
        let id = format!("r{i}");
        let mut c = Candidate::spawn(
            dir.path(),
            &format!("{id}-{signal}"),
            &lock_args(&zk, a, &id, transport, &["--path", b]),
            ChildKind::Beats,
        );
        let run = c.wait_beats(1, 2, START);
        stop_with(&mut c, signal);
        assert!(
            !alive(run.pid),
            "{}'s command (pid {}) is gone",
            c.label,
            run.pid
        );
        assert_eq!(c.runs().len(), 1, "{}'s command ran once", c.label);
        assert!(
            lock_ids(&zk, a).is_empty() && lock_ids(&zk, b).is_empty(),
            "{} left a node on {a} or {b}: {:?} {:?}",
            c.label,
            lock_ids(&zk, a),
            lock_ids(&zk, b)
        );
    }
}

/// `lock --acl ip:127.0.0.1:cdrwa --acl world:anyone:r`: while the command
/// runs, the holder's node and the queue's level carry exactly that list
/// as the server reports it; a malformed `--acl` is a usage error (125)
/// that never queues.
fn custom_acl(transport: &str) {
    let server = server();
    let zk = server.connect_string();
    let dir = tempdir();
    let path = "/locks/acl";
    let (started, log) = (dir.path().join("started"), dir.path().join("lock.log"));
    let mut args = lock_args(
        &zk,
        path,
        "a",
        transport,
        &["--acl", "ip:127.0.0.1:cdrwa", "--acl", "world:anyone:r"],
    );
    args.extend([
        "--".into(),
        "sh".into(),
        "-c".into(),
        format!(
            "echo up > {}; while :; do sleep 0.05; done",
            started.display()
        ),
    ]);
    let mut child = spawn_lock(&args, &log);
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_for(
        "the command to start",
        START,
        Duration::from_millis(20),
        || started.exists().then_some(()),
        log_text,
    );
    let want = vec!["ip:127.0.0.1:31".to_owned(), "world:anyone:1".to_owned()];
    let acls = acls_under(&zk, path);
    assert_eq!(acls.len(), 2, "the level and one node: {acls:?}");
    for (node, acl) in &acls {
        assert_eq!(acl, &want, "the ACL of {path}/{node}\n{}", log_text());
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("a pid")),
        Signal::SIGTERM,
    )
    .expect("SIGTERM to zkelect lock");
    assert_eq!(
        wait_child(&mut child, "zkelect lock to stop"),
        Some(143),
        "{}",
        log_text()
    );
    assert!(lock_ids(&zk, path).is_empty(), "the lock is released");

    for bad in ["digest:svc:cdrwa", "world:anyone:r", "ip:10.0.0.0/33:cdrwa"] {
        let mut args = lock_args(&zk, "/locks/acl-bad", "b", transport, &["--acl", bad]);
        args.extend(["--".into(), "true".into()]);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = zkelect(&refs, START);
        assert_exit(
            &format!("lock --acl {bad}"),
            out.code(),
            125,
            &out.stderr,
            &["--acl"],
        );
    }
    assert!(
        acls_under(&zk, "/locks/acl-bad").is_empty(),
        "a refused --acl creates nothing"
    );
}

macro_rules! on_both_transports {
    ($($name:ident => $body:expr;)*) => {
        mod zookeeper_async {
            use super::*;
            $(#[test] fn $name() { let transport = "zookeeper-async"; $body(transport) })*
        }
        mod zookeeper_client {
            use super::*;
            $(#[test] fn $name() { let transport = "zookeeper-client"; $body(transport) })*
        }
    };
}

on_both_transports! {
    exit_codes_pass_through_and_report_the_wrappers_own => exit_codes;
    holders_take_turns_in_arrival_order_one_at_a_time => fifo_one_at_a_time;
    five_processes_twenty_rounds_one_holder_at_a_time_in_arrival_order => five_processes_twenty_rounds;
    two_permits_let_two_hold_and_the_third_wait => two_permits_among_three;
    readers_share_and_writers_exclude_in_arrival_order => readers_share_writers_exclude;
    weighted_permits_hold_in_arrival_order_and_never_exceed_k => weighted_permits_in_arrival_order;
    a_revocation_request_reaches_the_command_as_its_signal => revocation_requests_reach_the_command;
    multi_locks_in_opposite_orders_and_a_lone_lock_never_overlap_and_all_finish => multi_lock;
    a_signal_to_a_waiting_multi_lock_exits_128_plus_n_and_leaves_no_node => multi_lock_signalled_while_waiting;
    a_signal_to_a_running_multi_lock_stops_its_command_and_leaves_no_node => multi_lock_signalled_while_running;
    a_custom_acl_is_the_nodes_acl_and_a_malformed_one_is_125 => custom_acl;
    killed_holders_cmd_never_overlaps_the_next => |t| no_overlap_under(Fault::Kill, t);
    frozen_holders_cmd_never_overlaps_the_next_and_it_exits_123 => |t| no_overlap_under(Fault::Freeze, t);
    partitioned_holders_cmd_never_overlaps_the_next_and_it_exits_123 => |t| no_overlap_under(Fault::Partition, t);
}

/// The witness catches a planted bug: two `zkelect lock` processes on two
/// different paths (no exclusion between them) run their CMDs at once, and
/// the overlap check must say so.
#[test]
#[should_panic(expected = "two children alive at once")]
fn canary_the_overlap_witness_catches_two_holders_at_once() {
    let server = server();
    let zk = server.connect_string();
    let dir = tempdir();
    let transport = "zookeeper-async";
    let mut a = Candidate::spawn(
        dir.path(),
        "a",
        &lock_args(&zk, "/locks/canary-a", "a", transport, &[]),
        ChildKind::Lives(1500),
    );
    let mut b = Candidate::spawn(
        dir.path(),
        "b",
        &lock_args(&zk, "/locks/canary-b", "b", transport, &[]),
        ChildKind::Lives(1500),
    );
    assert_eq!(a.wait_exit(START).code(), Some(0), "{}", a.log_text());
    assert_eq!(b.wait_exit(START).code(), Some(0), "{}", b.log_text());
    assert_one_at_a_time(&[&a.beats, &b.beats]);
}
