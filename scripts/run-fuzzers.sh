#!/usr/bin/env bash
# Builds the libFuzzer targets (server/fuzz/) with clang, ASan and UBSan in their own build dir and
# runs each for a fixed time on a scratch copy of its corpus (checked-in seeds plus freshly generated
# ones), so the checked-in corpus only changes when someone copies findings in on purpose.
# Exits non-zero when a fuzzer crashes, leaks, times out or trips a sanitizer; the reproducer is
# left in the artifacts dir it prints.
#
# Usage: scripts/run-fuzzers.sh [seconds per fuzzer, default 60]
# Env:   QGATE_FUZZ_BUILD_DIR (default build-fuzz), QGATE_FUZZ_JOBS (build parallelism, default nproc),
#        QGATE_FUZZ_OUT (corpus copies and artifacts; default $QGATE_FUZZ_BUILD_DIR/fuzz-run)
# Needs: clang and libFuzzer (Debian 12: clang-14 libclang-rt-14-dev; the clang package gives clang++).
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${QGATE_FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="${QGATE_FUZZ_JOBS:-$(nproc)}"
out="${QGATE_FUZZ_OUT:-$build/fuzz-run}"

if ! command -v clang++ >/dev/null || ! command -v clang >/dev/null; then
  echo "run-fuzzers: clang/clang++ not found; on Debian 12: apt-get install clang libclang-rt-14-dev" >&2
  exit 2
fi
# libFuzzer ships in the compiler-rt package, not with clang itself: check before a long configure.
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe/p.cpp"
if ! clang++ -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" 2>"$probe/err"; then
  cat "$probe/err" >&2
  echo "run-fuzzers: clang++ cannot link libFuzzer; on Debian 12: apt-get install libclang-rt-14-dev" >&2
  exit 2
fi

# Every library the fuzzers link is instrumented (fuzzer-no-link: coverage without the driver);
# UBSan findings abort instead of printing and carrying on, so they count as crashes.
sanitize="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQGATE_WITH_CUDA=OFF -DQGATE_BUILD_TESTS=OFF -DQGATE_BUILD_FUZZERS=ON \
  -DCMAKE_C_FLAGS="$sanitize" -DCMAKE_CXX_FLAGS="$sanitize" >/dev/null
cmake --build "$build" --target qgate_fuzzers -j "$jobs"

rm -rf "$out"
mkdir -p "$out/generated" "$out/artifacts"
"$build/fuzz/qgate_fuzz_seeds" "$out/generated"

status=0
for name in gguf_header:gguf worker_stream:worker_stream; do
  target="${name%%:*}"
  corpus="${name##*:}"
  work="$out/corpus/$corpus"
  mkdir -p "$work"
  cp "$root/server/fuzz/corpus/$corpus/"* "$work/" 2>/dev/null || true
  cp "$out/generated/$corpus/"* "$work/"
  echo "== fuzz_$target: ${seconds}s on $(ls "$work" | wc -l) seeds"
  log="$out/fuzz_$target.log"
  # -rss_limit_mb: the parsers promise bounded allocations; 2 GB would hide a 1 GB blow-up.
  if "$build/fuzz/qgate_fuzz_$target" "$work" -max_total_time="$seconds" -rss_limit_mb=1024 \
       -timeout=10 -print_final_stats=1 -artifact_prefix="$out/artifacts/$target-" >"$log" 2>&1; then
    grep -E "^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb|new_units_added)" "$log" || true
    grep -E "^#[0-9]+.*DONE" "$log" | tail -n 1 || true
  else
    status=1
    echo "run-fuzzers: fuzz_$target FAILED; log $log, reproducer(s):" >&2
    ls "$out/artifacts/$target-"* >&2 2>/dev/null || true
    grep -E "ERROR|SUMMARY|runtime error|==ABORTING" "$log" | head -n 20 >&2 || true
  fi
done
exit "$status"
