//! Turning command-line connection settings into a transport, with the errors
//! mapped to exit codes.

use std::sync::Arc;
use std::time::Duration;

use zkelect::zk_client::{TlsSettings, ZkClientOptions};
use zkelect::{
    Connect, ConnectFailure, ElectionError, EventStream, SessionError, TlsError, Transport,
    TransportEvent, ZkAsyncOptions,
};
use zkelect_core::connect_string::ConnectString;
use zkelect_core::{Acl, CandidateError, NamespaceFault, SessionEvent, ZkCode};

use crate::args::{ConnectArgs, TransportArg};
use crate::exit::{Code, Failure};

/// The exit code a session error deserves.
pub(crate) fn session_code(e: &SessionError) -> Code {
    match e {
        SessionError::Config(_) | SessionError::SessionTimeoutTooShort { .. } => Code::Config,
        // A malformed or unresolvable --connect is a setting to fix, not an outage.
        e if e.connect_failure() == Some(ConnectFailure::BadAddress) => Code::Config,
        SessionError::Tls(TlsError::Config { .. }) => Code::Config,
        // No server answered within the connect timeout.
        SessionError::Connect { .. } => Code::Unreachable,
        // The server's certificate (or ours) was refused: a trust failure.
        SessionError::Auth(_) | SessionError::Tls(_) => Code::Auth,
        _ => Code::Election,
    }
}

/// The exit code an election error deserves.
pub(crate) fn code_of(e: &ElectionError) -> Code {
    match e {
        ElectionError::Config(_) => Code::Config,
        ElectionError::Session(e) => session_code(e),
        ElectionError::Timeout(..) => Code::Unreachable,
        ElectionError::Fatal(CandidateError::AuthFailed) => Code::Auth,
        ElectionError::Fatal(CandidateError::Refused {
            code: ZkCode::NoAuth | ZkCode::InvalidAcl | ZkCode::AuthFailed,
            ..
        }) => Code::Auth,
        e if e.namespace_fault().is_some() => Code::Namespace,
        _ => Code::Election,
    }
}

pub(crate) fn failure(e: impl Into<ElectionError>) -> Failure {
    let e = e.into();
    Failure::new(code_of(&e), e)
}

/// [`failure`] of an election on `conn`: when the namespace is at fault,
/// the message names the chroot of --connect (the core sees paths under
/// it only).
pub(crate) fn failure_in(e: ElectionError, conn: &ConnectArgs) -> Failure {
    let Some((path, fault)) = e.namespace_fault() else {
        return failure(e);
    };
    let chroot = ConnectString::parse(&conn.connect)
        .ok()
        .and_then(|c| c.chroot);
    let connect = &conn.connect;
    let message = match (fault, chroot) {
        (NamespaceFault::RootMissing, Some(chroot)) => format!(
            "the chroot {chroot} of --connect {connect} does not exist (creating {path} \
             under it found no parent): create it (a persistent node), or fix --connect"
        ),
        (NamespaceFault::Ephemeral, Some(chroot)) if path == "/" => format!(
            "the chroot {chroot} of --connect {connect} is an ephemeral node, which cannot \
             have children: use a persistent node as the chroot"
        ),
        (NamespaceFault::Ephemeral, Some(chroot)) => format!(
            "{path} under the chroot {chroot} of --connect {connect} is an ephemeral node, \
             which cannot have children"
        ),
        // No chroot: the core's words say it all.
        (_, None) => return Failure::new(Code::Namespace, e),
    };
    Failure::new(Code::Namespace, anyhow::anyhow!(message))
}

/// The ACL for nodes: the custom list (`--acl`) if one was given, else
/// creator-only writes when credentials are given.
pub(crate) fn acl_for(conn: &ConnectArgs, custom: &[zkelect_core::AclEntry]) -> Acl {
    if !custom.is_empty() {
        Acl::Custom(custom.to_vec())
    } else if conn.auth.is_some() || conn.sasl_user.is_some() {
        Acl::CreatorAllWorldRead
    } else {
        Acl::Open
    }
}

fn usage(message: String) -> Failure {
    Failure::new(Code::Usage, anyhow::anyhow!(message))
}

/// The environment variable that may hold the SASL password.
pub(crate) const SASL_PASSWORD_ENV: &str = "ZKELECT_SASL_PASSWORD";

/// The SASL password: the first line of --sasl-password-file, else
/// $ZKELECT_SASL_PASSWORD. Missing is a usage error (2); an unreadable or
/// empty file a setting to fix (3).
fn sasl_password(conn: &ConnectArgs) -> Result<String, Failure> {
    if let Some(file) = &conn.sasl_password_file {
        let text = std::fs::read_to_string(file).map_err(|e| {
            Failure::new(
                Code::Config,
                anyhow::anyhow!("cannot read --sasl-password-file {}: {e}", file.display()),
            )
        })?;
        let password = text.lines().next().unwrap_or_default().to_owned();
        if password.is_empty() {
            return Err(Failure::new(
                Code::Config,
                anyhow::anyhow!("--sasl-password-file {} is empty", file.display()),
            ));
        }
        return Ok(password);
    }
    match std::env::var(SASL_PASSWORD_ENV) {
        Ok(password) if !password.is_empty() => Ok(password),
        _ => Err(usage(format!(
            "--sasl-user needs a password: --sasl-password-file FILE or ${SASL_PASSWORD_ENV}"
        ))),
    }
}

/// The connection settings' checks that need no I/O: bad combinations are
/// usage errors (2); a connect string or timeout the transport refuses is
/// a config error (3), as connecting would report it.
pub(crate) fn check(conn: &ConnectArgs) -> Result<(), Failure> {
    if let Some(auth) = &conn.auth {
        if !auth.contains(':') {
            return Err(usage(format!("--auth takes user:password, got {auth:?}")));
        }
    }
    let tls_given = conn.tls_ca.is_some() || conn.tls_cert.is_some() || conn.tls_key.is_some();
    match conn.transport {
        TransportArg::ZookeeperAsync => {
            if tls_given {
                return Err(usage(
                    "--tls-ca, --tls-cert and --tls-key need --transport zookeeper-client \
                     (zookeeper-async has no TLS)"
                        .into(),
                ));
            }
            if conn.sasl_user.is_some() {
                return Err(usage(
                    "--sasl-user needs --transport zookeeper-client (zookeeper-async has no SASL)"
                        .into(),
                ));
            }
            async_options(conn).validate().map_err(failure)
        }
        // TLS files and the SASL password are read when connecting.
        TransportArg::ZookeeperClient => client_options(conn).validate().map_err(failure),
    }
}

fn async_options(conn: &ConnectArgs) -> ZkAsyncOptions {
    let options = ZkAsyncOptions::new(conn.connect.clone())
        .session_timeout(conn.session_timeout())
        .connect_timeout(conn.connect_timeout());
    match &conn.auth {
        Some(auth) => options.digest(auth.clone()),
        None => options,
    }
}

fn client_options(conn: &ConnectArgs) -> ZkClientOptions {
    let options = ZkClientOptions::new(conn.connect.clone())
        .session_timeout(conn.session_timeout())
        .connect_timeout(conn.connect_timeout());
    match &conn.auth {
        Some(auth) => options.digest(auth.clone()),
        None => options,
    }
}

/// The settings of the chosen transport, checked before any traffic
/// ([`check`]); unreadable TLS or password files are config errors (3).
pub(crate) fn settings(conn: &ConnectArgs) -> Result<Box<dyn Connect>, Failure> {
    check(conn)?;
    match conn.transport {
        TransportArg::ZookeeperAsync => Ok(Box::new(async_options(conn))),
        TransportArg::ZookeeperClient => {
            let mut options = client_options(conn);
            if let Some(user) = &conn.sasl_user {
                options = options.sasl_digest_md5(user.clone(), sasl_password(conn)?);
            }
            if let Some(ca) = &conn.tls_ca {
                let mut tls = TlsSettings::from_ca_file(ca).map_err(failure)?;
                if let (Some(cert), Some(key)) = (&conn.tls_cert, &conn.tls_key) {
                    tls = tls.identity_files(cert, key).map_err(failure)?;
                }
                options = options.tls(tls);
            }
            Ok(Box::new(options))
        }
    }
}

/// Connects with the given settings.
pub(crate) async fn connect(
    conn: &ConnectArgs,
) -> Result<(Arc<dyn Transport>, EventStream), Failure> {
    settings(conn)?.connect().await.map_err(failure)
}

/// The session timeout the server negotiated: from the transport's first
/// `Connected` (every transport reports one on connecting, with the
/// timeout its leases use), awaited at most `within`. Returns the events
/// unchanged, that one included, for the election.
pub(crate) async fn negotiated(
    mut events: EventStream,
    within: Duration,
) -> (EventStream, Option<Duration>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let mut timeout = None;
    let deadline = tokio::time::Instant::now() + within;
    while timeout.is_none() {
        let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.recv()).await else {
            break;
        };
        if let TransportEvent::Session(SessionEvent::Connected { timeout: t, .. }) = &event {
            timeout = Some(*t);
        }
        let _ = tx.send(event);
    }
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if tx.send(event).is_err() {
                break;
            }
        }
    });
    (rx, timeout)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::args::{Cli, Cmd};

    fn conn(connect: &str) -> ConnectArgs {
        let cli = Cli::try_parse_from([
            "zkelect",
            "status",
            "--connect",
            connect,
            "--path",
            "/svc/leader",
        ])
        .expect("parses");
        let Cmd::Status(status) = cli.command else {
            panic!("not status")
        };
        status.conn
    }

    fn namespace(path: &str, fault: NamespaceFault) -> ElectionError {
        ElectionError::Fatal(CandidateError::Namespace {
            path: path.into(),
            fault,
        })
    }

    /// A transport that answers a request with another kind's reply ends
    /// the election for good: exit 8, with both kinds named.
    #[test]
    fn a_reply_of_the_wrong_kind_is_exit_8_naming_both_kinds() {
        let e = ElectionError::Fatal(CandidateError::WrongReply(zkelect_core::WrongReply {
            request: zkelect_core::Verb::GetData,
            reply: zkelect_core::Verb::GetChildren,
            path: "/svc/leader".into(),
        }));
        let f = failure(e);
        assert_eq!(f.code, Code::Election);
        let text = f.to_string();
        assert!(
            text.contains("`data`") && text.contains("`children`"),
            "{text}"
        );
    }

    /// A missing or ephemeral chroot is exit 12, and the message names the
    /// chroot of --connect, which the core never sees.
    #[test]
    fn a_missing_or_ephemeral_chroot_is_exit_12_naming_the_chroot() {
        let on = conn("h:2181,k:2181/apps/x");
        let missing = failure_in(namespace("/svc", NamespaceFault::RootMissing), &on);
        assert_eq!(missing.code, Code::Namespace);
        let text = missing.to_string();
        assert!(
            text.contains("the chroot /apps/x of --connect h:2181,k:2181/apps/x does not exist"),
            "{text}"
        );
        let ephemeral = failure_in(namespace("/", NamespaceFault::Ephemeral), &on);
        assert_eq!(ephemeral.code, Code::Namespace);
        assert!(
            ephemeral.to_string().contains("/apps/x")
                && ephemeral.to_string().contains("ephemeral"),
            "{ephemeral}"
        );
        // A level of the path ephemeral, no chroot: the core's words.
        let plain = failure_in(
            namespace("/svc", NamespaceFault::Ephemeral),
            &conn("h:2181"),
        );
        assert_eq!(plain.code, Code::Namespace);
        assert!(
            plain.to_string().contains("/svc is an ephemeral node"),
            "{plain}"
        );
        // Other errors keep their codes.
        assert_eq!(failure_in(ElectionError::Closed, &on).code, Code::Election);
        assert_eq!(
            code_of(&namespace("/svc", NamespaceFault::RootMissing)),
            Code::Namespace
        );
    }
}
