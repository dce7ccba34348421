//! The table of requests in flight, by [`OpId`].
//!
//! A machine has a handful of requests in flight at most (one per lane, plus
//! the odd delete of an old node) and, once idle, none. A map keeps its root
//! node (over 500 bytes) after its last entry goes, for as long as the machine
//! lives; a session runs thousands of idle machines. So this is a vector in
//! op order (ops are issued in increasing order, so an insert is a push), and
//! its buffer is given back whenever the last request is answered.

use crate::command::OpId;

/// Requests in flight, in op order, holding no memory while empty.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct OpTable<T> {
    entries: Vec<(OpId, T)>,
}

impl<T> Default for OpTable<T> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
        }
    }
}

impl<T> OpTable<T> {
    fn position(&self, op: OpId) -> Result<usize, usize> {
        self.entries.binary_search_by_key(&op, |&(o, _)| o)
    }

    /// Records `op` in flight (replacing an entry of the same op, if any).
    pub(crate) fn insert(&mut self, op: OpId, value: T) {
        match self.position(op) {
            Ok(i) => self.entries[i].1 = value,
            Err(i) => {
                if self.entries.capacity() == 0 {
                    // Most machines have one or two requests in flight at once:
                    // do not start at the vector's usual four.
                    self.entries.reserve_exact(2);
                }
                self.entries.insert(i, (op, value));
            }
        }
    }

    /// Takes `op` out of the table; `None` if it was not in flight.
    pub(crate) fn remove(&mut self, op: OpId) -> Option<T> {
        let i = self.position(op).ok()?;
        let (_, value) = self.entries.remove(i);
        if self.entries.is_empty() {
            self.entries = Vec::new();
        }
        Some(value)
    }

    /// The entry of `op`, if in flight.
    pub(crate) fn get(&self, op: OpId) -> Option<&T> {
        self.position(op).ok().map(|i| &self.entries[i].1)
    }

    /// Forgets every request.
    pub(crate) fn clear(&mut self) {
        self.entries = Vec::new();
    }

    /// Every op in flight with its entry, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (OpId, &T)> + '_ {
        self.entries.iter().map(|(op, value)| (*op, value))
    }

    /// Every op in flight, oldest first.
    pub(crate) fn keys(&self) -> impl Iterator<Item = OpId> + '_ {
        self.entries.iter().map(|&(op, _)| op)
    }

    /// Every entry, oldest first.
    pub(crate) fn values(&self) -> impl Iterator<Item = &T> + '_ {
        self.entries.iter().map(|(_, value)| value)
    }

    /// Every entry, mutably, oldest first.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut T> + '_ {
        self.entries.iter_mut().map(|(_, value)| value)
    }

    /// Whether no request is in flight.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_op_order_and_answers_each_op_once() {
        let mut t = OpTable::default();
        t.insert(OpId(3), "c");
        t.insert(OpId(1), "a");
        t.insert(OpId(2), "b");
        assert_eq!(t.keys().collect::<Vec<_>>(), [OpId(1), OpId(2), OpId(3)]);
        assert_eq!(t.get(OpId(2)), Some(&"b"));
        assert_eq!(t.remove(OpId(2)), Some("b"));
        assert_eq!(t.remove(OpId(2)), None);
        assert_eq!(t.get(OpId(2)), None);
        t.insert(OpId(1), "a2");
        assert_eq!(t.values().copied().collect::<Vec<_>>(), ["a2", "c"]);
        for v in t.values_mut() {
            *v = "z";
        }
        assert_eq!(
            t.iter().collect::<Vec<_>>(),
            [(OpId(1), &"z"), (OpId(3), &"z")]
        );
    }

    #[test]
    fn gives_its_memory_back_when_empty() {
        let mut t = OpTable::default();
        assert_eq!(t.entries.capacity(), 0);
        t.insert(OpId(1), 1u64);
        t.insert(OpId(2), 2);
        t.insert(OpId(3), 3);
        assert_eq!(t.remove(OpId(1)), Some(1));
        assert_eq!(t.remove(OpId(3)), Some(3));
        assert!(t.entries.capacity() > 0, "one request still in flight");
        assert_eq!(t.remove(OpId(2)), Some(2));
        assert!(t.is_empty());
        assert_eq!(t.entries.capacity(), 0, "an idle table holds no buffer");
        t.insert(OpId(4), 4);
        t.clear();
        assert_eq!(t.entries.capacity(), 0);
    }
}
