//! The election end to end over the in-memory transport, in virtual time.
#![cfg(feature = "memory")]

use std::time::Duration;

use zkelect::memory::MemoryServer;
use zkelect::{Election, Role};
use zkelect_core::name;

#[tokio::test(start_paused = true)]
async fn three_candidates_elect_one_and_the_next_in_sequence_succeeds() {
    let server = MemoryServer::new();
    let mut elections = Vec::new();
    for id in ["a", "b", "c"] {
        let (transport, events) = server.connect(Duration::from_secs(4));
        let election = Election::builder(transport, events)
            .path("/svc/leader")
            .id(id)
            .join()
            .await
            .unwrap();
        elections.push(election);
    }
    let first = elections[0].wait_leader().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let leaders: Vec<_> = elections.iter().filter(|e| e.role().is_leader()).collect();
    assert_eq!(leaders.len(), 1);
    // The queue order decides the successor: the next in sequence.
    let (queue, _) = name::queue(
        &server.children("/svc/leader"),
        "n_",
        zkelect::Interop::None,
        zkelect_core::Recipe::Election { leaders: 1 },
    );
    let next = queue[1].name.clone();
    elections[0].close().await;
    let successor = elections
        .iter()
        .find(|e| e.node().as_deref() == Some(next.as_str()))
        .unwrap();
    let second = tokio::time::timeout(Duration::from_secs(5), successor.wait_leader())
        .await
        .unwrap()
        .unwrap();
    assert!(second > first, "fencing tokens grow: {second} > {first}");
    assert_eq!(elections[0].role(), Role::Closed);
    assert_eq!(elections.iter().filter(|e| e.role().is_leader()).count(), 1);
    for e in &elections {
        e.close().await;
    }
    assert!(server.children("/svc/leader").is_empty(), "nothing leaked");
}
