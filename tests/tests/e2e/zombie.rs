//! Zombie-proof leadership end to end, against a real ZooKeeper
//! server. Two `zkelect run` candidates (session timeout 4 s) supervise a
//! child that beats every 50 ms into its own file; the leading zkelect is then
//! frozen (SIGSTOP for twice the session timeout, then SIGCONT), killed
//! (SIGKILL), or cut off the network (a black hole for twice the session
//! timeout, then healed). In every case the successor's child starts, and only
//! after the old leader's child is dead: the lease watchdog (`zkelect __lease`,
//! cli/src/lease.rs, a process of its own) kills it when the lease zkelect can
//! no longer renew runs out, two thirds of the session timeout after the last
//! server reply, before the server can expire the session and elect anyone.
//!
//! Every timestamp is `CLOCK_MONOTONIC` (one clock for every process; see
//! `support/mod.rs`): the heartbeat files must not overlap (the old leader's
//! last beat is earlier than the successor's first), and the observer's
//! "first seen dead" of the old child (an upper bound of its death) must be
//! earlier than the successor's first line too.
//!
//! The safety tests (`*_is_stopped_*`) and the liveness tests (`*_stays_a_candidate_*`:
//! the old leader, once back, rejoins behind its successor and can lead again)
//! run the same scenario, so that a failure says which of the two broke.

use std::time::Duration;

use nix::sys::signal::Signal;
use zkelect_tests::{Proxy, ZkServer};

use crate::support::{
    assert_one_at_a_time, mono_ns, ms, queue_ids, run_args, wait_for, Candidate, ChildKind,
    Observer, Run, BEAT, SESSION_MS,
};

const START: Duration = Duration::from_secs(20);
const TAKEOVER: Duration = Duration::from_secs(20);
/// Two thirds of the session timeout: where the lease ends at the latest,
/// counted from the last server reply before the fault.
const LEASE_MS: f64 = SESSION_MS as f64 * 2.0 / 3.0;
/// Slack on top of [`LEASE_MS`] for the watchdog's and the observer's polling
/// on a loaded two-core machine (both poll every few milliseconds).
const SLACK_MS: f64 = 1_000.0;

fn logs(candidates: &[&Candidate]) -> String {
    candidates
        .iter()
        .map(|c| c.log_text())
        .collect::<Vec<_>>()
        .join("\n")
}

/// What happens to the leading zkelect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// SIGSTOP for twice the session timeout, then SIGCONT.
    Freeze,
    /// Its connection black-holed for twice the session timeout, then healed.
    Partition,
    /// SIGKILL.
    Kill,
}

/// A server, the old leader `a`, its successor `b`.
struct Scenario {
    server: ZkServer,
    /// `a` reaches the server through it.
    proxy: Proxy,
    _dir: tempfile::TempDir,
    observer: Observer,
    a: Candidate,
    b: Candidate,
    path: &'static str,
}

/// Starts the server, `a` (leading, through a proxy) and `b` (following).
fn leader_and_follower(kind: ChildKind) -> (Scenario, Run) {
    let server = ZkServer::start().unwrap_or_else(|e| panic!("cannot start ZooKeeper: {e}"));
    let proxy = Proxy::start(server.addr()).expect("start a proxy");
    let zk = server.connect_string();
    let dir = tempfile::Builder::new()
        .prefix("zkelect-zombie-test-")
        .tempdir()
        .expect("a temporary directory");
    let observer = Observer::start(dir.path());
    let path = "/svc/zombie";
    let a_args = run_args(&proxy.connect_string(), path, "a");
    let a = Candidate::spawn(dir.path(), "a", &a_args, kind);
    a.wait_run(1, START);
    let b = Candidate::spawn(dir.path(), "b", &run_args(&zk, path, "b"), kind);
    wait_for(
        "b queued behind a",
        START,
        Duration::from_millis(50),
        || (queue_ids(&zk, path) == ["a", "b"]).then_some(()),
        || logs(&[&a, &b]),
    );
    assert!(b.runs().is_empty(), "b follows: its child must not run");
    let run_a = a.wait_beats(1, 3, START);
    let scenario = Scenario {
        server,
        proxy,
        _dir: dir,
        observer,
        a,
        b,
        path,
    };
    (scenario, run_a)
}

/// Runs the scenario up to the successor's takeover, checks that the old
/// leader's child died first, then (for a freeze or a partition) waits out
/// twice the session timeout from the fault and undoes it. Returns the
/// scenario, b's first run, and when the fault was undone.
fn takeover(fault: Fault, kind: ChildKind) -> (Scenario, Run, i64) {
    let (s, run_a) = leader_and_follower(kind);

    let at = mono_ns();
    match fault {
        Fault::Freeze => s.a.signal(Signal::SIGSTOP),
        Fault::Partition => s.proxy.blackhole(),
        Fault::Kill => s.a.signal(Signal::SIGKILL),
    }
    let run_b = s.b.wait_run(1, TAKEOVER);
    let a_dead = s.observer.death_seen(run_a.pid).unwrap_or_else(|| {
        panic!(
            "ZOMBIE ({fault:?}): a's child still alive when b's child started\n{}",
            logs(&[&s.a, &s.b])
        )
    });
    let a_last = s.a.runs()[0].last;
    println!(
        "{fault:?}: a's last beat {:.0} ms after the fault, a's child seen dead at {:.0} ms, \
         b's child started at {:.0} ms: {:.0} ms after a's last beat",
        ms(at, a_last),
        ms(at, a_dead),
        ms(at, run_b.start),
        ms(a_last, run_b.start)
    );
    assert_eq!(s.a.runs().len(), 1, "a's child never restarted");
    assert!(
        a_last < run_b.start,
        "{fault:?}: the heartbeat files overlap: a's child beat {:.0} ms after b's started",
        ms(run_b.start, a_last)
    );
    assert!(
        a_dead < run_b.start,
        "{fault:?}: a's child was seen alive {:.0} ms after b's child started",
        ms(run_b.start, a_dead)
    );
    assert!(
        ms(at, a_dead) < LEASE_MS + SLACK_MS,
        "{fault:?}: a's child should be dead by the lease's end ({LEASE_MS:.0} ms after the \
         last reply before the fault), not {:.0} ms after the fault",
        ms(at, a_dead)
    );
    // Not merely ordered: the design leaves a third of the session timeout
    // between the lease's end and the earliest expiry.
    assert!(
        ms(a_last, run_b.start) > (4 * BEAT.as_millis()) as f64,
        "{fault:?}: only {:.0} ms between a's last beat and b's first",
        ms(a_last, run_b.start)
    );

    if fault == Fault::Kill {
        return (s, run_b, at);
    }
    // Twice the session timeout: the old leader comes back long after its
    // successor took over (the point of the test, hence a sleep).
    let back_at = at + 2 * SESSION_MS as i64 * 1_000_000;
    let left = back_at - mono_ns();
    if left > 0 {
        std::thread::sleep(Duration::from_nanos(left as u64));
    }
    assert!(
        run_b.start < back_at,
        "{fault:?}: the successor took over while a was cut off"
    );
    match fault {
        Fault::Freeze => s.a.signal(Signal::SIGCONT),
        Fault::Partition => s.proxy.heal(),
        Fault::Kill => unreachable!(),
    }
    (s, run_b, mono_ns())
}

/// Once back, `a` must not act as leader: wait until it has settled (rejoined
/// behind b, or exited), then check its child did not come back and b's runs on.
fn back_without_leading(s: &mut Scenario, back: i64) {
    let zk = s.server.connect_string();
    let a = &mut s.a;
    wait_for(
        "a to settle (rejoin behind b, or exit)",
        START,
        Duration::from_millis(50),
        || (a.exited().is_some() || queue_ids(&zk, s.path) == ["b", "a"]).then_some(()),
        String::new,
    );
    let run_b = s.b.wait_beat_after(1, back + 500_000_000, START);
    assert_eq!(
        s.a.runs().len(),
        1,
        "a restarted its child while b leads\n{}",
        logs(&[&s.a, &s.b])
    );
    assert_eq!(s.b.runs().len(), 1);
    assert!(run_b.last > back);
    assert_one_at_a_time(&[&s.a.beats, &s.b.beats]);
}

/// Once back, `a` stays a candidate like any candidate that lost its
/// leadership: it rejoins behind b, and leads again (with a greater token)
/// once b leaves.
fn back_as_a_candidate(s: &mut Scenario, back: i64) {
    let zk = s.server.connect_string();
    let b_log = s.b.log.clone();
    let a = &mut s.a;
    wait_for(
        "a to rejoin behind b",
        START,
        Duration::from_millis(50),
        || {
            if let Some(status) = a.exited() {
                panic!(
                    "GAP: zkelect a exited ({status}) once back instead of staying a candidate: \
                     its lease ran out, which is a loss of leadership, not the command exiting \
                     by itself\n{}",
                    a.log_text()
                );
            }
            (queue_ids(&zk, s.path) == ["b", "a"]).then_some(())
        },
        || std::fs::read_to_string(&b_log).unwrap_or_default(),
    );
    let run_b = s.b.wait_beat_after(1, back, START);
    assert_eq!(s.a.runs().len(), 1, "a restarted its child while b leads");

    s.b.signal(Signal::SIGTERM);
    assert_eq!(s.b.wait_exit(START).code(), Some(0), "{}", s.b.log_text());
    let again = s.a.wait_run(2, START);
    assert!(
        again.token > run_b.token,
        "tokens: b had {}, a got {} when it led again",
        run_b.token,
        again.token
    );
    s.a.wait_beats(2, 1, START);
    assert_one_at_a_time(&[&s.a.beats, &s.b.beats]);
}

/// The leading zkelect is frozen for twice the session timeout: its child is
/// killed by the watchdog at the lease's end, before the successor's starts;
/// the thawed zkelect does not start it again.
#[test]
fn frozen_leader_child_is_stopped_by_its_lease_before_the_successor_starts() {
    let (mut s, _, back) = takeover(Fault::Freeze, ChildKind::Beats);
    back_without_leading(&mut s, back);
}

/// After the freeze, the thawed zkelect rejoins behind its successor and
/// leads again once the successor leaves.
#[test]
fn thawed_leader_stays_a_candidate_and_leads_again() {
    let (mut s, _, back) = takeover(Fault::Freeze, ChildKind::Beats);
    back_as_a_candidate(&mut s, back);
}

/// The leading zkelect is killed and its child ignores SIGTERM: the watchdog
/// sees its pipe close and SIGKILLs the child at the lease's end, before the
/// server expires the session; the watchdog exits too, no orphan is left.
#[test]
fn killed_leader_child_is_stopped_before_the_successor_starts() {
    let (mut s, run_b, killed) = takeover(Fault::Kill, ChildKind::Stubborn);
    let run_a = s.a.runs()[0];
    let watchdog_dead = s
        .observer
        .wait_death(run_a.watchdog, "a's watchdog to exit", START);
    println!(
        "Kill: a's watchdog seen dead {:.0} ms after the kill",
        ms(killed, watchdog_dead)
    );
    assert!(watchdog_dead < run_b.start);
    assert_eq!(s.a.wait_exit(START).code(), None, "a died of SIGKILL");
    assert!(
        s.a.processes().is_empty(),
        "a left processes behind: {:?}",
        s.a.processes()
    );
    s.b.wait_beats(1, 3, START);
    assert_one_at_a_time(&[&s.a.beats, &s.b.beats]);
}

/// The same zombie by network instead of a freeze: the leader's connection is
/// black-holed (no FIN, no RST) for twice the session timeout. zkelect runs
/// on, and its core suspends leadership at two thirds of the timeout, the very
/// moment the watchdog's lease ends: the child is stopped by one or the other,
/// before the server expires the session.
#[test]
fn partitioned_leader_child_is_stopped_before_the_successor_starts() {
    let (mut s, _, back) = takeover(Fault::Partition, ChildKind::Beats);
    back_without_leading(&mut s, back);
}

/// After the partition heals, the old leader rejoins behind its successor and
/// leads again once the successor leaves.
#[test]
fn healed_leader_stays_a_candidate_and_leads_again() {
    let (mut s, _, back) = takeover(Fault::Partition, ChildKind::Beats);
    back_as_a_candidate(&mut s, back);
}
