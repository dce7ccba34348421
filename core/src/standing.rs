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

use crate::kept::{KeptName, Probe};
use crate::zk::Stat;

/// What a follower knows of a node it watches, beside its name (kept once, in
/// [`Standing::watched`]: a session's idle followers each hold one of these per
/// watch).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
struct Note {
    /// The server confirmed the watch (under the Parent strategy, whose reads
    /// set no watch: the read found a live node older than ours).
    armed: bool,
    /// What the last read of it said, once read while it was watched.
    read: Option<Read>,
}

/// What a follower read of a node it watches.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Read {
    /// Which node bore the name when it was read.
    czxid: i64,
    /// Its data when read at data version 0: the same bytes at version 1 of the
    /// same node are its leader marker.
    original: Option<Vec<u8>>,
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
    /// The queue's limit (a semaphore's permits): what bounds a node that held.
    pub(crate) permits: usize,
}

impl Limits {
    /// Every node weighs 1 and `k` hold.
    #[cfg(test)]
    pub(crate) fn count(k: usize) -> Self {
        Self {
            room: k,
            permits: k,
        }
    }
}

/// What to do after the books changed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Next {
    /// Fewer than k nodes can be below ours: lead.
    Lead,
    /// Too few of the nearest are known (or nodes may have gone unseen): list again.
    List,
    /// Set a data watch on this node (the nearest not yet armed).
    Watch(String),
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
    /// For each node of `lower` found to have led (its leader marker): how many
    /// entries of `lower` are below it. Fewer than k nodes were below it when it
    /// led, and none can have been added since; see [`Self::below`].
    marks: Vec<(usize, u32)>,
    /// The nodes this follower watches, nearest first: the k nearest below its
    /// own (with k = 1, just the predecessor). Its standing can only change when
    /// one of them goes — deletions further down leave k nodes below it.
    watched: Vec<String>,
    /// For each of `watched` (the same length, in the same order): whether the
    /// server confirmed its watch, and what the replies said of it. A listing
    /// keeps the notes of the names still among the k nearest ([`Self::next`]);
    /// the machine forgets them all where the watches may be lost (and, under
    /// the Predecessor strategy, on every listing).
    notes: Vec<Note>,
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
        self.marks.clear();
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
    /// (their number, when every node weighs 1).
    ///
    /// Without a marker: all the last listing showed below, minus those seen
    /// gone. With a marker on `lower[m]`: when it held, the weights below it
    /// plus its own fitted in the permits, so at most `permits - w` lie below
    /// it (they may include nodes already gone when it held, so a deletion
    /// seen among them later only counts when less than that remains to
    /// choose from), plus it and those between it and us, all of which the
    /// listing showed and kept. With k leaders (every weight 1) that is fewer
    /// than k below it: at most k - 1.
    pub(crate) fn below(&self, limits: Limits) -> usize {
        let older = self.older as usize;
        let len = self.lower.len();
        let listed = older + self.weigh(0..len);
        self.marks
            .iter()
            .map(|&(m, weight)| {
                let under = limits.permits.saturating_sub(weight as usize);
                under.min(older + self.weigh(0..m)) + self.weigh(m..len)
            })
            .fold(listed, usize::min)
    }

    /// Forgets the last listing's view of the nodes below ours.
    pub(crate) fn forget_lower(&mut self) {
        self.lower = Vec::new();
        self.set_weights(Vec::new());
        self.older = 0;
        self.synced = false;
        self.marks = Vec::new();
    }

    /// Forgets the watched nodes and what was learned of them.
    pub(crate) fn forget_watched(&mut self) {
        // Assigned, not cleared: a leader (of thousands on one session) keeps
        // no buffer from the time it followed.
        self.watched = Vec::new();
        self.notes = Vec::new();
        self.synced = false;
    }

    /// The nodes watched, nearest first.
    pub(crate) fn watched(&self) -> &[String] {
        &self.watched
    }

    /// Whether `name` is one of the watched nodes.
    pub(crate) fn is_watched(&self, name: &str) -> bool {
        self.position(name).is_some()
    }

    fn position(&self, name: &str) -> Option<usize> {
        self.watched.iter().position(|w| w == name)
    }

    /// The note on the watched node `name`. The machine reads only nodes
    /// [`Self::next`] chose, so `name` is watched; a read of another still
    /// leaves a watch on it, so it is taken among the watched nodes (until
    /// the next [`Self::next`] keeps only the nearest).
    fn note(&mut self, name: &str) -> &mut Note {
        let i = match self.position(name) {
            Some(i) => i,
            None => {
                push_small(&mut self.watched, name.to_owned());
                self.synced = false;
                push_small(&mut self.notes, Note::default());
                self.watched.len() - 1
            }
        };
        &mut self.notes[i]
    }

    /// The server confirmed the watch on `name`.
    pub(crate) fn armed(&mut self, name: &str) {
        self.note(name).armed = true;
    }

    /// The watch on `name` fired (or may have): it must be set again.
    pub(crate) fn disarm(&mut self, name: &str) {
        if let Some(i) = self.position(name) {
            self.notes[i].armed = false;
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
            for (m, _) in &mut self.marks {
                if i < *m {
                    *m -= 1;
                }
            }
        }
        if let Some(i) = self.position(name) {
            self.watched.remove(i);
            self.synced = false;
            self.notes.remove(i);
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
    pub(crate) fn next(&mut self, limits: Limits) -> Next {
        if self.below(limits) < limits.room {
            return Next::Lead;
        }
        let Some(k) = self.nearest_covering(limits.room) else {
            // Only the nearest few were kept; ask again for the rest.
            return Next::List;
        };
        let want = self.lower[self.lower.len() - k..].iter().rev();
        let synced = self.synced && self.watched.len() == k;
        if !synced
            && (self.watched.len() != k || !want.clone().zip(&self.watched).all(|(n, w)| n.is(w)))
        {
            // Exactly k: the lists live as long as the follower waits.
            let mut watched = Vec::with_capacity(k);
            let mut notes = Vec::with_capacity(k);
            for kept in want {
                let name = kept.to_name();
                let note = self
                    .position(&name)
                    .map(|i| std::mem::take(&mut self.notes[i]))
                    .unwrap_or_default();
                watched.push(name);
                notes.push(note);
            }
            self.watched = watched;
            self.notes = notes;
        }
        self.synced = true;
        self.notes
            .iter()
            .position(|n| !n.armed)
            .map_or(Next::Wait, |i| Next::Watch(self.watched[i].clone()))
    }

    /// Checks a read of the watched node `name` against our node (`own_czxid`)
    /// and earlier reads, and looks for its leader marker. `None` if the node
    /// bearing the name is not the one our listing showed: one created after
    /// our node (a lower sequence is an older node only under one incarnation
    /// of the path), or another than the one read before. Otherwise whether a
    /// marker found on it lowered [`Self::below`]. `proves`: whether a marker
    /// on this node bounds the nodes blocking ours at all (under a rule where
    /// it does not, a writer watching a reader, it is read past).
    pub(crate) fn learn(
        &mut self,
        name: &str,
        data: Vec<u8>,
        stat: Stat,
        own_czxid: i64,
        limits: Limits,
        proves: bool,
    ) -> Option<bool> {
        if stat.czxid >= own_czxid {
            return None;
        }
        let read = match &mut self.note(name).read {
            Some(read) if read.czxid != stat.czxid => return None,
            Some(read) => read,
            none => none.insert(Read {
                czxid: stat.czxid,
                original: None,
            }),
        };
        if stat.version == 0 {
            read.original = Some(data);
        } else if stat.version == 1 && read.original.as_deref() == Some(data.as_slice()) {
            // Version 1 with the bytes of version 0: the leader's own rewrite,
            // expecting version 0. An operator's write changes the bytes (or
            // comes second and makes the version 2) and proves nothing. Without
            // a version-0 read to compare with, nothing is learned either:
            // the next listing will tell.
            read.original = None;
            return Some(proves && self.led(name, limits));
        }
        Some(false)
    }

    /// A watched node has led: when it did, fewer than k nodes (weights
    /// fitting beside its own) were below it, and none can have been added
    /// below it since. So at most that, plus those of the listing between it
    /// and us, are below our node now. True if that lowered [`Self::below`].
    fn led(&mut self, name: &str, limits: Limits) -> bool {
        let probe = Probe::new(name);
        let Some(i) = self.lower.iter().position(|n| n.matches(&probe)) else {
            return false;
        };
        let before = self.below(limits);
        let weight = self.weight(i) as u32;
        push_small(&mut self.marks, (i, weight));
        self.below(limits) < before
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
    /// kept (named `n0` oldest … `n{kept-1}` nearest), markers on `marks`.
    fn standing(rank: usize, kept: usize, marks: &[usize]) -> Standing {
        let mut s = Standing::default();
        s.listed(rank as u64, names(kept), Vec::new());
        s.marks = marks.iter().map(|&m| (m, 1)).collect();
        s
    }

    /// One row of [`BELOW`].
    type BelowCase = (
        usize,
        usize,
        usize,
        &'static [usize],
        &'static [&'static str],
        usize,
    );

    /// How many can be below us (an upper bound), after a listing, markers and
    /// deletions: the rule the zero-round-trip takeover rests on.
    /// (k, rank, kept, marks, gone) → below.
    #[rustfmt::skip]
    const BELOW: &[BelowCase] = &[
        // No marker: what the listing showed, minus those seen gone.
        (1, 0, 0, &[], &[], 0),
        (1, 1, 1, &[], &[], 1),
        (1, 1, 1, &[], &["n0"], 0),
        (1, 5, 3, &[], &[], 5),
        (1, 5, 3, &[], &["n2"], 4),
        // A gone name the listing did not keep changes nothing.
        (1, 5, 3, &[], &["zz"], 5),
        // k = 1, the nearest led: nothing below it, so it is all that is below us.
        (1, 5, 3, &[2], &[], 1),
        (1, 5, 3, &[2], &["n2"], 0),
        // A marker further down: it and those between it and us.
        (1, 5, 3, &[0], &[], 3),
        (1, 5, 3, &[0], &["n1"], 2),
        // A deletion below the marked node does not count for k = 1.
        (1, 5, 3, &[1], &[], 2),
        (1, 5, 3, &[1], &["n0"], 2),
        // k = 2: fewer than 2 below the leader, so at most 1 plus it.
        (2, 6, 4, &[3], &[], 2),
        (2, 6, 4, &[3], &["n3"], 1),
        // …and a deletion among those below it counts only when fewer than
        // k - 1 remain to choose from.
        (2, 6, 4, &[3], &["n0"], 2),
        (2, 2, 2, &[1], &["n0"], 1),
        // The tightest marker wins.
        (1, 5, 3, &[0, 2], &[], 1),
        (3, 8, 8, &[5], &[], 5),
    ];

    #[test]
    fn below_counts_what_the_listing_markers_and_deletions_allow() {
        for (i, &(k, rank, kept, marks, gone, below)) in BELOW.iter().enumerate() {
            let mut s = standing(rank, kept, marks);
            for g in gone {
                s.remove(g);
            }
            assert_eq!(
                s.below(Limits::count(k)),
                below,
                "case {i}: k={k} rank={rank} kept={kept} marks={marks:?} gone={gone:?}"
            );
        }
    }

    /// [`Next`] as a table can spell it.
    #[derive(Debug, Clone, Copy)]
    enum Want {
        Lead,
        List,
        Watch(&'static str),
        Wait,
    }

    /// One row of [`NEXT`].
    type NextCase = (
        usize,
        usize,
        usize,
        &'static [&'static str],
        Want,
        &'static [&'static str],
    );

    /// What a follower does with its standing: lead, list again, or watch the
    /// k nearest below, one request at a time, nearest first.
    /// (k, rank, kept, armed) → (next, watched).
    #[rustfmt::skip]
    const NEXT: &[NextCase] = &[
        (1, 0, 0, &[], Want::Lead, &[]),
        (2, 1, 1, &[], Want::Lead, &[]),
        // Enough below, but too few of them kept: list again.
        (2, 9, 1, &[], Want::List, &[]),
        (1, 3, 3, &[], Want::Watch("n2"), &["n2"]),
        (1, 3, 3, &["n2"], Want::Wait, &["n2"]),
        (2, 3, 3, &[], Want::Watch("n2"), &["n2", "n1"]),
        (2, 3, 3, &["n2"], Want::Watch("n1"), &["n2", "n1"]),
        (2, 3, 3, &["n1", "n2"], Want::Wait, &["n2", "n1"]),
        // An armed node no longer among the k nearest is forgotten.
        (1, 3, 3, &["n0"], Want::Watch("n2"), &["n2"]),
    ];

    #[test]
    fn next_leads_lists_or_watches_the_k_nearest_one_at_a_time() {
        for (i, &(k, rank, kept, armed, want, watched)) in NEXT.iter().enumerate() {
            let mut s = standing(rank, kept, &[]);
            for a in armed {
                s.armed(a);
            }
            let expected = match want {
                Want::Lead => Next::Lead,
                Want::List => Next::List,
                Want::Watch(name) => Next::Watch(name.to_owned()),
                Want::Wait => Next::Wait,
            };
            assert_eq!(s.next(Limits::count(k)), expected, "case {i}");
            assert_eq!(s.watched(), watched, "case {i}");
        }
    }

    #[test]
    fn a_watch_keeps_its_note_when_a_nearer_one_goes() {
        let mut s = standing(3, 3, &[]);
        assert_eq!(s.next(Limits::count(2)), Next::Watch("n2".into()));
        s.armed("n2");
        assert_eq!(
            s.learn(
                "n1",
                b"id".to_vec(),
                read(5, 0),
                100,
                Limits::count(2),
                true
            ),
            Some(false)
        );
        s.armed("n1");
        assert_eq!(s.next(Limits::count(2)), Next::Wait);
        s.remove("n2");
        // n1 stays armed and read; n0 is new among the two nearest.
        assert_eq!(s.next(Limits::count(2)), Next::Watch("n0".into()));
        assert_eq!(s.watched(), ["n1", "n0"]);
        assert_eq!(
            s.learn(
                "n1",
                b"id".to_vec(),
                read(6, 0),
                100,
                Limits::count(2),
                true
            ),
            None,
            "another node"
        );
        s.disarm("n1");
        s.armed("n0");
        assert_eq!(s.next(Limits::count(2)), Next::Watch("n1".into()));
        assert_eq!(s.notes.len(), s.watched.len());
    }

    #[test]
    fn a_listing_keeps_the_notes_of_names_still_among_the_k_nearest() {
        // What lets a Parent follower read a node below once, not once per
        // listing of the herd.
        let mut s = standing(4, 4, &[]);
        assert_eq!(s.next(Limits::count(2)), Next::Watch("n3".into()));
        s.armed("n3");
        assert_eq!(s.next(Limits::count(2)), Next::Watch("n2".into()));
        s.armed("n2");
        assert_eq!(s.next(Limits::count(2)), Next::Wait);
        // n0 went: n3 and n2 stay the two nearest, nothing to read.
        s.listed(3, ["n1", "n2", "n3"].map(String::from).to_vec(), Vec::new());
        assert_eq!(s.next(Limits::count(2)), Next::Wait);
        // n3 went: n2 is kept, n1 is new among the two nearest.
        s.listed(2, ["n1", "n2"].map(String::from).to_vec(), Vec::new());
        assert_eq!(s.next(Limits::count(2)), Next::Watch("n1".into()));
        assert_eq!(s.watched(), ["n2", "n1"]);
        s.armed("n1");
        assert_eq!(s.next(Limits::count(2)), Next::Wait);
        // Forgotten, every name is read again.
        s.forget_watched();
        assert_eq!(s.next(Limits::count(2)), Next::Watch("n2".into()));
    }

    fn read(czxid: i64, version: i32) -> Stat {
        Stat {
            czxid,
            version,
            ephemeral_owner: 9,
            ..Stat::default()
        }
    }

    /// One row of [`LEARN`].
    type LearnCase = (&'static [(i64, i32, &'static [u8])], Option<bool>);

    /// Reads of the watched predecessor `n2` (our node has czxid 100, k = 1):
    /// (czxid, data version, data) → what `learn` says after the last.
    #[rustfmt::skip]
    const LEARN: &[LearnCase] = &[
        // A plain read of the node the listing showed.
        (&[(50, 0, b"a")], Some(false)),
        // Created after our node: not the predecessor the listing showed.
        (&[(100, 0, b"a")], None),
        (&[(150, 0, b"a")], None),
        // Read again as another node of the same name.
        (&[(50, 0, b"a"), (60, 0, b"a")], None),
        // The marker: version 1 with the bytes of version 0, same node.
        (&[(50, 0, b"a"), (50, 1, b"a")], Some(true)),
        // Other bytes at version 1 (an operator): nothing learned.
        (&[(50, 0, b"a"), (50, 1, b"b")], Some(false)),
        // Version 1 without a version-0 read: nothing learned.
        (&[(50, 1, b"a")], Some(false)),
        // Version 2: a second write, proves nothing.
        (&[(50, 0, b"a"), (50, 2, b"a")], Some(false)),
    ];

    #[test]
    fn learn_finds_the_leader_marker_and_newer_nodes() {
        for (i, (reads, last)) in LEARN.iter().enumerate() {
            let mut s = standing(5, 3, &[]);
            let mut out = None;
            for &(czxid, version, data) in *reads {
                out = s.learn(
                    "n2",
                    data.to_vec(),
                    read(czxid, version),
                    100,
                    Limits::count(1),
                    true,
                );
            }
            assert_eq!(out, *last, "case {i}: {reads:?}");
            if *last == Some(true) {
                assert_eq!(
                    s.below(Limits::count(1)),
                    1,
                    "case {i}: the marker leaves only n2 below"
                );
            }
        }
    }

    #[test]
    fn remove_shifts_markers_above_the_removed_node() {
        let mut s = standing(5, 4, &[3]);
        let one = Limits::count(1);
        assert_eq!(s.below(one), 1);
        s.remove("n1");
        assert_eq!(s.marks, [(2, 1)]);
        assert_eq!(s.below(one), 1);
        s.remove("n3");
        assert_eq!(s.below(one), 0);
    }

    /// A weighted semaphore of 5 permits; below us (weight 2, so room 4)
    /// the listing kept n0..n3 weighing 3, 1, 2, 1 and nothing older.
    fn weighted() -> (Standing, Limits) {
        let mut s = Standing::default();
        s.listed(7, names(4), vec![3, 1, 2, 1]);
        (
            s,
            Limits {
                room: 4,
                permits: 5,
            },
        )
    }

    #[test]
    fn a_weighted_follower_watches_the_nearest_nodes_that_fill_its_room() {
        let (mut s, limits) = weighted();
        assert_eq!(s.below(limits), 7);
        // n3 (1) + n2 (2) = 3 < 4; with n1 (1): 4. Three watches.
        assert_eq!(s.next(limits), Next::Watch("n3".into()));
        assert_eq!(s.watched(), ["n3", "n2", "n1"]);
        // n2 goes: 5 below, and n3 + n1 + n0 (3) fill the room again.
        s.remove("n2");
        assert_eq!(s.below(limits), 5);
        assert_eq!(s.next(limits), Next::Watch("n3".into()));
        assert_eq!(s.watched(), ["n3", "n1", "n0"]);
        // n0 goes: 2 below fits in the room of 4: hold.
        s.remove("n0");
        assert_eq!(s.next(limits), Next::Lead);
        // Only two weighing 1 kept of 10 below: they cannot fill the room
        // of 4, so a fresh listing must say which others to watch.
        let mut s = Standing::default();
        s.listed(10, names(2), vec![1, 1]);
        assert_eq!(s.next(limits), Next::List);
    }

    #[test]
    fn a_weighted_marker_bounds_what_lies_below_the_node_that_held() {
        let (mut s, limits) = weighted();
        // n2 (weight 2) held: at most 5 - 2 = 3 below it (the listing says
        // 4), so at most 3 + 2 + 1 below us.
        s.marks = vec![(2, 2)];
        assert_eq!(s.below(limits), 6);
        // n3 and n2 go: at most 3 below us, which fits in the room of 4,
        // though the listing showed n0 and n1 weighing 4.
        s.remove("n3");
        s.remove("n2");
        assert_eq!(s.below(limits), 3);
        assert_eq!(s.next(limits), Next::Lead);
        // Without the marker the kept nodes do not fill the room once one
        // of them goes, and nothing older was kept: hold (n0 and n1 weigh 4,
        // one of them gone leaves at most 3).
        let (mut s, limits) = weighted();
        s.remove("n3");
        s.remove("n2");
        s.remove("n1");
        assert_eq!(s.next(limits), Next::Lead);
    }
}
