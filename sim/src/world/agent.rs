//! What a process runs, as checkers see it: a zkelect machine on its core
//! `Session`, one that has left its session, or a model of another
//! library's recipe.

use zkelect_core::{Candidate, Exit, FencingToken, Machine, NameText, Observer, Role};

use crate::foreign::{Foreign, Scheme};

/// What one process runs, read-only.
#[derive(Debug, Clone, Copy)]
pub enum Agent<'a> {
    /// A zkelect machine (a candidate or an observer) on its session.
    Machine(&'a Machine),
    /// A zkelect machine that has left its session: closed, failed, or
    /// given up on while closing.
    Stopped(Exit),
    /// A model of Curator's or kazoo's recipe.
    Foreign(&'a Foreign),
}

impl<'a> Agent<'a> {
    /// The zkelect candidate, while it runs.
    pub fn candidate(self) -> Option<&'a Candidate> {
        match self {
            Self::Machine(m) => m.as_candidate(),
            _ => None,
        }
    }

    /// The zkelect observer, while it runs.
    pub fn observer(self) -> Option<&'a Observer> {
        match self {
            Self::Machine(m) => m.as_observer(),
            _ => None,
        }
    }

    /// Which other library it models, if it is not zkelect.
    pub fn foreign(self) -> Option<Scheme> {
        match self {
            Self::Foreign(f) => Some(f.scheme()),
            _ => None,
        }
    }

    /// Its own belief: a zkelect machine's role (`Closed` or `Failed` once
    /// it left its session); a foreign model is `Leader` while its recipe
    /// says it holds.
    pub fn role(self) -> Role {
        match self {
            Self::Machine(m) => m.role(),
            Self::Stopped(Exit::Failed) => Role::Failed,
            Self::Stopped(Exit::Closed | Exit::Abandoned) => Role::Closed,
            Self::Foreign(f) => f.role(),
        }
    }

    /// The name of the node it believes is its own.
    pub fn node(self) -> Option<&'a str> {
        match self {
            Self::Machine(m) => m.node(),
            Self::Stopped(_) => None,
            Self::Foreign(f) => f.node(),
        }
    }

    /// zkelect: its node's fencing token; a foreign model: its node's
    /// incarnation.
    pub fn token(self) -> Option<FencingToken> {
        match self {
            Self::Machine(m) => m.as_candidate().and_then(Candidate::token),
            Self::Stopped(_) => None,
            Self::Foreign(f) => f.token(),
        }
    }

    /// The node it watches to know when to move up.
    pub fn watching(self) -> Option<NameText<'a>> {
        match self {
            Self::Machine(m) => m.watching(),
            Self::Stopped(_) => None,
            Self::Foreign(f) => f.watching().map(NameText::from),
        }
    }
}
