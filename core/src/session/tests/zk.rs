//! A tiny ZooKeeper for the session's tests: one session's view of a tree,
//! with sequential and ephemeral nodes and one-shot data and child watches
//! (one per path and kind, as the server keeps them per session). Enough
//! for elections and locks to run; the simulator's model is the real one.

use std::collections::{BTreeMap, BTreeSet};

use crate::zk::{Reply, Request, Stat, WatchEvent, WatchKind, ZkCode};

/// The session id the tiny server gives its one session.
pub(super) const OWNER: i64 = 0x51;

#[derive(Debug, Clone)]
struct Node {
    data: Vec<u8>,
    stat: Stat,
    /// Children created so far (the next sequence number).
    sequence: i32,
}

#[derive(Debug, Clone)]
pub(super) struct Zk {
    nodes: BTreeMap<String, Node>,
    zxid: i64,
    data_watches: BTreeSet<String>,
    child_watches: BTreeSet<String>,
    fired: Vec<WatchEvent>,
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => "/",
    }
}

impl Zk {
    pub(super) fn new() -> Self {
        let mut nodes = BTreeMap::new();
        nodes.insert(
            "/".to_owned(),
            Node {
                data: Vec::new(),
                stat: Stat::default(),
                sequence: 0,
            },
        );
        Self {
            nodes,
            zxid: 0,
            data_watches: BTreeSet::new(),
            child_watches: BTreeSet::new(),
            fired: Vec::new(),
        }
    }

    fn fire(&mut self, kind: WatchKind, path: &str) {
        let data = self.data_watches.remove(path);
        let child = kind == WatchKind::NodeDeleted && self.child_watches.remove(path);
        if data || child {
            self.fired.push(WatchEvent {
                kind,
                path: path.to_owned(),
            });
        }
    }

    fn fire_children(&mut self, path: &str) {
        if self.child_watches.remove(path) {
            self.fired.push(WatchEvent {
                kind: WatchKind::NodeChildrenChanged,
                path: path.to_owned(),
            });
        }
    }

    /// The watch events fired since the last call, in order.
    pub(super) fn take_fired(&mut self) -> Vec<WatchEvent> {
        std::mem::take(&mut self.fired)
    }

    pub(super) fn children(&self, path: &str) -> Vec<String> {
        let prefix = if path == "/" {
            "/".to_owned()
        } else {
            format!("{path}/")
        };
        self.nodes
            .keys()
            .filter_map(|p| p.strip_prefix(&prefix))
            .filter(|rest| !rest.is_empty() && !rest.contains('/'))
            .map(str::to_owned)
            .collect()
    }

    /// Deletes `path` as an operator would.
    pub(super) fn remove(&mut self, path: &str) {
        if self.nodes.remove(path).is_some() {
            self.fire(WatchKind::NodeDeleted, path);
            self.fire_children(parent(path));
        }
    }

    /// The session expired: its ephemerals and watches go.
    pub(super) fn expire(&mut self) {
        let gone: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.stat.ephemeral_owner == OWNER)
            .map(|(p, _)| p.clone())
            .collect();
        self.data_watches.clear();
        self.child_watches.clear();
        for path in gone {
            self.nodes.remove(&path);
        }
        self.fired.clear();
    }

    pub(super) fn apply(&mut self, request: &Request) -> Result<Reply, ZkCode> {
        match request {
            Request::Create {
                path, data, mode, ..
            } => {
                let parent_path = parent(path).to_owned();
                let parent_node = self.nodes.get_mut(&parent_path).ok_or(ZkCode::NoNode)?;
                let mut path = path.clone();
                if mode.is_sequential() {
                    path.push_str(&format!("{:010}", parent_node.sequence));
                }
                parent_node.sequence += 1;
                if self.nodes.contains_key(&path) {
                    return Err(ZkCode::NodeExists);
                }
                self.zxid += 1;
                let stat = Stat {
                    czxid: self.zxid,
                    mzxid: self.zxid,
                    ephemeral_owner: if mode.is_ephemeral() { OWNER } else { 0 },
                    data_length: i32::try_from(data.len()).unwrap_or(i32::MAX),
                    ..Stat::default()
                };
                self.nodes.insert(
                    path.clone(),
                    Node {
                        data: data.clone(),
                        stat,
                        sequence: 0,
                    },
                );
                self.fire(WatchKind::NodeCreated, &path);
                self.fire_children(&parent_path);
                Ok(Reply::Created { path, stat })
            }
            Request::GetChildren { path, watch } => {
                if !self.nodes.contains_key(path) {
                    return Err(ZkCode::NoNode);
                }
                if *watch {
                    self.child_watches.insert(path.clone());
                }
                Ok(Reply::Children(self.children(path)))
            }
            Request::GetData { path, watch } => {
                let node = self.nodes.get(path).ok_or(ZkCode::NoNode)?;
                let reply = Reply::Data {
                    data: node.data.clone(),
                    stat: node.stat,
                };
                if *watch {
                    self.data_watches.insert(path.clone());
                }
                Ok(reply)
            }
            Request::Exists { path, watch } => {
                if *watch {
                    self.data_watches.insert(path.clone());
                }
                Ok(Reply::Exists(self.nodes.get(path).map(|n| n.stat)))
            }
            Request::Delete { path, .. } => {
                if !self.nodes.contains_key(path) {
                    return Err(ZkCode::NoNode);
                }
                self.remove(path);
                Ok(Reply::Deleted)
            }
            Request::SetData {
                path,
                data,
                version,
            } => {
                let node = self.nodes.get_mut(path).ok_or(ZkCode::NoNode)?;
                if version.is_some_and(|v| v != node.stat.version) {
                    return Err(ZkCode::BadVersion);
                }
                self.zxid += 1;
                node.data.clone_from(data);
                node.stat.version += 1;
                node.stat.mzxid = self.zxid;
                let stat = node.stat;
                self.fire(WatchKind::NodeDataChanged, path);
                Ok(Reply::Set(stat))
            }
            Request::Sync { .. } => Ok(Reply::Synced),
        }
    }
}
