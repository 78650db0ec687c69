#!/usr/bin/env bash
# scripts/qgate-kernel-campaign on the CPU backend (ctest qgate_kernel_campaign_cpu): a candidate build
# (the reference build with bytes appended, so it is its own build) against the reference build, with
# stand-ins for ggml's test-backend-ops (two perf rows in its SQL format) and for qgate-ggml-mul-mat (its
# JSON, preferred where both have a figure). The campaign must
# run every job to its end (the gate and the A/B with the timing asked for), put both builds' benchmarks and the ggml rows in table.md and summary.json,
# and refuse bad arguments with exit 2 before it writes anything.
# Usage: kernel_campaign_cpu_test.sh SOURCE_DIR BIN_DIR REF_LIBRARY WORK_DIR
set -euo pipefail
src=$1 bin=$2 ref=$3 work=$4
campaign=$src/scripts/qgate-kernel-campaign
rm -rf "$work"
mkdir -p "$work"
failed=0
check() { if eval "$1"; then echo "ok   $2"; else echo "FAIL $2"; failed=1; fi; }

cp "$ref" "$work/cand.so"
printf 'qgate-kernel-campaign test candidate' >>"$work/cand.so"
cp "$ref" "$work/base.so"
cat >"$work/fake-test-backend-ops" <<'FAKE'
#!/usr/bin/env bash
# Answers `perf -o MUL_MAT ... -p REGEX --output sql` with one row for q4_0 or f16 at m=256, n=16, k=512.
t=""
for a in "$@"; do case "$a" in *type_a=q4_0,*) t=q4_0 us=123.4 ;; *type_a=f16,*) t=f16 us=45.6 ;; esac; done
[ -z "$t" ] && exit 0
echo "INSERT INTO test_backend_ops (test_time, build_commit, backend_name, op_name, op_params, test_mode, supported, passed, error_message, time_us, flops, bandwidth_gb_s, memory_kb, n_runs, device_description, backend_reg_name) VALUES ('2026-12-01T00:00:00Z', 'unknown', 'CUDA0', 'MUL_MAT', 'type_a=$t,type_b=f32,m=256,n=16,k=512,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0', 'perf', '1', '1', '', '$us', '1.0', '0.0', '1', '100', '', '');"
FAKE
chmod +x "$work/fake-test-backend-ops"
cat >"$work/fake-ggml-mul-mat" <<'FAKE'
#!/usr/bin/env bash
# Writes qgate-ggml-mul-mat's JSON for q4_0 and q6_K (not f16) at m=256, n=16, k=512 to --json-out,
# and its arguments to args.txt beside this script.
echo "$@" >"$(dirname "$0")/ggml-mul-mat-args.txt"
while [ $# -gt 0 ]; do [ "$1" = --json-out ] && json=$2; shift; done
printf '{"rows": [{"type": "q4_0", "m": 256, "n": 16, "k": 512, "us": 111.1, "runs": 9},
 {"type": "q6_K", "m": 256, "n": 16, "k": 512, "us": 77.7, "runs": 9}]}\n' >"$json"
FAKE
chmod +x "$work/fake-ggml-mul-mat"

# Bad arguments: exit 2, a message, and no output folder.
set +e
bash "$campaign" "$work/bad1" cand 2>"$work/bad1.err"; rc1=$?
bash "$campaign" "$work/bad2" cand="$work/no-such.so" 2>"$work/bad2.err"; rc2=$?
bash "$campaign" "$work/bad3" cand="$work/cand.so" cand="$work/base.so" 2>"$work/bad3.err"; rc3=$?
bash "$campaign" "$work/bad4" cand="$work/cand.so" --fast 2>"$work/bad4.err"; rc4=$?
QGATE_CAMPAIGN_BACK_TO_BACK=0 bash "$campaign" "$work/bad5" cand="$work/cand.so" 2>"$work/bad5.err"; rc5=$?
QGATE_GGML_MULMAT_SECONDS=0 bash "$campaign" "$work/bad6" cand="$work/cand.so" 2>"$work/bad6.err"; rc6=$?
QGATE_CAMPAIGN_TIMING=wall bash "$campaign" "$work/bad7" cand="$work/cand.so" 2>"$work/bad7.err"; rc7=$?
set -e
check '[ $rc1 -eq 2 ] && grep -q "is not NAME=BUILD.so" "$work/bad1.err"' "a build without a name is refused"
check '[ $rc2 -eq 2 ] && grep -q "no build at" "$work/bad2.err"' "a missing build is refused"
check '[ $rc3 -eq 2 ] && grep -q "two names" "$work/bad3.err"' "two builds of one name are refused"
check '[ $rc4 -eq 2 ] && grep -q "unknown argument" "$work/bad4.err"' "an unknown option is refused"
check '[ $rc5 -eq 2 ] && grep -q "not a positive count" "$work/bad5.err"' "a back-to-back count of 0 is refused"
check '[ $rc6 -eq 2 ] && grep -q "not a positive number of seconds" "$work/bad6.err"' "0 seconds per ggml case is refused"
check '[ $rc7 -eq 2 ] && grep -q "neither gemm nor pass" "$work/bad7.err"' "a timing other than gemm or pass is refused"
check '[ ! -e "$work/bad1" ] && [ ! -e "$work/bad2" ] && [ ! -e "$work/bad3" ] && [ ! -e "$work/bad4" ] && [ ! -e "$work/bad5" ] && [ ! -e "$work/bad6" ] && [ ! -e "$work/bad7" ]' \
  "a refusal writes nothing"

set +e
QGATE_CAMPAIGN_BACKEND=cpu QGATE_BIN_DIR="$bin" QGATE_CAMPAIGN_TYPES=q4_0,q6_K QGATE_CAMPAIGN_NT=16 \
  QGATE_CAMPAIGN_ODK=256x512 QGATE_CAMPAIGN_GATE_TOKENS=16 QGATE_CAMPAIGN_PARITY=none \
  QGATE_GGML_BENCH="$work/fake-test-backend-ops" QGATE_GGML_MULMAT="$work/fake-ggml-mul-mat" QGATE_CAMPAIGN_BACK_TO_BACK=3 \
  QGATE_GGML_MULMAT_SECONDS=0.25 QGATE_CAMPAIGN_TIMING=pass \
  bash "$campaign" "$work/run" cand="$work/cand.so" base="$work/base.so" --quick >"$work/campaign.out" 2>&1
rc=$?
set -e
run=$work/run
check '[ $rc -eq 0 ]' "the campaign exits 0 (exit $rc; log: $run/campaign.log)"
check 'grep -qE "^\| q4_0 \| 16 \| [0-9.]+ \| [0-9.]+ \| 111\.1 \| [0-9.]+x \| [0-9.]+ \| - \| 45\.6 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+x \| - \|$" "$run/table.md"' \
  "table.md: q4_0 at 16 tokens with both builds, qgate-ggml-mul-mat's figure first, test-backend-ops' f16, both builds back to back"
check 'grep -qE "^\| q6_K \| 16 \| [0-9.]+ \| [0-9.]+ \| 77\.7 \| [0-9.]+x \|" "$run/table.md"' \
  "table.md: q6_K, which only qgate-ggml-mul-mat timed"
check 'python3 -c "
import json, sys
s = json.load(open(\"$run/summary.json\"))
labels = [j[\"label\"] for j in s[\"jobs\"]]
assert labels == [\"parity base\", \"gate 16\", \"ab 16\"], labels
assert all(j[\"state\"] == \"JOB_STATE_DONE\" for j in s[\"jobs\"]), s[\"jobs\"]
assert all(j[\"verdict\"] in (\"VERDICT_PASS\", \"VERDICT_FAIL\", \"VERDICT_INCONCLUSIVE\") for j in s[\"jobs\"]), s[\"jobs\"]
rows = {(r[\"type\"], r[\"nt\"]): r for r in s[\"rows\"]}
assert set(rows) == {(\"q4_0\", 16), (\"q6_K\", 16)}, rows
assert rows[(\"q4_0\", 16)][\"ggml_us\"] == 111.1 and rows[(\"q6_K\", 16)][\"ggml_us\"] == 77.7, rows
assert rows[(\"q4_0\", 16)][\"ggml_test_backend_ops_us\"] == 123.4, rows
assert rows[(\"q6_K\", 16)][\"ggml_test_backend_ops_us\"] is None, rows
assert rows[(\"q4_0\", 16)][\"ggml_source\"] == \"qgate-ggml-mul-mat\", rows
assert all(r[\"mmq_us\"] > 0 and r[\"baseline_mmq_us\"] > 0 and r[\"f16_us\"] > 0 for r in rows.values()), rows
assert s[\"calls_per_sample_back_to_back\"] == 3, s[\"calls_per_sample_back_to_back\"]
assert all(r[\"mmq_back_to_back_us\"] > 0 and r[\"baseline_mmq_back_to_back_us\"] > 0 for r in rows.values()), rows
b2b = json.load(open(\"$run/bench-cand-b2b.json\"))[\"timings\"]
assert b2b and all(t[\"calls_per_sample\"] == 3 for t in b2b), b2b
"' "summary.json: the three jobs done with verdicts, the rows with both builds (isolated and back to back) and ggml's figure"
check 'grep -q -- "--min-seconds 0.25 " "$work/ggml-mul-mat-args.txt"' "the campaign gives qgate-ggml-mul-mat its seconds per case"
check '[ -s "$run/export.json" ] && [ -s "$run/bench-cand.json" ] && [ -s "$run/bench-base.json" ]' "the export and both benchmarks are kept"
check 'python3 -c "
import json, glob
jobs = [json.load(open(f)) for f in glob.glob(\"$run/job-*.json\")]
runs = [j for j in jobs if \"TIMING_MODE_PASS\" in json.dumps(j)]
assert len(jobs) == 3 and len(runs) == 2, (len(jobs), len(runs))
"' "the gate and the A/B ran with pass timing (QGATE_CAMPAIGN_TIMING=pass)"
exit $failed
