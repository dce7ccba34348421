//! Transcripts per rule: the same machine as a mutex, a semaphore, and a
//! read-write lock's readers and writers. Exact inputs in, exact commands and
//! notices out.

use crate::support::*;
use zkelect_core::*;

fn elected(token: i64) -> Notice {
    Notice::Elected {
        token: FencingToken(token),
    }
}

// Other participants' protected names (a fresh nonce per create, so a
// deletion event for one is trusted as it comes).
const M0: &str = "_c_000000000000a000-m_0000000000";
const M1: &str = "_c_000000000000a001-m_0000000001";
const S0: &str = "_c_000000000000a000-s_0000000000";
const S1: &str = "_c_000000000000a001-s_0000000001";
const S2: &str = "_c_000000000000a002-s_0000000002";
const S3: &str = "_c_000000000000a003-s_0000000003";
const R0: &str = "_c_000000000000a000-r_0000000000";
const R1: &str = "_c_000000000000a001-r_0000000001";
const W0: &str = "_c_000000000000a000-w_0000000000";
const W1: &str = "_c_000000000000a001-w_0000000001";
const R2: &str = "_c_000000000000a002-r_0000000002";

fn rule(id: &str, rule: Rule) -> ConfigBuilder {
    config(id).rule(rule)
}

/// Creates under `rule` and checks the create's path names the rule's stem.
fn joined_as(id: &str, r: Rule, own: &str, czxid: i64, children: &[&str]) -> Driver {
    let mut d = Driver::joined(rule(id, r));
    d.answer_probes();
    let create = d.created(own, czxid);
    let stem = r.stem(Interop::None).unwrap();
    assert!(
        create.request.path().ends_with(stem),
        "{r:?} creates {}",
        create.request.path()
    );
    d.children(children);
    // A waiter watches its own node as it learns it waits; a holder later.
    if d.own_watch_pending(own) {
        d.own_watch_ok(own, czxid);
    }
    d
}

// ----- mutex -----------------------------------------------------------------------

#[test]
fn a_mutex_is_handed_over_in_join_order_on_the_notification_alone() {
    let mut a = joined_as("a", Rule::Mutex, "m_0000000000", 10, &["m_0000000000"]);
    assert_eq!(a.c.role(), Role::Leader(FencingToken(10)));
    assert!(a.take_notices().contains(&elected(10)));
    // b and c queue behind: b watches a, c watches b and a (the two-watch).
    let mut b = joined_as("b", Rule::Mutex, "m_0000000001", 11, &[M0, "m_0000000001"]);
    let mut c = joined_as(
        "c",
        Rule::Mutex,
        "m_0000000002",
        12,
        &[M0, M1, "m_0000000002"],
    );
    b.data_ok(M0, 10);
    c.data_ok(M1, 11);
    c.data_ok(M0, 10);
    assert_eq!(b.c.watched(), [M0]);
    assert_eq!(c.c.watched(), [M1, M0]);
    assert_eq!((b.c.role(), c.c.role()), (Role::Follower, Role::Follower));
    // a releases: b holds at once, c is untouched.
    a.resign(false);
    b.event(WatchKind::NodeDeleted, M0);
    assert_eq!(b.c.role(), Role::Leader(FencingToken(11)));
    assert!(!b.has_pending(Verb::GetChildren), "{:?}", b.pending);
    // c hears of M0's going too: its books (M0 and M1 listed below) now
    // name M1 alone, watched; b releases: c holds, again without a listing.
    c.event(WatchKind::NodeDeleted, M0);
    assert_eq!(c.c.role(), Role::Follower);
    assert!(c.pending.is_empty(), "{:?}", c.pending);
    c.event(WatchKind::NodeDeleted, M1);
    assert_eq!(c.c.role(), Role::Leader(FencingToken(12)));
    assert!(!c.has_pending(Verb::GetChildren), "{:?}", c.pending);
    assert_eq!(c.c.stats().zero_rtt_takeovers, 1);
}

#[test]
fn a_waiter_whose_nearest_gives_up_first_waits_for_the_one_below() {
    let mut c = joined_as(
        "c",
        Rule::Mutex,
        "m_0000000002",
        12,
        &[M0, M1, "m_0000000002"],
    );
    c.data_ok(M1, 11);
    c.data_ok(M0, 10);
    // M1 goes first (it gave up waiting): M0 still holds, and is watched;
    // its watch as the farther node (a child watch) read no stat, so it
    // is read now that it is the nearest.
    c.event(WatchKind::NodeDeleted, M1);
    assert_eq!(c.c.role(), Role::Follower);
    assert!(!c.has_pending(Verb::GetChildren), "{:?}", c.pending);
    c.data_ok(M0, 10);
    assert!(c.pending.is_empty(), "{:?}", c.pending);
    c.event(WatchKind::NodeDeleted, M0);
    assert_eq!(c.c.role(), Role::Leader(FencingToken(12)));
}

#[test]
fn a_mutex_waiter_watches_its_two_nearest_and_takes_over_on_the_nearests_deletion() {
    // c listed M0 and M1 below: it watches both (the two-watch takeover).
    let mut c = joined_as(
        "c",
        Rule::Mutex,
        "m_0000000002",
        12,
        &[M0, M1, "m_0000000002"],
    );
    c.data_at(M1, 11, 0, b"b");
    c.data_at(M0, 10, 0, b"a");
    assert_eq!(c.c.watched(), [M1, M0]);
    // M0 lets go: c's books name M1 alone below, watched: nothing to ask.
    c.event(WatchKind::NodeDeleted, M0);
    assert!(c.pending.is_empty(), "{:?}", c.pending);
    // M1 lets go: c holds on the notice alone, and writes nothing.
    c.event(WatchKind::NodeDeleted, M1);
    assert_eq!(c.c.role(), Role::Leader(FencingToken(12)));
    assert!(c.pending.is_empty(), "{:?}", c.pending);
    assert_eq!(c.c.stats().zero_rtt_takeovers, 1);
}

#[test]
fn a_semaphore_of_three_gives_permits_to_the_three_oldest() {
    let sem = Rule::Semaphore { permits: 3 };
    let third = joined_as("c", sem, "s_0000000002", 12, &[S0, S1, "s_0000000002"]);
    assert_eq!(third.c.role(), Role::Leader(FencingToken(12)));
    let mut fourth = joined_as("d", sem, "s_0000000003", 13, &[S0, S1, S2, "s_0000000003"]);
    assert_eq!(fourth.c.role(), Role::Follower);
    // It watches the three nearest below, one at a time.
    fourth.data_ok(S2, 12);
    fourth.data_ok(S1, 11);
    fourth.data_ok(S0, 10);
    assert_eq!(fourth.c.watched(), [S2, S1, S0]);
    // Any one of them going frees a permit for it.
    fourth.event(WatchKind::NodeDeleted, S1);
    assert_eq!(fourth.c.role(), Role::Leader(FencingToken(13)));
    assert!(
        !fourth.has_pending(Verb::GetChildren),
        "{:?}",
        fourth.pending
    );
    // A fifth behind four does not hold while three are below it.
    let fifth = joined_as("e", sem, "s_0000000004", 14, &[S0, S2, S3, "s_0000000004"]);
    assert_eq!(fifth.c.role(), Role::Follower);
}

// ----- weighted semaphore ------------------------------------------------------------

/// A semaphore node's name with its weight (`w<n>_` for n > 1).
fn sem(nonce: u32, weight: u32, seq: u32) -> String {
    format!("_c_{nonce:016x}-s_{}{seq:010}", name::weight_token(weight))
}

/// Joins a semaphore of `permits` asking for `weight`, as `own`.
fn weighted(
    id: &str,
    permits: u32,
    weight: u32,
    own: &str,
    czxid: i64,
    children: &[&str],
) -> Driver {
    let mut d = Driver::joined(rule(id, Rule::Semaphore { permits }).weight(weight));
    d.answer_probes();
    let create = d.created(own, czxid);
    // The weight is in the name, so every listing shows it.
    assert!(
        create
            .request
            .path()
            .ends_with(&format!("s_{}", name::weight_token(weight))),
        "{}",
        create.request.path()
    );
    d.children(children);
    // A waiter watches its own node as it learns it waits; a holder later.
    if d.own_watch_pending(own) {
        d.own_watch_ok(own, czxid);
    }
    d
}

#[test]
fn a_weighted_semaphore_serves_mixed_weights_in_arrival_order() {
    // Five permits: a takes 3, b asks for 3, c asks for 1.
    let a = sem(0xa, 3, 0);
    let b = sem(0xb, 3, 1);
    let c = sem(0xc, 1, 2);
    let a_holds = weighted("a", 5, 3, "s_w3_0000000000", 10, &["s_w3_0000000000"]);
    assert_eq!(a_holds.c.role(), Role::Leader(FencingToken(10)));
    // b does not fit beside a: it waits, watching a (3 alone fills its room
    // of 5 - 3 + 1 = 3).
    let mut b_waits = weighted("b", 5, 3, "s_w3_0000000001", 11, &[&a, "s_w3_0000000001"]);
    assert_eq!(b_waits.c.role(), Role::Follower);
    b_waits.data_ok(&a, 10);
    assert_eq!(b_waits.c.watched(), [a.as_str()]);
    // c would fit beside a (3 + 1 <= 5), but b came first: 3 + 3 below it
    // fills its room of 5. Arrival order is kept: c never overtakes b.
    let mut c_waits = weighted("c", 5, 1, "s_0000000002", 12, &[&a, &b, "s_0000000002"]);
    assert_eq!(c_waits.c.role(), Role::Follower);
    // It watches the nearest nodes that fill its room: b (3) and a (3).
    c_waits.data_ok(&b, 11);
    c_waits.data_ok(&a, 10);
    assert_eq!(c_waits.c.watched(), [b.as_str(), a.as_str()]);
    // a releases: b (3 alone below nothing) holds on the notification.
    b_waits.event(WatchKind::NodeDeleted, &a);
    assert_eq!(b_waits.c.role(), Role::Leader(FencingToken(11)));
    assert!(
        !b_waits.has_pending(Verb::GetChildren),
        "{:?}",
        b_waits.pending
    );
    // c, with only b's 3 below it now, fits: 3 + 1 <= 5, at once too.
    c_waits.event(WatchKind::NodeDeleted, &a);
    assert_eq!(c_waits.c.role(), Role::Leader(FencingToken(12)));
    assert!(
        !c_waits.has_pending(Verb::GetChildren),
        "{:?}",
        c_waits.pending
    );
    // A later request for 2 does not fit beside b and c (3 + 1 + 2 > 5).
    let d = weighted(
        "d",
        5,
        2,
        "s_w2_0000000003",
        13,
        &[&b, &c, "s_w2_0000000003"],
    );
    assert_eq!(d.c.role(), Role::Follower);
}

#[test]
fn a_weighted_waiter_whose_watched_node_goes_looks_again_when_more_may_block_it() {
    // Permits 4; we ask for 2 (room 3); below: w (1), x (1), y (1), z (2).
    let w = sem(0x4, 1, 0);
    let x = sem(0x1, 1, 1);
    let y = sem(0x2, 1, 2);
    let z = sem(0x3, 2, 3);
    let own = "s_w2_0000000004";
    let mut d = weighted("d", 4, 2, own, 14, &[&w, &x, &y, &z, own]);
    assert_eq!(d.c.role(), Role::Follower);
    // z (2) and y (1) fill the room of 3; x is watched beside them (the
    // two-watch's spare), w is not.
    d.data_ok(&z, 13);
    d.data_ok(&y, 12);
    d.data_ok(&x, 11);
    assert_eq!(d.c.watched(), [z.as_str(), y.as_str(), x.as_str()]);
    assert!(!d.has_pending(Verb::GetData), "{:?}", d.pending);
    // y goes: w, x and z (4) may still block, and w is not watched: list
    // again, no guess. The watches on z and x stand; x, among the nearest
    // now, is read (its watch as the spare, a child watch, read no stat),
    // and w gets the spare's child watch.
    d.event(WatchKind::NodeDeleted, &y);
    assert_eq!(d.c.role(), Role::Follower);
    d.children(&[&w, &x, &z, own]);
    let read_x = Request::GetData {
        path: format!("{PATH}/{x}"),
        watch: true,
    };
    assert!(
        d.pending.iter().any(|c| c.request == read_x),
        "{:?}",
        d.pending
    );
    d.data_ok(&x, 11);
    d.data_ok(&w, 10);
    assert_eq!(d.c.watched(), [z.as_str(), x.as_str(), w.as_str()]);
    assert!(d.pending.is_empty(), "{:?}", d.pending);
    // x goes: w and z (3) still fill the room, both watched: no listing;
    // w, among the nearest now, is read.
    d.event(WatchKind::NodeDeleted, &x);
    assert_eq!(d.c.role(), Role::Follower);
    assert!(!d.has_pending(Verb::GetChildren), "{:?}", d.pending);
    d.data_ok(&w, 10);
    assert!(d.pending.is_empty(), "{:?}", d.pending);
    // w goes: z's 2 below leaves room for our 2.
    d.event(WatchKind::NodeDeleted, &w);
    assert_eq!(d.c.role(), Role::Leader(FencingToken(14)));
}

// ----- read-write lock ---------------------------------------------------------------

#[test]
fn readers_share_the_lock() {
    let first = joined_as("a", Rule::Read, "r_0000000000", 10, &["r_0000000000"]);
    assert!(first.c.role().is_leader());
    let second = joined_as("b", Rule::Read, "r_0000000001", 11, &[R0, "r_0000000001"]);
    assert_eq!(second.c.role(), Role::Leader(FencingToken(11)));
    assert!(second.c.watched().is_empty());
    assert!(!second.has_pending(Verb::SetData), "{:?}", second.pending);
}

#[test]
fn a_writer_waits_for_every_earlier_reader() {
    let mut w = joined_as(
        "w",
        Rule::Write,
        "w_0000000002",
        12,
        &[R0, R1, "w_0000000002"],
    );
    assert_eq!(w.c.role(), Role::Follower);
    w.data_ok(R1, 11);
    w.data_ok(R0, 10);
    assert_eq!(w.c.watched(), [R1, R0]);
    // The nearer reader goes: R0 may still hold, and is watched (and read,
    // the nearest now: its child watch as the farther node read no stat).
    w.event(WatchKind::NodeDeleted, R1);
    assert_eq!(w.c.role(), Role::Follower);
    assert!(!w.has_pending(Verb::GetChildren), "{:?}", w.pending);
    w.data_ok(R0, 10);
    assert!(w.pending.is_empty(), "{:?}", w.pending);
    assert_eq!(w.c.watched(), [R0]);
    // The last reader goes: the writer holds on the notification alone.
    w.event(WatchKind::NodeDeleted, R0);
    assert_eq!(w.c.role(), Role::Leader(FencingToken(12)));
    assert!(!w.has_pending(Verb::GetChildren), "{:?}", w.pending);
    assert_eq!(w.c.stats().zero_rtt_takeovers, 1);
}

#[test]
fn a_reader_queues_behind_a_writer_and_watches_only_it() {
    // R1 is a reader between the writer and us: it does not block us.
    let mut r = joined_as(
        "r",
        Rule::Read,
        "r_0000000002",
        12,
        &[W0, R1, "r_0000000002"],
    );
    assert_eq!(r.c.role(), Role::Follower);
    r.data_ok(W0, 10);
    assert_eq!(r.c.watched(), [W0]);
    // The writer goes: the only blocking node below is gone, hold at once.
    r.event(WatchKind::NodeDeleted, W0);
    assert_eq!(r.c.role(), Role::Leader(FencingToken(12)));
    assert!(!r.has_pending(Verb::GetChildren), "{:?}", r.pending);
    assert_eq!(r.c.stats().zero_rtt_takeovers, 1);
}

#[test]
fn a_reader_behind_two_writers_watches_the_nearest_only_and_lists_when_it_goes() {
    let mut r = joined_as(
        "r",
        Rule::Read,
        "r_0000000003",
        13,
        &[W0, W1, R2, "r_0000000003"],
    );
    // Its blockers are the writers below it; a reader watches the nearest
    // only (a second watch would make every reader between two writers
    // list when the lower one goes).
    r.data_at(W1, 11, 0, b"w1");
    assert_eq!(r.c.watched(), [W1]);
    assert!(r.pending.is_empty(), "{:?}", r.pending);
    r.event(WatchKind::NodeDeleted, W1);
    assert_eq!(r.c.role(), Role::Follower, "W0 may still be below");
    r.children(&[R2, "r_0000000003"]);
    assert_eq!(r.c.role(), Role::Leader(FencingToken(13)));
}

#[test]
fn a_writer_learns_nothing_from_a_write_into_a_reader_it_watches() {
    // A data change proves nothing: the writer reads the node again and
    // still counts R0 below R1.
    let mut w = joined_as(
        "w",
        Rule::Write,
        "w_0000000002",
        12,
        &[R0, R1, "w_0000000002"],
    );
    w.data_at(R1, 11, 0, b"r1");
    w.data_at(R0, 10, 0, b"r0");
    w.event(WatchKind::NodeDataChanged, R1);
    w.data_at(R1, 11, 1, b"r1");
    assert!(w.pending.is_empty(), "{:?}", w.pending);
    w.event(WatchKind::NodeDeleted, R1);
    assert_eq!(w.c.role(), Role::Follower, "R0 may still hold");
    w.event(WatchKind::NodeDeleted, R0);
    assert_eq!(w.c.role(), Role::Leader(FencingToken(12)));
}

#[test]
fn a_writer_behind_a_writer_takes_over_on_the_deletion() {
    let mut w = joined_as("w", Rule::Write, "w_0000000002", 12, &[W1, "w_0000000002"]);
    w.data_ok(W1, 11);
    w.event(WatchKind::NodeDeleted, W1);
    assert_eq!(w.c.role(), Role::Leader(FencingToken(12)));
    assert!(!w.has_pending(Verb::GetChildren), "{:?}", w.pending);
    // A writer holds alone: it names itself.
    assert!(w.take_notices().contains(&Notice::LeaderChanged {
        leader: Some("w_0000000002".into())
    }));
}

#[test]
fn nodes_of_other_recipes_under_the_path_take_no_part() {
    // An election's and a mutex's nodes under a read-write lock's path.
    let r = joined_as(
        "r",
        Rule::Read,
        "r_0000000002",
        12,
        &["n_0000000000", M1, "r_0000000002"],
    );
    assert!(r.c.role().is_leader());
    assert_eq!(r.c.stats().ignored_children, 2);
}

#[test]
fn a_reader_shares_a_kazoo_read_write_lock_and_waits_for_its_writers() {
    // kazoo's WriteLock names `<uuid>__lock__N`, its ReadLock `<uuid>__rlock__N`.
    let kazoo_writer = "0123456789abcdef0123456789abcdef__lock__0000000000";
    let kazoo_reader = "fedcba9876543210fedcba9876543210__rlock__0000000001";
    let own = "_c_000000000000b002-__rlock__0000000002";
    let mut d = Driver::joined(rule("r", Rule::Read).interop(Interop::Kazoo));
    d.answer_probes();
    let create = d.created(own, 12);
    assert!(create.request.path().ends_with("__rlock__"));
    d.children(&[kazoo_writer, kazoo_reader, own]);
    assert_eq!(d.c.role(), Role::Follower);
    d.own_watch_ok(own, 12);
    d.data_ok(kazoo_writer, 10);
    assert_eq!(d.c.watched(), [kazoo_writer]);
    // kazoo's names are reused across acquisitions: a deletion is confirmed
    // by a read before it is believed.
    d.event(WatchKind::NodeDeleted, kazoo_writer);
    let again = d.take_data(kazoo_writer);
    d.reply(again.op, Err(ZkCode::NoNode));
    assert_eq!(d.c.role(), Role::Leader(FencingToken(12)));
}

#[test]
fn a_curator_writer_waits_for_curator_readers() {
    let reader = "_c_9f1c6f0e-4b5d-4c1e-9a7b-2d8e0f6a1b3c-__READ__0000000000";
    let own = "_c_000000000000b001-__WRIT__0000000001";
    let mut d = Driver::joined(rule("w", Rule::Write).interop(Interop::Curator));
    d.answer_probes();
    d.created(own, 11);
    d.children(&[reader, own]);
    assert_eq!(d.c.role(), Role::Follower);
    d.own_watch_ok(own, 11);
    d.data_ok(reader, 10);
    d.event(WatchKind::NodeDeleted, reader);
    assert_eq!(d.c.role(), Role::Leader(FencingToken(11)));
    // Nothing written with interop: a Curator successor's watch stays for
    // deletions.
    assert!(!d.has_pending(Verb::SetData), "{:?}", d.pending);
}

// ----- downgrade ---------------------------------------------------------------------

/// Answers the pending setData on `name` (our own node) with `result`,
/// returning the request.
fn answer_set(d: &mut Driver, name: &str, result: Result<Reply, ZkCode>) -> Command {
    let path = format!("{PATH}/{name}");
    let i = d
        .pending
        .iter()
        .position(|c| matches!(&c.request, Request::SetData { path: p, .. } if *p == path))
        .unwrap_or_else(|| panic!("no setData on {name}: {:#?}", d.pending));
    let cmd = d.pending.remove(i);
    d.reply(cmd.op, result);
    cmd
}

/// Answers the writer's `setData` of its mark on `name` as written at
/// `written` (the node's new version), and gives the mark's bytes and the
/// version the write expected.
fn answer_mark(d: &mut Driver, name: &str, written: i32) -> (Vec<u8>, Option<i32>) {
    let write = answer_set(
        d,
        name,
        Ok(Reply::Set(Stat {
            version: written,
            ..stat(10, SID)
        })),
    );
    match write.request {
        Request::SetData { data, version, .. } => (data, version),
        other => panic!("not a setData: {other:?}"),
    }
}

/// Answers `read`, a read of our own node (created at czxid 10 by this
/// session), with `data` at data `version`.
fn answer_own_read(d: &mut Driver, read: &Command, data: &[u8], version: i32) {
    d.reply(
        read.op,
        Ok(Reply::Data {
            data: data.to_vec(),
            stat: Stat {
                version,
                ..stat(10, SID)
            },
        }),
    );
}

#[test]
fn a_writer_downgrades_in_place_readers_behind_join_it_and_writers_behind_still_wait() {
    // W0 holds; R1 (a reader) and W2 (a writer) queue behind it.
    let own = "_c_000000000000b000-w_0000000000";
    let r1 = "_c_000000000000b001-r_0000000001";
    let mut w = joined_as("w", Rule::Write, own, 10, &[own, "r_0000000001"]);
    assert!(w.c.role().is_leader());
    assert!(
        !w.has_pending(Verb::SetData),
        "nothing written: {:?}",
        w.pending
    );
    let mut r = joined_as("r", Rule::Read, "r_0000000001", 11, &[own, "r_0000000001"]);
    assert_eq!(r.c.role(), Role::Follower);
    r.data_at(own, 10, 0, b"w");
    let mut w2 = joined_as(
        "x",
        Rule::Write,
        "w_0000000002",
        12,
        &[own, r1, "w_0000000002"],
    );
    w2.data_ok(r1, 11);
    // Not a writer that holds: nothing to downgrade.
    assert!(!r.act(Candidate::downgrade));
    // W0 downgrades: it reads at once (its belief is shared from now on),
    // reads its node's version, and writes the mark expecting it.
    assert!(w.act(Candidate::downgrade));
    assert_eq!(w.c.access(), Access::Shared);
    assert!(!w.act(Candidate::downgrade), "once");
    let read = w.take_data(own);
    assert_eq!(
        read.request,
        Request::GetData {
            path: format!("{PATH}/{own}"),
            watch: false
        }
    );
    answer_own_read(&mut w, &read, b"w", 0);
    let (data, version) = answer_mark(&mut w, own, 1);
    assert_eq!(version, Some(0));
    assert_eq!(data, [config::DOWNGRADED, b"w"].concat());
    assert!(w.take_notices().contains(&Notice::Downgraded));
    assert!(w.c.role().is_leader(), "it still holds, as a reader");
    // R1's watch on W0 fires: it reads the mark and holds beside W0.
    r.event(WatchKind::NodeDataChanged, own);
    r.data_at(own, 10, 1, &data);
    assert_eq!(r.c.role(), Role::Leader(FencingToken(11)));
    // W2 still waits: W0's node is below it, whatever it says.
    assert_eq!(w2.c.role(), Role::Follower);
    // W0 lets go: R1 holds on, W2 waits for R1.
    w.resign(false);
    assert!(w.has_pending(Verb::Delete));
    assert!(r.c.role().is_leader());
}

#[test]
fn a_downgrade_written_over_reads_first_so_a_revocation_request_is_heard() {
    let own = "_c_000000000000b000-w_0000000000";
    let mut w = Driver::joined(rule("w", Rule::Write).revocable(true));
    w.answer_probes();
    w.created(own, 10);
    w.own_watch_ok(own, 10);
    w.children(&[own, "_c_000000000000b001-w_0000000001"]);
    assert!(w.act(Candidate::downgrade));
    let read = w.take_data(own);
    answer_own_read(&mut w, &read, b"w", 0);
    // Someone else's write (an operator's) landed first: the mark,
    // expecting version 0, is refused.
    answer_set(&mut w, own, Err(ZkCode::BadVersion));
    // Read again: a revocation request came meanwhile; it is heard, then
    // written over with the mark expecting its version.
    let read = w.take_data(own);
    answer_own_read(&mut w, &read, REVOKE_MESSAGE, 2);
    assert!(w.take_notices().contains(&Notice::RevocationRequested));
    // The request is kept under the mark: an observer still shows it.
    let (data, version) = answer_mark(&mut w, own, 3);
    assert_eq!(version, Some(2));
    assert_eq!(data, [config::DOWNGRADED, REVOKE_MESSAGE].concat());
    assert!(w.take_notices().contains(&Notice::Downgraded));
}

#[test]
fn a_downgraded_writer_asked_to_let_go_writes_its_mark_back_and_readers_still_read_past() {
    // W0 holds and downgrades; R1 waits behind it. Not revocable: a
    // request still reaches its node (anyone may write it), and takes the
    // mark away.
    let own = "_c_000000000000b000-w_0000000000";
    let mut w = joined_as("w", Rule::Write, own, 10, &[own, "r_0000000001"]);
    assert!(w.c.role().is_leader());
    // A holder sets its own-node watch once its node has aged.
    w.age_node();
    assert!(w.act(Candidate::downgrade));
    let read = w.take_data(own);
    answer_own_read(&mut w, &read, b"w", 0);
    let (marked, _) = answer_mark(&mut w, own, 1);
    assert_eq!(w.take_notices().last(), Some(&Notice::Downgraded));
    // Its own-node watch was a child watch, which its mark did not fire;
    // from now on it must hear a write over the mark: a data watch is set.
    // Its read shows the node carries the mark: nothing to write.
    let again = w.take_own_watch(own);
    assert!(matches!(
        again.request,
        Request::GetData { watch: true, .. }
    ));
    answer_own_read(&mut w, &again, &marked, 1);
    assert!(!w.has_pending(Verb::SetData), "{:?}", w.pending);
    // A revoker writes Curator's request over the node, blind.
    w.event(WatchKind::NodeDataChanged, own);
    let again = w.take_own_watch(own);
    answer_own_read(&mut w, &again, REVOKE_MESSAGE, 2);
    assert!(w.c.is_downgraded(), "still a reader meanwhile");
    assert_eq!(w.c.access(), Access::Shared);
    // The mark goes back over the request, expecting the request's version;
    // the application was told once, and is not told again.
    let (data, version) = answer_mark(&mut w, own, 3);
    assert_eq!(version, Some(2));
    let kept = [config::DOWNGRADED, REVOKE_MESSAGE].concat();
    assert_eq!(data, kept);
    assert!(config::is_revocation_request(&data) && config::is_downgraded(&data));
    assert_eq!(
        w.take_notices(),
        [],
        "no second Downgraded, no request heard"
    );
    assert!(w.c.is_downgraded() && w.c.role().is_leader());
    // A reader that comes now reads the node and holds beside W0.
    let mut r = joined_as("r", Rule::Read, "r_0000000001", 11, &[own, "r_0000000001"]);
    assert_eq!(r.c.role(), Role::Follower);
    r.data_at(own, 10, 3, &kept);
    assert_eq!(r.c.role(), Role::Leader(FencingToken(11)));
}

/// One hand-off of `rule`'s lock, the server modelled by the watches each
/// request set: `h` holds by its listing and, its node aged, watches it;
/// `w` queues behind (its own node watched, `h`'s node read); someone
/// writes into `h`'s node (an operator, or a revoker's request, which
/// anyone may write into a lock that is not revocable); `h` lets go and
/// `w` holds on the notice. Gives, for `h` then `w`, the requests it sent
/// and the notices the server sent it.
fn hand_off(r: Rule, h_node: &str, w_node: &str) -> [(u64, u32); 2] {
    let mut h = joined_as("h", r, h_node, 10, &[h_node]);
    assert!(h.c.role().is_leader());
    // Its own-node watch goes out at its first probe tick.
    let mut h_watch = None;
    for _ in 0..3 {
        h.sleep(TIMEOUT.as_millis() as u64 / 3);
        h.answer_probes();
        if h.own_watch_pending(h_node) {
            let cmd = h.take_own_watch(h_node);
            h.answer_own_watch(&cmd, 10);
            h_watch = Some(cmd.request.kind());
        }
    }
    let mut w = Driver::joined(rule("w", r));
    w.answer_probes();
    w.created(w_node, 11);
    w.children(&[h_node, w_node]);
    w.own_watch_ok(w_node, 11);
    w.data_ok(h_node, 10);
    assert_eq!(w.c.role(), Role::Follower);
    let mut notices = [0, 0];
    // The write fires the data watches on h's node: w's read set one, and
    // h's own watch is one if it is a getData's.
    if h_watch == Some(Verb::GetData) {
        notices[0] += 1;
        h.event(WatchKind::NodeDataChanged, h_node);
        h.own_watch_ok(h_node, 10);
    }
    notices[1] += 1;
    w.event(WatchKind::NodeDataChanged, h_node);
    w.data_at(h_node, 10, 1, b"x");
    // h lets go: its delete fires both watches on its node.
    h.close();
    let delete = h.take(Verb::Delete);
    notices[0] += 1;
    h.event(WatchKind::NodeDeleted, h_node);
    h.reply(delete.op, Ok(Reply::Deleted));
    notices[1] += 1;
    w.event(WatchKind::NodeDeleted, h_node);
    assert_eq!(w.c.role(), Role::Leader(FencingToken(11)));
    assert!(h.pending.is_empty() && w.pending.is_empty());
    [
        (h.c.stats().commands, notices[0]),
        (w.c.stats().commands, notices[1]),
    ]
}

#[test]
fn a_write_lock_hand_off_costs_what_a_mutex_hand_off_costs() {
    // A writer that never downgrades watches its own node as a mutex
    // holder does (a child watch): a write into its node costs it nothing.
    let mutex = hand_off(
        Rule::Mutex,
        "_c_000000000000b000-m_0000000000",
        "_c_000000000000b001-m_0000000001",
    );
    let write = hand_off(
        Rule::Write,
        "_c_000000000000b000-w_0000000000",
        "_c_000000000000b001-w_0000000001",
    );
    assert_eq!(write, mutex);
    // h: create, listing, own-node watch, delete (and its probes); w:
    // create, listing, own-node watch, read, re-read. h is told of its
    // node's deletion only; w of the write and the deletion.
    assert_eq!((mutex[0].1, mutex[1]), (1, (5, 2)), "{mutex:?}");
}

#[test]
fn a_writer_watches_its_node_by_children_until_its_mark_is_answered_then_by_data() {
    let own = "_c_000000000000b000-w_0000000000";
    let mut w = joined_as("w", Rule::Write, own, 10, &[own, "r_0000000001"]);
    assert!(w.c.role().is_leader());
    w.take_notices();
    // At its first probe tick the holder sets its own-node watch: a child
    // watch, as a mutex's. Its answer is still out when it downgrades.
    w.sleep(TIMEOUT.as_millis() as u64 / 3);
    w.answer_probes();
    let child = w.take_own_watch(own);
    assert!(
        matches!(child.request, Request::GetChildren { watch: true, .. }),
        "{child:?}"
    );
    assert!(w.act(Candidate::downgrade));
    let read = w.take_data(own);
    answer_own_read(&mut w, &read, b"w", 0);
    let (marked, _) = answer_mark(&mut w, own, 1);
    assert_eq!(w.take_notices(), [Notice::Downgraded]);
    // The child watch's answer comes: it stands, and a data watch is set
    // beside it (the server tells a session of the deletion once).
    w.answer_own_watch(&child, 10);
    let data = w.take_own_watch(own);
    assert!(
        matches!(data.request, Request::GetData { watch: true, .. }),
        "{data:?}"
    );
    answer_own_read(&mut w, &data, &marked, 1);
    assert!(w.pending.is_empty(), "{:?}", w.pending);
    // After a reconnect the state says which watch: a data watch again.
    w.session(SessionEvent::Disconnected);
    w.connect(SID);
    let again = w.take_own_watch(own);
    assert!(
        matches!(again.request, Request::GetData { watch: true, .. }),
        "{again:?}"
    );
    // A write over the mark that came while the connection was down is
    // heard in that read, and undone.
    answer_own_read(&mut w, &again, REVOKE_MESSAGE, 2);
    let (data, version) = answer_mark(&mut w, own, 3);
    assert_eq!(version, Some(2));
    assert_eq!(data, [config::DOWNGRADED, REVOKE_MESSAGE].concat());
    // The drop suspended it (it resumes once a listing confirms it holds);
    // it was not told of its downgrade again.
    assert_eq!(w.take_notices(), [Notice::Suspended]);
}

#[test]
fn a_downgraded_writer_whose_mark_cannot_be_written_back_is_told_nothing_new() {
    let own = "_c_000000000000b000-w_0000000000";
    let mut w = joined_as("w", Rule::Write, own, 10, &[own, "r_0000000001"]);
    w.age_node();
    w.take_notices();
    assert!(w.act(Candidate::downgrade));
    let read = w.take_data(own);
    answer_own_read(&mut w, &read, b"w", 0);
    let (marked, _) = answer_mark(&mut w, own, 1);
    let watch = w.take_own_watch(own);
    answer_own_read(&mut w, &watch, &marked, 1);
    assert_eq!(w.take_notices(), [Notice::Downgraded]);
    // A request is written over the mark, and the node's ACL no longer
    // lets its owner write: the mark cannot go back.
    w.event(WatchKind::NodeDataChanged, own);
    let watch = w.take_own_watch(own);
    answer_own_read(&mut w, &watch, REVOKE_MESSAGE, 2);
    // Writing it back: downgraded still, not yet unkept.
    assert!(w.c.is_downgraded() && !w.c.is_downgrade_unkept());
    answer_set(&mut w, own, Err(ZkCode::NoAuth));
    // The application was told it reads, and it still does; the queue sees
    // a writer again (readers behind wait for it: safe). No
    // `DowngradeRefused` after `Downgraded`.
    assert_eq!(w.take_notices(), []);
    assert!(w.c.is_downgraded() && !w.c.is_downgrade_refused());
    assert!(w.c.is_downgrade_unkept());
    assert_eq!(w.c.access(), Access::Shared);
    assert!(w.c.role().is_leader());
    // No more tries, and no more reason to hear writes: the own-node watch
    // is set again as a child watch.
    w.event(WatchKind::NodeDataChanged, own);
    let watch = w.take_own_watch(own);
    assert!(
        matches!(watch.request, Request::GetChildren { watch: true, .. }),
        "{watch:?}"
    );
    assert!(w.pending.is_empty(), "{:?}", w.pending);
}

#[test]
fn a_writer_behind_a_curator_writer_lists_again_before_taking_over() {
    // Curator 5.5 and later downgrade by creating a reader with the
    // writer's own sequence, just before the writer goes: after the
    // deletion a listing, not the notification, decides.
    let curator_w = "_c_9f1c6f0e-4b5d-4c1e-9a7b-2d8e0f6a1b3c-__WRIT__0000000000";
    let curator_r = "_c_11111111-4b5d-4c1e-9a7b-2d8e0f6a1b3c-__READ__0000000000";
    let own = "_c_000000000000b001-__WRIT__0000000001";
    let mut d = Driver::joined(rule("w", Rule::Write).interop(Interop::Curator));
    d.answer_probes();
    d.created(own, 11);
    d.children(&[curator_w, own]);
    d.own_watch_ok(own, 11);
    d.data_ok(curator_w, 10);
    d.event(WatchKind::NodeDeleted, curator_w);
    assert_eq!(d.c.role(), Role::Follower);
    d.children(&[curator_r, own]);
    assert_eq!(d.c.role(), Role::Follower);
    d.data_ok(curator_r, 12);
    assert_eq!(d.c.watched(), [curator_r]);
    // A Curator reader's deletion is trusted as ever.
    d.event(WatchKind::NodeDeleted, curator_r);
    assert_eq!(d.c.role(), Role::Leader(FencingToken(11)));
}
