//! What a host's session told the world in one drain: the machines that
//! took an input with their notices, and whether one left. Its own module
//! because the world keeps one between drains (`engine`) and the drain
//! fills it (`hosting`).

use zkelect_core::Notice;

/// What a session told the world in one drain, before its commands (kept
/// by the world between drains, so a drain allocates nothing).
#[derive(Debug, Default)]
pub(super) struct Told {
    /// The machines that took an input, each with its notices.
    pub(super) updated: Vec<(usize, Vec<Notice>)>,
    /// Some machine left the session.
    pub(super) stopped: bool,
}

impl Told {
    /// Machine `pid`'s notices, an empty entry made if it has none yet.
    pub(super) fn entry(&mut self, pid: usize) -> &mut Vec<Notice> {
        let i = match self.updated.iter().position(|(p, _)| *p == pid) {
            Some(i) => i,
            None => {
                self.updated.push((pid, Vec::new()));
                self.updated.len() - 1
            }
        };
        &mut self.updated[i].1
    }

    /// Empties it for the next drain, keeping its buffer.
    pub(super) fn clear(&mut self) {
        self.updated.clear();
        self.stopped = false;
    }
}
