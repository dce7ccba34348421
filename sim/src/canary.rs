//! Deliberately broken candidates, to prove each checker can fail.
//!
//! A canary is a real [`Candidate`](zkelect_core::Candidate) that is either
//! configured with a real option that gives up a guarantee, or fed a filtered or
//! rewritten view of the world. Nothing here reaches the core's default path.

use zkelect_core::{ConfigBuilder, Reply, Request, SessionEvent, WatchStrategy, ZkCode};

/// A deliberately broken candidate, and the checker that must catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Canary {
    /// Never sees `SessionEvent::Disconnected` and has `Config::probe(false)`:
    /// keeps leading through a partition while the server expires its session
    /// and elects a successor. Targets `safety`.
    IgnoresDisconnect,
    /// `Config::protected_create(false)`: a create whose reply is lost to a
    /// dropped connection leaves an orphan node owned by the live session, which
    /// nobody recognises and which blocks the queue. Targets `liveness`.
    Unprotected,
    /// `WatchStrategy::Parent`: every follower watches the parent's children, so
    /// one deletion wakes them all. Targets `no-herd`.
    ParentWatch,
    /// Takes its fencing token from the node's sequence number instead of its
    /// czxid (the create and read replies are rewritten): the sequence wraps past
    /// 2^31−1 to negative numbers (and restarts with a recreated parent), so a
    /// newer leader can hold a lower token and a paused old leader's write gets
    /// accepted after it. Targets `tokens-grow`, and `fencing` when run without it.
    SequenceToken,
    /// Never sees a watch event about its own node: a leader whose node an
    /// operator deleted never learns it (its probe checks only the parent).
    /// Targets `revocation`.
    DeafToOwnNode,
}

impl Canary {
    /// Every canary.
    pub const ALL: [Canary; 5] = [
        Canary::IgnoresDisconnect,
        Canary::Unprotected,
        Canary::ParentWatch,
        Canary::SequenceToken,
        Canary::DeafToOwnNode,
    ];

    /// The command-line spelling (`zkelect sim --canary …`, `ZKELECT_CANARY=…`).
    pub fn flag(self) -> &'static str {
        match self {
            Canary::IgnoresDisconnect => "ignores-disconnect",
            Canary::Unprotected => "unprotected",
            Canary::ParentWatch => "parent-watch",
            Canary::SequenceToken => "sequence-token",
            Canary::DeafToOwnNode => "deaf-to-own-node",
        }
    }

    /// The canary spelled `flag`, if any.
    pub fn from_flag(flag: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.flag() == flag)
    }

    /// The checker this canary is built to trip.
    pub fn target(self) -> &'static str {
        match self {
            Canary::IgnoresDisconnect => "safety",
            Canary::Unprotected => "liveness",
            Canary::ParentWatch => "no-herd",
            Canary::SequenceToken => "tokens-grow",
            Canary::DeafToOwnNode => "revocation",
        }
    }

    /// The configuration change, if this canary is made by one.
    pub fn configure(self, builder: ConfigBuilder) -> ConfigBuilder {
        match self {
            Canary::IgnoresDisconnect => builder.probe(false),
            Canary::Unprotected => builder.protected_create(false),
            Canary::ParentWatch => builder.strategy(WatchStrategy::Parent),
            Canary::SequenceToken | Canary::DeafToOwnNode => builder,
        }
    }

    /// Whether the candidate gets to see this session event.
    pub fn sees(self, event: SessionEvent) -> bool {
        !(self == Canary::IgnoresDisconnect && event == SessionEvent::Disconnected)
    }

    /// Whether the candidate gets to see a watch event about `path`, given the
    /// name of its own node.
    pub fn sees_watch(self, path: &str, own: Option<&str>) -> bool {
        !(self == Canary::DeafToOwnNode && own.is_some() && path.rsplit('/').next() == own)
    }

    /// Whether the world should start the sequence counter near 2^31 for this
    /// canary (the wrap is what it gets wrong).
    pub fn wants_wrap(self) -> bool {
        self == Canary::SequenceToken
    }

    /// Rewrites the answer to `request` before the candidate sees it.
    pub fn rewrite(
        self,
        request: &Request,
        result: Result<Reply, ZkCode>,
    ) -> Result<Reply, ZkCode> {
        if self != Canary::SequenceToken {
            return result;
        }
        match result {
            Ok(Reply::Created { path, mut stat }) => {
                stat.czxid = sequence_of(&path).unwrap_or(stat.czxid);
                Ok(Reply::Created { path, stat })
            }
            Ok(Reply::Data { data, mut stat }) => {
                stat.czxid = sequence_of(request.path()).unwrap_or(stat.czxid);
                Ok(Reply::Data { data, stat })
            }
            other => other,
        }
    }
}

/// The signed 32-bit sequence suffix of an election node path (after the
/// default `n_` prefix), as ZooKeeper prints it.
fn sequence_of(path: &str) -> Option<i64> {
    let (_, tail) = path.rsplit_once("n_")?;
    zkelect_core::name::parse_sequence(tail).map(i64::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_suffixes_parse_as_signed_numbers() {
        assert_eq!(sequence_of("/e/_c_x-n_0000000042"), Some(42));
        assert_eq!(sequence_of("/e/n_-000000001"), Some(-1));
        assert_eq!(sequence_of("/e/n_-2147483648"), Some(-2_147_483_648));
        assert_eq!(sequence_of("/e/n_short"), None);
    }

    #[test]
    fn flags_round_trip() {
        for c in Canary::ALL {
            assert_eq!(Canary::from_flag(c.flag()), Some(c));
        }
    }
}
