//! Joining and leaving the queue: the parents, the protected create and its
//! recovery, adopting a found node, the listing, and the delete of our node.

use super::state::*;
use super::*;

impl Candidate {
    pub(super) fn start_leaving(&mut self) {
        self.forget_watched();
        self.forget_lower();
        if self.create_in_flight() {
            // The create's reply decides: the node will be deleted when it is known.
            self.step = Step::Create;
        } else if self.session.create_uncertain {
            self.set_step(Step::Recover);
        } else if self.session.own.is_some() {
            self.set_step(Step::Delete);
        } else {
            self.set_step(Step::Idle);
            self.finish_leaving();
        }
    }

    pub(super) fn leaving(&self) -> bool {
        matches!(self.goal, Goal::Leave { .. } | Goal::Close)
    }

    /// The node is gone (or never was): complete the resign or close.
    pub(super) fn finish_leaving(&mut self) {
        if self.goal != Goal::Close {
            self.let_go_of_node();
        }
        self.session.own = None;
        self.drop_own_watch();
        match self.goal {
            Goal::Leave { rejoin: true } => {
                self.goal = Goal::In;
                self.set_step(Step::Create);
            }
            Goal::Leave { rejoin: false } => {
                self.goal = Goal::Out;
                self.set_step(Step::Idle);
            }
            Goal::Close => self.stop(End::Closed),
            Goal::In | Goal::Out => {}
        }
    }

    pub(super) fn on_reply(&mut self, op: OpId, result: Result<Reply, ZkCode>) {
        let Some(flight) = self.session.ops.remove(op) else {
            self.stats.stale_replies += 1;
            #[cfg(feature = "planted")]
            if self.planted == Some(crate::Planted::CloseOnStaleListing)
                && self.goal == Goal::Close
                && matches!(result, Ok(Reply::Children(_)))
            {
                self.finish_leaving();
            }
            return;
        };
        if let Ok(reply) = &result {
            if reply.kind() != flight.verb {
                return self.fail(CandidateError::WrongReply(WrongReply {
                    request: flight.verb,
                    reply: reply.kind(),
                    path: self.config.path().to_owned(),
                }));
            }
        }
        let answered = !matches!(
            result,
            Err(ZkCode::ConnectionLoss | ZkCode::OperationTimeout | ZkCode::SessionExpired)
        );
        if answered {
            self.proof_of_contact();
        }
        if answered
            && matches!(
                self.connection,
                Connection::Connected | Connection::Disconnected
            )
        {
            self.session.last_ack = Some(
                self.session
                    .last_ack
                    .map_or(flight.sent_at, |t| t.max(flight.sent_at)),
            );
            self.check_link();
        }
        if matches!(flight.purpose, Purpose::Probe { again: true }) {
            self.send_probe();
        }
        if result == Err(ZkCode::SessionExpired) {
            return self.on_expired();
        }
        // Progress of the main lane ends its backoff. Not an answer of a
        // side lane (a probe answers every third of the timeout while the
        // main lane may be failing), nor a level of the path made, nor any
        // answer while the lane goes round a loop an answer does not end
        // (`Round`): making the path and losing it again, or listing and
        // reading a view that contradicts itself, is what the backoff must
        // slow.
        if result.is_ok()
            && flight.purpose.is_main()
            && !matches!(flight.purpose, Purpose::Parent(_))
            && self.session.round == Round::Fresh
        {
            self.backoff.reset();
        }
        match flight.purpose {
            Purpose::Parent(index) => self.on_parent(index, result),
            Purpose::Create => self.on_create(result),
            Purpose::Recover => self.on_recover(result),
            Purpose::Sync => self.on_sync(result),
            Purpose::Adopt(name) => self.on_adopt(name, result),
            Purpose::List { again } => self.on_list(result, again),
            Purpose::WatchPred(pred) => self.on_watch_pred(pred, result),
            Purpose::WatchOwn { name, spent } => self.on_watch_own(name, spent, result),
            Purpose::DowngradeRead(name) => self.on_downgrade_read(&name, result),
            Purpose::DowngradeWrite(name) => self.on_downgrade_write(&name, result),
            Purpose::Delete(_) => self.on_delete(result),
            // Only the contact they prove matters (counted above).
            Purpose::DeleteExtra | Purpose::Probe { .. } => {}
        }
    }

    /// The server answered, or a new connection is up: side lanes that failed
    /// on the connection may try again.
    pub(super) fn proof_of_contact(&mut self) {
        if self.session.own_watch == OwnWatch::AwaitProof {
            self.session.own_watch = self.own_watch_lost();
        }
        if let Some(own) = self.session.own.as_mut() {
            if let Downgrade::AwaitProof { told } = own.downgrade {
                own.downgrade = Downgrade::Due { told };
            }
        }
    }

    /// Common handling of an error on the main lane.
    pub(super) fn main_error(&mut self, verb: &str, path: String, code: ZkCode) {
        if code.is_fatal() {
            self.refused(verb, path, code);
        } else {
            self.retry_later();
        }
    }

    pub(super) fn on_parent(&mut self, index: usize, result: Result<Reply, ZkCode>) {
        if self.step != (Step::Parents { index }) {
            return;
        }
        let mut ancestors = ancestors(self.config.path());
        let last = ancestors.len().saturating_sub(1);
        let target = if index < ancestors.len() {
            ancestors.swap_remove(index)
        } else {
            String::new()
        };
        match result {
            Ok(_) | Err(ZkCode::NodeExists) => {
                self.session.round = Round::MadeParents;
                self.step = if index >= last {
                    Step::Create
                } else {
                    Step::Parents { index: index + 1 }
                };
            }
            // Above the topmost level there is only the namespace's root:
            // `/`, which always exists, or a chroot, which does not. No
            // retry can make it (and retrying forever was a storm of
            // thousands of requests a second).
            Err(ZkCode::NoNode) if index == 0 => self.fail(CandidateError::Namespace {
                path: target,
                fault: NamespaceFault::RootMissing,
            }),
            // The election path's own parent is missing too: every level
            // from the top. At once on the first try; after a backoff if
            // levels were made since our last create, since then an
            // ancestor vanished under us (deleted concurrently).
            Err(ZkCode::NoNode) => {
                self.step = Step::Parents { index: 0 };
                if self.session.round == Round::MadeParents {
                    self.retry_later();
                }
            }
            Err(ZkCode::NoChildrenForEphemerals) => self.fail(CandidateError::Namespace {
                path: parent_of(&target).to_owned(),
                fault: NamespaceFault::Ephemeral,
            }),
            Err(code) => self.main_error("create", target, code),
        }
    }

    pub(super) fn on_create(&mut self, result: Result<Reply, ZkCode>) {
        match result {
            Ok(Reply::Created { path, stat }) => {
                let name = path.rsplit('/').next().unwrap_or_default().to_owned();
                self.session.create_uncertain = false;
                self.session.round = Round::Fresh;
                self.learn_session(stat);
                self.check_token(FencingToken(stat.czxid));
                self.session.own = Some(Own {
                    name: name.as_str().into(),
                    token: FencingToken(stat.czxid),
                    downgrade: Downgrade::No,
                    revoke_seen: NO_REQUEST,
                    unwatched_since: Some(self.session.last_ack.unwrap_or(self.now)),
                });
                // Not wanted yet (the listing says whether we wait), unless
                // revocation requests are to be heard from the start.
                self.session.own_watch = if self.config.revocable() {
                    OwnWatch::Unarmed
                } else {
                    OwnWatch::LATER
                };
                if self.leaving() {
                    self.set_step(Step::Delete);
                    return;
                }
                self.outbox.notice(Notice::Joined { node: name });
                self.set_step(Step::List);
            }
            Ok(_) => self.retry_later(),
            Err(ZkCode::NoNode) if self.config.create_parents() => {
                let deepest = ancestors(self.config.path()).len().saturating_sub(1);
                self.set_step(Step::Parents { index: deepest });
                if self.session.round == Round::MadeParents {
                    // We made the path since our last create, and it is gone
                    // again: wait before making it once more.
                    self.retry_later();
                }
            }
            Err(ZkCode::NoChildrenForEphemerals) => {
                let path = self.config.path().to_owned();
                self.fail(CandidateError::Namespace {
                    path,
                    fault: NamespaceFault::Ephemeral,
                });
            }
            Err(ZkCode::NoNode) => {
                let path = self.config.path().to_owned();
                self.refused(
                    "create (election path missing, create_parents off)",
                    path,
                    ZkCode::NoNode,
                );
            }
            Err(code) if code.is_connection_fault() => {
                self.session.create_uncertain = self.config.protected_create();
                self.retry_later();
                if self.leaving() && !self.session.create_uncertain {
                    // Unprotected: nothing to find; the node (if any) dies with the session.
                    self.finish_leaving();
                }
            }
            Err(code) => {
                let path = self.config.path().to_owned();
                self.main_error("create", path, code);
            }
        }
    }

    pub(super) fn on_recover(&mut self, result: Result<Reply, ZkCode>) {
        if self.step != Step::Recover {
            return;
        }
        let children = match result {
            Ok(Reply::Children(children)) => children,
            Ok(_) => return self.retry_later(),
            // No election path, so the lost create cannot have been applied
            // (found by the simulator: listing it again forever).
            Err(ZkCode::NoNode) => Vec::new(),
            Err(code) => {
                let path = self.config.path().to_owned();
                return self.main_error("list", path, code);
            }
        };
        self.clear_old_nodes(&children);
        let nonce = self.last_nonce();
        let mut mine: Vec<NodeName> = children
            .iter()
            .filter_map(|c| {
                let recipe = self.config.rule().recipe();
                name::parse(c, self.config.prefix(), self.config.interop(), recipe)
            })
            .filter(|n| matches!(&n.origin, Origin::Ours { nonce: found } if found.is_some() && *found == nonce))
            .collect();
        name::order(&mut mine);
        let mut mine = mine.into_iter();
        match mine.next() {
            None => {
                self.session.create_uncertain = false;
                if self.leaving() {
                    self.finish_leaving();
                } else {
                    self.set_step(Step::Create);
                }
            }
            Some(found) => {
                // A second node with this session's nonce can only come from a create
                // retried while the first was still pending; it would block the queue.
                for extra in mine {
                    let path = self.child_path(&extra.name);
                    self.emit(
                        Purpose::DeleteExtra,
                        Request::Delete {
                            path,
                            version: None,
                        },
                    );
                }
                self.set_step(Step::Adopt {
                    name: found.name.into(),
                });
            }
        }
    }

    /// A `sync` before a listing: its reply is on this connection (a new
    /// connection supersedes it), so the server has caught up.
    pub(super) fn on_sync(&mut self, result: Result<Reply, ZkCode>) {
        match result {
            Ok(Reply::Synced) => self.session.reads = Reads::Current,
            Ok(_) => self.retry_later(),
            Err(code) => {
                let path = self.config.path().to_owned();
                self.main_error("sync", path, code);
            }
        }
    }

    pub(super) fn on_adopt(&mut self, name: String, result: Result<Reply, ZkCode>) {
        if !matches!(&self.step, Step::Adopt { name: n } if **n == *name) {
            return;
        }
        match result {
            Ok(Reply::Data { stat, .. }) if self.owned_by_this_session(stat) => {
                self.learn_session(stat);
                self.session.create_uncertain = false;
                self.session.round = Round::Fresh;
                self.check_token(FencingToken(stat.czxid));
                self.stats.recovered_creates += 1;
                self.session.own = Some(Own {
                    name: name.as_str().into(),
                    token: FencingToken(stat.czxid),
                    downgrade: Downgrade::No,
                    revoke_seen: NO_REQUEST,
                    unwatched_since: None,
                });
                // The adopting getData left a data watch on the node.
                self.session.own_watch = OwnWatch::Armed(OwnWatchKind::Data);
                if self.leaving() {
                    self.set_step(Step::Delete);
                } else {
                    self.outbox.notice(Notice::Joined { node: name });
                    self.set_step(Step::List);
                }
            }
            // Not ours (a dying session's node) or already gone: the create did not
            // take in this session.
            Ok(_) | Err(ZkCode::NoNode) => {
                self.session.create_uncertain = false;
                if self.leaving() {
                    self.finish_leaving();
                } else {
                    self.set_step(Step::Create);
                }
            }
            Err(code) => {
                let path = self.child_path(&name);
                self.main_error("read", path, code);
            }
        }
    }

    /// Deletes children bearing one of our earlier sessions' nonces. Such a node
    /// can block the queue until its session ends, or forever if a client sent a
    /// queued create on the new session; either way it is ours and useless.
    pub(super) fn clear_old_nodes(&mut self, children: &[String]) {
        let Some(past) = self.past.as_ref().filter(|p| !p.old_nonces.is_empty()) else {
            return;
        };
        let old: Vec<&String> = children
            .iter()
            .filter(|child| {
                child
                    .strip_prefix(name::PROTECTED_MARKER)
                    .and_then(|rest| rest.get(..name::NONCE_LEN))
                    .is_some_and(|nonce| past.old_nonces.iter().any(|old| old == nonce))
            })
            .collect();
        for child in old {
            let clearing = self.session.clearing.get_or_insert_with(Box::default);
            if !clearing.contains(child) {
                clearing.push(child.clone());
                let path = self.child_path(child);
                self.emit(
                    Purpose::DeleteExtra,
                    Request::Delete {
                        path,
                        version: None,
                    },
                );
            }
        }
    }

    pub(super) fn past(&mut self) -> &mut Past {
        self.past.get_or_insert_with(Box::default)
    }

    pub(super) fn owned_by_this_session(&self, stat: Stat) -> bool {
        stat.ephemeral_owner != 0
            && self
                .session
                .id
                .is_none_or(|sid| sid.0 == stat.ephemeral_owner)
    }

    /// Our node is going (deleted, revoked, or its session gone): remember
    /// its token, to compare the next one with.
    pub(super) fn let_go_of_node(&mut self) {
        if let Some(token) = self.session.own.as_ref().map(|o| o.token) {
            self.past().last_token = Some(token);
        }
    }

    /// A new node of ours, with `token`: not above the last one we held,
    /// the ensemble's history restarted (zxids only grow within one, and
    /// our new node was created after the old one, so an equal token is a
    /// new history too: the same zxid given again), and a fenced resource
    /// that saw the old tokens will refuse the new ones, or take an equal
    /// one for an old holder's.
    pub(super) fn check_token(&mut self, token: FencingToken) {
        // Taken: the next node is compared with this one, so a regression
        // is reported once, not for every node until the tokens pass it.
        let Some(before) = self.past.as_mut().and_then(|p| p.last_token.take()) else {
            return;
        };
        if token <= before {
            self.stats.tokens_regressed += 1;
            self.outbox
                .notice(Notice::TokenRegressed { before, now: token });
        }
    }

    pub(super) fn learn_session(&mut self, stat: Stat) {
        if self.session.id.is_none() && stat.ephemeral_owner != 0 {
            self.session.id = Some(SessionId(stat.ephemeral_owner));
        }
    }

    pub(super) fn on_list(&mut self, result: Result<Reply, ZkCode>, again: bool) {
        if self.step != Step::List {
            return;
        }
        let children = match result {
            Ok(Reply::Children(children)) => children,
            Ok(_) => return self.retry_later(),
            // The election path is gone, and our node with it.
            Err(ZkCode::NoNode) if self.session.own.is_some() => {
                return self.own_gone(DemotionReason::Revoked);
            }
            Err(code) => {
                let path = self.config.path().to_owned();
                return self.main_error("list", path, code);
            }
        };
        self.clear_old_nodes(&children);
        let limits = self.limits();
        let own_name = self.session.own.as_ref().map_or("", |o| &*o.name);
        let standing = name::standing_under(
            &children,
            own_name,
            self.config.prefix(),
            self.config.interop(),
            self.config.rule(),
            KEPT_PER_WATCH * limits.room + limits.spare,
            self.session.standing.persistent(),
        );
        self.stats.ignored_children += standing.ignored as u64;
        if let Some(node) = standing.negative {
            if self.config.interop() != Interop::None {
                return self.refuse_shared_queue(node);
            }
        }
        self.leader_seen(standing.oldest.clone());
        if self.session.own.is_none() {
            self.set_step(Step::Create);
            return;
        }
        if !standing.found {
            // The session answered, so it is alive: someone deleted our node.
            return self.own_gone(DemotionReason::Revoked);
        }
        self.own_node_seen();
        if standing.weight < limits.room as u64 {
            return self.become_leader(false);
        }
        if self.watches_own_node_early() {
            self.want_own_watch();
        }
        if self.leadership != Leadership::None {
            self.demote(DemotionReason::Displaced);
        }
        self.session.standing.listed(
            standing.weight,
            standing.nearest_lower,
            standing.nearest_weights,
        );
        match self.config.strategy() {
            WatchStrategy::Predecessor => self.watch_next_lower(),
            // A Parent follower reads its k nearest nodes below too (without a
            // watch), once each while they stay the nearest: a persistent
            // look-alike among them would otherwise hold it back forever
            // (found by the simulator's Parent draw). The reads are
            // kept across listings (see `relist_keeping_reads`).
            WatchStrategy::Parent if again => self.relist_keeping_reads(),
            WatchStrategy::Parent => self.watch_next_lower(),
        }
    }

    /// Under the Parent strategy, the parent's children changed: list again,
    /// keeping what the reads of the nearest nodes below said (that each is a
    /// live ephemeral node older than ours). Those reads set no watch, so no
    /// watch is lost with them, and a name the listing still shows among the
    /// nearest is the node that was read: the server never gives a sequential
    /// name twice under one incarnation of the path, and a new incarnation
    /// takes our own node with it (the own-node watch or the listing reports
    /// that, and every other way into a listing forgets the reads). So only
    /// a name new among the nearest is read; without this, each of the
    /// herd's N listings per change cost a read as well.
    pub(super) fn relist_keeping_reads(&mut self) {
        self.supersede_main();
        self.step = Step::List;
    }

    pub(super) fn on_delete(&mut self, result: Result<Reply, ZkCode>) {
        if self.step != Step::Delete {
            return;
        }
        match result {
            Ok(_) | Err(ZkCode::NoNode) => self.finish_leaving(),
            Err(code) => {
                let path = self.own_path().unwrap_or_default();
                self.main_error("delete", path, code);
            }
        }
    }

    // ----- watch events ---------------------------------------------------------------
}

/// `/a/b/c` → `["/a", "/a/b", "/a/b/c"]`.
/// one session) should not keep the buffer of its last burst.
/// The parent of an absolute path: `/a/b` → `/a`, `/a` → `/`.
fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(at) => &path[..at],
    }
}

pub(super) fn ancestors(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, ch) in path.char_indices().skip(1) {
        if ch == '/' {
            out.push(path[..i].to_owned());
        }
    }
    out.push(path.to_owned());
    out
}
