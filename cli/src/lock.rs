//! `zkelect lock`: wait for a lock, run a command once while holding it,
//! release, and exit with the command's own status — like `flock` and
//! `etcdctl lock`.
//!
//! The command runs under the same lease watchdog as `zkelect run`
//! ([`crate::lease`]): a frozen or killed `zkelect lock` cannot keep its
//! command running past the moment the next holder may start. If the lock is
//! lost (or contact with the server is in doubt) while the command runs, the
//! command gets SIGTERM, then SIGKILL after `--grace-ms`, and `zkelect lock`
//! exits 123. Supervision is `zkelect run`'s ([`crate::supervise`]), in
//! [`Mode::Hold`]: the command runs once.
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

use tracing::info;
use zkelect::{Election, ElectionError};
use zkelect_core::{Config, ConnectionPolicy, Rule};

use crate::args::LockArgs;
use crate::connect::{acl_for, failure_in};
use crate::exit::{Code, Failure, WithCode};
use crate::lock_connect::{connect_for_lock, Connected};
use crate::lock_exit::{after_cmd, before_cmd, interrupted};
use crate::signals::Stops;
use crate::supervise::{supervise, ChildSpec, Relay};
use crate::supervisor::{grace_for, Mode, TimeoutSource};

/// The checks of `lock`'s own settings that need no I/O (the path, the id,
/// the recipe, the grace), with the rule they make; a refusal is already
/// exit 125.
pub(crate) fn check(args: &LockArgs, id: &str) -> Result<Rule, Failure> {
    // clap refuses more than one of --read, --write, --permits.
    let rule = match (args.permits, args.read, args.write) {
        (Some(permits), _, _) => Rule::Semaphore { permits },
        (None, true, _) => Rule::Read,
        (None, false, true) => Rule::Write,
        (None, false, false) => Rule::Mutex,
    };
    if args.paths.len() > 1 {
        crate::lock_many::check(&args.paths, id)?;
    }
    Config::builder(&args.conn.path, id)
        .rule(rule)
        .weight(args.weight.unwrap_or(1))
        .revocable(args.on_revoke.is_some())
        .takeover(args.takeover.mode())
        .build()
        .code(Code::Config)
        .map_err(before_cmd)?;
    // The grace must fit in the lease: checked against the session timeout
    // asked for now, and against the server's once connected.
    grace_for(
        args.grace_ms.map(Duration::from_millis),
        args.conn.session_timeout(),
        TimeoutSource::Requested,
        ConnectionPolicy::Standard,
    )
    .map_err(|e| before_cmd(Failure::new(Code::Config, anyhow::anyhow!(e))))?;
    Ok(rule)
}

/// An id of the default's shape (host name characters, `-`, the pid), for
/// checking the other settings before the host name is read.
pub(crate) const DEFAULT_ID_SHAPE: &str = "host-1";

/// A failure of the lock's queue, in a lock's words: the library's
/// `Election` carries the lock here, and its own words are an election's.
fn lock_failure(e: ElectionError, conn: &crate::args::ConnectArgs) -> Failure {
    match e {
        ElectionError::Closed => Failure::new(
            Code::Election,
            anyhow::anyhow!("the lock's queue closed before the lock was acquired"),
        ),
        e => failure_in(e, conn),
    }
}

/// What is held, in its recipe's words: what is waited for and acquired,
/// and what is then released or lost.
fn held_words(rule: Rule) -> (&'static str, &'static str) {
    match rule {
        Rule::Semaphore { .. } => ("a permit of the semaphore", "the permit"),
        Rule::Read => ("the read lock", "the read lock"),
        Rule::Write => ("the write lock", "the write lock"),
        Rule::Mutex | Rule::Election { .. } => ("the lock", "the lock"),
    }
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
    let rule = check(&args, &id)?;
    let Some((program, rest)) = args.command.split_first() else {
        return Err(before_cmd(Failure::new(
            Code::Usage,
            anyhow::anyhow!("no command after --"),
        )));
    };
    check_runnable(program)?;
    if args.paths.len() > 1 {
        let (program, rest) = (program.clone(), rest.to_vec());
        return crate::lock_many::lock_many(args, id, program, rest, stops).await;
    }
    // Nothing exists on the server yet: a signal while connecting just ends.
    let connection = match connect_for_lock(&args, &mut stops).await? {
        Connected::Ready(connection) => connection,
        Connected::Interrupted(code) => return Ok(code),
    };
    let (weight, revocable) = (args.weight.unwrap_or(1), args.on_revoke.is_some());
    // From here on the election exists, and every way out closes it: its
    // node is deleted (even one whose create is still on its way).
    let election = Election::builder(connection.transport, connection.events)
        .path(&args.conn.path)
        .id(&id)
        .configure(move |config| config.rule(rule).weight(weight).revocable(revocable))
        .takeover(args.takeover.mode())
        .acl(acl_for(&args.conn, &args.acl))
        .start()
        .await
        .map_err(|e| before_cmd(lock_failure(e, &args.conn)))?;
    match stops.unless(election.wait_joined()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            election.close().await;
            return Err(before_cmd(lock_failure(e, &args.conn)));
        }
        Err(signal) => {
            election.close().await;
            return Ok(interrupted(signal, "while joining"));
        }
    }
    let (what, it) = held_words(rule);
    info!(node = ?election.node(), "waiting for {what}");

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
            return Err(before_cmd(lock_failure(e, &args.conn)));
        }
        Ok(None) => {
            election.close().await;
            let bound = args.timeout.unwrap_or_default();
            return Err(Failure::new(
                Code::LockWait,
                anyhow::anyhow!(
                    "{what} was not acquired within --timeout {}; the command did not run",
                    humantime::format_duration(bound)
                ),
            ));
        }
        Err(signal) => {
            election.close().await;
            return Ok(interrupted(signal, &format!("while waiting for {what}")));
        }
    };
    info!(token = token.0, "acquired {what}: running the command");

    let spec = ChildSpec {
        program: program.clone(),
        args: rest.to_vec(),
        env: Vec::new(),
        grace: connection.grace,
        watchdog: std::env::current_exe().ok(),
    };
    let relay = args.on_revoke.map(|signal| Relay {
        signal,
        requests: revocation_requests(&election),
    });
    let held = supervise(
        &spec,
        Mode::Hold(token),
        election.changes(),
        election.lease(),
        relay,
        &mut stops,
    )
    .await;
    election.close().await;
    info!("released {it}");
    after_cmd(held, it)
}

/// How many revocation requests the hold has heard, and every new one:
/// the status's count, followed by a task that ends with the election.
fn revocation_requests(election: &Election) -> tokio::sync::watch::Receiver<u64> {
    let mut status = election.status();
    let (tx, rx) = tokio::sync::watch::channel(status.borrow().stats.revocations_requested);
    tokio::spawn(async move {
        while status.changed().await.is_ok() {
            let n = status.borrow_and_update().stats.revocations_requested;
            tx.send_if_modified(|seen| std::mem::replace(seen, n) != n);
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
