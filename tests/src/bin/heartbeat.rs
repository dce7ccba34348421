//! The command `zkelect run` supervises in the end-to-end tests: it appends
//! `start <ns> <token> <pid> <parent pid>` and then `alive <ns>` every 50 ms to the
//! file named by `ZKELECT_TEST_BEATS`, every timestamp on `CLOCK_MONOTONIC`, so
//! the tests can tell whether two leaders' commands ever ran at the same time.
//! An optional first argument, in milliseconds, makes it exit 0 by itself after
//! that long (a `zkelect lock` command that finishes its work).

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use nix::time::{clock_gettime, ClockId};

/// A child nobody stopped gives up after this long (its lines would go nowhere).
const MAX_LIFE: Duration = Duration::from_secs(180);
const BEAT: Duration = Duration::from_millis(50);

fn mono_ns() -> Option<i64> {
    let ts = clock_gettime(ClockId::CLOCK_MONOTONIC).ok()?;
    Some(ts.tv_sec() * 1_000_000_000 + ts.tv_nsec())
}

fn main() -> ExitCode {
    let Some(path) = std::env::var_os("ZKELECT_TEST_BEATS").map(PathBuf::from) else {
        eprintln!("heartbeat: ZKELECT_TEST_BEATS is not set");
        return ExitCode::from(2);
    };
    let token = std::env::var("ZKELECT_FENCING_TOKEN").unwrap_or_else(|_| "-".into());
    let Ok(mut file) = OpenOptions::new().create(true).append(true).open(&path) else {
        eprintln!("heartbeat: cannot open {}", path.display());
        return ExitCode::from(1);
    };
    let Some(now) = mono_ns() else {
        return ExitCode::from(1);
    };
    let start = format!(
        "start {now} {token} {} {}\n",
        std::process::id(),
        std::os::unix::process::parent_id()
    );
    if file.write_all(start.as_bytes()).is_err() {
        return ExitCode::from(1);
    }
    let life = std::env::args()
        .nth(1)
        .and_then(|ms| ms.parse().ok())
        .map_or(MAX_LIFE, Duration::from_millis);
    let born = Instant::now();
    while born.elapsed() < life {
        std::thread::sleep(BEAT);
        let Some(now) = mono_ns() else {
            return ExitCode::from(1);
        };
        // A failed write or a vanished file: the test is over.
        if file.write_all(format!("alive {now}\n").as_bytes()).is_err() || !path.exists() {
            return ExitCode::SUCCESS;
        }
    }
    ExitCode::SUCCESS
}
