//! What several of the simulator's end-to-end tests share.

// Each test binary compiles this module and reads only its own part of it.
#![allow(dead_code)]

use std::cell::RefCell;
use std::rc::Rc;

use zkelect_core::{CandidateError, Notice};
use zkelect_sim::check::{self, Checker, Event, Invariant, Kinds};
use zkelect_sim::swarm::Swarm;
use zkelect_sim::world::{View, World};

/// The world of `seed` under `swarm`, with every standard checker and the
/// test's own `extra` ones after them (no canary, no trace).
pub(crate) fn checked_world(
    seed: u64,
    swarm: Swarm,
    extra: impl IntoIterator<Item = Checker>,
) -> World {
    let mut checkers = check::standard();
    checkers.extend(extra);
    World::with_invariants(seed, swarm, None, false, checkers)
}

/// One fatal error a machine reported.
#[derive(Debug, Clone)]
pub(crate) struct Reported {
    /// The machine.
    pub(crate) pid: usize,
    /// The process whose session it rides on.
    pub(crate) host: usize,
    /// What it reported.
    pub(crate) error: CandidateError,
}

/// A checker that never fails: it records every fatal error a machine
/// reports, for the test to judge after the run (which errors are allowed
/// where is the test's question, not a standard checker's).
pub(crate) struct ErrorLog(Rc<RefCell<Vec<Reported>>>);

impl ErrorLog {
    /// The checker, and the list it fills.
    pub(crate) fn new() -> (Self, Rc<RefCell<Vec<Reported>>>) {
        let errors = Rc::new(RefCell::new(Vec::new()));
        (Self(Rc::clone(&errors)), errors)
    }
}

impl Invariant<View> for ErrorLog {
    fn name(&self) -> &'static str {
        "errors"
    }

    fn kinds(&self) -> Kinds {
        Kinds::NOTICE
    }

    fn check(&mut self, world: &View, event: &Event<'_>) -> Result<(), String> {
        if let Event::Notice {
            pid,
            notice: Notice::Error(error),
        } = event
        {
            self.0.borrow_mut().push(Reported {
                pid: *pid,
                host: world.process(*pid).host,
                error: error.clone(),
            });
        }
        Ok(())
    }
}
