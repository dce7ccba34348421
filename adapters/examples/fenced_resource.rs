//! A resource that fences out deposed leaders by their fencing token.
//!
//! ```text
//! cargo run -p zkelect --example fenced_resource
//! ```
//!
//! Runs over the in-memory transport, so it needs no server. Two candidates
//! share one election. `a` leads and writes to the resource with its token,
//! then steps down. `b` is elected with a higher token and writes with it.
//! Then `a`'s late write arrives, one that `a` sent while it still believed it
//! led. The resource rejects it because it has already seen a higher token.
//!
//! The token is the czxid of the leader's node. It grows with every election,
//! so "reject anything lower than the highest token seen" is enough to keep a
//! deposed leader out. There is one gap: a write from the old leader that
//! arrives *before* the new leader's first write is still accepted, because
//! the resource has not seen the new token yet. A new leader that writes to
//! the resource (even an empty write) as soon as it is elected closes the gap.
//! For a resource in ZooKeeper itself, an atomic multi (check the leader's node
//! and write, in one transaction) closes it entirely.

use std::sync::Mutex;
use std::time::Duration;

use zkelect::memory::MemoryServer;
use zkelect::{Election, FencingToken};

/// A write the resource refused: `token` is older than one it has seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stale {
    token: FencingToken,
    highest: FencingToken,
}

/// A log that accepts an entry only if it comes with the highest fencing token
/// seen so far (or a newer one).
#[derive(Debug, Default)]
struct FencedLog {
    state: Mutex<(Option<FencingToken>, Vec<String>)>,
}

impl FencedLog {
    /// Appends `entry` if `token` is not older than any token seen before.
    fn append(&self, token: FencingToken, entry: &str) -> Result<(), Stale> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (highest, log) = &mut *state;
        if let Some(highest) = *highest {
            if token < highest {
                return Err(Stale { token, highest });
            }
        }
        *highest = Some(token);
        log.push(format!("{token}: {entry}"));
        Ok(())
    }

    fn entries(&self) -> Vec<String> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .1
            .clone()
    }
}

/// The whole story: returns the log and what happened to `a`'s late write.
async fn scenario() -> Result<(Vec<String>, Result<(), Stale>), zkelect::ElectionError> {
    let server = MemoryServer::new();
    let session = Duration::from_secs(4);
    let resource = FencedLog::default();

    let (t, events) = server.connect(session);
    let a = Election::builder(t, events)
        .path("/svc/leader")
        .id("a")
        .join()
        .await?;
    let a_token = a.wait_leader().await?;
    let (t, events) = server.connect(session);
    let b = Election::builder(t, events)
        .path("/svc/leader")
        .id("b")
        .join()
        .await?;

    if let Err(stale) = resource.append(a_token, "a starts the job") {
        println!("a's first write was refused: {stale:?}");
    }
    a.resign(false).await?;
    let b_token = b.wait_leader().await?;
    println!("a led with token {a_token}; b now leads with token {b_token}");
    if let Err(stale) = resource.append(b_token, "b takes the job over") {
        println!("b's write was refused: {stale:?}");
    }
    // A write a sent while it still led, delivered late.
    let late = resource.append(a_token, "a finishes the job");
    match late {
        Ok(()) => println!("a's late write was accepted"),
        Err(stale) => println!(
            "a's late write was refused: token {} < {}",
            stale.token, stale.highest
        ),
    }
    a.close().await;
    b.close().await;
    Ok((resource.entries(), late))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), zkelect::ElectionError> {
    let (log, _) = scenario().await?;
    println!("the resource holds:");
    for entry in log {
        println!("  {entry}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_rejects_lower_tokens_and_accepts_equal_or_higher_ones() {
        let log = FencedLog::default();
        assert_eq!(log.append(FencingToken(5), "x"), Ok(()));
        assert_eq!(log.append(FencingToken(5), "y"), Ok(()));
        assert_eq!(
            log.append(FencingToken(4), "z"),
            Err(Stale {
                token: FencingToken(4),
                highest: FencingToken(5)
            })
        );
        assert_eq!(log.append(FencingToken(9), "w"), Ok(()));
        assert_eq!(log.entries(), ["5: x", "5: y", "9: w"]);
    }

    #[tokio::test]
    async fn a_deposed_leaders_late_write_is_refused() {
        let (log, late) = scenario().await.expect("the scenario runs");
        let Err(stale) = late else {
            panic!("a's late write was accepted: {log:?}")
        };
        assert!(stale.token < stale.highest);
        assert_eq!(log.len(), 2, "{log:?}");
        assert!(log[0].ends_with("a starts the job"), "{log:?}");
        assert!(log[1].ends_with("b takes the job over"), "{log:?}");
    }
}
