//! What `zkelect status` shows: the queue in order, the leaders, each
//! candidate's id and data, who watches whom, and children that take no part.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use zkelect_core::config::split_payload;
use zkelect_core::name::{self, Origin};
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
    /// Whether this node leads.
    pub(crate) leader: bool,
    /// The candidate's id (the node's data up to the first newline), if readable.
    pub(crate) id: Option<String>,
    /// The candidate's extra data, if any.
    pub(crate) data: Option<String>,
    /// Which library wrote it: zkelect, curator, kazoo, other.
    pub(crate) origin: &'static str,
    /// The nearest node this one watches (its predecessor), if it follows.
    pub(crate) watches: Option<String>,
    /// Every node it watches, nearest first: with k leaders, the k nodes
    /// below its own (a follower's standing changes only when one of them goes).
    pub(crate) watched: Vec<String>,
    /// The session that owns it.
    pub(crate) session: Option<String>,
}

/// The whole picture of one election.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct QueueView {
    pub(crate) path: String,
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
        leaders: u32,
        children: &[String],
        info: &BTreeMap<String, NodeInfo>,
        interop: Interop,
    ) -> Self {
        let prefix = interop.stem().unwrap_or("n_");
        let (queue, _) = name::queue(children, prefix, interop, Recipe::Election { leaders });
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
                let is_leader = i < leaders as usize;
                let watched: Vec<String> = if is_leader {
                    Vec::new()
                } else {
                    queue[i.saturating_sub(leaders as usize)..i]
                        .iter()
                        .rev()
                        .map(|n| n.name.clone())
                        .collect()
                };
                Entry {
                    position: i,
                    node: n.name.clone(),
                    sequence: n.seq,
                    leader: is_leader,
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
            leaders,
            queue: entries,
            ignored,
            persistent,
        }
    }

    /// One line for `status --watch`: who leads, who follows, in order.
    pub(crate) fn line(&self) -> String {
        let name = |e: &Entry| format!("{} ({})", e.id.as_deref().unwrap_or("?"), e.node);
        let leaders: Vec<String> = self.queue.iter().filter(|e| e.leader).map(name).collect();
        let followers: Vec<String> = self.queue.iter().filter(|e| !e.leader).map(name).collect();
        let mut out = format!(
            "{} candidate(s); leader(s): {}",
            self.queue.len(),
            if leaders.is_empty() {
                "none".to_owned()
            } else {
                leaders.join(", ")
            }
        );
        if !followers.is_empty() {
            let _ = write!(out, "; followers: {}", followers.join(", "));
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
        let mut out = String::new();
        let _ = writeln!(
            out,
            "election {}: {} candidate(s), {} leader(s) wanted",
            self.path,
            self.queue.len(),
            self.leaders
        );
        if self.queue.is_empty() {
            let _ = writeln!(out, "  (no candidates: nobody leads)");
        }
        for e in &self.queue {
            let role = if e.leader { "LEADER" } else { "follower" };
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
            let _ = writeln!(
                out,
                "  {:>3}  {:<8} {:<24} {}{}{}{}",
                e.position, role, id, e.node, watches, data, origin
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
                "  ---  ignored  {name:?} (not a candidate of this election)"
            );
        }
        out
    }
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
        let view = QueueView::build("/svc", 1, &children, &infos, Interop::None);
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
        let interop = QueueView::build("/svc", 2, &children, &infos, Interop::Curator);
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
        let view = QueueView::build("/svc", 1, &children, &infos, Interop::None);
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
        let view = QueueView::build("/svc", 2, &children, &infos, Interop::None);
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
    fn empty_election_says_nobody_leads() {
        let view = QueueView::build("/svc", 1, &[], &BTreeMap::new(), Interop::None);
        assert!(view.render().contains("nobody leads"));
    }
}
