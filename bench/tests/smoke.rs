//! One round at N = 3 against an embedded (real) ZooKeeper server: the JSON
//! lines parse and carry what BENCHMARKS.md is built from. No timing is
//! asserted beyond "a failover took some time".

mod common;

use serde_json::Value;

#[test]
fn one_round_at_three_candidates_prints_parsable_json() {
    let common::Ran { stdout, lines, .. } = common::run_bench(&[
        "failover",
        "--embedded",
        "--candidates",
        "3",
        "--rounds",
        "1",
        "--warmup",
        "0",
        "--impl",
        "both",
        "--json",
        "--session-timeout-ms",
        "4000",
        "--exists-samples",
        "20",
        "--notify-samples",
        "5",
        "--close-samples",
        "2",
    ]);
    let of_type = |t: &'static str| lines.iter().filter(move |v| v["type"] == t);

    let rounds: Vec<&Value> = of_type("round").collect();
    let expected_impls = ["latch", "zkelect"];
    assert_eq!(rounds.len(), expected_impls.len(), "{stdout}");
    for (round, imp) in rounds.iter().zip(expected_impls) {
        assert_eq!(round["impl"], imp);
        assert_eq!(round["n"], 3);
        assert_eq!(round["round"], 1);
        let failover = round["failover_us"]
            .as_f64()
            .expect("failover_us is a number");
        assert!(failover > 0.0, "{round}");
        assert!(round["packets_received"].is_u64(), "{round}");
        assert!(round["packets_sent"].is_u64(), "{round}");
        assert!(round.get("strategy").is_some(), "{round}");
        assert_eq!(round["leaders_after"], 1, "{round}");
    }
    // exists_rtt, and each notification floor stamped in the callback and
    // in the task it wakes.
    let baselines: Vec<&Value> = of_type("baseline").collect();
    assert_eq!(baselines.len(), 5, "{stdout}");
    for name in ["delete_notify", "close_notify"] {
        let median = |name: String| {
            baselines
                .iter()
                .find(|b| b["name"] == name.as_str())
                .and_then(|b| b["median_us"].as_f64())
                .unwrap_or_else(|| panic!("no {name}: {stdout}"))
        };
        assert!(
            median(format!("{name}_woken")) >= median(name.to_owned()),
            "a task woken by the callback runs after it: {stdout}"
        );
    }
    assert_eq!(of_type("summary").count(), expected_impls.len(), "{stdout}");
    assert_eq!(of_type("server").count(), 1, "{stdout}");
}
