//! What a [`Candidate`](crate::Candidate) asks the driver to do.

use std::fmt;

use crate::zk::Request;

/// Identifies one emitted [`Command`]; the reply must carry the same id.
///
/// Minted by the machine, strictly increasing, never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct OpId(pub u64);

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// A request for the driver to perform, answered with
/// [`Input::Reply`](crate::Input::Reply) carrying the same `op`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Command {
    /// Correlates the reply.
    pub op: OpId,
    /// What to do.
    pub request: Request,
}
