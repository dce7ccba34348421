//! The lease: what the clock says about contact with the server.
//!
//! Contact is tracked as the send time of the newest request the server
//! answered (`last_ack`): the server cannot expire the session before
//! `last_ack + session timeout`. After two thirds of the timeout without
//! contact the link counts as suspended, even if the client library has not
//! noticed; after nine tenths the session may be gone on the server, so a
//! leader that waits for proof (the `SessionAware` policy) or is suspended
//! (the `Standard` policy) stops leading before a successor can be elected.
//!
//! Pure rules over plain values; the machine in `candidate/` applies them.

use std::time::Duration;

use crate::config::ConnectionPolicy;
use crate::notice::FencingToken;
use crate::time::Timestamp;

/// The client's connection as reported by the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Connection {
    /// No session yet.
    Pending,
    Connected,
    Disconnected,
    /// The session ended; waiting for a new one.
    Expired,
}

/// Leadership as the application must see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Leadership {
    None,
    Active(FencingToken),
    /// Standard policy: leading on paper, but must not act until re-verified.
    Suspended(FencingToken),
}

/// Contact with the server, as the clock will judge it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Contact {
    pub(crate) connection: Connection,
    /// Send time of the newest request the server answered in this session.
    pub(crate) last_ack: Option<Timestamp>,
    /// The negotiated session timeout.
    pub(crate) timeout: Duration,
    /// Whether contact is proven by answers (probes on): without, a connected
    /// client is trusted as the client library reports it.
    pub(crate) probe: bool,
}

impl Contact {
    /// When the link counts as suspended without contact since `ack`: two
    /// thirds of the timeout after it. In `u64` arithmetic, to the
    /// millisecond as `ack + timeout * 2 / 3` (this runs on every input).
    fn suspended_at(&self, ack: Timestamp) -> Timestamp {
        ack.plus_fraction(self.timeout, 2, 3)
    }

    /// When the session may be gone on the server without contact since
    /// `ack`: nine tenths of the timeout after it.
    fn lost_at(&self, ack: Timestamp) -> Timestamp {
        ack.plus_fraction(self.timeout, 9, 10)
    }

    /// Whether the server has answered recently enough to trust the session.
    pub(crate) fn link_ok(&self, now: Timestamp) -> bool {
        if self.connection != Connection::Connected {
            return false;
        }
        if !self.probe {
            return true;
        }
        self.last_ack.is_some_and(|t| now < self.suspended_at(t))
    }

    /// Whether the session can still be alive on the server.
    pub(crate) fn session_may_live(&self, now: Timestamp) -> bool {
        if matches!(self.connection, Connection::Expired | Connection::Pending) {
            return false;
        }
        if self.connection == Connection::Connected && !self.probe {
            return true;
        }
        self.last_ack.is_some_and(|t| now < self.lost_at(t))
    }

    /// When an active leader's leadership lapses unless the server answers
    /// again: two thirds of the timeout after the last answer under the
    /// `Standard` policy, nine tenths under `SessionAware`.
    pub(crate) fn expiry(&self, policy: ConnectionPolicy) -> Option<Timestamp> {
        let ack = self.last_ack?;
        Some(match policy {
            ConnectionPolicy::Standard => self.suspended_at(ack),
            ConnectionPolicy::SessionAware => self.lost_at(ack),
        })
    }

    /// The next moment the clock alone changes a verdict: the link's
    /// suspension (if probing and the link is up), the lease's end (if
    /// leading). `None` if neither lies ahead.
    pub(crate) fn deadline(
        &self,
        now: Timestamp,
        link_up: bool,
        leading: bool,
    ) -> Option<Timestamp> {
        let ack = self.last_ack?;
        let mut next = None;
        if self.probe && link_up {
            let suspend = self.suspended_at(ack);
            if suspend > now {
                next = Some(suspend);
            }
        }
        if leading {
            let lost = self.lost_at(ack);
            if lost > now {
                next = Some(next.map_or(lost, |n: Timestamp| n.min(lost)));
            }
        }
        next
    }
}

impl Leadership {
    /// What the link's verdict does to leadership under `policy`: the new
    /// leadership, and whether it is lost (to be demoted). A `Standard` leader
    /// without a good link is suspended; a suspended leader, or a
    /// `SessionAware` one without a good link, is lost once the session may
    /// be gone.
    pub(crate) fn checked(
        self,
        policy: ConnectionPolicy,
        link_ok: bool,
        may_live: bool,
    ) -> (Self, bool) {
        match self {
            Self::Active(token) if !link_ok => match policy {
                // Lost at once if the session may already be gone: the
                // verdict must not depend on how often the link is looked at
                // (a leader paused past its session, then fed one stale
                // reply, was demoted where the same leader given only the
                // time stayed suspended: pause seed 47786).
                ConnectionPolicy::Standard => (Self::Suspended(token), !may_live),
                ConnectionPolicy::SessionAware => (self, !may_live),
            },
            Self::Suspended(_) => (self, !may_live),
            _ => (self, false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use Connection::*;

    const T: Duration = Duration::from_millis(3_000);

    fn at(ms: u64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    fn contact(connection: Connection, last_ack: Option<u64>, probe: bool) -> Contact {
        Contact {
            connection,
            last_ack: last_ack.map(at),
            timeout: T,
            probe,
        }
    }

    /// One row of [`LINK`].
    type LinkCase = (Connection, Option<u64>, bool, u64, bool, bool);

    /// Timeout 3 s: the link is suspended 2 s after the last answer, the
    /// session may be gone 2.7 s after it.
    /// (connection, last answer, probe, now) → (link ok, session may live).
    #[rustfmt::skip]
    const LINK: &[LinkCase] = &[
        // Probing: contact decides.
        (Connected,    Some(1_000), true,  1_000, true,  true),
        (Connected,    Some(1_000), true,  2_999, true,  true),
        (Connected,    Some(1_000), true,  3_000, false, true),
        (Connected,    Some(1_000), true,  3_699, false, true),
        (Connected,    Some(1_000), true,  3_700, false, false),
        // Connected, but nothing answered yet: no proof.
        (Connected,    None,        true,  0,     false, false),
        // Disconnected: never ok; alive as long as the last answer allows.
        (Disconnected, Some(1_000), true,  1_000, false, true),
        (Disconnected, Some(1_000), true,  3_700, false, false),
        (Disconnected, Some(1_000), false, 1_000, false, true),
        (Disconnected, None,        false, 0,     false, false),
        // Without probes a connected client is trusted as reported.
        (Connected,    None,        false, 9_999, true,  true),
        (Connected,    Some(1_000), false, 9_999, true,  true),
        // No session, or an ended one: nothing lives.
        (Pending,      None,        true,  0,     false, false),
        (Expired,      Some(1_000), true,  1_000, false, false),
        (Expired,      Some(1_000), false, 1_000, false, false),
    ];

    #[test]
    fn link_and_session_verdicts_follow_the_last_answer() {
        for (i, &(connection, ack, probe, now, ok, live)) in LINK.iter().enumerate() {
            let c = contact(connection, ack, probe);
            assert_eq!(c.link_ok(at(now)), ok, "case {i}: link_ok {c:?} at {now}");
            assert_eq!(
                c.session_may_live(at(now)),
                live,
                "case {i}: session_may_live {c:?} at {now}"
            );
        }
    }

    /// One row of [`DEADLINE`].
    type DeadlineCase = (Option<u64>, bool, bool, bool, u64, Option<u64>);

    /// (last answer, probe, link up, leading, now) → deadline; timeout 3 s.
    #[rustfmt::skip]
    const DEADLINE: &[DeadlineCase] = &[
        (None,        true,  true,  true,  0,     None),
        // Probing with the link up: wake at the suspension.
        (Some(1_000), true,  true,  false, 1_000, Some(3_000)),
        // …and leading: the earlier of suspension and lapse.
        (Some(1_000), true,  true,  true,  1_000, Some(3_000)),
        // Past the suspension, leading: the lapse.
        (Some(1_000), true,  false, true,  3_000, Some(3_700)),
        (Some(1_000), true,  true,  true,  3_000, Some(3_700)),
        // Both past: nothing ahead.
        (Some(1_000), true,  true,  true,  3_700, None),
        // Not probing, leading: the lapse only.
        (Some(1_000), false, true,  true,  1_000, Some(3_700)),
        // Not leading, link down: nothing to wake for.
        (Some(1_000), true,  false, false, 1_000, None),
    ];

    #[test]
    fn deadline_is_the_next_verdict_the_clock_changes() {
        for (i, &(ack, probe, up, leading, now, want)) in DEADLINE.iter().enumerate() {
            let c = contact(Connected, ack, probe);
            assert_eq!(c.deadline(at(now), up, leading), want.map(at), "case {i}");
        }
    }

    #[test]
    fn expiry_is_two_thirds_or_nine_tenths_after_the_last_answer() {
        let c = contact(Connected, Some(1_000), true);
        assert_eq!(c.expiry(ConnectionPolicy::Standard), Some(at(3_000)));
        assert_eq!(c.expiry(ConnectionPolicy::SessionAware), Some(at(3_700)));
        assert_eq!(
            contact(Connected, None, true).expiry(ConnectionPolicy::Standard),
            None
        );
    }

    const TOKEN: FencingToken = FencingToken(7);

    /// One row of [`CHECKED`].
    type CheckedCase = (ConnectionPolicy, Leadership, bool, bool, Leadership, bool);

    /// (policy, leadership, link ok, session may live) → (leadership, lost).
    #[rustfmt::skip]
    const CHECKED: &[CheckedCase] = &[
        (ConnectionPolicy::Standard,     Leadership::Active(TOKEN),    true,  true,  Leadership::Active(TOKEN),    false),
        // Standard: a bad link suspends, and the session's possible end loses.
        (ConnectionPolicy::Standard,     Leadership::Active(TOKEN),    false, true,  Leadership::Suspended(TOKEN), false),
        (ConnectionPolicy::Standard,     Leadership::Active(TOKEN),    false, false, Leadership::Suspended(TOKEN), true),
        (ConnectionPolicy::Standard,     Leadership::Suspended(TOKEN), false, true,  Leadership::Suspended(TOKEN), false),
        (ConnectionPolicy::Standard,     Leadership::Suspended(TOKEN), false, false, Leadership::Suspended(TOKEN), true),
        // A suspended leader stays suspended until a listing re-verifies it,
        // even with the link back; it is lost if the session may be gone.
        (ConnectionPolicy::Standard,     Leadership::Suspended(TOKEN), true,  true,  Leadership::Suspended(TOKEN), false),
        (ConnectionPolicy::Standard,     Leadership::Suspended(TOKEN), true,  false, Leadership::Suspended(TOKEN), true),
        // SessionAware: leads through a bad link while the session may live.
        (ConnectionPolicy::SessionAware, Leadership::Active(TOKEN),    false, true,  Leadership::Active(TOKEN),    false),
        (ConnectionPolicy::SessionAware, Leadership::Active(TOKEN),    false, false, Leadership::Active(TOKEN),    true),
        (ConnectionPolicy::SessionAware, Leadership::Active(TOKEN),    true,  false, Leadership::Active(TOKEN),    false),
        // Not leading: nothing to lose.
        (ConnectionPolicy::Standard,     Leadership::None,             false, false, Leadership::None,             false),
        (ConnectionPolicy::SessionAware, Leadership::None,             false, false, Leadership::None,             false),
    ];

    /// Looking twice says what looking once said: a caller checks the link
    /// once or twice per input, and the verdict must not depend on which.
    #[test]
    fn a_second_look_changes_nothing() {
        for &(policy, before, ok, live, _, lost) in CHECKED {
            let (after, _) = before.checked(policy, ok, live);
            if !lost {
                assert_eq!(
                    after.checked(policy, ok, live),
                    (after, false),
                    "{before:?} {ok} {live}"
                );
            }
        }
    }

    #[test]
    fn leadership_is_suspended_or_lost_as_the_policy_says() {
        for (i, &(policy, before, ok, live, after, lost)) in CHECKED.iter().enumerate() {
            assert_eq!(before.checked(policy, ok, live), (after, lost), "case {i}");
        }
    }
}
