//! Operations on a 3-server ensemble with members down, on both transports:
//!
//! | scenario | test (one part of `members_down_on_one_ensemble`) |
//! |---|---|
//! | a chroot that names no node, and one that names an ephemeral node: `zkelect run` exits 12 and `lock` 125 (its message naming the kind, a missing or ephemeral chroot), naming the chroot, within 2 s, after fewer than 50 requests in all three members (`mntr`'s `zk_packets_received`, summed), and nothing is created | `a_missing_or_ephemeral_chroot` |
//! | one member stopped, one frozen (SIGSTOP), one unresolvable name, and an unresolvable name with a member frozen: `zkelect run`, `lock`, `status`, `revoke` and the library's `Session::connect` start within 2 s | `start_through_a_member_down` |
//! | 50 servers listed, 49 of them accepting TCP and never answering: starts within 2 s | `start_through_a_member_down` |
//! | a rolling restart of all three members under 5 `zkelect run` candidates (both transports in one queue): never two children at once, judged by each child's own log of when it ran with which token; no candidate exited; afterwards each leader in turn is stopped with SIGTERM and every candidate takes over in queue order, so none is stuck (a follower whose watch did not survive a reconnection never would) | `rolling_restart_under_five_run_candidates` |
//!
//! All on one ensemble, in one test, one part after the other.
//!
//! The frozen member is listed first (zookeeper-async tries servers in the
//! order given), the unresolvable name too.

use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use zkelect_tests::{TransportKind, ZkEnsemble, ZkServer};
use zookeeper_async::{Acl, CreateMode, WatchedEvent, ZooKeeper};

use crate::support::{
    assert_one_at_a_time, mono_ns, queue_ids, wait_for, zkelect, Candidate, ChildKind,
};

/// The bound on a start with a minority down (the machine's grace is 250 ms;
/// the rest is margin for debug binaries on a loaded 2-core machine).
const START: Duration = Duration::from_secs(2);
/// Generous bound for what must happen eventually.
const EVENTUALLY: Duration = Duration::from_secs(30);
const SESSION_MS: &str = "4000";

fn ensemble() -> ZkEnsemble {
    ZkEnsemble::start().unwrap_or_else(|e| panic!("cannot start the ensemble: {e}"))
}

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("zkelect-members-down-")
        .tempdir()
        .expect("a temporary directory")
}

/// Each command must finish with `code` within [`START`] (a hang or a slow
/// start fails); returns how long each took.
fn starts(connect: &str, transport: TransportKind, label: &str) -> Vec<(String, Duration)> {
    let path = format!("/md/{label}-{}", transport.name());
    let lock_path = format!("{path}-lock");
    let base = |sub: &'static str, path: &str| -> Vec<String> {
        [
            sub,
            "--connect",
            connect,
            "--path",
            path,
            "--transport",
            transport.name(),
            "--session-timeout",
            SESSION_MS,
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let with = |mut args: Vec<String>, more: &[&str]| {
        args.extend(more.iter().map(|s| (*s).to_owned()));
        args
    };
    let commands: [(&str, Vec<String>, i32); 4] = [
        ("status", base("status", &path), 0),
        // The command exits 0 while leading: `run` exits 0.
        (
            "run",
            with(base("run", &path), &["--id", "a", "--", "true"]),
            0,
        ),
        ("lock", with(base("lock", &lock_path), &["--", "true"]), 0),
        // Nobody by that id: exit 10, after reading the queue.
        (
            "revoke",
            with(base("revoke", &path), &["--id", "nobody"]),
            10,
        ),
    ];
    let mut took = Vec::new();
    for (name, args, code) in commands {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = zkelect(&args, Duration::from_secs(30));
        assert_eq!(
            out.code(),
            Some(code),
            "{label} {transport}: `zkelect {}` exited {:?}\n{}",
            args.join(" "),
            out.code(),
            out.stderr
        );
        assert!(
            out.took < START,
            "{label} {transport}: `zkelect {name}` took {:?}\n{}",
            out.took,
            out.stderr
        );
        took.push((name.to_owned(), out.took));
    }
    took
}

/// `Session::connect` of the library, then a close.
fn library_starts(connect: &str, transport: TransportKind, label: &str) -> Duration {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let started = Instant::now();
        let session = tokio::time::timeout(
            Duration::from_secs(30),
            zkelect::Session::connect(transport.settings(connect, Duration::from_secs(4), None)),
        )
        .await
        .unwrap_or_else(|_| panic!("{label} {transport}: Session::connect hung"))
        .unwrap_or_else(|e| panic!("{label} {transport}: Session::connect: {e}"));
        let took = started.elapsed();
        session.close().await;
        assert!(
            took < START,
            "{label} {transport}: Session::connect took {took:?}"
        );
        took
    })
}

fn start_through_a_member_down(ensemble: &ZkEnsemble, transport: TransportKind) {
    let live: Vec<String> = ensemble
        .servers()
        .iter()
        .map(|s| s.connect_string())
        .collect();
    let all = live.join(",");

    let mut report = Vec::new();
    let mut check = |label: &str, connect: &str| {
        let mut took = starts(connect, transport, label);
        took.push(("library".into(), library_starts(connect, transport, label)));
        report.push(format!("{label}: {took:?}"));
    };

    ensemble.kill(0).expect("stop member 0");
    check("stopped", &all);
    ensemble.restart(0).expect("restart member 0");
    ensemble.wait_for_leader(EVENTUALLY).expect("a leader");

    ensemble.pause(0).expect("freeze member 0");
    check("frozen", &all);
    ensemble.resume(0).expect("resume member 0");

    let unresolvable = format!("zkelect-no-such-host.invalid:2181,{},{}", live[1], live[2]);
    check("unresolvable", &unresolvable);

    // Both at once: a name that does not resolve and a silent member, each
    // listed before the live ones.
    ensemble.pause(0).expect("freeze member 0");
    check(
        "unresolvable+frozen",
        &format!("zkelect-no-such-host.invalid:2181,{all}"),
    );
    ensemble.resume(0).expect("resume member 0");

    // 49 listeners that never accept: the kernel completes every TCP
    // handshake (up to the backlog) and nothing ever answers.
    let silent: Vec<TcpListener> = (0..49)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    let mut fifty: Vec<String> = silent
        .iter()
        .map(|l| l.local_addr().expect("addr").to_string())
        .collect();
    fifty.push(live[2].clone());
    check("fifty", &fifty.join(","));

    println!("{transport}:\n  {}", report.join("\n  "));
}

/// Everything here on one ensemble, one part after the other (a paused
/// member must not be another test's; one ensemble per binary keeps the
/// suite's JVMs few).
#[test]
fn members_down_on_one_ensemble() {
    let ensemble = ensemble();
    // First, while no other part has left an ephemeral node behind.
    a_missing_or_ephemeral_chroot(&ensemble);
    for transport in TransportKind::ALL {
        start_through_a_member_down(&ensemble, transport);
    }
    rolling_restart_under_five_run_candidates(&ensemble);
}

/// Five `zkelect run` candidates (three on zookeeper-async, two on
/// zookeeper-client, one queue) while each member of the ensemble is
/// restarted in turn: never two children at once, every candidate still
/// queued and running, and the leader's child beats after the last restart.
fn rolling_restart_under_five_run_candidates(ensemble: &ZkEnsemble) {
    let connect = ensemble.connect_string();
    let dir = tempdir();
    let path = "/md/rolling";
    let transports = [
        TransportKind::ZookeeperAsync,
        TransportKind::ZookeeperClient,
        TransportKind::ZookeeperAsync,
        TransportKind::ZookeeperClient,
        TransportKind::ZookeeperAsync,
    ];
    let mut candidates: Vec<Candidate> = transports
        .iter()
        .enumerate()
        .map(|(i, transport)| {
            let id = format!("c{i}");
            let args: Vec<String> = [
                "run",
                "--connect",
                &connect,
                "--path",
                path,
                "--id",
                &id,
                "--session-timeout",
                SESSION_MS,
                "--transport",
                transport.name(),
            ]
            .map(str::to_owned)
            .to_vec();
            Candidate::spawn(dir.path(), &id, &args, ChildKind::Beats)
        })
        .collect();
    let logs = |candidates: &[Candidate]| {
        candidates
            .iter()
            .map(Candidate::log_text)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let queued = |candidates: &[Candidate]| {
        wait_for(
            "5 candidates queued",
            EVENTUALLY,
            Duration::from_millis(100),
            || (queue_ids(&connect, path).len() == 5).then_some(()),
            || logs(candidates),
        );
    };
    queued(&candidates);
    wait_for(
        "the leader's child beating",
        EVENTUALLY,
        Duration::from_millis(20),
        || {
            candidates
                .iter()
                .any(|c| c.runs().first().is_some_and(|r| r.beats >= 3))
                .then_some(())
        },
        || logs(&candidates),
    );

    for member in 0..ensemble.len() {
        let before = mono_ns();
        ensemble
            .restart(member)
            .unwrap_or_else(|e| panic!("restart member {member}: {e}"));
        ensemble
            .wait_for_leader(EVENTUALLY)
            .unwrap_or_else(|e| panic!("a leader after restarting {member}: {e}"));
        for c in &mut candidates {
            assert!(
                c.exited().is_none(),
                "{} exited during the restart of member {member}\n{}",
                c.label,
                c.log_text()
            );
        }
        // Someone's child beats again after the restart: not stuck.
        wait_for(
            &format!("a child beating after the restart of member {member}"),
            EVENTUALLY,
            Duration::from_millis(20),
            || {
                candidates
                    .iter()
                    .any(|c| c.runs().last().is_some_and(|r| r.last > before))
                    .then_some(())
            },
            || logs(&candidates),
        );
    }
    queued(&candidates);
    for c in &mut candidates {
        assert!(c.exited().is_none(), "{} exited\n{}", c.label, c.log_text());
    }
    every_candidate_takes_over(&connect, path, &mut candidates, mono_ns());
    let files: Vec<&Path> = candidates.iter().map(|c| c.beats.as_path()).collect();
    let runs = assert_one_at_a_time(&files);
    println!(
        "rolling restart: {} runs, tokens {:?}",
        runs.len(),
        runs.iter()
            .map(|(name, r)| (name.as_str(), r.token))
            .collect::<Vec<_>>()
    );
    for c in &mut candidates {
        c.kill_all();
    }
}

/// Each leader in turn stopped with SIGTERM (`run` exits 0), until every
/// candidate has led once since `since`: each one's session, and its watch
/// on the node before its own, lived through the restarts. The first in the
/// queue leads already (its child beats after `since`); each next one's
/// child starts after its predecessor was stopped.
fn every_candidate_takes_over(connect: &str, path: &str, candidates: &mut [Candidate], since: i64) {
    let order = queue_ids(connect, path);
    let mut stopped_at = since;
    for (n, id) in order.iter().enumerate() {
        let i = candidates
            .iter()
            .position(|c| &c.id == id)
            .unwrap_or_else(|| panic!("no candidate has the id {id}: {order:?}"));
        let after = stopped_at;
        wait_for(
            &format!("{id} leading after the restarts"),
            EVENTUALLY,
            Duration::from_millis(5),
            || {
                candidates[i]
                    .runs()
                    .last()
                    .filter(|r| {
                        if n == 0 {
                            r.last > after
                        } else {
                            r.start > after
                        }
                    })
                    .map(|_| ())
            },
            || {
                candidates
                    .iter()
                    .map(Candidate::log_text)
                    .collect::<Vec<_>>()
                    .join("\n")
            },
        );
        if n + 1 < order.len() {
            stopped_at = mono_ns();
            candidates[i].signal(Signal::SIGTERM);
            let status = candidates[i].wait_exit(EVENTUALLY);
            assert_eq!(
                status.code(),
                Some(0),
                "{id}, stopped by SIGTERM while leading\n{}",
                candidates[i].log_text()
            );
        }
    }
}

/// Holds an ephemeral node at `path` on its own session until dropped.
struct Ephemeral {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Ephemeral {
    fn hold(connect: &str, path: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready, created) = mpsc::channel();
        let (connect, node, held) = (connect.to_owned(), path.to_owned(), Arc::clone(&stop));
        let thread = thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let client = ZooKeeper::connect_with_retry_time(
                    &connect,
                    Duration::from_millis(crate::support::SESSION_MS),
                    |_: WatchedEvent| {},
                    Duration::from_millis(100),
                )
                .await
                .expect("a plain client");
                let made = client
                    .create(
                        &node,
                        Vec::new(),
                        Acl::open_unsafe().clone(),
                        CreateMode::Ephemeral,
                    )
                    .await;
                ready
                    .send(made.map(|_| ()).map_err(|e| e.to_string()))
                    .expect("the test waits");
                while !held.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let _ = client.close().await;
            });
        });
        created
            .recv()
            .expect("the holder answers")
            .unwrap_or_else(|e| panic!("create the ephemeral {path}: {e}"));
        Ephemeral {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Ephemeral {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A number from a member's `mntr`.
fn mntr(server: &ZkServer, key: &str) -> u64 {
    let mntr = server.mntr().expect("mntr");
    mntr.get(key)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {mntr:?}"))
}

/// The requests the ensemble's members have received so far, in all.
fn packets(ensemble: &ZkEnsemble) -> u64 {
    ensemble
        .servers()
        .iter()
        .map(|s| mntr(s, "zk_packets_received"))
        .sum()
}

/// Each member's count of nodes.
fn znodes(ensemble: &ZkEnsemble) -> Vec<u64> {
    ensemble
        .servers()
        .iter()
        .map(|s| mntr(s, "zk_znode_count"))
        .collect()
}

/// A connect string whose chroot cannot hold the queue: a chroot that names
/// no node, and one that names an ephemeral node (which cannot have
/// children). `zkelect run` and `zkelect lock` stop with a clear error that
/// names the chroot, exit 12 (`run`) or 125 with the kind in words in its message
/// (`lock`), within 2 s and after fewer than 50 requests in all (each
/// member's own count), on both transports, and create nothing. Before, the
/// core created the topmost level again at once, forever: some 3,400
/// requests a second until the connect timeout.
fn a_missing_or_ephemeral_chroot(ensemble: &ZkEnsemble) {
    /// `zkelect run`'s exit code for a missing or ephemeral chroot.
    const NAMESPACE: i32 = 12;
    /// `zkelect lock`'s exit code for any failure before its command ran.
    const LOCK_FAILED: i32 = 125;
    let zk = ensemble.connect_string();
    let _held = Ephemeral::hold(&zk, "/eph");
    // Every member has applied the create before a command may read the
    // chroot there.
    let nodes = wait_for(
        "the ephemeral node on every member",
        EVENTUALLY,
        Duration::from_millis(20),
        || {
            let all_see_it = ensemble
                .servers()
                .iter()
                .all(|s| mntr(s, "zk_ephemerals_count") == 1);
            let nodes = znodes(ensemble);
            (all_see_it && nodes.windows(2).all(|w| w[0] == w[1])).then_some(nodes)
        },
        String::new,
    );
    for transport in TransportKind::ALL {
        for (chroot, says) in [
            ("/apps/x", "does not exist"),
            ("/eph", "is an ephemeral node"),
        ] {
            let connect = format!("{zk}{chroot}");
            let run = [
                "run",
                "--connect",
                &connect,
                "--path",
                "/svc/leader",
                "--id",
                "a",
                "--transport",
                transport.name(),
                "--",
                "sleep",
                "60",
            ];
            let lock = [
                "lock",
                "--connect",
                &connect,
                "--path",
                "/svc/lock",
                "--transport",
                transport.name(),
                "--",
                "true",
            ];
            for (args, code) in [(&run[..], NAMESPACE), (&lock[..], LOCK_FAILED)] {
                let what = format!("{} on {transport} with {chroot}", args[0]);
                let before = packets(ensemble);
                let out = zkelect(args, Duration::from_secs(20));
                let sent = packets(ensemble) - before;
                assert_eq!(out.code(), Some(code), "{what}:\n{}", out.stderr);
                assert!(
                    out.stderr.contains(&format!(
                        "the chroot {chroot} of --connect {connect} {says}"
                    )),
                    "{what}: the message names the chroot:\n{}",
                    out.stderr
                );
                if code == LOCK_FAILED {
                    // `lock` exits 125 for every failure before its command
                    // ran, and names the kind in words.
                    assert!(
                        out.stderr.contains(
                            "failed before the command ran (a missing or ephemeral chroot)"
                        ),
                        "{what}:\n{}",
                        out.stderr
                    );
                }
                assert!(out.took < START, "{what}: {:?}", out.took);
                assert!(sent < 50, "{what}: {sent} requests reached the members");
                println!("{what}: exit {code} in {:?}, {sent} requests", out.took);
            }
        }
    }
    // Nothing was made: not the missing chroot, nothing under either.
    assert_eq!(znodes(ensemble), nodes, "nodes were created");
}
