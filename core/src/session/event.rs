//! What a [`Session`](super::Session) tells its driver besides commands:
//! each machine's notices, that a machine took an input, and that a
//! machine left the session.

use crate::candidate::Stats;
use crate::notice::Notice;
use crate::session::machine::MachineId;

/// One thing the session has to tell, in the order it happened: poll them
/// with [`Session::poll_event`](super::Session::poll_event) before the
/// commands, so a demotion reaches the application before the requests
/// that follow it go out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A machine's notice (a `Demoted` means stop acting for it *now*).
    Notice {
        /// Whose.
        machine: MachineId,
        /// What.
        notice: Notice,
    },
    /// A multi-lock's news (see [`GroupNotice`](crate::multilock::GroupNotice)).
    Group {
        /// Which.
        group: super::GroupId,
        /// What.
        notice: crate::multilock::GroupNotice,
    },
    /// The session's connection state changed (see
    /// [`ConnectionState`](super::ConnectionState)).
    Connection(super::ConnectionState),
    /// A machine took an input: what its getters say (role, node, lease,
    /// counters, [`Traffic`]) may have changed. Once per machine per input,
    /// after its notices.
    Updated(MachineId),
    /// A machine left the session: nothing more will come from it, and the
    /// session no longer knows it. Carries its last counters.
    Stopped {
        /// Which.
        machine: MachineId,
        /// Its queue's path (what its metrics are labelled with).
        path: String,
        /// How it ended.
        exit: Exit,
        /// Its own counters at the end (boxed: a dozen counters would make
        /// every event, the common notices and updates included, three times
        /// as large to queue and move).
        stats: Box<Stats>,
        /// Its requests at the end.
        traffic: Traffic,
    },
}

/// An intent named a multi-lock the session no longer knows (released).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no multi-lock {0} on this session (it is over)")]
pub struct GroupGone(pub super::GroupId);

/// An intent named a machine the session no longer knows (it stopped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no machine {0} on this session (it has stopped)")]
pub struct Gone(pub MachineId);

/// How a machine left its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Exit {
    /// Closed: its node (if it had one) is deleted.
    Closed,
    /// Stopped by a fatal error (see its last `Notice::Error`).
    Failed,
    /// Its close ran out of time (its own close timeout, or the session's
    /// while closing): the driver stops waiting for it. While the session
    /// stays open, the session goes on closing it out of sight (its node's
    /// delete goes again once the server answers); while the session
    /// closes, its node goes when the session ends.
    Abandoned,
}

/// A machine's requests, as the session counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Traffic {
    /// Requests sent.
    pub requests: u64,
    /// Requests answered with an error (any, `NoNode` included).
    pub errors: u64,
    /// Requests answered `OperationTimeout`: past the session's request
    /// timeout ([`SessionConfig::with_request_timeout`](crate::SessionConfig::with_request_timeout)),
    /// or so by a transport.
    pub timeouts: u64,
}

/// [`Traffic`] as a session keeps it for every machine: 32 bits a counter,
/// saturating (a session runs thousands of machines).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(super) struct Tally {
    requests: u32,
    errors: u32,
    timeouts: u32,
}

impl Tally {
    pub(super) fn sent(&mut self) {
        self.requests = self.requests.saturating_add(1);
    }

    pub(super) fn failed(&mut self, timeout: bool) {
        self.errors = self.errors.saturating_add(1);
        self.timeouts = self.timeouts.saturating_add(u32::from(timeout));
    }

    pub(super) fn widen(self) -> Traffic {
        Traffic {
            requests: self.requests.into(),
            errors: self.errors.into(),
            timeouts: self.timeouts.into(),
        }
    }
}
