#!/usr/bin/env bash
# Set up, build, and run every test with ctest. GPU tests (label gpu) report SKIPPED without a
# CUDA device. Extra arguments go to ctest (e.g. -L unit).
# Then the libFuzzer targets (scripts/run-fuzzers.sh) run for QGATE_FUZZ_SECONDS each (default 30,
# 0 skips them) under ASan/UBSan; a crash, leak or sanitizer report fails the run like a test.
# The dashboard's browser test runs headless Chromium (installed by install-deps.sh) and saves its
# screenshots to build/test-artifacts/dashboard/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
# The dashboard's browser test fails, rather than skips, without Chromium here: install-deps.sh put it in.
export QGATE_REQUIRE_BROWSER="${QGATE_REQUIRE_BROWSER:-1}"
(cd build && ctest --output-on-failure -j 2 "$@")
fuzz_seconds="${QGATE_FUZZ_SECONDS:-30}"
if [ "$fuzz_seconds" -gt 0 ]; then
  scripts/run-fuzzers.sh "$fuzz_seconds"
fi
