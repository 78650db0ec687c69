#!/usr/bin/env bash
# The bundle carries the dashboard: scripts/make-bundle.sh (as the `bundle` target runs it) writes
# share/qgate/dashboard/ with the page and the vendored chart libraries, and the bundle's own qgated
# serves them with --http from that default place.
# Usage: dashboard_bundle_test.sh SOURCE_DIR BIN_DIR REF_LIBRARY DASHBOARD_DIR
set -euo pipefail
src=$1 bin=$2 ref=$3 dashboard=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/qgate-dashboard-bundle-XXXXXX")
daemon=""
trap '[ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null; rm -rf "$work"' EXIT

QGATE_BUNDLE_BINARIES="$bin/qgated;$bin/qgate;$bin/qgate-worker" QGATE_BUNDLE_PLUGINS="$ref" \
  QGATE_BUNDLE_DASHBOARD="$dashboard" bash "$src/scripts/make-bundle.sh" "$work/qgate" "$src" >"$work/bundle.log" 2>&1 ||
  { cat "$work/bundle.log"; echo "FAIL: make-bundle.sh"; exit 1; }
for f in index.html app.js charts.js style.css vendor/vega.min.js vendor/vega-lite.min.js vendor/vega-embed.min.js; do
  [ -s "$work/qgate/share/qgate/dashboard/$f" ] || { echo "FAIL: the bundle has no share/qgate/dashboard/$f"; exit 1; }
done
echo "ok   the bundle carries share/qgate/dashboard"

mkdir -p "$work/data"
"$work/qgate/bin/qgated" --backend cpu --data-dir "$work/data" --http 127.0.0.1:0 >"$work/qgated.log" 2>&1 &
daemon=$!
for _ in $(seq 1 100); do grep -q "qgated: ready" "$work/qgated.log" && break; sleep 0.1; done
port=$(sed -n 's|.*dashboard on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$work/qgated.log")
[ -n "$port" ] || { cat "$work/qgated.log"; echo "FAIL: the bundle's qgated did not serve the dashboard"; exit 1; }
get() {  # get PATH: the whole answer, over bash's /dev/tcp
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' "$1" >&3
  cat <&3
  exec 3<&-
}
for path in / /vendor/vega-lite.min.js /api/jobs; do
  answer=$(get "$path")
  [[ $answer == "HTTP/1.1 200 "* ]] || { echo "FAIL: GET $path: ${answer:0:200}"; exit 1; }
  echo "ok   the bundle's qgated serves $path"
done
