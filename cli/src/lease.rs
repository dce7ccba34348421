//! The leased child: a watchdog process between `zkelect run` and the command.
//!
//! A leader process can freeze (GC pause, SIGSTOP, a stuck disk, a VM migration)
//! while the command it supervises runs on. Its session then expires, a successor
//! is elected, and two copies of the command run at once: the zombie leader.
//! zkelect closes that gap with a second process that does nothing but hold a
//! deadline. zkelect renews the deadline only while the server answers it
//! (`renew <ms>` on the watchdog's stdin: the lease is valid for `ms` more
//! milliseconds, measured from the send time of the last request the server
//! answered, so it ends no later than the moment the core would suspend). When
//! the deadline passes without a renewal, the watchdog SIGKILLs the command's
//! process group at once: before the server can expire the session (a third of
//! the session timeout later at the earliest) and so before any successor can
//! start. If zkelect dies, the pipe closes and the watchdog stops the command
//! within the lease; when the command exits, the watchdog exits with its status.
//!
//! The watchdog uses only blocking std calls on one thread and its own monotonic
//! clock, so nothing in zkelect's runtime can hold it up.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// A message from zkelect to the watchdog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseMsg {
    /// The lease is valid for this much longer.
    Renew(Duration),
    /// Stop the command: SIGTERM, then SIGKILL after this grace (or at the lease's end).
    Stop(Duration),
    /// Pass this signal on to the command's process group (`zkelect lock
    /// --on-revoke`: someone asked the holder to let go; the command decides).
    Relay(Signal),
}

impl LeaseMsg {
    /// The wire form: one line.
    pub(crate) fn encode(self) -> String {
        match self {
            Self::Renew(d) => format!("renew {}\n", d.as_millis()),
            Self::Stop(d) => format!("stop {}\n", d.as_millis()),
            Self::Relay(signal) => format!("relay {}\n", signal as i32),
        }
    }

    /// Parses one line; `None` for anything else (ignored, never fatal).
    pub(crate) fn decode(line: &str) -> Option<Self> {
        let (verb, ms) = line.trim().split_once(' ')?;
        if verb == "relay" {
            return Signal::try_from(ms.parse::<i32>().ok()?)
                .ok()
                .map(Self::Relay);
        }
        let d = Duration::from_millis(ms.parse().ok()?);
        match verb {
            "renew" => Some(Self::Renew(d)),
            "stop" => Some(Self::Stop(d)),
            _ => None,
        }
    }
}

/// What ended the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseEnd {
    /// The command exited by itself.
    Exited,
    /// The deadline passed without renewal: killed.
    Expired,
    /// zkelect asked to stop it.
    Stopped,
    /// zkelect went away (the pipe closed).
    Orphaned,
}

fn signal_group(child: &Child, signal: Signal) {
    // The command leads its own process group (process_group(0)), so the group id is its pid.
    let _ = killpg(Pid::from_raw(child.id() as i32), signal);
}

/// Starts `program` and holds it under the lease read from `messages`.
///
/// Returns how the lease ended and the command's exit status. A `stop`
/// sends SIGTERM (once) and sets SIGKILL for its grace later, never later
/// than the lease's end; a later `stop` can only bring the SIGKILL forward
/// (`stop 0`: at once). Messages keep being read while the command stops.
pub(crate) fn hold(
    program: &OsString,
    args: &[OsString],
    first_lease: Duration,
    messages: mpsc::Receiver<Option<LeaseMsg>>,
) -> std::io::Result<(LeaseEnd, ExitStatus)> {
    use std::os::unix::process::CommandExt;
    let mut deadline = Instant::now() + first_lease;
    let mut cmd = if std::path::Path::new("/usr/bin/setpriv").exists() {
        // If the watchdog itself is killed, the kernel kills the command too.
        let mut c = Command::new("/usr/bin/setpriv");
        c.arg("--pdeathsig")
            .arg("KILL")
            .arg("--")
            .arg(program)
            .args(args);
        c
    } else {
        let mut c = Command::new(program);
        c.args(args);
        c
    };
    let mut child = cmd.stdin(Stdio::null()).process_group(0).spawn()?;
    // Once the command got SIGTERM: why, and when SIGKILL follows.
    let mut stopping: Option<(LeaseEnd, Instant)> = None;
    let mut orphaned = false;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let end = stopping.map_or(LeaseEnd::Exited, |(end, _)| end);
            return Ok((end, status));
        }
        let now = Instant::now();
        let kill_at = stopping.map_or(deadline, |(_, at)| at.min(deadline));
        if now >= kill_at {
            // At the lease's end the safety point: no grace, the server may
            // expire the session soon.
            let end = match stopping {
                Some((end, at)) if at <= deadline => end,
                _ => LeaseEnd::Expired,
            };
            signal_group(&child, Signal::SIGKILL);
            let status = child.wait()?;
            return Ok((end, status));
        }
        // Wake at the kill, or every 20 ms (5 while stopping) to notice the
        // command's exit.
        let poll = if stopping.is_some() { 5 } else { 20 };
        let wait = (kill_at - now).min(Duration::from_millis(poll));
        if orphaned {
            std::thread::sleep(wait);
            continue;
        }
        let (end, grace) = match messages.recv_timeout(wait) {
            Ok(Some(LeaseMsg::Renew(d))) => {
                deadline = Instant::now() + d;
                continue;
            }
            Ok(Some(LeaseMsg::Stop(grace))) => (LeaseEnd::Stopped, grace),
            Ok(Some(LeaseMsg::Relay(signal))) => {
                signal_group(&child, signal);
                continue;
            }
            Ok(None) | Err(RecvTimeoutError::Disconnected) => {
                // zkelect is gone: stop the command within the lease.
                orphaned = true;
                (LeaseEnd::Orphaned, deadline.saturating_duration_since(now))
            }
            Err(RecvTimeoutError::Timeout) => continue,
        };
        let at = Instant::now() + grace;
        stopping = match stopping {
            None => {
                signal_group(&child, Signal::SIGTERM);
                Some((end, at))
            }
            Some((first, earlier)) => Some((first, earlier.min(at))),
        };
    }
}

/// The `zkelect __lease` entry point: reads [`LeaseMsg`] lines from stdin.
pub(crate) fn watchdog_main(first_lease: Duration, command: &[OsString]) -> std::process::ExitCode {
    let Some((program, args)) = command.split_first() else {
        eprintln!("zkelect __lease: no command");
        return std::process::ExitCode::from(2);
    };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let stdin = BufReader::new(std::io::stdin());
        for line in stdin.lines() {
            let Ok(line) = line else { break };
            if let Some(msg) = LeaseMsg::decode(&line) {
                if tx.send(Some(msg)).is_err() {
                    return;
                }
            }
        }
        let _ = tx.send(None);
    });
    match hold(program, args, first_lease, rx) {
        Ok((end, status)) => {
            if end == LeaseEnd::Expired {
                eprintln!("zkelect __lease: lease expired without renewal; the command was killed");
            }
            exit_code_of(status)
        }
        Err(e) => {
            eprintln!("zkelect __lease: cannot start {program:?}: {e}");
            // The shell's codes, which `zkelect run` reads as "could not start".
            let code = if e.kind() == std::io::ErrorKind::PermissionDenied {
                126
            } else {
                127
            };
            std::process::ExitCode::from(code)
        }
    }
}

/// The shell's convention: the code, or 128 + the signal.
pub(crate) fn exit_code_of(status: ExitStatus) -> std::process::ExitCode {
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> (OsString, Vec<OsString>) {
        ("sh".into(), vec!["-c".into(), script.into()])
    }

    #[test]
    fn messages_round_trip_and_garbage_is_ignored() {
        for msg in [
            LeaseMsg::Renew(Duration::from_millis(1500)),
            LeaseMsg::Stop(Duration::ZERO),
            LeaseMsg::Relay(Signal::SIGUSR1),
        ] {
            assert_eq!(LeaseMsg::decode(&msg.encode()), Some(msg));
        }
        assert_eq!(LeaseMsg::decode("renew x"), None);
        assert_eq!(LeaseMsg::decode("relay 9999"), None);
        assert_eq!(LeaseMsg::decode("hello"), None);
    }

    #[test]
    fn unrenewed_lease_kills_the_command_at_the_deadline() {
        let (program, args) = sh("trap '' TERM; sleep 30");
        let (_tx, rx) = mpsc::channel();
        let started = Instant::now();
        let (end, status) = hold(&program, &args, Duration::from_millis(300), rx).unwrap();
        let took = started.elapsed();
        assert_eq!(end, LeaseEnd::Expired);
        assert!(!status.success());
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_secs(5),
            "{took:?}"
        );
    }

    #[test]
    fn renewals_keep_the_command_alive() {
        let (program, args) = sh("sleep 0.6; exit 3");
        let (tx, rx) = mpsc::channel();
        let renewer = std::thread::spawn(move || {
            for _ in 0..10 {
                let _ = tx.send(Some(LeaseMsg::Renew(Duration::from_millis(200))));
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let (end, status) = hold(&program, &args, Duration::from_millis(200), rx).unwrap();
        assert_eq!(end, LeaseEnd::Exited);
        assert_eq!(status.code(), Some(3));
        renewer.join().unwrap();
    }

    #[test]
    fn closed_pipe_stops_the_command() {
        let (program, args) = sh("sleep 30");
        let (tx, rx) = mpsc::channel::<Option<LeaseMsg>>();
        drop(tx);
        let (end, _) = hold(&program, &args, Duration::from_secs(5), rx).unwrap();
        assert_eq!(end, LeaseEnd::Orphaned);
    }

    #[test]
    fn a_second_stop_brings_the_kill_forward_and_no_grace_outlasts_the_lease() {
        let (program, args) = sh("trap '' TERM; sleep 30");
        let (tx, rx) = mpsc::channel();
        let stopper = std::thread::spawn(move || {
            // Once the shell ignores SIGTERM.
            std::thread::sleep(Duration::from_millis(200));
            let _ = tx.send(Some(LeaseMsg::Stop(Duration::from_secs(20))));
            std::thread::sleep(Duration::from_millis(200));
            let _ = tx.send(Some(LeaseMsg::Stop(Duration::ZERO)));
            // Held open: only the second stop may end it.
            std::thread::sleep(Duration::from_secs(3));
        });
        let started = Instant::now();
        let (end, _) = hold(&program, &args, Duration::from_secs(10), rx).unwrap();
        assert_eq!(end, LeaseEnd::Stopped);
        let took = started.elapsed();
        assert!(took < Duration::from_secs(2), "{took:?}");
        stopper.join().unwrap();
        // A grace longer than the lease ends at the lease.
        let (program, args) = sh("trap '' TERM; sleep 30");
        let (tx, rx) = mpsc::channel();
        let stopper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            let _ = tx.send(Some(LeaseMsg::Stop(Duration::from_secs(20))));
            std::thread::sleep(Duration::from_secs(3));
        });
        let started = Instant::now();
        let (end, _) = hold(&program, &args, Duration::from_millis(600), rx).unwrap();
        assert_eq!(end, LeaseEnd::Expired);
        let took = started.elapsed();
        assert!(took < Duration::from_secs(2), "{took:?}");
        stopper.join().unwrap();
    }

    #[test]
    fn stop_sends_sigterm_then_kills_after_the_grace() {
        let (program, args) = sh("trap '' TERM; sleep 30");
        let (tx, rx) = mpsc::channel();
        tx.send(Some(LeaseMsg::Stop(Duration::from_millis(200))))
            .unwrap();
        let started = Instant::now();
        let (end, _) = hold(&program, &args, Duration::from_secs(10), rx).unwrap();
        assert_eq!(end, LeaseEnd::Stopped);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
