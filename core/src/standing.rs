//! A follower's standing: what it knows of the nodes below its own, which of
//! them it watches, and what it learned from reading them.
//!
//! A pure value with no I/O and no notion of requests: the machine in
//! `candidate/` decides what to send, this module only keeps the books and
//! answers "how many can be below us now" and "what to watch next". Every
//! rule here leans on one fact of the recipe: sequence numbers only grow (under
//! one incarnation of the election path), so the set of nodes below a node can
//! only shrink after the listing that showed it.

use std::collections::BTreeSet;

use crate::kept::{KeptName, NameText, Probe};
use crate::zk::Stat;
use crate::zk::WatchClass;

/// A node a follower watches: its name, packed ([`KeptName`]: 16 bytes and
/// no allocation for a name zkelect made), and what the follower knows of it.
/// A session's idle followers each hold one of these per watch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Watched {
    name: KeptName,
    note: Note,
}

/// What a follower knows of a node it watches, beside its name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
struct Note {
    /// Whether the server confirmed a watch, and of which table (under the
    /// Parent strategy, whose reads set no watch: the read found a live node
    /// older than ours).
    armed: Arming,
    /// What the last read of it said, once read while it was watched.
    read: Option<Read>,
}

/// Whether a watched node's watch is set, and how.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
enum Arming {
    /// Not confirmed yet, or fired since.
    #[default]
    Unarmed,
    /// A data read set it (or, under the Parent strategy, checked the node):
    /// its stat was read.
    Data,
    /// A child watch set it on the two-watch's farther node: its deletion
    /// fires it, no write does, and it read no stat (so the node is not
    /// known to be a contender's: read before it counts among the nearest).
    Children,
}

/// What a follower read of a node it watches.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Read {
    /// Which node bore the name when it was read.
    czxid: i64,
}

/// What a standing is judged against: how many permits a queue has, and
/// how much of them the nodes below ours may take while ours still holds.
///
/// Under every rule but a weighted semaphore every node weighs 1, `permits`
/// is the rule's limit k and `room` is k too: fewer than k blocking nodes
/// below. A semaphore node of weight w holds while the weights below it are
/// fewer than `permits - w + 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Hold while the weights of the blocking nodes below are fewer than this.
    pub(crate) room: usize,
    /// How many nodes to watch beyond those that fill the room: 0, or 1
    /// under the two-watch takeover (the candidate's design notes). The
    /// farther watch's notice says when the books may prove the room free
    /// on the nearest's deletion, without a listing after it.
    pub(crate) spare: usize,
}

impl Limits {
    /// Every node weighs 1 and `k` hold.
    #[cfg(test)]
    pub(crate) const fn count(k: usize) -> Self {
        Self { room: k, spare: 0 }
    }
}

/// What to do after the books changed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Next {
    /// Fewer than k nodes can be below ours: lead.
    Lead,
    /// Too few of the nearest are known (or nodes may have gone unseen): list again.
    List,
    /// Set a watch on this node (the nearest not yet armed): a data watch
    /// on one of the nearest, which reads its stat too; a child watch on
    /// the two-watch's farther node, whose deletion alone matters (no
    /// write spends it, and the server tells the nearest node's waiters of
    /// a deletion, by their data watches, before it tells anyone by a child
    /// watch).
    Watch(String, WatchClass),
    /// Every watch is armed: wait for one to fire.
    Wait,
}

/// The follower's view of the queue below its own node, from the last listing
/// and the reads and events since.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct Standing {
    /// The participants below our node in the last listing that block it
    /// under its rule, nearest kept,
    /// oldest first, minus those seen gone since: the next predecessors to watch.
    /// Packed ([`KeptName`]): 16 bytes a name, not 56, for every idle
    /// follower of a session.
    lower: Vec<KeptName>,
    /// The weights of the blocking nodes the listing showed below those kept
    /// in `lower`, summed (their number, but in a weighted semaphore;
    /// saturating: a bound on permits is never near 2^32).
    older: u32,
    /// Whether `watched` is exactly the names of the nearest entries of
    /// `lower`, nearest first, as [`Self::next`] made it: then it need not
    /// compare them again (each comparison unpacks a name). Cleared by every
    /// change to either list; kept in `older`'s word, so it costs no byte.
    synced: bool,
    /// The nodes this follower watches, nearest first: the k nearest below its
    /// own (with k = 1, just the predecessor), and under the two-watch
    /// takeover the next one too ([`Limits::spare`]). Its standing can only
    /// change when one of the k goes — deletions further down leave k nodes
    /// below it. With each, whether the server confirmed its watch, and what
    /// the replies said of it: a listing keeps the notes of the names still
    /// among the k nearest ([`Self::next`]); the machine forgets them all
    /// where the watches may be lost (and, under the Predecessor strategy, on
    /// every listing).
    watched: Vec<Watched>,
    /// What few followers need: boxed, so the rest pay 8 bytes for it.
    rare: Option<Box<Rare>>,
}

/// What a standing keeps only in rare cases (see [`Standing::rare`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
struct Rare {
    /// Children found persistent (`ephemeralOwner` 0) by the read that
    /// watched them: never contenders, left out of every standing. Cleared on
    /// any event about one (it is read again if it matters) and whenever the
    /// watches that would report such events may have been lost.
    persistent: BTreeSet<String>,
    /// The weights of `lower`, in the same order; empty while every one
    /// weighs 1 (under every rule but a weighted semaphore).
    weights: Vec<u32>,
}

/// The set of persistent children of a standing that has none.
static NO_PERSISTENT: BTreeSet<String> = BTreeSet::new();

impl Standing {
    /// The children found persistent, left out of every standing.
    pub(crate) fn persistent(&self) -> &BTreeSet<String> {
        self.rare.as_ref().map_or(&NO_PERSISTENT, |r| &r.persistent)
    }

    /// `name` was found persistent.
    pub(crate) fn skip_persistent(&mut self, name: String) {
        self.rare
            .get_or_insert_with(Box::default)
            .persistent
            .insert(name);
    }

    /// Drops the rare part once it holds nothing.
    fn tidy(&mut self) {
        if self
            .rare
            .as_ref()
            .is_some_and(|r| r.persistent.is_empty() && r.weights.is_empty())
        {
            self.rare = None;
        }
    }

    /// The weights of `lower`, unless every one weighs 1.
    fn weights(&self) -> Option<&[u32]> {
        self.rare
            .as_ref()
            .map(|r| r.weights.as_slice())
            .filter(|w| !w.is_empty())
    }

    fn set_weights(&mut self, weights: Vec<u32>) {
        if weights.is_empty() {
            if let Some(rare) = self.rare.as_mut() {
                rare.weights = Vec::new();
            }
            self.tidy();
        } else {
            self.rare.get_or_insert_with(Box::default).weights = weights;
        }
    }

    /// Reads `name` again when it matters (an event about it): whether it was
    /// one of the persistent children.
    pub(crate) fn unskip(&mut self, name: &str) -> bool {
        let Some(rare) = self.rare.as_mut() else {
            return false;
        };
        let was = rare.persistent.remove(name);
        self.tidy();
        was
    }

    /// Forgets every persistent child (the watches that would report their
    /// changes may have been lost).
    pub(crate) fn forget_persistent(&mut self) {
        if let Some(rare) = self.rare.as_mut() {
            rare.persistent = BTreeSet::new();
        }
        self.tidy();
    }

    /// Takes in a listing: the blocking nodes below ours weigh `weight` in
    /// all, of which `nearest` (oldest first) are the nearest ones kept,
    /// weighing `weights` each (empty: 1 each).
    pub(crate) fn listed(&mut self, weight: u64, nearest: Vec<String>, weights: Vec<u32>) {
        let kept_weight: u64 = if weights.is_empty() {
            nearest.len() as u64
        } else {
            weights.iter().map(|&w| u64::from(w)).sum()
        };
        self.older = u32::try_from(weight.saturating_sub(kept_weight)).unwrap_or(u32::MAX);
        self.set_weights(weights);
        let kept = nearest.iter().map(|name| KeptName::new(name));
        if self.lower.capacity() == nearest.len() {
            // A listing most often keeps as many as the last: reuse the
            // buffer (it stays exactly as long as it must be).
            self.lower.clear();
            self.lower.extend(kept);
        } else {
            self.lower = kept.collect();
        }
        self.synced = false;
    }

    /// The weight of `lower[i]`.
    fn weight(&self, i: usize) -> usize {
        self.weights()
            .and_then(|w| w.get(i))
            .map_or(1, |&w| w as usize)
    }

    /// The weights of `lower[range]`, summed.
    fn weigh(&self, range: std::ops::Range<usize>) -> usize {
        match self.weights() {
            None => range.len(),
            Some(w) => w[range].iter().map(|&w| w as usize).sum(),
        }
    }

    /// An upper bound on the weight of the participants below our node now
    /// (their number, when every node weighs 1): all the last listing showed
    /// below, minus those seen gone.
    pub(crate) fn below(&self) -> usize {
        self.older as usize + self.weigh(0..self.lower.len())
    }

    /// Whether the books name every node that can still be below ours and
    /// each of them is watched: then no deletion below can go unseen, and
    /// no listing can teach more than they know.
    pub(crate) fn exact(&self) -> bool {
        self.older == 0
            && self.lower.len() <= self.watched.len()
            && self
                .lower
                .iter()
                .all(|kept| self.watched.iter().any(|w| w.name == *kept))
    }

    /// Forgets the last listing's view of the nodes below ours.
    pub(crate) fn forget_lower(&mut self) {
        self.lower = Vec::new();
        self.set_weights(Vec::new());
        self.older = 0;
        self.synced = false;
    }

    /// Forgets the watched nodes and what was learned of them.
    pub(crate) fn forget_watched(&mut self) {
        // Assigned, not cleared: a leader (of thousands on one session) keeps
        // no buffer from the time it followed.
        self.watched = Vec::new();
        self.synced = false;
    }

    /// The nodes watched, nearest first.
    pub(crate) fn watched(&self) -> Vec<String> {
        self.watched.iter().map(|w| w.name.to_name()).collect()
    }

    /// The nearest node watched (the predecessor), if any.
    pub(crate) fn nearest(&self) -> Option<NameText<'_>> {
        self.watched.first().map(|w| w.name.text())
    }

    /// Whether `name` is one of the watched nodes.
    pub(crate) fn is_watched(&self, name: &str) -> bool {
        self.position(name).is_some()
    }

    fn position(&self, name: &str) -> Option<usize> {
        let probe = Probe::new(name);
        self.watched.iter().position(|w| w.name.matches(&probe))
    }

    /// The note on the watched node `name`. The machine reads only nodes
    /// [`Self::next`] chose, so `name` is watched; a read of another still
    /// leaves a watch on it, so it is taken among the watched nodes (until
    /// the next [`Self::next`] keeps only the nearest).
    fn note(&mut self, name: &str) -> &mut Note {
        let i = match self.position(name) {
            Some(i) => i,
            None => {
                push_small(
                    &mut self.watched,
                    Watched {
                        name: KeptName::new(name),
                        note: Note::default(),
                    },
                );
                self.synced = false;
                self.watched.len() - 1
            }
        };
        &mut self.watched[i].note
    }

    /// The server confirmed the watch on `name`, set by a read of `class`.
    pub(crate) fn armed(&mut self, name: &str, class: WatchClass) {
        self.note(name).armed = match class {
            WatchClass::Data => Arming::Data,
            WatchClass::Child => Arming::Children,
        };
    }

    /// The watch on `name` fired (or may have): it must be set again.
    pub(crate) fn disarm(&mut self, name: &str) {
        if let Some(i) = self.position(name) {
            self.watched[i].note.armed = Arming::Unarmed;
        }
    }

    /// `name` is gone (or never counts, being persistent): it leaves the
    /// listing and the watches.
    pub(crate) fn remove(&mut self, name: &str) {
        let probe = Probe::new(name);
        if let Some(i) = self.lower.iter().position(|n| n.matches(&probe)) {
            self.lower.remove(i);
            if let Some(rare) = self.rare.as_mut().filter(|r| !r.weights.is_empty()) {
                rare.weights.remove(i);
            }
            self.synced = false;
        }
        if let Some(i) = self.position(name) {
            self.watched.remove(i);
            self.synced = false;
        }
    }

    /// How many of the nearest kept nodes below weigh at least `room`
    /// together (`None` if all of them together weigh less).
    fn nearest_covering(&self, room: usize) -> Option<usize> {
        let len = self.lower.len();
        if self.weights().is_none() {
            return (len >= room).then_some(room);
        }
        let mut sum = 0;
        for n in 1..=len {
            sum += self.weight(len - n);
            if sum >= room {
                return Some(n);
            }
        }
        None
    }

    /// What to do now: lead if the weights below can fit in the room; else
    /// watch the nearest nodes below that the last listing still knows of
    /// whose weights fill the room (the k nearest, with k leaders), arming
    /// one at a time (and remembering them as the watched nodes).
    ///
    /// Why these and no more: while every one of them is there, the weights
    /// below ours are at least the room, so ours cannot hold, whatever goes
    /// further down; so only one of them going can change our standing, and
    /// a watch on each reports that (no deletion that matters is missed).
    /// And why no fewer: with one of them gone the rest may weigh less than
    /// the room. Each weighs at least 1, so a node watches at most `room`
    /// nodes, and a node is watched by at most `permits` nodes above it (a
    /// node watches one below it only if the weights between them are less
    /// than its room): a deletion wakes as few as in an unweighted
    /// semaphore of as many permits.
    ///
    /// With a spare ([`Limits::spare`]), the next node below those is
    /// watched as well, where the books know of one; where they know that
    /// more lie below but not their names, they are listed again.
    pub(crate) fn next(&mut self, limits: Limits) -> Next {
        if self.below() < limits.room {
            return Next::Lead;
        }
        let Some(covering) = self.nearest_covering(limits.room) else {
            // Only the nearest few were kept; ask again for the rest.
            return Next::List;
        };
        let k = (covering + limits.spare).min(self.lower.len());
        if k < covering + limits.spare && self.older > 0 {
            // A spare watch is wanted on a node the books cannot name.
            return Next::List;
        }
        let want = self.lower[self.lower.len() - k..].iter().rev();
        let synced = self.synced && self.watched.len() == k;
        if !synced
            && (self.watched.len() != k
                || !want.clone().zip(&self.watched).all(|(n, w)| *n == w.name))
        {
            // Exactly k: the list lives as long as the follower waits.
            let mut watched = Vec::with_capacity(k);
            for kept in want {
                let note = self
                    .watched
                    .iter_mut()
                    .find(|w| w.name == *kept)
                    .map(|w| std::mem::take(&mut w.note))
                    .unwrap_or_default();
                watched.push(Watched {
                    name: kept.clone(),
                    note,
                });
            }
            self.watched = watched;
        }
        self.synced = true;
        // The nearest `covering` need a read stat (a child watch set while
        // one was farther is read again: it may be an operator's persistent
        // look-alike, or a newer node under an old name); the spare beyond
        // them needs only its deletion told.
        self.watched
            .iter()
            .enumerate()
            .position(|(i, w)| match w.note.armed {
                Arming::Unarmed => true,
                Arming::Data => false,
                Arming::Children => i < covering,
            })
            .map_or(Next::Wait, |i| {
                let class = if i < covering {
                    WatchClass::Data
                } else {
                    WatchClass::Child
                };
                Next::Watch(self.watched[i].name.to_name(), class)
            })
    }

    /// Checks a read of the watched node `name` against our node (`own_czxid`)
    /// and earlier reads: false if the node bearing the name is not the one
    /// our listing showed: one created after our node (a lower sequence is
    /// an older node only under one incarnation of the path), or another
    /// than the one read before. A change of its data proves nothing about
    /// the nodes below (it is the application's, an operator's, or a
    /// revocation request) and is not looked at.
    pub(crate) fn learn(&mut self, name: &str, stat: Stat, own_czxid: i64) -> bool {
        if stat.czxid >= own_czxid {
            return false;
        }
        match &mut self.note(name).read {
            Some(read) => read.czxid == stat.czxid,
            none => {
                *none = Some(Read { czxid: stat.czxid });
                true
            }
        }
    }
}

/// Pushes onto one of the standing's lists, which hold one entry per watched
/// node (one, with k = 1): the first push allocates room for one, not the
/// vector's usual four; later ones grow as usual.
fn push_small<T>(list: &mut Vec<T>, item: T) {
    if list.capacity() == 0 {
        list.reserve_exact(1);
    }
    list.push(item);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("n{i}")).collect()
    }

    /// A standing from a listing: `rank` below, the nearest `kept` of them
    /// kept (named `n0` oldest … `n{kept-1}` nearest).
    fn standing(rank: usize, kept: usize) -> Standing {
        let mut s = Standing::default();
        s.listed(rank as u64, names(kept), Vec::new());
        s
    }

    /// Every node weighs 1, `k` hold, and the two-watch's spare is wanted.
    const fn two(k: usize) -> Limits {
        Limits { room: k, spare: 1 }
    }

    /// How many can be below us (an upper bound), after a listing and
    /// deletions: (rank, kept, gone) → below.
    #[rustfmt::skip]
    const BELOW: &[(usize, usize, &[&str], usize)] = &[
        (0, 0, &[], 0),
        (1, 1, &[], 1),
        (1, 1, &["n0"], 0),
        (5, 3, &[], 5),
        (5, 3, &["n2"], 4),
        // A gone name the listing did not keep changes nothing.
        (5, 3, &["zz"], 5),
    ];

    #[test]
    fn below_counts_what_the_listing_and_deletions_allow() {
        for (i, &(rank, kept, gone, below)) in BELOW.iter().enumerate() {
            let mut s = standing(rank, kept);
            for g in gone {
                s.remove(g);
            }
            assert_eq!(
                s.below(),
                below,
                "case {i}: rank={rank} kept={kept} gone={gone:?}"
            );
        }
    }

    /// [`Next`] as a table can spell it.
    #[derive(Debug, Clone, Copy)]
    enum Want {
        Lead,
        List,
        Watch(&'static str),
        /// A child watch on the farther node.
        Farther(&'static str),
        Wait,
    }

    /// One row of [`NEXT`].
    type NextCase = (
        Limits,
        usize,
        usize,
        &'static [&'static str],
        Want,
        &'static [&'static str],
    );

    /// What a follower does with its standing: lead, list again, or watch the
    /// k nearest below (and a spare), one request at a time, nearest first.
    /// (limits, rank, kept, armed) → (next, watched).
    #[rustfmt::skip]
    const NEXT: &[NextCase] = &[
        (Limits::count(1), 0, 0, &[], Want::Lead, &[]),
        (Limits::count(2), 1, 1, &[], Want::Lead, &[]),
        // Enough below, but too few of them kept: list again.
        (Limits::count(2), 9, 1, &[], Want::List, &[]),
        (Limits::count(1), 3, 3, &[], Want::Watch("n2"), &["n2"]),
        (Limits::count(1), 3, 3, &["n2"], Want::Wait, &["n2"]),
        (Limits::count(2), 3, 3, &[], Want::Watch("n2"), &["n2", "n1"]),
        (Limits::count(2), 3, 3, &["n2"], Want::Watch("n1"), &["n2", "n1"]),
        (Limits::count(2), 3, 3, &["n1", "n2"], Want::Wait, &["n2", "n1"]),
        // An armed node no longer among the k nearest is forgotten.
        (Limits::count(1), 3, 3, &["n0"], Want::Watch("n2"), &["n2"]),
        // The two-watch: the nearest and the next, nearest first.
        (two(1), 3, 3, &[], Want::Watch("n2"), &["n2", "n1"]),
        (two(1), 3, 3, &["n2"], Want::Farther("n1"), &["n2", "n1"]),
        (two(1), 3, 3, &["n2", "n1"], Want::Wait, &["n2", "n1"]),
        (two(2), 5, 4, &[], Want::Watch("n3"), &["n3", "n2", "n1"]),
        // The predecessor alone below: nothing more to watch.
        (two(1), 1, 1, &["n0"], Want::Wait, &["n0"]),
        // More below than kept, and only the nearest named: list.
        (two(1), 4, 1, &["n0"], Want::List, &[]),
    ];

    #[test]
    fn next_leads_lists_or_watches_the_k_nearest_one_at_a_time() {
        for (i, &(limits, rank, kept, armed, want, watched)) in NEXT.iter().enumerate() {
            let mut s = standing(rank, kept);
            for a in armed {
                s.armed(a, WatchClass::Data);
            }
            let expected = match want {
                Want::Lead => Next::Lead,
                Want::List => Next::List,
                Want::Watch(name) => Next::Watch(name.to_owned(), WatchClass::Data),
                Want::Farther(name) => Next::Watch(name.to_owned(), WatchClass::Child),
                Want::Wait => Next::Wait,
            };
            assert_eq!(s.next(limits), expected, "case {i}");
            if !matches!(want, Want::List) {
                assert_eq!(s.watched(), watched, "case {i}");
            }
        }
    }

    #[test]
    fn the_books_are_exact_only_when_every_node_below_is_named_and_watched() {
        // Listed two below, both watched: exact; the farther goes, still
        // exact (the nearest alone, watched).
        let mut s = standing(2, 2);
        assert_eq!(s.next(two(1)), Next::Watch("n1".into(), WatchClass::Data));
        assert!(s.exact());
        s.armed("n1", WatchClass::Data);
        s.armed("n0", WatchClass::Data);
        assert_eq!(s.next(two(1)), Next::Wait);
        s.remove("n0");
        assert!(s.exact());
        assert_eq!(s.next(two(1)), Next::Wait);
        assert_eq!(s.watched(), ["n1"]);
        s.remove("n1");
        assert_eq!(s.next(two(1)), Next::Lead);
        // Listed three below: the farther watched goes, one below it may
        // remain: not exact (a listing must say).
        let mut s = standing(3, 3);
        s.armed("n2", WatchClass::Data);
        s.armed("n1", WatchClass::Data);
        assert_eq!(s.next(two(1)), Next::Wait);
        assert!(!s.exact());
        s.remove("n1");
        assert!(!s.exact());
        // More below than kept: never exact.
        let mut s = standing(9, 2);
        s.armed("n1", WatchClass::Data);
        s.armed("n0", WatchClass::Data);
        assert!(!s.exact());
    }

    #[test]
    fn the_farther_node_is_watched_by_children_and_read_once_among_the_nearest() {
        let mut s = standing(3, 3);
        assert_eq!(s.next(two(1)), Next::Watch("n2".into(), WatchClass::Data));
        s.armed("n2", WatchClass::Data);
        assert_eq!(s.next(two(1)), Next::Watch("n1".into(), WatchClass::Child));
        s.armed("n1", WatchClass::Child);
        assert_eq!(s.next(two(1)), Next::Wait);
        // The nearest goes first: the farther is the nearest now, and its
        // stat was never read (it may be a persistent look-alike): read it,
        // then watch n0 as the farther.
        s.remove("n2");
        assert_eq!(s.next(two(1)), Next::Watch("n1".into(), WatchClass::Data));
        s.armed("n1", WatchClass::Data);
        assert_eq!(s.next(two(1)), Next::Watch("n0".into(), WatchClass::Child));
        // The farther goes first: the nearest's read stands, and the next
        // farther gets a child watch.
        let mut s = standing(3, 3);
        s.armed("n2", WatchClass::Data);
        s.armed("n1", WatchClass::Child);
        s.remove("n1");
        assert_eq!(s.next(two(1)), Next::Watch("n0".into(), WatchClass::Child));
        // Without a spare every watch is a data watch.
        let mut s = standing(3, 3);
        s.armed("n2", WatchClass::Child);
        assert_eq!(
            s.next(Limits::count(1)),
            Next::Watch("n2".into(), WatchClass::Data)
        );
    }

    #[test]
    fn a_watch_keeps_its_note_when_a_nearer_one_goes() {
        let mut s = standing(3, 3);
        assert_eq!(
            s.next(Limits::count(2)),
            Next::Watch("n2".into(), WatchClass::Data)
        );
        s.armed("n2", WatchClass::Data);
        assert!(s.learn("n1", read(5), 100));
        s.armed("n1", WatchClass::Data);
        assert_eq!(s.next(Limits::count(2)), Next::Wait);
        s.remove("n2");
        // n1 stays armed and read; n0 is new among the two nearest.
        assert_eq!(
            s.next(Limits::count(2)),
            Next::Watch("n0".into(), WatchClass::Data)
        );
        assert_eq!(s.watched(), ["n1", "n0"]);
        assert!(!s.learn("n1", read(6), 100), "another node");
        s.disarm("n1");
        s.armed("n0", WatchClass::Data);
        assert_eq!(
            s.next(Limits::count(2)),
            Next::Watch("n1".into(), WatchClass::Data)
        );
    }

    #[test]
    fn a_listing_keeps_the_notes_of_names_still_among_the_k_nearest() {
        // What lets a Parent follower read a node below once, not once per
        // listing of the herd, and a two-watch waiter keep the watch on its
        // nearest across the listing its farther node's deletion asks for.
        let mut s = standing(4, 4);
        assert_eq!(
            s.next(Limits::count(2)),
            Next::Watch("n3".into(), WatchClass::Data)
        );
        s.armed("n3", WatchClass::Data);
        assert_eq!(
            s.next(Limits::count(2)),
            Next::Watch("n2".into(), WatchClass::Data)
        );
        s.armed("n2", WatchClass::Data);
        assert_eq!(s.next(Limits::count(2)), Next::Wait);
        // n0 went: n3 and n2 stay the two nearest, nothing to read.
        s.listed(3, ["n1", "n2", "n3"].map(String::from).to_vec(), Vec::new());
        assert_eq!(s.next(Limits::count(2)), Next::Wait);
        // n3 went: n2 is kept, n1 is new among the two nearest.
        s.listed(2, ["n1", "n2"].map(String::from).to_vec(), Vec::new());
        assert_eq!(
            s.next(Limits::count(2)),
            Next::Watch("n1".into(), WatchClass::Data)
        );
        assert_eq!(s.watched(), ["n2", "n1"]);
        s.armed("n1", WatchClass::Data);
        assert_eq!(s.next(Limits::count(2)), Next::Wait);
        // Forgotten, every name is read again.
        s.forget_watched();
        assert_eq!(
            s.next(Limits::count(2)),
            Next::Watch("n2".into(), WatchClass::Data)
        );
    }

    fn read(czxid: i64) -> Stat {
        Stat {
            czxid,
            ephemeral_owner: 9,
            ..Stat::default()
        }
    }

    #[test]
    fn learn_tells_the_listed_node_from_newer_ones_and_ignores_data() {
        // Our node has czxid 100.
        let mut s = standing(5, 3);
        assert!(s.learn("n2", read(50), 100), "the node the listing showed");
        assert!(
            s.learn("n2", read(50), 100),
            "read again, and its data changed"
        );
        assert!(!s.learn("n2", read(60), 100), "another node of that name");
        let mut s = standing(5, 3);
        assert!(!s.learn("n2", read(100), 100), "created after ours");
        assert!(!s.learn("n2", read(150), 100), "created after ours");
    }

    /// A weighted semaphore of 5 permits; below us (weight 2, so room 4)
    /// the listing kept n0..n3 weighing 3, 1, 2, 1 and nothing older.
    fn weighted() -> (Standing, Limits) {
        let mut s = Standing::default();
        s.listed(7, names(4), vec![3, 1, 2, 1]);
        (s, Limits { room: 4, spare: 0 })
    }

    #[test]
    fn a_weighted_follower_watches_the_nearest_nodes_that_fill_its_room() {
        let (mut s, limits) = weighted();
        assert_eq!(s.below(), 7);
        // n3 (1) + n2 (2) = 3 < 4; with n1 (1): 4. Three watches.
        assert_eq!(s.next(limits), Next::Watch("n3".into(), WatchClass::Data));
        assert_eq!(s.watched(), ["n3", "n2", "n1"]);
        // n2 goes: 5 below, and n3 + n1 + n0 (3) fill the room again.
        s.remove("n2");
        assert_eq!(s.below(), 5);
        assert_eq!(s.next(limits), Next::Watch("n3".into(), WatchClass::Data));
        assert_eq!(s.watched(), ["n3", "n1", "n0"]);
        // n0 goes: 2 below fits in the room of 4: hold.
        s.remove("n0");
        assert_eq!(s.next(limits), Next::Lead);
        // Only two weighing 1 kept of 10 below: they cannot fill the room
        // of 4, so a fresh listing must say which others to watch.
        let mut s = Standing::default();
        s.listed(10, names(2), vec![1, 1]);
        assert_eq!(s.next(limits), Next::List);
        // With the spare, one more than fill the room: n0 too.
        let (mut s, _) = weighted();
        assert_eq!(s.next(two(4)), Next::Watch("n3".into(), WatchClass::Data));
        assert_eq!(s.watched(), ["n3", "n2", "n1", "n0"]);
        assert!(s.exact());
    }
}
