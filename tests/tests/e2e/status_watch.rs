//! `zkelect status --watch --json` through the queue path's death, against a
//! real server, on both transports: started before the path exists, it
//! prints the empty queue, then exactly one line per change as a member
//! joins, a second joins and leaves, an operator wipes the path
//! (`deleteall`: the member's node, then the path) and a member joins a
//! path made again (a redeploy) — and nothing for the path's own creation
//! or deletion, which change nobody's standing. Before `status` read the
//! queue through the core's observer, it printed the first snapshot and
//! then missed every later change.
//!
//! The members are ephemeral sequential nodes a plain client makes, so
//! that each change happens exactly when the test says and the count of
//! lines is exact.

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::runtime::Runtime;
use zkelect_tests::ZkServer;
use zookeeper_async::{Acl, CreateMode, WatchedEvent, ZooKeeper};

use crate::support::{wait_for, zkelect_bin, SESSION_MS};

/// Bound for a line to follow its change (debug binaries on 2 cores).
const WITHIN: Duration = Duration::from_secs(20);
/// How long nothing may be printed after the last change.
const QUIET: Duration = Duration::from_secs(1);

/// A `zkelect status --watch --json` process, killed when dropped.
struct Watch {
    child: Child,
    out: std::path::PathBuf,
}

impl Watch {
    fn start(zk: &str, path: &str, transport: &str, dir: &Path, extra: &[&str]) -> Watch {
        let name = path.replace('/', "_");
        let out = dir.join(format!("watch-{transport}{name}.out"));
        let err = dir.join(format!("watch-{transport}{name}.err"));
        let child = Command::new(zkelect_bin())
            .args([
                "status",
                "--connect",
                zk,
                "--path",
                path,
                "--transport",
                transport,
                "--session-timeout",
                &SESSION_MS.to_string(),
                "--watch",
                "--json",
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(fs::File::create(&out).expect("watch.out"))
            .stderr(fs::File::create(err).expect("watch.err"))
            .spawn()
            .expect("start zkelect status --watch --json");
        Watch { child, out }
    }

    /// The lines printed so far, each a JSON object.
    fn lines(&self) -> Vec<serde_json::Value> {
        fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
            .collect()
    }

    fn text(&self) -> String {
        let err = self.out.with_extension("err");
        format!(
            "stdout:\n{}\nstderr:\n{}",
            fs::read_to_string(&self.out).unwrap_or_default(),
            fs::read_to_string(err).unwrap_or_default()
        )
    }

    /// Waits for line `n` (1-based) and returns the ids of its queue, oldest
    /// first, each with whether it leads.
    fn line(&self, n: usize) -> Vec<(String, bool)> {
        self.entries(n)
            .iter()
            .map(|e| {
                (
                    e["id"].as_str().expect("an id").to_owned(),
                    e["leader"].as_bool().expect("leader"),
                )
            })
            .collect()
    }

    /// Waits for line `n` (1-based) and returns its queue's entries.
    fn entries(&self, n: usize) -> Vec<serde_json::Value> {
        let line = wait_for(
            &format!("line {n} of status --watch --json"),
            WITHIN,
            Duration::from_millis(20),
            || self.lines().into_iter().nth(n - 1),
            || self.text(),
        );
        assert!(
            line["time"].as_str().is_some_and(|t| t.ends_with('Z')),
            "each line says when: {line}"
        );
        line["queue"]
            .as_array()
            .unwrap_or_else(|| panic!("no queue in {line}"))
            .clone()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ids(pairs: &[(&str, bool)]) -> Vec<(String, bool)> {
    pairs.iter().map(|(id, l)| ((*id).to_owned(), *l)).collect()
}

/// A plain client: the members' nodes and the operator's `deleteall`.
struct Plain {
    rt: Runtime,
    zk: ZooKeeper,
}

impl Plain {
    fn connect(hosts: &str) -> Plain {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let zk = rt
            .block_on(ZooKeeper::connect_with_retry_time(
                hosts,
                Duration::from_millis(SESSION_MS),
                |_: WatchedEvent| {},
                Duration::from_millis(100),
            ))
            .expect("a plain client");
        Plain { rt, zk }
    }

    fn create(&self, path: &str, data: &str, mode: CreateMode) -> String {
        self.rt
            .block_on(
                self.zk
                    .create(path, data.into(), Acl::open_unsafe().clone(), mode),
            )
            .unwrap_or_else(|e| panic!("create {path}: {e:?}"))
    }

    /// A member joins: an ephemeral sequential node carrying its id.
    fn join(&self, path: &str, id: &str) -> String {
        self.create(&format!("{path}/n_"), id, CreateMode::EphemeralSequential)
    }

    fn set_data(&self, path: &str, data: &[u8]) {
        self.rt
            .block_on(self.zk.set_data(path, data.to_vec(), None))
            .unwrap_or_else(|e| panic!("set_data {path}: {e:?}"));
    }

    fn delete(&self, path: &str) {
        self.rt
            .block_on(self.zk.delete(path, None))
            .unwrap_or_else(|e| panic!("delete {path}: {e:?}"));
    }

    /// `deleteall path`: its children, then itself.
    fn delete_all(&self, path: &str) {
        let children = self
            .rt
            .block_on(self.zk.get_children(path, false))
            .unwrap_or_else(|e| panic!("list {path}: {e:?}"));
        for child in children {
            self.delete(&format!("{path}/{child}"));
        }
        self.delete(path);
    }
}

#[test]
fn status_watch_json_prints_one_line_per_change_through_the_paths_death() {
    let server = ZkServer::start().unwrap_or_else(|e| panic!("cannot start ZooKeeper: {e}"));
    let zk = server.connect_string();
    let dir = tempfile::Builder::new()
        .prefix("zkelect-status-watch-test-")
        .tempdir()
        .expect("a temporary directory");
    let plain = Plain::connect(&zk);
    for transport in ["zookeeper-async", "zookeeper-client"] {
        let root = format!("/watched-{transport}");
        let path = format!("{root}/svc");
        // Started before the path (or its parent) exists: the empty queue.
        let watch = Watch::start(&zk, &path, transport, dir.path(), &[]);
        assert_eq!(watch.line(1), ids(&[]), "{}", watch.text());
        // The path is made: nobody's standing changes, no line.
        plain.create(&root, "", CreateMode::Persistent);
        plain.create(&path, "", CreateMode::Persistent);
        let a = plain.join(&path, "a");
        assert_eq!(watch.line(2), ids(&[("a", true)]), "{}", watch.text());
        let b = plain.join(&path, "b");
        assert_eq!(
            watch.line(3),
            ids(&[("a", true), ("b", false)]),
            "{}",
            watch.text()
        );
        plain.delete(&b);
        assert_eq!(watch.line(4), ids(&[("a", true)]), "{}", watch.text());
        // An operator's `deleteall` of the path, a's node with it.
        plain.delete_all(&path);
        assert!(a.starts_with(&path));
        assert_eq!(watch.line(5), ids(&[]), "{}", watch.text());
        // A redeploy makes the path again, and a member joins it.
        plain.create(&path, "", CreateMode::Persistent);
        plain.join(&path, "c");
        assert_eq!(watch.line(6), ids(&[("c", true)]), "{}", watch.text());
        // Nothing more happened: no line may follow.
        std::thread::sleep(QUIET);
        assert_eq!(
            watch.lines().len(),
            6,
            "{transport}: one line per change\n{}",
            watch.text()
        );
        println!("{transport}:\n{}", watch.text());
    }
}

/// A revocation request written into a mutex holder's node is a line of
/// `status --watch` when it is made, not at the next change of the queue:
/// the observer watches the holder's data (and only the holder's: a
/// request written into a waiter's node shows at the next change).
#[test]
fn status_watch_shows_a_revocation_request_when_it_is_made() {
    let server = ZkServer::start().unwrap_or_else(|e| panic!("cannot start ZooKeeper: {e}"));
    let zk = server.connect_string();
    let dir = tempfile::Builder::new()
        .prefix("zkelect-status-watch-revoke-test-")
        .tempdir()
        .expect("a temporary directory");
    let plain = Plain::connect(&zk);
    for transport in ["zookeeper-async", "zookeeper-client"] {
        let path = format!("/revoked-{transport}");
        plain.create(&path, "", CreateMode::Persistent);
        let mutex = format!("{path}/m_");
        let a = plain.create(&mutex, "a", CreateMode::EphemeralSequential);
        plain.create(&mutex, "b", CreateMode::EphemeralSequential);
        let watch = Watch::start(&zk, &path, transport, dir.path(), &["--recipe", "mutex"]);
        assert_eq!(
            watch.line(1),
            ids(&[("a", true), ("b", false)]),
            "{}",
            watch.text()
        );
        // Someone asks the holder to let go (Curator's bytes, as
        // `revoke --ask` writes them): the next line shows it, the queue
        // otherwise as it was.
        plain.set_data(&a, b"__REVOKE__");
        let entries = watch.entries(2);
        assert_eq!(entries.len(), 2, "{}", watch.text());
        assert_eq!(
            entries[0]["identity"],
            "revocation_request",
            "{}",
            watch.text()
        );
        assert_eq!(entries[0]["leader"], true, "{}", watch.text());
        assert_eq!(entries[0].get("id"), None, "{}", watch.text());
        assert_eq!(entries[1]["id"], "b", "{}", watch.text());
        // Nothing more happened: no line may follow.
        std::thread::sleep(QUIET);
        assert_eq!(
            watch.lines().len(),
            2,
            "{transport}: one line per change\n{}",
            watch.text()
        );
    }
}
