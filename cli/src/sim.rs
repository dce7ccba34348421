//! `zkelect sim`: seeds through the simulator and its checkers.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Instant;

use zkelect_sim::canary::Canary;
use zkelect_sim::run::{minimize, run_seed, RunOptions, RunReport};
use zkelect_sim::swarm::{FaultMix, Overrides};

use crate::args::{parse_seed_range, CanaryArg, FaultsArg, SimArgs};
use crate::exit::{Code, Failure, WithCode};

/// The checks `sim` makes before running anything, and the seeds it runs.
pub(crate) fn check(args: &SimArgs) -> Result<std::ops::Range<u64>, Failure> {
    let range = match (&args.seed, &args.seeds) {
        // The last seed has no end a half-open range can name (`--seeds`
        // cannot reach it either): refused, rather than running nothing.
        (Some(seed), _) => match seed.checked_add(1) {
            Some(end) => *seed..end,
            None => {
                return Err(Failure::new(
                    Code::Usage,
                    anyhow::anyhow!("--seed must be below {}", u64::MAX),
                ))
            }
        },
        (None, Some(range)) => {
            parse_seed_range(range).map_err(|e| Failure::new(Code::Usage, anyhow::anyhow!(e)))?
        }
        (None, None) => 0..100,
    };
    if let Some(n) = args.candidates {
        if n == 0 || n > 200 {
            return Err(Failure::new(
                Code::Usage,
                anyhow::anyhow!("--candidates must be 1..=200"),
            ));
        }
    }
    if let Some(k) = args.leaders {
        if k == 0 || k > 16 {
            return Err(Failure::new(
                Code::Usage,
                anyhow::anyhow!("--leaders must be 1..=16"),
            ));
        }
    }
    Ok(range)
}

pub(crate) fn sim(args: SimArgs) -> Result<ExitCode, Failure> {
    let range = check(&args)?;
    let options = RunOptions {
        overrides: Overrides {
            candidates: args.candidates,
            leaders: args.leaders,
            // Drawn from the seed (an override of `--leaders` means an election).
            queue: None,
            faults: match args.faults {
                FaultsArg::None => FaultMix::None,
                FaultsArg::All => FaultMix::Standard,
                FaultsArg::Pauses => FaultMix::WithPauses,
                FaultsArg::Lag => FaultMix::WithEventLag,
            },
        },
        canary: args.canary.map(|c| match c {
            CanaryArg::IgnoresDisconnect => Canary::IgnoresDisconnect,
            CanaryArg::Unprotected => Canary::Unprotected,
            CanaryArg::ParentWatch => Canary::ParentWatch,
            CanaryArg::SequenceToken => Canary::SequenceToken,
            CanaryArg::DeafToOwnNode => Canary::DeafToOwnNode,
            CanaryArg::LeasesFromRequest => Canary::LeasesFromRequest,
            CanaryArg::PersistentContender => Canary::PersistentContender,
            CanaryArg::OneWayInterop => Canary::OneWayInterop,
            CanaryArg::ReaderWatchesPredecessor => Canary::ReaderWatchesPredecessor,
            CanaryArg::WriterIgnoresReaders => Canary::WriterIgnoresReaders,
            CanaryArg::MutexAnyDeletion => Canary::MutexAnyDeletion,
            CanaryArg::TrustsBehind => Canary::TrustsBehind,
            CanaryArg::StormingParents => Canary::StormingParents,
            CanaryArg::WeightBlind => Canary::WeightBlind,
            CanaryArg::DeafToRevocation => Canary::DeafToRevocation,
        }),
        keep_trace: args.trace || args.save.is_some() || args.timeline.is_some(),
    };
    let total = range.end - range.start;
    let started = Instant::now();
    let (mut steps, mut ops, mut elections) = (0u64, 0u64, 0u64);
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut last = None;
    for (done, seed) in range.clone().enumerate() {
        let report = run_seed(seed, options);
        if args.trace {
            for line in report.lines.iter().flatten() {
                println!("{line}");
            }
        }
        steps += report.stats.steps;
        ops += report.stats.server_ops;
        elections += report.stats.elections;
        if report.violation.is_some() {
            if interactive {
                eprintln!();
            }
            // The picture is of the run as it happened, before minimising.
            if let Some(file) = &args.timeline {
                draw(&report, file)?;
            }
            let small = minimize(&report).unwrap_or(report);
            if let Some(dir) = &args.save {
                std::fs::create_dir_all(dir).code(Code::Other)?;
                let file = dir.join(format!("seed-{seed}.trace"));
                std::fs::write(&file, small.lines.clone().unwrap_or_default().join("\n"))
                    .code(Code::Other)?;
                eprintln!("trace written to {}", file.display());
            }
            println!("{small}");
            return Err(Failure::new(
                Code::Violation,
                anyhow::anyhow!("seed {seed} broke an invariant (after {done} passing seeds)"),
            ));
        }
        let n = done as u64 + 1;
        if args.timeline.is_some() && n == total {
            last = Some(report);
        }
        if interactive && (n % 10 == 0 || n == total) {
            let width = 30;
            let filled = (n * width / total.max(1)) as usize;
            eprint!(
                "\r[{}{}] {n}/{total} seeds",
                "#".repeat(filled),
                "-".repeat(width as usize - filled)
            );
            let _ = std::io::stderr().flush();
        }
    }
    if interactive {
        eprintln!();
    }
    if let (Some(file), Some(last)) = (&args.timeline, &last) {
        draw(last, file)?;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{total} seed(s) {}..{} passed every checker (safety, fencing, tokens, liveness, no herd, no leaks, one answer per request)",
        range.start, range.end
    );
    println!(
        "{steps} events, {ops} simulated ZooKeeper operations, {elections} elections in {secs:.1}s ({:.0} seeds/s)",
        total as f64 / secs.max(1e-9)
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes `report`'s run as an SVG picture to `file`.
fn draw(report: &RunReport, file: &std::path::Path) -> Result<(), Failure> {
    let Some(timeline) = &report.timeline else {
        return Err(Failure::new(
            Code::Other,
            anyhow::anyhow!("seed {}: the run kept no picture", report.seed),
        ));
    };
    std::fs::write(file, timeline.to_svg())
        .map_err(|e| anyhow::anyhow!("cannot write --timeline {}: {e}", file.display()))
        .code(Code::Other)?;
    eprintln!(
        "timeline of seed {} written to {}",
        report.seed,
        file.display()
    );
    Ok(())
}
