//! What the session knows of its connection: which span of it this is,
//! the last `Connected`, the newest contact with the server, and the one
//! liveness probe.
//!
//! A *span* is the time between two session events: an answer proves
//! contact only for the span its request went out in (an answer from
//! before a reconnect says nothing of this connection). This is the one
//! count of connections of a session: the transports report raw session
//! events, and the spans are counted here.
//!
//! The probe: one per session, not one per machine — the lease is a
//! property of the session. An `exists` of `/` every three tenths of the
//! session timeout while connected (with no machine too: the session's
//! connection state rests on it, as a client's heartbeat); when it is answered, every machine
//! hears the send time of the newest request of the span the server
//! answered ([`Candidate::session_answered`](crate::Candidate::session_answered)).
//! A machine's own probe falls due only when its contact is a third of the
//! timeout old, which the session's probe, three tenths apart, keeps from
//! happening while the server answers promptly; a server that does not
//! answer is covered by the machines' own probes.
//!
//! What it costs an idle session: ten requests a minute at any timeout,
//! on top of the client library's pings, which no probe period displaces
//! at the libraries' default settings (zookeeper-client pings after three
//! of its ticks, a twentieth of the timeout each, without a send, so only
//! probes under 0.15 of the timeout apart silence it; zookeeper-async's
//! ping timer ignores our requests). Neither library shows the transport
//! its pings' answers, and a lease on the library's word alone was unsafe
//! (see [`ConfigError::ProbeOff`](crate::ConfigError::ProbeOff)).
//! `bench/README.md` ("Why the idle figure is not at the library's pings")
//! gives the measured figures and the periods and settings weighed.

use std::time::Duration;

use crate::input::SessionEvent;
use crate::time::Timestamp;
use crate::zk::Request;

/// The probe's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// Not connected (or no timeout known): nothing to prove.
    Off,
    /// Connected: the next probe goes out then.
    Due(Timestamp),
    /// Out, unanswered.
    Out,
}

/// What a probe that fell due does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ProbeDue {
    /// Goes out.
    Send(Request),
    /// Stays home: a request of the span sent then was answered, which
    /// every machine is to hear of.
    Fresh(Timestamp),
}

/// The session's connection, as its events and answers tell it.
#[derive(Debug, Clone)]
pub(super) struct Contact {
    /// Bumped by every session event.
    span: u64,
    /// Sessions seen: bumped by the first `Connected` and by the first
    /// after an expiry or close.
    sessions: u64,
    /// The last `Connected`, while connected: what a new machine is told.
    connected: Option<SessionEvent>,
    /// Whether the session is gone (expired, closed): the next `Connected`
    /// is a new session.
    gone: bool,
    /// The send time of the newest request answered in this span.
    answered: Option<Timestamp>,
    probe: Probe,
}

/// How often the session probes: three tenths of the timeout, so that a
/// machine, whose own probe falls due a third after its newest contact,
/// hears of a newer one first while round trips take under a thirtieth of
/// the timeout (a slower answer costs only the machines' own probes, which
/// are as safe), and a one-machine session probes hardly more often than
/// the machine did alone.
///
/// At least a millisecond, the clock's grain: a timeout under 4 ms has three
/// tenths that round to nothing, and a probe filed for the instant it is
/// filed at would be due at every call, a driver spinning without time
/// moving. Divided first, so that no timeout overflows (a transport may
/// report any `Duration`); for whole milliseconds, as servers negotiate,
/// the two orders agree exactly.
fn probe_every(timeout: Duration) -> Option<Duration> {
    let every = timeout / 10 * 3;
    (!timeout.is_zero()).then_some(every.max(Duration::from_millis(1)))
}

impl Contact {
    pub(super) fn new() -> Self {
        Self {
            span: 0,
            sessions: 0,
            connected: None,
            gone: true,
            answered: None,
            probe: Probe::Off,
        }
    }

    /// The span now.
    pub(super) fn span(&self) -> u64 {
        self.span
    }

    /// Sessions seen so far.
    pub(super) fn sessions(&self) -> u64 {
        self.sessions
    }

    /// The last `Connected`, while connected.
    pub(super) fn connected(&self) -> Option<SessionEvent> {
        self.connected
    }

    /// A session event: a new span.
    pub(super) fn session_event(&mut self, now: Timestamp, event: SessionEvent) {
        self.span += 1;
        self.answered = None;
        self.probe = Probe::Off;
        match event {
            SessionEvent::Connected { timeout, .. } => {
                if std::mem::replace(&mut self.gone, false) {
                    self.sessions += 1;
                }
                self.connected = Some(event);
                // Each machine proves contact on a new connection itself;
                // the session's probe takes over after.
                if let Some(every) = probe_every(timeout) {
                    self.probe = Probe::Due(now + every);
                }
            }
            SessionEvent::Expired | SessionEvent::Closed => {
                self.connected = None;
                self.gone = true;
            }
            SessionEvent::Disconnected | SessionEvent::AuthFailed => self.connected = None,
        }
    }

    /// A request that went out in `span` at `sent_at` was answered;
    /// `contact` says whether the answer came from the server (not a
    /// connection error).
    pub(super) fn answered(&mut self, span: u64, sent_at: Timestamp, contact: bool) {
        if contact && span == self.span {
            self.answered = Some(self.answered.map_or(sent_at, |t| t.max(sent_at)));
        }
    }

    /// What the probe does if it is due at `now`: go out (it is then out),
    /// or, when a request of this span sent within the last period was
    /// answered, nothing on the wire: that answer proves the contact the
    /// probe's would, and every machine hears of it instead (the next probe
    /// is filed a period after it). A busy session sends no probe at all.
    pub(super) fn probe_if_due(&mut self, now: Timestamp) -> Option<ProbeDue> {
        let Probe::Due(at) = self.probe else {
            return None;
        };
        if at > now {
            return None;
        }
        let every = match self.connected {
            Some(SessionEvent::Connected { timeout, .. }) => probe_every(timeout),
            _ => None,
        };
        if let (Some(every), Some(newest)) = (every, self.answered) {
            if newest + every > now {
                self.probe = Probe::Due(newest + every);
                return Some(ProbeDue::Fresh(newest));
            }
        }
        self.probe = Probe::Out;
        Some(ProbeDue::Send(Request::Exists {
            path: "/".to_owned(),
            watch: false,
        }))
    }

    /// The probe of `span` was answered at `now`: the contact every
    /// machine is to hear of, if any. The next probe is filed three tenths
    /// of the timeout after that contact, and never at `now` or before: a
    /// probe that failed (no contact this span, or a connection error with
    /// only older contact) goes again a whole period after `now`, so a
    /// transport that fails fast is never asked again at the same instant.
    pub(super) fn probe_answered(
        &mut self,
        now: Timestamp,
        span: u64,
        contact: bool,
    ) -> Option<Timestamp> {
        if span != self.span {
            // A session event came since: it reset the probe.
            return None;
        }
        let Some(SessionEvent::Connected { timeout, .. }) = self.connected else {
            return None;
        };
        let Some(every) = probe_every(timeout) else {
            self.probe = Probe::Off;
            return None;
        };
        let next = match (contact, self.answered) {
            (true, Some(newest)) => (newest + every).max(now + Duration::from_millis(1)),
            _ => now + every,
        };
        self.probe = Probe::Due(next);
        // Contact from any request of the span proves as much as the
        // probe's own answer would have.
        self.answered
    }

    /// When the probe is due.
    pub(super) fn next(&self) -> Option<Timestamp> {
        match self.probe {
            Probe::Due(at) => Some(at),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zk::SessionId;

    fn connected(timeout: Duration) -> SessionEvent {
        SessionEvent::Connected {
            session_id: Some(SessionId(1)),
            timeout,
        }
    }

    /// Found by the `session` fuzz target: a server with a 1 ms tick
    /// negotiates 2 ms, whose three tenths rounded to nothing, so the probe
    /// was due at the instant of the `Connected` that filed it.
    #[test]
    fn the_probe_is_never_due_when_it_is_filed() {
        for ms in [1, 2, 3, 4, 10, 3_000] {
            let now = Timestamp::from_millis(50);
            let mut c = Contact::new();
            c.session_event(now, connected(Duration::from_millis(ms)));
            let due = c.next().expect("a probe is due");
            assert!(due > now, "{ms} ms: due at {due}, filed at {now}");
            assert!(c.probe_if_due(now).is_none(), "{ms} ms");
        }
        let mut c = Contact::new();
        c.session_event(Timestamp::ZERO, connected(Duration::ZERO));
        assert_eq!(c.next(), None, "no timeout, no probe");
    }

    /// Any timeout a transport reports, `Duration::MAX` too, files a probe
    /// without overflowing.
    #[test]
    fn a_huge_timeout_files_the_probe_without_overflow() {
        let mut c = Contact::new();
        c.session_event(Timestamp::ZERO, connected(Duration::MAX));
        assert!(c.next().is_some_and(|at| at > Timestamp::ZERO));
        assert_eq!(
            probe_every(Duration::from_millis(10)),
            Some(Duration::from_millis(3))
        );
    }
}
