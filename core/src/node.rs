//! A queue's node as its name tells it: who wrote it, what it asks of the
//! queue, its sequence. The types only; [`crate::name`] parses and orders
//! them, [`crate::rule`] judges them.

use std::fmt;

/// Who wrote a node, judged by its name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Origin {
    /// zkelect (or any recipe using the same prefix), with the nonce if protected.
    Ours {
        /// The per-session nonce, if the name is protected.
        nonce: Option<String>,
    },
    /// Curator's LeaderLatch: `[_c_<uuid>-]latch-NNNNNNNNNN`.
    Curator,
    /// kazoo's Election/Lock: `<32 hex>__lock__NNNNNNNNNN`.
    Kazoo,
}

/// What a node asks of the queue, judged by its stem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Access {
    /// Held together with other shared nodes: a read lock's node.
    Shared,
    /// Counted by every node above it: every node but a read lock's.
    Exclusive,
}

/// A child name whose sequence suffix parsed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct NodeName {
    /// The full child name.
    pub name: String,
    /// The sequence number ZooKeeper appended.
    pub seq: i32,
    /// Who wrote it.
    pub origin: Origin,
    /// Whether it is a shared (read) or an exclusive node.
    pub access: Access,
    /// How many permits it asks for: a weighted semaphore node's weight
    /// (see [`weight_token`](crate::name::weight_token)), 1 for every other node.
    pub weight: u32,
}

impl fmt::Display for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}
