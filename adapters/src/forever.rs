//! Leading whenever elected, until shutdown: [`Election::lead_forever`].

use std::convert::Infallible;
use std::future::Future;

use zkelect_core::FencingToken;

use crate::election::{Election, LeadOutcome};
use crate::error::ElectionError;

impl Election {
    /// Runs `work` whenever this candidate leads, for as long as it leads
    /// that term, again and again, until `shutdown` completes; then closes
    /// the election (its node is deleted at once, so a successor leads
    /// without waiting out the session) and returns.
    ///
    /// Like Curator's `LeaderSelector` with `autoRequeue`: `work` is dropped
    /// the moment leadership is suspended or lost, and called again (with
    /// the new term's token) when this candidate leads again. If `work`
    /// returns while still leading, the candidate resigns and queues again at
    /// the back, handing leadership to the next in line.
    ///
    /// Returns `Ok(())` after `shutdown`, or the error that ended the
    /// election for good ([`ElectionError::Fatal`], [`ElectionError::Session`],
    /// [`ElectionError::Closed`] if it was closed elsewhere).
    ///
    /// On the in-memory [`MemoryServer`](memory/struct.MemoryServer.html)
    /// (feature `memory`), so that it runs as a test.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), zkelect::ElectionError> {
    /// use std::time::Duration;
    /// use zkelect::memory::MemoryServer;
    /// use zkelect::Election;
    ///
    /// let server = MemoryServer::new();
    /// let election = Election::connect(server.settings(Duration::from_secs(4)))
    ///     .path("/svc/leader").id("a").join().await?;
    /// let (terms, shutdown) = (std::cell::Cell::new(0), tokio::time::sleep(Duration::from_secs(1)));
    /// election
    ///     .lead_forever(shutdown, |_token| {
    ///         terms.set(terms.get() + 1); // a term: ends here, so it resigns and leads again
    ///         async { tokio::time::sleep(Duration::from_millis(300)).await }
    ///     })
    ///     .await?;
    /// assert!(terms.get() >= 3, "{}", terms.get()); // one term per ~300 ms
    /// assert!(server.children("/svc/leader").is_empty()); // closed: its node is gone
    /// # Ok(())
    /// # }
    /// ```
    pub async fn lead_forever<F, Fut>(
        &self,
        shutdown: impl Future<Output = ()>,
        mut work: F,
    ) -> Result<(), ElectionError>
    where
        F: FnMut(FencingToken) -> Fut,
        Fut: Future<Output = ()>,
    {
        let forever = self.requeue(&mut work);
        let result: Result<(), ElectionError> = tokio::select! {
            // Shutdown wins over a term that ends in the same poll.
            biased;
            () = shutdown => Ok(()),
            failed = forever => failed.map(|never| match never {}),
        };
        self.close().await;
        result
    }

    /// Leads whenever elected, queueing again after a term that `work`
    /// ended itself; returns only when the election has stopped.
    async fn requeue<F, Fut>(&self, work: &mut F) -> Result<Infallible, ElectionError>
    where
        F: FnMut(FencingToken) -> Fut,
        Fut: Future<Output = ()>,
    {
        loop {
            // Suspended or demoted: `lead` waits to lead again, and fails
            // once the election has stopped.
            if let LeadOutcome::Finished(()) = self.lead(&mut *work).await? {
                self.resign(true).await?;
            }
        }
    }
}

#[cfg(all(test, feature = "memory"))]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use tokio::sync::oneshot;

    use super::*;
    use crate::memory::MemoryServer;
    use crate::Session;

    const PATH: &str = "/svc/leader";

    #[tokio::test(start_paused = true)]
    async fn leads_again_after_losing_the_lead_until_shutdown_then_leaves() {
        let server = MemoryServer::new();
        let session = Session::connect(server.settings(Duration::from_secs(4)))
            .await
            .unwrap();
        let a = session.election(PATH).id("a").join().await.unwrap();
        let b = session.election(PATH).id("b").join().await.unwrap();
        let terms = Arc::new(Mutex::new(Vec::new()));
        let (stop, shutdown) = oneshot::channel::<()>();
        let serving = tokio::spawn({
            let (a, terms) = (a.clone(), Arc::clone(&terms));
            async move {
                a.lead_forever(
                    async {
                        let _ = shutdown.await;
                    },
                    |token| {
                        terms.lock().unwrap().push(token);
                        std::future::pending()
                    },
                )
                .await
            }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(terms.lock().unwrap().len(), 1);
        // a steps down (to the back of the queue): b leads; b leaves: a leads again.
        a.resign(true).await.unwrap();
        b.wait_leader().await.unwrap();
        b.close().await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        {
            let terms = terms.lock().unwrap();
            assert_eq!(terms.len(), 2, "{terms:?}");
            assert!(terms[1] > terms[0]);
        }
        stop.send(()).unwrap();
        serving.await.unwrap().unwrap();
        assert_eq!(a.role(), zkelect_core::Role::Closed);
        assert!(server.children(PATH).is_empty(), "a's node is deleted");
        session.close().await;
    }

    #[tokio::test(start_paused = true)]
    async fn returns_the_error_when_the_election_stops_elsewhere() {
        let server = MemoryServer::new();
        let a = Election::connect(server.settings(Duration::from_secs(4)))
            .path(PATH)
            .id("a")
            .join()
            .await
            .unwrap();
        let serving = tokio::spawn({
            let a = a.clone();
            async move {
                a.lead_forever(std::future::pending(), |_| std::future::pending())
                    .await
            }
        });
        a.wait_leader().await.unwrap();
        a.close().await;
        let ended = tokio::time::timeout(Duration::from_secs(10), serving)
            .await
            .expect("lead_forever returns once the election is closed")
            .unwrap();
        assert!(matches!(ended, Err(ElectionError::Closed)), "{ended:?}");
    }
}
