#!/usr/bin/env bash
# Builds what a user can ask for, with warnings as errors: `zkelect` with no
# features, with each feature alone, and with all of them (the library only:
# its tests turn `memory`, `testkit` and `zookeeper-client` on for themselves);
# `zkelect-core` with `serde`, and a JSON round trip of every type it derives
# serde for.
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

echo "feature-matrix: zkelect-core --features serde"
cargo clippy --quiet -p zkelect-core --features serde --all-targets -- -D warnings
cargo test --quiet -p zkelect-core --features serde --test serde_roundtrip
