#!/usr/bin/env bash
# Instructions per handled listing, as commit messages quote them:
# callgrind's inclusive count of `Candidate::handle` called from the timed
# routine of criterion's `iter_batched`, divided by its number of calls. The
# setup (building the machine and the listing) and the drop of the result are
# outside that routine, so they are not counted; dropping the listing's names
# is (the machine owns them once handed the reply).
#
# Counts, unlike times, do not depend on the machine's load. They do depend on
# glibc's heap layout: freeing the listing can run malloc_consolidate inside
# the routine or, if a buffer kept by the machine stops it, later outside.
#
# Usage: core/benches/instructions.sh [BENCH_ID ...]
#   default ids: handle_listing/1000 handle_listing/10000
set -euo pipefail
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
cd "$(dirname "$0")/../.."
bin=$(cargo bench -p zkelect-core --bench core --no-run 2>&1 |
    sed -n 's/.*Executable benches\/core.rs (\(.*\))/\1/p' | tail -1)
[ -x "$bin" ] || { echo "no bench executable found" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
ids=("$@")
[ ${#ids[@]} -gt 0 ] || ids=(handle_listing/1000 handle_listing/10000)
for id in "${ids[@]}"; do
    file="$out/cg.$(echo "$id" | tr / _)"
    valgrind --tool=callgrind --callgrind-out-file="$file" \
        "$bin" --bench --exact "$id" --profile-time 2 >/dev/null 2>&1
    # The caller line just above `* ... Candidate::handle` in the caller tree:
    # "<count> (<pct>) < ...iter_batched (<calls>x)".
    callgrind_annotate --inclusive=yes --tree=caller "$file" 2>/dev/null |
        awk -v id="$id" '
            /< .*iter_batched \(/ { line = $0 }
            /\*  .*Candidate::handle / {
                split(line, f, " "); gsub(",", "", f[1])
                match(line, /\(([0-9,]+)x\)/); calls = substr(line, RSTART + 1, RLENGTH - 3); gsub(",", "", calls)
                printf "%-40s %12.0f instructions per listing (%d listings)\n", id, f[1] / calls, calls
            }'
done
