#!/usr/bin/env bash
# Proves, with one build, that the four published crates (zkelect-core,
# zkelect-sim, zkelect, zkelect-cli) are complete as packaged, that they
# build on the minimum Rust version they declare (`rust-version` in
# Cargo.toml), and that `cargo install` of the command gives a working
# `zkelect`.
#
# So it works on the packages themselves, not the tree: `cargo package` writes
# each crate's .crate file as crates.io would get it (the files its manifest
# includes, and the manifest as rewritten for publishing), this extracts them
# side by side as one workspace, points each one's dependency on the others at
# its extracted package (none is published yet), and installs zkelect-cli
# from there with the minimum toolchain, which builds the other three as its
# dependencies. A file missing from a package, or a feature or an API newer
# than the declared minimum, fails here; the installed binary must then print
# its version and pass a short simulation. (One build for what took three:
# building the packages on stable, checking the tree on the minimum Rust, and
# installing from the tree.)
#
# Our Cargo.lock pins what CI tests on stable, and some of it needs a newer
# Rust than the crates do; a user on the minimum gets older versions of those
# from Cargo's MSRV-aware resolver. So this resolves a lock file of its own
# the same way, and installs with it (--locked). Installs the toolchain with
# rustup when it is missing.
#
# Usage: scripts/msrv.sh   (builds in $CARGO_TARGET_DIR/msrv, or target/msrv)
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'msrv.sh: ERROR: %s\n' "$*" >&2; exit 1; }

crates=(zkelect-core zkelect-sim zkelect zkelect-cli)
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml | head -1)
[[ -n $msrv ]] || die "no rust-version in Cargo.toml"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
[[ -n $version ]] || die "no version in Cargo.toml"
command -v rustup >/dev/null || die "rustup is needed to install Rust $msrv"
if ! rustup run "$msrv" rustc --version >/dev/null 2>&1; then
    rustup toolchain install "$msrv" --profile minimal
fi

# A target directory of its own, for the packages too: test.sh runs this
# beside the lints, whose cargo holds the main target's locks, and its
# packaging step writes the same .crate files there.
target=${CARGO_TARGET_DIR:-$PWD/target}/msrv
# --allow-dirty: a local run with uncommitted changes checks them too.
CARGO_TARGET_DIR=$target cargo package --quiet --no-verify --allow-dirty "${crates[@]/#/-p}"

copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
{
    echo '[workspace]'
    echo 'resolver = "2"'
    printf 'members = ['
    printf '"%s-'"$version"'", ' "${crates[@]}"
    echo ']'
    echo '[patch.crates-io]'
} >"$copy/Cargo.toml"
for crate in "${crates[@]}"; do
    package="$target/package/$crate-$version.crate"
    [[ -f $package ]] || die "cargo package wrote no $package"
    tar -xzf "$package" -C "$copy"
    echo "$crate = { path = \"$crate-$version\" }" >>"$copy/Cargo.toml"
done
# Cargo writes every file of a package with one fixed, old mtime, and judges
# a build fresh by mtimes: the extracted sources would look older than the
# last run's build in the same target directory, which would be reused as
# is, stale (a later run's API change failed to compile against it; an
# older run's could as well have passed). Dated now, they are rebuilt.
find "$copy" -type f -exec touch {} +

# The cheapest build that proves it: no optimisation, no debug info, no
# incremental state. A workspace outside the tree does not read our
# .cargo/config.toml (opt-level 1, which the simulator's tests need) and
# Cargo's default adds full debug info, slow to link; the three-seed run
# below needs neither. Cold, on two cores: 268 CPU-s, where our dev
# profile took 520.
mkdir -p "$copy/.cargo"
printf '[profile.dev]\nopt-level = 0\ndebug = false\nincremental = false\n' >"$copy/.cargo/config.toml"

cd "$copy"
CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback cargo generate-lockfile --quiet
export CARGO_TARGET_DIR="$target"
# --debug: the dev profile above (a release build of the same sources would
# add minutes to every run).
cargo "+$msrv" install --quiet --debug --locked --path "zkelect-cli-$version" --root "$copy/installed"
"$copy/installed/bin/zkelect" --version
"$copy/installed/bin/zkelect" sim --seeds 3 >/dev/null
echo "msrv.sh: the packages of ${crates[*]} build and install on Rust $msrv"
