//! Node names: parsing the sequence, recognising protected and foreign names, and
//! ordering a queue. Pure functions, no state.
//!
//! ZooKeeper appends `String.format("%010d", seq)` with `seq` a signed 32-bit
//! counter (the parent's cversion). After 2^31-1 it wraps to negative numbers,
//! printed with a sign (`-000000001`, and `-2147483648` which is 11 characters).
//! Sequences are therefore compared as serial numbers (RFC 1982): the queue is
//! ordered starting after the largest gap in the circle of 2^32 values, which is
//! correct as long as the live nodes span less than 2^31 sequence numbers.

use std::cmp::Ordering;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use crate::interop::Interop;
use crate::rule::{Recipe, Rule};

pub use crate::node::{Access, NodeName, Origin};

/// The marker that starts a protected name, as Curator uses it.
pub const PROTECTED_MARKER: &str = "_c_";
/// Length of zkelect's nonce in hex digits.
pub const NONCE_LEN: usize = 16;

/// Parses exactly what ZooKeeper's `String.format("%010d", seq)` produces.
///
/// ```
/// use zkelect_core::name::parse_sequence;
/// assert_eq!(parse_sequence("0000000007"), Some(7));
/// assert_eq!(parse_sequence("2147483647"), Some(i32::MAX));
/// assert_eq!(parse_sequence("-000000001"), Some(-1));
/// assert_eq!(parse_sequence("-2147483648"), Some(i32::MIN));
/// assert_eq!(parse_sequence("-0000000001"), None); // not how ZooKeeper pads
/// assert_eq!(parse_sequence("12"), None);
/// ```
#[inline(always)]
pub fn parse_sequence(s: &str) -> Option<i32> {
    sequence_of(s.as_bytes())
}

/// [`parse_sequence`] of the bytes of a name's tail: a scan that found the
/// tail by a byte index need not slice it as a `str` (a char-boundary check).
#[inline(always)]
fn sequence_of(bytes: &[u8]) -> Option<i32> {
    // One pass over the bytes: this runs once per child of every listing.
    match bytes {
        [b'-', digits @ ..] => {
            let magnitude = decimal(digits)?;
            let well_formed = match digits.len() {
                9 => true,
                10 => magnitude >= 1_000_000_000,
                _ => false,
            };
            if !well_formed || magnitude == 0 {
                return None;
            }
            i32::try_from(-i64::try_from(magnitude).ok()?).ok()
        }
        digits if digits.len() == 10 => i32::try_from(decimal(digits)?).ok(),
        _ => None,
    }
}

/// The value of at most ten ASCII digits (so it cannot overflow), or `None`
/// if any byte is not a digit.
#[inline(always)]
fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.len() > 10 {
        return None;
    }
    // A sequence has nine or ten digits: the first eight in one go.
    let (mut value, rest) = match digits.split_first_chunk::<8>() {
        Some((eight, rest)) => (u64::from(eight_digits(*eight)?), rest),
        None => (0, digits),
    };
    for &b in rest {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value * 10 + u64::from(digit);
    }
    Some(value)
}

/// The value of eight ASCII digits, most significant first, or `None` if any
/// byte is not a digit: the digits checked and combined eight bytes at a time
/// (SWAR, as simdjson parses eight digits) instead of one by one.
#[inline(always)]
fn eight_digits(bytes: [u8; 8]) -> Option<u32> {
    const HIGH: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    const ZEROS: u64 = 0x3030_3030_3030_3030;
    let x = u64::from_le_bytes(bytes);
    // Every byte is 0x30..=0x3F, and stays below 0x40 with 6 added: 0-9.
    // (No byte carries into the next: each is at most 0x3F + 6.)
    if x & HIGH != ZEROS || x.wrapping_add(0x0606_0606_0606_0606) & HIGH != ZEROS {
        return None;
    }
    // Pairs of digits, then fours, then all eight.
    let x = (x & 0x0F0F_0F0F_0F0F_0F0F).wrapping_mul(2561) >> 8;
    let x = (x & 0x00FF_00FF_00FF_00FF).wrapping_mul(6_553_601) >> 16;
    let x = (x & 0x0000_FFFF_0000_FFFF).wrapping_mul(42_949_672_960_001) >> 32;
    // Eight digits are below 10^8: the cast keeps every bit.
    Some(x as u32)
}

/// The index of the first `-` in `bytes`. zkelect's protected names put
/// one right after a 16-digit nonce: those sixteen bytes are checked eight at
/// a time, as a listing of thousands of such names is scanned on every
/// change; anything else is searched byte by byte.
#[inline(always)]
fn first_dash(bytes: &[u8]) -> Option<usize> {
    // Whether a byte of `x` is `-` (exact: the "has zero byte" test on x ^ '-').
    let has_dash = |x: u64| {
        let v = x ^ 0x2D2D_2D2D_2D2D_2D2D;
        v.wrapping_sub(0x0101_0101_0101_0101) & !v & 0x8080_8080_8080_8080 != 0
    };
    if let Some((head, rest)) = bytes.split_first_chunk::<16>() {
        let (lo, hi) = head.split_at(8);
        let word = |half: &[u8]| {
            let mut eight = [0u8; 8];
            eight.copy_from_slice(half);
            u64::from_le_bytes(eight)
        };
        if !has_dash(word(lo)) && !has_dash(word(hi)) {
            return rest.iter().position(|&b| b == b'-').map(|i| i + 16);
        }
    }
    bytes.iter().position(|&b| b == b'-')
}

/// Splits a name whose stem is unknown into stem and sequence.
///
/// Without the stem a trailing `-` is ambiguous (`x-2147483646` is stem `x-` and
/// a positive sequence, or stem `x` and a negative one); this reads ten trailing
/// digits as a positive sequence and only `-` plus nine digits as a negative one.
/// Names whose stem is known ([`parse`]) need no guess.
///
/// ```
/// use zkelect_core::name::split_sequence;
/// assert_eq!(split_sequence("n_0000000007"), Some(("n_", 7)));
/// assert_eq!(split_sequence("n_-000000001"), Some(("n_", -1)));
/// assert_eq!(split_sequence("n_12"), None);
/// ```
pub fn split_sequence(name: &str) -> Option<(&str, i32)> {
    if name.len() < 10 || !name.is_char_boundary(name.len() - 10) {
        return None;
    }
    let (stem, tail) = name.split_at(name.len() - 10);
    parse_sequence(tail).map(|seq| (stem, seq))
}

/// Parses the part after a known stem marker.
fn after_marker<'a>(rest: &'a str, marker: &str) -> Option<(&'a str, i32)> {
    let (stem, tail) = rest.rsplit_once(marker)?;
    parse_sequence(tail).map(|seq| (stem, seq))
}

/// Who wrote a node, borrowed from its name (no allocation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind<'a> {
    Ours(Option<&'a str>),
    Curator,
    Kazoo,
}

/// The stems that belong to one queue: ours (with our nonce in front, if
/// protected) and, with interop, the other library's as it finds them.
#[derive(Debug, Clone, Copy)]
struct Stems<'a> {
    ours: [(&'a str, Access); 2],
    foreign: [(&'static str, Access); 2],
    len: usize,
    interop: Interop,
    /// A semaphore's queue: our names may carry a weight ([`weight_token`]).
    weighted: bool,
}

impl<'a> Stems<'a> {
    /// A one-stem recipe's nodes bear `prefix` (the configured stem); a
    /// read-write lock's stems are fixed by the scheme, and `prefix` is not used.
    fn new(prefix: &'a str, interop: Interop, recipe: Recipe) -> Self {
        let stem = |rule: Rule| (rule.stem(interop).unwrap_or_default(), rule.access());
        match recipe {
            Recipe::ReadWrite => {
                let both = [stem(Rule::Read), stem(Rule::Write)];
                Self {
                    ours: both,
                    foreign: both,
                    len: 2,
                    interop,
                    weighted: false,
                }
            }
            _ => {
                let theirs = stem(recipe.rule(Access::Exclusive));
                Self {
                    ours: [(prefix, Access::Exclusive); 2],
                    foreign: [theirs; 2],
                    len: 1,
                    interop,
                    weighted: matches!(recipe, Recipe::Semaphore { .. }),
                }
            }
        }
    }
}

/// Classifies and parses a child name without allocating.
///
/// Ours: `[_c_<nonce>-]<stem><seq>`, exactly. Foreign names count only in
/// the chosen scheme, and as that library finds them: Curator takes the text
/// after the *last* lock name (`StandardLockInternalsDriver.fixForSorting`),
/// kazoo searches for its node name followed by the sequence at the end (its
/// contender pattern); anything may stand before either.
#[inline(always)]
fn scan<'a>(name: &'a str, stems: &Stems<'_>) -> Option<(i32, Kind<'a>, Access, u32)> {
    // Byte-wise rather than `split_once`/`strip_prefix`: on names this short
    // their memchr and memcmp calls cost more than the comparisons (this runs
    // once per child of every listing, hence always inlined: as a mere hint
    // it was dropped or kept as the crate's code-generation units fell). `-` is ASCII, so slicing next to it
    // stays on a char boundary.
    // The rest after the nonce as bytes: only the sequence is read from it,
    // which needs no `str` (and so no char-boundary checks per child).
    let (nonce, rest) = match name.strip_prefix(PROTECTED_MARKER) {
        Some(after) => match first_dash(after.as_bytes()) {
            // `get`, not indexing: `-` is ASCII, so the slice is always
            // there, and a caller that reads no nonce (a listing's scan)
            // then drops its char-boundary check along with it.
            Some(dash) => (after.get(..dash), &after.as_bytes()[dash + 1..]),
            None => (None, name.as_bytes()),
        },
        None => (None, name.as_bytes()),
    };
    for &(stem, access) in &stems.ours[..stems.len] {
        if starts_with(rest, stem.as_bytes()) {
            let tail = &rest[stem.len()..];
            if let Some(seq) = sequence_of(tail) {
                return Some((seq, Kind::Ours(nonce), access, 1));
            }
            if stems.weighted {
                if let Some((weight, seq)) = weighted_tail(tail) {
                    return Some((seq, Kind::Ours(nonce), access, weight));
                }
            }
        }
    }
    let kind = match stems.interop {
        Interop::None => return None,
        Interop::Curator => Kind::Curator,
        Interop::Kazoo => Kind::Kazoo,
    };
    stems.foreign[..stems.len]
        .iter()
        .filter(|(stem, _)| !stem.is_empty())
        .find_map(|&(stem, access)| after_marker(name, stem).map(|(_, seq)| (seq, kind, access, 1)))
}

/// The most permits one node may ask for (as many as a semaphore may have).
pub const WEIGHT_MAX: u32 = crate::config::LEADERS_MAX;

/// The text a weighted semaphore node carries between its stem and its
/// sequence: `w<weight>_` for a weight of 2 or more, nothing for 1 (so an
/// unweighted node's name is what it always was). The weight is in the name
/// so that a listing alone says how many permits every node asks for.
///
/// ```
/// use zkelect_core::name::{parse, weight_token};
/// use zkelect_core::{Interop, Recipe};
/// assert_eq!(weight_token(1), "");
/// assert_eq!(weight_token(3), "w3_");
/// let sem = Recipe::Semaphore { permits: 5 };
/// let node = parse("_c_00000000000000aa-s_w3_0000000007", "s_", Interop::None, sem).unwrap();
/// assert_eq!((node.seq, node.weight), (7, 3));
/// assert_eq!(parse("s_0000000008", "s_", Interop::None, sem).unwrap().weight, 1);
/// // Only the one spelling: no leading zero, no token for a weight of 1.
/// assert!(parse("s_w03_0000000009", "s_", Interop::None, sem).is_none());
/// assert!(parse("s_w1_0000000009", "s_", Interop::None, sem).is_none());
/// ```
pub fn weight_token(weight: u32) -> String {
    if weight <= 1 {
        String::new()
    } else {
        format!("w{weight}_")
    }
}

/// Parses `w<weight>_<sequence>` (the tail after a semaphore's stem): the
/// weight exactly as [`weight_token`] writes it (2 to [`WEIGHT_MAX`], no
/// leading zero), then a sequence.
#[inline]
fn weighted_tail(tail: &[u8]) -> Option<(u32, i32)> {
    let rest = tail.strip_prefix(b"w")?;
    let end = rest.iter().position(|&b| b == b'_')?;
    let digits = &rest[..end];
    if digits.is_empty() || digits.len() > 4 || digits[0] == b'0' {
        return None;
    }
    let weight = u32::try_from(decimal(digits)?).ok()?;
    if !(2..=WEIGHT_MAX).contains(&weight) {
        return None;
    }
    sequence_of(&rest[end + 1..]).map(|seq| (weight, seq))
}

/// Whether `text` starts with `prefix`, compared byte by byte (stems are a
/// few bytes long: cheaper than a call to memcmp).
#[inline(always)]
fn starts_with(text: &[u8], prefix: &[u8]) -> bool {
    text.len() >= prefix.len() && text.iter().zip(prefix).all(|(a, b)| a == b)
}

/// Parses a child name, or returns `None` if it takes no part in the queue.
///
/// Names with our stem (protected or not) always take part; with an
/// [`Interop`] scheme, that library's names for the `recipe` take part too, and
/// no others. For a one-stem recipe our stem is `prefix` (what
/// [`Config::prefix`](crate::Config::prefix) says); a read-write lock's two
/// stems are fixed by the scheme ([`Rule::stem`]) and `prefix` is not used.
///
/// ```
/// use zkelect_core::name::{parse, Access, Origin};
/// use zkelect_core::{Interop, Recipe};
/// let election = Recipe::Election { leaders: 1 };
/// let ours = parse("_c_0123456789abcdef-n_0000000003", "n_", Interop::None, election).unwrap();
/// assert_eq!(ours.seq, 3);
/// assert_eq!(ours.origin, Origin::Ours { nonce: Some("0123456789abcdef".into()) });
/// let curator = "_c_9f1c6f0e-4b5d-4c1e-9a7b-2d8e0f6a1b3c-latch-0000000002";
/// assert!(parse(curator, "n_", Interop::None, election).is_none());
/// assert_eq!(parse(curator, "latch-", Interop::Curator, election).unwrap().origin, Origin::Curator);
/// let kazoo = "0123456789abcdef0123456789abcdef__lock__0000000001";
/// assert!(parse(kazoo, "latch-", Interop::Curator, election).is_none());
/// assert_eq!(parse(kazoo, "__lock__", Interop::Kazoo, election).unwrap().origin, Origin::Kazoo);
/// assert!(parse("garbage", "n_", Interop::Kazoo, election).is_none());
/// let reader = parse("x__rlock__0000000004", "", Interop::Kazoo, Recipe::ReadWrite).unwrap();
/// assert_eq!(reader.access, Access::Shared);
/// ```
pub fn parse(name: &str, prefix: &str, interop: Interop, recipe: Recipe) -> Option<NodeName> {
    let (seq, kind, access, weight) = scan(name, &Stems::new(prefix, interop, recipe))?;
    let origin = match kind {
        Kind::Ours(nonce) => Origin::Ours {
            nonce: nonce.map(str::to_owned),
        },
        Kind::Curator => Origin::Curator,
        Kind::Kazoo => Origin::Kazoo,
    };
    Some(NodeName {
        name: name.to_owned(),
        seq,
        origin,
        access,
        weight,
    })
}

/// Where one node stands in a children listing: what a candidate needs from it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Standing {
    /// Whether the node was in the listing at all.
    pub found: bool,
    /// How many participants older than the node block it (under
    /// [`standing`], every older participant).
    pub rank: usize,
    /// The weights of the older participants that block it, summed: the
    /// permits they ask for (equal to `rank` but in a weighted semaphore).
    pub weight: u64,
    /// The nearest older participants that block it, oldest first (at most
    /// the number asked for).
    pub nearest_lower: Vec<String>,
    /// The weights of `nearest_lower`, in the same order; empty when every
    /// one of them weighs 1 (always, but in a weighted semaphore).
    pub nearest_weights: Vec<u32>,
    /// The oldest participant (the leader when k = 1), if any.
    pub oldest: Option<String>,
    /// Children that take no part (unparsable or foreign without interop).
    pub ignored: usize,
    /// Participants left out because they are known to be persistent.
    pub skipped: usize,
    /// A participant whose sequence is negative (the parent's counter passed
    /// 2^31 − 1), if any: the order other libraries see differs from ours there.
    pub negative: Option<String>,
}

/// Finds `own` in `children` in one pass, without sorting the whole listing,
/// leaving out the names in `skipped` (persistent look-alikes).
///
/// Ordering is relative to `own`'s sequence as serial numbers, so the result
/// agrees with [`order`] whenever the live nodes span less than 2^31 sequences.
/// Cost is linear in the listing with no allocation per child (only the
/// `keep` nearest nodes below are kept, in a heap), which keeps a listing of
/// 10,000 children well under a millisecond.
///
/// ```
/// use std::collections::BTreeSet;
/// use zkelect_core::name::standing;
/// use zkelect_core::Interop;
/// let children: Vec<String> = ["n_0000000003", "n_0000000001", "x", "n_0000000002"]
///     .iter().map(|s| s.to_string()).collect();
/// let s = standing(&children, "n_0000000003", "n_", Interop::None, 1, &BTreeSet::new());
/// assert_eq!((s.found, s.rank, s.ignored), (true, 2, 1));
/// assert_eq!(s.nearest_lower, ["n_0000000002"]);
/// assert_eq!(s.oldest.as_deref(), Some("n_0000000001"));
/// ```
pub fn standing(
    children: &[String],
    own: &str,
    prefix: &str,
    interop: Interop,
    keep: usize,
    skipped: &BTreeSet<String>,
) -> Standing {
    let rule = Rule::Election { leaders: 1 };
    standing_under(children, own, prefix, interop, rule, keep, skipped)
}

/// [`standing`] of a node under `rule`: `rank` and `nearest_lower` count only
/// the older participants that block it ([`Rule::blocks`]); `oldest` is the
/// oldest participant of the queue whatever it is.
///
/// ```
/// use std::collections::BTreeSet;
/// use zkelect_core::name::standing_under;
/// use zkelect_core::{Interop, Rule};
/// let children: Vec<String> = ["w_0000000001", "r_0000000002", "r_0000000003"]
///     .iter().map(|s| s.to_string()).collect();
/// let s = standing_under(&children, "r_0000000003", "", Interop::None, Rule::Read, 1, &BTreeSet::new());
/// assert_eq!(s.rank, 1); // the writer; the reader between does not block
/// assert_eq!(s.nearest_lower, ["w_0000000001"]);
/// ```
pub fn standing_under(
    children: &[String],
    own: &str,
    prefix: &str,
    interop: Interop,
    rule: Rule,
    keep: usize,
    skipped: &BTreeSet<String>,
) -> Standing {
    let stems = Stems::new(prefix, interop, rule.recipe());
    let own_seq = scan(own, &stems).map(|(seq, _, _, _)| seq);
    let mut out = Standing::default();
    // The `keep` nearest blocking nodes below ours, the farthest of them on
    // top: a node farther than that one is only counted, so a long queue
    // below costs one comparison per node and no allocation per node (and a
    // holder, with none below, no allocation at all).
    let mut nearest: BinaryHeap<Reverse<(i32, &str, u32)>> = BinaryHeap::new();
    let mut oldest: Option<(i32, &str)> = None;
    for child in children {
        let Some((seq, _, access, weight)) = scan(child, &stems) else {
            out.ignored += 1;
            continue;
        };
        if seq < 0 && out.negative.is_none() {
            out.negative = Some(child.clone());
        }
        if !skipped.is_empty() && skipped.contains(child) {
            out.skipped += 1;
            continue;
        }
        // Distance from our node on the circle: negative means older.
        let rel = own_seq.map_or(seq, |own_seq| seq.wrapping_sub(own_seq));
        let here = (rel, child.as_str());
        if oldest.is_none_or(|old| here < old) {
            oldest = Some(here);
        }
        // Only a name with our sequence can be ours (or tie with it).
        if rel == 0 && child == own {
            out.found = true;
            continue;
        }
        if own_seq.is_some() && here < (0, own) && rule.blocked_by(access) {
            out.rank += 1;
            out.weight += u64::from(weight);
            let here = (rel, child.as_str(), weight);
            if nearest.len() < keep {
                nearest.push(Reverse(here));
            } else if let Some(mut farthest) = nearest.peek_mut() {
                if here > farthest.0 {
                    *farthest = Reverse(here);
                }
            }
        }
    }
    // Ascending by `Reverse` is nearest first; the books want oldest first.
    let mut lower = nearest.into_sorted_vec();
    lower.reverse();
    // Not collected in place: the heap's buffer is sized for `keep`, and a
    // follower keeps these names for as long as it waits.
    out.nearest_lower = Vec::with_capacity(lower.len());
    out.nearest_lower
        .extend(lower.iter().map(|Reverse((_, n, _))| (*n).to_owned()));
    if lower.iter().any(|Reverse((_, _, w))| *w != 1) {
        out.nearest_weights = lower.iter().map(|Reverse((_, _, w))| *w).collect();
    }
    out.oldest = oldest.map(|(_, n)| n.to_owned());
    out
}

/// Compares two sequences as serial numbers: `a` is older than `b` if `b` is
/// less than 2^31 steps after `a` on the 32-bit circle.
///
/// ```
/// use std::cmp::Ordering;
/// use zkelect_core::name::serial_cmp;
/// assert_eq!(serial_cmp(1, 2), Ordering::Less);
/// assert_eq!(serial_cmp(i32::MAX, i32::MIN), Ordering::Less); // the wrap
/// ```
pub fn serial_cmp(a: i32, b: i32) -> Ordering {
    (b.wrapping_sub(a)).cmp(&0).reverse()
}

/// Orders parsed names oldest first.
///
/// Sorting by raw value and then rotating to start after the largest gap on the
/// circle gives a total order (a comparator built from [`serial_cmp`] alone is not
/// transitive across the whole circle, and sort must not be given one).
pub fn order(names: &mut [NodeName]) {
    names.sort_by(|a, b| a.seq.cmp(&b.seq).then_with(|| a.name.cmp(&b.name)));
    if names.len() < 2 {
        return;
    }
    let n = names.len();
    let mut start = 0;
    let mut widest = 0u64;
    for i in 0..n {
        let here = names[i].seq as u32;
        let next = names[(i + 1) % n].seq as u32;
        // Gap from this element to the next one going up the circle.
        let gap = u64::from(next.wrapping_sub(here));
        let gap = if gap == 0 && i == n - 1 {
            1u64 << 32
        } else {
            gap
        };
        if gap > widest {
            widest = gap;
            start = (i + 1) % n;
        }
    }
    names.rotate_left(start);
}

/// The parsed, ordered participants among `children`, plus the names ignored.
///
/// Which names belong to the queue is as for [`parse`].
pub fn queue(
    children: &[String],
    prefix: &str,
    interop: Interop,
    recipe: Recipe,
) -> (Vec<NodeName>, usize) {
    let mut parsed: Vec<NodeName> = children
        .iter()
        .filter_map(|c| parse(c, prefix, interop, recipe))
        .collect();
    let ignored = children.len() - parsed.len();
    order(&mut parsed);
    (parsed, ignored)
}

/// The nonce for the `create`-th node of the `session`-th session of a candidate
/// seeded with `seed`: 16 lowercase hex digits, different for every node.
///
/// A fresh nonce per node (not only per session) makes every protected name
/// unique for good: after the election path is deleted and recreated the
/// sequence numbers restart, and a per-session nonce would give a candidate
/// that rejoins its old name back, so that a late watch event about the old node
/// would read as news about the new one (found by the simulator). Retries of
/// one create whose fate is unknown keep its nonce: that is how the node is
/// found again (see [`never_reused`]).
///
/// ```
/// use zkelect_core::name::nonce;
/// assert_eq!(nonce(7, 0, 0).len(), 16);
/// assert_ne!(nonce(7, 0, 0), nonce(7, 1, 0));
/// assert_ne!(nonce(7, 0, 0), nonce(7, 0, 1));
/// assert_eq!(nonce(7, 3, 2), nonce(7, 3, 2));
/// ```
pub fn nonce(seed: u64, session: u64, create: u64) -> String {
    let x = splitmix64(seed ^ session.wrapping_mul(0xA076_1D64_78BD_642F));
    let value = splitmix64(x ^ create.wrapping_mul(0xE703_7ED1_A0B4_28DB));
    // `{:016x}` by hand: one per create, and the formatting machinery cost
    // a simulated run more than the rest of the create's naming.
    let mut out = String::with_capacity(16);
    for shift in (0..16).rev() {
        // A nibble: always below 16, so a hex digit.
        let nibble = ((value >> (shift * 4)) & 0xf) as u32;
        out.push(char::from_digit(nibble, 16).unwrap_or('0'));
    }
    out
}

/// Whether a child name is never given to a second node: a protected name
/// (`_c_<nonce>-…`), whose nonce is drawn afresh for every create — by zkelect
/// ([`nonce`]) and by Curator's `withProtection` (a random UUID per create).
///
/// Only for such a name is a watch event proof about the one node that bore it.
/// Any other name (kazoo's `<uuid>__lock__`, which keeps its UUID across
/// acquisitions; unprotected names) comes back after the election path is
/// deleted and recreated, and a late `NodeDeleted` for it may be about an older
/// node than the one watched now.
///
/// ```
/// use zkelect_core::name::never_reused;
/// assert!(never_reused("_c_0123456789abcdef-n_0000000007"));
/// assert!(!never_reused("n_0000000007"));
/// assert!(!never_reused("0123456789abcdef0123456789abcdef__lock__0000000001"));
/// assert!(!never_reused("_c_-n_0000000007"));
/// ```
pub fn never_reused(name: &str) -> bool {
    nonce_of(name).is_some()
}

/// The nonce of a protected name (the part between `_c_` and the next `-`).
pub(crate) fn nonce_of(name: &str) -> Option<&str> {
    name.strip_prefix(PROTECTED_MARKER)
        .and_then(|rest| rest.split_once('-'))
        .map(|(nonce, _)| nonce)
        .filter(|nonce| !nonce.is_empty())
}

/// The name prefix a candidate creates: `_c_<nonce>-<prefix>` or just `<prefix>`.
pub fn create_prefix(prefix: &str, nonce: Option<&str>) -> String {
    create_prefix_weighted(prefix, nonce, 1)
}

/// [`create_prefix`] of a node asking for `weight` permits: the weight
/// follows the stem ([`weight_token`]).
pub fn create_prefix_weighted(prefix: &str, nonce: Option<&str>, weight: u32) -> String {
    // Pushed piece by piece into one buffer, not formatted: a create's
    // name is made once per create, and `format!` was most of its cost.
    let nonce_len = nonce.map_or(0, |n| PROTECTED_MARKER.len() + n.len() + 1);
    let mut out = String::with_capacity(nonce_len + prefix.len() + 12);
    if let Some(n) = nonce {
        out.push_str(PROTECTED_MARKER);
        out.push_str(n);
        out.push('-');
    }
    out.push_str(prefix);
    if weight > 1 {
        out.push('w');
        out.push_str(itoa::Buffer::new().format(weight));
        out.push('_');
    }
    out
}

/// SplitMix64: a tiny, well-mixed, deterministic generator step.
pub(crate) fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ELECTION: Recipe = Recipe::Election { leaders: 1 };

    #[test]
    fn hand_written_names_are_what_format_writes() {
        for (seed, session, create) in [(0_u64, 0_u64, 0_u64), (7, 3, 2), (u64::MAX, 1, u64::MAX)] {
            let x = splitmix64(seed ^ session.wrapping_mul(0xA076_1D64_78BD_642F));
            let value = splitmix64(x ^ create.wrapping_mul(0xE703_7ED1_A0B4_28DB));
            assert_eq!(nonce(seed, session, create), format!("{value:016x}"));
        }
        for weight in [0, 1, 2, 9, 10, 255, u32::MAX] {
            for n in [None, Some("00000000000000aa")] {
                let unweighted = match n {
                    Some(n) => format!("{PROTECTED_MARKER}{n}-s_"),
                    None => "s_".to_owned(),
                };
                assert_eq!(create_prefix("s_", n), unweighted);
                assert_eq!(
                    create_prefix_weighted("s_", n, weight),
                    format!("{unweighted}{}", weight_token(weight))
                );
            }
        }
    }

    fn names(children: &[&str], interop: Interop) -> Vec<String> {
        let owned: Vec<String> = children.iter().map(|s| s.to_string()).collect();
        queue(&owned, interop.stem().unwrap_or("n_"), interop, ELECTION)
            .0
            .into_iter()
            .map(|n| n.name)
            .collect()
    }

    /// (name, expected sequence) in ZooKeeper's own formatting.
    const SEQUENCES: &[(&str, Option<i32>)] = &[
        ("n_0000000000", Some(0)),
        ("n_0000000042", Some(42)),
        ("n_2147483647", Some(i32::MAX)),
        ("n_-2147483648", Some(i32::MIN)),
        ("n_-2147483647", Some(-2_147_483_647)),
        ("n_-000000001", Some(-1)),
        ("n_-999999999", Some(-999_999_999)),
        ("n_2147483648", None),
        ("n_9999999999", None),
        ("n_000000001", None),
        ("n_00000000x1", None),
        ("", None),
        ("ééééééééééé", None),
        ("n_--00000001", None),
        ("n_-0000000001", None),
        ("n_-000000000", None),
    ];

    #[test]
    fn sequence_suffix_table() {
        for (name, want) in SEQUENCES {
            assert_eq!(
                parse(name, "n_", Interop::None, ELECTION).map(|n| n.seq),
                *want,
                "{name:?}"
            );
        }
    }

    #[test]
    fn every_formatted_sequence_parses_back() {
        // ZooKeeper's "%010d", as Rust writes it: sign, then zero padding to width 10.
        for seq in [
            0,
            1,
            9,
            999_999_999,
            1_000_000_000,
            i32::MAX,
            -1,
            -999_999_999,
            -1_000_000_000,
            i32::MIN,
        ] {
            let name = format!("n_{seq:010}");
            assert_eq!(
                parse(&name, "n_", Interop::None, ELECTION).map(|n| n.seq),
                Some(seq),
                "{name}"
            );
        }
    }

    #[test]
    fn wrap_orders_max_before_min() {
        assert_eq!(
            names(&["n_-2147483648", "n_2147483647"], Interop::None),
            ["n_2147483647", "n_-2147483648"]
        );
        assert_eq!(
            names(
                &[
                    "n_-2147483646",
                    "n_2147483646",
                    "n_-2147483648",
                    "n_2147483647"
                ],
                Interop::None
            ),
            [
                "n_2147483646",
                "n_2147483647",
                "n_-2147483648",
                "n_-2147483646"
            ]
        );
    }

    #[test]
    fn order_is_numeric_not_lexicographic() {
        // As strings "n_-000000001" < "n_0000000005", but -1 follows 5 only after a wrap;
        // with no wrap in sight, -1 is older.
        assert_eq!(
            names(
                &["n_0000000010", "n_0000000009", "n_-000000001"],
                Interop::None
            ),
            ["n_-000000001", "n_0000000009", "n_0000000010"]
        );
        assert_eq!(
            names(
                &[
                    "_c_bbbbbbbbbbbbbbbb-n_0000000002",
                    "_c_aaaaaaaaaaaaaaaa-n_0000000010"
                ],
                Interop::None
            ),
            [
                "_c_bbbbbbbbbbbbbbbb-n_0000000002",
                "_c_aaaaaaaaaaaaaaaa-n_0000000010"
            ]
        );
    }

    #[test]
    fn serial_comparison_is_antisymmetric_across_the_wrap() {
        for (a, b) in [
            (0, 1),
            (i32::MAX, i32::MIN),
            (-5, 3),
            (i32::MAX - 10, i32::MIN + 10),
        ] {
            assert_eq!(serial_cmp(a, b), Ordering::Less, "{a} {b}");
            assert_eq!(serial_cmp(b, a), Ordering::Greater, "{b} {a}");
        }
        assert_eq!(serial_cmp(7, 7), Ordering::Equal);
    }

    #[test]
    fn foreign_names_join_only_in_their_own_scheme() {
        let children = [
            "_c_0a1b2c3d-1111-2222-3333-444455556666-latch-0000000003",
            "0123456789abcdef0123456789abcdef__lock__0000000001",
            "_c_00000000000000aa-n_0000000002",
            "_c_00000000000000bb-latch-0000000004",
            "_c_00000000000000cc-__lock__0000000005",
            "x__rlock__0000000006",
            "garbage",
            "lock-",
        ];
        assert_eq!(
            names(&children, Interop::None),
            ["_c_00000000000000aa-n_0000000002"]
        );
        assert_eq!(
            names(&children, Interop::Curator),
            [
                "_c_0a1b2c3d-1111-2222-3333-444455556666-latch-0000000003",
                "_c_00000000000000bb-latch-0000000004",
            ]
        );
        assert_eq!(
            names(&children, Interop::Kazoo),
            [
                "0123456789abcdef0123456789abcdef__lock__0000000001",
                "_c_00000000000000cc-__lock__0000000005",
            ]
        );
        let owned: Vec<String> = children.iter().map(|s| s.to_string()).collect();
        let (q, ignored) = queue(&owned, "latch-", Interop::Curator, ELECTION);
        assert_eq!(ignored, 6);
        assert_eq!(q[0].origin, Origin::Curator);
        assert_eq!(
            q[1].origin,
            Origin::Ours {
                nonce: Some("00000000000000bb".into())
            }
        );
        let (q, _) = queue(&owned, "__lock__", Interop::Kazoo, ELECTION);
        assert_eq!(q[0].origin, Origin::Kazoo);
        assert_eq!(
            q[1].origin,
            Origin::Ours {
                nonce: Some("00000000000000cc".into())
            }
        );
    }

    #[test]
    fn standing_leaves_out_skipped_names_and_reports_negative_sequences() {
        let children: Vec<String> = [
            "n_0000000001",
            "n_0000000002",
            "n_0000000003",
            "n_-000000009",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let skipped: BTreeSet<String> = ["n_0000000002".to_owned()].into();
        let s = standing(&children, "n_0000000003", "n_", Interop::None, 4, &skipped);
        assert_eq!((s.rank, s.skipped), (2, 1));
        assert_eq!(s.nearest_lower, ["n_-000000009", "n_0000000001"]);
        assert_eq!(s.negative.as_deref(), Some("n_-000000009"));
    }

    #[test]
    fn ordering_is_the_same_whatever_the_input_order() {
        let base = [
            "n_2147483640",
            "n_2147483647",
            "n_-2147483648",
            "n_-2147483600",
            "n_2147483645",
        ];
        let want = names(&base, Interop::None);
        let mut rev = base;
        rev.reverse();
        assert_eq!(names(&rev, Interop::None), want);
        assert_eq!(want[0], "n_2147483640");
        assert_eq!(want[4], "n_-2147483600");
    }

    /// `parse_sequence` as it was written first (by `str::parse`): the
    /// one-pass version must agree with it on every input.
    fn parse_sequence_by_str_parse(s: &str) -> Option<i32> {
        let all_digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
        if s.len() == 10 && all_digits(s) {
            return i32::try_from(s.parse::<i64>().ok()?).ok();
        }
        let digits = s.strip_prefix('-')?;
        if !all_digits(digits) {
            return None;
        }
        let magnitude: i64 = digits.parse().ok()?;
        let well_formed = match digits.len() {
            9 => true,
            10 => magnitude >= 1_000_000_000,
            _ => false,
        };
        if !well_formed || magnitude == 0 {
            return None;
        }
        i32::try_from(-magnitude).ok()
    }

    proptest::proptest! {
        /// The byte-wise parse agrees with the `str::parse` one, on names
        /// near the edges (signs, ten digits, 2^31) and on any text.
        #[test]
        fn parse_sequence_agrees_with_str_parse(
            near in "[-+0-9x]{0,12}|-?[0-2][0-9]{9,10}|-?214748364[0-9]",
            any in ".{0,14}",
            seq in proptest::prelude::any::<i32>(),
        ) {
            for s in [near.as_str(), any.as_str(), &format!("{seq:010}")] {
                proptest::prop_assert_eq!(parse_sequence(s), parse_sequence_by_str_parse(s), "{:?}", s);
            }
            proptest::prop_assert_eq!(parse_sequence(&format!("{seq:010}")), Some(seq));
        }

        /// The word-wise search for the first dash finds what a byte-wise
        /// one finds, wherever the dash is (or none is).
        #[test]
        fn first_dash_agrees_with_a_byte_search(
            text in "[0-9a-f]{0,20}-?[0-9a-f-]{0,6}|[-a-z0-9]{0,30}|.{0,24}",
        ) {
            let bytes = text.as_bytes();
            proptest::prop_assert_eq!(
                first_dash(bytes),
                bytes.iter().position(|&b| b == b'-'),
                "{:?}", text
            );
        }

        /// Every run of eight bytes, digits or not, reads as the loop reads it.
        #[test]
        fn eight_digits_agrees_with_a_digit_loop(
            digits in "[0-9]{8}",
            bytes in proptest::prelude::any::<[u8; 8]>(),
            near in "[/-:0-9]{8}",
        ) {
            for eight in [digits.as_bytes(), &bytes[..], near.as_bytes()] {
                let eight: [u8; 8] = eight.try_into().unwrap();
                let by_loop = eight.iter().try_fold(0u32, |v, &b| {
                    b.is_ascii_digit().then(|| v * 10 + u32::from(b - b'0'))
                });
                proptest::prop_assert_eq!(eight_digits(eight), by_loop, "{:?}", eight);
            }
        }

        /// The bounded heap keeps what sorting every blocking node below ours
        /// kept (the version before it): same rank, nearest, oldest, counts,
        /// for readers and writers, protected and bare names, look-alikes
        /// skipped, duplicates and names that are not ours.
        #[test]
        fn standing_keeps_what_sorting_every_lower_node_kept(
            base in proptest::prelude::any::<i32>(),
            nodes in proptest::collection::vec((0u32..60, 0usize..5, proptest::prelude::any::<bool>()), 1..40),
            own_pick in proptest::prelude::any::<proptest::sample::Index>(),
            keep in 0usize..6,
            read in proptest::prelude::any::<bool>(),
        ) {
            let children: Vec<String> = nodes
                .iter()
                .map(|&(off, kind, skip)| {
                    let seq = base.wrapping_add(off as i32);
                    let stem = if skip { "w_" } else { "r_" };
                    match kind {
                        0 => format!("{stem}{seq:010}"),
                        1 => format!("_c_{off:016x}-{stem}{seq:010}"),
                        2 => format!("_c_{:016x}-w_{seq:010}", off / 2),
                        3 => format!("x_{seq:010}"),
                        _ => format!("{stem}{seq:010}"),
                    }
                })
                .collect();
            let own = own_pick.get(&children).clone();
            let skipped: BTreeSet<String> = nodes
                .iter()
                .zip(&children)
                .filter(|((off, _, _), _)| off % 7 == 3)
                .map(|(_, name)| name.clone())
                .collect();
            let rule = if read { Rule::Read } else { Rule::Write };
            let got = standing_under(&children, &own, "", Interop::None, rule, keep, &skipped);
            // The version that kept every blocking node below ours and sorted.
            let stems = Stems::new("", Interop::None, rule.recipe());
            let own_seq = scan(&own, &stems).map(|(seq, _, _, _)| seq);
            let mut want = Standing::default();
            let mut lower: Vec<(i32, &str)> = Vec::new();
            let mut oldest: Option<(i32, &str)> = None;
            for child in &children {
                let Some((seq, _, access, _)) = scan(child, &stems) else {
                    want.ignored += 1;
                    continue;
                };
                if seq < 0 && want.negative.is_none() {
                    want.negative = Some(child.clone());
                }
                if skipped.contains(child) {
                    want.skipped += 1;
                    continue;
                }
                let rel = own_seq.map_or(seq, |own_seq| seq.wrapping_sub(own_seq));
                if oldest.is_none_or(|(r, n)| (rel, child.as_str()) < (r, n)) {
                    oldest = Some((rel, child));
                }
                let older = own_seq.is_some() && (rel, child.as_str()) < (0, own.as_str());
                if child == &own {
                    want.found = true;
                } else if older && rule.blocked_by(access) {
                    lower.push((rel, child));
                }
            }
            want.rank = lower.len();
            want.weight = lower.len() as u64;
            lower.sort_unstable();
            want.nearest_lower = lower[lower.len().saturating_sub(keep)..].iter().map(|(_, n)| n.to_string()).collect();
            want.oldest = oldest.map(|(_, n)| n.to_owned());
            proptest::prop_assert_eq!(got, want);
        }

        /// The one-pass `standing` agrees with a full `order` of the listing,
        /// including across the wrap, for any window narrower than 2^31.
        #[test]
        fn standing_agrees_with_the_full_order(
            base in proptest::prelude::any::<i32>(),
            offsets in proptest::collection::btree_set(0u32..1_000_000, 1..40),
            own_pick in proptest::prelude::any::<proptest::sample::Index>(),
            keep in 1usize..5,
        ) {
            let children: Vec<String> = offsets
                .iter()
                .map(|off| format!("n_{:010}", base.wrapping_add(*off as i32)))
                .collect();
            let own = own_pick.get(&children).clone();
            let (ordered, _) = queue(&children, "n_", Interop::None, ELECTION);
            let rank = ordered.iter().position(|n| n.name == own).unwrap();
            let s = standing(&children, &own, "n_", Interop::None, keep, &BTreeSet::new());
            proptest::prop_assert!(s.found);
            proptest::prop_assert_eq!(s.rank, rank);
            let want: Vec<String> = ordered[rank.saturating_sub(keep)..rank].iter().map(|n| n.name.clone()).collect();
            proptest::prop_assert_eq!(s.nearest_lower, want);
            proptest::prop_assert_eq!(s.oldest, Some(ordered[0].name.clone()));
        }
    }
}
