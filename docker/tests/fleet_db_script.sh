#!/usr/bin/env bash
# Proves scripts/fleet-db.sh gives a fleet a database: started in a fresh directory on a free port,
# the role qgate reaches the database qgate over TCP with the password file it wrote (0600), a wrong
# or missing password is refused, status tells running from stopped, and a second start keeps the
# data and the password. Exits 77 (skipped) when the PostgreSQL server binaries or psql are missing.
# Usage: fleet_db_script.sh SOURCE_DIR
set -uo pipefail
src=${1:?usage: fleet_db_script.sh SOURCE_DIR}
script="$src/scripts/fleet-db.sh"
command -v psql >/dev/null || { echo "SKIP: no psql (apt-get install postgresql-client)"; exit 77; }
work=$(mktemp -d /tmp/qgate-fleet-db-XXXXXX)
chmod 0711 "$work"  # as root the server runs as another user, who must pass through
db="$work/db"
trap 'bash "$script" stop "$db" >/dev/null 2>&1; rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }

port=""
for candidate in $(seq $((20000 + $$ % 20000)) $((20050 + $$ % 20000))); do
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then port=$candidate; break; fi
done
[ -n "$port" ] || { echo "FAIL no free port found"; exit 1; }

out=$(bash "$script" start "$db" --port "$port" --listen 127.0.0.1 2>&1); rc=$?
if [ $rc -eq 69 ]; then echo "SKIP: $out"; exit 77; fi
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL start exited $rc"; exit 1; }

grep -qE "qgated --store postgresql://qgate@[^ ]+:$port/qgate" <<<"$out" && ok "start prints the address for qgated" ||
  fail "start printed no postgresql://qgate@HOST:$port/qgate address"
grep -qF "export PGPASSFILE=$db/pgpass" <<<"$out" && ok "start prints the PGPASSFILE line" ||
  fail "start printed no PGPASSFILE line"
for f in password pgpass; do
  mode=$(stat -c %a "$db/$f" 2>/dev/null)
  [ "$mode" = 600 ] && ok "$f is 0600" || fail "$f has mode '${mode:-missing}', not 600"
done
password=$(cat "$db/password")
[ ${#password} -ge 16 ] && ok "the password has ${#password} characters" || fail "the password is too short: '$password'"

tcp="postgresql://qgate@127.0.0.1:$port/qgate"
who=$(PGPASSFILE="$db/pgpass" psql -X -w -At "$tcp" -c "SELECT current_user || ' ' || current_database()" \
  -c "CREATE TABLE kept (n int)" -c "INSERT INTO kept VALUES (42)" 2>&1)
[ "$(head -n 1 <<<"$who")" = "qgate qgate" ] && ok "psql over TCP with the password file: role and database qgate" ||
  fail "psql over TCP with the password file: $who"
PGPASSWORD="$password" psql -X -w -At "$tcp" -c "SELECT 1" >/dev/null 2>&1 && ok "the password itself is accepted" ||
  fail "the password in $db/password is refused"
err=$(PGPASSWORD="not-$password" psql -X -w -At "$tcp" -c "SELECT 1" 2>&1) && fail "a wrong password is accepted" ||
  { grep -q "password authentication failed" <<<"$err" && ok "a wrong password is refused" || fail "a wrong password: $err"; }
PGPASSFILE=/dev/null psql -X -w -At "$tcp" -c "SELECT 1" >/dev/null 2>&1 && fail "no password is accepted" ||
  ok "no password is refused"

bash "$script" status "$db" >/dev/null && ok "status: running (exit 0)" || fail "status of a running server is not 0"
bash "$script" stop "$db" >/dev/null || fail "stop failed"
bash "$script" status "$db" >/dev/null; rc=$?
[ $rc -eq 3 ] && ok "status after stop: stopped (exit 3)" || fail "status after stop exited $rc, not 3"
PGPASSFILE="$db/pgpass" psql -X -w -At "$tcp" -c "SELECT 1" >/dev/null 2>&1 && fail "a stopped server answers" ||
  ok "a stopped server does not answer"

bash "$script" start "$db" >/dev/null 2>&1 || fail "the second start failed"
[ "$(cat "$db/password")" = "$password" ] && ok "the second start keeps the password" || fail "the second start changed the password"
kept=$(PGPASSFILE="$db/pgpass" psql -X -w -At "$tcp" -c "SELECT n FROM kept" 2>&1)
[ "$kept" = 42 ] && ok "the second start keeps the data, on the same port" || fail "after the second start: $kept"

if [ $failures -gt 0 ]; then echo "$failures check(s) failed"; exit 1; fi
echo "the fleet database script works"
