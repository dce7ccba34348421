//! Node names a machine keeps only to tell whether a later name is the same,
//! packed into 16 bytes with no allocation when zkelect named them.
//!
//! A session runs thousands of idle machines, and each keeps names it never
//! hands out again (the leader it last reported, for one). A name zkelect
//! made is `_c_<nonce>-<stem><sequence>`: 32 bytes of text, and as a boxed
//! string 48 bytes with its pointer, for a nonce, a sequence and a stem that
//! fit in 16. Such a name is kept packed; any other (a foreign scheme's, a
//! custom prefix's) is kept as it is.

use crate::name::{NONCE_LEN, PROTECTED_MARKER};

/// The rules' own stems, without interop or a custom prefix (see
/// [`Rule::stem`](crate::Rule::stem)).
const STEMS: [&str; 5] = ["n_", "m_", "s_", "r_", "w_"];

/// Digits of a sequence number in a node name.
const SEQ_LEN: usize = 10;

/// A node name kept for comparison.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum KeptName {
    /// `_c_<nonce: 16 lowercase hex digits>-<STEMS[stem]><seq: 10 digits>`,
    /// exactly: only a name that prints back byte for byte is packed, so two
    /// names are equal exactly when their packed forms are.
    Protected { nonce: u64, seq: u32, stem: u8 },
    /// Any other name, as it is. Boxed twice: a thin pointer keeps the enum
    /// at 16 bytes, and such names are rare.
    #[allow(clippy::box_collection)]
    Other(Box<String>),
}

impl KeptName {
    /// Keeps `name`.
    pub(crate) fn new(name: &str) -> Self {
        Self::pack(name).unwrap_or_else(|| Self::Other(Box::new(name.to_owned())))
    }

    /// Whether `name` is the name kept.
    pub(crate) fn is(&self, name: &str) -> bool {
        match self {
            // A packable name is never kept as `Other`, so an `Other` equals
            // only the same text, and a packed one only the same packing.
            Self::Other(kept) => kept.as_str() == name,
            Self::Protected { .. } => Self::pack(name).as_ref() == Some(self),
        }
    }

    /// The packed form of `name`, if it has one. One pass over the bytes:
    /// the machine checks the leader of every listing against the one kept.
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
        let mut nonce = 0u64;
        for &b in &bytes[marker..marker + NONCE_LEN] {
            let digit = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                _ => return None,
            };
            nonce = nonce << 4 | u64::from(digit);
        }
        let stem = STEMS
            .iter()
            .position(|stem| stem.as_bytes() == &bytes[stem_at..stem_at + 2])?;
        let mut seq = 0u64;
        for &b in &bytes[stem_at + 2..] {
            if !b.is_ascii_digit() {
                return None;
            }
            seq = seq * 10 + u64::from(b - b'0');
        }
        Some(Self::Protected {
            nonce,
            seq: u32::try_from(seq).ok()?,
            stem: u8::try_from(stem).ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The text a packed name stands for.
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
            "_c_00000000000000aa-n_9999999999",  // past u32
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
        /// A kept name is the name it was made from and no other: packing
        /// loses nothing, so a leader change is never missed or invented.
        #[test]
        fn a_kept_name_is_its_own_name_and_no_other(a in near_name(), b in near_name()) {
            let kept = KeptName::new(&a);
            prop_assert_eq!(unpack(&kept), a.clone());
            prop_assert!(kept.is(&a));
            prop_assert_eq!(kept.is(&b), a == b);
            prop_assert_eq!(kept == KeptName::new(&b), a == b);
        }

        /// Two names that differ in one part only are told apart.
        #[test]
        fn names_one_part_apart_differ(n in 0u64.., s in 0usize..5, d in 0u32.., t in 0usize..5, e in 0u32..) {
            let name = |s: usize, d: u32| format!("_c_{n:016x}-{}{d:010}", STEMS[s]);
            let kept = KeptName::new(&name(s, d));
            let packed = matches!(kept, KeptName::Protected { .. });
            prop_assert!(packed);
            prop_assert_eq!(kept.is(&name(t, e)), (s, d) == (t, e));
        }
    }
}
