//! Transcripts of the session's request timeout: a request out past its
//! bound is answered `OperationTimeout` by the session itself, at its
//! deadline and not before, its late answer is none, and its place in the
//! window is given back.

use super::*;

/// The request machine `id` has out (held by the harness), and its op.
fn held_of(h: &Harness, id: MachineId) -> Command {
    h.held
        .iter()
        .find(|c| h.s.sender(c.op).and_then(Sender::machine) == Some(id))
        .cloned()
        .expect("a request of the machine out")
}

#[test]
fn a_request_out_past_its_bound_is_answered_at_its_deadline_and_its_late_answer_is_none() {
    let mut h = Harness::new(SessionConfig::new(1).with_request_timeout(Duration::from_secs(2)));
    h.zk.apply(&Request::Create {
        path: "/q".into(),
        data: Vec::new(),
        mode: crate::zk::CreateMode::Persistent,
        acl: crate::acl::Acl::Open,
    })
    .expect("the queue's parent");
    h.connect();
    let a = h.add(election("/q", "a", 1));
    h.answering = false;
    h.join(a);
    let create = held_of(&h, a);
    assert!(matches!(create.request, Request::Create { .. }));
    assert_eq!(h.s.poll_timeout(), Some(Timestamp::from_millis(2_000)));
    // Not a moment early.
    h.until(1_999);
    assert_eq!(h.s.sender(create.op).and_then(Sender::machine), Some(a));
    assert_eq!(h.s.traffic(a).map(|t| t.timeouts), Some(0));
    h.until(2_000);
    assert_eq!(h.s.sender(create.op), None, "answered by the session");
    let traffic = h.s.traffic(a).expect("a runs");
    assert_eq!((traffic.errors, traffic.timeouts), (1, 1));
    // The server applies it after all, and its answer comes late: no
    // answer. Nothing moves, nothing is sent for it.
    let image = format!("{:?}", h.s.machine(a));
    let sent = h.sent.len();
    let result = h.zk.apply(&create.request);
    assert!(result.is_ok(), "{result:?}");
    h.s.handle(
        h.now,
        Input::Reply {
            op: create.op,
            result,
        },
    );
    h.pump();
    assert_eq!(format!("{:?}", h.s.machine(a)), image);
    assert_eq!(h.sent.len(), sent);
    assert_eq!(h.s.traffic(a), Some(traffic));
    // The machine recovers as from a lost connection: the server answers
    // again, and it finds its node (the protected create) and leads.
    h.answering = true;
    for cmd in std::mem::take(&mut h.held) {
        if h.s.sender(cmd.op).is_some() {
            h.answer(cmd);
        }
    }
    h.pump();
    h.until(10_000);
    assert!(
        matches!(h.role(a), Some(Role::Leader(_))),
        "{:?}",
        h.role(a)
    );
    assert_eq!(h.zk.children("/q").len(), 1, "one node: the late create's");
}

#[test]
fn unset_the_bound_is_the_negotiated_session_timeout() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    let a = h.add(election("/q", "a", 1));
    h.answering = false;
    h.join(a);
    let create = held_of(&h, a);
    h.until(TIMEOUT.as_millis() as u64 - 1);
    assert!(h.s.sender(create.op).is_some());
    h.until(TIMEOUT.as_millis() as u64);
    assert_eq!(h.s.sender(create.op), None);
    assert_eq!(h.s.traffic(a).map(|t| t.timeouts), Some(1));
}

#[test]
fn a_configured_bound_overrides_the_negotiated_one() {
    // Longer than the session timeout: requests wait that long.
    let mut h = Harness::new(SessionConfig::new(1).with_request_timeout(TIMEOUT * 2));
    h.connect();
    let a = h.add(election("/q", "a", 1));
    h.answering = false;
    h.join(a);
    let create = held_of(&h, a);
    h.until(TIMEOUT.as_millis() as u64 * 2 - 1);
    assert!(h.s.sender(create.op).is_some());
    h.until(TIMEOUT.as_millis() as u64 * 2);
    assert_eq!(h.s.sender(create.op), None);
}

#[test]
fn a_timed_out_request_gives_its_place_in_the_window_back_in_order() {
    let config = SessionConfig::new(1)
        .with_requests_out(1)
        .with_request_timeout(Duration::from_secs(1));
    let mut h = Harness::new(config);
    h.connect();
    h.answering = false;
    let a = h.add(election("/a", "a", 1));
    h.join(a);
    let b = h.add(election("/b", "b", 2));
    h.join(b);
    let c = h.add(election("/c", "c", 3));
    h.join(c);
    // One place: a's create is out, b's and c's wait in that order.
    assert_eq!((h.s.requests_out(), h.s.requests_waiting()), (1, 2));
    let first = held_of(&h, a);
    let sent = h.sent.len();
    h.until(999);
    assert_eq!(h.sent.len(), sent, "nothing more out before the deadline");
    h.until(1_000);
    assert_eq!(h.s.sender(first.op), None);
    // The place went to the next request at once, and only one is out.
    assert_eq!(h.s.requests_out(), 1);
    assert_eq!(h.sent.len(), sent + 1);
    // Every answer times out: each place is given back at its deadline,
    // and b's first request goes before c's, as they queued.
    h.until(20_000);
    let first_of = |id| h.sent.iter().position(|(_, s)| s.machine() == Some(id));
    let (fb, fc) = (first_of(b).expect("b sent"), first_of(c).expect("c sent"));
    assert!(fb < fc, "b's first request at {fb}, c's at {fc}");
    assert_eq!(h.s.requests_out(), 1);
}

/// Closes `a` at once with its delete unanswered, under a request bound
/// of 1 s and a close timeout of `close` ms: the session times the delete
/// out at 1 s, and the candidate's own retry timer falls due some backoff
/// later. Returns the harness at 1 s and the instant of that retry.
fn closing_past_a_timed_out_delete(close: u64) -> (Harness, MachineId, Timestamp) {
    let config = SessionConfig::new(1).with_request_timeout(Duration::from_secs(1));
    let mut h = Harness::new(config);
    h.connect();
    let a = h.add(election("/q", "a", 1).with_close_timeout(Duration::from_millis(close)));
    h.join(a);
    assert!(
        matches!(h.role(a), Some(Role::Leader(_))),
        "{:?}",
        h.role(a)
    );
    h.answering = false;
    h.s.close(h.now, a).expect("runs");
    h.pump();
    let delete = held_of(&h, a);
    assert!(
        matches!(delete.request, Request::Delete { .. }),
        "{delete:?}"
    );
    h.until(1_000);
    assert_eq!(h.s.sender(delete.op), None, "timed out by the session");
    let retry =
        h.s.machine(a)
            .and_then(Machine::poll_timeout)
            .expect("the candidate retries its delete after a backoff");
    (h, a, retry)
}

/// A machine given up on at its close deadline at the very instant its
/// own timer falls due is detached with that timer fired, not filed for an
/// instant already handled: the session is never due again at the instant
/// it was just called at (the harness's pump asserts it after every call),
/// and the detached machine's retry goes out at that instant.
#[test]
fn a_machine_detached_at_the_instant_its_timer_is_due_fires_the_timer_then() {
    // First learn the instant of the candidate's retry, with a close
    // timeout long enough not to interfere; the backoff is the seeded
    // candidate's, so a second run with the same seed retries then too.
    let (_, _, retry) = closing_past_a_timed_out_delete(60_000);
    assert!(retry > Timestamp::from_millis(1_000), "{retry}");
    let close = retry.as_millis();
    let (mut h, a, again) = closing_past_a_timed_out_delete(close);
    assert_eq!(again, retry, "the same seed backs off the same");
    let sent = h.commands_of(a).len();
    h.until(close);
    let abandoned = h.events.iter().any(|e| {
        matches!(
            e,
            Event::Stopped { machine, exit: Exit::Abandoned, .. } if *machine == a
        )
    });
    assert!(abandoned, "given up on at its close deadline");
    assert!(h.s.machine(a).is_none(), "detached: out of sight");
    let requests = h.commands_of(a);
    assert_eq!(
        requests.len(),
        sent + 1,
        "its close goes on: its retry went out then"
    );
    assert!(
        matches!(requests.last(), Some(Request::Delete { .. })),
        "{requests:?}"
    );
    assert!(h.s.poll_timeout().is_none_or(|at| at > retry));
}
