//! The client in use: opening it (after asking the servers which answer),
//! following its state and reporting it, and replacing it after an expiry.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, warn};
use zkelect_core::connect_string::ConnectString;
#[cfg(feature = "zookeeper-client-tls")]
use zkelect_core::connect_string::Scheme;
use zkelect_core::startup::{Learn, StartupConfig};
use zkelect_core::{SessionEvent, SessionId};
use zookeeper_client as zkc;

use super::options::ZkClientOptions;
#[cfg(feature = "zookeeper-client-tls")]
use super::preflight;
use super::watches::Watches;
use crate::error::{ConnectFailure, SessionError};
use crate::shell::{ChangeMark, ClientState, Reporter, Shell};
use crate::startup::{self, Asker, Driver};

/// Everything needed to open a client again (after an expiry).
#[derive(Clone)]
pub(super) struct Opener {
    pub(super) options: ZkClientOptions,
    /// The connect string, split.
    pub(super) split: ConnectString,
    #[cfg(feature = "zookeeper-client-tls")]
    pub(super) tls: Option<zkc::TlsOptions>,
    /// The TLS configuration of the liveness asks of TLS servers.
    #[cfg(feature = "zookeeper-client-tls")]
    pub(super) preflight: Option<Arc<rustls::ClientConfig>>,
}

impl Opener {
    /// What every client of this transport connects with: the session
    /// timeout and the TLS settings, no credentials.
    fn bare_connector(&self) -> zkc::Connector {
        let connector = zkc::Client::connector().with_session_timeout(self.options.session_timeout);
        #[cfg(feature = "zookeeper-client-tls")]
        if let Some(tls) = &self.tls {
            return connector.with_tls(tls.clone());
        }
        connector
    }

    fn connector(&self) -> zkc::Connector {
        let mut connector = self.bare_connector();
        for (scheme, bytes) in &self.options.auth {
            connector = connector.with_auth(scheme, bytes);
        }
        #[cfg(any(feature = "zookeeper-client-sasl", feature = "zookeeper-client-gssapi"))]
        if let Some(sasl) = &self.options.client.sasl {
            connector = connector.with_sasl(sasl.clone());
        }
        connector
    }

    /// Connects over TLS when the transport has TLS settings.
    async fn connect(
        &self,
        connector: zkc::Connector,
        hosts: &str,
    ) -> Result<zkc::Client, zkc::Error> {
        #[cfg(feature = "zookeeper-client-tls")]
        if self.tls.is_some() {
            return connector.secure_connect(hosts).await;
        }
        connector.connect(hosts).await
    }

    async fn open(&self, hosts: &str) -> Result<zkc::Client, zkc::Error> {
        self.connect(self.connector(), hosts).await
    }

    /// Ends `session`, whose credentials the server refused: the client
    /// that held it has stopped for good (`AuthFailed` is terminal to
    /// it) and sent no close, so the session and its ephemeral nodes would
    /// stay until it expires. A client on the same session without the
    /// credentials (closing a session needs none) ends it now. Bounded by
    /// `within`; past it the session expires on its own.
    pub(super) async fn close_refused(&self, session: zkc::SessionInfo, within: Duration) {
        let connector = self.bare_connector().with_session(session);
        let hosts = &self.options.hosts;
        let closed = async {
            let client = self.connect(connector, hosts).await?;
            let mut state = client.state_watcher();
            // Its last clone dropped, the client closes the session.
            drop(client);
            while !state.peek_state().is_terminated() {
                state.changed().await;
            }
            Ok::<(), zkc::Error>(())
        };
        match tokio::time::timeout(within, closed).await {
            Ok(Ok(())) => debug!("the refused session is closed"),
            Ok(Err(e)) => {
                warn!(error = %e, "close: the refused session could not be closed; it will expire on its own")
            }
            Err(_) => warn!(
                "close: the server did not answer; the refused session will expire on its own"
            ),
        }
    }

    /// How each server is asked whether it answers: a ConnectRequest that
    /// makes no session, or a TLS handshake for a TLS server.
    fn asker(&self) -> Asker {
        let plain = startup::liveness_asker(self.options.session_timeout);
        #[cfg(feature = "zookeeper-client-tls")]
        if let Some(config) = &self.preflight {
            let config = Arc::clone(config);
            let tls_default = self.tls.is_some();
            let servers = self.split.servers.clone();
            return Arc::new(move |index, addr, deadline| {
                let server = &servers[index];
                let tls = match server.scheme {
                    Some(Scheme::Tls) => true,
                    Some(Scheme::Plain) => false,
                    None => tls_default,
                };
                if !tls {
                    return plain(index, addr, deadline);
                }
                Box::pin(preflight::alive(
                    server.host.clone(),
                    server.port,
                    Arc::clone(&config),
                    deadline,
                ))
            });
        }
        plain
    }

    /// Asks the servers (see `startup`) and opens a client on those that
    /// answer, retrying the client until `deadline`.
    pub(super) async fn start(&self, deadline: Instant) -> Result<zkc::Client, SessionError> {
        let options = &self.options;
        let left = deadline.saturating_duration_since(Instant::now());
        let config = StartupConfig::new(0, Learn::Liveness, left.max(Duration::from_millis(1)));
        let mut driver = Driver::new(self.split.clone(), config, self.asker());
        loop {
            let plan = match driver.next_plan().await {
                Ok(plan) => plan,
                Err(e) => {
                    return Err(startup::refusal(
                        &options.hosts,
                        options.connect_timeout,
                        &driver,
                        &e,
                    ))
                }
            };
            let mut hosts = plan
                .servers
                .iter()
                .map(|&i| driver.server(i).to_string())
                .collect::<Vec<_>>()
                .join(",");
            if let Some(chroot) = driver.chroot() {
                hosts.push_str(chroot);
            }
            debug!(hosts, "starting the client");
            match tokio::time::timeout_at(deadline, self.open(&hosts)).await {
                Ok(Ok(client)) => return Ok(client),
                Ok(Err(zkc::Error::AuthFailed)) => return Err(options.rejected()),
                Ok(Err(zkc::Error::BadArguments(reason))) => {
                    return Err(options.fail(
                        ConnectFailure::BadAddress,
                        format!("{reason}: expected host:port[,host:port…][/chroot]"),
                    ))
                }
                // The client gives up after the session timeout (or when it
                // has tried every server): tried again until the connect
                // timeout, which may be longer.
                Ok(Err(e)) => driver.client_failed(e.to_string()),
                Err(_) => driver.client_failed(format!(
                    "no session could be established within {:?}",
                    options.connect_timeout
                )),
            }
        }
    }
}

/// The client in use, and where the connection changes stood when it was
/// swapped in.
#[derive(Clone)]
pub(super) struct Current {
    pub(super) client: zkc::Client,
    pub(super) swapped_in: ChangeMark,
}

/// What the transport and its tasks share.
pub(super) struct Inner {
    pub(super) current: RwLock<Option<Current>>,
    /// The event stream, the closed flag, the request bound, and the
    /// connection changes — recorded when the client is replaced or closed.
    pub(super) shell: Shell,
    /// The pending watchers and their forwarder.
    pub(super) watches: Watches,
    /// The tag of this transport's [`hop`](crate::hop) stamps.
    pub(super) hop_tag: u64,
}

impl Inner {
    pub(super) fn current(&self) -> Option<Current> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether `current` has been replaced (or closed) since it was read.
    pub(super) fn replaced(&self, current: &Current) -> bool {
        self.shell
            .connection_changes
            .changed_since(current.swapped_in)
    }
}

/// `Connected` with the session's negotiated timeout: `Client::session_timeout`
/// is the server's ConnectResponse value (zookeeper-client 0.11 keeps
/// `max(negotiated, its connection timeout)`, and the latter is at most
/// three fifths of the negotiated one), never the requested one.
pub(super) fn connected(client: &zkc::Client) -> SessionEvent {
    SessionEvent::Connected {
        session_id: Some(SessionId(client.session_id().0)),
        timeout: client.session_timeout(),
    }
}

/// How zookeeper-client's *current* state reads (the shell's [`Reporter`],
/// told that this client's watcher merges states, turns it into session
/// events: a `SyncConnected` read while `Connected` was the last thing
/// reported is a blip the watcher merged, reported as `Disconnected` then
/// `Connected` so the core re-verifies).
///
/// | state | reads as | then |
/// |---|---|---|
/// | `SyncConnected`, `ConnectedReadOnly` | `Connected` | watch |
/// | `Disconnected` | `Disconnected` | watch |
/// | `Expired` | `Expired` | open a new client |
/// | `Closed` (not by us: the client gave up) | `Expired` | open a new client |
/// | `AuthFailed` | `AuthFailed` | stop |
fn client_state(state: zkc::SessionState) -> ClientState {
    use zkc::SessionState as S;
    match state {
        S::SyncConnected | S::ConnectedReadOnly => ClientState::Connected,
        S::Disconnected => ClientState::Disconnected,
        S::Expired | S::Closed => ClientState::Expired,
        S::AuthFailed => ClientState::AuthFailed,
    }
}

/// The session task: follows the current client's state, reports it, and
/// replaces the client after an expiry.
pub(super) async fn run_session(
    inner: Arc<Inner>,
    opener: Opener,
    mut watcher: zkc::StateWatcher,
    mut connected: SessionEvent,
) {
    let mut reporter = Reporter::new(true);
    // A change between connect and the subscription is not lost: act on
    // the state now unless it is the connected state already reported.
    let mut state = Some(watcher.state()).filter(|s| *s != zkc::SessionState::SyncConnected);
    loop {
        let now = match state.take() {
            Some(now) => now,
            None => watcher.changed().await,
        };
        if inner.shell.is_closed() {
            return;
        }
        let read = client_state(now);
        for event in reporter.map(read, connected) {
            reporter.reported(&event);
            inner.shell.session(event);
        }
        match read {
            ClientState::Connected | ClientState::Disconnected | ClientState::Ignored => {}
            ClientState::AuthFailed | ClientState::Closed => return,
            ClientState::Expired => {
                let Some(client) = renew(&inner, &opener).await else {
                    return;
                };
                watcher = client.state_watcher();
                connected = self::connected(&client);
                {
                    let mut slot = inner
                        .current
                        .write()
                        .unwrap_or_else(PoisonError::into_inner);
                    if inner.shell.is_closed() {
                        return;
                    }
                    inner.shell.connection_changes.record();
                    let swapped_in = inner.shell.connection_changes.mark();
                    *slot = Some(Current { client, swapped_in });
                }
                // Swapped in before it is announced: a request the core
                // sends after `Connected` goes to the new session.
                inner.shell.session(connected);
                reporter.reported(&connected);
                state = Some(watcher.state()).filter(|s| *s != zkc::SessionState::SyncConnected);
            }
        }
    }
}

/// Opens a new client after an expiry, retrying until it works, the
/// credentials are rejected (reported) or the transport is closed.
async fn renew(inner: &Inner, opener: &Opener) -> Option<zkc::Client> {
    let options = &opener.options;
    loop {
        if inner.shell.is_closed() {
            return None;
        }
        let deadline = Instant::now() + options.connect_timeout;
        match opener.start(deadline).await {
            Ok(client) => return Some(client),
            Err(SessionError::Auth(_)) => {
                inner.shell.session(SessionEvent::AuthFailed);
                return None;
            }
            Err(e) => warn!(error = %e, "opening a new session failed; trying again"),
        }
        tokio::time::sleep(options.reconnect_delay).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(4);

    fn connected() -> SessionEvent {
        SessionEvent::Connected {
            session_id: Some(SessionId(0x42)),
            timeout: T,
        }
    }

    #[test]
    fn a_sequence_of_states_reads_as_the_core_needs_it() {
        use zkc::SessionState as S;
        let c = connected();
        let mut reported = Vec::new();
        let mut reporter = Reporter::new(true);
        let mut renewals = 0;
        // A drop and its recovery; a drop and recovery the watcher merged
        // into one change to SyncConnected; an expiry; a client that gave up.
        for state in [
            S::Disconnected,
            S::SyncConnected,
            S::SyncConnected,
            S::Disconnected,
            S::Expired,
            S::Closed,
        ] {
            let read = client_state(state);
            for e in reporter.map(read, c) {
                reporter.reported(&e);
                reported.push(e);
            }
            if read == ClientState::Expired {
                renewals += 1;
                reporter.reported(&c);
            }
        }
        assert_eq!(
            reported,
            [
                SessionEvent::Disconnected,
                c,
                SessionEvent::Disconnected,
                c,
                SessionEvent::Disconnected,
                SessionEvent::Expired,
                SessionEvent::Expired,
            ]
        );
        assert_eq!(renewals, 2);
        assert_eq!(client_state(S::AuthFailed), ClientState::AuthFailed);
    }
}
