//! Hand-written scenarios, each a sentence: a small world, a planned fault (or
//! one injected at the right moment), and what must follow, with every checker
//! running as in the swarm.

use std::time::Duration;

use zkelect_core::{ConnectionPolicy, Request, Role, Timestamp};
use zkelect_sim::canary::Canary;
use zkelect_sim::swarm::{Env, Fault, Knobs, Scheme, Swarm};
use zkelect_sim::world::{View, World, PATH};

const T: Duration = Duration::from_secs(4);

fn at(ms: u64) -> Timestamp {
    Timestamp::from_millis(ms)
}

fn swarm(candidates: usize, plan: Vec<(Timestamp, Fault)>) -> Swarm {
    Swarm {
        candidates,
        leaders: 1,
        session_timeout: T,
        policy: ConnectionPolicy::Standard,
        chaos: Duration::from_secs(30),
        reorder: false,
        pauses: false,
        plan,
        env: Env::default(),
    }
}

/// Steps until `pred` holds (or fails the test at `limit`); returns the time.
fn until(world: &mut World, limit: Timestamp, pred: impl Fn(&World) -> bool) -> Timestamp {
    while !pred(world) {
        assert!(world.violation().is_none(), "{:?}", world.violation());
        assert!(world.now() < limit, "nothing happened by {limit}");
        assert!(world.step(), "the world ran out of events");
    }
    world.now()
}

fn one_leader(world: &World) -> Option<usize> {
    match world.leaders()[..] {
        [one] => Some(one),
        _ => None,
    }
}

#[test]
fn a_crashed_leaders_successor_waits_for_the_server_to_expire_its_session() {
    let mut world = World::new(1, swarm(3, vec![]), None, true);
    until(&mut world, at(2_000), |w| one_leader(w).is_some());
    assert!(world.run_until(at(2_000)).is_none());
    let old = one_leader(&world).unwrap();
    world.inject(Fault::Crash { pid: old });
    let crashed = world.now();
    let took = until(&mut world, at(10_000), |w| {
        w.leaders().iter().any(|&p| p != old)
    })
    .saturating_since(crashed);
    // The server last heard the crashed leader at most a third of the timeout
    // before the crash (pings), and expires on its 200 ms tick.
    assert!(
        took >= T * 2 / 3 && took <= T + Duration::from_millis(300),
        "successor after {took:?}"
    );
    assert!(world.run().is_none(), "{:?}", world.violation());
}

#[test]
fn a_revoked_leader_steps_down_at_once_and_its_successor_takes_over() {
    let mut world = World::new(2, swarm(3, vec![]), None, true);
    assert!(world.run_until(at(2_000)).is_none());
    let old = one_leader(&world).expect("a leader");
    world.inject(Fault::Revoke { pid: old });
    let revoked = world.now();
    let next = until(&mut world, at(3_000), |w| {
        w.leaders().iter().any(|&p| p != old)
    });
    assert!(next.saturating_since(revoked) < Duration::from_millis(100));
    // The old one learned from its own-node watch, stopped at once, and
    // (after a listing confirmed the node gone) rejoined at the back.
    until(&mut world, at(3_000), |w| {
        !w.process(old).agent.role().is_leader()
    });
    until(&mut world, at(3_000), |w| {
        w.process(old).revoked_at.is_none() && w.process(old).agent.node().is_some()
    });
    assert!(world.run().is_none(), "{:?}", world.violation());
    assert!(world.stats().revocations >= 1);
}

#[test]
fn a_server_restart_shorter_than_the_session_timeout_keeps_the_same_leader() {
    let plan = vec![(at(3_000), Fault::RestartServer { ms: 1_000 })];
    let mut world = World::new(3, swarm(4, plan), None, true);
    assert!(world.run_until(at(2_900)).is_none());
    let leader = one_leader(&world).expect("a leader");
    let Role::Leader(token) = world.process(leader).agent.role() else {
        unreachable!()
    };
    // Suspended while the server is down, then the same node leads again.
    until(&mut world, at(3_500), |w| {
        w.process(leader).agent.role() == Role::Suspended(token)
    });
    until(&mut world, at(6_000), |w| {
        w.process(leader).agent.role() == Role::Leader(token)
    });
    assert!(world.run().is_none(), "{:?}", world.violation());
}

#[test]
fn a_paused_leaders_late_write_is_refused_by_the_fenced_resource() {
    let mut swarm = swarm(3, vec![]);
    swarm.pauses = true;
    let mut world = World::new(4, swarm, None, true);
    assert!(world.run_until(at(2_000)).is_none());
    let old = one_leader(&world).expect("a leader");
    world.inject(Fault::Pause {
        pid: old,
        ms: 3 * T.as_millis() as u64,
    });
    // A successor is elected while the old leader is frozen, still believing it leads.
    until(&mut world, at(10_000), |w| {
        w.leaders().iter().any(|&p| p != old)
    });
    assert!(world.process(old).agent.role().is_leader());
    assert!(world.run().is_none(), "{:?}", world.violation());
    assert!(
        world.stats().fenced_rejections >= 1,
        "the old leader's write after the pause was refused: {}",
        world.stats()
    );
}

#[test]
fn a_create_applied_but_unanswered_is_found_again_and_leaves_no_orphan() {
    let mut world = World::new(5, swarm(1, vec![]), None, true);
    // Wait for the candidate's own create to be the one request on its way
    // (the election path exists by then), then drop the connection with the
    // request applied: the node is made, the reply is lost.
    until(&mut world, at(2_000), |w| {
        let sent: Vec<_> = w.requests_in_flight(0).collect();
        w.zk().stat(PATH).is_some()
            && matches!(sent[..], [Request::Create { path, .. }] if path.ends_with("n_"))
    });
    world.inject(Fault::DropConnection {
        pid: 0,
        applied: true,
    });
    assert!(world.run_until(at(3_000)).is_none());
    let p = world.process(0);
    assert!(p.agent.role().is_leader(), "{:?}", p.agent.role());
    assert_eq!(p.candidate.unwrap().stats().recovered_creates, 1);
    assert_eq!(
        world.children().len(),
        1,
        "no orphan: {:?}",
        world.children()
    );
    assert!(world.run().is_none(), "{:?}", world.violation());
}

#[test]
fn a_partitioned_leader_suspends_before_the_server_can_expire_it() {
    let mut world = World::new(6, swarm(3, vec![]), None, true);
    assert!(world.run_until(at(2_000)).is_none());
    let old = one_leader(&world).expect("a leader");
    world.inject(Fault::Partition {
        pid: old,
        ms: 2 * T.as_millis() as u64,
    });
    let suspended = until(&mut world, at(8_000), |w| {
        !w.process(old).agent.role().is_leader()
    });
    let successor = until(&mut world, at(10_000), |w| {
        w.leaders().iter().any(|&p| p != old)
    });
    assert!(suspended < successor, "{suspended} < {successor}");
    assert!(world.run().is_none(), "{:?}", world.violation());
}

#[test]
fn resign_without_rejoin_hands_over_and_leaves_the_candidate_idle() {
    let mut world = World::new(7, swarm(2, vec![]), None, true);
    assert!(world.run_until(at(2_000)).is_none());
    let old = one_leader(&world).expect("a leader");
    world.inject(Fault::Resign {
        pid: old,
        rejoin: false,
    });
    until(&mut world, at(2_500), |w| {
        w.leaders().iter().any(|&p| p != old)
    });
    // The delete's reply may still be on its way when the successor leads.
    until(&mut world, at(2_500), |w| {
        w.process(old).agent.role() == Role::Idle
    });
    assert_eq!(world.children().len(), 1);
    assert_eq!(world.leaders().len(), 1);
    assert!(world.run().is_none(), "{:?}", world.violation());
}

/// Regression (found by the simulator, fixed in the core by 9bdbc3b): a watch
/// event that lags behind replies used to be matched to the candidate's
/// *current* node by name alone. When the election parent is recreated (a
/// container reaped when its last child went, or an operator's `deleteall`),
/// the same session's next node gets the same name (same nonce, sequence
/// restarted), so the late `NodeDeleted` of the old node was taken for a
/// revocation of the new one: the candidate created a second node and the
/// first stayed behind, owned by its live session, ahead of it in the queue.
#[test]
fn a_late_delete_event_for_a_reused_own_node_name_does_not_orphan_the_node() {
    // The first seed whose knobs give a container parent.
    let seed = (0..)
        .find(|&s| Knobs::from_seed(s, false).container_parent)
        .unwrap();
    let mut plan = vec![(at(0), Fault::LagEvents { pid: 0, ms: 20_000 })];
    plan.extend((1..14).map(|i| {
        (
            at(i * 1_000),
            Fault::Resign {
                pid: 0,
                rejoin: true,
            },
        )
    }));
    let mut world = World::new(seed, swarm(1, plan), None, true);
    if let Some(v) = world.run() {
        for line in world.trace().tail() {
            eprintln!("{line}");
        }
        panic!("seed {seed}: {} at {}: {}", v.invariant, v.at, v.detail);
    }
}

/// Steps in 5 ms slices until `end`, asserting at most one leader (by every
/// process's own belief) at every step; returns who led, in turn, with the
/// sequence number of the node it led with.
fn leaders_in_turn(world: &mut World, end: Timestamp) -> Vec<(usize, i32)> {
    let mut seen: Vec<(usize, i32)> = Vec::new();
    let mut t = world.now();
    while t < end {
        t = t + Duration::from_millis(5);
        while world.violation().is_none() && world.now() < t && world.step() {
            let leaders = world.leaders();
            assert!(
                leaders.len() <= 1,
                "two leaders at {}: {leaders:?}",
                world.now()
            );
            if let [one] = leaders[..] {
                if seen.last().map(|(p, _)| *p) != Some(one) {
                    let node = world.process(one).agent.node().unwrap_or_default();
                    let (_, seq) = zkelect_core::name::split_sequence(node).unwrap();
                    seen.push((one, seq));
                }
            }
        }
        assert!(world.violation().is_none(), "{:?}", world.violation());
    }
    seen
}

/// Curator's LeaderLatch and kazoo's Lock each share a queue with zkelect
/// candidates that name their nodes in that library's scheme: two of each
/// join in an order the seed picks, and the leader closes three times. Each
/// hand-over goes to the next in line, whatever its library, with never two
/// processes believing they lead.
#[test]
fn foreign_contenders_and_zkelect_candidates_with_their_interop_hand_over_in_one_queue() {
    for (scheme, seed) in [
        (Scheme::Curator, 11),
        (Scheme::Kazoo, 12),
        (Scheme::Curator, 13),
    ] {
        let plan = (1..=3)
            .map(|i| (at(i * 3_000), Fault::CloseLeader))
            .collect();
        let mut swarm = swarm(2, plan);
        swarm.env = Env {
            interop: scheme,
            foreign: 2,
            ..Env::default()
        };
        let mut world = World::new(seed, swarm, None, true);
        let turns = leaders_in_turn(&mut world, at(12_000));
        let mut distinct: Vec<usize> = turns.iter().map(|(p, _)| *p).collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            4,
            "{scheme}: every process led once: {turns:?}"
        );
        let kinds: Vec<Option<Scheme>> = turns
            .iter()
            .map(|&(p, _)| world.process(p).foreign)
            .collect();
        assert!(
            kinds.contains(&None) && kinds.contains(&Some(scheme)),
            "{scheme}: both libraries led: {kinds:?}"
        );
        // In the order of their nodes in the queue.
        assert!(
            turns.windows(2).all(|w| w[0].1 < w[1].1),
            "{scheme}: {turns:?}"
        );
        assert!(world.run().is_none(), "{:?}", world.violation());
        assert!(world.stats().foreign_elections >= 2, "{}", world.stats());
    }
}

fn clamped(seed_with_session_ids: bool, min: Option<u64>, max: Option<u64>) -> (u64, Swarm) {
    let seed = (0..)
        .find(|&s| Knobs::from_seed(s, false).session_ids == seed_with_session_ids)
        .unwrap();
    let mut swarm = swarm(3, vec![]);
    swarm.policy = ConnectionPolicy::SessionAware;
    swarm.env.min_session_timeout = min.map(Duration::from_millis);
    swarm.env.max_session_timeout = max.map(Duration::from_millis);
    (seed, swarm)
}

/// A server whose `maxSessionTimeout` is below the request (or whose minimum
/// is above it) grants another timeout; both ways a client learns it (from
/// the session, or by a handshake of its own) report the granted one, and a
/// leader cut off under the `SessionAware` policy, leasing on it, stops before
/// the server expires it and elects its successor.
#[test]
fn a_clamping_server_gives_candidates_the_negotiated_timeout_and_a_cut_off_leader_stops_first() {
    for (min, max, granted) in [
        (None, Some(1_500), 1_500),
        (Some(6_000), Some(6_000), 6_000),
    ] {
        let granted = Duration::from_millis(granted);
        for session_ids in [true, false] {
            let (seed, swarm) = clamped(session_ids, min, max);
            let mut world = World::new(seed, swarm, None, true);
            assert!(world.run_until(at(2_000)).is_none());
            for p in world.processes() {
                assert_eq!(p.session_timeout, granted);
                assert_eq!(p.candidate.unwrap().session_timeout(), granted);
            }
            let old = one_leader(&world).expect("a leader");
            world.inject(Fault::Partition {
                pid: old,
                ms: 3 * granted.as_millis() as u64,
            });
            let cut = world.now();
            let stopped = until(&mut world, cut + granted * 2, |w| {
                !w.process(old).agent.role().is_leader()
            });
            let successor = until(&mut world, cut + granted * 2, |w| {
                w.leaders().iter().any(|&p| p != old)
            });
            assert!(stopped < successor, "{stopped} < {successor}");
            // The server expired the old session within the granted timeout.
            assert!(successor.saturating_since(cut) <= granted + Duration::from_millis(300));
            assert!(world.run().is_none(), "{:?}", world.violation());
        }
    }
}

/// The same cut-off leader, told the *requested* timeout (4 s) by its client
/// while the server granted 1.5 s, keeps leading past its session.
#[test]
fn a_leader_leasing_on_the_requested_timeout_leads_beside_its_successor() {
    let (seed, swarm) = clamped(true, None, Some(1_500));
    let mut world = World::new(seed, swarm, Some(Canary::LeasesFromRequest), true);
    assert!(world.run_until(at(2_000)).is_none());
    let old = one_leader(&world).expect("a leader");
    world.inject(Fault::Partition {
        pid: old,
        ms: 4_500,
    });
    let violation = world.run().expect("two leaders");
    assert_eq!(violation.invariant, "safety", "{violation:?}");
}

/// PERSISTENT children named like contenders of every scheme sit below a lone
/// candidate, for each interop setting: it skips them and leads within a few
/// round trips of joining. One more, created later behind the leader, is
/// skipped by a newcomer when the leader closes. The look-alikes are left as
/// they were, and are no leak.
#[test]
fn persistent_lookalikes_of_every_scheme_are_skipped_and_left_alone() {
    for interop in Scheme::ALL {
        let plan = vec![
            (at(3_000), Fault::Lookalike { scheme: interop }),
            (at(4_000), Fault::Spawn),
            (at(6_000), Fault::CloseLeader),
        ];
        let mut swarm = swarm(1, plan);
        swarm.env = Env {
            interop,
            lookalikes: Scheme::ALL.to_vec(),
            ..Env::default()
        };
        let mut world = World::new(21, swarm, None, true);
        let elected = until(&mut world, at(1_000), |w| one_leader(w) == Some(0));
        assert!(elected < at(300), "{interop}: elected at {elected}");
        let stats = |w: &World, pid| w.process(pid).candidate.unwrap().stats().persistent_skipped;
        assert_eq!(
            stats(&world, 0),
            1,
            "{interop}: its own scheme's look-alike"
        );
        let before: Vec<_> = world
            .lookalikes()
            .iter()
            .map(|n| world.zk().stat(&format!("{PATH}/{n}")).unwrap())
            .collect();
        assert_eq!(before.len(), 3);
        until(&mut world, at(8_000), |w| one_leader(w) == Some(1));
        assert!(
            stats(&world, 1) >= 1,
            "{interop}: the newcomer skipped the late one"
        );
        assert!(world.run().is_none(), "{interop}: {:?}", world.violation());
        assert_eq!(world.lookalikes().len(), 4);
        for (name, stat) in world.lookalikes().iter().zip(before) {
            assert_eq!(
                world.zk().stat(&format!("{PATH}/{name}")),
                Some(stat),
                "{name}"
            );
        }
    }
}

/// The first seed whose drawn options satisfy `want` (and give no process
/// the `Parent` strategy, so the scenario stays about the option at hand).
fn seed_with(want: impl Fn(&zkelect_sim::swarm::Options) -> bool) -> u64 {
    (0..)
        .find(|&s| {
            let o = zkelect_sim::swarm::Options::draw(s);
            o.parent == 0 && want(&o)
        })
        .expect("some seed draws it")
}

#[test]
fn without_create_parents_the_world_makes_the_path_and_a_wiped_election_gets_it_back() {
    let seed = seed_with(|o| !o.create_parents);
    let plan = vec![(at(6_000), Fault::WipeElection)];
    let mut world = World::new(seed, swarm(3, plan), None, true);
    assert!(!world.knobs().options.create_parents);
    until(&mut world, at(3_000), |w| one_leader(w).is_some());
    // The operator deleted every node and the path, and created the path
    // again: the candidates rejoin (they would fail on NoNode without it).
    until(&mut world, at(6_500), |w| w.now() >= at(6_100));
    assert!(world.zk().stat(PATH).is_some(), "the path is back");
    until(&mut world, at(12_000), |w| {
        one_leader(w).is_some() && w.stats().elections >= 2
    });
    assert!(world.run().is_none(), "{:?}", world.violation());
}

#[test]
fn a_revoked_leader_without_rejoin_stays_out_and_the_queue_goes_on_without_it() {
    let seed = seed_with(|o| o.no_rejoin == 100);
    let mut world = World::new(seed, swarm(3, vec![]), None, true);
    assert!(world.run_until(at(2_000)).is_none());
    let old = one_leader(&world).expect("a leader");
    world.inject(Fault::Revoke { pid: old });
    until(&mut world, at(4_000), |w| {
        one_leader(w).is_some_and(|p| p != old)
    });
    // Out for good (idle, no node), while the others go on.
    assert!(
        world.run_until(at(15_000)).is_none(),
        "{:?}",
        world.violation()
    );
    assert_eq!(world.process(old).agent.role(), Role::Idle);
    assert!(world.process(old).agent.node().is_none());
    assert!(world.run().is_none(), "{:?}", world.violation());
}

/// Records every `TokenRegressed` a candidate reports.
struct Regressions(std::rc::Rc<std::cell::RefCell<Vec<(usize, i64, i64)>>>);

impl zkelect_sim::check::Invariant<View> for Regressions {
    fn name(&self) -> &'static str {
        "regressions"
    }

    fn kinds(&self) -> zkelect_sim::check::Kinds {
        zkelect_sim::check::Kinds::NOTICE
    }

    fn check(
        &mut self,
        _world: &View,
        event: &zkelect_sim::check::Event<'_>,
    ) -> Result<(), String> {
        if let zkelect_sim::check::Event::Notice {
            pid,
            notice: zkelect_core::Notice::TokenRegressed { before, now },
        } = event
        {
            self.0.borrow_mut().push((*pid, before.0, now.0));
        }
        Ok(())
    }
}

/// The server's data wiped under a running election (a new history: zxids
/// from the start): every candidate's session is gone, each takes a new
/// node whose token is not above the one it held and says so
/// (`Notice::TokenRegressed`; the same creates in the same order give the
/// same zxids again, an equal token), the new leader leads with a token not
/// above the old one's, and the fenced resource refuses its writes, as it
/// must until an operator lets it accept the new history. `tokens-grow` is left out: a lower token
/// after a wipe is what it exists to refuse.
#[test]
fn a_wiped_server_lowers_the_tokens_and_each_candidate_that_held_a_node_says_so() {
    let found = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let mut checkers: Vec<zkelect_sim::check::Checker> = zkelect_sim::check::standard()
        .into_iter()
        .filter(|c| c.name() != "tokens-grow")
        .collect();
    checkers.push(Box::new(Regressions(std::rc::Rc::clone(&found))));
    // Hand-offs grow the old history past what the new one starts with.
    let plan = (0..6)
        .map(|i| {
            let fault = Fault::Resign {
                pid: i % 3,
                rejoin: true,
            };
            (at(1_000 + 700 * i as u64), fault)
        })
        .collect();
    let mut world = World::with_invariants(21, swarm(3, plan), None, true, checkers);
    until(&mut world, at(5_000), |w| one_leader(w).is_some());
    // Some writes land, and the server's history grows past the tokens a
    // wiped server will give first.
    world.run_until(at(6_000));
    until(&mut world, at(8_000), |w| one_leader(w).is_some());
    let before = world.resource_max().expect("the leader wrote");
    let held: Vec<usize> = world
        .processes()
        .filter(|p| p.candidate.is_some_and(|c| c.token().is_some()))
        .map(|p| p.pid)
        .collect();
    assert_eq!(held.len(), 3);
    world.wipe_data();
    until(&mut world, at(20_000), |w| {
        one_leader(w).is_some() && found.borrow().len() == 3
    });
    assert!(world.violation().is_none(), "{:?}", world.violation());
    let new_leader = one_leader(&world).expect("a new leader");
    let token = world.process(new_leader).candidate.and_then(|c| c.token());
    assert!(token < Some(before), "{token:?} after {before:?}");
    for (pid, was, now) in found.borrow().iter() {
        assert!(now <= was, "p{pid}: {now} after {was}");
        let stats = world.process(*pid).candidate.expect("a candidate").stats();
        assert_eq!(stats.tokens_regressed, 1, "p{pid}");
    }
    // The new leader's writes are refused: the resource keeps the old
    // history's token.
    let refused = world.stats().fenced_rejections;
    world.run_until(at(24_000));
    assert!(world.stats().fenced_rejections > refused);
    assert_eq!(world.resource_max(), Some(before));
}

/// An operator deletes a leader's node while the follower its session talks
/// to lags (ZooKeeper lets a follower fall `syncLimit` ticks behind the
/// leader). That follower has not applied the deletion: it answers the
/// leader's probe after it, its watch cannot fire yet, and the leader is then
/// cut off before the follower applies it. Nothing could have told the
/// leader sooner; under `SessionAware` its lease, from that last answer, stops it within a
/// session timeout of the moment its server applied the deletion, which is
/// past a session timeout from the deletion at the ensemble's leader.
#[test]
fn a_leader_on_a_lagging_follower_stops_within_a_session_timeout_of_its_server_applying_the_deletion(
) {
    use zkelect_sim::server::{EnsembleSpec, MemberFault};
    let t = Duration::from_secs(2);
    let lag_at = at(3_000);
    let world_of = |seed| {
        let mut swarm = swarm(1, vec![]);
        swarm.session_timeout = t;
        // A leader that keeps leading through a disconnect while its lease
        // lasts (under `Standard` the disconnect alone stops it).
        swarm.policy = ConnectionPolicy::SessionAware;
        // Both followers lag, so the leader's session is on a lagging one
        // unless it is on the ensemble's leader (member 0).
        swarm.env.ensemble = Some(EnsembleSpec {
            servers: 3,
            faults: [1, 2]
                .map(|server| (lag_at, MemberFault::Lag { server, ms: 1_000 }))
                .to_vec(),
            down_at_start: None,
            lowered: None,
        });
        World::new(seed, swarm, None, true)
    };
    let member = |w: &World| {
        let session = w.process(0).session_id?;
        w.server().member_of(session)
    };
    let lagging = |w: &World| {
        member(w).is_some_and(|m| w.server().ensemble().is_some_and(|e| e.is_lagging(m)))
    };
    // A world whose candidate leads from a follower when the lag starts.
    let (seed, mut world) = (0..40)
        .map(|seed| (seed, world_of(seed)))
        .find_map(|(seed, mut world)| {
            assert!(world
                .run_until(lag_at + Duration::from_millis(10))
                .is_none());
            (world.process(0).agent.role().is_leader() && lagging(&world)).then_some((seed, world))
        })
        .expect("a leader on a follower within 40 seeds");
    world.inject(Fault::Revoke { pid: 0 });
    let deleted = world.now();
    // Its server answers after the deletion, more than a tenth of the
    // timeout after it (the margin a lease leaves), and has not applied it.
    let answered = deleted + t / 10 + Duration::from_millis(50);
    until(&mut world, deleted + t, |w| {
        w.process(0)
            .candidate
            .and_then(|c| c.last_contact())
            .is_some_and(|c| c > answered)
    });
    assert!(lagging(&world), "seed {seed}: the follower caught up first");
    assert!(world.process(0).agent.role().is_leader(), "seed {seed}");
    world.inject(Fault::Partition {
        pid: 0,
        ms: 3 * t.as_millis() as u64,
    });
    let applied = until(&mut world, deleted + t, |w| !lagging(w));
    let stopped = until(&mut world, applied + t, |w| {
        !w.process(0).agent.role().is_leader()
    });
    assert!(
        stopped > deleted + t,
        "seed {seed}: stopped at {stopped}, deleted at {deleted}: not the case this is about"
    );
    assert!(
        world.run().is_none(),
        "seed {seed}: {:?}",
        world.violation()
    );
}
