#!/usr/bin/env bash
# The source revision the binaries report (cmake/QgateRevision.cmake) is the checkout's HEAD as of
# the last build, not as of when the build folder was configured: qgated, qgate and qgate-worker
# --version each name it ("unknown" outside a git checkout).
#   revision_stamp_test.sh SOURCE_DIR QGATED QGATE QGATE_WORKER
set -uo pipefail
source_dir=$1
shift
expected=$(git -C "$source_dir" rev-parse --short=12 HEAD 2>/dev/null) || expected=unknown
[ -n "$expected" ] || expected=unknown
failures=0
for binary in "$@"; do
  version=$("$binary" --version 2>&1)
  if [[ "$version" != *"$expected"* ]]; then
    echo "FAIL: $(basename "$binary") --version says '$version', not the revision $expected (rebuild after a commit)"
    failures=$((failures + 1))
  else
    echo "ok: $(basename "$binary"): $version"
  fi
done
exit $((failures > 0))
