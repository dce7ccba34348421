#!/usr/bin/env bash
# Proves the minimum supported Rust version the crates declare
# (`rust-version` in Cargo.toml): the published crates (zkelect-core,
# zkelect-sim, zkelect with its default features, zkelect-cli) check on that
# toolchain. Our Cargo.lock pins what CI tests on stable, and some of it
# needs a newer Rust than the crates do; a user on the minimum gets older
# versions of those from Cargo's MSRV-aware resolver. So this resolves a
# lock file the same way, in a copy of the tree (Cargo.lock stays as it is),
# and checks with it. Installs the toolchain with rustup when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'msrv.sh: ERROR: %s\n' "$*" >&2; exit 1; }

msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml | head -1)
[[ -n $msrv ]] || die "no rust-version in Cargo.toml"
command -v rustup >/dev/null || die "rustup is needed to install Rust $msrv"
if ! rustup run "$msrv" rustc --version >/dev/null 2>&1; then
    rustup toolchain install "$msrv" --profile minimal
fi

copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
# The tracked files and the untracked ones git does not ignore: the tree as
# it is, without target/.
# (--ignore-failed-read: a tracked file deleted in the working tree is not
# part of it.)
git ls-files -z --cached --others --exclude-standard \
    | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$copy"
cd "$copy"
CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback cargo generate-lockfile --quiet
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$OLDPWD/target}/msrv"
cargo "+$msrv" check --quiet --locked -p zkelect-core -p zkelect-sim -p zkelect -p zkelect-cli
echo "msrv.sh: the published crates check on Rust $msrv"
