//! The session machine: [`Session`] and what it is made of, one concept
//! a module (the connection, the watch table, the window, the deadlines,
//! the machines).

mod config;
mod contact;
mod deadlines;
mod event;
mod group;
mod link;
mod machine;
#[cfg(feature = "planted")]
mod planted;
mod watches;
mod window;

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;

use crate::command::{Command, OpId};
use crate::input::{Input, SessionEvent};
use crate::notice::Notice;
use crate::time::Timestamp;
#[cfg(feature = "planted")]
use crate::zk::Request;
use crate::zk::{WatchEvent, ZkCode};

pub use crate::zk::WatchClass;
pub use config::{SessionConfig, REQUESTS_OUT};
use contact::{Contact, ProbeDue};
use deadlines::{Close, Deadlines};
use event::Tally;
pub use event::{Event, Exit, Gone, GroupGone, Traffic};
use group::Group;
pub use group::GroupId;
pub use link::ConnectionState;
use link::Link;
pub use machine::{Machine, MachineId};
#[cfg(feature = "planted")]
pub use planted::Planted;
use watches::{disarm, Armings, Watches};
use window::{Line, Window};
pub use window::{Sender, OPENING, STARTING_EVERY};

/// How many events' room the session keeps once they are polled (an
/// input's handful; a burst's buffer is given back).
const EVENTS_KEPT: usize = 64;

/// Plants `bug` in `machine`, where it is a bug of one machine.
#[cfg(feature = "planted")]
fn plant_in(machine: &mut Machine, bug: Planted) {
    if matches!(
        bug,
        Planted::TakeoverBesideSecond
            | Planted::CloseOnStaleListing
            | Planted::DowngradeWithoutMark
    ) {
        if let Some(candidate) = machine.candidate_mut() {
            candidate.plant(bug);
        }
    }
}

/// The earlier of two optional deadlines (either, if only one is set).
fn earliest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Where the session is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Open,
    /// Closing every machine; past the deadline, those left are given up on.
    Closing {
        deadline: Timestamp,
    },
    /// Every machine is done: the driver closes the transport.
    Finished,
    /// The session's credentials were refused (or could not be put back
    /// after a reconnect): every machine stopped on it and the session
    /// ended at once; a machine added later stops the same way. Finished,
    /// for the driver.
    Refused,
}

/// One machine on the session, and the session's books on it.
#[derive(Debug, Clone)]
struct Slot {
    machine: Machine,
    /// Its entry in the deadline index.
    filed: Option<Timestamp>,
    /// Whether it is closing, and until when.
    close: Close,
    armed: Armings,
    tally: Tally,
    /// The multi-lock it is a part of, if any.
    group: Option<GroupId>,
    /// Given up on ([`Exit::Abandoned`]) while the session stays open: the
    /// driver was told it stopped, and the session goes on closing it out
    /// of sight, so its node does not outlive it in a queue.
    detached: bool,
    /// Whether it has had an answer, and how many of its requests wait in
    /// the window's starting line: which line its next request joins.
    answered: bool,
    starting_waiting: u32,
}

/// One ZooKeeper session and every machine on it, as one sans-IO machine.
///
/// A [`Candidate`](crate::Candidate) is one participant; what users run is a
/// session carrying many of them (elections, locks, observers), because
/// ZooKeeper gives a session one of everything: one op-id space, one watch
/// per path and kind, one connection, one lease. [`Session`] owns the
/// machines and what they share, as quinn-proto's `Endpoint` routes for its
/// connections, so the same router runs under the tokio driver of the
/// `zkelect` crate, in the simulator, and in any runtime of the user's:
///
/// - **One op-id space**: every command out carries a session
///   op id; its reply is routed back to the machine that sent it, under the
///   machine's own id. A reply for a machine that has gone is dropped.
/// - **The watch table**: an event reaches every machine armed
///   on its path and kind since the last firing; a machine whose arming is
///   unanswered stays armed. An event can reach a machine twice, never not
///   at all.
/// - **The connection**: the spans between session events are
///   counted here, once; every machine gets every session event, and a
///   machine added later the last `Connected`. One liveness probe per
///   session, every three tenths of the timeout, and the contact it proves
///   fed to every machine.
/// - **The request window**: at most
///   [`SessionConfig::with_requests_out`] requests out at once, the rest
///   queued in order, machines under way (answered before) ahead of those
///   starting; the window opens at [`OPENING`] and widens by one per answer
///   (so a burst's first answers, a missing parent path, are learned before
///   the burst is sent); while a starting machine's request waits, one in
///   every [`STARTING_EVERY`] sent is a starting machine's (so machines
///   under way that keep the window full cannot hold a start back for
///   ever); the probe never waits.
/// - **Closing**: a machine's close may take its close
///   timeout; past it the driver is told the machine stopped
///   ([`Exit::Abandoned`]), and an open session goes on closing it out of
///   sight, so its node does not block a queue while the session lives.
///   The session closes when its machines are done (or its own close
///   timeout passes), or when a machine that ends it is done; and at once
///   when its credentials are refused ([`SessionEvent::AuthFailed`]: every
///   machine stops with it, nothing more is sent, not even a delete that
///   could need those credentials, and [`ConnectionState::AuthFailed`]
///   says why), so that its driver closes it and its nodes do not block
///   others behind owners that have stopped.
/// - **Recipe rules**: a lock's candidate leaves the queue once its hold is
///   lost ([`Machine::lock`]), and its release — its close — sends its
///   node's delete in the same step.
///
/// # The run loop
///
/// As for a candidate: feed one input ([`handle`](Session::handle),
/// [`handle_timeout`](Session::handle_timeout), an intent such as
/// [`join`](Session::join)), `now` first; drain
/// [`poll_event`](Session::poll_event) (notices before requests), then
/// [`poll_command`](Session::poll_command) (answer each command exactly once
/// with an [`Input::Reply`] under its op id); sleep until
/// [`poll_timeout`](Session::poll_timeout) or the next input.
///
/// Every entry point fires what is due at `now` before it acts on its input:
/// a process that froze learns from each machine that its lease ran out
/// before it acts on anything that queued up meanwhile. And no input is
/// answered by a retry at the same instant: after any call at `now`,
/// [`poll_timeout`](Session::poll_timeout) is later than `now` (the
/// property the session's tests drive adversarially), so a driver that
/// picks its ready inputs in any fixed order cannot spin at one instant.
///
/// ```
/// use std::time::Duration;
/// use zkelect_core::*;
///
/// let t = Timestamp::from_millis(0);
/// let mut session = Session::new(SessionConfig::new(7));
/// let a = session.add(t, Machine::election(Candidate::new(Config::builder("/svc/a", "me").build()?)));
/// let b = session.add(t, Machine::election(Candidate::new(Config::builder("/svc/b", "me").build()?)));
/// session.join(t, a)?;
/// session.join(t, b)?;
/// session.handle(t, Input::Session(SessionEvent::Connected {
///     session_id: Some(SessionId(1)),
///     timeout: Duration::from_secs(10),
/// }));
/// // Each machine's requests go out under session-wide op ids. The window
/// // opens at one request: a's create goes first, b's waits for an answer.
/// let commands: Vec<Command> = std::iter::from_fn(|| session.poll_command()).collect();
/// assert_eq!(commands.len(), OPENING);
/// assert!(commands[0].request.path().starts_with("/svc/a/"));
/// assert_eq!(session.sender(commands[0].op).and_then(|s| s.machine()), Some(a));
/// assert_eq!(session.requests_waiting(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Session {
    config: SessionConfig,
    now: Timestamp,
    /// Boxed: a slot is a few hundred bytes, and a map's node holds eleven
    /// entries inline but is often half full.
    slots: BTreeMap<MachineId, Box<Slot>>,
    last_id: u64,
    /// Multi-locks, by id.
    groups: BTreeMap<GroupId, Group>,
    last_group: u64,
    deadlines: Deadlines,
    watches: Watches,
    window: Window,
    contact: Contact,
    link: Link,
    events: VecDeque<Event>,
    phase: Phase,
    #[cfg(feature = "planted")]
    planted: Option<Planted>,
}

impl Session {
    /// A session with no machines, not yet connected.
    pub fn new(config: SessionConfig) -> Self {
        Self {
            config,
            now: Timestamp::ZERO,
            slots: BTreeMap::new(),
            last_id: 0,
            groups: BTreeMap::new(),
            last_group: 0,
            deadlines: Deadlines::default(),
            watches: Watches::new(config.seed()),
            window: Window::new(config.requests_out()),
            contact: Contact::new(),
            link: Link::new(),
            events: VecDeque::new(),
            phase: Phase::Open,
            #[cfg(feature = "planted")]
            planted: None,
        }
    }

    /// Plants `bug` in this session, to show a checker catches it (only
    /// with the `planted` feature, a simulator's).
    #[cfg(feature = "planted")]
    pub fn plant(&mut self, bug: Planted) {
        self.planted = Some(bug);
        for slot in self.slots.values_mut() {
            plant_in(&mut slot.machine, bug);
        }
    }

    // ----- getters ------------------------------------------------------------

    /// The settings.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// The latest `now` the session was given.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// A machine of the session, while it runs.
    #[inline]
    pub fn machine(&self, id: MachineId) -> Option<&Machine> {
        self.slots
            .get(&id)
            .filter(|s| !s.detached)
            .map(|s| &s.machine)
    }

    /// Every machine of the session, in id order.
    pub fn machines(&self) -> impl Iterator<Item = (MachineId, &Machine)> + '_ {
        self.slots
            .iter()
            .filter(|(_, s)| !s.detached)
            .map(|(id, s)| (*id, &s.machine))
    }

    /// A machine's requests so far, while it runs.
    pub fn traffic(&self, id: MachineId) -> Option<Traffic> {
        self.slots
            .get(&id)
            .filter(|s| !s.detached)
            .map(|s| s.tally.widen())
    }

    /// Who sent `op`, while it is unanswered.
    #[inline]
    pub fn sender(&self, op: OpId) -> Option<Sender> {
        self.window.sender(op)
    }

    /// The machines `event` would reach now (the session's watch table;
    /// nothing fires).
    pub fn reaches(&self, event: &WatchEvent) -> Vec<MachineId> {
        let mut to = self.watches.would_reach(event);
        to.retain(|id| self.machine(*id).is_some());
        to
    }

    /// The span now: how many session events the session has had.
    pub fn span(&self) -> u64 {
        self.contact.span()
    }

    /// How many ZooKeeper sessions it has been on (a `Connected` after an
    /// expiry starts another).
    pub fn sessions(&self) -> u64 {
        self.contact.sessions()
    }

    /// The session's connection state (see [`ConnectionState`]): the
    /// counterpart of Curator's `ConnectionStateListener`, every change also
    /// an [`Event::Connection`].
    pub fn connection_state(&self) -> ConnectionState {
        self.link.state()
    }

    /// Whether the last session event was `Connected`.
    pub fn is_connected(&self) -> bool {
        self.contact.connected().is_some()
    }

    /// Closing: every machine is being closed.
    pub fn is_closing(&self) -> bool {
        !matches!(self.phase, Phase::Open)
    }

    /// Closed and every machine done, or ended by refused credentials: the
    /// driver closes its transport.
    pub fn is_finished(&self) -> bool {
        matches!(self.phase, Phase::Finished | Phase::Refused)
    }

    /// Requests out now (polled and unanswered), the probe included.
    pub fn requests_out(&self) -> usize {
        self.window.out()
    }

    /// Requests waiting for a place in the window.
    pub fn requests_waiting(&self) -> usize {
        self.window.waiting()
    }

    /// Watches armed, counted once per machine.
    pub fn armings(&self) -> usize {
        self.watches.len()
    }

    // ----- intents --------------------------------------------------------------

    /// Runs `machine` on the session. If the session is connected, the
    /// machine is told the last `Connected` at once, as the others were; if
    /// it is closing, the machine is closed at once.
    pub fn add(&mut self, now: Timestamp, machine: Machine) -> MachineId {
        #[cfg(feature = "planted")]
        let mut machine = machine;
        #[cfg(feature = "planted")]
        if let Some(bug) = self.planted {
            plant_in(&mut machine, bug);
        }
        self.enter(now);
        self.last_id += 1;
        let id = MachineId(self.last_id);
        self.slots.insert(
            id,
            Box::new(Slot {
                machine,
                filed: None,
                close: Close::No,
                armed: Armings::default(),
                tally: Tally::default(),
                group: None,
                detached: false,
                answered: false,
                starting_waiting: 0,
            }),
        );
        if self.phase == Phase::Refused {
            // It could do no more than those that stopped on the refusal:
            // it stops the same way, and its handle says why.
            self.feed(id, Input::Session(SessionEvent::AuthFailed));
        } else if self.is_closing() {
            self.close_machine(id);
        } else if let Some(connected) = self.contact.connected() {
            self.feed(id, Input::Session(connected));
        } else {
            self.after(id);
        }
        id
    }

    /// The machine takes part (again); see [`Candidate::join`](crate::Candidate::join).
    /// Nothing for an observer.
    pub fn join(&mut self, now: Timestamp, id: MachineId) -> Result<(), Gone> {
        self.enter(now);
        let now = self.now;
        self.slot(id)?.machine.join(now);
        self.after(id);
        Ok(())
    }

    /// The machine steps down; see [`Candidate::resign`](crate::Candidate::resign).
    /// Nothing for an observer.
    pub fn resign(&mut self, now: Timestamp, id: MachineId, rejoin: bool) -> Result<(), Gone> {
        self.enter(now);
        let now = self.now;
        self.slot(id)?.machine.resign(now, rejoin);
        self.after(id);
        Ok(())
    }

    /// A holding writer reads from now on and lets readers behind it hold
    /// beside it; see [`Candidate::downgrade`](crate::Candidate::downgrade).
    /// `Ok(false)` if the machine is not a writer that holds.
    pub fn downgrade(&mut self, now: Timestamp, id: MachineId) -> Result<bool, Gone> {
        self.enter(now);
        let now = self.now;
        let done = self.slot(id)?.machine.downgrade(now);
        self.after(id);
        Ok(done)
    }

    /// The machine leaves for good: a leader (holder) is demoted and its
    /// node's delete goes out in this same call — a lock's release.
    /// Within its close timeout the machine stops
    /// ([`Event::Stopped`]); past it, the driver is told it was given up
    /// on, and the session finishes its close out of sight.
    pub fn close(&mut self, now: Timestamp, id: MachineId) -> Result<(), Gone> {
        self.enter(now);
        self.slot(id)?;
        self.close_machine(id);
        Ok(())
    }

    /// Closes every machine, then the session: it is finished once they
    /// are done, or once its close timeout has passed.
    pub fn close_session(&mut self, now: Timestamp) {
        self.enter(now);
        self.start_closing();
    }

    fn start_closing(&mut self) {
        if self.phase == Phase::Open {
            self.phase = Phase::Closing {
                deadline: self.now + self.config.close_timeout(),
            };
            // A machine given up on earlier has only its node left to
            // delete, and the session's end takes that with it.
            let detached: Vec<MachineId> = self
                .slots
                .iter()
                .filter(|(_, s)| s.detached)
                .map(|(id, _)| *id)
                .collect();
            for id in detached {
                self.finish(id, Exit::Abandoned);
            }
            let ids: Vec<MachineId> = self.slots.keys().copied().collect();
            for id in ids {
                self.close_machine(id);
            }
        }
        // A close timeout of zero gives up now, not at a deadline filed
        // for this very instant.
        self.give_up_if_closed_too_long();
    }

    // ----- inputs ---------------------------------------------------------------

    /// Feeds one input from the transport: a reply (under its session op
    /// id), a watch event, or a session event.
    pub fn handle(&mut self, now: Timestamp, input: Input) {
        self.enter(now);
        match input {
            Input::Reply { op, result } => self.reply(op, result),
            Input::Watch(event) => self.watch(event),
            Input::Session(event) => self.session_event(event),
        }
    }

    /// Fires what is due at `now`. Spurious calls are harmless.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        #[cfg(feature = "planted")]
        if self.planted == Some(Planted::TimerAnsweredByNothing) {
            return;
        }
        self.enter(now);
    }

    // ----- outputs --------------------------------------------------------------

    /// The next event (notices, updates, stops). Drain before commands.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        let event = self.events.pop_front();
        if event.is_none() && self.events.capacity() > EVENTS_KEPT {
            // Give a burst's buffer back: an idle session of thousands of
            // machines would otherwise keep its start-up's peak.
            self.events = VecDeque::new();
        }
        event
    }

    /// The next request to send, under its session op id: the probe first,
    /// then the machines' in order, while the window has room.
    #[must_use]
    pub fn poll_command(&mut self) -> Option<Command> {
        let bound = self.config.request_timeout().or(self.link.timeout());
        let (command, line) = self.window.poll(self.now, self.contact.span(), bound)?;
        if let Some(Sender::Machine { machine, .. }) = self.window.sender(command.op) {
            if let Some(slot) = self.slots.get_mut(&machine) {
                if line == Some(Line::Starting) {
                    slot.starting_waiting = slot.starting_waiting.saturating_sub(1);
                }
                let arms = self
                    .watches
                    .arming(machine, &mut slot.armed, &command.request);
                self.window.arms(command.op, arms);
            }
        }
        Some(command)
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next, if ever.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        // Folded by hand, not over an iterator of the five: a driver asks
        // after every input, and the iterator's plumbing cost more than
        // the comparisons.
        let next = earliest(self.deadlines.first(), self.groups_due());
        // A finished or refused session's requests still out can teach no
        // machine anything: their bound is no deadline of its.
        let next = match self.phase {
            Phase::Finished | Phase::Refused => return next,
            Phase::Closing { deadline } => earliest(next, Some(deadline)),
            Phase::Open => next,
        };
        let next = earliest(next, self.window.next_due());
        earliest(earliest(next, self.contact.next()), self.link.next())
    }

    // ----- plumbing ---------------------------------------------------------------

    fn slot(&mut self, id: MachineId) -> Result<&mut Slot, Gone> {
        self.slots
            .get_mut(&id)
            .filter(|s| !s.detached)
            .map(|s| &mut **s)
            .ok_or(Gone(id))
    }

    /// Every entry point starts here: time only moves forward, and what is
    /// due is fired before the input is acted on.
    fn enter(&mut self, now: Timestamp) {
        self.now = self.now.max(now);
        let now = self.now;
        // Requests out past their bound are answered first, as a transport
        // would answer them: lost to the connection, so no contact proven,
        // and the server may yet apply them (the machines recover as from a
        // lost connection). Their real answers, if they come, are none.
        // First, so that what their machines set for now is fired below
        // (a machine whose own timer came due at this instant may set
        // another for it on hearing the answer).
        while let Some(op) = self.window.overdue(now) {
            self.reply(op, Err(ZkCode::OperationTimeout));
        }
        let due = self.deadlines.take_due(now);
        for &id in &due {
            let Some(slot) = self.slots.get_mut(&id) else {
                continue;
            };
            slot.filed = None;
            if slot.close.deadline().is_some_and(|d| d <= now) {
                self.finish(id, Exit::Abandoned);
                continue;
            }
            if slot.machine.poll_timeout().is_some_and(|t| t <= now) {
                slot.machine.handle_timeout(now);
            }
            self.after(id);
        }
        self.deadlines.give_back(due);
        self.link_changed(None);
        self.groups_at(now);
        if self.is_finished() {
            return;
        }
        self.probe_if_due();
        self.give_up_if_closed_too_long();
    }

    /// The probe, if it is due now (see [`Contact::probe_if_due`]).
    fn probe_if_due(&mut self) {
        match self.contact.probe_if_due(self.now) {
            Some(ProbeDue::Send(request)) => self.window.submit_probe(request),
            Some(ProbeDue::Fresh(sent_at)) => self.contact_to_all(sent_at),
            None => {}
        }
    }

    /// Past the session's close deadline, every machine left is given up on.
    fn give_up_if_closed_too_long(&mut self) {
        if let Phase::Closing { deadline } = self.phase {
            if deadline <= self.now {
                let ids: Vec<MachineId> = self.slots.keys().copied().collect();
                for id in ids {
                    self.finish(id, Exit::Abandoned);
                }
            }
        }
        self.check_finished();
    }

    /// Publishes a change of the connection state, and whatever the clock
    /// says of the new state at once (so that no deadline is left at `now`).
    fn link_changed(&mut self, changed: Option<ConnectionState>) {
        if let Some(state) = changed {
            self.events.push_back(Event::Connection(state));
        }
        if let Some(state) = self.link.tick(self.now) {
            self.events.push_back(Event::Connection(state));
        }
    }

    fn check_finished(&mut self) {
        if matches!(self.phase, Phase::Closing { .. }) && self.slots.is_empty() {
            self.phase = Phase::Finished;
        }
    }

    fn close_machine(&mut self, id: MachineId) {
        let now = self.now;
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        if slot.close == Close::No {
            slot.close = slot
                .machine
                .close_timeout()
                .map_or(Close::Unbounded, |d| Close::Until(now + d));
        }
        slot.machine.close(now);
        self.after(id);
    }

    fn feed(&mut self, id: MachineId, input: Input) {
        if let Some(slot) = self.slots.get_mut(&id) {
            slot.machine.handle(self.now, input);
            self.after(id);
        }
    }

    fn session_event(&mut self, event: SessionEvent) {
        let sessions = self.contact.sessions();
        self.contact.session_event(self.now, event);
        let new_session = self.contact.sessions() > sessions;
        let changed = self.link.session_event(self.now, event, new_session);
        self.link_changed(changed);
        if matches!(event, SessionEvent::Expired | SessionEvent::Closed) {
            self.watches.dropped();
        }
        // Known before the machines hear it: one that ends the session
        // must not start a close of the others before they have heard it
        // (`start_closing` does nothing once the session is not open).
        if event == SessionEvent::AuthFailed {
            self.phase = Phase::Refused;
        }
        let ids: Vec<MachineId> = self.slots.keys().copied().collect();
        for id in ids {
            self.feed(id, Input::Session(event));
        }
        if event == SessionEvent::AuthFailed {
            self.end_refused();
        }
    }

    /// The session's credentials were refused, or could not be put back on
    /// a new connection: nothing on it can be done as its owner, so it
    /// ends, as ZooKeeper's own client ends on `AUTH_FAILED`. Every machine
    /// has stopped on the event itself (a candidate, an observer and a
    /// revocation request each fail with it, sending nothing); one that had
    /// not is given up on at once rather than closed: its node's delete
    /// may need the very credentials refused, and the transport's close of
    /// the session takes every ephemeral node of it anyway, where kept
    /// alive it would block every other candidate behind a node whose
    /// owner has stopped. Nothing waiting is sent: the close is the last
    /// request.
    fn end_refused(&mut self) {
        let ids: Vec<MachineId> = self.slots.keys().copied().collect();
        for id in ids {
            self.finish(id, Exit::Abandoned);
        }
        self.window.drop_waiting();
    }

    fn watch(&mut self, event: WatchEvent) {
        #[allow(unused_mut)] // a planted bug changes them
        let (mut to, mut spent) = self.watches.fire(&event);
        #[cfg(feature = "planted")]
        self.planted_routing(&event, &mut to, &mut spent);
        for (id, entry) in spent {
            if let Some(slot) = self.slots.get_mut(&id) {
                disarm(&mut slot.armed, entry);
            }
        }
        for id in to {
            #[cfg(feature = "planted")]
            if self.planted_deafens(id, &event) {
                continue;
            }
            self.feed(id, Input::Watch(event.clone()));
        }
    }

    /// The routing a planted bug makes of `event`.
    #[cfg(feature = "planted")]
    fn planted_routing(
        &mut self,
        event: &WatchEvent,
        to: &mut Vec<MachineId>,
        spent: &mut Vec<(MachineId, watches::Armed)>,
    ) {
        match self.planted {
            Some(Planted::SharedWatchToOne) => {
                if let Some(first) = to.first().copied() {
                    to.retain(|id| *id == first);
                }
            }
            Some(Planted::WatchByTable) => {
                let parent = event.path.rsplit_once('/').map_or("", |(p, _)| p);
                let slots = &self.slots;
                let other = |id: MachineId| {
                    slots.get(&id).is_some_and(|s| {
                        let path = s.machine.path();
                        path != event.path && path != parent
                    })
                };
                let (more, more_spent) = self.watches.fire_by_table(event, other);
                to.extend(more);
                watches::sort_ids(to);
                spent.extend(more_spent);
            }
            _ => {}
        }
    }

    /// Whether a planted bug keeps machine `id` from hearing `event`.
    #[cfg(feature = "planted")]
    fn planted_deafens(&self, id: MachineId, event: &WatchEvent) -> bool {
        self.planted == Some(Planted::ObserverSkipsRelist)
            && self.slots.get(&id).is_some_and(|s| {
                s.machine.as_observer().is_some() && s.machine.path() == event.path
            })
    }

    fn reply(&mut self, op: OpId, result: Result<crate::zk::Reply, ZkCode>) {
        let Some(flight) = self.window.answer(op) else {
            // Never sent, or answered already: no answer.
            return;
        };
        let contact = !matches!(
            result,
            Err(ZkCode::ConnectionLoss | ZkCode::OperationTimeout | ZkCode::SessionExpired)
        );
        self.contact.answered(flight.span, flight.sent_at, contact);
        if contact {
            self.window.widen();
        }
        if contact && flight.span == self.contact.span() {
            let changed = self.link.answered(self.now, flight.sent_at);
            self.link_changed(changed);
        }
        let (id, own) = match flight.sender {
            Sender::Machine { machine, op } => (machine, op),
            Sender::Probe => {
                if let Some(sent_at) = self.contact.probe_answered(self.now, flight.span, contact) {
                    self.contact_to_all(sent_at);
                }
                return;
            }
        };
        if let Some(entry) = flight.arms {
            self.watches.answered(id, entry);
        }
        let Some(slot) = self.slots.get_mut(&id) else {
            // The machine has gone: dropped.
            return;
        };
        if let Err(code) = &result {
            slot.tally.failed(*code == ZkCode::OperationTimeout);
        }
        slot.answered = true;
        self.feed(id, Input::Reply { op: own, result });
    }

    /// Every machine hears of contact proven at `sent_at`.
    fn contact_to_all(&mut self, sent_at: Timestamp) {
        // The machines there now, walked in id order without a list of
        // them (this runs on every answered probe): one added meanwhile
        // has a higher id than the last, one gone is skipped.
        let Some(&last) = self.slots.keys().next_back() else {
            return;
        };
        let mut next = self.slots.keys().next().copied();
        while let Some(id) = next {
            if let Some(slot) = self.slots.get_mut(&id) {
                slot.machine.session_answered(self.now, sent_at);
                self.after(id);
            }
            next = self
                .slots
                .range((Bound::Excluded(id), Bound::Included(last)))
                .next()
                .map(|(id, _)| *id);
        }
    }

    /// After a machine took an input: its notices become events, its
    /// commands are queued under session op ids, its deadline is filed
    /// again; once done, it leaves.
    fn after(&mut self, id: MachineId) {
        let now = self.now;
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        let grouped = slot.group;
        let mut demoted = None;
        while let Some(notice) = slot.machine.poll_notice(now) {
            if let Notice::Demoted { reason } = notice {
                demoted = Some(reason);
            }
            // A detached machine's driver was told it stopped.
            if !slot.detached {
                self.events.push_back(Event::Notice {
                    machine: id,
                    notice,
                });
            }
        }
        while let Some(Command { op, request }) = slot.machine.poll_command() {
            #[cfg(feature = "planted")]
            let request = match (self.planted, request) {
                (
                    Some(Planted::ObserverSetsNoCreationWatch),
                    Request::Exists { path, watch: true },
                ) if slot.machine.as_observer().is_some() => Request::Exists { path, watch: false },
                (_, request) => request,
            };
            slot.tally.sent();
            let line = if slot.answered && slot.starting_waiting == 0 {
                Line::UnderWay
            } else {
                slot.starting_waiting += 1;
                Line::Starting
            };
            self.window
                .submit(Sender::Machine { machine: id, op }, request, line);
        }
        if !slot.detached {
            self.events.push_back(Event::Updated(id));
        }
        if slot.machine.is_done() {
            let exit = if slot.machine.is_failed() {
                Exit::Failed
            } else {
                Exit::Closed
            };
            self.finish(id, exit);
            return;
        }
        if slot.close.deadline().is_some_and(|d| d <= now) {
            // Its close ran out of time at once (a close timeout of zero):
            // given up on now, not at a deadline filed for this instant.
            self.finish(id, Exit::Abandoned);
            return;
        }
        let due = match (slot.machine.poll_timeout(), slot.close.deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        slot.filed = self.deadlines.file(id, slot.filed, due);
        if let Some(gid) = grouped {
            if let Some(reason) = demoted {
                self.group_heard(gid, id, reason);
            }
            self.step_group(gid);
        }
    }

    /// A machine leaves the session. One given up on while the session
    /// stays open is only detached: its driver is told it stopped, and its
    /// close goes on out of sight (a candidate still deletes its node, with
    /// its retries, once the server answers), so its node does not block a
    /// queue for as long as the session lives.
    fn finish(&mut self, id: MachineId, exit: Exit) {
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        // One that ends the session is not detached: the session closes
        // now, and its end takes the node.
        if exit == Exit::Abandoned
            && self.phase == Phase::Open
            && !slot.detached
            && !slot.machine.is_done()
            && !slot.machine.ends_session()
        {
            slot.detached = true;
            slot.close = Close::Unbounded;
            self.events.push_back(Event::Stopped {
                machine: id,
                path: slot.machine.path().to_owned(),
                exit,
                stats: Box::new(slot.machine.stats()),
                traffic: slot.tally.widen(),
            });
            // Its own timer may be due at this very instant (given up on
            // at its close deadline, before its timer was looked at): fired
            // now, or it would be filed for an instant already handled and
            // the session would be due again at once.
            let now = self.now;
            if slot.machine.poll_timeout().is_some_and(|t| t <= now) {
                slot.machine.handle_timeout(now);
            }
            self.after(id);
            return;
        }
        let Some(slot) = self.slots.remove(&id) else {
            return;
        };
        if slot.detached {
            // Told already: it leaves without a word.
            let Slot {
                filed,
                armed,
                group,
                ..
            } = *slot;
            self.deadlines.file(id, filed, None);
            self.watches.forget(id, armed);
            if let Some(gid) = group {
                self.step_group(gid);
            }
            self.check_finished();
            return;
        }
        let Slot {
            machine,
            filed,
            armed,
            tally,
            group,
            ..
        } = *slot;
        self.deadlines.file(id, filed, None);
        self.watches.forget(id, armed);
        self.events.push_back(Event::Stopped {
            machine: id,
            path: machine.path().to_owned(),
            exit,
            stats: Box::new(machine.stats()),
            traffic: tally.widen(),
        });
        // After a refusal the session ends once every machine has heard it
        // (`end_refused`), not at the first to stop: the phase is no longer
        // open, so this starts no close.
        if machine.ends_session() {
            self.start_closing();
        }
        if let Some(gid) = group {
            self.step_group(gid);
        }
        self.check_finished();
    }
}

#[cfg(test)]
mod tests;
