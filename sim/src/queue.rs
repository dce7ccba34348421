//! The world's event queue: a binary heap of small entries (time, sequence
//! number, slot) over a slab of the events themselves, so the heap moves 24
//! bytes per sift and an event is written once and read once.
//!
//! Events with the same time pop in the order they were pushed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use zkelect_core::Timestamp;

/// A queue of events of type `E`, earliest first, first-pushed first among equals.
#[derive(Debug, Clone)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<(Timestamp, u64, u32)>>,
    slots: Vec<Option<E>>,
    free: Vec<u32>,
    seq: u64,
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
        self.seq += 1;
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
        self.heap.push(Reverse((at, self.seq, slot)));
    }

    /// Takes the earliest event.
    pub fn pop(&mut self) -> Option<(Timestamp, E)> {
        let Reverse((at, _, slot)) = self.heap.pop()?;
        let event = self.slots.get_mut(slot as usize)?.take()?;
        self.free.push(slot);
        Some((at, event))
    }

    /// When the earliest event is due.
    pub fn next_at(&self) -> Option<Timestamp> {
        self.heap.peek().map(|Reverse((at, _, _))| *at)
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
