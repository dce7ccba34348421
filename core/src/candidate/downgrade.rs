//! A writer's downgrade to a reader, in place.
//!
//! Curator lets a write holder take the read lock and then release the
//! write lock. Done with a second node it is unsafe: a writer that queued
//! between the holder's two nodes takes the lock once the first goes, while
//! the holder still reads (CURATOR-276), and Curator's later fix (the reader
//! node given the writer's sequence) puts a node *below* others that were
//! already queued, which breaks the one fact the zero-round-trip takeover
//! rests on (the nodes below one's own can only go). So zkelect downgrades
//! the writer's node itself: its data says it reads now
//! ([`DOWNGRADED`](crate::config::DOWNGRADED) before the payload), written
//! expecting the version just read (so a revocation request written
//! meanwhile is read first, never overwritten unheard). The node stays where
//! it is, so every writer behind still waits for it; a reader behind reads
//! the node it watches anyway, sees the mark and reads past it, as past a
//! reader. Atomic (no moment without a hold), and nothing is ever added
//! below anyone.
//!
//! The mark lives in data anyone may write. A revocation request is
//! Curator's bytes alone, written blind, and an operator may write too: the
//! write takes the mark away, and a reader that comes later, a listing after
//! a reconnect and an observer would see an exclusive writer again. So once
//! its mark is written a writer's own-node watch is a data watch (until
//! then a child watch, as a mutex holder's: a writer that never downgrades
//! pays for no write into its node), and a downgraded writer that reads its
//! node unmarked writes the mark back, with the request kept
//! (`config::downgrade_mark`); the request was heard from the read first.
//! Should the server refuse that write (the node's ACL changed), the
//! application, told it reads, is told nothing more: it still reads, and
//! the queue sees a writer, which only makes readers behind wait.
//!
//! Stricter than Curator: its readers (and kazoo's) do not read our nodes'
//! data, so behind a downgraded zkelect writer they wait until it leaves,
//! and a Curator reader's downgrade is not honoured by zkelect writers'
//! takeovers in a shared queue (see `Candidate::trusts_deletion_of`).

use super::state::*;
use super::*;
use crate::config::{downgrade_mark, is_downgraded};
use crate::name::Access;

impl Candidate {
    /// Downgrades a holding writer to a reader (Curator's "take the read
    /// lock, then release the write lock", in one step): from now on this
    /// machine holds a shared lock — it must only read — and readers behind
    /// it may hold beside it once [`Notice::Downgraded`] is out (its node's
    /// data says so); writers behind still wait for its node. Returns false
    /// (and does nothing) unless this is a [`Rule::Write`](crate::Rule::Write)
    /// machine that holds and has not downgraded yet.
    pub fn downgrade(&mut self, now: Timestamp) -> bool {
        self.enter(now);
        let holds = matches!(
            self.leadership,
            Leadership::Active(_) | Leadership::Suspended(_)
        );
        let writes = self.config.rule() == crate::Rule::Write && !self.is_done();
        let Some(own) = self.session.own.as_mut() else {
            return false;
        };
        if !writes || !holds || own.downgrade != Downgrade::No {
            return false;
        }
        own.downgrade = Downgrade::Due { told: false };
        self.advance();
        true
    }

    /// Whether this writer's downgrade is done: its node says it reads
    /// (once [`Notice::Downgraded`] is out; also while a write over the
    /// mark is being undone, and after the server refused to write it back,
    /// where the queue sees a writer again: the application was told it
    /// reads, and it still does, which is safe).
    pub fn is_downgraded(&self) -> bool {
        self.keeps_mark() || self.is_downgrade_unkept()
    }

    /// Whether the server refused this writer's downgrade
    /// ([`Notice::DowngradeRefused`] is out): it reads only, but the queue
    /// still sees a writer.
    pub fn is_downgrade_refused(&self) -> bool {
        self.session
            .own
            .as_ref()
            .is_some_and(|o| o.downgrade == Downgrade::Refused)
    }

    /// Whether this writer's mark was taken away after it downgraded and
    /// the server refused to write it back (its node's ACL changed since):
    /// the application was told it reads ([`Notice::Downgraded`]) and it
    /// still does, but the queue sees a writer again, so readers behind
    /// wait for it. Nothing more is tried; [`is_downgraded`](Self::is_downgraded)
    /// stays true. It tells this end from a mark still being written back,
    /// which `is_downgraded` does not.
    pub fn is_downgrade_unkept(&self) -> bool {
        self.session
            .own
            .as_ref()
            .is_some_and(|o| o.downgrade == Downgrade::Unkept)
    }

    /// What this machine's node asks of the queue now: shared for a reader
    /// and for a writer that downgraded, exclusive for everyone else.
    pub fn access(&self) -> Access {
        match &self.session.own {
            Some(own) if own.downgrade != Downgrade::No => Access::Shared,
            _ => self.config.rule().access(),
        }
    }

    /// Sends the downgrade's next request, if it is due.
    pub(super) fn send_downgrade(&mut self) {
        let Some(own) = self
            .session
            .own
            .as_ref()
            .filter(|o| matches!(o.downgrade, Downgrade::Due { .. }))
        else {
            return;
        };
        if self.step == Step::Delete
            || self
                .in_flight_for(|p| {
                    matches!(p, Purpose::DowngradeRead(_) | Purpose::DowngradeWrite(_))
                })
                .is_some()
        {
            return;
        }
        let name = own.name.to_string();
        let path = self.child_path(&name);
        self.emit(
            Purpose::DowngradeRead(name),
            Request::GetData { path, watch: false },
        );
    }

    pub(super) fn on_downgrade_read(&mut self, name: &str, result: Result<Reply, ZkCode>) {
        if self.session.own.as_ref().map(|o| &*o.name) != Some(name) {
            return;
        }
        match result {
            Ok(Reply::Data { data, stat }) => {
                self.check_revocation(&data, stat.version);
                if is_downgraded(&data) {
                    return self.downgraded();
                }
                #[cfg(feature = "planted")]
                if self.planted == Some(crate::Planted::DowngradeWithoutMark) {
                    return self.downgraded();
                }
                self.write_mark(name, &data, stat.version);
            }
            other => self.downgrade_failed(other.err()),
        }
    }

    pub(super) fn on_downgrade_write(&mut self, name: &str, result: Result<Reply, ZkCode>) {
        if self.session.own.as_ref().map(|o| &*o.name) != Some(name) {
            return;
        }
        match result {
            Ok(_) => self.downgraded(),
            // Written meanwhile (a revocation request, an operator):
            // read it, then write again.
            Err(ZkCode::BadVersion) => self.downgrade_due(),
            Err(code) => self.downgrade_failed(Some(code)),
        }
    }

    /// Writes the mark over the node's `data`, read at `version`
    /// ([`downgrade_mark`]: a revocation request there is kept).
    fn write_mark(&mut self, name: &str, data: &[u8], version: i32) {
        let path = self.child_path(name);
        let marked = downgrade_mark(data, &self.config.node_payload());
        self.emit(
            Purpose::DowngradeWrite(name.to_owned()),
            Request::SetData {
                path,
                data: marked,
                version: Some(version),
            },
        );
    }

    /// Our node, downgraded, reads `data` at `version`: a write over it (a
    /// revocation request, which a revoker writes blind, or an operator's)
    /// took the mark away, and readers behind would wait for an exclusive
    /// writer again. Write the mark back, expecting that version; a write
    /// meanwhile fails it, and the read that follows tries again.
    pub(super) fn keep_mark(&mut self, data: &[u8], version: i32) {
        let Some(own) = self.session.own.as_mut() else {
            return;
        };
        if own.downgrade != Downgrade::Done || is_downgraded(data) || self.step == Step::Delete {
            return;
        }
        own.downgrade = Downgrade::Due { told: true };
        let name = own.name.to_string();
        if self
            .in_flight_for(|p| matches!(p, Purpose::DowngradeRead(_) | Purpose::DowngradeWrite(_)))
            .is_none()
        {
            self.write_mark(&name, data, version);
        }
    }

    /// Whether our node carries a downgrade mark this machine wrote, or
    /// should (one written over is being written back): its own-node watch
    /// must then hear every write of the node's data.
    pub(super) fn keeps_mark(&self) -> bool {
        self.session.own.as_ref().is_some_and(|o| {
            matches!(
                o.downgrade,
                Downgrade::Done
                    | Downgrade::Due { told: true }
                    | Downgrade::AwaitProof { told: true }
            )
        })
    }

    fn downgraded(&mut self) {
        let told = match self.session.own.as_ref().map(|o| o.downgrade) {
            Some(Downgrade::Done) | None => return,
            Some(Downgrade::Due { told } | Downgrade::AwaitProof { told }) => told,
            Some(Downgrade::No | Downgrade::Refused | Downgrade::Unkept) => false,
        };
        self.set_downgrade(Downgrade::Done);
        if !told {
            self.outbox.notice(Notice::Downgraded);
        }
        // From now on a write over the mark must be heard: a child watch on
        // our node (a writer's until now) gives way to a data watch. Its
        // read shows the node as it is after the mark, so a write that
        // landed since (a revocation request) is heard there.
        self.own_watch_suits();
    }

    /// Tries the mark again (read, then write), keeping whether the
    /// application was told it is done.
    fn downgrade_due(&mut self) {
        let told = self.is_downgraded();
        self.set_downgrade(Downgrade::Due { told });
    }

    /// Tries the mark again once the connection proves it works.
    fn downgrade_awaits_proof(&mut self) {
        let told = self.is_downgraded();
        self.set_downgrade(Downgrade::AwaitProof { told });
    }

    fn downgrade_failed(&mut self, code: Option<ZkCode>) {
        match code {
            // The node is gone: the own-node watch or a listing says so.
            Some(ZkCode::NoNode) => self.set_downgrade(Downgrade::Done),
            // The mark was written, and the application told it reads;
            // writing it back over a write that took it away is refused
            // (its node's ACL changed since). Nothing new to tell: it
            // still holds, and still reads only; the queue sees a writer
            // again, so readers behind wait for it, which is safe.
            // `DowngradeRefused` would contradict the `Downgraded` it had.
            Some(code) if code.is_fatal() && self.keeps_mark() => {
                self.set_downgrade(Downgrade::Unkept);
            }
            Some(code) if code.is_fatal() => {
                self.set_downgrade(Downgrade::Refused);
                self.outbox.notice(Notice::DowngradeRefused { code });
            }
            // Lost to the connection (a write may have landed: the next
            // read tells), or an answer of the wrong kind.
            _ => self.downgrade_awaits_proof(),
        }
    }

    fn set_downgrade(&mut self, state: Downgrade) {
        if let Some(own) = self.session.own.as_mut() {
            own.downgrade = state;
        }
    }

    /// Whether a reader reads past the watched node `pred` whose data is
    /// `data`: a zkelect writer that downgraded to a reader no longer
    /// blocks a reader. Only zkelect's own names: another library's node
    /// data means nothing of the kind.
    pub(super) fn reads_past(&self, pred: &str, data: &[u8]) -> bool {
        self.config.rule() == crate::Rule::Read
            && is_downgraded(data)
            && name::parse(
                pred,
                self.config.prefix(),
                self.config.interop(),
                self.config.rule().recipe(),
            )
            .is_some_and(|n| matches!(n.origin, Origin::Ours { .. }))
    }

    /// Whether the deletion of the watched node `pred` may elect us without
    /// a fresh listing. Not in a read-write queue shared with Curator, when
    /// `pred` is a Curator writer and we write: Curator 5.5 and later
    /// downgrade by creating the reader with the writer's own sequence (not
    /// a sequential node), so a reader can appear below us just before that
    /// writer goes; a listing after the deletion shows it.
    pub(super) fn trusts_deletion_of(&self, pred: &str) -> bool {
        if self.config.interop() != Interop::Curator || self.config.rule() != crate::Rule::Write {
            return true;
        }
        !name::parse(
            pred,
            self.config.prefix(),
            self.config.interop(),
            self.config.rule().recipe(),
        )
        .is_some_and(|n| n.origin == Origin::Curator && n.access == Access::Exclusive)
    }

    /// Whether the watched node `pred` may have been created after ours
    /// though it is below ours: a Curator reader in a read-write queue
    /// shared with Curator, as a writer sees it (see
    /// [`trusts_deletion_of`](Self::trusts_deletion_of)).
    pub(super) fn may_be_newer_below(&self, pred: &str) -> bool {
        self.config.interop() == Interop::Curator
            && self.config.rule() == crate::Rule::Write
            && name::parse(
                pred,
                self.config.prefix(),
                self.config.interop(),
                self.config.rule().recipe(),
            )
            .is_some_and(|n| n.origin == Origin::Curator && n.access == Access::Shared)
    }
}
