//! Transcripts of the requests the server no longer sees, and of the
//! takeovers that must stay correct without them: in a rotation, after a
//! reconnect, with a listing lost to a connection fault, beside a waiter
//! that gives up and an operator's deletion, under each [`Takeover`] mode.
//! Each test says which request it is about and counts what goes out.
//!
//! Removed (see the candidate's design notes, "What a takeover on the
//! notification costs", and bench/README.md):
//!
//! - the machine's own probe on connecting, unless a create is in flight;
//! - the own-node watch of a holder by its own listing, and of any node
//!   under `Relist` (set two probe ticks on, a holder's at its first);
//! - the leader marker (a new holder's `setData` of its node), with its
//!   successor's notice and read, and the own-node watch's re-arm after
//!   it: the two-watch takeover learns the same from reads alone.

use crate::support::*;
use zkelect_core::*;

fn elected(token: i64) -> Notice {
    Notice::Elected {
        token: FencingToken(token),
    }
}

// Three candidates' protected names, oldest first (a fresh nonce each: a
// deletion event for one is trusted as it comes).
const A: &str = "_c_000000000000a000-n_0000000000";
const B: &str = "_c_000000000000b000-n_0000000001";
const C: &str = "_c_000000000000c000-n_0000000002";

/// The requests a candidate has pending, by kind, in order.
fn verbs(d: &Driver) -> Vec<Verb> {
    d.pending.iter().map(|c| c.request.kind()).collect()
}

/// Answers the pending read of the predecessor `name` as a live node of
/// another session at data `version` (its bytes: its id, `id`).
fn pred_read(d: &mut Driver, name: &str, czxid: i64, version: i32, id: &str) {
    d.data_at(name, czxid, version, id.as_bytes());
}

/// Queues `own` (czxid) in a listing of `children`, as a waiter set up by
/// its first read of `pred` (version 0) and its own-node watch.
fn waiter(id: &str, mode: Takeover, own: &str, czxid: i64, children: &[&str]) -> Driver {
    let d = Driver::in_queue(config(id).takeover(mode), own, czxid, children);
    assert_eq!(d.c.role(), Role::Follower);
    d
}

/// Answers the pending reads of `names` (nearest first) as live nodes of
/// another session, each created at its `czxid`, in the order they go out
/// (one at a time: the next is sent on the answer to the last), leaving
/// the farther node's child watch, if one is sent, to [`farther`].
fn reads(d: &mut Driver, names: &[(&str, i64)]) {
    for &(name, czxid) in names {
        assert_eq!(
            verbs(d),
            [Verb::GetData],
            "one read at a time: {:?}",
            d.pending
        );
        pred_read(d, name, czxid, 0, "x");
    }
    // Nothing else, but the farther node's child watch (see `farther`).
    assert!(
        d.pending.len() <= 1
            && d.pending.iter().all(|c| matches!(
                &c.request,
                Request::GetChildren { path, watch: true } if path != PATH
            )),
        "{:?}",
        d.pending
    );
}

/// Answers the pending watch on the two-watch's farther node `name`: a
/// child watch (its deletion fires it after every data watch on the node,
/// so the nearest node's waiter hears first; no write fires it), the same
/// one request and one notice as a data read.
fn farther(d: &mut Driver, name: &str) {
    let path = format!("{PATH}/{name}");
    match d.pending.as_slice() {
        [cmd] if cmd.request == Request::GetChildren { path, watch: true } => {
            let op = cmd.op;
            d.pending.clear();
            d.reply(op, Ok(Reply::Children(Vec::new())));
        }
        _ => panic!("one child watch on {name}: {:?}", d.pending),
    }
    assert!(d.pending.is_empty(), "{:?}", d.pending);
}

const D: &str = "_c_000000000000d000-n_0000000003";
const A4: &str = "_c_000000000000a003-n_0000000004";
const A5: &str = "_c_000000000000a004-n_0000000005";

#[test]
fn a_rotation_under_on_notification_costs_two_requests_a_hand_off_and_five_a_requeue() {
    // A holds by its listing, alone: no own-node watch yet.
    let mut a = Driver::in_queue(config("a"), A, 10, &[A]);
    assert!(a.c.role().is_leader());
    assert!(a.pending.is_empty(), "{:?}", a.pending);
    // B, C and D queue behind; each sets its own-node watch as it learns
    // it waits (it may take over on a notice), then watches the two
    // nearest nodes below its own (B: A alone).
    let mut b = waiter("b", Takeover::OnNotification, B, 11, &[A, B]);
    reads(&mut b, &[(A, 10)]);
    let mut c = waiter("c", Takeover::OnNotification, C, 12, &[A, B, C]);
    reads(&mut c, &[(B, 11)]);
    farther(&mut c, A);
    assert_eq!(c.c.watched(), [B, A]);
    let mut d = waiter("d", Takeover::OnNotification, D, 13, &[A, B, C, D]);
    reads(&mut d, &[(C, 12)]);
    farther(&mut d, B);
    // A lets go: one delete. B holds on the notice alone (only A was below
    // it); C hears of it as its farther node, and its books (it listed A
    // and B below) name all that is left: B, watched. No request.
    a.close();
    assert_eq!(verbs(&a), [Verb::Delete]);
    b.event(WatchKind::NodeDeleted, A);
    assert!(b.take_notices().contains(&elected(11)));
    assert!(b.pending.is_empty(), "no marker: {:?}", b.pending);
    c.event(WatchKind::NodeDeleted, A);
    assert!(c.pending.is_empty(), "{:?}", c.pending);
    assert_eq!(c.c.watched(), [B]);
    // A queues again at the back: create, list, own-node watch, then the
    // two nearest nodes' reads. Five requests, the own-node watch first,
    // and alone: the reads go out on its answer, so that no two answers
    // come back to back.
    let mut a = Driver::joined(config("a"));
    a.created(A4, 14);
    assert_eq!(verbs(&a), [Verb::GetChildren]);
    a.children(&[B, C, D, A4]);
    assert_eq!(verbs(&a), [Verb::GetChildren]);
    assert_eq!(
        a.pending[0].request.path(),
        format!("{PATH}/{A4}"),
        "the own-node watch goes before the watches below"
    );
    a.own_watch_ok(A4, 14);
    reads(&mut a, &[(D, 13)]);
    farther(&mut a, C);
    assert_eq!(
        a.c.stats().commands,
        5,
        "create, list, own watch, two reads"
    );
    // B lets go: its delete; C holds on the notice alone; D hears of it as
    // its farther node and lists (it listed A below B, unseen since): two
    // requests in all, the delete and D's listing.
    b.close();
    assert_eq!(verbs(&b), [Verb::Delete]);
    c.event(WatchKind::NodeDeleted, B);
    assert!(c.take_notices().contains(&elected(12)));
    assert!(c.pending.is_empty(), "{:?}", c.pending);
    assert_eq!(c.c.stats().listings, 1, "only the queueing's listing");
    d.event(WatchKind::NodeDeleted, B);
    assert_eq!(verbs(&d), [Verb::GetChildren]);
    // The listing shows C alone below D: C's watch stands (kept across the
    // listing), so nothing more is sent.
    d.children(&[C, D, A4]);
    assert!(d.pending.is_empty(), "C's watch is kept: {:?}", d.pending);
    assert_eq!(d.c.watched(), [C]);
    assert_eq!(d.c.stats().second_relists, 1);
    // C lets go: D holds on the notice alone; A4 hears of it as its
    // farther node and lists (B was below C in its listing, unseen since).
    c.close();
    assert_eq!(verbs(&c), [Verb::Delete]);
    d.event(WatchKind::NodeDeleted, C);
    assert!(d.take_notices().contains(&elected(13)));
    assert!(d.pending.is_empty(), "{:?}", d.pending);
    assert_eq!(d.c.stats().zero_rtt_takeovers, 1);
    a.event(WatchKind::NodeDeleted, C);
    assert_eq!(verbs(&a), [Verb::GetChildren]);
    a.children(&[D, A4, A5]);
    assert!(a.pending.is_empty(), "{:?}", a.pending);
    // D lets go: A4 holds on the notice alone.
    d.close();
    a.event(WatchKind::NodeDeleted, D);
    assert!(a.take_notices().contains(&elected(14)));
    assert!(a.pending.is_empty(), "{:?}", a.pending);
    assert_eq!(
        a.c.stats().commands,
        6,
        "the re-queue's five and one listing"
    );
}

#[test]
fn a_waiter_in_the_middle_giving_up_makes_the_one_behind_list_not_hold() {
    // D watches C (nearest) and B. C gives up while B stands: D's books do
    // not prove B's going, and B is still there: a listing, no takeover.
    let mut d = waiter("d", Takeover::OnNotification, D, 13, &[A, B, C, D]);
    reads(&mut d, &[(C, 12)]);
    farther(&mut d, B);
    d.take_notices();
    d.event(WatchKind::NodeDeleted, C);
    assert_eq!(d.c.role(), Role::Follower);
    assert!(!d.take_notices().contains(&elected(13)));
    assert_eq!(verbs(&d), [Verb::GetChildren]);
    // B's child watch is kept across the listing, but B is the nearest
    // now, and that watch read no stat (B may be an operator's persistent
    // look-alike, which no deletion would ever report): B is read, and A,
    // the new farther node, gets the child watch.
    d.children(&[A, B, D]);
    assert_eq!(d.c.watched(), [B, A]);
    assert_eq!(verbs(&d), [Verb::GetData]);
    reads(&mut d, &[(B, 11)]);
    farther(&mut d, A);
    // A stale notice about C (a watch set twice reports once, but a late
    // one must do no harm) is ignored.
    d.event(WatchKind::NodeDeleted, C);
    assert!(d.pending.is_empty(), "{:?}", d.pending);
    assert_eq!(d.c.role(), Role::Follower);
    // The listing showed A and B alone below, both watched: B going
    // first (a second waiter gave up) leaves exact books, no listing; A,
    // the nearest now, is read (its child watch read no stat).
    d.event(WatchKind::NodeDeleted, B);
    assert_eq!(d.c.role(), Role::Follower);
    assert_eq!(d.c.stats().listings, 2, "the queueing's and C's");
    reads(&mut d, &[(A, 10)]);
    assert!(d.pending.is_empty(), "{:?}", d.pending);
    d.event(WatchKind::NodeDeleted, A);
    assert!(d.take_notices().contains(&elected(13)));
    assert_eq!(d.c.stats().zero_rtt_takeovers, 1);
}

#[test]
fn an_operator_deleting_a_waiters_node_stops_its_takeover() {
    // C listed A and B below: exact books. An operator deletes C's node:
    // its own-node watch fires first (set before the watches below), and
    // the notices of A and B that follow must not elect it.
    let mut c = waiter("c", Takeover::OnNotification, C, 12, &[A, B, C]);
    reads(&mut c, &[(B, 11)]);
    farther(&mut c, A);
    c.take_notices();
    c.event(WatchKind::NodeDeleted, C);
    assert!(c.has_pending(Verb::GetChildren), "{:?}", c.pending);
    assert!(!c.has_pending(Verb::GetData), "{:?}", c.pending);
    c.event(WatchKind::NodeDeleted, A);
    c.event(WatchKind::NodeDeleted, B);
    assert!(!c.take_notices().contains(&elected(12)));
    assert_eq!(c.c.role(), Role::Follower);
    // The listing confirms: our node is gone; rejoin at the back.
    c.children(&[D]);
    assert_eq!(c.c.node(), None);
    assert!(c.has_pending(Verb::Create), "{:?}", c.pending);
}

#[test]
fn a_rotation_under_relist_costs_one_listing_and_no_marker() {
    let mut a = Driver::in_queue(config("a").takeover(Takeover::Relist), A, 10, &[A]);
    assert!(a.c.role().is_leader() && a.pending.is_empty());
    // Waiters under Relist set no own-node watch while young: a create, a
    // listing and the predecessor's read, as the other libraries.
    let mut b = waiter("b", Takeover::Relist, B, 11, &[A, B]);
    assert_eq!(verbs(&b), [Verb::GetData]);
    pred_read(&mut b, A, 10, 0, "a");
    let mut c = waiter("c", Takeover::Relist, C, 12, &[A, B, C]);
    pred_read(&mut c, B, 11, 0, "b");
    assert!(b.pending.is_empty() && c.pending.is_empty());
    a.close();
    assert_eq!(verbs(&a), [Verb::Delete]);
    // B's listing proves it holds, but its own node's watch does not stand:
    // it lists (the node may be gone unseen), then holds. No marker.
    b.event(WatchKind::NodeDeleted, A);
    assert_eq!(verbs(&b), [Verb::GetChildren]);
    b.children(&[B, C]);
    assert!(b.take_notices().contains(&elected(11)));
    assert!(b.pending.is_empty(), "no marker: {:?}", b.pending);
    // C: nothing below B was known to be gone; it lists when B goes.
    b.close();
    c.event(WatchKind::NodeDeleted, B);
    assert_eq!(verbs(&c), [Verb::GetChildren]);
    c.children(&[C]);
    assert!(c.take_notices().contains(&elected(12)));
    assert!(c.pending.is_empty(), "{:?}", c.pending);
}

#[test]
fn under_relist_a_waiter_old_enough_to_watch_its_own_node_takes_over_on_the_notice() {
    let mut b = waiter("b", Takeover::Relist, B, 11, &[A, B]);
    pred_read(&mut b, A, 10, 0, "a");
    b.age_node();
    b.own_watch_ok(B, 11);
    b.event(WatchKind::NodeDeleted, A);
    assert!(b.take_notices().contains(&elected(11)));
    assert!(b.pending.is_empty(), "{:?}", b.pending);
}

#[test]
fn a_waiter_revoked_unseen_under_relist_lists_and_is_not_elected() {
    // B's node is deleted while it waits and has no own-node watch yet (the
    // deletion reaches only B's successor). When A goes, B must not take
    // over on the notice: its listing tells it.
    let mut b = waiter("b", Takeover::Relist, B, 11, &[A, B, C]);
    pred_read(&mut b, A, 10, 0, "a");
    b.event(WatchKind::NodeDeleted, A);
    assert_eq!(verbs(&b), [Verb::GetChildren]);
    b.children(&[C]);
    let notices = b.take_notices();
    assert!(!notices.contains(&elected(11)), "{notices:?}");
    assert_eq!(b.c.node(), None, "gone, and it knows");
    assert_eq!(verbs(&b), [Verb::Create], "rejoins at the back");
}

#[test]
fn a_holder_by_its_listing_watches_its_node_at_its_first_probe_tick_and_hears_a_revocation_then() {
    let mut a = Driver::in_queue(config("a"), A, 10, &[A, B]);
    assert!(a.c.role().is_leader());
    assert!(a.pending.is_empty(), "nothing written: {:?}", a.pending);
    assert!(!a.own_watch_pending(A));
    // An operator deletes A's node before A watches it: A learns it when it
    // sets the watch, at its first probe tick (well inside the grace a
    // revoked leader has: a session timeout). That request proves contact
    // as a probe would, so no probe goes with it.
    let start = a.now;
    a.sleep(TIMEOUT.as_millis() as u64 / 3);
    let own = a.take_own_watch(A);
    assert!(!a.has_pending(Verb::Exists), "{:?}", a.pending);
    assert!(a.now.saturating_since(start) <= TIMEOUT / 3);
    a.reply(own.op, Err(ZkCode::NoNode));
    assert!(a.take_notices().contains(&Notice::Demoted {
        reason: DemotionReason::Revoked
    }));
    assert!(!a.c.role().is_leader());
}

/// A holder by its own listing has no watch on its node for a while: an
/// answer meanwhile (its session's probe, another machine's request) may be
/// to a request sent after an operator deleted the node unseen. Such an
/// answer keeps the lease (contact is what it says: the session lives) but
/// vouches for nothing about the node: the holder stops leading nine tenths
/// of a session timeout after the listing that showed the node, whether
/// the watch's answer never comes or is lost with the connection, so
/// within a session timeout of the deletion (found by the simulator's
/// fuzzer and by its sweep: a leader outlived its revocation). Once the
/// watch is set, it leads on.
#[test]
fn a_holder_leads_on_its_unwatched_node_only_until_the_lapse_whatever_the_answers() {
    let nine_tenths = TIMEOUT * 9 / 10;
    let step = 100;
    // The watch's answer never comes; the session's answers keep coming.
    let mut a = Driver::in_queue(config("a"), A, 10, &[A]);
    assert!(a.c.role().is_leader());
    let listed = a.now;
    a.take_notices();
    // The node is deleted now, unseen.
    let mut watch = None;
    while a.now + std::time::Duration::from_millis(step) < listed + nine_tenths {
        a.sleep(step);
        a.c.session_answered(a.now, a.now);
        assert_eq!(a.c.last_contact(), Some(a.now), "contact moves");
        watch = watch.or_else(|| a.own_watch_pending(A).then(|| a.take_own_watch(A)));
        a.answer_probes();
    }
    assert!(watch.is_some(), "the first tick sent the watch");
    assert!(a.c.role().is_leader(), "leads on up to the lapse");
    a.sleep((listed + nine_tenths).saturating_since(a.now).as_millis() as u64);
    assert!(!a.c.role().is_leader(), "leads past the node's lapse");
    assert!(a.take_notices().contains(&Notice::Demoted {
        reason: DemotionReason::Lost
    }));
    // The watch's answer is lost with the connection: stopped within the
    // grace all the same.
    let mut b = Driver::in_queue(config("b"), A, 10, &[A]);
    let listed = b.now;
    b.sleep(100);
    b.c.session_answered(b.now, b.now);
    b.sleep(TIMEOUT.as_millis() as u64 / 3);
    let _own = b.take_own_watch(A);
    b.session(SessionEvent::Disconnected);
    let left = TIMEOUT - b.now.saturating_since(listed);
    b.sleep(left.as_millis() as u64);
    assert!(!b.c.role().is_leader(), "leads past the grace");
    // Once the watch is set, the node is vouched for while it stands, and
    // answers keep the lease: it leads on past the lapse.
    let mut c = Driver::in_queue(config("c"), A, 10, &[A]);
    let listed = c.now;
    c.sleep(TIMEOUT.as_millis() as u64 / 3);
    c.own_watch_ok(A, 10);
    while c.now < listed + TIMEOUT * 2 {
        c.sleep(step);
        c.c.session_answered(c.now, c.now);
        c.answer_probes();
    }
    assert!(c.c.role().is_leader());
}

#[test]
fn no_probe_of_its_own_on_connecting_unless_a_create_is_in_flight() {
    // A new session: the create is the only request, and its answer proves
    // contact.
    let mut d = Driver::joined(config("a"));
    assert_eq!(verbs(&d), [Verb::Create]);
    // A reconnect while that create is out: its fate is unknown and it holds
    // the main lane, so the probe proves contact meanwhile.
    d.session(SessionEvent::Disconnected);
    d.connect(SID);
    assert!(d.has_pending(Verb::Exists), "{:?}", d.pending);
    // A waiter's reconnect sends its listing at once: no probe.
    let mut b = waiter("b", Takeover::OnNotification, B, 11, &[A, B]);
    pred_read(&mut b, A, 10, 0, "a");
    b.session(SessionEvent::Disconnected);
    b.connect(SID);
    assert!(!b.has_pending(Verb::Exists), "{:?}", b.pending);
    assert!(b.synced(), "a sync, then the listing");
    assert!(b
        .pending
        .iter()
        .any(|c| c.request.kind() == Verb::GetChildren));
}

#[test]
fn a_young_holder_that_reconnects_sets_its_own_node_watch_at_once() {
    // A holds by its listing, too young to watch its own node; the
    // connection drops, and an operator deletes the node meanwhile. The
    // probe ticks stood still while it was down, so the reconnect sets the
    // watch at once, beside the listing: either answer tells, and the drops
    // that may kill the listing again and again leave the watch's to tell
    // (the simulator found a leader outliving its grace so).
    let mut a = Driver::in_queue(config("a"), A, 10, &[A]);
    assert!(a.c.role().is_leader());
    assert!(!a.own_watch_pending(A));
    a.session(SessionEvent::Disconnected);
    a.connect(SID);
    let own = a.take_own_watch(A);
    a.reply(own.op, Err(ZkCode::NoNode));
    assert!(a.take_notices().contains(&Notice::Demoted {
        reason: DemotionReason::Revoked
    }));
    assert!(!a.c.role().is_leader());
}

#[test]
fn after_a_reconnect_a_waiter_sets_its_watches_again_and_still_takes_over_on_the_notice() {
    let mut c = waiter("c", Takeover::OnNotification, C, 12, &[A, B, C]);
    reads(&mut c, &[(B, 11)]);
    farther(&mut c, A);
    // C is cut off; A went meanwhile (the notice lost with the connection).
    c.session(SessionEvent::Disconnected);
    c.connect(SID);
    // C lists (after a sync), sets its own-node watch again (the client may
    // have lost it) and its watch on B, alone below now.
    c.children(&[B, C]);
    let own = c.take_own_watch(C);
    c.answer_own_watch(&own, 12);
    reads(&mut c, &[(B, 11)]);
    c.event(WatchKind::NodeDeleted, B);
    assert!(c.take_notices().contains(&elected(12)));
    assert_eq!(c.c.stats().zero_rtt_takeovers, 1);
    // Where the connection names no session, the own node's owner is read
    // (a data read), and the takeover is as good; here A is still there
    // after the reconnect, so both watches are set again.
    let mut d = waiter("c", Takeover::OnNotification, C, 12, &[A, B, C]);
    reads(&mut d, &[(B, 11)]);
    farther(&mut d, A);
    d.session(SessionEvent::Disconnected);
    d.input(Input::Session(SessionEvent::Connected {
        session_id: None,
        timeout: TIMEOUT,
    }));
    d.children(&[A, B, C]);
    let own = d.take_own_watch(C);
    assert_eq!(own.request.kind(), Verb::GetData, "the owner is read");
    d.answer_own_watch(&own, 12);
    reads(&mut d, &[(B, 11)]);
    farther(&mut d, A);
    d.event(WatchKind::NodeDeleted, A);
    assert!(d.pending.is_empty(), "exact books: {:?}", d.pending);
    d.event(WatchKind::NodeDeleted, B);
    assert!(d.take_notices().contains(&elected(12)));
}

#[test]
fn a_listing_lost_to_a_connection_fault_is_sent_again_and_the_takeover_waits_for_it() {
    // D watches C and B; its listing showed A below B too. B goes: D lists,
    // and that listing is lost with the connection.
    let mut d = waiter("d", Takeover::OnNotification, D, 13, &[A, B, C, D]);
    reads(&mut d, &[(C, 12)]);
    farther(&mut d, B);
    d.event(WatchKind::NodeDeleted, B);
    let list = d.take(Verb::GetChildren);
    d.session(SessionEvent::Disconnected);
    d.reply(list.op, Err(ZkCode::ConnectionLoss));
    assert!(
        d.pending.is_empty(),
        "not on a dead connection: {:?}",
        d.pending
    );
    // C goes while D is cut off, before D knows A is gone: no notice, and
    // nothing may elect D but a listing.
    d.connect(SID);
    assert_eq!(d.c.role(), Role::Follower);
    d.children(&[A, C, D]);
    let own = d.take_own_watch(D);
    d.answer_own_watch(&own, 13);
    reads(&mut d, &[(C, 12)]);
    farther(&mut d, A);
    // C's deletion: A stands below it (the listing said so, and it is
    // watched), so D neither holds nor needs to list; it reads A, the
    // nearest now, whose child watch read no stat.
    d.event(WatchKind::NodeDeleted, C);
    assert_eq!(d.c.role(), Role::Follower, "A still holds");
    assert!(!d.has_pending(Verb::GetChildren), "{:?}", d.pending);
    reads(&mut d, &[(A, 10)]);
    assert!(d.pending.is_empty(), "{:?}", d.pending);
    // A goes: D's books name A alone below, watched: it holds on the notice.
    d.event(WatchKind::NodeDeleted, A);
    assert!(d.take_notices().contains(&elected(13)));
    assert_eq!(d.c.stats().zero_rtt_takeovers, 1);
}

#[test]
fn a_notice_from_the_farther_node_while_a_listing_is_out_is_safe() {
    // D's farther watch (B) fires; while its listing is out, the nearest (C)
    // goes too: the books (A below B, unseen) do not prove D holds, so it
    // lists again, and holds by that listing.
    let mut d = waiter("d", Takeover::OnNotification, D, 13, &[A, B, C, D]);
    reads(&mut d, &[(C, 12)]);
    farther(&mut d, B);
    d.event(WatchKind::NodeDeleted, B);
    let first = d.take(Verb::GetChildren);
    d.event(WatchKind::NodeDeleted, C);
    assert_eq!(d.c.role(), Role::Follower);
    assert_eq!(
        verbs(&d),
        [Verb::GetChildren],
        "a listing newer than the notice"
    );
    // The first listing's answer (sent before C went) is stale: ignored.
    d.reply(first.op, Ok(Reply::Children(vec![C.into(), D.into()])));
    assert_eq!(d.c.role(), Role::Follower);
    d.children(&[D]);
    assert!(d.c.role().is_leader());
    assert_eq!(d.c.stats().zero_rtt_takeovers, 0, "it took a listing");
}

#[test]
fn a_close_while_a_second_watch_listing_is_out_ends_on_the_delete_not_the_listing() {
    // D's farther watch (B) fires and D lists again; D is closed while that
    // listing is out. The listing went out before the delete, so its answer
    // comes first on the connection and proves nothing about D's node since
    // the delete: whether it shows the node or not, the close ends on the
    // delete's answer alone (a close ended early would stop awaiting a
    // delete that may still fail, and leave the node behind).
    for shows_own in [true, false] {
        let mut d = waiter("d", Takeover::OnNotification, D, 13, &[A, B, C, D]);
        reads(&mut d, &[(C, 12)]);
        farther(&mut d, B);
        d.event(WatchKind::NodeDeleted, B);
        let list = d.take(Verb::GetChildren);
        assert_eq!(d.c.stats().second_relists, 1);
        d.close();
        let del = d.take(Verb::Delete);
        assert!(d.pending.is_empty(), "{:?}", d.pending);
        let shown: &[&str] = if shows_own { &[A, C, D] } else { &[A, C] };
        d.reply(
            list.op,
            Ok(Reply::Children(
                shown.iter().map(|s| s.to_string()).collect(),
            )),
        );
        assert_eq!(d.c.stats().stale_replies, 1, "shows own: {shows_own}");
        assert!(!d.c.is_closed(), "shows own: {shows_own}");
        assert_eq!(d.c.role(), Role::Follower);
        assert!(
            d.c.in_flight().any(|op| op == del.op),
            "the delete is still awaited"
        );
        assert!(d.pending.is_empty(), "{:?}", d.pending);
        d.reply(del.op, Ok(Reply::Deleted));
        assert!(d.c.is_closed());
        assert_eq!(d.c.role(), Role::Closed);
    }
}

#[test]
fn the_farther_watch_is_a_child_watch_and_its_deletion_decides_as_a_data_watch_did() {
    // C listed A and B below: B (the nearest) by a data read, A (the
    // farther) by a child watch. A leaf has no children, so only A's
    // deletion fires it (no write into A does: an operator's setData, a
    // revocation request), and the server fires it after every data
    // watch on A: B's waiter, the new holder, is told first.
    let mut c = waiter("c", Takeover::OnNotification, C, 12, &[A, B, C]);
    reads(&mut c, &[(B, 11)]);
    assert_eq!(
        c.pending.iter().map(|p| &p.request).collect::<Vec<_>>(),
        [&Request::GetChildren {
            path: format!("{PATH}/{A}"),
            watch: true
        }]
    );
    farther(&mut c, A);
    assert_eq!(c.c.watched(), [B, A]);
    // A goes: the books name B alone below, watched: no request.
    c.event(WatchKind::NodeDeleted, A);
    assert!(c.pending.is_empty(), "{:?}", c.pending);
    assert_eq!(c.c.watched(), [B]);
    assert_eq!(c.c.stats().second_relists, 0);
    c.event(WatchKind::NodeDeleted, B);
    assert!(c.take_notices().contains(&elected(12)));
    // D listed A below B and C: B's going (its farther) leaves A unseen,
    // so it lists, as it did when B's watch was a data watch.
    let mut d = waiter("d", Takeover::OnNotification, D, 13, &[A, B, C, D]);
    reads(&mut d, &[(C, 12)]);
    farther(&mut d, B);
    d.event(WatchKind::NodeDeleted, B);
    assert_eq!(verbs(&d), [Verb::GetChildren]);
    assert_eq!(d.c.stats().second_relists, 1);
    // A missing farther node answers NoNode, as a data read does: a listing.
    let mut e = waiter("e", Takeover::OnNotification, D, 13, &[A, B, C, D]);
    reads(&mut e, &[(C, 12)]);
    let watch = e.take(Verb::GetChildren);
    e.reply(watch.op, Err(ZkCode::NoNode));
    assert_eq!(verbs(&e), [Verb::GetChildren]);
    assert_eq!(e.c.role(), Role::Follower);
}
