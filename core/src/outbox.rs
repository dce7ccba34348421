//! A machine's outputs waiting to be polled: notices and commands in one
//! vector.
//!
//! Two queues would take 64 bytes of every machine (two `VecDeque`s) and two
//! allocations for a burst that yields both kinds; a session runs thousands of
//! machines, nearly all of them idle with nothing queued. One vector takes 24
//! bytes, holds no buffer while empty, and a burst is a handful of outputs, so
//! taking the oldest of one kind is a short scan.

use crate::command::Command;
use crate::notice::Notice;

/// One output waiting to be polled.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Output {
    Notice(Notice),
    Command(Command),
}

/// Notices and commands waiting to be polled, each kind in the order it was
/// queued; the two kinds are independent (polling one never reorders or
/// holds back the other).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct Outbox {
    /// Oldest first.
    queued: Vec<Output>,
}

impl Outbox {
    /// Queues a notice behind every notice queued before it.
    pub(crate) fn notice(&mut self, notice: Notice) {
        self.queued.push(Output::Notice(notice));
    }

    /// Queues a command behind every command queued before it.
    pub(crate) fn command(&mut self, command: Command) {
        self.queued.push(Output::Command(command));
    }

    /// The oldest notice queued, if any.
    pub(crate) fn poll_notice(&mut self) -> Option<Notice> {
        let i = self
            .queued
            .iter()
            .position(|o| matches!(o, Output::Notice(_)))?;
        match self.take(i)? {
            Output::Notice(notice) => Some(notice),
            Output::Command(_) => None,
        }
    }

    /// The oldest command queued, if any.
    pub(crate) fn poll_command(&mut self) -> Option<Command> {
        let i = self
            .queued
            .iter()
            .position(|o| matches!(o, Output::Command(_)))?;
        match self.take(i)? {
            Output::Command(command) => Some(command),
            Output::Notice(_) => None,
        }
    }

    /// Takes the output at `i` (`None` only if out of bounds), giving the
    /// buffer back once the last one is taken: an idle machine holds none.
    fn take(&mut self, i: usize) -> Option<Output> {
        // The last one (most often the only one) moves out without a shift.
        let output = if i + 1 == self.queued.len() {
            self.queued.pop()
        } else {
            Some(self.queued.remove(i))
        };
        if self.queued.is_empty() {
            self.queued = Vec::new();
        }
        output
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::OpId;
    use crate::zk::Request;

    fn command(op: u64) -> Command {
        Command {
            op: OpId(op),
            request: Request::Sync { path: "/a".into() },
        }
    }

    #[test]
    fn each_kind_comes_out_in_its_own_order_whatever_the_other_does() {
        let mut out = Outbox::default();
        out.command(command(1));
        out.notice(Notice::Suspended);
        out.command(command(2));
        out.notice(Notice::Resumed);
        assert_eq!(out.poll_notice(), Some(Notice::Suspended));
        assert_eq!(out.poll_command(), Some(command(1)));
        assert_eq!(out.poll_notice(), Some(Notice::Resumed));
        assert_eq!(out.poll_notice(), None);
        out.notice(Notice::Suspended);
        assert_eq!(out.poll_command(), Some(command(2)));
        assert_eq!(out.poll_command(), None);
        assert_eq!(out.poll_notice(), Some(Notice::Suspended));
        assert_eq!(out.poll_notice(), None);
    }

    #[test]
    fn holds_no_buffer_once_drained() {
        let mut out = Outbox::default();
        out.notice(Notice::Suspended);
        out.command(command(1));
        assert!(out.queued.capacity() > 0);
        assert!(out.poll_notice().is_some());
        assert!(out.queued.capacity() > 0, "a command is still queued");
        assert!(out.poll_command().is_some());
        assert_eq!(out.queued.capacity(), 0);
    }
}
