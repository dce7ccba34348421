//! The `name` target: node-name parsing and queue order
//! ([`zkelect_core::name`]) against a deliberately simple reference.
//!
//! The bytes become a queue's settings (prefix, interop scheme, recipe) and
//! a listing of child names built from the pieces real names are made of
//! (the protected marker and a nonce, every library's stems, a weighted
//! semaphore's weight token, sequences near zero, the wrap and the
//! nine-to-ten digit edge, stray text), plus raw text.
//! Every public parsing function must not panic on any of them and must
//! agree with the reference below, which reads a sequence by formatting the
//! number back (`format!("{v:010}")`, as ZooKeeper writes it) and orders by
//! the distance from the start of the widest gap, where the core scans eight
//! digits at a time and rotates a sorted list. Where the live sequences span
//! less than 2^31, every node's [`standing_under`] (what a candidate acts
//! on) must agree with its place in that order.

use std::collections::BTreeSet;

use zkelect_core::name::{self, standing_under, Access, NodeName, Origin};
use zkelect_core::{Interop, Recipe, Rule};

use crate::read::Bytes;

/// Stems the listing's names are built from: every library's, the protected
/// marker, and look-alikes.
const STEMS: &[&str] = &[
    "n_",
    "m_",
    "s_",
    "r_",
    "w_",
    "latch-",
    "lock-",
    "__READ__",
    "__WRIT__",
    "__lock__",
    "__rlock__",
    "_c_",
    "-",
    "",
    "n",
    "__lock_",
];

/// Weight tokens (`w<weight>_`) a semaphore's names may carry, and
/// look-alikes: a weight of 0 or 1, a leading zero, past the most.
const WEIGHTS: &[&str] = &[
    "w2_", "w3_", "w59_", "w1024_", "w0_", "w1_", "w02_", "w1025_", "w_", "w",
];

/// One decoded case: a queue's settings and a listing of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// Our stem (a one-stem recipe's; a read-write lock's are fixed).
    pub prefix: String,
    /// The interop scheme.
    pub interop: Interop,
    /// The recipe, which picks the stems.
    pub recipe: Recipe,
    /// The children, without repeats (as ZooKeeper lists them).
    pub children: Vec<String>,
    /// Names to leave out as persistent look-alikes.
    pub skipped: BTreeSet<String>,
    /// How many of the nearest blocking nodes a standing keeps.
    pub keep: usize,
}

fn recipe(b: &mut Bytes<'_>) -> Recipe {
    let k = 1 + u32::from(b.u8() % 4);
    match b.u8() % 4 {
        0 => Recipe::Election { leaders: k },
        1 => Recipe::Mutex,
        2 => Recipe::Semaphore { permits: k },
        _ => Recipe::ReadWrite,
    }
}

fn nonce(b: &mut Bytes<'_>) -> String {
    match b.u8() % 4 {
        0 => b.text(18),
        _ => format!("{:016x}", b.u64()),
    }
}

fn sequence(b: &mut Bytes<'_>) -> String {
    match b.u8() % 6 {
        0..=2 => format!("{:010}", b.seq()),
        // Digits (and perhaps a sign) of a length near ten.
        3 | 4 => {
            let len = 8 + b.below(4);
            let mut s: String = (0..len).map(|_| char::from(b'0' + b.u8() % 10)).collect();
            if b.u8() % 3 == 0 {
                s.replace_range(..1, "-");
            }
            s
        }
        _ => b.text(11),
    }
}

fn child(b: &mut Bytes<'_>, prefix: &str) -> String {
    if b.u8() % 8 == 0 {
        return b.text(40);
    }
    let mut s = String::new();
    match b.u8() % 4 {
        0 => {
            s.push_str(name::PROTECTED_MARKER);
            s.push_str(&nonce(b));
            s.push('-');
        }
        1 => s.push_str(&b.text(6)),
        _ => {}
    }
    match b.u8() % 3 {
        0 => {
            s.push_str(prefix);
            // A weighted semaphore's token after our stem, well or badly
            // spelled (a weight of 1 or past the most has no token).
            if b.u8() % 4 == 0 {
                s.push_str(b.pick(WEIGHTS));
            }
        }
        _ => s.push_str(b.pick(STEMS)),
    }
    s.push_str(&sequence(b));
    s
}

impl Case {
    /// Decodes any bytes.
    pub fn decode(data: &[u8]) -> Self {
        let mut b = Bytes::new(data);
        let interop = b.pick(&Interop::ALL);
        let recipe = recipe(&mut b);
        let prefix = match b.u8() % 4 {
            0 => b.text(8),
            _ => b.pick(STEMS).to_owned(),
        };
        let keep = b.below(6);
        let mut children = Vec::new();
        let mut skipped = BTreeSet::new();
        let mut seen = BTreeSet::new();
        while !b.is_empty() && children.len() < 64 {
            let c = child(&mut b, &prefix);
            if seen.insert(c.clone()) {
                if b.u8() % 8 == 0 {
                    skipped.insert(c.clone());
                }
                children.push(c);
            }
        }
        Self {
            prefix,
            interop,
            recipe,
            children,
            skipped,
            keep,
        }
    }
}

/// What the reference reads from one name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Parsed {
    name: String,
    seq: i32,
    origin: Origin,
    access: Access,
    /// The permits it asks for: 1 but in a weighted semaphore.
    weight: u32,
}

/// The sequence ZooKeeper's `%010d` wrote, read by writing it back.
fn reference_sequence(s: &str) -> Option<i32> {
    let v: i32 = s.parse().ok()?;
    (format!("{v:010}") == s).then_some(v)
}

/// A semaphore's weighted tail, `w<weight>_<seq>`, read by writing the
/// weight back (`format!("w{weight}_")`, as a weighted node's name is made):
/// 2 to [`name::WEIGHT_MAX`], since a weight of 1 carries no token.
fn reference_weighted(tail: &str) -> Option<(u32, i32)> {
    let (token, seq) = tail.split_once('_')?;
    let weight: u32 = token.strip_prefix('w')?.parse().ok()?;
    let spelled = format!("w{weight}") == token && (2..=name::WEIGHT_MAX).contains(&weight);
    Some((weight, reference_sequence(seq)?)).filter(|_| spelled)
}

/// The documented grammar, spelled out: ours is
/// `[_c_<nonce>-]<stem>[w<weight>_]<seq>` exactly (the nonce ends at the
/// first `-`; the weight only in a semaphore, whose nodes carry it in the
/// name, and under any stem, the empty one too); a foreign name counts only
/// in its scheme, as the text after the last occurrence of its stem.
fn reference_parse(name: &str, prefix: &str, interop: Interop, recipe: Recipe) -> Option<Parsed> {
    let theirs = recipe.stems(interop);
    let ours: Vec<(&str, Access)> = match recipe {
        Recipe::ReadWrite => theirs.clone(),
        _ => vec![(prefix, Access::Exclusive)],
    };
    let (nonce, rest) = match name
        .strip_prefix(name::PROTECTED_MARKER)
        .and_then(|after| after.split_once('-'))
    {
        Some((nonce, rest)) => (Some(nonce.to_owned()), rest),
        None => (None, name),
    };
    let parsed = |seq, origin, access, weight| Parsed {
        name: name.to_owned(),
        seq,
        origin,
        access,
        weight,
    };
    let weighted = matches!(recipe, Recipe::Semaphore { .. });
    for (stem, access) in ours {
        let Some(tail) = rest.strip_prefix(stem) else {
            continue;
        };
        let read = match reference_sequence(tail) {
            Some(seq) => Some((1, seq)),
            None if weighted => reference_weighted(tail),
            None => None,
        };
        if let Some((weight, seq)) = read {
            return Some(parsed(seq, Origin::Ours { nonce }, access, weight));
        }
    }
    let origin = match interop {
        Interop::None => return None,
        Interop::Curator => Origin::Curator,
        Interop::Kazoo => Origin::Kazoo,
    };
    theirs
        .into_iter()
        .filter(|(stem, _)| !stem.is_empty())
        .find_map(|(stem, access)| {
            let (_, tail) = name.rsplit_once(stem)?;
            Some(parsed(reference_sequence(tail)?, origin.clone(), access, 1))
        })
}

/// Oldest first: by distance up the circle from the value just after the
/// widest gap between the sequences present (the first such gap, counting
/// from the lowest signed value, on a tie), then by name.
fn reference_order(mut nodes: Vec<Parsed>) -> Vec<Parsed> {
    let mut values: Vec<i32> = nodes.iter().map(|n| n.seq).collect();
    values.sort_unstable();
    values.dedup();
    let mut base = values.first().copied().unwrap_or(0);
    let mut widest = 0u64;
    for (i, &v) in values.iter().enumerate() {
        let next = values[(i + 1) % values.len()];
        let gap = match values.len() {
            1 => 1 << 32,
            _ => u64::from((next as u32).wrapping_sub(v as u32)),
        };
        if gap > widest {
            widest = gap;
            base = next;
        }
    }
    nodes.sort_by(|a, b| {
        let up = |n: &Parsed| (n.seq as u32).wrapping_sub(base as u32);
        up(a).cmp(&up(b)).then_with(|| a.name.cmp(&b.name))
    });
    nodes
}

/// Whether a node of `access` below one of `rule` blocks it.
fn reference_blocks(rule: Rule, access: Access) -> bool {
    rule != Rule::Read || access == Access::Exclusive
}

fn rules(recipe: Recipe) -> Vec<Rule> {
    match recipe {
        Recipe::Election { leaders } => vec![Rule::Election { leaders }],
        Recipe::Mutex => vec![Rule::Mutex],
        Recipe::Semaphore { permits } => vec![Rule::Semaphore { permits }],
        Recipe::ReadWrite => vec![Rule::Read, Rule::Write],
    }
}

fn same(node: &NodeName, want: &Parsed) -> bool {
    node.name == want.name
        && node.seq == want.seq
        && node.origin == want.origin
        && node.access == want.access
        && node.weight == want.weight
}

/// The target: see the module docs.
pub fn run(data: &[u8]) {
    check(&Case::decode(data));
}

/// Checks one case; panics on a disagreement.
pub fn check(case: &Case) {
    let Case {
        prefix,
        interop,
        recipe,
        children,
        skipped,
        keep,
    } = case;
    let (interop, recipe, keep) = (*interop, *recipe, *keep);
    let mut parsed = Vec::new();
    for child in children {
        let want = reference_parse(child, prefix, interop, recipe);
        let got = name::parse(child, prefix, interop, recipe);
        match (&got, &want) {
            (Some(g), Some(w)) => assert!(same(g, w), "{child:?}: parsed {g:?}, reference {w:?}"),
            (None, None) => {}
            _ => panic!("{child:?} under {prefix:?}, {interop:?}, {recipe:?}: parsed {got:?}, reference {want:?}"),
        }
        parsed.extend(want);
        let tail = child
            .len()
            .checked_sub(10)
            .filter(|&at| child.is_char_boundary(at));
        let split = tail.and_then(|at| Some((&child[..at], reference_sequence(&child[at..])?)));
        assert_eq!(
            name::split_sequence(child),
            split,
            "split_sequence({child:?})"
        );
        assert_eq!(
            name::parse_sequence(child),
            reference_sequence(child),
            "{child:?}"
        );
        let protected = child
            .strip_prefix(name::PROTECTED_MARKER)
            .and_then(|after| after.split_once('-'))
            .is_some_and(|(nonce, _)| !nonce.is_empty());
        assert_eq!(
            name::never_reused(child),
            protected,
            "never_reused({child:?})"
        );
    }
    let ordered = reference_order(parsed.clone());
    let (queue, ignored) = name::queue(children, prefix, interop, recipe);
    assert_eq!(ignored, children.len() - parsed.len());
    let names = |q: &[NodeName]| q.iter().map(|n| n.name.clone()).collect::<Vec<_>>();
    let want: Vec<String> = ordered.iter().map(|n| n.name.clone()).collect();
    assert_eq!(names(&queue), want, "queue order of {children:?}");
    // The order is the names', not the listing's.
    let mut reversed: Vec<NodeName> = queue.iter().rev().cloned().collect();
    name::order(&mut reversed);
    assert_eq!(names(&reversed), want, "order of the reversed queue");
    // A node holds when the permits asked below it by the nodes that block
    // it, plus its own, fit in the rule's limit (every weight is 1 but in a
    // weighted semaphore).
    let holders: Vec<usize> = (0..ordered.len())
        .filter(|&i| {
            let rule = recipe.rule(ordered[i].access);
            let below: u64 = ordered[..i]
                .iter()
                .filter(|n| reference_blocks(rule, n.access))
                .map(|n| u64::from(n.weight))
                .sum();
            below + u64::from(ordered[i].weight) <= rule.limit() as u64
        })
        .collect();
    assert_eq!(recipe.holders(&queue), holders, "holders of {want:?}");
    let (Some(first), Some(last)) = (ordered.first(), ordered.last()) else {
        return;
    };
    if (last.seq as u32).wrapping_sub(first.seq as u32) >= 1 << 31 {
        // Past half the circle, a candidate's serial comparison is
        // documented not to match the order.
        return;
    }
    let negative = children
        .iter()
        .find(|c| parsed.iter().any(|p| &p.name == *c && p.seq < 0))
        .cloned();
    let oldest = ordered
        .iter()
        .find(|n| !skipped.contains(&n.name))
        .map(|n| n.name.clone());
    let skipped_here = parsed.iter().filter(|p| skipped.contains(&p.name)).count();
    for rule in rules(recipe) {
        for (at, own) in ordered.iter().enumerate() {
            let blockers: Vec<&Parsed> = ordered[..at]
                .iter()
                .filter(|n| !skipped.contains(&n.name) && reference_blocks(rule, n.access))
                .collect();
            let nearest = &blockers[blockers.len().saturating_sub(keep)..];
            let nearest_weights: Vec<u32> = match nearest.iter().all(|n| n.weight == 1) {
                true => Vec::new(),
                false => nearest.iter().map(|n| n.weight).collect(),
            };
            let nearest: Vec<String> = nearest.iter().map(|n| n.name.clone()).collect();
            let weight: u64 = blockers.iter().map(|n| u64::from(n.weight)).sum();
            let s = standing_under(children, &own.name, prefix, interop, rule, keep, skipped);
            let context = || format!("{} under {rule:?} in {want:?}", own.name);
            assert_eq!(s.found, !skipped.contains(&own.name), "{}", context());
            assert_eq!(s.rank, blockers.len(), "rank of {}", context());
            assert_eq!(s.weight, weight, "weight below {}", context());
            assert_eq!(s.nearest_lower, nearest, "nearest of {}", context());
            assert_eq!(
                s.nearest_weights,
                nearest_weights,
                "nearest weights of {}",
                context()
            );
            assert_eq!(s.oldest, oldest, "oldest for {}", context());
            assert_eq!(s.ignored, ignored, "ignored for {}", context());
            assert_eq!(s.skipped, skipped_here, "skipped for {}", context());
            assert_eq!(s.negative, negative, "negative for {}", context());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_reads_what_zookeeper_writes() {
        for v in [0, 7, i32::MAX, -1, -999_999_999, -1_000_000_000, i32::MIN] {
            assert_eq!(reference_sequence(&format!("{v:010}")), Some(v));
        }
        for s in [
            "-0000000001",
            "+000000001",
            "12",
            "2147483648",
            " 000000001",
        ] {
            assert_eq!(reference_sequence(s), None, "{s:?}");
        }
    }

    #[test]
    fn the_reference_order_starts_after_the_widest_gap() {
        let node = |seq: i32, name: &str| Parsed {
            name: name.into(),
            seq,
            origin: Origin::Ours { nonce: None },
            access: Access::Exclusive,
            weight: 1,
        };
        let got = reference_order(vec![
            node(i32::MIN + 3, "c"),
            node(i32::MIN, "b"),
            node(i32::MAX, "a"),
        ]);
        let names: Vec<&str> = got.iter().map(|n| n.name.as_str()).collect();
        // The widest gap is MIN + 3 → MAX: the queue starts at MAX and wraps.
        assert_eq!(names, ["a", "b", "c"]);
        let got = reference_order(vec![node(i32::MIN, "b"), node(i32::MAX, "a"), node(5, "c")]);
        let names: Vec<&str> = got.iter().map(|n| n.name.as_str()).collect();
        // The widest gap is MIN → 5 (2^31 + 5 apart): the queue starts at 5.
        assert_eq!(names, ["c", "a", "b"]);
    }

    #[test]
    fn the_reference_reads_weights_as_they_are_written() {
        assert_eq!(
            reference_weighted("w59_-538157919"),
            Some((59, -538_157_919))
        );
        assert_eq!(reference_weighted("w1024_0000000007"), Some((1024, 7)));
        for bad in [
            "w1_0000000007",
            "w0_0000000007",
            "w02_0000000007",
            "w1025_0000000007",
            "w_0000000007",
            "w3_7",
            "w3-0000000007",
        ] {
            assert_eq!(reference_weighted(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_weighted_semaphore_under_an_empty_stem_checks_clean() {
        // The campaign's finding: a node asking for 59 permits, its
        // sequence past the wrap, under the empty stem; then a queue whose
        // weights decide who holds (2 fits in 3, the 2 after it does not,
        // and the 1 after that waits behind it).
        for (recipe, children) in [
            (Recipe::Semaphore { permits: 2 }, vec!["w59_-538157919"]),
            (
                Recipe::Semaphore { permits: 3 },
                vec![
                    "w2_0000000001",
                    "w2_0000000002",
                    "0000000003",
                    "w1_0000000004",
                ],
            ),
        ] {
            check(&Case {
                prefix: String::new(),
                interop: Interop::None,
                recipe,
                children: children.into_iter().map(String::from).collect(),
                skipped: BTreeSet::new(),
                keep: 2,
            });
        }
    }

    #[test]
    fn a_hand_made_listing_checks_clean() {
        check(&Case {
            prefix: "n_".into(),
            interop: Interop::Kazoo,
            recipe: Recipe::Election { leaders: 2 },
            children: [
                "n_0000000003",
                "_c_0123456789abcdef-n_2147483647",
                "n_-2147483648",
                "x__lock__0000000004",
                "garbage",
            ]
            .map(String::from)
            .to_vec(),
            skipped: BTreeSet::from(["n_0000000003".to_owned()]),
            keep: 1,
        });
    }
}
