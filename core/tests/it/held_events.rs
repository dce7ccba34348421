//! Transcripts of watch events held back by a silent link (a one-way
//! partition: the server's messages queue up, then arrive at once, replies
//! ahead of the events when the client's event thread lags): found by the
//! simulator's `lag` mix.

use crate::support::*;
use zkelect_core::*;

const P0: &str = "_c_000000000000a000-n_0000000000";

fn listing_pending(d: &Driver) -> bool {
    d.pending
        .iter()
        .any(|c| matches!(&c.request, Request::GetChildren { path, .. } if path == PATH))
}

/// Lag seed 38944 (a semaphore of 3 there, minimised here to one leader):
/// the server's messages to a follower were held for longer than its session
/// timeout while an operator deleted the election, its predecessor's node
/// first and its own node right after. The link heals; a probe sent after it
/// is answered ahead of the held events. The predecessor's deletion then
/// arrives: it is true, but seconds old, and the deletion of the follower's
/// own node sits right behind it. The follower must not take over on it: it
/// lists first, and the listing (newer than any held event) decides.
#[test]
fn a_follower_resuming_after_silence_lists_before_it_takes_over_on_a_held_deletion() {
    let mut d = Driver::in_queue(config("b"), "n_0000000001", 11, &[P0, "n_0000000001"]);
    d.data_ok(P0, 10);
    d.take_notices();
    assert_eq!(d.c.watching().as_deref(), Some(P0));

    // Silence: the probes get through, their answers are held.
    d.sleep(1_000);
    let held = d.take(Verb::Exists);
    d.sleep(1_000);
    assert_eq!(d.take_notices(), vec![Notice::Suspended]);
    d.sleep(2_000);

    // The link heals at t=4000: the held answer comes first (it proves
    // nothing: it was sent at t=1000), then a fresh probe's.
    d.reply(held.op, Ok(Reply::Exists(Some(Stat::default()))));
    assert!(
        d.take_notices().is_empty(),
        "an answer to a request sent at t=1000"
    );
    d.sleep(10);
    d.answer_probes();
    assert_eq!(d.take_notices(), vec![Notice::Resumed]);
    assert_eq!(d.c.role(), Role::Follower);
    assert!(
        listing_pending(&d),
        "a follower resuming lists the queue again: {:?}",
        d.pending
    );

    // The held events: the predecessor's deletion first.
    d.event(WatchKind::NodeDeleted, P0);
    assert_eq!(
        d.c.role(),
        Role::Follower,
        "no takeover on an event the silence held: our node may be gone"
    );
    assert!(d.take_notices().is_empty());

    // Our own node's deletion, then the fresh listing: the election was wiped.
    d.event(WatchKind::NodeDeleted, "n_0000000001");
    d.children(&["_c_000000000000b000-n_0000000000"]);
    assert_eq!(d.c.role(), Role::Follower);
    assert!(
        !d.take_notices()
            .iter()
            .any(|n| matches!(n, Notice::Elected { .. })),
        "never elected on the deleted node"
    );
}

/// The same follower, its node intact: the fresh listing shows the
/// predecessor gone and elects it, one round trip later than the
/// notification would have.
#[test]
fn a_follower_resuming_after_silence_is_elected_by_the_fresh_listing() {
    let mut d = Driver::in_queue(config("b"), "n_0000000001", 11, &[P0, "n_0000000001"]);
    d.data_ok(P0, 10);
    d.take_notices();
    d.sleep(1_000);
    let held = d.take(Verb::Exists);
    d.sleep(3_000);
    assert_eq!(d.take_notices(), vec![Notice::Suspended]);
    d.reply(held.op, Ok(Reply::Exists(Some(Stat::default()))));
    d.sleep(10);
    d.answer_probes();
    assert_eq!(d.take_notices(), vec![Notice::Resumed]);
    d.event(WatchKind::NodeDeleted, P0);
    assert_eq!(d.c.role(), Role::Follower);
    d.children(&["n_0000000001"]);
    assert_eq!(d.c.role(), Role::Leader(FencingToken(11)));
    assert!(d.take_notices().contains(&Notice::Elected {
        token: FencingToken(11)
    }));
    assert_eq!(d.c.stats().zero_rtt_takeovers, 0, "it took the listing");
}

/// Without silence nothing changes: the deletion elects on the notification
/// alone (the zero-round-trip takeover stays where no event can be old).
#[test]
fn a_follower_that_never_went_silent_still_takes_over_on_the_notification() {
    let mut d = Driver::in_queue(config("b"), "n_0000000001", 11, &[P0, "n_0000000001"]);
    d.data_ok(P0, 10);
    d.take_notices();
    d.sleep(1_000);
    d.answer_probes();
    d.event(WatchKind::NodeDeleted, P0);
    assert_eq!(d.c.role(), Role::Leader(FencingToken(11)));
    assert_eq!(d.c.stats().zero_rtt_takeovers, 1);
}
