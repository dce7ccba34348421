//! The recipe benchmarks against an embedded (real) ZooKeeper server, at a
//! tiny scale: two hand-off rounds at W = 3 (every side measured each round)
//! and twenty elections on one session. The JSON lines parse; no timing is
//! asserted beyond "it took some time".

mod common;

use serde_json::Value;

/// `--hops` times one of zkelect's transports at a time (the hop table has
/// no column for the transport): with the default two it is refused before
/// anything starts, rather than print one table of two transports' stamps.
#[test]
fn hops_over_two_transports_at_once_is_refused() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_zkelect-bench"))
        .args(["handoff", "--connect", "127.0.0.1:1", "--hops"])
        .output()
        .expect("run zkelect-bench");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("give --transports one"), "{stderr}");
}

/// `many --rounds 0` is refused before any server is reached.
#[test]
fn many_with_no_rounds_is_refused() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_zkelect-bench"))
        .args(["many", "--connect", "127.0.0.1:1", "--rounds", "0"])
        .output()
        .expect("run zkelect-bench");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("--rounds must be at least 1"), "{stderr}");
}

#[test]
fn two_rounds_at_three_waiters_print_every_side_as_json_over_zookeeper_client() {
    two_rounds_at_three_waiters("zookeeper-client");
}

#[test]
fn two_rounds_at_three_waiters_print_every_side_as_json_over_zookeeper_async() {
    two_rounds_at_three_waiters("zookeeper-async");
}

/// Two hand-off rounds at W = 3 with zkelect over `transport`, its hops
/// stamped (each transport stamps its own).
fn two_rounds_at_three_waiters(transport: &str) {
    let common::Ran {
        stdout,
        stderr,
        lines,
    } = common::run_bench(&[
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
        "--hops",
        "--transports",
        transport,
    ]);
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
    assert_eq!(summary[0]["transport"], transport, "{stdout}");
    assert!(summary[0]["zkelect_ratio"]
        .as_f64()
        .is_some_and(|r| r > 0.0));
    // Two rounds make two "quarters" of one round each.
    let quarters = summary[0]["zkelect_ratio_quarters"]
        .as_array()
        .unwrap_or_else(|| panic!("no quarters: {stdout}"));
    assert_eq!(quarters.len(), 2, "{stdout}");
    assert!(quarters.iter().all(|q| q.as_f64().is_some_and(|r| r > 0.0)));
    // `--hops`: where each side's time went, zkelect's hop by hop.
    // The two floors, then zkelect's new holder, the waiter behind it and
    // the releasing session's own-node notice, each kept by its session.
    let hops: Vec<&Value> = lines.iter().filter(|v| v["type"] == "hops").collect();
    assert_eq!(hops.len(), 5, "{stdout}");
    let names = |record: &Value| -> Vec<String> {
        record["hops"]
            .as_array()
            .unwrap_or_else(|| panic!("no hops: {record}"))
            .iter()
            .map(|h| h["hop"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(names(hops[0]), ["watch_callback", "told"], "{stdout}");
    assert_eq!(names(hops[1]), ["watch_callback", "told"], "{stdout}");
    let zkelect = names(hops[2]);
    for hop in ["delete_sent", "watch_callback", "pump_woken", "told"] {
        assert!(zkelect.iter().any(|h| h == hop), "{hop}: {stdout}");
    }
    // At W = 3 the waiter behind the new holder listed three nodes below
    // it when it queued: the farther node's deletion makes it list.
    let farther = names(hops[3]);
    for hop in ["watch_callback", "pump_woken", "list_sent"] {
        assert!(farther.iter().any(|h| h == hop), "{hop}: {stdout}");
    }
    assert_eq!(names(hops[4])[0], "watch_callback", "{stdout}");
    assert!(
        stderr.contains("| waiters |"),
        "the table goes to stderr: {stderr}"
    );
}

/// Twenty elections on one session, every side in one run: the recipes'
/// figures are printed and positive; each library alone (a floor) sends the
/// four requests of a zkelect start per election and has no idle or
/// failover figures.
#[test]
fn twenty_elections_on_one_session_print_their_figures_as_json() {
    let common::Ran { stdout, lines, .. } = common::run_bench(&[
        "many",
        "--embedded",
        "--elections",
        "20",
        "--session-timeout-ms",
        "4000",
        "--sides",
        "zookeeper-client,zkelect-zookeeper-client,zkelect-zookeeper-async,\
         floor-zookeeper-client,floor-zookeeper-async",
        "--json",
    ]);
    let sides: Vec<&str> = lines.iter().filter_map(|l| l["side"].as_str()).collect();
    assert_eq!(
        sides,
        [
            "zookeeper-client",
            "zkelect (zookeeper-client)",
            "zkelect (zookeeper-async)",
            "floor: zookeeper-client alone",
            "floor: zookeeper-async alone"
        ],
        "{stdout}"
    );
    for line in &lines {
        assert_eq!(line["type"], "many");
        assert_eq!(line["elections"], 20);
        assert!(
            line["startup_ms"].as_f64().is_some_and(|x| x > 0.0),
            "{line}"
        );
        // The client's CPU per start: counted in 10 ms ticks, so 20 starts
        // may show none, but never less, and never missing.
        for field in ["user_us_per_start", "sys_us_per_start"] {
            assert!(
                line[field].as_f64().is_some_and(|x| x >= 0.0),
                "{field}: {line}"
            );
        }
        let floor = line["side"]
            .as_str()
            .is_some_and(|s| s.starts_with("floor"));
        for field in ["failover_all_ms", "packets_per_failover"] {
            if floor {
                assert!(line[field].is_null(), "{field}: {line}");
            } else {
                assert!(
                    line[field].as_f64().is_some_and(|x| x > 0.0),
                    "{field}: {line}"
                );
            }
        }
        if floor {
            assert!(line["heap_per_idle_recipe"].is_null(), "{line}");
            let requests = line["requests_per_start"].as_f64().unwrap_or(0.0);
            assert!((3.9..=4.1).contains(&requests), "{line}");
        }
    }
}
