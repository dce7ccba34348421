//! A connect string whose chroot cannot hold the queue, against a real
//! server: a chroot that names no node, and one that names an ephemeral node
//! (which cannot have children). `zkelect run` and `zkelect lock` stop with a
//! clear error that names the chroot, exit 12 (`run`) or 125 with the kind
//! 12 in its message (`lock`), within 2 s and after fewer than 50 requests
//! (the server's own count, `mntr`'s `zk_packets_received`), on both
//! transports. Before, the core created the topmost level again at once,
//! forever: some 3,400 requests a second until the connect timeout.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use zkelect_tests::{TransportKind, ZkServer};
use zookeeper_async::{Acl, CreateMode, WatchedEvent, ZooKeeper};

use support::{zkelect, SESSION_MS};

/// `zkelect run`'s exit code for a missing or ephemeral chroot.
const NAMESPACE: i32 = 12;
/// `zkelect lock`'s exit code for any failure before its command ran.
const LOCK_FAILED: i32 = 125;

/// Holds an ephemeral node at `path` on its own session until dropped.
struct Ephemeral {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Ephemeral {
    fn hold(connect: &str, path: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready, created) = mpsc::channel();
        let (connect, path, held) = (connect.to_owned(), path.to_owned(), Arc::clone(&stop));
        let thread = thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let client = ZooKeeper::connect_with_retry_time(
                    &connect,
                    Duration::from_millis(SESSION_MS),
                    |_: WatchedEvent| {},
                    Duration::from_millis(100),
                )
                .await
                .expect("a plain client");
                let made = client
                    .create(
                        &path,
                        Vec::new(),
                        Acl::open_unsafe().clone(),
                        CreateMode::Ephemeral,
                    )
                    .await;
                ready
                    .send(made.map(|_| ()).map_err(|e| format!("{e:?}")))
                    .ok();
                while !held.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                let _ = client.close().await;
            });
        });
        created
            .recv_timeout(Duration::from_secs(20))
            .expect("the ephemeral node's client answered")
            .expect("the ephemeral node is created");
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Ephemeral {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The packets the server has received so far.
fn packets(server: &ZkServer) -> u64 {
    let mntr = server.mntr().expect("mntr");
    mntr.get("zk_packets_received")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no zk_packets_received in {mntr:?}"))
}

#[test]
fn a_missing_or_ephemeral_chroot_is_a_clear_error_within_2_s_after_a_few_requests() {
    let server = ZkServer::start().unwrap_or_else(|e| panic!("cannot start ZooKeeper: {e}"));
    let zk = server.connect_string();
    let _held = Ephemeral::hold(&zk, "/eph");
    for transport in TransportKind::ALL {
        for (chroot, says) in [
            ("/apps/x", "does not exist"),
            ("/eph", "is an ephemeral node"),
        ] {
            let connect = format!("{zk}{chroot}");
            let run = [
                "run",
                "--connect",
                &connect,
                "--path",
                "/svc/leader",
                "--id",
                "a",
                "--transport",
                transport.name(),
                "--",
                "sleep",
                "60",
            ];
            let lock = [
                "lock",
                "--connect",
                &connect,
                "--path",
                "/svc/lock",
                "--transport",
                transport.name(),
                "--",
                "true",
            ];
            for (args, code) in [(&run[..], NAMESPACE), (&lock[..], LOCK_FAILED)] {
                let what = format!("{} on {} with {chroot}", args[0], transport.name());
                let before = packets(&server);
                let out = zkelect(args, Duration::from_secs(20));
                let sent = packets(&server) - before;
                assert_eq!(out.code(), Some(code), "{what}:\n{}", out.stderr);
                assert!(
                    out.stderr.contains(&format!(
                        "the chroot {chroot} of --connect {connect} {says}"
                    )),
                    "{what}: the message names the chroot:\n{}",
                    out.stderr
                );
                if code == LOCK_FAILED {
                    assert!(out.stderr.contains("exit 12"), "{what}:\n{}", out.stderr);
                }
                assert!(out.took < Duration::from_secs(2), "{what}: {:?}", out.took);
                assert!(sent < 50, "{what}: {sent} packets reached the server");
                eprintln!("{what}: exit {code} in {:?}, {sent} packets", out.took);
            }
        }
    }
    // Nothing was made under either chroot, nor the missing chroot itself.
    let mntr = server.mntr().expect("mntr");
    eprintln!("znodes at the end: {:?}", mntr.get("zk_znode_count"));
}
