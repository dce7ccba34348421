//! Standalone ZooKeeper servers and three-node ensembles, as real JVMs.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write as _};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::error::{FixtureError, Result};
use crate::fourlw::{four_letter_word, parse_mntr, ServerMode};
use crate::install::ZkInstall;
use crate::ports::free_port;
use crate::process::{command_with_deathsig, JvmProcess};
use crate::tls::{ClientAuth, ServerTls, TestPki};

const STANDALONE_MAIN: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";
const QUORUM_MAIN: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";

/// How long one four-letter-word exchange may take.
const FOUR_LETTER_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a readiness probe may take (shorter: it is retried).
const PROBE_TIMEOUT: Duration = Duration::from_millis(1000);
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// How many times a first start is retried with fresh ports when a port
/// turned out to be taken.
const BIND_RETRIES: usize = 3;
/// Lines of each log shown in errors.
const TAIL_LINES: usize = 40;

/// Settings shared by standalone servers and ensemble nodes.
#[derive(Debug, Clone)]
struct Settings {
    tick_time: Duration,
    min_session_timeout: Option<Duration>,
    max_session_timeout: Option<Duration>,
    start_timeout: Duration,
    heap_mb: u32,
    log_level: String,
    extra_config: Vec<(String, String)>,
    jvm_args: Vec<String>,
    install: Option<ZkInstall>,
    /// A TLS client port next to the plain one (standalone servers).
    tls: Option<ServerTls>,
}

impl Settings {
    fn new(start_timeout: Duration) -> Settings {
        Settings {
            tick_time: Duration::from_millis(200),
            min_session_timeout: None,
            max_session_timeout: None,
            start_timeout,
            heap_mb: 256,
            log_level: std::env::var("ZKELECT_ZK_LOG_LEVEL").unwrap_or_else(|_| "INFO".into()),
            extra_config: Vec::new(),
            jvm_args: Vec::new(),
            install: None,
            tls: None,
        }
    }

    /// The session timeout bounds, defaulting like ZooKeeper does
    /// (2 and 20 ticks).
    fn session_bounds(&self) -> Result<(Duration, Duration)> {
        if self.tick_time < Duration::from_millis(1) {
            return Err(FixtureError::InvalidConfig(format!(
                "tickTime {:?} is below 1 ms",
                self.tick_time
            )));
        }
        let min = self.min_session_timeout.unwrap_or(self.tick_time * 2);
        let max = self.max_session_timeout.unwrap_or(self.tick_time * 20);
        if min > max {
            return Err(FixtureError::InvalidConfig(format!(
                "minSessionTimeout {min:?} is above maxSessionTimeout {max:?}"
            )));
        }
        Ok((min, max))
    }

    fn install(&self) -> Result<ZkInstall> {
        match &self.install {
            Some(install) => {
                install.validate()?;
                Ok(install.clone())
            }
            None => ZkInstall::detect(),
        }
    }
}

/// One member of an ensemble, as written into every member's `zoo.cfg`.
#[derive(Debug, Clone, Copy)]
struct Peer {
    myid: u32,
    client_port: u16,
    quorum_port: u16,
    election_port: u16,
}

#[derive(Debug, Clone)]
enum Role {
    Standalone,
    Quorum { myid: u32, peers: Vec<Peer> },
}

/// Files of one server, all inside its temporary directory.
#[derive(Debug, Clone)]
struct Paths {
    cfg: PathBuf,
    log: PathBuf,
    out: PathBuf,
    pid: PathBuf,
}

macro_rules! builder_setters {
    () => {
        /// ZooKeeper's `tickTime` (default 200 ms). The default session timeout
        /// bounds are 2 and 20 ticks.
        pub fn tick_time(mut self, tick: Duration) -> Self {
            self.settings.tick_time = tick;
            self
        }

        /// `minSessionTimeout` (default: 2 ticks, 400 ms). Clients asking for
        /// less get this.
        pub fn min_session_timeout(mut self, timeout: Duration) -> Self {
            self.settings.min_session_timeout = Some(timeout);
            self
        }

        /// `maxSessionTimeout` (default: 20 ticks, 4 s). Clients asking for
        /// more get this; raise it (up to 20 s and beyond) for tests that need
        /// long sessions.
        pub fn max_session_timeout(mut self, timeout: Duration) -> Self {
            self.settings.max_session_timeout = Some(timeout);
            self
        }

        /// How long starting (or restarting) may take before it fails with the
        /// tail of the server log.
        pub fn start_timeout(mut self, timeout: Duration) -> Self {
            self.settings.start_timeout = timeout;
            self
        }

        /// The JVM's maximum heap in MiB (`-Xmx`, default 256).
        pub fn heap_mb(mut self, mb: u32) -> Self {
            self.settings.heap_mb = mb;
            self
        }

        /// The server's log level (default `INFO`, or `$ZKELECT_ZK_LOG_LEVEL`).
        pub fn log_level(mut self, level: &str) -> Self {
            self.settings.log_level = level.to_owned();
            self
        }

        /// Adds a `key=value` line to `zoo.cfg` (after the fixture's own lines,
        /// so it wins when ZooKeeper reads keys twice).
        pub fn config(mut self, key: &str, value: &str) -> Self {
            self.settings
                .extra_config
                .push((key.to_owned(), value.to_owned()));
            self
        }

        /// Adds an argument to the JVM command line (before the class path),
        /// e.g. `-Dzookeeper.something=1`.
        pub fn jvm_arg(mut self, arg: &str) -> Self {
            self.settings.jvm_args.push(arg.to_owned());
            self
        }

        /// Uses this Java and class path instead of detecting them.
        pub fn install(mut self, install: ZkInstall) -> Self {
            self.settings.install = Some(install);
            self
        }
    };
}

/// Configures and starts a standalone [`ZkServer`].
#[derive(Debug, Clone)]
pub struct ZkServerBuilder {
    settings: Settings,
}

impl Default for ZkServerBuilder {
    fn default() -> Self {
        ZkServerBuilder {
            settings: Settings::new(Duration::from_secs(30)),
        }
    }
}

impl ZkServerBuilder {
    builder_setters!();

    /// Adds a TLS client port (`secureClientPort`, see
    /// [`ZkServer::secure_connect_string`]) with the server certificate of
    /// `pki`, served by the Netty connection factory, which then serves the
    /// plain port too. Clients are not asked for a certificate unless
    /// [`tls_client_auth`](Self::tls_client_auth) says so.
    pub fn tls(mut self, pki: &TestPki) -> Self {
        let client_auth = self
            .settings
            .tls
            .as_ref()
            .map_or(ClientAuth::None, |t| t.client_auth);
        let mut tls = ServerTls::new(pki);
        tls.client_auth = client_auth;
        self.settings.tls = Some(tls);
        self
    }

    /// Whether the TLS port asks clients for a certificate signed by the
    /// CA (`ssl.clientAuth`); call after [`tls`](Self::tls).
    pub fn tls_client_auth(mut self, auth: ClientAuth) -> Self {
        if let Some(tls) = self.settings.tls.as_mut() {
            tls.client_auth = auth;
        }
        self
    }

    /// Starts the server and waits until it serves requests.
    ///
    /// # Errors
    ///
    /// [`FixtureError::NotInstalled`] when Java or ZooKeeper is missing,
    /// [`FixtureError::StartTimeout`] or [`FixtureError::Exited`] (with the
    /// tail of the server log) when the server does not come up.
    pub fn start(self) -> Result<ZkServer> {
        let install = self.settings.install()?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let port = free_port()?;
            let server = ZkServer::prepare(
                &self.settings,
                &install,
                "zk-standalone".into(),
                Role::Standalone,
                port,
            )?;
            match server.spawn_and_wait() {
                Ok(_) => return Ok(server),
                Err(e) if attempt < BIND_RETRIES && server.failed_to_bind() => {
                    drop(e);
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

#[derive(Debug, Default)]
struct State {
    process: Option<JvmProcess>,
    last_start: Option<Duration>,
}

/// A real ZooKeeper server (a JVM) listening on a loopback port.
///
/// Its configuration, data and logs live in a temporary directory that is
/// removed on drop (set `ZKELECT_KEEP_SERVER_DIRS=1` to keep it). Dropping it
/// always kills the JVM (resuming it first if paused); when a test panics, the
/// drop also prints where the server lived and the tail of its log.
///
/// All methods take `&self`, so a server can be shared (e.g. in an `Arc`)
/// between a test and the tasks it spawns.
#[derive(Debug)]
pub struct ZkServer {
    name: String,
    role: Role,
    addr: SocketAddr,
    /// The TLS client port, if the server has one.
    secure_addr: Option<SocketAddr>,
    session_bounds: (Duration, Duration),
    start_timeout: Duration,
    program: PathBuf,
    args: Vec<OsString>,
    paths: Paths,
    state: Mutex<State>,
    /// Declared last: dropped after `state`, i.e. after the JVM is dead.
    dir: tempfile::TempDir,
}

impl ZkServer {
    /// Starts a standalone server with the default settings
    /// (see [`ZkServer::builder`]).
    ///
    /// # Errors
    ///
    /// As [`ZkServerBuilder::start`].
    pub fn start() -> Result<ZkServer> {
        ZkServerBuilder::default().start()
    }

    /// A builder to change the settings of a standalone server.
    pub fn builder() -> ZkServerBuilder {
        ZkServerBuilder::default()
    }

    fn prepare(
        settings: &Settings,
        install: &ZkInstall,
        name: String,
        role: Role,
        client_port: u16,
    ) -> Result<ZkServer> {
        let session_bounds = settings.session_bounds()?;
        let mut dir = tempfile::Builder::new()
            .prefix(&format!("zkelect-{name}-"))
            .tempdir()
            .map_err(|e| FixtureError::io("cannot create a temporary directory", e))?;
        if keep_server_dirs() {
            dir.disable_cleanup(true);
        }
        let root = dir.path().to_path_buf();
        let data = root.join("data");
        fs::create_dir_all(&data)
            .map_err(|e| FixtureError::io(format!("cannot create {}", data.display()), e))?;
        let paths = Paths {
            cfg: root.join("zoo.cfg"),
            log: root.join("zookeeper.log"),
            out: root.join("jvm.out"),
            pid: root.join("zookeeper.pid"),
        };

        let mut cfg = String::from("# Written by zkelect-tests.\n");
        let (min, max) = session_bounds;
        let _ = writeln!(cfg, "tickTime={}", settings.tick_time.as_millis());
        let _ = writeln!(cfg, "initLimit=25\nsyncLimit=10");
        let _ = writeln!(cfg, "dataDir={}", data.display());
        let _ = writeln!(cfg, "clientPort={client_port}\nclientPortAddress=127.0.0.1");
        let _ = writeln!(cfg, "maxClientCnxns=0");
        let _ = writeln!(cfg, "minSessionTimeout={}", min.as_millis());
        let _ = writeln!(cfg, "maxSessionTimeout={}", max.as_millis());
        let _ = writeln!(cfg, "4lw.commands.whitelist=*\nadmin.enableServer=false");
        let _ = writeln!(cfg, "autopurge.purgeInterval=0");
        if let Role::Quorum { myid, peers } = &role {
            write_file(&data.join("myid"), &format!("{myid}\n"))?;
            for p in peers {
                let _ = writeln!(
                    cfg,
                    "server.{}=127.0.0.1:{}:{}",
                    p.myid, p.quorum_port, p.election_port
                );
            }
        }
        let secure_port = match &settings.tls {
            Some(tls) => {
                let port = free_port()?;
                for (key, value) in tls.config_lines(port) {
                    let _ = writeln!(cfg, "{key}={value}");
                }
                Some(port)
            }
            None => None,
        };
        for (key, value) in &settings.extra_config {
            let _ = writeln!(cfg, "{key}={value}");
        }
        write_file(&paths.cfg, &cfg)?;

        let log4j = root.join("log4j.properties");
        write_file(&log4j, &log4j_properties(&settings.log_level, &paths.log))?;
        let logback = root.join("logback.xml");
        write_file(&logback, &logback_xml(&settings.log_level, &paths.log))?;

        let main = match role {
            Role::Standalone => STANDALONE_MAIN,
            Role::Quorum { .. } => QUORUM_MAIN,
        };
        let mut args: Vec<OsString> = [
            format!("-Xmx{}m", settings.heap_mb),
            "-XX:+UseSerialGC".into(),
            "-Xshare:auto".into(),
            "-XX:TieredStopAtLevel=1".into(),
            "-XX:-UsePerfData".into(),
            "-Djava.net.preferIPv4Stack=true".into(),
            "-Djava.awt.headless=true".into(),
            format!("-Dzkelect.fixture={name}"),
            format!("-Dzkelect.owner.pid={}", std::process::id()),
            format!("-Dlog4j.configuration=file:{}", log4j.display()),
            format!("-Dlogback.configurationFile={}", logback.display()),
            format!("-Dzookeeper.log.dir={}", root.display()),
            "-Dzookeeper.jmx.log4j.disable=true".into(),
            "-Dzookeeper.admin.enableServer=false".into(),
            "-Dzookeeper.4lw.commands.whitelist=*".into(),
            // Test data need not survive a machine crash, only a process kill,
            // for which the page cache is enough.
            "-Dzookeeper.forceSync=no".into(),
            // Pre-allocate transaction logs by 1 MiB, not 64 MiB.
            "-Dzookeeper.preAllocSize=1024".into(),
            "-Dzookeeper.snapshot.trust.empty=true".into(),
            // Quorum: give up on a dead peer fast, and retry elections often.
            "-Dzookeeper.cnxTimeout=1000".into(),
            "-Dzookeeper.fastleader.maxNotificationInterval=1000".into(),
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        args.extend(settings.jvm_args.iter().map(OsString::from));
        args.push("-cp".into());
        args.push(install.classpath_string());
        args.push(main.into());
        args.push(paths.cfg.clone().into_os_string());

        Ok(ZkServer {
            name,
            role,
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, client_port)),
            secure_addr: secure_port.map(|port| SocketAddr::from((Ipv4Addr::LOCALHOST, port))),
            session_bounds,
            start_timeout: settings.start_timeout,
            program: install.java.clone(),
            args,
            paths,
            state: Mutex::new(State::default()),
            dir,
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts the JVM (which must not be running).
    fn spawn(&self) -> Result<()> {
        let mut state = self.state();
        if let Some(process) = state.process.as_mut() {
            if process.exit_status().is_none() {
                return Ok(());
            }
        }
        state.process = None;
        let marker = format!(
            "==== zkelect-tests: starting {} (pid of test process {}) ====\n",
            self.name,
            std::process::id()
        );
        for path in [&self.paths.log, &self.paths.out] {
            append_file(path, &marker)?;
        }
        let out = File::options()
            .create(true)
            .append(true)
            .open(&self.paths.out)
            .map_err(|e| {
                FixtureError::io(format!("cannot open {}", self.paths.out.display()), e)
            })?;
        let err = out
            .try_clone()
            .map_err(|e| FixtureError::io("cannot duplicate the JVM output file", e))?;
        let mut command = command_with_deathsig(&self.program);
        command
            .args(&self.args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let process = JvmProcess::spawn(command).map_err(|source| FixtureError::Spawn {
            server: self.name.clone(),
            program: self.program.clone(),
            source,
        })?;
        write_file(&self.paths.pid, &format!("{}\n", process.pid()))?;
        state.process = Some(process);
        Ok(())
    }

    fn spawn_and_wait(&self) -> Result<ServerMode> {
        let started = Instant::now();
        self.spawn()?;
        let mode = self.wait_serving(self.start_timeout)?;
        self.state().last_start = Some(started.elapsed());
        Ok(mode)
    }

    /// Whether the log says a port was taken (worth retrying with others).
    fn failed_to_bind(&self) -> bool {
        fs::read_to_string(&self.paths.log)
            .map(|log| log.contains("Address already in use"))
            .unwrap_or(false)
    }

    /// Checks that the JVM runs and is not paused; reports an unexpected exit.
    fn check_alive(&self) -> Result<()> {
        let mut state = self.state();
        let Some(process) = state.process.as_mut() else {
            return Err(FixtureError::NotRunning {
                server: self.name.clone(),
            });
        };
        if let Some(status) = process.exit_status() {
            return Err(FixtureError::Exited {
                server: self.name.clone(),
                status: status.to_string(),
                log_tail: self.log_tail(TAIL_LINES),
            });
        }
        if process.is_paused() {
            return Err(FixtureError::Paused {
                server: self.name.clone(),
            });
        }
        Ok(())
    }

    /// Waits until the server serves client requests (its `srvr` reply has a
    /// `Mode:` line) and returns its mode.
    ///
    /// A quorum member serves only once it is part of a quorum.
    ///
    /// # Errors
    ///
    /// [`FixtureError::StartTimeout`] after `timeout`; [`FixtureError::Exited`]
    /// if the JVM dies meanwhile; [`FixtureError::NotRunning`] or
    /// [`FixtureError::Paused`] if it was killed or is paused.
    pub fn wait_serving(&self, timeout: Duration) -> Result<ServerMode> {
        let deadline = Instant::now() + timeout;
        let mut last_reply = None;
        loop {
            self.check_alive()?;
            if let Ok(reply) = four_letter_word(self.addr, "srvr", PROBE_TIMEOUT) {
                match ServerMode::from_srvr(&reply) {
                    // The TLS port may open a moment after the plain one.
                    Some(mode) if mode.is_serving() && self.secure_port_open() => return Ok(mode),
                    Some(mode) if mode.is_serving() => {
                        last_reply = Some("serving, but the TLS port is not open yet".into());
                    }
                    _ => last_reply = Some(reply.trim().to_owned()),
                }
            }
            if Instant::now() >= deadline {
                return Err(FixtureError::StartTimeout {
                    server: self.name.clone(),
                    timeout,
                    last_reply,
                    log_tail: self.log_tail(TAIL_LINES),
                });
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// Whether the TLS port (if any) accepts connections.
    fn secure_port_open(&self) -> bool {
        self.secure_addr
            .is_none_or(|addr| std::net::TcpStream::connect_timeout(&addr, PROBE_TIMEOUT).is_ok())
    }

    /// The server's name in messages and on the JVM command line
    /// (`-Dzkelect.fixture=<name>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `127.0.0.1:<port>`, for a ZooKeeper client.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// `127.0.0.1:<secure port>`, the TLS client port, if the server was
    /// built with [`ZkServerBuilder::tls`]. Its certificate names
    /// `127.0.0.1` and `localhost`.
    pub fn secure_connect_string(&self) -> Option<String> {
        self.secure_addr.map(|addr| addr.to_string())
    }

    /// The server's `myid` in an ensemble (`None` for a standalone server).
    pub fn myid(&self) -> Option<u32> {
        match &self.role {
            Role::Standalone => None,
            Role::Quorum { myid, .. } => Some(*myid),
        }
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The client address (`127.0.0.1:<port>`), e.g. for [`crate::Proxy::start`].
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The configured `(minSessionTimeout, maxSessionTimeout)`.
    pub fn session_timeout_bounds(&self) -> (Duration, Duration) {
        self.session_bounds
    }

    /// The server's temporary directory (config, `data/`, `zookeeper.log`,
    /// `jvm.out`, `zookeeper.pid`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's log file (appended to across restarts).
    pub fn log_path(&self) -> &Path {
        &self.paths.log
    }

    /// The last `lines` lines of the server log and of the JVM's own output.
    pub fn log_tail(&self, lines: usize) -> String {
        format!(
            "[{}] {}:\n{}\n[{}] {}:\n{}",
            self.name,
            self.paths.log.display(),
            tail_lines(&self.paths.log, lines),
            self.name,
            self.paths.out.display(),
            tail_lines(&self.paths.out, lines.min(10)),
        )
    }

    /// The JVM's pid (also its process group id) while it runs.
    pub fn pid(&self) -> Option<u32> {
        let mut state = self.state();
        let process = state.process.as_mut()?;
        process.exit_status().is_none().then(|| process.pid())
    }

    /// Whether the JVM is running (paused counts as running).
    pub fn is_running(&self) -> bool {
        self.pid().is_some()
    }

    /// Whether the JVM is paused by [`ZkServer::pause`].
    pub fn is_paused(&self) -> bool {
        self.state()
            .process
            .as_ref()
            .is_some_and(JvmProcess::is_paused)
    }

    /// How long the last (re)start took, from spawning the JVM to the first
    /// `srvr` reply with a `Mode:`.
    pub fn last_start_duration(&self) -> Option<Duration> {
        self.state().last_start
    }

    fn signal(&self, signal: Signal) -> Result<()> {
        let mut state = self.state();
        let Some(process) = state.process.as_mut() else {
            return Err(FixtureError::NotRunning {
                server: self.name.clone(),
            });
        };
        let pgid = i32::try_from(process.pid()).unwrap_or(i32::MAX);
        process
            .signal(signal)
            .map_err(|errno| FixtureError::Signal {
                server: self.name.clone(),
                signal: signal.to_string(),
                pgid,
                source: io::Error::from(errno),
            })
    }

    /// Freezes the JVM with `SIGSTOP`: its sockets stay open, but it answers
    /// nothing (clients time out; sessions do not expire while the whole
    /// server is frozen, its clock being frozen too).
    ///
    /// # Errors
    ///
    /// [`FixtureError::NotRunning`] or [`FixtureError::Signal`].
    pub fn pause(&self) -> Result<()> {
        self.signal(Signal::SIGSTOP)
    }

    /// Resumes a paused JVM with `SIGCONT`.
    ///
    /// # Errors
    ///
    /// [`FixtureError::NotRunning`] or [`FixtureError::Signal`].
    pub fn resume(&self) -> Result<()> {
        self.signal(Signal::SIGCONT)
    }

    /// Kills the JVM with `SIGKILL` (a crash: connections are reset by the
    /// kernel) and reaps it. Does nothing if it is not running.
    pub fn kill(&self) {
        let mut state = self.state();
        if let Some(mut process) = state.process.take() {
            process.kill();
        }
    }

    /// Stops the JVM with `SIGTERM`, killing it if it has not exited after
    /// 5 s. Does nothing if it is not running.
    pub fn stop(&self) {
        let mut state = self.state();
        if let Some(mut process) = state.process.take() {
            process.terminate(Duration::from_secs(5));
        }
    }

    /// Kills the JVM if it runs, starts it again on the same ports with the same
    /// data directory (so znodes and sessions are recovered from the
    /// transaction log and snapshots), and waits until it serves.
    ///
    /// For an ensemble node "serving" means "back in a quorum"; use
    /// [`ZkServer::restart_no_wait`] when no quorum can form yet.
    ///
    /// # Errors
    ///
    /// As [`ZkServerBuilder::start`].
    pub fn restart(&self) -> Result<ServerMode> {
        self.kill();
        self.spawn_and_wait()
    }

    /// Like [`ZkServer::restart`], without waiting for the server to serve.
    ///
    /// # Errors
    ///
    /// [`FixtureError::Spawn`] or an I/O error.
    pub fn restart_no_wait(&self) -> Result<()> {
        self.kill();
        self.spawn()
    }

    /// Sends a four-letter word and returns the reply
    /// (see [`crate::four_letter_word`]).
    ///
    /// # Errors
    ///
    /// [`FixtureError::NotRunning`] / [`FixtureError::Paused`] without asking,
    /// else [`FixtureError::FourLetterWord`].
    pub fn four_letter_word(&self, command: &str) -> Result<String> {
        self.check_alive()?;
        four_letter_word(self.addr, command, FOUR_LETTER_TIMEOUT)
    }

    /// Whether the server answers `ruok` with `imok`.
    ///
    /// Note that ZooKeeper answers `imok` as soon as its port is open, before
    /// it serves requests; [`ZkServer::mode`] tells whether it serves.
    ///
    /// # Errors
    ///
    /// As [`ZkServer::four_letter_word`].
    pub fn ruok(&self) -> Result<bool> {
        Ok(self.four_letter_word("ruok")?.trim() == "imok")
    }

    /// The `srvr` reply.
    ///
    /// # Errors
    ///
    /// As [`ZkServer::four_letter_word`].
    pub fn srvr(&self) -> Result<String> {
        self.four_letter_word("srvr")
    }

    /// The server's mode, from `srvr`.
    ///
    /// # Errors
    ///
    /// As [`ZkServer::four_letter_word`], and [`FixtureError::FourLetterWord`]
    /// when the reply has no mode.
    pub fn mode(&self) -> Result<ServerMode> {
        let reply = self.srvr()?;
        ServerMode::from_srvr(&reply).ok_or_else(|| FixtureError::FourLetterWord {
            addr: self.addr.to_string(),
            command: "srvr".into(),
            message: format!("no mode in reply {reply:?}"),
        })
    }

    /// The `mntr` metrics (`zk_server_state`, `zk_znode_count`,
    /// `zk_ephemerals_count`, `zk_num_alive_connections`, ...).
    ///
    /// # Errors
    ///
    /// As [`ZkServer::four_letter_word`], and [`FixtureError::FourLetterWord`]
    /// when the reply is empty (the server does not serve yet).
    pub fn mntr(&self) -> Result<BTreeMap<String, String>> {
        let reply = self.four_letter_word("mntr")?;
        let map = parse_mntr(&reply);
        if map.is_empty() {
            return Err(FixtureError::FourLetterWord {
                addr: self.addr.to_string(),
                command: "mntr".into(),
                message: format!("no metrics in reply {reply:?}"),
            });
        }
        Ok(map)
    }
}

impl Drop for ZkServer {
    fn drop(&mut self) {
        self.kill();
        if thread::panicking() {
            eprintln!(
                "zkelect-tests: {} lived in {}{}\n{}",
                self.name,
                self.dir.path().display(),
                if keep_server_dirs() {
                    " (kept)"
                } else {
                    " (removed; set ZKELECT_KEEP_SERVER_DIRS=1 to keep it)"
                },
                self.log_tail(TAIL_LINES)
            );
        }
    }
}

/// Configures and starts a [`ZkEnsemble`].
#[derive(Debug, Clone)]
pub struct ZkEnsembleBuilder {
    settings: Settings,
    size: usize,
}

impl Default for ZkEnsembleBuilder {
    fn default() -> Self {
        ZkEnsembleBuilder {
            settings: Settings::new(Duration::from_secs(60)),
            size: 3,
        }
    }
}

impl ZkEnsembleBuilder {
    builder_setters!();

    /// The number of nodes (default 3; at least 2).
    pub fn size(mut self, size: usize) -> Self {
        self.size = size;
        self
    }

    /// Starts all nodes at once and waits until one is leader and all others
    /// are followers.
    ///
    /// # Errors
    ///
    /// [`FixtureError::NotInstalled`], [`FixtureError::Ensemble`] (with every
    /// node's log tail) when no leader is elected in time,
    /// [`FixtureError::Exited`] when a JVM dies.
    pub fn start(self) -> Result<ZkEnsemble> {
        if self.size < 2 {
            return Err(FixtureError::InvalidConfig(format!(
                "an ensemble needs at least 2 nodes, not {}",
                self.size
            )));
        }
        let install = self.settings.install()?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut peers = Vec::with_capacity(self.size);
            for myid in 1..=self.size {
                peers.push(Peer {
                    myid: u32::try_from(myid).unwrap_or(u32::MAX),
                    client_port: free_port()?,
                    quorum_port: free_port()?,
                    election_port: free_port()?,
                });
            }
            let mut servers = Vec::with_capacity(self.size);
            for peer in &peers {
                servers.push(ZkServer::prepare(
                    &self.settings,
                    &install,
                    format!("zk-node-{}", peer.myid),
                    Role::Quorum {
                        myid: peer.myid,
                        peers: peers.clone(),
                    },
                    peer.client_port,
                )?);
            }
            let ensemble = ZkEnsemble {
                servers,
                start_timeout: self.settings.start_timeout,
            };
            let started = Instant::now();
            let result = ensemble
                .servers
                .iter()
                .try_for_each(ZkServer::spawn)
                .and_then(|()| ensemble.wait_for_leader(ensemble.start_timeout));
            match result {
                Ok(_) => {
                    let took = started.elapsed();
                    for server in &ensemble.servers {
                        server.state().last_start = Some(took);
                    }
                    return Ok(ensemble);
                }
                Err(e)
                    if attempt < BIND_RETRIES
                        && ensemble.servers.iter().any(ZkServer::failed_to_bind) =>
                {
                    drop(e);
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// A ZooKeeper ensemble of real `QuorumPeerMain` JVMs on loopback ports
/// (three by default), each with its own `myid`, data directory, client port
/// and quorum/election ports on 127.0.0.1.
///
/// Node `i` (0-based) has `myid` `i + 1`. Each node is a [`ZkServer`]
/// ([`ZkEnsemble::server`]), so it can also be paused, queried, and restarted
/// without waiting ([`ZkServer::restart_no_wait`], e.g. after killing a
/// majority, followed by [`ZkEnsemble::wait_for_leader`]).
///
/// Dropping it kills every node.
#[derive(Debug)]
pub struct ZkEnsemble {
    servers: Vec<ZkServer>,
    start_timeout: Duration,
}

impl ZkEnsemble {
    /// Starts three nodes with the default settings and waits for a leader.
    ///
    /// # Errors
    ///
    /// As [`ZkEnsembleBuilder::start`].
    pub fn start() -> Result<ZkEnsemble> {
        ZkEnsembleBuilder::default().start()
    }

    /// A builder to change the ensemble's size and settings.
    pub fn builder() -> ZkEnsembleBuilder {
        ZkEnsembleBuilder::default()
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Whether the ensemble has no node (never true).
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// All nodes' client addresses, comma-separated, for a ZooKeeper client.
    pub fn connect_string(&self) -> String {
        self.servers
            .iter()
            .map(ZkServer::connect_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The nodes, by index (node `i` has `myid` `i + 1`).
    pub fn servers(&self) -> &[ZkServer] {
        &self.servers
    }

    /// Node `index`, to pause it, query it, etc.
    ///
    /// # Errors
    ///
    /// [`FixtureError::NoSuchNode`].
    pub fn server(&self, index: usize) -> Result<&ZkServer> {
        self.servers.get(index).ok_or(FixtureError::NoSuchNode {
            index,
            len: self.servers.len(),
        })
    }

    /// Each node's mode, `None` for a node that is not running, is paused or
    /// does not answer.
    pub fn modes(&self) -> Vec<Option<ServerMode>> {
        self.servers.iter().map(|s| s.mode().ok()).collect()
    }

    /// The index of the node that currently reports `Mode: leader`.
    ///
    /// # Errors
    ///
    /// [`FixtureError::NoLeader`] unless exactly one node is leader.
    pub fn leader_index(&self) -> Result<usize> {
        let modes = self.modes();
        let leaders: Vec<usize> = modes
            .iter()
            .enumerate()
            .filter(|(_, m)| **m == Some(ServerMode::Leader))
            .map(|(i, _)| i)
            .collect();
        match leaders.as_slice() {
            [leader] => Ok(*leader),
            _ => Err(FixtureError::NoLeader {
                state: describe_modes(&modes),
            }),
        }
    }

    /// Waits until exactly one running node is leader and every other running
    /// node is a follower, and returns the leader's index. Killed and paused
    /// nodes are left out; at least a majority of nodes must take part.
    ///
    /// # Errors
    ///
    /// [`FixtureError::Ensemble`] (with the logs' tails) after `timeout`;
    /// [`FixtureError::Exited`] if a node's JVM died by itself.
    pub fn wait_for_leader(&self, timeout: Duration) -> Result<usize> {
        let deadline = Instant::now() + timeout;
        let majority = self.servers.len() / 2 + 1;
        loop {
            let mut modes = Vec::with_capacity(self.servers.len());
            for server in &self.servers {
                match server.check_alive() {
                    Ok(()) => modes.push(
                        four_letter_word(server.addr, "srvr", PROBE_TIMEOUT)
                            .ok()
                            .and_then(|r| ServerMode::from_srvr(&r))
                            .or(Some(ServerMode::NotServing)),
                    ),
                    Err(FixtureError::NotRunning { .. } | FixtureError::Paused { .. }) => {
                        modes.push(None);
                    }
                    Err(e) => return Err(e),
                }
            }
            let live: Vec<ServerMode> = modes.iter().flatten().copied().collect();
            let leaders = live.iter().filter(|m| **m == ServerMode::Leader).count();
            let followers = live.iter().filter(|m| **m == ServerMode::Follower).count();
            if live.len() >= majority && leaders == 1 && leaders + followers == live.len() {
                if let Some(i) = modes.iter().position(|m| *m == Some(ServerMode::Leader)) {
                    return Ok(i);
                }
            }
            if Instant::now() >= deadline {
                return Err(FixtureError::Ensemble {
                    timeout,
                    state: describe_modes(&modes),
                    log_tail: self
                        .servers
                        .iter()
                        .map(|s| s.log_tail(15))
                        .collect::<Vec<_>>()
                        .join("\n"),
                });
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// Kills node `index` with `SIGKILL`.
    ///
    /// # Errors
    ///
    /// [`FixtureError::NoSuchNode`].
    pub fn kill(&self, index: usize) -> Result<()> {
        self.server(index)?.kill();
        Ok(())
    }

    /// Restarts node `index` (killing it first if it runs) on its ports and
    /// data directory, and waits until it serves again (i.e. joined a quorum),
    /// returning its mode.
    ///
    /// # Errors
    ///
    /// [`FixtureError::NoSuchNode`], or as [`ZkServer::restart`].
    pub fn restart(&self, index: usize) -> Result<ServerMode> {
        self.server(index)?.restart()
    }

    /// Pauses node `index` (`SIGSTOP`).
    ///
    /// # Errors
    ///
    /// [`FixtureError::NoSuchNode`], or as [`ZkServer::pause`].
    pub fn pause(&self, index: usize) -> Result<()> {
        self.server(index)?.pause()
    }

    /// Resumes node `index` (`SIGCONT`).
    ///
    /// # Errors
    ///
    /// [`FixtureError::NoSuchNode`], or as [`ZkServer::resume`].
    pub fn resume(&self, index: usize) -> Result<()> {
        self.server(index)?.resume()
    }
}

fn describe_modes(modes: &[Option<ServerMode>]) -> String {
    modes
        .iter()
        .enumerate()
        .map(|(i, m)| match m {
            Some(mode) => format!("node {i}: {mode}"),
            None => format!("node {i}: down, paused or silent"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `ZKELECT_KEEP_SERVER_DIRS` asks to keep servers' directories.
fn keep_server_dirs() -> bool {
    std::env::var_os("ZKELECT_KEEP_SERVER_DIRS").is_some_and(|v| !v.is_empty() && v != "0")
}

fn write_file(path: &Path, contents: &str) -> Result<()> {
    fs::write(path, contents)
        .map_err(|e| FixtureError::io(format!("cannot write {}", path.display()), e))
}

fn append_file(path: &Path, contents: &str) -> Result<()> {
    File::options()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(contents.as_bytes()))
        .map_err(|e| FixtureError::io(format!("cannot append to {}", path.display()), e))
}

/// The last `lines` lines of a file (reading at most its last 64 KiB).
fn tail_lines(path: &Path, lines: usize) -> String {
    const MAX: u64 = 64 * 1024;
    let read = || -> io::Result<String> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(MAX)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

fn log4j_properties(level: &str, log: &Path) -> String {
    format!(
        "# Written by zkelect-tests (Debian's ZooKeeper logs through slf4j-log4j12).\n\
         log4j.rootLogger={level}, FILE\n\
         log4j.appender.FILE=org.apache.log4j.FileAppender\n\
         log4j.appender.FILE.File={}\n\
         log4j.appender.FILE.Append=true\n\
         log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n\
         log4j.appender.FILE.layout.ConversionPattern=%d{{ISO8601}} %-5p [%t:%c{{1}}] - %m%n\n",
        log.display()
    )
}

fn logback_xml(level: &str, log: &Path) -> String {
    let file = log
        .display()
        .to_string()
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    format!(
        "<!-- Written by zkelect-tests (upstream ZooKeeper logs through logback). -->\n\
         <configuration>\n\
         \x20 <appender name=\"FILE\" class=\"ch.qos.logback.core.FileAppender\">\n\
         \x20   <file>{file}</file>\n\
         \x20   <append>true</append>\n\
         \x20   <encoder><pattern>%d{{ISO8601}} %-5level [%thread:%logger{{1}}] - %msg%n</pattern></encoder>\n\
         \x20 </appender>\n\
         \x20 <root level=\"{level}\"><appender-ref ref=\"FILE\"/></root>\n\
         </configuration>\n"
    )
}
