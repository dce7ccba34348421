//! Reading values off the fuzzer's bytes: every read succeeds (a short input
//! reads as zeros and empty strings), so every input is a valid case and the
//! engine never wastes an execution on a decoding error.

use arbitrary::{Arbitrary, Unstructured};

/// The fuzzer's bytes, read front to back.
pub(crate) struct Bytes<'a>(Unstructured<'a>);

impl<'a> Bytes<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Self(Unstructured::new(data))
    }

    /// Whether every byte has been read.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn u8(&mut self) -> u8 {
        u8::arbitrary(&mut self.0).unwrap_or(0)
    }

    pub(crate) fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    pub(crate) fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    pub(crate) fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }

    pub(crate) fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    /// One of `n` choices (`n` > 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        usize::from(self.u8()) % n.max(1)
    }

    /// One of `items`, which must not be empty.
    pub(crate) fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }

    /// A string of at most `max` bytes: a length byte, then that many bytes
    /// read as UTF-8 (invalid sequences replaced), so any text can occur.
    pub(crate) fn text(&mut self, max: usize) -> String {
        let len = self.below(max + 1);
        let bytes: Vec<u8> = (0..len).map(|_| self.u8()).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// A 32-bit sequence number, drawn near the places that matter (zero,
    /// the wrap at 2^31, small numbers) more often than anywhere else.
    pub(crate) fn seq(&mut self) -> i32 {
        let small = i32::from(self.u8());
        match self.u8() % 7 {
            0 => small,
            1 => i32::MAX - small,
            2 => i32::MIN + small,
            3 => -small,
            // Where a negative sequence's digits go from nine to ten.
            4 => small + 999_999_900,
            5 => -(small + 999_999_900),
            _ => self.u32() as i32,
        }
    }
}
