//! The transport over `zookeeper-client` 0.11 (kezhuw), the second real
//! client: it re-registers one-shot watches and replays credentials after a
//! reconnect, reports expiry as a terminal state, returns the session id
//! and a `Stat` on every create, and has `multi`, TLS and SASL. What it
//! still gets wrong (`adapters/CLIENTS.md` in the repository), and where this module makes
//! up for it:
//!
//! | gap | workaround |
//! |---|---|
//! | a request failed by a connection timeout answers `Error::Custom("no response from connection in …")` (also `Timeout`, `UnexpectedError`), not `ConnectionLoss`, although the server may have applied it | `map_error`: those errors are `ConnectionLoss` whenever the session was not `SyncConnected` at the end of the request or changed state during it, so the core recovers a create by its protected name instead of creating a second node; otherwise `Other` |
//! | the `StateWatcher` keeps only the latest state, so `Disconnected → SyncConnected` can reach a reader as one change | the session task (`run_session`) acts on the current state only, never on a history; a change that reads `SyncConnected` while `Connected` was the last thing reported was a missed blip and is reported as `Disconnected` then `Connected`, so the core re-verifies |
//! | `Expired` is terminal: the client is dead for good | the session task reports `Expired`, opens a new client (retried every [`ZkClientOptions::reconnect_delay`], each attempt bounded by the connect timeout), swaps it in, and only then reports `Connected` with the new session id. A `SessionExpired` answer from a client that has been replaced is `ConnectionLoss`, so it cannot expire the new session in the core |
//! | persistent watches are not re-registered after a reconnect | only one-shot watches are used (`get_and_watch_data`, `list_and_watch_children`, `check_and_watch_stat`) |
//! | a create returns `(Stat, CreateSequence)`, not the path | the path is the requested one plus the sequence (`{prefix}{seq}`, whose `Display` pads to 10 or 19 digits) |
//! | a `OneshotWatcher` per watching read, kept until its path fires: a path read again and again that never changes (a leader's node, read by every follower that comes to stand behind it) keeps one per read (measured: 467 B per watch event on a leader with followers churning behind it) | a read is sent without its watch while a watcher for the same path and kind is pending (the server keeps one watch per session, path and kind anyway, and its event reaches every machine that asked, through the driver): at most one watcher per path and kind (measured after: 0.00 B per event over the first 5,000 events, `tests/tests/soak.rs`) |
//! | no callbacks: state and watch events come from a `StateWatcher` and one `OneshotWatcher` per watch | one session task forwards the state, one forwarder task polls every pending watcher (a future in a slot, in groups of 32 that share a waker; not a task each: an idle recipe's watches cost the client's watcher and no task), all into the one unbounded [`EventStream`]; session notices on a watcher (expiry, close) are left to the session task |
//! | a dropped client closes its session only once every clone is gone, with no way to wait for it | [`close`](Transport::close) drops the transport's client and waits (bounded) for the state to turn terminal; dropping the transport closes in the background |
//! | a TLS certificate the client rejects is only logged; `connect` then retries until its timeout and answers `Timeout` | before connecting, one TLS handshake per TLS host with the same trust settings (`tls` feature): a rejected certificate fails at once with [`Rejected`](crate::TlsError::Rejected) |
//! | a host name that is not a valid TLS server name makes the client panic in its handshake | refused up front with [`Config`](crate::TlsError::Config) |
//!
//! The session timeout reported to the core with `Connected` is the one the
//! server negotiated for this session (the client reads it from the
//! ConnectResponse and exposes it), never the requested one: a server clamps
//! a request into its `[minSessionTimeout, maxSessionTimeout]`. Limit: after
//! a reconnect (same session) to another server of an ensemble whose
//! `maxSessionTimeout` is lower than the first server's, that server may cut
//! the session's timeout again (it clamps the value the client re-sends)
//! and the client does not expose the new value; give every server the same bounds (or use the zookeeper-async
//! transport, which bounds the timeout by every server's answer).
//!
//! Its socket and timers run on `async-io`, not tokio, so tokio's paused
//! clock does not move them: test it against real servers in real time.
//!
//! ```no_run
//! # async fn example() -> Result<(), zkelect::ElectionError> {
//! use std::time::Duration;
//! use zkelect::zk_client::ZkClientOptions;
//! use zkelect::Election;
//!
//! let options = ZkClientOptions::new("zk1:2181,zk2:2181")
//!     .session_timeout(Duration::from_secs(6))
//!     .digest("svc:secret");
//! let election = Election::connect(options).path("/svc/leader").id("a").join().await?;
//! election.wait_leader().await?;
//! election.close().await;
//! # Ok(())
//! # }
//! ```

mod options;
#[cfg(feature = "zookeeper-client-tls")]
mod preflight;
mod requests;
mod session;
mod watches;

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{info, warn};
use zkelect_core::{Reply, Request, SessionEvent, SessionId, ZkCode};
/// The `zookeeper-client` crate this transport is built on, for its option
/// types (e.g. `SaslOptions` for GSSAPI).
pub use zookeeper_client as client;
use zookeeper_client as zkc;

use crate::error::SessionError;
use crate::hop::{self, hop};
use crate::shell::{Shell, CLOSE_TIMEOUT};
use crate::transport::{EventStream, MultiError, MultiOp, MultiOpResult, Transport};
#[cfg(feature = "zookeeper-client-tls")]
pub use options::TlsSettings;
pub use options::{ZkClientExtras, ZkClientOptions};
use requests::{in_doubt, map_acl, map_error, map_mode, map_multi_result, perform_raw, straddled};
use session::{connected, run_session, Current, Inner, Opener};
use watches::Watches;

/// A [`Transport`] over `zookeeper-client`, one session at a time: after an
/// expiry it opens a new client by itself and reports `Connected` with the
/// new session id.
///
/// ```no_run
/// # async fn example() -> Result<(), zkelect::ElectionError> {
/// use std::time::Duration;
/// use zkelect::zk_client::{ZkClientOptions, ZkClientTransport};
/// use zkelect::Election;
///
/// let options = ZkClientOptions::new("127.0.0.1:2181").session_timeout(Duration::from_secs(4));
/// let (transport, events) = ZkClientTransport::connect(options).await?;
/// let election = Election::builder(transport, events).path("/svc/leader").id("a").join().await?;
/// # Ok(())
/// # }
/// ```
pub struct ZkClientTransport {
    inner: Arc<Inner>,
    /// What closes a session whose credentials were refused (see `close`).
    opener: Opener,
    session_task: tokio::task::JoinHandle<()>,
    forwarder: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for ZkClientTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkClientTransport")
            .field("shell", &self.inner.shell)
            .finish_non_exhaustive()
    }
}

impl ZkClientTransport {
    /// Connects (after a TLS pre-flight check when TLS is on) and returns
    /// the transport with its event stream, which starts with `Connected`
    /// carrying the session id and the negotiated timeout.
    ///
    /// Everything is bounded by [`ZkClientOptions::connect_timeout`].
    /// Errors: [`SessionError::SessionTimeoutTooShort`] for a zero timeout,
    /// [`SessionError::Tls`] (unreadable settings, a rejected certificate;
    /// before or instead of any session), [`SessionError::Connect`] (bad
    /// address, no session in time), [`SessionError::Auth`] (credentials
    /// rejected).
    pub async fn connect(options: ZkClientOptions) -> Result<(Self, EventStream), SessionError> {
        let split = options.check(Duration::ZERO)?;
        let deadline = Instant::now() + options.connect_timeout;
        #[cfg(feature = "zookeeper-client-tls")]
        let (tls, preflight) = match &options.client.tls {
            Some(settings) => {
                let (client_options, preflight_config) = settings.build()?;
                preflight::check(&options.hosts, Arc::clone(&preflight_config), deadline).await?;
                (Some(client_options), Some(preflight_config))
            }
            None => (None, None),
        };
        let opener = Opener {
            options,
            split,
            #[cfg(feature = "zookeeper-client-tls")]
            tls,
            #[cfg(feature = "zookeeper-client-tls")]
            preflight,
        };
        let options = &opener.options;
        let client = opener.start(deadline).await?;
        let (events, events_rx) = mpsc::unbounded_channel();
        let watcher = client.state_watcher();
        let connected = connected(&client);
        let op_timeout = options.op_timeout_or(client.session_timeout());
        let shell = Shell::new(events, op_timeout, options.op_timeout);
        let hop_tag = hop::next_tag();
        let (watches, forwarder) = Watches::start(shell.events(), hop_tag);
        let swapped_in = shell.connection_changes.mark();
        let inner = Arc::new(Inner {
            current: RwLock::new(Some(Current { client, swapped_in })),
            shell,
            watches,
            hop_tag,
        });
        info!(hosts = options.hosts, event = ?connected, "connected");
        inner.shell.session(connected);
        let session_task = tokio::spawn(run_session(
            Arc::clone(&inner),
            opener.clone(),
            watcher,
            connected,
        ));
        Ok((
            Self {
                inner,
                opener,
                session_task,
                forwarder,
            },
            events_rx,
        ))
    }

    /// The current session's id, if a client is open.
    pub fn session_id(&self) -> Option<SessionId> {
        self.inner
            .current()
            .map(|c| SessionId(c.client.session_id().0))
    }

    async fn perform_on(&self, current: &Current, request: Request) -> Result<Reply, ZkCode> {
        let client = &current.client;
        // Subscribed before the request: whether the state moved during it.
        let mut state = client.state_watcher();
        let (request, key) = self.inner.watches.unless_armed(request);
        match &request {
            Request::Delete { .. } => hop!(hop::DELETE_SENT, self.inner.hop_tag),
            Request::GetChildren { .. } => hop!(hop::LIST_SENT, self.inner.hop_tag),
            _ => {}
        }
        let result = perform_raw(client, request).await;
        let (result, watcher) = match result {
            Ok((reply, watcher)) => (Ok(reply), watcher),
            Err(e) => (Err(e), None),
        };
        if let (Some(watcher), Some(key)) = (watcher, key) {
            self.inner.watches.forward(watcher, key);
        }
        let replaced = self.inner.replaced(current);
        result.map_err(|e| straddled(map_error(e, in_doubt(&mut state)), replaced))
    }
}

#[async_trait]
impl Transport for ZkClientTransport {
    async fn perform(&self, request: Request) -> Result<Reply, ZkCode> {
        let Some(current) = self.inner.current() else {
            return Err(ZkCode::ConnectionLoss);
        };
        self.inner
            .shell
            .perform(self.perform_on(&current, request))
            .await
    }

    async fn multi(&self, ops: Vec<MultiOp>) -> Result<Vec<MultiOpResult>, MultiError> {
        if self.inner.shell.is_closed() {
            return Err(MultiError::Request(ZkCode::ConnectionLoss));
        }
        let Some(current) = self.inner.current() else {
            return Err(MultiError::Request(ZkCode::ConnectionLoss));
        };
        let client = &current.client;
        let mut state = client.state_watcher();
        let mut writer = client.new_multi_writer();
        for (index, op) in ops.iter().enumerate() {
            let added = match op {
                MultiOp::Check { path, version } => {
                    writer.add_check_version(path, version.unwrap_or(-1))
                }
                MultiOp::Create {
                    path,
                    data,
                    mode,
                    acl,
                } => {
                    let acls = map_acl(acl);
                    writer.add_create(
                        path,
                        data,
                        &map_mode(*mode).with_acls(zkc::Acls::new(&acls)),
                    )
                }
                MultiOp::SetData {
                    path,
                    data,
                    version,
                } => writer.add_set_data(path, data, *version),
                MultiOp::Delete { path, version } => writer.add_delete(path, *version),
            };
            // Refused by the client before sending (a bad path): nothing sent.
            added.map_err(|e| MultiError::Op {
                index,
                code: map_error(e, false),
            })?;
        }
        let committed = tokio::time::timeout(self.inner.shell.op_timeout(), writer.commit()).await;
        let replaced = self.inner.replaced(&current);
        match committed {
            Err(_) => Err(MultiError::Request(ZkCode::OperationTimeout)),
            Ok(Ok(results)) => Ok(results.into_iter().map(map_multi_result).collect()),
            Ok(Err(zkc::MultiWriteError::OperationFailed { index, source })) => {
                Err(MultiError::Op {
                    index,
                    code: map_error(source, false),
                })
            }
            Ok(Err(zkc::MultiWriteError::RequestFailed { source })) => Err(MultiError::Request(
                straddled(map_error(source, in_doubt(&mut state)), replaced),
            )),
        }
    }

    fn request_timeout(&self) -> Option<Duration> {
        self.inner.shell.configured_timeout()
    }

    fn hop_tag(&self) -> u64 {
        self.inner.hop_tag
    }

    async fn close(&self) {
        if !self.inner.shell.close_once() {
            return;
        }
        self.session_task.abort();
        let current = self
            .inner
            .current
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        self.inner.shell.connection_changes.record();
        if let Some(current) = current {
            let mut state = current.client.state_watcher();
            if state.peek_state() == zkc::SessionState::AuthFailed {
                // The client stopped at the refusal without closing the
                // session (it cannot: the server dropped that connection).
                let session = current.client.session().clone();
                drop(current);
                self.opener.close_refused(session, CLOSE_TIMEOUT).await;
                self.forwarder.abort();
                self.inner.shell.session(SessionEvent::Closed);
                return;
            }
            // The session closes once the last clone of the client is gone.
            drop(current);
            let closed = async {
                while !state.peek_state().is_terminated() {
                    state.changed().await;
                }
            };
            match tokio::time::timeout(CLOSE_TIMEOUT, closed).await {
                Ok(()) => info!("session closed"),
                Err(_) => {
                    warn!("close: the server did not answer; the session will expire on its own")
                }
            }
        }
        self.forwarder.abort();
        self.inner.shell.session(SessionEvent::Closed);
    }
}

impl Drop for ZkClientTransport {
    fn drop(&mut self) {
        // The session task holds the transport's state, client included:
        // stop it, and the client is dropped with the last handle, which
        // closes the session in the background.
        self.session_task.abort();
        self.forwarder.abort();
    }
}

impl crate::Connect for ZkClientOptions {
    fn connect(self: Box<Self>) -> crate::Connecting {
        Box::pin(async move {
            let (transport, events) = ZkClientTransport::connect(*self).await?;
            Ok((Arc::new(transport) as Arc<dyn Transport>, events))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bad_settings_are_refused_before_any_traffic() {
        let zero = ZkClientOptions::new("127.0.0.1:1").session_timeout(Duration::ZERO);
        assert!(matches!(
            ZkClientTransport::connect(zero).await,
            Err(SessionError::SessionTimeoutTooShort { .. })
        ));
        let empty = ZkClientOptions::new("  ");
        assert!(matches!(
            ZkClientTransport::connect(empty).await,
            Err(SessionError::Connect { .. })
        ));
    }

    #[tokio::test]
    async fn an_unreachable_server_is_a_connect_error() {
        // Nothing listens on port 1.
        let options = ZkClientOptions::new("127.0.0.1:1")
            .session_timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_millis(500));
        let result = ZkClientTransport::connect(options).await;
        assert!(
            matches!(result, Err(SessionError::Connect { .. })),
            "{result:?}"
        );
    }
}
