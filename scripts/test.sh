#!/usr/bin/env bash
# The one command that proves zkelect works on this machine: installs what is
# missing (ZooKeeper from Debian's `zookeeper` package, a JRE if there is none),
# then runs every check and every test, including the ones against real
# ZooKeeper servers that the tests start themselves. Nothing is skipped.
#
# Order: the builds that produce binaries (packaging, install, the tests)
# come first, one after another; then the tests run in the background while
# the checks that only type-check or document (lints, docs, the feature
# matrix, the minimum Rust version) run in the foreground. The tests mostly
# wait on ZooKeeper servers and timers, the checks mostly compile, so the two
# overlap well on a small machine. The checks write no binary the tests run.
# Each step prints when it starts, and a table of how long each took ends
# the run.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
step_started=$SECONDS
step_name=
durations=()
step() {
    if [[ -n $step_name ]]; then
        durations+=("$(printf '%6ds  %s' $((SECONDS - step_started)) "$step_name")")
    fi
    step_name=$*
    step_started=$SECONDS
    printf '\n==> %s (at %ds)\n' "$*" $((SECONDS - started))
}
report_durations() {
    step "done"
    printf '\n==> time per step (the tests overlap the steps after them)\n'
    printf '%s\n' "${durations[@]}"
    printf '%6ds  in all\n' $((SECONDS - started))
}

# The tests' process group, stopped if a check fails first (their real
# ZooKeeper servers with them).
tests_pid=
stop_tests() {
    if [[ -n $tests_pid ]] && kill -0 "$tests_pid" 2>/dev/null; then
        echo "test.sh: stopping the tests running in the background" >&2
        kill -TERM -- "-$tests_pid" 2>/dev/null || true
        wait "$tests_pid" 2>/dev/null || true
    fi
}
trap stop_tests EXIT

step "dependencies"
bash scripts/test-deps.sh

step "determinism guard: no clock, randomness, threads or HashMap in core/ and sim/"
if grep -rnE 'Instant::now|SystemTime::now|thread_rng|rand::random|thread::spawn|HashMap|HashSet' core/src sim/src; then
    echo "error: core/ and sim/ must stay deterministic (see core/clippy.toml)" >&2
    exit 1
fi

step "format"
cargo fmt --all -- --check

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
# on; each package is built from its .crate file, as crates.io would get it.
# --allow-dirty: a local run with uncommitted changes packages them too.
# Cargo extracts a registry crate once per name and version and never again,
# so a second dry run of the same version would verify each crate against
# the first run's sources of the ones before it: remove those extractions
# (of the local registries only, whose folders are named "-<hash>").
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
for crate in zkelect-core zkelect-sim zkelect zkelect-cli; do
    rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/"$crate-$version"
done
cargo publish --dry-run --allow-dirty --quiet \
    -p zkelect-core -p zkelect-sim -p zkelect -p zkelect-cli

step "install: cargo install --path cli gives a working zkelect"
# --debug reuses the workspace's debug build (the release build of the same
# sources, what a user's `cargo install` makes, would add minutes to every
# run); --locked installs what Cargo.lock pins, as CI tests it.
root=$(mktemp -d)
cargo install --quiet --debug --locked --path cli --root "$root"
"$root/bin/zkelect" --version
"$root/bin/zkelect" sim --seeds 3 >/dev/null
rm -rf "$root"

step "build the tests (unit, property, simulator, real ZooKeeper servers)"
cargo test --workspace --no-run

step "tests, in the background (their output follows the checks)"
tests_log=$(mktemp)
# Job control gives them a process group of their own, so that a failing
# check stops them and the servers they started.
set -m
cargo test --workspace </dev/null >"$tests_log" 2>&1 &
tests_pid=$!
set +m
# Cargo holds the target directory's lock while it makes sure the tests are
# built and lets go before it runs them: start the checks only then, or a
# check that took the lock first would hold the tests back until it ended.
until grep -q '^ *Running ' "$tests_log" || ! kill -0 "$tests_pid" 2>/dev/null; do
    sleep 1
done

step "lints"
cargo clippy --workspace --all-targets -- -D warnings

step "docs"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

step "docs as docs.rs builds them: every feature, each gated item marked with it"
bash scripts/doc-features.sh

step "feature matrix: zkelect with no feature, each alone, all; zkelect-core with serde"
bash scripts/feature-matrix.sh

step "minimum Rust version: the published crates check on the rust-version they declare"
bash scripts/msrv.sh

step "tests: waiting for them"
tests_status=0
wait "$tests_pid" || tests_status=$?
tests_pid=
cat "$tests_log"
rm -f "$tests_log"
if [[ $tests_status -ne 0 ]]; then
    echo "error: the tests failed (exit $tests_status); their output is above" >&2
    exit "$tests_status"
fi
report_durations
