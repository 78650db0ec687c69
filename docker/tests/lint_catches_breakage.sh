#!/usr/bin/env bash
# Proves scripts/lint-deploy.sh fails on broken deployment files: a copy of docker/'s Dockerfile,
# compose files and k8s/ passes, then each deliberate breakage (one at a time, on a fresh copy: bad
# syntax, schema violations, and valid files that deploy qgate wrongly) must make it exit 1 and name
# the problem.
# Usage: lint_catches_breakage.sh SOURCE_DIR
set -uo pipefail
src=${1:?usage: lint_catches_breakage.sh SOURCE_DIR}
lint="$src/scripts/lint-deploy.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

fresh_copy() {
  rm -rf "$work/docker"
  mkdir -p "$work/docker"
  cp -r "$src/docker/Dockerfile" "$src/docker/"compose*.yaml "$src/docker/k8s" "$work/docker/"
}

# name, file (relative to the copy), sed expression, text the lint output must hold
expect_failure() {
  local name=$1 file=$2 edit=$3 expected=$4
  fresh_copy
  sed -i -e "$edit" "$work/docker/$file"
  if cmp -s "$src/docker/$file" "$work/docker/$file"; then
    echo "FAIL $name: the edit changed nothing in $file"; failures=$((failures + 1)); return
  fi
  local out rc
  out=$(bash "$lint" "$work/docker" 2>&1); rc=$?
  if [ $rc -ne 1 ]; then
    echo "FAIL $name: lint exited $rc, not 1"; echo "$out"; failures=$((failures + 1))
  elif ! grep -qF -- "$expected" <<<"$out"; then
    echo "FAIL $name: lint output lacks '$expected'"; echo "$out"; failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

fresh_copy
if out=$(bash "$lint" "$work/docker" 2>&1); then echo "ok   the unbroken copy passes"
else echo "FAIL the unbroken copy fails:"; echo "$out"; failures=$((failures + 1)); fi

expect_failure "unknown Dockerfile instruction" Dockerfile 's/^RUN groupadd/RUNN groupadd/' "Unknown instruction: RUNN"
expect_failure "HEALTHCHECK without a command" Dockerfile '/^HEALTHCHECK/,/CMD \[/c HEALTHCHECK CMD' "Missing command after HEALTHCHECK CMD"
expect_failure "a port that is not a number" k8s/qgated-daemonset.yaml 's/containerPort: 8080/containerPort: eighty/' \
  "containerPort must be integer"
expect_failure "an image that is not pinned" k8s/qgated-daemonset.yaml '0,/image: qgated:[0-9.]*$/s//image: qgated:latest/' \
  "is not pinned to a version"
expect_failure "a compose image that is not pinned" compose.yaml 's/image: qgated:[0-9.]*$/image: qgated/' \
  "is not pinned to a version"
expect_failure "a DaemonSet without a selector" k8s/qgated-daemonset.yaml 's/^  selector:/  selectr:/' \
  "must have required property selector"
expect_failure "a DaemonSet without containers" k8s/qgated-daemonset.yaml 's/^      containers:/      contianers:/' \
  "must have required property containers"
expect_failure "a misspelt compose key" compose.yaml 's/^    deploy:/    deplyo:/' '"additionalProperty":"deplyo"'
expect_failure "a GPU reservation of the wrong type" compose.yaml 's/device_ids: \["0"\]/device_ids: 0/' \
  "/services/qgated/deploy/resources/reservations/devices/0/device_ids must be array"
expect_failure "a duplicated YAML key" compose.yaml 's/^    restart: unless-stopped/    restart: unless-stopped\n    restart: always/' \
  'duplication of key "restart"'
expect_failure "broken YAML indentation" k8s/qgated-daemonset.yaml 's/^      nodeSelector:/     nodeSelector:/' "YAML (yamllint): FAILED"
# Valid files that deploy qgate wrongly.
expect_failure "an image that runs as root" Dockerfile 's/^USER qgate:qgate/USER root/' "the final stage runs as root"
expect_failure "a runtime image of another Ubuntu" Dockerfile 's/-runtime-\${UBUNTU}/-runtime-ubuntu22.04/' \
  "does not match the build image"
expect_failure "a compose service without a GPU" compose.yaml 's/capabilities: \[gpu\]/capabilities: [utility]/' \
  "service qgated reserves no GPU"
expect_failure "a compose health check that is not qgate health" compose.yaml '/healthcheck:/,/test:/s/"health"\]/"device"]/' \
  "service qgated's healthcheck does not run qgate health"
expect_failure "a DaemonSet that asks for no GPU" k8s/qgated-daemonset.yaml 's/nvidia.com\/gpu: 1/cpu: "4"/' \
  'asks for no GPU (resources.limits["nvidia.com/gpu"])'
expect_failure "a liveness probe that is not qgate health" k8s/qgated-daemonset.yaml \
  '/livenessProbe:/,/command:/s/"5", "health"\]/"5", "device"]/' "livenessProbe does not run qgate health"
# A fleet on PostgreSQL (docs/fleet.md): valid files whose qgated would not reach its database.
expect_failure "a compose --store naming no service" compose.fleet.yaml 's|postgresql://qgate@postgres/qgate|postgresql://qgate@db/qgate|' \
  "service qgated's --store names the host db, which is no service of this file"
expect_failure "qgated not waiting for a healthy database" compose.fleet.yaml 's/condition: service_healthy/condition: service_started/' \
  "service qgated does not wait for postgres to be healthy"
expect_failure "a password file from a secret qgated does not mount" compose.fleet.yaml '/^  qgated:/,/^volumes:/{/^      - qgate-db-pgpass$/d}' \
  "service qgated's PGPASSFILE names the secret qgate-db-pgpass, which the service does not mount"
expect_failure "a database password written in the compose file" compose.fleet.yaml \
  's|POSTGRES_PASSWORD_FILE: /run/secrets/qgate-db-password|POSTGRES_PASSWORD: hunter2|' "service postgres's POSTGRES_PASSWORD is written in the file"
expect_failure "a database image that is not pinned" compose.fleet.yaml 's/image: postgres:15-bookworm/image: postgres:latest/' \
  "service postgres's image postgres:latest is not a postgres image pinned to a version"
expect_failure "extending a service that does not exist" compose.fleet.yaml 's/^      service: qgated$/      service: qgate/' \
  "service qgated extends qgate of compose.yaml, which does not exist"
expect_failure "an argument naming an undefined variable" k8s/qgated-daemonset.yaml 's/- \$(QGATE_STORE)$/- $(QGATE_ADDRESS)/' \
  "container qgated names \$(QGATE_ADDRESS), which its env does not define"
expect_failure "pods reading another Secret key than the database's" k8s/qgated-daemonset.yaml '0,/key: password$/s//key: pg-password/' \
  "container qgated reads its database password from Secret qgate-db key pg-password, but"
expect_failure "a StatefulSet whose Service does not exist" k8s/postgres-statefulset.yaml 's/^  serviceName: qgate-postgres$/  serviceName: postgres/' \
  "serviceName postgres names no Service in namespace qgate"
expect_failure "a database without its volume claim" k8s/postgres-statefulset.yaml '/volumeClaimTemplates:/,$s/name: data$/name: pgdata/' \
  "keeps its data on no volumeClaimTemplate"

if [ $failures -gt 0 ]; then echo "$failures check(s) failed"; exit 1; fi
echo "every breakage was caught"
