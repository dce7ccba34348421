//! Operations on a 3-server ensemble with members down, on both transports:
//!
//! | scenario | test |
//! |---|---|
//! | one member stopped, one frozen (SIGSTOP), one unresolvable name: `zkelect run`, `lock`, `status`, `revoke` and the library's `Session::connect` start within 2 s | `start_through_a_member_down` |
//! | 50 servers listed, 49 of them accepting TCP and never answering: starts within 2 s | `start_through_a_member_down` |
//! | a rolling restart of all three members under 5 `zkelect run` candidates (both transports in one queue): never two children at once, judged by each child's own log of when it ran with which token; no candidate stuck or exited | `rolling_restart_under_five_run_candidates` |
//!
//! All on one ensemble, in one test, one part after the other.
//!
//! The frozen member is listed first (zookeeper-async tries servers in the
//! order given), the unresolvable name too.

mod support;

use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use zkelect_tests::{TransportKind, ZkEnsemble};

use support::{assert_one_at_a_time, mono_ns, queue_ids, wait_for, zkelect, Candidate, ChildKind};

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
