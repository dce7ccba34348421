//! The command line, with an example in every `--help`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Leader election, locks, semaphores and read-write locks on Apache
/// ZooKeeper: demo, run, lock, status, revoke, sim.
#[derive(Debug, Parser)]
#[command(name = "zkelect", version, about, propagate_version = true)]
pub(crate) struct Cli {
    /// More logging (-v: debug, -vv: trace). The ZooKeeper client libraries'
    /// own lines show at error by default, at info with -v, at trace with
    /// -vv. ZKELECT_LOG (a tracing filter, e.g. `debug,zookeeper_async=off`)
    /// overrides -v and -q.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
    /// Less logging: zkelect's own errors only, nothing from the client libraries.
    #[arg(short, long, global = true)]
    pub(crate) quiet: bool,
    #[command(subcommand)]
    pub(crate) command: Cmd,
}

/// The examples at the end of `zkelect --help`, before the exit codes.
const EXAMPLES: &str = "Examples:\n  zkelect demo\n  zkelect run --connect 127.0.0.1:2181 --path /svc/leader --id node-a -- ./my-daemon --flag\n  zkelect lock --connect 127.0.0.1:2181 --path /locks/backup --timeout 30 -- ./backup.sh\n  zkelect status --connect 127.0.0.1:2181 --path /svc/leader --json\n  zkelect revoke --connect 127.0.0.1:2181 --path /svc/leader --id node-a\n  zkelect sim --seeds 1..500";

impl Cli {
    /// The command line's definition, with the examples and the exit-code
    /// table ([`crate::exit::TABLE`]) after the options.
    pub(crate) fn definition() -> clap::Command {
        use clap::CommandFactory;
        Self::command().after_help(format!("{EXAMPLES}\n\n{}", crate::exit::TABLE))
    }

    /// Parses a command line (the program's name first) against
    /// [`Cli::definition`].
    pub(crate) fn parse_argv(argv: Vec<OsString>) -> Result<Self, clap::Error> {
        use clap::FromArgMatches;
        let matches = Self::definition().try_get_matches_from(argv)?;
        let mut cli = Self::from_arg_matches(&matches)?;
        custom_acl_check(&cli.command)?;
        if let (Cmd::Lock(args), Some(lock)) =
            (&mut cli.command, matches.subcommand_matches("lock"))
        {
            args.paths = lock
                .get_many::<String>("path")
                .into_iter()
                .flatten()
                .cloned()
                .collect();
            multi_lock_conflicts(args, lock)?;
        }
        Ok(cli)
    }
}

/// A custom ACL (`--acl`, each entry already checked by [`parse_acl`]) must
/// also pass as a list: the server would refuse the queue's nodes otherwise,
/// and that is the command line's fault, so a usage error.
fn custom_acl_check(command: &Cmd) -> Result<(), clap::Error> {
    let (name, entries, conn) = match command {
        Cmd::Run(args) => ("run", &args.acl, &args.conn),
        Cmd::Lock(args) => ("lock", &args.acl, &args.conn),
        _ => return Ok(()),
    };
    if entries.is_empty() {
        return Ok(());
    }
    let acl = zkelect_core::Acl::Custom(entries.clone());
    let authed = conn.auth.is_some() || conn.sasl_user.is_some();
    let refused = match acl.validate() {
        Err(e) => Some(e.to_string()),
        // The server refuses an `auth` entry from a session with no identity.
        Ok(()) if acl.needs_auth() && !authed => {
            Some("an auth entry names the creator: it needs --auth or --sasl-user".to_owned())
        }
        Ok(()) => None,
    };
    match refused {
        None => Ok(()),
        Some(e) => Err(Cli::definition()
            .find_subcommand_mut(name)
            .map(|c| c.clone().bin_name(format!("zkelect {name}")))
            .unwrap_or_else(Cli::definition)
            .error(
                clap::error::ErrorKind::ValueValidation,
                format!("--acl: {e}"),
            )),
    }
}

/// A multi-lock's parts are mutexes: the options of one lock's other kinds
/// (and the one takeover a multi-lock has) are refused with several paths,
/// as clap refuses any other conflict.
fn multi_lock_conflicts(args: &LockArgs, lock: &clap::ArgMatches) -> Result<(), clap::Error> {
    if args.paths.len() < 2 {
        return Ok(());
    }
    let given = |id: &str| {
        lock.value_source(id)
            .is_some_and(|s| s == clap::parser::ValueSource::CommandLine)
    };
    // The multi-lock's parts take over as the default does.
    let takeover = (args.takeover != TakeoverArg::default()).then_some("takeover");
    match ["weight", "permits", "read", "write", "on_revoke"]
        .into_iter()
        .find(|id| given(id))
        .or(takeover)
        .map(|id| id.replace('_', "-"))
    {
        Some(flag) => Err(Cli::definition()
            .find_subcommand_mut("lock")
            .map(|c| c.clone().bin_name("zkelect lock"))
            .unwrap_or_else(Cli::definition)
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "--{flag} cannot be used with several --path: a multi-lock's parts are mutexes"
                ),
            )),
        None => Ok(()),
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Cmd {
    /// A narrated election: candidates join, leaders die, successors take over,
    /// a connection drop suspends a leader. No server needed.
    #[command(
        after_help = "Examples:\n  zkelect demo\n  zkelect demo --seed 7 --candidates 5\n  zkelect demo --connect 127.0.0.1:2181"
    )]
    Demo(DemoArgs),
    /// Run a command only while this process is the leader.
    #[command(
        after_help = "Examples:\n  zkelect run --connect zk1:2181,zk2:2181 --path /svc/cron/leader --id $(hostname) -- ./cron-master\n  zkelect run --connect 127.0.0.1:2181 --path /svc/leader --id a --auth svc:secret --policy session-aware -- sh -c 'exec worker'\n  zkelect run --connect zk1:2281 --path /svc/leader --id a --transport zookeeper-client --tls-ca ca.pem --tls-cert me.pem --tls-key me-key.pem -- ./daemon\n\nThe command gets SIGTERM (then SIGKILL after --grace-ms) the moment leadership is\nsuspended or lost, is started again on re-election, and finds the fencing token in\nZKELECT_FENCING_TOKEN. SIGTERM, SIGINT, SIGHUP or SIGQUIT to zkelect, at any moment,\nstops the command (SIGTERM, then SIGKILL after --grace-ms), deletes the node and\nexits 0."
    )]
    Run(RunArgs),
    /// Wait for a lock (or a semaphore's permit, or a read or write lock), run
    /// a command once while holding it, release it, and exit with the
    /// command's status (like flock and etcdctl lock).
    #[command(
        mut_arg("path", |a| a
            .help("The lock's path: every holder and waiter of one lock gives the same one. Given more than once, a multi-lock: every path's lock, taken all or none (in sorted order, so two multi-locks never deadlock)")
            .action(clap::ArgAction::Append)),
        after_help = "Examples:\n  zkelect lock --connect 127.0.0.1:2181 --path /locks/backup -- ./backup.sh --full\n  zkelect lock --connect zk1:2181 --path /locks/migrate --timeout 30 -- ./migrate\n  zkelect lock --connect zk1:2181 --path /locks/render --permits 4 -- ./render job-17\n  zkelect lock --connect zk1:2181 --path /locks/render --permits 4 --weight 3 -- ./render --big\n  zkelect lock --connect zk1:2181 --path /locks/backup --on-revoke SIGUSR1 -- ./backup.sh\n  zkelect lock --connect zk1:2181 --path /locks/db --path /locks/cache --timeout 30 -- ./reindex\n\nThe command finds the fencing token in ZKELECT_FENCING_TOKEN and runs under the\nsame lease watchdog as `zkelect run`: if zkelect freezes or loses the lock, the\ncommand is stopped before anyone else can take the lock. SIGTERM, SIGINT, SIGHUP\nor SIGQUIT to zkelect, at any moment, stops the command, deletes the node and\nexits 128+N.\n\nWith several --path, every path's lock is taken, all or none, in sorted order (two\nmulti-locks given the same paths in any order never deadlock); on --timeout what\nwas taken is released. The command finds each path's token in\nZKELECT_FENCING_TOKENS as PATH=TOKEN pairs, comma-separated in sorted path order,\nand the first path's in ZKELECT_FENCING_TOKEN. The parts are mutexes: --permits,\n--weight, --read, --write, --on-revoke and --takeover are refused with several\n--path (exit 125, as every usage error of lock). Losing any part while the\ncommand runs stops it (exit 123).\n\nWith --on-revoke SIG the lock is revocable: a `zkelect revoke --ask` (or Curator's\nRevoker) reaches the command as SIG, and the command decides whether to exit.\n\nExit status: the command's own, or 123 lock lost while it ran, 124 --timeout,\n125 zkelect lock itself failed (also: --weight above --permits), 126 command not\nexecutable, 127 command not found."
    )]
    Lock(LockArgs),
    /// Show a queue: an election's leaders and candidates, or (with --recipe)
    /// a lock's, semaphore's or read-write lock's holders and waiters; each
    /// one's id and data, and who watches whom.
    #[command(
        mut_arg("path", |a| a.help("The election's path, or the lock's with --recipe")),
        after_help = "Examples:\n  zkelect status --connect 127.0.0.1:2181 --path /svc/leader\n  zkelect status --connect 127.0.0.1:2181 --path /svc/leader --json\n  zkelect status --connect 127.0.0.1:2181 --path /svc/leader --watch\n  zkelect status --connect zk1:2281 --path /svc/leader --transport zookeeper-client --tls-ca ca.pem"
    )]
    Status(StatusArgs),
    /// Delete a process's node to force it out of an election's or a lock's
    /// queue: a leader is demoted, a lock's holder loses its lock (`zkelect
    /// lock` stops its command and exits 123); a waiter loses its place.
    #[command(
        mut_arg("path", |a| a.help("The election's or lock's path")),
        after_help = "Examples:\n  zkelect revoke --connect 127.0.0.1:2181 --path /svc/leader --id node-a\n  zkelect revoke --connect 127.0.0.1:2181 --path /locks/backup --id node-a --node n_0000000007\n  zkelect revoke --connect 127.0.0.1:2181 --path /locks/backup --id node-a --ask\n\nWith --ask nothing is deleted: a revocation request is written into the node and\nthe holder decides (`zkelect lock --on-revoke SIG` passes it on to its command).\nExit status of --ask: 0 delivered (whether the holder lets go is its own), 10 no\nsuch id, several without --node/--all, or the node gone before it was asked;\n5 the server refused the write, 4 unreachable, as for a forced revoke.\n\nWhat the revoked process does next is its own: `zkelect run` and a library\nElection join again at the back of the queue (unless rejoin_on_revoke(false));\n`zkelect lock` holding the lock stops its command and exits 123, and one still\nwaiting joins again at the back.\n\nIds are not unique: ZooKeeper lets two processes carry the same id. With several\nnodes for the id, revoke refuses (exit 10) and lists them; pick one with --node\n(its full name, or a suffix unique among them such as its sequence) or take them\nall with --all."
    )]
    Revoke(RevokeArgs),
    /// (internal) The lease watchdog between `zkelect run` and its command.
    #[command(name = "__lease", hide = true)]
    Lease(LeaseArgs),
    /// Run the deterministic simulator and its invariant checkers.
    #[command(
        after_help = "Examples:\n  zkelect sim --seeds 1..500\n  zkelect sim --seed 42 --trace\n  zkelect sim --seeds 1..200 --candidates 12 --leaders 2 --faults none\n  zkelect sim --seeds 3 --canary parent-watch --timeline run.svg\n\n--seeds A..B runs A to B-1 (the end is excluded: 1..20 is 19 seeds)."
    )]
    Sim(SimArgs),
}

/// Where the server is and how to talk to it.
#[derive(Debug, Clone, Args)]
pub(crate) struct ConnectArgs {
    /// ZooKeeper hosts, `host:port[,host:port…]`.
    #[arg(long, value_name = "HOSTS")]
    pub(crate) connect: String,
    /// The election's path.
    #[arg(long, value_name = "PATH")]
    pub(crate) path: String,
    /// Requested session timeout in milliseconds (at least 1500 with
    /// zookeeper-async). The server may clamp it; the lease and the watchdog
    /// always use the value the server negotiated, never this one.
    #[arg(
        long = "session-timeout",
        value_name = "MS",
        default_value_t = 10_000,
        value_parser = clap::value_parser!(u64).range(..=2_147_483_647)
    )]
    pub(crate) session_timeout_ms: u64,
    /// How long to try to reach the servers before giving up, in
    /// milliseconds (1 to 3600000, an hour). With some servers down, zkelect
    /// starts as soon as a live one answers.
    #[arg(
        long = "connect-timeout",
        value_name = "MS",
        default_value_t = 10_000,
        value_parser = clap::value_parser!(u64).range(1..=3_600_000)
    )]
    pub(crate) connect_timeout_ms: u64,
    /// Digest credentials `user:password`; nodes then get creator-only write ACLs.
    #[arg(long, value_name = "USER:PASS")]
    pub(crate) auth: Option<String>,
    /// The ZooKeeper client library: zookeeper-client (the default; needed
    /// for TLS and SASL), or zookeeper-async.
    #[arg(long, value_enum, default_value_t = TransportArg::ZookeeperClient)]
    pub(crate) transport: TransportArg,
    /// Talk TLS, trusting the CA certificate(s) in this PEM file
    /// (`--transport zookeeper-client`). The servers' certificates must name
    /// the hosts as written in --connect.
    #[arg(long = "tls-ca", value_name = "FILE")]
    pub(crate) tls_ca: Option<PathBuf>,
    /// A client certificate (PEM) for servers that ask for one; needs --tls-key and --tls-ca.
    #[arg(long = "tls-cert", value_name = "FILE", requires_all = ["tls_key", "tls_ca"])]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM); needs --tls-cert.
    #[arg(long = "tls-key", value_name = "FILE", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
    /// Authenticate with SASL DIGEST-MD5 as this user (`--transport
    /// zookeeper-client`); nodes then get creator-only write ACLs
    /// (`sasl:USER`). The password comes from --sasl-password-file or
    /// $ZKELECT_SASL_PASSWORD, never from the command line, where `ps` shows it.
    #[arg(long = "sasl-user", value_name = "USER")]
    pub(crate) sasl_user: Option<String>,
    /// The file holding the SASL password (its first line; readable by the
    /// service account only).
    #[arg(
        long = "sasl-password-file",
        value_name = "FILE",
        requires = "sasl_user"
    )]
    pub(crate) sasl_password_file: Option<PathBuf>,
}

/// The ZooKeeper client library under the election.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum TransportArg {
    /// zookeeper-async (no TLS).
    ZookeeperAsync,
    /// zookeeper-client (TLS with --tls-ca).
    ZookeeperClient,
}

impl ConnectArgs {
    pub(crate) fn session_timeout(&self) -> Duration {
        Duration::from_millis(self.session_timeout_ms)
    }
    pub(crate) fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum PolicyArg {
    /// Stop the command at once when the connection is suspended.
    Standard,
    /// Keep the command while the session cannot yet have expired on the server.
    SessionAware,
}

/// Whose naming scheme the queue follows (see the README's interop table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub(crate) enum InteropArg {
    /// zkelect's own names only.
    #[default]
    None,
    /// Share the queue with Apache Curator's LeaderLatch.
    Curator,
    /// Share the queue with kazoo's Election (or Lock).
    Kazoo,
}

/// How a waiter takes over when the node it watches goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub(crate) enum TakeoverArg {
    /// On the notification alone: no round trip, a few more packets for
    /// the server (the leader marks its node, the next waiter reads it).
    #[default]
    OnNotification,
    /// List the children again first, as Curator and kazoo do: one round
    /// trip later, at their packet count.
    Relist,
}

impl TakeoverArg {
    pub(crate) fn mode(self) -> zkelect::Takeover {
        match self {
            TakeoverArg::OnNotification => zkelect::Takeover::OnNotification,
            TakeoverArg::Relist => zkelect::Takeover::Relist,
        }
    }
}

impl InteropArg {
    pub(crate) fn scheme(self) -> zkelect::Interop {
        match self {
            InteropArg::None => zkelect::Interop::None,
            InteropArg::Curator => zkelect::Interop::Curator,
            InteropArg::Kazoo => zkelect::Interop::Kazoo,
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) conn: ConnectArgs,
    /// This candidate's id (must fit a znode name).
    #[arg(long)]
    pub(crate) id: String,
    /// Extra data stored in the node (e.g. an address for clients).
    #[arg(long)]
    pub(crate) data: Option<String>,
    /// What to do when the connection is suspended.
    #[arg(long, value_enum, default_value_t = PolicyArg::Standard)]
    pub(crate) policy: PolicyArg,
    /// Share the queue with another library's election: our node is named in
    /// its scheme and its nodes queue with ours.
    #[arg(long, value_enum, default_value_t = InteropArg::None)]
    pub(crate) interop: InteropArg,
    /// A custom ACL entry for the nodes zkelect creates, `SCHEME:ID:PERMS`
    /// in ZooKeeper's own notation (`world:anyone:r`, `ip:10.0.0.0/8:cdrwa`,
    /// `digest:USER:BASE64HASH:cdrwa`, `auth::cdrwa`, `sasl:USER:cdrwa`,
    /// `x509:DN:cdrwa`); repeat it for several. The list replaces the policy
    /// --auth and --sasl-user otherwise give; between them the entries must
    /// grant r, c and d. A malformed entry or list is a usage error (exit 2).
    #[arg(long = "acl", value_name = "SCHEME:ID:PERMS", value_parser = parse_acl)]
    pub(crate) acl: Vec<zkelect_core::AclEntry>,
    /// How many candidates lead at once (the k oldest nodes); every
    /// candidate of one election must use the same value.
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub(crate) leaders: u32,
    /// How a follower takes over when the node it watches goes.
    #[arg(long, value_enum, default_value_t = TakeoverArg::OnNotification)]
    pub(crate) takeover: TakeoverArg,
    /// Serve the election's metrics for Prometheus at http://HOST:PORT/
    /// (counters, a leader gauge, time-to-elect, failover and hand-off
    /// histograms in seconds).
    #[arg(long = "metrics-addr", value_name = "HOST:PORT")]
    pub(crate) metrics_addr: Option<std::net::SocketAddr>,
    /// Give up (exit 9, node deleted) if not elected within this many
    /// milliseconds of joining; without it, wait as long as it takes.
    #[arg(long = "lead-timeout", value_name = "MS")]
    pub(crate) lead_timeout_ms: Option<u64>,
    /// Milliseconds between SIGTERM and SIGKILL when the command is stopped.
    /// When contact with the server is in doubt the command gets SIGTERM
    /// this long before the lease ends, so it must fit in the lease: at most
    /// 8/30 of the session timeout (15/30 with --policy session-aware);
    /// more is refused (exit 3). [default: the most that fits, at most 5000]
    #[arg(long = "grace-ms", value_name = "MS")]
    pub(crate) grace_ms: Option<u64>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) command: Vec<OsString>,
}

#[derive(Debug, Args)]
pub(crate) struct LockArgs {
    #[command(flatten)]
    pub(crate) conn: ConnectArgs,
    /// The id stored in our node, shown by `status` (default: HOSTNAME-PID).
    #[arg(long)]
    pub(crate) id: Option<String>,
    /// Give up waiting for the lock after this long (exit 124; the command
    /// never runs): seconds (`30`, `2.5`) or a duration (`500ms`, `1m`).
    /// Without it, wait as long as it takes.
    #[arg(long, value_name = "D", value_parser = parse_timeout)]
    pub(crate) timeout: Option<Duration>,
    /// A shared (read) lock on a read-write lock: readers hold together,
    /// a writer excludes them.
    #[arg(long, conflicts_with_all = ["write", "permits"])]
    pub(crate) read: bool,
    /// An exclusive (write) lock on a read-write lock.
    #[arg(long, conflicts_with_all = ["read", "permits"])]
    pub(crate) write: bool,
    /// A semaphore: up to K holders at once (every user of the path must
    /// give the same K).
    #[arg(long, value_name = "K", conflicts_with_all = ["read", "write"])]
    pub(crate) permits: Option<u32>,
    /// With --permits: take N of the K permits at once (a weighted
    /// semaphore; every holder's weight counts against K). Served in queue
    /// order: a request for N is never overtaken by later smaller ones.
    /// More than K is refused (exit 125). [default: 1]
    #[arg(long, value_name = "N", requires = "permits")]
    pub(crate) weight: Option<u32>,
    /// Make the lock revocable, and pass a cooperative revocation request
    /// (`zkelect revoke --ask`, Curator's `Revoker`) on to the running
    /// command as SIGNAL (a name such as SIGUSR1 or USR1, or a number): the
    /// command decides whether to exit and let go. Without it the lock is
    /// not revocable and requests go unheard. SIGKILL and SIGSTOP are
    /// refused (exit 125, as every usage error of lock): the command could not decide.
    #[arg(long = "on-revoke", value_name = "SIGNAL", value_parser = parse_signal)]
    pub(crate) on_revoke: Option<nix::sys::signal::Signal>,
    /// A custom ACL entry for the nodes zkelect creates, `SCHEME:ID:PERMS`
    /// in ZooKeeper's own notation (`world:anyone:r`, `ip:10.0.0.0/8:cdrwa`,
    /// `digest:USER:BASE64HASH:cdrwa`, `auth::cdrwa`, `sasl:USER:cdrwa`,
    /// `x509:DN:cdrwa`); repeat it for several. The list replaces the policy
    /// --auth and --sasl-user otherwise give; between them the entries must
    /// grant r, c and d. A malformed entry or list is a usage error (exit 125).
    #[arg(long = "acl", value_name = "SCHEME:ID:PERMS", value_parser = parse_acl)]
    pub(crate) acl: Vec<zkelect_core::AclEntry>,
    /// Every `--path` given, in the order given (`conn.path` is the first):
    /// more than one makes a multi-lock.
    #[arg(skip)]
    pub(crate) paths: Vec<String>,
    /// How a waiter takes over when the node it watches goes.
    #[arg(long, value_enum, default_value_t = TakeoverArg::OnNotification)]
    pub(crate) takeover: TakeoverArg,
    /// Milliseconds between SIGTERM and SIGKILL when the command is stopped.
    /// When contact with the server is in doubt the command gets SIGTERM
    /// this long before the lease ends, so it must fit in the lease: at most
    /// 8/30 of the session timeout; more is refused (exit 125).
    /// [default: the most that fits, at most 5000]
    #[arg(long = "grace-ms", value_name = "MS")]
    pub(crate) grace_ms: Option<u64>,
    /// Serve the lock's metrics for Prometheus at http://HOST:PORT/ (as
    /// `run --metrics-addr`: counters, a holder gauge, time-to-acquire and
    /// hand-off histograms in seconds).
    #[arg(long = "metrics-addr", value_name = "HOST:PORT")]
    pub(crate) metrics_addr: Option<std::net::SocketAddr>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) command: Vec<OsString>,
}

#[derive(Debug, Args)]
pub(crate) struct LeaseArgs {
    /// The lease's first duration, in milliseconds.
    #[arg(long = "lease-ms")]
    pub(crate) lease_ms: u64,
    /// The command.
    #[arg(last = true, required = true)]
    pub(crate) command: Vec<OsString>,
}

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    pub(crate) conn: ConnectArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Keep watching: after the table, one timestamped line per change of
    /// the queue (one JSON object per line with --json), until interrupted.
    #[arg(long)]
    pub(crate) watch: bool,
    /// How many candidates lead at once, as the candidates were started with
    /// (`run --leaders`): the K oldest nodes are shown as leaders [default: 1].
    #[arg(long, value_name = "K", conflicts_with = "recipe")]
    pub(crate) leaders: Option<u32>,
    /// Show a lock's queue instead of an election's, as `zkelect lock` (or
    /// `Session::mutex`, `semaphore`, `rw_lock`) made it: who holds it, who
    /// waits, and on whom.
    #[arg(long, value_enum, value_name = "RECIPE")]
    pub(crate) recipe: Option<RecipeArg>,
    /// A semaphore's permits, as its holders were started with (`lock --permits K`).
    #[arg(long, value_name = "K", required_if_eq("recipe", "semaphore"))]
    pub(crate) permits: Option<u32>,
    /// Read the queue in another library's scheme: Curator LeaderLatch or kazoo nodes count as candidates.
    #[arg(long, value_enum, default_value_t = InteropArg::None)]
    pub(crate) interop: InteropArg,
}

/// A lock recipe whose queue `status` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum RecipeArg {
    /// `zkelect lock` (`Session::mutex`): one holder at a time.
    Mutex,
    /// `zkelect lock --permits K` (`Session::semaphore`): up to K holders (give `--permits K`).
    Semaphore,
    /// `zkelect lock --read` / `--write` (`Session::rw_lock`): readers share, a writer holds alone.
    ReadWrite,
}

#[derive(Debug, Args)]
pub(crate) struct RevokeArgs {
    #[command(flatten)]
    pub(crate) conn: ConnectArgs,
    /// The id of the process to force out, as `status` shows it. May be
    /// left out with --node: a node whose data a revocation request
    /// replaced carries no id any more (`status` shows "(id unknown)").
    #[arg(long, required_unless_present = "node")]
    pub(crate) id: Option<String>,
    /// Ids are not unique: when several nodes carry the id, revoke them all
    /// (without this, or --node, several are refused with exit 10).
    #[arg(long, conflicts_with = "node")]
    pub(crate) all: bool,
    /// Revoke only this node, which must carry the id (when --id is given):
    /// its full name as `status` shows it, or a suffix of it unique among the
    /// id's nodes (its sequence, e.g. `n_0000000007` or `0000000007`). Tells
    /// apart processes that share an id; without --id, names any node a
    /// process holds.
    #[arg(long, value_name = "NAME")]
    pub(crate) node: Option<String>,
    /// Ask instead of force: write a cooperative revocation request into the
    /// node (Curator's `Revoker.attemptRevoke`) and leave it there. The
    /// holder decides: a `zkelect lock --on-revoke SIG` passes it on to its
    /// command, a library holder hears it through
    /// `LockGuard::revocation_requested`; a holder that is not revocable
    /// never hears it.
    #[arg(long)]
    pub(crate) ask: bool,
}

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Seed for the simulated run (same seed, same story).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// How many candidates.
    #[arg(long, default_value_t = 4)]
    pub(crate) candidates: usize,
    /// Run the story against a real server instead of the simulator.
    #[arg(long, value_name = "HOST:PORT")]
    pub(crate) connect: Option<String>,
    /// The election path used with --connect.
    #[arg(long, default_value = "/zkelect/demo")]
    pub(crate) path: String,
}

#[derive(Debug, Args)]
pub(crate) struct SimArgs {
    /// One seed.
    #[arg(long, conflicts_with = "seeds")]
    pub(crate) seed: Option<u64>,
    /// A range of seeds, `A..B`: A included, B excluded (`1..20` runs 19
    /// seeds, 1 to 19); or a count `N`, the seeds `0..N`.
    #[arg(long, value_name = "A..B|N")]
    pub(crate) seeds: Option<String>,
    /// Candidates per run (default: drawn from the seed, 1–20).
    #[arg(long)]
    pub(crate) candidates: Option<usize>,
    /// Leaders per election (default: drawn from the seed, 1 or 2).
    #[arg(long)]
    pub(crate) leaders: Option<u32>,
    /// Faults to inject.
    #[arg(long, value_enum, default_value_t = FaultsArg::All)]
    pub(crate) faults: FaultsArg,
    /// Print the whole trace of each run.
    #[arg(long)]
    pub(crate) trace: bool,
    /// Write each failing run's whole trace to this directory.
    #[arg(long, value_name = "DIR")]
    pub(crate) save: Option<PathBuf>,
    /// Run a deliberately broken candidate, to see a checker catch it.
    #[arg(long, value_enum)]
    pub(crate) canary: Option<CanaryArg>,
    /// Draw a run as an SVG picture in this file: one lane per process,
    /// each hold with its fencing token, suspensions, faults, and the
    /// violation where it happened. The failing run (as it ran, before
    /// minimising) if one fails, else the last seed's.
    #[arg(long, value_name = "FILE.svg")]
    pub(crate) timeline: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CanaryArg {
    /// Never sees Disconnected, its probes answered by its own client (caught by the safety checker).
    IgnoresDisconnect,
    /// No nonce in node names (caught by the liveness checker).
    Unprotected,
    /// Watches the parent (caught by the herd checker).
    ParentWatch,
    /// Takes its fencing token from the sequence number, not the czxid
    /// (caught by the tokens-grow checker).
    SequenceToken,
    /// Never hears a watch event about its own node (caught by the
    /// revocation checker).
    DeafToOwnNode,
    /// Reports the requested session timeout to the core instead of the
    /// negotiated one, on a server that clamps it (caught by the safety checker).
    LeasesFromRequest,
    /// Takes persistent look-alike children for contenders (caught by the
    /// liveness checker).
    PersistentContender,
    /// Shares a queue with Curator or kazoo but names its node `…-n_…`, which
    /// they do not parse (caught by the safety checker).
    OneWayInterop,
    /// A read-write lock's reader that watches its predecessor instead of
    /// the nearest writer below (caught by the liveness checker).
    ReaderWatchesPredecessor,
    /// A read-write lock's writer that ignores the readers below it (caught
    /// by the safety checker).
    WriterIgnoresReaders,
    /// A mutex that takes over on any deletion of its predecessor, without
    /// the zero-round-trip condition (caught by the safety checker).
    MutexAnyDeletion,
    /// Runs against an ensemble and forgets the last zxid it has seen when
    /// it reconnects, so a follower behind it serves it (caught by the
    /// single-system-image checker).
    TrustsBehind,
    /// Under a missing chroot, sends a level of its path answered NoNode
    /// again at once, forever, as the core once did (caught by the
    /// no-storm checker).
    StormingParents,
    /// A semaphore contender that asks for one permit whatever weight it
    /// was drawn (caught by the safety checker, which counts the weights).
    WeightBlind,
    /// Drawn revocable but built without it: never hears a cooperative
    /// revocation request (caught by the revocation-heard checker).
    DeafToRevocation,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum FaultsArg {
    /// No faults: elections and hand-offs only.
    None,
    /// Connection drops, partitions, crashes, server restarts, reordering.
    All,
    /// All of the above plus process pauses (checked with fencing).
    Pauses,
    /// All but pauses, plus client event threads lagging behind replies.
    Lag,
}

/// Parses `A..B` into a half-open range, or a count `N` into `0..N`.
pub(crate) fn parse_seed_range(s: &str) -> Result<std::ops::Range<u64>, String> {
    let Some((a, b)) = s.split_once("..") else {
        return match s.trim().parse::<u64>() {
            Ok(0) => Err(format!("no seeds in {s:?}")),
            Ok(n) => Ok(0..n),
            Err(_) => Err(format!(
                "expected A..B (B excluded) or a count N, got {s:?}"
            )),
        };
    };
    let a: u64 = a.trim().parse().map_err(|_| format!("bad start {a:?}"))?;
    let b: u64 = b.trim().parse().map_err(|_| format!("bad end {b:?}"))?;
    if a >= b {
        return Err(format!("empty range {s:?}"));
    }
    Ok(a..b)
}

/// Parses `--timeout`: a plain number is seconds (as `flock -w` and
/// `timeout` take it), anything else a duration like `500ms`, `1m30s`.
/// At most [`TIMEOUT_MAX`]: a longer one would overflow the clock it is
/// added to.
/// A signal by name (`SIGUSR1`, `USR1`, any case) or number; SIGKILL and
/// SIGSTOP are refused (a command cannot catch them to decide).
/// One `--acl` entry, `SCHEME:ID:PERMS` (the scheme up to the first `:`, the
/// permissions after the last, so a digest's `user:hash` or an IPv6 address
/// may hold `:`), checked against its scheme.
pub(crate) fn parse_acl(s: &str) -> Result<zkelect_core::AclEntry, String> {
    s.parse().map_err(|e: zkelect_core::AclError| e.to_string())
}

pub(crate) fn parse_signal(s: &str) -> Result<nix::sys::signal::Signal, String> {
    use nix::sys::signal::Signal;
    let signal = match s.parse::<i32>() {
        Ok(n) => Signal::try_from(n).map_err(|_| format!("no signal number {n}"))?,
        Err(_) => {
            let upper = s.to_ascii_uppercase();
            let name = if upper.starts_with("SIG") {
                upper
            } else {
                format!("SIG{upper}")
            };
            name.parse::<Signal>()
                .map_err(|_| format!("{s:?} is not a signal name (e.g. SIGUSR1)"))?
        }
    };
    match signal {
        Signal::SIGKILL | Signal::SIGSTOP => Err(format!(
            "{signal} cannot be caught: the command could not decide (use e.g. SIGUSR1 or SIGTERM)"
        )),
        signal => Ok(signal),
    }
}

pub(crate) fn parse_timeout(s: &str) -> Result<Duration, String> {
    let timeout = match s.trim().parse::<f64>() {
        Ok(secs) => Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"))?,
        Err(_) => humantime::parse_duration(s.trim())
            .map_err(|e| format!("{s:?}: {e} (e.g. 10, 2.5, 500ms, 1m)"))?,
    };
    if timeout > TIMEOUT_MAX {
        return Err(format!(
            "{s:?}: longer than the longest the other time options take ({} ms)",
            u64::MAX
        ));
    }
    Ok(timeout)
}

/// The longest `--timeout`: as long as the longest `--grace-ms` (`u64::MAX`
/// ms, some 584 million years), which the clock can carry; `1e19` seconds
/// and the like cannot be added to it.
pub(crate) const TIMEOUT_MAX: Duration = Duration::from_millis(u64::MAX);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse_as_seconds_or_durations() {
        assert_eq!(parse_timeout("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_timeout("2.5"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_timeout("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_timeout("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_timeout("-1").is_err());
        assert!(parse_timeout("soon").is_err());
        // Past what the clock can carry: refused, not a panic later.
        assert!(parse_timeout("1e19").is_err());
        assert!(parse_timeout("584542046090626years").is_err());
        assert_eq!(
            parse_timeout("18446744073709"),
            Ok(Duration::from_secs(18_446_744_073_709))
        );
    }

    #[test]
    fn seed_ranges_parse_or_explain() {
        assert_eq!(parse_seed_range("1..500"), Ok(1..500));
        assert!(parse_seed_range("5..5").is_err());
        assert!(parse_seed_range("x..5").is_err());
        assert_eq!(parse_seed_range("7"), Ok(0..7));
        assert!(parse_seed_range("0").is_err());
        assert!(parse_seed_range("seven").is_err());
    }

    #[test]
    fn run_requires_a_command_after_the_separator() {
        let err = Cli::try_parse_from([
            "zkelect",
            "run",
            "--connect",
            "h:1",
            "--path",
            "/p",
            "--id",
            "a",
        ])
        .unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
        let ok = Cli::try_parse_from([
            "zkelect",
            "run",
            "--connect",
            "h:1",
            "--path",
            "/p",
            "--id",
            "a",
            "--",
            "sleep",
            "1",
        ])
        .unwrap();
        let Cmd::Run(run) = ok.command else { panic!() };
        assert_eq!(run.command, ["sleep", "1"]);
    }

    fn status(extra: &[&str]) -> Result<Cli, clap::Error> {
        let mut args = vec!["zkelect", "status", "--connect", "h:1", "--path", "/p"];
        args.extend_from_slice(extra);
        Cli::try_parse_from(args)
    }

    #[test]
    fn sasl_options_parse_and_take_no_password_on_the_command_line() {
        let Cmd::Status(sasl) = status(&[
            "--transport",
            "zookeeper-client",
            "--sasl-user",
            "svc",
            "--sasl-password-file",
            "pw",
        ])
        .unwrap()
        .command
        else {
            panic!()
        };
        assert_eq!(sasl.conn.sasl_user.as_deref(), Some("svc"));
        assert_eq!(sasl.conn.sasl_password_file, Some(PathBuf::from("pw")));
        // A password file without a user; a password in argv.
        for bad in [
            &["--sasl-password-file", "pw"][..],
            &["--sasl-user", "svc", "--sasl-password", "x"],
        ] {
            assert!(status(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn transports_and_tls_options_parse() {
        let Cmd::Status(plain) = status(&[]).unwrap().command else {
            panic!()
        };
        assert_eq!(plain.conn.transport, TransportArg::ZookeeperClient);
        assert!(plain.conn.tls_ca.is_none());
        let Cmd::Status(tls) = status(&[
            "--transport",
            "zookeeper-client",
            "--tls-ca",
            "ca.pem",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
        ])
        .unwrap()
        .command
        else {
            panic!()
        };
        assert_eq!(tls.conn.transport, TransportArg::ZookeeperClient);
        assert_eq!(tls.conn.tls_key, Some(PathBuf::from("k.pem")));
        // A certificate without its key, a key without its certificate, a
        // certificate without a CA, an unknown transport: usage errors.
        for bad in [
            &["--tls-ca", "ca.pem", "--tls-cert", "c.pem"][..],
            &["--tls-ca", "ca.pem", "--tls-key", "k.pem"],
            &["--tls-cert", "c.pem", "--tls-key", "k.pem"],
            &["--transport", "zookeeper"],
        ] {
            assert!(status(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn absurd_timeouts_are_usage_errors() {
        for bad in [
            &["--connect-timeout", "18446744073709551615"][..],
            &["--connect-timeout", "0"],
            &["--connect-timeout", "3600001"],
            &["--connect-timeout", "-1"],
            &["--session-timeout", "18446744073709551615"],
            &["--session-timeout", "2147483648"],
        ] {
            let e = status(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
        for good in [
            &["--connect-timeout", "1"][..],
            &["--connect-timeout", "3600000"],
            &["--session-timeout", "2147483647"],
        ] {
            assert!(status(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn interop_parses_to_its_scheme_and_an_unknown_one_is_a_usage_error() {
        for (flag, scheme) in [
            ("none", zkelect::Interop::None),
            ("curator", zkelect::Interop::Curator),
            ("kazoo", zkelect::Interop::Kazoo),
        ] {
            let Cmd::Status(s) = status(&["--interop", flag]).unwrap().command else {
                panic!()
            };
            assert_eq!(s.interop.scheme(), scheme);
        }
        assert!(status(&["--interop", "zookeeper"]).is_err());
    }

    #[test]
    fn takeover_defaults_to_the_notification_and_relist_is_the_peers_mode() {
        let run = |extra: &[&str]| {
            let mut args = vec!["zkelect", "run", "--connect", "h:1", "--path", "/p"];
            args.extend_from_slice(&["--id", "a"]);
            args.extend_from_slice(extra);
            args.extend_from_slice(&["--", "true"]);
            Cli::try_parse_from(args)
        };
        let Cmd::Run(r) = run(&[]).unwrap().command else {
            panic!()
        };
        assert_eq!(r.takeover.mode(), zkelect::Takeover::OnNotification);
        let Cmd::Run(r) = run(&["--takeover", "relist"]).unwrap().command else {
            panic!()
        };
        assert_eq!(r.takeover.mode(), zkelect::Takeover::Relist);
        let Cmd::Lock(l) = lock(&["--takeover", "relist", "--", "true"])
            .unwrap()
            .command
        else {
            panic!()
        };
        assert_eq!(l.takeover.mode(), zkelect::Takeover::Relist);
        let Cmd::Lock(l) = lock(&["--takeover", "on-notification", "--", "true"])
            .unwrap()
            .command
        else {
            panic!()
        };
        assert_eq!(l.takeover.mode(), zkelect::Takeover::OnNotification);
        assert!(run(&["--takeover", "poll"]).is_err());
        assert!(lock(&["--takeover", "poll", "--", "true"]).is_err());
    }

    fn lock(extra: &[&str]) -> Result<Cli, clap::Error> {
        let mut args = vec!["zkelect", "lock", "--connect", "h:1", "--path", "/l"];
        args.extend_from_slice(extra);
        Cli::try_parse_from(args)
    }

    fn lock_argv(extra: &[&str]) -> Result<Cli, clap::Error> {
        let mut args = vec!["zkelect", "lock", "--connect", "h:1"];
        args.extend_from_slice(extra);
        Cli::parse_argv(args.into_iter().map(Into::into).collect())
    }

    const HASH: &str = "Dk6RtGyVWTTUyfSa87YMV3jqd5A=";

    #[test]
    fn acl_entries_repeat_and_split_scheme_first_and_perms_last() {
        let digest = format!("digest:svc:{HASH}:cdrwa");
        let Cmd::Lock(l) = lock_argv(&[
            "--path",
            "/l",
            "--acl",
            "ip:10.0.0.0/8:cdrwa",
            "--acl",
            &digest,
            "--acl",
            "ip:fd00::/8:r",
            "--acl",
            "world:anyone:r",
            "--",
            "true",
        ])
        .unwrap()
        .command
        else {
            panic!("not lock")
        };
        let texts: Vec<String> = l.acl.iter().map(ToString::to_string).collect();
        assert_eq!(
            texts,
            [
                "ip:10.0.0.0/8:cdrwa".to_owned(),
                digest.clone(),
                "ip:fd00::/8:r".to_owned(),
                "world:anyone:r".to_owned()
            ]
        );
        assert_eq!(l.acl[1].id(), format!("svc:{HASH}"));
        assert_eq!(l.acl[1].perms(), zkelect_core::Perms::ALL);
        let run = Cli::parse_argv(
            [
                "zkelect",
                "run",
                "--connect",
                "h:1",
                "--path",
                "/p",
                "--id",
                "a",
                "--acl",
                &digest,
                "--",
                "true",
            ]
            .into_iter()
            .map(Into::into)
            .collect(),
        )
        .unwrap();
        let Cmd::Run(r) = run.command else {
            panic!("not run")
        };
        assert_eq!(r.acl.len(), 1);
        // No --acl: no custom list, the policy of --auth stays.
        let Cmd::Lock(l) = lock_argv(&["--path", "/l", "--", "true"]).unwrap().command else {
            panic!("not lock")
        };
        assert!(l.acl.is_empty());
    }

    #[test]
    fn a_malformed_acl_is_a_usage_error_of_its_command() {
        let bad_entries = [
            "digest:svc:cdrwa".to_owned(),        // digest without a hash
            "digest:svc:secret:cdrwa".to_owned(), // a password, not a hash
            "world:anyone".to_owned(),            // no permissions
            "world:anyone:xyz".to_owned(),        // unknown letters
            "ip:10.0.0.0/33:cdrwa".to_owned(),    // too many bits
            "kerberos:me:cdrwa".to_owned(),       // no such scheme
            "world:someone:cdrwa".to_owned(),     // world is anyone
            format!("digest:svc:{HASH}:"),        // empty permissions
        ];
        for bad in &bad_entries {
            let lock = lock_argv(&["--path", "/l", "--acl", bad, "--", "true"]).unwrap_err();
            assert_eq!(
                lock.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{bad}"
            );
        }
        // Entries each fine, but no entry grants c: the queue could not be joined.
        let lock = lock_argv(&["--path", "/l", "--acl", "world:anyone:rd", "--", "true"]);
        let err = lock.unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
        assert!(err.to_string().contains("--acl"), "{err}");
        // Each command's usage code: run 2, lock 125.
        let code = |argv: &[&str]| match crate::invocation::parse(argv) {
            Err(crate::invocation::ArgsError::Usage { code, .. }) => Some(code),
            _ => None,
        };
        let run = |acl: &str| {
            code(&[
                "zkelect",
                "run",
                "--connect",
                "h:1",
                "--path",
                "/p",
                "--id",
                "a",
                "--acl",
                acl,
                "--",
                "true",
            ])
        };
        let lock = |acl: &str| {
            code(&[
                "zkelect",
                "lock",
                "--connect",
                "h:1",
                "--path",
                "/p",
                "--acl",
                acl,
                "--",
                "true",
            ])
        };
        for bad in ["digest:svc:cdrwa", "world:anyone:r"] {
            assert_eq!(run(bad), Some(2), "run --acl {bad}");
            assert_eq!(lock(bad), Some(125), "lock --acl {bad}");
        }
        assert_eq!(lock("auth::cdrwa"), Some(125), "auth without credentials");
        let authed = lock_argv(&[
            "--path",
            "/l",
            "--auth",
            "u:p",
            "--acl",
            "auth::cdrwa",
            "--",
            "true",
        ]);
        assert!(authed.is_ok(), "{authed:?}");
        assert_eq!(run("ip:127.0.0.1:cdrwa"), None);
        assert_eq!(lock("ip:127.0.0.1:cdrwa"), None);
    }

    #[test]
    fn lock_takes_several_paths_as_a_multi_lock_of_mutexes() {
        let Cmd::Lock(l) = lock_argv(&[
            "--path",
            "/b",
            "--path",
            "/a",
            "--timeout",
            "2",
            "--",
            "true",
        ])
        .unwrap()
        .command
        else {
            panic!()
        };
        assert_eq!(l.paths, ["/b", "/a"]);
        assert_eq!(l.conn.path, "/b");
        assert_eq!(l.timeout, Some(Duration::from_secs(2)));
        let Cmd::Lock(one) = lock_argv(&["--path", "/a", "--permits", "2", "--", "true"])
            .unwrap()
            .command
        else {
            panic!()
        };
        assert_eq!(one.paths, ["/a"]);
        for (flag, bad) in [
            ("--permits", &["--permits", "2"][..]),
            ("--weight", &["--permits", "4", "--weight", "2"]),
            ("--read", &["--read"]),
            ("--write", &["--write"]),
            ("--on-revoke", &["--on-revoke", "USR1"]),
            ("--takeover", &["--takeover", "relist"]),
        ] {
            let mut argv = vec!["--path", "/a", "--path", "/b"];
            argv.extend_from_slice(bad);
            argv.extend_from_slice(&["--", "true"]);
            let e = lock_argv(&argv).unwrap_err();
            assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict, "{flag}");
            assert!(e.to_string().contains(flag), "{flag}: {e}");
        }
        // Through the library's parse: a usage error of lock, exit 125.
        let bad = crate::parse([
            "zkelect",
            "lock",
            "--connect",
            "h:1",
            "--path",
            "/a",
            "--path",
            "/b",
            "--read",
            "--",
            "true",
        ]);
        assert_eq!(bad.unwrap_err().exit_code(), 125);
        // Other commands still take one path.
        assert!(Cli::parse_argv(
            [
                "zkelect",
                "status",
                "--connect",
                "h:1",
                "--path",
                "/a",
                "--path",
                "/b"
            ]
            .into_iter()
            .map(Into::into)
            .collect()
        )
        .is_err());
    }

    #[test]
    fn lock_takes_a_timeout_one_kind_and_a_command() {
        let Cmd::Lock(l) = lock(&["--timeout", "1.5", "--", "echo", "hi"])
            .unwrap()
            .command
        else {
            panic!()
        };
        assert_eq!(l.timeout, Some(Duration::from_millis(1500)));
        assert_eq!(l.command, ["echo", "hi"]);
        assert!(!l.read && !l.write && l.permits.is_none());
        let Cmd::Lock(l) = lock(&["--permits", "3", "--", "true"]).unwrap().command else {
            panic!()
        };
        assert_eq!(l.permits, Some(3));
        for bad in [
            &["--read", "--write", "--", "true"][..],
            &["--read", "--permits", "2", "--", "true"],
            &["--timeout", "soon", "--", "true"],
            &["--timeout", "5"],
        ] {
            assert!(lock(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn lock_takes_a_weight_with_permits_and_a_signal_to_pass_revocations_on() {
        use nix::sys::signal::Signal;
        let Cmd::Lock(l) = lock(&["--permits", "4", "--weight", "3", "--", "true"])
            .unwrap()
            .command
        else {
            panic!()
        };
        assert_eq!((l.permits, l.weight), (Some(4), Some(3)));
        assert!(l.on_revoke.is_none());
        for (given, want) in [
            ("SIGUSR1", Signal::SIGUSR1),
            ("usr2", Signal::SIGUSR2),
            ("TERM", Signal::SIGTERM),
            ("10", Signal::SIGUSR1),
        ] {
            let Cmd::Lock(l) = lock(&["--on-revoke", given, "--", "true"]).unwrap().command else {
                panic!()
            };
            assert_eq!(l.on_revoke, Some(want), "{given}");
        }
        for bad in [
            &["--weight", "2", "--", "true"][..],
            &["--permits", "4", "--weight", "x", "--", "true"],
            &["--on-revoke", "SIGKILL", "--", "true"],
            &["--on-revoke", "STOP", "--", "true"],
            &["--on-revoke", "SIGNOPE", "--", "true"],
            &["--on-revoke", "999", "--", "true"],
            &["--on-revoke", "--", "true"],
        ] {
            assert!(lock(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn revoke_asks_instead_of_forcing_with_ask() {
        let parse = |extra: &[&str]| {
            let mut args = vec!["zkelect", "revoke", "--connect", "h:1", "--path", "/l"];
            args.extend_from_slice(extra);
            Cli::try_parse_from(args)
        };
        let Cmd::Revoke(r) = parse(&["--id", "a", "--ask"]).unwrap().command else {
            panic!()
        };
        assert!(r.ask);
        let Cmd::Revoke(r) = parse(&["--id", "a"]).unwrap().command else {
            panic!()
        };
        assert!(!r.ask);
        assert!(parse(&["--id", "a", "--ask", "yes"]).is_err());
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::definition().debug_assert();
        let help = Cli::definition().render_help().to_string();
        assert!(
            help.contains(crate::exit::TABLE.lines().last().unwrap_or("")),
            "{help}"
        );
    }
}
