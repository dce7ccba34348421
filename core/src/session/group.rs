//! Multi-locks on a session: the session's side of
//! [`MultiLock`](crate::multilock::MultiLock) — its parts are machines of
//! the session (elections' candidates, so a part lost while the whole
//! acquires queues again by itself), its actions applied to them, its
//! notices out as [`Event::Group`](super::Event::Group).

use std::fmt;
use std::time::Duration;

use crate::config::Config;
use crate::multilock::{Action, MultiLock, MultiLockError, Seen};
use crate::notice::DemotionReason;
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

/// A multi-lock on the session: its decisions and its parts' machines.
#[derive(Debug, Clone)]
pub(super) struct Group {
    pub(super) lock: MultiLock,
    /// The parts' machines, in the lock's order.
    pub(super) machines: Vec<MachineId>,
    /// A step is under way (a part's input while stepping marks `again`).
    pub(super) busy: bool,
    pub(super) again: bool,
    /// Being closed: never acquired again, gone once its parts are.
    pub(super) closing: bool,
}

impl super::Session {
    /// A multi-lock over the locks of `configs`, taken all or none, as one
    /// (see [`multilock`](crate::multilock)): sorted by path, each part
    /// taken once every part before it holds. The parts are machines of the
    /// session ([`Session::group`] lists them), out of their queues until
    /// [`acquire_group`](Self::acquire_group); the group reports through
    /// [`Event::Group`]. It can be acquired, released and acquired again,
    /// as a lock's handle can, until [`close_group`](Self::close_group).
    ///
    /// [`Session::group`]: super::Session::group
    /// [`Event::Group`]: super::Event::Group
    pub fn add_multi_lock(
        &mut self,
        now: Timestamp,
        configs: Vec<Config>,
    ) -> Result<GroupId, MultiLockError> {
        if let Some(c) = configs
            .iter()
            .find(|c| matches!(c.rule(), Rule::Election { .. }))
        {
            return Err(MultiLockError::NotALock(c.path().to_owned()));
        }
        let paths = configs.iter().map(|c| c.path().to_owned()).collect();
        #[cfg(feature = "planted")]
        let made = match self.planted {
            Some(super::Planted::MultiLockInGivenOrder) => MultiLock::in_given_order(paths),
            _ => MultiLock::new(paths),
        };
        #[cfg(not(feature = "planted"))]
        let made = MultiLock::new(paths);
        let (lock, order) = made?;
        let mut configs: Vec<Option<Config>> = configs.into_iter().map(Some).collect();
        let configs: Vec<Config> = order.iter().filter_map(|&i| configs[i].take()).collect();
        self.enter(now);
        self.last_group += 1;
        let gid = GroupId(self.last_group);
        let machines: Vec<MachineId> = configs
            .into_iter()
            .map(|config| {
                // A part queues again after a hold lost while the group is
                // acquiring (as an election's candidate does); the group
                // makes it leave once the group's hold is lost.
                let machine = self.add(
                    self.now,
                    super::Machine::election(crate::Candidate::new(config)),
                );
                if let Some(slot) = self.slots.get_mut(&machine) {
                    slot.group = Some(gid);
                }
                machine
            })
            .collect();
        self.groups.insert(
            gid,
            Group {
                lock,
                machines,
                busy: false,
                again: false,
                closing: false,
            },
        );
        Ok(gid)
    }

    /// Starts acquiring multi-lock `gid` (again, after its `Released`):
    /// its first part joins its queue. With `give_up_after`, what was taken
    /// is released if the whole is not held by then
    /// ([`GroupNotice::GaveUp`](crate::multilock::GroupNotice::GaveUp)).
    /// `Ok(false)`: it is not idle (acquiring, holding or releasing), and
    /// nothing changed.
    pub fn acquire_group(
        &mut self,
        now: Timestamp,
        gid: GroupId,
        give_up_after: Option<Duration>,
    ) -> Result<bool, super::GroupGone> {
        self.enter(now);
        let group = self.groups.get_mut(&gid).ok_or(super::GroupGone(gid))?;
        if group.closing || !group.lock.is_idle() {
            return Ok(false);
        }
        let actions = group.lock.start_at(self.now, give_up_after);
        self.group_act(gid, actions);
        self.step_group(gid);
        Ok(true)
    }

    /// Releases multi-lock `gid` (or stops its acquisition): every part
    /// leaves its queue (its node's delete goes out now, as a lock's
    /// release); [`GroupNotice::Released`](crate::multilock::GroupNotice::Released)
    /// once none is left in a queue. Nothing if it is idle.
    pub fn release_group(&mut self, now: Timestamp, gid: GroupId) -> Result<(), super::GroupGone> {
        self.enter(now);
        let group = self.groups.get_mut(&gid).ok_or(super::GroupGone(gid))?;
        let actions = group.lock.release();
        self.group_act(gid, actions);
        self.step_group(gid);
        Ok(())
    }

    /// Ends multi-lock `gid`: released if it holds or acquires, and every
    /// part closed; the group is gone once they are.
    pub fn close_group(&mut self, now: Timestamp, gid: GroupId) -> Result<(), super::GroupGone> {
        self.enter(now);
        let group = self.groups.get_mut(&gid).ok_or(super::GroupGone(gid))?;
        group.closing = true;
        let actions = group.lock.release();
        let machines = group.machines.clone();
        self.group_act(gid, actions);
        for id in machines {
            if self.slots.contains_key(&id) {
                self.close_machine(id);
            }
        }
        self.step_group(gid);
        Ok(())
    }

    /// A multi-lock's parts (their machines, in the group's order), while
    /// it lasts.
    pub fn group(&self, gid: GroupId) -> Option<Vec<MachineId>> {
        self.groups.get(&gid).map(|g| g.machines.clone())
    }

    /// A multi-lock's decisions as they stand (whether it holds, acquires,
    /// its paths and deadline), while it lasts.
    pub fn group_lock(&self, gid: GroupId) -> Option<&MultiLock> {
        self.groups.get(&gid).map(|g| &g.lock)
    }

    /// Whether every part of the group holds (since its `Held`, until its
    /// hold is lost or released).
    pub fn group_holds(&self, gid: GroupId) -> bool {
        self.groups.get(&gid).is_some_and(|g| g.lock.is_held())
    }

    /// The groups' earliest deadline.
    pub(super) fn groups_due(&self) -> Option<Timestamp> {
        self.groups.values().filter_map(|g| g.lock.deadline()).min()
    }

    /// Steps every group whose deadline is due.
    pub(super) fn groups_at(&mut self, now: Timestamp) {
        let due: Vec<GroupId> = self
            .groups
            .iter()
            .filter(|(_, g)| g.lock.deadline().is_some_and(|d| d <= now))
            .map(|(id, _)| *id)
            .collect();
        for gid in due {
            self.step_group(gid);
        }
    }

    /// Part `id` of `gid` was demoted: the reason is kept for the group's
    /// `Lost`.
    pub(super) fn group_heard(&mut self, gid: GroupId, id: MachineId, reason: DemotionReason) {
        if let Some(group) = self.groups.get_mut(&gid) {
            if let Some(i) = group.machines.iter().position(|m| *m == id) {
                group.lock.demoted(i, reason);
            }
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
                .machines
                .iter()
                .map(|m| Seen::of(self.slots.get(m).map(|s| s.machine.role())))
                .collect();
            let now = self.now;
            let Some(group) = self.groups.get_mut(&gid) else {
                return;
            };
            group.again = false;
            let actions = group.lock.decide(now, &seen);
            self.group_act(gid, actions);
            let Some(group) = self.groups.get_mut(&gid) else {
                return;
            };
            if !group.again {
                group.busy = false;
                // Idle with every part gone (closed, or the session's
                // end took them): nothing is left of it.
                if group.lock.is_idle() && seen.iter().all(|s| *s == Seen::Gone) {
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
                .map(|g| g.machines.clone())
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
                // The parts leave their queues, to be taken again at the
                // next acquisition.
                Action::ReleaseAll => {
                    for id in machines {
                        if let Some(slot) = self.slots.get_mut(&id) {
                            slot.machine.resign(now, false);
                            self.after(id);
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

    #[test]
    fn an_election_is_no_part_of_a_multi_lock() {
        let mut s = super::super::Session::new(super::super::SessionConfig::new(1));
        let election = Config::builder("/e", "a").build().unwrap();
        let lock = Config::builder("/l", "a")
            .rule(Rule::Mutex)
            .build()
            .unwrap();
        assert_eq!(
            s.add_multi_lock(Timestamp::ZERO, vec![lock, election]),
            Err(MultiLockError::NotALock("/e".into()))
        );
        assert_eq!(
            s.add_multi_lock(Timestamp::ZERO, vec![]),
            Err(MultiLockError::Empty)
        );
        assert_eq!(s.machines().count(), 0, "nothing added");
    }
}
