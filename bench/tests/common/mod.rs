//! What every smoke test of the bench does first: run the binary, fail the
//! test with its output unless it succeeded, and parse the JSON lines it
//! printed.

use std::process::Command;

use serde_json::Value;

/// What a run of the bench printed.
pub(crate) struct Ran {
    /// Its standard output, for the tests' failure messages.
    pub(crate) stdout: String,
    /// Its standard error (the human-readable tables). Each test crate
    /// compiles this module alone, and not every one reads it.
    #[allow(dead_code)]
    pub(crate) stderr: String,
    /// Each line of the standard output, parsed.
    pub(crate) lines: Vec<Value>,
}

/// Runs `zkelect-bench` with `args`. Panics (failing the test) with both
/// output streams if the bench failed, and on any line that is not JSON.
pub(crate) fn run_bench(args: &[&str]) -> Ran {
    let output = Command::new(env!("CARGO_BIN_EXE_zkelect-bench"))
        .args(args)
        .output()
        .expect("run zkelect-bench");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "zkelect-bench failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    Ran {
        stdout,
        stderr,
        lines,
    }
}
