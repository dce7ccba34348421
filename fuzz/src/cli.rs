//! The `cli` target: the `zkelect` command line, as [`zkelect_cli::parse`]
//! takes it (clap's parse, then every check the subcommands make before
//! any I/O).
//!
//! The bytes become an argv built from what real command lines are made of,
//! so the engine reaches the options deep in each subcommand instead of
//! spending its time on unknown words: the program's name, global flags, a
//! subcommand (or a wrong word), usually the options it requires with good
//! values, then options of that subcommand (sometimes another's), each with
//! a value drawn for its kind (milliseconds at and past their bounds,
//! seconds and durations, paths, ids, connect strings of up to 60 servers,
//! the values of each enum, seed ranges, counts) or raw text, as `--flag
//! value`, `--flag=value` or with the value missing, then maybe `--` and a
//! command. A word may be any bytes, UTF-8 or not, as `argv` can be.
//!
//! Bytes that begin with `zkelect` and a NUL are the argv itself, its words
//! separated by NULs as `/proc/PID/cmdline` writes them: the hand-written
//! seeds and the minimised findings in `fuzz/corpus/cli/` are such command
//! lines, readable with `tr '\0' ' '`.
//!
//! The promise: a value or a typed error, never a panic (the engine's
//! `-timeout` catches a hang), and the same verdict every time. A refusal
//! carries the exit code the table in `zkelect --help` gives it: 0 for help
//! and version, 2 for usage and 3 for settings, and for `lock` 125 for
//! either. What is accepted is usable: the connect string parses (for
//! `demo --connect`, one plain `HOST:PORT` and no chroot, which is all its
//! proxy can dial), the path can name a node, the session and connect timeouts
//! are within the transports' bounds, every time bound can be added to the
//! clock, and `sim` runs at least one seed.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::time::Instant;

use zkelect::{CONNECT_TIMEOUT_MAX, SESSION_TIMEOUT_MAX};
use zkelect_cli::{parse, ArgsError, Invocation};
use zkelect_core::config::validate_path;
use zkelect_core::connect_string::{ConnectString, Scheme};

use crate::read::Bytes;

const SUBCOMMANDS: &[&str] = &[
    "run", "lock", "status", "revoke", "sim", "demo", "__lease", "help", "", "-", "RUN", "locks",
];

const GLOBAL: &[&str] = &[
    "-v",
    "-vv",
    "-q",
    "--verbose",
    "--quiet",
    "-vq",
    "--help",
    "-V",
];

/// The options every subcommand that connects takes.
const CONNECT: &[&str] = &[
    "--connect",
    "--path",
    "--session-timeout",
    "--connect-timeout",
    "--auth",
    "--transport",
    "--tls-ca",
    "--tls-cert",
    "--tls-key",
    "--sasl-user",
    "--sasl-password-file",
];

fn options_of(sub: &str) -> &'static [&'static str] {
    match sub {
        "run" => &[
            "--id",
            "--data",
            "--policy",
            "--interop",
            "--leaders",
            "--metrics-addr",
            "--lead-timeout",
            "--grace-ms",
            "--takeover",
            "--acl",
        ],
        "lock" => &[
            "--id",
            "--timeout",
            "--read",
            "--write",
            "--permits",
            "--grace-ms",
            "--metrics-addr",
            "--takeover",
            "--weight",
            "--on-revoke",
            "--acl",
        ],
        "status" => &[
            "--json",
            "--watch",
            "--leaders",
            "--recipe",
            "--permits",
            "--interop",
        ],
        "revoke" => &["--id", "--all", "--node", "--ask"],
        "sim" => &[
            "--seed",
            "--seeds",
            "--candidates",
            "--leaders",
            "--faults",
            "--trace",
            "--save",
            "--canary",
        ],
        "demo" => &["--seed", "--candidates", "--connect", "--path"],
        "__lease" => &["--lease-ms"],
        _ => &["--help", "--version", "--nope", "-x"],
    }
}

const MILLIS: &[&str] = &[
    "0",
    "1",
    "1499",
    "1500",
    "10000",
    "2147483647",
    "2147483648",
    "3600000",
    "3600001",
    "18446744073709551615",
    "18446744073709551616",
    "-1",
    "+5",
    " 5",
    "0x10",
    "",
];

const TIMEOUTS: &[&str] = &[
    "0",
    "1.5",
    "30",
    "-1",
    "-0",
    "nan",
    "inf",
    "1e19",
    "1e300",
    "9223372036",
    "18446744073709551615",
    "500ms",
    "1m30s",
    "584542046090years",
    "0.0000000001",
    "1 h",
    "1e-10",
    "",
];

const PATHS: &[&str] = &[
    "/svc/leader",
    "/",
    "svc",
    "/a//b",
    "/a/",
    "/zookeeper",
    "/zookeeper/quota",
    "/a/./b",
    "/a/../b",
    "/\u{e9}",
    "/a\u{0}b",
    "/a\u{1}b",
    "",
    "/zkelect/demo",
];

const IDS: &[&str] = &[
    "a",
    "node-a",
    "a/b",
    "",
    " ",
    "n_0000000001",
    "x-lock-",
    "__REVOKE__",
    "\u{e9}",
    ".",
    "..",
    "a\u{0}",
];

const CONNECTS: &[&str] = &[
    "h:1",
    "127.0.0.1:2181",
    "zk1:2181,zk2:2181/apps",
    "zk1:2181,zk2:2181,zk3:2181",
    "h:0",
    "h:",
    "h",
    ":2181",
    "[::1]:2181",
    "::1",
    "tcp+tls://h:2281",
    "tcp://h:1/apps/x",
    "h:1/",
    "h:1//x",
    "h:1/zookeeper",
    "h:1,,k:2",
    "h:65536",
    "",
];

const COUNTS: &[&str] = &[
    "0",
    "1",
    "2",
    "4",
    "16",
    "17",
    "20",
    "21",
    "50",
    "51",
    "200",
    "201",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "-1",
];

const SEEDS: &[&str] = &[
    "1..500",
    "5..5",
    "6..5",
    "0..1",
    "0..18446744073709551615",
    "18446744073709551614..18446744073709551615",
    "18446744073709551615",
    "0",
    "a..b",
    "1..",
    "..",
    " 1 .. 2 ",
    "1...2",
];

/// `lock --on-revoke`: names with and without `SIG`, any case, numbers,
/// the two a command cannot catch, and nonsense.
const SIGNALS: &[&str] = &[
    "SIGUSR1", "usr2", "TERM", "sighup", "10", "0", "64", "999", "-1", "SIGKILL", "kill", "STOP",
    "9", "SIGNOPE", "SIG", "",
];

/// `run`/`lock --acl`, drawn three times in four: entries of every scheme that
/// are good alone (an id holding `:` for digest and IPv6).
const GOOD_ACLS: &[&str] = &[
    "world:anyone:cdrwa",
    "ip:127.0.0.1:cdrwa",
    "ip:10.0.0.0/8:cdrwa",
    "ip:fd00::/8:rcd",
    "digest:svc:Dk6RtGyVWTTUyfSa87YMV3jqd5A=:cdrwa",
    "sasl:svc:cdrwa",
    "x509:CN=svc,O=zkelect:cdrwa",
];

/// `run`/`lock --acl`, the fourth time: entries good alone that lack a
/// permission the queue needs, an `auth` entry (refused without
/// credentials), and broken ones: a digest without its hash or with a
/// password, bad bits, an unknown scheme, no permissions, letters that are
/// not permissions.
const ACLS: &[&str] = &[
    "world:anyone:r",
    "digest:svc:Dk6RtGyVWTTUyfSa87YMV3jqd5A=:r",
    "auth::cdrwa",
    "digest:svc:cdrwa",
    "digest:svc:secret:cdrwa",
    "ip:10.0.0.0/33:cdrwa",
    "ip:not-an-address:r",
    "kerberos:me:cdrwa",
    "world:someone:r",
    "world:anyone",
    "world:anyone:",
    "world:anyone:xyz",
    ":::",
    "",
];

const ENUMS: &[&str] = &[
    "on-notification",
    "relist",
    "zookeeper-async",
    "zookeeper-client",
    "zookeeper",
    "standard",
    "session-aware",
    "none",
    "curator",
    "kazoo",
    "mutex",
    "semaphore",
    "read-write",
    "all",
    "pauses",
    "lag",
    "ignores-disconnect",
    "storming-parents",
    "trusts-behind",
    "one-way-interop",
    "CURATOR",
];

const ADDRS: &[&str] = &["127.0.0.1:0", "[::1]:9000", "h:1", "0.0.0.0:99999", ""];

const FILES: &[&str] = &["ca.pem", "/nonexistent/x", "", "-", "/dev/null"];

const AUTHS: &[&str] = &["u:p", "nocolon", ":", "u:", ":p", "", "a:b:c"];

/// A value for `flag`, of its kind most of the time.
fn value(b: &mut Bytes<'_>, flag: &str) -> OsString {
    if b.u8() % 8 == 0 {
        return word(b);
    }
    let pool: &[&str] = match flag {
        "--session-timeout" | "--connect-timeout" | "--grace-ms" | "--lead-timeout"
        | "--lease-ms" => {
            if b.u8() % 4 == 0 {
                return b.u64().to_string().into();
            }
            MILLIS
        }
        "--timeout" => TIMEOUTS,
        "--path" => PATHS,
        "--id" | "--node" | "--data" | "--sasl-user" => IDS,
        "--connect" => return connect_string(b).into(),
        "--leaders" | "--permits" | "--candidates" | "--weight" => COUNTS,
        "--on-revoke" => SIGNALS,
        "--acl" if b.u8() % 4 != 0 => GOOD_ACLS,
        "--acl" => ACLS,
        "--seed" => {
            if b.bool() {
                return b.u64().to_string().into();
            }
            COUNTS
        }
        "--seeds" => SEEDS,
        "--transport" | "--policy" | "--interop" | "--recipe" | "--faults" | "--canary"
        | "--takeover" => ENUMS,
        "--metrics-addr" => ADDRS,
        "--tls-ca" | "--tls-cert" | "--tls-key" | "--sasl-password-file" | "--save" => FILES,
        "--auth" => AUTHS,
        _ => return word(b),
    };
    b.pick(pool).into()
}

/// A connect string: one from the list, or servers strung together (up to
/// 60), with a chroot at the end sometimes.
fn connect_string(b: &mut Bytes<'_>) -> String {
    if b.bool() {
        return b.pick(CONNECTS).to_owned();
    }
    let servers = if b.u8() % 8 == 0 { 60 } else { b.below(4) + 1 };
    let mut s = (0..servers)
        .map(|i| format!("zk{i}:{}", 2181 + i))
        .collect::<Vec<_>>()
        .join(",");
    if b.bool() {
        s.push_str(b.pick(PATHS));
    }
    s
}

/// Any word: text, or bytes that need not be UTF-8.
fn word(b: &mut Bytes<'_>) -> OsString {
    let len = b.below(24);
    let bytes: Vec<u8> = (0..len).map(|_| b.u8()).collect();
    if b.bool() {
        String::from_utf8_lossy(&bytes).into_owned().into()
    } else {
        OsString::from_vec(bytes)
    }
}

/// The options a subcommand cannot go without, with good values, so that
/// the rest of the command line is what decides.
fn required(sub: &str) -> &'static [(&'static str, &'static str)] {
    match sub {
        "run" => &[
            ("--connect", "127.0.0.1:2181"),
            ("--path", "/svc/leader"),
            ("--id", "a"),
        ],
        "lock" | "status" => &[("--connect", "127.0.0.1:2181"), ("--path", "/locks/x")],
        "revoke" => &[
            ("--connect", "127.0.0.1:2181"),
            ("--path", "/svc/leader"),
            ("--id", "a"),
        ],
        "__lease" => &[("--lease-ms", "1000")],
        _ => &[],
    }
}

/// The program's name and a NUL: a literal command line follows.
const LITERAL: &[u8] = b"zkelect\0";

/// The argv the bytes describe.
pub fn argv(data: &[u8]) -> Vec<OsString> {
    if data.starts_with(LITERAL) {
        let words = data[LITERAL.len()..]
            .split(|&c| c == 0)
            .map(|w| OsString::from_vec(w.to_vec()));
        // One trailing NUL ends the last word, as in /proc/PID/cmdline.
        let mut argv: Vec<OsString> = std::iter::once("zkelect".into()).chain(words).collect();
        if data.len() > LITERAL.len() && data.ends_with(&[0]) {
            argv.pop();
        }
        return argv;
    }
    let mut b = Bytes::new(data);
    let mut argv: Vec<OsString> = vec!["zkelect".into()];
    // Reads past the end are zeros: every loop has its own bound.
    for _ in 0..b.below(4) {
        argv.push(b.pick(GLOBAL).into());
    }
    let sub = match b.u8() % 16 {
        0 => None,
        _ => Some(b.pick(SUBCOMMANDS)),
    };
    match sub {
        Some(sub) => argv.push(sub.into()),
        None => argv.push(word(&mut b)),
    }
    let sub = sub.unwrap_or("");
    if b.u8() % 4 != 0 {
        for (flag, good) in required(sub) {
            // Now and then, one of them missing or bad.
            match b.u8() % 16 {
                0 => {}
                1 => {
                    argv.push((*flag).into());
                    argv.push(value(&mut b, flag));
                }
                _ => {
                    argv.push((*flag).into());
                    argv.push((*good).into());
                }
            }
        }
    }
    // `lock --path A --path B …`: a multi-lock, its paths good or bad.
    if sub == "lock" {
        for _ in 0..b.below(4) {
            argv.push("--path".into());
            // Mostly good and distinct, now and then the required one again.
            let path = match b.u8() % 4 {
                0 => value(&mut b, "--path"),
                1 => "/locks/x".into(),
                _ => b.pick(&["/locks/y", "/locks/z", "/locks/x/y"][..]).into(),
            };
            argv.push(path);
        }
    }
    let options = b.below(8);
    for _ in 0..options {
        if b.is_empty() {
            break;
        }
        let flag = match b.u8() % 16 {
            0 => b.pick(GLOBAL),
            1 => {
                let other = b.pick(SUBCOMMANDS);
                b.pick(options_of(other))
            }
            2..=5 if options_of(sub).len() < 8 || b.bool() => b.pick(CONNECT),
            _ => b.pick(options_of(sub)),
        };
        let value = value(&mut b, flag);
        match b.u8() % 8 {
            // As `--flag=value`.
            0 => {
                let mut joined = OsString::from(flag);
                joined.push("=");
                joined.push(&value);
                argv.push(joined);
            }
            // No value.
            1 => argv.push(flag.into()),
            _ => {
                argv.push(flag.into());
                argv.push(value);
            }
        }
    }
    if b.u8() % 4 != 0 {
        argv.push("--".into());
        let words = b.below(3) + 1;
        argv.push(b.pick(&["true", "sh", "./x", "", "-c"][..]).into());
        for _ in 1..words {
            argv.push(word(&mut b));
        }
    }
    argv
}

/// The first word after the program's name that is not an option, before
/// `--`: the subcommand, as `zkelect` reads it for its exit codes.
fn subcommand_word(argv: &[OsString]) -> Option<&OsString> {
    argv.iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .find(|a| !a.as_encoded_bytes().starts_with(b"-"))
}

fn check_refusal(argv: &[OsString], e: &ArgsError) {
    let lock = subcommand_word(argv).is_some_and(|w| w == "lock");
    let code = e.exit_code();
    match e {
        ArgsError::Info(_) => assert_eq!(code, 0, "{argv:?}"),
        ArgsError::Usage { .. } => {
            assert_eq!(code, if lock { 125 } else { 2 }, "{argv:?}: {e}")
        }
        ArgsError::Refused { message, .. } => {
            assert!(!message.trim().is_empty(), "{argv:?}: an empty message");
            if lock {
                assert_eq!(code, 125, "{argv:?}: {message}");
            } else {
                assert!(matches!(code, 2 | 3), "{argv:?}: exit {code}: {message}");
            }
        }
    }
}

fn check_accepted(argv: &[OsString], ok: &Invocation) {
    assert_eq!(
        subcommand_word(argv)
            .map(|w| w.to_string_lossy())
            .as_deref(),
        Some(ok.subcommand()),
        "{argv:?}"
    );
    if let Some(hosts) = ok.connect() {
        match ConnectString::parse(hosts) {
            Ok(parsed) if ok.subcommand() == "demo" => assert!(
                parsed.servers.len() == 1
                    && parsed.chroot.is_none()
                    && parsed.servers[0].scheme != Some(Scheme::Tls),
                "{argv:?}: demo dials one plain HOST:PORT, yet {hosts:?} was accepted"
            ),
            Ok(_) => {}
            Err(e) => panic!("{argv:?}: {hosts:?} accepted, yet it does not parse: {e}"),
        }
    }
    if let Some(path) = ok.path() {
        assert!(
            validate_path(path).is_ok(),
            "{argv:?}: path {path:?} accepted"
        );
    }
    let now = Instant::now();
    for (flag, d) in ok.durations() {
        assert!(
            now.checked_add(d).is_some(),
            "{argv:?}: {flag} {d:?} accepted, yet it overflows the clock"
        );
        match flag {
            "--session-timeout" => assert!(
                !d.is_zero() && d <= SESSION_TIMEOUT_MAX,
                "{argv:?}: {flag} {d:?}"
            ),
            "--connect-timeout" => assert!(
                !d.is_zero() && d <= CONNECT_TIMEOUT_MAX,
                "{argv:?}: {flag} {d:?}"
            ),
            _ => {}
        }
    }
    if ok.subcommand() == "sim" {
        let seeds = ok.seeds();
        assert!(
            seeds.as_ref().is_some_and(|s| !s.is_empty()),
            "{argv:?}: sim accepted with the seeds {seeds:?}, which run nothing"
        );
    }
}

/// The verdict, as it can be compared: the exit code and the text.
fn verdict(result: &Result<Invocation, ArgsError>) -> (u8, String) {
    match result {
        Ok(ok) => (0, format!("{ok:?}")),
        Err(e) => (e.exit_code(), e.to_string()),
    }
}

/// The target: see the module docs.
pub fn run(data: &[u8]) {
    let argv = argv(data);
    let first = parse(argv.clone());
    match &first {
        Ok(ok) => check_accepted(&argv, ok),
        Err(e) => check_refusal(&argv, e),
    }
    assert_eq!(
        verdict(&first),
        verdict(&parse(argv.clone())),
        "{argv:?}: two verdicts"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_short_inputs_run() {
        run(&[]);
        run(&[1, 2, 3]);
        run(&[0x33; 90]);
    }

    #[test]
    fn literal_command_lines_are_nul_separated() {
        let words = |argv: Vec<OsString>| {
            argv.into_iter()
                .map(|w| w.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            words(argv(b"zkelect\0sim\0--seed\x007\0")),
            ["zkelect", "sim", "--seed", "7"]
        );
        assert_eq!(words(argv(b"zkelect\0sim\0\0")), ["zkelect", "sim", ""]);
        assert_eq!(words(argv(b"zkelect\0")), ["zkelect", ""]);
    }

    #[test]
    fn the_bytes_reach_every_subcommand_with_its_required_options() {
        let mut seen = std::collections::BTreeSet::new();
        let mut multi_locks = 0;
        // Command lines with --acl: (accepted, refused).
        let mut acls = (0, 0);
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..4_000 {
            let data: Vec<u8> = (0..48)
                .map(|_| {
                    state = state
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    (state >> 56) as u8
                })
                .collect();
            let drawn = argv(&data);
            let paths = drawn.iter().filter(|w| *w == "--path").count();
            let acl = drawn.iter().any(|w| w == "--acl");
            match parse(drawn) {
                Ok(ok) => {
                    if ok.subcommand() == "lock" && paths > 1 {
                        multi_locks += 1;
                    }
                    if acl {
                        acls.0 += 1;
                    }
                    seen.insert(ok.subcommand());
                }
                Err(_) if acl => acls.1 += 1,
                Err(_) => {}
            }
        }
        for sub in ["run", "lock", "status", "revoke", "sim", "demo", "__lease"] {
            assert!(seen.contains(sub), "{sub} never accepted: {seen:?}");
        }
        assert!(multi_locks > 0, "lock with several --path never accepted");
        assert!(
            acls.0 > 0 && acls.1 > 0,
            "--acl accepted and refused: {acls:?}"
        );
    }
}
