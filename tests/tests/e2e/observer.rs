//! Observations against a real ZooKeeper server, on both real clients: an
//! [`Observation`] (no id, no node) of an election with two leaders lists the
//! candidates in queue order with the two holders marked, names the same
//! nodes and tokens the candidates hold, follows a failover through its
//! `watch`, and `wait_leader` waits for a leader when there is none — and
//! returns `Closed` instead of hanging once the observation is closed. An
//! observation started before its path exists follows it: created, wiped
//! (`deleteall`) and created again, each change reported, the absence as an
//! empty list.

use std::time::Duration;

use zkelect::core::Recipe;
use zkelect::{Election, ObserveError, Participant, Role, Session};

use crate::harness::{children, raw, retry, start_server, Client, SESSION, SETTLE};

const PATH: &str = "/observed/workers";

fn ids(list: &[Participant]) -> Vec<(String, bool)> {
    list.iter()
        .map(|p| (p.id().unwrap_or_default().to_owned(), p.holds))
        .collect()
}

fn expect(pairs: &[(&str, bool)]) -> Vec<(String, bool)> {
    pairs
        .iter()
        .map(|(id, holds)| ((*id).to_owned(), *holds))
        .collect()
}

async fn two_leaders_and_an_observer(client: Client) {
    let server = start_server();
    let hosts = server.connect_string();
    // Each candidate on a session of its own, joined one after the other so
    // the queue order is a, b, c.
    let mut sessions = Vec::new();
    let mut cands = Vec::new();
    for id in ["a", "b", "c"] {
        let session = Session::connect(client.settings(&hosts, SESSION, None))
            .await
            .expect("connect a candidate");
        let election = session
            .election(PATH)
            .id(id)
            .leaders(2)
            .join()
            .await
            .expect("join");
        sessions.push(session);
        cands.push(election);
    }
    for leader in &cands[..2] {
        tokio::time::timeout(SETTLE, leader.wait_leader())
            .await
            .expect("a and b lead within the settle time")
            .expect("lead");
    }

    let observation = Election::observe(client.settings(&hosts, SESSION, None), PATH)
        .leaders(2)
        .start()
        .await
        .expect("observe");
    let list = observation.participants();
    assert_eq!(
        ids(&list),
        expect(&[("a", true), ("b", true), ("c", false)])
    );
    // The same nodes the server lists and the candidates hold, with the
    // tokens the leaders lead with (their nodes' czxids).
    let mut nodes: Vec<String> = list.iter().map(|p| p.node.clone()).collect();
    nodes.sort();
    assert_eq!(nodes, children(&hosts, PATH).await);
    for (p, cand) in list.iter().zip(&cands) {
        assert_eq!(Some(p.node.clone()), cand.node(), "{p:?}");
        if p.holds {
            assert_eq!(cand.role(), Role::Leader(p.token), "{p:?}");
        }
    }
    assert_eq!(
        observation.leader().and_then(|p| p.id().map(str::to_owned)),
        Some("a".into())
    );
    assert_eq!(observation.holders().len(), 2);

    // A session-level observation of the same queue agrees.
    let on_session = sessions[2]
        .observe(PATH, Recipe::Election { leaders: 2 })
        .start()
        .await
        .expect("observe on a candidate's session");
    assert_eq!(on_session.participants(), list);

    // The first leader leaves: b leads first, c now leads too.
    let mut changes = observation.changes();
    cands.remove(0).close().await;
    tokio::time::timeout(
        SETTLE,
        changes.wait_for(|l| ids(l) == expect(&[("b", true), ("c", true)])),
    )
    .await
    .expect("the observation sees b and c lead")
    .expect("the observation runs");
    assert_eq!(
        observation.leader().and_then(|p| p.id().map(str::to_owned)),
        Some("b".into())
    );
    let b_token = observation.leader().map(|p| p.token);
    assert!(b_token > list.first().map(|p| p.token), "tokens only grow");

    // Nobody left: wait_leader waits, then names the next one to come.
    on_session.close().await;
    for cand in cands.drain(..) {
        cand.close().await;
    }
    tokio::time::timeout(SETTLE, changes.wait_for(Vec::is_empty))
        .await
        .expect("the observation sees the queue empty")
        .expect("the observation runs");
    let waiting = tokio::spawn({
        let observation = observation.clone();
        async move { observation.wait_leader().await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "a leader out of nowhere");
    let d = sessions[0]
        .election(PATH)
        .id("d")
        .leaders(2)
        .join()
        .await
        .expect("join d");
    let leader = tokio::time::timeout(SETTLE, waiting)
        .await
        .expect("wait_leader returns once d leads")
        .expect("the task")
        .expect("a leader");
    assert_eq!(leader.id(), Some("d"));
    // The observer may see d at the front before d's own machine has read
    // its listing: d's own belief is awaited, and its token must agree.
    let token = tokio::time::timeout(SETTLE, d.wait_leader())
        .await
        .expect("d learns it leads")
        .expect("d leads");
    assert_eq!(token, leader.token);

    // Closed: waiting ends with a typed error, never a hang.
    observation.close().await;
    let closed = tokio::time::timeout(SETTLE, observation.wait_leader())
        .await
        .expect("wait_leader on a closed observation returns");
    assert!(matches!(closed, Err(ObserveError::Closed)), "{closed:?}");
    d.close().await;
    for session in sessions {
        session.close().await;
    }
}

/// Started before its path exists; the path is then made by a member,
/// wiped by an operator (every node, then the path) and made again by
/// another: one report per change, an empty list while it is gone.
async fn an_observation_follows_its_path_through_absence(client: Client) {
    const LATER: &str = "/observed/later/workers";
    let server = start_server();
    let hosts = server.connect_string();
    let observation = Election::observe(client.settings(&hosts, SESSION, None), LATER)
        .start()
        .await
        .expect("observe a path that does not exist yet");
    assert!(observation.participants().is_empty());
    let mut changes = observation.changes();
    let session = Session::connect(client.settings(&hosts, SESSION, None))
        .await
        .expect("connect a candidate");
    // A member that stays out once revoked: nobody makes the path again
    // until the redeploy below.
    let a = session
        .election(LATER)
        .id("a")
        .configure(|c| c.rejoin_on_revoke(false))
        .join()
        .await
        .expect("join a");
    tokio::time::timeout(
        SETTLE,
        changes.wait_for(|l| ids(l) == expect(&[("a", true)])),
    )
    .await
    .expect("the observation sees the path made and a in it")
    .expect("the observation runs");
    // deleteall by an operator.
    let zk = raw(&hosts, None).await;
    for child in retry(|| zk.get_children(LATER, false)).await {
        let node = format!("{LATER}/{child}");
        retry(|| zk.delete(&node, None)).await;
    }
    retry(|| zk.delete(LATER, None)).await;
    tokio::time::timeout(SETTLE, changes.wait_for(Vec::is_empty))
        .await
        .expect("the observation sees the queue gone")
        .expect("the observation runs");
    a.close().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        observation.participants().is_empty() && observation.error().is_none(),
        "{:?}",
        observation.participants()
    );
    // Redeployed: another member makes the path again.
    let b = session
        .election(LATER)
        .id("b")
        .join()
        .await
        .expect("join b");
    tokio::time::timeout(
        SETTLE,
        changes.wait_for(|l| ids(l) == expect(&[("b", true)])),
    )
    .await
    .expect("the observation sees the path made again and b in it")
    .expect("the observation runs");
    b.close().await;
    observation.close().await;
    session.close().await;
    let _ = zk.close().await;
}

scenarios_on!(
    on_zookeeper_async,
    super::Client::ZookeeperAsync,
    [
        two_leaders_and_an_observer,
        an_observation_follows_its_path_through_absence
    ]
);
scenarios_on!(
    on_zookeeper_client,
    super::Client::ZookeeperClient,
    [
        two_leaders_and_an_observer,
        an_observation_follows_its_path_through_absence
    ]
);
