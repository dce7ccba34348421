//! `zkelect-bench`: failover and server-work benchmarks against a real
//! ZooKeeper server. See `zkelect-bench failover --help` and `bench/run.sh`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::Serialize;
use zookeeper_async::ZooKeeperExt;

use zkelect_bench::baseline::{self, BaselineRecord};
use zkelect_bench::contender::{ConnectSettings, Implementation, Strategy};
use zkelect_bench::criterion;
use zkelect_bench::economy;
use zkelect_bench::failover::{Config, ConfigReport, RoundRecord, RoundSettings};
use zkelect_bench::handoff;
use zkelect_bench::latch::{self, Latch};
use zkelect_bench::many;
use zkelect_bench::mntr::Monitor;
use zkelect_bench::report::{self, baseline_table, summary_table};
use zkelect_bench::zkelect::Zkelect;
use zkelect_tests::ZkServer;

mod many_cli;

#[derive(Parser)]
#[command(
    name = "zkelect-bench",
    version,
    about = "Benchmarks for zkelect against a real ZooKeeper"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// N candidates, R rounds of "the leader closes its session": failover
    /// time and server packets per failover, with baselines, per
    /// implementation, strategy and N.
    ///
    /// Exit status: 0 when every configuration completed; 3 when some failed
    /// (e.g. no new leader within --failover-timeout-ms: listed, and the
    /// others' results still written); 1 on any other error.
    Failover(FailoverArgs),
    /// Mutex hand-off at W waiters: zkelect and zookeeper-client's
    /// `Client::lock`, side by side with the delete→notification floor,
    /// reported as ratios to the floor.
    Handoff(HandoffArgs),
    /// N elections on one session (and N waiters on a second): start-up
    /// time, memory per idle recipe, server packets per failover when the
    /// first session closes.
    Many(many_cli::ManyArgs),
    /// Server packets per failover, hand-off, re-queue, start and idle
    /// session-minute, for zkelect in each takeover mode over each
    /// transport and for the peers (zookeeper-async's LeaderLatch,
    /// zookeeper-client's lock), one side at a time on one server.
    Economy(EconomyArgs),
    /// Print criterion's saved results (target/criterion) as a table.
    CriterionTable(CriterionArgs),
}

#[derive(Args)]
struct EconomyArgs {
    /// An existing server (one `host:port`: the packet counters are one
    /// server's; it must allow `srvr` and have no other traffic).
    #[arg(long, value_name = "HOST:PORT", required_unless_present = "embedded")]
    connect: Option<String>,
    /// Start a ZooKeeper standalone server for this run.
    #[arg(long, conflicts_with = "connect")]
    embedded: bool,
    /// Waiters behind the holder (W); elections run W + 1 candidates.
    #[arg(long, default_value_t = 3)]
    waiters: usize,
    /// Counted windows per change (starts: at most 10).
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// Uncounted rounds first.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Quiet time before each window, in ms.
    #[arg(long, default_value_t = 70)]
    idle_ms: u64,
    /// Least time a window stays open after the change, in ms.
    #[arg(long, default_value_t = 100)]
    quiet_ms: u64,
    /// How long idle sessions are counted, in seconds.
    #[arg(long, default_value_t = 60)]
    idle_secs: u64,
    /// Session timeout every client requests, in ms.
    #[arg(long, default_value_t = 20_000)]
    session_timeout_ms: u64,
    /// Print one JSON line per side and change on stdout; the table then
    /// goes to stderr.
    #[arg(long)]
    json: bool,
    /// Also write the table as Markdown to this file.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Parent of this run's paths (a unique child per run, deleted afterwards).
    #[arg(long, default_value = "/zkelect-bench")]
    path: String,
}

/// zkelect's transport in the `handoff` benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum HandoffTransport {
    /// Over zookeeper-client (the crate's default).
    ZookeeperClient,
    /// Over zookeeper-async.
    ZookeeperAsync,
}

impl HandoffTransport {
    fn transport(self) -> many::ZkelectTransport {
        match self {
            HandoffTransport::ZookeeperClient => many::ZkelectTransport::ZookeeperClient,
            HandoffTransport::ZookeeperAsync => many::ZkelectTransport::ZookeeperAsync,
        }
    }
}

#[derive(Args)]
struct HandoffArgs {
    /// An existing server (`host:port`).
    #[arg(long, value_name = "HOST:PORT", required_unless_present = "embedded")]
    connect: Option<String>,
    /// Start a ZooKeeper standalone server for this run.
    #[arg(long, conflicts_with = "connect")]
    embedded: bool,
    /// Numbers of waiters behind the holder (W), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [3usize, 50, 300])]
    waiters: Vec<usize>,
    /// Recorded rounds per waiter count.
    #[arg(long, default_value_t = 30)]
    rounds: usize,
    /// Unrecorded warm-up rounds per waiter count.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// zkelect's transports, comma-separated: each waiter count runs once
    /// per transport, the floor and zookeeper-client's lock beside it each
    /// time. zookeeper-client, the crate's default, is the floor's and the
    /// lock's own library.
    #[arg(long, value_enum, value_delimiter = ',',
          default_values_t = [HandoffTransport::ZookeeperClient, HandoffTransport::ZookeeperAsync])]
    transports: Vec<HandoffTransport>,
    /// Quiet time before each trigger, in ms.
    #[arg(long, default_value_t = 70)]
    idle_ms: u64,
    /// Session timeout every client requests, in ms.
    #[arg(long, default_value_t = 20_000)]
    session_timeout_ms: u64,
    /// Print JSON lines (handoff, handoff_summary) on stdout; the table then
    /// goes to stderr.
    #[arg(long)]
    json: bool,
    /// Also write the results as Markdown to this file.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Parent of this run's paths (a unique child per run, deleted afterwards).
    #[arg(long, default_value = "/zkelect-bench")]
    path: String,
    /// Also report where zkelect's time goes, hop by hop (`hops` JSON
    /// lines, a table on stderr): a subscriber for zkelect's `TRACE` stamps
    /// is set for the run (see the bench's README).
    #[arg(long)]
    hops: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ImplChoice {
    /// zkelect's `Election`.
    Zkelect,
    /// zookeeper-async's `recipes::leader_latch::LeaderLatch`.
    Latch,
    /// Both, on the same server in the same run.
    Both,
}

#[derive(Args)]
struct FailoverArgs {
    /// An existing server (one `host:port`: the packet counters are one
    /// server's). It must allow `mntr` and `srvr` (4lw.commands.whitelist)
    /// and enough connections from this host (maxClientCnxns ≥ N + 3, or 0).
    #[arg(long, value_name = "HOST:PORT", required_unless_present = "embedded")]
    connect: Option<String>,
    /// Start a ZooKeeper standalone server for this run (Debian's zookeeper
    /// package and Java; see scripts/test-deps.sh).
    #[arg(long, conflicts_with = "connect")]
    embedded: bool,
    /// Numbers of candidates (N), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [3usize, 50, 300])]
    candidates: Vec<usize>,
    /// Recorded rounds per configuration.
    #[arg(long, default_value_t = 30)]
    rounds: usize,
    /// Unrecorded warm-up rounds per configuration.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Which implementation(s) to run.
    #[arg(long = "impl", value_enum, default_value = "both")]
    implementation: ImplChoice,
    /// zkelect's watch strategies, comma-separated (predecessor, parent).
    #[arg(long, value_delimiter = ',', default_value = "predecessor")]
    strategy: Vec<Strategy>,
    /// Print JSON lines (server, baseline, config, round, summary) on stdout;
    /// the table then goes to stderr.
    #[arg(long)]
    json: bool,
    /// Also write the results as Markdown to this file.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Session timeout every client requests, in ms (≥ 2000: zookeeper-async
    /// storms below 1.5 s).
    #[arg(long, default_value_t = 20_000)]
    session_timeout_ms: u64,
    /// Minimum quiet period after the new leader is known before the round's
    /// counters are read, in ms.
    #[arg(long, default_value_t = 50)]
    quiet_ms: u64,
    /// How often the latch's has_leadership() is polled, in µs.
    #[arg(long, default_value_t = 100)]
    poll_us: u64,
    /// exists("/") round trips for the baseline.
    #[arg(long, default_value_t = 1000)]
    exists_samples: usize,
    /// delete→notification samples for the baseline.
    #[arg(long, default_value_t = 200)]
    notify_samples: usize,
    /// close→notification samples for the baseline (one session each).
    #[arg(long, default_value_t = 100)]
    close_samples: usize,
    /// Skip the baselines.
    #[arg(long)]
    no_baselines: bool,
    /// Parent of this run's election paths (a unique child is used per run
    /// and deleted afterwards).
    #[arg(long, default_value = "/zkelect-bench")]
    path: String,
    /// How long a round waits for a new leader before the configuration is
    /// declared failed (the run goes on with the next one), in ms.
    #[arg(long, default_value_t = 10_000)]
    failover_timeout_ms: u64,
    /// Candidates connecting at once while an election is filled.
    #[arg(long, default_value_t = 16)]
    start_concurrency: usize,
    /// Also report where zkelect's time goes, hop by hop (`hops` JSON
    /// lines, a table on stderr): a subscriber for zkelect's `TRACE` stamps
    /// is set for the run (see the bench's README).
    #[arg(long)]
    hops: bool,
}

#[derive(Args)]
struct CriterionArgs {
    /// Criterion's output directory.
    #[arg(long, default_value = "target/criterion")]
    dir: PathBuf,
    /// Only results written after this file was last modified.
    #[arg(long, value_name = "FILE")]
    newer_than: Option<PathBuf>,
    /// Markdown instead of aligned text.
    #[arg(long)]
    markdown: bool,
}

fn main() -> std::process::ExitCode {
    let result = match Cli::parse().command {
        Command::Failover(args) => failover_command(args),
        Command::Handoff(args) => handoff_command(&args),
        Command::Many(args) => many_cli::many_command(&args),
        Command::Economy(args) => economy_command(&args),
        Command::CriterionTable(args) => criterion_command(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:#}");
            if e.downcast_ref::<ConfigsFailed>().is_some() {
                std::process::ExitCode::from(3)
            } else {
                std::process::ExitCode::FAILURE
            }
        }
    }
}

fn criterion_command(args: &CriterionArgs) -> Result<()> {
    let since = match &args.newer_than {
        Some(marker) => Some(
            std::fs::metadata(marker)
                .and_then(|m| m.modified())
                .with_context(|| format!("reading {}", marker.display()))?,
        ),
        None => None,
    };
    let found = criterion::collect(&args.dir, since)?;
    if found.is_empty() {
        bail!("no criterion results under {}", args.dir.display());
    }
    let table = criterion::table(&found);
    print!(
        "{}",
        if args.markdown {
            table.to_markdown()
        } else {
            table.to_text()
        }
    );
    Ok(())
}

fn failover_command(args: FailoverArgs) -> Result<()> {
    if args.session_timeout_ms < 2000 {
        bail!("--session-timeout-ms must be at least 2000 (zookeeper-async reconnects in a storm below 1.5 s)");
    }
    if args.candidates.iter().any(|&n| n < 2) {
        bail!("--candidates: every N must be at least 2 (someone has to take over)");
    }
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    if args.hops {
        zkelect_bench::hops::install()?;
    }

    // The embedded server lives until the end of main.
    let server = if args.embedded {
        eprintln!("starting an embedded ZooKeeper server ...");
        let server = embedded_server()?;
        eprintln!("embedded ZooKeeper at {}", server.connect_string());
        Some(server)
    } else {
        None
    };
    let connect = match (&server, &args.connect) {
        (Some(s), _) => s.connect_string(),
        (None, Some(c)) => c.clone(),
        (None, None) => bail!("give --connect HOST:PORT or --embedded"),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")?;
    let result = runtime.block_on(run(&args, connect, server.is_some()));
    runtime.shutdown_timeout(Duration::from_secs(2));
    drop(server);
    result
}

fn economy_command(args: &EconomyArgs) -> Result<()> {
    if args.rounds == 0 || args.waiters == 0 {
        bail!("--rounds and --waiters must be at least 1");
    }
    let (server, connect) = server_or_connect(args.embedded, args.connect.as_deref())?;
    let unix_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let settings = economy::EconomySettings {
        connect: ConnectSettings {
            connect: connect.clone(),
            session_timeout: Duration::from_millis(args.session_timeout_ms),
            connect_timeout: Duration::from_secs(15),
        },
        dir: format!(
            "{}-economy-{unix_ms}-{}",
            args.path.trim_end_matches('/'),
            std::process::id()
        ),
        waiters: args.waiters,
        rounds: args.rounds,
        warmup: args.warmup,
        idle: Duration::from_millis(args.idle_ms),
        quiet: Duration::from_millis(args.quiet_ms),
        idle_window: Duration::from_secs(args.idle_secs),
        timeout: Duration::from_secs(10),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")?;
    let result = runtime.block_on(async {
        let mut monitor = Monitor::new(resolve(&connect).await?);
        monitor.calibrate().await?;
        let mut records = Vec::new();
        for side in economy::Side::all() {
            eprintln!("economy: {} ...", side.name());
            for record in economy::run(&monitor, &settings, side).await? {
                emit(args.json, &record)?;
                records.push(record);
            }
        }
        anyhow::Ok(records)
    });
    runtime.shutdown_timeout(Duration::from_secs(2));
    drop(server);
    let table = economy::markdown(&result?, &settings);
    show_table(args.json, args.markdown.as_deref(), &table)
}

fn handoff_command(args: &HandoffArgs) -> Result<()> {
    if args.rounds == 0 || args.waiters.contains(&0) {
        bail!("--rounds and every --waiters count must be at least 1");
    }
    if args.transports.is_empty() {
        bail!("--transports needs at least one transport");
    }
    if args.hops {
        // The paths of one transport at a time: the hop table has no
        // column for the transport.
        if args.transports.len() != 1 {
            bail!("--hops times one of zkelect's transports at a time: give --transports one");
        }
        zkelect_bench::hops::install()?;
    }
    let (server, connect) = server_or_connect(args.embedded, args.connect.as_deref())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")?;
    let result = runtime.block_on(async {
        let unix_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let mut summaries = Vec::new();
        for &waiters in &args.waiters {
            for &transport in &args.transports {
                let settings = handoff::HandoffSettings {
                    connect: ConnectSettings {
                        connect: connect.clone(),
                        session_timeout: Duration::from_millis(args.session_timeout_ms),
                        connect_timeout: Duration::from_secs(15),
                    },
                    dir: format!(
                        "{}-handoff-{unix_ms}-{}-w{waiters}-{}",
                        args.path.trim_end_matches('/'),
                        std::process::id(),
                        transport.transport().library()
                    ),
                    waiters,
                    transport: transport.transport(),
                    rounds: args.rounds,
                    warmup: args.warmup,
                    idle: Duration::from_millis(args.idle_ms),
                    timeout: Duration::from_secs(10),
                    hops: args.hops,
                };
                eprintln!(
                    "hand-off with {waiters} waiters, zkelect over {} ...",
                    transport.transport().library()
                );
                let (records, summary, hops) = handoff::run(&settings).await?;
                for record in &records {
                    emit(args.json, record)?;
                }
                for record in &hops {
                    eprint!("{}", record.text());
                    emit(args.json, record)?;
                }
                emit(args.json, &summary)?;
                summaries.push(summary);
            }
        }
        anyhow::Ok(summaries)
    });
    runtime.shutdown_timeout(Duration::from_secs(2));
    drop(server);
    let table = handoff::markdown(&result?);
    show_table(args.json, args.markdown.as_deref(), &table)
}

/// A standalone server tuned for measuring rather than for fast tests:
/// ZooKeeper's default tickTime (2 s, so sessions of 4–40 s), the full JIT
/// (the fixture limits it to C1 for start-up speed), quiet logs.
/// The server of a run: one started here (`--embedded`, kept until it is
/// dropped) or the `--connect` one; and the connect string either way.
fn server_or_connect(embedded: bool, connect: Option<&str>) -> Result<(Option<ZkServer>, String)> {
    if embedded {
        eprintln!("starting an embedded ZooKeeper server ...");
        let server = embedded_server()?;
        let connect = server.connect_string();
        return Ok((Some(server), connect));
    }
    match connect {
        Some(c) => Ok((None, c.to_owned())),
        None => bail!("give --connect HOST:PORT or --embedded"),
    }
}

fn embedded_server() -> Result<ZkServer> {
    ZkServer::builder()
        .tick_time(Duration::from_secs(2))
        .heap_mb(512)
        .log_level("WARN")
        .jvm_arg("-XX:TieredStopAtLevel=4")
        .start()
        .context("cannot start the embedded ZooKeeper server")
}

#[derive(Serialize)]
struct ServerLine {
    #[serde(rename = "type")]
    kind: &'static str,
    connect: String,
    embedded: bool,
    version: String,
}

/// Prints `table` (on stderr when the JSON lines have stdout) and writes it
/// to `markdown`, if given.
fn show_table(json: bool, markdown: Option<&std::path::Path>, table: &str) -> Result<()> {
    if json {
        eprint!("{table}");
    } else {
        print!("{table}");
    }
    if let Some(file) = markdown {
        std::fs::write(file, table).with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(())
}

fn emit(json: bool, value: &impl Serialize) -> Result<()> {
    if json {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer(&mut out, value)?;
        writeln!(out)?;
        out.flush()?;
    }
    Ok(())
}

async fn resolve(connect: &str) -> Result<SocketAddr> {
    if connect.contains(',') {
        bail!("--connect takes one server (the packet counters are per server), not {connect:?}");
    }
    let hostport = connect.split('/').next().unwrap_or(connect);
    tokio::net::lookup_host(hostport)
        .await
        .with_context(|| format!("cannot resolve {hostport}"))?
        .next()
        .with_context(|| format!("{hostport} resolves to no address"))
}

async fn run(args: &FailoverArgs, connect: String, embedded: bool) -> Result<()> {
    let settings = ConnectSettings {
        connect: connect.clone(),
        session_timeout: Duration::from_millis(args.session_timeout_ms),
        connect_timeout: Duration::from_secs(15),
    };
    let mut monitor = Monitor::new(resolve(&connect).await?);
    let srvr = monitor.four_letter_word("srvr").await?;
    let version = srvr
        .lines()
        .find_map(|l| l.strip_prefix("Zookeeper version:"))
        .map(|v| v.trim().to_owned())
        .with_context(|| format!("unexpected `srvr` reply from {connect}: {srvr:?}"))?;
    emit(
        args.json,
        &ServerLine {
            kind: "server",
            connect: connect.clone(),
            embedded,
            version: version.clone(),
        },
    )?;
    let overhead = monitor.calibrate().await?;
    eprintln!(
        "server {connect}: ZooKeeper {version}; one counter probe (srvr) = {} / {} packets received / sent",
        overhead.received, overhead.sent
    );

    let admin = latch::connect(&settings).await?;
    let unix_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let run_path = format!(
        "{}/run-{unix_ms}-{}",
        args.path.trim_end_matches('/'),
        std::process::id()
    );
    admin
        .ensure_path(&format!("{run_path}/baseline"))
        .await
        .map_err(|e| anyhow::anyhow!("cannot create {run_path}/baseline: {e:?}"))?;

    let outcome = run_all(
        args, &settings, &monitor, &run_path, &version, &connect, embedded,
    )
    .await;
    if let Err(e) = admin.delete_recursive(&run_path).await {
        eprintln!("note: could not delete {run_path}: {e:?}");
    }
    let _ = admin.close().await;
    outcome
}

async fn run_all(
    args: &FailoverArgs,
    settings: &ConnectSettings,
    monitor: &Monitor,
    run_path: &str,
    version: &str,
    connect: &str,
    embedded: bool,
) -> Result<()> {
    let mut baselines: Vec<BaselineRecord> = Vec::new();
    if !args.no_baselines {
        let dir = format!("{run_path}/baseline");
        // The same idle time before each trigger as before a round's close.
        let idle = baseline::Idle {
            monitor,
            span: Duration::from_millis(args.quiet_ms + 20),
        };
        eprintln!("baselines ...");
        let [delete_notify, delete_notify_woken] =
            baseline::delete_notify(settings, &dir, args.notify_samples, idle).await?;
        let [close_notify, close_notify_woken] =
            baseline::close_notify(settings, &dir, args.close_samples, idle).await?;
        for record in [
            baseline::exists_rtt(settings, args.exists_samples).await?,
            delete_notify,
            delete_notify_woken,
            close_notify,
            close_notify_woken,
        ] {
            eprintln!(
                "  {:<20} median {:>8.1} µs  p90 {:>8.1} µs",
                record.name, record.median_us, record.p90_us
            );
            emit(args.json, &record)?;
            baselines.push(record);
        }
    }

    let round_settings = |n: usize| RoundSettings {
        candidates: n,
        rounds: args.rounds,
        warmup: args.warmup,
        quiet: Duration::from_millis(args.quiet_ms),
        settle_timeout: Duration::from_secs(10),
        failover_timeout: Duration::from_millis(args.failover_timeout_ms),
        start_concurrency: args.start_concurrency,
        control: Duration::from_millis(args.quiet_ms + 20),
    };
    let mut candidates = args.candidates.clone();
    candidates.sort_unstable();
    candidates.dedup();
    let mut strategies = args.strategy.clone();
    strategies.sort_unstable();
    strategies.dedup();

    let mut rounds: Vec<RoundRecord> = Vec::new();
    let mut configs: Vec<ConfigReport> = Vec::new();
    let mut failures: Vec<Failure> = Vec::new();
    for &n in &candidates {
        // Every configuration at this N runs at once, and their rounds are
        // interleaved (round 1 of each, then round 2 of each, ...), so a
        // phase of load on a shared machine hits every implementation alike.
        let mut specs: Vec<Option<Strategy>> = Vec::new();
        if args.implementation != ImplChoice::Zkelect {
            specs.push(None);
        }
        if args.implementation != ImplChoice::Latch {
            specs.extend(strategies.iter().copied().map(Some));
        }
        let mut live: Vec<Config> = Vec::new();
        for spec in specs {
            let implementation: Arc<dyn Implementation> = match spec {
                None => Arc::new(Latch::new(
                    settings.clone(),
                    Duration::from_micros(args.poll_us),
                )?),
                Some(s) => Arc::new(Zkelect::new(settings.clone(), s)),
            };
            implementation.focus(false);
            let label = match implementation.strategy() {
                Some(s) => format!("{}/{s}", implementation.name()),
                None => implementation.name().to_owned(),
            };
            let path = format!("{run_path}/{}-n{n}", label.replace('/', "-"));
            eprintln!("{label} N={n}: starting {n} candidates ...");
            match Config::start(implementation, &path, &round_settings(n)).await {
                Ok(config) => {
                    eprintln!(
                        "{label} N={n}: started in {:.0} ms",
                        config.report().startup_ms
                    );
                    emit(args.json, config.report())?;
                    configs.push(config.report().clone());
                    live.push(config);
                }
                Err(e) => {
                    let failure = Failure::new(&label, n, 0, &e);
                    eprintln!("{label} N={n}: FAILED to start: {}", failure.error);
                    emit(args.json, &failure)?;
                    failures.push(failure);
                }
            }
        }
        let mut recorded: Vec<RoundRecord> = Vec::new();
        for round in 0..args.warmup + args.rounds {
            // Rotate who goes first, so no configuration always follows another.
            if round > 0 && !live.is_empty() {
                live.rotate_left(1);
            }
            let mut i = 0;
            while i < live.len() {
                match live[i].round(monitor).await {
                    Ok(Some(record)) => {
                        emit(args.json, &record)?;
                        recorded.push(record);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        let config = live.remove(i);
                        let label = config.label();
                        let done = recorded
                            .iter()
                            .filter(|r| r.setup == config.report().setup)
                            .count();
                        let failure = Failure::new(&label, n, done, &e);
                        eprintln!(
                            "{label} N={n}: FAILED after {done} recorded rounds: {}",
                            failure.error
                        );
                        emit(args.json, &failure)?;
                        failures.push(failure);
                        config.shutdown().await;
                        continue;
                    }
                }
                i += 1;
            }
        }
        for config in live {
            let label = config.label();
            if args.hops {
                let hops = config.hops();
                eprint!("{}", hops.text());
                emit(args.json, &hops)?;
            }
            let mine: Vec<f64> = recorded
                .iter()
                .filter(|r| r.setup == config.report().setup)
                .map(|r| r.failover_us)
                .collect();
            eprintln!(
                "{label} N={n}: {} rounds, failover median {:.3} ms",
                mine.len(),
                zkelect_bench::stats::Summary::of(&mine).map_or(f64::NAN, |s| s.median / 1e3)
            );
            config.shutdown().await;
        }
        rounds.extend(recorded);
    }

    let rows = report::summarize(&rounds, &configs, &baselines);
    for row in &rows {
        emit(args.json, row)?;
    }
    let table = summary_table(&rows).to_text();
    let base = if baselines.is_empty() {
        String::new()
    } else {
        baseline_table(&baselines).to_text()
    };
    if args.json {
        eprint!("\n{base}\n{table}");
    } else {
        print!("\n{base}\n{table}");
    }
    if let Some(file) = &args.markdown {
        let md = markdown(
            args, settings, version, connect, embedded, &baselines, &configs, &rows, &failures,
        );
        std::fs::write(file, md).with_context(|| format!("writing {}", file.display()))?;
    }
    if !failures.is_empty() {
        for f in &failures {
            eprintln!(
                "FAILED: {}{} N={}: {}",
                f.implementation,
                f.strategy
                    .as_ref()
                    .map(|s| format!("/{s}"))
                    .unwrap_or_default(),
                f.n,
                f.error
            );
        }
        return Err(ConfigsFailed(failures.len()).into());
    }
    Ok(())
}

/// A configuration that could not finish its rounds (printed as a JSON line
/// and listed under the table; the run goes on with the next one).
#[derive(Serialize)]
struct Failure {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(rename = "impl")]
    implementation: String,
    strategy: Option<String>,
    n: usize,
    rounds_completed: usize,
    error: String,
}

impl Failure {
    fn new(label: &str, n: usize, rounds_completed: usize, error: &anyhow::Error) -> Failure {
        let mut parts = label.splitn(2, '/');
        Failure {
            kind: "failure",
            implementation: parts.next().unwrap_or_default().to_owned(),
            strategy: parts.next().map(str::to_owned),
            n,
            rounds_completed,
            error: format!("{error:#}"),
        }
    }
}

/// The run finished, but some configurations failed (exit code 3).
#[derive(Debug)]
struct ConfigsFailed(usize);

impl std::fmt::Display for ConfigsFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} configuration(s) failed (see above); the results of the others are complete",
            self.0
        )
    }
}

impl std::error::Error for ConfigsFailed {}

#[allow(clippy::too_many_arguments)]
fn markdown(
    args: &FailoverArgs,
    settings: &ConnectSettings,
    version: &str,
    connect: &str,
    embedded: bool,
    baselines: &[BaselineRecord],
    configs: &[ConfigReport],
    rows: &[report::SummaryRow],
    failures: &[Failure],
) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "Server: ZooKeeper {version}, standalone, {}.\n",
        if embedded {
            "started by the bench (`--embedded`: tickTime=2000, forceSync=no, full JIT, 512 MiB heap, log level WARN) on loopback".to_owned()
        } else {
            format!("at {connect}")
        }
    );
    let _ = writeln!(
        md,
        "Every client requests a {} ms session timeout. At each N, every configuration's candidates run at once and their rounds are interleaved \
         (round 1 of each, then round 2 of each, ...), so a phase of load on the machine hits all alike. \
         Each configuration runs {} warm-up rounds (not counted), then {} rounds; \
         the quiet period after each takeover is at least {} ms; the latch is polled every {} µs.\n",
        settings.session_timeout.as_millis(),
        args.warmup,
        args.rounds,
        args.quiet_ms,
        args.poll_us
    );
    if !baselines.is_empty() {
        let _ = writeln!(md, "#### Baselines (same server, same run)\n");
        let _ = writeln!(md, "{}", baseline_table(baselines).to_markdown());
        let _ = writeln!(
            md,
            "Before each delete or close, both clients sit idle for {} ms while the bench probes the server every 10 ms, \
             exactly as before a failover round's close (so the baselines pay the same cost of waking idle threads).\n",
            args.quiet_ms + 20
        );
    }
    let _ = writeln!(md, "#### Failover\n");
    let _ = writeln!(md, "{}", summary_table(rows).to_markdown());
    if !failures.is_empty() {
        let _ = writeln!(
            md,
            "**Configurations that failed** (their completed rounds are in the table):\n"
        );
        for f in failures {
            let _ = writeln!(
                md,
                "- {}{} N = {}: after {} recorded rounds: {}",
                f.implementation,
                f.strategy
                    .as_ref()
                    .map(|s| format!("/{s}"))
                    .unwrap_or_default(),
                f.n,
                f.rounds_completed,
                f.error.replace('\n', " ")
            );
        }
        let _ = writeln!(md);
    }
    let _ = writeln!(
        md,
        "- *failover*: from just before the leader's `closeSession` to the moment another candidate is told it leads \
         (zkelect: its role watch; latch: the poll that first sees `has_leadership()`), one `Instant` clock.\n\
         - *× latch*: zkelect's median over the latch's median at the same N. \
         *× delete→notify*, *× close→notify*: the median over the baseline's median.\n\
         - *pkts*: the server's `zk_packets_received` / `zk_packets_sent` over the round's window (from just before the close \
         until the server is quiet, at least {} ms after the takeover), less the bench's own `srvr` probes. \
         *net of control*: the median over the rounds of that figure less the packets counted the same way in a control window \
         just before the round (nothing but the idle sessions' pings and zkelect's liveness probes, which come in bursts \
         at large N as the sessions started together), scaled to the round's window. \
         *watches fired*: watchers the server triggered in the window (`zk_sum_node_*_watch_count`). \
         zkelect/predecessor's packets include, after the takeover, the two-watch's listing: the node two above \
         the old leader watched it too, and lists unless its books name all that is left below \
         (what lets the next failover take over on the notification alone).",
        args.quiet_ms
    );
    let gaps: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            Some(format!(
                "{:.0} µs at N = {}",
                r.median_poll_gap_us?, r.setup.n
            ))
        })
        .collect();
    if !gaps.is_empty() {
        let _ = writeln!(
            md,
            "- The latch's figures include its polling: the median gap between the poll that saw the new leader and \
             the poll before it was {} (so the latch's true figure is lower by up to that, about half of it on average).",
            gaps.join(", ")
        );
    }
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "Start-up of the N candidates (connect, join, a few at a time):\n"
    );
    let mut startup = report::Table {
        text_columns: 3,
        headers: ["impl", "strategy", "N", "start-up ms"]
            .map(String::from)
            .to_vec(),
        rows: Vec::new(),
    };
    for c in configs {
        startup.rows.push(vec![
            c.setup.implementation.to_owned(),
            c.setup.strategy.clone().unwrap_or_else(|| "—".into()),
            c.setup.n.to_string(),
            format!("{:.0}", c.startup_ms),
        ]);
    }
    let _ = writeln!(md, "{}", startup.to_markdown());
    md
}
