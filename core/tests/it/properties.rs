//! Property tests: random input sequences (duplicated, stale, out-of-order and
//! error replies, garbage child names, random session events and times) must
//! never break the machine's promises.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use proptest::prelude::*;
use zkelect_core::*;

const PATH: &str = "/e";

/// One step of a random schedule. Indices pick among whatever is pending at the time.
#[derive(Debug, Clone)]
enum Step {
    /// Answer a pending command, with a plausible success or an error.
    Answer {
        pick: usize,
        outcome: Outcome,
    },
    /// Answer a command that was already answered (a duplicate).
    Duplicate {
        pick: usize,
    },
    /// A reply for an op id never issued.
    Bogus {
        op: u64,
    },
    /// A watch event on a path near the election.
    Watch {
        kind: u8,
        target: Target,
    },
    Session {
        event: u8,
        sid: u8,
    },
    Sleep {
        ms: u16,
    },
    Intent {
        which: u8,
    },
}

#[derive(Debug, Clone)]
enum Outcome {
    Ok {
        seq: i32,
        owner: u8,
        czxid: i64,
        children: Vec<Child>,
    },
    Err(u8),
}

#[derive(Debug, Clone)]
enum Child {
    Own,
    Nonce(i32),
    Plain(i32),
    Garbage(String),
}

#[derive(Debug, Clone)]
enum Target {
    Own,
    Pred,
    Parent,
    Child(i32),
}

fn child() -> impl Strategy<Value = Child> {
    prop_oneof![
        3 => Just(Child::Own),
        2 => any::<i32>().prop_map(Child::Nonce),
        4 => (-3i32..40).prop_map(Child::Plain),
        1 => any::<i32>().prop_map(Child::Plain),
        1 => ".{0,14}".prop_map(Child::Garbage),
    ]
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        4 => (prop_oneof![3 => -3i32..40, 1 => any::<i32>()], 0u8..3, any::<i64>(), prop::collection::vec(child(), 0..8))
            .prop_map(|(seq, owner, czxid, children)| Outcome::Ok { seq, owner, czxid, children }),
        // The queue as a leader sees it: our node alone, owned by the usual session.
        3 => Just(Outcome::Ok { seq: 0, owner: 1, czxid: 1, children: vec![Child::Own] }),
        2 => (0u8..12).prop_map(Outcome::Err),
    ]
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        Just(Target::Own),
        Just(Target::Pred),
        Just(Target::Parent),
        (-3i32..40).prop_map(Target::Child),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        12 => (any::<usize>(), outcome()).prop_map(|(pick, outcome)| Step::Answer { pick, outcome }),
        1 => any::<usize>().prop_map(|pick| Step::Duplicate { pick }),
        1 => any::<u64>().prop_map(|op| Step::Bogus { op }),
        3 => (0u8..4, target()).prop_map(|(kind, target)| Step::Watch { kind, target }),
        2 => (0u8..6, 0u8..3).prop_map(|(event, sid)| Step::Session { event, sid }),
        3 => (0u16..4_000).prop_map(|ms| Step::Sleep { ms }),
        1 => (0u8..4).prop_map(|which| Step::Intent { which }),
    ]
}

/// Every rule, with k of 1 or 2 where it has one.
fn rule_strategy(k: u32) -> impl Strategy<Value = Rule> {
    prop_oneof![
        Just(Rule::Election { leaders: k }),
        Just(Rule::Mutex),
        Just(Rule::Semaphore { permits: k }),
        Just(Rule::Read),
        Just(Rule::Write),
    ]
}

fn config_strategy() -> impl Strategy<Value = Config> {
    (1u32..3)
        .prop_flat_map(|k| (Just(k), rule_strategy(k)))
        .prop_flat_map(|(k, rule)| (Just(rule), config_with(k)))
        .prop_map(|(rule, config)| {
            // The same settings under another rule, where they are allowed.
            let mut b = Config::builder(PATH, "cand")
                .rule(rule)
                .strategy(config.strategy())
                .policy(config.policy())
                .nonce_seed(config.nonce_seed());
            if rule.stem(config.interop()).is_some() && rule.limit() == 1 {
                b = b.interop(config.interop());
            }
            b.build().expect("valid")
        })
}

fn config_with(k: u32) -> impl Strategy<Value = Config> {
    (Just(k), any::<bool>(), any::<bool>(), 0u8..3, any::<u64>()).prop_map(
        |(k, parent, aware, interop, seed)| {
            Config::builder(PATH, "cand")
                .leaders(k)
                .strategy(if parent {
                    WatchStrategy::Parent
                } else {
                    WatchStrategy::Predecessor
                })
                .policy(if aware {
                    ConnectionPolicy::SessionAware
                } else {
                    ConnectionPolicy::Standard
                })
                .interop(if k == 1 {
                    Interop::ALL[usize::from(interop) % 3]
                } else {
                    Interop::None
                })
                .nonce_seed(seed)
                .build()
                .expect("valid")
        },
    )
}

/// A child name of the queue under `config`'s rule: a read-write lock's
/// even sequences are readers, odd ones writers.
fn plain(config: &Config, seq: i32) -> String {
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

const CODES: [ZkCode; 12] = [
    ZkCode::ConnectionLoss,
    ZkCode::OperationTimeout,
    ZkCode::SessionExpired,
    ZkCode::NoNode,
    ZkCode::NodeExists,
    ZkCode::NotEmpty,
    ZkCode::BadVersion,
    ZkCode::NoAuth,
    ZkCode::InvalidAcl,
    ZkCode::Unimplemented,
    ZkCode::SessionMoved,
    ZkCode::Other(-999),
];

/// The test's side of the conversation, and the properties checked after each step.
struct World {
    c: Candidate,
    now: Timestamp,
    pending: Vec<Command>,
    answered: Vec<Command>,
    last_create_prefix: Option<String>,
    /// Notices seen so far: Elected must alternate with Demoted.
    leading: bool,
    /// The listing just answered (this step), if any: a machine elected by
    /// it must have had fewer than its limit of blocking nodes below it there.
    listing: Option<Vec<String>>,
    /// Names ever read as persistent (owner 0), which the machine may leave out.
    persistent: BTreeSet<String>,
}

impl World {
    fn child_name(&self, child: &Child) -> String {
        match child {
            Child::Own => self
                .c
                .node()
                .map_or_else(|| "n_0000000000".to_owned(), str::to_owned),
            Child::Nonce(seq) => format!(
                "{}{seq:010}",
                self.last_create_prefix
                    .clone()
                    .unwrap_or_else(|| "n_".into())
            ),
            Child::Plain(seq) => plain(self.c.config(), *seq),
            Child::Garbage(s) => s.clone(),
        }
    }

    fn reply_for(&self, request: &Request, outcome: &Outcome) -> Result<Reply, ZkCode> {
        let (seq, owner, czxid, children) = match outcome {
            Outcome::Err(i) => return Err(CODES[*i as usize % CODES.len()]),
            Outcome::Ok {
                seq,
                owner,
                czxid,
                children,
            } => (seq, owner, czxid, children),
        };
        let stat = Stat {
            czxid: *czxid,
            ephemeral_owner: i64::from(*owner),
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
            Request::GetData { .. } => Reply::Data { data: vec![], stat },
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
                    // Only a listing of the queue elects: the own-node watch
                    // is a getChildren of our own node (its children are
                    // none), which says nothing about the queue.
                    (Request::GetChildren { path, .. }, Ok(Reply::Children(children)))
                        if path == self.c.config().path() =>
                    {
                        self.listing = Some(children.clone());
                    }
                    // A read of another node that shows it persistent; our
                    // own node was created ephemeral, whatever a (generated)
                    // reply to our own-node watch says, and the machine
                    // rightly never skips it.
                    (Request::GetData { path, .. }, Ok(Reply::Data { stat, .. }))
                        if stat.ephemeral_owner == 0
                            && self.c.node() != path.rsplit('/').next() =>
                    {
                        let name = path.rsplit('/').next().unwrap_or_default();
                        self.persistent.insert(name.to_owned());
                    }
                    _ => {}
                }
                self.c.handle(self.now, Input::Reply { op: cmd.op, result });
                self.answered.push(cmd);
            }
            Step::Duplicate { pick } => {
                if self.answered.is_empty() {
                    return;
                }
                let cmd = self.answered[pick % self.answered.len()].clone();
                self.c.handle(
                    self.now,
                    Input::Reply {
                        op: cmd.op,
                        result: Err(ZkCode::NoNode),
                    },
                );
            }
            Step::Bogus { op } => self.c.handle(
                self.now,
                Input::Reply {
                    op: OpId(*op | (1 << 63)),
                    result: Ok(Reply::Deleted),
                },
            ),
            Step::Watch { kind, target } => {
                let kind = [
                    WatchKind::NodeCreated,
                    WatchKind::NodeDeleted,
                    WatchKind::NodeDataChanged,
                    WatchKind::NodeChildrenChanged,
                ][*kind as usize % 4];
                let path = match target {
                    Target::Own => format!("{PATH}/{}", self.c.node().unwrap_or("n_0000000000")),
                    Target::Pred => {
                        format!(
                            "{PATH}/{}",
                            self.c.watching().as_deref().unwrap_or("n_0000000001")
                        )
                    }
                    Target::Parent => PATH.to_owned(),
                    Target::Child(seq) => format!("{PATH}/{}", plain(self.c.config(), *seq)),
                };
                self.c
                    .handle(self.now, Input::Watch(WatchEvent { kind, path }));
            }
            Step::Session { event, sid } => {
                let event = match event {
                    0 | 1 => SessionEvent::Connected {
                        session_id: (*sid > 0).then_some(SessionId(i64::from(*sid))),
                        timeout: Duration::from_millis(3_000),
                    },
                    2 => SessionEvent::Disconnected,
                    3 => SessionEvent::Expired,
                    4 => SessionEvent::AuthFailed,
                    _ => SessionEvent::Closed,
                };
                self.c.handle(self.now, Input::Session(event));
            }
            Step::Sleep { ms } => {
                self.now = self.now + Duration::from_millis(u64::from(*ms));
                self.c.handle_timeout(self.now);
                if let Some(at) = self.c.poll_timeout() {
                    assert!(
                        at > self.now,
                        "poll_timeout {at} is not after handle_timeout({})",
                        self.now
                    );
                }
            }
            Step::Intent { which } => match which {
                0 => self.c.join(self.now),
                1 => self.c.resign(self.now, true),
                2 => self.c.resign(self.now, false),
                _ => self.c.close(self.now),
            },
        }
    }

    /// A machine elected by a listing holds under its rule there: it is in
    /// it, and fewer than its limit of the nodes below it block it (leaving
    /// out any name ever read as persistent).
    fn check_listing_elects(&self, children: &[String]) {
        let config = self.c.config();
        let rule = config.rule();
        let recipe = rule.recipe();
        let own = self.c.node().expect("elected with a node");
        // Every participant below ours (a writer counts them all), then the
        // rule's blockers spelled out here, not taken from `Rule::blocks`.
        let counts_all = if recipe == Recipe::ReadWrite {
            Rule::Write
        } else {
            rule
        };
        let (prefix, interop) = (config.prefix(), config.interop());
        let s = name::standing_under(
            children,
            own,
            prefix,
            interop,
            counts_all,
            usize::MAX,
            &self.persistent,
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
        let limit = match rule {
            Rule::Election { leaders: k } | Rule::Semaphore { permits: k } => k as usize,
            _ => 1,
        };
        assert!(
            blockers < limit,
            "{rule:?} elected with {blockers} blocking nodes below it: {:?}",
            s.nearest_lower
        );
    }

    /// Drains the outputs and checks every promise.
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
        while let Some(cmd) = self.c.poll_command() {
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
            assert_eq!(
                self.c.node(),
                None,
                "a Create while the candidate believes it owns a node"
            );
        }
        // What the machine itself still waits for.
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 768, max_shrink_iters: 4_000, ..ProptestConfig::default() })]

    #[test]
    fn random_inputs_never_break_the_machines_promises(
        config in config_strategy(),
        steps in prop::collection::vec(step(), 1..120),
    ) {
        let mut w = World {
            c: Candidate::new(config),
            now: Timestamp::ZERO,
            pending: Vec::new(),
            answered: Vec::new(),
            last_create_prefix: None,
            leading: false,
            listing: None,
            persistent: BTreeSet::new(),
        };
        w.c.join(w.now);
        w.drain_and_check();
        for step in &steps {
            w.apply(step);
            w.drain_and_check();
        }
    }

    /// Draining after every input or once at the end gives the same outputs.
    #[test]
    fn drain_schedule_does_not_change_outputs(
        config in config_strategy(),
        steps in prop::collection::vec(step(), 1..60),
    ) {
        let run = |batch: bool| {
            let mut c = Candidate::new(config.clone());
            let mut now = Timestamp::ZERO;
            let mut notices = Vec::new();
            let mut commands = Vec::new();
            c.join(now);
            for step in &steps {
                // Replies by op id counting from 1: whatever was emitted, in order.
                match step {
                    Step::Answer { pick, outcome } => {
                        let op = OpId((*pick as u64 % 16) + 1);
                        let result = match outcome {
                            Outcome::Err(i) => Err(CODES[*i as usize % CODES.len()]),
                            Outcome::Ok { .. } => Ok(Reply::Children(vec!["n_0000000000".into()])),
                        };
                        c.handle(now, Input::Reply { op, result });
                    }
                    Step::Sleep { ms } => {
                        now = now + Duration::from_millis(u64::from(*ms));
                        c.handle_timeout(now);
                    }
                    Step::Session { event: 0, .. } => c.handle(now, Input::Session(SessionEvent::Connected {
                        session_id: Some(SessionId(1)),
                        timeout: Duration::from_secs(3),
                    })),
                    Step::Session { .. } => c.handle(now, Input::Session(SessionEvent::Disconnected)),
                    _ => {}
                }
                if !batch {
                    notices.extend(std::iter::from_fn(|| c.poll_notice()));
                    commands.extend(std::iter::from_fn(|| c.poll_command()));
                }
            }
            notices.extend(std::iter::from_fn(|| c.poll_notice()));
            commands.extend(std::iter::from_fn(|| c.poll_command()));
            (notices, commands, c.role())
        };
        prop_assert_eq!(run(false), run(true));
    }
}

/// Replaying the same recorded inputs into a fresh machine gives the same outputs.
#[test]
fn replay_of_a_recorded_input_log_is_identical() {
    let config = Config::builder(PATH, "a").nonce_seed(3).build().unwrap();
    let mut log: Vec<(Timestamp, Input)> = Vec::new();
    let mut live = Candidate::new(config.clone());
    let mut outputs = Vec::new();
    live.join(Timestamp::ZERO);
    let connected = Input::Session(SessionEvent::Connected {
        session_id: Some(SessionId(9)),
        timeout: Duration::from_secs(3),
    });
    let mut now = Timestamp::ZERO;
    let feed =
        |c: &mut Candidate, now: Timestamp, input: Input, log: &mut Vec<(Timestamp, Input)>| {
            log.push((now, input.clone()));
            c.handle(now, input);
            let mut out = Vec::new();
            out.extend(std::iter::from_fn(|| c.poll_notice()).map(|n| format!("{n:?}")));
            out.extend(std::iter::from_fn(|| c.poll_command()).map(|c| format!("{c:?}")));
            out
        };
    outputs.extend(feed(&mut live, now, connected, &mut log));
    for i in 0..20u64 {
        now = now + Duration::from_millis(300);
        let op = OpId(i + 1);
        let result = if i % 3 == 0 {
            Err(ZkCode::ConnectionLoss)
        } else {
            Ok(Reply::Children(vec![format!("n_{i:010}")]))
        };
        outputs.extend(feed(&mut live, now, Input::Reply { op, result }, &mut log));
    }
    let mut replayed = Candidate::new(config);
    replayed.join(Timestamp::ZERO);
    let mut again = Vec::new();
    for (t, input) in log {
        replayed.handle(t, input);
        again.extend(std::iter::from_fn(|| replayed.poll_notice()).map(|n| format!("{n:?}")));
        again.extend(std::iter::from_fn(|| replayed.poll_command()).map(|c| format!("{c:?}")));
    }
    assert_eq!(outputs, again);
    assert_eq!(live, replayed);
}
