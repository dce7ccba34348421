//! The `candidate` target: a [`Candidate`] of any configuration fed
//! arbitrary inputs.
//!
//! The bytes become a configuration (every rule, k, watch strategy,
//! connection policy, interop scheme, backoff, nonce seed and switch the
//! builder accepts) and a schedule: answers to pending requests (plausible
//! ones, errors, and replies of the wrong kind), duplicated and never-issued
//! replies, watch events on the paths around the queue, every session event
//! with any session id and timeout (zero and `Duration::MAX` included),
//! contact proofs, intents (join, resign, close), time passing by
//! milliseconds or hours, and inputs stamped earlier than the last.
//!
//! The machine must not panic (its `debug_assert!`s are on under the engine
//! and in tests), and after every input its promises hold: `Elected` and
//! `Demoted` alternate and agree with [`Candidate::role`]; a machine elected
//! by a listing holds under its rule there; no create while it owns a node;
//! at most one create and one watch per path in flight, and at most the
//! own-node and queue watches; a timer fired at `now` is next due after
//! `now`; a closed or failed machine asks for nothing more; a reply of
//! another kind than its request stops the machine.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use zkelect_core::name::{self, Access};
use zkelect_core::{
    Candidate, Command, Config, ConnectionPolicy, CreateMode, Input, Interop, Notice, OpId, Recipe,
    Reply, Request, Role, Rule, SessionEvent, SessionId, Stat, Takeover, Timestamp, WatchEvent,
    WatchKind, WatchStrategy, ZkCode,
};

use crate::read::Bytes;

const PATHS: [&str; 3] = ["/e", "/svc/leader", "/a/b/c"];

/// Every error code the machine can be answered with.
pub(crate) const CODES: [ZkCode; 15] = [
    ZkCode::ConnectionLoss,
    ZkCode::OperationTimeout,
    ZkCode::SessionExpired,
    ZkCode::SessionMoved,
    ZkCode::NoNode,
    ZkCode::NodeExists,
    ZkCode::NotEmpty,
    ZkCode::BadVersion,
    ZkCode::NoAuth,
    ZkCode::AuthFailed,
    ZkCode::InvalidAcl,
    ZkCode::BadArguments,
    ZkCode::NoChildrenForEphemerals,
    ZkCode::Unimplemented,
    ZkCode::Other(-999),
];

/// A configuration the builder accepts, read off the bytes.
fn config(b: &mut Bytes<'_>) -> Config {
    config_at(b, None, "cand")
}

/// A configuration for a queue at `path` (if not given, one of a few, read
/// off the bytes), read off the bytes.
pub(crate) fn config_at(b: &mut Bytes<'_>, path: Option<&str>, id: &str) -> Config {
    let k = 1 + u32::from(b.u8() % 3);
    let rule = match b.u8() % 5 {
        0 => Rule::Election { leaders: k },
        1 => Rule::Mutex,
        2 => Rule::Semaphore { permits: k.max(2) },
        3 => Rule::Read,
        _ => Rule::Write,
    };
    let path = path.unwrap_or_else(|| b.pick(&PATHS));
    let min = Duration::from_millis(1 + u64::from(b.u16() % 2_000));
    let max = min * (1 + u32::from(b.u8() % 64));
    let mut builder = Config::builder(path, id)
        .rule(rule)
        .strategy(if b.bool() {
            WatchStrategy::Parent
        } else {
            WatchStrategy::Predecessor
        })
        .policy(if b.bool() {
            ConnectionPolicy::SessionAware
        } else {
            ConnectionPolicy::Standard
        })
        .nonce_seed(b.u64())
        .takeover(if b.bool() {
            Takeover::OnNotification
        } else {
            Takeover::Relist
        })
        .rejoin_on_revoke(b.bool())
        .create_parents(b.bool())
        .container_parent(b.bool())
        .backoff(min, max)
        .data(b.text(8));
    let interop = b.pick(&Interop::ALL);
    if rule.limit() == 1 && rule.stem(interop).is_some() {
        builder = builder.interop(interop);
    }
    builder
        .build()
        .unwrap_or_else(|e| panic!("a configuration the target draws was refused: {e}"))
}

/// What a child of the listing is called.
#[derive(Debug, Clone)]
enum Child {
    Own,
    /// The last create's prefix (protected) with this sequence.
    Nonce(i32),
    /// The queue's stem with this sequence (a read-write lock's even
    /// sequences are readers, odd ones writers).
    Plain(i32),
    Garbage(String),
}

#[derive(Debug, Clone)]
enum Outcome {
    Ok {
        seq: i32,
        owner: i64,
        czxid: i64,
        version: i32,
        children: Vec<Child>,
    },
    Err(ZkCode),
    /// A reply of some kind, whatever was asked.
    Wrong(u8),
}

#[derive(Debug, Clone)]
enum Target {
    Own,
    Watched,
    Parent,
    Child(i32),
    Other(String),
}

/// One input of the schedule; indices pick among what is pending then.
#[derive(Debug, Clone)]
enum Step {
    Answer {
        pick: usize,
        outcome: Outcome,
    },
    Duplicate {
        pick: usize,
        outcome: Outcome,
    },
    Bogus {
        op: u64,
    },
    Watch {
        kind: WatchKind,
        target: Target,
    },
    Session(SessionEvent),
    Contact {
        ago_ms: u16,
    },
    Sleep {
        ms: u64,
    },
    Intent(u8),
    /// The next input is stamped this much before the machine's last time.
    Stale {
        ms: u16,
    },
}

fn seq(b: &mut Bytes<'_>) -> i32 {
    match b.u8() % 4 {
        0 => b.seq(),
        _ => i32::from(b.u8() % 40) - 3,
    }
}

fn child(b: &mut Bytes<'_>) -> Child {
    match b.u8() % 10 {
        0..=2 => Child::Own,
        3 | 4 => Child::Nonce(seq(b)),
        5..=8 => Child::Plain(seq(b)),
        _ => Child::Garbage(b.text(14)),
    }
}

fn outcome(b: &mut Bytes<'_>) -> Outcome {
    match b.u8() % 10 {
        0..=4 => {
            let owner = match b.u8() % 4 {
                0 => 0,
                1 => 2,
                _ => 1,
            };
            let children = (0..b.below(8)).map(|_| child(b)).collect();
            Outcome::Ok {
                seq: seq(b),
                owner,
                czxid: i64::from(b.u16()) + if b.bool() { 0 } else { i64::MAX - 70_000 },
                version: i32::from(b.u8() % 3),
                children,
            }
        }
        // The queue as a leader sees it: its node alone, of its session.
        5 | 6 => Outcome::Ok {
            seq: 0,
            owner: 1,
            czxid: 1,
            version: 0,
            children: vec![Child::Own],
        },
        7 | 8 => Outcome::Err(b.pick(&CODES)),
        _ => Outcome::Wrong(b.u8()),
    }
}

pub(crate) fn watch_kind(b: &mut Bytes<'_>) -> WatchKind {
    b.pick(&[
        WatchKind::NodeCreated,
        WatchKind::NodeDeleted,
        WatchKind::NodeDataChanged,
        WatchKind::NodeChildrenChanged,
    ])
}

pub(crate) fn session_event(b: &mut Bytes<'_>) -> SessionEvent {
    match b.u8() % 6 {
        0 | 1 => {
            let timeout = match b.u8() % 8 {
                0 => Duration::ZERO,
                1 => Duration::MAX,
                2 => Duration::from_millis(u64::from(b.u32())),
                3 => Duration::from_millis(i32::MAX as u64),
                _ => Duration::from_millis(1 + u64::from(b.u16())),
            };
            let sid = b.u8() % 4;
            SessionEvent::Connected {
                session_id: (sid > 0).then_some(SessionId(i64::from(sid))),
                timeout,
            }
        }
        2 => SessionEvent::Disconnected,
        3 => SessionEvent::Expired,
        4 => SessionEvent::AuthFailed,
        _ => SessionEvent::Closed,
    }
}

pub(crate) fn sleep_ms(b: &mut Bytes<'_>) -> u64 {
    match b.u8() % 8 {
        0 => 0,
        1 => u64::from(b.u32()),
        _ => u64::from(b.u16() % 8_000),
    }
}

fn step(b: &mut Bytes<'_>) -> Step {
    match b.u8() % 24 {
        0..=9 => Step::Answer {
            pick: b.below(16),
            outcome: outcome(b),
        },
        10 => Step::Duplicate {
            pick: b.below(64),
            outcome: outcome(b),
        },
        11 => Step::Bogus { op: b.u64() },
        12..=14 => Step::Watch {
            kind: watch_kind(b),
            target: match b.u8() % 6 {
                0 | 1 => Target::Own,
                2 => Target::Watched,
                3 => Target::Parent,
                4 => Target::Child(seq(b)),
                _ => Target::Other(b.text(20)),
            },
        },
        15 | 16 => Step::Session(session_event(b)),
        17 => Step::Contact { ago_ms: b.u16() },
        18..=20 => Step::Sleep { ms: sleep_ms(b) },
        21 | 22 => Step::Intent(b.u8()),
        _ => Step::Stale { ms: b.u16() },
    }
}

/// The schedule's side of the conversation, and the promises checked after
/// every input.
struct World {
    c: Candidate,
    now: Timestamp,
    /// The stamp of the next input, if it is a stale one.
    stamp: Option<Timestamp>,
    pending: Vec<Command>,
    answered: Vec<Command>,
    last_create_prefix: Option<String>,
    leading: bool,
    /// The listing answered by this step, if any.
    listing: Option<Vec<String>>,
    /// Names ever read as persistent, which the machine may leave out.
    persistent: BTreeSet<String>,
    done: bool,
}

impl World {
    fn at(&mut self) -> Timestamp {
        self.stamp.take().unwrap_or(self.now)
    }

    fn child_name(&self, child: &Child) -> String {
        match child {
            Child::Own => self
                .c
                .node()
                .map_or_else(|| "n_0000000000".to_owned(), str::to_owned),
            Child::Nonce(seq) => format!(
                "{}{seq:010}",
                self.last_create_prefix.as_deref().unwrap_or("n_")
            ),
            Child::Plain(seq) => self.plain(*seq),
            Child::Garbage(s) => s.clone(),
        }
    }

    fn plain(&self, seq: i32) -> String {
        let config = self.c.config();
        let stem = match config.rule() {
            Rule::Read | Rule::Write => {
                let rule = if seq % 2 == 0 {
                    Rule::Read
                } else {
                    Rule::Write
                };
                rule.stem(config.interop()).unwrap_or("r_")
            }
            _ => config.prefix(),
        };
        format!("{stem}{seq:010}")
    }

    fn reply_for(&self, request: &Request, outcome: &Outcome) -> Result<Reply, ZkCode> {
        let (seq, owner, czxid, version, children) = match outcome {
            Outcome::Err(code) => return Err(*code),
            Outcome::Wrong(kind) => {
                return Ok(match kind % 7 {
                    0 => Reply::Created {
                        path: format!("{}/x", self.c.config().path()),
                        stat: Stat::default(),
                    },
                    1 => Reply::Children(vec![]),
                    2 => Reply::Data {
                        data: vec![],
                        stat: Stat::default(),
                    },
                    3 => Reply::Exists(None),
                    4 => Reply::Deleted,
                    5 => Reply::Set(Stat::default()),
                    _ => Reply::Synced,
                })
            }
            Outcome::Ok {
                seq,
                owner,
                czxid,
                version,
                children,
            } => (seq, owner, czxid, version, children),
        };
        let stat = Stat {
            czxid: *czxid,
            ephemeral_owner: *owner,
            version: *version,
            ..Stat::default()
        };
        Ok(match request {
            Request::Create { path, mode, .. } if mode.is_sequential() => Reply::Created {
                path: format!("{path}{seq:010}"),
                stat,
            },
            Request::Create { path, .. } => Reply::Created {
                path: path.clone(),
                stat,
            },
            Request::GetChildren { .. } => {
                Reply::Children(children.iter().map(|c| self.child_name(c)).collect())
            }
            Request::GetData { .. } => Reply::Data {
                data: self.c.config().node_payload(),
                stat,
            },
            Request::Exists { .. } => Reply::Exists(Some(stat)),
            Request::Delete { .. } => Reply::Deleted,
            Request::SetData { .. } => Reply::Set(stat),
            Request::Sync { .. } => Reply::Synced,
        })
    }

    fn apply(&mut self, step: &Step) {
        match step {
            Step::Answer { pick, outcome } => {
                if self.pending.is_empty() {
                    return;
                }
                let cmd = self.pending.remove(pick % self.pending.len());
                let result = self.reply_for(&cmd.request, outcome);
                match (&cmd.request, &result) {
                    // Only a listing of the queue elects (the own-node
                    // watch is a getChildren of the node itself).
                    (Request::GetChildren { path, .. }, Ok(Reply::Children(children)))
                        if path == self.c.config().path() =>
                    {
                        self.listing = Some(children.clone());
                    }
                    // Another node read as persistent; the machine's own
                    // node was created ephemeral whatever a reply says.
                    (Request::GetData { path, .. }, Ok(Reply::Data { stat, .. }))
                        if stat.ephemeral_owner == 0
                            && self.c.node() != path.rsplit('/').next() =>
                    {
                        let name = path.rsplit('/').next().unwrap_or_default();
                        self.persistent.insert(name.to_owned());
                    }
                    _ => {}
                }
                let wrong = matches!(&result, Ok(r) if r.kind() != cmd.request.kind())
                    && !self.done
                    && self.c.in_flight().any(|op| op == cmd.op);
                let now = self.at();
                self.c.handle(now, Input::Reply { op: cmd.op, result });
                if wrong {
                    assert!(
                        self.c.is_failed(),
                        "a reply of another kind than its request was not refused: {cmd:?}"
                    );
                }
                self.answered.push(cmd);
            }
            Step::Duplicate { pick, outcome } => {
                if self.answered.is_empty() {
                    return;
                }
                let cmd = self.answered[pick % self.answered.len()].clone();
                let result = self.reply_for(&cmd.request, outcome);
                let now = self.at();
                self.c.handle(now, Input::Reply { op: cmd.op, result });
            }
            Step::Bogus { op } => {
                let now = self.at();
                self.c.handle(
                    now,
                    Input::Reply {
                        op: OpId(*op | (1 << 63)),
                        result: Ok(Reply::Deleted),
                    },
                );
            }
            Step::Watch { kind, target } => {
                let path = self.c.config().path().to_owned();
                let path = match target {
                    Target::Own => format!("{path}/{}", self.c.node().unwrap_or("n_0000000000")),
                    Target::Watched => {
                        format!(
                            "{path}/{}",
                            self.c.watching().as_deref().unwrap_or("n_0000000001")
                        )
                    }
                    Target::Parent => path,
                    Target::Child(seq) => format!("{path}/{}", self.plain(*seq)),
                    Target::Other(s) => s.clone(),
                };
                let now = self.at();
                self.c
                    .handle(now, Input::Watch(WatchEvent { kind: *kind, path }));
            }
            Step::Session(event) => {
                let now = self.at();
                self.c.handle(now, Input::Session(*event));
            }
            Step::Contact { ago_ms } => {
                let sent =
                    Timestamp::from_millis(self.now.as_millis().saturating_sub(u64::from(*ago_ms)));
                let now = self.at();
                self.c.session_answered(now, sent);
            }
            Step::Sleep { ms } => {
                self.now = Timestamp::from_millis(self.now.as_millis().saturating_add(*ms));
                self.stamp = None;
                self.c.handle_timeout(self.now);
                if let Some(at) = self.c.poll_timeout() {
                    assert!(
                        at > self.now,
                        "poll_timeout {at} is not after handle_timeout({})",
                        self.now
                    );
                }
            }
            Step::Intent(which) => {
                let now = self.at();
                match which % 4 {
                    0 => self.c.join(now),
                    1 => self.c.resign(now, true),
                    2 => self.c.resign(now, false),
                    _ => self.c.close(now),
                }
            }
            Step::Stale { ms } => {
                self.stamp = Some(Timestamp::from_millis(
                    self.now.as_millis().saturating_sub(u64::from(*ms)),
                ));
            }
        }
    }

    /// A machine elected by a listing holds under its rule there.
    fn check_listing_elects(&self, children: &[String]) {
        let config = self.c.config();
        let rule = config.rule();
        let recipe = rule.recipe();
        let own = self.c.node().expect("elected without a node");
        let counts_all = if recipe == Recipe::ReadWrite {
            Rule::Write
        } else {
            rule
        };
        let (prefix, interop) = (config.prefix(), config.interop());
        // The machine leaves out only the nodes it watched and read as
        // persistent, never its own: a read of a name it then adopted as
        // its node (a protected create's recovery, answered persistent once
        // and ephemeral by a later read) is in `persistent` but must not
        // hide that node from this check.
        let mut skipped = self.persistent.clone();
        skipped.remove(own);
        let s = name::standing_under(
            children,
            own,
            prefix,
            interop,
            counts_all,
            usize::MAX,
            &skipped,
        );
        assert!(s.found, "elected by a listing without its node {own}");
        let blockers = s
            .nearest_lower
            .iter()
            .filter(|n| {
                let writer = name::parse(n, prefix, interop, recipe)
                    .is_some_and(|n| n.access == Access::Exclusive);
                rule != Rule::Read || writer
            })
            .count();
        assert!(
            blockers < rule.limit(),
            "{rule:?} elected with {blockers} blocking nodes below it: {:?}",
            s.nearest_lower
        );
    }

    fn drain_and_check(&mut self) {
        while let Some(notice) = self.c.poll_notice() {
            match notice {
                Notice::Elected { .. } => {
                    assert!(!self.leading, "two Elected without a Demoted between");
                    self.leading = true;
                    if let Some(children) = &self.listing {
                        self.check_listing_elects(children);
                    }
                }
                Notice::Demoted { .. } => {
                    assert!(self.leading, "Demoted without Elected");
                    self.leading = false;
                }
                _ => {}
            }
        }
        let mut created = false;
        let mut asked = false;
        while let Some(cmd) = self.c.poll_command() {
            asked = true;
            if let Request::Create {
                path,
                mode: CreateMode::EphemeralSequential,
                ..
            } = &cmd.request
            {
                created = true;
                self.last_create_prefix = path.rsplit('/').next().map(str::to_owned);
            }
            self.pending.push(cmd);
        }
        if created {
            assert_eq!(self.c.node(), None, "a create while it owns a node");
        }
        if self.done {
            assert!(!asked, "a closed or failed machine sent a request");
        }
        self.done |= self.c.is_closed() || self.c.is_failed();
        let in_flight: BTreeSet<OpId> = self.c.in_flight().collect();
        let mut watches: BTreeMap<&str, usize> = BTreeMap::new();
        let mut creates = 0;
        for cmd in self.pending.iter().filter(|c| in_flight.contains(&c.op)) {
            if cmd.request.sets_watch() {
                *watches.entry(cmd.request.path()).or_default() += 1;
            }
            if matches!(
                cmd.request,
                Request::Create {
                    mode: CreateMode::EphemeralSequential,
                    ..
                }
            ) {
                creates += 1;
            }
        }
        assert!(
            watches.values().all(|&n| n == 1),
            "two watch requests for one path: {watches:?}"
        );
        assert!(
            watches.len() <= 2,
            "more than the own-node and queue watches: {watches:?}"
        );
        assert!(creates <= 1, "two creates in flight");
        self.listing = None;
        let role_leads = matches!(self.c.role(), Role::Leader(_) | Role::Suspended(_));
        assert_eq!(
            role_leads,
            self.leading,
            "role {:?} disagrees with the notices",
            self.c.role()
        );
    }
}

/// The target: see the module docs.
pub fn run(data: &[u8]) {
    let mut b = Bytes::new(data);
    let config = config(&mut b);
    let mut w = World {
        c: Candidate::new(config),
        now: Timestamp::ZERO,
        stamp: None,
        pending: Vec::new(),
        answered: Vec::new(),
        last_create_prefix: None,
        leading: false,
        listing: None,
        persistent: BTreeSet::new(),
        done: false,
    };
    if b.bool() {
        w.c.join(w.now);
    }
    if std::env::var_os("ZKELECT_FUZZ_TRACE").is_some() {
        eprintln!("{:?}", w.c.config());
    }
    w.drain_and_check();
    let trace = std::env::var_os("ZKELECT_FUZZ_TRACE").is_some();
    let mut steps = 0;
    while !b.is_empty() && steps < 400 {
        let s = step(&mut b);
        if trace {
            eprintln!("{} {s:?} pending {:?}", w.now, w.pending);
        }
        w.apply(&s);
        if trace {
            eprintln!(
                "  role {:?} node {:?} timeout {:?}",
                w.c.role(),
                w.c.node(),
                w.c.poll_timeout()
            );
        }
        w.drain_and_check();
        steps += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_short_inputs_run() {
        run(&[]);
        run(&[1]);
        run(&[0xFF; 64]);
    }
}
