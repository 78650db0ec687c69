#!/usr/bin/env bash
# The main job: set up, build, then gate the reference kernel build on the best backend here
# (CUDA when a GPU is visible, else the CPU): the full parity sweep on both paths, then the
# kernel benchmark. Results go to out/main-job/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
worker=build/bin/qgate-worker
out=out/main-job
mkdir -p "$out"
backend=cpu
if "$worker" info | grep -q "^devices   [1-9]"; then backend=cuda; fi
echo "== main job: gating the reference build on the $backend backend"
"$worker" info
echo "== parity sweep: 8 types x 8 shapes, MMQ and f16 paths (records: $out/parity.jsonl)"
parity_rc=0
"$worker" parity --backend "$backend" --types all --shapes standard --path both --json >"$out/parity.jsonl" || parity_rc=$?
echo "== kernel benchmark (JSON: $out/bench.json)"
if [ "$backend" = cuda ]; then
  "$worker" bench --backend cuda --json-out "$out/bench.json"
else
  # A 7B-sized GEMM takes seconds on a small CPU: the CPU run times a smaller shape.
  "$worker" bench --backend cpu --types all --nt 64 --odk 1024x4096 --warmup 1 --reps 3 --json-out "$out/bench.json"
fi
if [ "$parity_rc" -ne 0 ]; then echo "== main job: parity FAILED"; exit "$parity_rc"; fi
echo "== main job: parity PASSED on $backend"
