//! The session's watch table: which machines an event reaches.
//!
//! The server keeps one watch per session, path and kind, and fires it
//! once: two machines of a session arming the same path share it. So the
//! table keeps, per path and kind, the machines armed since the last
//! firing, and hands the one event to each. A machine whose arming request
//! is still unanswered when the event comes gets the event and stays armed
//! (its own request may have set a newer watch): an event can reach a
//! machine twice, never not at all — the machines take a watch event as
//! "look again".
//!
//! A path and kind is kept as a 128-bit digest under keys drawn from the
//! session's seed, not as the path's text: a copy of every watched path,
//! some 60 bytes and an allocation each, would be the largest part of an
//! idle machine's books. Two pairs digest alike by chance about once in
//! 2^128; the seed is the adapter's secret, so no path can be chosen to
//! collide. A collision would hand one event to the machines of both pairs
//! (harmless) and disarm both (the other pair's next event would then reach
//! nobody).

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use crate::name::splitmix64;
use crate::session::machine::MachineId;
use crate::zk::{Request, WatchClass, WatchEvent};

/// A path and watch table, as the books know them (see the module notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct Armed(u64, u64);

/// What one machine has armed: a few entries at most (its own node, a
/// predecessor), a boxed slice: it changes only when a watch is armed or
/// fires, and an idle machine of a large session keeps it.
pub(super) type Armings = Box<[Armed]>;

/// A path hashed under both of a table's keys, to be finished per table
/// ([`PathHashed::of`]): the digest of `(path, class)` is the path's
/// bytes then the class, hashed in that order.
#[derive(Clone)]
struct PathHashed(std::hash::DefaultHasher, std::hash::DefaultHasher);

impl PathHashed {
    fn of(&self, class: WatchClass) -> Armed {
        let one = |hashed: &std::hash::DefaultHasher| {
            let mut h = hashed.clone();
            class.hash(&mut h);
            h.finish()
        };
        Armed(one(&self.0), one(&self.1))
    }
}

/// The session's watch table.
#[derive(Debug, Clone)]
pub(super) struct Watches {
    /// Per path and kind, and machine: the machines armed since the last
    /// firing, with how many of their arming requests are unanswered. One
    /// flat map, not a list of machines per path: a path is almost always
    /// watched by one machine, and a list would cost it an allocation.
    table: BTreeMap<(Armed, MachineId), u32>,
    keys: (u64, u64),
    /// Each watch's table, for a planted bug that forgets the path.
    #[cfg(feature = "planted")]
    classes: BTreeMap<Armed, WatchClass>,
}

impl Watches {
    pub(super) fn new(seed: u64) -> Self {
        let first = splitmix64(seed ^ 0x243f_6a88_85a3_08d3);
        Self {
            table: BTreeMap::new(),
            keys: (first, splitmix64(first)),
            #[cfg(feature = "planted")]
            classes: BTreeMap::new(),
        }
    }

    fn digest(&self, path: &str, class: WatchClass) -> Armed {
        self.path_hashed(path).of(class)
    }

    /// The two keyed hashers with `path` hashed: a watch event's path is
    /// digested under each table it fires (two for a deletion) from one
    /// pass over its bytes per key.
    fn path_hashed(&self, path: &str) -> PathHashed {
        let one = |key: u64| {
            // Fixed hasher (the same in every run), keyed by the seed.
            let mut h = std::hash::DefaultHasher::new();
            key.hash(&mut h);
            path.hash(&mut h);
            h
        };
        PathHashed(one(self.keys.0), one(self.keys.1))
    }

    /// Machine `machine` sends `request`: if it arms a watch, one more of
    /// its armings of that watch is unanswered. Returns the watch, for
    /// [`answered`](Self::answered).
    pub(super) fn arming(
        &mut self,
        machine: MachineId,
        armed: &mut Armings,
        request: &Request,
    ) -> Option<Armed> {
        let class = WatchClass::of(request)?;
        let entry = self.digest(request.path(), class);
        #[cfg(feature = "planted")]
        self.classes.insert(entry, class);
        *self.table.entry((entry, machine)).or_default() += 1;
        if !armed.contains(&entry) {
            let mut list = std::mem::take(armed).into_vec();
            list.push(entry);
            *armed = list.into_boxed_slice();
        }
        Some(entry)
    }

    /// An arming request of `machine` was answered (whatever the answer).
    pub(super) fn answered(&mut self, machine: MachineId, entry: Armed) {
        if let Some(pending) = self.table.get_mut(&(entry, machine)) {
            *pending = pending.saturating_sub(1);
        }
    }

    /// The machines `event` reaches, in id order, and the armings the
    /// firing spent (every machine's but those whose arming is
    /// unanswered), to be taken off their machines' lists with [`disarm`].
    /// A sorted list, not a set: it is almost always one machine, and a
    /// set's node and an intermediate list were a watch event's
    /// allocations.
    pub(super) fn fire(&mut self, event: &WatchEvent) -> (Vec<MachineId>, Vec<(MachineId, Armed)>) {
        let mut to = Vec::new();
        let mut spent = Vec::new();
        let hashed = self.path_hashed(&event.path);
        for class in WatchClass::fired_by(event.kind) {
            let entry = hashed.of(*class);
            let first_spent = spent.len();
            for (&(_, machine), &pending) in self
                .table
                .range((entry, MachineId(0))..=(entry, MachineId(u64::MAX)))
            {
                to.push(machine);
                if pending == 0 {
                    spent.push((machine, entry));
                }
            }
            for &(machine, entry) in &spent[first_spent..] {
                self.table.remove(&(entry, machine));
                self.unclass(entry);
            }
        }
        sort_ids(&mut to);
        (to, spent)
    }

    /// [`Planted::WatchByTable`](super::Planted::WatchByTable): `event` also
    /// fires every watch in a table it fires that a machine of another queue
    /// (`other`) armed, as if the table forgot the path.
    #[cfg(feature = "planted")]
    pub(super) fn fire_by_table(
        &mut self,
        event: &WatchEvent,
        other: impl Fn(MachineId) -> bool,
    ) -> (Vec<MachineId>, Vec<(MachineId, Armed)>) {
        let classes = WatchClass::fired_by(event.kind);
        let hit: Vec<((Armed, MachineId), u32)> = self
            .table
            .iter()
            .filter(|((entry, m), _)| {
                other(*m) && self.classes.get(entry).is_some_and(|c| classes.contains(c))
            })
            .map(|(k, pending)| (*k, *pending))
            .collect();
        let mut to = Vec::new();
        let mut spent = Vec::new();
        for ((entry, machine), pending) in hit {
            to.push(machine);
            if pending == 0 {
                self.table.remove(&(entry, machine));
                self.unclass(entry);
                spent.push((machine, entry));
            }
        }
        (to, spent)
    }

    /// Keeps the planted bug's record of each watch's table no longer than
    /// the watch itself: the record is keyed by path, and a long-lived
    /// session sees a new path per node, so a record that outlived its
    /// watch would grow with every node the session ever watched (it did:
    /// tens of bytes per watch event in the soak, in any build where the
    /// simulator's feature reaches this crate).
    fn unclass(&mut self, _entry: Armed) {
        #[cfg(feature = "planted")]
        if self
            .table
            .range((_entry, MachineId(0))..=(_entry, MachineId(u64::MAX)))
            .next()
            .is_none()
        {
            self.classes.remove(&_entry);
        }
    }

    /// The machines `event` would reach now, without firing anything.
    /// In id order, each once.
    pub(super) fn would_reach(&self, event: &WatchEvent) -> Vec<MachineId> {
        let hashed = self.path_hashed(&event.path);
        let mut to: Vec<MachineId> = WatchClass::fired_by(event.kind)
            .iter()
            .flat_map(move |class| {
                let entry = hashed.of(*class);
                self.table
                    .range((entry, MachineId(0))..=(entry, MachineId(u64::MAX)))
                    .map(|(&(_, m), _)| m)
            })
            .collect();
        sort_ids(&mut to);
        to
    }

    /// The session expired or closed: the server dropped every watch of
    /// it. Machines whose arming is unanswered stay armed (the request may
    /// still set a watch on a new session).
    pub(super) fn dropped(&mut self) {
        self.table.retain(|_, pending| *pending > 0);
        #[cfg(feature = "planted")]
        {
            let table = &self.table;
            self.classes.retain(|entry, _| {
                table
                    .range((*entry, MachineId(0))..=(*entry, MachineId(u64::MAX)))
                    .next()
                    .is_some()
            });
        }
    }

    /// Machine `machine` is gone: its entries go.
    pub(super) fn forget(&mut self, machine: MachineId, armed: Armings) {
        for entry in armed.into_vec() {
            self.table.remove(&(entry, machine));
            self.unclass(entry);
        }
    }

    /// How many (path, kind, machine) entries the table holds.
    pub(super) fn len(&self) -> usize {
        self.table.len()
    }
}

/// Puts machine ids in order, each once (as a set would hold them).
pub(super) fn sort_ids(ids: &mut Vec<MachineId>) {
    ids.sort_unstable();
    ids.dedup();
}

/// Takes a spent arming off a machine's list.
pub(super) fn disarm(armed: &mut Armings, entry: Armed) {
    if armed.contains(&entry) {
        let mut list = std::mem::take(armed).into_vec();
        list.retain(|a| *a != entry);
        *armed = list.into_boxed_slice();
    }
}

#[cfg(all(test, feature = "planted"))]
mod planted_tests {
    use super::*;
    use crate::zk::WatchKind;

    /// A session that watches a new path per node (a queue turning over)
    /// keeps no record of a watch once the watch has fired or its machine
    /// has gone: the planted bug's bookkeeping must not grow with time.
    #[test]
    fn the_planted_record_of_each_watch_goes_with_the_watch() {
        let mut watches = Watches::new(7);
        for n in 0..100_u64 {
            let path = format!("/q/n_{n:010}");
            let mut armed = Armings::default();
            let entry = watches
                .arming(
                    MachineId(n % 3),
                    &mut armed,
                    &Request::Exists {
                        path: path.clone(),
                        watch: true,
                    },
                )
                .expect("an exists with a watch arms one");
            watches.answered(MachineId(n % 3), entry);
            if n % 2 == 0 {
                watches.fire(&WatchEvent {
                    kind: WatchKind::NodeDeleted,
                    path,
                });
            } else {
                watches.forget(MachineId(n % 3), armed);
            }
        }
        assert_eq!(watches.len(), 0);
        assert!(
            watches.classes.is_empty(),
            "{} records left",
            watches.classes.len()
        );
    }
}
