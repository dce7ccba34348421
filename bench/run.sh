#!/usr/bin/env bash
# Regenerates BENCHMARKS.md at the repository root from ONE run: the failover
# benchmark (zkelect vs zookeeper-async's LeaderLatch on one real ZooKeeper),
# the core's criterion benchmarks, its memory figure, and the simulator's
# benchmarks, with the machine's facts and the exact commands. Never edit
# BENCHMARKS.md by hand: run this.
#
# Usage:
#   bench/run.sh                 full run (N = 3, 50, 300; 30 failover rounds, 200 hand-off rounds each; the economy table)
#   bench/run.sh --quick         a fast check of the pipeline (N = 3, 50; 5 rounds)
#   bench/run.sh --skip-criterion  failover only (no cargo bench)
#
# Environment:
#   ZKELECT_BENCH_CONNECT=host:port  use that ZooKeeper server instead of
#                                    starting one (--embedded, the default)
#   ZKELECT_BENCH_OUT=path           write there instead of BENCHMARKS.md
#
# Needs: Java + ZooKeeper 3.8 for --embedded (scripts/test-deps.sh installs
# them), a Rust toolchain. Takes ~15-20 minutes on two cores (the economy
# table alone ~9: six sides, each with a counted idle minute; 8 min 30 s
# measured, the time is the windows' own, not the machine's).
set -euo pipefail

log() { printf 'bench/run.sh: %s\n' "$*" >&2; }
die() { printf 'bench/run.sh: ERROR: %s\n' "$*" >&2; exit 1; }

quick=0
criterion=1
for arg in "$@"; do
    case "$arg" in
        --quick) quick=1 ;;
        --skip-criterion) criterion=0 ;;
        -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument: $arg (see --help)" ;;
    esac
done

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
cd "$root"
out=${ZKELECT_BENCH_OUT:-$root/BENCHMARKS.md}
target=${CARGO_TARGET_DIR:-$root/target}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [[ $quick -eq 1 ]]; then
    candidates=3,50 rounds=5 handoff_rounds=5 many_elections=1000 many_rounds=2
else
    candidates=3,50,300 rounds=30 handoff_rounds=200 many_elections=10000 many_rounds=3
fi
if [[ -n "${ZKELECT_BENCH_CONNECT:-}" ]]; then
    server_args=(--connect "$ZKELECT_BENCH_CONNECT")
else
    server_args=(--embedded)
fi

# Print a command as it can be pasted into a shell (quoting only what needs it).
show() {
    local out="" a
    for a in "$@"; do
        if [[ "$a" =~ ^[A-Za-z0-9_./,=:@%+-]+$ ]]; then
            out+="$a "
        else
            out+="$(printf '%q' "$a") "
        fi
    done
    printf '%s' "${out% }"
}
commands=()

load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# --- failover ---------------------------------------------------------------
build=(cargo build --release -q -p zkelect-bench)
log "$(show "${build[@]}")"
"${build[@]}"
bench_bin="$target/release/zkelect-bench"
failover=("$bench_bin" failover "${server_args[@]}" --candidates "$candidates" --rounds "$rounds"
          --impl both --strategy predecessor,parent --json --markdown "$work/failover.md")
log "$(show "${failover[@]}")"
# Exit status 3: some configurations failed (listed in the output); the
# others are complete, so the results are still written.
status=0
"${failover[@]}" > "$work/rounds.jsonl" || status=$?
[[ $status -eq 0 || $status -eq 3 ]] || die "the failover benchmark failed (exit status $status)"
[[ $status -eq 0 ]] || log "some configurations failed; they are listed in $out"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
mkdir -p "$target/zkelect-bench"
cp "$work/rounds.jsonl" "$target/zkelect-bench/rounds.jsonl"
shown=("${failover[@]}")
shown[0]=${bench_bin#"$root"/}
shown[${#shown[@]}-1]=FILE.md
commands+=("$(show "${build[@]}")" "$(show "${shown[@]}") > rounds.jsonl")
zk_version=$(jq -r 'select(.type=="server") | .version' "$work/rounds.jsonl" 2>/dev/null \
    || grep -o '"version":"[^"]*"' "$work/rounds.jsonl" | head -1 | cut -d'"' -f4)

# --- mutex hand-off ------------------------------------------------------------
handoff=("$bench_bin" handoff "${server_args[@]}" --waiters "$candidates" --rounds "$handoff_rounds"
         --json --markdown "$work/handoff.md")
log "$(show "${handoff[@]}")"
"${handoff[@]}" > "$work/handoff.jsonl" || die "the hand-off benchmark failed"
cp "$work/handoff.jsonl" "$target/zkelect-bench/handoff.jsonl"
shown=("${handoff[@]}")
shown[0]=${bench_bin#"$root"/}
shown[${#shown[@]}-1]=FILE.md
commands+=("$(show "${shown[@]}") > handoff.jsonl")

# --- many elections on one session --------------------------------------------
# Every side once per round, each in a child process of its own (VmRSS is
# the whole process's, and a side run after another could reuse what the
# first freed), the sides alternated round by round against one warmed
# server: one side's start-up moves more between runs than the sides differ.
many=("$bench_bin" many "${server_args[@]}" --elections "$many_elections" --rounds "$many_rounds"
      --sides zookeeper-client,zkelect-zookeeper-client,zkelect-zookeeper-async,floor-zookeeper-client,floor-zookeeper-async
      --warm-up --json --markdown "$work/many.md")
log "$(show "${many[@]}")"
"${many[@]}" > "$work/many.jsonl" || die "the many-elections benchmark failed"
shown=("${many[@]}")
shown[0]=${bench_bin#"$root"/}
shown[${#shown[@]}-1]=FILE.md
commands+=("$(show "${shown[@]}") > many.jsonl")

# --- server economy -------------------------------------------------------------
# Packet counts do not depend on the machine's load; the idle minute is a
# real minute per side.
economy=("$bench_bin" economy "${server_args[@]}" --rounds "$([[ $quick -eq 1 ]] && echo 5 || echo 20)"
         --idle-secs "$([[ $quick -eq 1 ]] && echo 20 || echo 60)" --json --markdown "$work/economy.md")
log "$(show "${economy[@]}")"
"${economy[@]}" > "$work/economy.jsonl" || die "the economy benchmark failed"
cp "$work/economy.jsonl" "$target/zkelect-bench/economy.jsonl"
shown=("${economy[@]}")
shown[0]=${bench_bin#"$root"/}
shown[${#shown[@]}-1]=FILE.md
commands+=("$(show "${shown[@]}") > economy.jsonl")

# --- criterion: core ----------------------------------------------------------
crit_table() { # $1 = marker file
    "$bench_bin" criterion-table --dir "$target/criterion" --newer-than "$1" --markdown
}
core_md="" memory_line="" memory_rules="" sim_md="" sim_lines=""
if [[ $criterion -eq 1 ]]; then
    touch "$work/core.marker"; sleep 1
    core=(cargo bench -q -p zkelect-core --bench core)
    log "$(show "${core[@]}")"
    "${core[@]}" >&2
    core_md=$(crit_table "$work/core.marker")
    commands+=("$(show "${core[@]}")")

    memory=(cargo bench -q -p zkelect-core --bench memory)
    log "$(show "${memory[@]}")"
    memory_out=$("${memory[@]}" 2>&1)
    memory_line=$(grep '^idle Candidate:' <<<"$memory_out" | sed 's/^idle Candidate: *//' || true)
    memory_rules=$(grep '^idle Candidate per rule:' <<<"$memory_out" | sed 's/^idle Candidate per rule: *//' || true)
    [[ -n "$memory_line" ]] || die "the memory bench printed no 'idle Candidate' line"
    [[ -n "$memory_rules" ]] || die "the memory bench printed no 'idle Candidate per rule' line"
    commands+=("$(show "${memory[@]}")")

    # --- simulator ---------------------------------------------------------
    # sim/benches may hold criterion benchmarks (tabulated) and/or plain
    # harness=false programs that print "sim: ..." lines (quoted verbatim).
    if compgen -G "sim/benches/*.rs" > /dev/null; then
        touch "$work/sim.marker"; sleep 1
        sim=(cargo bench -q -p zkelect-sim)
        log "$(show "${sim[@]}")"
        sim_out=$("${sim[@]}")
        printf '%s\n' "$sim_out" >&2
        sim_lines=$(grep -E '^sim:' <<<"$sim_out" || true)
        sim_md=$(crit_table "$work/sim.marker" 2>/dev/null || true)
        [[ -n "$sim_lines$sim_md" ]] || die "cargo bench -p zkelect-sim printed no 'sim:' line and saved no criterion result"
        commands+=("$(show "${sim[@]}")")
    else
        # TODO(sim benches): sim/benches does not exist in this checkout. Once
        # it does, this branch runs `cargo bench -p zkelect-sim`.
        log "TODO: no sim/benches/*.rs: simulator figures left out"
    fi
fi

# --- machine ------------------------------------------------------------------
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || echo unknown)
mem=$(free -h | awk '/^Mem:/ {print $2 " total, " $7 " available"}')
commit=$(git rev-parse HEAD)
dirty=""
[[ -z "$(git status --porcelain --untracked-files=no)" ]] || dirty=" (working tree had uncommitted changes)"
java_version=$( (java -version 2>&1 || true) | head -1)

{
    echo "# Benchmarks"
    echo
    echo "<!-- Generated by bench/run.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ). Do not edit: run bench/run.sh. -->"
    echo
    echo "All figures below come from one run of \`bench/run.sh$([[ $quick -eq 1 ]] && echo ' --quick')\`."
    echo
    echo "## Machine"
    echo
    echo "| | |"
    echo "|---|---|"
    echo "| CPUs (\`nproc\`) | $(nproc) |"
    echo "| CPU model | $cpu |"
    echo "| memory (\`free -h\`) | $mem |"
    echo "| kernel | $(uname -sr) |"
    echo "| ZooKeeper (\`srvr\`) | $zk_version |"
    echo "| Java | $java_version |"
    echo "| rustc | $(rustc -V) |"
    echo "| git commit | \`$commit\`$dirty |"
    echo "| load average (1, 5, 15 min) | $load_before before the failover benchmark, $load_after after it |"
    echo
    echo "The machine is shared (other builds may run during the benchmark), so treat single rounds as noisy; the medians are the figures to compare."
    echo
    echo "## Failover: zkelect vs zookeeper-async's LeaderLatch"
    echo
    cat "$work/failover.md"
    echo "Raw rounds (one JSON line each) of this run: \`target/zkelect-bench/rounds.jsonl\` (not committed)."
    echo
    echo "## Mutex hand-off: zkelect and zookeeper-client's lock against the floor"
    echo
    echo "W waiters queued behind the holder, each on its own session; per round, interleaved: the floor (one client deletes a node another watches: delete → notification), zookeeper-client's \`Client::lock\` (Curator-style \`lock-\` nodes; holder drops its lock → next \`lock()\` resolves) and zkelect (holder releases → next told it holds). Each W runs twice, zkelect over each of its transports: zookeeper-client (the crate's default, and the floor's and the lock's own library), then zookeeper-async, with the floor and the lock measured again beside it. Ratios are medians over the floor's median of the same run. See bench/README.md."
    echo
    cat "$work/handoff.md"
    echo
    echo "Raw rounds of this run: \`target/zkelect-bench/handoff.jsonl\` (not committed)."
    echo
    echo "## Many elections on one session"
    echo
    echo "N election paths; N contenders on one session A (each alone on its path, so each holds) and N on a session B (each queued behind A's). Every side runs once per round ($many_rounds rounds, the sides alternated), each run in a child process of its own, against one server warmed first by an untimed run of every side (\`--warm-up\`); each figure is its median over the rounds, and the last column gives every round's start-up. Start-up: first request to the N-th holding on A, and the server's requests in that window ÷ N. Memory per queued, idle waiter of B, two meters at the same moments: live heap (bytes allocated and not freed, counted by the bench's allocator, as dhat counts) and the process's VmRSS growth. On the zkelect sides, *of which the client library's two watches*: a fresh raw client of the transport's library holding, for N node pairs, the two watches one idle waiter sets (zookeeper-client: \`get_and_watch_data\`/\`check_and_watch_stat\` with the \`OneshotWatcher\`s kept; zookeeper-async: \`get_data_w\`/\`exists_w\`, no-op callback), settled the same way, live-heap growth ÷ N; *zkelect's own* is the live heap less that (recipe state, driver, the transport's per-watch plumbing, and what the client library keeps from the burst of joins). Failover: A's session closes; until all N of B's hold, and the server's packets in that window ÷ N. zookeeper-client's \`Client::lock\` against zkelect's \`Session\` with N elections on each transport. See bench/README.md."
    echo
    cat "$work/many.md"
    echo
    echo "## Server economy: packets per change"
    echo
    echo "What each change costs the server, per side, one side at a time on one server: zookeeper-async's \`LeaderLatch\` (elections), zookeeper-client's \`Client::lock\` (locks), and zkelect in each \`Takeover\` mode over each of its transports. *failover*: the leader's session closes, another leads; *hand-off*: the lock's holder lets go, the next holds; *re-queue*: the one that let go queues again; *start*: a new contender on a session of its own connects and queues behind the others (an election's for the latch, a lock's for the rest); *idle session-minute*: the contenders idle (pings, zkelect's session probe). bench/README.md lists every request and notification behind each figure, with its reason."
    echo
    cat "$work/economy.md"
    echo
    echo "Raw figures of this run: \`target/zkelect-bench/economy.jsonl\` (not committed)."
    echo
    echo "## Core (criterion)"
    echo
    if [[ $criterion -eq 1 ]]; then
        echo "$core_md"
        echo
        echo "Memory per idle \`Candidate\` (dhat): $memory_line"
        echo
        echo "Memory per idle follower, by rule (dhat, inline + heap; a queue of ten): $memory_rules"
    else
        echo "Skipped in this run (\`--skip-criterion\`)."
    fi
    echo
    echo "## Simulator"
    echo
    if [[ -n "$sim_lines$sim_md" ]]; then
        if [[ -n "$sim_lines" ]]; then
            echo "One core, whole seeded runs with mixed faults (\`cargo bench -p zkelect-sim\`):"
            echo
            echo '```text'
            echo "$sim_lines"
            echo '```'
            echo
        fi
        [[ -z "$sim_md" ]] || { echo "$sim_md"; echo; }
    elif [[ $criterion -eq 0 ]]; then
        echo "Skipped in this run (\`--skip-criterion\`)."
        echo
    else
        echo "TODO: the simulator has no benchmarks in this checkout (\`sim/benches/\` is missing), so \`cargo bench -p zkelect-sim\` is not run."
        echo
    fi
    echo "## Commands"
    echo
    echo "Run from the repository root; \`FILE.md\` is a temporary file the script includes above."
    echo
    echo '```sh'
    for c in "${commands[@]}"; do echo "$c"; done
    echo '```'
} > "$out"
log "wrote $out"
