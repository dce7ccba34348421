//! Multi-locks: several locks taken all or none, as one (Curator's
//! `InterProcessMultiLock`), as a pure decision machine over the machines
//! that hold each part.
//!
//! The parts are taken one at a time in one global order — their paths
//! sorted by bytes — so two multi-locks over the same paths never wait for
//! each other in a cycle: each waits only for a lock later in the order than
//! every lock it holds. (Curator's takes its locks in the order it is
//! given, and two given in opposite orders can deadlock; zkelect is stricter
//! on purpose.) A part joins its queue only once every part before it
//! holds. The rules:
//!
//! - **Acquiring**: the next part queues; when it holds, the one after it
//!   joins; when the last holds, the whole holds ([`GroupNotice::Held`],
//!   one fencing token per path).
//! - **A part lost while acquiring** (its session expired, its node
//!   deleted): the parts after it leave their queues (holding a later path
//!   while waiting for an earlier one would break the order), the lost one
//!   queues again (its machine rejoins by itself, as an election's
//!   candidate does; if it stays out, it is joined), and the acquisition
//!   goes on from it. Nothing was granted to the application yet.
//! - **A part lost once held**: the whole is lost — every part leaves at
//!   once and [`GroupNotice::Lost`] names the path and why.
//! - **Giving up**: past the acquisition's deadline (if any) every part
//!   leaves and [`GroupNotice::GaveUp`] says so.
//! - **Release**: every part leaves (its node deleted at once, as a lock's
//!   release); [`GroupNotice::Released`] once none is left in a queue.
//! - A part that fails for good (the server refuses its nodes) fails the
//!   whole: [`GroupNotice::Failed`].
//!
//! The [`Session`](crate::Session) runs one per
//! [`add_multi_lock`](crate::Session::add_multi_lock) over machines of its
//! own; the simulator runs the same machine over its processes.
//!
//! ```
//! use zkelect_core::multilock::{Action, MultiLock, Seen};
//! use zkelect_core::{FencingToken, Timestamp};
//!
//! let t = Timestamp::ZERO;
//! // Given in any order, taken in sorted order: order[i] is the input
//! // index of the i-th part taken.
//! let (mut m, order) = MultiLock::new(vec!["/b".into(), "/a".into()])?;
//! assert_eq!((m.paths(), order.as_slice()), (&["/a".to_owned(), "/b".to_owned()][..], &[1, 0][..]));
//! assert_eq!(m.start_at(t, None), [Action::Join(0)]);
//! let holds = Seen::Holds(FencingToken(7));
//! assert_eq!(m.decide(t, &[holds, Seen::Out]), [Action::Join(1)]);
//! assert!(!m.is_held());
//! m.decide(t, &[holds, holds]);
//! assert!(m.is_held());
//! # Ok::<(), zkelect_core::multilock::MultiLockError>(())
//! ```

use std::time::Duration;

use crate::notice::{DemotionReason, FencingToken, Role};
use crate::time::Timestamp;

/// What a multi-lock tells the application.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum GroupNotice {
    /// Every part holds: one fencing token per path, in the sorted order.
    Held {
        /// Each part's path and token.
        tokens: Vec<(String, FencingToken)>,
    },
    /// A part's hold was lost after the whole held: every part is leaving;
    /// the whole no longer holds.
    Lost {
        /// The part lost.
        path: String,
        /// Why.
        reason: DemotionReason,
    },
    /// The acquisition's deadline passed: what was taken is being released.
    GaveUp,
    /// A part stopped for good (its machine's `Notice::Error` says why, or
    /// it was closed while the whole acquired): every part is leaving.
    Failed {
        /// The part that failed.
        path: String,
    },
    /// No part is left in a queue: the release (or loss, or give-up) is done.
    Released,
}

/// A multi-lock that cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MultiLockError {
    /// No path was given.
    #[error("a multi-lock needs at least one lock")]
    Empty,
    /// The same path twice: it cannot be held twice by one multi-lock.
    #[error("the path {0} is given twice")]
    Duplicate(String),
    /// A part's rule is an election's, not a lock's.
    #[error("the part on {0} is an election: a multi-lock takes locks (mutexes, semaphores, read-write locks)")]
    NotALock(String),
}

/// What the machine asks of the machines that hold its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// The part takes part (joins its queue).
    Join(usize),
    /// The part leaves its queue (its node deleted), to join again later.
    Leave(usize),
    /// Every part leaves its queue at once (a release).
    ReleaseAll,
    /// Tell the application.
    Notice(GroupNotice),
}

/// What the machine sees of one part's machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// It holds (or holds suspended).
    Holds(FencingToken),
    /// It queues (or is on its way there, or leaving).
    Waits,
    /// Not taking part.
    Out,
    /// It failed for good.
    Failed,
    /// It is gone (closed).
    Gone,
}

impl Seen {
    /// What a machine's role says (`None`: the machine is gone).
    pub fn of(role: Option<Role>) -> Self {
        match role {
            Some(Role::Leader(t) | Role::Suspended(t)) => Self::Holds(t),
            Some(Role::Follower) => Self::Waits,
            Some(Role::Idle | Role::Observer) => Self::Out,
            Some(Role::Failed) => Self::Failed,
            Some(Role::Closed) | None => Self::Gone,
        }
    }
}

/// Where a multi-lock is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not started (or released and not started again).
    Idle,
    /// `parts[..next]` hold, `parts[next]` queues, the rest are out.
    Acquiring { next: usize },
    /// Every part holds.
    Held,
    /// Every part is leaving; released once none is in a queue.
    Releasing,
}

/// One multi-lock's decisions (see the module notes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiLock {
    /// The parts' paths, in the order they are taken (sorted).
    paths: Vec<String>,
    phase: Phase,
    /// Give up acquiring at this moment.
    deadline: Option<Timestamp>,
    /// The last demotion each part reported (for `Lost`).
    demoted: Vec<Option<DemotionReason>>,
}

impl MultiLock {
    /// A multi-lock over `paths`, not started ([`start_at`](Self::start_at)).
    /// Returns it and the order it takes them in: `order[i]` is the index
    /// in `paths` of its `i`-th part (the paths sorted by bytes).
    pub fn new(paths: Vec<String>) -> Result<(Self, Vec<usize>), MultiLockError> {
        let mut order: Vec<usize> = (0..paths.len()).collect();
        order.sort_by(|&a, &b| paths[a].cmp(&paths[b]));
        Self::in_order(paths, order)
    }

    /// A planted bug's multi-lock: its parts taken in the order given
    /// (see `Planted::MultiLockInGivenOrder`).
    #[cfg(feature = "planted")]
    pub(crate) fn in_given_order(paths: Vec<String>) -> Result<(Self, Vec<usize>), MultiLockError> {
        let order = (0..paths.len()).collect();
        Self::in_order(paths, order)
    }

    fn in_order(
        paths: Vec<String>,
        order: Vec<usize>,
    ) -> Result<(Self, Vec<usize>), MultiLockError> {
        if paths.is_empty() {
            return Err(MultiLockError::Empty);
        }
        let mut sorted: Vec<&String> = paths.iter().collect();
        sorted.sort();
        if let Some(pair) = sorted.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(MultiLockError::Duplicate(pair[0].clone()));
        }
        let taken: Vec<String> = order.iter().map(|&i| paths[i].clone()).collect();
        let n = taken.len();
        Ok((
            Self {
                paths: taken,
                phase: Phase::Idle,
                deadline: None,
                demoted: vec![None; n],
            },
            order,
        ))
    }

    /// The parts' paths, in the order they are taken.
    pub fn paths(&self) -> &[String] {
        &self.paths
    }

    /// Whether every part holds (since `Held`, until the hold is lost or
    /// released).
    pub fn is_held(&self) -> bool {
        self.phase == Phase::Held
    }

    /// Whether it is neither acquiring, holding nor releasing (before a
    /// start, or after `Released`).
    pub fn is_idle(&self) -> bool {
        self.phase == Phase::Idle
    }

    /// When the acquisition gives up, while it acquires.
    pub fn deadline(&self) -> Option<Timestamp> {
        match self.phase {
            Phase::Acquiring { .. } => self.deadline,
            _ => None,
        }
    }

    /// Starts acquiring (again, after `Released`): the first part joins.
    /// With `give_up_after`, what was taken is released if the whole is not
    /// held by `now` plus it. Nothing unless idle.
    pub fn start_at(&mut self, now: Timestamp, give_up_after: Option<Duration>) -> Vec<Action> {
        if self.phase != Phase::Idle {
            return Vec::new();
        }
        self.deadline = give_up_after.map(|d| now + d);
        self.demoted = vec![None; self.paths.len()];
        self.phase = Phase::Acquiring { next: 0 };
        vec![Action::Join(0)]
    }

    /// Part `i` reported a demotion (kept for `Lost`).
    pub fn demoted(&mut self, i: usize, reason: DemotionReason) {
        if let Some(d) = self.demoted.get_mut(i) {
            *d = Some(reason);
        }
    }

    /// The application releases the whole (idempotent).
    pub fn release(&mut self) -> Vec<Action> {
        match self.phase {
            Phase::Releasing | Phase::Idle => Vec::new(),
            Phase::Acquiring { .. } | Phase::Held => {
                self.phase = Phase::Releasing;
                vec![Action::ReleaseAll]
            }
        }
    }

    /// Decides what to do, given what each part's machine says now (in the
    /// order of [`paths`](Self::paths)).
    pub fn decide(&mut self, now: Timestamp, seen: &[Seen]) -> Vec<Action> {
        let mut out = Vec::new();
        if seen.len() != self.paths.len() {
            return out;
        }
        if let Some(i) = seen.iter().position(|s| *s == Seen::Failed) {
            if matches!(self.phase, Phase::Acquiring { .. } | Phase::Held) {
                self.phase = Phase::Releasing;
                out.push(Action::ReleaseAll);
                out.push(Action::Notice(GroupNotice::Failed {
                    path: self.paths[i].clone(),
                }));
            }
        }
        // A part closed while the whole acquires can never be taken: what
        // was taken is released (else the parts before it would hold their
        // locks for good).
        if let (Phase::Acquiring { .. }, Some(i)) =
            (self.phase, seen.iter().position(|s| *s == Seen::Gone))
        {
            self.phase = Phase::Releasing;
            out.push(Action::ReleaseAll);
            out.push(Action::Notice(GroupNotice::Failed {
                path: self.paths[i].clone(),
            }));
        }
        match self.phase {
            Phase::Acquiring { .. } if self.deadline.is_some_and(|d| d <= now) => {
                self.phase = Phase::Releasing;
                out.push(Action::ReleaseAll);
                out.push(Action::Notice(GroupNotice::GaveUp));
            }
            Phase::Acquiring { next } => self.acquire(next, seen, &mut out),
            Phase::Held => {
                if let Some(i) = seen.iter().position(|s| !matches!(s, Seen::Holds(_))) {
                    self.phase = Phase::Releasing;
                    out.push(Action::ReleaseAll);
                    out.push(Action::Notice(GroupNotice::Lost {
                        path: self.paths[i].clone(),
                        reason: self.demoted[i].unwrap_or(DemotionReason::Closed),
                    }));
                }
            }
            Phase::Releasing => {
                if seen
                    .iter()
                    .all(|s| matches!(s, Seen::Out | Seen::Gone | Seen::Failed))
                {
                    self.phase = Phase::Idle;
                    out.push(Action::Notice(GroupNotice::Released));
                }
            }
            Phase::Idle => {}
        }
        out
    }

    fn acquire(&mut self, mut next: usize, seen: &[Seen], out: &mut Vec<Action>) {
        // A part before `next` lost its hold: go back to it (it is the first
        // not holding, so nothing below is stepped over).
        if let Some(j) = (0..next).find(|&j| !matches!(seen[j], Seen::Holds(_))) {
            out.extend((j + 1..=next).map(Action::Leave));
            next = j;
        }
        // Every part held in turn: the next joins.
        while next < seen.len() && matches!(seen[next], Seen::Holds(_)) {
            next += 1;
        }
        if next == seen.len() {
            self.phase = Phase::Held;
            let tokens = self
                .paths
                .iter()
                .zip(seen)
                .filter_map(|(p, s)| match s {
                    Seen::Holds(t) => Some((p.clone(), *t)),
                    _ => None,
                })
                .collect();
            out.push(Action::Notice(GroupNotice::Held { tokens }));
            return;
        }
        if matches!(seen[next], Seen::Out) {
            out.push(Action::Join(next));
        }
        self.phase = Phase::Acquiring { next };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(n: usize, give_up: Option<u64>) -> MultiLock {
        let paths = (0..n).map(|i| format!("/p{i}")).collect();
        let (mut m, _) = MultiLock::new(paths).unwrap();
        m.start_at(Timestamp::ZERO, give_up.map(Duration::from_millis));
        m
    }

    const H: Seen = Seen::Holds(FencingToken(7));
    const W: Seen = Seen::Waits;
    const O: Seen = Seen::Out;
    const G: Seen = Seen::Gone;

    /// The acquisition, step by step: what the parts say, what it does.
    #[test]
    fn a_part_closed_while_acquiring_releases_what_was_taken() {
        let t = Timestamp::from_millis;
        let mut m = lock(2, None);
        assert_eq!(m.decide(t(0), &[H, O]), [Action::Join(1)]);
        assert_eq!(
            m.decide(t(1), &[H, G]),
            [
                Action::ReleaseAll,
                Action::Notice(GroupNotice::Failed { path: "/p1".into() })
            ]
        );
        assert_eq!(m.decide(t(2), &[H, G]), []);
        assert_eq!(
            m.decide(t(3), &[O, G]),
            [Action::Notice(GroupNotice::Released)]
        );
        assert!(m.is_idle());
    }

    #[test]
    fn parts_are_taken_one_at_a_time_in_order() {
        let t = Timestamp::from_millis;
        let mut m = lock(3, None);
        assert_eq!(m.decide(t(0), &[W, O, O]), []);
        // The first holds: the second joins; the third is still out.
        assert_eq!(m.decide(t(1), &[H, O, O]), [Action::Join(1)]);
        assert_eq!(m.decide(t(2), &[H, W, O]), []);
        // The first is lost while the second waits: the second leaves, the
        // first queues again (its machine rejoins by itself).
        assert_eq!(m.decide(t(3), &[W, W, O]), [Action::Leave(1)]);
        // A part revoked without rejoining is joined again.
        assert_eq!(m.decide(t(4), &[O, O, O]), [Action::Join(0)]);
        assert_eq!(m.decide(t(5), &[H, O, O]), [Action::Join(1)]);
        assert_eq!(m.decide(t(6), &[H, H, O]), [Action::Join(2)]);
        let held = m.decide(t(7), &[H, H, H]);
        assert!(
            matches!(&held[..], [Action::Notice(GroupNotice::Held { tokens })] if tokens.len() == 3)
        );
        assert!(m.is_held());
        // Any part lost once held: everything goes.
        m.demoted(1, DemotionReason::Expired);
        assert_eq!(
            m.decide(t(8), &[H, O, H]),
            [
                Action::ReleaseAll,
                Action::Notice(GroupNotice::Lost {
                    path: "/p1".into(),
                    reason: DemotionReason::Expired
                })
            ]
        );
        assert_eq!(m.decide(t(9), &[G, G, H]), []);
        assert_eq!(
            m.decide(t(10), &[G, O, G]),
            [Action::Notice(GroupNotice::Released)]
        );
        assert!(m.is_idle());
        // Started again, from the first part.
        assert_eq!(m.start_at(t(11), None), [Action::Join(0)]);
    }

    #[test]
    fn past_the_deadline_what_was_taken_is_released() {
        let mut m = lock(2, Some(5_000));
        assert_eq!(
            m.decide(Timestamp::from_millis(1), &[H, O]),
            [Action::Join(1)]
        );
        assert_eq!(m.deadline(), Some(Timestamp::from_millis(5_000)));
        assert_eq!(
            m.decide(Timestamp::from_millis(5_000), &[H, W]),
            [Action::ReleaseAll, Action::Notice(GroupNotice::GaveUp)]
        );
        assert_eq!(m.release(), []);
        assert_eq!(m.deadline(), None);
    }

    #[test]
    fn paths_are_sorted_by_bytes_and_duplicates_refused() {
        let (m, order) = MultiLock::new(vec!["/b".into(), "/a/z".into(), "/a".into()]).unwrap();
        assert_eq!(m.paths(), ["/a", "/a/z", "/b"]);
        assert_eq!(order, [2, 1, 0]);
        assert_eq!(
            MultiLock::new(vec!["/a".into(), "/a".into()]).unwrap_err(),
            MultiLockError::Duplicate("/a".into())
        );
        assert_eq!(MultiLock::new(vec![]).unwrap_err(), MultiLockError::Empty);
    }
}
