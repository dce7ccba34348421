//! Many recipes on one session against a real ZooKeeper 3.8 server (the
//! scale a session is built for): two sessions each run 1,000 elections on the
//! same 1,000 paths in one process; the session that holds them all is
//! killed (its connection black-holed until the server expires it); every
//! election fails over to the other session, the dead session's elections
//! never still lead, and no node leaks (every path is listed afterwards).
//!
//! Run once per real client by `scenarios_on!` (`on_zookeeper_async::…`,
//! `on_zookeeper_client::…`), like the other real-server suites.

use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use zkelect::{Election, Role, Session};
use zkelect_tests::Proxy;

use crate::harness::{raw, retry, start_server, Client, SESSION, SETTLE};

/// Elections per session (the figure; not shrunk for debug builds).
const N: usize = 1_000;
/// Where the elections live: `/many/e0` … `/many/e999`.
const ROOT: &str = "/many";

fn path(i: usize) -> String {
    format!("{ROOT}/e{i}")
}

/// Joins `N` elections on `session` as `id`, all at once, in path order.
async fn join_all(session: &Session, id: &str) -> Vec<Election> {
    let mut joins = JoinSet::new();
    for i in 0..N {
        let builder = session.election(path(i)).id(id);
        joins.spawn(async move { (i, builder.join().await) });
    }
    let mut joined: Vec<Option<Election>> = (0..N).map(|_| None).collect();
    while let Some(done) = joins.join_next().await {
        let (i, election) = done.expect("a join task panicked");
        joined[i] =
            Some(election.unwrap_or_else(|e| panic!("{id} could not join {}: {e}", path(i))));
    }
    joined
        .into_iter()
        .map(|e| e.expect("every join answered"))
        .collect()
}

/// Waits until every election leads; their tokens in path order.
async fn all_lead(elections: &[Election], who: &str) -> Vec<i64> {
    let mut tokens = Vec::with_capacity(elections.len());
    for (i, e) in elections.iter().enumerate() {
        let token = tokio::time::timeout(SETTLE, e.wait_leader())
            .await
            .unwrap_or_else(|_| panic!("{who}: {} not led within {SETTLE:?}", path(i)))
            .unwrap_or_else(|err| panic!("{who}: {} failed: {err}", path(i)));
        tokens.push(token.0);
    }
    tokens
}

/// The children of every election path, listed by one outside client.
async fn listing(hosts: &str) -> Vec<Vec<String>> {
    let zk = raw(hosts, None).await;
    let mut all = Vec::with_capacity(N);
    for i in 0..N {
        let p = path(i);
        let mut names = retry(|| zk.get_children(&p, false)).await;
        names.sort();
        all.push(names);
    }
    let _ = zk.close().await;
    all
}

/// Two sessions run 1,000 elections each on the same paths; the first
/// holds them all; it is black-holed until the server expires it: every
/// election fails over to the second session with a higher token, the
/// first session's elections stop leading, its nodes are gone with its
/// session, and closing the second leaves every path empty.
async fn thousand_elections_on_one_session_fail_over_when_it_dies(client: Client) {
    let server = start_server();
    let hosts = server.connect_string();
    let proxy = Proxy::start(server.addr()).expect("a proxy");
    let a = Session::connect(client.settings(&proxy.connect_string(), SESSION, None))
        .await
        .expect("session a");
    let b = Session::connect(client.settings(&hosts, SESSION, None))
        .await
        .expect("session b");

    let started = Instant::now();
    let holders = join_all(&a, "a").await;
    let held = all_lead(&holders, "a").await;
    let a_took = started.elapsed();
    let started = Instant::now();
    let standbys = join_all(&b, "b").await;
    let b_took = started.elapsed();
    for (i, e) in standbys.iter().enumerate() {
        assert_eq!(
            e.role(),
            Role::Follower,
            "b leads {} while a holds it",
            path(i)
        );
    }
    for (i, names) in listing(&hosts).await.iter().enumerate() {
        assert_eq!(names.len(), 2, "{}: {names:?}", path(i));
    }

    let killed = Instant::now();
    proxy.blackhole();
    let taken = all_lead(&standbys, "b").await;
    let failed_over = killed.elapsed();
    println!(
        "{client}: {N} elections: a joined and led in {a_took:?}, b joined in {b_took:?}; \
         all {N} failed over {failed_over:?} after a was black-holed ({SESSION:?} sessions)"
    );
    for i in 0..N {
        assert!(
            taken[i] > held[i],
            "{}: b's token {} is not above a's {}",
            path(i),
            taken[i],
            held[i]
        );
        assert!(
            !matches!(holders[i].role(), Role::Leader(_)),
            "{}: a still leads on its dead session while b leads",
            path(i)
        );
    }
    for (i, names) in listing(&hosts).await.iter().enumerate() {
        let own = standbys[i].node().expect("b's node is known");
        assert_eq!(
            names,
            &vec![own],
            "{}: a's node outlived its session",
            path(i)
        );
    }

    tokio::time::timeout(Duration::from_secs(30), b.close())
        .await
        .expect("b closes");
    for (i, names) in listing(&hosts).await.iter().enumerate() {
        assert!(names.is_empty(), "{} leaked {names:?}", path(i));
    }
    // a's connection stays black-holed: its handles close in the background.
    drop(holders);
    drop(a);
}

scenarios_on!(
    on_zookeeper_async,
    super::Client::ZookeeperAsync,
    [thousand_elections_on_one_session_fail_over_when_it_dies]
);
scenarios_on!(
    on_zookeeper_client,
    super::Client::ZookeeperClient,
    [thousand_elections_on_one_session_fail_over_when_it_dies]
);
