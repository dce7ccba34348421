#!/usr/bin/env bash
# Builds what a user can ask for, with warnings as errors: `zkelect` with no
# features, with each feature alone, and with all of them (the library only:
# its tests turn `memory`, `testkit` and `zookeeper-client` on for themselves);
# `zkelect-core` without `serde` (the workspace's builds have it on).
#
# Usage: scripts/feature-matrix.sh   (honours CARGO_TARGET_DIR)
set -euo pipefail
cd "$(dirname "$0")/.."

features=(
    zookeeper-async
    zookeeper-client
    zookeeper-client-tls
    zookeeper-client-sasl
    zookeeper-client-gssapi
    memory
    testkit
)

build() {
    printf 'feature-matrix: zkelect %s\n' "$*"
    cargo clippy --quiet -p zkelect --lib "$@" -- -D warnings
}

build --no-default-features
for feature in "${features[@]}"; do
    build --no-default-features --features "$feature"
done
build --all-features

# Every feature listed above, and no other: a new feature joins the matrix.
declared=$(sed -n '/^\[features\]/,/^\[/p' adapters/Cargo.toml \
    | grep -oE '^[a-z0-9-]+ =' | cut -d' ' -f1 | grep -vx default | sort)
listed=$(printf '%s\n' "${features[@]}" | sort)
if [[ "$declared" != "$listed" ]]; then
    printf 'feature-matrix: adapters/Cargo.toml declares:\n%s\nbut the matrix builds:\n%s\n' \
        "$declared" "$listed" >&2
    exit 1
fi

# zkelect-core without `serde`: the workspace's own builds (the lints, the
# tests) have it on, turned on by zkelect-tests, so the build without it is
# proven here.
echo "feature-matrix: zkelect-core without serde"
cargo clippy --quiet -p zkelect-core --lib -- -D warnings
