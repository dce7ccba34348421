//! Following and leading: the watches on the nodes below and on our own,
//! contact and the lease, leadership won and lost, and the
//! watch and session events that drive them.

use super::state::*;
use super::*;

impl Candidate {
    pub(super) fn arm_own_watch(&mut self) {
        // The scan of the requests in flight last: it is the dearest test.
        if !matches!(
            self.session.own_watch,
            OwnWatch::Unarmed | OwnWatch::Recheck
        ) || self.session.own.is_none()
            || self.step == Step::Delete
            || self.own_watch_in_flight().is_some()
        {
            return;
        }
        let Some(own) = &self.session.own else { return };
        let name = own.name.to_string();
        let path = self.child_path(&name);
        let request = match self.own_watch_kind() {
            OwnWatchKind::Children => Request::GetChildren { path, watch: true },
            OwnWatchKind::Data => Request::GetData { path, watch: true },
        };
        self.emit(Purpose::WatchOwn { name, spent: false }, request);
    }

    /// Which watch our own node needs now. A child watch where it can do:
    /// it fires when the node is deleted, as a data watch does, but not
    /// when its data changes, so anyone's write (an operator's, the
    /// application's, a revocation request nobody here listens for) leaves
    /// it set, which saves setting it again (a request, and a notice). It
    /// reads no stat, so it is used only where the stat's checks are moot:
    /// protected names (always on) make the node bearing our name the one
    /// we created, and the connection has shown which session owns it (the
    /// create's or a read's stat on this connection, or a transport that
    /// reports session ids on connecting, where a move to another session is
    /// caught; else [`OwnWatch::Recheck`]).
    ///
    /// A data watch where a write must be heard: a revocable machine's (a
    /// request is a write), and a writer's once its downgrade mark is
    /// written (a write over it takes the mark away, and it writes it back:
    /// see [`keep_mark`](Self::keep_mark)). Until then a writer's is a child
    /// watch, as a mutex's: one that never downgrades pays for no write
    /// into its node. Decided from the state each time the watch is set, so
    /// a reconnect sets the kind the state calls for.
    pub(super) fn own_watch_kind(&self) -> OwnWatchKind {
        if self.session.own_watch == OwnWatch::Recheck
            || self.config.revocable()
            || self.keeps_mark()
        {
            OwnWatchKind::Data
        } else {
            OwnWatchKind::Children
        }
    }

    /// The watch the server set on our node, of `kind`: armed, unless the
    /// state now calls for a data watch where this is a child watch (a
    /// downgrade mark answered while it was in flight): then set that
    /// one too. The child watch stays on the server, and harmless: the
    /// server tells a session of a deletion once, whichever of its watches
    /// it fires.
    pub(super) fn own_watch_set(&mut self, kind: OwnWatchKind) {
        self.own_watch_armed(kind);
        self.own_watch_suits();
    }

    /// If the own-node watch armed is a child watch and the state now calls
    /// for a data watch, set one (see [`own_watch_kind`](Self::own_watch_kind)).
    /// The child watch still reports the deletion meanwhile, so the node
    /// does not count as unwatched.
    pub(super) fn own_watch_suits(&mut self) {
        if self.session.own_watch == OwnWatch::Armed(OwnWatchKind::Children)
            && self.own_watch_kind() == OwnWatchKind::Data
        {
            self.session.own_watch = OwnWatch::Unarmed;
        }
    }

    pub(super) fn send_probe(&mut self) {
        if self.connection != Connection::Connected || self.is_done() {
            return;
        }
        let in_flight = self
            .session
            .ops
            .values_mut()
            .find(|f| matches!(f.purpose, Purpose::Probe { .. }));
        if let Some(InFlight {
            purpose: Purpose::Probe { again },
            ..
        }) = in_flight
        {
            *again = true;
        } else {
            let path = self.config.path().to_owned();
            self.emit(
                Purpose::Probe { again: false },
                Request::Exists { path, watch: false },
            );
        }
        if !(self.timeout / 3).is_zero() {
            self.timers.set(Timer::Probe, self.next_probe(self.now));
        }
    }

    /// Called from the main lane's reply handlers: its request is answered.
    pub(super) fn retry_later(&mut self) {
        if self.connection == Connection::Connected {
            let delay = self
                .backoff
                .next_delay(self.config.backoff_min(), self.config.backoff_max());
            self.timers.set(Timer::Retry, self.now + delay);
        }
    }

    // ----- the lease ----------------------------------------------------------

    /// Contact with the server, for the clock to judge (see [`crate::lease`]).
    pub(super) fn contact(&self) -> Contact {
        Contact {
            connection: self.connection,
            last_ack: self.session.last_ack,
            timeout: self.timeout,
            probe: self.config.probe(),
        }
    }

    pub(super) fn link_ok(&self) -> bool {
        self.contact().link_ok(self.now)
    }

    /// Applies what the clock says about contact with the server.
    pub(super) fn check_link(&mut self) {
        let ok = self.link_ok();
        let was_up = std::mem::replace(&mut self.link_up, ok);
        if self.is_done() || self.goal == Goal::Out {
            return;
        }
        if was_up && !ok && self.suspension == Suspension::Clear {
            self.suspension = Suspension::Suspended;
            self.outbox.notice(Notice::Suspended);
        } else if !was_up && ok && self.suspension != Suspension::Clear {
            match self.leadership {
                // Resumed is said once a fresh listing confirms leadership.
                Leadership::Suspended(_) => {
                    self.suspension = Suspension::Resuming;
                    if !matches!(
                        self.step,
                        Step::List | Step::Create | Step::Recover | Step::Adopt { .. }
                    ) {
                        self.set_step(Step::List);
                    }
                }
                _ => {
                    // The silence may have held watch events back, sent long
                    // before the reply that ends it and queued behind it: the
                    // deletion of a node below, with our own node's deletion
                    // right behind, would elect us on a node an operator
                    // deleted seconds ago (lag seed 38944). A listing sent now
                    // is newer than any of them; until it is answered no
                    // watched node is left for a held event to match.
                    if matches!(self.step, Step::Watch { .. } | Step::Wait) {
                        self.set_step(Step::List);
                    }
                    self.say_resumed();
                }
            }
        }
        if self.leadership == Leadership::None {
            // Nothing for the clock to take away (`Leadership::checked` keeps
            // `None` as it is): most machines, most of the time, follow.
            return;
        }
        let may_live = self.contact().session_may_live(self.now);
        let lost;
        (self.leadership, lost) = self.leadership.checked(self.config.policy(), ok, may_live);
        if lost || self.own_node_lapsed() {
            self.demote(DemotionReason::Lost);
            // The node may well still be ours: look again once the server answers
            // (found by the simulator: a demoted leader that stayed in `Lead` never
            // re-listed and never led again).
            if self.step == Step::Lead {
                self.set_step(Step::List);
            }
        }
    }

    pub(super) fn say_resumed(&mut self) {
        if self.suspension != Suspension::Clear {
            self.suspension = Suspension::Clear;
            self.outbox.notice(Notice::Resumed);
        }
    }

    pub(super) fn arm_lease_timer(&mut self) {
        let next = if self.goal != Goal::Out && !self.is_done() {
            let leading = self.leadership != Leadership::None;
            let lease = self.contact().deadline(self.now, self.link_up, leading);
            // A leader's node unwatched: its lapse is a deadline too.
            match self.own_node_lapse().filter(|&at| leading && at > self.now) {
                Some(lapse) => Some(lease.map_or(lapse, |at| at.min(lapse))),
                None => lease,
            }
        } else {
            None
        };
        match next {
            Some(at) => self.timers.set(Timer::Lease, at),
            None => self.timers.stop(Timer::Lease),
        }
    }

    // ----- leadership ----------------------------------------------------------

    pub(super) fn become_leader(&mut self, zero_rtt: bool) {
        let Some(token) = self.token() else { return };
        let lapsed = self.own_node_lapsed();
        if !self.link_ok() || lapsed {
            // Proof of contact first: a fresh listing will decide. If an
            // answer sent this very instant is that proof and the link is
            // still not good (a session timeout whose two thirds round to
            // nothing: no contact is ever fresh enough), listing again at
            // once would never end: the next listing waits for a backoff.
            // So it does when the listing that showed our node is itself
            // too old to vouch for it.
            if lapsed || self.session.last_ack == Some(self.now) {
                self.retry_later();
            }
            self.set_step(Step::List);
            return;
        }
        self.set_step(Step::Lead);
        self.forget_lower();
        if self.session.round == Round::Contradicted {
            self.session.round = Round::Fresh;
        }
        match self.leadership {
            Leadership::Active(_) => {}
            Leadership::Suspended(_) => {
                self.leadership = Leadership::Active(token);
            }
            Leadership::None => {
                self.leadership = Leadership::Active(token);
                self.stats.elections += 1;
                if zero_rtt {
                    self.stats.zero_rtt_takeovers += 1;
                }
                self.outbox.notice(Notice::Elected { token });
            }
        }
        if self.suspension == Suspension::Resuming {
            self.say_resumed();
        }
        if self.config.rule().holds_alone() {
            let me = self.session.own.as_ref().map(|o| o.name.to_string());
            self.leader_seen(me);
        }
    }

    pub(super) fn demote(&mut self, reason: DemotionReason) {
        if self.leadership != Leadership::None {
            self.leadership = Leadership::None;
            self.outbox.notice(Notice::Demoted { reason });
        }
        if self.suspension == Suspension::Resuming && self.link_up {
            self.say_resumed();
        }
    }

    pub(super) fn leader_seen(&mut self, leader: Option<String>) {
        let same = match (&self.last_leader, &leader) {
            (Some(kept), Some(leader)) => kept.is(leader),
            (kept, leader) => kept.is_none() && leader.is_none(),
        };
        if !same {
            self.last_leader = leader.as_deref().map(KeptName::new);
            self.outbox.notice(Notice::LeaderChanged { leader });
        }
    }

    pub(super) fn fail(&mut self, error: CandidateError) {
        self.demote(DemotionReason::Failed);
        self.outbox.notice(Notice::Error(error));
        self.stop(End::Failed);
    }

    /// Stops for good. A closed candidate has nothing left on the server (its
    /// node is deleted, or the client closed its session) and awaits no reply;
    /// a failed one leaves its node and its requests in flight as they were,
    /// for the application to see: the node lives until the session ends.
    pub(super) fn stop(&mut self, end: End) {
        self.step = Step::Done(end);
        self.forget_watched();
        self.timers = TimerTable::default();
        if end == End::Closed {
            self.session.own = None;
            self.session.own_watch = OwnWatch::Unarmed;
            self.session.ops.clear();
        }
    }

    pub(super) fn refused(&mut self, request_verb: &str, path: String, code: ZkCode) {
        self.fail(CandidateError::Refused {
            verb: request_verb.to_owned(),
            path,
            code,
        });
    }

    // ----- leaving ---------------------------------------------------------------

    /// Our node vanished without our asking (revoked, or its session is gone).
    pub(super) fn own_gone(&mut self, reason: DemotionReason) {
        self.demote(reason);
        self.let_go_of_node();
        self.session.own = None;
        if self.session.round == Round::Contradicted {
            self.session.round = Round::Fresh;
        }
        self.drop_own_watch();
        self.forget_lower();
        if self.leaving() {
            return self.finish_leaving();
        }
        if reason == DemotionReason::Revoked && !self.config.rejoin_on_revoke() {
            self.goal = Goal::Out;
            self.set_step(Step::Idle);
        } else {
            self.set_step(Step::Create);
        }
    }

    // ----- replies -----------------------------------------------------------------

    /// Watches the k nearest nodes below ours that the last listing still knows
    /// of, arming one at a time; leads at once if fewer than k remain below.
    pub(super) fn watch_next_lower(&mut self) {
        match self.session.standing.next(self.limits()) {
            Next::Lead => self.lead_unlisted(true),
            Next::List => self.set_step(Step::List),
            Next::Watch(pred, class) => {
                // The same node by another table (a farther node's child
                // watch answered, and it is among the nearest now): send
                // the read the books ask for.
                if !matches!(&self.step, Step::Watch { pred: p, class: c } if **p == *pred && *c == class)
                {
                    self.set_step(Step::Watch {
                        pred: pred.into(),
                        class,
                    });
                }
            }
            Next::Wait => {
                // Every watch agrees with the listing: whatever contradicted
                // it is over.
                if self.session.round == Round::Contradicted {
                    self.session.round = Round::Fresh;
                }
                self.step = Step::Wait;
            }
        }
    }

    pub(super) fn on_watch_pred(&mut self, pred: String, result: Result<Reply, ZkCode>) {
        if !self.is_watching(&pred) {
            return;
        }
        match result {
            // Checked before the czxid: a look-alike an operator creates after
            // our node would otherwise read as a newer node under that name,
            // and every listing would show it again.
            Ok(Reply::Data { stat, .. }) if stat.ephemeral_owner == 0 => {
                self.skip_persistent(pred);
            }
            Ok(Reply::Data { data, stat }) => {
                // A node below ours is older than ours under one incarnation
                // of the path, but for a Curator reader (5.5 and later
                // create a downgrading writer's reader with the writer's
                // sequence, after ours): it blocks us whenever it was made.
                let own_czxid = match self.session.own.as_ref() {
                    Some(own) if !self.may_be_newer_below(&pred) => own.token.0,
                    _ => i64::MAX,
                };
                if !self.session.standing.learn(&pred, stat, own_czxid) {
                    // Another node bears the name now, created after ours: the
                    // path was deleted and recreated, and our node with it, or
                    // ours is not what we think. Look again, and check ours,
                    // after a backoff: a listing that shows the same again
                    // (a view that contradicts itself for good) must not
                    // make a loop of listings and reads.
                    self.own_watch_spent();
                    self.set_step(Step::List);
                    self.session.round = Round::Contradicted;
                    return self.retry_later();
                }
                if self.reads_past(&pred, &data) {
                    // A writer that downgraded: it reads now, so it blocks
                    // a reader no more. Left out of the standing until an
                    // event about it says to read it again.
                    self.session.standing.skip_persistent(pred.clone());
                    self.session.standing.remove(&pred);
                    return self.watch_next_lower();
                }
                self.session.standing.armed(&pred, WatchClass::Data);
                self.watch_next_lower();
            }
            // The farther node's child watch: set, and its stat unread.
            Ok(Reply::Children(_)) => {
                self.session.standing.armed(&pred, WatchClass::Child);
                self.watch_next_lower();
            }
            // A reply of another kind than the read asked for never gets
            // here: `on_reply` stops the machine at one (see `WrongReply`),
            // as a data reply's empty stat to a child-watch read once made
            // that node a persistent look-alike, and a listing then
            // elected with it below (found by the `candidate` fuzz target).
            Ok(_) => self.retry_later(),
            // Gone since the listing: one listing settles it, at once. A
            // second read answered `NoNode` before any read agrees with its
            // listing waits a backoff first: a listing that keeps showing a
            // node its read says is gone (a view that contradicts itself
            // for good) must not make a loop of listings and reads.
            Err(ZkCode::NoNode) => {
                if self.session.round == Round::Contradicted {
                    self.retry_later();
                }
                self.session.round = Round::Contradicted;
                self.pred_gone(&pred, false);
            }
            Err(code) => {
                let path = self.child_path(&pred);
                self.main_error("watch", path, code);
            }
        }
    }

    /// A watched node is persistent: no process holds it, and it goes only when
    /// someone deletes it. Leave it out from now on, as if it were gone, and
    /// watch the next one below (the listing's other nodes are as good as they
    /// were; a fresh listing is not needed).
    pub(super) fn skip_persistent(&mut self, pred: String) {
        if self.past().persistent_reported.insert(pred.clone()) {
            self.stats.persistent_skipped += 1;
            self.outbox
                .notice(Notice::PersistentSkipped { node: pred.clone() });
        }
        self.session.standing.skip_persistent(pred.clone());
        self.session.standing.remove(&pred);
        self.watch_next_lower();
    }

    /// A queue shared with another library has a negative sequence, where that
    /// library's text order and ours disagree: stop taking part.
    pub(super) fn refuse_shared_queue(&mut self, node: String) {
        self.demote(DemotionReason::Failed);
        self.outbox
            .notice(Notice::Error(CandidateError::SequenceWrapped { node }));
        self.goal = Goal::Close;
        self.start_leaving();
    }

    /// A watched node is gone: drop it from the last listing; with fewer than k
    /// nodes left below, this candidate leads now (they can only have shrunk).
    /// `zero_rtt`: learned from the notification itself, not from a read.
    pub(super) fn pred_gone(&mut self, pred: &str, zero_rtt: bool) {
        #[cfg(feature = "planted")]
        if self.planted == Some(crate::Planted::TakeoverBesideSecond)
            && zero_rtt
            && self.watching().as_deref() == Some(pred)
        {
            self.session.standing.remove(pred);
            return self.lead_unlisted(true);
        }
        self.session.standing.remove(pred);
        if !self.trusts_deletion_of(pred) {
            return self.set_step(Step::List);
        }
        let limits = self.limits();
        if self.session.standing.below() < limits.room {
            return self.lead_unlisted(zero_rtt);
        }
        if limits.spare > 0 && zero_rtt {
            // Told by its notice (a read that found a node gone takes the
            // path below: its listing settles what else went unseen).
            return self.spare_gone();
        }
        // Nodes below may have gone unseen since the listing (only the watched
        // ones report): list again, one round trip however stale the listing is,
        // instead of probing remembered names one by one (found by the benchmark:
        // at N = 50 a follower walked through up to 8 dead names).
        self.set_step(Step::List);
    }

    /// Plants `bug`, one of the [`Planted`](crate::Planted) bugs of a
    /// candidate, in this machine (only with the `planted` feature, a
    /// simulator's).
    #[cfg(feature = "planted")]
    pub(crate) fn plant(&mut self, bug: crate::Planted) {
        self.planted = Some(bug);
    }

    /// Under the two-watch takeover, a watched node went and the room is
    /// still full. Where every node that can still be below ours is named
    /// and watched, the books stay exact with no listing (the farther of
    /// two went first, the nearest stands: its deletion will elect us).
    /// Otherwise list again, keeping the watches that stand: a listing
    /// shows what is left below, and each name still among the nearest is
    /// the node watched (a protected name is never given twice), its watch
    /// still set on the server (a notice from it would have come first).
    pub(super) fn spare_gone(&mut self) {
        if self.session.standing.exact() {
            return self.watch_next_lower();
        }
        self.stats.second_relists += 1;
        self.relist_keeping_reads();
    }

    /// The books say we hold, without a listing since they last changed:
    /// lead, if our own node's watch stands (else it may be gone unseen, and
    /// another would hold too: list instead, one round trip).
    pub(super) fn lead_unlisted(&mut self, zero_rtt: bool) {
        if self.own_watch_stands() {
            self.become_leader(zero_rtt);
        } else {
            self.set_step(Step::List);
        }
    }

    /// A watched node's watch fired with an event that proves nothing by
    /// itself: read the node again, which re-arms the watch; the reply decides.
    pub(super) fn reread_watched(&mut self, pred: &str) {
        self.session.standing.disarm(pred);
        if self.is_watching(pred) {
            // The read in flight may be the one whose watch just fired: its
            // reply would arm nothing. Send another.
            self.supersede_main();
        }
        self.watch_next_lower();
    }

    /// Our node reads `data` at `version`: a revocation request there is
    /// reported, once per write of it (Curator's listener runs on every
    /// write of the message too).
    pub(super) fn check_revocation(&mut self, data: &[u8], version: i32) {
        if !self.config.revocable() || data != REVOKE_MESSAGE {
            return;
        }
        let Some(own) = self.session.own.as_mut() else {
            return;
        };
        if own.revoke_seen != version {
            own.revoke_seen = version;
            self.outbox.notice(Notice::RevocationRequested);
        }
    }

    pub(super) fn on_watch_own(
        &mut self,
        name: String,
        spent: bool,
        result: Result<Reply, ZkCode>,
    ) {
        if self.session.own.as_ref().map(|o| &*o.name) != Some(name.as_str()) {
            return;
        }
        match result {
            Ok(Reply::Data { data, stat }) => {
                if !self.owned_by_this_session(stat) {
                    // Our node belongs to another session: ours ended without a word.
                    return self.own_gone(DemotionReason::Expired);
                }
                if self
                    .session
                    .own
                    .as_ref()
                    .is_some_and(|o| o.token.0 != stat.czxid)
                {
                    // Another node of ours bears the name (only possible without
                    // protected names): the one we created is gone.
                    return self.own_gone(DemotionReason::Revoked);
                }
                self.learn_session(stat);
                self.check_revocation(&data, stat.version);
                self.keep_mark(&data, stat.version);
                // An event that overtook this reply already spent the watch.
                if !spent {
                    self.own_watch_set(OwnWatchKind::Data);
                } else {
                    self.own_node_seen();
                }
            }
            // A child watch on our node (see `own_watch_kind`).
            Ok(Reply::Children(_)) if !spent => self.own_watch_set(OwnWatchKind::Children),
            Ok(_) => self.own_node_seen(),
            Err(ZkCode::NoNode) if self.step != Step::Delete => {
                self.own_gone(DemotionReason::Revoked)
            }
            Err(ZkCode::NoNode) => {}
            Err(code) if code.is_fatal() => {
                let path = self.child_path(&name);
                self.refused("watch", path, code);
            }
            Err(_) => self.session.own_watch = OwnWatch::AwaitProof,
        }
    }

    pub(super) fn on_watch(&mut self, event: WatchEvent) {
        let own = self.session.own.as_ref().map(|o| &*o.name);
        if own.is_some_and(|own| self.is_child_path(&event.path, own)) {
            self.own_watch_spent();
            for flight in self.session.ops.values_mut() {
                if let Purpose::WatchOwn { spent, .. } = &mut flight.purpose {
                    *spent = true;
                }
            }
            if event.kind == WatchKind::NodeDeleted && self.step != Step::Delete {
                // Stop acting at once, then look before rejoining: after the
                // election path was deleted and recreated, a late event for an
                // old node can name our new one (found by the simulator). A
                // listing that still shows our name (which carries this
                // session's nonce) proves the event stale; one without it
                // confirms the revocation.
                self.demote(DemotionReason::Revoked);
                self.set_step(Step::List);
            }
            return;
        }
        let name = event.path.rsplit('/').next().unwrap_or_default();
        let is_child = self.is_child_path(&event.path, name);
        if is_child && self.session.standing.unskip(name) {
            // Whatever happened to it, the next read decides what it is.
            return;
        }
        if is_child && self.session.standing.is_watched(name) {
            let name = name.to_owned();
            if event.kind == WatchKind::NodeDeleted && name::never_reused(&name) {
                // Only one node ever bore this name: the event is about it,
                // however late it comes.
                self.pred_gone(&name, true);
            } else {
                // The watch is spent (a data change: the application's, an
                // operator's or a revocation request), or the deletion may be of an older node of the same
                // name (the path deleted and recreated, the event late): read
                // the node again rather than wait forever or trust the event.
                self.reread_watched(&name);
            }
            return;
        }
        let listens_to_children = self.config.strategy() == WatchStrategy::Parent;
        if event.path == self.config.path()
            && event.kind == WatchKind::NodeChildrenChanged
            && listens_to_children
        {
            match self.step {
                Step::Wait | Step::Watch { .. } => self.relist_keeping_reads(),
                // The event may have overtaken the reply of the listing that set
                // it (found by the benchmark at N = 50: the stale reply consumed
                // the watch and every follower waited forever).
                Step::List => {
                    for flight in self.session.ops.values_mut() {
                        if let Purpose::List { again } = &mut flight.purpose {
                            *again = true;
                        }
                    }
                }
                _ => {}
            }
            return;
        }
        self.stats.stale_events += 1;
    }

    // ----- session events ---------------------------------------------------------------

    pub(super) fn on_session(&mut self, event: SessionEvent) {
        match event {
            SessionEvent::Connected {
                session_id,
                timeout,
            } => self.on_connected(session_id, timeout),
            SessionEvent::Disconnected => {
                if self.connection == Connection::Connected {
                    self.connection = Connection::Disconnected;
                }
                // An event sent on the connection may be lost with it.
                self.own_node_unwatched();
                self.timers.stop(Timer::Retry);
            }
            SessionEvent::Expired => self.on_expired(),
            SessionEvent::AuthFailed => self.fail(CandidateError::AuthFailed),
            SessionEvent::Closed => {
                self.demote(DemotionReason::Closed);
                self.stop(End::Closed);
            }
        }
    }

    pub(super) fn on_connected(&mut self, session_id: Option<SessionId>, timeout: Duration) {
        if let (Some(new), Some(old)) = (session_id, self.session.id) {
            if new != old && self.connection != Connection::Expired {
                self.on_expired();
            }
        }
        let new_session = matches!(self.connection, Connection::Pending | Connection::Expired);
        self.connection = Connection::Connected;
        self.timeout = timeout;
        self.ids_reported = session_id.is_some();
        if session_id.is_some() {
            self.session.id = session_id;
        }
        self.timers.stop(Timer::Retry);
        self.backoff.reset();
        self.proof_of_contact();
        if self.config.probe()
            && !timeout.is_zero()
            && self.goal != Goal::Out
            && self.create_in_flight()
        {
            // Contact must be proven on this connection before leading
            // again. Every other step sends its main lane's request now (a
            // new session's create, a listing after a reconnect, a delete),
            // whose answer proves it as well as a probe's would; a create
            // still in flight holds the main lane until its fate is known.
            self.send_probe();
        }
        if new_session || self.goal == Goal::Out {
            return;
        }
        // Same session after a disconnect: the client may have lost every watch
        // (zookeeper-async does), so look again and re-arm them. A persistent
        // child's watch is gone too, so it is read again before it is skipped.
        // The reads that told live nodes from persistent look-alikes are
        // repeated as well: cheap (once per reconnect), and what the own-node
        // watch would report of a recreated path while it was down need not be
        // waited for.
        self.session.standing.forget_persistent();
        self.forget_watched();
        // A watch set (or going) may have been lost, and is set again. One
        // not yet wanted is wanted now too: its ticks stood still while the
        // connection was down (the probe timer runs only while connected),
        // and the node may have been deleted meanwhile, which its owner must
        // learn within the grace a revocation allows (a listing killed by
        // each drop in turn would never tell it). Where the connection did
        // not say which session it is on, the node's owner is read.
        self.drop_own_watch();
        if self.session.own.is_some() {
            self.session.own_watch = self.own_watch_lost();
        }
        // The session may have moved to a server behind the leader.
        self.session.reads = Reads::SyncFirst;
        match self.step {
            Step::Wait | Step::Lead | Step::Watch { .. } => self.set_step(Step::List),
            _ => self.supersede_main(),
        }
    }

    pub(super) fn on_expired(&mut self) {
        if self.connection == Connection::Expired {
            return;
        }
        self.demote(DemotionReason::Expired);
        self.connection = Connection::Expired;
        // The nodes this session may have left: ours, and the last create's
        // (in flight, or lost with its reply).
        let own_nonce = self
            .session
            .own
            .as_ref()
            .and_then(|o| name::nonce_of(&o.name))
            .map(str::to_owned);
        for nonce in [own_nonce, self.last_nonce()].into_iter().flatten() {
            let old_nonces = &mut self.past().old_nonces;
            if !old_nonces.contains(&nonce) {
                old_nonces.push_back(nonce);
            }
            if old_nonces.len() > OLD_NONCES_KEPT {
                old_nonces.pop_front();
            }
        }
        self.let_go_of_node();
        self.session = SessionState::new(self.session.number + 1);
        self.timers.stop(Timer::Retry);
        if self.leaving() {
            return self.finish_leaving();
        }
        if self.goal == Goal::In {
            self.step = Step::Create;
        }
    }
}
