//! The world's event queue: the events themselves in a slab, written once
//! and read once, ordered by time, then by the order they were pushed.
//!
//! Two orders over the slab, and a pop takes the earlier of their heads:
//!
//! - events due within [`NEAR`] ms of the last event taken (messages on
//!   their way, a leader's next write) in a ring of one bucket per
//!   millisecond, each a first-in-first-out list through the slab, with a
//!   bitmap of the buckets in use: a push appends, a pop finds the first
//!   bucket in use after the clock's;
//! - later ones (client ticks, timers) in a binary heap of small entries
//!   (one `u128`: time, then sequence number, then slot; a sift moves 16
//!   bytes and compares once).
//!
//! Every event carries its sequence number, so where both have an event
//! at the same time the earlier push goes first, as it would in one heap.
//! A bucket holds one moment at a time: its events are due at or after the
//! last one taken and before that plus [`NEAR`], and no two such moments
//! share a bucket.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use zkelect_core::Timestamp;

/// How far ahead (ms) of the last event taken an event goes to the ring.
pub const NEAR: usize = 1024;

/// Words of the ring's bitmap.
const WORDS: usize = NEAR / 64;

/// No slot (the end of a bucket's list, or an empty bucket).
const NONE: u32 = u32::MAX;

/// One event in the slab.
#[derive(Debug, Clone)]
struct Slot<E> {
    event: Option<E>,
    /// Its sequence number.
    seq: u32,
    /// The next event in its bucket, if it is in the ring.
    next: u32,
}

/// A queue of events of type `E`, earliest first, first-pushed first among equals.
#[derive(Debug, Clone)]
pub struct EventQueue<E> {
    /// Events beyond the ring: `time_ms << 64 | seq << 32 | slot`: earliest
    /// time first, then first pushed (the sequence number is unique among
    /// waiting events, so the slot never decides).
    heap: BinaryHeap<Reverse<u128>>,
    slots: Vec<Slot<E>>,
    free: Vec<u32>,
    seq: u32,
    /// The time (ms) of the last event taken: the ring holds the events
    /// due from it to `base + NEAR` (exclusive).
    base: u64,
    /// Per bucket (`time % NEAR`), its first and last event.
    head: Box<[u32; NEAR]>,
    tail: Box<[u32; NEAR]>,
    /// Bit `b % 64` of word `b / 64` is set when bucket `b` holds an event.
    occupied: [u64; WORDS],
    near: usize,
}

/// The time in a key's high 64 bits.
fn time_of(key: u128) -> u64 {
    // Truncation intended: the shift leaves exactly the high word.
    (key >> 64) as u64
}

/// The slot in a key's low 32 bits.
fn slot_of(key: u128) -> u32 {
    // Truncation intended: the slot is the low word.
    (key & u128::from(u32::MAX)) as u32
}

fn key(time: u64, seq: u32, slot: u32) -> u128 {
    u128::from(time) << 64 | u128::from(seq) << 32 | u128::from(slot)
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            seq: 0,
            base: 0,
            head: Box::new([NONE; NEAR]),
            tail: Box::new([NONE; NEAR]),
            occupied: [0; WORDS],
            near: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// Schedules `event` at `at`.
    pub fn push(&mut self, at: Timestamp, event: E) {
        // A run pushes far fewer than 2^32 events (a seed's run is thousands
        // of steps); past that, same-time events would lose their order.
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Slot {
                    event: Some(event),
                    seq,
                    next: NONE,
                };
                slot
            }
            None => {
                self.slots.push(Slot {
                    event: Some(event),
                    seq,
                    next: NONE,
                });
                // A run holds far fewer than 2^32 events at once.
                u32::try_from(self.slots.len() - 1).unwrap_or(NONE - 1)
            }
        };
        let at = at.as_millis();
        // An event before the last one taken (never, in the world) still
        // comes out first: through the heap.
        if at >= self.base && at - self.base < NEAR as u64 {
            let b = (at % NEAR as u64) as usize;
            match self.tail[b] {
                NONE => self.head[b] = slot,
                last => self.slots[last as usize].next = slot,
            }
            self.tail[b] = slot;
            self.occupied[b / 64] |= 1 << (b % 64);
            self.near += 1;
        } else {
            self.heap.push(Reverse(key(at, seq, slot)));
        }
    }

    /// The ring's earliest event: its bucket and key.
    fn near_first(&self) -> Option<(usize, u128)> {
        if self.near == 0 {
            return None;
        }
        let start = (self.base % NEAR as u64) as usize;
        let (w0, bit) = (start / 64, start % 64);
        // The buckets from the clock's on, around the ring, back to it.
        let mut found = None;
        let first = self.occupied[w0] & (u64::MAX << bit);
        if first != 0 {
            found = Some(w0 * 64 + first.trailing_zeros() as usize);
        } else {
            for i in 1..=WORDS {
                let w = (w0 + i) % WORDS;
                let word = if i == WORDS {
                    self.occupied[w] & !(u64::MAX << bit)
                } else {
                    self.occupied[w]
                };
                if word != 0 {
                    found = Some(w * 64 + word.trailing_zeros() as usize);
                    break;
                }
            }
        }
        let b = found?;
        let ahead = (b + NEAR - start) % NEAR;
        let slot = self.head[b];
        let seq = self.slots.get(slot as usize)?.seq;
        Some((b, key(self.base + ahead as u64, seq, slot)))
    }

    /// Takes the earliest event.
    pub fn pop(&mut self) -> Option<(Timestamp, E)> {
        let near = self.near_first();
        let far = self.heap.peek().map(|Reverse(k)| *k);
        let key = match (near, far) {
            (Some((b, n)), f) if f.is_none_or(|f| n < f) => {
                let slot = slot_of(n) as usize;
                let next = self.slots.get(slot)?.next;
                self.head[b] = next;
                if next == NONE {
                    self.tail[b] = NONE;
                    self.occupied[b / 64] &= !(1 << (b % 64));
                }
                self.near -= 1;
                n
            }
            (_, Some(f)) => {
                self.heap.pop();
                f
            }
            _ => return None,
        };
        let slot = slot_of(key);
        let event = self.slots.get_mut(slot as usize)?.event.take()?;
        self.free.push(slot);
        self.base = self.base.max(time_of(key));
        Some((Timestamp::from_millis(time_of(key)), event))
    }

    /// When the earliest event is due.
    pub fn next_at(&self) -> Option<Timestamp> {
        let near = self.near_first().map(|(_, k)| k);
        let far = self.heap.peek().map(|Reverse(k)| *k);
        let first = match (near, far) {
            (Some(n), Some(f)) => n.min(f),
            (n, f) => n.or(f)?,
        };
        Some(Timestamp::from_millis(time_of(first)))
    }

    /// How many events are waiting.
    pub fn len(&self) -> usize {
        self.heap.len() + self.near
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_and_fifo_among_equals() {
        let mut q = EventQueue::default();
        let t = Timestamp::from_millis;
        q.push(t(5), "c");
        q.push(t(1), "a");
        q.push(t(5), "d");
        q.push(t(1), "b");
        assert_eq!(q.next_at(), Some(t(1)));
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(_, e)| e).collect();
        assert_eq!(order, ["a", "b", "c", "d"]);
        assert!(q.is_empty());
    }

    #[test]
    fn slots_are_reused() {
        let mut q = EventQueue::default();
        for i in 0..100u64 {
            q.push(Timestamp::from_millis(i), i);
            assert_eq!(q.pop().map(|(_, e)| e), Some(i));
        }
        assert_eq!(q.slots.len(), 1);
    }

    #[test]
    fn far_and_near_interleave_by_time_then_push_order() {
        let mut q = EventQueue::default();
        let t = Timestamp::from_millis;
        let far = NEAR as u64 * 3;
        q.push(t(far), "far first");
        q.push(t(2), "near");
        let (at, e) = q.pop().unwrap_or((t(0), ""));
        assert_eq!((at, e), (t(2), "near"));
        // Now `far` is still beyond the ring; a later push at the same
        // moment goes to the ring once it is near, and must come second.
        q.push(t(far - 10), "step");
        assert_eq!(q.pop().map(|(_, e)| e), Some("step"));
        q.push(t(far), "far second");
        assert_eq!(q.len(), 2);
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(_, e)| e).collect();
        assert_eq!(order, ["far first", "far second"]);
    }

    proptest::proptest! {
        /// Against a sorted reference: pops come out by time, then push
        /// order, whatever the mix of pushes (never before the clock, near
        /// and far) and pops.
        #[test]
        fn same_order_as_a_sorted_list(ops in proptest::collection::vec((0u64..4, 0u64..2000), 1..500)) {
            let mut q = EventQueue::default();
            let mut reference: Vec<(u64, usize)> = Vec::new();
            let mut now = 0u64;
            for (n, (kind, delay)) in ops.into_iter().enumerate() {
                if kind == 0 {
                    let popped = q.pop().map(|(t, e)| (t.as_millis(), e));
                    let first = (0..reference.len()).min_by_key(|&i| reference[i]);
                    let expected = first.map(|i| reference.remove(i));
                    proptest::prop_assert_eq!(popped, expected);
                    if let Some((t, _)) = expected {
                        now = t;
                    }
                } else {
                    // Delays of zero, a few ms, around the ring's edge and beyond.
                    let at = now + match kind {
                        1 => delay % 9,
                        2 => NEAR as u64 - 3 + delay % 7,
                        _ => delay * 7,
                    };
                    q.push(Timestamp::from_millis(at), n);
                    reference.push((at, n));
                }
                proptest::prop_assert_eq!(q.len(), reference.len());
                proptest::prop_assert_eq!(
                    q.next_at().map(|t| t.as_millis()),
                    reference.iter().min().map(|&(t, _)| t)
                );
            }
        }
    }
}
