//! What `zkelect status` shows: the queue in order, who leads (or holds the
//! lock), each node's id and data, who watches whom, and children that take
//! no part.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use zkelect_core::config::split_payload;
use zkelect_core::name::{self, Access, Origin};
use zkelect_core::{Interop, Recipe};

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
    /// The candidate's id (the node's data up to the first newline), if readable.
    pub(crate) id: Option<String>,
    /// The candidate's extra data, if any.
    pub(crate) data: Option<String>,
    /// Which library wrote it: zkelect, curator, kazoo, other.
    pub(crate) origin: &'static str,
    /// The nearest node this one watches (its predecessor), if it follows.
    pub(crate) watches: Option<String>,
    /// Every node it watches, nearest first: the nearest nodes below its own
    /// that block it, as many as may hold at once (with k leaders the k
    /// below; a reader the nearest writer): its standing changes only when
    /// one of them goes.
    pub(crate) watched: Vec<String>,
    /// The session that owns it.
    pub(crate) session: Option<String>,
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
    /// Children that are not candidates (unparsable, or foreign without --interop).
    pub(crate) ignored: Vec<String>,
    /// Children named like candidates but persistent (`ephemeralOwner` 0):
    /// no process holds them, and candidates skip them.
    pub(crate) persistent: Vec<String>,
}

/// What status read for one child: its data and ephemeral owner.
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeInfo {
    pub(crate) data: Vec<u8>,
    pub(crate) owner: i64,
}

impl QueueView {
    /// Builds the view from a listing and whatever could be read of each child
    /// (a child that vanished between the listing and the read has no info).
    pub(crate) fn build(
        path: &str,
        recipe: Recipe,
        children: &[String],
        info: &BTreeMap<String, NodeInfo>,
        interop: Interop,
    ) -> Self {
        // A one-stem recipe's stem in the scheme (a read-write lock's two are
        // fixed by it, and the prefix is not used); `status` refuses a recipe
        // the scheme has no names for before it gets here.
        let prefix = recipe
            .rule(Access::Exclusive)
            .stem(interop)
            .unwrap_or_default();
        let (queue, _) = name::queue(children, prefix, interop, recipe);
        let (persistent, queue): (Vec<_>, Vec<_>) = queue
            .into_iter()
            .partition(|n| info.get(&n.name).is_some_and(|ni| ni.owner == 0));
        let persistent: Vec<String> = persistent.into_iter().map(|n| n.name).collect();
        let in_queue: std::collections::BTreeSet<&str> =
            queue.iter().map(|n| n.name.as_str()).collect();
        let mut ignored: Vec<String> = children
            .iter()
            .filter(|c| !in_queue.contains(c.as_str()) && !persistent.contains(c))
            .cloned()
            .collect();
        ignored.sort();
        let holders = recipe.holders(&queue);
        let entries = queue
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let node_info = info.get(&n.name);
                let (id, data) = node_info.map_or((None, None), |ni| {
                    let (id, data) = split_payload(&ni.data);
                    let data =
                        (!data.is_empty()).then(|| String::from_utf8_lossy(&data).into_owned());
                    (Some(id), data)
                });
                let is_leader = holders.binary_search(&i).is_ok();
                let rule = recipe.rule(n.access);
                let watched: Vec<String> = if is_leader {
                    Vec::new()
                } else {
                    queue[..i]
                        .iter()
                        .rev()
                        .filter(|lower| rule.blocks(lower))
                        .take(rule.limit())
                        .map(|n| n.name.clone())
                        .collect()
                };
                Entry {
                    position: i,
                    node: n.name.clone(),
                    sequence: n.seq,
                    leader: is_leader,
                    access: match n.access {
                        Access::Exclusive => "exclusive",
                        Access::Shared => "shared",
                    },
                    id,
                    data,
                    origin: match n.origin {
                        Origin::Ours { .. } => "zkelect",
                        Origin::Curator => "curator",
                        Origin::Kazoo => "kazoo",
                    },
                    watches: watched.first().cloned(),
                    watched,
                    session: node_info
                        .filter(|ni| ni.owner != 0)
                        .map(|ni| format!("0x{:x}", ni.owner)),
                }
            })
            .collect();
        Self {
            path: path.to_owned(),
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
            ignored,
            persistent,
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
            format!("{reader}{} ({})", e.id.as_deref().unwrap_or("?"), e.node)
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
        if !self.persistent.is_empty() || !self.ignored.is_empty() {
            let _ = write!(
                out,
                "; {} skipped, {} ignored",
                self.persistent.len(),
                self.ignored.len()
            );
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
            let id = e.id.as_deref().unwrap_or("?");
            let watches = if e.watched.is_empty() {
                String::new()
            } else {
                format!("  watches {}", e.watched.join(", "))
            };
            let data = e
                .data
                .as_deref()
                .map_or(String::new(), |d| format!("  data={d:?}"));
            let origin = if e.origin == "zkelect" {
                String::new()
            } else {
                format!("  [{}]", e.origin)
            };
            let access = if e.access == "shared" { "  (read)" } else { "" };
            let _ = writeln!(
                out,
                "  {:>3}  {:<8} {:<24} {}{}{}{}{}",
                e.position, role, id, e.node, access, watches, data, origin
            );
        }
        for name in &self.persistent {
            let _ = writeln!(
                out,
                "  ---  skipped  {name} (persistent: no process holds it)"
            );
        }
        for name in &self.ignored {
            let _ = writeln!(
                out,
                "  ---  ignored  {name:?} (not a {} of this {})",
                words.node, self.recipe
            );
        }
        out
    }
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
    use super::*;

    fn info(data: &str, owner: i64) -> NodeInfo {
        NodeInfo {
            data: data.as_bytes().to_vec(),
            owner,
        }
    }

    #[test]
    fn view_orders_marks_leaders_and_watchers_and_flags_foreign_children() {
        let children: Vec<String> = [
            "_c_00000000000000bb-n_0000000007",
            "n_0000000003",
            "latch-0000000001",
            "junk",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut infos = BTreeMap::new();
        infos.insert(
            "n_0000000003".to_string(),
            info("node-a\n10.0.0.1:80", 0x10),
        );
        infos.insert(
            "_c_00000000000000bb-n_0000000007".to_string(),
            info("node-b", 0x11),
        );
        let view = QueueView::build(
            "/svc",
            Recipe::Election { leaders: 1 },
            &children,
            &infos,
            Interop::None,
        );
        assert_eq!(view.queue.len(), 2);
        assert_eq!(view.queue[0].id.as_deref(), Some("node-a"));
        assert_eq!(view.queue[0].data.as_deref(), Some("10.0.0.1:80"));
        assert!(view.queue[0].leader && !view.queue[1].leader);
        assert_eq!(view.queue[1].watches.as_deref(), Some("n_0000000003"));
        assert_eq!(view.queue[1].session.as_deref(), Some("0x11"));
        assert_eq!(view.ignored, ["junk", "latch-0000000001"]);
        let text = view.render();
        assert!(
            text.contains("LEADER") && text.contains("node-b") && text.contains("ignored"),
            "{text}"
        );
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["queue"][0]["leader"], true);

        let children: Vec<String> = [
            "_c_00000000000000bb-latch-0000000007",
            "n_0000000003",
            "_c_0a1b2c3d-1111-2222-3333-444455556666-latch-0000000001",
            "junk",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let interop = QueueView::build(
            "/svc",
            Recipe::Election { leaders: 2 },
            &children,
            &infos,
            Interop::Curator,
        );
        assert_eq!(interop.queue[0].origin, "curator");
        assert_eq!(interop.queue[1].origin, "zkelect");
        assert_eq!(
            interop.queue[0].id, None,
            "vanished or unread: shown as unknown"
        );
        assert_eq!(
            interop.queue[1].watches, None,
            "second of two leaders watches nobody"
        );
        assert_eq!(interop.ignored, ["junk", "n_0000000003"]);
    }

    #[test]
    fn persistent_look_alikes_are_shown_apart_and_lead_nothing() {
        let children: Vec<String> = ["n_0000000000", "_c_00000000000000bb-n_0000000007"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut infos = BTreeMap::new();
        infos.insert("n_0000000000".to_string(), info("", 0));
        infos.insert(
            "_c_00000000000000bb-n_0000000007".to_string(),
            info("node-b", 0x11),
        );
        let view = QueueView::build(
            "/svc",
            Recipe::Election { leaders: 1 },
            &children,
            &infos,
            Interop::None,
        );
        assert_eq!(view.queue.len(), 1);
        assert!(view.queue[0].leader);
        assert_eq!(view.queue[0].id.as_deref(), Some("node-b"));
        assert_eq!(view.persistent, ["n_0000000000"]);
        assert!(view.ignored.is_empty());
        assert!(
            view.render().contains("skipped  n_0000000000"),
            "{}",
            view.render()
        );
    }

    #[test]
    fn with_two_leaders_both_lead_and_followers_watch_the_two_below() {
        let children: Vec<String> = (0..4).map(|i| format!("n_000000000{i}")).collect();
        let infos: BTreeMap<String, NodeInfo> = children
            .iter()
            .enumerate()
            .map(|(i, c)| (c.clone(), info(&format!("id{i}"), 0x10 + i as i64)))
            .collect();
        let view = QueueView::build(
            "/svc",
            Recipe::Election { leaders: 2 },
            &children,
            &infos,
            Interop::None,
        );
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
    fn lock_views_show_holders_by_the_rule_and_whom_each_waiter_watches() {
        let rw: Vec<String> = [
            "r_0000000001",
            "r_0000000002",
            "w_0000000003",
            "r_0000000004",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let infos: BTreeMap<String, NodeInfo> = rw
            .iter()
            .enumerate()
            .map(|(i, c)| (c.clone(), info(&format!("id{i}"), 0x10 + i as i64)))
            .collect();
        let view = QueueView::build("/l", Recipe::ReadWrite, &rw, &infos, Interop::None);
        assert_eq!(view.recipe, "read-write");
        let holding: Vec<bool> = view.queue.iter().map(|e| e.leader).collect();
        assert_eq!(holding, [true, true, false, false], "two readers share");
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

        let sem: Vec<String> = (0..4).map(|i| format!("s_000000000{i}")).collect();
        let view = QueueView::build(
            "/s",
            Recipe::Semaphore { permits: 3 },
            &sem,
            &BTreeMap::new(),
            Interop::None,
        );
        let holding: Vec<bool> = view.queue.iter().map(|e| e.leader).collect();
        assert_eq!(holding, [true, true, true, false]);
        assert_eq!(view.queue[3].watched.len(), 3, "the three permits below");
        assert!(view.render().contains("3 permit(s)"), "{}", view.render());
        // Another recipe's names are not this queue's.
        let view = QueueView::build("/s", Recipe::Mutex, &sem, &BTreeMap::new(), Interop::None);
        assert!(view.queue.is_empty() && view.ignored.len() == 4);
        assert!(
            view.render().contains("nobody holds it"),
            "{}",
            view.render()
        );
    }

    #[test]
    fn empty_election_says_nobody_leads() {
        let view = QueueView::build(
            "/svc",
            Recipe::Election { leaders: 1 },
            &[],
            &BTreeMap::new(),
            Interop::None,
        );
        assert!(view.render().contains("nobody leads"));
    }
}
