//! `zkelect lock`: wait for a lock, run a command once while holding it,
//! release, and exit with the command's own status — like `flock` and
//! `etcdctl lock`.
//!
//! The command runs under the same lease watchdog as `zkelect run`
//! ([`crate::lease`]): a frozen or killed `zkelect lock` cannot keep its
//! command running past the moment the next holder may start. If the lock is
//! lost while the command runs, the command gets SIGTERM, then SIGKILL after
//! `--grace-ms`, and `zkelect lock` exits 123.
//!
//! Because the command's own status passes through, `zkelect lock`'s own
//! outcomes follow the coreutils wrapper convention (`timeout`, `env`,
//! `nice`): 123–127, listed in [`crate::exit::TABLE`].
//!
//! The queue follows the core's rules ([`Rule`]): a mutex (`m_` nodes), a
//! semaphore with `--permits K` (`s_`), a read-write lock's reader with
//! `--read` (`r_`) or writer with `--write` (`w_`), run by one machine on
//! its own session. (The adapters' `Mutex` handles will carry the same
//! rules; this command needs nothing from them but the machine.)

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::time::Instant;
use tracing::{info, warn};
use zkelect::Election;
use zkelect_core::{Config, FencingToken, Role, Rule};

use crate::args::LockArgs;
use crate::connect::{acl_for, connect, failure_in};
use crate::exit::{self, Code, Failure, WithCode};
use crate::lease::exit_code_of;
use crate::signals::{shell_status, Stops};
use crate::supervise::{renew, spawn, stop_running, ChildSpec};

/// How the command's run under the lock ended.
#[derive(Debug, PartialEq, Eq)]
enum Held {
    /// The command exited by itself while the lock was held: its status.
    Exited(std::process::ExitStatus),
    /// The lock was lost (or its lease ran out) while the command ran; the
    /// command was stopped.
    Lost,
    /// A stopping signal to `zkelect lock`: the command was stopped.
    Interrupted(Signal),
}

/// Any failure before the command ran is exit 125; the log keeps the kind
/// (what `zkelect run` would have exited with).
fn before_cmd(f: Failure) -> Failure {
    let kind = f.code as u8;
    Failure::new(
        Code::LockFailed,
        f.error.context(format!(
            "zkelect lock failed before the command ran (kind: exit {kind} of `zkelect run`)"
        )),
    )
}

/// The default id: this host and process, so `status` tells holders apart.
fn default_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    // Node ids must fit a znode name: keep it to safe characters.
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{host}-{}", std::process::id())
}

/// The command is looked up before the lock is taken: a lock held only to
/// find the command missing would make every waiter wait for nothing.
/// Not found → 127, found but not executable → 126 (the shell's codes).
fn check_runnable(program: &OsString) -> Result<(), Failure> {
    crate::run::runnable(program).map_err(|e| {
        let found =
            program.as_encoded_bytes().contains(&b'/') && std::path::Path::new(program).exists();
        let code = if found {
            Code::CannotExecute
        } else {
            Code::NotFound
        };
        Failure::new(code, e)
    })
}

pub(crate) async fn lock(args: LockArgs, mut stops: Stops) -> Result<ExitCode, Failure> {
    let id = args.id.clone().unwrap_or_else(default_id);
    // clap refuses more than one of --read, --write, --permits.
    let rule = match (args.permits, args.read, args.write) {
        (Some(permits), _, _) => Rule::Semaphore { permits },
        (None, true, _) => Rule::Read,
        (None, false, true) => Rule::Write,
        (None, false, false) => Rule::Mutex,
    };
    Config::builder(&args.conn.path, &id)
        .rule(rule)
        .build()
        .code(Code::Config)
        .map_err(before_cmd)?;
    let Some((program, rest)) = args.command.split_first() else {
        return Err(before_cmd(Failure::new(
            Code::Usage,
            anyhow::anyhow!("no command after --"),
        )));
    };
    check_runnable(program)?;
    if let Some(addr) = args.metrics_addr {
        crate::run::serve_metrics(addr).map_err(before_cmd)?;
        info!(%addr, "serving metrics for Prometheus");
    }

    // Nothing exists on the server yet: a signal while connecting just ends.
    let (transport, events) = match stops.unless(connect(&args.conn)).await {
        Ok(connected) => connected.map_err(before_cmd)?,
        Err(signal) => return Ok(interrupted(signal, "while connecting")),
    };
    // From here on the election exists, and every way out closes it: its
    // node is deleted (even one whose create is still on its way).
    let election = Election::builder(transport, events)
        .path(&args.conn.path)
        .id(&id)
        .configure(move |config| config.rule(rule))
        .acl(acl_for(&args.conn))
        .start()
        .await
        .map_err(|e| before_cmd(failure_in(e, &args.conn)))?;
    match stops.unless(election.wait_joined()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            election.close().await;
            return Err(before_cmd(failure_in(e, &args.conn)));
        }
        Err(signal) => {
            election.close().await;
            return Ok(interrupted(signal, "while joining"));
        }
    }
    info!(node = ?election.node(), "waiting for the lock");

    // Wait for the lock, at most --timeout, or until told to stop.
    let waited = async {
        match args.timeout {
            Some(bound) => tokio::time::timeout(bound, election.wait_leader())
                .await
                .ok(),
            None => Some(election.wait_leader().await),
        }
    };
    let token = match stops.unless(waited).await {
        Ok(Some(Ok(token))) => token,
        Ok(Some(Err(e))) => {
            election.close().await;
            return Err(before_cmd(failure_in(e, &args.conn)));
        }
        Ok(None) => {
            election.close().await;
            let bound = args.timeout.unwrap_or_default();
            return Err(Failure::new(
                Code::LockWait,
                anyhow::anyhow!(
                    "the lock was not acquired within --timeout {}; the command did not run",
                    humantime::format_duration(bound)
                ),
            ));
        }
        Err(signal) => {
            election.close().await;
            return Ok(interrupted(signal, "while waiting for the lock"));
        }
    };
    info!(token = token.0, "acquired the lock: running the command");

    let spec = ChildSpec {
        program: program.clone(),
        args: rest.to_vec(),
        env: Vec::new(),
        grace: Duration::from_millis(args.grace_ms),
        watchdog: std::env::current_exe().ok(),
    };
    let held = hold(
        &spec,
        token,
        election.changes(),
        election.lease(),
        stops.recv(),
    )
    .await;
    election.close().await;
    info!("released the lock");
    match held {
        Ok(Held::Exited(status)) => Ok(exit_code_of(status)),
        Ok(Held::Interrupted(signal)) => Ok(interrupted(signal, "")),
        Ok(Held::Lost) => Err(Failure::new(
            Code::LockLost,
            anyhow::anyhow!("the lock was lost while the command ran; the command was stopped"),
        )),
        Err(e) => Err(Failure::new(Code::CannotExecute, e)),
    }
}

/// What `lock` exits with after a stopping signal: 128 + its number, as a
/// shell reports a process the signal killed (the command, if it ran, is
/// stopped, and the node deleted, by the caller).
fn interrupted(signal: Signal, when: &str) -> ExitCode {
    if when.is_empty() {
        info!(%signal, "stopped");
    } else {
        info!(%signal, "stopped {when}");
    }
    ExitCode::from(shell_status(signal))
}

/// Runs the command once while `roles` says we hold with `token`: until it
/// exits, the hold ends, or `shutdown` yields a signal number.
async fn hold(
    spec: &ChildSpec,
    token: FencingToken,
    mut roles: tokio::sync::watch::Receiver<Role>,
    mut leases: tokio::sync::watch::Receiver<Option<Instant>>,
    shutdown: impl std::future::Future<Output = Signal>,
) -> anyhow::Result<Held> {
    tokio::pin!(shutdown);
    let lapsed = |deadline: Option<Instant>| deadline.is_some_and(|d| d <= Instant::now());
    let first = *leases.borrow_and_update();
    if lapsed(first) || *roles.borrow_and_update() != Role::Leader(token) {
        return Ok(Held::Lost);
    }
    let lease_left = first.map_or(spec.grace, |d| d.saturating_duration_since(Instant::now()));
    let mut running = spawn(spec, token, lease_left)
        .map_err(|e| anyhow::anyhow!("cannot start {:?}: {e}", spec.program))?;
    info!(pid = running.child.id(), "the command started");
    let mut leases_open = true;
    loop {
        tokio::select! {
            signal = &mut shutdown => {
                info!(%signal, "signalled: stopping the command, releasing the lock");
                stop_running(&mut running, spec.grace).await;
                return Ok(Held::Interrupted(signal));
            }
            status = running.child.wait() => {
                let status = status?;
                // The watchdog kills the command when the lease runs out
                // unrenewed: the hold lapsed, the command did not end by itself.
                if spec.watchdog.is_some()
                    && (lapsed(*leases.borrow()) || *roles.borrow() != Role::Leader(token))
                {
                    warn!(status = %exit::describe(status), "the lease ran out: the watchdog stopped the command");
                    return Ok(Held::Lost);
                }
                info!(status = %exit::describe(status), "the command ended");
                return Ok(Held::Exited(status));
            }
            changed = leases.changed(), if leases_open => {
                leases_open = changed.is_ok();
                if leases_open {
                    let deadline = *leases.borrow_and_update();
                    renew(&mut running, deadline).await;
                }
            }
            changed = roles.changed() => {
                let role = if changed.is_err() { Role::Closed } else { *roles.borrow() };
                if role == Role::Leader(token) {
                    continue;
                }
                warn!(?role, "the lock was lost: stopping the command");
                let status = stop_running(&mut running, spec.grace).await;
                let status = status.map_or_else(|| "unknown".to_owned(), exit::describe);
                info!(%status, "the command stopped");
                return Ok(Held::Lost);
            }
        }
    }
}

/// Parses `--timeout`: a plain number is seconds (as `flock -w` and
/// `timeout` take it), anything else a duration like `500ms`, `1m30s`.
pub(crate) fn parse_timeout(s: &str) -> Result<Duration, String> {
    if let Ok(secs) = s.trim().parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"));
    }
    humantime::parse_duration(s.trim()).map_err(|e| format!("{s:?}: {e} (e.g. 10, 2.5, 500ms, 1m)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::watch;

    #[test]
    fn timeouts_parse_as_seconds_or_durations() {
        assert_eq!(parse_timeout("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_timeout("2.5"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_timeout("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_timeout("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_timeout("-1").is_err());
        assert!(parse_timeout("soon").is_err());
    }

    #[test]
    fn missing_and_unexecutable_commands_get_the_shells_codes() {
        let missing = check_runnable(&"zkelect-no-such-command".into()).unwrap_err();
        assert_eq!(missing.code, Code::NotFound);
        let plain = std::env::temp_dir().join(format!("zkelect-lock-plain-{}", std::process::id()));
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        let unexecutable = check_runnable(&plain.clone().into_os_string()).unwrap_err();
        assert_eq!(unexecutable.code, Code::CannotExecute);
        let _ = std::fs::remove_file(plain);
        assert!(check_runnable(&"sh".into()).is_ok());
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
    async fn the_commands_status_passes_through_once() {
        let (_tx, roles) = watch::channel(Role::Leader(FencingToken(7)));
        let (_ltx, leases) = watch::channel(None);
        let held = hold(
            &sh("test \"$ZKELECT_FENCING_TOKEN\" = 7 && exit 42"),
            FencingToken(7),
            roles,
            leases,
            std::future::pending(),
        )
        .await
        .unwrap();
        match held {
            Held::Exited(status) => assert_eq!(status.code(), Some(42)),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_lost_lock_stops_the_command() {
        let (tx, roles) = watch::channel(Role::Leader(FencingToken(7)));
        let (_ltx, leases) = watch::channel(None);
        let task = tokio::spawn(async move {
            hold(
                &sh("trap '' TERM; sleep 30"),
                FencingToken(7),
                roles,
                leases,
                std::future::pending(),
            )
            .await
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        tx.send(Role::Follower).unwrap();
        let held = tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(held, Held::Lost);
    }

    #[tokio::test]
    async fn a_signal_stops_the_command_and_reports_itself() {
        let (_tx, roles) = watch::channel(Role::Leader(FencingToken(7)));
        let (_ltx, leases) = watch::channel(None);
        let held = hold(&sh("sleep 30"), FencingToken(7), roles, leases, async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            Signal::SIGTERM
        })
        .await
        .unwrap();
        assert_eq!(held, Held::Interrupted(Signal::SIGTERM));
    }

    #[tokio::test]
    async fn a_lock_not_held_runs_nothing() {
        let (_tx, roles) = watch::channel(Role::Follower);
        let (_ltx, leases) = watch::channel(None);
        let marker = std::env::temp_dir().join(format!("zkelect-lock-ran-{}", std::process::id()));
        let held = hold(
            &sh(&format!("touch {}", marker.display())),
            FencingToken(7),
            roles,
            leases,
            std::future::pending(),
        )
        .await
        .unwrap();
        assert_eq!(held, Held::Lost);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!marker.exists());
    }
}
