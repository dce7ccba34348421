//! Elections over SASL DIGEST-MD5 (zookeeper-client transport) against a real
//! server that authenticates with a JAAS configuration, with creator-only
//! ACLs, which the server binds to the `sasl` identity: the election works and
//! fails over, nobody else may read or delete its nodes, and a client
//! with a wrong password, without credentials or as another user is kept out
//! with a typed error. `zkelect status` reads the queue with `--sasl-user`
//! and a password from a file or the environment, and exits 5 (auth) with a
//! wrong one, 2 (usage) without one.

use std::io::Write;
use std::time::Duration;

use zkelect::core::{CandidateError, ZkCode};
use zkelect::zk_client::ZkClientOptions;
use zkelect::{Acl, Election, ElectionError, Role, SessionError};
use zkelect_tests::ZkServer;

use crate::harness::raw;

const SESSION: Duration = Duration::from_secs(4);
const SETTLE: Duration = Duration::from_secs(30);
const ELECTION: &str = "/sasl/leader";
const USER: &str = "scheduler";
const PASSWORD: &str = "s3cret-for-the-test";

/// A server whose JAAS `Server` section knows two DIGEST-MD5 users, and which
/// maps SASL identities to the `sasl` ACL scheme.
fn sasl_server() -> (ZkServer, tempfile::NamedTempFile) {
    let mut jaas = tempfile::NamedTempFile::new().expect("a JAAS file");
    write!(
        jaas,
        "Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  \
         user_{USER}=\"{PASSWORD}\"\n  user_other=\"other-password\";\n}};\n"
    )
    .expect("write the JAAS file");
    let server = ZkServer::builder()
        .max_session_timeout(Duration::from_secs(10))
        .config(
            "authProvider.1",
            "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
        )
        .jvm_arg(&format!(
            "-Djava.security.auth.login.config={}",
            jaas.path().display()
        ))
        .start()
        .unwrap_or_else(|e| panic!("cannot start ZooKeeper with SASL: {e}"));
    (server, jaas)
}

fn options(server: &ZkServer, user: &str, password: &str) -> ZkClientOptions {
    ZkClientOptions::new(server.connect_string())
        .session_timeout(SESSION)
        .connect_timeout(Duration::from_secs(20))
        .sasl_digest_md5(user, password)
}

async fn candidate(options: ZkClientOptions, id: &str) -> Result<Election, ElectionError> {
    Election::connect(options)
        .path(ELECTION)
        .id(id)
        .acl(Acl::CreatorAll)
        .join_timeout(SETTLE)
        .join()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_election_over_sasl_with_creator_only_acls_elects_and_keeps_others_out() {
    let (server, _jaas) = sasl_server();
    let a = candidate(options(&server, USER, PASSWORD), "a")
        .await
        .expect("a joins over SASL");
    let a_token = tokio::time::timeout(SETTLE, a.wait_leader())
        .await
        .expect("a leads in time")
        .expect("a leads");
    let b = candidate(options(&server, USER, PASSWORD), "b")
        .await
        .expect("b joins over SASL");
    assert!(!matches!(b.role(), Role::Leader(_)), "{:?}", b.role());

    // The nodes are the SASL user's alone: an unauthenticated client may not
    // read the queue, a node, or even their ACLs (ZooKeeper 3.8 asks READ or
    // ADMIN for getACL). That another *authenticated* user is refused too
    // (below) shows the ACL names the identity, `sasl:scheduler`.
    let zk = raw(&server.connect_string(), None).await;
    let node = format!("{ELECTION}/{}", a.node().expect("a has a node"));
    let no_auth =
        |r: Result<_, zookeeper_async::ZkError>| matches!(r, Err(zookeeper_async::ZkError::NoAuth));
    assert!(no_auth(zk.get_children(ELECTION, false).await.map(drop)));
    assert!(no_auth(zk.get_data(&node, false).await.map(drop)));
    assert!(no_auth(zk.get_acl(&node).await.map(drop)));
    assert!(no_auth(zk.delete(&node, None).await));

    // A wrong password: the session is refused, a typed error.
    let wrong = candidate(options(&server, USER, "not-the-password"), "w").await;
    assert!(
        matches!(wrong, Err(ElectionError::Session(SessionError::Auth(_)))),
        "wrong password: {wrong:?}"
    );

    // No credentials: the creator-only parent refuses the node.
    let anonymous =
        Election::connect(ZkClientOptions::new(server.connect_string()).session_timeout(SESSION))
            .path(ELECTION)
            .id("anonymous")
            .join_timeout(SETTLE)
            .join()
            .await;
    assert!(
        matches!(
            anonymous,
            Err(ElectionError::Fatal(CandidateError::Refused {
                code: ZkCode::NoAuth,
                ..
            }))
        ),
        "no credentials: {anonymous:?}"
    );

    // Another SASL user with valid credentials is kept out just the same.
    let other = candidate(options(&server, "other", "other-password"), "o").await;
    assert!(
        matches!(
            other,
            Err(ElectionError::Fatal(CandidateError::Refused {
                code: ZkCode::NoAuth,
                ..
            }))
        ),
        "another user: {other:?}"
    );
    assert!(a.role().is_leader(), "the outsiders did not disturb a");

    let hosts = server.connect_string();
    tokio::task::spawn_blocking(move || cli_reads_the_queue_over_sasl(&hosts))
        .await
        .expect("the CLI checks ran");

    // The leader goes; the follower takes over, over SASL.
    a.close().await;
    let b_token = tokio::time::timeout(SETTLE, b.wait_leader())
        .await
        .expect("b takes over in time")
        .expect("b leads");
    assert!(b_token > a_token, "{b_token} after {a_token}");
    b.close().await;
}

/// A CLI case: label, transport, extra arguments, $ZKELECT_SASL_PASSWORD,
/// the exit code wanted.
type Case<'a> = (&'a str, &'a str, &'a [&'a str], Option<&'a str>, i32);

/// `zkelect status` over SASL: (password file | environment | wrong | none |
/// none at all | zookeeper-async) → exit code, and the ids it must list.
fn cli_reads_the_queue_over_sasl(hosts: &str) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let good = dir.path().join("good");
    let bad = dir.path().join("bad");
    std::fs::write(&good, format!("{PASSWORD}\n")).expect("write the password file");
    std::fs::write(&bad, "not-the-password\n").expect("write the password file");
    let good = good.to_str().expect("a UTF-8 path").to_owned();
    let bad = bad.to_str().expect("a UTF-8 path").to_owned();
    let base = |transport: &str| -> Vec<String> {
        [
            "status",
            "--connect",
            hosts,
            "--path",
            ELECTION,
            "--json",
            "--transport",
            transport,
            "--connect-timeout",
            "20000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let cases: [Case; 6] = [
        (
            "password file",
            "zookeeper-client",
            &["--sasl-user", USER, "--sasl-password-file", &good],
            None,
            0,
        ),
        (
            "environment",
            "zookeeper-client",
            &["--sasl-user", USER],
            Some(PASSWORD),
            0,
        ),
        (
            "wrong password",
            "zookeeper-client",
            &["--sasl-user", USER, "--sasl-password-file", &bad],
            None,
            5,
        ),
        (
            "no password",
            "zookeeper-client",
            &["--sasl-user", USER],
            None,
            2,
        ),
        ("no credentials", "zookeeper-client", &[], None, 5),
        (
            "zookeeper-async",
            "zookeeper-async",
            &["--sasl-user", USER],
            Some(PASSWORD),
            2,
        ),
    ];
    for (label, transport, extra, env, want) in cases {
        let mut args = base(transport);
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut cmd = std::process::Command::new(crate::support::zkelect_bin());
        cmd.args(&args).env_remove("ZKELECT_SASL_PASSWORD");
        if let Some(password) = env {
            cmd.env("ZKELECT_SASL_PASSWORD", password);
        }
        let out = cmd.output().expect("run zkelect status");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(want),
            "{label}: zkelect {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            args.join(" ")
        );
        assert!(
            !stderr.contains(PASSWORD),
            "{label}: the password is printed"
        );
        if want == 0 {
            for id in ["\"a\"", "\"b\""] {
                assert!(stdout.contains(id), "{label}: {id} missing from\n{stdout}");
            }
        }
    }
}
