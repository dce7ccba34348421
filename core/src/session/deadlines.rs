//! When each machine of a session is due next: the earliest of its own
//! timeout and its close deadline, filed in one ordered index so the
//! session's next deadline is its first entry.

use std::collections::BTreeSet;

use crate::session::machine::MachineId;
use crate::time::Timestamp;

/// Whether a machine is closing, as the session asked it to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Close {
    /// Not asked to close (it may still close itself: a lock after a lost
    /// hold, a machine the client's close stopped).
    No,
    /// Asked to; past this, the machine is given up on.
    Until(Timestamp),
    /// Asked to, with no time limit: it waits as long as the session lives.
    Unbounded,
}

impl Close {
    pub(super) fn deadline(self) -> Option<Timestamp> {
        match self {
            Self::Until(at) => Some(at),
            Self::No | Self::Unbounded => None,
        }
    }
}

/// The machines' deadlines, in time order.
#[derive(Debug, Clone, Default)]
pub(super) struct Deadlines {
    index: BTreeSet<(Timestamp, MachineId)>,
    /// The buffer [`take_due`](Self::take_due) hands out, given back
    /// (emptied) after use: a deadline fires on most inputs, and a list
    /// allocated for each was a good part of firing it.
    spare: Vec<MachineId>,
}

/// The most ids the spare buffer keeps room for: a burst's buffer (a
/// session of thousands of machines all due at once) is let go.
const SPARE_KEPT: usize = 64;

impl Deadlines {
    /// Files `machine` at `due` (or nowhere), where it was at `filed`;
    /// returns where it is filed now.
    pub(super) fn file(
        &mut self,
        machine: MachineId,
        filed: Option<Timestamp>,
        due: Option<Timestamp>,
    ) -> Option<Timestamp> {
        if due != filed {
            if let Some(old) = filed {
                self.index.remove(&(old, machine));
            }
            if let Some(at) = due {
                self.index.insert((at, machine));
            }
        }
        due
    }

    /// The earliest deadline.
    pub(super) fn first(&self) -> Option<Timestamp> {
        self.index.first().map(|(at, _)| *at)
    }

    /// The machines due at `now`, earliest first, each taken out of the
    /// index (the caller files them again).
    pub(super) fn take_due(&mut self, now: Timestamp) -> Vec<MachineId> {
        let mut due = std::mem::take(&mut self.spare);
        while let Some(&(at, machine)) = self.index.first() {
            if at > now {
                break;
            }
            self.index.pop_first();
            due.push(machine);
        }
        due
    }

    /// Gives back the list [`take_due`](Self::take_due) handed out, for
    /// the next time.
    pub(super) fn give_back(&mut self, mut due: Vec<MachineId>) {
        if due.capacity() <= SPARE_KEPT {
            due.clear();
            self.spare = due;
        }
    }
}
