//! `zkelect sim --timeline`: the picture of a run, read back as XML and
//! compared with the run's own trace (printed by `--trace`, line for line the
//! run the picture draws): one lane per process of the trace, one fault mark
//! per fault line, the violation where the trace has it.

use std::collections::BTreeSet;
use std::process::Command;

/// The trace's lines: (time in ms, who, glyph). The report that follows the
/// trace (from "invariant … violated") is of the minimised run: not read.
fn trace_lines(stdout: &str) -> Vec<(u64, String, char)> {
    stdout
        .lines()
        .take_while(|line| !line.starts_with("invariant "))
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            // `t=10_808ms`
            let at = words
                .next()?
                .strip_prefix("t=")?
                .strip_suffix("ms")?
                .replace('_', "")
                .parse()
                .ok()?;
            let who = words.next()?.to_owned();
            let glyph = words.next()?;
            let mut chars = glyph.chars();
            let (Some(glyph), None) = (chars.next(), chars.next()) else {
                return None;
            };
            (who == "--" || who.starts_with('p')).then_some((at, who, glyph))
        })
        .collect()
}

fn class<'a>(node: &roxmltree::Node<'a, '_>) -> Option<&'a str> {
    node.attribute("class")
}

#[test]
fn sim_timeline_draws_one_lane_per_process_every_fault_and_the_violation() {
    let dir = std::env::temp_dir().join(format!("zkelect-timeline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let file = dir.join("t.svg");
    let out = Command::new(env!("CARGO_BIN_EXE_zkelect"))
        .args(["sim", "--seeds", "3", "--canary", "parent-watch", "--trace"])
        .arg("--timeline")
        .arg(&file)
        .output()
        .expect("run zkelect sim");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "the canary is caught\n{stderr}");
    assert!(stderr.contains("timeline of seed 0 written to"), "{stderr}");
    let svg = std::fs::read_to_string(&file).expect("the SVG was written");
    let _ = std::fs::remove_dir_all(&dir);

    let doc = roxmltree::Document::parse(&svg).expect("the SVG is well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    assert!(
        !doc.descendants().any(|n| n.tag_name().name() == "script"),
        "no script in the picture"
    );

    let trace = trace_lines(&stdout);
    assert!(trace.len() > 20, "the trace was printed:\n{stdout}");

    // One lane per process of the trace, named as the trace names it.
    let lanes: BTreeSet<String> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "g" && class(n) == Some("lane"))
        .filter_map(|n| n.attribute("data-lane").map(str::to_owned))
        .collect();
    let processes: BTreeSet<String> = trace
        .iter()
        .filter(|(_, who, _)| who != "--")
        .map(|(_, who, _)| who.clone())
        .collect();
    assert!(processes.len() >= 2, "{processes:?}");
    assert_eq!(lanes, processes, "one lane per process");

    // One fault mark per fault the trace records (an injected fault, the
    // server back, an operator's deletion, an expiry, a look-alike node).
    let faults = doc
        .descendants()
        .filter(|n| class(n) == Some("fault"))
        .count();
    let traced_faults = trace
        .iter()
        .filter(|(_, _, glyph)| matches!(glyph, 'F' | 'S' | 'R' | 'x' | 'P'))
        .count();
    assert_eq!(faults, traced_faults, "one mark per fault");

    // Holds, each with its token.
    let holds: Vec<_> = doc
        .descendants()
        .filter(|n| class(n) == Some("hold"))
        .collect();
    assert!(!holds.is_empty(), "someone held");
    for hold in &holds {
        let token = hold.attribute("data-token").unwrap_or_default();
        assert!(token.parse::<i64>().is_ok(), "a hold's token: {token:?}");
    }

    // The violation, once, where the trace has it, drawn across every lane.
    let violations: Vec<_> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "g" && class(n) == Some("violation"))
        .collect();
    assert_eq!(violations.len(), 1, "one violation");
    let (at, _, _) = trace
        .iter()
        .find(|(_, _, glyph)| *glyph == '!')
        .expect("the trace records the violation");
    assert_eq!(
        violations[0].attribute("data-at"),
        Some(at.to_string().as_str())
    );
    let line = violations[0]
        .children()
        .find(|n| n.tag_name().name() == "line")
        .expect("the violation's line");
    let y = |n: &roxmltree::Node<'_, '_>, a: &str| -> f64 {
        n.attribute(a)
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    let last_lane_y = doc
        .descendants()
        .filter(|n| class(n) == Some("lane"))
        .flat_map(|g| g.children().filter(|c| c.tag_name().name() == "line"))
        .map(|l| y(&l, "y1"))
        .fold(0.0, f64::max);
    assert!(
        y(&line, "y2") > last_lane_y,
        "the violation's line crosses every lane"
    );
}
