//! The `zkelect` command: `demo`, `run`, `lock`, `status`, `revoke`, `sim`.
//!
//! Every failure maps to its own exit code (see the exit-code table in
//! `zkelect --help`), and bad input is refused before anything touches the
//! network.
//!
//! The binary (`src/main.rs`) is one call to [`main`]. The library half
//! exists so that the command line can be checked without running anything:
//! [`parse`] turns an argv into an [`Invocation`] (clap's parse plus every
//! check the commands make before any I/O) or an [`ArgsError`] carrying the
//! exit code `zkelect` would end with. The fuzz target `cli` (in
//! `zkelect-fuzz`) drives it.

mod args;
mod connect;
mod demo;
mod exit;
mod invocation;
mod lease;
mod lock;
mod lock_connect;
mod lock_exit;
mod lock_many;
mod queue_view;
mod run;
mod signals;
mod sim;
mod status;
mod supervise;
mod supervisor;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use tracing_subscriber::EnvFilter;

use crate::args::Cmd;
use crate::exit::{Code, Failure};
use crate::invocation::invoked;
pub use crate::invocation::{parse, ArgsError, Invocation};

/// The log filter for `-q`/`-v`: zkelect's own crates at the level asked
/// for, everything else (the ZooKeeper client libraries above all, whose
/// `log` records reach the subscriber through its `tracing-log` bridge) two
/// steps quieter. Their lines repeat what zkelect reports once (a server
/// restart is hundreds of "Zk session timeout" and "Failed to connect" lines),
/// so `-q` silences them entirely and `-vv` shows everything.
fn log_filter(verbose: u8, quiet: bool) -> String {
    let (ours, theirs) = match (quiet, verbose) {
        (true, _) => ("error", "off"),
        (false, 0) => ("info", "error"),
        (false, 1) => ("debug", "info"),
        (false, _) => ("trace", "trace"),
    };
    format!("{theirs},zkelect={ours},zkelect_core={ours},zkelect_sim={ours}")
}

fn init_logging(verbose: u8, quiet: bool) {
    let filter = EnvFilter::try_from_env("ZKELECT_LOG")
        .unwrap_or_else(|_| EnvFilter::new(log_filter(verbose, quiet)));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

/// The `zkelect` command, as its binary runs it: the process's arguments
/// ([`parse`]), then the subcommand, ending in its exit code.
pub fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let word = invoked(&argv).map(OsString::from);
    let supervising = word.as_ref().is_some_and(|w| w == "run" || w == "lock");
    // `run` and `lock` catch their stopping signals before anything else
    // (the command line included), so that one sent at any moment of their
    // lives cleans up instead of killing them; the runtime comes first
    // because the signals are read through it. The watchdog (`__lease`)
    // stays small: no runtime, no logging subscriber.
    let runtime = if word.as_ref().is_some_and(|w| w == "__lease") {
        None
    } else {
        match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        {
            Ok(rt) => Some(rt),
            Err(e) => {
                eprintln!("error: cannot start the async runtime: {e}");
                return Code::Other.into();
            }
        }
    };
    let stops = match (&runtime, supervising) {
        (Some(rt), true) => {
            let _entered = rt.enter();
            match signals::Stops::install() {
                Ok(stops) => Some(stops),
                Err(e) => {
                    eprintln!("error: cannot catch SIGTERM, SIGINT, SIGHUP and SIGQUIT: {e}");
                    return Code::Other.into();
                }
            }
        }
        _ => None,
    };
    let cli = match parse(argv) {
        Ok(invocation) => invocation.into_cli(),
        Err(e) => {
            e.print();
            return ExitCode::from(e.exit_code());
        }
    };
    if let Cmd::Lease(args) = &cli.command {
        // The watchdog stays small: no runtime, no logging subscriber.
        return lease::watchdog_main(Duration::from_millis(args.lease_ms), &args.command);
    }
    init_logging(cli.verbose, cli.quiet);
    let Some(runtime) = runtime else {
        // Only `__lease` goes without one, and it returned above.
        return Code::Other.into();
    };
    let stopping =
        || stops.ok_or_else(|| Failure::new(Code::Other, anyhow::anyhow!("signals not caught")));
    let result: Result<ExitCode, Failure> = runtime.block_on(async move {
        match cli.command {
            Cmd::Run(args) => run::run(args, stopping()?).await,
            Cmd::Lock(args) => lock::lock(args, stopping()?).await,
            Cmd::Status(args) => status::status(args).await.map(|()| ExitCode::SUCCESS),
            Cmd::Revoke(args) => status::revoke(args).await.map(|()| ExitCode::SUCCESS),
            Cmd::Sim(args) => sim::sim(args),
            Cmd::Demo(args) if args.connect.is_some() => demo::real(args).await,
            Cmd::Demo(args) => demo::simulated(&args),
            Cmd::Lease(_) => Ok(ExitCode::SUCCESS),
        }
    });
    // Blocking tasks (a stuck client) must not hold the exit.
    runtime.shutdown_timeout(Duration::from_secs(2));
    match result {
        Ok(code) => code,
        Err(failure) => {
            eprintln!("error: {failure}");
            failure.code.into()
        }
    }
}
