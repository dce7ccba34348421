//! The request timeout (the transports' `op_timeout`, kept by the core's
//! session: `SessionConfig::with_request_timeout`): the swarm draws it per
//! session (`SessionSettings`, stream label 29), and a request out past
//! its bound is answered `OperationTimeout` by the production session
//! while the server may still apply it. Seeds that draw it time requests
//! out, and every one of them passes every checker.

mod support;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use zkelect_sim::check::{Checker, Invariant, Kinds};
use zkelect_sim::invariant::Holds;
use zkelect_sim::swarm::{FaultMix, Overrides, SessionSettings, Swarm};
use zkelect_sim::world::View;

use support::checked_world;

/// A checker that never fails: the most requests any one process's
/// session answered `OperationTimeout`, summed over processes, seen so far.
struct Timeouts(Rc<RefCell<u64>>);

impl Invariant<View> for Timeouts {
    fn name(&self) -> &'static str {
        "timeouts-seen"
    }

    fn kinds(&self) -> Kinds {
        Kinds::STEP
    }

    fn check_step(&mut self, world: &View) -> Result<Holds, String> {
        let now: u64 = (0..world.processes().len())
            .filter_map(|pid| world.traffic(pid))
            .map(|t| t.timeouts)
            .sum();
        let mut seen = self.0.borrow_mut();
        *seen = (*seen).max(now);
        Ok(Holds::ThisStep)
    }
}

/// The draw: about 1 in 4 sessions, each of the three bounds, from a
/// stream of its own (the window and the close timeout do not move).
#[test]
fn a_quarter_of_sessions_draw_a_request_timeout_of_their_own() {
    let mut by_bound = std::collections::BTreeMap::new();
    let total = 8_000;
    for seed in 0..total / 8 {
        for pid in 0..8 {
            let s = SessionSettings::draw(seed, pid);
            *by_bound.entry(s.request_timeout).or_insert(0) += 1;
        }
    }
    let unset = by_bound.get(&None).copied().unwrap_or(0);
    assert!(
        unset * 4 > total * 2 && unset * 4 < total * 7 / 2,
        "{unset} of {total} unset"
    );
    for ms in [300, 1_000, 3_000] {
        let n = by_bound
            .get(&Some(Duration::from_millis(ms)))
            .copied()
            .unwrap_or(0);
        assert!(n * 12 > total / 2, "{ms} ms drawn {n} times of {total}");
    }
}

/// Seeds 0..300 of every fault mix: requests time out in seeds that draw
/// a bound (the draw is not vacuous) and every seed passes every checker
/// (`no-error` among them: a timeout is never fatal).
#[test]
fn drawn_request_timeouts_time_requests_out_and_every_seed_passes() {
    let (mut drawing, mut timed_out, mut timed_out_drawing) = (0, 0, 0);
    let mut requests = 0;
    for mix in FaultMix::ALL {
        let overrides = Overrides {
            faults: mix,
            ..Overrides::default()
        };
        for seed in 0..300 {
            let swarm = Swarm::from_seed(seed, overrides);
            let seen = Rc::new(RefCell::new(0));
            let timeouts = Timeouts(Rc::clone(&seen));
            let mut world = checked_world(seed, swarm, [Box::new(timeouts) as Checker]);
            let violation = world.run();
            assert!(
                violation.is_none(),
                "{} seed {seed}: {violation:?}",
                mix.flag()
            );
            let draws =
                (0..8).any(|pid| SessionSettings::draw(seed, pid).request_timeout.is_some());
            let n = *seen.borrow();
            drawing += usize::from(draws);
            timed_out += usize::from(n > 0);
            timed_out_drawing += usize::from(n > 0 && draws);
            requests += n;
        }
    }
    eprintln!(
        "seeds 0..300 of each mix: {drawing} draw a bound, {timed_out} timed a request out \
         ({timed_out_drawing} of them drawing), {requests} requests timed out"
    );
    assert!(
        timed_out_drawing >= 10,
        "{timed_out_drawing} drawing seeds timed out"
    );
}
