//! Node names a machine keeps to tell whether a later name is the same, or to
//! print now and then, packed into 16 bytes with no allocation when zkelect
//! named them.
//!
//! A session runs thousands of idle machines, and each keeps names it rarely
//! or never hands out again (the leader it last reported, the nodes it
//! watches). A name zkelect made is `_c_<nonce>-<stem><sequence>`: 32 bytes
//! of text, and as a string 56 bytes with its header, for a nonce, a
//! sequence and a stem that fit in 16. Such a name is kept packed and
//! printed into a [`NameText`] when asked for; any other (a foreign
//! scheme's, a custom prefix's) is kept as it is.

use crate::name::{NONCE_LEN, PROTECTED_MARKER};

/// The rules' own stems, without interop or a custom prefix (see
/// [`Rule::stem`](crate::Rule::stem)).
const STEMS: [&str; 5] = ["n_", "m_", "s_", "r_", "w_"];

/// Digits of a sequence number in a node name.
const SEQ_LEN: usize = 10;

/// A node name kept for comparison.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum KeptName {
    /// `_c_<nonce: 16 lowercase hex digits>-<STEMS[stem]><seq: 10 digits>`
    /// (a sequence ZooKeeper gives: at most `i32::MAX`),
    /// exactly: only a name that prints back byte for byte is packed, so two
    /// names are equal exactly when their packed forms are.
    Protected { nonce: u64, seq: u32, stem: u8 },
    /// Any other name, as it is. Boxed twice: a thin pointer keeps the enum
    /// at 16 bytes, and such names are rare.
    #[allow(clippy::box_collection)]
    Other(Box<String>),
}

/// A name to compare with kept ones, packed once.
#[derive(Debug)]
pub(crate) struct Probe<'a> {
    name: &'a str,
    packed: Option<KeptName>,
}

impl<'a> Probe<'a> {
    /// A probe for `name`.
    pub(crate) fn new(name: &'a str) -> Self {
        Self {
            name,
            packed: KeptName::pack(name),
        }
    }
}

impl KeptName {
    /// Keeps `name`.
    pub(crate) fn new(name: &str) -> Self {
        Self::pack(name).unwrap_or_else(|| Self::Other(Box::new(name.to_owned())))
    }

    /// Whether `name` is the name kept.
    pub(crate) fn is(&self, name: &str) -> bool {
        self.matches(&Probe::new(name))
    }

    /// Whether the probed name is the name kept (a probe packs its name once
    /// for any number of kept names).
    pub(crate) fn matches(&self, probe: &Probe<'_>) -> bool {
        match (self, &probe.packed) {
            // A packable name is never kept as `Other`, so an `Other` equals
            // only the same text, and a packed one only the same packing.
            (Self::Other(kept), _) => kept.as_str() == probe.name,
            (kept, Some(packed)) => kept == packed,
            (Self::Protected { .. }, None) => false,
        }
    }

    /// The name kept, as text.
    pub(crate) fn to_name(&self) -> String {
        self.text().to_string()
    }

    /// The name kept, as text, printed without an allocation.
    pub(crate) fn text(&self) -> NameText<'_> {
        match self {
            Self::Protected { nonce, seq, stem } => {
                let mut name = [0u8; PACKED_LEN];
                name[..3].copy_from_slice(PROTECTED_MARKER.as_bytes());
                name[3..11].copy_from_slice(&hex_text((nonce >> 32) as u32));
                name[11..19].copy_from_slice(&hex_text(*nonce as u32));
                name[19] = b'-';
                name[20..22].copy_from_slice(STEMS[usize::from(*stem)].as_bytes());
                let mut rest = *seq;
                for digit in name[22..].iter_mut().rev() {
                    *digit = b'0' + (rest % 10) as u8;
                    rest /= 10;
                }
                NameText(Text::Printed(name))
            }
            Self::Other(name) => NameText(Text::Kept(name)),
        }
    }

    /// The packed form of `name`, if it has one. Eight bytes at a time: the
    /// machine checks the leader of every listing and its watched nodes
    /// against the names kept.
    fn pack(name: &str) -> Option<Self> {
        let bytes = name.as_bytes();
        let marker = PROTECTED_MARKER.len();
        let stem_at = marker + NONCE_LEN + 1;
        // Every stem is two bytes long.
        if bytes.len() != stem_at + 2 + SEQ_LEN
            || !bytes.starts_with(PROTECTED_MARKER.as_bytes())
            || bytes[stem_at - 1] != b'-'
        {
            return None;
        }
        let (high, low) = bytes[marker..].split_first_chunk::<8>()?;
        let (low, _) = low.split_first_chunk::<8>()?;
        let nonce = u64::from(eight_hex(*high)?) << 32 | u64::from(eight_hex(*low)?);
        let stem = match [bytes[stem_at], bytes[stem_at + 1]] {
            [b'n', b'_'] => 0,
            [b'm', b'_'] => 1,
            [b's', b'_'] => 2,
            [b'r', b'_'] => 3,
            [b'w', b'_'] => 4,
            _ => return None,
        };
        let digits = &name[stem_at + 2..];
        // Ten digits, no sign: a sequence ZooKeeper gave (a wrapped, negative
        // one is kept as text).
        if !digits.as_bytes()[0].is_ascii_digit() {
            return None;
        }
        let seq = u32::try_from(crate::name::parse_sequence(digits)?).ok()?;
        Some(Self::Protected { nonce, seq, stem })
    }
}

/// The length of a name zkelect made: `_c_`, the nonce, `-`, a stem, the
/// sequence.
const PACKED_LEN: usize = 3 + NONCE_LEN + 1 + 2 + SEQ_LEN;

/// A node's name as text, as a machine keeps it (see
/// [`Candidate::watching`](crate::Candidate::watching)): a name zkelect
/// made is kept packed in 16 bytes and printed into this value when asked
/// for, without an allocation; any other is borrowed. Reads as a `&str`.
#[derive(Clone, Copy)]
pub struct NameText<'a>(Text<'a>);

/// Where a [`NameText`]'s text is.
#[derive(Clone, Copy)]
enum Text<'a> {
    /// Printed from its packed form: ASCII, every byte written.
    Printed([u8; PACKED_LEN]),
    /// Kept as text.
    Kept(&'a str),
}

impl std::ops::Deref for NameText<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        match &self.0 {
            // Only ASCII is printed into it, so this is the text (never the
            // empty fallback).
            Text::Printed(name) => std::str::from_utf8(name).unwrap_or_default(),
            Text::Kept(name) => name,
        }
    }
}

impl<'a> From<&'a str> for NameText<'a> {
    fn from(name: &'a str) -> Self {
        Self(Text::Kept(name))
    }
}

impl AsRef<str> for NameText<'_> {
    fn as_ref(&self) -> &str {
        self
    }
}

impl std::fmt::Display for NameText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

impl std::fmt::Debug for NameText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

impl PartialEq for NameText<'_> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for NameText<'_> {}

impl PartialEq<str> for NameText<'_> {
    fn eq(&self, other: &str) -> bool {
        &**self == other
    }
}

impl PartialEq<&str> for NameText<'_> {
    fn eq(&self, other: &&str) -> bool {
        &**self == *other
    }
}

/// Eight lowercase hex digits of `value`, most significant first (the
/// inverse of [`eight_hex`]).
fn hex_text(value: u32) -> [u8; 8] {
    const TOP: u64 = 0x8080_8080_8080_8080;
    // Each nibble into a byte of its own, the most significant in the top byte.
    let x = u64::from(value);
    let x = (x | x << 16) & 0x0000_FFFF_0000_FFFF;
    let x = (x | x << 8) & 0x00FF_00FF_00FF_00FF;
    let x = (x | x << 4) & 0x0F0F_0F0F_0F0F_0F0F;
    let ten_up = ((x + 0x7676_7676_7676_7676) & TOP) >> 7;
    (x + 0x3030_3030_3030_3030 + ten_up * 0x27).to_be_bytes()
}

/// The value of eight lowercase hex digits, most significant first, or `None`
/// if any byte is not one: checked and combined eight bytes at a time (SWAR).
fn eight_hex(bytes: [u8; 8]) -> Option<u32> {
    const LOW: u64 = 0x0F0F_0F0F_0F0F_0F0F;
    const TOP: u64 = 0x8080_8080_8080_8080;
    let x = u64::from_be_bytes(bytes);
    // Per byte: a digit's low nibble, a letter's (bit 6 set) plus 9. At most
    // 24 a byte, so nothing below carries into the next byte.
    let v = (x & LOW) + ((x >> 6) & 0x0101_0101_0101_0101) * 9;
    // The canonical text of each value (0x30 + v below 10, 0x57 + v from 10)
    // must give the bytes back, and each value must be a nibble: exactly the
    // bytes `0-9a-f`.
    let ten_up = ((v + 0x7676_7676_7676_7676) & TOP) >> 7;
    let text = v + 0x3030_3030_3030_3030 + ten_up * 0x27;
    if text != x || (v + 0x7070_7070_7070_7070) & TOP != 0 {
        return None;
    }
    // Pairs of nibbles, then fours, then all eight.
    let v = ((v >> 4) | v) & 0x00FF_00FF_00FF_00FF;
    let v = ((v >> 8) | v) & 0x0000_FFFF_0000_FFFF;
    let v = ((v >> 16) | v) & 0x0000_0000_FFFF_FFFF;
    // Eight nibbles: the cast keeps every bit.
    Some(v as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The text a packed name stands for, as `format!` prints it.
    fn unpack(kept: &KeptName) -> String {
        match kept {
            KeptName::Protected { nonce, seq, stem } => format!(
                "{PROTECTED_MARKER}{nonce:016x}-{}{seq:010}",
                STEMS[usize::from(*stem)]
            ),
            KeptName::Other(name) => name.to_string(),
        }
    }

    #[test]
    fn zkelect_names_pack_into_sixteen_bytes_and_others_stay_text() {
        assert_eq!(size_of::<KeptName>(), 16);
        assert_eq!(size_of::<Option<KeptName>>(), 16);
        let ours = KeptName::new("_c_00000000000000aa-n_0000000009");
        assert_eq!(
            ours,
            KeptName::Protected {
                nonce: 0xaa,
                seq: 9,
                stem: 0
            }
        );
        for other in [
            "_c_00000000000000AA-n_0000000009",  // upper-case hex
            "_c_00000000000000aa-n_000000009",   // nine digits
            "_c_00000000000000aa-n_00000000090", // eleven
            "_c_00000000000000aa-x_0000000009",  // a custom prefix
            "_c_00000000000000aa-n_2147483648",  // past i32
            "_c_00000000000000aa-n_-000000001",  // a wrapped sequence
            "_c_00000000000000a-n_0000000009",   // a short nonce
            "_c_+0000000000000aa-n_0000000009",  // a sign
            "_c_3f6b0a4e-7d1c-4c55-9a35-0b3f7b2e9c11-latch-0000000001",
            "x__lock__0000000001",
            "n_0000000001",
            "",
        ] {
            let kept = KeptName::new(other);
            assert!(matches!(kept, KeptName::Other(_)), "{other}");
            assert!(kept.is(other));
        }
    }

    /// Names near zkelect's form: each part right or slightly wrong.
    fn near_name() -> impl Strategy<Value = String> {
        let nonce = prop_oneof![3 => "[0-9a-f]{16}", 1 => "[0-9a-fA-F+]{15,17}"];
        let stem = prop_oneof![3 => "[nmsrw]_", 1 => "x_|latch-|n"];
        let seq = prop_oneof![3 => "[0-9]{10}", 1 => "[0-9]{9,11}|-[0-9]{9}|[4-9][0-9]{9}"];
        let name = (nonce, stem, seq).prop_map(|(n, s, d)| format!("_c_{n}-{s}{d}"));
        prop_oneof![4 => name, 1 => ".{0,40}"]
    }

    proptest! {
        /// The eight-at-a-time hex parse agrees with one byte at a time, on
        /// every byte value.
        #[test]
        fn eight_hex_agrees_with_a_byte_loop(
            bytes in prop_oneof![
                any::<[u8; 8]>(),
                proptest::array::uniform8(prop_oneof![
                    Just(b'0'), Just(b'9'), Just(b'a'), Just(b'f'), Just(b'g'),
                    Just(b'A'), Just(b'/'), Just(b':'), Just(b'`'), Just(0x80 | b'a'),
                    0x30u8..=0x39, 0x61u8..=0x66,
                ]),
            ],
        ) {
            let by_loop = bytes.iter().try_fold(0u32, |value, &b| {
                let digit = match b {
                    b'0'..=b'9' => b - b'0',
                    b'a'..=b'f' => b - b'a' + 10,
                    _ => return None,
                };
                Some(value << 4 | u32::from(digit))
            });
            prop_assert_eq!(eight_hex(bytes), by_loop);
            if let Some(value) = by_loop {
                prop_assert_eq!(hex_text(value), bytes);
            }
        }

        /// Hex text reads back as the value it was made from.
        #[test]
        fn hex_text_is_the_format_of_its_value(value in any::<u32>()) {
            let text = hex_text(value);
            let formatted = format!("{value:08x}");
            prop_assert_eq!(&text[..], formatted.as_bytes());
            prop_assert_eq!(eight_hex(text), Some(value));
        }

        /// A kept name is the name it was made from and no other: packing
        /// loses nothing, so a leader change is never missed or invented.
        #[test]
        fn a_kept_name_is_its_own_name_and_no_other(a in near_name(), b in near_name()) {
            let kept = KeptName::new(&a);
            prop_assert_eq!(unpack(&kept), a.clone());
            prop_assert_eq!(kept.to_name(), a.clone());
            prop_assert!(kept.is(&a));
            prop_assert_eq!(kept.is(&b), a == b);
            prop_assert_eq!(kept == KeptName::new(&b), a == b);
        }

        /// Two names that differ in one part only are told apart.
        #[test]
        fn names_one_part_apart_differ(n in 0u64.., s in 0usize..5, d in 0u32..=i32::MAX as u32, t in 0usize..5, e in 0u32..=i32::MAX as u32) {
            let name = |s: usize, d: u32| format!("_c_{n:016x}-{}{d:010}", STEMS[s]);
            let kept = KeptName::new(&name(s, d));
            let packed = matches!(kept, KeptName::Protected { .. });
            prop_assert!(packed);
            prop_assert_eq!(kept.is(&name(t, e)), (s, d) == (t, e));
        }
    }
}
