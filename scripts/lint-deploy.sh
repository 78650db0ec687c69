#!/usr/bin/env bash
# Lints the deployment files without building an image: the Dockerfile with dockerfile-utils (npm),
# the YAML with yamllint (Debian, warnings are errors), the Kubernetes manifests and compose file
# against their schemas (docker/lint/check-manifests.mjs: the API's schemas from kubernetes-models,
# the Compose Specification's with Ajv), and what qgate's deployment needs of all three (a GPU, a
# non-root user, health checks by `qgate health`, CUDA devel to runtime images of one version, and
# for a fleet on PostgreSQL: qgated's database is a service of its file that it waits for, the
# password comes from a secret, and the pods and the database read the same Secret key).
# Every check runs; the exit code is 1 when any failed.
# The npm packages are installed by scripts/install-deps.sh (npm ci in docker/lint).
# Usage: scripts/lint-deploy.sh [DIR]   (DIR holds Dockerfile, compose*.yaml and k8s/; default docker/)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/docker}
lint=$root/docker/lint
if [ ! -x "$lint/node_modules/.bin/dockerfile-utils" ]; then
  echo "lint-deploy: docker/lint/node_modules is missing: run scripts/install-deps.sh" >&2
  exit 2
fi
command -v yamllint >/dev/null || { echo "lint-deploy: yamllint is missing: run scripts/install-deps.sh" >&2; exit 2; }
shopt -s nullglob
manifests=("$dir"/k8s/*.yaml)
[ ${#manifests[@]} -gt 0 ] || { echo "lint-deploy: no manifests in $dir/k8s" >&2; exit 1; }
composes=("$dir"/compose*.yaml)
[ ${#composes[@]} -gt 0 ] || { echo "lint-deploy: no compose files in $dir" >&2; exit 1; }

status=0
check() {  # name, command...
  local name=$1; shift
  if "$@"; then echo "lint-deploy: $name: ok"; else echo "lint-deploy: $name: FAILED" >&2; status=1; fi
}
# dockerfile-utils prints its findings and exits non-zero on an error; warnings count too.
dockerfile() {
  local out
  out=$("$lint/node_modules/.bin/dockerfile-utils" lint "$dir/Dockerfile" 2>&1)
  local rc=$?
  [ -n "$out" ] && echo "$out" >&2
  [ $rc -eq 0 ] && [ -z "$out" ]
}
check "Dockerfile (dockerfile-utils)" dockerfile
check "YAML (yamllint)" yamllint --strict -c "$lint/yamllint.yaml" "${composes[@]}" "${manifests[@]}"
schema_args=(--dockerfile "$dir/Dockerfile")
for c in "${composes[@]}"; do schema_args+=(--compose "$c"); done
for m in "${manifests[@]}"; do schema_args+=(--k8s "$m"); done
check "schemas (Kubernetes API, Compose Specification) and deployment rules" \
  node "$lint/check-manifests.mjs" "${schema_args[@]}"
exit $status
