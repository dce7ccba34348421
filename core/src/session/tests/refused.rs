//! Transcripts of a session whose credentials are refused (or could not be
//! put back after a reconnect): every machine stops with `AuthFailed`, and
//! the session ends by itself, sending nothing more, so its driver closes
//! the transport and the server drops its ephemeral nodes at once.

use super::*;
use crate::notice::{CandidateError, DemotionReason};

fn refused(h: &mut Harness) {
    h.s.handle(h.now, Input::Session(SessionEvent::AuthFailed));
    h.pump();
}

/// How machine `id` left, if it did.
fn exit_of(h: &Harness, id: MachineId) -> Option<Exit> {
    h.events.iter().find_map(|e| match e {
        Event::Stopped { machine, exit, .. } if *machine == id => Some(*exit),
        _ => None,
    })
}

fn deletes(h: &Harness) -> usize {
    h.sent
        .iter()
        .filter(|(c, _)| matches!(c.request, Request::Delete { .. }))
        .count()
}

/// A holder and a waiter on one lock: the refusal stops both with
/// `AuthFailed` (the holder demoted first), the session finishes at once,
/// and nothing goes out after it: no delete (it may need the refused
/// credentials; the transport's close of the session takes the nodes), no
/// probe, no retry, however long the driver waits.
#[test]
fn a_refusal_stops_every_machine_and_ends_the_session_with_nothing_sent() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    let holder = h.add(lock("/l", "a", 1));
    h.join(holder);
    let waiter = h.add(lock("/l", "b", 2));
    h.join(waiter);
    assert!(matches!(h.role(holder), Some(Role::Leader(_))));
    assert_eq!(h.zk.children("/l").len(), 2);
    let sent_before = h.sent.len();
    let deletes_before = deletes(&h);
    refused(&mut h);
    for id in [holder, waiter] {
        assert_eq!(exit_of(&h, id), Some(Exit::Failed), "machine {id}");
        assert!(
            h.notices_of(id)
                .contains(&Notice::Error(CandidateError::AuthFailed)),
            "machine {id}: {:?}",
            h.notices_of(id)
        );
    }
    assert!(h.notices_of(holder).contains(&Notice::Demoted {
        reason: DemotionReason::Failed
    }));
    assert!(h.s.is_finished(), "the session ended by itself");
    assert_eq!(h.s.connection_state(), ConnectionState::AuthFailed);
    assert!(h
        .events
        .contains(&Event::Connection(ConnectionState::AuthFailed)));
    assert_eq!(h.s.poll_timeout(), None, "nothing left to fire");
    h.until(3 * TIMEOUT.as_millis() as u64);
    assert_eq!(h.sent.len(), sent_before, "nothing sent after the refusal");
    assert_eq!(deletes(&h), deletes_before, "no delete, no retry of one");
    // The transport's `Closed` as it closes keeps the reason in view.
    h.s.handle(h.now, Input::Session(SessionEvent::Closed));
    h.pump();
    assert_eq!(h.s.connection_state(), ConnectionState::AuthFailed);
}

/// Requests waiting for a place in the window when the refusal comes are
/// dropped, not sent; an answer of one that was out is dropped too.
#[test]
fn requests_waiting_or_out_at_a_refusal_go_nowhere() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    h.answering = false;
    let ids: Vec<MachineId> = (0..4)
        .map(|i| {
            let id = h.add(election("/e", &format!("m{i}"), i));
            h.join(id);
            id
        })
        .collect();
    assert!(h.s.requests_waiting() > 0, "the window opens at one");
    let out = h.held.clone();
    assert!(!out.is_empty());
    let sent_before = h.sent.len();
    refused(&mut h);
    assert_eq!(h.s.requests_waiting(), 0);
    assert!(h.s.is_finished());
    for cmd in out {
        h.s.handle(
            h.now,
            Input::Reply {
                op: cmd.op,
                result: Err(ZkCode::AuthFailed),
            },
        );
    }
    h.pump();
    h.until(3 * TIMEOUT.as_millis() as u64);
    assert_eq!(h.sent.len(), sent_before);
    for id in ids {
        assert_eq!(exit_of(&h, id), Some(Exit::Failed));
    }
}

/// A machine that ends the session stops with `AuthFailed` as the others
/// do, and does not close them first: each hears the refusal and says so
/// (its handle reports the credentials, not a close).
#[test]
fn a_machine_that_ends_the_session_does_not_close_the_others_before_they_hear_it() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    let first = h.add(election("/a", "a", 1).ending_session());
    h.join(first);
    let other = h.add(lock("/b", "b", 2));
    h.join(other);
    refused(&mut h);
    for id in [first, other] {
        assert_eq!(exit_of(&h, id), Some(Exit::Failed), "machine {id}");
        assert!(h
            .notices_of(id)
            .contains(&Notice::Error(CandidateError::AuthFailed)));
    }
    assert!(!h.notices_of(other).contains(&Notice::Demoted {
        reason: DemotionReason::Closed
    }));
    assert_eq!(deletes(&h), 0);
    assert!(h.s.is_finished());
}

/// A session closing (its deletes unanswered) when the refusal comes ends
/// at once: it does not wait out its close timeout for deletes that cannot
/// succeed. A machine given up on earlier (closing out of sight) goes too.
#[test]
fn a_close_under_way_ends_at_a_refusal_without_waiting_for_its_deletes() {
    let mut h = Harness::new(SessionConfig::new(1).with_close_timeout(Duration::from_secs(60)));
    h.connect();
    let detached = h.add(election("/q", "a", 1).with_close_timeout(Duration::from_secs(1)));
    h.join(detached);
    let closing = h.add(lock("/l", "b", 2));
    h.join(closing);
    h.answering = false;
    h.s.close(h.now, detached).expect("runs");
    h.pump();
    h.until(1_000);
    assert_eq!(exit_of(&h, detached), Some(Exit::Abandoned), "given up on");
    h.s.close(h.now, closing).expect("runs");
    h.pump();
    assert!(!h.s.is_finished());
    let sent_before = h.sent.len();
    refused(&mut h);
    assert!(
        h.s.is_finished(),
        "not after the session's 60 s close timeout"
    );
    assert_eq!(exit_of(&h, closing), Some(Exit::Failed));
    h.until(120_000);
    assert_eq!(h.sent.len(), sent_before, "no delete retried");
}

/// A machine added after the refusal stops as the others did, at once,
/// and sends nothing: its handle reports the credentials, not a close.
#[test]
fn a_machine_added_after_a_refusal_stops_with_it() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    refused(&mut h);
    assert!(h.s.is_finished());
    let sent_before = h.sent.len();
    let late = h.add(lock("/l", "late", 3));
    assert_eq!(h.s.join(h.now, late), Err(Gone(late)));
    assert_eq!(exit_of(&h, late), Some(Exit::Failed));
    assert!(h
        .notices_of(late)
        .contains(&Notice::Error(CandidateError::AuthFailed)));
    assert_eq!(h.sent.len(), sent_before);
    assert!(h.s.is_finished());
}
