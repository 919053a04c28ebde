#!/bin/bash
# Entrypoint of the test PostgreSQL image, doing what the official postgres
# image's docker-entrypoint.sh does for what this project's tests use:
#   - POSTGRES_USER (default postgres), POSTGRES_PASSWORD (required unless
#     POSTGRES_HOST_AUTH_METHOD=trust), POSTGRES_DB (default: the user),
#     POSTGRES_INITDB_ARGS, POSTGRES_HOST_AUTH_METHOD (default scram-sha-256);
#   - initdb into an empty PGDATA on first start, then a temporary server on
#     the Unix socket only, to create POSTGRES_DB and run
#     /docker-entrypoint-initdb.d/*.sh and *.sql; it is stopped before the
#     real start, so a first start logs "database system is ready to accept
#     connections" twice, as the official image does (testcontainers'
#     postgres module waits for the second);
#   - a command starting with "postgres", or with an option ("-c ..."),
#     which gets "postgres" put in front; anything else is executed as is.
set -Eeuo pipefail

if [ "${1:0:1}" = '-' ]; then
	set -- postgres "$@"
fi

if [ "$1" != 'postgres' ]; then
	exec "$@"
fi

if [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	chmod 700 "$PGDATA"
	chmod 2775 /var/run/postgresql
	chown -R postgres:postgres "$PGDATA" /var/run/postgresql
	exec setpriv --reuid=postgres --regid=postgres --init-groups "$BASH_SOURCE" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	: "${POSTGRES_USER:=postgres}"
	: "${POSTGRES_DB:=$POSTGRES_USER}"
	: "${POSTGRES_HOST_AUTH_METHOD:=scram-sha-256}"
	if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$POSTGRES_HOST_AUTH_METHOD" != trust ]; then
		echo >&2 'error: POSTGRES_PASSWORD is not set; set it, or POSTGRES_HOST_AUTH_METHOD=trust to allow connections without a password'
		exit 1
	fi

	pwfile=
	if [ -n "${POSTGRES_PASSWORD:-}" ]; then
		pwfile=$(mktemp)
		printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
	fi
	# shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a list of words
	initdb --username="$POSTGRES_USER" ${pwfile:+--pwfile="$pwfile"} \
		--encoding=UTF8 --locale=C.UTF-8 ${POSTGRES_INITDB_ARGS:-}
	[ -z "$pwfile" ] || rm -f "$pwfile"

	{
		echo
		echo "host all all all $POSTGRES_HOST_AUTH_METHOD"
	} >>"$PGDATA/pg_hba.conf"
	echo "listen_addresses = '*'" >>"$PGDATA/postgresql.auto.conf"

	# The temporary server listens on the Unix socket only.
	pg_ctl -D "$PGDATA" -w -o "-c listen_addresses='' -p 5432" start

	export PGUSER="$POSTGRES_USER" PGPASSWORD="${POSTGRES_PASSWORD:-}" PGHOST=/var/run/postgresql PGPORT=5432
	psql=(psql -v ON_ERROR_STOP=1 --no-psqlrc --dbname postgres)
	if [ "$POSTGRES_DB" != postgres ]; then
		"${psql[@]}" --set db="$POSTGRES_DB" <<-'SQL'
			CREATE DATABASE :"db";
		SQL
	fi
	for f in /docker-entrypoint-initdb.d/*; do
		case "$f" in
			*.sh) echo "running $f"; . "$f" ;;
			*.sql) echo "running $f"; "${psql[@]}" --dbname "$POSTGRES_DB" -f "$f" ;;
			*) [ ! -e "$f" ] || echo "ignoring $f" ;;
		esac
	done
	unset PGPASSWORD

	pg_ctl -D "$PGDATA" -m fast -w stop
	echo
	echo 'PostgreSQL init process complete; ready for start up.'
	echo
fi

exec "$@"
