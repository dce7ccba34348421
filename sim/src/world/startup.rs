//! A host's start-up machine after its plan, as the transports keep it
//! (`adapters/src/startup.rs`). Until the client's first connection, on
//! either transport, the production core's
//! [`Startup`](zkelect_core::startup::Startup) decides when a failed client
//! attempt is made again and when the start gives up (the application then
//! starts over). On zookeeper-async it lives on: it asks the listed
//! members that have not answered again, in the background and at every
//! (re)connection of the client, and the `Connected` the core hears waits
//! until the bound is confirmed. The world only moves the asks (each with
//! a round trip of its own, [`crate::startup::ask`]), the client's attempts
//! and the wakes; it decides nothing.
//!
//! At every report the bound is held to the session as the server keeps
//! it: never above the timeout the member the client is on negotiated
//! (`start-up`).

use std::time::Duration;

use zkelect_core::startup::{Phase, Startup, StartupCommand, StartupNotice};
use zkelect_core::{SessionEvent, SessionId};

use super::engine::World;
use super::ev::{AskAnswer, Ev};
use super::proc::Asker;
use crate::canary::Canary;

impl World {
    /// Host `h`'s start-up machine lives on after its plan.
    pub(super) fn keep_asker(&mut self, h: usize, machine: Startup) {
        self.view.procs[h].asker = Some(Box::new(Asker {
            machine,
            wake: None,
            holding: None,
            out: Vec::new(),
            standing: Vec::new(),
        }));
        self.drive_asker(h, false);
    }

    /// Host `h`'s client connected (the current generation is the new
    /// connection): the machine asks again the listed members that have not
    /// answered, and `Connected` (with `session_id`, after the credentials'
    /// replay if `replays`) is reported once the bound is confirmed;
    /// whether `h` has an asker (without one, the caller reports).
    pub(super) fn asker_connected(
        &mut self,
        h: usize,
        session_id: Option<SessionId>,
        replays: bool,
    ) -> bool {
        let now = self.view.now;
        let gen = self.view.procs[h].gen;
        let Some(asker) = self.view.procs[h].asker.as_mut() else {
            return false;
        };
        asker.machine.client_connected(now);
        if asker.machine.bound().is_none() {
            // zookeeper-client's transport has no bound to confirm: its
            // start-up ends with the first connection.
            self.view.procs[h].asker = None;
            return false;
        }
        asker.holding = Some((gen, session_id, replays));
        self.drive_asker(h, true);
        true
    }

    /// Host `h`'s client attempt failed (`why`) before its first
    /// connection: the machine says when to try again, or gives the start
    /// up; whether it did (else the caller retries as the client library
    /// does after a connection).
    pub(super) fn asker_client_failed(&mut self, h: usize, why: &str) -> bool {
        let now = self.view.now;
        let Some(asker) = self.view.procs[h].asker.as_mut() else {
            return false;
        };
        if !matches!(asker.machine.phase(), Phase::Connecting(_)) {
            return false;
        }
        asker.machine.client_failed(now, why.to_owned());
        self.view.stats.first_attempts_failed += 1;
        self.drive_asker(h, false);
        true
    }

    /// Host `h`'s connection is gone: a `Connected` it held is never
    /// reported (what the core last heard, `Disconnected`, still holds);
    /// whether one was held.
    pub(super) fn asker_dropped(&mut self, h: usize) -> bool {
        self.view.procs[h]
            .asker
            .as_mut()
            .is_some_and(|a| a.holding.take().is_some())
    }

    /// An ask's outcome reaches host `h`'s machine.
    pub(super) fn ask_answered(&mut self, h: usize, (server, attempt, outcome): AskAnswer) {
        let now = self.view.now;
        let Some(asker) = self.view.procs[h].asker.as_mut() else {
            return;
        };
        asker.out.retain(|&o| o != (server, attempt));
        let attempt = match asker
            .standing
            .iter()
            .position(|&(s, sent, _)| (s, sent) == (server, attempt))
        {
            Some(i) => asker.standing.remove(i).2,
            None => attempt,
        };
        asker.machine.answered(now, server, attempt, outcome);
        self.drive_asker(h, false);
    }

    /// Host `h`'s machine asked to be woken now.
    pub(super) fn ask_wake(&mut self, h: usize) {
        let now = self.view.now;
        let Some(asker) = self.view.procs[h].asker.as_mut() else {
            return;
        };
        if asker.wake.is_none_or(|t| t > now) {
            return;
        }
        asker.wake = None;
        asker.machine.handle_timeout(now);
        self.drive_asker(h, false);
    }

    /// Does what host `h`'s machine asks: sends its asks (those it made at
    /// a connection if `connecting`), sets its wake, and reports a held
    /// `Connected` once the bound is confirmed.
    fn drive_asker(&mut self, h: usize, connecting: bool) {
        let Some(mut asker) = self.view.procs[h].asker.take() else {
            return;
        };
        let now = self.view.now;
        let requested = self.view.swarm.session_timeout;
        let stale = connecting && self.canary_of(h) == Some(Canary::ConfirmsOnStaleAsk);
        while let Some(notice) = asker.machine.poll_notice() {
            if matches!(notice, StartupNotice::Lowered { .. }) {
                self.view.stats.bounds_lowered += 1;
            }
        }
        while let Some(command) = asker.machine.poll_command() {
            let (server, attempt) = match command {
                StartupCommand::Ask {
                    server, attempt, ..
                } => (server, attempt),
                // The client's attempt, again, after a failed one.
                StartupCommand::Connect { .. } => {
                    self.push(now, Ev::Reconnect { pid: h });
                    continue;
                }
                StartupCommand::Resolve { .. } => continue,
            };
            let in_flight = asker.out.iter().rev().find(|(s, _)| *s == server).copied();
            if connecting && in_flight.is_some() {
                self.view.stats.asks_in_flight_at_connection += 1;
            }
            if stale {
                // The canary's transport keeps an ask already on its way
                // instead of the one the machine makes at the connection
                // (what the machine did before it asked again at every
                // connection): that outcome, older than the connection,
                // answers for the new attempt.
                if let Some((_, sent)) = in_flight {
                    asker.standing.retain(|(s, _, _)| *s != server);
                    asker.standing.push((server, sent, attempt));
                    continue;
                }
            }
            let trip = crate::startup::ask_trip(self.rng.range(0, 99), self.rng.range(0, 999));
            // A process cut off from the ensemble asks into the void.
            let outcome = self
                .reachable(h)
                .then(|| crate::startup::ask(&self.view.zk, server, now, trip, requested))
                .flatten();
            if let Some(outcome) = outcome {
                asker.out.push((server, attempt));
                self.push(
                    now + trip,
                    Ev::AskAnswer {
                        pid: h,
                        answer: Box::new((server, attempt, outcome)),
                    },
                );
            }
        }
        let wake = asker.machine.poll_timeout();
        if wake != asker.wake {
            asker.wake = wake;
            if let Some(at) = wake {
                self.push(at, Ev::AskWake { pid: h });
            }
        }
        if let (Phase::Refused(e), None) = (asker.machine.phase(), asker.holding) {
            // The start gave up before the client ever connected: the
            // transport's `connect` fails, and the application starts over
            // (a new start-up) a little later.
            let e = format!("{e:?}");
            self.trace
                .note(now, Some(h), 'd', || format!("start refused: {e}"));
            self.view.stats.starts_given_up += 1;
            let p = &mut self.view.procs[h];
            p.started = None;
            p.handshaken = None;
            let at = now + Duration::from_millis(self.rng.range(200, 500));
            self.push(at, Ev::Reconnect { pid: h });
            return;
        }
        let report = match (asker.holding, asker.machine.confirmed_bound()) {
            (Some((gen, session_id, replays)), Some(bound)) if self.view.procs[h].gen == gen => {
                asker.holding = None;
                Some((session_id, bound, replays))
            }
            _ => None,
        };
        self.view.procs[h].asker = Some(asker);
        if let Some((session_id, bound, replays)) = report {
            self.judge_bound(h, bound);
            self.report_connected(h, session_id, bound, replays);
        }
    }

    /// The bound host `h` is about to report, held to its session as the
    /// server keeps it: never above what the member it is on negotiated.
    fn judge_bound(&mut self, h: usize, bound: Duration) {
        let Some(session) = self.view.procs[h].session_id else {
            return;
        };
        let Some(actual) = self.view.zk.session_timeout(session) else {
            return;
        };
        if bound > actual {
            let member = self.view.zk.member_of(session);
            self.start_up_violation(format!(
                "p{h} reports a session timeout of {bound:?} while its session runs by {actual:?} on zk{}",
                member.map_or_else(|| "?".to_owned(), |m| m.to_string())
            ));
        }
    }

    /// Records a start-up that broke its contract (the first one counts).
    pub(super) fn start_up_violation(&mut self, what: String) {
        if self.view.start_up.is_none() {
            self.view.start_up = Some(what);
            // Step checkers read it: a pass from before no longer holds.
            self.view.counts.generation += 1;
            self.view.counts.version += 1;
        }
    }

    /// Reports `Connected` (with `session_id` and `timeout`, what the
    /// transport learned) to host `h`'s core, after its credentials'
    /// replay if `replays`.
    pub(super) fn report_connected(
        &mut self,
        h: usize,
        session_id: Option<SessionId>,
        timeout: Duration,
        replays: bool,
    ) {
        let requested = self.view.swarm.session_timeout;
        let reported = self
            .canary_of(h)
            .map_or(timeout, |c| c.reported_timeout(timeout, requested));
        let connected = SessionEvent::Connected {
            session_id,
            timeout: reported,
        };
        if replays {
            self.start_replay(h, connected);
        } else {
            self.session_event(h, connected);
        }
    }
}
