//! Every stopping signal cleans up, at every moment of `zkelect run`'s and
//! `zkelect lock`'s life, against a real ZooKeeper ensemble: SIGTERM, SIGINT,
//! SIGHUP and SIGQUIT, each
//!
//! * at start-up: the instant the process catches its signals (its
//!   `/proc/<pid>/status` says so), whatever it is doing then — parsing its
//!   command line, connecting or joining — and while it connects through a
//!   black hole;
//! * while waiting: a `run --lead-timeout 60000` follower behind a leader, a
//!   `lock` waiter behind a holder;
//! * while holding: the command gets SIGTERM and the next in the queue takes
//!   over at once.
//!
//! Each time the process exits within [`PROMPT`] of the signal with its
//! documented code (`run` 0, `lock` 128+N: cli/src/exit.rs), and its node is
//! gone when it has exited (read with a plain client). Every signal runs on
//! both transports (zookeeper-async, zookeeper-client) in every phase, all
//! on one 3-server ensemble (every member in the connect string) that the
//! phases share.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use zkelect_tests::{Proxy, ZkEnsemble};

use crate::support::{catches, node_ids, wait_for, Candidate, ChildKind, Observer, SESSION_MS};

/// The stopping signals (cli/src/signals.rs).
const SIGNALS: [Signal; 4] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];
const TRANSPORTS: [&str; 2] = ["zookeeper-async", "zookeeper-client"];
/// How soon after its signal a process must have exited, its node deleted.
const PROMPT: Duration = Duration::from_secs(1);
/// Bound for a process that starts and joins (debug binaries on 2 cores).
const START: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    Run,
    Lock,
}

impl Verb {
    fn word(self) -> &'static str {
        match self {
            Verb::Run => "run",
            Verb::Lock => "lock",
        }
    }

    /// The documented exit code after `signal`.
    fn code(self, signal: Signal) -> i32 {
        match self {
            Verb::Run => 0,
            Verb::Lock => 128 + signal as i32,
        }
    }
}

/// Every phase, on one ensemble: its start-up is the costly part.
#[test]
fn every_signal_at_every_moment_of_run_and_lock_on_a_three_server_ensemble() {
    let ensemble = ZkEnsemble::start().unwrap_or_else(|e| panic!("cannot start the ensemble: {e}"));
    let zk = ensemble.connect_string();
    a_signal_at_start_up_exits_with_its_code_and_leaves_no_node(&ensemble, &zk);
    a_signal_while_waiting_deletes_the_node_at_once(&zk);
    a_signal_while_holding_stops_the_command_and_hands_over_at_once(&zk);
}

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("zkelect-signals-test-")
        .tempdir()
        .expect("a temporary directory")
}

/// The options before `--` of one `zkelect run` or `zkelect lock`.
fn args(
    verb: Verb,
    zk: &str,
    path: &str,
    id: &str,
    transport: &str,
    extra: &[&str],
) -> Vec<String> {
    let mut args: Vec<String> = [
        verb.word(),
        "--connect",
        zk,
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

/// Signals `c` and checks that it exits within [`PROMPT`] with the code
/// `verb` documents; returns how long it took.
fn stop(c: &mut Candidate, verb: Verb, signal: Signal) -> Duration {
    let sent = Instant::now();
    c.signal(signal);
    let status = c.wait_exit(START);
    let took = sent.elapsed();
    assert_eq!(
        status.code(),
        Some(verb.code(signal)),
        "{} after {signal}: {status}\n{}",
        c.label,
        c.log_text()
    );
    assert!(
        took <= PROMPT,
        "{} took {took:?} to exit after {signal}\n{}",
        c.label,
        c.log_text()
    );
    assert!(
        c.processes().is_empty(),
        "{} left processes behind: {:?}",
        c.label,
        c.processes()
    );
    took
}

/// Waits until `c` catches every stopping signal.
fn wait_caught(c: &Candidate) {
    wait_for(
        &format!("{} to catch its signals", c.label),
        START,
        Duration::from_micros(200),
        || catches(c.pid(), &SIGNALS).then_some(()),
        || c.log_text(),
    );
}

fn a_signal_at_start_up_exits_with_its_code_and_leaves_no_node(ensemble: &ZkEnsemble, zk: &str) {
    let dir = tempdir();
    let mut took = Vec::new();
    for transport in TRANSPORTS {
        for verb in [Verb::Run, Verb::Lock] {
            for signal in SIGNALS {
                let label = format!("{}-{transport}-{signal}", verb.word());
                let path = format!("/start/{}", verb.word());
                let mut c = Candidate::spawn(
                    dir.path(),
                    &label,
                    &args(verb, zk, &path, &label, transport, &[]),
                    ChildKind::Beats,
                );
                // The earliest moment a signal can be caught at all.
                wait_caught(&c);
                took.push(stop(&mut c, verb, signal));
            }
        }
    }
    for verb in ["run", "lock"] {
        assert_eq!(
            node_ids(zk, &format!("/start/{verb}")),
            Vec::<String>::new(),
            "a node left behind under /start/{verb}"
        );
    }
    println!("exits after a signal at start-up: {took:?}");

    // Connecting through a black hole (the server accepts, never answers):
    // the signal cuts the connect short.
    let hole = Proxy::start(ensemble.servers()[0].addr()).expect("a proxy");
    hole.blackhole();
    let through = hole.connect_string();
    let mut connecting = Vec::new();
    for (verb, signal, transport) in [
        (Verb::Run, Signal::SIGTERM, "zookeeper-async"),
        (Verb::Lock, Signal::SIGHUP, "zookeeper-client"),
    ] {
        let label = format!("{}-connecting-{signal}", verb.word());
        let c = Candidate::spawn(
            dir.path(),
            &label,
            &args(verb, &through, "/start/hole", &label, transport, &[]),
            ChildKind::Beats,
        );
        connecting.push((c, verb, signal));
    }
    wait_for(
        "both to be connecting",
        START,
        Duration::from_millis(20),
        || (hole.active_count() >= 2).then_some(()),
        String::new,
    );
    for (c, verb, signal) in &mut connecting {
        stop(c, *verb, *signal);
        assert!(c.runs().is_empty(), "{}'s command never ran", c.label);
    }
}

fn a_signal_while_waiting_deletes_the_node_at_once(zk: &str) {
    let dir = tempdir();
    for verb in [Verb::Run, Verb::Lock] {
        let path = format!("/waiting/{}", verb.word());
        let mut first = Candidate::spawn(
            dir.path(),
            &format!("{}-first", verb.word()),
            &args(verb, zk, &path, "first", TRANSPORTS[0], &[]),
            ChildKind::Beats,
        );
        first.wait_run(1, START);
        let mut waiting = Vec::new();
        let every = TRANSPORTS
            .into_iter()
            .flat_map(|t| SIGNALS.into_iter().map(move |s| (t, s)));
        for (i, (transport, signal)) in every.enumerate() {
            let id = format!("w{i}");
            let extra: &[&str] = match verb {
                Verb::Run => &["--lead-timeout", "60000"],
                Verb::Lock => &[],
            };
            let c = Candidate::spawn(
                dir.path(),
                &format!("{}-{id}-{transport}-{signal}", verb.word()),
                &args(verb, zk, &path, &id, transport, extra),
                ChildKind::Beats,
            );
            waiting.push((c, signal, id));
        }
        let mut queue: Vec<String> = std::iter::once("first".to_owned())
            .chain(waiting.iter().map(|(_, _, id)| id.clone()))
            .collect();
        wait_for(
            &format!("{path} to hold {queue:?}"),
            START,
            Duration::from_millis(50),
            || {
                let mut now = node_ids(zk, &path);
                now.sort();
                (now == queue).then_some(())
            },
            String::new,
        );
        for (c, signal, id) in &mut waiting {
            stop(c, verb, *signal);
            assert!(c.runs().is_empty(), "{}'s command never ran", c.label);
            queue.retain(|q| q != id);
            let mut now = node_ids(zk, &path);
            now.sort();
            assert_eq!(now, queue, "{}'s node is gone once it has exited", c.label);
        }
        assert_eq!(first.runs().len(), 1, "the first held throughout");
        stop(&mut first, verb, Signal::SIGTERM);
        assert!(node_ids(zk, &path).is_empty(), "no node left behind");
    }
}

fn a_signal_while_holding_stops_the_command_and_hands_over_at_once(zk: &str) {
    let dir = tempdir();
    let observer = Observer::start(dir.path());
    for verb in [Verb::Run, Verb::Lock] {
        let path = format!("/holding/{}", verb.word());
        let mut queued: Vec<(Candidate, Signal)> = Vec::new();
        let every = TRANSPORTS
            .into_iter()
            .flat_map(|t| SIGNALS.into_iter().map(move |s| (t, s)));
        for (i, (transport, signal)) in every.enumerate() {
            let id = format!("h{i}");
            let c = Candidate::spawn(
                dir.path(),
                &format!("{}-{id}-{transport}-{signal}", verb.word()),
                &args(verb, zk, &path, &id, transport, &[]),
                ChildKind::Beats,
            );
            // Queued in this order, so that they lead in it.
            wait_for(
                &format!("{id} to queue"),
                START,
                Duration::from_millis(20),
                || node_ids(zk, &path).contains(&id).then_some(()),
                || c.log_text(),
            );
            queued.push((c, signal));
        }
        for (c, signal) in &mut queued {
            let run = c.wait_beats(1, 2, START);
            stop(c, verb, *signal);
            observer.wait_death(
                run.pid,
                &format!("{}'s command to be dead", c.label),
                PROMPT,
            );
            assert!(
                !node_ids(zk, &path).contains(&c.id),
                "{}'s node is gone once it has exited",
                c.label
            );
        }
        // Each led in turn, once, and handed over at once.
        let firsts: Vec<usize> = queued.iter().map(|(c, _)| c.runs().len()).collect();
        assert_eq!(firsts, [1; 8]);
        assert!(node_ids(zk, &path).is_empty(), "no node left behind");
    }
}
