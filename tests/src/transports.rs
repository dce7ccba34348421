//! Which of the `zkelect` crate's real transports a scenario runs over, so
//! one test body can run on both.
//!
//! ```no_run
//! # async fn example(hosts: &str) -> Result<(), zkelect::ElectionError> {
//! use std::time::Duration;
//! use zkelect_tests::TransportKind;
//!
//! for kind in TransportKind::ALL {
//!     let election = kind
//!         .election(hosts, Duration::from_secs(4), None)
//!         .path("/svc/leader")
//!         .id(kind.name())
//!         .join()
//!         .await?;
//!     election.close().await;
//! }
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use zkelect::zk_client::ZkClientOptions;
use zkelect::{
    Connect, Election, ElectionBuilder, EventStream, SessionError, Transport, ZkAsyncOptions,
};

/// How long a test's transport may take to connect: generous, so a slow
/// machine is not mistaken for a bug.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// The pause between reconnection attempts.
pub const RECONNECT_DELAY: Duration = Duration::from_millis(100);

/// A real-server transport of the `zkelect` crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransportKind {
    /// `zkelect::ZkAsyncTransport`, over zookeeper-async.
    ZookeeperAsync,
    /// `zkelect::ZkClientTransport`, over zookeeper-client.
    ZookeeperClient,
}

impl TransportKind {
    /// Both, in a fixed order.
    pub const ALL: [TransportKind; 2] = [
        TransportKind::ZookeeperAsync,
        TransportKind::ZookeeperClient,
    ];

    /// `zookeeper-async` or `zookeeper-client` (also a valid candidate id).
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::ZookeeperAsync => "zookeeper-async",
            TransportKind::ZookeeperClient => "zookeeper-client",
        }
    }

    /// Whether it can apply a `multi` (guarded writes).
    pub fn has_multi(self) -> bool {
        matches!(self, TransportKind::ZookeeperClient)
    }

    /// The settings of a session on `hosts` with `session` as its timeout,
    /// digest credentials `user:password` if given, [`CONNECT_TIMEOUT`] and
    /// [`RECONNECT_DELAY`].
    pub fn settings(
        self,
        hosts: &str,
        session: Duration,
        digest: Option<&str>,
    ) -> Box<dyn Connect> {
        match self {
            TransportKind::ZookeeperAsync => {
                let options = ZkAsyncOptions::new(hosts)
                    .session_timeout(session)
                    .connect_timeout(CONNECT_TIMEOUT)
                    .reconnect_delay(RECONNECT_DELAY);
                Box::new(match digest {
                    Some(credentials) => options.digest(credentials),
                    None => options,
                })
            }
            TransportKind::ZookeeperClient => {
                let options = ZkClientOptions::new(hosts)
                    .session_timeout(session)
                    .connect_timeout(CONNECT_TIMEOUT)
                    .reconnect_delay(RECONNECT_DELAY);
                Box::new(match digest {
                    Some(credentials) => options.digest(credentials),
                    None => options,
                })
            }
        }
    }

    /// An election builder over a new session (see [`settings`](Self::settings)).
    pub fn election(self, hosts: &str, session: Duration, digest: Option<&str>) -> ElectionBuilder {
        Election::connect(self.settings(hosts, session, digest))
    }

    /// A transport and its event stream (see [`settings`](Self::settings)).
    ///
    /// # Errors
    ///
    /// As the transport's `connect`.
    pub async fn transport(
        self,
        hosts: &str,
        session: Duration,
        digest: Option<&str>,
    ) -> Result<(Arc<dyn Transport>, EventStream), SessionError> {
        self.settings(hosts, session, digest).connect().await
    }
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
