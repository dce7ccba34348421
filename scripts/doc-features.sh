#!/usr/bin/env bash
# Proves that every item of `zkelect` that needs a feature says which on its
# page, as docs.rs shows it: builds the docs twice, with no features
# and with every feature under `--cfg docsrs` (rustdoc's `doc_cfg`, which
# stable rustdoc allows with RUSTC_BOOTSTRAP=1, given to rustdoc alone;
# docs.rs builds with nightly).
# A page that only the second build has documents a gated item, and must
# carry rustdoc's "Available on crate feature …" mark. Both builds must be
# free of warnings.
#
# Usage: scripts/doc-features.sh   (honours CARGO_TARGET_DIR)
set -euo pipefail
cd "$(dirname "$0")/.."

target=${CARGO_TARGET_DIR:-target}
docs="$target/doc/zkelect"
default_pages=$(mktemp)
# rustdoc alone gets RUSTC_BOOTSTRAP, through this wrapper: set for the whole
# cargo run, it also reaches the build scripts of proc-macro2, anyhow and
# thiserror, which rerun when it changes, so the docs build rebuilt (in check
# mode) everything above them, and the next cargo command without it did the
# same again (after a warm lints run, this step and the feature matrix took
# 35 + 131 s with it, 13 + 3 s without).
rustdoc_unstable=$(mktemp)
trap 'rm -f "$default_pages" "$rustdoc_unstable"' EXIT
printf '#!/bin/sh\nRUSTC_BOOTSTRAP=1 exec "%s" "$@"\n' "${RUSTDOC:-rustdoc}" >"$rustdoc_unstable"
chmod +x "$rustdoc_unstable"

# rustdoc leaves the pages of an earlier build in place: start from none, so
# a page the first build lists is one it wrote.
rm -rf "$docs"
RUSTDOCFLAGS="-D warnings" cargo doc -p zkelect --no-default-features --no-deps --quiet
(cd "$docs" && find . -name '*.html' | sort) >"$default_pages"

RUSTDOC="$rustdoc_unstable" RUSTDOCFLAGS="-D warnings --cfg docsrs" \
    cargo doc -p zkelect --all-features --no-deps --quiet

gated=0
unmarked=()
while IFS= read -r page; do
    case "$page" in
        # Not items: the source view, settings, help, and the lists of all items.
        ./src/* | */all.html | ./settings.html | ./help.html) continue ;;
    esac
    # Redirects from an item's defining private module to its page.
    if grep -q 'http-equiv="refresh"' "$docs/$page"; then continue; fi
    gated=$((gated + 1))
    if grep -q 'Available on <strong>crate feature' "$docs/$page"; then continue; fi
    # An item of zkelect-core shown under `zkelect::core`: rustdoc sees the
    # cfg of another crate's item only when that crate is documented under
    # `--cfg docsrs` itself, so such an item says its feature in a sentence.
    if [[ $page == ./core/* ]] &&
        grep -q 'Available on crate feature <code>[a-z-]*</code> of <code>zkelect-core</code> only' "$docs/$page"; then
        continue
    fi
    unmarked+=("$page")
done < <(cd "$docs" && find . -name '*.html' | sort | comm -13 "$default_pages" -)

if [[ ${#unmarked[@]} -gt 0 ]]; then
    printf 'doc-features: gated item without its feature mark: %s\n' "${unmarked[@]}" >&2
    exit 1
fi
if [[ $gated -eq 0 ]]; then
    echo "doc-features: no gated page found: the comparison is broken" >&2
    exit 1
fi
echo "doc-features: $gated pages of gated items, each marked with its feature"
