#!/usr/bin/env bash
# Installs the Debian 12 packages qgate builds with, and does nothing when all are present.
# CUDA is not installed here: it comes from /usr/local/cuda when present (the build works without).
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config git file patchelf
          libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
          libfmt-dev libsqlite3-dev libsqlitecpp-dev libspdlog-dev libcli11-dev
          nlohmann-json3-dev libgtest-dev googletest
          clang libclang-rt-14-dev  # clang and libFuzzer: scripts/run-fuzzers.sh, run by run-tests.sh
          yamllint                  # scripts/lint-deploy.sh
          libssl-dev                # the dashboard's HTTPS (qgated --http with --tls-cert)
          libpq-dev                 # the PostgreSQL client library (the PostgreSQL store)
          postgresql                # the throwaway server the PostgreSQL tests start (tests/support)
          chromium fonts-dejavu-core)  # the dashboard's browser test (headless, driven by puppeteer-core)
# Node.js and npm for scripts/lint-deploy.sh's npm packages, the dashboard's chart libraries (npm ci
# at build time) and its browser test; a node already installed (from any source) is kept rather
# than replaced by Debian's.
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
# python3 for the bundle scripts' summaries (qgate-kernel-campaign's table, qgate-two-gpu-check's) and
# their tests; one already on the PATH is kept.
command -v python3 >/dev/null || packages+=(python3)

# The deployment lint's npm packages, exactly as docker/lint/package-lock.json pins them.
npm_packages() {
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/docker/lint"
  if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules" ]; then
    echo "install-deps: npm ci in docker/lint"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error && touch node_modules)
  fi
}
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  npm_packages
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo=sudo
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
npm_packages
