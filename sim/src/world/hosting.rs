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

use zkelect_core::{
    Input, Observer, ObserverConfig, OpId, Request, SessionEvent, WatchEvent, WatchKind,
};

use super::{Conn, World};
use crate::foreign::Agent;

/// Which of the server's two watch tables a request arms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum WatchClass {
    /// `exists`, `getData`: fired by a create, a delete, a data change.
    Data,
    /// `getChildren`: fired by a child change and by the node's deletion.
    Child,
}

impl WatchClass {
    fn of(request: &Request) -> Option<Self> {
        match request {
            Request::GetChildren { watch: true, .. } => Some(Self::Child),
            Request::GetData { watch: true, .. } | Request::Exists { watch: true, .. } => {
                Some(Self::Data)
            }
            _ => None,
        }
    }

    /// The tables an event fires, as the server does.
    fn fired_by(kind: WatchKind) -> &'static [Self] {
        match kind {
            WatchKind::NodeCreated | WatchKind::NodeDataChanged => &[Self::Data],
            WatchKind::NodeChildrenChanged => &[Self::Child],
            WatchKind::NodeDeleted => &[Self::Data, Self::Child],
        }
    }
}

/// A watched path and the table its watch is in.
pub(super) type Armed = (String, WatchClass);

/// One machine's arming of one watch since the watch last fired.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Arming {
    /// Its arming requests not yet answered.
    pending: u32,
    /// The newest server change (`World::cause`) when the server applied the
    /// first of them, once it has: a change up to this one fired a watch the
    /// session had set before this machine's, and its event, handed to this
    /// machine too when it arrives (a lagging event thread lets the reply
    /// overtake it), is news this machine's own read already showed it.
    since: Option<u64>,
}

/// A bug planted in the world's session routing or in an observer, which a
/// checker must catch (`tests/model.rs` shows each caught). Set with
/// [`World::plant`] before the run; ordinary runs have none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Planted {
    /// A shared watch's event goes to the first machine armed on it only
    /// (the one-watch-per-session rule forgotten): the others never wake.
    /// Caught by `liveness`.
    SharedWatchToOne,
    /// Observers never see the queue's child events, so they never list it
    /// again: their participant lists go stale. Caught by `observers`.
    ObserverSkipsRelist,
    /// The session files its watches per table, forgetting the path across
    /// queues (issue 17: machines of different queues on one session): a
    /// watch event of one queue's path also goes to the machines armed in
    /// that table on another queue's paths, and disarms them, so they get
    /// an event that is not theirs and miss their own. Within one queue the
    /// routing stays right, so worlds without side queues never see it.
    /// Caught in ordinary seeds that put machines of two queues on one
    /// session (`tests/queues.rs`).
    WatchByTable,
    /// An observer whose path is missing sets no watch with its `exists`
    /// (the request goes out without one): it believes it waits for the
    /// path's creation, and never hears of it, so an observer started
    /// before the path exists, or one whose path was wiped, stays blind
    /// until something else makes it list again. Caught by `observers` in
    /// ordinary seeds that start observers early or wipe the queue
    /// (`tests/sessions.rs`).
    ObserverSetsNoCreationWatch,
}

/// The session-wide id of machine `pid`'s request `op` on host `host`'s
/// session: the host's own ids unchanged (a session with one machine sends
/// exactly what the machine minted), a rider's tagged with its pid above
/// the ids a machine mints.
pub(super) fn wire(host: usize, pid: usize, op: OpId) -> OpId {
    if pid == host {
        op
    } else {
        OpId(op.0 | ((pid as u64 + 1) << 40))
    }
}

impl World {
    /// Plants `bug` (before the run).
    pub fn plant(&mut self, bug: Planted) {
        self.planted = Some(bug);
    }

    /// Starts an observer of the joining queue, on a session of its own or
    /// riding on candidate `on`'s.
    pub(super) fn spawn_observer(&mut self, on: Option<usize>) {
        let pid = self.procs.len();
        let spec = &self.queues[self.joining];
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
        let h = self.procs[pid].host;
        if self.procs[h].conn != Conn::Connected {
            return;
        }
        let session_id = self.procs[h].session.filter(|_| self.knobs.session_ids);
        let timeout = self.procs[h].handshaken.unwrap_or(self.procs[h].timeout);
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
        let h = self.procs[pid].host;
        self.procs[h]
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
        let h = self.procs[pid].host;
        let now = self.cause;
        if let Some(arming) = self.procs[h]
            .watches
            .get_mut(entry)
            .and_then(|a| a.get_mut(&pid))
        {
            arming.since.get_or_insert(now);
        }
    }

    /// Machine `pid`'s arming request `entry` was answered.
    pub(super) fn armed_answered(&mut self, pid: usize, entry: &Armed) {
        let h = self.procs[pid].host;
        if let Some(arming) = self.procs[h]
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
        self.procs[h].watches.retain(|_, armed| {
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
            let others: Vec<Armed> = self.procs[h]
                .watches
                .keys()
                .filter(|(path, class)| classes.contains(class) && self.queue_of_path(path) != mine)
                .cloned()
                .collect();
            for entry in others {
                if let Some(armed) = self.procs[h].watches.get_mut(&entry) {
                    to.extend(armed.keys().map(|pid| (*pid, true)));
                    armed.retain(|_, arming| arming.pending > 0);
                    if armed.is_empty() {
                        self.procs[h].watches.remove(&entry);
                    }
                }
            }
        }
        for class in WatchClass::fired_by(event.kind) {
            let entry = (event.path.clone(), *class);
            let Some(armed) = self.procs[h].watches.get_mut(&entry) else {
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
                self.procs[h].watches.remove(&entry);
            }
        }
        // Woken by either table counts as woken.
        to.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        to.dedup_by_key(|m| m.0);
        if to.len() > 1 {
            self.stats.shared_watches += 1;
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
                    && self.procs[pid].c.observer().is_some() =>
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
            && self.procs[pid].c.observer().is_some()
            && event.path == self.queues[self.procs[pid].queue].path)
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
        self.procs[pid].c.handle(self.now, Input::Session(event));
        self.after(pid, None, text);
    }

    /// The machines on host `h`'s session, in pid order.
    pub(super) fn machines(&self, h: usize) -> Vec<usize> {
        self.procs[h].machines.clone()
    }

    /// How many machines run on host `h`'s session.
    pub fn machines_on(&self, h: usize) -> usize {
        self.procs.get(h).map_or(0, |p| p.machines.len())
    }
}
