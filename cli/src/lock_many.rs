//! `zkelect lock --path A --path B …`: a multi-lock ([`zkelect::MultiLock`])
//! taken all or none, in sorted order, and a command run once while every
//! part holds — under the same lease watchdog as one lock.
//!
//! The supervisor watches a role and a lease. A multi-lock's are its
//! guard's: the parts' earliest lease ([`MultiLockGuard::lease`]) and, for
//! the role, "holding with the first part's token" while every part holds
//! ([`MultiLockGuard::held`]), and no longer once any part is lost. The
//! command finds every token in [`TOKENS_ENV`] as `PATH=TOKEN` pairs,
//! comma-separated in the order the parts were taken (sorted by path), and
//! the first part's in `ZKELECT_FENCING_TOKEN` as for one lock.

use std::ffi::OsString;
use std::process::ExitCode;

use tokio::sync::watch;
use tracing::info;
use zkelect::{LockError, MultiLockGuard, Session};
use zkelect_core::{Config, FencingToken, Role, Rule};

use crate::args::LockArgs;
use crate::connect::acl_for;
use crate::exit::{Code, Failure, WithCode};
use crate::lock_connect::{connect_for_lock, Connected};
use crate::lock_exit::{after_cmd, before_cmd, interrupted};
use crate::signals::Stops;
use crate::supervise::{supervise, ChildSpec};
use crate::supervisor::Mode;

/// Every part's token, for the command: `PATH=TOKEN,PATH=TOKEN`.
pub(crate) const TOKENS_ENV: &str = "ZKELECT_FENCING_TOKENS";

/// Each path as a mutex's, checked as one lock's would be, and no path
/// twice (exit 125).
pub(crate) fn check(paths: &[String], id: &str) -> Result<(), Failure> {
    for (i, path) in paths.iter().enumerate() {
        if paths[..i].contains(path) {
            return Err(before_cmd(Failure::new(
                Code::Config,
                anyhow::anyhow!(zkelect_core::multilock::MultiLockError::Duplicate(
                    path.clone()
                )),
            )));
        }
        Config::builder(path, id)
            .rule(Rule::Mutex)
            .build()
            .code(Code::Config)
            .map_err(before_cmd)?;
    }
    Ok(())
}

/// The tokens as the command finds them in [`TOKENS_ENV`].
pub(crate) fn tokens_env(tokens: &[(String, FencingToken)]) -> String {
    tokens
        .iter()
        .map(|(path, token)| format!("{path}={}", token.0))
        .collect::<Vec<_>>()
        .join(",")
}

/// A multi-lock failure, in words.
fn multi_failure(e: LockError) -> Failure {
    Failure::new(
        Code::Election,
        anyhow::anyhow!(e).context("the multi-lock could not be acquired"),
    )
}

/// The supervisor's role watch of a guard: `Leader(first)` while every
/// part holds, `Closed` from the moment one is lost (a hold does not come
/// back). A task copies the held watch until then.
fn roles_of(guard: &MultiLockGuard, first: FencingToken) -> watch::Receiver<Role> {
    let mut held = guard.held();
    let role = move |h: bool| if h { Role::Leader(first) } else { Role::Closed };
    let (tx, rx) = watch::channel(role(*held.borrow_and_update()));
    tokio::spawn(async move {
        loop {
            let h = *held.borrow_and_update();
            tx.send_if_modified(|now| {
                let next = role(h);
                let changed = *now != next;
                *now = next;
                changed
            });
            if !h || tx.is_closed() || held.changed().await.is_err() {
                // The held watch closed: the multi-lock is gone.
                tx.send_replace(Role::Closed);
                return;
            }
        }
    });
    rx
}

pub(crate) async fn lock_many(
    args: LockArgs,
    id: String,
    program: OsString,
    rest: Vec<OsString>,
    mut stops: Stops,
) -> Result<ExitCode, Failure> {
    let connection = match connect_for_lock(&args, &mut stops).await? {
        Connected::Ready(connection) => connection,
        Connected::Interrupted(code) => return Ok(code),
    };
    let session = Session::from_transport(connection.transport, connection.events);
    // From here on every way out closes the session: whatever part was
    // taken or queued is deleted with it.
    let multi = session
        .multi_lock(args.paths.iter().cloned())
        .id(&id)
        .acl(acl_for(&args.conn, &args.acl));
    info!(paths = ?args.paths, "waiting for every lock");
    let waited = async {
        match args.timeout {
            Some(bound) => multi.try_acquire(bound).await,
            None => multi.acquire().await.map(Some),
        }
    };
    let guard = match stops.unless(waited).await {
        Ok(Ok(Some(guard))) => guard,
        Ok(Ok(None)) => {
            session.close().await;
            let bound = args.timeout.unwrap_or_default();
            return Err(Failure::new(
                Code::LockWait,
                anyhow::anyhow!(
                    "the locks were not all acquired within --timeout {}; none is kept and \
                     the command did not run",
                    humantime::format_duration(bound)
                ),
            ));
        }
        Ok(Err(e)) => {
            session.close().await;
            return Err(before_cmd(multi_failure(e)));
        }
        Err(signal) => {
            session.close().await;
            return Ok(interrupted(signal, "while waiting for the locks"));
        }
    };
    let tokens = guard.tokens().to_vec();
    let Some(&(_, first)) = tokens.first() else {
        session.close().await;
        return Err(before_cmd(multi_failure(LockError::Closed)));
    };
    info!(tokens = %tokens_env(&tokens), "acquired every lock: running the command");
    let spec = ChildSpec {
        program,
        args: rest,
        env: vec![(TOKENS_ENV.into(), tokens_env(&tokens).into())],
        grace: connection.grace,
        watchdog: std::env::current_exe().ok(),
    };
    let held = supervise(
        &spec,
        Mode::Hold(first),
        roles_of(&guard, first),
        guard.lease(),
        None,
        &mut stops,
    )
    .await;
    guard.release().await;
    session.close().await;
    info!("released every lock");
    after_cmd(held, "a lock")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tokens_are_path_token_pairs_in_order() {
        let tokens = [
            ("/a".to_owned(), FencingToken(7)),
            ("/b/c".to_owned(), FencingToken(12)),
        ];
        assert_eq!(tokens_env(&tokens), "/a=7,/b/c=12");
    }

    #[test]
    fn every_path_is_checked() {
        let ok = ["/a".to_owned(), "/b".to_owned()];
        assert!(check(&ok, "host-1").is_ok());
        let bad = ["/a".to_owned(), "relative".to_owned()];
        assert_eq!(check(&bad, "host-1").unwrap_err().code, Code::LockFailed);
        let twice = ["/a".to_owned(), "/b".to_owned(), "/a".to_owned()];
        let e = check(&twice, "host-1").unwrap_err();
        assert_eq!(e.code, Code::LockFailed);
        assert!(
            format!("{:#}", e.error).contains("given twice"),
            "{:#}",
            e.error
        );
    }
}
