//! The world's event queue: a binary heap of small entries over a slab of the
//! events themselves, so an event is written once and read once. Each entry is
//! one `u128` (time, then sequence number, then slot), so a sift moves 16
//! bytes and compares once.
//!
//! Events with the same time pop in the order they were pushed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use zkelect_core::Timestamp;

/// A queue of events of type `E`, earliest first, first-pushed first among equals.
#[derive(Debug, Clone)]
pub struct EventQueue<E> {
    /// `time_ms << 64 | seq << 32 | slot`: earliest time first, then first
    /// pushed (the sequence number is unique among waiting events, so the slot
    /// never decides).
    heap: BinaryHeap<Reverse<u128>>,
    slots: Vec<Option<E>>,
    free: Vec<u32>,
    seq: u32,
}

/// The time in an entry's high 64 bits.
fn time_of(entry: u128) -> Timestamp {
    // Truncation intended: the shift leaves exactly the high word.
    Timestamp::from_millis((entry >> 64) as u64)
}

/// The slot in an entry's low 32 bits.
fn slot_of(entry: u128) -> u32 {
    // Truncation intended: the slot is the low word.
    (entry & u128::from(u32::MAX)) as u32
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// Schedules `event` at `at`.
    pub fn push(&mut self, at: Timestamp, event: E) {
        // A run pushes far fewer than 2^32 events (a seed's run is thousands
        // of steps); past that, same-time events would lose their order.
        self.seq = self.seq.wrapping_add(1);
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(event);
                slot
            }
            None => {
                self.slots.push(Some(event));
                // A run holds far fewer than 2^32 events at once.
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let entry =
            u128::from(at.as_millis()) << 64 | u128::from(self.seq) << 32 | u128::from(slot);
        self.heap.push(Reverse(entry));
    }

    /// Takes the earliest event.
    pub fn pop(&mut self) -> Option<(Timestamp, E)> {
        let Reverse(entry) = self.heap.pop()?;
        let slot = slot_of(entry);
        let event = self.slots.get_mut(slot as usize)?.take()?;
        self.free.push(slot);
        Some((time_of(entry), event))
    }

    /// When the earliest event is due.
    pub fn next_at(&self) -> Option<Timestamp> {
        self.heap.peek().map(|Reverse(entry)| time_of(*entry))
    }

    /// How many events are waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
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
}
