#!/usr/bin/env bash
# A PostgreSQL server for a qgate fleet, without containers: the database that every host's qgated
# shares (docs/fleet.md). Debian's postgresql package (scripts/install-deps.sh installs it) in DIR:
# the data in DIR/data, the log in DIR/log, a unix socket in DIR, TCP on --port (default 5432) on
# --listen addresses (default '*', every interface) with password (scram-sha-256) authentication.
# It makes the role and database `qgate`, writes the role's password to DIR/password and a
# password file for libpq to DIR/pgpass (both 0600, owned by whoever ran the script), and prints
# the address to give qgated --store and the PGPASSFILE line.
#   scripts/fleet-db.sh start DIR [--port N] [--listen ADDRESSES]   (creates DIR on its first start)
#   scripts/fleet-db.sh status DIR     exit 0 running, 3 stopped
#   scripts/fleet-db.sh stop DIR
# PostgreSQL refuses to run as root: as root the server runs as $QGATE_DB_USER (default `postgres`,
# the Debian package's user, else `nobody`), and DIR's parents must let that user through. The
# server binaries are found as the tests find theirs (tests/support/test_postgres.cpp):
# $QGATE_PG_BINDIR, else `pg_config --bindir`, else the highest /usr/lib/postgresql/*/bin.
# Exit 69 when there are none. Port and addresses are kept in DIR/data/qgate.conf.
set -euo pipefail
usage() { echo "usage: fleet-db.sh start|stop|status DIR [--port N] [--listen ADDRESSES]" >&2; exit 2; }
[ $# -ge 2 ] || usage
command=$1 dir=$2
shift 2
port=${QGATE_DB_PORT:-5432} listen='*'
while [ $# -gt 0 ]; do
  case $1 in
    --port) port=${2:?--port needs a number}; shift 2 ;;
    --listen) listen=${2:?--listen needs addresses}; shift 2 ;;
    *) usage ;;
  esac
done
[[ $port =~ ^[0-9]+$ ]] && [ "$port" -ge 1 ] && [ "$port" -le 65535 ] || { echo "fleet-db: bad port $port" >&2; exit 2; }
say() { echo "fleet-db: $*"; }
die() { echo "fleet-db: $*" >&2; exit 1; }

bindir() {
  local dir
  if [ -n "${QGATE_PG_BINDIR:-}" ]; then
    [ -x "$QGATE_PG_BINDIR/initdb" ] && [ -x "$QGATE_PG_BINDIR/pg_ctl" ] && { echo "$QGATE_PG_BINDIR"; return; }
    echo "fleet-db: QGATE_PG_BINDIR=$QGATE_PG_BINDIR holds no initdb and pg_ctl" >&2; return 1
  fi
  dir=$(pg_config --bindir 2>/dev/null || true)
  if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then echo "$dir"; return; fi
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -n | tail -n 1)
  if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then echo "$dir"; return; fi
  echo "fleet-db: no PostgreSQL server binaries (initdb, pg_ctl): apt-get install postgresql" \
       "(scripts/install-deps.sh does), or set QGATE_PG_BINDIR" >&2
  return 1
}
bin=$(bindir) || exit 69

# Who runs the server, and how to run a command as that user.
if [ "$(id -u)" -eq 0 ]; then
  user=${QGATE_DB_USER:-$(getent passwd postgres >/dev/null && echo postgres || echo nobody)}
  [ "$(id -u "$user")" -ne 0 ] || die "QGATE_DB_USER=$user is root; PostgreSQL refuses to run as root"
  as_server() { runuser -u "$user" -- "$@"; }
else
  user=$(id -un)
  as_server() { "$@"; }
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
cd /  # the server user may not be able to enter the caller's directory
data=$dir/data
[ ${#dir} -le 90 ] || die "$dir is too long a path for the server's unix socket (90 characters at most)"

address() {  # the host's name, or the first address it listens on when that is not every one
  local p host
  p=$(sed -n "s/^port = \([0-9]*\)$/\1/p" "$data/qgate.conf")
  host=$(sed -n "s/^listen_addresses = '\([^,]*\).*'$/\1/p" "$data/qgate.conf")
  case $host in '*'|0.0.0.0|::|'') host=$(hostname -f 2>/dev/null || hostname) ;; *:*) host="[$host]" ;; esac
  echo "postgresql://qgate@$host:$p/qgate"
}
running() { as_server "$bin/pg_ctl" status -D "$data" >/dev/null 2>&1; }

create() {
  [ -z "$(ls -A "$dir")" ] || die "$dir is not empty and holds no server (no $data): give an empty or new directory"
  if [ "$(id -u)" -eq 0 ]; then chown "$user": "$dir"; fi
  chmod 0711 "$dir"  # the socket is in it: others may pass through, only the server's user lists it
  as_server test -w "$dir" || die "$user cannot write $dir: its parent directories must let $user through"
  # Local connections by the socket only as the same system user (peer), the server's superuser;
  # every connection over TCP by password.
  as_server "$bin/initdb" --no-locale --encoding=UTF8 --auth-local=peer --auth-host=scram-sha-256 \
    -D "$data" >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  rm -f "$dir/initdb.log"
  as_server sh -c "cat > '$data/qgate.conf'" <<EOF
# Written by scripts/fleet-db.sh: where the server listens.
listen_addresses = '$listen'
port = $port
unix_socket_directories = '$dir'
password_encryption = scram-sha-256
EOF
  as_server sh -c "echo \"include 'qgate.conf'\" >> '$data/postgresql.conf'"
  as_server sh -c "cat >> '$data/pg_hba.conf'" <<EOF
# scripts/fleet-db.sh: the qgate role from any address, by password.
host    qgate   qgate   0.0.0.0/0   scram-sha-256
host    qgate   qgate   ::/0        scram-sha-256
EOF
}

case $command in
  start)
    [ -f "$data/PG_VERSION" ] || create
    if running; then say "already running in $dir"
    else
      as_server "$bin/pg_ctl" start -w -t 60 -D "$data" -l "$dir/log" >/dev/null ||
        { tail -n 20 "$dir/log" >&2; die "the server did not start (log: $dir/log)"; }
    fi
    p=$(sed -n "s/^port = \([0-9]*\)$/\1/p" "$data/qgate.conf")
    if [ ! -s "$dir/password" ]; then
      # A password of letters and digits, so it needs no quoting in SQL or in a password file.
      password=$(head -c 32 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32)
      # The role and database; SQL on stdin, so the password shows in no process list.
      as_server "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$p" -d postgres >/dev/null <<EOF ||
SELECT 'CREATE ROLE qgate LOGIN' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'qgate') \gexec
ALTER ROLE qgate PASSWORD '$password';
SELECT 'CREATE DATABASE qgate OWNER qgate' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'qgate') \gexec
EOF
        die "cannot make the role and database qgate (log: $dir/log)"
      (umask 077; echo "$password" >"$dir/password"; echo "*:$p:*:qgate:$password" >"$dir/pgpass")
    fi
    say "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') in $dir, as $user: port $p on '$(sed -n \
      "s/^listen_addresses = '\(.*\)'$/\1/p" "$data/qgate.conf")', socket in $dir, log $dir/log"
    echo "  qgated --store $(address)"
    echo "  export PGPASSFILE=$dir/pgpass     # on each host, a copy of it (0600); the password alone: $dir/password"
    ;;
  status)
    [ -f "$data/PG_VERSION" ] || { say "no server in $dir"; exit 3; }
    if running; then say "running in $dir: $(address)"; else say "stopped ($dir)"; exit 3; fi
    ;;
  stop)
    [ -f "$data/PG_VERSION" ] || die "no server in $dir"
    if running; then as_server "$bin/pg_ctl" stop -w -m fast -D "$data" >/dev/null; say "stopped ($dir)"
    else say "not running ($dir)"; fi
    ;;
  *) usage ;;
esac
