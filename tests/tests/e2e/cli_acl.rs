//! `zkelect run --acl` end to end, against a real ZooKeeper server, over
//! both transports (`--transport zookeeper-async` and `zookeeper-client`):
//!
//! * `--acl ip:127.0.0.1:cdrwa --acl world:anyone:r`: while the command runs,
//!   the candidate's node, the election's path and the level above it (both
//!   made by `run`) carry exactly that list, as a plain client reads it with
//!   getACL; SIGTERM then ends `run` with 0 and its node is gone;
//! * a malformed entry, or a list that lacks a permission every participant
//!   needs, is a usage error (exit 2, naming `--acl`) that creates nothing.
//!
//! `zkelect lock --acl` is checked in `lock_cli.rs`, the library's
//! `Acl::Custom` in `acl.rs`.

use std::time::Duration;

use nix::sys::signal::Signal;
use zkelect_tests::{assert_exit, ZkServer};

use crate::support::{acls_under, node_ids, run_args, zkelect, Candidate, ChildKind};

/// `zkelect run`'s exit code for a usage error (cli/src/exit.rs, the README).
const USAGE: i32 = 2;
/// Bound for a process that starts and joins (debug binaries on 2 cores).
const START: Duration = Duration::from_secs(20);

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("zkelect-cli-acl-test-")
        .tempdir()
        .expect("a temporary directory")
}

/// `run` options for `id` at `path` over `transport`, then `extra`.
fn run_with(zk: &str, path: &str, id: &str, transport: &str, extra: &[&str]) -> Vec<String> {
    let mut args = run_args(zk, path, id);
    args.extend(["--transport", transport].map(str::to_owned));
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args
}

fn custom_acl(transport: &str) {
    let server = ZkServer::start().unwrap_or_else(|e| panic!("cannot start ZooKeeper: {e}"));
    let zk = server.connect_string();
    let dir = tempdir();
    let (level, path) = ("/acl", "/acl/run");
    let mut leader = Candidate::spawn(
        dir.path(),
        "leader",
        &run_with(
            &zk,
            path,
            "a",
            transport,
            &["--acl", "ip:127.0.0.1:cdrwa", "--acl", "world:anyone:r"],
        ),
        ChildKind::Beats,
    );
    leader.wait_run(1, START);
    let want = vec!["ip:127.0.0.1:31".to_owned(), "world:anyone:1".to_owned()];
    // The level above the path, with the path under it; the path, with
    // the candidate's node under it.
    let above = acls_under(&zk, level);
    let at = acls_under(&zk, path);
    assert_eq!(
        above.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["", "run"],
        "{level} and {path}: {above:?}"
    );
    assert_eq!(at.len(), 2, "{path} and one node: {at:?}");
    for (node, acl) in above.iter().chain(&at) {
        assert_eq!(
            acl,
            &want,
            "the ACL of {node:?} ({above:?} {at:?})\n{}",
            leader.log_text()
        );
    }
    assert_eq!(node_ids(&zk, path), ["a"], "the candidate's own node");

    leader.signal(Signal::SIGTERM);
    let status = leader.wait_exit(START);
    assert_exit(
        "run after SIGTERM",
        status.code(),
        0,
        &leader.log_text(),
        &[],
    );
    assert!(node_ids(&zk, path).is_empty(), "its node is gone");

    let bad_path = "/acl-bad/run";
    for bad in [
        "digest:svc:cdrwa",
        "world:anyone:r",
        "ip:10.0.0.0/33:cdrwa",
        "nonsense",
    ] {
        let mut args = run_with(&zk, bad_path, "b", transport, &["--acl", bad]);
        args.extend(["--".into(), "true".into()]);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = zkelect(&refs, START);
        assert_exit(
            &format!("run --acl {bad}"),
            out.code(),
            USAGE,
            &out.stderr,
            &["--acl"],
        );
    }
    assert!(
        acls_under(&zk, "/acl-bad").is_empty(),
        "a refused --acl creates nothing"
    );
}

#[test]
fn run_acl_is_the_nodes_acl_and_a_bad_one_exits_2_on_zookeeper_async() {
    custom_acl("zookeeper-async");
}

#[test]
fn run_acl_is_the_nodes_acl_and_a_bad_one_exits_2_on_zookeeper_client() {
    custom_acl("zookeeper-client");
}
