#!/usr/bin/env bash
# Runs one of zkelect's fuzz targets under a coverage-guided engine (libFuzzer,
# built by cargo-fuzz) on the project's stable toolchain, then says what it
# did: CPU time, executions, executions per second, coverage at the start and
# at the end, and every finding.
#
#   scripts/fuzz.sh TARGET [SECONDS] [-- LIBFUZZER_ARGS...]   fuzz (default 60 s)
#   scripts/fuzz.sh TARGET --merge    minimise the target's corpus in place
#   scripts/fuzz.sh --list            the targets
#
# Installs what it needs, once: cargo-fuzz (cargo install) and a C++ compiler
# for libFuzzer (apt-get), loudly failing if an install fails. No nightly and
# no -Z flag: `--sanitizer none` needs none (sim/fuzz/README.md says why
# AddressSanitizer is off: safe Rust, four times slower).
#
# The committed corpus (sim/fuzz/corpus/ for `sim`, fuzz/corpus/TARGET/ for the
# rest) is read, never written: new inputs go to a working corpus
# ($FUZZ_WORK/TARGET, by default target/fuzz-work/TARGET), findings to
# sim/fuzz/artifacts/TARGET/. `--merge` folds the working corpus into the
# committed one, keeping only inputs that add coverage. On a shared machine,
# run it under `nice -n 19`.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.2
FUZZ_DIR=sim/fuzz

log() { printf 'fuzz: %s\n' "$*" >&2; }
die() { printf 'fuzz: ERROR: %s\n' "$*" >&2; exit 1; }

usage() {
    sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

targets() {
    sed -n 's/^name = "\(.*\)"$/\1/p' "$FUZZ_DIR/Cargo.toml" | grep -v '^zkelect-sim-fuzz$'
}

corpus_of() {
    case "$1" in
        sim) echo "$FUZZ_DIR/corpus" ;;
        *) echo "fuzz/corpus/$1" ;;
    esac
}

install_deps() {
    command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (rust-toolchain.toml pins stable)"
    if cargo fuzz --version >/dev/null 2>&1; then
        log "cargo-fuzz present ($(cargo fuzz --version)): nothing to do"
    else
        log "cargo-fuzz missing: cargo install cargo-fuzz --version $CARGO_FUZZ_VERSION --locked"
        cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked \
            || die "cargo install cargo-fuzz failed"
        cargo fuzz --version >/dev/null 2>&1 || die "cargo-fuzz installed but 'cargo fuzz' does not run (is ~/.cargo/bin on PATH?)"
    fi
    # libfuzzer-sys compiles libFuzzer (C++) with the `cc` crate.
    if command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || command -v clang++ >/dev/null 2>&1; then
        log "C++ compiler present: nothing to do"
    else
        command -v apt-get >/dev/null 2>&1 || die "no C++ compiler and no apt-get: install g++ or clang++ by hand"
        local sudo=()
        if [[ $(id -u) -ne 0 ]]; then
            command -v sudo >/dev/null 2>&1 || die "not root and no sudo: install g++ as root"
            sudo=(sudo)
        fi
        log "C++ compiler missing: apt-get install g++"
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q || die "apt-get update failed"
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends g++ \
            || die "apt-get install g++ failed"
        command -v g++ >/dev/null 2>&1 || die "package g++ installed but no g++ on PATH"
    fi
}

[[ $# -ge 1 ]] || usage
case "$1" in
    -h | --help) usage ;;
    --list) targets; exit 0 ;;
esac
TARGET=$1
shift
targets | grep -qx "$TARGET" || die "no target '$TARGET'; the targets: $(targets | tr '\n' ' ')"

MODE=fuzz
SECONDS_BUDGET=60
if [[ $# -ge 1 && $1 == --merge ]]; then
    MODE=merge
    shift
elif [[ $# -ge 1 && $1 != -- ]]; then
    [[ $1 =~ ^[0-9]+$ ]] || die "SECONDS must be a whole number, not '$1'"
    SECONDS_BUDGET=$1
    shift
fi
[[ $# -ge 1 && $1 == -- ]] && shift
EXTRA=("$@")

install_deps

# Debug assertions on: the machines' own invariants are `debug_assert!`s.
log "building $TARGET (release, debug assertions, coverage instrumentation, no sanitizer)"
cargo fuzz build --fuzz-dir "$FUZZ_DIR" --sanitizer none --debug-assertions "$TARGET" \
    || die "cargo fuzz build $TARGET failed"
TRIPLE=$(rustc -vV | sed -n 's/^host: //p')
BIN="${CARGO_TARGET_DIR:-$FUZZ_DIR/target}/$TRIPLE/release/$TARGET"
[[ -x $BIN ]] || die "built, but no binary at $BIN"

CORPUS=$(corpus_of "$TARGET")
WORK=${FUZZ_WORK:-target/fuzz-work}/$TARGET
ARTIFACTS=$FUZZ_DIR/artifacts/$TARGET
mkdir -p "$CORPUS" "$WORK" "$ARTIFACTS"

if [[ $MODE == merge ]]; then
    # Keeps the hand-named files (regressions, canaries) and adds the fewest
    # inputs of the committed and working corpora that reach the edges those
    # miss (edges, not hit counts: -use_counters=0 keeps the committed
    # corpus small enough to replay on every `cargo test`).
    fresh=$(mktemp -d)
    trap 'rm -rf "$fresh"' EXIT
    hashed='.*/[0-9a-f]{40}'
    find "$CORPUS" -maxdepth 1 -type f -regextype posix-extended ! -regex "$hashed" -exec cp {} "$fresh"/ \;
    "$BIN" -merge=1 -use_counters=0 "${EXTRA[@]}" "$fresh" "$CORPUS" "$WORK" >"$WORK.merge.log" 2>&1 \
        || die "merge failed: see $WORK.merge.log"
    before=$(find "$CORPUS" -maxdepth 1 -type f | wc -l)
    find "$CORPUS" -maxdepth 1 -type f -regextype posix-extended -regex "$hashed" -delete
    find "$fresh" -maxdepth 1 -type f -regextype posix-extended -regex "$hashed" -exec cp {} "$CORPUS"/ \;
    after=$(find "$CORPUS" -maxdepth 1 -type f | wc -l)
    log "merged $TARGET: $CORPUS has $after files (was $before); $(grep -E 'MERGE-OUTER: [0-9]+ new files' "$WORK.merge.log" || true)"
    exit 0
fi

LOG=$WORK.log
log "running $TARGET for $SECONDS_BUDGET s: corpus $CORPUS (read) + $WORK (new inputs), findings in $ARTIFACTS/, log $LOG"
TIMEFORMAT='%U %S'
status=0
{ time "$BIN" -max_total_time="$SECONDS_BUDGET" -print_final_stats=1 \
    -artifact_prefix="$ARTIFACTS/" "${EXTRA[@]}" "$WORK" "$CORPUS" >"$LOG" 2>&1 || status=$?; } 2>"$WORK.time"
read -r user sys <"$WORK.time"
cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.1f", u + s }')
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$LOG" | tail -1)
cov() { grep -E "^#[0-9]+[[:space:]]+$1" "$LOG" | tail -1 | sed -n 's/.*cov: \([0-9]*\).*/\1/p'; }
start=$(cov INITED)
end=$(grep -E '^#[0-9]+[[:space:]].*cov: ' "$LOG" | tail -1 | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
rate=$(awk -v e="${execs:-0}" -v c="$cpu" 'BEGIN { if (c > 0) printf "%.0f", e / c; else print "?" }')
printf 'fuzz: %s: %s s of CPU, %s executions (%s per CPU second), coverage %s -> %s edges\n' \
    "$TARGET" "$cpu" "${execs:-?}" "$rate" "${start:-?}" "${end:-?}"
if [[ $status -ne 0 ]]; then
    grep -E "panicked at|^thread '" "$LOG" | head -3 >&2 || true
    grep -E 'Test unit written to' "$LOG" >&2 || true
    die "$TARGET found a failure (exit $status): replay it with '$BIN FILE' or 'cargo run -p zkelect-fuzz --example replay -- $TARGET FILE'; log $LOG"
fi
log "$TARGET: no failure; $(find "$WORK" -type f | wc -l) inputs in $WORK ('scripts/fuzz.sh $TARGET --merge' keeps those that add coverage)"
