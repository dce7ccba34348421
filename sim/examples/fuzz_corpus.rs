//! Writes `sim/fuzz/corpus/`: every canary's minimised case (its first caught
//! seed within 500, plan minimised, encoded with the seed's own world
//! choices), and a few byte strings of fuzzed choices.
//!
//! `cargo run -p zkelect-sim --release --example fuzz_corpus` (or
//! `… -- trusts-behind` for the named canaries only, leaving the rest).

use std::path::Path;

use zkelect_sim::canary::Canary;
use zkelect_sim::fuzz::{FuzzCase, WorldChoices};
use zkelect_sim::rng::SimRng;
use zkelect_sim::run::{sweep, RunOptions};
use zkelect_sim::swarm::{FaultMix, Overrides};

fn main() -> std::io::Result<()> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    std::fs::create_dir_all(&dir)?;
    let only: Vec<String> = std::env::args().skip(1).collect();
    for canary in Canary::ALL {
        if !only.is_empty() && !only.iter().any(|f| f == canary.flag()) {
            continue;
        }
        // The sequence-token canary hides behind fencing unless paused.
        let faults = if canary == Canary::SequenceToken {
            FaultMix::WithPauses
        } else {
            FaultMix::Standard
        };
        let options = RunOptions {
            overrides: Overrides {
                faults,
                ..Overrides::default()
            },
            canary: Some(canary),
            keep_trace: false,
        };
        let found = sweep(0..500, options);
        let Some(report) = found.failure else {
            eprintln!("{}: not caught in 500 seeds", canary.flag());
            std::process::exit(1);
        };
        // The scenario as drawn (the world furnishes a canary's own needs).
        let case = FuzzCase {
            seed: report.seed,
            swarm: zkelect_sim::swarm::Swarm::for_seed(
                report.seed,
                options.overrides,
                Some(canary),
            ),
            world: WorldChoices::Seeded,
        };
        let bytes = case.encode();
        assert_eq!(FuzzCase::decode(&bytes), case, "{}", canary.flag());
        let replay = case.run(Some(canary));
        let caught = replay.violation.as_ref().map(|v| v.invariant);
        assert_eq!(caught, Some(canary.target()), "{}: {replay}", canary.flag());
        std::fs::write(dir.join(format!("canary-{}.bin", canary.flag())), &bytes)?;
        println!(
            "{}: seed {} with {} faults, caught by {}",
            canary.flag(),
            report.seed,
            report.swarm.plan.len(),
            canary.target()
        );
    }
    if !only.is_empty() {
        return Ok(());
    }
    let mut rng = SimRng::new(17, 17);
    for i in 0..8 {
        let len = rng.range(40, 400) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| rng.draw() as u8).collect();
        std::fs::write(dir.join(format!("bytes-{i}.bin")), &bytes)?;
    }
    Ok(())
}
