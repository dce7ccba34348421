//! The command line speaks each recipe's words: `zkelect lock` is a lock, a
//! semaphore, a reader or a writer, never an election, in its help and in
//! every message it prints (its own and the library's log lines, at `-v`),
//! whether it fails before queueing, waits, holds or gives up; and
//! `zkelect --help` names every command, in its first line and in its list.
//!
//! The messages are gathered from real runs against a real ZooKeeper server,
//! and each case also asserts the words it should say, so that a message
//! that vanished (or a run that failed for another reason) cannot pass for
//! one free of "election".

use std::time::Duration;

use zkelect_tests::ZkServer;

use crate::support::{closed_port, zkelect, Candidate, ChildKind, SESSION_MS};

const WITHIN: Duration = Duration::from_secs(30);

/// Words of an election that a lock's output must not hold (`zkelect`
/// itself aside).
fn election_words(text: &str) -> Vec<String> {
    let lower = text.to_lowercase().replace("zkelect", "");
    lower
        .lines()
        .filter(|line| line.contains("elect"))
        .map(str::to_owned)
        .collect()
}

fn assert_lock_words(what: &str, text: &str, must: &[&str]) {
    let found = election_words(text);
    assert!(
        found.is_empty(),
        "{what} speaks of an election:\n{}\n--- whole output:\n{text}",
        found.join("\n")
    );
    for word in must {
        assert!(text.contains(word), "{what} does not say {word:?}:\n{text}");
    }
}

/// Runs `zkelect ARGS`, wanting exit `code`, and returns stdout + stderr.
fn output(args: &[&str], code: i32) -> String {
    let out = zkelect(args, WITHIN);
    let text = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(
        out.code(),
        Some(code),
        "`zkelect {}` exit code:\n{text}",
        args.join(" ")
    );
    text
}

#[test]
fn lock_help_never_says_election() {
    for args in [&["lock", "--help"][..], &["lock", "-h"], &["help", "lock"]] {
        let text = output(args, 0);
        assert_lock_words(
            &format!("`zkelect {}`", args.join(" ")),
            &text,
            &["lock", "--permits", "--read", "--write", "The lock's path"],
        );
    }
    // revoke's help says what a revoked lock holder does, not that it
    // "rejoins at the back" as if it were a candidate.
    let revoke = output(&["revoke", "--help"], 0);
    assert!(revoke.contains("exits 123"), "{revoke}");
    assert!(revoke.contains("n_0000000007"), "{revoke}");
    // sim's help says the end of a range is excluded.
    let sim = output(&["sim", "--help"], 0);
    assert!(sim.contains("B excluded"), "{sim}");
}

#[test]
fn zkelect_help_names_every_command() {
    let help = output(&["--help"], 0);
    let first = help.lines().next().unwrap_or_default().to_owned();
    // The commands clap lists (every visible subcommand, `help` aside).
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    for want in ["demo", "run", "lock", "status", "revoke", "sim"] {
        assert!(commands.contains(&want), "{want} not listed:\n{help}");
    }
    let about: String = help
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    for command in &commands {
        assert!(
            about.contains(command),
            "the first lines ({about:?}) do not name `{command}`; first line {first:?}"
        );
    }
}

#[test]
fn lock_messages_never_say_election() {
    let nowhere = format!("127.0.0.1:{}", closed_port());
    let session = SESSION_MS.to_string();
    let base = |connect: &str, path: &str, id: &str| -> Vec<String> {
        [
            "-v",
            "lock",
            "--connect",
            connect,
            "--path",
            path,
            "--id",
            id,
            "--session-timeout",
            &session,
            "--connect-timeout",
            "2000",
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let run = |mut args: Vec<String>, extra: &[&str], code: i32, must: &[&str]| {
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let text = output(&refs, code);
        assert_lock_words(&format!("`zkelect {}`", args.join(" ")), &text, must);
    };

    // Refused before anything touches the network (a closed port: reaching
    // it would fail otherwise).
    run(
        base(&nowhere, "/locks/w", "a"),
        &["--permits", "0", "--", "true"],
        125,
        &["semaphore's permits", "invalid setting"],
    );
    run(
        base(&nowhere, "/locks//w", "a"),
        &["--", "true"],
        125,
        &["invalid path", "invalid setting"],
    );
    run(
        base(&nowhere, "/locks/w", "a"),
        &["--", "zkelect-no-such-command"],
        127,
        &["not found"],
    );
    let dir = tempfile::Builder::new()
        .prefix("zkelect-words-")
        .tempdir()
        .expect("a temporary directory");
    let plain = dir.path().join("not-executable");
    std::fs::write(&plain, "#!/bin/sh\nexit 0\n").expect("write a plain file");
    run(
        base(&nowhere, "/locks/w", "a"),
        &["--", &plain.to_string_lossy()],
        126,
        &["not executable"],
    );
    // Unreachable.
    run(
        base(&nowhere, "/locks/w", "a"),
        &["--", "true"],
        125,
        &["ZooKeeper unreachable"],
    );

    // Held and released, by each recipe, with the library's log lines (-v).
    let server = ZkServer::start().unwrap_or_else(|e| panic!("cannot start ZooKeeper: {e}"));
    let zk = server.connect_string();
    for (extra, what) in [
        (&[][..], "acquired the lock"),
        (&["--permits", "2"], "acquired a permit of the semaphore"),
        (&["--read"], "acquired the read lock"),
        (&["--write"], "acquired the write lock"),
    ] {
        let mut args = base(&zk, "/locks/words", "a");
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        run(args, &["--", "true"], 0, &[what, "released"]);
    }

    // Waiting behind a holder, and giving up.
    let mut holder_args = base(&zk, "/locks/busy", "holder");
    holder_args.remove(0); // no -v: the spawned helper keeps its own log
    let mut holder = Candidate::spawn(dir.path(), "holder", &holder_args, ChildKind::Beats);
    holder.wait_run(1, WITHIN);
    run(
        base(&zk, "/locks/busy", "b"),
        &["--timeout", "1", "--", "true"],
        124,
        &["waiting for the lock", "was not acquired within --timeout"],
    );
    holder.signal(nix::sys::signal::Signal::SIGTERM);
    let ended = holder.wait_exit(WITHIN);
    assert_eq!(ended.code(), Some(143), "{}", holder.log_text());
    assert_lock_words(
        "the holder's log",
        &holder.log_text(),
        &["acquired the lock"],
    );
}
