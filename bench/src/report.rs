//! The summary: per (implementation, strategy, N), failover statistics and
//! server work, as a plain-text or Markdown table.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::baseline::BaselineRecord;
use crate::failover::{ConfigReport, RoundRecord, Setup};
use crate::stats::Summary;

/// One summary row, also printed as one JSON line.
#[derive(Debug, Clone, Serialize)]
pub struct SummaryRow {
    /// Always `"summary"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The configuration.
    #[serde(flatten)]
    pub setup: Setup,
    /// Recorded rounds.
    pub rounds: usize,
    /// Median failover, microseconds.
    pub median_us: f64,
    /// 90th percentile (nearest rank), microseconds.
    pub p90_us: f64,
    /// Slowest failover, microseconds.
    pub max_us: f64,
    /// This median over the latch's median at the same N (zkelect rows).
    pub vs_latch: Option<f64>,
    /// This median over the delete→notification baseline's median.
    pub vs_delete_notify: Option<f64>,
    /// This median over the close→notification baseline's median.
    pub vs_close_notify: Option<f64>,
    /// This median over the delete→notification baseline stamped in the
    /// task the watch callback wakes (see `baseline`): like for like with a
    /// figure that ends in the application's task.
    pub vs_delete_notify_woken: Option<f64>,
    /// Median packets received per failover (bench probes removed).
    pub median_packets_received: f64,
    /// Median packets sent per failover (bench probes removed).
    pub median_packets_sent: f64,
    /// Median over the rounds of packets received less the control window's
    /// (robust to the rounds that catch a burst of idle sessions' pings).
    pub net_packets_received: f64,
    /// Median over the rounds of packets sent less the control window's.
    pub net_packets_sent: f64,
    /// Median watchers triggered per failover.
    pub median_watches_fired: Option<f64>,
    /// Rounds whose server did not go quiet in time.
    pub unsettled: usize,
    /// Rounds that ended with a leader count other than one.
    pub leader_anomalies: usize,
    /// Milliseconds it took to start the N contenders.
    pub startup_ms: Option<f64>,
    /// Latch only: median gap between the poll that saw the leader and the
    /// one before it, microseconds (the detection delay is up to this).
    pub median_poll_gap_us: Option<f64>,
}

/// Builds the summary rows (ordered by N, then implementation, then strategy).
pub fn summarize(
    rounds: &[RoundRecord],
    configs: &[ConfigReport],
    baselines: &[BaselineRecord],
) -> Vec<SummaryRow> {
    let mut groups: BTreeMap<&Setup, Vec<&RoundRecord>> = BTreeMap::new();
    for r in rounds {
        groups.entry(&r.setup).or_default().push(r);
    }
    let baseline = |name: &str| {
        baselines
            .iter()
            .find(|b| b.name == name)
            .map(|b| b.median_us)
    };
    let latch_median: BTreeMap<usize, f64> = groups
        .iter()
        .filter(|(setup, _)| setup.implementation == "latch")
        .filter_map(|(setup, rs)| Some((setup.n, median(rs.iter().map(|r| r.failover_us))?)))
        .collect();
    let startup: BTreeMap<&Setup, f64> = configs.iter().map(|c| (&c.setup, c.startup_ms)).collect();

    let mut rows: Vec<SummaryRow> = groups
        .into_iter()
        .filter_map(|(setup, rs)| {
            let failover = Summary::of(&rs.iter().map(|r| r.failover_us).collect::<Vec<_>>())?;
            let ratio = |base: Option<f64>| base.filter(|b| *b > 0.0).map(|b| failover.median / b);
            Some(SummaryRow {
                kind: "summary",
                setup: setup.clone(),
                rounds: rs.len(),
                median_us: failover.median,
                p90_us: failover.p90,
                max_us: failover.max,
                vs_latch: if setup.implementation == "latch" {
                    None
                } else {
                    ratio(latch_median.get(&setup.n).copied())
                },
                vs_delete_notify: ratio(baseline("delete_notify")),
                vs_close_notify: ratio(baseline("close_notify")),
                vs_delete_notify_woken: ratio(baseline("delete_notify_woken")),
                median_packets_received: median(rs.iter().map(|r| r.packets_received as f64))
                    .unwrap_or(0.0),
                median_packets_sent: median(rs.iter().map(|r| r.packets_sent as f64))
                    .unwrap_or(0.0),
                net_packets_received: median(
                    rs.iter()
                        .map(|r| r.packets_received as f64 - r.control_received),
                )
                .unwrap_or(0.0),
                net_packets_sent: median(rs.iter().map(|r| r.packets_sent as f64 - r.control_sent))
                    .unwrap_or(0.0),
                median_watches_fired: median(
                    rs.iter().filter_map(|r| r.watches_fired.map(|w| w as f64)),
                ),
                unsettled: rs.iter().filter(|r| !r.settled).count(),
                leader_anomalies: rs.iter().filter(|r| r.leaders_after != 1).count(),
                startup_ms: startup.get(setup).copied(),
                median_poll_gap_us: median(rs.iter().filter_map(|r| r.poll_gap_us)),
            })
        })
        .collect();
    // By N, then the latch, then zkelect's strategies in their natural order.
    let rank = |r: &SummaryRow| match r.setup.strategy.as_deref() {
        None => 0,
        Some("predecessor") => 1,
        Some(_) => 2,
    };
    rows.sort_by_key(|r| (r.setup.n, rank(r), r.setup.implementation));
    rows
}

fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    Summary::of(&values.collect::<Vec<_>>()).map(|s| s.median)
}

/// A table of strings, rendered aligned for a terminal or as Markdown.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// Column titles.
    pub headers: Vec<String>,
    /// Rows, each as long as `headers`.
    pub rows: Vec<Vec<String>>,
    /// How many leading columns hold text (left-aligned); the rest hold
    /// numbers (right-aligned).
    pub text_columns: usize,
}

impl Table {
    /// Aligned plain text (numbers right-aligned).
    pub fn to_text(&self) -> String {
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|i| {
                self.rows
                    .iter()
                    .map(|r| r[i].chars().count())
                    .chain([self.headers[i].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[String]| {
            cells
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (c, w))| {
                    if i < self.text_columns {
                        format!("{c:<w$}")
                    } else {
                        format!("{c:>w$}")
                    }
                })
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_owned()
        };
        let mut out = line(&self.headers);
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }

    /// A GitHub-flavoured Markdown table.
    pub fn to_markdown(&self) -> String {
        let mut out = format!("| {} |\n", self.headers.join(" | "));
        out.push_str(&format!(
            "|{}\n",
            (0..self.headers.len())
                .map(|i| {
                    if i < self.text_columns {
                        "---|"
                    } else {
                        "---:|"
                    }
                })
                .collect::<String>()
        ));
        for r in &self.rows {
            out.push_str(&format!("| {} |\n", r.join(" | ")));
        }
        out
    }
}

fn ms(us: f64) -> String {
    format!("{:.3}", us / 1e3)
}

fn times(x: Option<f64>) -> String {
    x.map_or_else(|| "—".into(), |x| format!("{x:.2}×"))
}

fn num(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// The failover summary as a table.
pub fn summary_table(rows: &[SummaryRow]) -> Table {
    Table {
        text_columns: 3,
        headers: [
            "impl",
            "strategy",
            "N",
            "rounds",
            "median ms",
            "p90 ms",
            "max ms",
            "× latch",
            "× delete→notify",
            "× close→notify",
            "× delete→notify, task woken",
            "pkts rx/tx (median)",
            "pkts rx/tx net of control (median)",
            "watches fired (median)",
        ]
        .map(String::from)
        .to_vec(),
        rows: rows
            .iter()
            .map(|r| {
                vec![
                    r.setup.implementation.to_owned(),
                    r.setup.strategy.clone().unwrap_or_else(|| "—".into()),
                    r.setup.n.to_string(),
                    r.rounds.to_string(),
                    ms(r.median_us),
                    ms(r.p90_us),
                    ms(r.max_us),
                    times(r.vs_latch),
                    times(r.vs_delete_notify),
                    times(r.vs_close_notify),
                    times(r.vs_delete_notify_woken),
                    format!(
                        "{} / {}",
                        num(r.median_packets_received),
                        num(r.median_packets_sent)
                    ),
                    format!("{:.1} / {:.1}", r.net_packets_received, r.net_packets_sent),
                    r.median_watches_fired.map_or_else(|| "—".into(), num),
                ]
            })
            .collect(),
    }
}

/// The baselines as a table.
pub fn baseline_table(baselines: &[BaselineRecord]) -> Table {
    Table {
        text_columns: 2,
        headers: [
            "baseline",
            "what",
            "samples",
            "median ms",
            "p90 ms",
            "max ms",
        ]
        .map(String::from)
        .to_vec(),
        rows: baselines
            .iter()
            .map(|b| {
                vec![
                    b.name.to_owned(),
                    match b.name {
                        "exists_rtt" => "one client's exists(\"/\") round trip",
                        "delete_notify" => "delete → another client's get_data watch fires",
                        "close_notify" => {
                            "closeSession → another client's watch on its ephemeral fires"
                        }
                        "delete_notify_woken" => {
                            "as delete_notify, stamped in the task the watch callback wakes"
                        }
                        "close_notify_woken" => {
                            "as close_notify, stamped in the task the watch callback wakes"
                        }
                        _ => "",
                    }
                    .to_owned(),
                    b.samples.to_string(),
                    ms(b.median_us),
                    ms(b.p90_us),
                    ms(b.max_us),
                ]
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(imp: &'static str, strategy: Option<&str>, n: usize, us: f64) -> RoundRecord {
        RoundRecord {
            kind: "round",
            setup: Setup {
                implementation: imp,
                strategy: strategy.map(String::from),
                n,
            },
            round: 1,
            failover_us: us,
            packets_received: 3,
            packets_sent: 4,
            control_received: 0.5,
            control_sent: 0.5,
            watches_fired: Some(1),
            window_us: 60_000,
            settled: true,
            leaders_after: 1,
            poll_gap_us: None,
            old_leader: 0,
            new_leader: 1,
        }
    }

    #[test]
    fn ratios_against_latch_and_baselines() {
        let rounds = vec![
            round("latch", None, 3, 2000.0),
            round("latch", None, 3, 4000.0),
            round("zkelect", Some("predecessor"), 3, 1000.0),
        ];
        let baselines = vec![BaselineRecord {
            kind: "baseline",
            name: "delete_notify",
            samples: 1,
            median_us: 500.0,
            p90_us: 500.0,
            min_us: 500.0,
            max_us: 500.0,
        }];
        let rows = summarize(&rounds, &[], &baselines);
        assert_eq!(rows.len(), 2);
        let latch = &rows[0];
        assert_eq!(latch.setup.implementation, "latch");
        assert_eq!(latch.median_us, 3000.0);
        assert_eq!(latch.vs_latch, None);
        assert_eq!(latch.vs_delete_notify, Some(6.0));
        let zk = &rows[1];
        assert_eq!(zk.vs_latch, Some(1000.0 / 3000.0));
        assert_eq!(zk.net_packets_received, 2.5);
        let table = summary_table(&rows);
        assert!(table
            .to_markdown()
            .contains("| zkelect | predecessor | 3 |"));
        assert_eq!(table.to_text().lines().count(), 3);
    }
}
