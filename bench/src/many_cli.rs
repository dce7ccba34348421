//! The `many` subcommand: N elections on one session, side by side with
//! zookeeper-client's lock and the client libraries' floors, once or over
//! alternated rounds (see the bench's README, "Many elections on one
//! session").

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};

use zkelect_bench::contender::ConnectSettings;
use zkelect_bench::many;
use zkelect_bench::mntr::Monitor;

use crate::{emit, resolve, server_or_connect, show_table};

#[derive(Args)]
pub(crate) struct ManyArgs {
    /// An existing server (one `host:port`: the packet counters are one
    /// server's; it must allow `srvr` and `mntr`).
    #[arg(long, value_name = "HOST:PORT", required_unless_present = "embedded")]
    connect: Option<String>,
    /// Start a ZooKeeper standalone server for this run.
    #[arg(long, conflicts_with = "connect")]
    embedded: bool,
    /// Elections on the one session (N).
    #[arg(long, default_value_t = 10_000)]
    elections: usize,
    /// Session timeout every client requests, in ms.
    #[arg(long, default_value_t = 20_000)]
    session_timeout_ms: u64,
    /// Print one JSON line per implementation on stdout; the table then goes
    /// to stderr.
    #[arg(long)]
    json: bool,
    /// Also write the results as Markdown to this file.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Parent of this run's paths (a unique child per run, deleted afterwards).
    #[arg(long, default_value = "/zkelect-bench")]
    path: String,
    /// Which sides to run, in this order, comma-separated. Memory is this
    /// process's resident set, so a side run after another may reuse what
    /// the first freed: run one side per process for the cleanest figure.
    #[arg(long, value_enum, value_delimiter = ',',
          default_values_t = [ManySide::ZookeeperClient, ManySide::ZkelectZookeeperClient, ManySide::ZkelectZookeeperAsync])]
    sides: Vec<ManySide>,
    /// Before timing anything, run every side once in a child process against
    /// the same server (untimed, its output discarded). A server in service
    /// has long compiled its request paths; a fresh JVM has not, and its
    /// just-in-time compiler then takes a quarter of the machine during the
    /// first side's start-up. The child is another process, so this one's
    /// memory figures start from the same clean heap as without it.
    #[arg(long)]
    warm_up: bool,
    /// Rounds: with more than one, every side runs once per round, each in
    /// a child process of its own against this one's server (its memory
    /// starts from a clean heap), the sides alternated round by round so
    /// that a phase of the machine hits all alike; the table gives each
    /// figure's median over the rounds, and every round's start-up.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
}

/// A side of the `many` benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ManySide {
    /// zookeeper-client's `Client::lock` (the baseline).
    ZookeeperClient,
    /// zkelect's `Session` over its zookeeper-client transport.
    ZkelectZookeeperClient,
    /// zkelect's `Session` over its zookeeper-async transport.
    ZkelectZookeeperAsync,
    /// zookeeper-client alone doing the requests of zkelect's starts: the
    /// floor of the start-up on that library.
    FloorZookeeperClient,
    /// zookeeper-async alone doing the requests of zkelect's starts: the
    /// floor of the start-up on that library.
    FloorZookeeperAsync,
}

impl ManySide {
    /// The transport of a zkelect side.
    fn zkelect(self) -> Option<many::ZkelectTransport> {
        match self {
            ManySide::ZkelectZookeeperClient => Some(many::ZkelectTransport::ZookeeperClient),
            ManySide::ZkelectZookeeperAsync => Some(many::ZkelectTransport::ZookeeperAsync),
            _ => None,
        }
    }

    /// The library of a floor side.
    fn floor(self) -> Option<many::FloorLibrary> {
        match self {
            ManySide::FloorZookeeperClient => Some(many::FloorLibrary::ZookeeperClient),
            ManySide::FloorZookeeperAsync => Some(many::FloorLibrary::ZookeeperAsync),
            _ => None,
        }
    }
}

pub(crate) fn many_command(args: &ManyArgs) -> Result<()> {
    if args.elections == 0 || args.rounds == 0 {
        bail!("--elections and --rounds must be at least 1");
    }
    let (server, connect) = server_or_connect(args.embedded, args.connect.as_deref())?;
    if args.warm_up {
        warm_up_server(args, &connect)?;
    }
    if args.rounds > 1 {
        let rounds = many_rounds(args, &connect);
        drop(server);
        return rounds;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")?;
    let result = runtime.block_on(async {
        let mut monitor = Monitor::new(resolve(&connect).await?);
        monitor.calibrate().await?;
        let unix_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let mut records = Vec::new();
        for (k, side) in args.sides.iter().enumerate() {
            let settings = many::ManySettings {
                connect: ConnectSettings {
                    connect: connect.clone(),
                    session_timeout: Duration::from_millis(args.session_timeout_ms),
                    connect_timeout: Duration::from_secs(15),
                },
                dir: format!(
                    "{}-many-{unix_ms}-{}-{k}",
                    args.path.trim_end_matches('/'),
                    std::process::id()
                ),
                elections: args.elections,
                timeout: Duration::from_secs(120),
            };
            let n = args.elections;
            let record = if let Some(transport) = side.zkelect() {
                eprintln!("{n} elections on one {} session ...", transport.side());
                many::zkelect(&settings, &monitor, transport).await?
            } else if let Some(library) = side.floor() {
                eprintln!("{n} starts' requests, {} ...", library.side());
                many::floor(&settings, &monitor, library).await?
            } else {
                eprintln!("{n} elections on one zookeeper-client session ...");
                many::zookeeper_client(&settings, &monitor).await?
            };
            emit(args.json, &record)?;
            records.push(record);
        }
        anyhow::Ok(records)
    });
    runtime.shutdown_timeout(Duration::from_secs(2));
    drop(server);
    let table = many::markdown(&result?);
    show_table(args.json, args.markdown.as_deref(), &table)
}

/// A run of this binary's `many` on `sides` against the server at
/// `connect`, with `args`' size and timeout, under paths of its own
/// (`tag` added to `args`' parent path).
fn child(
    exe: &std::path::Path,
    args: &ManyArgs,
    connect: &str,
    tag: &str,
    sides: &str,
) -> std::process::Command {
    let mut command = std::process::Command::new(exe);
    command
        .arg("many")
        .args(["--connect", connect])
        .args(["--elections", &args.elections.to_string()])
        .args(["--session-timeout-ms", &args.session_timeout_ms.to_string()])
        .args([
            "--path",
            &format!("{}-{tag}", args.path.trim_end_matches('/')),
        ])
        .args(["--sides", sides]);
    command
}

/// `many --rounds R`: each round runs every side in a child process of its
/// own against the server at `connect`, in order; then the medians.
fn many_rounds(args: &ManyArgs, connect: &str) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find this benchmark's own binary")?;
    let mut runs: Vec<many::ManyRecord> = Vec::new();
    for round in 0..args.rounds {
        for side in &args.sides {
            let name = side
                .to_possible_value()
                .map(|v| v.get_name().to_owned())
                .unwrap_or_default();
            eprintln!("round {} of {}: {name} ...", round + 1, args.rounds);
            let output = child(&exe, args, connect, &format!("r{round}"), &name)
                .arg("--json")
                .stderr(std::process::Stdio::null())
                .output()
                .with_context(|| format!("cannot start the run of {name}"))?;
            if !output.status.success() {
                bail!(
                    "round {}: {name} failed ({}); run it alone to see why",
                    round + 1,
                    output.status
                );
            }
            for line in String::from_utf8_lossy(&output.stdout).lines() {
                let record: many::ManyRecord = serde_json::from_str(line)
                    .with_context(|| format!("round {}: {name} printed {line}", round + 1))?;
                emit(args.json, &record)?;
                runs.push(record);
            }
        }
    }
    let table = many::markdown_rounds(&runs);
    show_table(args.json, args.markdown.as_deref(), &table)
}

/// Runs every side of `many` once, untimed, in a child process of this
/// binary against the server at `connect` (see `ManyArgs::warm_up`).
fn warm_up_server(args: &ManyArgs, connect: &str) -> Result<()> {
    eprintln!("warming the server up: every side once, untimed, in a child process ...");
    let exe = std::env::current_exe().context("cannot find this benchmark's own binary")?;
    // Every side the bench knows, so a side added later is warmed up too.
    let every_side = ManySide::value_variants()
        .iter()
        .filter_map(ValueEnum::to_possible_value)
        .map(|side| side.get_name().to_owned())
        .collect::<Vec<_>>()
        .join(",");
    let status = child(&exe, args, connect, "warm-up", &every_side)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .context("cannot start the warm-up run")?;
    if !status.success() {
        bail!("the warm-up run failed ({status}); run it alone to see why");
    }
    Ok(())
}
