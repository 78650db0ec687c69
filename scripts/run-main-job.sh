#!/usr/bin/env bash
# The main job: set up, build, start qgated (on the GPU when one is visible, else on the CPU
# backend) and gate qgate's reference kernel build with the qgate CLI: the parity sweep, then the
# reference build against itself as baseline (an A/A gate, qgate's self-test), then the MMQ/f16 A/B,
# then the kernel benchmark. State and JSON land in out/main-job/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
bin=build/bin
out=$PWD/out/main-job
mkdir -p "$out"
backend=cpu
if "$bin/qgate-worker" info | grep -q "^devices   [1-9]"; then backend=cuda; fi
data=$(mktemp -d)
"$bin/qgated" --backend "$backend" --data-dir "$data" 2>"$out/qgated.log" &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$data"' EXIT
until grep -q "qgated: ready" "$out/qgated.log"; do
  kill -0 $daemon 2>/dev/null || { cat "$out/qgated.log"; exit 3; }
  sleep 0.05
done
export QGATE_SERVER="unix://$data/qgated.sock"
build=build/lib/libqgate_ref.so
if [ "$backend" = cuda ]; then profile=llama-7b-q4_K_M; policy=(); else
  # A small CPU swings millisecond runs by several percent; its gate allows 10%.
  profile=cpu-tiny; policy=(--threshold 0.10); fi

echo "== main job on the $backend backend: parity sweep of the reference build"
"$bin/qgate" submit --build "$build" --name qgate-ref --kind parity --wait
echo "== gate: the reference build against itself ($profile)"
gate_rc=0
"$bin/qgate" submit --build "$build" --name qgate-ref --baseline qgate-ref --profile "$profile" "${policy[@]}" --wait || gate_rc=$?
echo "== A/B: MMQ (MINFER_MMQ=1) against f16 (MINFER_MMQ=0), per weight type"
"$bin/qgate" ab --build "$build" --name qgate-ref --profile "$profile" || true
"$bin/qgate" --json jobs > "$out/jobs.json"
echo "== kernel benchmark (JSON: $out/bench.json)"
if [ "$backend" = cuda ]; then
  "$bin/qgate-worker" bench --backend cuda --json-out "$out/bench.json"
else
  "$bin/qgate-worker" bench --backend cpu --types all --nt 64 --odk 1024x4096 --warmup 1 --reps 3 --json-out "$out/bench.json"
fi
echo "== main job: gate exit code $gate_rc (0 PASS, 1 FAIL, 2 INCONCLUSIVE, 3 error)"
exit $gate_rc
