#!/usr/bin/env bash
# ggml's CPU backend through libqgate_ggml.so: every type on both paths, at 1, 8 and 16 tokens and
# the five edge rows, must pass in the numerics the build declares on the CPU (ggml-cpu), and the
# plan must say the build declared them. Skipped (exit 77) when qgate was configured without
# QGATE_GGML_SRC, so no libqgate_ggml.so was built.
# Usage: ggml_adapter_cpu_test.sh QGATE_WORKER [LIBQGATE_GGML]
set -uo pipefail
worker=${1:?usage: ggml_adapter_cpu_test.sh QGATE_WORKER [LIBQGATE_GGML]}
library=${2:-}
if [ -z "$library" ]; then
  echo "skipped: configure with -DQGATE_GGML_SRC=<ggml tree> to build libqgate_ggml.so"
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$worker" parity --backend cpu --threads 2 --build "$library" --types all --shapes none \
  --shape 1x256x512 --shape 8x256x512 --shape 16x256x512 --edge-cases --path both --json >"$out/cases.jsonl" 2>"$out/worker.log"
rc=$?
[ "$rc" -eq 0 ] || tail -20 "$out/worker.log"
python3 - "$out/cases.jsonl" <<'PY' || exit 1
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
plan = next(r["plan"] for r in rows if "plan" in r)
cases = [r["parity"] for r in rows if "parity" in r]
failed = [c for c in cases if c["outcome"] != "CASE_OUTCOME_PASSED"]
print(f"{len(cases) - len(failed)} of {len(cases)} passed in {plan['numerics']} ({plan['numerics_source']})")
for c in failed:
    print("FAILED", c["type"], c["path"], c["shape"], c.get("reference"), c.get("message", ""))
ok = (len(cases) == 8 * 8 * 2 and not failed and plan["numerics"] == "NUMERICS_PROFILE_GGML_CPU"
      and plan["numerics_source"] == "declared by the build"
      and all(c["reference"].startswith("ggml-cpu/") for c in cases))
sys.exit(0 if ok else 1)
PY
[ "$rc" -eq 0 ]
