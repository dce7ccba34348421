//! zookeeper-async's replay of a session's credentials after a reconnect:
//! the transport does not send them with its connect, so before it reports
//! `Connected` it adds them again (`addAuth`) through the production core's
//! set-up machine ([`SetUp`], [`SetUpConfig::replay`]); the world only
//! moves its tries over the link and wakes it, as the adapter's pump does.

use zkelect_core::setup::{SetUp, SetUpCommand, SetUpConfig, SetUpEnd, SetUpOutcome};
use zkelect_core::SessionEvent;

use super::engine::World;
use super::ev::Ev;
use super::proc::Replay;
use crate::client::Library;

impl World {
    /// Whether host `h`'s client replays credentials when it reconnects:
    /// zookeeper-async, with credentials to replay.
    pub(super) fn replays(&self, h: usize) -> bool {
        self.library(h) == Library::ZookeeperAsync && self.identity(Some(h)).is_some()
    }

    /// Starts the replay on host `h`'s new connection; `report` (the
    /// `Connected` event) waits for its end. The bound of the whole replay
    /// and of each try is the timeout reported (the adapter's request
    /// timeout defaults to the session timeout too).
    pub(super) fn start_replay(&mut self, h: usize, report: SessionEvent) {
        let SessionEvent::Connected { timeout, .. } = report else {
            return self.session_event(h, report);
        };
        let machine = SetUp::new(self.view.now, SetUpConfig::replay(timeout, timeout));
        self.view.procs[h].replay = Some(Box::new(Replay {
            machine,
            report,
            wake: None,
        }));
        self.drive_replay(h);
    }

    /// Whether host `h`'s client holds the core's requests at its gate (a
    /// replay is under way: they would reach the ACL'd nodes without the
    /// credentials).
    pub(super) fn gated(&self, h: usize) -> bool {
        self.view.procs[h].replay.is_some()
    }

    /// Does what host `h`'s replay machine asks: sends its try, sets its
    /// wake, or reports its end.
    fn drive_replay(&mut self, h: usize) {
        let Some(mut replay) = self.view.procs[h].replay.take() else {
            return;
        };
        while replay.machine.poll_notice().is_some() {}
        match replay.machine.end() {
            Some(SetUpEnd::Done { .. }) => {
                self.trace.note(self.view.now, Some(h), 'c', || {
                    "credentials replayed".into()
                });
                self.view.replayed += 1;
                return self.session_event(h, replay.report);
            }
            Some(SetUpEnd::Failed(e)) => {
                self.trace.note(self.view.now, Some(h), 'd', || {
                    format!("credentials not replayed: {e}")
                });
                // The session cannot be used without its credentials: the
                // core's machines on it stop with `AuthFailed`, which
                // `no-error` accepts on this session only, and its host
                // closes it (`refused-leaves-nothing`).
                if let Some(session) = self.view.procs[h].session_id {
                    self.view.lapsed.push(super::view::Refused {
                        host: h,
                        session,
                        at: self.view.now,
                    });
                    // Step checkers read it: a pass from before no longer
                    // holds, until any change or until the counts'.
                    self.view.counts.generation += 1;
                    self.view.counts.version += 1;
                }
                return self.session_event(h, SessionEvent::AuthFailed);
            }
            // The connection changed: the next reconnect starts afresh.
            Some(SetUpEnd::Superseded) => return,
            None => {}
        }
        let gen = self.view.procs[h].gen;
        if let Some(SetUpCommand::Send { attempt, .. }) = replay.machine.poll_command() {
            self.view.procs[h].last_to_server = self.view.now;
            let at = self.server_arrival(h);
            self.push(
                at,
                Ev::AddAuth {
                    pid: h,
                    gen,
                    attempt,
                },
            );
        }
        let wake = replay.machine.poll_timeout();
        if wake != replay.wake {
            replay.wake = wake;
            if let Some(at) = wake {
                self.push(at, Ev::ReplayWake { pid: h, gen });
            }
        }
        self.view.procs[h].replay = Some(replay);
    }

    /// An `addAuth` of host `h`'s replay reaches the server: it puts the
    /// credentials on the connection and answers (the model keeps a
    /// session's identities across its connections, so they are there
    /// already).
    pub(super) fn add_auth_arrived(&mut self, h: usize, gen: u64, attempt: u32) {
        if self.view.procs[h].gen != gen || !self.linked(h) {
            return;
        }
        let at = self.client_arrival(h);
        self.push(
            at,
            Ev::AuthAnswer {
                pid: h,
                gen,
                attempt,
            },
        );
    }

    /// The server's answer to an `addAuth` reaches host `h`'s client.
    pub(super) fn auth_answered(&mut self, h: usize, gen: u64, attempt: u32) {
        if self.view.procs[h].gen != gen || !self.linked(h) {
            return;
        }
        self.view.procs[h].last_from_server = self.view.now;
        let now = self.view.now;
        if let Some(replay) = self.view.procs[h].replay.as_mut() {
            replay.machine.answered(now, attempt, SetUpOutcome::Ok);
            self.drive_replay(h);
        }
    }

    /// Host `h`'s replay machine asked to be woken now.
    pub(super) fn replay_wake(&mut self, h: usize, gen: u64) {
        let now = self.view.now;
        let p = &mut self.view.procs[h];
        let Some(replay) = p.replay.as_mut() else {
            return;
        };
        if p.gen != gen || replay.wake.is_none_or(|t| t > now) {
            return;
        }
        replay.wake = None;
        replay.machine.handle_timeout(now);
        self.drive_replay(h);
    }

    /// Host `h`'s connection is gone: a replay under way on it is
    /// superseded (what the core last heard, `Disconnected`, still holds);
    /// whether one was.
    pub(super) fn end_replay(&mut self, h: usize) -> bool {
        let now = self.view.now;
        match self.view.procs[h].replay.take() {
            Some(mut replay) => {
                replay.machine.connection_changed(now);
                true
            }
            None => false,
        }
    }
}
