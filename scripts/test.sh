#!/usr/bin/env bash
# The one command that proves zkelect works on this machine: installs what is
# missing (ZooKeeper from Debian's `zookeeper` package, a JRE if there is none),
# then runs every check and every test, including the ones against real
# ZooKeeper servers that the tests start themselves. Nothing is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "dependencies"
bash scripts/test-deps.sh

step "determinism guard: no clock, randomness, threads or HashMap in core/ and sim/"
if grep -rnE 'Instant::now|SystemTime::now|thread_rng|rand::random|thread::spawn|HashMap|HashSet' core/src sim/src; then
    echo "error: core/ and sim/ must stay deterministic (see core/clippy.toml)" >&2
    exit 1
fi

step "format"
cargo fmt --all -- --check

step "lints"
cargo clippy --workspace --all-targets -- -D warnings

step "docs"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

step "tests (unit, property, simulator, real ZooKeeper servers)"
cargo test --workspace
