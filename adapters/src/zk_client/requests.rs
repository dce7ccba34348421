//! The core's requests on the client, and the client's answers and errors
//! as the core's replies and codes.

use std::future::Future;
use std::task::{Context, Poll, Waker};

use zkelect_core::{Acl, CreateMode, Reply, Request, Stat, ZkCode};
use zookeeper_client as zkc;

use crate::transport::MultiOpResult;

/// Whether the session was not `SyncConnected` at the end of a request, or
/// changed state during it (`state` was subscribed before the request).
pub(super) fn in_doubt(state: &mut zkc::StateWatcher) -> bool {
    if state.peek_state() != zkc::SessionState::SyncConnected {
        return true;
    }
    // A change since the subscription is ready at once; poll it once.
    let changed = std::pin::pin!(state.changed());
    let mut cx = Context::from_waker(Waker::noop());
    matches!(Future::poll(changed, &mut cx), Poll::Ready(_))
}

/// A `SessionExpired` from a client that has since been replaced must not
/// expire the new session in the core: the request is simply lost.
pub(super) fn straddled(code: ZkCode, replaced: bool) -> ZkCode {
    if replaced && code == ZkCode::SessionExpired {
        ZkCode::ConnectionLoss
    } else {
        code
    }
}

/// The request on the client; a watch request also yields its watcher.
pub(super) async fn perform_raw(
    client: &zkc::Client,
    request: Request,
) -> Result<(Reply, Option<zkc::OneshotWatcher>), zkc::Error> {
    let data = |data: Vec<u8>, stat: &zkc::Stat| Reply::Data {
        data,
        stat: map_stat(stat),
    };
    Ok(match request {
        Request::Create {
            path,
            data,
            mode,
            acl,
        } => {
            let acls = map_acl(&acl);
            let options = map_mode(mode).with_acls(zkc::Acls::new(&acls));
            let (stat, sequence) = client.create(&path, &data, &options).await?;
            (
                Reply::Created {
                    path: created_path(&path, mode, sequence),
                    stat: map_stat(&stat),
                },
                None,
            )
        }
        Request::GetChildren { path, watch: false } => {
            (Reply::Children(client.list_children(&path).await?), None)
        }
        Request::GetChildren { path, watch: true } => {
            let (children, watcher) = client.list_and_watch_children(&path).await?;
            (Reply::Children(children), Some(watcher))
        }
        Request::GetData { path, watch: false } => {
            let (bytes, stat) = client.get_data(&path).await?;
            (data(bytes, &stat), None)
        }
        Request::GetData { path, watch: true } => {
            let (bytes, stat, watcher) = client.get_and_watch_data(&path).await?;
            (data(bytes, &stat), Some(watcher))
        }
        Request::Exists { path, watch: false } => {
            let stat = client.check_stat(&path).await?;
            (Reply::Exists(stat.as_ref().map(map_stat)), None)
        }
        Request::Exists { path, watch: true } => {
            let (stat, watcher) = client.check_and_watch_stat(&path).await?;
            (Reply::Exists(stat.as_ref().map(map_stat)), Some(watcher))
        }
        Request::Delete { path, version } => {
            client.delete(&path, version).await?;
            (Reply::Deleted, None)
        }
        Request::SetData {
            path,
            data,
            version,
        } => {
            let stat = client.set_data(&path, &data, version).await?;
            (Reply::Set(map_stat(&stat)), None)
        }
        Request::Sync { path } => {
            client.sync(&path).await?;
            (Reply::Synced, None)
        }
    })
}

/// The path of a created node: the requested one, plus the sequence for
/// sequential modes (`Display` pads it to 10 digits, 19 above `i32::MAX`).
fn created_path(requested: &str, mode: CreateMode, sequence: zkc::CreateSequence) -> String {
    if mode.is_sequential() {
        format!("{requested}{sequence}")
    } else {
        requested.to_owned()
    }
}

/// Maps a client error to the core's code, given whether the connection was
/// in doubt during the request (see [`in_doubt`]).
///
/// The errors the client gives for a connection that timed out or broke
/// (`Custom`, `Timeout`, `UnexpectedError`, and any new variant) are
/// `ConnectionLoss` when the connection was in doubt — the server may have
/// applied the request — and `Other(-1)` otherwise (ZooKeeper's
/// `SystemError`; the core retries it).
pub(super) fn map_error(e: zkc::Error, in_doubt: bool) -> ZkCode {
    use zkc::Error as E;
    let unexplained = if in_doubt {
        ZkCode::ConnectionLoss
    } else {
        ZkCode::Other(-1)
    };
    match e {
        // A reply that could not be read, a client that is gone: the
        // request may have been applied.
        E::ConnectionLoss | E::UnmarshalError { .. } | E::NoHosts | E::ClientClosed => {
            ZkCode::ConnectionLoss
        }
        E::SessionExpired => ZkCode::SessionExpired,
        E::SessionMoved => ZkCode::SessionMoved,
        E::NoNode => ZkCode::NoNode,
        E::NodeExists => ZkCode::NodeExists,
        E::NotEmpty => ZkCode::NotEmpty,
        E::BadVersion => ZkCode::BadVersion,
        E::NoAuth => ZkCode::NoAuth,
        E::AuthFailed => ZkCode::AuthFailed,
        E::InvalidAcl => ZkCode::InvalidAcl,
        E::BadArguments(_) => ZkCode::BadArguments,
        E::NoChildrenForEphemerals => ZkCode::NoChildrenForEphemerals,
        E::Unimplemented => ZkCode::Unimplemented,
        // The server's codes for these.
        E::MarshallingError => ZkCode::Other(-5),
        E::RuntimeInconsistent => ZkCode::Other(-2),
        E::NotReadOnly => ZkCode::Other(-119),
        E::NoWatcher => ZkCode::Other(-121),
        E::ReconfigDisabled => ZkCode::Other(-123),
        E::QuotaExceeded => ZkCode::Other(-125),
        E::Throttled => ZkCode::Other(-127),
        E::UnexpectedErrorCode(code) => ZkCode::Other(code),
        E::Timeout | E::UnexpectedError(_) | E::Custom(_) => unexplained,
        _ => unexplained,
    }
}

pub(super) fn map_multi_result(result: zkc::MultiWriteResult) -> MultiOpResult {
    match result {
        zkc::MultiWriteResult::Check => MultiOpResult::Checked,
        zkc::MultiWriteResult::Create { path, .. } => MultiOpResult::Created { path },
        zkc::MultiWriteResult::SetData { stat } => MultiOpResult::DataSet(map_stat(&stat)),
        zkc::MultiWriteResult::Delete => MultiOpResult::Deleted,
        // Non-exhaustive upstream; every kind this transport sends is above.
        _ => MultiOpResult::Checked,
    }
}

fn map_stat(s: &zkc::Stat) -> Stat {
    crate::shell::stat_of!(s)
}

/// Maps the core's ACL onto the client's entries (the client borrows them:
/// `zkc::Acls::new(&list)`).
pub(super) fn map_acl(acl: &Acl) -> Vec<zkc::Acl> {
    acl.entries()
        .iter()
        .map(|e| {
            let perms = crate::shell::permission_of!(e.perms(), zkc::Permission);
            zkc::Acl::new(perms, zkc::AuthId::new(e.scheme().as_str(), e.id()))
        })
        .collect()
}

/// Maps the core's create mode; containers are real containers here.
pub(super) fn map_mode(mode: CreateMode) -> zkc::CreateMode {
    match mode {
        CreateMode::Persistent => zkc::CreateMode::Persistent,
        CreateMode::Ephemeral => zkc::CreateMode::Ephemeral,
        CreateMode::PersistentSequential => zkc::CreateMode::PersistentSequential,
        CreateMode::EphemeralSequential => zkc::CreateMode::EphemeralSequential,
        CreateMode::Container => zkc::CreateMode::Container,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_timeouts_are_connection_loss_only_when_in_doubt() {
        let custom = || {
            // `Error::Custom` cannot be built outside the crate; the other
            // two unexplained errors stand for it (they share one arm).
            [
                zkc::Error::Timeout,
                zkc::Error::UnexpectedError("no response from connection in 800ms".into()),
            ]
        };
        for e in custom() {
            assert_eq!(map_error(e.clone(), true), ZkCode::ConnectionLoss, "{e:?}");
            assert_eq!(map_error(e.clone(), false), ZkCode::Other(-1), "{e:?}");
            assert!(map_error(e, true).is_connection_fault());
        }
        // Plain codes do not depend on the connection.
        let table = [
            (zkc::Error::ConnectionLoss, ZkCode::ConnectionLoss),
            (zkc::Error::ClientClosed, ZkCode::ConnectionLoss),
            (zkc::Error::SessionExpired, ZkCode::SessionExpired),
            (zkc::Error::SessionMoved, ZkCode::SessionMoved),
            (zkc::Error::NoNode, ZkCode::NoNode),
            (zkc::Error::NodeExists, ZkCode::NodeExists),
            (zkc::Error::NotEmpty, ZkCode::NotEmpty),
            (zkc::Error::BadVersion, ZkCode::BadVersion),
            (zkc::Error::NoAuth, ZkCode::NoAuth),
            (zkc::Error::AuthFailed, ZkCode::AuthFailed),
            (zkc::Error::InvalidAcl, ZkCode::InvalidAcl),
            (zkc::Error::BadArguments(&"bad path"), ZkCode::BadArguments),
            (
                zkc::Error::NoChildrenForEphemerals,
                ZkCode::NoChildrenForEphemerals,
            ),
            (zkc::Error::Unimplemented, ZkCode::Unimplemented),
            (zkc::Error::Throttled, ZkCode::Other(-127)),
            (zkc::Error::UnexpectedErrorCode(-42), ZkCode::Other(-42)),
        ];
        for (from, to) in table {
            for doubt in [false, true] {
                assert_eq!(
                    map_error(from.clone(), doubt),
                    to,
                    "{from:?}, in doubt: {doubt}"
                );
            }
        }
        for e in [
            zkc::Error::NoAuth,
            zkc::Error::AuthFailed,
            zkc::Error::InvalidAcl,
            zkc::Error::BadArguments(&"x"),
        ] {
            assert!(map_error(e.clone(), true).is_fatal(), "{e:?} is fatal");
        }
    }

    #[test]
    fn an_expiry_answer_from_a_replaced_client_is_only_a_lost_request() {
        assert_eq!(
            straddled(ZkCode::SessionExpired, true),
            ZkCode::ConnectionLoss
        );
        assert_eq!(
            straddled(ZkCode::SessionExpired, false),
            ZkCode::SessionExpired
        );
        assert_eq!(straddled(ZkCode::NoNode, true), ZkCode::NoNode);
    }

    #[test]
    fn acls_and_modes_map() {
        assert_eq!(map_acl(&Acl::Open).len(), 1);
        assert_eq!(map_acl(&Acl::CreatorAll).len(), 1);
        let both = map_acl(&Acl::CreatorAllWorldRead);
        assert_eq!(both.len(), 2);
        assert_eq!(both[0].scheme(), "auth");
        assert_eq!(both[0].permission(), zkc::Permission::ALL);
        assert_eq!((both[1].scheme(), both[1].id()), ("world", "anyone"));
        assert_eq!(both[1].permission(), zkc::Permission::READ);
        assert_eq!(map_mode(CreateMode::Container), zkc::CreateMode::Container);
        assert_eq!(
            map_mode(CreateMode::EphemeralSequential),
            zkc::CreateMode::EphemeralSequential
        );
    }
}
