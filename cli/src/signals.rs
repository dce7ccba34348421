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

use std::future::poll_fn;
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
    streams: Vec<(Signal, tokio::signal::unix::Signal)>,
    /// Signals sent by a unit test instead of the OS (whose signals reach
    /// every test of the process).
    #[cfg(test)]
    sent: Option<tokio::sync::mpsc::UnboundedReceiver<Signal>>,
}

impl Stops {
    /// Catches every signal of [`STOPPING`]. Must run inside the runtime.
    pub(crate) fn install() -> std::io::Result<Self> {
        let streams = STOPPING
            .iter()
            .map(|&s| Ok((s, signal(SignalKind::from_raw(s as i32))?)))
            .collect::<std::io::Result<_>>()?;
        Ok(Self {
            streams,
            #[cfg(test)]
            sent: None,
        })
    }

    /// Stops that come only from the returned sender, for unit tests.
    #[cfg(test)]
    pub(crate) fn sent() -> (tokio::sync::mpsc::UnboundedSender<Signal>, Self) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let stops = Self {
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
            for (which, stream) in &mut self.streams {
                // `None` only once the runtime is gone: never while we poll.
                if let Poll::Ready(Some(())) = stream.poll_recv(cx) {
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

    #[tokio::test]
    async fn each_stopping_signal_is_caught_and_named() {
        let mut stops = Stops::install().unwrap();
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
