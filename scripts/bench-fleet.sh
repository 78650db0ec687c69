#!/usr/bin/env bash
# The fleet benchmarks (bench/RESULTS.md): claims through the shared job queue by 1, 3 and 10
# claimer processes, and QueryTrend through qgated on a large history, each on PostgreSQL (a server
# from scripts/fleet-db.sh: stock settings, fsync on, reached over TCP by password) and on SQLite.
#   scripts/bench-fleet.sh claims WORK OUT   qgate-claim-bench, --jobs $JOBS (default 5000); TAG (e.g.
#                                           -async) names the files of a variant, such as one run with
#                                           PGOPTIONS='-c synchronous_commit=off' (libpq passes it on)
#   scripts/bench-fleet.sh check WORK OUT    qgate-history-fill of $CHECK_RUNS runs (default 20000) through
#                                           the API and through SQL, then compare, on each engine
#   scripts/bench-fleet.sh fill WORK OUT     qgate-history-fill --via sql of $RUNS runs (default 10000000)
#                                           and $BUILDS builds (default 500), on each engine
#   scripts/bench-fleet.sh trend WORK OUT    qgated --backend cpu on each filled store, then
#                                           qgate-trend-rpc-bench --queries $QUERIES (default 250),
#                                           each answer read by pages of $PAGE_SIZE (default 0: the
#                                           daemon's); TAG names the files of a variant
#   scripts/bench-fleet.sh stop WORK         stops the PostgreSQL server
# WORK holds the server (WORK/pg, port $PG_PORT, default 55432) and the SQLite files; OUT the JSON and
# text of each step. ENGINES (default "postgresql sqlite") narrows a step to one engine. As root the
# server runs as $QGATE_DB_USER (default postgres), as fleet-db.sh does. Binaries from $QGATE_BUILD_DIR
# (default build).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: bench-fleet.sh claims|check|fill|trend WORK OUT | stop WORK" >&2; exit 2; }
step=$1 work=$2 out=${3:-}
cd "$(dirname "$0")/.."
bin=${QGATE_BUILD_DIR:-build}/bin
port=${PG_PORT:-55432}
engines=${ENGINES:-postgresql sqlite}
TAG=${TAG:-}
mkdir -p "$work"
work=$(cd "$work" && pwd)
[ -z "$out" ] || mkdir -p "$out"
export QGATE_DB_USER=${QGATE_DB_USER:-postgres}

if [ "$step" = stop ]; then scripts/fleet-db.sh stop "$work/pg"; exit 0; fi

# The server, and a password file that covers every database of it.
source scripts/bench-pg-server.sh
bench_pg_start "$work" "$port"
fresh_db() {  # an empty database owned by qgate; prints its address
  as_server psql -X -q -h "$work/pg" -p "$port" -d postgres -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1 OWNER qgate" >&2
  echo "postgresql://qgate@127.0.0.1:$port/$1"
}
address() {  # engine name -> an empty store of it
  if [ "$1" = postgresql ]; then fresh_db "$2"; else rm -f "$work/$2.db" "$work/$2.db-wal" "$work/$2.db-shm"; echo "$work/$2.db"; fi
}
say() { echo "== $(date -u +%H:%M:%S) $*"; }

case $step in
  claims)
    for engine in $engines; do
      for n in 1 3 10; do
        say "claims: $engine, $n claimers, ${JOBS:-5000} jobs (load $(cut -d' ' -f1-3 /proc/loadavg))"
        store=$(address "$engine" "claims$n")
        flag=$([ "$engine" = postgresql ] && echo --postgres || echo --db)
        "$bin/qgate-claim-bench" --claimers "$n" --jobs "${JOBS:-5000}" "$flag" "$store" \
          --json-out "$out/claims-$engine$TAG-$n.json" | tee "$out/claims-$engine$TAG-$n.txt"
      done
    done
    ;;
  check)
    for engine in $engines; do
      say "check: $engine, ${CHECK_RUNS:-20000} runs through the API and through SQL"
      api=$(address "$engine" histapi) sql=$(address "$engine" histsql)
      "$bin/qgate-history-fill" fill --via api --store "$api" --runs "${CHECK_RUNS:-20000}" --builds "${CHECK_BUILDS:-50}" \
        --json-out "$out/check-$engine-api.json"
      "$bin/qgate-history-fill" fill --via sql --store "$sql" --runs "${CHECK_RUNS:-20000}" --builds "${CHECK_BUILDS:-50}" \
        --json-out "$out/check-$engine-sql.json"
      "$bin/qgate-history-fill" compare "$api" "$sql" | tee "$out/check-$engine.txt"
    done
    ;;
  fill)
    for engine in $engines; do
      say "fill: $engine, ${RUNS:-10000000} runs, ${BUILDS:-500} builds (load $(cut -d' ' -f1-3 /proc/loadavg))"
      store=$(address "$engine" trend)
      "$bin/qgate-history-fill" fill --via sql --store "$store" --runs "${RUNS:-10000000}" --builds "${BUILDS:-500}" \
        --json-out "$out/fill-$engine.json" | tee "$out/fill-$engine.txt"
    done
    ;;
  trend)
    for engine in $engines; do
      dir=$work/qgated-$engine
      rm -rf "$dir"; mkdir -p "$dir"
      if [ "$engine" = postgresql ]; then store_flag=(--store "postgresql://qgate@127.0.0.1:$port/trend")
      else store_flag=(--db "$work/trend.db"); fi
      t0=$(date +%s%N)
      "$bin/qgated" --backend cpu --data-dir "$dir" --listen "unix://$dir/qgated.sock" "${store_flag[@]}" 2>"$dir/qgated.log" &
      pid=$!
      until grep -q "qgated: ready" "$dir/qgated.log" 2>/dev/null; do
        kill -0 "$pid" 2>/dev/null || { cat "$dir/qgated.log" >&2; exit 1; }
        sleep 0.05
      done
      say "trend: $engine, qgated ready in $(( ($(date +%s%N) - t0) / 1000000 )) ms (load $(cut -d' ' -f1-3 /proc/loadavg))"
      "$bin/qgate-trend-rpc-bench" --server "unix://$dir/qgated.sock" --queries "${QUERIES:-250}" --pid "$pid" \
        --page-size "${PAGE_SIZE:-0}" --json-out "$out/trend-$engine$TAG.json" | tee "$out/trend-$engine$TAG.txt"
      kill "$pid"; wait "$pid" 2>/dev/null || true
    done
    ;;
  *) echo "bench-fleet.sh: unknown step $step" >&2; exit 2 ;;
esac
