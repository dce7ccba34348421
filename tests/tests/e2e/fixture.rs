//! Self-tests of the real-server fixture: servers, ensembles and the proxy.
//!
//! These start real ZooKeeper JVMs. When Java or ZooKeeper is missing they
//! fail (never skip) with a message saying to run `scripts/test-deps.sh`.

use std::future::Future;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use zkelect_tests::{
    four_letter_word, FixtureError, Proxy, ServerMode, ZkEnsemble, ZkInstall, ZkServer,
};
use zookeeper_async::{Acl, CreateMode, WatchedEvent, ZkError, ZooKeeper};

/// Session timeout asked by the test clients: zookeeper-async storms
/// reconnects below ~1.5 s.
const SESSION: Duration = Duration::from_secs(3);

fn start_server() -> ZkServer {
    match ZkServer::start() {
        Ok(server) => server,
        Err(e) => panic!("cannot start ZooKeeper: {e}"),
    }
}

/// Connects a raw zookeeper-async client and waits until its session is up.
async fn connect(connect_string: &str) -> ZooKeeper {
    // A retry pause, because zookeeper-async spins on refused connections.
    let zk = ZooKeeper::connect_with_retry_time(
        connect_string,
        SESSION,
        |_: WatchedEvent| {},
        Duration::from_millis(100),
    )
    .await
    .expect("zookeeper-async connect");
    retry(Duration::from_secs(10), || zk.exists("/", false)).await;
    zk
}

/// Retries an operation that may fail with connection loss while the client
/// reconnects.
async fn retry<T, F, Fut>(within: Duration, mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ZkError>>,
{
    let deadline = Instant::now() + within;
    loop {
        match tokio::time::timeout(Duration::from_secs(2), op()).await {
            Ok(Ok(value)) => return value,
            Ok(Err(ZkError::ConnectionLoss)) | Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(Err(e)) => panic!("operation failed: {e:?}"),
            Err(_) => panic!("operation timed out for {within:?}"),
        }
    }
}

async fn create(
    zk: &ZooKeeper,
    path: &str,
    data: &[u8],
    mode: CreateMode,
) -> Result<String, ZkError> {
    zk.create(path, data.to_vec(), Acl::open_unsafe().clone(), mode)
        .await
}

#[test]
fn standalone_server_starts_and_answers_four_letter_words() {
    let server = start_server();
    let took = server.last_start_duration().expect("start duration");
    println!("standalone ZooKeeper serving after {took:?}");
    assert!(server.ruok().unwrap(), "ruok should answer imok");
    assert_eq!(server.mode().unwrap(), ServerMode::Standalone);
    let mntr = server.mntr().unwrap();
    assert_eq!(
        mntr.get("zk_server_state").map(String::as_str),
        Some("standalone")
    );
    assert!(
        mntr["zk_version"].starts_with("3."),
        "version: {}",
        mntr["zk_version"]
    );
    assert!(mntr.contains_key("zk_znode_count"));
    assert_eq!(
        server.session_timeout_bounds(),
        (Duration::from_millis(400), Duration::from_secs(4))
    );
    assert_eq!(
        server.connect_string(),
        format!("127.0.0.1:{}", server.port())
    );

    let pid = server.pid().expect("running");
    let pid_file = std::fs::read_to_string(server.dir().join("zookeeper.pid")).unwrap();
    assert_eq!(pid_file.trim(), pid.to_string());
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("-Dzkelect.fixture=zk-standalone"),
        "the JVM's command line carries the fixture marker"
    );
    assert!(
        std::fs::read_to_string(server.log_path())
            .unwrap()
            .contains("binding to port"),
        "the server logs to its own file"
    );

    // Drop kills the JVM.
    drop(server);
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the JVM {pid} is gone after drop"
    );
}

#[test]
fn session_timeout_bounds_are_configurable() {
    let server = ZkServer::builder()
        .min_session_timeout(Duration::from_secs(1))
        .max_session_timeout(Duration::from_secs(20))
        .start()
        .unwrap();
    let conf = server.four_letter_word("conf").unwrap();
    assert!(conf.contains("minSessionTimeout=1000"), "{conf}");
    assert!(conf.contains("maxSessionTimeout=20000"), "{conf}");
    assert!(conf.contains("tickTime=200"), "{conf}");

    let err = ZkServer::builder()
        .min_session_timeout(Duration::from_secs(5))
        .max_session_timeout(Duration::from_secs(1))
        .start()
        .unwrap_err();
    assert!(matches!(err, FixtureError::InvalidConfig(_)), "{err}");
}

#[test]
fn missing_installation_fails_loudly_with_the_fix() {
    let install = ZkInstall {
        java: "/nonexistent/bin/java".into(),
        classpath: vec!["/nonexistent/zookeeper.jar".into()],
    };
    let err = ZkServer::builder().install(install).start().unwrap_err();
    assert!(matches!(err, FixtureError::NotInstalled { .. }), "{err:?}");
    assert!(err.to_string().contains("scripts/test-deps.sh"), "{err}");
    // And the real installation is there.
    ZkInstall::detect().unwrap().validate().unwrap();
}

#[test]
fn a_server_that_cannot_start_reports_its_output() {
    let err = ZkServer::builder()
        .jvm_arg("-XX:+NoSuchJvmOption")
        .start()
        .unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, FixtureError::Exited { .. }), "{message}");
    assert!(
        message.contains("NoSuchJvmOption"),
        "the JVM's complaint is shown: {message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_through_proxy_creates_and_reads_a_node() {
    let server = start_server();
    let proxy = Proxy::start(server.addr()).unwrap();
    let zk = connect(&proxy.connect_string()).await;
    assert_eq!(proxy.active_count(), 1);
    assert_eq!(proxy.accepted_count(), 1);

    create(&zk, "/through-proxy", b"hello", CreateMode::Persistent)
        .await
        .unwrap();
    let (data, _) = zk.get_data("/through-proxy", false).await.unwrap();
    assert_eq!(data, b"hello");
    // The proxied client, and the connection asking `mntr`.
    let mntr = server.mntr().unwrap();
    assert_eq!(mntr["zk_num_alive_connections"], "2");
    zk.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_fails_an_in_flight_request_with_connection_loss() {
    let server = start_server();
    let proxy = Proxy::start(server.addr()).unwrap();
    let zk = connect(&proxy.connect_string()).await;
    create(&zk, "/cut", b"x", CreateMode::Persistent)
        .await
        .unwrap();

    // Hold the request in flight, then reset the connection under it.
    proxy.blackhole();
    let started = Instant::now();
    let (result, cut) = tokio::join!(zk.get_data("/cut", false), async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        proxy.cut()
    });
    assert_eq!(cut, 1, "one connection was cut");
    assert_eq!(result.unwrap_err(), ZkError::ConnectionLoss);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "fails fast: {:?}",
        started.elapsed()
    );

    // The client reconnects through the proxy; while black-holed the new
    // connection is accepted but held, and requests stall.
    proxy
        .wait_for_active(1, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(proxy.accepted_count() >= 2);
    let stalled = tokio::time::timeout(Duration::from_millis(500), zk.exists("/cut", false)).await;
    assert!(
        stalled.is_err(),
        "a held connection must not answer: {stalled:?}"
    );

    proxy.heal();
    let stat = retry(Duration::from_secs(10), || zk.exists("/cut", false)).await;
    assert!(stat.is_some());
    assert_eq!(proxy.cut_count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_after_next_request_applies_the_request_but_loses_the_reply() {
    let server = start_server();
    let proxy = Proxy::start(server.addr()).unwrap();
    let zk = connect(&proxy.connect_string()).await;

    proxy.cut_after_next_request();
    assert!(proxy.is_cut_armed());
    let result = create(&zk, "/lost-reply", b"applied", CreateMode::Persistent).await;
    assert_eq!(result.unwrap_err(), ZkError::ConnectionLoss);
    assert!(!proxy.is_cut_armed());
    assert_eq!(proxy.cut_count(), 1);

    // The create reached the server: after reconnecting, the node is there.
    let (data, _) = retry(Duration::from_secs(10), || {
        zk.get_data("/lost-reply", false)
    })
    .await;
    assert_eq!(data, b"applied");
    assert_eq!(proxy.accepted_count(), 2, "the client reconnected once");
    // Retrying the create now fails as a real client would see it.
    assert_eq!(
        create(&zk, "/lost-reply", b"again", CreateMode::Persistent)
            .await
            .unwrap_err(),
        ZkError::NodeExists
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackhole_stalls_traffic_and_heal_lets_it_flow() {
    let server = start_server();
    let proxy = Proxy::start(server.addr()).unwrap();
    let zk = connect(&proxy.connect_string()).await;
    create(&zk, "/bh", b"v", CreateMode::Persistent)
        .await
        .unwrap();

    proxy.blackhole();
    assert!(proxy.is_blackholed());
    let mut request = Box::pin(zk.get_data("/bh", false));
    let stalled = tokio::time::timeout(Duration::from_millis(500), &mut request).await;
    assert!(stalled.is_err(), "no reply while black-holed: {stalled:?}");

    // Nothing was closed: the very same request completes after healing, on
    // the same connection.
    proxy.heal();
    let (data, _) = tokio::time::timeout(Duration::from_secs(2), request)
        .await
        .expect("reply after heal")
        .unwrap();
    assert_eq!(data, b"v");
    assert_eq!(proxy.accepted_count(), 1, "no reconnection happened");
    assert_eq!(proxy.cut_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_resume_freeze_the_server() {
    let server = start_server();
    let zk = connect(&server.connect_string()).await;
    create(&zk, "/paused", b"p", CreateMode::Persistent)
        .await
        .unwrap();

    server.pause().unwrap();
    assert!(server.is_paused());
    assert!(matches!(server.mntr(), Err(FixtureError::Paused { .. })));
    assert!(
        four_letter_word(server.addr(), "ruok", Duration::from_millis(300)).is_err(),
        "a paused server does not answer"
    );
    let mut request = Box::pin(zk.get_data("/paused", false));
    let stalled = tokio::time::timeout(Duration::from_millis(500), &mut request).await;
    assert!(stalled.is_err(), "no reply while paused");

    server.resume().unwrap();
    assert!(!server.is_paused());
    let (data, _) = tokio::time::timeout(Duration::from_secs(2), request)
        .await
        .expect("reply after resume")
        .unwrap();
    assert_eq!(data, b"p");
    assert!(server.ruok().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_keeps_znodes_and_sessions() {
    let server = ZkServer::builder()
        .max_session_timeout(Duration::from_secs(10))
        .start()
        .unwrap();
    let zk = ZooKeeper::connect_with_retry_time(
        &server.connect_string(),
        Duration::from_secs(8),
        |_: WatchedEvent| {},
        Duration::from_millis(100),
    )
    .await
    .unwrap();
    retry(Duration::from_secs(10), || zk.exists("/", false)).await;
    create(&zk, "/persistent", b"kept", CreateMode::Persistent)
        .await
        .unwrap();
    create(&zk, "/ephemeral", b"", CreateMode::Ephemeral)
        .await
        .unwrap();
    let old_pid = server.pid().unwrap();

    server.kill();
    assert!(!server.is_running());
    assert!(matches!(
        server.mntr(),
        Err(FixtureError::NotRunning { .. })
    ));
    let mode = server.restart().unwrap();
    assert_eq!(mode, ServerMode::Standalone);
    assert_ne!(server.pid().unwrap(), old_pid);
    println!(
        "standalone ZooKeeper restarted in {:?}",
        server.last_start_duration().unwrap()
    );

    // The same client resumes its session: its ephemeral node survived.
    let (data, _) = retry(Duration::from_secs(10), || {
        zk.get_data("/persistent", false)
    })
    .await;
    assert_eq!(data, b"kept");
    assert!(zk.exists("/ephemeral", false).await.unwrap().is_some());

    // A new client sees the persistent node too.
    let other = connect(&server.connect_string()).await;
    let (data, _) = other.get_data("/persistent", false).await.unwrap();
    assert_eq!(data, b"kept");

    // stop() is graceful (SIGTERM) but just as final.
    let stopping = Instant::now();
    server.stop();
    println!("standalone ZooKeeper stopped in {:?}", stopping.elapsed());
    assert!(!server.is_running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_elects_a_leader_and_survives_losing_it() {
    let started = Instant::now();
    let ensemble = tokio::task::spawn_blocking(ZkEnsemble::start)
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("cannot start the ensemble: {e}"));
    println!("3-node ensemble serving after {:?}", started.elapsed());
    assert_eq!(ensemble.len(), 3);
    assert_eq!(ensemble.connect_string().split(',').count(), 3);

    let leader = ensemble.leader_index().unwrap();
    let modes = ensemble.modes();
    assert_eq!(
        modes
            .iter()
            .filter(|m| **m == Some(ServerMode::Leader))
            .count(),
        1
    );
    assert_eq!(
        modes
            .iter()
            .filter(|m| **m == Some(ServerMode::Follower))
            .count(),
        2
    );
    assert_eq!(
        ensemble.server(leader).unwrap().mntr().unwrap()["zk_server_state"],
        "leader"
    );

    let zk = connect(&ensemble.connect_string()).await;
    create(&zk, "/quorum", b"replicated", CreateMode::Persistent)
        .await
        .unwrap();
    zk.close().await.unwrap();

    ensemble.kill(leader).unwrap();
    let killed_at = Instant::now();
    let new_leader =
        tokio::task::block_in_place(|| ensemble.wait_for_leader(Duration::from_secs(30))).unwrap();
    println!(
        "new leader elected {:?} after killing the old one",
        killed_at.elapsed()
    );
    assert_ne!(new_leader, leader);
    assert_eq!(ensemble.modes()[leader], None);

    let zk = connect(&ensemble.connect_string()).await;
    let (data, _) = retry(Duration::from_secs(10), || zk.get_data("/quorum", false)).await;
    assert_eq!(data, b"replicated");
    create(&zk, "/after-failover", b"", CreateMode::Persistent)
        .await
        .unwrap();

    // The old leader comes back as a follower.
    let mode = tokio::task::block_in_place(|| ensemble.restart(leader)).unwrap();
    assert_eq!(mode, ServerMode::Follower);
    assert!(matches!(
        ensemble.server(7),
        Err(FixtureError::NoSuchNode { index: 7, len: 3 })
    ));
}

#[test]
fn fixtures_can_be_shared_across_threads_and_tasks() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<ZkServer>();
    assert_send_sync::<ZkEnsemble>();
    assert_send_sync::<Proxy>();
    assert_send_sync::<FixtureError>();
}

/// A plain TCP echo server, to test the proxy byte by byte.
fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            thread::spawn(move || {
                let mut buf = [0u8; 1024];
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 || stream.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn proxy_holds_bytes_in_order_and_cut_resets() {
    let proxy = Proxy::start(echo_server()).unwrap();
    let mut client = TcpStream::connect(proxy.addr()).unwrap();
    client
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut buf = [0u8; 16];
    client.write_all(b"one").unwrap();
    client.read_exact(&mut buf[..3]).unwrap();
    assert_eq!(&buf[..3], b"one");

    proxy.blackhole();
    client.write_all(b"two").unwrap();
    let err = client.read(&mut buf).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "black-holed, not closed: {err:?}"
    );
    // A connection made while black-holed is accepted but held.
    let mut late = TcpStream::connect(proxy.addr()).unwrap();
    late.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    late.write_all(b"late").unwrap();
    assert!(late.read(&mut buf).is_err());
    proxy
        .wait_for_active_blocking(2, Duration::from_secs(2))
        .unwrap();

    proxy.heal();
    client.write_all(b"three").unwrap();
    client.read_exact(&mut buf[..8]).unwrap();
    assert_eq!(&buf[..8], b"twothree");
    late.read_exact(&mut buf[..4]).unwrap();
    assert_eq!(&buf[..4], b"late");

    let ids = proxy.connections();
    assert_eq!(ids.len(), 2);
    assert!(proxy.cut_connection(ids[1]));
    let err = late.read(&mut buf).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConnectionReset, "cut sends an RST");
    assert_eq!(proxy.cut(), 1);
    let err = client.read(&mut buf).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConnectionReset);
    assert_eq!(proxy.active_count(), 0);
    assert_eq!(proxy.cut_count(), 2);

    proxy.reject_new_connections(true);
    let mut rejected = TcpStream::connect(proxy.addr()).unwrap();
    rejected
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let outcome = rejected.read(&mut buf);
    assert!(
        matches!(&outcome, Err(e) if e.kind() == ErrorKind::ConnectionReset),
        "{outcome:?}"
    );
}
