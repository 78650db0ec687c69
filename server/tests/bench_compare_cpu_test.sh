#!/usr/bin/env bash
# scripts/qgate-bench-compare on the CPU backend (ctest qgate_bench_compare_cpu): three builds in two
# interleaved rounds, one of them the same library with another environment (MINFER_MMQ=0 sends
# `--path env` to the f16 path). The table must hold every case with each build's median of round
# medians and the ratio to the first build, the rounds must rotate the build order, a build that
# cannot load must fail the run (exit 1) without losing the others, and bad arguments must be
# refused with exit 2 before anything is written.
# Usage: bench_compare_cpu_test.sh SOURCE_DIR BIN_DIR REF_LIBRARY WORK_DIR
set -euo pipefail
src=$1 bin=$2 ref=$3 work=$4
compare=$src/scripts/qgate-bench-compare
rm -rf "$work"
mkdir -p "$work"
failed=0
check() { if eval "$1"; then echo "ok   $2"; else echo "FAIL $2"; failed=1; fi; }
cp "$ref" "$work/copy.so"
printf 'not a shared object\n' >"$work/broken.so"
export QGATE_BIN_DIR=$bin QGATE_COMPARE_BACKEND=cpu
args=(-- --types q4_0,q6_K --nt 1,16 --odk 64x256 --path env --reps 3 --threads 1)

set +e
bash "$compare" "$work/bad1" a="$ref" 2>"$work/bad1.err"; rc1=$?
bash "$compare" "$work/bad2" a="$ref" b="$work/none.so" 2>"$work/bad2.err"; rc2=$?
bash "$compare" "$work/bad3" a="$ref" a="$work/copy.so" 2>"$work/bad3.err"; rc3=$?
bash "$compare" "$work/bad4" a="$ref" b="$ref,not-a-setting" 2>"$work/bad4.err"; rc4=$?
bash "$compare" "$work/bad5" a="$ref" b="$ref" -- --build x 2>"$work/bad5.err"; rc5=$?
QGATE_COMPARE_ROUNDS=0 bash "$compare" "$work/bad6" a="$ref" b="$ref" 2>"$work/bad6.err"; rc6=$?
bash "$compare" "$work/bad7" "$ref" b="$ref" 2>"$work/bad7.err"; rc7=$?
set -e
check '[ $rc1 -eq 2 ] && grep -q "at least two builds" "$work/bad1.err"' "one build is refused"
check '[ $rc2 -eq 2 ] && grep -q "no build at" "$work/bad2.err"' "a missing build is refused"
check '[ $rc3 -eq 2 ] && grep -q "two builds are named" "$work/bad3.err"' "two builds of one name are refused"
check '[ $rc4 -eq 2 ] && grep -q "is not VAR=VALUE" "$work/bad4.err"' "a setting that is not VAR=VALUE is refused"
check '[ $rc5 -eq 2 ] && grep -q "is set by qgate-bench-compare" "$work/bad5.err"' "a bench argument the script owns is refused"
check '[ $rc6 -eq 2 ] && grep -q "not a positive count" "$work/bad6.err"' "zero rounds are refused"
check '[ $rc7 -eq 2 ] && grep -q "is not NAME=BUILD.so" "$work/bad7.err"' "a build without a name is refused"
check 'for i in 1 2 3 4 5 6 7; do [ ! -e "$work/bad$i" ] || exit 1; done' "a refusal writes nothing"

set +e
QGATE_COMPARE_ROUNDS=2 bash "$compare" "$work/run" a="$ref,MINFER_MMQ=1" b="$work/copy.so,MINFER_MMQ=1" \
  f16="$ref,MINFER_MMQ=0" "${args[@]}" >"$work/run.out" 2>&1
rc=$?
set -e
run=$work/run
check '[ $rc -eq 0 ]' "the comparison exits 0 (exit $rc; log: $run/compare.log)"
check 'grep -qE "^\| q4_0 \| mmq \| 16 \| 64x256 \| [0-9.]+ \| [0-9.]+ \| - \| [0-9.]+ \| - \|$" "$run/compare.md"' \
  "compare.md: q4_0 MMQ at 16 tokens timed by both MINFER_MMQ=1 builds, with the ratio; '-' for the f16 build"
check 'grep -qE "^\| q6_K \| f16 \| 1 \| 64x256 \| - \| - \| [0-9.]+ \| - \| - \|$" "$run/compare.md"' \
  "compare.md: the f16 build's environment sent it to the f16 path"
check '[ "$(grep "^== round" "$run/compare.log" | sed "s/^== round //" | tr "\n" " ")" = "1: a 1: b 1: f16 2: b 2: f16 2: a " ]' \
  "the rounds rotate the build order"
check 'python3 -c "
import json, statistics
s = json.load(open(\"$run/compare.json\"))
assert s[\"builds\"] == [\"a\", \"b\", \"f16\"] and s[\"rounds\"] == 2, s
rows = {(r[\"type\"], r[\"path\"], r[\"nt\"]): r for r in s[\"rows\"]}
assert len(rows) == 8, sorted(rows)
r = rows[(\"q4_0\", \"GEMM_PATH_MMQ\", 16)]
assert r[\"rounds\"] == {\"a\": 2, \"b\": 2, \"f16\": 0}, r
meds = []
for k in (1, 2):
    t = [x for x in json.load(open(f\"$run/bench-b-r{k}.json\"))[\"timings\"]
         if x[\"type\"] == \"q4_0\" and x[\"path\"] == \"GEMM_PATH_MMQ\" and x[\"shape\"][\"nt\"] == \"16\"]
    meds.append(t[0][\"median_us\"])
assert abs(r[\"median_us\"][\"b\"] - statistics.median(meds)) < 1e-9, (r, meds)
assert abs(r[\"ratio_to_first\"][\"b\"] - r[\"median_us\"][\"b\"] / r[\"median_us\"][\"a\"]) < 1e-12, r
assert r[\"median_us\"][\"f16\"] is None and r[\"ratio_to_first\"][\"f16\"] is None, r
"' "compare.json: each build's median of its round medians, its ratio to the first build, and who timed what"

set +e
QGATE_COMPARE_ROUNDS=1 bash "$compare" "$work/broken" a="$ref,MINFER_MMQ=1" bad="$work/broken.so" "${args[@]}" \
  >"$work/broken.out" 2>&1
rcb=$?
set -e
check '[ $rcb -eq 1 ] && grep -q "round 1: bad: the benchmark FAILED" "$work/broken/compare.log"' \
  "a build that cannot load fails the run"
check 'grep -qE "^\| q4_0 \| mmq \| 1 \| 64x256 \| [0-9.]+ \| - \| - \|$" "$work/broken/compare.md"' \
  "the other build's figures are kept"
exit $failed
