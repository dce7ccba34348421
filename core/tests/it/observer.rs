//! Transcripts and properties of the [`Observer`]: the participant list it
//! reports for what the server says, including after the sequence wrap, with
//! every input stale, duplicated, reordered or failed.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use zkelect_core::*;

const PATH: &str = "/svc/leader";
const SID: SessionId = SessionId(0x100);

fn connected(sid: SessionId) -> Input {
    Input::Session(SessionEvent::Connected {
        session_id: Some(sid),
        timeout: Duration::from_secs(3),
    })
}

fn live(czxid: i64) -> Stat {
    Stat {
        czxid,
        ephemeral_owner: SID.0,
        ..Stat::default()
    }
}

/// A hand-driver: feed inputs, take commands by kind, read notices.
struct Obs {
    o: Observer,
    now: Timestamp,
    pending: Vec<Command>,
    notices: Vec<Notice>,
}

impl Obs {
    fn new(config: ObserverConfig) -> Self {
        let mut d = Self {
            o: Observer::new(config).expect("valid config"),
            now: Timestamp::ZERO,
            pending: Vec::new(),
            notices: Vec::new(),
        };
        d.feed(connected(SID));
        d
    }

    fn drain(&mut self) {
        while let Some(n) = self.o.poll_notice() {
            self.notices.push(n);
        }
        while let Some(c) = self.o.poll_command() {
            self.pending.push(c);
        }
    }

    fn feed(&mut self, input: Input) {
        self.o.handle(self.now, input);
        self.drain();
    }

    fn take(&mut self, verb: Verb) -> Command {
        let at = self
            .pending
            .iter()
            .position(|c| c.request.kind() == verb)
            .unwrap_or_else(|| panic!("no {verb} pending in {:?}", self.pending));
        self.pending.remove(at)
    }

    fn take_read(&mut self, name: &str) -> Command {
        let path = format!("{PATH}/{name}");
        let at = self
            .pending
            .iter()
            .position(|c| {
                // Whether it watches the data is the observer's rule,
                // checked where it matters.
                matches!(&c.request, Request::GetData { path: p, .. } if *p == path)
            })
            .unwrap_or_else(|| panic!("no read of {name} pending in {:?}", self.pending));
        self.pending.remove(at)
    }

    fn answer(&mut self, cmd: &Command, result: Result<Reply, ZkCode>) {
        self.feed(Input::Reply { op: cmd.op, result });
    }

    /// Answers the pending listing with `children` (after answering the
    /// sync before it, if one is pending: after a reconnect).
    fn list(&mut self, children: &[&str]) {
        if let Some(at) = self
            .pending
            .iter()
            .position(|c| c.request.kind() == Verb::Sync)
        {
            let sync = self.pending.remove(at);
            self.answer(&sync, Ok(Reply::Synced));
        }
        let cmd = self.take(Verb::GetChildren);
        assert_eq!(
            cmd.request,
            Request::GetChildren {
                path: PATH.into(),
                watch: true
            }
        );
        let children = children.iter().map(|s| s.to_string()).collect();
        self.answer(&cmd, Ok(Reply::Children(children)));
    }

    /// Answers the pending read of `name` with id `id` and czxid `czxid`.
    fn read(&mut self, name: &str, id: &str, czxid: i64) {
        let cmd = self.take_read(name);
        self.answer(
            &cmd,
            Ok(Reply::Data {
                data: id.as_bytes().to_vec(),
                stat: live(czxid),
            }),
        );
    }

    fn children_changed(&mut self) {
        self.feed(Input::Watch(WatchEvent {
            kind: WatchKind::NodeChildrenChanged,
            path: PATH.into(),
        }));
    }

    /// The participant lists reported since the last call.
    fn lists(&mut self) -> Vec<Vec<(String, String, i64, bool)>> {
        let lists = self
            .notices
            .iter()
            .filter_map(|n| match n {
                Notice::Participants(list) => Some(
                    list.iter()
                        .map(|p| {
                            (
                                p.id().unwrap_or_default().to_owned(),
                                p.node.clone(),
                                p.token.0,
                                p.holds,
                            )
                        })
                        .collect(),
                ),
                _ => None,
            })
            .collect();
        self.notices
            .retain(|n| !matches!(n, Notice::Participants(_)));
        lists
    }
}

fn p(id: &str, node: &str, token: i64, holds: bool) -> (String, String, i64, bool) {
    (id.into(), node.into(), token, holds)
}

#[test]
fn lists_reads_each_node_and_reports_the_queue_with_k_holders() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 2));
    d.list(&[
        "_c_00000000000000cc-n_0000000003",
        "_c_00000000000000aa-n_0000000001",
        "not-ours",
        "_c_00000000000000bb-n_0000000002",
    ]);
    assert_eq!(
        d.pending.len(),
        3,
        "one read per participant, none for the rest"
    );
    d.read("_c_00000000000000bb-n_0000000002", "b", 20);
    d.read("_c_00000000000000cc-n_0000000003", "c\nextra data", 30);
    assert!(d.lists().is_empty(), "nothing until every node is read");
    d.read("_c_00000000000000aa-n_0000000001", "a", 10);
    assert_eq!(
        d.lists(),
        [vec![
            p("a", "_c_00000000000000aa-n_0000000001", 10, true),
            p("b", "_c_00000000000000bb-n_0000000002", 20, true),
            p("c", "_c_00000000000000cc-n_0000000003", 30, false),
        ]]
    );
    assert_eq!(d.o.leader().and_then(|p| p.id()), Some("a"));
    assert!(d.pending.is_empty());
}

#[test]
fn a_change_reads_every_listed_node_again_and_an_unchanged_listing_reports_nothing() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    d.list(&["n_0000000001"]);
    d.read("n_0000000001", "a", 10);
    assert_eq!(d.lists().len(), 1);

    d.children_changed();
    d.list(&["n_0000000001", "n_0000000002"]);
    assert_eq!(
        d.pending.len(),
        2,
        "every listed node is read: {:?}",
        d.pending
    );
    d.read("n_0000000002", "b", 20);
    assert!(d.lists().is_empty(), "not before every read is in");
    d.read("n_0000000001", "a", 10);
    assert_eq!(
        d.lists(),
        [vec![
            p("a", "n_0000000001", 10, true),
            p("b", "n_0000000002", 20, false)
        ]]
    );

    // The same queue again (a spurious event): nothing to report.
    d.children_changed();
    d.list(&["n_0000000002", "n_0000000001"]);
    d.read("n_0000000001", "a", 10);
    d.read("n_0000000002", "b", 20);
    assert!(d.pending.is_empty());
    assert!(d.lists().is_empty());

    // The leader goes: b leads, with its own token.
    d.children_changed();
    d.list(&["n_0000000002"]);
    d.read("n_0000000002", "b", 20);
    assert_eq!(d.lists(), [vec![p("b", "n_0000000002", 20, true)]]);
    assert_eq!(d.o.stats().lists, 3);
}

/// Found by the simulator (seed 47360 of the `pauses` mix): the
/// observer stayed connected, but its link was slow; between two of its
/// listings the election was deleted and recreated, and kazoo's lock took its
/// old name again (a new node, a new czxid). A listing cannot tell a reused
/// name from the node it named before, so every listing reads every node.
#[test]
fn a_name_reused_between_two_listings_is_read_again() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    d.list(&["n_0000000001"]);
    let stale = d.take_read("n_0000000001");
    d.children_changed();
    d.list(&["n_0000000001"]);
    // The read sent before the listing may have read the old node.
    d.answer(
        &stale,
        Ok(Reply::Data {
            data: b"a".to_vec(),
            stat: live(10),
        }),
    );
    assert!(d.lists().is_empty(), "an answer older than the listing");
    d.read("n_0000000001", "a", 30);
    assert_eq!(d.lists(), [vec![p("a", "n_0000000001", 30, true)]]);

    d.children_changed();
    d.list(&["n_0000000001"]);
    d.read("n_0000000001", "b", 40);
    assert_eq!(d.lists(), [vec![p("b", "n_0000000001", 40, true)]]);
}

#[test]
fn after_the_sequence_wrap_the_oldest_node_leads_not_the_newest() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    // The parent's counter passed 2^31 - 1: the newest nodes carry negative
    // sequences, which a raw i32 comparison would put first.
    d.list(&[
        "n_-2147483647",
        "n_2147483646",
        "n_-2147483648",
        "n_2147483647",
    ]);
    d.read("n_-2147483647", "newest", 40);
    d.read("n_-2147483648", "third", 30);
    d.read("n_2147483647", "second", 20);
    d.read("n_2147483646", "oldest", 10);
    assert_eq!(
        d.lists(),
        [vec![
            p("oldest", "n_2147483646", 10, true),
            p("second", "n_2147483647", 20, false),
            p("third", "n_-2147483648", 30, false),
            p("newest", "n_-2147483647", 40, false),
        ]]
    );
    d.children_changed();
    d.list(&["n_-2147483647", "n_-2147483648", "n_2147483647"]);
    d.read("n_2147483647", "second", 20);
    d.read("n_-2147483648", "third", 30);
    d.read("n_-2147483647", "newest", 40);
    assert_eq!(d.o.leader().and_then(|p| p.id()), Some("second"));
    d.children_changed();
    d.list(&["n_-2147483647", "n_-2147483648"]);
    d.read("n_-2147483648", "third", 30);
    d.read("n_-2147483647", "newest", 40);
    assert_eq!(d.o.leader().and_then(|p| p.id()), Some("third"));
}

/// Lists `nodes` (name, id, czxid), answers each read, returns who holds with which access.
fn holders_of(config: ObserverConfig, nodes: &[(&str, &str, i64)]) -> Vec<(String, bool, Access)> {
    let mut d = Obs::new(config);
    let names: Vec<&str> = nodes.iter().map(|n| n.0).collect();
    d.list(&names);
    for (node, id, czxid) in nodes {
        // Nodes of other recipes are not in the queue, so not read.
        let path = format!("{PATH}/{node}");
        if d.pending.iter().any(|c| c.request.path() == path) {
            d.read(node, id, *czxid);
        }
    }
    assert_eq!(d.lists().len(), 1);
    d.o.participants()
        .iter()
        .map(|p| (p.id().unwrap_or_default().to_owned(), p.holds, p.access))
        .collect()
}

#[test]
fn every_recipe_says_who_holds() {
    use Access::{Exclusive as X, Shared as S};
    let h = |id: &str, holds: bool, access: Access| (id.to_owned(), holds, access);
    assert_eq!(
        holders_of(
            ObserverConfig::new(PATH, Recipe::Mutex),
            &[
                ("m_0000000002", "b", 2),
                ("m_0000000001", "a", 1),
                ("n_0000000000", "x", 9)
            ]
        ),
        [h("a", true, X), h("b", false, X)]
    );
    assert_eq!(
        holders_of(
            ObserverConfig::new(PATH, Recipe::Semaphore { permits: 2 }),
            &[
                ("s_0000000001", "a", 1),
                ("s_0000000002", "b", 2),
                ("s_0000000003", "c", 3)
            ]
        ),
        [h("a", true, X), h("b", true, X), h("c", false, X)]
    );
    // Readers share until the first writer; readers behind a writer wait.
    assert_eq!(
        holders_of(
            ObserverConfig::new(PATH, Recipe::ReadWrite),
            &[
                ("r_0000000001", "r1", 1),
                ("r_0000000002", "r2", 2),
                ("w_0000000003", "w", 3),
                ("r_0000000004", "r3", 4),
            ]
        ),
        [
            h("r1", true, S),
            h("r2", true, S),
            h("w", false, X),
            h("r3", false, S)
        ]
    );
    // kazoo's read-write lock, as a kazoo fleet writes it.
    assert_eq!(
        holders_of(
            ObserverConfig::new(PATH, Recipe::ReadWrite).with_interop(Interop::Kazoo),
            &[
                ("0123456789abcdef0123456789abcdef__lock__0000000001", "w", 1),
                (
                    "fedcba9876543210fedcba9876543210__rlock__0000000002",
                    "r",
                    2
                ),
            ]
        ),
        [h("w", true, X), h("r", false, S)]
    );
    // A writer that downgraded reads: the reader behind it holds too, the
    // writer behind both waits.
    assert_eq!(
        holders_of(
            ObserverConfig::new(PATH, Recipe::ReadWrite),
            &[
                ("w_0000000001", "\0read\nw", 1),
                ("r_0000000002", "r", 2),
                ("w_0000000003", "x", 3),
            ]
        ),
        [h("w", true, S), h("r", true, S), h("x", false, X)]
    );
    // A weighted semaphore of 3: 2 + 1 fit, the next 2 waits.
    assert_eq!(
        holders_of(
            ObserverConfig::new(PATH, Recipe::Semaphore { permits: 3 }),
            &[
                ("s_w2_0000000001", "a", 1),
                ("s_0000000002", "b", 2),
                ("s_w2_0000000003", "c", 3),
            ]
        ),
        [h("a", true, X), h("b", true, X), h("c", false, X)]
    );
}

#[test]
fn a_writer_that_downgrades_after_it_was_read_is_shown_shared() {
    let mut d = Obs::new(ObserverConfig::new(PATH, Recipe::ReadWrite));
    d.list(&["w_0000000001", "r_0000000002"]);
    d.read("w_0000000001", "w", 1);
    d.read("r_0000000002", "r", 2);
    let holds = |d: &Obs| -> Vec<(String, bool, Access)> {
        d.o.participants()
            .iter()
            .map(|p| (p.id().unwrap_or_default().to_owned(), p.holds, p.access))
            .collect()
    };
    assert_eq!(d.lists().len(), 1);
    assert_eq!(
        holds(&d),
        [
            ("w".to_owned(), true, Access::Exclusive),
            ("r".to_owned(), false, Access::Shared)
        ]
    );
    // The writer downgrades: its data changes, which its read watched.
    // That node alone is read again (the queue is as it was).
    d.feed(Input::Watch(WatchEvent {
        kind: WatchKind::NodeDataChanged,
        path: format!("{PATH}/w_0000000001"),
    }));
    assert!(d.pending.iter().all(|c| c.request.kind() == Verb::GetData));
    let again = d.take_read("w_0000000001");
    assert!(matches!(
        again.request,
        Request::GetData { watch: true, .. }
    ));
    assert!(d.pending.is_empty(), "{:?}", d.pending);
    d.answer(
        &again,
        Ok(Reply::Data {
            data: b"\0read\nw".to_vec(),
            stat: live(1),
        }),
    );
    assert_eq!(d.lists().len(), 1);
    assert_eq!(
        holds(&d),
        [
            ("w".to_owned(), true, Access::Shared),
            ("r".to_owned(), true, Access::Shared)
        ]
    );
}

#[test]
fn a_revocation_request_written_over_a_node_is_reported_with_no_id() {
    let mut d = Obs::new(ObserverConfig::new(PATH, Recipe::Mutex));
    d.list(&["m_0000000001", "m_0000000002"]);
    d.read("m_0000000001", "a\nhost-a", 1);
    d.read("m_0000000002", "b", 2);
    assert_eq!(d.lists().len(), 1);
    let seen = |d: &Obs| -> Vec<(Identity, bool)> {
        d.o.participants()
            .iter()
            .map(|p| (p.identity.clone(), p.holds))
            .collect()
    };
    let known = |id: &str, data: &[u8]| Identity::Known {
        id: id.into(),
        data: data.to_vec(),
    };
    // Someone asks the holder to let go: the request replaces its data,
    // read again at the next change of the queue.
    d.children_changed();
    d.list(&["m_0000000001", "m_0000000002"]);
    d.read("m_0000000001", "__REVOKE__", 1);
    d.read("m_0000000002", "b", 2);
    assert_eq!(d.lists().len(), 1, "the change is news");
    // Still the holder, its id unknown: not a participant named
    // `__REVOKE__`.
    assert_eq!(
        seen(&d),
        [
            (Identity::RevocationRequest, true),
            (known("b", b""), false)
        ]
    );
    // Text that merely starts with the request is an id like any other.
    d.children_changed();
    d.list(&["m_0000000001", "m_0000000002"]);
    d.read("m_0000000001", "__REVOKE__", 1);
    d.read("m_0000000002", "__REVOKE__\ndata", 2);
    assert_eq!(seen(&d)[1], (known("__REVOKE__", b"data"), false));
}

#[test]
fn a_revocation_request_is_reported_when_made_by_a_data_watch_on_the_holders_only() {
    // A semaphore of 2 permits: the two oldest hold, the third waits.
    let mut d = Obs::new(ObserverConfig::new(PATH, Recipe::Semaphore { permits: 2 }));
    let nodes = ["s_0000000001", "s_0000000002", "s_0000000003"];
    d.list(&nodes);
    let watches: Vec<bool> = nodes
        .iter()
        .map(|n| {
            let cmd = d.take_read(n);
            let Request::GetData { watch, .. } = cmd.request else {
                unreachable!()
            };
            let seq = i64::from(n.as_bytes()[n.len() - 1] - b'0');
            d.answer(
                &cmd,
                Ok(Reply::Data {
                    data: format!("id{seq}").into_bytes(),
                    stat: live(seq),
                }),
            );
            watch
        })
        .collect();
    // The holders' data is watched, the waiter's is not.
    assert_eq!(watches, [true, true, false]);
    assert_eq!(d.lists().len(), 1);
    // A request is written into the second holder's node: its watch fires,
    // and that node alone is read again (watching again), at once.
    d.feed(Input::Watch(WatchEvent {
        kind: WatchKind::NodeDataChanged,
        path: format!("{PATH}/s_0000000002"),
    }));
    let again = d.take_read("s_0000000002");
    assert!(matches!(
        again.request,
        Request::GetData { watch: true, .. }
    ));
    assert!(d.pending.is_empty(), "no listing: {:?}", d.pending);
    d.answer(
        &again,
        Ok(Reply::Data {
            data: REVOKE_MESSAGE.to_vec(),
            stat: live(2),
        }),
    );
    assert_eq!(d.lists().len(), 1, "the request is news");
    let identities: Vec<Identity> =
        d.o.participants()
            .iter()
            .map(|p| p.identity.clone())
            .collect();
    assert_eq!(identities[1], Identity::RevocationRequest);
    assert!(d.o.participants()[1].holds);
    // A data event for a node not listed (late, or of another queue's
    // node) reads nothing.
    d.feed(Input::Watch(WatchEvent {
        kind: WatchKind::NodeDataChanged,
        path: format!("{PATH}/s_0000000009"),
    }));
    assert!(d.pending.is_empty(), "{:?}", d.pending);
    // The first holder goes: the waiter holds now, and the read after
    // the listing watches its data.
    d.children_changed();
    d.list(&nodes[1..]);
    let second = d.take_read("s_0000000002");
    let third = d.take_read("s_0000000003");
    assert!(matches!(
        second.request,
        Request::GetData { watch: true, .. }
    ));
    assert!(matches!(
        third.request,
        Request::GetData { watch: true, .. }
    ));
}

#[test]
fn a_persistent_look_alike_at_the_head_is_listed_again_so_the_holder_behind_is_watched() {
    let mut d = Obs::new(ObserverConfig::new(PATH, Recipe::Mutex));
    d.list(&["m_0000000001", "m_0000000002"]);
    let first = d.take_read("m_0000000001");
    assert!(matches!(
        first.request,
        Request::GetData { watch: true, .. }
    ));
    let second = d.take_read("m_0000000002");
    assert!(matches!(
        second.request,
        Request::GetData { watch: false, .. }
    ));
    // The head is a persistent node: nobody's. The node behind holds.
    d.answer(
        &first,
        Ok(Reply::Data {
            data: Vec::new(),
            stat: Stat::default(),
        }),
    );
    d.answer(
        &second,
        Ok(Reply::Data {
            data: b"b".to_vec(),
            stat: live(2),
        }),
    );
    // A listing again, which leaves the look-alike out: now the holder's
    // read watches its data.
    d.list(&["m_0000000001", "m_0000000002"]);
    let second = d.take_read("m_0000000002");
    assert!(matches!(
        second.request,
        Request::GetData { watch: true, .. }
    ));
}

#[test]
fn persistent_look_alikes_are_skipped_and_reported_once() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    d.list(&["n_0000000001", "n_0000000002"]);
    let cmd = d.take_read("n_0000000001");
    d.answer(
        &cmd,
        Ok(Reply::Data {
            data: b"left-behind".to_vec(),
            stat: Stat {
                czxid: 10,
                ephemeral_owner: 0,
                ..Stat::default()
            },
        }),
    );
    d.read("n_0000000002", "b", 20);
    assert!(d.notices.contains(&Notice::PersistentSkipped {
        node: "n_0000000001".into()
    }));
    assert_eq!(d.lists(), [vec![p("b", "n_0000000002", 20, true)]]);
    d.children_changed();
    d.list(&["n_0000000001", "n_0000000002", "n_0000000003"]);
    d.read("n_0000000003", "c", 30);
    let skipped = d
        .notices
        .iter()
        .filter(|n| matches!(n, Notice::PersistentSkipped { .. }))
        .count();
    assert_eq!(
        skipped, 1,
        "the look-alike is neither read again nor reported twice"
    );
}

#[test]
fn interop_schemes_count_their_own_names_only() {
    let children = [
        "_c_0a1b2c3d-1111-2222-3333-444455556666-latch-0000000003",
        "0123456789abcdef0123456789abcdef__lock__0000000001",
        "_c_00000000000000aa-n_0000000002",
    ];
    for (interop, node, id) in [
        (
            Interop::Curator,
            "_c_0a1b2c3d-1111-2222-3333-444455556666-latch-0000000003",
            "curator",
        ),
        (
            Interop::Kazoo,
            "0123456789abcdef0123456789abcdef__lock__0000000001",
            "kazoo",
        ),
        (Interop::None, "_c_00000000000000aa-n_0000000002", "zkelect"),
    ] {
        let mut d = Obs::new(ObserverConfig::election(PATH, 1).with_interop(interop));
        d.list(&children);
        assert_eq!(d.pending.len(), 1, "{interop:?}");
        d.read(node, id, 5);
        assert_eq!(d.lists(), [vec![p(id, node, 5, true)]], "{interop:?}");
    }
}

#[test]
fn a_custom_prefix_is_the_queue() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 1).with_prefix("job-"));
    d.list(&["job-0000000004", "n_0000000001"]);
    d.read("job-0000000004", "j", 4);
    assert_eq!(d.lists(), [vec![p("j", "job-0000000004", 4, true)]]);
}

#[test]
fn a_node_gone_before_its_read_is_left_out() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    d.list(&["n_0000000001", "n_0000000002"]);
    let cmd = d.take_read("n_0000000001");
    d.answer(&cmd, Err(ZkCode::NoNode));
    d.read("n_0000000002", "b", 20);
    assert_eq!(d.lists(), [vec![p("b", "n_0000000002", 20, true)]]);
}

/// A queue whose path does not exist yet: reported empty at once, then an
/// `exists` watch waits for the path's creation, with nothing polled
/// meanwhile; its creation is listed and each change after it reported.
#[test]
fn a_path_that_does_not_exist_yet_is_watched_until_it_is_created() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    let cmd = d.take(Verb::GetChildren);
    d.answer(&cmd, Err(ZkCode::NoNode));
    assert_eq!(d.lists(), [Vec::new()]);
    assert!(d.o.has_reported());
    let probe = d.take(Verb::Exists);
    assert_eq!(
        probe.request,
        Request::Exists {
            path: PATH.into(),
            watch: true
        }
    );
    assert!(
        d.pending.is_empty(),
        "one request at a time: {:?}",
        d.pending
    );
    d.answer(&probe, Ok(Reply::Exists(None)));
    // The watch is set: nothing is sent, and no timer polls the path.
    assert!(d.pending.is_empty(), "no busy loop: {:?}", d.pending);
    assert_eq!(d.o.poll_timeout(), None, "no poll: the watch will say");
    d.now = d.now + Duration::from_secs(3_600);
    d.o.handle_timeout(d.now);
    d.drain();
    assert!(d.pending.is_empty());
    // The path is created (empty): listed, reported (still empty: no news).
    d.feed(Input::Watch(WatchEvent {
        kind: WatchKind::NodeCreated,
        path: PATH.into(),
    }));
    d.list(&[]);
    assert!(d.lists().is_empty(), "an empty queue was reported already");
    // Its first member joins: the listing's child watch reports it.
    d.children_changed();
    d.list(&["n_0000000001"]);
    d.read("n_0000000001", "a", 10);
    assert_eq!(d.lists(), [vec![p("a", "n_0000000001", 10, true)]]);
    assert_eq!(d.o.stats().exists_watches, 1);
    assert_eq!(d.o.stats().listings, 3);
}

/// The path deleted with its nodes (`deleteall`, a redeploy) and created
/// again: the child watch's `NodeDeleted` reports an empty queue, an
/// `exists` watch waits through the absence, and the new incarnation's
/// members are reported as they come.
#[test]
fn a_path_deleted_and_created_again_is_followed_through_its_absence() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    d.list(&["n_0000000001", "n_0000000002"]);
    d.read("n_0000000001", "a", 10);
    d.read("n_0000000002", "b", 20);
    assert_eq!(
        d.lists(),
        [vec![
            p("a", "n_0000000001", 10, true),
            p("b", "n_0000000002", 20, false)
        ]]
    );
    // deleteall: the nodes go, then the path; the child watch fires once.
    d.children_changed();
    let cmd = d.take(Verb::GetChildren);
    d.answer(&cmd, Err(ZkCode::NoNode));
    assert_eq!(d.lists(), [Vec::new()], "the absence is reported as empty");
    let probe = d.take(Verb::Exists);
    d.answer(&probe, Ok(Reply::Exists(None)));
    assert!(d.pending.is_empty());
    // Redeployed: the path comes back, and its sequence counter with it.
    d.feed(Input::Watch(WatchEvent {
        kind: WatchKind::NodeCreated,
        path: PATH.into(),
    }));
    d.list(&["n_0000000000"]);
    d.read("n_0000000000", "c", 40);
    assert_eq!(d.lists(), [vec![p("c", "n_0000000000", 40, true)]]);
    // And deleted again while a member holds: the path's `NodeDeleted`
    // (its child watch fires with the path) is enough.
    d.feed(Input::Watch(WatchEvent {
        kind: WatchKind::NodeDeleted,
        path: PATH.into(),
    }));
    let cmd = d.take(Verb::GetChildren);
    d.answer(&cmd, Err(ZkCode::NoNode));
    assert_eq!(d.lists(), [Vec::new()]);
    d.take(Verb::Exists);
    assert_eq!(d.o.stats().exists_watches, 2);
}

/// The path is created between the listing that missed it and the
/// `exists` that would wait for it: the `exists` finds it and the observer
/// lists it after a backoff (a path that flaps must not make a loop of
/// listings and probes); an event that overtakes the `exists` answer is
/// acted on the same way.
#[test]
fn a_path_created_between_the_listing_and_the_exists_is_listed_after_a_backoff() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    let cmd = d.take(Verb::GetChildren);
    d.answer(&cmd, Err(ZkCode::NoNode));
    let probe = d.take(Verb::Exists);
    d.answer(
        &probe,
        Ok(Reply::Exists(Some(Stat {
            czxid: 5,
            ..Stat::default()
        }))),
    );
    assert!(d.pending.is_empty(), "{:?}", d.pending);
    let at = d.o.poll_timeout().expect("a backoff");
    assert!(at > d.now && at <= d.now + Duration::from_millis(50));
    d.now = at;
    d.o.handle_timeout(d.now);
    d.drain();
    d.list(&["n_0000000001"]);
    d.read("n_0000000001", "a", 10);
    assert_eq!(
        d.lists(),
        [Vec::new(), vec![p("a", "n_0000000001", 10, true)]]
    );

    // Flapping: each round of deletion and creation costs a listing and an
    // exists, and the backoff between rounds grows until a listing finds
    // the path and its watch.
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    let mut waits = Vec::new();
    for _ in 0..6 {
        let cmd = d.take(Verb::GetChildren);
        d.answer(&cmd, Err(ZkCode::NoNode));
        let probe = d.take(Verb::Exists);
        // The creation's event overtakes the exists answer.
        d.feed(Input::Watch(WatchEvent {
            kind: WatchKind::NodeCreated,
            path: PATH.into(),
        }));
        d.answer(&probe, Ok(Reply::Exists(None)));
        assert!(d.pending.is_empty(), "{:?}", d.pending);
        let at = d.o.poll_timeout().expect("a backoff");
        waits.push(at.as_millis() - d.now.as_millis());
        d.now = at;
        d.o.handle_timeout(d.now);
        d.drain();
    }
    assert!(waits[5] >= 4 * waits[0], "the backoff grows: {waits:?}");
}

/// A reconnect while the observer waits for its path: the watch may be
/// lost with the connection (zookeeper-async loses them), so it syncs and
/// lists again, and waits again if the path is still missing.
#[test]
fn a_reconnect_while_the_path_is_missing_looks_again() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    let cmd = d.take(Verb::GetChildren);
    d.answer(&cmd, Err(ZkCode::NoNode));
    let probe = d.take(Verb::Exists);
    d.answer(&probe, Ok(Reply::Exists(None)));
    d.feed(Input::Session(SessionEvent::Disconnected));
    d.feed(connected(SID));
    let cmd = d.take(Verb::Sync);
    d.answer(&cmd, Ok(Reply::Synced));
    let cmd = d.take(Verb::GetChildren);
    d.answer(&cmd, Err(ZkCode::NoNode));
    d.take(Verb::Exists);
    assert!(d.lists().len() <= 1, "nothing new to report");
    // An exists refused for good stops the observer with a typed error.
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    let cmd = d.take(Verb::GetChildren);
    d.answer(&cmd, Err(ZkCode::NoNode));
    let probe = d.take(Verb::Exists);
    d.answer(&probe, Err(ZkCode::NoAuth));
    assert!(d.o.is_failed());
    // One that fails on the connection is retried after a backoff.
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    let cmd = d.take(Verb::GetChildren);
    d.answer(&cmd, Err(ZkCode::NoNode));
    let probe = d.take(Verb::Exists);
    d.answer(&probe, Err(ZkCode::ConnectionLoss));
    assert!(d.pending.is_empty());
    let at = d.o.poll_timeout().expect("a backoff");
    d.now = at;
    d.o.handle_timeout(d.now);
    d.drain();
    d.take(Verb::GetChildren);
}

#[test]
fn connection_loss_backs_off_and_retries_what_failed() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    d.list(&["n_0000000001"]);
    let cmd = d.take_read("n_0000000001");
    d.answer(&cmd, Err(ZkCode::ConnectionLoss));
    assert!(d.pending.is_empty());
    let at = d.o.poll_timeout().expect("a retry is scheduled");
    d.now = at;
    d.o.handle_timeout(d.now);
    d.drain();
    d.read("n_0000000001", "a", 10);
    assert_eq!(d.lists(), [vec![p("a", "n_0000000001", 10, true)]]);
    assert_eq!(d.o.poll_timeout(), None);
}

/// A read answered with a listing (no server sends one: the transport is
/// broken) stops the observer with a typed error naming both kinds; it asks
/// for nothing more.
#[test]
fn a_reply_of_the_wrong_kind_stops_the_observer_with_a_typed_error() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    d.list(&["n_0000000001"]);
    let cmd = d.take_read("n_0000000001");
    d.answer(&cmd, Ok(Reply::Children(Vec::new())));
    assert!(d.o.is_failed());
    assert_eq!(
        d.notices.last(),
        Some(&Notice::Error(CandidateError::WrongReply(WrongReply {
            request: Verb::GetData,
            reply: Verb::GetChildren,
            path: PATH.into(),
        })))
    );
    assert!(d.pending.is_empty());
    assert_eq!(d.o.poll_timeout(), None);
}

#[test]
fn an_event_during_a_listing_lists_again_after_it() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    d.children_changed();
    d.list(&["n_0000000001"]);
    // The answer may predate the event: list again.
    let again = d.take(Verb::GetChildren);
    d.read("n_0000000001", "a", 10);
    d.answer(
        &again,
        Ok(Reply::Children(vec![
            "n_0000000001".into(),
            "n_0000000002".into(),
        ])),
    );
    d.read("n_0000000001", "a", 10);
    d.read("n_0000000002", "b", 20);
    let lists = d.lists();
    assert_eq!(lists.last().map(Vec::len), Some(2));
}

#[test]
fn replies_of_an_expired_session_and_duplicates_are_ignored() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    let old = d.take(Verb::GetChildren);
    d.feed(Input::Session(SessionEvent::Expired));
    d.feed(connected(SessionId(0x200)));
    // The old session's listing answers late, with a queue that no longer is.
    d.answer(&old, Ok(Reply::Children(vec!["n_0000000009".into()])));
    assert!(d
        .pending
        .iter()
        .all(|c| c.request.kind() == Verb::GetChildren));
    let new = d.take(Verb::GetChildren);
    d.answer(&new, Ok(Reply::Children(vec!["n_0000000001".into()])));
    d.answer(&new, Ok(Reply::Children(vec!["n_0000000007".into()])));
    d.read("n_0000000001", "a", 10);
    assert_eq!(d.lists(), [vec![p("a", "n_0000000001", 10, true)]]);
    assert_eq!(d.o.stats().stale_replies, 2);
}

#[test]
fn a_reconnect_lists_again_in_case_a_change_was_missed() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    d.list(&["n_0000000001"]);
    d.read("n_0000000001", "a", 10);
    d.feed(Input::Session(SessionEvent::Disconnected));
    assert!(d.pending.is_empty());
    d.feed(connected(SID));
    d.list(&["n_0000000002"]);
    d.read("n_0000000002", "b", 20);
    let lists = d.lists();
    assert_eq!(lists.last(), Some(&vec![p("b", "n_0000000002", 20, true)]));
}

/// Found by the simulator's ensemble worlds: after a reconnect the server may be behind
/// the leader (never behind what the client has seen), so a listing from it
/// could report a queue older than the one already reported. The observer
/// syncs first, and reads nothing (its listed nodes are read again) until
/// the sync is answered; a first connection pays no sync.
#[test]
fn a_reconnect_syncs_before_it_lists_or_reads() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    assert!(
        d.pending.iter().all(|c| c.request.kind() != Verb::Sync),
        "{:?}",
        d.pending
    );
    d.list(&["n_0000000001"]);
    d.read("n_0000000001", "a", 10);
    d.feed(Input::Session(SessionEvent::Disconnected));
    d.feed(connected(SID));
    assert_eq!(
        d.pending
            .iter()
            .map(|c| c.request.clone())
            .collect::<Vec<_>>(),
        [Request::Sync { path: PATH.into() }]
    );
    // A children event while the sync is in flight: the listing after it says it all.
    d.children_changed();
    assert_eq!(d.pending.len(), 1, "{:?}", d.pending);
    let sync = d.take(Verb::Sync);
    d.answer(&sync, Ok(Reply::Synced));
    d.list(&[]);
    assert_eq!(d.lists().last(), Some(&vec![]));
    // A failed sync is retried after a backoff, and the listing still waits.
    d.feed(Input::Session(SessionEvent::Disconnected));
    d.feed(connected(SID));
    let sync = d.take(Verb::Sync);
    d.answer(&sync, Err(ZkCode::ConnectionLoss));
    assert!(d.pending.is_empty(), "{:?}", d.pending);
    d.now = d.now + Duration::from_secs(60);
    d.o.handle_timeout(d.now);
    d.drain();
    let sync = d.take(Verb::Sync);
    d.answer(&sync, Ok(Reply::Synced));
    d.take(Verb::GetChildren);
}

/// Found by the simulator (seed 9479 of the `lag` mix, minimised to
/// a slow link and a deleted election): while the observer's link was down
/// the queue's parent was deleted and recreated, its sequence counter
/// restarted, and the same kazoo lock took the same name again — a new node
/// with a new czxid under an old name. The observer kept the old node's
/// token for good; after a reconnect it now reads every listed node again.
#[test]
fn a_name_reused_across_a_reconnect_is_read_again() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    d.list(&["n_0000000001"]);
    d.read("n_0000000001", "a", 10);
    d.feed(Input::Session(SessionEvent::Disconnected));
    d.feed(connected(SID));
    d.list(&["n_0000000001"]);
    d.read("n_0000000001", "b", 30);
    let lists = d.lists();
    assert_eq!(lists.last(), Some(&vec![p("b", "n_0000000001", 30, true)]));
}

#[test]
fn refusals_stop_the_observer_with_a_typed_error() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    let cmd = d.take(Verb::GetChildren);
    d.answer(&cmd, Err(ZkCode::NoAuth));
    assert!(d.o.is_failed());
    assert!(matches!(
        d.notices.last(),
        Some(Notice::Error(CandidateError::Refused {
            code: ZkCode::NoAuth,
            ..
        }))
    ));

    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    d.feed(Input::Session(SessionEvent::AuthFailed));
    assert!(d.o.is_failed());
    assert_eq!(
        d.notices.last(),
        Some(&Notice::Error(CandidateError::AuthFailed))
    );
    assert_eq!(d.o.poll_command(), None);
}

#[test]
fn close_stops_everything() {
    let mut d = Obs::new(ObserverConfig::election(PATH, 1));
    let cmd = d.take(Verb::GetChildren);
    d.o.close(d.now);
    d.answer(&cmd, Ok(Reply::Children(vec!["n_0000000001".into()])));
    d.children_changed();
    assert!(d.o.is_closed());
    assert!(d.pending.is_empty());
    assert!(d.lists().is_empty());
}

#[test]
fn bad_descriptions_are_refused() {
    assert!(matches!(
        Observer::new(ObserverConfig::election("no-slash", 1)),
        Err(ConfigError::InvalidPath { .. })
    ));
    assert!(matches!(
        Observer::new(ObserverConfig::election(PATH, 0)),
        Err(ConfigError::InvalidLeaders(0))
    ));
    assert!(matches!(
        Observer::new(ObserverConfig::election(PATH, 1).with_prefix("x/")),
        Err(ConfigError::InvalidPrefix { .. })
    ));
    assert!(matches!(
        Observer::new(
            ObserverConfig::election(PATH, 1)
                .with_prefix("x_")
                .with_interop(Interop::Kazoo)
        ),
        Err(ConfigError::InteropPrefix(Interop::Kazoo))
    ));
    assert!(matches!(
        Observer::new(
            ObserverConfig::new(PATH, Recipe::Semaphore { permits: 2 })
                .with_interop(Interop::Curator)
        ),
        Err(ConfigError::InteropRule { .. })
    ));
    assert!(matches!(
        Observer::new(ObserverConfig::new(PATH, Recipe::ReadWrite).with_prefix("x_")),
        Err(ConfigError::InvalidPrefix { .. })
    ));
    assert!(matches!(
        Observer::new(ObserverConfig::election(PATH, 2).with_interop(Interop::Curator)),
        Err(ConfigError::InteropLeaders(Interop::Curator))
    ));
}

// ----- properties ------------------------------------------------------------

/// One thing the world does to an observer.
#[derive(Debug, Clone)]
enum Act {
    /// Answer a pending request truthfully.
    Answer(prop::sample::Index),
    /// The server answers a pending request now, but the answer reaches the
    /// observer only later (a driver's replies and events travel apart), after
    /// events that may be about later changes.
    Process(prop::sample::Index),
    /// Deliver the oldest such answer.
    Late,
    /// Answer a pending request with an error.
    Fail(prop::sample::Index, u8),
    /// Deliver an answer again.
    Duplicate(prop::sample::Index),
    /// A contender joins (persistent if the flag is set).
    Join(bool),
    /// A contender leaves.
    Leave(prop::sample::Index),
    /// Deliver the oldest queued watch event.
    Event,
    /// A watch event nobody asked for.
    Spurious,
    Disconnect,
    Reconnect,
    Expire,
    /// Time passes (milliseconds).
    Wait(u16),
    /// The path is deleted with every node under it (`deleteall`).
    Wipe,
    /// The path is created (again), its sequence counter from the start.
    Create,
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        6 => any::<prop::sample::Index>().prop_map(Act::Answer),
        2 => any::<prop::sample::Index>().prop_map(Act::Process),
        2 => Just(Act::Late),
        1 => (any::<prop::sample::Index>(), 0u8..4).prop_map(|(i, c)| Act::Fail(i, c)),
        1 => any::<prop::sample::Index>().prop_map(Act::Duplicate),
        3 => prop::bool::weighted(0.2).prop_map(Act::Join),
        2 => any::<prop::sample::Index>().prop_map(Act::Leave),
        3 => Just(Act::Event),
        1 => Just(Act::Spurious),
        1 => Just(Act::Disconnect),
        1 => Just(Act::Reconnect),
        1 => Just(Act::Expire),
        1 => (0u16..6000).prop_map(Act::Wait),
        1 => Just(Act::Wipe),
        2 => Just(Act::Create),
    ]
}

/// The server's side: the queue, and whether the observer's child watch is set.
struct World {
    d: Obs,
    /// name -> (id, czxid, ephemeral)
    nodes: BTreeMap<String, (String, i64, bool)>,
    next_seq: i32,
    /// Where the sequence counter starts when the path is created.
    start: i32,
    next_zxid: i64,
    /// Whether the path exists.
    exists: bool,
    /// The observer's child watch on the path is set.
    armed: bool,
    /// Its `exists` watch on the path is set (a creation watch while the
    /// path is missing, a data watch while it exists).
    exists_armed: bool,
    events: Vec<WatchEvent>,
    answered: Vec<(OpId, Result<Reply, ZkCode>)>,
    late: Vec<(OpId, Result<Reply, ZkCode>)>,
    session: i64,
    connected: bool,
}

impl World {
    fn truth(&self, request: &Request) -> Result<Reply, ZkCode> {
        match request {
            Request::GetChildren { .. } | Request::GetData { .. } if !self.exists => {
                Err(ZkCode::NoNode)
            }
            Request::Exists { path, .. } => {
                assert_eq!(path, PATH);
                Ok(Reply::Exists(self.exists.then(Stat::default)))
            }
            Request::GetChildren { .. } => {
                Ok(Reply::Children(self.nodes.keys().cloned().collect()))
            }
            Request::GetData { path, .. } => {
                let name = path.rsplit('/').next().unwrap_or_default();
                match self.nodes.get(name) {
                    Some((id, czxid, ephemeral)) => Ok(Reply::Data {
                        data: id.as_bytes().to_vec(),
                        stat: Stat {
                            czxid: *czxid,
                            ephemeral_owner: if *ephemeral { 7 } else { 0 },
                            ..Stat::default()
                        },
                    }),
                    None => Err(ZkCode::NoNode),
                }
            }
            Request::Sync { .. } => Ok(Reply::Synced),
            other => panic!("an observer never sends {other:?}"),
        }
    }

    fn changed(&mut self) {
        if std::mem::take(&mut self.armed) {
            self.events.push(WatchEvent {
                kind: WatchKind::NodeChildrenChanged,
                path: PATH.into(),
            });
        }
    }

    /// The watch a request sets, as the server sets it: none by a listing
    /// of a missing path.
    fn arms(&mut self, request: &Request) {
        match request {
            Request::GetChildren { watch: true, .. } if self.exists => self.armed = true,
            Request::Exists { watch: true, .. } => self.exists_armed = true,
            _ => {}
        }
    }

    fn fire(&mut self, kind: WatchKind) {
        self.events.push(WatchEvent {
            kind,
            path: PATH.into(),
        });
    }

    fn answer(&mut self, at: usize) {
        let cmd = self.d.pending.remove(at);
        let result = self.truth(&cmd.request);
        self.arms(&cmd.request);
        self.answered.push((cmd.op, result.clone()));
        self.d.answer(&cmd, result);
    }

    fn step(&mut self, act: Act) {
        match act {
            Act::Answer(i) if self.connected && !self.d.pending.is_empty() => {
                let at = i.index(self.d.pending.len());
                self.answer(at);
            }
            Act::Process(i) if self.connected && !self.d.pending.is_empty() => {
                let cmd = self.d.pending.remove(i.index(self.d.pending.len()));
                let result = self.truth(&cmd.request);
                self.arms(&cmd.request);
                self.answered.push((cmd.op, result.clone()));
                self.late.push((cmd.op, result));
            }
            Act::Late if !self.late.is_empty() => {
                let (op, result) = self.late.remove(0);
                self.d.feed(Input::Reply { op, result });
            }
            Act::Fail(i, code) if !self.d.pending.is_empty() => {
                let cmd = self.d.pending.remove(i.index(self.d.pending.len()));
                let code = [
                    ZkCode::ConnectionLoss,
                    ZkCode::OperationTimeout,
                    ZkCode::SessionExpired,
                    ZkCode::SessionMoved,
                ][usize::from(code)];
                self.d.answer(&cmd, Err(code));
            }
            Act::Duplicate(i) if !self.answered.is_empty() => {
                let (op, result) = self.answered[i.index(self.answered.len())].clone();
                self.d.feed(Input::Reply { op, result });
            }
            Act::Wipe if self.exists => {
                // The children first, then the path, as `deleteall` does:
                // the child watch fires with the first deletion.
                let had_children = !self.nodes.is_empty();
                self.nodes.clear();
                self.exists = false;
                if std::mem::take(&mut self.armed) {
                    self.fire(if had_children {
                        WatchKind::NodeChildrenChanged
                    } else {
                        WatchKind::NodeDeleted
                    });
                }
                if std::mem::take(&mut self.exists_armed) {
                    self.fire(WatchKind::NodeDeleted);
                }
            }
            Act::Create if !self.exists => {
                self.exists = true;
                self.next_seq = self.start;
                self.next_zxid += 1;
                if std::mem::take(&mut self.exists_armed) {
                    self.fire(WatchKind::NodeCreated);
                }
            }
            Act::Join(_) if !self.exists => {}
            Act::Join(persistent) => {
                let name = format!("n_{:010}", self.next_seq);
                self.next_seq = self.next_seq.wrapping_add(1);
                self.next_zxid += 1;
                let id = format!("id{}", self.next_zxid);
                self.nodes.insert(name, (id, self.next_zxid, !persistent));
                self.changed();
            }
            Act::Leave(i) if !self.nodes.is_empty() => {
                let name = self.nodes.keys().nth(i.index(self.nodes.len())).cloned();
                if let Some(name) = name {
                    self.nodes.remove(&name);
                    self.changed();
                }
            }
            Act::Event if !self.events.is_empty() && self.connected => {
                let event = self.events.remove(0);
                self.d.feed(Input::Watch(event));
            }
            Act::Spurious => self.d.feed(Input::Watch(WatchEvent {
                kind: WatchKind::NodeChildrenChanged,
                path: PATH.into(),
            })),
            Act::Disconnect => {
                self.connected = false;
                self.d.feed(Input::Session(SessionEvent::Disconnected));
            }
            Act::Reconnect => {
                self.connected = true;
                self.d.feed(connected(SessionId(self.session)));
            }
            Act::Expire => {
                self.session += 1;
                self.armed = false;
                self.exists_armed = false;
                self.events.clear();
                self.connected = true;
                self.d.feed(Input::Session(SessionEvent::Expired));
                self.d.feed(connected(SessionId(self.session)));
            }
            Act::Wait(ms) => {
                self.d.now = self.d.now + Duration::from_millis(u64::from(ms));
                self.d.o.handle_timeout(self.d.now);
                self.d.drain();
            }
            _ => {}
        }
    }

    /// What the last report must be once everything settled.
    fn expected(&self, k: usize) -> Vec<(String, String, i64, bool)> {
        let live: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, (_, _, ephemeral))| *ephemeral)
            .map(|(name, _)| name.clone())
            .collect();
        let (queue, _) = name::queue(&live, "n_", Interop::None, Recipe::Election { leaders: 1 });
        queue
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let (id, czxid, _) = &self.nodes[&n.name];
                (id.clone(), n.name.clone(), *czxid, i < k)
            })
            .collect()
    }
}

/// Runs `acts` against an observer of a k-leader election whose path
/// exists at the start unless `absent`, then settles the world, checking
/// every report on the way and the last one against the truth.
fn settles(start: i32, k: u32, absent: bool, acts: Vec<Act>) -> Result<(), TestCaseError> {
    let mut w = World {
        d: Obs::new(ObserverConfig::election(PATH, k)),
        nodes: BTreeMap::new(),
        next_seq: start,
        start,
        next_zxid: 100,
        exists: !absent,
        armed: false,
        exists_armed: false,
        events: Vec::new(),
        answered: Vec::new(),
        late: Vec::new(),
        session: SID.0,
        connected: true,
    };
    let mut last: Option<Vec<(String, String, i64, bool)>> = None;
    let mut check = |w: &mut World| -> Result<(), TestCaseError> {
        for list in w.d.lists() {
            prop_assert_ne!(Some(&list), last.as_ref(), "a report repeats the last one");
            let holders = list.iter().take_while(|p| p.3).count();
            prop_assert_eq!(holders, list.len().min(k as usize));
            prop_assert!(list.iter().all(|p| !p.3) || list[..holders].iter().all(|p| p.3));
            let names: std::collections::BTreeSet<_> = list.iter().map(|p| &p.1).collect();
            prop_assert_eq!(names.len(), list.len(), "a node listed twice");
            last = Some(list);
        }
        Ok(())
    };
    for a in acts {
        w.step(a);
        check(&mut w)?;
    }
    // Settle: connected (a reconnect lists again, so only a world that
    // ended disconnected gets one), every event delivered, every request
    // answered.
    if !w.connected {
        w.step(Act::Reconnect);
    }
    for _ in 0..200 {
        while !w.events.is_empty() {
            w.step(Act::Event);
        }
        while !w.late.is_empty() {
            w.step(Act::Late);
        }
        if let Some(at) = w.d.o.poll_timeout() {
            w.d.now = at;
            w.d.o.handle_timeout(at);
            w.d.drain();
        }
        while !w.d.pending.is_empty() {
            w.answer(0);
        }
        if w.d.o.poll_timeout().is_none()
            && w.d.pending.is_empty()
            && w.events.is_empty()
            && w.late.is_empty()
        {
            break;
        }
    }
    check(&mut w)?;
    prop_assert!(
        w.d.pending.is_empty() && w.d.o.poll_timeout().is_none(),
        "never settles"
    );
    let want = w.expected(k as usize);
    let got: Vec<_> =
        w.d.o
            .participants()
            .iter()
            .map(|p| {
                (
                    p.id().unwrap_or_default().to_owned(),
                    p.node.clone(),
                    p.token.0,
                    p.holds,
                )
            })
            .collect();
    prop_assert_eq!(got, want);
    Ok(())
}

/// What the world does while the session stays up: the queue's path comes
/// and goes, nothing reconnects (a reconnect lists again, and would hide an
/// observer deaf to its path's creation).
fn steady_act() -> impl Strategy<Value = Act> {
    act().prop_filter("the session stays up", |a| {
        !matches!(a, Act::Disconnect | Act::Reconnect | Act::Expire)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Whatever the world does, every report is a well-formed queue that differs
    /// from the one before, and once the world settles the last report is the
    /// truth: every ephemeral node, oldest first across the wrap, k holding.
    #[test]
    fn reports_are_well_formed_and_settle_on_the_truth(
        start in prop_oneof![Just(0i32), Just(i32::MAX - 8), any::<i32>()],
        k in 1u32..4,
        absent in prop::bool::weighted(0.3),
        acts in proptest::collection::vec(act(), 0..120),
    ) {
        settles(start, k, absent, acts)?;
    }

    /// The path created late, deleted with its nodes and created again, on
    /// one connection: the observer follows it by its watches alone.
    #[test]
    fn a_path_that_comes_and_goes_is_followed_by_its_watches(
        k in 1u32..4,
        absent in any::<bool>(),
        acts in proptest::collection::vec(steady_act(), 0..80),
    ) {
        settles(0, k, absent, acts)?;
    }
}
