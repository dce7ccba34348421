//! Transcripts of the requests the server no longer sees, and of the
//! takeovers that must stay correct without them: in a rotation, after a
//! reconnect, and with a marker lost to a connection fault, under each
//! [`Takeover`] mode. Each test says which request it is about and counts
//! what goes out.
//!
//! Removed (see the candidate's design notes, "What a takeover on the
//! notification costs", and bench/README.md):
//!
//! - the machine's own probe on connecting, unless a create is in flight;
//! - the own-node watch of a holder by its own listing, and of any node
//!   under `Relist` (set two probe ticks on, a holder's at its first);
//! - the own-node watch's re-arm after the node's own marker, on a
//!   connection that did not report its session id (a child watch now,
//!   unless a reconnect left the owner unknown);
//! - the marker of a holder whose listing showed no node above its own;
//! - under `Relist`, the marker, and with it the successor's notice and its
//!   read.

mod support;

use support::*;
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
const A2: &str = "_c_000000000000a001-n_0000000003";

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

#[test]
fn a_rotation_under_on_notification_costs_one_marker_one_read_and_no_listing() {
    // A holds by its listing, alone: no marker (no one can have listed
    // before it held), no own-node watch yet.
    let mut a = Driver::in_queue(config("a"), A, 10, &[A]);
    assert!(a.c.role().is_leader());
    assert!(a.pending.is_empty(), "{:?}", a.pending);
    // B and C queue behind; each sets its own-node watch as it learns it
    // waits (it may take over on a notice), then its predecessor's.
    let mut b = waiter("b", Takeover::OnNotification, B, 11, &[A, B]);
    assert_eq!(verbs(&b), [Verb::GetData]);
    pred_read(&mut b, A, 10, 0, "a");
    let mut c = waiter("c", Takeover::OnNotification, C, 12, &[A, B, C]);
    pred_read(&mut c, B, 11, 0, "b");
    // A lets go: one delete.
    a.close();
    assert_eq!(verbs(&a), [Verb::Delete]);
    // B holds on the notice alone (its listing showed only A below), and
    // marks its node: that one request is all it sends.
    b.event(WatchKind::NodeDeleted, A);
    assert!(b.take_notices().contains(&elected(11)));
    assert_eq!(verbs(&b), [Verb::SetData]);
    let mark = b.take(Verb::SetData);
    b.reply(mark.op, Ok(Reply::Set(stat(11, SID))));
    // C hears of the marker and reads B's node again (its watch set again):
    // version 1 with B's bytes, so nothing is below B for good.
    c.event(WatchKind::NodeDataChanged, B);
    assert_eq!(verbs(&c), [Verb::GetData]);
    pred_read(&mut c, B, 11, 1, "b");
    assert_eq!(c.c.stats().marks_seen, 1);
    assert!(c.pending.is_empty(), "{:?}", c.pending);
    // B lets go: C holds on the notice alone, and marks.
    b.close();
    c.event(WatchKind::NodeDeleted, B);
    assert!(c.take_notices().contains(&elected(12)));
    assert_eq!(verbs(&c), [Verb::SetData]);
    assert_eq!(c.c.stats().listings, 1, "only the queueing's listing");
    // A queues again at the back: create, list, own-node watch, then the
    // predecessor's read (four requests, the own-node watch first).
    let mut a = Driver::joined(config("a"));
    a.created(A2, 13);
    a.children(&[C, A2]);
    assert_eq!(verbs(&a), [Verb::GetChildren, Verb::GetData]);
    assert_eq!(
        a.pending[0].request.path(),
        format!("{PATH}/{A2}"),
        "the own-node watch goes before the predecessor's read"
    );
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
fn a_holder_alone_marks_nothing_and_a_later_waiter_still_takes_over_on_the_notice() {
    let mut a = Driver::in_queue(config("a"), A, 10, &[A]);
    assert!(a.c.role().is_leader());
    assert!(!a.has_pending(Verb::SetData));
    // A listing showing a node above does not bring the marker back: that
    // node listed after A's listing, and saw below A what A saw.
    a.session(SessionEvent::Disconnected);
    a.connect(SID);
    a.children(&[A, B]);
    assert!(a.c.role().is_leader());
    assert!(!a.has_pending(Verb::SetData), "{:?}", a.pending);
    assert_eq!(a.c.stats().marks_written, 0);
    // B listed after A held: only A below, so A's deletion elects it.
    let mut b = waiter("b", Takeover::OnNotification, B, 11, &[A, B]);
    pred_read(&mut b, A, 10, 0, "a");
    b.event(WatchKind::NodeDeleted, A);
    assert!(b.take_notices().contains(&elected(11)));
    assert_eq!(b.c.stats().zero_rtt_takeovers, 1);
}

#[test]
fn a_holder_by_its_listing_watches_its_node_at_its_first_probe_tick_and_hears_a_revocation_then() {
    let mut a = Driver::in_queue(config("a"), A, 10, &[A, B]);
    assert!(a.c.role().is_leader());
    let mark = a.take(Verb::SetData);
    a.reply(mark.op, Ok(Reply::Set(stat(10, SID))));
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
    pred_read(&mut c, B, 11, 0, "b");
    // B took over and marked while C was cut off: C never heard of it.
    c.session(SessionEvent::Disconnected);
    c.connect(SID);
    // C lists (after a sync), sets its own-node watch again (the client may
    // have lost it) and its predecessor's read, which now shows the marker.
    c.children(&[B, C]);
    let own = c.take_own_watch(C);
    c.answer_own_watch(&own, 12);
    pred_read(&mut c, B, 11, 1, "b");
    assert!(c.pending.is_empty(), "{:?}", c.pending);
    c.event(WatchKind::NodeDeleted, B);
    assert!(c.take_notices().contains(&elected(12)));
    assert_eq!(c.c.stats().zero_rtt_takeovers, 1);
    // Where the connection names no session, the own node's owner is read
    // (a data read), and the takeover is as good.
    let mut d = waiter("c", Takeover::OnNotification, C, 12, &[A, B, C]);
    pred_read(&mut d, B, 11, 0, "b");
    d.session(SessionEvent::Disconnected);
    d.input(Input::Session(SessionEvent::Connected {
        session_id: None,
        timeout: TIMEOUT,
    }));
    d.children(&[B, C]);
    let own = d.take_own_watch(C);
    assert_eq!(own.request.kind(), Verb::GetData, "the owner is read");
    d.answer_own_watch(&own, 12);
    pred_read(&mut d, B, 11, 1, "b");
    d.event(WatchKind::NodeDeleted, B);
    assert!(d.take_notices().contains(&elected(12)));
}

#[test]
fn a_marker_lost_to_a_connection_fault_is_sent_again_and_its_successor_lists_meanwhile() {
    let mut b = waiter("b", Takeover::OnNotification, B, 11, &[A, B, C]);
    pred_read(&mut b, A, 10, 1, "a");
    let mut c = waiter("c", Takeover::OnNotification, C, 12, &[A, B, C]);
    pred_read(&mut c, B, 11, 0, "b");
    // B holds on A's deletion (A had marked); its marker is lost with the
    // connection.
    b.event(WatchKind::NodeDeleted, A);
    assert!(b.take_notices().contains(&elected(11)));
    let mark = b.take(Verb::SetData);
    b.session(SessionEvent::Disconnected);
    b.reply(mark.op, Err(ZkCode::ConnectionLoss));
    assert!(!b.has_pending(Verb::SetData), "not on a dead connection");
    b.connect(SID);
    b.children(&[B, C]);
    assert!(b.c.role().is_leader());
    let again = b.take(Verb::SetData);
    assert_eq!(again.request.path(), format!("{PATH}/{B}"));
    // C heard nothing from B; were B to go before its marker landed, C lists
    // first (its listing showed A below B) and only then holds.
    c.event(WatchKind::NodeDeleted, B);
    assert!(!c.c.role().is_leader());
    assert_eq!(verbs(&c), [Verb::GetChildren]);
    c.children(&[C]);
    assert!(c.take_notices().contains(&elected(12)));
    assert_eq!(c.c.stats().zero_rtt_takeovers, 0);
}

#[test]
fn a_marker_lost_for_good_leaves_the_successor_listing_once_and_correct() {
    // The marker refused (someone wrote the node first): not sent again,
    // and the successor, taught nothing, lists on B's deletion.
    let mut b = waiter("b", Takeover::OnNotification, B, 11, &[A, B, C]);
    pred_read(&mut b, A, 10, 1, "a");
    b.event(WatchKind::NodeDeleted, A);
    let mark = b.take(Verb::SetData);
    b.reply(mark.op, Err(ZkCode::BadVersion));
    b.age_node();
    assert!(!b.has_pending(Verb::SetData));
    let mut c = waiter("c", Takeover::OnNotification, C, 12, &[A, B, C]);
    pred_read(&mut c, B, 11, 0, "b");
    // The operator's write fired C's watch: read, not taken for a marker.
    c.event(WatchKind::NodeDataChanged, B);
    c.data_at(B, 11, 1, b"touched");
    assert_eq!(c.c.stats().marks_seen, 0);
    c.event(WatchKind::NodeDeleted, B);
    assert_eq!(verbs(&c), [Verb::GetChildren]);
    c.children(&[A, C]);
    assert!(!c.c.role().is_leader(), "A is still there");
}
