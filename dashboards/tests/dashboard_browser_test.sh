#!/usr/bin/env bash
# The dashboard in a real headless Chromium against a real qgated on seeded data (ctest:
# qgate_dashboard_browser_test). Seeds a fresh data directory through the CLI on the CPU backend, in
# three daemon sessions that each replay a recorded co-tenant trace (quiet, busy, then mixed), so the
# store holds quiet, contended and unknown-load points: a parity job, a gate, A/B jobs, llama-bench
# results imported in four series (settings of their own, a 9% step, a dip that recovered, a 2-build
# dip labelled transient) and
# test-backend-ops' MUL_MAT results of 26 weight types. Then serves it with --http and runs
# dashboard_browser_test.mjs, which saves its screenshots under ARTIFACTS.
# Usage: dashboard_browser_test.sh BIN_DIR REF_LIBRARY NPM_DIR ARTIFACTS
# Without Chromium the test fails when QGATE_REQUIRE_BROWSER=1 or CI is set (scripts/run-tests.sh sets
# it), and is skipped (exit 77) with the reason otherwise.
set -euo pipefail
bin=$(realpath "$1") ref=$(realpath "$2") npm_dir=$(realpath "$3") artifacts=$(realpath -m "$4")
here=$(cd "$(dirname "$0")" && pwd)
chromium=${QGATE_CHROMIUM:-/usr/bin/chromium}

if [ ! -x "$chromium" ] || ! command -v node >/dev/null || [ ! -d "$npm_dir/node_modules/puppeteer-core" ]; then
  why="needs $chromium, node and puppeteer-core in $npm_dir/node_modules (scripts/install-deps.sh, then build)"
  if [ "${QGATE_REQUIRE_BROWSER:-0}" = 1 ] || [ -n "${CI:-}" ]; then
    echo "dashboard browser test: FAILED: it $why" >&2
    exit 1
  fi
  echo "dashboard browser test: SKIPPED: it $why"
  exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/qgate-dashboard-test-XXXXXX")
data=$work/data
mkdir -p "$data" "$artifacts"
rm -f "$artifacts"/*.png
daemon_pid=""
stop_daemon() {
  if [ -n "$daemon_pid" ]; then
    kill "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
    daemon_pid=""
  fi
}
trap 'stop_daemon; rm -rf "$work"' EXIT

# A trace line: foreign SM %, SM clock and clock-event reasons (0x20 = sw_thermal_slowdown, 0x4 = sw_power_cap).
sample() {
  local t=$1 sm=$2 clock=$3 reasons=$4 foreign=""
  [ "$sm" -gt 0 ] && foreign="{\"pid\":4242,\"name\":\"sglang\",\"sm_percent\":$sm}"
  echo "{\"t_ms\":$t,\"device_util\":$((sm > 0 ? 99 : 35)),\"sm_clock_mhz\":$clock,\"max_sm_clock_mhz\":1980,\"clock_event_reasons\":$reasons,\"foreign\":[$foreign]}"
}
sample 0 0 1980 0 >"$work/quiet.jsonl"
sample 0 96 1410 32 >"$work/busy.jsonl"
# Mixed: a co-tenant for 0.4 s of every 2 s, with the clock held down while it runs; between its
# visits the GPU runs at its power cap (0x4, sw_power_cap: a reason that is not contention), so every
# run of the gate has readings with a clock-event reason to draw, however fast this machine runs
# the gate (on a fast CPU its A/B phase fits between two visits).
for ((t = 0; t < 600000; t += 400)); do
  if (((t / 400) % 5 == 4)); then sample "$t" 96 1410 32; else sample "$t" 0 1980 4; fi
done >"$work/mixed.jsonl"

start_daemon() {  # start_daemon TRACE [EXTRA ARGS...]: waits for "ready"
  local trace=$1
  shift
  : >"$work/qgated.log"
  "$bin/qgated" --backend cpu --data-dir "$data" --sampler replay --replay-samples "$trace" "$@" \
    >>"$work/qgated.log" 2>&1 &
  daemon_pid=$!
  for _ in $(seq 1 100); do
    grep -q "qgated: ready" "$work/qgated.log" && return 0
    kill -0 "$daemon_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$work/qgated.log" >&2
  echo "dashboard browser test: qgated did not start" >&2
  exit 1
}
export QGATE_SERVER="unix://$data/qgated.sock"
cli() { "$bin/qgate" "$@"; }
job() {  # a job that must end with a verdict (0 PASS, 1 FAIL, 2 INCONCLUSIVE)
  local rc=0
  cli "$@" >>"$work/seed.log" 2>&1 || rc=$?
  if [ "$rc" -gt 2 ]; then cat "$work/seed.log" >&2; echo "dashboard browser test: seeding failed: qgate $*" >&2; exit 1; fi
}

# Each build its own bytes (the reference build with a tag appended, which the loader ignores), so each
# is its own build and trend point rather than the same upload under a second name.
build_of() {
  cp "$ref" "$work/$1.so"
  printf 'qgate-dashboard-test %s' "$1" >>"$work/$1.so"
  echo "$work/$1.so"
}

echo "seeding: quiet jobs"
start_daemon "$work/quiet.jsonl"
job submit --build "$(build_of qgate-ref)" --name qgate-ref --kind parity --parity-shapes quick --profile cpu-tiny --wait
for name in mmq-tile64 mmq-tile96; do
  job ab --build "$(build_of "$name")" --name "$name" --profile cpu-tiny --max-pairs 6
done
stop_daemon

echo "seeding: a job under a co-tenant"
start_daemon "$work/busy.jsonl"
job ab --build "$(build_of mmq-busy)" --name mmq-busy --profile cpu-tiny --max-pairs 6
stop_daemon

echo "seeding: a gate under an intermittent co-tenant, and imported llama-bench results"
start_daemon "$work/mixed.jsonl"
job submit --build "$(build_of mmq-tile128)" --name mmq-tile128 --baseline qgate-ref --parity-shapes quick --profile cpu-tiny \
  --max-pairs 10 --wait
# llama-bench results of 15 builds in three series: prefill (pp512) with flash_attn=0, the last 8 about
# 9% slower (a change point); prefill with flash_attn=1 and n_ubatch=1024 (settings of their own, so a
# series of its own), flat; generation (tg128), about 12% slower for builds 6 to 10 and back at 11 (a
# dip that recovered: one regression with the build that fixed it).
now_s=$(date +%s)
bench_row() {  # bench_row I N_PROMPT N_GEN TOK_S SETTINGS_JSON
  local i=$1 n_prompt=$2 n_gen=$3 ts=$4 settings=$5 when
  when=$(date -u -d "@$((now_s - (16 - i) * 3600))" +%Y-%m-%dT%H:%M:%SZ)
  printf '{"build_commit":"c%02d0a1b","build_number":%d,"gpu_info":"NVIDIA H200","backends":"CUDA","model_type":"llama 8B Q4_K - Medium",%s"n_prompt":%d,"n_gen":%d,"test_time":"%s","avg_ns":%d,"stddev_ns":1000,"avg_ts":%d.5,"stddev_ts":10.0}\n' \
    "$i" "$((4100 + i))" "$settings" "$n_prompt" "$n_gen" "$when" "$(((n_prompt + n_gen) * 1000000000 / ts))" "$ts"
}
for i in $(seq 1 15); do
  bench_row "$i" 512 0 $(((i <= 7 ? 11000 : 10000) + (i * 37) % 60)) '"n_batch":2048,"n_ubatch":512,"flash_attn":0,'
  bench_row "$i" 512 0 $((12000 + (i * 53) % 70)) '"n_batch":2048,"n_ubatch":1024,"flash_attn":1,'
  bench_row "$i" 0 128 $(((i >= 6 && i <= 10 ? 150 : 170) + (i * 7) % 3)) '"n_batch":2048,"n_ubatch":512,"flash_attn":0,'
done >"$work/llama-bench.jsonl"
# Another model's prefill over 150 builds, 10 minutes apart, 20% slower at builds 143 and 144 only: a
# transient slowdown (2 slow builds, as a burst of contention the co-tenant sampler missed gives).
for i in $(seq 1 150); do
  when=$(date -u -d "@$((now_s - 86400 - (150 - i) * 600))" +%Y-%m-%dT%H:%M:%SZ)
  ts=$(((i == 143 || i == 144 ? 2400 : 3000) + (i * 13) % 5))
  printf '{"build_commit":"e%03d2c3d","build_number":%d,"gpu_info":"NVIDIA H200","backends":"CUDA","model_type":"qwen2 1.5B Q8_0","n_batch":2048,"n_ubatch":512,"flash_attn":0,"n_prompt":512,"n_gen":0,"test_time":"%s","avg_ns":%d,"stddev_ns":1000,"avg_ts":%d.5,"stddev_ts":5.0}\n' \
    "$i" "$((5000 + i))" "$when" "$((512 * 1000000000 / ts))" "$ts"
done >>"$work/llama-bench.jsonl"
cli import "$work/llama-bench.jsonl" >>"$work/seed.log" 2>&1
# test-backend-ops' MUL_MAT perf rows of 26 weight types at two commits (--output sql): a profile of
# imported GEMMs with one series per type.
types="f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 mxfp4 q2_K q3_K q4_K q5_K q6_K iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq1_s iq1_m iq4_nl iq4_xs tq1_0 tq2_0 q8_K"
{
  echo "CREATE TABLE IF NOT EXISTS test_backend_ops (test_time TEXT, build_commit TEXT, backend_name TEXT, op_name TEXT, op_params TEXT, test_mode TEXT, supported INTEGER, passed INTEGER, error_message TEXT, time_us REAL, flops REAL, bandwidth_gb_s REAL, memory_kb INTEGER, n_runs INTEGER, device_description TEXT, backend_reg_name TEXT);"
  for c in 1 2; do
    n=0
    for t in $types; do
      n=$((n + 1))
      when=$(date -u -d "@$((now_s - (3 - c) * 1800 + n))" +%Y-%m-%dT%H:%M:%SZ)
      echo "INSERT INTO test_backend_ops (test_time, build_commit, backend_name, op_name, op_params, test_mode, supported, passed, error_message, time_us, flops, bandwidth_gb_s, memory_kb, n_runs, device_description, backend_reg_name) VALUES ('$when', 't0${c}f00d', 'CUDA0', 'MUL_MAT', 'type_a=$t,type_b=f32,m=4096,n=512,k=14336,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0', 'perf', '1', '1', '', '$((100 + n * 13 + c * 7)).5', '1.0e14', '0', '1000', '100', 'NVIDIA H200', 'CUDA');"
    done
  done
} >"$work/test-backend-ops.sql"
cli import "$work/test-backend-ops.sql" >>"$work/seed.log" 2>&1 ||
  { cat "$work/seed.log" >&2; echo "dashboard browser test: the test-backend-ops import failed" >&2; exit 1; }
stop_daemon

echo "serving the dashboard"
start_daemon "$work/mixed.jsonl" --http 127.0.0.1:0
url=$(sed -n 's/.*qgated: dashboard on \(http[^ ]*\).*/\1/p' "$work/qgated.log" | head -1)
[ -n "$url" ] || { cat "$work/qgated.log" >&2; echo "dashboard browser test: no dashboard URL" >&2; exit 1; }
echo "dashboard at $url"

QGATE_CLI="$bin/qgate" QGATE_CHROMIUM="$chromium" QGATE_DASHBOARD_NPM_DIR="$npm_dir" QGATE_PROFILE_DIR="$work/chromium" \
  node "$here/dashboard_browser_test.mjs" "$url" "$artifacts"

echo "snapshot: qgate dashboard --out"
cli dashboard --out "$work/snapshot" >>"$work/seed.log" 2>&1 ||
  { cat "$work/seed.log" >&2; exit 1; }
QGATE_CLI="$bin/qgate" QGATE_CHROMIUM="$chromium" QGATE_DASHBOARD_NPM_DIR="$npm_dir" QGATE_PROFILE_DIR="$work/chromium2" \
  QGATE_SNAPSHOT=1 node "$here/dashboard_browser_test.mjs" "file://$work/snapshot/index.html" "$artifacts/snapshot"
echo "dashboard browser test: passed; screenshots in $artifacts"
