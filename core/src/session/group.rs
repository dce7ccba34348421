//! Multi-locks: several locks taken all or none, as one (Curator's
//! `InterProcessMultiLock`), a rule the session applies to a group of its
//! machines.
//!
//! The parts are taken one at a time in one global order — their paths
//! sorted — so two multi-locks over the same paths never wait for each
//! other in a cycle (each waits only for a lock later in the order than
//! every lock it holds). A part joins its queue only once every part before
//! it holds. Rules:
//!
//! - **Acquiring**: the next part queues; when it holds, the one after it
//!   joins; when the last holds, the group holds ([`GroupNotice::Held`],
//!   one fencing token per path).
//! - **A part lost while acquiring** (its session expired, its node
//!   deleted): the parts after it leave their queues (holding a later path
//!   while waiting for an earlier one would break the order), the lost one
//!   queues again (its machine rejoins, as an election's does), and the
//!   group goes on from it. Nothing was granted to the application yet.
//! - **A part lost once held**: the whole is lost — every other part is
//!   released at once and [`GroupNotice::Lost`] names the path and why.
//! - **Giving up**: past the acquisition's deadline (if any) every part is
//!   released and [`GroupNotice::GaveUp`] says so.
//! - **Release**: every part is closed (its node deleted at once, as a
//!   lock's release); [`GroupNotice::Released`] once all are gone.
//! - A part that fails for good (the server refuses its nodes) fails the
//!   group: [`GroupNotice::Failed`].

use std::fmt;
use std::time::Duration;

use crate::config::Config;
use crate::notice::{DemotionReason, FencingToken, Role};
use crate::rule::Rule;
use crate::time::Timestamp;

use super::machine::MachineId;

/// A multi-lock's name on its session, from [`Session::add_multi_lock`](super::Session::add_multi_lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct GroupId(pub u64);

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "g{}", self.0)
    }
}

/// What a multi-lock tells the application.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum GroupNotice {
    /// Every part holds: one fencing token per path, in the group's
    /// (sorted) order.
    Held {
        /// Each part's path and token.
        tokens: Vec<(String, FencingToken)>,
    },
    /// A part's hold was lost after the group held: every other part is
    /// being released; the group no longer holds.
    Lost {
        /// The part lost.
        path: String,
        /// Why.
        reason: DemotionReason,
    },
    /// The acquisition's deadline passed: what was taken is being released.
    GaveUp,
    /// A part stopped for good (its machine's `Notice::Error` says why):
    /// every other part is being released.
    Failed {
        /// The part that failed.
        path: String,
    },
    /// Every part is gone: the group is over.
    Released,
}

/// A multi-lock that cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MultiLockError {
    /// No path was given.
    #[error("a multi-lock needs at least one lock")]
    Empty,
    /// The same path twice: it cannot be held twice by one group.
    #[error("the path {0} is given twice")]
    Duplicate(String),
    /// A part's rule is an election's, not a lock's.
    #[error("the part on {0} is an election: a multi-lock takes locks (mutexes, semaphores, read-write locks)")]
    NotALock(String),
}

/// Where a group is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// `parts[..next]` hold, `parts[next]` queues, the rest are out.
    Acquiring { next: usize },
    /// Every part holds.
    Held,
    /// Every part is being closed; over once all are gone.
    Releasing,
    /// Over.
    Done,
}

/// What a group asks of its parts' machines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Action {
    /// The part takes part (joins its queue).
    Join(usize),
    /// The part leaves its queue (its node deleted), to join again later.
    Leave(usize),
    /// Every part is closed.
    CloseAll,
    /// Tell the application.
    Notice(GroupNotice),
}

/// What a group sees of one part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Seen {
    /// Its machine holds (or is suspended holding).
    Holds(FencingToken),
    /// It queues (or is on its way there).
    Waits,
    /// Not taking part.
    Out,
    /// Its machine failed.
    Failed,
    /// Its machine is gone (closed).
    Gone,
}

impl Seen {
    pub(super) fn of(role: Option<Role>) -> Self {
        match role {
            Some(Role::Leader(t) | Role::Suspended(t)) => Self::Holds(t),
            Some(Role::Follower) => Self::Waits,
            Some(Role::Idle | Role::Observer) => Self::Out,
            Some(Role::Failed) => Self::Failed,
            Some(Role::Closed) | None => Self::Gone,
        }
    }
}

/// One part: its path and machine, and the last demotion it reported.
#[derive(Debug, Clone)]
pub(super) struct Part {
    pub(super) path: String,
    pub(super) machine: MachineId,
    pub(super) demoted: Option<DemotionReason>,
}

/// A multi-lock's books.
#[derive(Debug, Clone)]
pub(super) struct Group {
    pub(super) parts: Vec<Part>,
    pub(super) phase: Phase,
    /// Give up acquiring at this moment.
    pub(super) deadline: Option<Timestamp>,
    /// A step is under way (a part's input while stepping marks `again`).
    pub(super) busy: bool,
    pub(super) again: bool,
}

/// Sorts `configs` by path (the global order) and checks them.
pub(super) fn ordered(mut configs: Vec<Config>) -> Result<Vec<Config>, MultiLockError> {
    if configs.is_empty() {
        return Err(MultiLockError::Empty);
    }
    configs.sort_by(|a, b| a.path().cmp(b.path()));
    for pair in configs.windows(2) {
        if pair[0].path() == pair[1].path() {
            return Err(MultiLockError::Duplicate(pair[0].path().to_owned()));
        }
    }
    if let Some(c) = configs
        .iter()
        .find(|c| matches!(c.rule(), Rule::Election { .. }))
    {
        return Err(MultiLockError::NotALock(c.path().to_owned()));
    }
    Ok(configs)
}

impl Group {
    pub(super) fn new(parts: Vec<Part>, now: Timestamp, give_up_after: Option<Duration>) -> Self {
        Self {
            parts,
            phase: Phase::Acquiring { next: 0 },
            deadline: give_up_after.map(|d| now + d),
            busy: false,
            again: false,
        }
    }

    /// The deadline, while it matters.
    pub(super) fn due(&self) -> Option<Timestamp> {
        match self.phase {
            Phase::Acquiring { .. } => self.deadline,
            _ => None,
        }
    }

    /// The application releases the group (idempotent).
    pub(super) fn release(&mut self) -> Vec<Action> {
        match self.phase {
            Phase::Releasing | Phase::Done => Vec::new(),
            _ => {
                self.phase = Phase::Releasing;
                vec![Action::CloseAll]
            }
        }
    }

    /// Decides what to do, given what each part's machine says now.
    pub(super) fn decide(&mut self, now: Timestamp, seen: &[Seen]) -> Vec<Action> {
        let mut out = Vec::new();
        if let Some(i) = seen.iter().position(|s| *s == Seen::Failed) {
            if matches!(self.phase, Phase::Acquiring { .. } | Phase::Held) {
                self.phase = Phase::Releasing;
                out.push(Action::CloseAll);
                out.push(Action::Notice(GroupNotice::Failed {
                    path: self.parts[i].path.clone(),
                }));
            }
        }
        match self.phase {
            Phase::Acquiring { .. } if self.deadline.is_some_and(|d| d <= now) => {
                self.phase = Phase::Releasing;
                out.push(Action::CloseAll);
                out.push(Action::Notice(GroupNotice::GaveUp));
            }
            Phase::Acquiring { mut next } => {
                // A part before `next` lost its hold: go back to it.
                if let Some(j) = (0..next).find(|&j| !matches!(seen[j], Seen::Holds(_))) {
                    out.extend((j + 1..=next.min(seen.len() - 1)).map(Action::Leave));
                    next = j;
                    if seen[j] == Seen::Out {
                        out.push(Action::Join(j));
                    }
                }
                // Every part held in turn: the next joins.
                while next < seen.len() && matches!(seen[next], Seen::Holds(_)) {
                    next += 1;
                    if next < seen.len() {
                        out.push(Action::Join(next));
                    }
                }
                if next == seen.len() {
                    self.phase = Phase::Held;
                    let tokens = self
                        .parts
                        .iter()
                        .zip(seen)
                        .filter_map(|(p, s)| match s {
                            Seen::Holds(t) => Some((p.path.clone(), *t)),
                            _ => None,
                        })
                        .collect();
                    out.push(Action::Notice(GroupNotice::Held { tokens }));
                } else {
                    if seen[next] == Seen::Out && !out.contains(&Action::Join(next)) {
                        out.push(Action::Join(next));
                    }
                    self.phase = Phase::Acquiring { next };
                }
            }
            Phase::Held => {
                if let Some(i) = seen.iter().position(|s| !matches!(s, Seen::Holds(_))) {
                    self.phase = Phase::Releasing;
                    out.push(Action::CloseAll);
                    out.push(Action::Notice(GroupNotice::Lost {
                        path: self.parts[i].path.clone(),
                        reason: self.parts[i].demoted.unwrap_or(DemotionReason::Closed),
                    }));
                }
            }
            Phase::Releasing => {
                if seen.iter().all(|s| matches!(s, Seen::Gone | Seen::Failed)) {
                    self.phase = Phase::Done;
                    out.push(Action::Notice(GroupNotice::Released));
                }
            }
            Phase::Done => {}
        }
        out
    }
}

impl super::Session {
    /// Takes the locks of `configs` all or none, as one (see the module
    /// notes): sorted by path, each part taken once every part before it
    /// holds. The parts are machines of the session ([`Session::group`]
    /// lists them); the group reports through [`Event::Group`]. With
    /// `give_up_after`, what was taken is released if the whole is not held
    /// by then ([`GroupNotice::GaveUp`]).
    ///
    /// [`Session::group`]: super::Session::group
    /// [`Event::Group`]: super::Event::Group
    pub fn add_multi_lock(
        &mut self,
        now: Timestamp,
        configs: Vec<Config>,
        give_up_after: Option<Duration>,
    ) -> Result<GroupId, MultiLockError> {
        let configs = ordered(configs)?;
        self.enter(now);
        self.last_group += 1;
        let gid = GroupId(self.last_group);
        let parts: Vec<Part> = configs
            .into_iter()
            .map(|config| {
                let path = config.path().to_owned();
                // A part queues again after a hold lost while the group is
                // acquiring (as an election's candidate does); the group
                // closes it once the group's hold is lost.
                let machine = self.add(
                    self.now,
                    super::Machine::election(crate::Candidate::new(config)),
                );
                if let Some(slot) = self.slots.get_mut(&machine) {
                    slot.group = Some(gid);
                }
                Part {
                    path,
                    machine,
                    demoted: None,
                }
            })
            .collect();
        let group = Group::new(parts, self.now, give_up_after);
        self.groups.insert(gid, group);
        self.step_group(gid);
        Ok(gid)
    }

    /// Releases a multi-lock: every part is closed (its node's delete goes
    /// out now); [`GroupNotice::Released`] once all are gone.
    pub fn release_group(&mut self, now: Timestamp, gid: GroupId) -> Result<(), super::GroupGone> {
        self.enter(now);
        let actions = self
            .groups
            .get_mut(&gid)
            .ok_or(super::GroupGone(gid))?
            .release();
        self.group_act(gid, actions);
        self.step_group(gid);
        Ok(())
    }

    /// A multi-lock's parts (their machines, in the group's order), while
    /// it lasts.
    pub fn group(&self, gid: GroupId) -> Option<Vec<MachineId>> {
        self.groups
            .get(&gid)
            .map(|g| g.parts.iter().map(|p| p.machine).collect())
    }

    /// Whether every part of the group holds (since its `Held`, until its
    /// hold is lost or released).
    pub fn group_holds(&self, gid: GroupId) -> bool {
        self.groups
            .get(&gid)
            .is_some_and(|g| g.phase == Phase::Held)
    }

    /// The groups' earliest deadline.
    pub(super) fn groups_due(&self) -> Option<Timestamp> {
        self.groups.values().filter_map(Group::due).min()
    }

    /// Steps every group whose deadline is due.
    pub(super) fn groups_at(&mut self, now: Timestamp) {
        let due: Vec<GroupId> = self
            .groups
            .iter()
            .filter(|(_, g)| g.due().is_some_and(|d| d <= now))
            .map(|(id, _)| *id)
            .collect();
        for gid in due {
            self.step_group(gid);
        }
    }

    /// Part `id` of `gid` was demoted: the reason is kept for the group's
    /// `Lost`.
    pub(super) fn group_heard(&mut self, gid: GroupId, id: MachineId, reason: DemotionReason) {
        if let Some(part) = self
            .groups
            .get_mut(&gid)
            .and_then(|g| g.parts.iter_mut().find(|p| p.machine == id))
        {
            part.demoted = Some(reason);
        }
    }

    /// Decides and acts for the group, until nothing more follows (a
    /// part's input while the group acts only marks it to decide again).
    pub(super) fn step_group(&mut self, gid: GroupId) {
        let Some(group) = self.groups.get_mut(&gid) else {
            return;
        };
        if group.busy {
            group.again = true;
            return;
        }
        group.busy = true;
        loop {
            let Some(group) = self.groups.get(&gid) else {
                return;
            };
            let seen: Vec<Seen> = group
                .parts
                .iter()
                .map(|p| Seen::of(self.slots.get(&p.machine).map(|s| s.machine.role())))
                .collect();
            let now = self.now;
            let Some(group) = self.groups.get_mut(&gid) else {
                return;
            };
            group.again = false;
            let actions = group.decide(now, &seen);
            self.group_act(gid, actions);
            let Some(group) = self.groups.get_mut(&gid) else {
                return;
            };
            if !group.again {
                group.busy = false;
                if group.phase == Phase::Done {
                    self.groups.remove(&gid);
                }
                return;
            }
        }
    }

    fn group_act(&mut self, gid: GroupId, actions: Vec<Action>) {
        for action in actions {
            let machines: Vec<MachineId> = self
                .groups
                .get(&gid)
                .map(|g| g.parts.iter().map(|p| p.machine).collect())
                .unwrap_or_default();
            let now = self.now;
            match action {
                Action::Join(i) => {
                    if let Some(slot) = self.slots.get_mut(&machines[i]) {
                        slot.machine.join(now);
                        self.after(machines[i]);
                    }
                }
                Action::Leave(i) => {
                    if let Some(slot) = self.slots.get_mut(&machines[i]) {
                        slot.machine.resign(now, false);
                        self.after(machines[i]);
                    }
                }
                Action::CloseAll => {
                    for id in machines {
                        if self.slots.contains_key(&id) {
                            self.close_machine(id);
                        }
                    }
                }
                Action::Notice(notice) => self
                    .events
                    .push_back(super::Event::Group { group: gid, notice }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(n: usize) -> Group {
        let parts = (0..n)
            .map(|i| Part {
                path: format!("/p{i}"),
                machine: MachineId(i as u64 + 1),
                demoted: None,
            })
            .collect();
        Group::new(parts, Timestamp::ZERO, Some(Duration::from_secs(5)))
    }

    const H: Seen = Seen::Holds(FencingToken(7));
    const W: Seen = Seen::Waits;
    const O: Seen = Seen::Out;

    /// The acquisition, step by step: (what the parts say, what the group
    /// does, its phase after).
    #[test]
    fn parts_are_taken_one_at_a_time_in_order() {
        let t = Timestamp::from_millis;
        let mut g = group(3);
        assert_eq!(g.decide(t(0), &[W, O, O]), []);
        assert_eq!(g.phase, Phase::Acquiring { next: 0 });
        // The first holds: the second joins; the third is still out.
        assert_eq!(g.decide(t(1), &[H, O, O]), [Action::Join(1)]);
        assert_eq!(g.decide(t(2), &[H, W, O]), []);
        // The first is lost while the second waits: the second leaves, the
        // first queues again (its machine rejoins by itself).
        assert_eq!(g.decide(t(3), &[W, W, O]), [Action::Leave(1)]);
        assert_eq!(g.phase, Phase::Acquiring { next: 0 });
        // A part revoked without rejoining is joined again.
        assert_eq!(g.decide(t(4), &[O, O, O]), [Action::Join(0)]);
        assert_eq!(g.decide(t(5), &[H, O, O]), [Action::Join(1)]);
        assert_eq!(g.decide(t(6), &[H, H, O]), [Action::Join(2)]);
        let held = g.decide(t(7), &[H, H, H]);
        assert!(
            matches!(&held[..], [Action::Notice(GroupNotice::Held { tokens })] if tokens.len() == 3)
        );
        assert_eq!(g.phase, Phase::Held);
        // Any part lost once held: everything goes.
        g.parts[1].demoted = Some(DemotionReason::Expired);
        assert_eq!(
            g.decide(t(8), &[H, O, H]),
            [
                Action::CloseAll,
                Action::Notice(GroupNotice::Lost {
                    path: "/p1".into(),
                    reason: DemotionReason::Expired
                })
            ]
        );
        assert_eq!(g.decide(t(9), &[Seen::Gone, Seen::Gone, H]), []);
        assert_eq!(
            g.decide(t(10), &[Seen::Gone; 3]),
            [Action::Notice(GroupNotice::Released)]
        );
        assert_eq!(g.phase, Phase::Done);
    }

    #[test]
    fn past_the_deadline_what_was_taken_is_released() {
        let mut g = group(2);
        assert_eq!(
            g.decide(Timestamp::from_millis(1), &[H, O]),
            [Action::Join(1)]
        );
        assert_eq!(
            g.decide(Timestamp::from_millis(5_000), &[H, W]),
            [Action::CloseAll, Action::Notice(GroupNotice::GaveUp)]
        );
        assert_eq!(g.release(), []);
    }

    #[test]
    fn paths_are_sorted_and_duplicates_and_elections_refused() {
        let lock = |p: &str| Config::builder(p, "a").rule(Rule::Mutex).build().unwrap();
        let sorted = ordered(vec![lock("/b"), lock("/a/z"), lock("/a")]).unwrap();
        let paths: Vec<&str> = sorted.iter().map(Config::path).collect();
        assert_eq!(paths, ["/a", "/a/z", "/b"]);
        assert_eq!(
            ordered(vec![lock("/a"), lock("/a")]).unwrap_err(),
            MultiLockError::Duplicate("/a".into())
        );
        assert_eq!(ordered(vec![]).unwrap_err(), MultiLockError::Empty);
        let election = Config::builder("/e", "a").build().unwrap();
        assert_eq!(
            ordered(vec![election]).unwrap_err(),
            MultiLockError::NotALock("/e".into())
        );
    }
}
