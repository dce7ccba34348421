//! Criterion's saved results (`target/criterion/**/new/*.json`) as a table,
//! so `bench/run.sh` can put them in `BENCHMARKS.md` without hand-copying.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, Result};
use serde_json::Value;

use crate::report::Table;

/// One benchmark's saved estimate.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// Criterion's full id (`group/parameter`).
    pub id: String,
    /// Median time per iteration, nanoseconds.
    pub median_ns: f64,
    /// The 95 % confidence interval of the median, nanoseconds.
    pub median_ci_ns: (f64, f64),
    /// Elements or bytes per iteration, if the benchmark declared a throughput.
    pub throughput: Option<(String, f64)>,
}

/// Reads every `new/benchmark.json` + `new/estimates.json` pair under `dir`
/// whose estimates were written after `since` (all of them when `None`),
/// sorted by id.
///
/// # Errors
///
/// When `dir` cannot be read or a result file is malformed.
pub fn collect(dir: &Path, since: Option<SystemTime>) -> Result<Vec<Estimate>> {
    let mut found = Vec::new();
    walk(dir, &mut found).with_context(|| format!("reading {}", dir.display()))?;
    let mut estimates = Vec::new();
    for new_dir in found {
        let estimates_path = new_dir.join("estimates.json");
        let modified = std::fs::metadata(&estimates_path)
            .and_then(|m| m.modified())
            .with_context(|| format!("reading {}", estimates_path.display()))?;
        if since.is_some_and(|since| modified < since) {
            continue;
        }
        estimates.push(read(&new_dir)?);
    }
    estimates.sort_by_key(|e| natural_key(&e.id));
    Ok(estimates)
}

/// Sorts `handle_listing/10` before `handle_listing/1000`.
fn natural_key(id: &str) -> Vec<(String, u64)> {
    id.split('/')
        .map(|part| match part.parse::<u64>() {
            Ok(n) => (String::new(), n),
            Err(_) => (part.to_owned(), 0),
        })
        .collect()
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if !path.is_dir() {
            continue;
        }
        if path.file_name().is_some_and(|n| n == "new")
            && path.join("benchmark.json").is_file()
            && path.join("estimates.json").is_file()
        {
            found.push(path);
        } else if path.file_name().is_none_or(|n| n != "report") {
            walk(&path, found)?;
        }
    }
    Ok(())
}

fn read_json(path: &Path) -> Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

fn read(new_dir: &Path) -> Result<Estimate> {
    let benchmark = read_json(&new_dir.join("benchmark.json"))?;
    let estimates = read_json(&new_dir.join("estimates.json"))?;
    let id = benchmark["full_id"]
        .as_str()
        .with_context(|| format!("{}: no full_id", new_dir.display()))?
        .to_owned();
    let median = &estimates["median"];
    let number = |v: &Value| {
        v.as_f64()
            .with_context(|| format!("{}: malformed median estimate", new_dir.display()))
    };
    let throughput = benchmark["throughput"].as_object().and_then(|t| {
        let (kind, amount) = t.iter().next()?;
        Some((kind.clone(), amount.as_f64()?))
    });
    Ok(Estimate {
        id,
        median_ns: number(&median["point_estimate"])?,
        median_ci_ns: (
            number(&median["confidence_interval"]["lower_bound"])?,
            number(&median["confidence_interval"]["upper_bound"])?,
        ),
        throughput,
    })
}

/// A duration in nanoseconds, in a readable unit.
pub fn human_time(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.3} µs", ns / 1e3)
    } else {
        format!("{ns:.1} ns")
    }
}

fn human_rate(per_second: f64, unit: &str) -> String {
    if per_second >= 1e6 {
        format!("{:.2} M{unit}/s", per_second / 1e6)
    } else if per_second >= 1e3 {
        format!("{:.2} k{unit}/s", per_second / 1e3)
    } else {
        format!("{per_second:.1} {unit}/s")
    }
}

/// The estimates as a table: id, median, its 95 % interval, throughput.
pub fn table(estimates: &[Estimate]) -> Table {
    Table {
        text_columns: 1,
        headers: ["benchmark", "median", "95 % CI of the median", "throughput"]
            .map(String::from)
            .to_vec(),
        rows: estimates
            .iter()
            .map(|e| {
                vec![
                    e.id.clone(),
                    human_time(e.median_ns),
                    format!(
                        "{} – {}",
                        human_time(e.median_ci_ns.0),
                        human_time(e.median_ci_ns.1)
                    ),
                    e.throughput
                        .as_ref()
                        .filter(|_| e.median_ns > 0.0)
                        .map_or_else(
                            || "—".into(),
                            |(kind, amount)| {
                                let unit = match kind.as_str() {
                                    "Elements" => "elem",
                                    "Bytes" | "BytesDecimal" => "B",
                                    other => other,
                                };
                                human_rate(amount / (e.median_ns / 1e9), unit)
                            },
                        ),
                ]
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_saved_results_and_sorts_numerically() {
        let dir = std::env::temp_dir().join(format!("zkelect-bench-crit-{}", std::process::id()));
        for (group, param, ns) in [("g", "1000", 2000.0), ("g", "10", 20.0)] {
            let new = dir.join(group).join(param).join("new");
            std::fs::create_dir_all(&new).unwrap();
            std::fs::write(
                new.join("benchmark.json"),
                format!(r#"{{"full_id":"{group}/{param}","throughput":{{"Elements":{param}}}}}"#),
            )
            .unwrap();
            std::fs::write(
                new.join("estimates.json"),
                format!(
                    r#"{{"median":{{"point_estimate":{ns},"confidence_interval":{{"lower_bound":1.0,"upper_bound":3000.0}}}}}}"#
                ),
            )
            .unwrap();
        }
        let found = collect(&dir, None).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let ids: Vec<&str> = found.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["g/10", "g/1000"]);
        let md = table(&found).to_markdown();
        assert!(md.contains("| g/10 | 20.0 ns |"), "{md}");
        assert!(md.contains("500.00 Melem/s"), "{md}");
    }

    #[test]
    fn times_are_readable() {
        assert_eq!(human_time(512.0), "512.0 ns");
        assert_eq!(human_time(504_427.1), "504.427 µs");
        assert_eq!(human_time(2.5e6), "2.500 ms");
    }
}
