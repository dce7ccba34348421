//! A tiny hand-driver for transcript tests: feed inputs, take the commands the
//! machine emitted by kind ([`Verb`]), answer them, read the notices.

#![allow(unreachable_pub)]

use std::time::Duration;

use zkelect_core::*;

pub const PATH: &str = "/svc/leader";
pub const SID: SessionId = SessionId(0x100);
pub const TIMEOUT: Duration = Duration::from_millis(3_000);

pub struct Driver {
    pub c: Candidate,
    pub now: Timestamp,
    pub pending: Vec<Command>,
    pub notices: Vec<Notice>,
}

pub fn stat(czxid: i64, owner: SessionId) -> Stat {
    Stat {
        czxid,
        ephemeral_owner: owner.0,
        ..Stat::default()
    }
}

pub fn config(id: &str) -> ConfigBuilder {
    Config::builder(PATH, id).nonce_seed(7)
}

impl Driver {
    pub fn new(builder: ConfigBuilder) -> Self {
        let c = Candidate::new(builder.build().expect("valid config"));
        Self {
            c,
            now: Timestamp::ZERO,
            pending: Vec::new(),
            notices: Vec::new(),
        }
    }

    /// A candidate that joined and is connected, with its create pending.
    pub fn joined(builder: ConfigBuilder) -> Self {
        let mut d = Self::new(builder);
        d.c.join(d.now);
        d.connect(SID);
        d
    }

    fn drain(&mut self) {
        while let Some(n) = self.c.poll_notice() {
            self.notices.push(n);
        }
        while let Some(cmd) = self.c.poll_command() {
            self.pending.push(cmd);
        }
        if let Some(at) = self.c.poll_timeout() {
            assert!(at >= self.now, "timeout in the past");
        }
    }

    pub fn input(&mut self, input: Input) {
        self.c.handle(self.now, input);
        self.drain();
    }

    pub fn connect(&mut self, sid: SessionId) {
        self.input(Input::Session(SessionEvent::Connected {
            session_id: Some(sid),
            timeout: TIMEOUT,
        }));
    }

    pub fn session(&mut self, event: SessionEvent) {
        self.input(Input::Session(event));
    }

    pub fn event(&mut self, kind: WatchKind, name: &str) {
        let path = if name.is_empty() {
            PATH.to_owned()
        } else {
            format!("{PATH}/{name}")
        };
        self.input(Input::Watch(WatchEvent { kind, path }));
    }

    pub fn join(&mut self) {
        self.c.join(self.now);
        self.drain();
    }

    /// Calls an intent on the machine now, then takes its outputs.
    pub fn act<R>(&mut self, intent: impl FnOnce(&mut Candidate, Timestamp) -> R) -> R {
        let out = intent(&mut self.c, self.now);
        self.drain();
        out
    }

    pub fn resign(&mut self, rejoin: bool) {
        self.c.resign(self.now, rejoin);
        self.drain();
    }

    pub fn close(&mut self) {
        self.c.close(self.now);
        self.drain();
    }

    /// Moves the clock and fires due timers.
    pub fn sleep(&mut self, ms: u64) {
        self.now = self.now + Duration::from_millis(ms);
        self.c.handle_timeout(self.now);
        self.drain();
        if let Some(at) = self.c.poll_timeout() {
            assert!(
                at > self.now,
                "poll_timeout {at} not after handle_timeout({})",
                self.now
            );
        }
    }

    /// Removes and returns the first pending command of this kind.
    pub fn take(&mut self, verb: Verb) -> Command {
        self.try_take(verb)
            .unwrap_or_else(|| panic!("no pending {verb}; pending: {:#?}", self.pending))
    }

    pub fn try_take(&mut self, verb: Verb) -> Option<Command> {
        let i = self.pending.iter().position(|c| c.request.kind() == verb)?;
        Some(self.pending.remove(i))
    }

    /// Answers every pending probe (`exists`), proving contact with the server.
    pub fn answer_probes(&mut self) {
        while let Some(p) = self.try_take(Verb::Exists) {
            self.reply(p.op, Ok(Reply::Exists(Some(Stat::default()))));
        }
    }

    /// Answers the pending probes, and the own-node watch that a holder by
    /// its own listing sets at its first probe tick in a probe's place (its
    /// answer proves contact as well), finding the node.
    pub fn answer_probes_and_watch(&mut self) {
        self.answer_probes();
        let (Some(node), Some(token)) = (self.c.node().map(str::to_owned), self.c.token()) else {
            return;
        };
        let path = format!("{PATH}/{node}");
        let own = self.pending.iter().position(|c| match &c.request {
            Request::GetChildren {
                path: p,
                watch: true,
            }
            | Request::GetData {
                path: p,
                watch: true,
            } => *p == path,
            _ => false,
        });
        if self.c.role().is_leader() {
            if let Some(i) = own {
                let cmd = self.pending.remove(i);
                self.answer_own_watch(&cmd, token.0);
            }
        }
    }

    pub fn has_pending(&self, verb: Verb) -> bool {
        self.pending.iter().any(|c| c.request.kind() == verb)
    }

    pub fn reply(&mut self, op: OpId, result: Result<Reply, ZkCode>) {
        self.input(Input::Reply { op, result });
    }

    /// Answers the pending create with `name` and czxid.
    pub fn created(&mut self, name: &str, czxid: i64) -> Command {
        let cmd = self.take(Verb::Create);
        self.reply(
            cmd.op,
            Ok(Reply::Created {
                path: format!("{PATH}/{name}"),
                stat: stat(czxid, SID),
            }),
        );
        cmd
    }

    /// Answers the pending `sync`, if any (the one a listing waits for after
    /// a reconnect or before a recovery listing); whether there was one.
    pub fn synced(&mut self) -> bool {
        match self.try_take(Verb::Sync) {
            Some(sync) => {
                self.reply(sync.op, Ok(Reply::Synced));
                true
            }
            None => false,
        }
    }

    /// Answers the pending listing (after the pending `sync`, if any).
    pub fn children(&mut self, names: &[&str]) -> Command {
        self.synced();
        // The queue's listing, not a child watch on our own node.
        let i = self
            .pending
            .iter()
            .position(|c| matches!(&c.request, Request::GetChildren { path, .. } if path == PATH))
            .unwrap_or_else(|| panic!("no pending listing; pending: {:#?}", self.pending));
        let cmd = self.pending.remove(i);
        self.reply(
            cmd.op,
            Ok(Reply::Children(
                names.iter().map(|s| s.to_string()).collect(),
            )),
        );
        cmd
    }

    /// Answers the pending read of `name` (with owner `SID`; see
    /// [`Self::take_data`]).
    pub fn data_ok(&mut self, name: &str, czxid: i64) -> Command {
        let cmd = self.take_data(name);
        let reply = Self::read_reply(
            &cmd,
            Reply::Data {
                data: Vec::new(),
                stat: stat(czxid, SID),
            },
        );
        self.reply(cmd.op, Ok(reply));
        cmd
    }

    /// Answers the pending read of `name` with this data version and data
    /// (see [`Self::take_data`]).
    pub fn data_at(&mut self, name: &str, czxid: i64, version: i32, data: &[u8]) -> Command {
        let cmd = self.take_data(name);
        let reply = Self::read_reply(
            &cmd,
            Reply::Data {
                data: data.to_vec(),
                stat: Stat {
                    version,
                    ..stat(czxid, SessionId(0x999))
                },
            },
        );
        self.reply(cmd.op, Ok(reply));
        cmd
    }

    /// `data` for a data read; for the farther node's child watch, the
    /// children of a leaf (none).
    fn read_reply(cmd: &Command, data: Reply) -> Reply {
        match cmd.request {
            Request::GetChildren { .. } => Reply::Children(Vec::new()),
            _ => data,
        }
    }

    /// Removes and returns the pending read of `name`: a getData, or, on the
    /// two-watch's farther node, a child watch (only its deletion matters).
    pub fn take_data(&mut self, name: &str) -> Command {
        let path = format!("{PATH}/{name}");
        let i = self
            .pending
            .iter()
            .position(|c| matches!(&c.request, Request::GetData { path: p, .. } if *p == path))
            .or_else(|| {
                let own = self.c.node().map(|own| format!("{PATH}/{own}"));
                self.pending.iter().position(|c| {
                    matches!(&c.request, Request::GetChildren { path: p, watch: true }
                        if *p == path && Some(p) != own.as_ref())
                })
            })
            .unwrap_or_else(|| panic!("no getData on {name}; pending: {:#?}", self.pending));
        self.pending.remove(i)
    }

    /// Removes and returns the pending own-node watch on `name`: a child
    /// watch (no write into the node may spend it), a data watch only
    /// to read the node's owner after a reconnect that named no session.
    pub fn take_own_watch(&mut self, name: &str) -> Command {
        let path = format!("{PATH}/{name}");
        let i = self
            .pending
            .iter()
            .position(|c| match &c.request {
                Request::GetChildren {
                    path: p,
                    watch: true,
                } => *p == path,
                Request::GetData { path: p, .. } => *p == path,
                _ => false,
            })
            .unwrap_or_else(|| panic!("no own-node watch on {name}; pending: {:#?}", self.pending));
        let cmd = self.pending.remove(i);
        if self.c.config().revocable() {
            assert_eq!(
                cmd.request.kind(),
                Verb::GetData,
                "a revocable node's own watch is a data watch: {cmd:?}"
            );
        }
        cmd
    }

    /// Answers the pending own-node watch on `name` as set (with owner `SID`).
    pub fn own_watch_ok(&mut self, name: &str, czxid: i64) -> Command {
        let cmd = self.take_own_watch(name);
        self.answer_own_watch(&cmd, czxid);
        cmd
    }

    /// Answers an own-node watch request taken earlier as set.
    pub fn answer_own_watch(&mut self, cmd: &Command, czxid: i64) {
        let result = match cmd.request.kind() {
            Verb::GetChildren => Ok(Reply::Children(Vec::new())),
            _ => Ok(Reply::Data {
                data: Vec::new(),
                stat: stat(czxid, SID),
            }),
        };
        self.reply(cmd.op, result);
    }

    /// Whether an own-node watch on `name` is pending.
    pub fn own_watch_pending(&self, name: &str) -> bool {
        let path = format!("{PATH}/{name}");
        self.pending.iter().any(|c| {
            matches!(&c.request, Request::GetChildren { path: p, watch: true }
                | Request::GetData { path: p, watch: true } if *p == path)
        })
    }

    /// Moves the clock through the probe ticks after which a node's own
    /// watch is set late (a holder by its listing, at the first, or any
    /// node under `Takeover::Relist`), answering the probes on the way
    /// (and a holder's own-node watch: see [`Self::answer_probes_and_watch`]).
    pub fn age_node(&mut self) {
        for _ in 0..3 {
            self.sleep(TIMEOUT.as_millis() as u64 / 3);
            self.answer_probes_and_watch();
        }
    }

    /// Joins as `own` in a queue of `children` (answers create and listing,
    /// and the own-node watch a waiter sets as it learns it waits).
    pub fn in_queue(builder: ConfigBuilder, own: &str, czxid: i64, children: &[&str]) -> Self {
        let mut d = Self::joined(builder);
        d.answer_probes();
        d.created(own, czxid);
        d.children(children);
        if d.own_watch_pending(own) {
            d.own_watch_ok(own, czxid);
        }
        d
    }

    pub fn take_notices(&mut self) -> Vec<Notice> {
        std::mem::take(&mut self.notices)
    }
}
