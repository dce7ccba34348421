//! `zkelect run`: the command runs only while this process leads.

use std::time::Duration;

use nix::sys::signal::Signal;
use tracing::info;
use zkelect::Election;
use zkelect_core::{Config, ConnectionPolicy, Role};

use crate::args::{PolicyArg, RunArgs};
use crate::connect::{acl_for, connect, failure_in, negotiated};
use crate::exit::{self, Code, Failure, WithCode};
use crate::signals::Stops;
use crate::supervise::{supervise, ChildSpec};
use crate::supervisor::{grace_for, grace_once_connected, Mode, Outcome, TimeoutSource};

pub(crate) async fn run(
    args: RunArgs,
    mut stops: Stops,
) -> Result<std::process::ExitCode, Failure> {
    // Refuse bad input before touching the network.
    check(&args)?;
    let Some((program, rest)) = args.command.split_first() else {
        return Err(Failure::new(
            Code::Usage,
            anyhow::anyhow!("no command after --"),
        ));
    };
    // A command that cannot start would win leadership only to give it up at
    // once: refuse it before joining.
    runnable(program).map_err(|e| Failure::new(Code::Spawn, e))?;
    let policy = policy_of(args.policy);
    let asked = args.grace_ms.map(Duration::from_millis);
    if let Some(addr) = args.metrics_addr {
        serve_metrics(addr)?;
        info!(%addr, "serving metrics for Prometheus");
    }
    // Nothing exists on the server yet: a signal while connecting just ends.
    let (transport, events) = match stops.unless(connect(&args.conn)).await {
        Ok(connected) => connected?,
        Err(signal) => return Ok(stopped(signal, "while connecting")),
    };
    let (events, timeout) = negotiated(events, args.conn.connect_timeout()).await;
    let grace = grace_once_connected(asked, timeout, args.conn.session_timeout(), policy);
    let grace = match grace {
        Ok(grace) => grace,
        Err(e) => {
            transport.close().await;
            return Err(Failure::new(Code::Config, anyhow::anyhow!(e)));
        }
    };
    let mut builder = Election::builder(transport, events)
        .path(&args.conn.path)
        .id(&args.id)
        .policy(policy)
        .leaders(args.leaders)
        .interop(args.interop.scheme())
        .takeover(args.takeover.mode())
        .acl(acl_for(&args.conn, &args.acl));
    if let Some(data) = &args.data {
        builder = builder.data(data.clone().into_bytes());
    }
    // From here on the election exists, and every way out closes it: its
    // node is deleted (even one whose create is still on its way).
    let election = builder
        .start()
        .await
        .map_err(|e| failure_in(e, &args.conn))?;
    match stops.unless(election.wait_joined()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            election.close().await;
            return Err(failure_in(e, &args.conn));
        }
        Err(signal) => {
            election.close().await;
            return Ok(stopped(signal, "while joining"));
        }
    }
    info!(node = ?election.node(), "joined the election");
    if let Some(ms) = args.lead_timeout_ms {
        let bound = Duration::from_millis(ms);
        match stops
            .unless(tokio::time::timeout(bound, election.wait_leader()))
            .await
        {
            // Elected; or the election stopped, which supervision reports.
            Ok(Ok(_)) => {}
            Ok(Err(_elapsed)) => {
                election.close().await;
                return Err(Failure::new(
                    Code::LockTimeout,
                    anyhow::anyhow!("not elected within --lead-timeout {ms} ms; left the election"),
                ));
            }
            Err(signal) => {
                election.close().await;
                return Ok(stopped(signal, "while waiting to lead"));
            }
        }
    }
    let spec = ChildSpec {
        program: program.clone(),
        args: rest.to_vec(),
        env: Vec::new(),
        grace,
        watchdog: std::env::current_exe().ok(),
    };
    let ended = supervise(
        &spec,
        Mode::Lead,
        election.changes(),
        election.lease(),
        None,
        &mut stops,
    )
    .await;
    let outcome = match ended {
        Err(e) => Err(Failure::new(Code::Spawn, e)),
        Ok(Outcome::Signalled(signal)) => Ok(stopped(signal, "")),
        Ok(Outcome::Exited(status)) => exit::of_command(status),
        Ok(Outcome::ElectionOver(Role::Failed)) => {
            let e = election.wait_leader().await.err();
            Err(match e {
                Some(e) => failure_in(e, &args.conn),
                None => Failure::new(Code::Election, anyhow::anyhow!("the election failed")),
            })
        }
        // Closed elsewhere; a hold lost is for `lock` only.
        Ok(Outcome::ElectionOver(_) | Outcome::Lost) => Ok(std::process::ExitCode::SUCCESS),
    };
    election.close().await;
    info!("closed: node deleted, session closed");
    outcome
}

/// The checks of `run`'s own settings that need no I/O: the path, the id,
/// the election's rule and the grace (the connection's are
/// [`crate::connect::check`]).
pub(crate) fn check(args: &RunArgs) -> Result<(), Failure> {
    Config::builder(&args.conn.path, &args.id)
        .leaders(args.leaders)
        .interop(args.interop.scheme())
        .takeover(args.takeover.mode())
        .build()
        .code(Code::Config)?;
    // The grace must fit in the lease: checked against the session timeout
    // asked for now, and against the server's once connected.
    grace_for(
        args.grace_ms.map(Duration::from_millis),
        args.conn.session_timeout(),
        TimeoutSource::Requested,
        policy_of(args.policy),
    )
    .map_err(|e| Failure::new(Code::Config, anyhow::anyhow!(e)))
    .map(drop)
}

fn policy_of(policy: PolicyArg) -> ConnectionPolicy {
    match policy {
        PolicyArg::Standard => ConnectionPolicy::Standard,
        PolicyArg::SessionAware => ConnectionPolicy::SessionAware,
    }
}

/// What `run` exits with after a stopping signal: 0, as asked (the command,
/// if it ran, is stopped, and the node deleted, by the caller).
fn stopped(signal: Signal, when: &str) -> std::process::ExitCode {
    if when.is_empty() {
        info!(%signal, "stopping");
    } else {
        info!(%signal, "stopping {when}");
    }
    std::process::ExitCode::SUCCESS
}

/// Installs the Prometheus exporter as the `metrics` recorder, listening on
/// `addr`. Histograms get buckets (seconds) so Prometheus can aggregate them
/// across candidates, which summaries cannot.
pub(crate) fn serve_metrics(addr: std::net::SocketAddr) -> Result<(), Failure> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    const BUCKETS: &[f64] = &[
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    ];
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)
        .code(Code::Config)?
        .install()
        .map_err(|e| Failure::new(Code::Config, anyhow::anyhow!("--metrics-addr {addr}: {e}")))
}

/// Whether `program` names an executable file: as a path when it holds a
/// `/`, else somewhere on `PATH` (as `execvp` looks for it).
pub(crate) fn runnable(program: &std::ffi::OsStr) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;
    let executable = |path: &Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let as_path = Path::new(program);
    if program.as_encoded_bytes().contains(&b'/') {
        if executable(as_path) {
            return Ok(());
        }
        match std::fs::metadata(as_path) {
            Err(_) => anyhow::bail!("cannot start {program:?}: no such file"),
            Ok(m) if m.is_dir() => anyhow::bail!("cannot start {program:?}: it is a directory"),
            Ok(_) => anyhow::bail!(
                "cannot start {program:?}: the file is not executable (no x permission; chmod +x it)"
            ),
        }
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|dir| executable(&dir.join(program))) {
        return Ok(());
    }
    anyhow::bail!("cannot start {program:?}: command not found on PATH")
}

#[cfg(test)]
mod tests {
    use super::runnable;

    #[test]
    fn commands_are_looked_up_like_execvp_does() {
        assert!(runnable("sh".as_ref()).is_ok());
        assert!(runnable("/bin/sh".as_ref()).is_ok());
        let missing = runnable("zkelect-no-such-command".as_ref()).unwrap_err();
        assert!(missing.to_string().contains("not found"), "{missing}");
        let plain = std::env::temp_dir().join(format!("zkelect-plain-{}", std::process::id()));
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        let not_executable = runnable(plain.as_os_str()).unwrap_err().to_string();
        assert!(
            not_executable.contains("not executable"),
            "{not_executable}"
        );
        let _ = std::fs::remove_file(plain);
        let absent = runnable("/nonexistent/x".as_ref()).unwrap_err().to_string();
        assert!(absent.contains("no such file"), "{absent}");
        let dir = runnable("/tmp".as_ref()).unwrap_err().to_string();
        assert!(dir.contains("directory"), "{dir}");
    }
}
