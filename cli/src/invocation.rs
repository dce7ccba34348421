//! The command line as a value: clap's parse, then every check the
//! subcommands make before any I/O, each refusal with the exit code
//! `zkelect` ends with.
//!
//! The checks are the subcommands' own functions (`run::check`,
//! `lock::check`, `connect::check`, …), which the subcommands call again
//! themselves: a command line refused here is refused the same way there.
//! What needs a file, the clock, the host name or the network (the
//! command's executable, TLS files, a SASL password, the metrics port) is
//! left to the subcommand.

use std::ffi::{OsStr, OsString};
use std::ops::Range;
use std::time::Duration;

use zkelect_core::config::validate_path;

use crate::args::{Cli, Cmd, ConnectArgs};
use crate::exit::{Code, Failure, WithCode};
use crate::{connect, demo, lock, lock_exit, run, sim, status};

/// The subcommand the command line names (its first word that is not an
/// option) before clap has parsed it: for the signals to catch before
/// anything else, and for the exit code of a usage error clap reports.
pub(crate) fn invoked(argv: &[OsString]) -> Option<&OsStr> {
    argv.iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .find(|a| !a.as_encoded_bytes().starts_with(b"-"))
        .map(OsString::as_os_str)
}

/// A command line `zkelect` accepts: clap parsed it, and every check its
/// subcommand makes before touching a file, a socket or a server passed.
#[derive(Debug)]
pub struct Invocation {
    cli: Cli,
}

/// Why a command line is refused, with the exit code `zkelect` ends with.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// `--help` or `--version`: the text goes to stdout, and the exit code is 0.
    #[error("{0}")]
    Info(clap::Error),
    /// clap refused the command line: an unknown option, a missing or
    /// malformed value, a value out of its range, options that conflict.
    #[error("{error}")]
    Usage {
        /// clap's error, which prints the usage line.
        error: clap::Error,
        /// 2, or 125 for `lock` (whose other codes are its command's).
        code: u8,
    },
    /// A value clap took that zkelect refuses before any I/O: a path or id
    /// that cannot name a node, a connect string or timeout no transport
    /// takes, settings that do not go together.
    #[error("{message}")]
    Refused {
        /// 2 (usage) or 3 (config), or 125 for `lock`.
        code: u8,
        /// Why, as `zkelect` prints it after `error: `.
        message: String,
    },
}

impl ArgsError {
    /// The exit code `zkelect` ends with (see the table in `zkelect --help`).
    pub fn exit_code(&self) -> u8 {
        match self {
            ArgsError::Info(_) => 0,
            ArgsError::Usage { code, .. } | ArgsError::Refused { code, .. } => *code,
        }
    }

    /// Prints the error as `zkelect` does: help and version on stdout,
    /// clap's usage errors and zkelect's refusals on stderr.
    pub fn print(&self) {
        match self {
            ArgsError::Info(error) | ArgsError::Usage { error, .. } => {
                let _ = error.print();
            }
            ArgsError::Refused { message, .. } => eprintln!("error: {message}"),
        }
    }

    fn refused(failure: Failure) -> Self {
        ArgsError::Refused {
            code: failure.code as u8,
            message: failure.to_string(),
        }
    }
}

/// Parses a command line, the program's name first (as
/// [`std::env::args_os`] gives it), into an [`Invocation`], or says why
/// `zkelect` refuses it and with which exit code. Runs nothing, reads no
/// file and opens no socket; never panics.
///
/// ```
/// let ok = zkelect_cli::parse(["zkelect", "sim", "--seeds", "1..10"]).unwrap();
/// assert_eq!(ok.seeds(), Some(1..10));
/// let bad = zkelect_cli::parse(["zkelect", "status", "--connect", "h:0", "--path", "/p"]);
/// assert_eq!(bad.unwrap_err().exit_code(), 3);
/// ```
pub fn parse<I, T>(argv: I) -> Result<Invocation, ArgsError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
    // `zkelect lock` passes its command's codes through, so its own usage
    // errors are 125 (see exit::TABLE).
    let usage = if invoked(&argv).is_some_and(|w| w == "lock") {
        Code::LockFailed
    } else {
        Code::Usage
    };
    let cli = Cli::parse_argv(argv).map_err(|error| {
        if error.use_stderr() {
            ArgsError::Usage {
                error,
                code: usage as u8,
            }
        } else {
            ArgsError::Info(error)
        }
    })?;
    check(&cli).map_err(ArgsError::refused)?;
    Ok(Invocation { cli })
}

/// Each subcommand's checks that need no I/O, in the order it makes them.
fn check(cli: &Cli) -> Result<(), Failure> {
    match &cli.command {
        Cmd::Run(args) => {
            run::check(args)?;
            connect::check(&args.conn)
        }
        Cmd::Lock(args) => {
            let id = args.id.as_deref().unwrap_or(lock::DEFAULT_ID_SHAPE);
            lock::check(args, id)?;
            connect::check(&args.conn).map_err(lock_exit::before_cmd)
        }
        Cmd::Status(args) => {
            validate_path(&args.conn.path).code(Code::Config)?;
            status::recipe_of(args)?;
            connect::check(&args.conn)
        }
        Cmd::Revoke(args) => {
            validate_path(&args.conn.path).code(Code::Config)?;
            connect::check(&args.conn)
        }
        Cmd::Sim(args) => sim::check(args).map(drop),
        Cmd::Demo(args) => demo::check(args),
        Cmd::Lease(_) => Ok(()),
    }
}

impl Invocation {
    /// The subcommand, as typed: `demo`, `run`, `lock`, `status`, `revoke`,
    /// `sim`, or the internal `__lease`.
    pub fn subcommand(&self) -> &'static str {
        match &self.cli.command {
            Cmd::Demo(_) => "demo",
            Cmd::Run(_) => "run",
            Cmd::Lock(_) => "lock",
            Cmd::Status(_) => "status",
            Cmd::Revoke(_) => "revoke",
            Cmd::Lease(_) => "__lease",
            Cmd::Sim(_) => "sim",
        }
    }

    fn conn(&self) -> Option<&ConnectArgs> {
        match &self.cli.command {
            Cmd::Run(args) => Some(&args.conn),
            Cmd::Lock(args) => Some(&args.conn),
            Cmd::Status(args) => Some(&args.conn),
            Cmd::Revoke(args) => Some(&args.conn),
            Cmd::Demo(_) | Cmd::Lease(_) | Cmd::Sim(_) => None,
        }
    }

    /// The connect string, for a subcommand that talks to ZooKeeper
    /// (`demo` only with `--connect`).
    pub fn connect(&self) -> Option<&str> {
        match &self.cli.command {
            Cmd::Demo(args) => args.connect.as_deref(),
            _ => self.conn().map(|c| c.connect.as_str()),
        }
    }

    /// The path of the election or lock, for a subcommand that talks to
    /// ZooKeeper.
    pub fn path(&self) -> Option<&str> {
        match &self.cli.command {
            Cmd::Demo(args) => args.connect.as_ref().map(|_| args.path.as_str()),
            _ => self.conn().map(|c| c.path.as_str()),
        }
    }

    /// Every time bound the command line sets (given or by default), with
    /// its option: the subcommand waits, sleeps or arms a timer for each.
    pub fn durations(&self) -> Vec<(&'static str, Duration)> {
        let mut out = Vec::new();
        if let Some(conn) = self.conn() {
            out.push(("--session-timeout", conn.session_timeout()));
            out.push(("--connect-timeout", conn.connect_timeout()));
        }
        match &self.cli.command {
            Cmd::Run(args) => {
                if let Some(ms) = args.grace_ms {
                    out.push(("--grace-ms", Duration::from_millis(ms)));
                }
                if let Some(ms) = args.lead_timeout_ms {
                    out.push(("--lead-timeout", Duration::from_millis(ms)));
                }
            }
            Cmd::Lock(args) => {
                if let Some(ms) = args.grace_ms {
                    out.push(("--grace-ms", Duration::from_millis(ms)));
                }
                if let Some(timeout) = args.timeout {
                    out.push(("--timeout", timeout));
                }
            }
            Cmd::Lease(args) => out.push(("--lease-ms", Duration::from_millis(args.lease_ms))),
            Cmd::Status(_) | Cmd::Revoke(_) | Cmd::Demo(_) | Cmd::Sim(_) => {}
        }
        out
    }

    /// The seeds `sim` runs.
    pub fn seeds(&self) -> Option<Range<u64>> {
        match &self.cli.command {
            Cmd::Sim(args) => sim::check(args).ok(),
            _ => None,
        }
    }

    pub(crate) fn into_cli(self) -> Cli {
        self.cli
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(argv: &[&str]) -> u8 {
        match parse(argv.iter().copied()) {
            Ok(_) => 0,
            Err(e) => e.exit_code(),
        }
    }

    #[test]
    fn usage_errors_are_2_and_125_for_lock() {
        assert_eq!(code(&["zkelect", "status", "--no-such-flag"]), 2);
        assert_eq!(code(&["zkelect", "-v", "lock", "--no-such-flag"]), 125);
        assert_eq!(code(&["zkelect", "frobnicate"]), 2);
        assert_eq!(code(&["zkelect"]), 2);
        assert!(matches!(
            parse(["zkelect", "--help"]),
            Err(ArgsError::Info(_))
        ));
        assert!(matches!(
            parse(["zkelect", "sim", "--version"]),
            Err(ArgsError::Info(_))
        ));
    }

    #[test]
    fn the_subcommands_own_checks_run_before_any_io() {
        let status = ["zkelect", "status", "--connect", "h:1", "--path"];
        // A path that cannot name a node, a connect string no client takes,
        // a session timeout zookeeper-async refuses: config errors (3).
        assert_eq!(code(&[&status[..], &["p"]].concat()), 3);
        assert_eq!(
            code(&[
                "zkelect",
                "revoke",
                "--connect",
                "h:0",
                "--path",
                "/p",
                "--id",
                "a"
            ]),
            3
        );
        assert_eq!(
            code(
                &[
                    &status[..],
                    &[
                        "/p",
                        "--transport",
                        "zookeeper-async",
                        "--session-timeout",
                        "10"
                    ]
                ]
                .concat()
            ),
            3
        );
        // Settings that do not go together: usage (2).
        assert_eq!(
            code(&[&status[..], &["/p", "--auth", "nocolon"]].concat()),
            2
        );
        assert_eq!(
            code(&[&status[..], &["/p", "--recipe", "semaphore"]].concat()),
            2
        );
        // The same for lock: 125, its own code for any failure of its own.
        let lock = ["zkelect", "lock", "--connect", "h:1", "--path"];
        assert_eq!(code(&[&lock[..], &["/l", "--", "true"]].concat()), 0);
        assert_eq!(code(&[&lock[..], &["l", "--", "true"]].concat()), 125);
        assert_eq!(
            code(&[&lock[..], &["/l", "--permits", "0", "--", "true"]].concat()),
            125
        );
        let Err(ArgsError::Refused { message, .. }) =
            parse([&lock[..], &["/l", "--auth", "x", "--", "true"]].concat())
        else {
            panic!("--auth x accepted")
        };
        assert!(message.contains("before the command ran"), "{message}");
        // run: its id and --leaders; sim and demo: their bounds.
        let run = ["zkelect", "run", "--connect", "h:1", "--path", "/p", "--id"];
        assert_eq!(code(&[&run[..], &["a", "--", "true"]].concat()), 0);
        assert_eq!(code(&[&run[..], &["a/b", "--", "true"]].concat()), 3);
        assert_eq!(
            code(&[&run[..], &["a", "--leaders", "0", "--", "true"]].concat()),
            3
        );
        assert_eq!(code(&["zkelect", "sim", "--seeds", "5..5"]), 2);
        assert_eq!(code(&["zkelect", "sim", "--candidates", "0"]), 2);
        assert_eq!(code(&["zkelect", "demo", "--candidates", "51"]), 2);
        assert_eq!(
            code(&["zkelect", "demo", "--connect", "h:1", "--candidates", "1"]),
            2
        );
    }

    /// What the `cli` fuzz target found: each was accepted, and would have
    /// ended badly once run.
    #[test]
    fn what_the_fuzzer_found_is_refused_before_running() {
        // The last seed: `sim` ran nothing and reported success.
        assert_eq!(
            code(&["zkelect", "sim", "--seed", "18446744073709551615"]),
            2
        );
        assert_eq!(
            parse(["zkelect", "sim", "--seed", "18446744073709551614"])
                .unwrap()
                .seeds(),
            Some(u64::MAX - 1..u64::MAX)
        );
        // demo's proxies dial one plain HOST:PORT: a list of servers, a
        // chroot or TLS ended as an unreachable server (4) a timeout later.
        for bad in ["h:1,k:2", "h:1/apps", "tcp+tls://h:2281", "h:0"] {
            assert_eq!(code(&["zkelect", "demo", "--connect", bad]), 2, "{bad}");
        }
        assert_eq!(code(&["zkelect", "demo", "--connect", "tcp://h:1"]), 0);
        // The largest --grace-ms: it does not fit the lease (3), and saying
        // which session timeout would fit no longer overflows.
        let run = [
            "zkelect",
            "run",
            "--connect",
            "h:1",
            "--path",
            "/p",
            "--id",
            "a",
        ];
        assert_eq!(
            code(
                &[
                    &run[..],
                    &["--grace-ms", "18446744073709551615", "--", "true"]
                ]
                .concat()
            ),
            3
        );
        // A --timeout the clock cannot carry: lock's usage error.
        let lock = ["zkelect", "lock", "--connect", "h:1", "--path", "/l"];
        assert_eq!(
            code(&[&lock[..], &["--timeout", "1e19", "--", "true"]].concat()),
            125
        );
    }

    #[test]
    fn an_invocation_shows_what_it_will_use() {
        let run = parse([
            "zkelect",
            "run",
            "--connect",
            "h:1/apps",
            "--path",
            "/p",
            "--id",
            "a",
            "--lead-timeout",
            "7",
            "--",
            "true",
        ])
        .unwrap();
        assert_eq!(run.subcommand(), "run");
        assert_eq!(run.connect(), Some("h:1/apps"));
        assert_eq!(run.path(), Some("/p"));
        assert!(run
            .durations()
            .contains(&("--lead-timeout", Duration::from_millis(7))));
        assert_eq!(run.seeds(), None);
        let demo = parse(["zkelect", "demo"]).unwrap();
        assert_eq!((demo.connect(), demo.path()), (None, None));
    }

    #[test]
    fn the_subcommand_word_skips_options_and_stops_at_the_separator() {
        let argv = |words: &[&str]| words.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            invoked(&argv(&["zkelect", "-v", "lock", "x"])),
            Some(OsStr::new("lock"))
        );
        assert_eq!(invoked(&argv(&["zkelect", "--", "lock"])), None);
        assert_eq!(invoked(&argv(&["zkelect"])), None);
    }
}
