//! The session's connection state, for the application: the counterpart of
//! Curator's `ConnectionStateListener`, with the lease the machines keep.
//!
//! The machines judge contact each for itself (their leases decide what
//! they may do); this is the same judgement made once for the whole
//! session, for an application that wants to know without holding
//! anything: stop serving reads from a cache when `Suspended`, rebuild
//! state after `Expired`.
//!
//! | state | when |
//! |---|---|
//! | `Connected` | the first connection of a ZooKeeper session |
//! | `Suspended` | the connection dropped, or no answer from the server for two thirds of the session timeout |
//! | `Lost` | no answer for nine tenths of the timeout: the session may have expired on the server |
//! | `Reconnected` | an answer (or a new connection) on the same session after `Suspended` or `Lost` |
//! | `Expired` | the server said the session is gone (a new one follows with `Connected`) |
//! | `Closed` | the session was closed |
//! | `AuthFailed` | its credentials were refused (or could not be put back after a reconnect): it closed itself |
//!
//! Contact is the send time of the newest request the server answered (the
//! server cannot expire the session before it plus the timeout), or the
//! moment a connection came up; the fractions are the machines' own
//! (`Standard` suspension at two thirds, `SessionAware` loss at nine tenths).

use std::time::Duration;

use crate::input::SessionEvent;
use crate::time::Timestamp;

/// The session's connection state (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum ConnectionState {
    /// Not connected yet.
    Connecting,
    /// Connected to a new ZooKeeper session.
    Connected,
    /// No proof of contact (disconnected, or silent for two thirds of the
    /// timeout): the session may live, but nothing should be acted on.
    Suspended,
    /// Silent for nine tenths of the timeout: the session may be gone.
    Lost,
    /// Contact again on the same session after `Suspended` or `Lost`.
    Reconnected,
    /// The server expired the session: every ephemeral node and watch of
    /// it is gone.
    Expired,
    /// The session was closed.
    Closed,
    /// The server refused the session's credentials, or a transport that
    /// puts them back on every new connection could not within the session
    /// timeout: every machine on it stopped
    /// ([`CandidateError::AuthFailed`](crate::CandidateError::AuthFailed)),
    /// and the session closed itself, so its ephemeral nodes go with it.
    /// The last state: the closed session stays here, not `Closed`.
    AuthFailed,
}

impl ConnectionState {
    /// Whether the session is in contact with the server now (`Connected`
    /// or `Reconnected`).
    pub fn is_connected(self) -> bool {
        matches!(self, Self::Connected | Self::Reconnected)
    }
}

/// The state and what it is judged from.
#[derive(Debug, Clone)]
pub(super) struct Link {
    state: ConnectionState,
    /// The negotiated timeout of the last connection.
    timeout: Duration,
    /// Connected now (the last session event was `Connected`).
    up: bool,
    /// The newest contact of this ZooKeeper session.
    contact: Option<Timestamp>,
    /// Two thirds and nine tenths of the timeout after `contact`, worked
    /// out when either changes: the clock is asked about them on every
    /// input the session takes.
    suspend_at: Option<Timestamp>,
    lose_at: Option<Timestamp>,
}

impl Link {
    pub(super) fn new() -> Self {
        Self {
            state: ConnectionState::Connecting,
            timeout: Duration::ZERO,
            up: false,
            contact: None,
            suspend_at: None,
            lose_at: None,
        }
    }

    /// The newest contact is `contact` now (with the timeout as it is).
    fn set_contact(&mut self, contact: Option<Timestamp>) {
        self.contact = contact;
        self.suspend_at = contact.map(|c| c.plus_fraction(self.timeout, 2, 3));
        self.lose_at = contact.map(|c| c.plus_fraction(self.timeout, 9, 10));
    }

    /// The session timeout negotiated at the last connection, if any.
    pub(super) fn timeout(&self) -> Option<Duration> {
        (!self.timeout.is_zero()).then_some(self.timeout)
    }

    pub(super) fn state(&self) -> ConnectionState {
        self.state
    }

    /// A session event at `now`; the new state if it changed. `new_session`:
    /// this `Connected` starts a ZooKeeper session (the first, or one after
    /// an expiry).
    pub(super) fn session_event(
        &mut self,
        now: Timestamp,
        event: SessionEvent,
        new_session: bool,
    ) -> Option<ConnectionState> {
        if self.state == ConnectionState::AuthFailed {
            // The session ended there: what its transport says while it
            // closes (its `Closed`) changes nothing the application sees.
            return None;
        }
        match event {
            SessionEvent::Connected { timeout, .. } => {
                self.up = true;
                self.timeout = timeout;
                if new_session {
                    self.set_contact(Some(now));
                    return self.set(ConnectionState::Connected);
                }
                self.set_contact(Some(self.contact.map_or(now, |c| c.max(now))));
                match self.state {
                    ConnectionState::Suspended | ConnectionState::Lost => {
                        self.set(ConnectionState::Reconnected)
                    }
                    _ => None,
                }
            }
            SessionEvent::Disconnected => {
                self.up = false;
                match self.state {
                    ConnectionState::Connected | ConnectionState::Reconnected => {
                        self.set(ConnectionState::Suspended)
                    }
                    _ => None,
                }
            }
            SessionEvent::Expired => {
                self.up = false;
                self.set_contact(None);
                self.set(ConnectionState::Expired)
            }
            SessionEvent::Closed => {
                self.up = false;
                self.set_contact(None);
                self.set(ConnectionState::Closed)
            }
            // The machines stop on it, and the session ends.
            SessionEvent::AuthFailed => {
                self.up = false;
                self.set_contact(None);
                self.set(ConnectionState::AuthFailed)
            }
        }
    }

    /// The server answered, at `now`, a request of this connection sent at
    /// `sent_at`: contact again, if it is fresh enough to count.
    pub(super) fn answered(
        &mut self,
        now: Timestamp,
        sent_at: Timestamp,
    ) -> Option<ConnectionState> {
        self.set_contact(Some(self.contact.map_or(sent_at, |c| c.max(sent_at))));
        match self.state {
            ConnectionState::Suspended | ConnectionState::Lost
                if self.up && self.suspend_at.is_some_and(|at| now < at) =>
            {
                self.set(ConnectionState::Reconnected)
            }
            _ => None,
        }
    }

    /// What the clock says at `now`; the new state if it changed.
    pub(super) fn tick(&mut self, now: Timestamp) -> Option<ConnectionState> {
        let (suspend, lose) = (self.suspend_at?, self.lose_at?);
        match self.state {
            ConnectionState::Connected | ConnectionState::Reconnected if now >= lose => {
                self.set(ConnectionState::Lost)
            }
            ConnectionState::Connected | ConnectionState::Reconnected if now >= suspend => {
                self.set(ConnectionState::Suspended)
            }
            ConnectionState::Suspended if now >= lose => self.set(ConnectionState::Lost),
            _ => None,
        }
    }

    /// The next moment the clock alone changes the state, if any (always
    /// after the last `tick`).
    pub(super) fn next(&self) -> Option<Timestamp> {
        match self.state {
            ConnectionState::Connected | ConnectionState::Reconnected => self.suspend_at,
            ConnectionState::Suspended => self.lose_at,
            _ => None,
        }
    }

    fn set(&mut self, state: ConnectionState) -> Option<ConnectionState> {
        (state != self.state).then(|| {
            self.state = state;
            state
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zk::SessionId;

    const T: Duration = Duration::from_millis(3_000);

    fn at(ms: u64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    fn connected() -> SessionEvent {
        SessionEvent::Connected {
            session_id: Some(SessionId(1)),
            timeout: T,
        }
    }

    /// The life of a session, step by step, with the state after each.
    #[test]
    fn states_follow_the_connection_and_the_lease() {
        let mut l = Link::new();
        assert_eq!(l.state(), ConnectionState::Connecting);
        assert_eq!(l.next(), None);
        assert_eq!(
            l.session_event(at(0), connected(), true),
            Some(ConnectionState::Connected)
        );
        l.answered(at(600), at(500));
        // Two thirds of 3 s after the newest contact: suspended; nine tenths: lost.
        assert_eq!(l.next(), Some(at(2_500)));
        assert_eq!(l.tick(at(2_499)), None);
        assert_eq!(l.tick(at(2_500)), Some(ConnectionState::Suspended));
        assert_eq!(l.next(), Some(at(3_200)));
        assert_eq!(l.tick(at(3_200)), Some(ConnectionState::Lost));
        assert_eq!(l.next(), None);
        // An answer on the same session: reconnected.
        assert_eq!(
            l.answered(at(3_300), at(3_100)),
            Some(ConnectionState::Reconnected)
        );
        // A drop: suspended at once; back on the same session: reconnected.
        assert_eq!(
            l.session_event(at(3_300), SessionEvent::Disconnected, false),
            Some(ConnectionState::Suspended)
        );
        // No answer counts while disconnected.
        assert_eq!(l.answered(at(3_350), at(3_250)), None);
        assert_eq!(
            l.session_event(at(3_400), connected(), false),
            Some(ConnectionState::Reconnected)
        );
        // Expired, then a new session: connected.
        assert_eq!(
            l.session_event(at(9_000), SessionEvent::Expired, false),
            Some(ConnectionState::Expired)
        );
        assert_eq!(l.tick(at(99_000)), None);
        assert_eq!(
            l.session_event(at(9_100), connected(), true),
            Some(ConnectionState::Connected)
        );
        assert_eq!(
            l.session_event(at(9_200), SessionEvent::Closed, false),
            Some(ConnectionState::Closed)
        );
        assert_eq!(l.next(), None);
    }

    /// A refusal is the last state: the transport's `Closed` as it closes
    /// does not hide why the session ended.
    #[test]
    fn a_refusal_is_the_last_state() {
        let mut l = Link::new();
        l.session_event(at(0), connected(), true);
        assert_eq!(
            l.session_event(at(100), SessionEvent::AuthFailed, false),
            Some(ConnectionState::AuthFailed)
        );
        assert!(!l.state().is_connected());
        assert_eq!(l.next(), None);
        assert_eq!(l.tick(at(99_000)), None);
        assert_eq!(l.session_event(at(200), SessionEvent::Closed, false), None);
        assert_eq!(l.session_event(at(300), connected(), false), None);
        assert_eq!(l.state(), ConnectionState::AuthFailed);
    }

    #[test]
    fn an_answer_too_old_to_prove_contact_reconnects_nothing() {
        let mut l = Link::new();
        l.session_event(at(0), connected(), true);
        assert_eq!(l.tick(at(2_000)), Some(ConnectionState::Suspended));
        // Sent at 100 ms, answered at 2.9 s: contact until 2.1 s, past.
        assert_eq!(l.answered(at(2_900), at(100)), None);
        assert_eq!(l.state(), ConnectionState::Suspended);
    }

    #[test]
    fn a_long_silence_seen_late_goes_straight_to_lost() {
        let mut l = Link::new();
        l.session_event(at(0), connected(), true);
        assert_eq!(l.tick(at(10_000)), Some(ConnectionState::Lost));
    }
}
