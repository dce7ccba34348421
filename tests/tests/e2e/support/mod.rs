//! The harness shared by the end-to-end tests of the `zkelect` binary
//! (`cli.rs`, `zombie.rs`): building and locating the
//! binary, running candidates as real processes, the supervised child that
//! records itself, and an observer of the children's deaths.
//!
//! # The supervised child and its clock
//!
//! The command `zkelect run` supervises is this very test binary, run as the
//! `heartbeat` binary of this package (`tests/src/bin/heartbeat.rs`) with [`BEATS_ENV`] naming a per-candidate
//! file (the variable passes through `zkelect run`, the `zkelect __lease`
//! watchdog and `setpriv` untouched). The child appends one line when it starts,
//! `start <ns> <token> <pid> <parent pid>` (the token from
//! `ZKELECT_FENCING_TOKEN`, the parent being the watchdog), then `alive <ns>`
//! every [`BEAT`], until it is killed. Each line is one `write(2)` on an
//! `O_APPEND` file, and readers only take complete lines.
//!
//! Every timestamp, the children's and the tests' alike, is `CLOCK_MONOTONIC`
//! in nanoseconds read with `clock_gettime(2)` ([`mono_ns`]): one clock for all
//! processes of the machine, never stepped by NTP or by hand (unlike
//! `date +%s%N`, which is the wall clock), with nanosecond resolution (unlike
//! `/proc/uptime`, 10 ms) and no fork per beat (unlike a `date` or `python3`
//! per line). So "the last beat of one child is earlier than the first beat of
//! the other" compares two readings of the same clock.
//!
//! A beat proves the child was alive at that instant; between beats it may
//! already be dead. The [`Observer`] closes that gap from the other side: it
//! polls `/proc/<pid>/stat` of every child (and watchdog) every 2 ms and records
//! when it first saw each one dead (gone or a zombie), an upper bound of the
//! moment of death, read on the same clock.
//!
//! # Processes
//!
//! Every process a [`Candidate`] starts (zkelect, the watchdog, the child)
//! inherits [`BEATS_ENV`], whose value is unique to the candidate; dropping the
//! candidate SIGKILLs every process whose environment holds it, found through
//! `/proc/*/environ`, so nothing outlives a test, whatever state it ended in.
//! zkelect itself is started through `setpriv --pdeathsig KILL`, so it also dies
//! with the test thread if the test process is killed without unwinding.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::time::{clock_gettime, ClockId};
use nix::unistd::Pid;

/// Names the file the supervised child appends its lines to.
pub(crate) const BEATS_ENV: &str = "ZKELECT_TEST_BEATS";
/// How often the child says it is alive.
pub(crate) const BEAT: Duration = Duration::from_millis(50);
/// The session timeout the candidates ask for (the fixture's servers allow
/// up to 4 s).
pub(crate) const SESSION_MS: u64 = 4_000;
/// The name of the helper test, as the test harness filters it.
/// A child that lives this long stops by itself: a last safety net for a
/// child nobody stopped (its lines would go nowhere anyway).
const SETPRIV: &str = "/usr/bin/setpriv";

/// `CLOCK_MONOTONIC` in nanoseconds: the one clock of every timestamp here.
pub(crate) fn mono_ns() -> i64 {
    let ts = clock_gettime(ClockId::CLOCK_MONOTONIC).expect("clock_gettime(CLOCK_MONOTONIC)");
    ts.tv_sec() * 1_000_000_000 + ts.tv_nsec()
}

/// Milliseconds between two [`mono_ns`] readings, for messages.
pub(crate) fn ms(from: i64, to: i64) -> f64 {
    (to - from) as f64 / 1e6
}

/// What `zkelect run` supervises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChildKind {
    /// The heartbeat child; it dies of SIGTERM.
    Beats,
    /// The heartbeat child with SIGTERM ignored (`trap '' TERM` in `sh`, which
    /// `exec` keeps): only SIGKILL stops it.
    Stubborn,
    /// The heartbeat child that exits 0 by itself after this many ms (a
    /// `zkelect lock` command doing its work).
    Lives(u32),
    /// The heartbeat child under a shell that, on SIGTERM, appends `term`
    /// to `<beats file>.stop`, takes this many ms to finish, appends `done`
    /// and exits 0: a command that stops gracefully (see [`stop_lines`]).
    Graceful(u32),
}

/// The lines a [`ChildKind::Graceful`] child wrote on SIGTERM, each with
/// when it was first read ([`mono_ns`]); polled until `until` holds of them
/// or `within` passes.
pub(crate) fn stop_lines(
    beats: &Path,
    within: Duration,
    until: impl Fn(&[(String, i64)]) -> bool,
) -> Vec<(String, i64)> {
    let file = PathBuf::from(format!("{}.stop", beats.display()));
    let deadline = Instant::now() + within;
    let mut seen: Vec<(String, i64)> = Vec::new();
    while !until(&seen) && Instant::now() < deadline {
        let text = fs::read_to_string(&file).unwrap_or_default();
        let now = mono_ns();
        for line in text.lines().skip(seen.len()) {
            seen.push((line.to_owned(), now));
        }
        thread::sleep(Duration::from_millis(1));
    }
    seen
}

/// The command line after `--` that runs the heartbeat child.
pub(crate) fn child_command(kind: ChildKind) -> Vec<OsString> {
    // The heartbeat binary of this package (tests/src/bin/heartbeat.rs).
    let exe = env!("CARGO_BIN_EXE_heartbeat");
    let mut cmd: Vec<OsString> = Vec::new();
    if kind == ChildKind::Stubborn {
        cmd.extend(["sh", "-c", "trap '' TERM; exec \"$0\" \"$@\""].map(OsString::from));
    }
    if let ChildKind::Graceful(ms) = kind {
        let stop = format!("\"${BEATS_ENV}.stop\"");
        let script = format!(
            "trap 'echo term >> {stop}; sleep {}; echo done >> {stop}; exit 0' TERM; \"$0\" & wait",
            f64::from(ms) / 1000.0
        );
        cmd.extend(["sh".into(), "-c".into(), OsString::from(script)]);
    }
    cmd.push(OsString::from(exe));
    if let ChildKind::Lives(ms) = kind {
        cmd.push(OsString::from(ms.to_string()));
    }
    cmd
}

/// The `zkelect` binary of this workspace, built on first use.
///
/// It lives next to this test binary's profile directory
/// (`<target dir>/debug/zkelect`, so `CARGO_TARGET_DIR` is honoured). Tests
/// cannot depend on another package's binary, so it is (re)built here with
/// `cargo build --workspace --tests --bin zkelect`: a no-op when it is up to
/// date, and never a stale binary from an older checkout.
///
/// Why the whole workspace and its tests: that resolves every dependency's
/// features as `cargo test --workspace` (and nextest) does, so the binary is
/// the very one the test run has just built, and this costs a check (0.3 s).
/// `-p zkelect-cli` alone resolves fewer features (no dev-dependencies), a
/// second build of tokio and everything above it: on a cold run that build
/// fell inside the first command-line tests and took about two minutes.
/// Where the workspace's tests are not built yet (`cargo test -p
/// zkelect-tests` alone, on a fresh checkout), the first command-line test
/// builds them, once.
pub(crate) fn zkelect_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(build_zkelect)
}

fn build_zkelect() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // <target dir>/<profile>/deps/<this test>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary lives in <target>/<profile>/deps");
    let target_dir = profile_dir.parent().expect("<target>/<profile>");
    let bin = target_dir.join("debug").join("zkelect");
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let started = Instant::now();
    let out = Command::new(&cargo)
        .current_dir(workspace)
        .args([
            "build",
            "--quiet",
            "--workspace",
            "--tests",
            "--bin",
            "zkelect",
        ])
        .arg("--target-dir")
        .arg(target_dir)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo:?} to build the zkelect binary: {e}"));
    assert!(
        out.status.success(),
        "`cargo build --workspace --tests --bin zkelect` failed ({}); these tests run that binary:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        bin.is_file(),
        "`cargo build --workspace --tests --bin zkelect` succeeded but {} does not exist",
        bin.display()
    );
    eprintln!(
        "zkelect binary: {} (checked/built in {:?})",
        bin.display(),
        started.elapsed()
    );
    bin
}

/// How a `zkelect` command that ran to its end went.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) took: Duration,
}

impl Outcome {
    /// The exit code (`None` if killed by a signal).
    pub(crate) fn code(&self) -> Option<i32> {
        self.status.code()
    }
}

/// Runs `zkelect ARGS…` to its end; panics if it takes longer than `within`
/// (after killing it), so a hang is a failure, never a stuck test.
pub(crate) fn zkelect(args: &[&str], within: Duration) -> Outcome {
    let bin = zkelect_bin(); // may build it: not part of the time taken
    let started = Instant::now();
    let mut child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn zkelect");
    let stdout = reader(child.stdout.take().expect("piped stdout"));
    let stderr = reader(child.stderr.take().expect("piped stderr"));
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for zkelect") {
            break status;
        }
        if started.elapsed() > within {
            let _ = child.kill();
            let _ = child.wait();
            let err = stderr.join().unwrap_or_default();
            panic!(
                "`zkelect {}` did not finish within {within:?}; stderr:\n{err}",
                args.join(" ")
            );
        }
        thread::sleep(Duration::from_millis(5));
    };
    let took = started.elapsed();
    Outcome {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
        took,
    }
}

fn reader(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// One candidate's node as `zkelect status --json` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) id: Option<String>,
    pub(crate) node: String,
    pub(crate) leader: bool,
    pub(crate) watches: Option<String>,
    pub(crate) session: Option<String>,
}

/// The queue of the election at `path`, oldest first, from `zkelect status --json`.
pub(crate) fn queue(connect: &str, path: &str) -> Vec<Entry> {
    let out = zkelect(
        &["status", "--connect", connect, "--path", path, "--json"],
        Duration::from_secs(20),
    );
    assert_eq!(
        out.code(),
        Some(0),
        "zkelect status failed:\n{}",
        out.stderr
    );
    let view: serde_json::Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("status --json printed no JSON ({e}):\n{}", out.stdout));
    let text = |v: &serde_json::Value| v.as_str().map(str::to_owned);
    view["queue"]
        .as_array()
        .unwrap_or_else(|| panic!("no queue in {view}"))
        .iter()
        .map(|e| Entry {
            id: text(&e["id"]),
            node: text(&e["node"]).expect("every entry has a node"),
            leader: e["leader"].as_bool().expect("every entry says if it leads"),
            watches: text(&e["watches"]),
            session: text(&e["session"]),
        })
        .collect()
}

/// The ids in the queue, oldest first.
pub(crate) fn queue_ids(connect: &str, path: &str) -> Vec<String> {
    queue(connect, path)
        .into_iter()
        .map(|e| e.id.unwrap_or_else(|| "?".into()))
        .collect()
}

/// A plain zookeeper-async client of `zk`, with the runtime that drives it:
/// the tests' own eyes on the server, independent of zkelect's code.
fn plain_client(zk: &str) -> (tokio::runtime::Runtime, ::zookeeper_async::ZooKeeper) {
    use ::zookeeper_async::{WatchedEvent, ZooKeeper};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let client = runtime.block_on(async {
        ZooKeeper::connect_with_retry_time(
            zk,
            Duration::from_millis(SESSION_MS),
            |_: WatchedEvent| {},
            Duration::from_millis(100),
        )
        .await
        .expect("a plain client")
    });
    (runtime, client)
}

/// The ids of the nodes under `path` (each node's data up to its first
/// newline), in sequence order, read with a plain zookeeper-async client
/// (not with `zkelect status`, which some tests check against it): the
/// witness of what a process left on the server.
pub(crate) fn node_ids(zk: &str, path: &str) -> Vec<String> {
    let (runtime, client) = plain_client(zk);
    runtime.block_on(async {
        let mut names = client.get_children(path, false).await.unwrap_or_default();
        // The sequence number is the name's last ten digits.
        names.sort_by(|a, b| a[a.len().saturating_sub(10)..].cmp(&b[b.len().saturating_sub(10)..]));
        let mut ids = Vec::new();
        for name in names {
            if let Ok((data, _)) = client.get_data(&format!("{path}/{name}"), false).await {
                let id = data.split(|&b| b == b'\n').next().unwrap_or_default();
                ids.push(String::from_utf8_lossy(id).into_owned());
            }
        }
        let _ = client.close().await;
        ids
    })
}

/// Each node under `path` with its ACL as the server reports it, as
/// `scheme:id:bits` (ZooKeeper's bits: r 1, w 2, c 4, d 8, a 16), sorted;
/// and the ACL of `path` itself under `""`. Read with a plain client.
pub(crate) fn acls_under(zk: &str, path: &str) -> Vec<(String, Vec<String>)> {
    let texts = |acl: Vec<::zookeeper_async::Acl>| {
        use ::zookeeper_async::Permission as P;
        let mut t: Vec<String> = acl
            .iter()
            .map(|a| {
                let bits = [P::READ, P::WRITE, P::CREATE, P::DELETE, P::ADMIN]
                    .into_iter()
                    .zip([1u32, 2, 4, 8, 16])
                    .filter(|(p, _)| a.perms & *p == *p)
                    .fold(0, |all, (_, bit)| all | bit);
                format!("{}:{}:{bits}", a.scheme, a.id)
            })
            .collect();
        t.sort();
        t
    };
    let (runtime, client) = plain_client(zk);
    runtime.block_on(async {
        let mut out = Vec::new();
        if let Ok((acl, _)) = client.get_acl(path).await {
            out.push((String::new(), texts(acl)));
        }
        let mut names = client.get_children(path, false).await.unwrap_or_default();
        names.sort();
        for name in names {
            if let Ok((acl, _)) = client.get_acl(&format!("{path}/{name}")).await {
                out.push((name, texts(acl)));
            }
        }
        let _ = client.close().await;
        out
    })
}

/// Whether process `pid` catches every one of `signals` (its
/// `/proc/<pid>/status` says so in `SigCgt`): from then on they cannot kill
/// it by their default action.
pub(crate) fn catches(pid: i32, signals: &[Signal]) -> bool {
    let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let Some(mask) = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
    else {
        return false;
    };
    signals
        .iter()
        .all(|&s| mask & (1_u64 << (s as i32 - 1)) != 0)
}

/// Polls `probe` every `every` until it yields, or panics after `within`
/// saying what was awaited (and `context()`, e.g. the logs).
pub(crate) fn wait_for<T>(
    what: &str,
    within: Duration,
    every: Duration,
    mut probe: impl FnMut() -> Option<T>,
    context: impl FnOnce() -> String,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        if Instant::now() > deadline {
            panic!(
                "timed out after {within:?} waiting for {what}\n{}",
                context()
            );
        }
        thread::sleep(every);
    }
}

/// A port on which nothing listens (it was bound and released).
pub(crate) fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a loopback port")
        .port()
}

/// One run of a supervised child, from its beat file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    /// `ZKELECT_FENCING_TOKEN`.
    pub(crate) token: u64,
    pub(crate) pid: i32,
    /// The child's parent: the lease watchdog.
    pub(crate) watchdog: i32,
    /// When it started, [`mono_ns`].
    pub(crate) start: i64,
    /// Its last sign of life (the start if it never beat).
    pub(crate) last: i64,
    pub(crate) beats: u32,
}

/// The runs recorded in a beat file, in order (none if it does not exist).
pub(crate) fn read_runs(path: &Path) -> Vec<Run> {
    let text = fs::read_to_string(path).unwrap_or_default();
    let mut runs: Vec<Run> = Vec::new();
    // Complete lines only: the child may be writing the next one.
    for line in text.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let num = |s: &str| -> i64 {
            s.parse()
                .unwrap_or_else(|_| panic!("bad number {s:?} in {}: {line:?}", path.display()))
        };
        match fields.as_slice() {
            ["start", at, token, pid, ppid] => runs.push(Run {
                token: token
                    .parse()
                    .unwrap_or_else(|_| panic!("ZKELECT_FENCING_TOKEN {token:?} is not a number")),
                pid: num(pid) as i32,
                watchdog: num(ppid) as i32,
                start: num(at),
                last: num(at),
                beats: 0,
            }),
            ["alive", at] => {
                let run = runs
                    .last_mut()
                    .unwrap_or_else(|| panic!("a beat before any start in {}", path.display()));
                run.last = num(at);
                run.beats += 1;
            }
            _ => panic!("unexpected line in {}: {line:?}", path.display()),
        }
    }
    runs
}

/// Whether `pid` is a live process (not gone, not a zombie).
pub(crate) fn alive(pid: i32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // pid (comm) S …: the state follows the last ')'.
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    !matches!(state, Some("Z" | "X" | "x"))
}

/// Processes whose environment holds `marker` (e.g. `BEATS_ENV=<file>`),
/// except this one.
pub(crate) fn processes_with_env(marker: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let needle = marker.as_bytes();
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|&pid| {
            fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|&b| b == 0).any(|var| var == needle))
                .unwrap_or(false)
        })
        .filter(|&pid| alive(pid))
        .collect()
}

/// Records when each supervised child (and its watchdog) was first seen dead.
pub(crate) struct Observer {
    deaths: Arc<Mutex<Vec<(i32, i64)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Observer {
    /// Watches the children recorded in every `*.beats` file of `dir`.
    pub(crate) fn start(dir: &Path) -> Observer {
        let deaths = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (dir, deaths, stop) = (dir.to_path_buf(), deaths.clone(), stop.clone());
            thread::Builder::new()
                .name("death-observer".into())
                .spawn(move || observe(&dir, &deaths, &stop))
                .expect("spawn the observer")
        };
        Observer {
            deaths,
            stop,
            thread: Some(thread),
        }
    }

    /// When `pid` was first seen dead, if it was.
    pub(crate) fn death_seen(&self, pid: i32) -> Option<i64> {
        assert!(
            !self.thread.as_ref().is_some_and(JoinHandle::is_finished),
            "the observer thread died (its panic is printed above)"
        );
        let deaths = self.deaths.lock().unwrap_or_else(PoisonError::into_inner);
        deaths.iter().find(|(p, _)| *p == pid).map(|(_, at)| *at)
    }

    /// Waits until `pid` is seen dead and returns when.
    pub(crate) fn wait_death(&self, pid: i32, what: &str, within: Duration) -> i64 {
        wait_for(
            what,
            within,
            Duration::from_millis(5),
            || self.death_seen(pid),
            || format!("process {pid} alive: {}", alive(pid)),
        )
    }
}

fn observe(dir: &Path, deaths: &Mutex<Vec<(i32, i64)>>, stop: &AtomicBool) {
    let mut watched: Vec<i32> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        if let Ok(entries) = fs::read_dir(dir) {
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().is_some_and(|e| e == "beats") {
                    for run in read_runs(&path) {
                        for pid in [run.pid, run.watchdog] {
                            if !watched.contains(&pid) {
                                watched.push(pid);
                            }
                        }
                    }
                }
            }
        }
        let mut seen = deaths.lock().unwrap_or_else(PoisonError::into_inner);
        for &pid in &watched {
            if !seen.iter().any(|(p, _)| *p == pid) && !alive(pid) {
                // Read after the check: an upper bound of the moment of death.
                seen.push((pid, mono_ns()));
            }
        }
        drop(seen);
        thread::sleep(Duration::from_millis(2));
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Checks that no two runs of the given files overlap: sorted by start, each
/// run's last beat is earlier than the next run's first line. Returns the runs
/// in that order, with their file names.
pub(crate) fn assert_one_at_a_time(files: &[&Path]) -> Vec<(String, Run)> {
    let mut all: Vec<(String, Run)> = files
        .iter()
        .flat_map(|f| {
            let name = f
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            read_runs(f).into_iter().map(move |r| (name.clone(), r))
        })
        .collect();
    all.sort_by_key(|(_, r)| r.start);
    for pair in all.windows(2) {
        let ((a_name, a), (b_name, b)) = (&pair[0], &pair[1]);
        assert!(
            a.last < b.start,
            "two children alive at once: {a_name}'s child (token {}) beat at {} ms, \
             {} ms after {b_name}'s child (token {}) started; runs: {all:#?}",
            a.token,
            a.last,
            ms(b.start, a.last),
            b.token
        );
    }
    all
}

/// A `zkelect run` process and the files it writes, killed (with everything it
/// started) on drop.
pub(crate) struct Candidate {
    pub(crate) id: String,
    pub(crate) label: String,
    /// The beat file of its child.
    pub(crate) beats: PathBuf,
    /// zkelect's stdout and stderr (and the child's output).
    pub(crate) log: PathBuf,
    child: Child,
    exit: Option<ExitStatus>,
}

/// The `zkelect run` options before `--` for one candidate.
pub(crate) fn run_args(connect: &str, path: &str, id: &str) -> Vec<String> {
    [
        "run",
        "--connect",
        connect,
        "--path",
        path,
        "--id",
        id,
        "--session-timeout",
        &SESSION_MS.to_string(),
    ]
    .map(str::to_owned)
    .to_vec()
}

impl Candidate {
    /// Starts `zkelect ARGS -- <heartbeat child>`; `label` names its files
    /// in `dir` (`<label>.beats`, `<label>.log`).
    pub(crate) fn spawn(dir: &Path, label: &str, args: &[String], kind: ChildKind) -> Candidate {
        let beats = dir.join(format!("{label}.beats"));
        let log = dir.join(format!("{label}.log"));
        let out = File::create(&log).expect("create the log file");
        let mut cmd = if Path::new(SETPRIV).is_file() {
            let mut c = Command::new(SETPRIV);
            c.args(["--pdeathsig", "KILL", "--"]).arg(zkelect_bin());
            c
        } else {
            Command::new(zkelect_bin())
        };
        let child = cmd
            .args(args)
            .arg("--")
            .args(child_command(kind))
            .env(BEATS_ENV, &beats)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("clone the log file"))
            .stderr(out)
            .spawn()
            .expect("spawn zkelect run");
        let id = args
            .iter()
            .position(|a| a == "--id")
            .and_then(|i| args.get(i + 1))
            .cloned()
            .unwrap_or_default();
        Candidate {
            id,
            label: label.to_owned(),
            beats,
            log,
            child,
            exit: None,
        }
    }

    pub(crate) fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends `signal` to zkelect alone (not to its watchdog or child).
    pub(crate) fn signal(&self, signal: Signal) {
        assert!(self.exit.is_none(), "{} already exited", self.label);
        kill(Pid::from_raw(self.pid()), signal)
            .unwrap_or_else(|e| panic!("{signal} to {}: {e}", self.label));
    }

    /// The runs of its child so far.
    pub(crate) fn runs(&self) -> Vec<Run> {
        read_runs(&self.beats)
    }

    /// Waits for the child's `n`-th run (from 1) to start.
    pub(crate) fn wait_run(&self, n: usize, within: Duration) -> Run {
        wait_for(
            &format!("run {n} of {}'s child", self.label),
            within,
            Duration::from_millis(2),
            || self.runs().get(n - 1).copied(),
            || self.log_text(),
        )
    }

    /// Waits until the child's `n`-th run (from 1) has beaten `beats` times.
    pub(crate) fn wait_beats(&self, n: usize, beats: u32, within: Duration) -> Run {
        wait_for(
            &format!("{beats} beats of run {n} of {}'s child", self.label),
            within,
            Duration::from_millis(5),
            || self.runs().get(n - 1).copied().filter(|r| r.beats >= beats),
            || self.log_text(),
        )
    }

    /// Waits until the child's `n`-th run (from 1) beats after `at` ([`mono_ns`]).
    pub(crate) fn wait_beat_after(&self, n: usize, at: i64, within: Duration) -> Run {
        wait_for(
            &format!("run {n} of {}'s child to beat again", self.label),
            within,
            Duration::from_millis(5),
            || self.runs().get(n - 1).copied().filter(|r| r.last > at),
            || self.log_text(),
        )
    }

    /// Its exit status, if it exited.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().expect("wait for zkelect");
        }
        self.exit
    }

    /// Waits for it to exit.
    pub(crate) fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let label = self.label.clone();
        let log = self.log.clone();
        wait_for(
            &format!("{label} to exit"),
            within,
            Duration::from_millis(5),
            || self.exited(),
            || fs::read_to_string(&log).unwrap_or_default(),
        )
    }

    pub(crate) fn log_text(&self) -> String {
        format!(
            "--- {} ({}) log:\n{}",
            self.label,
            self.log.display(),
            fs::read_to_string(&self.log).unwrap_or_default()
        )
    }

    /// Live processes it started (zkelect included), found by their environment.
    pub(crate) fn processes(&self) -> Vec<i32> {
        processes_with_env(&format!("{BEATS_ENV}={}", self.beats.display()))
    }

    /// Kills zkelect and everything it started.
    pub(crate) fn kill_all(&mut self) {
        if self.exited().is_none() {
            let _ = kill(Pid::from_raw(self.pid()), Signal::SIGKILL);
            let _ = self.child.wait();
        }
        // Twice: a process may have been forking while the first pass ran.
        for _ in 0..2 {
            for pid in self.processes() {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

impl Drop for Candidate {
    fn drop(&mut self) {
        self.kill_all();
    }
}
