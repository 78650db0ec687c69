#!/usr/bin/env bash
# The load test: qgate-load-test starts a real qgated (CPU backend) with an A/B job running and
# drives it with 100 concurrent clients for 60 s (QueryTrend, ListJobs, GetJob, SubmitBuild).
# Prints a table; JSON goes to out/load-test/load-test.json.
# Usage: scripts/load-test.sh [CLIENTS [SECONDS]]   (QGATE_SKIP_BUILD=1: use the existing build/)
set -euo pipefail
cd "$(dirname "$0")/.."
clients=${1:-100}
seconds=${2:-60}
[ -n "${QGATE_SKIP_BUILD:-}" ] || { scripts/install-deps.sh >/dev/null; cmake --preset release >/dev/null;
                                    cmake --build --preset release --target qgate-load-test -j "$(nproc)"; }
mkdir -p out/load-test
exec build/bin/qgate-load-test --clients "$clients" --seconds "$seconds" --json-out out/load-test/load-test.json
