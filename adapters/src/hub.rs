//! A session's core [`Session`](zkelect_core::Session) and what its machines
//! publish, shared under one lock by the pump (`driver.rs`) and the handles.
//!
//! Every decision is the core's; this module only moves what it says:
//!
//! - **Intents are applied where they are asked**, as quinn's handles lock
//!   their connection: a handle takes the lock, reads the clock, feeds the
//!   intent to the core, publishes what it says, and sends the requests it
//!   emits at once. A lock's release thus sends its node's delete from the
//!   releasing task itself, before anything else runs — the delete the core
//!   emits, under the path the core built, with no second author of it.
//! - **Requests** are polled once where they are started (which hands them
//!   to the client library) and then moved to the pump, which polls every
//!   request to its answer and feeds it back. A request a handle started is
//!   polled with a no-op waker: the pump polls it again as soon as it gets
//!   it, so no wake-up is lost.
//! - **Publication**: each machine's notices and status go out (the status
//!   with each notice, so a watcher of the role sees a demotion as soon as a
//!   subscriber of notices does) before its requests are sent; a demotion or
//!   an election that a subscriber may be waiting on holds the requests it
//!   led to until the pump has yielded once, so the tasks it woke run first
//!   (zombie-proofing for a demotion; for an election, speed: the new
//!   holder's `acquire` returns before any request its election leads to
//!   goes out).
//! - **The metrics facade** is told on the pump's next turn, never on the
//!   path between an input and the requests it leads to.

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Waker};

use futures_util::FutureExt;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use zkelect_core::multilock::MultiLockError;
use zkelect_core::{
    Command, Config, ConnectionState, Event, Exit, Gone, GroupGone, GroupId, GroupNotice, Machine,
    MachineId, Notice, OpId, Participant, Reply, Request, Role, Rule, Session, SessionConfig,
    Timestamp, ZkCode,
};

use crate::clock::Clock;
use crate::facade::{note_moved, Facade, Mirror, Moment};
use crate::status::{count, Outputs, Snapshot};
use crate::transport::Transport;

/// A request's answer, under its session op id.
pub(crate) type Answer = (OpId, Result<Reply, ZkCode>);

/// One request in flight, polled to its answer by the pump.
pub(crate) type Performing = Pin<Box<dyn Future<Output = Answer> + Send>>;

/// What the handles pass the pump.
pub(crate) enum Handoff {
    /// A request a handle started: the pump polls it from now on.
    Started(Performing),
    /// A request that answered on its first poll.
    Answered(Answer),
    /// Something changed under the lock: the session's deadline may have.
    Nudge,
}

/// What one machine publishes through, and who waits on it. Kept small:
/// an idle machine of a large session has one, and nobody waiting.
pub(crate) struct Board {
    outputs: Arc<Outputs>,
    /// Its series in the metrics facade (unused by an observer).
    facade: Facade,
    /// What few machines have: someone waiting for its end, a list.
    rare: Option<Box<Rare>>,
}

/// The parts of a board most machines never need.
#[derive(Default)]
struct Rare {
    /// Told when it leaves the session.
    closed: Vec<oneshot::Sender<()>>,
    /// An observer's participant list. An observer is not metered: its
    /// path may be an election this process takes part in, and the series
    /// are labelled by path alone.
    listing: Option<Listing>,
    /// Not metered though it lists nothing: a machine that takes no part
    /// in a queue (a revocation request, whose path is another's node).
    unmetered: bool,
}

/// An observer's participant list, published in the step that reports it.
pub(crate) struct Listing {
    pub(crate) list: Arc<watch::Sender<Vec<Participant>>>,
    /// Told when the first list is in.
    pub(crate) first: Option<oneshot::Sender<()>>,
}

impl Board {
    /// A candidate's board: metered under its path.
    pub(crate) fn metered(outputs: Arc<Outputs>, path: &str) -> Self {
        Self {
            outputs,
            facade: Facade::new(path),
            rare: None,
        }
    }

    /// An observer's board: not metered.
    pub(crate) fn listing(outputs: Arc<Outputs>, listing: Listing) -> Self {
        Self {
            outputs,
            facade: Facade::unmetered(),
            rare: Some(Box::new(Rare {
                closed: Vec::new(),
                listing: Some(listing),
                unmetered: false,
            })),
        }
    }

    /// A board for a machine outside any queue (a revocation request):
    /// its notices and status only, not metered.
    pub(crate) fn unmetered(outputs: Arc<Outputs>) -> Self {
        Self {
            outputs,
            facade: Facade::unmetered(),
            rare: Some(Box::new(Rare {
                unmetered: true,
                ..Rare::default()
            })),
        }
    }

    /// Whether its counters and leader gauge go to the metrics facade.
    fn is_metered(&self) -> bool {
        self.rare
            .as_ref()
            .is_none_or(|r| r.listing.is_none() && !r.unmetered)
    }
}

/// What the lock guards.
pub(crate) struct State {
    pub(crate) session: Session,
    /// Boxed: machine ids only grow, so each node of the map is left a
    /// little over half full, and an idle machine pays for the empty
    /// entries beside its own (48 bytes each inline, 8 boxed).
    boards: BTreeMap<MachineId, Box<Board>>,
    /// What metered machines have to tell the facade since it was last
    /// told, in order: told at the start of the pump's next turn.
    unmirrored: Vec<(MachineId, Mirror)>,
    /// A demotion or an election was published to a subscriber: the
    /// requests it led to wait until the pump has yielded once.
    told: bool,
    /// Notices counted into their machine's status but not yet sent: each
    /// goes out once the status carries the machine's role after the whole
    /// step (its `Updated`, or its `Stopped`), never before. A step's
    /// notices are counted first (the status shows each demotion and its
    /// reason with the old role), then the role moves, then the notices are
    /// sent: no status ever says "no longer holding" without the reason
    /// (a freeze past the lease brings `Suspended` and `Demoted(Lost)` in
    /// one step, and `LockGuard::lost` once read the role with neither
    /// counted: "closed"), and a subscriber of the notices finds the role
    /// already past them.
    held: Vec<(MachineId, Notice)>,
    /// Told once the session has closed (after the transport's close).
    closers: Vec<oneshot::Sender<()>>,
    /// Each multi-lock's notices since its last acquisition began, and
    /// what its parts publish together.
    groups: BTreeMap<GroupId, GroupBoard>,
    /// The pump has ended: the session is closed for good.
    ended: bool,
    /// The session's connection state, as the core last said it.
    states: watch::Sender<ConnectionState>,
}

/// A session's state, its transport and clock, and the line to its pump.
pub(crate) struct Hub {
    state: Mutex<State>,
    /// The pump owns the transport: once it has ended, nothing holds it.
    transport: Weak<dyn Transport>,
    clock: Clock,
    handoff: mpsc::UnboundedSender<Handoff>,
}

impl Hub {
    pub(crate) fn new(
        transport: &Arc<dyn Transport>,
        config: SessionConfig,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<Handoff>) {
        let (handoff, from_handles) = mpsc::unbounded_channel();
        let hub = Arc::new(Self {
            state: Mutex::new(State {
                session: Session::new(config),
                boards: BTreeMap::new(),
                unmirrored: Vec::new(),
                told: false,
                held: Vec::new(),
                closers: Vec::new(),
                groups: BTreeMap::new(),
                ended: false,
                states: watch::channel(ConnectionState::Connecting).0,
            }),
            transport: Arc::downgrade(transport),
            clock: Clock::new(),
            handoff,
        });
        (hub, from_handles)
    }

    /// The lock. A panic while it was held left whole values behind (every
    /// change is made by plain assignments), so a poisoned lock is still
    /// good to use.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    // ----- from the handles -------------------------------------------------

    /// Runs `machine` on the session, publishing through `board`.
    pub(crate) fn add(&self, machine: Machine, board: Board) -> MachineId {
        let mut st = self.lock();
        let now = self.clock.now();
        let id = st.session.add(now, machine);
        st.boards.insert(id, Box::new(board));
        self.carry_out(&mut st, None);
        id
    }

    /// Applies an intent (`Err` once its machine has left the session).
    pub(crate) fn intent(
        &self,
        apply: impl FnOnce(&mut Session, Timestamp) -> Result<(), Gone>,
    ) -> Result<(), Gone> {
        let mut st = self.lock();
        let now = self.clock.now();
        let done = apply(&mut st.session, now);
        self.carry_out(&mut st, None);
        done
    }

    /// Adds a multi-lock over `configs` (idle): its name, and a watch of its
    /// notices since its last acquisition began.
    pub(crate) fn add_group(
        &self,
        configs: Vec<Config>,
    ) -> Result<(GroupId, GroupWatches), MultiLockError> {
        let mut st = self.lock();
        let now = self.clock.now();
        let gid = st.session.add_multi_lock(now, configs)?;
        let (notices, notices_rx) = watch::channel(Vec::new());
        let (lease, lease_rx) = watch::channel(None);
        let (held, held_rx) = watch::channel(false);
        st.groups.insert(
            gid,
            GroupBoard {
                notices,
                lease,
                held,
            },
        );
        self.carry_out(&mut st, None);
        Ok((
            gid,
            GroupWatches {
                notices: notices_rx,
                lease: lease_rx,
                held: held_rx,
            },
        ))
    }

    /// Starts acquiring multi-lock `gid` afresh (its notices cleared):
    /// `Ok(false)` if it is not idle.
    pub(crate) fn acquire_group(
        &self,
        gid: GroupId,
        give_up_after: Option<Duration>,
    ) -> Result<bool, GroupGone> {
        let mut st = self.lock();
        let now = self.clock.now();
        let idle = st.session.group_lock(gid).is_some_and(|l| l.is_idle());
        if idle {
            if let Some(board) = st.groups.get(&gid) {
                board.notices.send_modify(Vec::clear);
            }
        }
        let started = st.session.acquire_group(now, gid, give_up_after);
        self.carry_out(&mut st, None);
        started
    }

    /// Releases multi-lock `gid` (`close`: and ends it).
    pub(crate) fn release_group(&self, gid: GroupId, close: bool) {
        let mut st = self.lock();
        let now = self.clock.now();
        let _gone = match close {
            true => st.session.close_group(now, gid),
            false => st.session.release_group(now, gid),
        };
        self.carry_out(&mut st, None);
        if close {
            st.groups.remove(&gid);
        }
    }

    /// Closes machine `id`: told once it has left the session (`None` if it
    /// already had). `released`: by the holder itself (a lock's release),
    /// so its demotion need not reach anyone before its delete goes out.
    pub(crate) fn close(&self, id: MachineId, released: bool) -> Option<oneshot::Receiver<()>> {
        let mut st = self.lock();
        let now = self.clock.now();
        let (done, wait) = oneshot::channel();
        st.boards
            .get_mut(&id)?
            .rare
            .get_or_insert_with(Box::default)
            .closed
            .push(done);
        debug!(machine = %id, "intent: close");
        let gone = st.session.close(now, id).is_err();
        self.carry_out(&mut st, released.then_some(id));
        (!gone).then_some(wait)
    }

    /// Closes every machine, then the session: told once it has closed.
    pub(crate) fn close_session(&self) -> oneshot::Receiver<()> {
        let mut st = self.lock();
        let now = self.clock.now();
        let (done, wait) = oneshot::channel();
        if st.ended {
            let _ = done.send(());
            return wait;
        }
        st.closers.push(done);
        st.session.close_session(now);
        self.carry_out(&mut st, None);
        wait
    }

    /// The session's connection state and every change the core makes to it.
    pub(crate) fn states(&self) -> watch::Receiver<ConnectionState> {
        self.lock().states.subscribe()
    }

    /// Reads the session under the lock.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&Session) -> R) -> R {
        f(&self.lock().session)
    }

    /// After a handle's intent: publishes, nudges the pump, then sends the
    /// requests at once (unless a subscriber of a demotion or election is
    /// to run first: the pump sends them after its yield). `released`: the
    /// machine a holder released, whose demotion holds nothing back.
    fn carry_out(&self, st: &mut State, released: Option<MachineId>) {
        self.publish(st, released);
        // The nudge first: it wakes the pump, and what the requests' first
        // polls wake next (the client library's I/O task, which writes them
        // to the socket) is then the task the runtime runs first once this
        // one yields. Woken the other way round, the pump took that place
        // and a release's delete left only after the pump's turn (measured
        // at W = 300: see the bench's README). The pump's later hand-offs
        // find it already woken and wake nothing.
        let _ = self.handoff.send(Handoff::Nudge);
        if !st.told {
            // A transport's request may need the runtime (its timer): one
            // dropped outside it (a guard dropped on a thread of its own)
            // is left to the pump to poll.
            let here = tokio::runtime::Handle::try_current().is_ok();
            let mut noop = Context::from_waker(Waker::noop());
            while let Some(command) = st.session.poll_command() {
                let mut request = self.perform(command);
                let handoff = match here.then(|| request.as_mut().poll(&mut noop)) {
                    Some(Poll::Ready(answer)) => Handoff::Answered(answer),
                    Some(Poll::Pending) | None => Handoff::Started(request),
                };
                let _ = self.handoff.send(handoff);
            }
        }
    }

    // ----- from the pump ----------------------------------------------------

    /// After the pump fed an input: publishes, then starts the requests,
    /// polled in the pump's next `select!` (unless `told`: see [`State`]).
    pub(crate) fn turn(&self, st: &mut State, tasks: &mut Vec<Performing>) {
        self.publish(st, None);
        if !st.told {
            self.start(st, tasks);
        }
    }

    /// The requests held back by a published demotion or election, once
    /// the pump has yielded.
    ///
    /// Each is polled once here, with a no-op waker, as a handle's are: that
    /// first poll hands it to the client library, so every request of the
    /// turn is on its way before the pump waits again (polled first in its
    /// `select!`, they went out one by one behind the answers already
    /// woken, while the server could idle). The pump's set polls each again
    /// at once, so no wake-up is lost; one that answered at once is kept as
    /// its answer, in its place.
    pub(crate) fn start(&self, st: &mut State, tasks: &mut Vec<Performing>) {
        st.told = false;
        let mut noop = Context::from_waker(Waker::noop());
        while let Some(command) = st.session.poll_command() {
            let mut request = self.perform(command);
            if let Poll::Ready(answer) = request.as_mut().poll(&mut noop) {
                request = Box::pin(std::future::ready(answer));
            }
            tasks.push(request);
        }
    }

    /// Whether requests wait for the pump's yield, and whether the facade
    /// has something to be told.
    pub(crate) fn waiting(st: &State) -> (bool, bool) {
        (st.told, !st.unmirrored.is_empty())
    }

    /// The pump is about to yield for what was told so far.
    pub(crate) fn untold(st: &mut State) {
        st.told = false;
    }

    /// The pump has ended: the closers, to be told.
    pub(crate) fn ended(st: &mut State) -> Vec<oneshot::Sender<()>> {
        st.ended = true;
        // The pump has gone: the session is closed, whether or not its
        // transport said so before it went; one that ended because its
        // credentials were refused keeps saying so.
        st.states.send_if_modified(|state| {
            let changed = !matches!(
                *state,
                ConnectionState::Closed | ConnectionState::AuthFailed
            );
            if changed {
                *state = ConnectionState::Closed;
            }
            changed
        });
        std::mem::take(&mut st.closers)
    }

    fn perform(&self, Command { op, request }: Command) -> Performing {
        debug!(session_op = %op, verb = request.verb(), path = request.path(), "perform");
        match self.transport.upgrade() {
            Some(transport) => Box::pin(async move { (op, answered(&*transport, request).await) }),
            // The pump has ended: the session is closed.
            None => Box::pin(std::future::ready((op, Err(ZkCode::ConnectionLoss)))),
        }
    }

    // ----- publication --------------------------------------------------------

    /// Tells the metrics facade what the machines had to tell it.
    pub(crate) fn flush_metrics(st: &mut State) {
        for (id, mirror) in std::mem::take(&mut st.unmirrored) {
            let (Some(machine), Some(board)) = (st.session.machine(id), st.boards.get(&id)) else {
                continue;
            };
            tell(machine.path(), board, mirror);
        }
    }

    /// Publishes every event of the session: notices and status, and the
    /// end of machines that left. `released`: see [`carry_out`](Self::carry_out).
    fn publish(&self, st: &mut State, released: Option<MachineId>) {
        // The parts' values first: whoever hears a multi-lock's `Held`
        // finds its lease and held watch already saying so (the core's
        // state is final for this turn before its events are read).
        self.publish_groups(st);
        self.publish_events(st, released);
        // Each machine's `Updated` follows its notices; should one not, its
        // notices still go out in this turn.
        for (id, notice) in std::mem::take(&mut st.held) {
            if let Some(board) = st.boards.get(&id) {
                board.outputs.notify(notice);
            }
        }
    }

    /// Each multi-lock's parts, taken together: the earliest of their
    /// leases (the whole holds only while every part does, so no lease at
    /// all while any part has none), and whether the core's multi-lock
    /// holds. Nothing is decided here: these are the parts' own values.
    fn publish_groups(&self, st: &State) {
        for (gid, board) in &st.groups {
            let parts = st.session.group(*gid).unwrap_or_default();
            let lease = parts
                .iter()
                .map(|id| st.session.machine(*id).and_then(|m| m.lease_expiry()))
                .try_fold(None, |min: Option<Timestamp>, lease| {
                    lease.map(|l| Some(min.map_or(l, |m| m.min(l))))
                })
                .flatten()
                .map(|t| self.clock.instant(t));
            board.lease.send_if_modified(|now| {
                let changed = *now != lease;
                *now = lease;
                changed
            });
            let held = st.session.group_holds(*gid);
            board.held.send_if_modified(|now| {
                let changed = *now != held;
                *now = held;
                changed
            });
        }
    }

    fn publish_events(&self, st: &mut State, released: Option<MachineId>) {
        while let Some(event) = st.session.poll_event() {
            match event {
                Event::Notice { machine, notice } => {
                    self.notice(st, machine, notice, released);
                }
                Event::Connection(state) => {
                    debug!(?state, "session connection state");
                    st.states.send_replace(state);
                }
                Event::Group { group, notice } => {
                    debug!(%group, ?notice, "multi-lock");
                    if let Some(board) = st.groups.get(&group) {
                        board.notices.send_modify(|notices| notices.push(notice));
                    }
                }
                Event::Updated(machine) => {
                    let (Some(board), Some(now)) = (
                        st.boards.get(&machine),
                        snapshot(&st.session, &self.clock, machine),
                    ) else {
                        // Gone in the same step: its `Stopped` says the rest.
                        continue;
                    };
                    let moved = board.outputs.publish(Some(&now), |_| false);
                    if board.is_metered() {
                        note_moved(&mut st.unmirrored, machine, moved);
                    }
                    send_held(&mut st.held, machine, board);
                }
                Event::Stopped {
                    machine,
                    path,
                    exit,
                    stats,
                    traffic,
                } => {
                    let Some(board) = st.boards.remove(&machine) else {
                        continue;
                    };
                    let role = match exit {
                        Exit::Failed => Role::Failed,
                        Exit::Closed | Exit::Abandoned => Role::Closed,
                    };
                    let moved = board.outputs.stopped(role, &stats, &traffic);
                    send_held(&mut st.held, machine, &board);
                    // What it has to tell the facade is told before it goes.
                    let mut rest = Vec::new();
                    for (id, mirror) in std::mem::take(&mut st.unmirrored) {
                        if id == machine {
                            tell(&path, &board, mirror);
                        } else {
                            rest.push((id, mirror));
                        }
                    }
                    st.unmirrored = rest;
                    if board.is_metered() {
                        if let Some(before) = moved {
                            tell(&path, &board, Mirror::Counters(before));
                        }
                        metrics::gauge!("zkelect_leader", "path" => path.clone()).set(0.0);
                    }
                    if exit == Exit::Abandoned {
                        warn!(
                            path,
                            "close: the node's deletion did not complete in time; \
                             it goes when the session ends"
                        );
                    }
                    for done in board.rare.into_iter().flat_map(|r| r.closed) {
                        let _ = done.send(());
                    }
                    info!(path, ?role, "machine stopped");
                }
            }
        }
    }

    fn notice(&self, st: &mut State, id: MachineId, notice: Notice, released: Option<MachineId>) {
        let Some(board) = st.boards.get_mut(&id) else {
            return;
        };
        let now = snapshot(&st.session, &self.clock, id);
        let node = now.as_ref().and_then(|n| n.node);
        let metered = board.is_metered();
        let unmirrored = &mut st.unmirrored;
        let failover = board
            .facade
            .notice(&notice, node, Moment::now(&self.clock), &mut |m| {
                if metered {
                    unmirrored.push((id, m));
                }
            });
        let rule = st
            .session
            .machine(id)
            .and_then(|m| m.as_candidate())
            .map(|c| c.config().rule());
        log(&notice, rule);
        // Only news someone may be waiting on is worth a yield (a lock's
        // release has no one: its holder asked for it).
        st.told |= matches!(notice, Notice::Demoted { .. } | Notice::Elected { .. })
            && released != Some(id)
            && board.outputs.watched();
        // Counted now, with the role as it was: see `State::held`.
        let moved = board.outputs.publish(None, |s| count(s, &notice, failover));
        if metered {
            note_moved(&mut st.unmirrored, id, moved);
        }
        let listing = board.rare.as_mut().and_then(|r| r.listing.as_mut());
        if let (Notice::Participants(list), Some(listing)) = (&notice, listing) {
            // The machine reports a list only when it changed; the check
            // keeps the watch quiet even if that ever slipped.
            listing.list.send_if_modified(|now| {
                let changed = now != list;
                if changed {
                    now.clone_from(list);
                }
                changed
            });
            if let Some(first) = listing.first.take() {
                let _ = first.send(());
            }
        }
        st.held.push((id, notice));
    }
}

/// What a multi-lock publishes: its notices, and its parts' values taken
/// together.
struct GroupBoard {
    notices: watch::Sender<Vec<GroupNotice>>,
    lease: watch::Sender<Option<Instant>>,
    held: watch::Sender<bool>,
}

/// The watches of a multi-lock's [`GroupBoard`].
#[derive(Debug, Clone)]
pub(crate) struct GroupWatches {
    /// Its notices since its last acquisition began.
    pub(crate) notices: watch::Receiver<Vec<GroupNotice>>,
    /// The earliest lease of its parts (`None` while any part has none).
    pub(crate) lease: watch::Receiver<Option<Instant>>,
    /// Whether every part holds.
    pub(crate) held: watch::Receiver<bool>,
}

/// Sends machine `id`'s held notices, in order (see `State::held`).
fn send_held(held: &mut Vec<(MachineId, Notice)>, id: MachineId, board: &Board) {
    if held.iter().any(|(m, _)| *m == id) {
        let all = std::mem::take(held);
        for (m, notice) in all {
            if m == id {
                board.outputs.notify(notice);
            } else {
                held.push((m, notice));
            }
        }
    }
}

/// Machine `id` as its getters read now, while it runs.
fn snapshot<'a>(session: &'a Session, clock: &Clock, id: MachineId) -> Option<Snapshot<'a>> {
    let machine = session.machine(id)?;
    Some(Snapshot {
        role: machine.role(),
        node: machine.node(),
        lease: machine.lease_expiry().map(|t| clock.instant(t)),
        stats: machine.stats(),
        traffic: session.traffic(id).unwrap_or_default(),
    })
}

/// Tells the facade one thing of a machine on `path`.
fn tell(path: &str, board: &Board, mirror: Mirror) {
    use metrics::{gauge, histogram};
    match mirror {
        Mirror::Counters(before) => {
            let after = board.outputs.read(|s| s.stats);
            Facade::counters(path, &before, &after);
        }
        Mirror::Leader(value) => {
            gauge!("zkelect_leader", "path" => path.to_owned()).set(value);
        }
        Mirror::Histogram(name, d) => {
            histogram!(name, "path" => path.to_owned()).record(d);
        }
    }
}

/// How a hold is named in the log, in its recipe's words: a lock holder
/// is never "elected".
fn hold_words(rule: Option<Rule>) -> (&'static str, &'static str, &'static str) {
    match rule {
        None | Some(Rule::Election { .. }) => ("elected", "demoted", "leader changed"),
        Some(Rule::Mutex) => (
            "acquired the lock",
            "the lock is no longer held",
            "first holder changed",
        ),
        Some(Rule::Semaphore { .. }) => (
            "acquired a permit of the semaphore",
            "the permit is no longer held",
            "first holder changed",
        ),
        Some(Rule::Read) => (
            "acquired the read lock",
            "the read lock is no longer held",
            "first holder changed",
        ),
        Some(Rule::Write) => (
            "acquired the write lock",
            "the write lock is no longer held",
            "first holder changed",
        ),
    }
}

fn log(notice: &Notice, rule: Option<Rule>) {
    let (held, dropped, first) = hold_words(rule);
    match notice {
        Notice::Elected { token } => info!(token = token.0, "{held}"),
        Notice::Demoted { reason } => info!(%reason, "{dropped}"),
        Notice::Suspended => info!("suspended: no contact with the server"),
        Notice::Resumed => info!("resumed"),
        Notice::Joined { node } => info!(node, "joined the queue"),
        Notice::LeaderChanged { leader } => {
            info!(leader = leader.as_deref().unwrap_or("-"), "{first}");
        }
        Notice::PersistentSkipped { node } => warn!(
            node,
            "skipping a persistent child that looks like a contender: \
             no process holds it and it will not go away by itself"
        ),
        Notice::TokenRegressed { before, now } => warn!(
            before = before.0,
            now = now.0,
            "fencing token went backwards: the ensemble's history restarted (its data wiped, \
             or another ensemble); a fenced resource that saw the old tokens will refuse \
             this leader's until an operator lets it accept the restarted history"
        ),
        Notice::RevocationRequested => {
            info!("revocation requested: someone asks this hold to let go");
        }
        Notice::RevocationDelivered { path } => info!(path, "revocation request delivered"),
        Notice::Downgraded => info!("downgraded: the write lock is now a read lock"),
        Notice::DowngradeRefused { code } => warn!(
            %code,
            "downgrade refused by the server: this holder reads only, but readers behind it wait"
        ),
        Notice::RevocationFailed(e) => warn!(error = %e, "revocation request not delivered"),
        // Only an observer reports participants.
        Notice::Participants(_) => {}
        Notice::Error(e) => warn!(error = %e, "stopped by a fatal error"),
    }
}

/// Performs `request`, answered exactly once: a transport that panicked
/// answers as a broken connection (the request may or may not have been
/// applied, which the core knows how to handle).
pub(crate) async fn answered(transport: &dyn Transport, request: Request) -> Result<Reply, ZkCode> {
    // Unwind-safe: the transport's future is dropped after a panic, and
    // nothing of the caller's is borrowed across it.
    AssertUnwindSafe(transport.perform(request))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("(no message)");
            warn!(
                panic = message,
                "the transport panicked performing a request"
            );
            Err(ZkCode::ConnectionLoss)
        })
}
