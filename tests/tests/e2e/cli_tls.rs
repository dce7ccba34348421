//! `zkelect status` over the zookeeper-client transport and TLS:
//! the queue of an election held over TLS, a CA that signed nothing of the
//! server's, and every bad combination of `--transport` and `--tls-*` with
//! its exit code. (`run` takes the same connection options, parsed by the
//! same code; cli/src/args.rs tests their parsing.)

use std::time::Duration;

use zkelect::zk_client::{TlsSettings, ZkClientOptions};
use zkelect::Election;
use zkelect_tests::{TestPki, ZkServer};

use crate::support::{closed_port, zkelect};

/// Exit codes of `zkelect` (cli/src/exit.rs).
const USAGE: i32 = 2;
const CONFIG: i32 = 3;
const AUTH: i32 = 5;
/// Bound for one `zkelect` command (debug binaries on 2 cores).
const WITHIN: Duration = Duration::from_secs(30);
const ELECTION: &str = "/cli-tls/leader";

fn run(args: &[&str]) -> crate::support::Outcome {
    zkelect(args, WITHIN)
}

fn assert_exit(args: &[&str], code: i32, needle: &str) {
    let out = run(args);
    assert_eq!(
        out.code(),
        Some(code),
        "`zkelect {}`; stderr:\n{}",
        args.join(" "),
        out.stderr
    );
    assert!(
        out.stderr.contains(needle),
        "`zkelect {}`: stderr lacks {needle:?}:\n{}",
        args.join(" "),
        out.stderr
    );
}

#[test]
fn status_over_tls_shows_the_queue_and_a_wrong_ca_exits_5() {
    let pki = TestPki::generate().expect("test certificates");
    let server = ZkServer::builder()
        .max_session_timeout(Duration::from_secs(10))
        .tls(&pki)
        .start()
        .unwrap_or_else(|e| panic!("cannot start ZooKeeper with TLS: {e}"));
    let secure = server.secure_connect_string().expect("a TLS port");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let leader = runtime.block_on(async {
        let election = Election::connect(
            ZkClientOptions::new(&secure)
                .session_timeout(Duration::from_secs(4))
                .tls(TlsSettings::from_ca_pem(pki.ca_pem())),
        )
        .path(ELECTION)
        .id("tls-leader")
        .join()
        .await
        .expect("a leader over TLS");
        election.wait_leader().await.expect("it leads");
        election
    });
    let ca = pki.ca_path().to_str().expect("a UTF-8 path");
    let out = run(&[
        "status",
        "--connect",
        &secure,
        "--path",
        ELECTION,
        "--transport",
        "zookeeper-client",
        "--tls-ca",
        ca,
        "--json",
    ]);
    assert_eq!(out.code(), Some(0), "stderr:\n{}", out.stderr);
    let view: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    assert!(
        out.stdout.contains("tls-leader"),
        "the leader's id in {view}"
    );

    // A CA that signed nothing of the server's: a trust failure, exit 5.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let wrong = dir.path().join("other-ca.pem");
    std::fs::write(&wrong, TestPki::unrelated_ca_pem().expect("another CA")).expect("write");
    let wrong = wrong.to_str().expect("a UTF-8 path");
    assert_exit(
        &[
            "status",
            "--connect",
            &secure,
            "--path",
            ELECTION,
            "--transport",
            "zookeeper-client",
            "--tls-ca",
            wrong,
            "--connect-timeout",
            "60000",
        ],
        AUTH,
        "certificate",
    );
    runtime.block_on(leader.close());
}

/// Refused before any traffic: the server given is a closed port.
#[test]
fn bad_transport_and_tls_combinations_exit_2_or_3() {
    let nowhere = format!("127.0.0.1:{}", closed_port());
    let base = ["status", "--connect", nowhere.as_str(), "--path", ELECTION];
    let with = |extra: &[&'static str]| -> Vec<String> {
        base.iter().chain(extra).map(|s| (*s).to_owned()).collect()
    };
    let cases: [(&[&str], i32, &str); 5] = [
        // TLS needs the zookeeper-client transport (the default).
        (
            &["--transport", "zookeeper-async", "--tls-ca", "/ca.pem"],
            USAGE,
            "--transport zookeeper-client",
        ),
        // A certificate without its key, and a key without its certificate.
        (
            &[
                "--transport",
                "zookeeper-client",
                "--tls-ca",
                "/ca.pem",
                "--tls-cert",
                "/c.pem",
            ],
            USAGE,
            "--tls-key",
        ),
        (
            &[
                "--transport",
                "zookeeper-client",
                "--tls-ca",
                "/ca.pem",
                "--tls-key",
                "/k.pem",
            ],
            USAGE,
            "--tls-cert",
        ),
        (&["--transport", "zookeeper"], USAGE, "zookeeper-client"),
        // A CA file that cannot be read: a configuration error.
        (
            &[
                "--transport",
                "zookeeper-client",
                "--tls-ca",
                "/nonexistent/ca.pem",
            ],
            CONFIG,
            "/nonexistent/ca.pem",
        ),
    ];
    for (extra, code, needle) in cases {
        let args = with(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_exit(&args, code, needle);
    }
}
