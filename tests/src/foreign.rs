//! Foreign contenders: real Apache Curator and real kazoo elections run as
//! processes of their own, each a *witness* of its own belief of leadership.
//!
//! The programs live in `tests/interop/`:
//!
//! * `CuratorLatch.java`: one Curator 5.4 `LeaderLatch` (Debian's
//!   `libcurator-*-java`), compiled once per test process with `javac` and
//!   cached under the system's temporary directory, keyed by the sources;
//! * `CuratorLock.java`: Curator 5.4's `InterProcessMutex` (revocable),
//!   `InterProcessMultiLock` and `Revoker`, driven by commands on stdin
//!   ([`Foreign::spawn_curator_lock`], [`Foreign::send`]), compiled with it;
//! * `kazoo_election.py`: one kazoo 2.8 `Election` (Debian's
//!   `python3-kazoo`), run by `/usr/bin/python3`.
//!
//! Each prints one line per change of what it believes, stamped with its own
//! reading of `CLOCK_MONOTONIC` (Java's `System.nanoTime`, Python's
//! `time.monotonic_ns`), the clock behind [`std::time::Instant`] on Linux:
//! [`Line::at`] converts the stamp to an `Instant`, so a foreign process's
//! belief compares directly with a zkelect candidate's recorded role change.
//!
//! Missing tools are an error ([`ForeignError::NotInstalled`], which says to
//! run `scripts/test-deps.sh`), never a skipped test. Overrides:
//! `ZKELECT_JAVAC` (else `$JAVA_HOME/bin/javac`, `/usr/bin/javac`, `javac` on
//! `PATH`), `ZKELECT_CURATOR_CLASSPATH` (a complete `:`-separated class path
//! for Curator, its dependencies and the ZooKeeper client), `ZKELECT_PYTHON`
//! (an interpreter that can `import kazoo`; default `/usr/bin/python3`), and
//! `ZKELECT_JAVA` as for the servers ([`ZkInstall`]).
//!
//! Every process runs in its own process group, is killed with the test
//! process (`setpriv --pdeathsig KILL`, as the servers), and is killed when
//! its [`Foreign`] is dropped. Its command line carries
//! `-Dzkelect.fixture=foreign-<id>` (Java) or the script's path (Python), so a
//! leftover is found with `pgrep -f 'zkelect.fixture|kazoo_election'`.

use std::collections::hash_map::DefaultHasher;
use std::env;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::time::{clock_gettime, ClockId};
use nix::unistd::Pid;

use crate::install::ZkInstall;
use crate::process::{command_with_deathsig, spawn_child};

/// What to tell someone whose machine lacks Curator, `javac` or kazoo.
pub const FOREIGN_DEPS_HINT: &str =
    "run `scripts/test-deps.sh` (as root, or as a user with sudo) to install Debian's \
     `libcurator-recipes-java`, `libcurator-framework-java`, `libcurator-client-java`, \
     `default-jdk-headless` and `python3-kazoo`";

/// Where Debian puts its jars.
const DEBIAN_JAVA_DIR: &str = "/usr/share/java";

/// Curator 5.4's LeaderLatch, the jars it needs and the ZooKeeper client
/// (Debian layout). `curator-recipes.jar`'s manifest names the others too;
/// they are listed so that a half-installed machine fails clearly.
const CURATOR_JARS: &[&str] = &[
    "curator-recipes.jar",
    "curator-framework.jar",
    "curator-client.jar",
    "guava.jar",
    "slf4j-api.jar",
    "zookeeper.jar",
    "zookeeper-jute.jar",
];

/// The Curator programs' sources, in this crate: the election contender
/// and the lock holder.
const CURATOR_SOURCES: [&str; 2] = [
    concat!(env!("CARGO_MANIFEST_DIR"), "/interop/CuratorLatch.java"),
    concat!(env!("CARGO_MANIFEST_DIR"), "/interop/CuratorLock.java"),
];
/// Their texts, the key of the compiled classes' cache.
const CURATOR_SOURCE_TEXTS: [&str; 2] = [
    include_str!("../interop/CuratorLatch.java"),
    include_str!("../interop/CuratorLock.java"),
];
/// The classes javac makes of them that are run (checked for in the cache).
const CURATOR_CLASSES: [&str; 2] = ["CuratorLatch.class", "CuratorLock.class"];
/// The kazoo contender's script, in this crate.
const KAZOO_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/interop/kazoo_election.py");
/// Debian's interpreter, the one `python3-kazoo` installs for (`python3` on
/// `PATH` may be another one without kazoo).
const DEBIAN_PYTHON: &str = "/usr/bin/python3";

/// How long a foreign process may take to say it runs: a JVM start plus a
/// session, on a loaded two-core machine.
pub const FOREIGN_START: Duration = Duration::from_secs(30);

/// Errors of the foreign contenders.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForeignError {
    /// A tool or library is missing on this machine.
    #[error("{what} not found; install the test dependencies: {hint}")]
    NotInstalled {
        /// What is missing (with the places looked at).
        what: String,
        /// How to install it.
        hint: String,
    },
    /// `javac` refused the Curator contender.
    #[error("javac failed on {source_file} ({status}):\n{output}")]
    Compile {
        /// The source file.
        source_file: String,
        /// javac's exit status.
        status: String,
        /// javac's output.
        output: String,
    },
    /// A filesystem, pipe or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The process did not do what was awaited in time.
    #[error("{id}: timed out after {timeout:?} waiting for {what}\n{log}")]
    Timeout {
        /// The contender.
        id: String,
        /// What was awaited.
        what: String,
        /// How long.
        timeout: Duration,
        /// Its output so far.
        log: String,
    },
    /// The process exited before doing what was awaited.
    #[error("{id}: exited ({status}) while waiting for {what}\n{log}")]
    Exited {
        /// The contender.
        id: String,
        /// What was awaited.
        what: String,
        /// Its exit status.
        status: String,
        /// Its output.
        log: String,
    },
}

/// Shorthand for results of this module.
pub type Result<T, E = ForeignError> = std::result::Result<T, E>;

fn io_error(context: impl Into<String>) -> impl FnOnce(io::Error) -> ForeignError {
    let context = context.into();
    move |source| ForeignError::Io { context, source }
}

/// Which library's election a foreign process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Library {
    /// Apache Curator 5.4 `LeaderLatch` (Java).
    Curator,
    /// kazoo 2.8 `Election` (Python).
    Kazoo,
}

impl Library {
    /// `curator` or `kazoo`.
    pub fn name(self) -> &'static str {
        match self {
            Library::Curator => "curator",
            Library::Kazoo => "kazoo",
        }
    }

    /// Checks (once per process) that this library's program can run here,
    /// compiling the Curator contender if needed.
    ///
    /// # Errors
    ///
    /// [`ForeignError::NotInstalled`] naming what is missing, or why the
    /// Curator contender cannot be compiled.
    pub fn check(self) -> Result<()> {
        match self {
            Library::Curator => curator().map(|_| ()),
            Library::Kazoo => kazoo_python().map(|_| ()),
        }
    }
}

impl fmt::Display for Library {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

// ----- the clock ---------------------------------------------------------------

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock every foreign line is
/// stamped with.
pub fn mono_ns() -> i64 {
    // CLOCK_MONOTONIC cannot fail on Linux; 0 would only make stamps wrong,
    // never panic a fixture.
    clock_gettime(ClockId::CLOCK_MONOTONIC)
        .map(|ts| ts.tv_sec() * 1_000_000_000 + ts.tv_nsec())
        .unwrap_or(0)
}

/// The `Instant` of a `CLOCK_MONOTONIC` reading (`Instant` reads the same
/// clock on Linux; the offset is measured once, to within the gap between two
/// consecutive reads).
pub fn instant_of_mono(ns: i64) -> Instant {
    static BASE: OnceLock<(Instant, i64)> = OnceLock::new();
    let (base, base_ns) = *BASE.get_or_init(|| (Instant::now(), mono_ns()));
    let delta = ns - base_ns;
    let magnitude = Duration::from_nanos(delta.unsigned_abs());
    if delta >= 0 {
        base + magnitude
    } else {
        base.checked_sub(magnitude).unwrap_or(base)
    }
}

// ----- finding and building the programs -----------------------------------------

/// `java`, and the class path with the compiled Curator contender first.
#[derive(Debug, Clone)]
struct CuratorRuntime {
    java: PathBuf,
    classpath: String,
}

fn curator() -> Result<CuratorRuntime> {
    // Built once per process; a failure is kept as its (what, hint) so that
    // every test that needs Curator fails with the same message.
    static CURATOR: OnceLock<std::result::Result<CuratorRuntime, (String, String)>> =
        OnceLock::new();
    CURATOR
        .get_or_init(|| {
            build_curator().map_err(|e| match e {
                ForeignError::NotInstalled { what, hint } => (what, hint),
                other => (
                    format!("a working Curator contender ({other})"),
                    FOREIGN_DEPS_HINT.to_owned(),
                ),
            })
        })
        .clone()
        .map_err(|(what, hint)| ForeignError::NotInstalled { what, hint })
}

fn build_curator() -> Result<CuratorRuntime> {
    let java = ZkInstall::detect()
        .map_err(|e| ForeignError::NotInstalled {
            what: format!("java ({e})"),
            hint: FOREIGN_DEPS_HINT.into(),
        })?
        .java;
    let javac = find_javac()?;
    let jars = curator_classpath()?;
    let classes = compile_curator(&javac, &jars)?;
    Ok(CuratorRuntime {
        java,
        classpath: format!("{}:{jars}", classes.display()),
    })
}

fn env_path(name: &str) -> Option<PathBuf> {
    env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn find_javac() -> Result<PathBuf> {
    if let Some(javac) = env_path("ZKELECT_JAVAC") {
        return if javac.is_file() {
            Ok(javac)
        } else {
            Err(ForeignError::NotInstalled {
                what: format!("javac (ZKELECT_JAVAC={})", javac.display()),
                hint: FOREIGN_DEPS_HINT.into(),
            })
        };
    }
    let mut candidates = Vec::new();
    if let Some(home) = env_path("JAVA_HOME") {
        candidates.push(home.join("bin/javac"));
    }
    candidates.push(PathBuf::from("/usr/bin/javac"));
    if let Some(path) = env::var_os("PATH") {
        candidates.extend(env::split_paths(&path).map(|dir| dir.join("javac")));
    }
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| ForeignError::NotInstalled {
            what: "javac (not in $ZKELECT_JAVAC, $JAVA_HOME/bin, /usr/bin or PATH)".into(),
            hint: FOREIGN_DEPS_HINT.into(),
        })
}

fn curator_classpath() -> Result<String> {
    if let Some(cp) = env::var_os("ZKELECT_CURATOR_CLASSPATH").filter(|v| !v.is_empty()) {
        return cp.into_string().map_err(|cp| ForeignError::NotInstalled {
            what: format!("Curator (ZKELECT_CURATOR_CLASSPATH={cp:?} is not UTF-8)"),
            hint: FOREIGN_DEPS_HINT.into(),
        });
    }
    let dir = Path::new(DEBIAN_JAVA_DIR);
    let (present, missing): (Vec<PathBuf>, Vec<PathBuf>) = CURATOR_JARS
        .iter()
        .map(|jar| dir.join(jar))
        .partition(|p| p.is_file());
    if !missing.is_empty() {
        let missing: Vec<String> = missing.iter().map(|p| p.display().to_string()).collect();
        return Err(ForeignError::NotInstalled {
            what: format!("Curator 5.4 (missing {})", missing.join(", ")),
            hint: format!("{FOREIGN_DEPS_HINT}; or set ZKELECT_CURATOR_CLASSPATH"),
        });
    }
    let mut jars: Vec<String> = present.iter().map(|p| p.display().to_string()).collect();
    // A logger, if there is one, so that Curator's and ZooKeeper's warnings
    // reach the process's stderr (kept for failure messages).
    let simple = dir.join("slf4j-simple.jar");
    if simple.is_file() {
        jars.push(simple.display().to_string());
    }
    Ok(jars.join(":"))
}

/// Compiles the Curator programs into a directory under the system's
/// temporary directory named after the sources' hash, unless it is there
/// already: one `javac` per source version, shared by every test binary
/// and run.
fn compile_curator(javac: &Path, classpath: &str) -> Result<PathBuf> {
    let mut hasher = DefaultHasher::new();
    CURATOR_SOURCE_TEXTS.hash(&mut hasher);
    classpath.hash(&mut hasher);
    let dir = env::temp_dir().join(format!("zkelect-curator-latch-{:016x}", hasher.finish()));
    let complete = |dir: &Path| CURATOR_CLASSES.iter().all(|c| dir.join(c).is_file());
    if complete(&dir) {
        return Ok(dir);
    }
    // Compiled next to it and renamed into place, so that two test processes
    // compiling at once never see a half-written directory.
    let staging = tempfile::Builder::new()
        .prefix("zkelect-curator-latch-build-")
        .tempdir()
        .map_err(io_error("cannot create a directory for javac's output"))?;
    let output = Command::new(javac)
        .args([
            "-Xlint:all,-path",
            "-encoding",
            "UTF-8",
            "-cp",
            classpath,
            "-d",
        ])
        .arg(staging.path())
        .args(CURATOR_SOURCES)
        .output()
        .map_err(io_error(format!("cannot run {}", javac.display())))?;
    if !output.status.success() {
        return Err(ForeignError::Compile {
            source_file: CURATOR_SOURCES.join(" "),
            status: output.status.to_string(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
        });
    }
    let built = staging.keep();
    if std::fs::rename(&built, &dir).is_err() {
        // Someone else won the race (or the directory is stale and
        // incomplete): use theirs if it is complete.
        let _ = std::fs::remove_dir_all(&built);
        if !complete(&dir) {
            return Err(ForeignError::Io {
                context: format!("cannot move javac's output to {}", dir.display()),
                source: io::Error::other("the directory exists without every class"),
            });
        }
    }
    Ok(dir)
}

/// `java` ready to run the Curator program `main` for contender `id`.
fn curator_command(main: &str, id: &str) -> Result<Command> {
    let runtime = curator()?;
    let mut c = command_with_deathsig(&runtime.java);
    c.arg(format!("-Dzkelect.fixture=foreign-{id}"))
        // A small, quickly started JVM: it runs one recipe.
        .args([
            "-Xmx64m",
            "-Xss512k",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-cp",
        ])
        .arg(&runtime.classpath)
        .arg(main);
    Ok(c)
}

fn kazoo_python() -> Result<PathBuf> {
    static PYTHON: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let python = env_path("ZKELECT_PYTHON").unwrap_or_else(|| PathBuf::from(DEBIAN_PYTHON));
            let imported = Command::new(&python)
                .args(["-c", "import kazoo"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if imported {
                Ok(python)
            } else {
                Err(format!(
                    "kazoo ({} cannot `import kazoo`)",
                    python.display()
                ))
            }
        })
        .clone()
        .map_err(|what| ForeignError::NotInstalled {
            what,
            hint: FOREIGN_DEPS_HINT.into(),
        })
}

// ----- what a foreign process says -----------------------------------------------

/// The kind of a line a foreign contender printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// Its election is started (its node may not exist yet).
    Started,
    /// Its node (the detail, a full path) exists.
    Node,
    /// It believes it leads.
    Leader,
    /// It believes it does not lead (also its first belief).
    Follower,
    /// A connection state change (the detail is the library's name for it).
    State,
    /// It was asked to close: from here on it does not act as leader.
    Closing,
    /// It closed its election and its client, and exits.
    Closed,
    /// Something failed (the detail says what).
    Error,
    /// A lock holder's revocation listener ran: someone asked it to let go.
    Revoke,
    /// A lock holder finished a command (the detail names it).
    Done,
    /// Its stdout closed (it exited, or is about to): stamped on arrival.
    Eof,
    /// A line this module does not know (kept whole in the detail).
    Other,
}

/// One line of a foreign contender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// When the process printed it, by its own `CLOCK_MONOTONIC` stamp (for
    /// [`Kind::Eof`] and [`Kind::Other`], when the line was read).
    pub at: Instant,
    /// What it says.
    pub kind: Kind,
    /// The rest of the line (a node's path, a state, an error).
    pub detail: Option<String>,
}

fn parse_line(text: &str) -> Line {
    let received = Instant::now();
    let mut parts = text.splitn(4, ' ');
    let stamp = parts.next().and_then(|s| s.parse::<i64>().ok());
    let kind = parts.next().map(|k| match k {
        "STARTED" => Kind::Started,
        "NODE" => Kind::Node,
        "LEADER" => Kind::Leader,
        "FOLLOWER" => Kind::Follower,
        "STATE" => Kind::State,
        "CLOSING" => Kind::Closing,
        "CLOSED" => Kind::Closed,
        "ERROR" => Kind::Error,
        "REVOKE" => Kind::Revoke,
        "DONE" => Kind::Done,
        _ => Kind::Other,
    });
    let _id = parts.next();
    match (stamp, kind) {
        (Some(ns), Some(kind)) if kind != Kind::Other => Line {
            at: instant_of_mono(ns),
            kind,
            detail: parts.next().map(str::to_owned),
        },
        _ => Line {
            at: received,
            kind: Kind::Other,
            detail: Some(text.to_owned()),
        },
    }
}

/// Lines kept of a process's stderr, for failure messages.
const STDERR_TAIL: usize = 60;

#[derive(Debug, Default)]
struct Output {
    lines: Vec<Line>,
    stderr: Vec<String>,
}

// ----- the process ---------------------------------------------------------------

/// One running foreign contender: its process, and everything it said.
#[derive(Debug)]
pub struct Foreign {
    library: Library,
    id: String,
    path: String,
    child: Child,
    stdin: Option<ChildStdin>,
    exited: Option<ExitStatus>,
    output: Arc<Mutex<Output>>,
}

impl Foreign {
    /// Starts a `library` contender `id` in the election at `path` on the
    /// servers `hosts` (a connect string). Returns at once; see
    /// [`wait_node`](Self::wait_node).
    ///
    /// # Errors
    ///
    /// [`ForeignError::NotInstalled`] when the library's program cannot run
    /// here; [`ForeignError::Io`] when it cannot be spawned.
    pub fn spawn(library: Library, hosts: &str, path: &str, id: &str) -> Result<Foreign> {
        let mut command = match library {
            Library::Curator => curator_command("CuratorLatch", id)?,
            Library::Kazoo => {
                let python = kazoo_python()?;
                let mut c = command_with_deathsig(&python);
                c.arg("-u").arg(KAZOO_SCRIPT);
                c
            }
        };
        command.args([hosts, path, id]);
        Self::start(library, command, path, id)
    }

    /// Starts a Curator lock holder `id` on the servers `hosts`
    /// (`CuratorLock.java`): it connects, says `STARTED`, and then takes
    /// its commands from [`send`](Self::send) — `mutex <path> [honour]`,
    /// `multi <path>...`, `release`, `revoke <node path>` — saying `LEADER`
    /// when an acquire returned, `FOLLOWER` before it releases, `REVOKE`
    /// when asked to let go, `DONE <command>` when a command is over.
    /// Returns at once.
    ///
    /// # Errors
    ///
    /// As [`spawn`](Self::spawn).
    pub fn spawn_curator_lock(hosts: &str, id: &str) -> Result<Foreign> {
        let mut command = curator_command("CuratorLock", id)?;
        command.args([hosts, id]);
        Self::start(Library::Curator, command, "(locks)", id)
    }

    /// Sends one command line to its stdin.
    ///
    /// # Errors
    ///
    /// [`ForeignError::Io`] if it cannot be written (the process is gone,
    /// or its stdin was closed by [`request_close`](Self::request_close)).
    pub fn send(&mut self, command: &str) -> Result<()> {
        let stdin = self.stdin.as_mut().ok_or_else(|| ForeignError::Io {
            context: format!("cannot send {command:?} to {}", self.id),
            source: io::Error::other("its stdin is closed"),
        })?;
        stdin
            .write_all(format!("{command}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(io_error(format!("cannot send {command:?} to {}", self.id)))
    }

    /// Counts the lines of `kind` it printed so far.
    pub fn count(&self, kind: &Kind) -> usize {
        self.lines().iter().filter(|l| &l.kind == kind).count()
    }

    fn start(library: Library, mut command: Command, path: &str, id: &str) -> Result<Foreign> {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = spawn_child(command).map_err(io_error(format!(
            "cannot start the {library} contender {id}"
        )))?;
        let output = Arc::new(Mutex::new(Output::default()));
        if let Some(stdout) = child.stdout.take() {
            let output = Arc::clone(&output);
            thread::Builder::new()
                .name(format!("foreign-{id}-out"))
                .spawn(move || read_stdout(stdout, &output))
                .map_err(io_error("cannot start a reader thread"))?;
        }
        if let Some(stderr) = child.stderr.take() {
            let output = Arc::clone(&output);
            thread::Builder::new()
                .name(format!("foreign-{id}-err"))
                .spawn(move || read_stderr(stderr, &output))
                .map_err(io_error("cannot start a reader thread"))?;
        }
        let stdin = child.stdin.take();
        Ok(Foreign {
            library,
            id: id.to_owned(),
            path: path.to_owned(),
            child,
            stdin,
            exited: None,
            output,
        })
    }

    /// Its library.
    pub fn library(&self) -> Library {
        self.library
    }

    /// Its id (also the data of its node).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything it printed so far, in order.
    pub fn lines(&self) -> Vec<Line> {
        self.output
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .lines
            .clone()
    }

    /// Its node's name (the last path segment of its last `NODE` line).
    pub fn node(&self) -> Option<String> {
        self.lines()
            .iter()
            .rev()
            .find(|l| l.kind == Kind::Node)
            .and_then(|l| l.detail.as_deref())
            .map(|p| p.rsplit('/').next().unwrap_or(p).to_owned())
    }

    /// Whether it believes it leads now: its last belief line is `LEADER`
    /// (a `CLOSING`, `CLOSED`, `ERROR` or the end of its output ends a
    /// belief).
    pub fn is_leader(&self) -> bool {
        self.lines()
            .iter()
            .rev()
            .find_map(|l| match l.kind {
                Kind::Leader => Some(true),
                Kind::Follower | Kind::Closing | Kind::Closed | Kind::Error | Kind::Eof => {
                    Some(false)
                }
                _ => None,
            })
            .unwrap_or(false)
    }

    /// The intervals it believed it led, by its own stamps: `(from, until)`,
    /// `until` `None` while it still does.
    pub fn terms(&self) -> Vec<(Instant, Option<Instant>)> {
        let mut terms = Vec::new();
        let mut open: Option<Instant> = None;
        for line in self.lines() {
            match line.kind {
                Kind::Leader => {
                    open.get_or_insert(line.at);
                }
                Kind::Follower | Kind::Closing | Kind::Closed | Kind::Error | Kind::Eof => {
                    if let Some(from) = open.take() {
                        terms.push((from, Some(line.at)));
                    }
                }
                _ => {}
            }
        }
        if let Some(from) = open {
            terms.push((from, None));
        }
        terms
    }

    /// Its exit status, if it has exited (reaping it).
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exited = Some(status);
            }
        }
        self.exited
    }

    /// Asks it to close (writes `close` and closes its stdin); returns at
    /// once. It then says `CLOSING`, deletes its node, says `CLOSED` and
    /// exits 0.
    pub fn request_close(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            // A process that is gone already cannot read it; its exit status
            // says so.
            let _ = stdin.write_all(b"close\n");
            let _ = stdin.flush();
        }
    }

    /// Waits (blocking) up to `timeout` for a line that `pred` accepts.
    ///
    /// # Errors
    ///
    /// [`ForeignError::Timeout`], or [`ForeignError::Exited`] if it exited
    /// first.
    pub fn wait_line(
        &mut self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Line) -> bool,
    ) -> Result<Line> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(line) = self.lines().into_iter().find(|l| pred(l)) {
                return Ok(line);
            }
            if let Some(status) = self.exit_status() {
                // Everything it printed has been read once the reader saw
                // its stdout end.
                let read_by = Instant::now() + Duration::from_secs(5);
                while !self.lines().iter().any(|l| l.kind == Kind::Eof) && Instant::now() < read_by
                {
                    thread::sleep(Duration::from_millis(5));
                }
                if let Some(line) = self.lines().into_iter().find(|l| pred(l)) {
                    return Ok(line);
                }
                return Err(ForeignError::Exited {
                    id: self.id.clone(),
                    what: what.into(),
                    status: status.to_string(),
                    log: self.describe(),
                });
            }
            if Instant::now() > deadline {
                return Err(ForeignError::Timeout {
                    id: self.id.clone(),
                    what: what.into(),
                    timeout,
                    log: self.describe(),
                });
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits (blocking) up to [`FOREIGN_START`] until its node exists, and
    /// returns the node's name.
    ///
    /// # Errors
    ///
    /// As [`wait_line`](Self::wait_line).
    pub fn wait_node(&mut self) -> Result<String> {
        let line = self.wait_line("its node", FOREIGN_START, |l| l.kind == Kind::Node)?;
        let path = line.detail.unwrap_or_default();
        Ok(path.rsplit('/').next().unwrap_or(&path).to_owned())
    }

    /// Asks it to close and waits (blocking) up to `timeout` until it has
    /// exited, then checks that it closed cleanly (`CLOSED`, exit 0).
    ///
    /// # Errors
    ///
    /// [`ForeignError::Timeout`] (it is killed then), or
    /// [`ForeignError::Exited`] if it exited otherwise.
    pub fn close(&mut self, timeout: Duration) -> Result<()> {
        self.request_close();
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.exit_status() {
                break status;
            }
            if Instant::now() > deadline {
                let log = self.describe();
                self.kill();
                return Err(ForeignError::Timeout {
                    id: self.id.clone(),
                    what: "it to close and exit".into(),
                    timeout,
                    log,
                });
            }
            thread::sleep(Duration::from_millis(5));
        };
        let clean = self
            .wait_line("CLOSED", Duration::ZERO, |l| l.kind == Kind::Closed)
            .is_ok();
        if status.success() && clean {
            Ok(())
        } else {
            Err(ForeignError::Exited {
                id: self.id.clone(),
                what: "a clean close (CLOSED, exit 0)".into(),
                status: status.to_string(),
                log: self.describe(),
            })
        }
    }

    /// Kills its process group with `SIGKILL` and reaps it.
    pub fn kill(&mut self) {
        if self.exit_status().is_some() {
            return;
        }
        let pgid = i32::try_from(self.child.id()).unwrap_or(i32::MAX);
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        if let Ok(status) = self.child.wait() {
            self.exited = Some(status);
        }
    }

    /// Its lines and the tail of its stderr, for failure messages.
    pub fn describe(&self) -> String {
        let output = self.output.lock().unwrap_or_else(PoisonError::into_inner);
        let mut text = format!(
            "{} contender {} (pid {}, election {}): node {:?}\n",
            self.library,
            self.id,
            self.child.id(),
            self.path,
            output
                .lines
                .iter()
                .rev()
                .find(|l| l.kind == Kind::Node)
                .and_then(|l| l.detail.clone()),
        );
        let first = output.lines.first().map(|l| l.at);
        for line in &output.lines {
            let offset = first.map_or(0, |f| line.at.saturating_duration_since(f).as_millis());
            text.push_str(&format!(
                "  +{offset} ms {:?} {}\n",
                line.kind,
                line.detail.as_deref().unwrap_or("")
            ));
        }
        if !output.stderr.is_empty() {
            text.push_str("  --- stderr tail ---\n");
            for line in &output.stderr {
                text.push_str("  ");
                text.push_str(line);
                text.push('\n');
            }
        }
        text
    }
}

impl Drop for Foreign {
    fn drop(&mut self) {
        self.kill();
    }
}

fn read_stdout(stdout: impl Read, output: &Mutex<Output>) {
    for line in BufReader::new(stdout).lines() {
        let Ok(text) = line else { break };
        let parsed = parse_line(&text);
        output
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .lines
            .push(parsed);
    }
    output
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .lines
        .push(Line {
            at: Instant::now(),
            kind: Kind::Eof,
            detail: None,
        });
}

fn read_stderr(stderr: impl Read, output: &Mutex<Output>) {
    for line in BufReader::new(stderr).lines() {
        let Ok(text) = line else { break };
        let mut output = output.lock().unwrap_or_else(PoisonError::into_inner);
        if output.stderr.len() == STDERR_TAIL {
            output.stderr.remove(0);
        }
        output.stderr.push(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_parsed_with_its_own_stamp() {
        let now = mono_ns();
        let line = parse_line(&format!("{now} NODE c1 /e/_c_x-latch-0000000003"));
        assert_eq!(line.kind, Kind::Node);
        assert_eq!(line.detail.as_deref(), Some("/e/_c_x-latch-0000000003"));
        let back = instant_of_mono(now);
        let diff = if back > line.at {
            back - line.at
        } else {
            line.at - back
        };
        assert_eq!(diff, Duration::ZERO);
        assert_eq!(parse_line(&format!("{now} LEADER c1")).detail, None);
    }

    #[test]
    fn an_unknown_line_is_kept_whole() {
        let line = parse_line("SLF4J: no binding");
        assert_eq!(line.kind, Kind::Other);
        assert_eq!(line.detail.as_deref(), Some("SLF4J: no binding"));
    }

    #[test]
    fn instants_follow_the_monotonic_clock() {
        let before = Instant::now();
        let mapped = instant_of_mono(mono_ns());
        let after = Instant::now();
        // One clock: the mapped reading falls between two reads of it, up to
        // the base's own measuring gap (well under a millisecond).
        assert!(
            mapped + Duration::from_millis(1) >= before,
            "{mapped:?} < {before:?}"
        );
        assert!(
            mapped <= after + Duration::from_millis(1),
            "{mapped:?} > {after:?}"
        );
    }
}
