//! Turning command-line connection settings into a transport, with the errors
//! mapped to exit codes.

use zkelect::{ConnectOptions, ElectionError, EventStream, ZkAsyncTransport};
use zkelect_core::{Acl, CandidateError, ZkCode};

use crate::args::ConnectArgs;
use crate::exit::{Code, Failure};

/// The exit code an election error deserves.
pub(crate) fn code_of(e: &ElectionError) -> Code {
    match e {
        ElectionError::Config(_) | ElectionError::SessionTimeoutTooShort { .. } => Code::Config,
        ElectionError::Connect { .. } | ElectionError::Timeout(..) => Code::Unreachable,
        ElectionError::Auth(_) | ElectionError::Fatal(CandidateError::AuthFailed) => Code::Auth,
        ElectionError::Fatal(CandidateError::Refused {
            code: ZkCode::NoAuth | ZkCode::InvalidAcl | ZkCode::AuthFailed,
            ..
        }) => Code::Auth,
        _ => Code::Election,
    }
}

pub(crate) fn failure(e: ElectionError) -> Failure {
    Failure::new(code_of(&e), e)
}

/// The ACL for nodes: creator-only writes when credentials are given.
pub(crate) fn acl_for(conn: &ConnectArgs) -> Acl {
    if conn.auth.is_some() {
        Acl::CreatorAllWorldRead
    } else {
        Acl::Open
    }
}

/// Connects with the given settings.
pub(crate) async fn connect(
    conn: &ConnectArgs,
) -> Result<(ZkAsyncTransport, EventStream), Failure> {
    let mut options = ConnectOptions::new(conn.connect.clone())
        .session_timeout(conn.session_timeout())
        .connect_timeout(conn.connect_timeout());
    if let Some(auth) = &conn.auth {
        if !auth.contains(':') {
            return Err(Failure::new(
                Code::Usage,
                anyhow::anyhow!("--auth takes user:password, got {auth:?}"),
            ));
        }
        options = options.digest(auth.clone());
    }
    ZkAsyncTransport::connect(options).await.map_err(failure)
}
