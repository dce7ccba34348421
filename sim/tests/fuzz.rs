//! The fuzz entry on stable: every file of `sim/fuzz/corpus/` replays through
//! [`zkelect_sim::fuzz`] with every checker. Each canary's minimised case must
//! be caught by its checker when the canary runs, and pass with the real
//! candidate; every other file must pass. (`sim/fuzz/README.md`: the same
//! entry under cargo-fuzz.)

use std::path::{Path, PathBuf};

use zkelect_sim::canary::Canary;
use zkelect_sim::fuzz::{fuzz_one, FuzzCase, WorldChoices};
use zkelect_sim::rng::SimRng;
use zkelect_sim::swarm::{FaultMix, Overrides, Swarm};

fn corpus() -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("corpus entry").path();
            let bytes = std::fs::read(&path).expect("corpus file");
            (path, bytes)
        })
        .collect();
    files.sort();
    files
}

fn canary_of(path: &Path) -> Option<Canary> {
    let stem = path.file_stem()?.to_str()?;
    Canary::from_flag(stem.strip_prefix("canary-")?)
}

#[test]
fn every_canary_has_a_corpus_case_its_checker_catches() {
    let files = corpus();
    for canary in Canary::ALL {
        let (path, bytes) = files
            .iter()
            .find(|(p, _)| canary_of(p) == Some(canary))
            .unwrap_or_else(|| panic!("no corpus case for canary {}", canary.flag()));
        let report = FuzzCase::decode(bytes).run(Some(canary));
        let caught = report.violation.as_ref().map(|v| v.invariant);
        assert_eq!(
            caught,
            Some(canary.target()),
            "{}: {report}",
            path.display()
        );
    }
}

#[test]
fn every_corpus_case_passes_with_the_real_candidate() {
    let files = corpus();
    assert!(files.len() > Canary::ALL.len(), "corpus too small");
    for (path, bytes) in &files {
        let report = FuzzCase::decode(bytes).run(None);
        assert!(report.violation.is_none(), "{}: {report}", path.display());
    }
}

/// A swarm's scenario survives encoding, so a minimised seed becomes a corpus
/// file, and its replay is the seed's own run (same trace hash).
#[test]
fn swarm_scenarios_round_trip_through_the_byte_format() {
    for mix in [
        FaultMix::Standard,
        FaultMix::WithPauses,
        FaultMix::WithEventLag,
    ] {
        for seed in 0..60 {
            let overrides = Overrides {
                faults: mix,
                ..Overrides::default()
            };
            let case = FuzzCase {
                seed,
                swarm: Swarm::from_seed(seed, overrides),
                world: WorldChoices::Seeded,
            };
            let decoded = FuzzCase::decode(&case.encode());
            assert_eq!(decoded, case, "seed {seed} {}", mix.flag());
            if seed < 5 {
                let options = zkelect_sim::run::RunOptions {
                    overrides,
                    ..Default::default()
                };
                assert_eq!(
                    decoded.run(None).hash,
                    zkelect_sim::run::run_seed(seed, options).hash,
                    "seed {seed}"
                );
            }
        }
    }
}

/// Any bytes decode to a scenario the library accepts, and the same bytes
/// give the same run.
#[test]
fn random_bytes_run_every_checker_deterministically() {
    let mut rng = SimRng::new(0xF022, 1);
    for _ in 0..150 {
        let len = rng.range(0, 300) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| rng.draw() as u8).collect();
        fuzz_one(&bytes);
        let case = FuzzCase::decode(&bytes);
        assert_eq!(case.run(None).hash, case.run(None).hash);
    }
}

/// Fuzzed choices change the run: the bytes after the scenario steer it.
#[test]
fn the_world_follows_the_bytes() {
    let mut case = FuzzCase::decode(&[]);
    case.swarm.candidates = 3;
    let calm = case.run(None).hash;
    case.world = WorldChoices::Bytes(vec![0xA5; 512]);
    assert_ne!(case.run(None).hash, calm);
}
