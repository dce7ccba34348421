//! Every corpus file of every target replays through the same function the
//! engine calls (`sim/fuzz/fuzz_targets/<target>.rs` is one line), so every
//! input a campaign kept, and every finding, runs on every `cargo test`.
//!
//! The corpora are `fuzz/corpus/<target>/`, minimised (`scripts/fuzz.sh
//! TARGET --merge`); the simulator's is `sim/fuzz/corpus/`, which
//! `zkelect-sim`'s own `tests/fuzz.rs` replays with its canaries.

use std::path::{Path, PathBuf};

use zkelect_fuzz::{target, TARGETS};

fn corpus(name: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(name);
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

/// Replays a target's corpus, naming the file that fails.
fn replay(name: &str) {
    let run = target(name).expect("a target");
    let files = corpus(name);
    assert!(!files.is_empty(), "{name}: empty corpus");
    for (path, bytes) in &files {
        if let Err(e) = std::panic::catch_unwind(|| run(bytes)) {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            panic!("{} broke: {msg}", path.display());
        }
    }
}

#[test]
fn name_corpus_replays() {
    replay("name");
}

#[test]
fn candidate_corpus_replays() {
    replay("candidate");
}

#[test]
fn observer_corpus_replays() {
    replay("observer");
}

#[test]
fn session_corpus_replays() {
    replay("session");
}

#[test]
fn connect_corpus_replays() {
    replay("connect");
}

#[test]
fn cli_corpus_replays() {
    replay("cli");
}

/// Every target but the simulator's has its corpus here, and a test above.
#[test]
fn every_target_has_a_corpus() {
    for (name, _) in TARGETS.iter().filter(|(n, _)| *n != "sim") {
        assert!(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("corpus")
                .join(name)
                .is_dir(),
            "no corpus for {name}"
        );
    }
}
