//! Runs a command only while this process leads.
//!
//! The child is started when the role becomes `Leader`, with the fencing token in
//! `ZKELECT_FENCING_TOKEN`, in a process group of its own so that everything it
//! spawned goes with it. The moment the role is anything else (suspended,
//! demoted, closed) the group gets SIGTERM, then SIGKILL after the grace period.
//!
//! With a watchdog (the `zkelect` binary itself, run as `zkelect __lease`), the
//! command runs under a lease that zkelect renews from the election's lease
//! deadline; see [`crate::lease`] for why a separate process holds it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::time::Instant;

use crate::exit;
use crate::lease::LeaseMsg;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::sync::watch;
use tracing::{info, warn};
use zkelect_core::{FencingToken, Role};

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
pub(crate) struct Running {
    pub(crate) child: Child,
    lease: Option<ChildStdin>,
}

/// Why supervision ended.
#[derive(Debug)]
pub(crate) enum Ended {
    /// A stopping signal came (see [`crate::signals`]): the command, if it
    /// ran, was stopped.
    Shutdown(Signal),
    /// The child exited by itself while leading.
    ChildExited(ExitStatus),
    /// The election ended (closed or failed) and will not lead again.
    ElectionOver(Role),
}

pub(crate) fn spawn(
    spec: &ChildSpec,
    token: FencingToken,
    lease_left: Duration,
) -> std::io::Result<Running> {
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

/// Tells the watchdog how long the lease has left; a failed write means it is gone.
pub(crate) async fn renew(running: &mut Running, deadline: Option<Instant>) {
    let (Some(pipe), Some(deadline)) = (running.lease.as_mut(), deadline) else {
        return;
    };
    let left = deadline.saturating_duration_since(Instant::now());
    if pipe
        .write_all(LeaseMsg::Renew(left).encode().as_bytes())
        .await
        .is_err()
    {
        running.lease = None;
    }
}

/// Stops the command: through the watchdog (which bounds it by the lease) or directly.
pub(crate) async fn stop_running(running: &mut Running, grace: Duration) -> Option<ExitStatus> {
    if let Some(pipe) = running.lease.as_mut() {
        if pipe
            .write_all(LeaseMsg::Stop(grace).encode().as_bytes())
            .await
            .is_ok()
        {
            let bound = grace + Duration::from_secs(2);
            if let Ok(status) = tokio::time::timeout(bound, running.child.wait()).await {
                return status.ok();
            }
        }
    }
    stop(&mut running.child, grace).await
}

/// SIGTERM to the child's group, then SIGKILL if it has not exited in `grace`.
pub(crate) async fn stop(child: &mut Child, grace: Duration) -> Option<ExitStatus> {
    let Some(pid) = child.id() else {
        // Already reaped.
        return child.try_wait().ok().flatten();
    };
    let group = Pid::from_raw(pid as i32);
    if let Err(e) = killpg(group, Signal::SIGTERM) {
        warn!(error = %e, "SIGTERM to the child's process group failed");
    }
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => status.ok(),
        Err(_) => {
            warn!(
                grace_ms = grace.as_millis() as u64,
                "child ignored SIGTERM; sending SIGKILL"
            );
            let _ = killpg(group, Signal::SIGKILL);
            child.wait().await.ok()
        }
    }
}

/// Whether the lease is known to have run out (`None`, no lease known, is not).
fn lease_lapsed(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| d <= Instant::now())
}

/// Supervises the child against the role channel until shutdown, the child's own
/// exit, or the end of the election. `leases` carries the moment leadership lapses
/// without further contact with the server (renewed into the watchdog).
pub(crate) async fn supervise(
    spec: &ChildSpec,
    mut roles: watch::Receiver<Role>,
    mut leases: watch::Receiver<Option<Instant>>,
    shutdown: impl std::future::Future<Output = Signal>,
) -> anyhow::Result<Ended> {
    tokio::pin!(shutdown);
    let mut leases_open = true;
    loop {
        // Wait for leadership, with a lease that has not run out (after the
        // watchdog killed the command for an unrenewed lease, the role may still
        // say Leader until the driver, frozen with us, catches up).
        let token = loop {
            let role = *roles.borrow_and_update();
            let lapsed = lease_lapsed(*leases.borrow_and_update());
            match role {
                Role::Leader(token) if !lapsed => break token,
                Role::Closed | Role::Failed => return Ok(Ended::ElectionOver(role)),
                _ => {}
            }
            tokio::select! {
                signal = &mut shutdown => return Ok(Ended::Shutdown(signal)),
                changed = roles.changed() => if changed.is_err() {
                    return Ok(Ended::ElectionOver(Role::Closed));
                },
                // A closed lease channel (no lease at all) is no reason to stop.
                changed = leases.changed(), if leases_open => leases_open = changed.is_ok(),
            }
        };
        let lease_left = (*leases.borrow_and_update())
            .map_or(spec.grace, |d| d.saturating_duration_since(Instant::now()));
        let mut running = spawn(spec, token, lease_left)
            .map_err(|e| anyhow::anyhow!("cannot start {:?}: {e}", spec.program))?;
        info!(
            token = token.0,
            pid = running.child.id(),
            "leading: started the command"
        );
        // Lead until the role changes, the child exits, or we are told to stop.
        loop {
            tokio::select! {
                signal = &mut shutdown => {
                    info!(%signal, "stopping the command");
                    stop_running(&mut running, spec.grace).await;
                    return Ok(Ended::Shutdown(signal));
                }
                status = running.child.wait() => {
                    let status = status?;
                    // The watchdog kills the command when the lease runs out
                    // unrenewed (zkelect froze, or lost contact): leadership
                    // lapsed, the command did not exit by itself. Stay a
                    // candidate; the command starts again on re-election
                    // (found by the zombie tests: a thawed leader left the election).
                    let lapsed = lease_lapsed(*leases.borrow()) || *roles.borrow() != Role::Leader(token);
                    if spec.watchdog.is_some() && lapsed {
                        warn!(status = %exit::describe(status), "the lease ran out: the watchdog stopped the command");
                        break;
                    }
                    info!(status = %exit::describe(status), "the command ended by itself");
                    return Ok(Ended::ChildExited(status));
                }
                changed = leases.changed(), if leases_open => {
                    leases_open = changed.is_ok();
                    if changed.is_ok() {
                        let deadline = *leases.borrow_and_update();
                        renew(&mut running, deadline).await;
                    }
                }
                changed = roles.changed() => {
                    let role = if changed.is_err() { Role::Closed } else { *roles.borrow() };
                    if role == Role::Leader(token) {
                        continue;
                    }
                    info!(?role, "no longer leading: stopping the command");
                    let status = stop_running(&mut running, spec.grace).await;
                    let status = status.map_or_else(|| "unknown".to_owned(), exit::describe);
                    info!(%status, "the command stopped");
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_lease() -> watch::Receiver<Option<Instant>> {
        watch::channel(None).1
    }

    fn sh(script: &str) -> ChildSpec {
        ChildSpec {
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env: Vec::new(),
            grace: Duration::from_millis(300),
            watchdog: None,
        }
    }

    #[tokio::test]
    async fn child_runs_only_while_leading_and_gets_the_token() {
        let dir = std::env::temp_dir().join(format!("zkelect-sup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("token");
        let spec = sh(&format!(
            "echo $ZKELECT_FENCING_TOKEN >> {}; sleep 30",
            out.display()
        ));
        let (tx, rx) = watch::channel(Role::Follower);
        let task =
            tokio::spawn(
                async move { supervise(&spec, rx, no_lease(), std::future::pending()).await },
            );
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
            "restarted with the new token"
        );
        tx.send(Role::Closed).unwrap();
        let ended = task.await.unwrap().unwrap();
        assert!(
            matches!(ended, Ended::ElectionOver(Role::Closed)),
            "{ended:?}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn child_ignoring_sigterm_is_killed_after_the_grace_period() {
        let spec = sh("trap '' TERM; sleep 30");
        let (tx, rx) = watch::channel(Role::Leader(FencingToken(1)));
        let task =
            tokio::spawn(
                async move { supervise(&spec, rx, no_lease(), std::future::pending()).await },
            );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let started = std::time::Instant::now();
        tx.send(Role::Closed).unwrap();
        let ended = task.await.unwrap().unwrap();
        assert!(matches!(ended, Ended::ElectionOver(Role::Closed)));
        assert!(
            started.elapsed() >= Duration::from_millis(300),
            "waited the grace period"
        );
    }

    #[tokio::test]
    async fn shutdown_stops_the_child() {
        let spec = sh("sleep 30");
        let (_tx, rx) = watch::channel(Role::Leader(FencingToken(1)));
        let ended = supervise(&spec, rx, no_lease(), async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            Signal::SIGHUP
        })
        .await
        .unwrap();
        assert!(matches!(ended, Ended::Shutdown(Signal::SIGHUP)));
    }

    #[tokio::test]
    async fn child_exiting_by_itself_ends_supervision_with_its_status() {
        let spec = sh("exit 7");
        let (_tx, rx) = watch::channel(Role::Leader(FencingToken(1)));
        let ended = supervise(&spec, rx, no_lease(), std::future::pending())
            .await
            .unwrap();
        match ended {
            Ended::ChildExited(status) => assert_eq!(status.code(), Some(7)),
            other => panic!("{other:?}"),
        }
    }
}
