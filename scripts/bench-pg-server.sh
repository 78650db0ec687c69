# Sourced by the fleet's benchmark scripts (bench-fleet.sh, bench-fleet-daemons.sh): their one way to
# start the PostgreSQL server of a benchmark and reach it.
#   bench_pg_start WORK PORT   starts (or finds running) scripts/fleet-db.sh's server in WORK/pg on
#                              127.0.0.1:PORT, writes WORK/pgpass for every database of it (fleet-db's
#                              names only `qgate`) and exports PGPASSFILE
#   as_server CMD...           runs CMD as the server's user ($QGATE_DB_USER) when root, else as is
as_server() { if [ "$(id -u)" -eq 0 ]; then runuser -u "$QGATE_DB_USER" -- "$@"; else "$@"; fi; }
bench_pg_start() {
  scripts/fleet-db.sh start "$1/pg" --port "$2" --listen 127.0.0.1 >/dev/null
  (umask 077; echo "*:$2:*:qgate:$(cat "$1/pg/password")" >"$1/pgpass")
  export PGPASSFILE=$1/pgpass
}
