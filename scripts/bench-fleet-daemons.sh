#!/usr/bin/env bash
# The fleet's shared job queue drained by real qgated daemons (bench/RESULTS.md, fleet section), where
# scripts/bench-fleet.sh `claims` drives the store API from claimer processes. For each N in $DAEMONS
# (default "1 3 10"), on a fresh database of one PostgreSQL server (scripts/fleet-db.sh, stock
# settings, TCP and a password):
#   1. a submitting qgated without the label `drain` queues $JOBS jobs that ask for it ($JOB_ARGS,
#      default a one-pair cpu-tiny A/B of the reference build, no parity), so none starts yet, and stops;
#   2. N qgated --backend cpu daemons, one fake device each, carrying `drain`, each with its own data
#      dir, socket and --http port ($HTTP_BASE + i), start together and drain the queue;
#   3. unless $LIVE_JOBS is 0, $LIVE_JOBS more are submitted one after another through the daemons in
#      turn while they run (submit while draining), and drained;
#   4. their /metrics are scraped and the jobs table read; scripts/fleet-daemons-report.py writes
#      OUT/daemons-N.json and prints a table: jobs/s (first claim to last finish), queue wait, the
#      claim statement's latency (qgate_claim_statement_duration_seconds, merged over the daemons),
#      each daemon's share, and whether every job ended done once with one verdict.
#   scripts/bench-fleet-daemons.sh WORK OUT
# WORK holds the server (WORK/pg, port $PG_PORT, default 55442) and the daemons' dirs. Everything the
# script started is stopped when it ends, however it ends (the server too, unless it was running
# already). As root the server runs as $QGATE_DB_USER (default postgres) and the daemons as root, as
# the e2e tests run them. Binaries from $QGATE_BUILD_DIR (default build).
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: bench-fleet-daemons.sh WORK OUT" >&2; exit 2; }
cd "$(dirname "$0")/.."
root=$(pwd)
build=${QGATE_BUILD_DIR:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
bin=$build/bin
library=${QGATE_REF_LIBRARY:-$build/lib/libqgate_ref.so}
port=${PG_PORT:-55442}
http_base=${HTTP_BASE:-18700}
counts=${DAEMONS:-1 3 10}
jobs=${JOBS:-150}
live_jobs=${LIVE_JOBS:-40}
read -r -a job_args <<<"${JOB_ARGS:---kind ab --profile cpu-tiny --min-pairs 1 --max-pairs 1 --parity-shapes none}"
drain_timeout=${DRAIN_TIMEOUT_S:-1800}
export QGATE_DB_USER=${QGATE_DB_USER:-postgres}
mkdir -p "$1" "$2"
work=$(cd "$1" && pwd) out=$(cd "$2" && pwd)
[ -f "$library" ] || { echo "no reference build at $library (ninja -C BUILD qgate_ref)" >&2; exit 1; }
say() { echo "== $(date -u +%H:%M:%S) $*"; }

# What this script started, stopped on any exit.
pids=()
server_started=0
stop_daemons() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}
cleanup() {
  stop_daemons
  if [ "$server_started" = 1 ]; then scripts/fleet-db.sh stop "$work/pg" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! scripts/fleet-db.sh status "$work/pg" >/dev/null 2>&1; then server_started=1; fi
source scripts/bench-pg-server.sh
bench_pg_start "$work" "$port"
sql() { psql -X -q -At -F $'\t' -h 127.0.0.1 -p "$port" -U qgate -d "$db" -c "$1"; }

# Starts a qgated on the store with the CPU backend and one fake device; prints nothing, adds its pid.
start_daemon() {  # DIR [flags...]
  local dir=$1
  shift
  rm -rf "$dir"
  mkdir -p "$dir"
  "$bin/qgated" --backend cpu --gpus 0 --cpu-device-names cpu --threads 1 --data-dir "$dir" \
    --listen "unix://$dir/qgated.sock" --store "postgresql://qgate@127.0.0.1:$port/$db" "$@" 2>"$dir/qgated.log" &
  pids+=($!)
}
wait_ready() {  # DIR PID
  local waited=0
  until grep -q "qgated: ready" "$1/qgated.log" 2>/dev/null; do
    kill -0 "$2" 2>/dev/null || { echo "qgated in $1 exited:" >&2; tail -n 20 "$1/qgated.log" >&2; exit 1; }
    sleep 0.05
    waited=$((waited + 1))
    [ "$waited" -lt 1200 ] || { echo "qgated in $1 not ready in 60 s" >&2; exit 1; }
  done
}
submit() {  # SOCKET-DIR: one job that asks for `drain`; prints nothing
  "$bin/qgate" --server "unix://$1/qgated.sock" --json submit --build "$library" --name ref \
    "${job_args[@]}" --label drain >/dev/null
}
wait_drained() {
  local t0=$SECONDS open
  while :; do
    open=$(sql "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')")
    [ "$open" = 0 ] && return 0
    [ $((SECONDS - t0)) -lt "$drain_timeout" ] || { echo "jobs still open after ${drain_timeout} s: $open" >&2; exit 1; }
    sleep 0.5
  done
}
scrape() {  # TAG: every daemon's /metrics into $run/metrics-TAG-i.txt
  local i
  for ((i = 0; i < n; ++i)); do
    curl -sf "http://127.0.0.1:$((http_base + i))/metrics" >"$run/metrics-$1-$i.txt" ||
      { echo "cannot scrape daemon $i" >&2; exit 1; }
  done
}

for n in $counts; do
  db=daemons$n
  run=$work/run-$n
  rm -rf "$run"
  mkdir -p "$run"
  as_server psql -X -q -h "$work/pg" -p "$port" -d postgres -c "DROP DATABASE IF EXISTS $db" \
    -c "CREATE DATABASE $db OWNER qgate" >&2

  # 1. The queue, filled by a daemon that cannot take its jobs.
  start_daemon "$run/submitter"
  wait_ready "$run/submitter" "${pids[-1]}"
  say "$n daemons: queueing $jobs jobs (${job_args[*]}) (load $(cut -d' ' -f1-3 /proc/loadavg))"
  t0=$(date +%s%N)
  for ((j = 0; j < jobs; ++j)); do submit "$run/submitter"; done
  submit_ms=$((($(date +%s%N) - t0) / 1000000))
  stop_daemons

  # 2. The fleet drains it.
  say "$n daemons: starting them (load $(cut -d' ' -f1-3 /proc/loadavg))"
  for ((i = 0; i < n; ++i)); do start_daemon "$run/d$i" --label drain --http "127.0.0.1:$((http_base + i))"; done
  for ((i = 0; i < n; ++i)); do wait_ready "$run/d$i" "${pids[$i]}"; done
  wait_drained
  scrape drain
  say "$n daemons: drained $jobs jobs (load $(cut -d' ' -f1-3 /proc/loadavg))"
  first_live=$(sql "SELECT COALESCE(max(id), 0) + 1 FROM jobs")

  # 3. Submit while draining: one after another, through the daemons in turn.
  : >"$run/live-submits.tsv"
  for ((j = 0; j < live_jobs; ++j)); do
    t0=$(date +%s%N)
    submit "$run/d$((j % n))"
    echo "$(((t0 / 1000000))) $((($(date +%s%N) - t0) / 1000000))" >>"$run/live-submits.tsv"
  done
  if [ "$live_jobs" -gt 0 ]; then
    wait_drained
    scrape live
    say "$n daemons: drained $live_jobs jobs submitted while they ran"
  fi

  # 4. What the store recorded, then the daemons stop.
  sql "SELECT j.id, j.state, j.attempts, j.claimed_by, j.created_ms, j.started_ms, j.finished_ms,
         (SELECT count(*) FROM verdicts v WHERE v.job_id = j.id) FROM jobs j ORDER BY j.id" >"$run/jobs.tsv"
  stop_daemons
  python3 scripts/fleet-daemons-report.py --daemons "$n" --run "$run" --first-live "$first_live" \
    --submit-ms "$submit_ms" --job-args "${job_args[*]}" --json-out "$out/daemons-$n.json" | tee "$out/daemons-$n.txt"
done
