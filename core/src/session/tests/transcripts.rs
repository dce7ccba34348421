//! Transcripts: one rule of the session each, step by step.

use super::*;
use crate::multilock::GroupNotice;
use crate::notice::DemotionReason;
use crate::zk::WatchKind;

fn observer(path: &str) -> Machine {
    let config = crate::observer::ObserverConfig::election(path, 1);
    Machine::observer(crate::observer::Observer::new(config).expect("valid"))
}

fn participants(h: &Harness, id: MachineId) -> Vec<Vec<String>> {
    h.notices_of(id)
        .into_iter()
        .filter_map(|n| match n {
            Notice::Participants(list) => Some(
                list.iter()
                    .map(|p| p.id().unwrap_or_default().to_owned())
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

#[test]
fn two_machines_arming_one_path_share_a_watch_and_both_get_the_event() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    let a = h.add(election("/q", "a", 1));
    h.join(a);
    // Two observers of the queue on one session: each lists it with a
    // child watch, and the server keeps one for the session.
    let o1 = h.add(observer("/q"));
    let o2 = h.add(observer("/q"));
    for o in [o1, o2] {
        assert!(h.commands_of(o).contains(&Request::GetChildren {
            path: "/q".to_owned(),
            watch: true
        }));
        assert_eq!(participants(&h, o).last(), Some(&vec!["a".to_owned()]));
    }
    let event = WatchEvent {
        kind: WatchKind::NodeChildrenChanged,
        path: "/q".to_owned(),
    };
    assert_eq!(h.s.reaches(&event), vec![o1, o2]);

    // b joins the queue: the server fires the one watch, and both
    // observers get the event and list the queue again.
    let b = h.add(election("/q", "b", 2));
    h.s.join(h.now, b).expect("runs");
    let mut fired = Vec::new();
    loop {
        while let Some(e) = h.s.poll_event() {
            h.events.push(e);
        }
        let Some(cmd) = h.s.poll_command() else { break };
        let result = h.zk.apply(&cmd.request);
        fired.extend(h.zk.take_fired());
        h.s.handle(h.now, Input::Reply { op: cmd.op, result });
    }
    assert_eq!(fired, vec![event.clone()], "one watch per session and path");
    h.s.handle(h.now, Input::Watch(event));
    h.pump();
    for o in [o1, o2] {
        assert_eq!(
            participants(&h, o).last(),
            Some(&vec!["a".to_owned(), "b".to_owned()]),
            "{o} heard of b"
        );
    }
}

#[test]
fn one_event_reaches_the_machines_of_both_tables_it_fires() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    // `a` leads and watches its own node (a child watch, set once its node
    // is a few probe ticks old); `b` follows and watches `a`'s node (a data
    // watch). A deletion fires both tables: the server sends the session
    // one event.
    let a = h.add(election("/q", "a", 1));
    h.join(a);
    h.until(TIMEOUT.as_millis() as u64);
    let b = h.add(election("/q", "b", 2));
    h.join(b);
    assert!(matches!(h.role(a), Some(Role::Leader(_))));
    assert_eq!(h.role(b), Some(Role::Follower));
    let a_path =
        h.s.machine(a)
            .and_then(Machine::own_path)
            .expect("a's node");
    let event = WatchEvent {
        kind: WatchKind::NodeDeleted,
        path: a_path.clone(),
    };
    assert_eq!(h.s.reaches(&event), vec![a, b]);
    h.zk.remove(&a_path);
    assert_eq!(h.zk.take_fired(), vec![event.clone()]);
    h.s.handle(h.now, Input::Watch(event.clone()));
    h.pump();
    assert!(h.notices_of(a).contains(&Notice::Demoted {
        reason: DemotionReason::Revoked
    }));
    assert!(
        matches!(h.role(b), Some(Role::Leader(_))),
        "b took over on the event alone"
    );
    // Fired once: the table no longer sends it anywhere.
    assert!(!h.s.reaches(&event).contains(&b));
}

#[test]
fn an_event_reaches_a_machine_whose_arming_is_unanswered() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    let a = h.add(election("/q", "a", 1));
    h.join(a);
    let a_path =
        h.s.machine(a)
            .and_then(Machine::own_path)
            .expect("a's node");
    // b's read of a's node is out, unanswered, when a's node changes.
    h.answering = false;
    let b = h.add(election("/q", "b", 2));
    h.join(b);
    for _ in 0..10 {
        let held = std::mem::take(&mut h.held);
        let Some(pos) = held.iter().position(
            |c| matches!(&c.request, Request::GetData { path, watch: true } if *path == a_path),
        ) else {
            for c in held {
                h.answer(c);
            }
            h.pump();
            continue;
        };
        h.held = held;
        let read = h.held.remove(pos);
        let event = WatchEvent {
            kind: WatchKind::NodeDataChanged,
            path: a_path.clone(),
        };
        h.s.handle(h.now, Input::Watch(event.clone()));
        // The event went to a (armed, answered) and b (armed, unanswered);
        // b stays armed, a does not.
        assert_eq!(h.s.reaches(&event), vec![b]);
        h.answering = true;
        h.answer(read);
        h.pump();
        return;
    }
    panic!("b never read a's node");
}

#[test]
fn a_reply_for_a_machine_that_has_gone_is_dropped() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    let a = h.add(election("/q", "a", 1));
    h.join(a);
    h.answering = false;
    let observer =
        crate::observer::Observer::new(crate::observer::ObserverConfig::election("/q", 1))
            .expect("valid");
    let o = h.add(Machine::observer(observer));
    let listing = h
        .held
        .iter()
        .find(|c| h.s.sender(c.op).and_then(Sender::machine) == Some(o))
        .cloned()
        .expect("the observer lists the queue");
    // The observer closes with its listing out: it is gone at once.
    h.s.close(h.now, o).expect("runs");
    h.pump();
    assert!(h.s.machine(o).is_none());
    assert!(h.events.contains(&Event::Stopped {
        machine: o,
        path: "/q".to_owned(),
        exit: Exit::Closed,
        stats: Box::default(),
        traffic: Traffic {
            requests: 1,
            errors: 0,
            timeouts: 0
        },
    }));
    let before = h.events.len();
    let result = h.zk.apply(&listing.request);
    h.s.handle(
        h.now,
        Input::Reply {
            op: listing.op,
            result,
        },
    );
    h.pump();
    assert_eq!(h.events.len(), before, "nothing for a machine gone");
    assert_eq!(h.s.sender(listing.op), None, "answered: out of the books");
    assert!(h.s.machine(a).is_some(), "the other machine runs on");
    assert_eq!(h.s.close(h.now, o), Err(Gone(o)));
}

#[test]
fn the_probe_feeds_contact_to_every_machine() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    let a = h.add(election("/a", "a", 1));
    h.join(a);
    let b = h.add(election("/b", "b", 2));
    h.join(b);
    assert!(matches!(h.role(a), Some(Role::Leader(_))));
    assert!(matches!(h.role(b), Some(Role::Leader(_))));
    // The session's probe falls due three tenths of the timeout in.
    let due = Timestamp::ZERO + TIMEOUT * 3 / 10;
    assert_eq!(h.s.poll_timeout(), Some(due));
    h.answering = false;
    h.until(due.as_millis());
    let probe = h.held.pop().expect("the session's probe");
    assert!(h.held.is_empty(), "the machines sent no probe of their own");
    assert_eq!(h.s.sender(probe.op), Some(Sender::Probe));
    assert_eq!(
        probe.request,
        Request::Exists {
            path: "/".to_owned(),
            watch: false
        }
    );
    h.now = due + Duration::from_millis(5);
    h.answering = true;
    h.answer(probe);
    h.pump();
    let contact = |h: &Harness, id| {
        h.s.machine(id)
            .and_then(Machine::as_candidate)
            .and_then(Candidate::last_contact)
    };
    // Each heard of the probe: its contact, and so its lease, runs from the
    // probe's send time (its node, not watched yet, lapses nine tenths of
    // the timeout after the listing that elected it, whatever the probe).
    for id in [a, b] {
        assert_eq!(contact(&h, id), Some(due), "{id} heard of the probe");
    }
    // Each sets its node's watch at its first tick, a third of the timeout in,
    // whose answer proves contact: the session's next probe is out a
    // period after it, and from then on feeds both.
    let second = Timestamp::ZERO + TIMEOUT / 3 + TIMEOUT * 3 / 10;
    h.until(second.as_millis());
    for id in [a, b] {
        assert_eq!(contact(&h, id), Some(second), "{id} heard of the probe");
    }
    // Both leases run from the probe's send time.
    let lease = h.s.machine(a).and_then(Machine::lease_expiry);
    assert!(lease.is_some_and(|t| t > second));
    assert_eq!(lease, h.s.machine(b).and_then(Machine::lease_expiry));
    // For a whole timeout, only the session probes: three tenths apart.
    h.until(TIMEOUT.as_millis() as u64);
    let probes = h.sent.iter().filter(|(_, s)| *s == Sender::Probe).count();
    let own = h
        .sent
        .iter()
        .filter(|(c, s)| {
            s.machine().is_some()
                && matches!(&c.request, Request::Exists { path, .. } if path == "/")
        })
        .count();
    assert_eq!((probes, own), (3, 0));
}

/// An answer to any request of the span proves what the probe's would: a
/// probe that falls due within a period of one stays home, and every
/// machine hears of that answer instead.
#[test]
fn the_probe_stays_home_while_another_answer_proves_contact() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    let a = h.add(election("/a", "a", 1));
    h.join(a);
    // Another machine joins at 2.5 s: its create and listing are answered.
    let joined = Timestamp::from_millis(2_500);
    h.until(joined.as_millis());
    let b = h.add(election("/b", "b", 2));
    h.join(b);
    // The probe fell due at 3 s and stayed home; `a` heard of b's answers.
    h.until(3_000);
    let probes = |h: &Harness| h.sent.iter().filter(|(_, s)| *s == Sender::Probe).count();
    assert_eq!(probes(&h), 0);
    let contact = |h: &Harness, id| {
        h.s.machine(id)
            .and_then(Machine::as_candidate)
            .and_then(Candidate::last_contact)
    };
    assert_eq!(contact(&h, b), Some(joined), "b heard of its answers");
    assert_eq!(contact(&h, a), Some(joined), "a heard of b's answers");
    // Filed a period after the newest answer: b's own node's watch, set
    // at b's first tick (5.83 s), so out at 8.83 s, not before.
    h.until(8_832);
    assert_eq!(probes(&h), 0);
    h.until(8_833);
    assert_eq!(probes(&h), 1);
}

#[test]
fn a_failing_probe_is_not_sent_again_at_the_same_instant() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    let a = h.add(election("/a", "a", 1));
    h.join(a);
    // Contact proven early in the span, then the transport fails fast.
    h.answering = false;
    let late = TIMEOUT.as_millis() as u64 * 2;
    h.now = Timestamp::from_millis(late);
    h.s.handle_timeout(h.now);
    h.pump();
    let probe = h
        .held
        .iter()
        .position(|c| h.s.sender(c.op) == Some(Sender::Probe))
        .map(|i| h.held.remove(i))
        .expect("the session's probe");
    h.s.handle(
        h.now,
        Input::Reply {
            op: probe.op,
            result: Err(ZkCode::ConnectionLoss),
        },
    );
    h.pump();
    let next = h.s.poll_timeout().expect("a next deadline");
    assert!(next > h.now, "nothing due again at {}", h.now);
    assert!(
        !h.held
            .iter()
            .any(|c| h.s.sender(c.op) == Some(Sender::Probe)),
        "no second probe at the same instant"
    );
}

#[test]
fn a_release_sends_its_delete_at_once_and_never_leaves_a_stray_delete() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    let holder = h.add(lock("/l", "a", 1));
    h.join(holder);
    let waiter = h.add(lock("/l", "b", 2));
    h.join(waiter);
    assert!(matches!(h.role(holder), Some(Role::Leader(_))));
    let path =
        h.s.machine(holder)
            .and_then(Machine::own_path)
            .expect("node");
    // The release: the delete is the very next command, in the same call.
    h.s.close(h.now, holder).expect("runs");
    while let Some(e) = h.s.poll_event() {
        h.events.push(e);
    }
    let next = h.s.poll_command().expect("the delete");
    assert_eq!(
        next.request,
        Request::Delete {
            path: path.clone(),
            version: None
        }
    );
    assert!(h.notices_of(holder).contains(&Notice::Demoted {
        reason: DemotionReason::Closed
    }));
    h.sent.push((
        next.clone(),
        Sender::Machine {
            machine: holder,
            op: OpId(0),
        },
    ));
    h.answer(next);
    h.pump();
    assert!(h.events.iter().any(|e| matches!(
        e,
        Event::Stopped { machine, exit: Exit::Closed, .. } if *machine == holder
    )));
    assert!(
        matches!(h.role(waiter), Some(Role::Leader(_))),
        "handed over"
    );
    // However long it runs, no other delete of that node goes out.
    h.until(TIMEOUT.as_millis() as u64 * 3);
    let deletes = h
        .sent
        .iter()
        .filter(|(c, _)| matches!(&c.request, Request::Delete { path: p, .. } if *p == path))
        .count();
    assert_eq!(deletes, 1);
}

#[test]
fn a_release_whose_delete_fails_retries_later_and_once_done_sends_nothing() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    let holder = h.add(lock("/l", "a", 1));
    h.join(holder);
    let path =
        h.s.machine(holder)
            .and_then(Machine::own_path)
            .expect("node");
    h.answering = false;
    h.s.close(h.now, holder).expect("runs");
    h.pump();
    let delete = h.held.pop().expect("the delete");
    assert!(matches!(&delete.request, Request::Delete { path: p, .. } if *p == path));
    // Applied, but the answer is lost with the connection.
    let _ = h.zk.apply(&delete.request);
    h.s.handle(
        h.now,
        Input::Reply {
            op: delete.op,
            result: Err(ZkCode::ConnectionLoss),
        },
    );
    h.pump();
    assert!(h.held.is_empty(), "no retry at the same instant");
    h.answering = true;
    h.until(TIMEOUT.as_millis() as u64);
    // The retry found the node gone (`NoNode` ends a close as a delete does).
    assert!(h.s.machine(holder).is_none());
    let deletes = h
        .sent
        .iter()
        .filter(|(c, _)| matches!(&c.request, Request::Delete { path: p, .. } if *p == path))
        .count();
    assert_eq!(deletes, 2, "the first and one retry");
}

#[test]
fn a_lock_that_loses_its_hold_leaves_the_queue() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    let holder = h.add(lock("/l", "a", 1));
    h.join(holder);
    let path =
        h.s.machine(holder)
            .and_then(Machine::own_path)
            .expect("node");
    // An operator deletes the holder's node: the hold is lost (the holder
    // by its own listing learns it when it sets its own node's watch, two
    // probe ticks on), and the lock leaves rather than queueing again.
    h.zk.remove(&path);
    h.fired();
    h.pump();
    h.until(TIMEOUT.as_millis() as u64);
    assert!(h.notices_of(holder).contains(&Notice::Demoted {
        reason: DemotionReason::Revoked
    }));
    assert!(h.s.machine(holder).is_none(), "left the session");
    assert!(h.zk.children("/l").is_empty(), "no node queued again");
    // An election's candidate, by contrast, queues again.
    let e = h.add(election("/e", "a", 3));
    h.join(e);
    let path = h.s.machine(e).and_then(Machine::own_path).expect("node");
    h.zk.remove(&path);
    h.fired();
    h.pump();
    h.until(2 * TIMEOUT.as_millis() as u64);
    assert!(
        matches!(h.role(e), Some(Role::Leader(_))),
        "rejoined and leads"
    );
}

#[test]
fn the_window_opens_at_one_widens_per_answer_and_lets_machines_under_way_first() {
    let mut h = Harness::new(SessionConfig::new(1).with_requests_out(3));
    h.connect();
    h.answering = false;
    let ids: Vec<MachineId> = (0..4)
        .map(|i| h.add(election(&format!("/w{i}"), "a", i)))
        .collect();
    for id in &ids {
        h.s.join(h.now, *id).expect("runs");
    }
    h.pump();
    // Four machines' creates, no answer yet: the window opens at one.
    assert_eq!(OPENING, 1);
    assert_eq!(h.held.len(), 1);
    assert_eq!((h.s.requests_out(), h.s.requests_waiting()), (1, 3));
    let order = |h: &Harness| -> Vec<MachineId> {
        h.sent.iter().filter_map(|(_, s)| s.machine()).collect()
    };
    assert_eq!(order(&h), ids[..1]);
    // The probe never waits for a place.
    h.now = Timestamp::ZERO + TIMEOUT * 3 / 10;
    h.s.handle_timeout(h.now);
    h.pump();
    assert_eq!(h.sent.last().map(|(_, s)| *s), Some(Sender::Probe));
    assert_eq!(h.held.len(), 2);
    // The first create's answer (its path is missing) widens the window to
    // two, and the machine, under way now, goes before those not started:
    // its parent's create, then the next machine's create.
    let first = h.held.remove(0);
    h.answer(first);
    h.pump();
    assert_eq!(order(&h), [ids[0], ids[0], ids[1]]);
    assert_eq!(h.s.requests_waiting(), 2);
    // Every answer widens it by one, up to the limit of three.
    for c in std::mem::take(&mut h.held) {
        h.answer(c);
    }
    h.pump();
    assert_eq!(h.s.requests_out(), 3, "the limit, not the four answers");
    h.answering = true;
    for c in std::mem::take(&mut h.held) {
        h.answer(c);
    }
    h.pump();
    assert!(ids
        .iter()
        .all(|id| matches!(h.role(*id), Some(Role::Leader(_)))));
    // Each machine's requests went out in the order it made them: create,
    // the parent's create, create, list.
    for id in &ids {
        let verbs: Vec<&str> = h
            .sent
            .iter()
            .filter(|(_, s)| s.machine() == Some(*id))
            .map(|(c, _)| c.request.verb())
            .collect();
        assert_eq!(
            verbs[..4],
            ["create", "create", "create", "children"],
            "{id:?}"
        );
    }
}

/// A change under `/q` made behind the session's back (a persistent child
/// named `x{n}`): every observer of the queue lists it again.
fn change(h: &mut Harness, n: usize) {
    h.zk.apply(&Request::Create {
        path: format!("/q/x{n}"),
        data: Vec::new(),
        mode: crate::zk::CreateMode::Persistent,
        acl: crate::acl::Acl::Open,
    })
    .expect("made");
    h.fired();
    h.pump();
}

#[test]
fn a_start_goes_within_its_share_while_machines_under_way_keep_the_window_full() {
    // Six observers of a busy queue, under way, and a window of two: every
    // change under the queue brings six listings, and the changes keep
    // coming, so the line under way never empties. Under way first alone
    // would hold a machine starting now back for as long as that lasts.
    let mut h = Harness::new(SessionConfig::new(1).with_requests_out(2));
    h.connect();
    let a = h.add(election("/q", "a", 1));
    h.join(a);
    let observers: Vec<MachineId> = (0..6).map(|_| h.add(observer("/q"))).collect();
    h.answering = false;
    let mut changes = 0;
    change(&mut h, changes);
    assert_eq!(h.s.requests_out(), 2);
    assert!(h.s.requests_waiting() >= 3);
    let b = h.add(election("/other", "b", 2));
    h.s.join(h.now, b).expect("runs");
    let before = h.sent.len();
    h.pump();
    assert_eq!(h.sent.len(), before, "the window is full");
    // One answer, the queue kept changing so that listings keep waiting.
    let busy_answer = |h: &mut Harness, changes: &mut usize| {
        if h.s.requests_waiting() < 3 {
            *changes += 1;
            change(h, *changes);
        }
        let c = h.held.remove(0);
        h.answer(c);
        h.pump();
    };
    let mut answers = 0;
    while !h.sent[before..].iter().any(|(_, s)| s.machine() == Some(b)) {
        busy_answer(&mut h, &mut changes);
        answers += 1;
        assert!(answers <= STARTING_EVERY, "b's create still waits");
    }
    // Three listings under way, then b's create: it waited behind three,
    // with requests under way still waiting when it went.
    assert_eq!(STARTING_EVERY, 4);
    let line: Vec<Option<MachineId>> = h.sent[before..].iter().map(|(_, s)| s.machine()).collect();
    assert_eq!(line.len(), STARTING_EVERY, "{line:?}");
    assert!(line[..3]
        .iter()
        .all(|m| m.is_some_and(|m| observers.contains(&m))));
    assert_eq!(line[3], Some(b));
    assert!(h.s.requests_waiting() > 0, "b overtook machines under way");
    // Under way now, b goes on among the listings and leads, while the
    // changes never stop.
    while !matches!(h.role(b), Some(Role::Leader(_))) {
        busy_answer(&mut h, &mut changes);
        answers += 1;
        assert!(answers <= 100, "b leads");
    }
    assert!(h.s.requests_waiting() > 0, "the observers are still busy");
}

#[test]
fn a_burst_under_a_missing_parent_learns_it_from_its_first_answers() {
    // Two hundred elections under one missing path, all joining at once,
    // answered a round trip at a time: the first machine's answers teach
    // the rest, so nearly every start costs the four requests it must
    // (create, its own path's create, create, list), not six (a create and
    // the shared parent's create more, for every machine whose path's
    // create reached the server before the shared parent was made).
    const N: usize = 200;
    let mut h = Harness::new(SessionConfig::new(1).with_requests_out(50));
    h.connect();
    h.answering = false;
    let ids: Vec<MachineId> = (0..N)
        .map(|i| h.add(election(&format!("/burst/e{i}"), "a", i as u64)))
        .collect();
    for id in &ids {
        h.s.join(h.now, *id).expect("runs");
    }
    h.pump();
    let mut trips = 0;
    while !h.held.is_empty() {
        trips += 1;
        assert!(trips < 1_000, "the burst ends");
        for c in std::mem::take(&mut h.held) {
            h.answer(c);
        }
        h.pump();
    }
    assert!(ids
        .iter()
        .all(|id| matches!(h.role(*id), Some(Role::Leader(_)))));
    let requests = h.sent.iter().filter(|(_, s)| s.machine().is_some()).count();
    // The first machine pays two more (the shared parent); the few whose
    // path's create was out before the parent was made pay two more each.
    assert!(
        requests <= 4 * N + 2 + 2 * 4,
        "{requests} requests for {N} starts"
    );
}

#[test]
fn session_events_reach_every_machine_and_a_later_one_hears_connected() {
    let mut h = Harness::new(SessionConfig::new(1));
    let a = h.add(election("/a", "a", 1));
    h.join(a);
    assert!(h.sent.is_empty(), "nothing before the session connects");
    h.connect();
    assert_eq!((h.s.span(), h.s.sessions()), (1, 1));
    assert!(matches!(h.role(a), Some(Role::Leader(_))));
    // Added once connected: it starts as the others did.
    let b = h.add(election("/b", "b", 2));
    h.join(b);
    assert!(matches!(h.role(b), Some(Role::Leader(_))));
    h.s.handle(h.now, Input::Session(SessionEvent::Disconnected));
    h.pump();
    assert!(
        [a, b]
            .iter()
            .all(|id| matches!(h.role(*id), Some(Role::Suspended(_)))),
        "every machine heard of the disconnect"
    );
    h.zk.expire();
    h.s.handle(h.now, Input::Session(SessionEvent::Expired));
    h.connect();
    assert_eq!((h.s.span(), h.s.sessions()), (4, 2));
    assert!([a, b]
        .iter()
        .all(|id| matches!(h.role(*id), Some(Role::Leader(_)))));
}

#[test]
fn the_session_closes_once_its_machines_are_done_or_out_of_time() {
    let mut h = Harness::new(SessionConfig::new(1).with_close_timeout(Duration::from_secs(2)));
    h.connect();
    let a = h.add(election("/a", "a", 1).with_close_timeout(Duration::from_secs(1)));
    h.join(a);
    let b = h.add(lock("/b", "b", 2));
    h.join(b);
    // The server stops answering: neither delete completes.
    h.answering = false;
    h.s.close_session(h.now);
    h.pump();
    assert!(h.s.is_closing() && !h.s.is_finished());
    h.until(1_000);
    assert!(
        h.events.iter().any(|e| matches!(
            e,
            Event::Stopped { machine, exit: Exit::Abandoned, .. } if *machine == a
        )),
        "a's own close timeout"
    );
    assert!(
        h.s.machine(b).is_some(),
        "a lock waits as long as the session"
    );
    h.until(2_000);
    assert!(h.s.is_finished(), "the session's close timeout");
    assert_eq!(h.s.poll_timeout(), None);
}

#[test]
fn a_machine_that_ends_the_session_closes_it() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    let a = h.add(election("/a", "a", 1).ending_session());
    h.join(a);
    let other = h.add(election("/b", "b", 2));
    h.join(other);
    h.s.close(h.now, a).expect("runs");
    h.pump();
    assert!(h.s.is_finished(), "both closed, the session with them");
    assert!(h.zk.children("/a").is_empty() && h.zk.children("/b").is_empty());
}

/// Found by the `session` fuzz target when the probe waited for a machine:
/// a machine added after it fell due left `poll_timeout` before `now`. An
/// idle session probes as any other (its connection state rests on it),
/// and a probe due goes out with whatever input comes first.
#[test]
fn a_machine_added_after_the_probe_fell_due_sends_it_at_once() {
    let t = Timestamp::from_millis;
    let mut s = Session::new(SessionConfig::new(1));
    s.handle(t(0), Input::Session(connected()));
    assert_eq!(
        s.poll_timeout(),
        Some(t(3_000)),
        "an idle session probes too"
    );
    // Three tenths of the timeout have passed: the probe is due since 3 s.
    s.add(t(5_000), observer("/q"));
    assert!(
        s.poll_timeout().is_none_or(|at| at > t(5_000)),
        "due at {:?}, not after 5 s",
        s.poll_timeout()
    );
    let requests: Vec<Request> = std::iter::from_fn(|| s.poll_command())
        .map(|c| c.request)
        .collect();
    assert_eq!(
        requests.first(),
        Some(&Request::Exists {
            path: "/".to_owned(),
            watch: false
        }),
        "the probe first: {requests:?}"
    );
}

/// Found by the `session` fuzz target: a close timeout of zero (a
/// machine's, or the session's) filed its deadline for the very instant of
/// the close, so `poll_timeout` was not after `now`. Such a close gives up
/// at once.
#[test]
fn a_close_timeout_of_zero_gives_up_at_once() {
    let t = Timestamp::from_millis;
    let mut s = Session::new(SessionConfig::new(1));
    s.handle(t(0), Input::Session(connected()));
    let a = s.add(
        t(0),
        election("/q", "a", 1).with_close_timeout(Duration::ZERO),
    );
    s.join(t(0), a).expect("runs");
    while s.poll_command().is_some() {}
    s.close(t(10), a).expect("runs");
    assert!(s.poll_timeout().is_none_or(|at| at > t(10)));
    let events: Vec<Event> = std::iter::from_fn(|| s.poll_event()).collect();
    assert!(
        events.iter().any(|e| matches!(
            e,
            Event::Stopped {
                exit: Exit::Abandoned,
                ..
            }
        )),
        "{events:?}"
    );

    let mut s = Session::new(SessionConfig::new(1).with_close_timeout(Duration::ZERO));
    s.handle(t(0), Input::Session(connected()));
    let b = s.add(t(0), election("/q", "b", 2));
    s.join(t(0), b).expect("runs");
    while s.poll_command().is_some() {}
    s.close_session(t(10));
    assert!(s.poll_timeout().is_none_or(|at| at > t(10)));
    assert!(s.is_finished());
}

/// The session's own connection state, Curator's `ConnectionStateListener`
/// with the machines' lease: connected, suspended after two thirds of the
/// timeout without an answer, lost after nine tenths, reconnected on the
/// same session, expired, connected to a new one, closed.
#[test]
fn the_connection_state_follows_the_session_events_and_the_lease() {
    let states = |h: &Harness| -> Vec<ConnectionState> {
        h.events
            .iter()
            .filter_map(|e| match e {
                Event::Connection(s) => Some(*s),
                _ => None,
            })
            .collect()
    };
    let mut h = Harness::new(SessionConfig::new(1));
    assert_eq!(h.s.connection_state(), ConnectionState::Connecting);
    h.connect();
    let a = h.add(lock("/a", "a", 1));
    h.join(a);
    assert_eq!(states(&h), [ConnectionState::Connected]);
    // The server goes quiet (10 s timeout): the newest contact is at 0.
    h.answering = false;
    h.until(6_665);
    assert_eq!(h.s.connection_state(), ConnectionState::Connected);
    h.until(6_666);
    assert_eq!(h.s.connection_state(), ConnectionState::Suspended);
    h.until(9_000);
    assert_eq!(h.s.connection_state(), ConnectionState::Lost);
    // The client reconnects to the same session: reconnected.
    h.answering = true;
    h.held.clear();
    h.s.handle(h.now, Input::Session(SessionEvent::Disconnected));
    h.connect();
    assert_eq!(h.s.connection_state(), ConnectionState::Reconnected);
    h.s.handle(h.now, Input::Session(SessionEvent::Expired));
    h.pump();
    h.connect();
    h.s.close_session(h.now);
    h.pump();
    h.s.handle(h.now, Input::Session(SessionEvent::Closed));
    h.pump();
    assert_eq!(
        states(&h),
        [
            ConnectionState::Connected,
            ConnectionState::Suspended,
            ConnectionState::Lost,
            ConnectionState::Reconnected,
            ConnectionState::Expired,
            ConnectionState::Connected,
            ConnectionState::Closed,
        ]
    );
}

fn lock_config(path: &str, id: &str, seed: u64) -> Config {
    Config::builder(path, id)
        .rule(Rule::Mutex)
        .nonce_seed(seed)
        .build()
        .expect("valid config")
}

/// Adds a multi-lock over `configs` to the harness's session and starts
/// acquiring it.
fn start_multi_lock(h: &mut Harness, configs: Vec<Config>, give_up: Option<Duration>) -> GroupId {
    let gid = h.s.add_multi_lock(h.now, configs).expect("valid");
    assert_eq!(h.s.acquire_group(h.now, gid, give_up), Ok(true));
    gid
}

fn group_notices(h: &Harness, gid: GroupId) -> Vec<GroupNotice> {
    h.events
        .iter()
        .filter_map(|e| match e {
            Event::Group { group, notice } if *group == gid => Some(notice.clone()),
            _ => None,
        })
        .collect()
}

/// Two multi-locks over the same two paths, given in opposite orders: both
/// take them in sorted order, so the second waits for the first path and
/// holds nothing meanwhile — no deadlock — and gets both once the first
/// releases.
#[test]
fn two_multi_locks_take_their_paths_in_sorted_order_and_never_deadlock() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    let a = start_multi_lock(
        &mut h,
        vec![lock_config("/b", "a", 1), lock_config("/a", "a", 2)],
        None,
    );
    h.pump();
    let b = start_multi_lock(
        &mut h,
        vec![lock_config("/a", "b", 3), lock_config("/b", "b", 4)],
        None,
    );
    h.pump();
    let paths = |gid| -> Vec<String> {
        h.s.group(gid)
            .unwrap()
            .iter()
            .map(|m| h.s.machine(*m).unwrap().path().to_owned())
            .collect()
    };
    assert_eq!(paths(a), ["/a", "/b"]);
    assert_eq!(paths(b), ["/a", "/b"]);
    assert!(h.s.group_holds(a));
    assert!(
        matches!(&group_notices(&h, a)[..], [GroupNotice::Held { tokens }] if tokens.len() == 2)
    );
    // b queues on /a only: nothing of it under /b.
    assert!(!h.s.group_holds(b));
    assert_eq!(h.zk.children("/a").len(), 2);
    assert_eq!(h.zk.children("/b").len(), 1);
    // a releases both at once; b takes /a, then /b.
    h.s.release_group(h.now, a).expect("runs");
    h.pump();
    assert_eq!(group_notices(&h, a).last(), Some(&GroupNotice::Released));
    assert!(h.s.group_lock(a).is_some_and(|l| l.is_idle()), "idle");
    assert!(h.s.group_holds(b));
    let Some(GroupNotice::Held { tokens }) = group_notices(&h, b).first().cloned() else {
        panic!("b holds: {:?}", group_notices(&h, b));
    };
    assert_eq!(
        tokens.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
        ["/a", "/b"]
    );
}

/// A multi-lock that cannot get its second path in time gives up and
/// releases the first.
#[test]
fn a_multi_lock_gives_up_at_its_deadline_and_releases_what_it_took() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    let other = h.add(lock("/b", "x", 9));
    h.join(other);
    let g = start_multi_lock(
        &mut h,
        vec![lock_config("/a", "a", 1), lock_config("/b", "a", 2)],
        Some(Duration::from_secs(1)),
    );
    h.pump();
    assert_eq!(h.zk.children("/a").len(), 1, "it holds /a");
    assert_eq!(h.zk.children("/b").len(), 2, "and queues on /b");
    h.until(1_000);
    assert_eq!(
        group_notices(&h, g),
        [GroupNotice::GaveUp, GroupNotice::Released]
    );
    assert!(h.zk.children("/a").is_empty(), "/a released");
    assert_eq!(h.zk.children("/b").len(), 1, "only the other lock's node");
}

/// Once held, a part lost is the whole lost: the other part is released
/// at once and the group says which path went and why.
#[test]
fn a_part_lost_after_the_multi_lock_held_loses_the_whole() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    let g = start_multi_lock(
        &mut h,
        vec![lock_config("/a", "a", 1), lock_config("/b", "a", 2)],
        None,
    );
    h.pump();
    assert!(h.s.group_holds(g));
    let node = h.zk.children("/b").pop().unwrap();
    h.zk.remove(&format!("/b/{node}"));
    h.fired();
    h.pump();
    // A holder by its own listing learns it when it sets its own node's
    // watch, at its first probe tick.
    h.until(TIMEOUT.as_millis() as u64);
    let notices = group_notices(&h, g);
    assert!(
        notices.contains(&GroupNotice::Lost {
            path: "/b".into(),
            reason: DemotionReason::Revoked
        }),
        "{notices:?}"
    );
    assert!(!h.s.group_holds(g));
    assert!(h.zk.children("/a").is_empty(), "/a released with it");
    assert_eq!(notices.last(), Some(&GroupNotice::Released));
}

/// A part lost while the group still acquires: the parts after it leave,
/// it queues again, and the group goes on from it; the application never
/// held anything.
#[test]
fn a_part_lost_while_acquiring_queues_again_and_the_group_goes_on() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    let blocker = h.add(lock("/b", "x", 9));
    h.join(blocker);
    let g = start_multi_lock(
        &mut h,
        vec![lock_config("/a", "a", 1), lock_config("/b", "a", 2)],
        None,
    );
    h.pump();
    // An operator deletes our /a node while we wait on /b.
    let parts = h.s.group(g).unwrap();
    let node_of = |h: &Harness, i: usize| h.s.machine(parts[i]).unwrap().node().unwrap().to_owned();
    let b_before = node_of(&h, 1);
    let node = node_of(&h, 0);
    h.zk.remove(&format!("/a/{node}"));
    h.fired();
    h.pump();
    // The /a part holds by its listing: it learns of the deletion when it
    // sets its own node's watch, at its first probe tick.
    h.until(TIMEOUT.as_millis() as u64);
    assert!(
        group_notices(&h, g).is_empty(),
        "nothing granted, nothing lost"
    );
    // The /b part left its queue (its node deleted) before /a was taken
    // again, and queued again behind the blocker after.
    assert_eq!(h.zk.children("/a").len(), 1, "/a taken again");
    let b_now = h.zk.children("/b");
    assert_eq!(b_now.len(), 2, "{b_now:?}");
    assert!(
        !b_now.contains(&b_before),
        "the first /b node went: {b_now:?}"
    );
    // The blocker releases /b: the group holds both.
    h.s.close(h.now, blocker).expect("runs");
    h.pump();
    assert!(h.s.group_holds(g), "{:?}", group_notices(&h, g));
}

/// A released multi-lock is idle, not gone: it is acquired again (new
/// nodes, new tokens) as a lock's handle is, and closing it ends it.
#[test]
fn a_released_multi_lock_is_taken_again_and_closing_it_ends_it() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    let g = start_multi_lock(
        &mut h,
        vec![lock_config("/b", "a", 1), lock_config("/a", "a", 2)],
        None,
    );
    h.pump();
    let tokens = |h: &Harness| -> Vec<Vec<(String, crate::FencingToken)>> {
        group_notices(h, g)
            .into_iter()
            .filter_map(|n| match n {
                GroupNotice::Held { tokens } => Some(tokens),
                _ => None,
            })
            .collect()
    };
    assert_eq!(tokens(&h).len(), 1);
    assert_eq!(
        h.s.acquire_group(h.now, g, None),
        Ok(false),
        "busy: nothing changes"
    );
    h.s.release_group(h.now, g).expect("runs");
    h.pump();
    assert_eq!(group_notices(&h, g).last(), Some(&GroupNotice::Released));
    assert!(h.zk.children("/a").is_empty() && h.zk.children("/b").is_empty());
    assert_eq!(
        h.s.group(g).map(|p| p.len()),
        Some(2),
        "its parts stay, idle"
    );
    assert_eq!(h.s.acquire_group(h.now, g, None), Ok(true));
    h.pump();
    let held = tokens(&h);
    assert_eq!(held.len(), 2, "held again");
    for (before, after) in held[0].iter().zip(&held[1]) {
        assert_eq!(before.0, after.0, "same paths, in sorted order");
        assert!(after.1 > before.1, "a new node, a higher token: {held:?}");
    }
    h.s.close_group(h.now, g).expect("runs");
    h.pump();
    assert!(h.zk.children("/a").is_empty() && h.zk.children("/b").is_empty());
    assert_eq!(h.s.group(g), None, "gone with its parts");
    assert_eq!(h.s.machines().count(), 0);
    assert_eq!(h.s.acquire_group(h.now, g, None), Err(GroupGone(g)));
}

/// Found by the simulator (a rider's close timed out while its session was
/// cut off): a machine given up on while the session stays open kept its
/// node for as long as the session lived, and every node above it waited
/// forever. The session now finishes the close out of sight: the driver is
/// told at the deadline, and the node goes once the server answers again.
#[test]
fn a_machine_given_up_on_still_leaves_the_queue_once_the_server_answers() {
    let mut h = Harness::new(SessionConfig::new(1));
    h.connect();
    let a = h.add(election("/q", "a", 1).with_close_timeout(Duration::from_secs(1)));
    h.join(a);
    let b = h.add(election("/q", "b", 2));
    h.join(b);
    assert!(matches!(h.role(a), Some(Role::Leader(_))));
    // The connection is lost, and the close cannot reach the server.
    h.s.handle(h.now, Input::Session(SessionEvent::Disconnected));
    h.pump();
    h.answering = false;
    h.s.close(h.now, a).expect("runs");
    h.pump();
    h.until(1_000);
    assert!(
        h.events.iter().any(|e| matches!(
            e,
            Event::Stopped { machine, exit: Exit::Abandoned, .. } if *machine == a
        )),
        "given up on at its close timeout"
    );
    assert!(h.s.machine(a).is_none(), "gone for the driver");
    assert_eq!(h.s.close(h.now, a), Err(Gone(a)));
    assert_eq!(h.zk.children("/q").len(), 2, "its node is still there");
    // Whatever the connection lost is answered as lost; then it is back.
    for cmd in std::mem::take(&mut h.held) {
        h.s.handle(
            h.now,
            Input::Reply {
                op: cmd.op,
                result: Err(ZkCode::ConnectionLoss),
            },
        );
    }
    h.answering = true;
    h.connect();
    h.until(10_000);
    assert_eq!(h.zk.children("/q").len(), 1, "its node went");
    assert!(matches!(h.role(b), Some(Role::Leader(_))), "b leads");
    let stops = h
        .events
        .iter()
        .filter(|e| matches!(e, Event::Stopped { machine, .. } if *machine == a))
        .count();
    assert_eq!(stops, 1, "told once");
}
