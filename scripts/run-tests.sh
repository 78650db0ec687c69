#!/usr/bin/env bash
# Set up, build, and run every test with ctest. GPU tests (label gpu) report SKIPPED without a
# CUDA device. Extra arguments go to ctest (e.g. -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cd build
ctest --output-on-failure -j 2 "$@"
