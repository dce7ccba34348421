//! Two hand-off rounds at W = 3 against an embedded (real) ZooKeeper server:
//! every side is measured each round and the JSON lines parse. No timing is
//! asserted beyond "a hand-off took some time".

use std::process::Command;

use serde_json::Value;

#[test]
fn two_rounds_at_three_waiters_print_every_side_as_json() {
    let output = Command::new(env!("CARGO_BIN_EXE_zkelect-bench"))
        .args([
            "handoff",
            "--embedded",
            "--waiters",
            "3",
            "--rounds",
            "2",
            "--warmup",
            "0",
            "--idle-ms",
            "10",
            "--session-timeout-ms",
            "4000",
            "--json",
        ])
        .output()
        .expect("run zkelect-bench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "zkelect-bench failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    for side in ["floor", "zookeeper-client", "zkelect"] {
        let rounds: Vec<&Value> = lines
            .iter()
            .filter(|v| v["type"] == "handoff" && v["side"] == side)
            .collect();
        assert_eq!(rounds.len(), 2, "{side}: {stdout}");
        for r in rounds {
            assert_eq!(r["waiters"], 3);
            assert!(r["micros"].as_f64().is_some_and(|us| us > 0.0), "{r}");
        }
    }
    let summary: Vec<&Value> = lines
        .iter()
        .filter(|v| v["type"] == "handoff_summary")
        .collect();
    assert_eq!(summary.len(), 1, "{stdout}");
    assert!(summary[0]["zkelect_ratio"]
        .as_f64()
        .is_some_and(|r| r > 0.0));
    assert!(
        stderr.contains("| waiters |"),
        "the table goes to stderr: {stderr}"
    );
}
