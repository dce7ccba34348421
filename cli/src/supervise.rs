//! Runs the command of `zkelect run` (whenever leading) and `zkelect lock`
//! (once, while holding): the process side of [`crate::supervisor`], whose
//! machine makes every decision. This pump only moves what happens — the
//! role and lease from the election, stopping signals, the command's exit,
//! the clock — into the machine, and carries out its actions.
//!
//! The command is started with the fencing token in `ZKELECT_FENCING_TOKEN`,
//! in a process group of its own so that everything it spawned goes with it.
//! With a watchdog (the `zkelect` binary itself, run as `zkelect __lease`),
//! it runs under a lease that this pump renews from the election's lease
//! deadline; see [`crate::lease`] for why a separate process holds it. The
//! watchdog then carries out SIGTERM and SIGKILL too, bounded by the lease.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};
use zkelect_core::{FencingToken, Role};

use crate::exit;
use crate::lease::LeaseMsg;
use crate::signals::Stops;
use crate::supervisor::{Action, Mode, Outcome, Supervisor};

/// Environment variable carrying the fencing token to the child.
pub(crate) const TOKEN_ENV: &str = "ZKELECT_FENCING_TOKEN";

/// What to run and how to stop it.
#[derive(Debug, Clone)]
pub(crate) struct ChildSpec {
    pub(crate) program: OsString,
    pub(crate) args: Vec<OsString>,
    /// Extra environment for the child (besides the token).
    pub(crate) env: Vec<(OsString, OsString)>,
    /// Time between SIGTERM and SIGKILL.
    pub(crate) grace: Duration,
    /// The `zkelect` binary to run as the lease watchdog, if leases are wanted.
    pub(crate) watchdog: Option<PathBuf>,
}

/// The running command: directly, or under the lease watchdog.
struct Running {
    child: Child,
    /// The watchdog's stdin, while it takes messages.
    lease: Option<ChildStdin>,
}

fn spawn(spec: &ChildSpec, token: FencingToken, lease_left: Duration) -> std::io::Result<Running> {
    let mut cmd = match &spec.watchdog {
        Some(zkelect) => {
            let mut cmd = Command::new(zkelect);
            cmd.arg("__lease")
                .arg("--lease-ms")
                .arg(lease_left.as_millis().to_string())
                .arg("--")
                .arg(&spec.program)
                .args(&spec.args)
                .stdin(Stdio::piped());
            cmd
        }
        None => {
            let mut cmd = Command::new(&spec.program);
            cmd.args(&spec.args);
            cmd
        }
    };
    cmd.envs(spec.env.iter().cloned())
        .env(TOKEN_ENV, token.0.to_string())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn()?;
    let lease = child.stdin.take();
    Ok(Running { child, lease })
}

impl Running {
    /// Tells the watchdog `msg`; false if there is none (any more).
    async fn tell(&mut self, msg: LeaseMsg) -> bool {
        let Some(pipe) = self.lease.as_mut() else {
            return false;
        };
        if pipe.write_all(msg.encode().as_bytes()).await.is_ok() {
            return true;
        }
        self.lease = None;
        false
    }

    /// `signal` to the process group of the child this pump started (the
    /// command's own, or the watchdog's).
    fn signal_group(&self, signal: Signal) {
        // An exited child has no id: nothing left to signal.
        let Some(pid) = self.child.id() else { return };
        if let Err(e) = killpg(Pid::from_raw(pid as i32), signal) {
            warn!(error = %e, %signal, "cannot signal the command's process group");
        }
    }

    /// SIGTERM, with SIGKILL to follow in `grace`: the watchdog does both (and
    /// never later than the lease), or this pump does.
    async fn terminate(&mut self, grace: Duration) {
        if !self.tell(LeaseMsg::Stop(grace)).await {
            self.signal_group(Signal::SIGTERM);
        }
    }

    /// Passes `signal` on to the command: through the watchdog (which runs
    /// the command in a process group of its own), or to the group.
    async fn relay(&mut self, signal: Signal) {
        if !self.tell(LeaseMsg::Relay(signal)).await {
            self.signal_group(signal);
        }
    }

    /// SIGKILL now.
    async fn kill(&mut self) {
        if !self.tell(LeaseMsg::Stop(Duration::ZERO)).await {
            self.signal_group(Signal::SIGKILL);
        }
    }
}

/// Waits for the running child to exit; never, if none runs.
async fn exit_of(running: &mut Option<Running>) -> std::io::Result<ExitStatus> {
    match running {
        Some(r) => r.child.wait().await,
        None => std::future::pending().await,
    }
}

/// A signal to pass on to the running command each time a count grows
/// (`zkelect lock --on-revoke`: the hold's revocation requests).
pub(crate) struct Relay {
    pub(crate) signal: Signal,
    pub(crate) requests: watch::Receiver<u64>,
}

/// Resolves when the relay's count changes (never without a relay, or
/// once its sender is gone).
async fn relay_changed(relay: &mut Option<Relay>) -> bool {
    match relay {
        Some(r) => {
            if r.requests.changed().await.is_ok() {
                return true;
            }
            *relay = None;
            false
        }
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Supervises the command for `mode` until the machine is done: a stopping
/// signal, the command's own exit while holding, the end of the election
/// (`run`), the hold lost (`lock`). `leases` carries the moment holding
/// lapses without further contact with the server.
///
/// Fails only if the command cannot be started.
pub(crate) async fn supervise(
    spec: &ChildSpec,
    mode: Mode,
    mut roles: watch::Receiver<Role>,
    mut leases: watch::Receiver<Option<Instant>>,
    mut relay: Option<Relay>,
    stops: &mut Stops,
) -> anyhow::Result<Outcome> {
    let mut machine = Supervisor::new(mode, spec.grace, spec.watchdog.is_some());
    let mut running: Option<Running> = None;
    // A closed channel is a closed election (roles) or no lease at all.
    let (mut roles_open, mut leases_open) = (true, true);
    let role = *roles.borrow_and_update();
    machine.standing(Instant::now(), role, *leases.borrow_and_update());
    loop {
        while let Some(action) = machine.poll_action() {
            match action {
                Action::Start { token, lease_left } => {
                    let started = spawn(spec, token, lease_left)
                        .map_err(|e| anyhow::anyhow!("cannot start {:?}: {e}", spec.program))?;
                    info!(
                        token = token.0,
                        pid = started.child.id(),
                        "holding: started the command"
                    );
                    running = Some(started);
                }
                Action::Renew(deadline) => {
                    if let Some(r) = &mut running {
                        let left = deadline.saturating_duration_since(Instant::now());
                        r.tell(LeaseMsg::Renew(left)).await;
                    }
                }
                Action::Terminate { grace } => {
                    if let Some(r) = &mut running {
                        info!(
                            grace_ms = grace.as_millis() as u64,
                            role = ?*roles.borrow(),
                            "stopping the command: SIGTERM, then SIGKILL after the grace"
                        );
                        r.terminate(grace).await;
                    }
                }
                Action::Kill => {
                    if let Some(r) = &mut running {
                        warn!("the command is still running: SIGKILL");
                        r.kill().await;
                    }
                }
                Action::Done(outcome) => return Ok(outcome),
            }
        }
        let wake = machine.poll_timeout();
        tokio::select! {
            signal = stops.recv() => {
                info!(%signal, "stopping");
                machine.signal(Instant::now(), signal);
            }
            status = exit_of(&mut running) => {
                running = None;
                let status = status?;
                info!(status = %exit::describe(status), "the command ended");
                machine.exited(Instant::now(), status);
            }
            changed = roles.changed(), if roles_open => {
                roles_open = changed.is_ok();
                let role = if roles_open { *roles.borrow_and_update() } else { Role::Closed };
                machine.standing(Instant::now(), role, *leases.borrow_and_update());
            }
            changed = leases.changed(), if leases_open => {
                leases_open = changed.is_ok();
                let role = if roles_open { *roles.borrow_and_update() } else { Role::Closed };
                machine.standing(Instant::now(), role, *leases.borrow_and_update());
            }
            true = relay_changed(&mut relay) => {
                // Only a command that runs hears it; the supervisor decides
                // nothing: the command does.
                if let (Some(r), Some(relay)) = (&mut running, &mut relay) {
                    let signal = relay.signal;
                    relay.requests.borrow_and_update();
                    info!(%signal, "a revocation request: passed on to the command");
                    r.relay(signal).await;
                }
            }
            () = sleep_until(wake) => machine.handle_timeout(Instant::now()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_millis(300);

    /// A lease far ahead, as while the server answers.
    fn healthy() -> watch::Receiver<Option<Instant>> {
        // With its sender gone the channel still reads its last value.
        watch::channel(Some(Instant::now() + Duration::from_secs(3600))).1
    }

    fn sh(script: &str) -> ChildSpec {
        ChildSpec {
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env: Vec::new(),
            grace: GRACE,
            watchdog: None,
        }
    }

    /// A command that ignores SIGTERM, and the file it makes once it does:
    /// a test that needs the trap in place waits for the file
    /// ([`until_made`]) rather than for a while.
    fn stubborn(name: &str) -> (ChildSpec, PathBuf) {
        let marker =
            std::env::temp_dir().join(format!("zkelect-sup-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        let spec = sh(&format!(
            "trap '' TERM; : > '{}'; sleep 30",
            marker.display()
        ));
        (spec, marker)
    }

    /// Waits until `marker` exists (at most 20 s, for a crowded machine),
    /// then removes it.
    async fn until_made(marker: &std::path::Path) {
        let made = async {
            while !marker.exists() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(20), made)
            .await
            .expect("the command ignores SIGTERM");
        let _ = std::fs::remove_file(marker);
    }

    #[tokio::test]
    async fn run_starts_the_command_only_while_leading_with_the_token_and_again_each_term() {
        let dir = std::env::temp_dir().join(format!("zkelect-sup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("token");
        let spec = sh(&format!(
            "echo $ZKELECT_FENCING_TOKEN >> {}; sleep 30",
            out.display()
        ));
        let (tx, rx) = watch::channel(Role::Follower);
        let (_sig, mut stops) = Stops::sent();
        let task = tokio::spawn(async move {
            supervise(&spec, Mode::Lead, rx, healthy(), None, &mut stops).await
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!out.exists(), "nothing runs while following");
        tx.send(Role::Leader(FencingToken(42))).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(std::fs::read_to_string(&out).unwrap().trim(), "42");
        tx.send(Role::Suspended(FencingToken(42))).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        tx.send(Role::Leader(FencingToken(57))).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "42\n57\n",
            "started again with the new token"
        );
        tx.send(Role::Closed).unwrap();
        let ended = task.await.unwrap().unwrap();
        assert_eq!(ended, Outcome::ElectionOver(Role::Closed));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_command_ignoring_sigterm_is_killed_after_the_grace() {
        let (spec, marker) = stubborn("grace");
        let (tx, rx) = watch::channel(Role::Leader(FencingToken(1)));
        let (_sig, mut stops) = Stops::sent();
        let task = tokio::spawn(async move {
            supervise(&spec, Mode::Lead, rx, healthy(), None, &mut stops).await
        });
        until_made(&marker).await;
        let started = std::time::Instant::now();
        tx.send(Role::Closed).unwrap();
        let ended = task.await.unwrap().unwrap();
        assert_eq!(ended, Outcome::ElectionOver(Role::Closed));
        assert!(started.elapsed() >= GRACE, "waited the grace");
    }

    #[tokio::test]
    async fn a_signal_stops_the_command_and_a_second_one_kills_it_at_once() {
        let (_tx, rx) = watch::channel(Role::Leader(FencingToken(1)));
        let (sig, mut stops) = Stops::sent();
        let (mut spec, marker) = stubborn("second");
        spec.grace = Duration::from_secs(20);
        let task = tokio::spawn(async move {
            supervise(&spec, Mode::Lead, rx, healthy(), None, &mut stops).await
        });
        until_made(&marker).await;
        let started = std::time::Instant::now();
        sig.send(Signal::SIGHUP).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!task.is_finished(), "the command has its grace");
        sig.send(Signal::SIGINT).unwrap();
        let ended = tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("killed at once")
            .unwrap()
            .unwrap();
        assert_eq!(ended, Outcome::Signalled(Signal::SIGHUP));
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn a_command_that_exits_by_itself_ends_supervision_with_its_status() {
        let (_tx, rx) = watch::channel(Role::Leader(FencingToken(7)));
        let (_sig, mut stops) = Stops::sent();
        let spec = sh("test \"$ZKELECT_FENCING_TOKEN\" = 7 && exit 42");
        for mode in [Mode::Lead, Mode::Hold(FencingToken(7))] {
            let ended = supervise(&spec, mode, rx.clone(), healthy(), None, &mut stops)
                .await
                .unwrap();
            match ended {
                Outcome::Exited(status) => assert_eq!(status.code(), Some(42), "{mode:?}"),
                other => panic!("{mode:?}: {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn lock_stops_its_command_when_the_hold_is_lost_and_runs_nothing_if_not_held() {
        let (tx, rx) = watch::channel(Role::Leader(FencingToken(7)));
        let (_sig, mut stops) = Stops::sent();
        let spec = sh("trap '' TERM; sleep 30");
        let task = tokio::spawn(async move {
            supervise(
                &spec,
                Mode::Hold(FencingToken(7)),
                rx,
                healthy(),
                None,
                &mut stops,
            )
            .await
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        tx.send(Role::Follower).unwrap();
        let ended = tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(ended, Outcome::Lost);

        let marker = std::env::temp_dir().join(format!("zkelect-lock-ran-{}", std::process::id()));
        let (_tx, rx) = watch::channel(Role::Follower);
        let (_sig, mut stops) = Stops::sent();
        let spec = sh(&format!("touch {}", marker.display()));
        let ended = supervise(
            &spec,
            Mode::Hold(FencingToken(7)),
            rx,
            healthy(),
            None,
            &mut stops,
        )
        .await
        .unwrap();
        assert_eq!(ended, Outcome::Lost);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!marker.exists());
    }

    /// The lease runs out unrenewed (the server went quiet): the command gets
    /// SIGTERM a grace before the lease's end, and exits in time.
    #[tokio::test]
    async fn an_unrenewed_lease_gets_the_command_sigterm_a_grace_before_its_end() {
        let dir = std::env::temp_dir().join(format!("zkelect-sup-doubt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("log");
        let spec = sh(&format!(
            "trap 'echo term >> {0}; exit 0' TERM; echo start >> {0}; while :; do sleep 0.01; done",
            log.display()
        ));
        let (_tx, rx) = watch::channel(Role::Leader(FencingToken(1)));
        let lease_end = Instant::now() + Duration::from_millis(1500);
        let (_ltx, leases) = watch::channel(Some(lease_end));
        let (_sig, mut stops) = Stops::sent();
        let task = tokio::spawn(async move {
            supervise(&spec, Mode::Lead, rx, leases, None, &mut stops).await
        });
        tokio::time::sleep_until(lease_end).await;
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert_eq!(text, "start\nterm\n", "SIGTERM came before the lease's end");
        assert!(!task.is_finished(), "run waits to lead again");
        task.abort();
        let _ = std::fs::remove_dir_all(dir);
    }
}
