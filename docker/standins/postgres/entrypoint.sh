#!/bin/sh
# First start on an empty volume: create the cluster, the user and the database; then serve.
# POSTGRES_HOST_AUTH_METHOD=trust (as in the official image) drops passwords over the network:
# only for the test services on loopback (docker/test-services), never for a deployment.
set -eu
auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
[ "$auth" = trust ] || : "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  if [ -n "${POSTGRES_PASSWORD:-}" ]; then
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    set -- --pwfile="$pwfile"
  fi
  initdb --username="$user" "$@" --auth-local=trust --auth-host="$auth" \
    --encoding=UTF8 -D "$PGDATA" >/dev/null
  rm -f "$pwfile"
  echo "host all all all $auth" >>"$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    createdb --username="$user" "$db"
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  fi
  echo "postgres stand-in: initialised $PGDATA (user $user, database $db, $auth over the network)"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*'
