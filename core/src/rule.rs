//! Rules: what a queue of sequential nodes is for, and when one node of it holds.
//!
//! Every recipe of the family is the same queue: each participant creates an
//! EPHEMERAL|SEQUENTIAL node and holds once few enough of the nodes below its
//! own *block* it. What differs is which nodes block and how many may be
//! below:
//!
//! | rule | its nodes | blocked by | holds when blockers below are fewer than |
//! |---|---|---|---|
//! | `Election { leaders: k }` | exclusive | every node | k |
//! | `Mutex` | exclusive | every node | 1 |
//! | `Semaphore { permits: k }` | exclusive | every node | k |
//! | `Read` | shared | exclusive nodes (writers) | 1 |
//! | `Write` | exclusive | every node | 1 |
//!
//! A node watches the `limit` nearest blocking nodes below it (a reader: the
//! nearest writer below; a writer or mutex: its predecessor). Sequence numbers
//! only grow, so the blocking nodes below a node can only go, never come: once
//! a node holds, it holds until it leaves. The machine in `candidate/` is
//! the same for every rule; it asks the rule only [`Rule::blocks`] and
//! [`Rule::limit`].

use crate::interop::Interop;
use crate::node::{Access, NodeName};

/// What a queue is for: which child names belong to it and which of them hold.
///
/// Every participant of one queue must use the same recipe, and the same `k`
/// for an election or a semaphore (as every participant of an election must
/// agree on the number of leaders): each judges its own standing alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Recipe {
    /// Leader election: the `leaders` lowest nodes lead.
    Election {
        /// How many lead at once (k).
        leaders: u32,
    },
    /// A fair mutual-exclusion lock: the lowest node holds it.
    Mutex,
    /// A counting semaphore: the `permits` lowest nodes hold a permit.
    Semaphore {
        /// How many hold at once.
        permits: u32,
    },
    /// A fair read-write lock: readers share, a writer holds alone.
    ReadWrite,
}

/// The rule of one machine's own node: which lower nodes block it.
///
/// ```
/// # mod zkelect { pub mod core { pub use zkelect_core::*; } }
/// // With the core alone as a dependency: `use zkelect_core::{Recipe, Rule};`
/// use zkelect::core::{Recipe, Rule};
/// # fn main() {
/// assert_eq!(Rule::Mutex.limit(), 1);
/// assert_eq!(Rule::Semaphore { permits: 3 }.limit(), 3);
/// assert_eq!(Rule::Read.recipe(), Recipe::ReadWrite);
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Rule {
    /// A candidate in an election with `leaders` leaders.
    Election {
        /// How many lead at once (k).
        leaders: u32,
    },
    /// A contender for a mutex.
    Mutex,
    /// A contender for one of `permits` permits.
    Semaphore {
        /// How many hold at once.
        permits: u32,
    },
    /// A reader of a read-write lock: blocked by writers only.
    Read,
    /// A writer of a read-write lock: blocked by everyone below.
    Write,
}

impl Default for Rule {
    fn default() -> Self {
        Self::Election { leaders: 1 }
    }
}

impl Rule {
    /// The recipe (the queue) this rule takes part in.
    pub fn recipe(self) -> Recipe {
        match self {
            Self::Election { leaders } => Recipe::Election { leaders },
            Self::Mutex => Recipe::Mutex,
            Self::Semaphore { permits } => Recipe::Semaphore { permits },
            Self::Read | Self::Write => Recipe::ReadWrite,
        }
    }

    /// Whether `lower` (a node below ours in the same queue) counts against us.
    ///
    /// ```
    /// use zkelect_core::name::parse;
    /// use zkelect_core::{Interop, Recipe, Rule};
    /// let writer = parse("w_0000000001", "", Interop::None, Recipe::ReadWrite).unwrap();
    /// let reader = parse("r_0000000002", "", Interop::None, Recipe::ReadWrite).unwrap();
    /// assert!(Rule::Read.blocks(&writer) && !Rule::Read.blocks(&reader));
    /// assert!(Rule::Write.blocks(&writer) && Rule::Write.blocks(&reader));
    /// ```
    pub fn blocks(self, lower: &NodeName) -> bool {
        self.blocked_by(lower.access)
    }

    /// [`blocks`](Self::blocks) by the lower node's access alone.
    pub(crate) fn blocked_by(self, lower: Access) -> bool {
        match self {
            Self::Read => lower == Access::Exclusive,
            Self::Election { .. } | Self::Mutex | Self::Semaphore { .. } | Self::Write => true,
        }
    }

    /// We hold when fewer than this many blocking nodes are below (k, or 1).
    pub fn limit(self) -> usize {
        match self {
            Self::Election { leaders: k } | Self::Semaphore { permits: k } => k as usize,
            Self::Mutex | Self::Read | Self::Write => 1,
        }
    }

    /// The access of this rule's own node: shared for a reader, exclusive
    /// for everything else.
    pub fn access(self) -> Access {
        match self {
            Self::Read => Access::Shared,
            _ => Access::Exclusive,
        }
    }

    /// The stem of this rule's node names (before the sequence) in `interop`'s
    /// naming scheme, or `None` where that library has no such recipe.
    ///
    /// | rule | zkelect | Curator | kazoo |
    /// |---|---|---|---|
    /// | election | `n_` | `latch-` | `__lock__` |
    /// | mutex | `m_` | `lock-` | `__lock__` |
    /// | semaphore | `s_` | — | — |
    /// | read | `r_` | `__READ__` | `__rlock__` |
    /// | write | `w_` | `__WRIT__` | `__lock__` |
    pub fn stem(self, interop: Interop) -> Option<&'static str> {
        let stem = match (self, interop) {
            (Self::Election { .. }, Interop::None) => "n_",
            (Self::Mutex, Interop::None) => "m_",
            (Self::Semaphore { .. }, Interop::None) => "s_",
            (Self::Read, Interop::None) => "r_",
            (Self::Write, Interop::None) => "w_",
            (Self::Election { .. }, Interop::Curator) => "latch-",
            (Self::Mutex, Interop::Curator) => "lock-",
            (Self::Read, Interop::Curator) => "__READ__",
            (Self::Write, Interop::Curator) => "__WRIT__",
            (Self::Election { .. } | Self::Mutex | Self::Write, Interop::Kazoo) => "__lock__",
            (Self::Read, Interop::Kazoo) => "__rlock__",
            (Self::Semaphore { .. }, Interop::Curator | Interop::Kazoo) => return None,
        };
        Some(stem)
    }

    /// Whether the holder is alone and the oldest node: it can name itself the
    /// leader without a listing.
    pub(crate) fn holds_alone(self) -> bool {
        self.access() == Access::Exclusive && self.limit() == 1
    }
}

impl Recipe {
    /// The rule of a node of this recipe with `access` (a shared node of a
    /// read-write lock is a reader, every other node its recipe's one rule).
    pub fn rule(self, access: Access) -> Rule {
        match (self, access) {
            (Self::Election { leaders }, _) => Rule::Election { leaders },
            (Self::Mutex, _) => Rule::Mutex,
            (Self::Semaphore { permits }, _) => Rule::Semaphore { permits },
            (Self::ReadWrite, Access::Shared) => Rule::Read,
            (Self::ReadWrite, Access::Exclusive) => Rule::Write,
        }
    }

    /// The stems of the queue's node names in `interop`'s scheme, each with
    /// the access of its nodes; empty where that library has no such recipe.
    pub fn stems(self, interop: Interop) -> Vec<(&'static str, Access)> {
        let rules: &[Rule] = match self {
            Self::ReadWrite => &[Rule::Read, Rule::Write],
            Self::Election { .. } => &[Rule::Election { leaders: 1 }],
            Self::Mutex => &[Rule::Mutex],
            Self::Semaphore { .. } => &[Rule::Semaphore { permits: 1 }],
        };
        rules
            .iter()
            .filter_map(|r| r.stem(interop).map(|s| (s, r.access())))
            .collect()
    }

    /// Indices (into a queue in serial order) of the nodes that hold now.
    ///
    /// ```
    /// use zkelect_core::name::queue;
    /// use zkelect_core::{Interop, Recipe};
    /// let children: Vec<String> = ["r_0000000001", "r_0000000002", "w_0000000003", "r_0000000004"]
    ///     .iter().map(|s| s.to_string()).collect();
    /// let (q, _) = queue(&children, "", Interop::None, Recipe::ReadWrite);
    /// assert_eq!(Recipe::ReadWrite.holders(&q), [0, 1]);
    /// ```
    pub fn holders(self, queue: &[NodeName]) -> Vec<usize> {
        self.holders_of(queue.iter().map(|node| (node.access, node.weight)))
    }

    /// [`holders`](Self::holders) of a queue given by its nodes' accesses
    /// and weights alone (all the rule looks at), in serial order.
    ///
    /// A node holds when the weights of the nodes below it that block it,
    /// plus its own, fit in the limit (every weight is 1 but in a weighted
    /// semaphore, where this is "the permits asked for below, and its own,
    /// fit in the permits"). Weights below only add up, so the holders of a
    /// semaphore are the oldest nodes up to the first that does not fit: no
    /// node ever holds while an older one still waits (a request for 3 is
    /// never overtaken by later requests for 1).
    pub fn holders_of(self, queue: impl IntoIterator<Item = (Access, u32)>) -> Vec<usize> {
        // One pass: a rule is blocked by every node or by the exclusive ones
        // only, so two running sums give any node's blockers.
        let mut out = Vec::new();
        let mut every = 0u64;
        let mut exclusive = 0u64;
        for (i, (access, weight)) in queue.into_iter().enumerate() {
            let rule = self.rule(access);
            let blockers = if rule.blocked_by(Access::Shared) {
                every
            } else {
                exclusive
            };
            if blockers + u64::from(weight) <= rule.limit() as u64 {
                out.push(i);
            }
            every += u64::from(weight);
            if access == Access::Exclusive {
                exclusive += u64::from(weight);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queue from a compact spelling: `r` a shared node, `w` an exclusive one.
    fn queue_of(spec: &str) -> Vec<NodeName> {
        spec.chars()
            .enumerate()
            .map(|(i, c)| NodeName {
                name: format!("{c}{i}"),
                seq: i as i32,
                origin: crate::node::Origin::Ours { nonce: None },
                access: if c == 'r' {
                    Access::Shared
                } else {
                    Access::Exclusive
                },
                weight: 1,
            })
            .collect()
    }

    /// Who holds, recipe by recipe, in the style of raft-rs's quorum tests:
    /// (recipe, queue spelled r/w, holders).
    const HOLDERS: &[(Recipe, &str, &[usize])] = &[
        (Recipe::Election { leaders: 1 }, "", &[]),
        (Recipe::Election { leaders: 1 }, "www", &[0]),
        (Recipe::Election { leaders: 2 }, "www", &[0, 1]),
        (Recipe::Election { leaders: 5 }, "www", &[0, 1, 2]),
        (Recipe::Mutex, "w", &[0]),
        (Recipe::Mutex, "wwww", &[0]),
        (Recipe::Semaphore { permits: 3 }, "wwwww", &[0, 1, 2]),
        (Recipe::Semaphore { permits: 3 }, "ww", &[0, 1]),
        (Recipe::ReadWrite, "rrr", &[0, 1, 2]),
        (Recipe::ReadWrite, "w", &[0]),
        (Recipe::ReadWrite, "wr", &[0]),
        (Recipe::ReadWrite, "ww", &[0]),
        (Recipe::ReadWrite, "rrw", &[0, 1]),
        (Recipe::ReadWrite, "rrwr", &[0, 1]),
        (Recipe::ReadWrite, "rwrr", &[0]),
        (Recipe::ReadWrite, "wrrw", &[0]),
    ];

    /// Weighted semaphores: (permits, weights in arrival order, holders).
    const WEIGHTED: &[(u32, &[u32], &[usize])] = &[
        (5, &[3, 1, 1], &[0, 1, 2]),
        (5, &[3, 3, 1], &[0]),
        // Fair in arrival order: the 1 behind a waiting 3 waits too.
        (4, &[2, 3, 1], &[0]),
        (4, &[4, 1], &[0]),
        (4, &[1, 1, 1, 1, 1], &[0, 1, 2, 3]),
        (10, &[3, 3, 3, 2], &[0, 1, 2]),
    ];

    #[test]
    fn weighted_holders_fit_in_the_permits_in_arrival_order() {
        for (permits, weights, want) in WEIGHTED {
            let recipe = Recipe::Semaphore { permits: *permits };
            let got = recipe.holders_of(weights.iter().map(|&w| (Access::Exclusive, w)));
            assert_eq!(got, *want, "{permits} {weights:?}");
        }
    }

    #[test]
    fn holders_table() {
        for (recipe, spec, want) in HOLDERS {
            assert_eq!(
                recipe.holders(&queue_of(spec)),
                *want,
                "{recipe:?} {spec:?}"
            );
        }
    }

    /// (rule, lower node's access) → blocks.
    const BLOCKS: &[(Rule, Access, bool)] = &[
        (Rule::Election { leaders: 2 }, Access::Exclusive, true),
        (Rule::Mutex, Access::Exclusive, true),
        (Rule::Semaphore { permits: 3 }, Access::Exclusive, true),
        (Rule::Read, Access::Exclusive, true),
        (Rule::Read, Access::Shared, false),
        (Rule::Write, Access::Exclusive, true),
        (Rule::Write, Access::Shared, true),
    ];

    #[test]
    fn blocks_table() {
        for &(rule, access, want) in BLOCKS {
            assert_eq!(rule.blocked_by(access), want, "{rule:?} {access:?}");
        }
    }

    #[test]
    fn stems_are_distinct_within_a_queue_and_semaphores_have_no_interop() {
        for interop in Interop::ALL {
            let rw = Recipe::ReadWrite.stems(interop);
            assert_eq!(rw.len(), 2, "{interop:?}");
            assert_ne!(rw[0].0, rw[1].0);
            assert_eq!(
                Recipe::Semaphore { permits: 2 }.stems(interop).is_empty(),
                interop != Interop::None
            );
        }
        assert_eq!(
            Rule::Election { leaders: 1 }.stem(Interop::None),
            Some("n_")
        );
        assert_eq!(Rule::Write.stem(Interop::Kazoo), Some("__lock__"));
    }

    proptest::proptest! {
        /// A weighted semaphore's holders are its oldest nodes up to the
        /// first whose weight, added to all before it, passes the permits:
        /// a prefix of the queue, never a later node past a waiting one.
        #[test]
        fn weighted_holders_are_the_longest_prefix_that_fits(
            permits in 1u32..12,
            weights in proptest::collection::vec(1u32..6, 0..12),
        ) {
            let recipe = Recipe::Semaphore { permits };
            let got = recipe.holders_of(weights.iter().map(|&w| (Access::Exclusive, w)));
            let mut sum = 0;
            let want: Vec<usize> = weights
                .iter()
                .take_while(|&&w| {
                    sum += w;
                    sum <= permits
                })
                .enumerate()
                .map(|(i, _)| i)
                .collect();
            proptest::prop_assert_eq!(got, want);
        }

        /// `holders` agrees with each node's own rule: a node holds exactly
        /// when fewer than its limit of blocking nodes are below it.
        #[test]
        fn holders_agree_with_the_rule(
            spec in "[rw]{0,12}",
            pick in 0usize..4,
            k in 1u32..4,
        ) {
            let recipe = [
                Recipe::Election { leaders: k },
                Recipe::Mutex,
                Recipe::Semaphore { permits: k },
                Recipe::ReadWrite,
            ][pick];
            let spec = if recipe == Recipe::ReadWrite { spec } else { spec.replace('r', "w") };
            let q = queue_of(&spec);
            let want: Vec<usize> = (0..q.len())
                .filter(|&i| {
                    let rule = recipe.rule(q[i].access);
                    q[..i].iter().filter(|l| rule.blocks(l)).count() < rule.limit()
                })
                .collect();
            proptest::prop_assert_eq!(recipe.holders(&q), want);
        }
    }
}
