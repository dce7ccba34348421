//! How the trace writes a node's path and a reply: short, the world's
//! election path left out. Every part of the world that writes the trace
//! uses these, so none imports another for them.

use zkelect_core::Reply;

use super::spec::PATH;

/// `path` without the world's election path in front.
pub(super) fn short(path: &str) -> &str {
    path.strip_prefix(PATH)
        .map_or(path, |p| p.trim_start_matches('/'))
}

/// A reply as one short phrase of the trace.
pub(super) fn reply_text(r: &Reply) -> String {
    match r {
        Reply::Created { path, stat } => format!("created {} czxid={}", short(path), stat.czxid),
        Reply::Children(c) => format!("children[{}]", c.len()),
        Reply::Data { stat, .. } => format!("data czxid={} v{}", stat.czxid, stat.version),
        Reply::Exists(s) => format!("exists={}", s.is_some()),
        Reply::Deleted => "deleted".into(),
        Reply::Set(stat) => format!("set version={}", stat.version),
        Reply::Synced => "synced".into(),
    }
}
