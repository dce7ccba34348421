//! The server JVM as a child process: spawning, signals, reaping.

use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::sync::{mpsc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// `setpriv` (util-linux, essential on Debian) sets `PR_SET_PDEATHSIG` and then
/// execs the JVM; doing that ourselves would need `unsafe` (`pre_exec`), which
/// this workspace forbids.
const SETPRIV: &str = "/usr/bin/setpriv";

type SpawnJob = (Command, mpsc::Sender<io::Result<Child>>);

/// The thread that forks every JVM.
///
/// `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, not
/// the process. Test threads come and go (so do tokio's blocking-pool threads),
/// so all JVMs are forked from this one thread, which lives as long as the test
/// process: the JVMs then die exactly when the test process dies.
fn spawner() -> Option<&'static mpsc::Sender<SpawnJob>> {
    static SPAWNER: OnceLock<Option<mpsc::Sender<SpawnJob>>> = OnceLock::new();
    SPAWNER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<SpawnJob>();
            thread::Builder::new()
                .name("zkelect-jvm-spawner".into())
                .spawn(move || {
                    for (mut command, reply) in rx {
                        // The requester may have given up; nothing to do then.
                        let _ = reply.send(command.spawn());
                    }
                })
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

/// Builds the command that runs `program args...` so that it is killed when
/// this process dies (when `setpriv` is available) and sits in its own process
/// group.
pub(crate) fn command_with_deathsig(program: &Path) -> Command {
    let mut command = if Path::new(SETPRIV).is_file() {
        let mut c = Command::new(SETPRIV);
        c.args(["--pdeathsig", "KILL", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    };
    command.process_group(0);
    command
}

/// Spawns `command` from the long-lived spawner thread (see [`spawner`]), so
/// that a death signal set by [`command_with_deathsig`] fires only when this
/// process dies.
pub(crate) fn spawn_child(mut command: Command) -> io::Result<Child> {
    match spawner() {
        Some(spawner) => {
            let (reply_tx, reply_rx) = mpsc::channel();
            match spawner.send((command, reply_tx)) {
                Ok(()) => reply_rx
                    .recv()
                    .map_err(|_| io::Error::other("the JVM spawner thread went away"))?,
                // The spawner thread is gone (it never is in practice):
                // spawn from here, losing only the death-signal guarantee
                // for when this thread ends early.
                Err(mpsc::SendError((mut command, _))) => command.spawn(),
            }
        }
        None => command.spawn(),
    }
}

/// A running (or exited, not yet dropped) JVM in its own process group.
#[derive(Debug)]
pub(crate) struct JvmProcess {
    child: Child,
    paused: bool,
    exited: Option<ExitStatus>,
}

impl JvmProcess {
    /// Spawns `command` from the long-lived spawner thread.
    pub(crate) fn spawn(command: Command) -> io::Result<JvmProcess> {
        let child = spawn_child(command)?;
        Ok(JvmProcess {
            child,
            paused: false,
            exited: None,
        })
    }

    /// The JVM's pid (which is also its process group id).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    fn pgid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap_or(i32::MAX)
    }

    /// Whether the JVM is stopped by `SIGSTOP`.
    pub(crate) fn is_paused(&self) -> bool {
        self.paused
    }

    /// The exit status if the JVM has exited (reaping it).
    pub(crate) fn exit_status(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exited = Some(status);
            }
        }
        self.exited
    }

    /// Sends `signal` to the JVM's process group, unless it was already reaped
    /// (its pid could then belong to someone else).
    pub(crate) fn signal(&mut self, signal: Signal) -> nix::Result<()> {
        if self.exit_status().is_some() {
            return Err(nix::errno::Errno::ESRCH);
        }
        killpg(Pid::from_raw(self.pgid()), signal)?;
        match signal {
            Signal::SIGSTOP => {
                self.paused = true;
                self.wait_all_threads_stopped(Duration::from_secs(2));
            }
            Signal::SIGCONT => self.paused = false,
            _ => {}
        }
        Ok(())
    }

    /// `kill()` returns before the signal stops every thread; wait until
    /// `/proc` shows them all stopped, so that a paused server really answers
    /// nothing from the moment `pause()` returns.
    fn wait_all_threads_stopped(&self, timeout: Duration) {
        let tasks = format!("/proc/{}/task", self.child.id());
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let Ok(entries) = std::fs::read_dir(&tasks) else {
                return;
            };
            let all_stopped = entries.filter_map(|e| e.ok()).all(|task| {
                std::fs::read_to_string(task.path().join("stat"))
                    .ok()
                    .and_then(|stat| {
                        // "pid (comm) S ...": the state follows the last ')'.
                        let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
                        Some(matches!(state, 'T' | 't' | 'Z' | 'X'))
                    })
                    // A thread that exited meanwhile does not matter.
                    .unwrap_or(true)
            });
            if all_stopped {
                return;
            }
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// Kills the process group with `SIGKILL` (resuming it first if paused)
    /// and reaps the JVM.
    pub(crate) fn kill(&mut self) {
        if self.exit_status().is_some() {
            return;
        }
        if self.paused {
            let _ = self.signal(Signal::SIGCONT);
        }
        let _ = self.signal(Signal::SIGKILL);
        if let Ok(status) = self.child.wait() {
            self.exited = Some(status);
        }
    }

    /// Asks the JVM to exit with `SIGTERM`, waits up to `grace`, then kills it.
    pub(crate) fn terminate(&mut self, grace: Duration) {
        if self.exit_status().is_some() {
            return;
        }
        if self.paused {
            let _ = self.signal(Signal::SIGCONT);
        }
        if self.signal(Signal::SIGTERM).is_ok() {
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline {
                if self.exit_status().is_some() {
                    return;
                }
                thread::sleep(Duration::from_millis(20));
            }
        }
        self.kill();
    }
}

impl Drop for JvmProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
