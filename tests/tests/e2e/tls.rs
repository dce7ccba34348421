//! Elections over TLS (ZooKeeper 3.8's `secureClientPort` with the Netty
//! connection factory), with a CA and certificates made in the test: a
//! leader is elected and a successor takes over; a client that trusts
//! another CA, or talks plain TCP to the TLS port, fails with a clear error.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use zkelect::zk_client::{TlsSettings, ZkClientOptions, ZkClientTransport};
use zkelect::{Election, ElectionError, Role, SessionError, TlsError};
use zkelect_tests::{ClientAuth, Proxy, TestPki, ZkServer};

const SESSION: Duration = Duration::from_secs(4);
const SETTLE: Duration = Duration::from_secs(30);
const ELECTION: &str = "/tls/leader";

fn tls_server(pki: &TestPki, auth: ClientAuth) -> ZkServer {
    ZkServer::builder()
        .max_session_timeout(Duration::from_secs(10))
        .tls(pki)
        .tls_client_auth(auth)
        .start()
        .unwrap_or_else(|e| panic!("cannot start ZooKeeper with TLS: {e}"))
}

fn options(server: &ZkServer, tls: TlsSettings) -> ZkClientOptions {
    let hosts = server
        .secure_connect_string()
        .expect("the server has a TLS port");
    ZkClientOptions::new(hosts)
        .session_timeout(SESSION)
        // Far longer than a failure may take: a wrong CA must not wait for it.
        .connect_timeout(Duration::from_secs(60))
        .tls(tls)
}

async fn candidate(options: ZkClientOptions, id: &str) -> Election {
    Election::connect(options)
        .path(ELECTION)
        .id(id)
        .join()
        .await
        .unwrap_or_else(|e| panic!("{id} cannot join over TLS: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_election_over_tls_elects_a_leader_and_fails_over() {
    let pki = TestPki::generate().expect("test certificates");
    let server = tls_server(&pki, ClientAuth::None);
    let trust = TlsSettings::from_ca_file(pki.ca_path()).expect("the CA file");
    let a = candidate(options(&server, trust.clone()), "a").await;
    let a_token = a.wait_leader().await.expect("a leads");
    let b = candidate(options(&server, trust.clone()), "b").await;
    assert!(!matches!(b.role(), Role::Leader(_)), "{:?}", b.role());
    // The fencing token travels over TLS like everything else, and the
    // transport can do guarded writes over it too.
    a.guarded_set_data(ELECTION, b"a".to_vec())
        .await
        .expect("a guarded write over TLS");
    // The leader goes; the follower takes over.
    a.close().await;
    let b_token = tokio::time::timeout(SETTLE, b.wait_leader())
        .await
        .expect("b takes over in time")
        .expect("b leads");
    assert!(b_token > a_token, "{b_token} after {a_token}");
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trusting_another_ca_fails_with_a_certificate_error() {
    let pki = TestPki::generate().expect("test certificates");
    let server = tls_server(&pki, ClientAuth::None);
    let wrong = TlsSettings::from_ca_pem(TestPki::unrelated_ca_pem().expect("another CA"));
    let started = Instant::now();
    let result = ZkClientTransport::connect(options(&server, wrong.clone())).await;
    // Printed, not asserted: how quickly the wrong CA is reported.
    println!(
        "wrong CA reported after {} ms: {result:?}",
        started.elapsed().as_millis()
    );
    match result {
        Err(SessionError::Tls(TlsError::Rejected { host, reason })) => {
            assert_eq!(Some(host), server.secure_connect_string());
            assert!(reason.contains("UnknownIssuer"), "{reason}");
        }
        other => panic!("expected a rejected certificate, got {other:?}"),
    }
    // The same through the election API, with the message a user sees.
    let joined = Election::connect(options(&server, wrong))
        .path(ELECTION)
        .id("wrong-ca")
        .join()
        .await;
    let e = joined.expect_err("an election with the wrong CA");
    assert!(
        matches!(
            e,
            ElectionError::Session(SessionError::Tls(TlsError::Rejected { .. }))
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("certificate"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_that_cannot_work_fail_before_or_at_the_handshake() {
    let pki = TestPki::generate().expect("test certificates");
    let server = tls_server(&pki, ClientAuth::None);
    // An unreadable CA file and a PEM without a certificate: before any traffic.
    let missing = TlsSettings::from_ca_file("/nonexistent/ca.pem");
    assert!(
        matches!(missing, Err(SessionError::Tls(TlsError::Config { .. }))),
        "{missing:?}"
    );
    let empty =
        ZkClientTransport::connect(options(&server, TlsSettings::from_ca_pem("no PEM here"))).await;
    assert!(
        matches!(empty, Err(SessionError::Tls(TlsError::Config { .. }))),
        "{empty:?}"
    );
    // The right CA, but the certificate names 127.0.0.1 and localhost only:
    // the same server reached at 127.0.0.2 (through a proxy listening there)
    // is rejected by name, at the handshake, long before the connect timeout.
    let secure = server
        .secure_connect_string()
        .and_then(|h| h.parse().ok())
        .expect("the TLS address");
    let other = Proxy::start_on(Ipv4Addr::new(127, 0, 0, 2), secure).expect("a proxy on 127.0.0.2");
    let other_name = ZkClientOptions::new(other.connect_string())
        .session_timeout(SESSION)
        .connect_timeout(Duration::from_secs(60))
        .tls(TlsSettings::from_ca_pem(pki.ca_pem()));
    let started = Instant::now();
    let rejected = ZkClientTransport::connect(other_name).await;
    assert!(
        matches!(rejected, Err(SessionError::Tls(TlsError::Rejected { .. }))),
        "expected the name to be rejected, got {rejected:?}"
    );
    // Not a timing bound: a rejection that only came with the connect
    // timeout (60 s) would be a retry loop, not a handshake failure.
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the rejection waited for the connect timeout: {:?}",
        started.elapsed()
    );
    // Plain TCP to the TLS port: no session.
    let plain = ZkClientTransport::connect(
        ZkClientOptions::new(server.secure_connect_string().expect("the TLS port"))
            .session_timeout(SESSION)
            .connect_timeout(Duration::from_secs(3)),
    )
    .await;
    assert!(
        matches!(plain, Err(SessionError::Connect { .. })),
        "{plain:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_needs_client_certificates_serves_only_clients_with_one() {
    let pki = TestPki::generate().expect("test certificates");
    let server = tls_server(&pki, ClientAuth::Need);
    let with_cert = TlsSettings::from_ca_pem(pki.ca_pem())
        .identity_files(pki.client_cert_path(), pki.client_key_path())
        .expect("the client's files");
    let a = candidate(options(&server, with_cert), "with-cert").await;
    a.wait_leader()
        .await
        .expect("a client with a certificate leads");
    a.close().await;
    let without = ZkClientTransport::connect(
        options(&server, TlsSettings::from_ca_pem(pki.ca_pem()))
            .connect_timeout(Duration::from_secs(5)),
    )
    .await;
    assert!(
        matches!(
            without,
            Err(SessionError::Tls(TlsError::Handshake { .. }) | SessionError::Connect { .. })
        ),
        "{without:?}"
    );
}
