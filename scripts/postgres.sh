#!/usr/bin/env bash
# Start a throwaway PostgreSQL server on loopback (Debian's package) and print its SQLAlchemy URL.
#     export TUNESEARCH_TEST_PG=$(bash scripts/postgres.sh)
# The server runs from a temporary folder as the postgres user, on a free loopback port, until
# the machine stops or `pg_ctl -D <folder> stop`.
set -euo pipefail
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  apt-get update -qq >/dev/null 2>&1
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null 2>&1
fi
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
data=$(mktemp -d /tmp/tunesearch-pg.XXXXXX)
chown postgres "$data"
run() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
run "$bin/initdb -D $data -A trust -U postgres" >/dev/null
run "$bin/pg_ctl -D $data -l $data/server.log -o \"-h 127.0.0.1 -p $port -k $data\" -w start" >/dev/null
run "$bin/createdb -h 127.0.0.1 -p $port -U postgres tunesearch"
echo "postgresql://postgres@127.0.0.1:$port/tunesearch"
