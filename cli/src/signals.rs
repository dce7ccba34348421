//! The signals that stop `zkelect run` and `zkelect lock` cleanly: SIGTERM,
//! SIGINT, SIGHUP and SIGQUIT.
//!
//! Each of them, at any moment of the process's life, means "stop": the
//! supervised command gets SIGTERM (then SIGKILL after the grace), the node
//! is deleted, the session closed, and the process exits with its documented
//! code. Left to their default action they would kill zkelect on the spot and
//! leave its node to the session timeout, so the next holder would wait for
//! nothing.
//!
//! - SIGHUP: a lost terminal or an SSH session that ends. `zkelect run` has
//!   no configuration to reload, so it is a stop like the others.
//! - SIGQUIT (Ctrl-\): by default a core dump. A zkelect core dump is of no
//!   use to an operator, while the node it would leave behind blocks every
//!   other candidate for a whole session timeout and the command would run on
//!   until the lease watchdog noticed. So it is a stop too; SIGABRT still
//!   dumps core for whoever wants one.
//!
//! [`Stops::install`] runs first thing in `main`, before the command line is
//! parsed: a signal that arrives later is kept until it is read, never lost.
//! Kept by a flag of our own that the signal handler sets, not by tokio's
//! stream alone: tokio turns a signal's handler on before its stream
//! subscribes to it, and a signal in between (the very first moment the
//! process shows it catches the signal) reached no stream and was lost,
//! leaving `run` to lead on as if none had come.

use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;

use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};

/// The signals that stop `run` and `lock`, in the order the README lists them.
pub(crate) const STOPPING: [Signal; 4] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// The stopping signals, caught from [`install`](Self::install) on.
#[derive(Debug)]
pub(crate) struct Stops {
    /// Set by the signal handler itself, from before the streams exist:
    /// which signals came is read here.
    flags: Vec<(Signal, Arc<AtomicBool>)>,
    /// Only the wake-ups: the task reading is woken when a signal comes.
    streams: Vec<tokio::signal::unix::Signal>,
    /// Signals sent by a unit test instead of the OS (whose signals reach
    /// every test of the process).
    #[cfg(test)]
    sent: Option<tokio::sync::mpsc::UnboundedReceiver<Signal>>,
}

impl Stops {
    /// Catches every signal of [`STOPPING`]. Must run inside the runtime.
    pub(crate) fn install() -> std::io::Result<Self> {
        let mut stops = Self::caught()?;
        stops.listen()?;
        Ok(stops)
    }

    /// The flags, set from now on by every stopping signal; no wake-ups yet.
    fn caught() -> std::io::Result<Self> {
        let flags = STOPPING
            .iter()
            .map(|&s| {
                let flag = Arc::new(AtomicBool::new(false));
                signal_hook::flag::register(s as i32, Arc::clone(&flag))?;
                Ok((s, flag))
            })
            .collect::<std::io::Result<_>>()?;
        Ok(Self {
            flags,
            streams: Vec::new(),
            #[cfg(test)]
            sent: None,
        })
    }

    /// The streams that wake the reading task. Must run inside the runtime.
    fn listen(&mut self) -> std::io::Result<()> {
        self.streams = STOPPING
            .iter()
            .map(|&s| signal(SignalKind::from_raw(s as i32)))
            .collect::<std::io::Result<_>>()?;
        Ok(())
    }

    /// Stops that come only from the returned sender, for unit tests.
    #[cfg(test)]
    pub(crate) fn sent() -> (tokio::sync::mpsc::UnboundedSender<Signal>, Self) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let stops = Self {
            flags: Vec::new(),
            streams: Vec::new(),
            sent: Some(rx),
        };
        (tx, stops)
    }

    /// The next stopping signal (at once if one came since the last call).
    /// Cancel-safe.
    pub(crate) async fn recv(&mut self) -> Signal {
        poll_fn(|cx| {
            #[cfg(test)]
            if let Some(sent) = &mut self.sent {
                if let Poll::Ready(Some(signal)) = sent.poll_recv(cx) {
                    return Poll::Ready(signal);
                }
            }
            // Wake-ups first, each stream read until it has none (which
            // leaves the task registered to be woken), then the flags: a
            // signal that comes after a flag was read wakes the task again.
            // `None` only once the runtime is gone: never while we poll.
            for stream in &mut self.streams {
                while let Poll::Ready(Some(())) = stream.poll_recv(cx) {}
            }
            for (which, flag) in &self.flags {
                if flag.swap(false, Ordering::SeqCst) {
                    return Poll::Ready(*which);
                }
            }
            Poll::Pending
        })
        .await
    }

    /// Runs `work` unless a stopping signal comes first.
    pub(crate) async fn unless<T>(
        &mut self,
        work: impl std::future::Future<Output = T>,
    ) -> Result<T, Signal> {
        tokio::select! {
            // A signal that came before `work` could finish wins.
            biased;
            signal = self.recv() => Err(signal),
            done = work => Ok(done),
        }
    }
}

/// The exit status a shell reports for a process killed by `signal`.
pub(crate) fn shell_status(signal: Signal) -> u8 {
    128 + signal as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test, not several: a raised signal reaches every `Stops` of the
    /// process, so two tests raising at once would read each other's.
    #[tokio::test]
    async fn each_stopping_signal_is_caught_and_named() {
        // A signal after the handler is on but before the stream listens
        // (tokio's own window, where it reached no stream) is read.
        let mut stops = Stops::caught().unwrap();
        nix::sys::signal::raise(Signal::SIGQUIT).unwrap();
        stops.listen().unwrap();
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), stops.recv())
            .await
            .expect("the signal before the streams is read");
        assert_eq!(got, Signal::SIGQUIT);
        for signal in STOPPING {
            nix::sys::signal::raise(signal).unwrap();
            let got = tokio::time::timeout(std::time::Duration::from_secs(5), stops.recv())
                .await
                .expect("the signal is caught, not fatal");
            assert_eq!(got, signal);
        }
        let pending = stops.unless(std::future::pending::<()>());
        nix::sys::signal::raise(Signal::SIGHUP).unwrap();
        assert_eq!(pending.await, Err(Signal::SIGHUP));
        assert_eq!(stops.unless(async { 7 }).await, Ok(7));
    }

    #[test]
    fn shell_statuses_are_128_plus_the_number() {
        let got: Vec<u8> = STOPPING.iter().map(|&s| shell_status(s)).collect();
        assert_eq!(got, [143, 130, 129, 131]);
    }
}
