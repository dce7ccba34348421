//! Cooperative revocation: a request written into a holder's node (Curator's
//! `__REVOKE__`) is heard by a revocable machine, once per write, and the
//! machine decides: a request honoured (it resigns), a request ignored (it
//! keeps holding), a request heard while waiting. Exact inputs in, exact
//! commands and notices out.

use crate::support::*;
use zkelect_core::*;

const OWN: &str = "_c_000000000000b000-m_0000000001";
const M0: &str = "_c_000000000000a000-m_0000000000";

/// A mutex holder alone in its queue, its own-node watch set (a data watch
/// where it is revocable).
fn holder(revocable: bool) -> Driver {
    let mut d = Driver::joined(config("h").rule(Rule::Mutex).revocable(revocable));
    d.answer_probes();
    d.created(OWN, 11);
    if revocable {
        // A revocable node watches its data from the start.
        d.own_watch_ok(OWN, 11);
    }
    d.children(&[OWN]);
    assert_eq!(d.c.role(), Role::Leader(FencingToken(11)));
    if !revocable {
        // Any other holder by its listing sets its own node's watch late
        // (answered on the way).
        d.age_node();
    }
    d
}

/// Answers the pending own-node read with `data` at data `version`.
fn own_reads(d: &mut Driver, data: &[u8], version: i32) {
    let read = d.take_own_watch(OWN);
    assert_eq!(
        read.request.kind(),
        Verb::GetData,
        "a revocable node watches its data"
    );
    d.reply(
        read.op,
        Ok(Reply::Data {
            data: data.to_vec(),
            stat: Stat {
                version,
                ..stat(11, SID)
            },
        }),
    );
}

fn requested(d: &mut Driver) -> usize {
    d.take_notices()
        .iter()
        .filter(|n| **n == Notice::RevocationRequested)
        .count()
}

#[test]
fn a_request_reaches_the_holder_once_per_write_and_it_may_ignore_it() {
    let mut d = holder(true);
    // Anyone's other write (the application's own bytes again) fires the
    // data watch: read again, nothing asked.
    d.event(WatchKind::NodeDataChanged, OWN);
    own_reads(&mut d, b"h", 1);
    assert_eq!(requested(&mut d), 0);
    // Someone writes __REVOKE__: heard once.
    d.event(WatchKind::NodeDataChanged, OWN);
    own_reads(&mut d, REVOKE_MESSAGE, 2);
    assert_eq!(requested(&mut d), 1);
    // The holder ignores it: it still holds, and a read of the same write
    // (a reconnect's re-arm) says nothing new.
    assert_eq!(d.c.role(), Role::Leader(FencingToken(11)));
    d.session(SessionEvent::Disconnected);
    d.connect(SID);
    d.answer_probes();
    d.children(&[OWN]);
    own_reads(&mut d, REVOKE_MESSAGE, 2);
    assert_eq!(requested(&mut d), 0);
    assert!(d.c.role().is_leader());
    // A second request (another write) is heard again.
    d.event(WatchKind::NodeDataChanged, OWN);
    own_reads(&mut d, REVOKE_MESSAGE, 3);
    assert_eq!(requested(&mut d), 1);
}

#[test]
fn a_request_honoured_is_a_resign_that_deletes_the_node_at_once() {
    let mut d = holder(true);
    d.event(WatchKind::NodeDataChanged, OWN);
    own_reads(&mut d, REVOKE_MESSAGE, 1);
    assert_eq!(requested(&mut d), 1);
    // The holder decides to let go: it resigns, and its node's delete goes out.
    d.resign(false);
    let delete = d.take(Verb::Delete);
    assert_eq!(delete.request.path(), format!("{PATH}/{OWN}"));
    assert!(d.take_notices().contains(&Notice::Demoted {
        reason: DemotionReason::Resigned
    }));
}

#[test]
fn a_waiter_hears_a_request_too_and_a_machine_not_revocable_hears_none() {
    let own = "_c_000000000000b000-m_0000000001";
    let mut w = Driver::joined(config("w").rule(Rule::Mutex).revocable(true));
    w.answer_probes();
    w.created(own, 11);
    // Written before the machine first read its node: the first read says so.
    let read = w.take_own_watch(own);
    w.reply(
        read.op,
        Ok(Reply::Data {
            data: REVOKE_MESSAGE.to_vec(),
            stat: Stat {
                version: 1,
                ..stat(11, SID)
            },
        }),
    );
    w.children(&[M0, own]);
    assert_eq!(w.c.role(), Role::Follower);
    assert_eq!(requested(&mut w), 1);

    let mut plain = holder(false);
    // Without revocation the own node is watched by a child watch, which no
    // data write fires: the request goes unheard, as Curator's goes unheard
    // by a lock that was not made revocable.
    assert!(!plain.has_pending(Verb::GetData));
    assert_eq!(requested(&mut plain), 0);
}
