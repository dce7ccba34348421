//! How `zkelect lock` gets its session before it queues: the metrics
//! endpoint if asked for, the connection (a stopping signal cuts it short),
//! and the command's grace fitted in the session timeout the server
//! negotiated. One path and several (a multi-lock) start alike, so this
//! lives here rather than in either.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tracing::info;
use zkelect::{EventStream, Transport};
use zkelect_core::ConnectionPolicy;

use crate::args::LockArgs;
use crate::connect::{connect, negotiated};
use crate::exit::{Code, Failure};
use crate::lock_exit::{before_cmd, interrupted};
use crate::signals::Stops;
use crate::supervisor::grace_once_connected;

/// A live session for a lock, with the grace its command gets (already
/// checked against the negotiated session timeout). Nothing exists on the
/// server yet; the caller closes the transport on every way out.
pub(crate) struct Connection {
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) events: EventStream,
    pub(crate) grace: Duration,
}

/// What connecting for a lock ended in, short of a failure.
pub(crate) enum Connected {
    /// Connected: queue on it.
    Ready(Connection),
    /// A stopping signal came before the connection: `lock` exits with this
    /// code, and nothing was created on the server.
    Interrupted(ExitCode),
}

/// Serves metrics if asked, connects, and fits the grace in the session
/// timeout the server negotiated (or the one asked for, if the server's
/// never came within the connect timeout). A failure is already `lock`'s
/// exit 125 ([`before_cmd`]); a grace that does not fit closes the
/// transport first.
pub(crate) async fn connect_for_lock(
    args: &LockArgs,
    stops: &mut Stops,
) -> Result<Connected, Failure> {
    if let Some(addr) = args.metrics_addr {
        crate::run::serve_metrics(addr).map_err(before_cmd)?;
        info!(%addr, "serving metrics for Prometheus");
    }
    let (transport, events) = match stops.unless(connect(&args.conn)).await {
        Ok(connected) => connected.map_err(before_cmd)?,
        Err(signal) => {
            return Ok(Connected::Interrupted(interrupted(
                signal,
                "while connecting",
            )))
        }
    };
    let (events, timeout) = negotiated(events, args.conn.connect_timeout()).await;
    let asked = args.grace_ms.map(Duration::from_millis);
    let policy = ConnectionPolicy::Standard;
    match grace_once_connected(asked, timeout, args.conn.session_timeout(), policy) {
        Ok(grace) => Ok(Connected::Ready(Connection {
            transport,
            events,
            grace,
        })),
        Err(e) => {
            transport.close().await;
            Err(before_cmd(Failure::new(Code::Config, anyhow::anyhow!(e))))
        }
    }
}
