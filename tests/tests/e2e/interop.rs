//! Mixed fleets against a real ZooKeeper 3.8 server (a fleet
//! that mixes libraries): zkelect candidates share one election path with real Apache
//! Curator 5.4 `LeaderLatch`es (Java) or real kazoo 2.8 `Election`s (Python),
//! each foreign contender a process of its own (`zkelect_tests::foreign`,
//! programs in `tests/interop/`).
//!
//! | fleet | tests |
//! |---|---|
//! | zkelect (`Interop::Curator`) + Curator: zkelect first, Curator first, interleaved | `curator_*` |
//! | zkelect (`Interop::Kazoo`) + kazoo: the same three shapes | `kazoo_*` |
//! | canaries: zkelect with `Interop::None` + Curator / kazoo, two leaders | `canary_*` |
//!
//! Every contender joins only after the one before it has its node, so the
//! join order is the sequence order. Then the holder is closed step by step,
//! whoever it is, until no one is left; at every step exactly one process
//! believes it leads, and it is the oldest node remaining.
//!
//! # Who leads is decided by witnesses
//!
//! Never by zkelect's reading of the queue: a process leads when it *itself*
//! believes so.
//! * A zkelect candidate: its role channel (`Election::role`), and the times
//!   its recorder saw each role change (the harness's `Recorder`).
//! * A Curator process: `LeaderLatch::hasLeadership()`, printed with the JVM's
//!   own `System.nanoTime()` the moment it changes.
//! * A kazoo process: its leader function runs, printed with Python's own
//!   `time.monotonic_ns()`.
//!
//! All stamps read `CLOCK_MONOTONIC`. A belief ends when the process is asked
//! to close (zkelect's `Closing` mark, a foreign `CLOSING` line), before its
//! node is deleted. The belief intervals of all processes, collected over the
//! whole run, must not overlap at all.
//!
//! The canaries run the old one-way interop (`Interop::None`, zkelect's
//! default names) in a queue shared with Curator or kazoo: both libraries'
//! oldest node leads, which the same witnesses catch (so they can).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use zkelect::{Election, Interop};
use zkelect_tests::foreign::{Foreign, Library};

use crate::harness::{children, transport, Cand, Client, SETTLE};

/// How long the single believer must stay the only one before a step counts
/// as settled: a second leader shows up within a round trip of the change
/// that elected the first (the canaries' second leader takes milliseconds).
const HOLD: Duration = Duration::from_millis(300);

// ----- the members of a mixed fleet ---------------------------------------------

/// Which side a contender is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// A zkelect candidate.
    Z,
    /// A foreign process (Curator or kazoo).
    F,
}

/// A zkelect candidate or a foreign process.
#[derive(Debug)]
enum Who {
    Ours(Cand),
    Theirs(Foreign),
}

/// One contender of a fleet and its node.
#[derive(Debug)]
struct Member {
    label: String,
    who: Who,
    /// Its node's name.
    node: String,
    /// The server's sequence number at the end of the name: the order the
    /// nodes were created in, read independently of any library.
    seq: i64,
    closed: bool,
}

fn sequence_of(node: &str) -> i64 {
    let tail = &node[node.len().saturating_sub(10)..];
    tail.parse()
        .unwrap_or_else(|_| panic!("{node}: no 10-digit sequence at its end"))
}

impl Member {
    /// Its own belief, now.
    fn leads(&self) -> bool {
        match &self.who {
            Who::Ours(c) => c.is_leader(),
            Who::Theirs(f) => f.is_leader(),
        }
    }

    /// The intervals it believed it led.
    fn terms(&self) -> Vec<(Instant, Option<Instant>)> {
        match &self.who {
            Who::Ours(c) => c
                .rec
                .terms()
                .into_iter()
                .map(|(from, until, _)| (from, until))
                .collect(),
            Who::Theirs(f) => f.terms(),
        }
    }

    fn describe(&self) -> String {
        let what = match &self.who {
            Who::Ours(c) => c.describe(),
            Who::Theirs(f) => f.describe(),
        };
        format!(
            "[{}] node {} (seq {}), closed {}\n{what}",
            self.label, self.node, self.seq, self.closed
        )
    }

    /// Closes it and waits until it is gone: a zkelect candidate closes its
    /// election; a foreign process closes its recipe and client and exits 0.
    async fn close(&mut self) {
        match &mut self.who {
            Who::Ours(c) => c.close().await,
            Who::Theirs(f) => tokio::task::block_in_place(|| f.close(SETTLE))
                .unwrap_or_else(|e| panic!("{} did not close cleanly: {e}", self.label)),
        }
        self.closed = true;
    }
}

fn describe(members: &[Member]) -> String {
    members
        .iter()
        .map(Member::describe)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Fails the test now, with `library`'s reason, if its program cannot run
/// here (never a skip: `scripts/test-deps.sh` installs what is missing).
async fn require(library: Library) {
    tokio::task::spawn_blocking(move || library.check())
        .await
        .expect("the check panicked")
        .unwrap_or_else(|e| panic!("the {library} contender cannot run on this machine: {e}"));
}

/// A zkelect candidate `label` with `interop`, on its own session over
/// `client`, joined and with its node.
async fn join_ours(
    client: Client,
    hosts: &str,
    path: &str,
    label: &str,
    interop: Interop,
) -> Member {
    let (t, events) = transport(client, hosts, None).await;
    let builder = Election::builder(t, events)
        .path(path)
        .id(label)
        .interop(interop);
    let cand = Cand::join(label, builder).await;
    let node = cand.node().expect("Cand::join waits for the node");
    Member {
        label: label.to_owned(),
        seq: sequence_of(&node),
        node,
        who: Who::Ours(cand),
        closed: false,
    }
}

/// A foreign `library` process `label`, started and with its node.
async fn join_theirs(library: Library, hosts: &str, path: &str, label: &str) -> Member {
    let mut f = Foreign::spawn(library, hosts, path, label)
        .unwrap_or_else(|e| panic!("cannot start the {library} contender {label}: {e}"));
    let node = tokio::task::block_in_place(|| f.wait_node())
        .unwrap_or_else(|e| panic!("{label} created no node: {e}"));
    Member {
        label: label.to_owned(),
        seq: sequence_of(&node),
        node,
        who: Who::Theirs(f),
        closed: false,
    }
}

/// Joins one contender per entry of `shape`, in order, each after the one
/// before has its node; zkelect's with `interop`. Labels: `z0`, `z1`, … and
/// `curator0`, … / `kazoo0`, ….
async fn join_fleet(
    client: Client,
    library: Library,
    interop: Interop,
    hosts: &str,
    path: &str,
    shape: &[Side],
) -> Vec<Member> {
    let mut members = Vec::new();
    let (mut ours, mut theirs) = (0, 0);
    for side in shape {
        let member = match side {
            Side::Z => {
                ours += 1;
                join_ours(client, hosts, path, &format!("z{}", ours - 1), interop).await
            }
            Side::F => {
                theirs += 1;
                join_theirs(library, hosts, path, &format!("{library}{}", theirs - 1)).await
            }
        };
        members.push(member);
    }
    let seqs: Vec<i64> = members.iter().map(|m| m.seq).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "the nodes were created in join order: {seqs:?}\n{}",
        describe(&members)
    );
    members
}

// ----- the witnesses' verdicts --------------------------------------------------

/// Every pair of belief intervals that overlap: `(earlier, later)` labels.
/// An interval still open overlaps everything that starts after it.
fn overlaps(members: &[Member]) -> Vec<(String, String)> {
    let mut terms: Vec<(Instant, Option<Instant>, &str)> = members
        .iter()
        .flat_map(|m| {
            m.terms()
                .into_iter()
                .map(|(from, until)| (from, until, m.label.as_str()))
        })
        .collect();
    terms.sort_by_key(|t| t.0);
    let mut found = Vec::new();
    for (i, a) in terms.iter().enumerate() {
        for b in &terms[i + 1..] {
            if a.1.is_none_or(|until| until > b.0) {
                found.push((a.2.to_owned(), b.2.to_owned()));
            }
        }
    }
    found
}

/// The belief intervals of every member, relative to the first, for messages.
fn timeline(members: &[Member]) -> String {
    let mut terms: Vec<(Instant, Option<Instant>, &str)> = members
        .iter()
        .flat_map(|m| {
            m.terms()
                .into_iter()
                .map(|(from, until)| (from, until, m.label.as_str()))
        })
        .collect();
    terms.sort_by_key(|t| t.0);
    let Some(zero) = terms.first().map(|t| t.0) else {
        return "no one ever led".into();
    };
    terms
        .iter()
        .map(|(from, until, label)| {
            let at = |i: Instant| i.saturating_duration_since(zero).as_secs_f64() * 1e3;
            match until {
                Some(u) => format!("{label}: {:.1} .. {:.1} ms", at(*from), at(*u)),
                None => format!("{label}: {:.1} ms .. (still leads)", at(*from)),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Indexes of the members that believe they lead now.
fn believers(members: &[Member]) -> Vec<usize> {
    (0..members.len()).filter(|&i| members[i].leads()).collect()
}

/// Waits until exactly one member believes it leads and stays the only one
/// for [`HOLD`]; fails at once if two ever do at the same poll.
async fn one_leader(members: &[Member]) -> usize {
    let deadline = Instant::now() + SETTLE;
    loop {
        let now = believers(members);
        assert!(
            now.len() <= 1,
            "two processes believe they lead at once: {:?}\n{}\n{}",
            now.iter().map(|&i| &members[i].label).collect::<Vec<_>>(),
            timeline(members),
            describe(members)
        );
        if let [one] = now[..] {
            tokio::time::sleep(HOLD).await;
            let later = believers(members);
            assert_eq!(
                later,
                [one],
                "{} led alone, then {HOLD:?} later these believe they lead\n{}\n{}",
                members[one].label,
                timeline(members),
                describe(members)
            );
            return one;
        }
        assert!(
            Instant::now() < deadline,
            "no process believes it leads after {SETTLE:?}\n{}\n{}",
            timeline(members),
            describe(members)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Closes the holder step by step, whoever it is, until no one is left; at
/// every step exactly one process believes it leads, it is the oldest node
/// remaining, and the election path holds exactly the remaining nodes.
/// Then no two beliefs overlapped in time, and the order of leaders is the
/// order of the nodes.
async fn close_holders_step_by_step(members: &mut [Member], hosts: &str, path: &str) {
    let mut led = Vec::new();
    while members.iter().any(|m| !m.closed) {
        let holder = one_leader(members).await;
        let oldest = (0..members.len())
            .filter(|&i| !members[i].closed)
            .min_by_key(|&i| members[i].seq)
            .expect("someone remains");
        assert_eq!(
            members[holder].label,
            members[oldest].label,
            "the holder is the oldest node remaining\n{}\n{}",
            timeline(members),
            describe(members)
        );
        let listed: BTreeSet<String> = children(hosts, path).await.into_iter().collect();
        let remaining: BTreeSet<String> = members
            .iter()
            .filter(|m| !m.closed)
            .map(|m| m.node.clone())
            .collect();
        assert_eq!(
            listed,
            remaining,
            "the election path holds exactly the remaining contenders' nodes\n{}",
            describe(members)
        );
        println!(
            "step {}: {} leads ({}), {} remain",
            led.len(),
            members[holder].label,
            members[holder].node,
            remaining.len()
        );
        led.push(members[holder].label.clone());
        members[holder].close().await;
    }
    assert!(believers(members).is_empty(), "{}", describe(members));
    let found = overlaps(members);
    assert!(
        found.is_empty(),
        "beliefs of leadership overlapped in time: {found:?}\n{}\n{}",
        timeline(members),
        describe(members)
    );
    let by_seq: Vec<String> = {
        let mut sorted: Vec<&Member> = members.iter().collect();
        sorted.sort_by_key(|m| m.seq);
        sorted.iter().map(|m| m.label.clone()).collect()
    };
    assert_eq!(led, by_seq, "the leaders took turns in node order");
    for m in members.iter() {
        assert_eq!(
            m.terms().len(),
            1,
            "{} led exactly once\n{}\n{}",
            m.label,
            timeline(members),
            describe(members)
        );
    }
    println!("{}", timeline(members));
    assert!(children(hosts, path).await.is_empty(), "every node is gone");
}

// ----- scenarios -------------------------------------------------------------------

/// A fleet of `shape` (zkelect with `interop`, `library` processes) joins
/// one election path; the holder is closed step by step.
async fn mixed_fleet(client: Client, library: Library, interop: Interop, shape: &[Side]) {
    require(library).await;
    let server = crate::harness::start_server();
    let hosts = server.connect_string();
    let path = format!("/interop/{library}/leader");
    let mut members = join_fleet(client, library, interop, &hosts, &path, shape).await;
    println!(
        "joined: {}",
        members
            .iter()
            .map(|m| format!("{}={}", m.label, m.node))
            .collect::<Vec<_>>()
            .join(" ")
    );
    close_holders_step_by_step(&mut members, &hosts, &path).await;
}

const OURS_FIRST: &[Side] = &[Side::Z, Side::Z, Side::F, Side::F];
const THEIRS_FIRST: &[Side] = &[Side::F, Side::F, Side::Z, Side::Z];
const INTERLEAVED: &[Side] = &[Side::Z, Side::F, Side::Z, Side::F, Side::Z, Side::F];

async fn curator_zkelect_joins_first(client: Client) {
    mixed_fleet(client, Library::Curator, Interop::Curator, OURS_FIRST).await;
}

async fn curator_curator_joins_first(client: Client) {
    mixed_fleet(client, Library::Curator, Interop::Curator, THEIRS_FIRST).await;
}

async fn curator_interleaved(client: Client) {
    mixed_fleet(client, Library::Curator, Interop::Curator, INTERLEAVED).await;
}

async fn kazoo_zkelect_joins_first(client: Client) {
    mixed_fleet(client, Library::Kazoo, Interop::Kazoo, OURS_FIRST).await;
}

async fn kazoo_kazoo_joins_first(client: Client) {
    mixed_fleet(client, Library::Kazoo, Interop::Kazoo, THEIRS_FIRST).await;
}

async fn kazoo_interleaved(client: Client) {
    mixed_fleet(client, Library::Kazoo, Interop::Kazoo, INTERLEAVED).await;
}

/// The old one-way interop: a zkelect candidate with `Interop::None` (names
/// `_c_<nonce>-n_…`) joins first, then a `library` process. The foreign
/// library does not see (kazoo) or misorders (Curator: no `latch-`, so the
/// whole name sorts after every digit) zkelect's node, so its process leads
/// too, and the witnesses say so.
async fn canary_two_leaders(client: Client, library: Library) {
    require(library).await;
    let server = crate::harness::start_server();
    let hosts = server.connect_string();
    let path = format!("/interop/canary/{library}");
    let mut members = join_fleet(
        client,
        library,
        Interop::None,
        &hosts,
        &path,
        &[Side::Z, Side::F],
    )
    .await;
    let deadline = Instant::now() + SETTLE;
    while believers(&members).len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the canary expected both processes to lead (the bug of one-way interop)\n{}\n{}",
            timeline(&members),
            describe(&members)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let found = overlaps(&members);
    println!("caught: {found:?}\n{}", timeline(&members));
    let pair: BTreeSet<&str> = found
        .iter()
        .flat_map(|(a, b)| [a.as_str(), b.as_str()])
        .collect();
    let expected = format!("{library}0");
    assert!(
        found.len() == 1 && pair == BTreeSet::from(["z0", expected.as_str()]),
        "the witnesses catch z0's and {expected}'s beliefs overlapping, and nothing else: {found:?}\n{}",
        describe(&members)
    );
    for m in &mut members {
        m.close().await;
    }
}

async fn canary_curator_without_interop_two_leaders(client: Client) {
    canary_two_leaders(client, Library::Curator).await;
}

async fn canary_kazoo_without_interop_two_leaders(client: Client) {
    canary_two_leaders(client, Library::Kazoo).await;
}

// The join shapes on the default transport; the interleaved fleets (the
// longest queues) on both, since the transport carries the names and watches.
scenarios_on!(
    on_zookeeper_async,
    super::Client::ZookeeperAsync,
    [
        curator_zkelect_joins_first,
        curator_curator_joins_first,
        curator_interleaved,
        kazoo_zkelect_joins_first,
        kazoo_kazoo_joins_first,
        kazoo_interleaved,
        canary_curator_without_interop_two_leaders,
        canary_kazoo_without_interop_two_leaders,
    ]
);
scenarios_on!(
    on_zookeeper_client,
    super::Client::ZookeeperClient,
    [curator_interleaved, kazoo_interleaved]
);
