// src/lib.rs of your service (say it is called `ticker`): what it does
// while it leads, written against an `Election` it is given, never against
// connection settings.
use std::future::Future;
use std::time::Duration;

use zkelect::{Election, ElectionError, FencingToken};

/// Where the leader's work goes (a database, a queue, a file): every write
/// carries the fencing token of the term that made it.
pub trait Ledger: Clone + Send + 'static {
    /// Records `entry`, written by the leader of term `token`.
    fn record(&self, token: FencingToken, entry: String);
}

/// The service: whenever `election` leads, one entry every 100 ms, until
/// `shutdown`; the work stops the moment leadership is lost or in doubt.
pub async fn serve(
    election: Election,
    ledger: impl Ledger,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ElectionError> {
    election
        .lead_forever(shutdown, |token| {
            let ledger = ledger.clone();
            async move {
                for tick in 0u64.. {
                    ledger.record(token, format!("tick {tick}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        })
        .await
}
