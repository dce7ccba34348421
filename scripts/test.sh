#!/usr/bin/env bash
# The one command that proves zkelect works on this machine: installs what is
# missing (ZooKeeper from Debian's `zookeeper` package, a JRE if there is none),
# then runs every check and every test, including the ones against real
# ZooKeeper servers that the tests start themselves. Nothing is skipped.
#
# Each step prints when it starts, and a table of how long each took (wall
# and CPU) ends the run. The steps run one after another, except the
# minimum-Rust build, which runs beside the checks (below). Nothing runs
# beside the tests: the tests overlapping the compiling checks was tried,
# and a real-server test's bound on a start (2 s for what takes 40 ms)
# failed under the checks' load.
set -euo pipefail
cd "$(dirname "$0")/.."

# CPU seconds (user + system) of every finished child of this shell, from its
# /proc entry: a step's CPU beside its wall time shows whether it kept both
# cores busy or waited, which wall time alone on a shared machine cannot.
ticks=$(getconf CLK_TCK 2>/dev/null || echo 100)
children_cpu() {
    awk -v hz="$ticks" '{ sub(/^.*\) /, ""); printf "%d", ($14 + $15) / hz }' "/proc/$$/stat" \
        2>/dev/null || echo 0
}
started=$SECONDS
step_started=$SECONDS
step_cpu=$(children_cpu)
step_name=
durations=()
step() {
    local cpu
    cpu=$(children_cpu)
    if [[ -n $step_name ]]; then
        durations+=("$(printf '%6ds %6ds  %s' $((SECONDS - step_started)) $((cpu - step_cpu)) "$step_name")")
    fi
    step_name=$*
    step_started=$SECONDS
    step_cpu=$cpu
    printf '\n==> %s (at %ds)\n' "$*" $((SECONDS - started))
}
# On every exit, a failure too: CI keeps a run's output only when it fails.
report_durations() {
    local status=$?
    # A check failed while the minimum-Rust build ran: stop it and its cargo.
    if [[ -n ${msrv_pid:-} ]]; then
        kill -- -"$msrv_pid" 2>/dev/null || true
        wait "$msrv_pid" 2>/dev/null || true
    fi
    [[ -n ${msrv_log:-} ]] && rm -f "$msrv_log"
    step "$( ((status == 0)) && echo done || echo "stopped: exit $status")"
    printf '\n==> time per step (wall, CPU)\n'
    printf '%s\n' "${durations[@]}"
    printf '%6ds %6ds  in all\n' $((SECONDS - started)) "$(children_cpu)"
}
trap report_durations EXIT
# A signal ends the run through the EXIT trap with the shell's conventional
# status (128 + the signal's number), so the table says how the run ended and
# the caller sees the signal; left to bash, the trap read the status of
# whatever ran last (1 after an interrupted cargo, sometimes 0: "done").
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

step "dependencies"
bash scripts/test-deps.sh

step "determinism guard: no clock, randomness, threads or HashMap in core/ and sim/"
if grep -rnE 'Instant::now|SystemTime::now|thread_rng|rand::random|thread::spawn|HashMap|HashSet' core/src sim/src; then
    echo "error: core/ and sim/ must stay deterministic (see core/clippy.toml)" >&2
    exit 1
fi

step "format"
cargo fmt --all -- --check

# The minimum-Rust build (scripts/msrv.sh: its own toolchain, target and
# packages) shares nothing with the checks below, so it runs beside them and
# is waited for before the tests; its output is printed when it is done.
# The checks alone leave a core idle at the ends of their serial chains
# (core, then sim, then zkelect, then the CLI). Never beside the tests: their
# real-server bounds are for a machine not also compiling. Bash reaps it
# when it ends, so its CPU counts on the line of the step then running (the
# lints, mostly), and its own line shows only the wait that was left.
msrv_log=$(mktemp)
setsid bash scripts/msrv.sh >"$msrv_log" 2>&1 &
msrv_pid=$!

step "lints"
cargo clippy --workspace --all-targets -- -D warnings

step "docs"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

step "docs as docs.rs builds them: every feature, each gated item marked with it"
bash scripts/doc-features.sh

step "feature matrix: zkelect with no feature, each alone, all; zkelect-core without serde"
bash scripts/feature-matrix.sh

step "the zkelect binary carries no planted code"
# The simulator's planted bugs (zkelect-core's `planted` feature) are for the
# simulator's own tests: a crate that turned the feature on for the CLI's
# build graph would put them in `zkelect run` (cargo unifies features).
if cargo tree -p zkelect-cli -e features,normal,build -i zkelect-core | grep planted; then
    echo "error: the zkelect binary's build turns on zkelect-core's planted feature" >&2
    exit 1
fi

step "packaging: the four published crates package and publish (dry run) in dependency order"
# Multi-package publish puts each crate's package in a local registry for the
# ones after it, so the unpublished zkelect-core satisfies zkelect-sim and so
# on. --no-verify: the next step builds and installs the packages themselves
# on the minimum Rust (scripts/msrv.sh says how); building them here as well
# compiled the whole dependency graph once more for the same proof.
# --allow-dirty: a local run with uncommitted changes packages them too.
cargo publish --dry-run --no-verify --allow-dirty --quiet \
    -p zkelect-core -p zkelect-sim -p zkelect -p zkelect-cli

step "the packaged crates build on the rust-version they declare, and cargo install of the packaged zkelect-cli gives a working zkelect (running since the lints)"
msrv_status=0
wait "$msrv_pid" || msrv_status=$?
msrv_pid=
cat "$msrv_log"
((msrv_status == 0)) || exit "$msrv_status"

step "tests (unit, property, simulator, real ZooKeeper servers)"
# Nextest runs the tests of every binary from one queue (.config/nextest.toml
# says why); it does not run doc tests, which the next step does. Two tests
# per core: most real-server tests spend their time waiting on servers,
# sessions and timeouts, so at one per core the cores idle (on 2 cores, the
# 902 tests took 429 s at 2 at once and 296 s at 4, using 1.8 cores).
# --locked: Cargo.lock, which CI tests, is the lock file the sources want.
cargo nextest run --workspace --locked --test-threads "$(( $(nproc) * 2 ))"

step "doc tests"
cargo test --workspace --doc
