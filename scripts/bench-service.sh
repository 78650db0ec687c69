#!/usr/bin/env bash
# The service benchmark: qgated start to ready, submit-to-verdict of the reference build on the
# CPU backend, and QueryTrend p50/p99 over the last 30 days and over the whole year, the points per
# answer, plus qgated's memory, on a store pre-filled with N runs (default 1,000,000). Prints a
# table; JSON goes to out/bench-service/.
# Usage: [QGATE_BUILD_DIR=build] [QGATE_BENCH_TREND_ONLY=1] scripts/bench-service.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1000000}
# The `bench-service` CMake target runs this from an existing build; by hand it builds first.
[ -n "${QGATE_SKIP_BUILD:-}" ] || scripts/build.sh >/dev/null
build_dir=${QGATE_BUILD_DIR:-build}
bin=$build_dir/bin
out=out/bench-service
mkdir -p "$out"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

start_daemon() { # data dir, extra args...
  local dir=$1; shift
  local t0; t0=$(date +%s%N)
  "$bin/qgated" --backend cpu --data-dir "$dir" --listen "unix://$dir/qgated.sock" "$@" 2>"$dir/qgated.log" &
  daemon_pid=$!
  until grep -q "qgated: ready" "$dir/qgated.log" 2>/dev/null; do sleep 0.01; done
  ready_ms=$(ms_since "$t0")
}

if [ -z "${QGATE_BENCH_TREND_ONLY:-}" ]; then  # QGATE_BENCH_TREND_ONLY=1: only the store and QueryTrend
echo "== qgated start to ready, and submit-to-verdict on the CPU backend"
mkdir -p "$work/cpu"
start_daemon "$work/cpu"
start_ms=$ready_ms
q() { "$bin/qgate" --server "unix://$work/cpu/qgated.sock" "$@"; }
t0=$(date +%s%N); q submit --build "$build_dir/lib/libqgate_ref.so" --name ref --kind ab --profile cpu-tiny --max-pairs 8 --wait >/dev/null 2>&1 || true
ab_ms=$(ms_since "$t0")
t0=$(date +%s%N); q submit --build "$build_dir/lib/libqgate_ref.so" --name ref --baseline ref --profile cpu-tiny --max-pairs 8 --threshold 0.25 --wait >/dev/null 2>&1 || true
gate_ms=$(ms_since "$t0")
kill "$daemon_pid"; wait "$daemon_pid" 2>/dev/null || true
else
  start_ms=null ab_ms=null gate_ms=null
fi

echo "== filling a store with $runs runs"
t0=$(date +%s%N)
mkdir -p "$work/big"
"$bin/qgate-store-bench" --runs "$runs" --queries 1 --skip-raw --db "$work/big/qgate.db" --keep \
  --json-out "$out/store.json" >"$out/store.txt"
fill_ms=$(ms_since "$t0")
start_daemon "$work/big"
big_start_ms=$ready_ms
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
"$bin/qgate-service-bench" --server "unix://$work/big/qgated.sock" --queries 200 --pid "$daemon_pid" --json-out "$out/trend.json" | tee "$out/trend.txt"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
kill "$daemon_pid"; wait "$daemon_pid" 2>/dev/null || true

cat > "$out/service.json" <<JSON
{"date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)", "host_cpus": $(nproc), "runs": $runs,
 "start_to_ready_ms": $start_ms, "start_to_ready_with_store_ms": $big_start_ms,
 "cpu_ab_submit_to_verdict_ms": $ab_ms, "cpu_gate_submit_to_verdict_ms": $gate_ms, "fill_ms": $fill_ms,
 "load_average_before_queries": "$load_before", "load_average_after_queries": "$load_after"}
JSON
printf '\n%-52s %10s\n' "figure" "value"
printf '%-52s %8s ms\n' "qgated start to ready (empty store)" "$start_ms"
printf '%-52s %8s ms\n' "qgated start to ready ($runs runs)" "$big_start_ms"
printf '%-52s %8s ms\n' "ab job, cpu-tiny, 8 pairs max: submit to verdict" "$ab_ms"
printf '%-52s %8s ms\n' "A/A gate (parity sweep + A/B): submit to verdict" "$gate_ms"
printf '%-52s %8s ms\n' "store fill" "$fill_ms"
echo "QueryTrend (30 days, a year) and memory: see above ($out/trend.json)"
