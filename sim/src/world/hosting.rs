//! Several machines on one session, as the library's `Session` runs them
//! (`adapters/src/driver.rs`), and observers:
//!
//! - **Replies by op id.** Each machine mints its own [`OpId`]s; the session
//!   sends each request under an id of its own ([`wire`]) and answers the
//!   machine that sent it under the machine's id.
//! - **Watch events to every machine watching that path.** The server keeps
//!   one watch per session, path and kind and fires it once (the model's
//!   watch tables are sets of sessions): two machines arming the same path
//!   share it. The session keeps, per path and table, the machines armed
//!   since the last firing and hands the one event to each; a machine whose
//!   arming request is still unanswered stays armed (its own request may have
//!   set a newer watch).
//! - **Session events to all**, and to a machine added to a connected
//!   session the `Connected` it missed.
//!
//! [`Planted`] bugs break these rules on purpose, to show the checkers catch
//! them.

use zkelect_core::{Input, Observer, ObserverConfig, Request, SessionEvent, WatchEvent};

use super::engine::World;
use super::proc::Conn;
use super::routing::{Armed, Planted, WatchClass};
use crate::foreign::Agent;

impl World {
    /// Plants `bug` (before the run).
    pub fn plant(&mut self, bug: Planted) {
        self.planted = Some(bug);
    }

    /// Starts an observer of the joining queue, on a session of its own or
    /// riding on candidate `on`'s.
    pub(super) fn spawn_observer(&mut self, on: Option<usize>) {
        let pid = self.view.procs.len();
        let spec = &self.view.queues[self.joining];
        let config = ObserverConfig::new(spec.path.clone(), spec.recipe())
            .with_interop(spec.scheme.interop());
        let observer = match Observer::new(config) {
            Ok(o) => o,
            Err(e) => return self.fail("config", format!("{e}")),
        };
        self.start_on(Agent::Observer(Box::new(observer)), on.unwrap_or(pid));
    }

    /// A machine added to a session: if it is connected, the machine gets
    /// the `Connected` it missed, as the others did.
    pub(super) fn join_session(&mut self, pid: usize) {
        let h = self.view.procs[pid].host;
        if self.view.procs[h].conn != Conn::Connected {
            return;
        }
        let session_id = self.view.procs[h]
            .session
            .filter(|_| self.view.knobs.session_ids);
        let timeout = self.view.procs[h]
            .handshaken
            .unwrap_or(self.view.procs[h].timeout);
        self.machine_session_event(
            pid,
            SessionEvent::Connected {
                session_id,
                timeout,
            },
        );
    }

    /// Files the watch `request` arms for machine `pid` in its host's table
    /// (one more arming in flight).
    pub(super) fn arm(&mut self, pid: usize, request: &Request) -> Option<Armed> {
        let class = WatchClass::of(request)?;
        let entry = (request.path().to_owned(), class);
        let h = self.view.procs[pid].host;
        self.view.procs[h]
            .watches
            .entry(entry.clone())
            .or_default()
            .entry(pid)
            .or_default()
            .pending += 1;
        Some(entry)
    }

    /// The server applied machine `pid`'s arming request `entry`: its watch
    /// is set as of now, after every change fired so far.
    pub(super) fn armed_applied(&mut self, pid: usize, entry: &Armed) {
        let h = self.view.procs[pid].host;
        let now = self.cause;
        if let Some(arming) = self.view.procs[h]
            .watches
            .get_mut(entry)
            .and_then(|a| a.get_mut(&pid))
        {
            arming.since.get_or_insert(now);
        }
    }

    /// Machine `pid`'s arming request `entry` was answered.
    pub(super) fn armed_answered(&mut self, pid: usize, entry: &Armed) {
        let h = self.view.procs[pid].host;
        if let Some(arming) = self.view.procs[h]
            .watches
            .get_mut(entry)
            .and_then(|a| a.get_mut(&pid))
        {
            arming.pending = arming.pending.saturating_sub(1);
        }
    }

    /// The session expired (or closed): the server dropped its watches; the
    /// machines whose arming is still unanswered stay armed.
    pub(super) fn watches_dropped(&mut self, h: usize) {
        self.view.procs[h].watches.retain(|_, armed| {
            armed.retain(|_, arming| arming.pending > 0);
            for arming in armed.values_mut() {
                arming.since = None;
            }
            !armed.is_empty()
        });
    }

    /// The machines of host `h` that get watch `event` of server change
    /// `cause`: every machine armed on its path in a table it fires, since it
    /// last fired, each with whether the change woke it (false for a machine
    /// whose watch the server set only after the change: see [`Arming`]).
    /// The firing disarms them, but for machines whose arming is still
    /// unanswered.
    pub(super) fn route_watch(
        &mut self,
        h: usize,
        event: &WatchEvent,
        cause: u64,
    ) -> Vec<(usize, bool)> {
        let mut to: Vec<(usize, bool)> = Vec::new();
        if self.planted == Some(Planted::WatchByTable) {
            // The bug: the table forgets the path across queues, so a
            // watch of another queue's path in a table this event fires
            // is taken as fired too.
            let classes = WatchClass::fired_by(event.kind);
            let mine = self.queue_of_path(&event.path);
            let others: Vec<Armed> = self.view.procs[h]
                .watches
                .keys()
                .filter(|(path, class)| classes.contains(class) && self.queue_of_path(path) != mine)
                .cloned()
                .collect();
            for entry in others {
                if let Some(armed) = self.view.procs[h].watches.get_mut(&entry) {
                    to.extend(armed.keys().map(|pid| (*pid, true)));
                    armed.retain(|_, arming| arming.pending > 0);
                    if armed.is_empty() {
                        self.view.procs[h].watches.remove(&entry);
                    }
                }
            }
        }
        for class in WatchClass::fired_by(event.kind) {
            let entry = (event.path.clone(), *class);
            let Some(armed) = self.view.procs[h].watches.get_mut(&entry) else {
                continue;
            };
            to.extend(
                armed
                    .iter()
                    .map(|(pid, arming)| (*pid, arming.since.is_none_or(|s| s < cause))),
            );
            armed.retain(|_, arming| arming.pending > 0);
            // A watch the server set before the change is spent; one set
            // after it is still there.
            for arming in armed.values_mut() {
                if arming.since.is_some_and(|s| s < cause) {
                    arming.since = None;
                }
            }
            if armed.is_empty() {
                self.view.procs[h].watches.remove(&entry);
            }
        }
        // Woken by either table counts as woken.
        to.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        to.dedup_by_key(|m| m.0);
        if to.len() > 1 {
            self.view.stats.shared_watches += 1;
        }
        if self.planted == Some(Planted::SharedWatchToOne) {
            to.truncate(1);
        }
        to
    }

    /// Request `request` of machine `pid` as a planted bug sends it.
    pub(super) fn planted_request(&self, pid: usize, request: Request) -> Request {
        match request {
            Request::Exists { path, watch: true }
                if self.planted == Some(Planted::ObserverSetsNoCreationWatch)
                    && self.view.procs[pid].c.observer().is_some() =>
            {
                Request::Exists { path, watch: false }
            }
            other => other,
        }
    }

    /// Whether machine `pid` hears watch `event` at all (a planted bug may
    /// deafen it).
    pub(super) fn hears(&self, pid: usize, event: &WatchEvent) -> bool {
        !(self.planted == Some(Planted::ObserverSkipsRelist)
            && self.view.procs[pid].c.observer().is_some()
            && event.path == self.view.queues[self.view.procs[pid].queue].path)
    }

    /// Feeds a session event to one machine of a session.
    pub(super) fn machine_session_event(&mut self, pid: usize, event: SessionEvent) {
        if self.canary_of(pid).is_some_and(|c| !c.sees(event)) {
            return;
        }
        let text = move || match event {
            SessionEvent::Connected { session_id, .. } => format!(
                "session Connected {}",
                session_id.map_or("(id not reported)".to_owned(), |s| s.to_string())
            ),
            other => format!("session {other:?}"),
        };
        self.view.procs[pid]
            .c
            .handle(self.view.now, Input::Session(event));
        self.after(pid, None, text);
    }

    /// The machines on host `h`'s session, in pid order.
    pub(super) fn machines(&self, h: usize) -> Vec<usize> {
        self.view.procs[h].machines.clone()
    }
}
