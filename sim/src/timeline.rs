//! A run as a picture: one lane per process on a shared time axis, each hold
//! drawn as a bar labelled with its fencing token, each suspension as a
//! hatched bar, each fault as a mark on the lane it hit (or on the lane of
//! the world, for faults of the server or the queue), and a violation as a
//! red line across every lane at the moment it was found.
//!
//! [`Timeline`] is the data; [`Timeline::to_svg`] writes it as plain SVG (no
//! script, no external style sheet: it opens in a browser, an image viewer
//! or a README). [`Recorder`] builds one from the simulator's trace while it
//! keeps readable lines ([`Trace::timeline`](crate::trace::Trace::timeline));
//! the test kit of `zkelect` builds one from its tracked terms and injected
//! faults.
//!
//! The SVG is small enough to write by hand and to check: every lane is a
//! `<g class="lane">`, every mark a `class="hold"`, `"suspended"`, `"fault"`
//! or `"violation"` element, each with a `<title>` a viewer shows on hover.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use zkelect_core::{FencingToken, Role, Timestamp};

/// What a bar on a lane stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// The process held (led, or held its lock) with this token, by its own
    /// account.
    Hold(FencingToken),
    /// The process was suspended while holding this token: it must not act
    /// as a holder until it resumes.
    Suspended(FencingToken),
}

/// A bar on a lane, from `from` until `until` (`None`: to the end of the run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// What it stands for.
    pub kind: SpanKind,
    /// When it began, in milliseconds of the run.
    pub from: u64,
    /// When it ended, if it did.
    pub until: Option<u64>,
}

/// What a mark on a lane stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkKind {
    /// A fault: a crash, a partition, a dropped connection, a server
    /// restart, an operator's deletion, …
    Fault,
    /// A checker found an invariant broken here.
    Violation,
}

/// A mark at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// What it stands for.
    pub kind: MarkKind,
    /// When, in milliseconds of the run.
    pub at: u64,
    /// What happened, in words (shown on hover).
    pub text: String,
}

/// One process's lane.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lane {
    /// Its name (`p3`, or the name a test gave it).
    pub name: String,
    /// Its holds and suspensions, in time order.
    pub spans: Vec<Span>,
    /// The faults that hit it (and the violation, if it names it).
    pub marks: Vec<Mark>,
}

/// A run's picture: its lanes on one time axis.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timeline {
    /// The heading.
    pub title: String,
    /// One lane per process.
    pub lanes: Vec<Lane>,
    /// Marks of no one process: faults of the server or the queue, and the
    /// violation.
    pub world: Vec<Mark>,
    /// The run's end, in milliseconds (at least the last thing drawn).
    pub end: u64,
}

/// Builds a [`Timeline`] from a run's steps and notes as they happen.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    lanes: BTreeMap<usize, Lane>,
    open: BTreeMap<usize, (SpanKind, u64)>,
    world: Vec<Mark>,
    end: u64,
}

impl Recorder {
    /// Process `pid`'s role after a step at `at`.
    pub fn role(&mut self, at: Timestamp, pid: usize, role: Role) {
        let at = at.as_millis();
        self.end = self.end.max(at);
        let now = match role {
            Role::Leader(token) => Some(SpanKind::Hold(token)),
            Role::Suspended(token) => Some(SpanKind::Suspended(token)),
            _ => None,
        };
        let lane = self.lanes.entry(pid).or_insert_with(|| Lane {
            name: format!("p{pid}"),
            ..Lane::default()
        });
        match (self.open.get(&pid).copied(), now) {
            (Some((kind, _)), Some(now)) if kind == now => {}
            (open, now) => {
                if let Some((kind, from)) = open {
                    lane.spans.push(Span {
                        kind,
                        from,
                        until: Some(at),
                    });
                    self.open.remove(&pid);
                }
                if let Some(kind) = now {
                    self.open.insert(pid, (kind, at));
                }
            }
        }
    }

    /// The run went on until `at` (the picture's axis runs at least so far).
    pub fn mark_end(&mut self, at: Timestamp) {
        self.end = self.end.max(at.as_millis());
    }

    /// Names `pid`'s lane (`p<pid>` unless named).
    pub fn name(&mut self, pid: usize, name: impl Into<String>) {
        self.lanes.entry(pid).or_default().name = name.into();
    }

    /// A mark at `at` on `pid`'s lane, or the world's with `None`.
    pub fn mark(&mut self, at: Timestamp, pid: Option<usize>, kind: MarkKind, text: String) {
        let at = at.as_millis();
        self.end = self.end.max(at);
        let mark = Mark { kind, at, text };
        match pid {
            Some(pid) => self
                .lanes
                .entry(pid)
                .or_insert_with(|| Lane {
                    name: format!("p{pid}"),
                    ..Lane::default()
                })
                .marks
                .push(mark),
            None => self.world.push(mark),
        }
    }

    /// The picture so far: open spans run to the end; a violation is also
    /// marked on the lane of every process its words name (`p3`).
    pub fn timeline(&self, title: impl Into<String>) -> Timeline {
        let mut lanes = self.lanes.clone();
        for (pid, (kind, from)) in &self.open {
            if let Some(lane) = lanes.get_mut(pid) {
                lane.spans.push(Span {
                    kind: *kind,
                    from: *from,
                    until: None,
                });
            }
        }
        for violation in self.world.iter().filter(|m| m.kind == MarkKind::Violation) {
            for pid in named_processes(&violation.text) {
                if let Some(lane) = lanes.get_mut(&pid) {
                    lane.marks.push(violation.clone());
                }
            }
        }
        Timeline {
            title: title.into(),
            lanes: lanes.into_values().collect(),
            world: self.world.clone(),
            end: self.end,
        }
    }
}

/// The process numbers a text names as `p<digits>` (a word of its own).
fn named_processes(text: &str) -> Vec<usize> {
    let mut out: Vec<usize> = text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter_map(|w| w.strip_prefix('p')?.parse().ok())
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

// Geometry, in SVG user units (pixels at 100%).
const WIDTH: u64 = 1200;
const LEFT: u64 = 90;
const RIGHT: u64 = 20;
const TOP: u64 = 44;
const LANE: u64 = 30;
const BAR: u64 = 16;
const AXIS: u64 = 50;

const HOLD: &str = "#2e7d32";
const SUSPENDED: &str = "#f9a825";
const FAULT: &str = "#1565c0";
const VIOLATION: &str = "#c62828";

impl Timeline {
    /// The whole picture as a standalone SVG document.
    pub fn to_svg(&self) -> String {
        let end = self.end.max(1);
        let plot = WIDTH - LEFT - RIGHT;
        let x = |ms: u64| LEFT as f64 + (ms.min(end) as f64) * plot as f64 / end as f64;
        // The world's lane first, then one per process.
        let rows = self.lanes.len() as u64 + 1;
        let height = TOP + rows * LANE + AXIS;
        let mut svg = String::new();
        let _ = writeln!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">"#
        );
        let _ = writeln!(svg, "<title>{}</title>", escape(&self.title));
        let _ = writeln!(
            svg,
            r#"<rect width="{WIDTH}" height="{height}" fill="white"/>"#
        );
        let _ = writeln!(
            svg,
            r#"<text x="{LEFT}" y="18" font-size="14" font-weight="bold">{}</text>"#,
            escape(&self.title)
        );
        legend(&mut svg);
        let lane_y = |row: u64| TOP + row * LANE;

        // The world's lane: faults of the server or the queue.
        let y = lane_y(0);
        let _ = writeln!(svg, r#"<g class="world" data-lane="world">"#);
        label(&mut svg, y, "world");
        for mark in self.world.iter().filter(|m| m.kind == MarkKind::Fault) {
            fault(&mut svg, x(mark.at), y, mark);
        }
        let _ = writeln!(svg, "</g>");

        for (row, lane) in self.lanes.iter().enumerate() {
            let y = lane_y(row as u64 + 1);
            let _ = writeln!(
                svg,
                r#"<g class="lane" data-lane="{}">"#,
                escape(&lane.name)
            );
            label(&mut svg, y, &lane.name);
            for span in &lane.spans {
                let (x0, x1) = (x(span.from), x(span.until.unwrap_or(end)));
                let w = (x1 - x0).max(1.5);
                let (class, color, token, what) = match span.kind {
                    SpanKind::Hold(t) => ("hold", HOLD, t, "holds"),
                    SpanKind::Suspended(t) => ("suspended", SUSPENDED, t, "suspended, holding"),
                };
                let until = span
                    .until
                    .map_or_else(|| "the end".to_owned(), |u| format!("{u} ms"));
                let _ = writeln!(
                    svg,
                    r#"<rect class="{class}" data-token="{}" x="{x0:.1}" y="{}" width="{w:.1}" height="{BAR}" fill="{color}" rx="2"><title>{} {what} token {} from {} ms to {until}</title></rect>"#,
                    token.0,
                    y + (LANE - BAR) / 2,
                    escape(&lane.name),
                    token.0,
                    span.from,
                );
                // The token inside the bar when it fits.
                let text = token.0.to_string();
                if w > 7.0 * text.len() as f64 + 6.0 {
                    let _ = writeln!(
                        svg,
                        r#"<text class="token" x="{:.1}" y="{}" fill="white">{text}</text>"#,
                        x0 + 3.0,
                        y + LANE / 2 + 4
                    );
                }
            }
            for mark in &lane.marks {
                match mark.kind {
                    MarkKind::Fault => fault(&mut svg, x(mark.at), y, mark),
                    MarkKind::Violation => {
                        let cx = x(mark.at);
                        let _ = writeln!(
                            svg,
                            r#"<circle class="violation" cx="{cx:.1}" cy="{}" r="6" fill="none" stroke="{VIOLATION}" stroke-width="2.5"><title>{}</title></circle>"#,
                            y + LANE / 2,
                            escape(&mark.text)
                        );
                    }
                }
            }
            let _ = writeln!(svg, "</g>");
        }

        // The violation: a line across every lane where it happened.
        let bottom = lane_y(rows);
        for mark in self.world.iter().filter(|m| m.kind == MarkKind::Violation) {
            let vx = x(mark.at);
            // Its words beside the line, on the side with room for them.
            let (tx, anchor) = if vx > (WIDTH / 2) as f64 {
                (vx - 4.0, "end")
            } else {
                (vx + 4.0, "start")
            };
            let _ = writeln!(
                svg,
                r#"<g class="violation" data-at="{}"><line x1="{vx:.1}" y1="{}" x2="{vx:.1}" y2="{bottom}" stroke="{VIOLATION}" stroke-width="2" stroke-dasharray="6 3"/><text x="{tx:.1}" y="{}" fill="{VIOLATION}" font-weight="bold" text-anchor="{anchor}">{}</text><title>{}</title></g>"#,
                mark.at,
                TOP - 4,
                TOP - 8,
                escape(&shorten(&mark.text, 90)),
                escape(&mark.text)
            );
        }
        axis(&mut svg, end, bottom, &x);
        svg.push_str("</svg>\n");
        svg
    }
}

fn legend(svg: &mut String) {
    let items = [
        ("hold (token)", HOLD),
        ("suspended", SUSPENDED),
        ("fault", FAULT),
        ("violation", VIOLATION),
    ];
    let mut lx = WIDTH - RIGHT - 420;
    let _ = writeln!(svg, r#"<g class="legend">"#);
    for (text, color) in items {
        let _ = writeln!(
            svg,
            r#"<rect x="{lx}" y="8" width="12" height="12" fill="{color}"/><text x="{}" y="18">{text}</text>"#,
            lx + 16
        );
        lx += 105;
    }
    let _ = writeln!(svg, "</g>");
}

fn label(svg: &mut String, y: u64, name: &str) {
    let _ = writeln!(
        svg,
        r##"<line x1="{LEFT}" y1="{mid}" x2="{}" y2="{mid}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
        WIDTH - RIGHT,
        LEFT - 8,
        y + LANE / 2 + 4,
        escape(name),
        mid = y + LANE / 2,
    );
}

fn fault(svg: &mut String, x: f64, y: u64, mark: &Mark) {
    // A small downward triangle on the lane, its tip at the moment.
    let tip = y + LANE / 2 + 2;
    let _ = writeln!(
        svg,
        r#"<path class="fault" d="M{:.1} {} L{:.1} {} L{x:.1} {tip} Z" fill="{FAULT}"><title>{} ms: {}</title></path>"#,
        x - 5.0,
        tip - 10,
        x + 5.0,
        tip - 10,
        mark.at,
        escape(&mark.text)
    );
}

fn axis(svg: &mut String, end: u64, y: u64, x: &dyn Fn(u64) -> f64) {
    let step = tick_step(end);
    let _ = writeln!(
        svg,
        r##"<g class="axis"><line x1="{LEFT}" y1="{y}" x2="{}" y2="{y}" stroke="#444"/>"##,
        WIDTH - RIGHT
    );
    let mut at = 0;
    while at <= end {
        let tx = x(at);
        let _ = writeln!(
            svg,
            r##"<line x1="{tx:.1}" y1="{y}" x2="{tx:.1}" y2="{}" stroke="#444"/><text x="{tx:.1}" y="{}" text-anchor="middle">{}</text>"##,
            y + 5,
            y + 18,
            seconds(at)
        );
        at += step;
    }
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">time of the run (s)</text></g>"#,
        LEFT + (WIDTH - LEFT - RIGHT) / 2,
        y + 36
    );
}

/// A round tick spacing giving at most about 12 ticks.
fn tick_step(end: u64) -> u64 {
    let rough = (end / 12).max(1);
    let mut step = 1;
    loop {
        for m in [1, 2, 5] {
            if step * m >= rough {
                return step * m;
            }
        }
        step *= 10;
    }
}

fn seconds(ms: u64) -> String {
    if ms % 1000 == 0 {
        format!("{}", ms / 1000)
    } else {
        format!("{:.1}", ms as f64 / 1000.0)
    }
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max - 1).collect();
    format!("{cut}…")
}

/// Text as SVG (XML) character data or an attribute value.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 allows no other control character.
            c if c.is_control() && !matches!(c, '\n' | '\t') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    #[test]
    fn roles_become_spans_and_open_ones_run_to_the_end() {
        let mut r = Recorder::default();
        r.role(at(0), 0, Role::Follower);
        r.role(at(100), 0, Role::Leader(FencingToken(7)));
        r.role(at(150), 0, Role::Leader(FencingToken(7)));
        r.role(at(200), 0, Role::Suspended(FencingToken(7)));
        r.role(at(300), 0, Role::Follower);
        r.role(at(400), 1, Role::Leader(FencingToken(9)));
        r.mark(at(250), Some(0), MarkKind::Fault, "partition p0".into());
        r.mark(
            at(500),
            None,
            MarkKind::Violation,
            "p0 and p1 both lead".into(),
        );
        let t = r.timeline("t");
        assert_eq!(t.end, 500);
        assert_eq!(
            t.lanes[0].spans,
            [
                Span {
                    kind: SpanKind::Hold(FencingToken(7)),
                    from: 100,
                    until: Some(200)
                },
                Span {
                    kind: SpanKind::Suspended(FencingToken(7)),
                    from: 200,
                    until: Some(300)
                },
            ]
        );
        assert_eq!(t.lanes[1].spans[0].until, None);
        // The violation names both: each lane carries it, beside its fault.
        assert_eq!(t.lanes[0].marks.len(), 2);
        assert_eq!(t.lanes[1].marks[0].kind, MarkKind::Violation);
    }

    #[test]
    fn the_svg_has_one_group_per_lane_and_escapes_text() {
        let mut r = Recorder::default();
        r.role(at(10), 0, Role::Leader(FencingToken(42)));
        r.role(at(20), 1, Role::Follower);
        r.mark(
            at(15),
            None,
            MarkKind::Fault,
            "restart <server> & \"co\"".into(),
        );
        r.mark(at(30), None, MarkKind::Violation, "safety: p0 <x>".into());
        let svg = r.timeline("seed 1 & more").to_svg();
        assert_eq!(svg.matches(r#"<g class="lane""#).count(), 2);
        assert_eq!(svg.matches(r#"class="hold""#).count(), 1);
        assert_eq!(svg.matches(r#"<g class="violation""#).count(), 1);
        assert!(svg.contains("restart &lt;server&gt; &amp; &quot;co&quot;"));
        assert!(svg.contains("seed 1 &amp; more"));
        assert!(!svg.contains("<script"));
        assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn ticks_are_round_and_few() {
        assert_eq!(tick_step(0), 1);
        assert_eq!(tick_step(1_000), 100);
        assert_eq!(tick_step(60_000), 5_000);
        assert_eq!(tick_step(13_000), 2_000);
        assert_eq!(named_processes("p1 and p12 (not up3, nor p)"), [1, 12]);
    }
}
