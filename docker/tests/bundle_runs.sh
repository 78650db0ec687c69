#!/usr/bin/env bash
# The bundle the image copies runs: scripts/make-bundle.sh writes a fresh bundle (the same lists as
# the `bundle` target, from LISTS_FILE) into a temporary folder, where it also checks that every
# file resolves its libraries from the bundle alone; then the bundle's own qgate prints its version,
# the bundle's qgated starts on the CPU backend on a unix socket with a fresh data dir, and the
# bundle's `qgate health` gets SERVING from it, as the image's HEALTHCHECK asks.
# Usage: bundle_runs.sh SOURCE_DIR LISTS_FILE
set -euo pipefail
src=${1:?usage: bundle_runs.sh SOURCE_DIR LISTS_FILE}
lists=${2:?usage: bundle_runs.sh SOURCE_DIR LISTS_FILE}
# shellcheck source=/dev/null
source "$lists"  # exports QGATE_BUNDLE_BINARIES, _PLUGINS, _FAULTS, _TESTS
work=$(mktemp -d)
daemon=""
cleanup() {
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

bash "$src/scripts/make-bundle.sh" "$work/qgate" "$src"
bundle=$work/qgate
for f in qgated qgate qgate-worker; do
  [ -x "$bundle/bin/$f" ] || { echo "FAIL: the bundle has no bin/$f"; exit 1; }
done
[ -f "$bundle/plugins/libqgate_ref.so" ] || { echo "FAIL: the bundle has no plugins/libqgate_ref.so"; exit 1; }

version=$("$bundle/bin/qgate" --version)
[[ $version == qgate\ * ]] || { echo "FAIL: qgate --version printed '$version'"; exit 1; }
echo "ok   $version"

# As in the image: the data dir from QGATE_DATA_DIR, the CLI finding the socket from QGATE_SERVER.
export QGATE_DATA_DIR=$work/data QGATE_SERVER=unix://$work/data/qgated.sock
mkdir -p "$QGATE_DATA_DIR"
"$bundle/bin/qgated" --backend cpu --listen "$QGATE_SERVER" 2>"$work/qgated.log" &
daemon=$!
for _ in $(seq 1 300); do
  grep -q "qgated: ready" "$work/qgated.log" && break
  kill -0 "$daemon" 2>/dev/null || { echo "FAIL: the bundle's qgated exited:"; cat "$work/qgated.log"; exit 1; }
  sleep 0.1
done
grep -q "qgated: ready" "$work/qgated.log" || { echo "FAIL: qgated not ready in 30 s"; cat "$work/qgated.log"; exit 1; }
health=$("$bundle/bin/qgate" --timeout 5 health)
[[ $health == *SERVING* ]] || { echo "FAIL: qgate health printed '$health'"; exit 1; }
echo "ok   $health"
# Its worker, from the bundle too, loads the bundle's kernel build.
"$bundle/bin/qgate-worker" info --build "$bundle/plugins/libqgate_ref.so" >"$work/info.txt" 2>&1 \
  || { echo "FAIL: the bundle's qgate-worker info:"; cat "$work/info.txt"; exit 1; }
echo "ok   the bundle's qgate-worker loads plugins/libqgate_ref.so"
kill "$daemon"; wait "$daemon" 2>/dev/null || true; daemon=""
echo "the bundle runs"
