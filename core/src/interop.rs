//! Sharing a queue with another library's recipe: which names each scheme
//! gives its nodes.

/// Which other library's naming scheme this candidate's nodes follow, so that a
/// queue can be shared with that library's own recipe.
///
/// Sharing a queue takes both directions: we must order the other library's
/// nodes as it does, and it must order ours as we do. Curator and kazoo each
/// recognise only their own node names (Curator sorts by the text after its
/// lock name, kazoo counts only names matching its pattern), so with interop
/// zkelect names its own nodes in the chosen scheme, keeping its protected
/// nonce in the part the other library ignores, and takes part in a queue of
/// our names and that library's names only.
///
/// | scheme | our node name | foreign names we queue with |
/// |---|---|---|
/// | `None` | `_c_<nonce>-n_NNNNNNNNNN` | none |
/// | `Curator` | `_c_<nonce>-latch-NNNNNNNNNN` | LeaderLatch `_c_<uuid>-latch-NNNNNNNNNN` |
/// | `Kazoo` | `_c_<nonce>-__lock__NNNNNNNNNN` | Election/Lock `<uuid hex>__lock__NNNNNNNNNN` |
///
/// Both libraries compare the sequence as text, which agrees with its numeric
/// order only while it is not negative: once the parent's counter has passed
/// 2^31 − 1, a shared queue is refused
/// ([`CandidateError::SequenceWrapped`](crate::CandidateError::SequenceWrapped)).
/// The two-watch takeover
/// ([`Config::two_watch`](crate::Config::two_watch)) is off with interop.
///
/// ```
/// use zkelect_core::{Config, Interop};
/// let config = Config::builder("/svc/leader", "node-a").interop(Interop::Curator).build()?;
/// assert_eq!(config.prefix(), "latch-");
/// # Ok::<(), zkelect_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Interop {
    /// zkelect's own names only; anything else under the path is ignored.
    #[default]
    None,
    /// Apache Curator's `LeaderLatch` (lock name `latch-`).
    Curator,
    /// kazoo's `Election` and `Lock` (node name `__lock__`).
    Kazoo,
}

impl Interop {
    /// Every scheme.
    pub const ALL: [Interop; 3] = [Interop::None, Interop::Curator, Interop::Kazoo];

    /// The text before the sequence that the other library looks for, which
    /// our nodes then carry too; `None` for zkelect's own scheme.
    pub fn stem(self) -> Option<&'static str> {
        match self {
            Interop::None => None,
            Interop::Curator => Some("latch-"),
            Interop::Kazoo => Some("__lock__"),
        }
    }

    /// Its name on the command line (`--interop`).
    pub fn flag(self) -> &'static str {
        match self {
            Interop::None => "none",
            Interop::Curator => "curator",
            Interop::Kazoo => "kazoo",
        }
    }

    /// The scheme spelled `flag`, if any.
    pub fn from_flag(flag: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|i| i.flag() == flag)
    }
}
