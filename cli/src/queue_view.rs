//! What `zkelect status` shows: the queue in order, who leads (or holds the
//! lock), each node's id and data, and who watches whom — formatted from
//! what the core's [`Observer`](zkelect_core::Observer) reports, which reads
//! the queue for the library, the CLI and the simulator alike.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::Serialize;
use zkelect_core::name::{self, Access, Origin};
use zkelect_core::{Interop, ObserverConfig, Participant, Recipe};

/// What the text shows for an id a revocation request wrote over.
const UNKNOWN: &str = "(id unknown)";

/// What the text says of a node whose data is a revocation request.
const REQUESTED: &str = "revocation requested";

/// One node in the queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Entry {
    /// Position, 0 = oldest.
    pub(crate) position: usize,
    /// The child name.
    pub(crate) node: String,
    /// The sequence number ZooKeeper appended.
    pub(crate) sequence: i32,
    /// Whether this node leads (holds the lock).
    pub(crate) leader: bool,
    /// `exclusive`, or `shared` for a reader of a read-write lock.
    pub(crate) access: &'static str,
    /// The permits it asks for (a weighted semaphore's weight, 1 otherwise).
    pub(crate) weight: u32,
    /// Who the node says it is. In JSON its fields sit in the entry itself:
    /// `"identity": "known"` with `id` and `data`, or `"identity":
    /// "revocation_request"` with neither.
    #[serde(flatten)]
    pub(crate) identity: Identity,
    /// Which library wrote it: zkelect, curator, kazoo.
    pub(crate) origin: &'static str,
    /// The nearest node this one watches (its predecessor), if it follows.
    pub(crate) watches: Option<String>,
    /// Every node it watches, nearest first: the nearest nodes below its own
    /// that block it, as many as may hold at once (with k leaders the k
    /// below; a reader the nearest writer): its standing changes only when
    /// one of them goes.
    pub(crate) watched: Vec<String>,
    /// The session that owns it.
    pub(crate) session: String,
    /// Its fencing token (the node's czxid).
    pub(crate) token: i64,
}

/// Who a node says it is: the id and data its owner wrote, or a
/// cooperative revocation request (`__REVOKE__`, `revoke --ask` or Curator's
/// `Revoker`) that replaced them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "identity", rename_all = "snake_case")]
pub(crate) enum Identity {
    /// The id and data the candidate stored.
    Known {
        /// The candidate's id (the node's data up to the first newline).
        id: String,
        /// The candidate's extra data, if any.
        data: Option<String>,
    },
    /// A revocation request replaced the node's data: its id is unknown,
    /// and the node is still its owner's until it lets go.
    RevocationRequest,
}

impl Entry {
    /// The candidate's id, unless a revocation request replaced it.
    pub(crate) fn id(&self) -> Option<&str> {
        match &self.identity {
            Identity::Known { id, .. } => Some(id),
            Identity::RevocationRequest => None,
        }
    }

    /// The candidate's extra data, if any is known.
    pub(crate) fn data(&self) -> Option<&str> {
        match &self.identity {
            Identity::Known { data, .. } => data.as_deref(),
            Identity::RevocationRequest => None,
        }
    }
}

/// The whole picture of one election or lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct QueueView {
    pub(crate) path: String,
    /// `election`, `mutex`, `semaphore` or `read-write`.
    pub(crate) recipe: &'static str,
    /// How many hold at once: k of an election or a semaphore, 1 otherwise
    /// (a read-write lock's readers share beyond it).
    pub(crate) leaders: u32,
    pub(crate) queue: Vec<Entry>,
}

impl QueueView {
    /// The view of the participants an observer of `config` reported, in
    /// the order it reported them (queue order, oldest first).
    pub(crate) fn of(config: &ObserverConfig, participants: &[Participant]) -> Self {
        let recipe = config.recipe();
        let interop = config.interop();
        let prefix = config.prefix();
        let names: Vec<String> = participants.iter().map(|p| p.node.clone()).collect();
        let entries = participants
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let parsed = name::parse(&p.node, prefix, interop, recipe);
                let watched = if p.holds {
                    Vec::new()
                } else {
                    watched_by(&names, &p.node, prefix, interop, recipe, p.access)
                };
                Entry {
                    position: i,
                    node: p.node.clone(),
                    sequence: parsed.as_ref().map_or(0, |n| n.seq),
                    leader: p.holds,
                    access: match p.access {
                        Access::Exclusive => "exclusive",
                        Access::Shared => "shared",
                    },
                    weight: p.weight,
                    identity: match &p.identity {
                        zkelect_core::Identity::Known { id, data } => Identity::Known {
                            id: id.clone(),
                            data: (!data.is_empty())
                                .then(|| String::from_utf8_lossy(data).into_owned()),
                        },
                        zkelect_core::Identity::RevocationRequest => Identity::RevocationRequest,
                    },
                    origin: match parsed.map(|n| n.origin) {
                        Some(Origin::Curator) => "curator",
                        Some(Origin::Kazoo) => "kazoo",
                        Some(Origin::Ours { .. }) | None => "zkelect",
                    },
                    watches: watched.first().cloned(),
                    watched,
                    session: format!("0x{:x}", p.owner.0),
                    token: p.token.0,
                }
            })
            .collect();
        Self {
            path: config.path().to_owned(),
            recipe: match recipe {
                Recipe::Election { .. } => "election",
                Recipe::Mutex => "mutex",
                Recipe::Semaphore { .. } => "semaphore",
                Recipe::ReadWrite => "read-write",
            },
            leaders: match recipe {
                Recipe::Election { leaders: k } | Recipe::Semaphore { permits: k } => k,
                Recipe::Mutex | Recipe::ReadWrite => 1,
            },
            queue: entries,
        }
    }

    /// The words for this recipe's roles: an election's leaders and
    /// followers, a lock's holders and waiters.
    fn words(&self) -> Words {
        if self.recipe == "election" {
            Words {
                node: "candidate",
                holder: "leader",
                waiter: "follower",
                holding: "LEADER",
                waiting: "follower",
            }
        } else {
            Words {
                node: "node",
                holder: "holder",
                waiter: "waiter",
                holding: "HOLDER",
                waiting: "waiting",
            }
        }
    }

    /// One line for `status --watch`: who leads, who follows, in order.
    pub(crate) fn line(&self) -> String {
        let words = self.words();
        let name = |e: &Entry| {
            let reader = if e.access == "shared" { "read " } else { "" };
            match e.id() {
                Some(id) => format!("{reader}{id} ({})", e.node),
                None => format!("{reader}{UNKNOWN} ({}, {REQUESTED})", e.node),
            }
        };
        let leaders: Vec<String> = self.queue.iter().filter(|e| e.leader).map(name).collect();
        let followers: Vec<String> = self.queue.iter().filter(|e| !e.leader).map(name).collect();
        let mut out = format!(
            "{} {}(s); {}(s): {}",
            self.queue.len(),
            words.node,
            words.holder,
            if leaders.is_empty() {
                "none".to_owned()
            } else {
                leaders.join(", ")
            }
        );
        if !followers.is_empty() {
            let _ = write!(out, "; {}s: {}", words.waiter, followers.join(", "));
        }
        out
    }

    /// A human-readable table.
    pub(crate) fn render(&self) -> String {
        let words = self.words();
        let mut out = String::new();
        let wanted = match self.recipe {
            "election" => format!("{} leader(s) wanted", self.leaders),
            "semaphore" => format!("{} permit(s)", self.leaders),
            "read-write" => "readers share, a writer holds alone".to_owned(),
            _ => "one holder at a time".to_owned(),
        };
        let _ = writeln!(
            out,
            "{} {}: {} {}(s), {wanted}",
            self.recipe,
            self.path,
            self.queue.len(),
            words.node,
        );
        if self.queue.is_empty() {
            let _ = writeln!(
                out,
                "  (no {}s: nobody {})",
                words.node,
                if self.recipe == "election" {
                    "leads"
                } else {
                    "holds it"
                }
            );
        }
        for e in &self.queue {
            let role = if e.leader {
                words.holding
            } else {
                words.waiting
            };
            let id = e.id().unwrap_or(UNKNOWN);
            let watches = if e.watched.is_empty() {
                String::new()
            } else {
                format!("  watches {}", e.watched.join(", "))
            };
            let data = e.data().map_or(String::new(), |d| format!("  data={d:?}"));
            let origin = if e.origin == "zkelect" {
                String::new()
            } else {
                format!("  [{}]", e.origin)
            };
            let access = if e.access == "shared" { "  (read)" } else { "" };
            let requested = if e.identity == Identity::RevocationRequest {
                format!("  {REQUESTED}")
            } else {
                String::new()
            };
            let weight = if e.weight == 1 {
                String::new()
            } else {
                format!("  weight={}", e.weight)
            };
            let _ = writeln!(
                out,
                "  {:>3}  {:<8} {:<24} {}{}{}{}{}{}{}",
                e.position, role, id, e.node, access, weight, requested, watches, data, origin
            );
        }
        out
    }
}

/// Whom the node `own` watches while it waits, nearest first: the core's
/// standing of the node among the listed ones (the nodes below that block
/// it, as many as may hold at once).
fn watched_by(
    names: &[String],
    own: &str,
    prefix: &str,
    interop: Interop,
    recipe: Recipe,
    access: Access,
) -> Vec<String> {
    let rule = recipe.rule(access);
    let standing = name::standing_under(
        names,
        own,
        prefix,
        interop,
        rule,
        rule.limit(),
        &BTreeSet::new(),
    );
    // The standing lists them oldest first.
    standing.nearest_lower.into_iter().rev().collect()
}

/// How `status` names roles for one recipe.
struct Words {
    node: &'static str,
    holder: &'static str,
    waiter: &'static str,
    holding: &'static str,
    waiting: &'static str,
}

#[cfg(test)]
mod tests {
    use zkelect_core::{FencingToken, SessionId};

    use super::*;

    /// A participant as an observer reports it: `holds` is the observer's
    /// judgement, which the view shows as it is.
    fn p(node: &str, id: &str, holds: bool, access: Access) -> Participant {
        let seq = name::split_sequence(node).map_or(0, |(_, s)| s);
        Participant {
            identity: zkelect_core::Identity::Known {
                id: id.into(),
                data: Vec::new(),
            },
            weight: 1,
            node: node.into(),
            token: FencingToken(100 + i64::from(seq)),
            owner: SessionId(0x10 + i64::from(seq)),
            holds,
            access,
        }
    }

    fn election(k: u32) -> ObserverConfig {
        ObserverConfig::election("/svc", k)
    }

    #[test]
    fn a_holder_asked_to_let_go_shows_its_node_and_the_request_with_no_id() {
        let mut holder = p("m_0000000001", "", true, Access::Exclusive);
        holder.identity = zkelect_core::Identity::RevocationRequest;
        let waiter = p("m_0000000002", "node-b", false, Access::Exclusive);
        let mutex = ObserverConfig::new("/locks/x", Recipe::Mutex);
        let view = QueueView::of(&mutex, &[holder, waiter]);
        assert_eq!(view.queue[0].id(), None);
        assert_eq!(view.queue[0].identity, Identity::RevocationRequest);
        assert_eq!(view.queue[1].id(), Some("node-b"));
        assert_eq!(
            view.line(),
            "2 node(s); holder(s): (id unknown) (m_0000000001, revocation requested); \
             waiters: node-b (m_0000000002)"
        );
        let text = view.render();
        let first = text.lines().nth(1).unwrap_or_default();
        assert!(
            first.contains("HOLDER")
                && first.contains("(id unknown)")
                && first.contains("m_0000000001  revocation requested"),
            "{text}"
        );
        assert!(!text.contains("__REVOKE__"), "{text}");
        let json = serde_json::to_value(&view).unwrap();
        // A request carries no id and no data: the keys are absent, not null.
        assert_eq!(json["queue"][0]["identity"], "revocation_request");
        assert_eq!(json["queue"][0].get("id"), None);
        assert_eq!(json["queue"][0].get("data"), None);
        assert_eq!(json["queue"][1]["identity"], "known");
        assert_eq!(json["queue"][1]["id"], "node-b");
        assert_eq!(json["queue"][1]["data"], serde_json::Value::Null);
    }

    #[test]
    fn view_shows_the_reported_order_leaders_watchers_owners_and_data() {
        let mut a = p("n_0000000003", "node-a", true, Access::Exclusive);
        a.identity = zkelect_core::Identity::Known {
            id: "node-a".into(),
            data: b"10.0.0.1:80".to_vec(),
        };
        let b = p(
            "_c_00000000000000bb-n_0000000007",
            "node-b",
            false,
            Access::Exclusive,
        );
        let view = QueueView::of(&election(1), &[a, b]);
        assert_eq!(view.queue.len(), 2);
        assert_eq!(view.queue[0].id(), Some("node-a"));
        assert_eq!(view.queue[0].data(), Some("10.0.0.1:80"));
        assert_eq!(view.queue[0].sequence, 3);
        assert!(view.queue[0].leader && !view.queue[1].leader);
        assert_eq!(view.queue[0].watches, None, "a leader watches nobody");
        assert_eq!(view.queue[1].watches.as_deref(), Some("n_0000000003"));
        assert_eq!(view.queue[1].session, "0x17");
        assert_eq!(view.queue[1].token, 107);
        let text = view.render();
        assert!(
            text.contains("LEADER") && text.contains("node-b") && text.contains("data="),
            "{text}"
        );
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["queue"][0]["leader"], true);
        assert_eq!(json["queue"][1]["session"], "0x17");

        let curator = election(2).with_interop(Interop::Curator);
        let view = QueueView::of(
            &curator,
            &[
                p(
                    "_c_0a1b2c3d-1111-2222-3333-444455556666-latch-0000000001",
                    "c",
                    true,
                    Access::Exclusive,
                ),
                p(
                    "_c_00000000000000bb-latch-0000000007",
                    "z",
                    true,
                    Access::Exclusive,
                ),
            ],
        );
        assert_eq!(view.queue[0].origin, "curator");
        assert_eq!(view.queue[1].origin, "zkelect");
        assert_eq!(
            view.queue[1].watches, None,
            "second of two leaders watches nobody"
        );
    }

    #[test]
    fn with_two_leaders_followers_watch_the_two_below_nearest_first() {
        let list: Vec<Participant> = (0..4)
            .map(|i| {
                p(
                    &format!("n_000000000{i}"),
                    &format!("id{i}"),
                    i < 2,
                    Access::Exclusive,
                )
            })
            .collect();
        let view = QueueView::of(&election(2), &list);
        let leaders: Vec<bool> = view.queue.iter().map(|e| e.leader).collect();
        assert_eq!(leaders, [true, true, false, false]);
        assert!(view.queue[1].watched.is_empty(), "a leader watches nobody");
        assert_eq!(view.queue[2].watched, ["n_0000000001", "n_0000000000"]);
        assert_eq!(view.queue[3].watched, ["n_0000000002", "n_0000000001"]);
        assert_eq!(view.queue[3].watches.as_deref(), Some("n_0000000002"));
        let text = view.render();
        assert_eq!(text.matches("LEADER").count(), 2, "{text}");
        assert!(text.contains("2 leader(s) wanted"), "{text}");
        assert_eq!(
            view.line(),
            "4 candidate(s); leader(s): id0 (n_0000000000), id1 (n_0000000001); \
             followers: id2 (n_0000000002), id3 (n_0000000003)"
        );
    }

    #[test]
    fn lock_views_show_holders_as_reported_and_whom_each_waiter_watches() {
        let rw = [
            p("r_0000000001", "id0", true, Access::Shared),
            p("r_0000000002", "id1", true, Access::Shared),
            p("w_0000000003", "id2", false, Access::Exclusive),
            p("r_0000000004", "id3", false, Access::Shared),
        ];
        let view = QueueView::of(&ObserverConfig::new("/l", Recipe::ReadWrite), &rw);
        assert_eq!(view.recipe, "read-write");
        assert_eq!(view.queue[2].access, "exclusive");
        assert_eq!(view.queue[3].access, "shared");
        assert_eq!(
            view.queue[2].watched,
            ["r_0000000002"],
            "a writer: the nearest"
        );
        assert_eq!(
            view.queue[3].watched,
            ["w_0000000003"],
            "a reader: the writer"
        );
        let text = view.render();
        assert_eq!(text.matches("HOLDER").count(), 2, "{text}");
        assert!(
            text.contains("readers share, a writer holds alone"),
            "{text}"
        );
        assert_eq!(
            view.line(),
            "4 node(s); holder(s): read id0 (r_0000000001), read id1 (r_0000000002); \
             waiters: id2 (w_0000000003), read id3 (r_0000000004)"
        );

        let mut sem: Vec<Participant> = (0..4)
            .map(|i| {
                p(
                    &format!("s_000000000{i}"),
                    &format!("id{i}"),
                    i < 3,
                    Access::Exclusive,
                )
            })
            .collect();
        sem[3].weight = 2;
        let view = QueueView::of(
            &ObserverConfig::new("/s", Recipe::Semaphore { permits: 3 }),
            &sem,
        );
        assert_eq!(view.queue[3].watched.len(), 3, "the three permits below");
        assert_eq!(view.queue[3].weight, 2);
        let text = view.render();
        assert!(
            text.contains("3 permit(s)") && text.contains("weight=2"),
            "{text}"
        );
    }

    /// The view is the observer's report, field for field: a core Observer
    /// machine driven through one listing, its list turned into a view.
    #[test]
    fn the_view_is_what_the_core_observer_reports() {
        use std::time::Duration;
        use zkelect_core::{
            Command, Input, Notice, Observer, Reply, SessionEvent, Stat, Timestamp,
        };
        let config = election(1);
        let mut o = Observer::new(config.clone()).unwrap();
        let t = Timestamp::ZERO;
        o.handle(
            t,
            Input::Session(SessionEvent::Connected {
                session_id: Some(SessionId(9)),
                timeout: Duration::from_secs(4),
            }),
        );
        let list = o.poll_command().unwrap();
        let children = ["n_0000000008", "junk", "n_0000000007", "n_0000000009"];
        o.handle(
            t,
            Input::Reply {
                op: list.op,
                result: Ok(Reply::Children(children.map(String::from).to_vec())),
            },
        );
        let reads: Vec<Command> = std::iter::from_fn(|| o.poll_command()).collect();
        for read in reads {
            let path = read.request.path().to_owned();
            let seq: i64 = path[path.len() - 1..].parse().unwrap();
            // The node ending in 9 is a persistent look-alike: nobody's.
            let owner = if seq == 9 { 0 } else { 0x40 + seq };
            let stat = Stat {
                czxid: 10 * seq,
                ephemeral_owner: owner,
                ..Stat::default()
            };
            // Node 8's holder was asked to let go: the request replaced
            // its data.
            let data = if seq == 8 {
                b"__REVOKE__".to_vec()
            } else {
                format!("id{seq}\nhost-{seq}").into_bytes()
            };
            o.handle(
                t,
                Input::Reply {
                    op: read.op,
                    result: Ok(Reply::Data { data, stat }),
                },
            );
        }
        let reported = std::iter::from_fn(|| o.poll_notice())
            .find_map(|n| match n {
                Notice::Participants(list) => Some(list),
                _ => None,
            })
            .expect("a list");
        let view = QueueView::of(&config, &reported);
        let shown: Vec<String> = view
            .queue
            .iter()
            .map(|e| {
                format!(
                    "{} {:?} {} {} {} {:?} {:?}",
                    e.node,
                    e.id(),
                    e.leader,
                    e.session,
                    e.token,
                    e.data(),
                    e.identity == Identity::RevocationRequest
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                r#"n_0000000007 Some("id7") true 0x47 70 Some("host-7") false"#,
                "n_0000000008 None false 0x48 80 None true",
            ]
        );
        assert_eq!(view.queue[1].watched, ["n_0000000007"]);
    }

    #[test]
    fn an_empty_queue_says_nobody_leads_or_holds() {
        let view = QueueView::of(&election(1), &[]);
        assert!(view.render().contains("nobody leads"), "{}", view.render());
        assert_eq!(view.line(), "0 candidate(s); leader(s): none");
        let view = QueueView::of(&ObserverConfig::new("/l", Recipe::Mutex), &[]);
        assert!(
            view.render().contains("nobody holds it"),
            "{}",
            view.render()
        );
    }
}
