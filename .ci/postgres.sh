#!/usr/bin/env bash
# Throwaway PostgreSQL cluster for the integration tier (tests/integration/test_postgres.py).
#
#   eval "$(bash .ci/postgres.sh)"        # install if needed, init, start; exports LC_POSTGRES_URI
#   bash .ci/postgres.sh status           # exit 0 if the cluster answers
#   bash .ci/postgres.sh stop             # stop it (data kept; `start` again is fast)
#   bash .ci/postgres.sh purge            # stop it and delete the data directory
#
# Idempotent: running `start` on a running cluster only prints the export line again.
# stdout carries nothing but `export ...` lines; all progress goes to stderr.
#
# Environment (all optional):
#   LC_PG_PORT  TCP port on 127.0.0.1 (default 54329)
#   LC_PGDATA   data directory (default /tmp/langchain-compact-pg-$LC_PG_PORT)
#   LC_PG_DB, LC_PG_USER, LC_PG_PASSWORD  database / role created for the tests
#                                         (default langchain_compact / lc / lc)
#   LC_PG_TIMEOUT  seconds to wait for the server to accept connections (default 60)
#
# Root cannot run postgres, so as root every server command runs as the `postgres` user
# (created by the Debian package); as a normal user it runs as that user.
set -euo pipefail

PORT="${LC_PG_PORT:-54329}"
PGDATA_DIR="${LC_PGDATA:-/tmp/langchain-compact-pg-${PORT}}"
DB="${LC_PG_DB:-langchain_compact}"
DB_USER="${LC_PG_USER:-lc}"
DB_PASSWORD="${LC_PG_PASSWORD:-lc}"
TIMEOUT="${LC_PG_TIMEOUT:-60}"
LOGFILE="${PGDATA_DIR}.log"
# Unix socket lives inside the data dir: no dependency on /var/run/postgresql.
SOCKDIR="${PGDATA_DIR}"

log() { echo "postgres.sh: $*" >&2; }
die() {
    log "ERROR: $*"
    exit 1
}

find_bindir() {
    local d
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(readlink -f "$(command -v pg_ctl)")"
        return 0
    fi
    # Debian keeps the server binaries off PATH, in /usr/lib/postgresql/<major>/bin.
    d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [[ -n "$d" && -x "$d/initdb" && -x "$d/pg_ctl" ]]; then
        echo "$d"
        return 0
    fi
    return 1
}

install_postgres() {
    [[ "$(id -u)" == 0 ]] || die "PostgreSQL is not installed and we are not root: apt-get install postgresql"
    log "installing PostgreSQL from Debian (apt-get) ..."
    local t0=$SECONDS
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >&2
    # The package may also create Debian's default cluster (port 5432); it is not used here.
    apt-get install -y -q --no-install-recommends postgresql >&2
    log "PostgreSQL installed in $((SECONDS - t0)) s"
}

BINDIR="$(find_bindir || true)"

# Run a command as the cluster owner.
as_owner() {
    if [[ "$(id -u)" == 0 ]]; then
        (cd / && runuser -u postgres -- "$@")
    else
        "$@"
    fi
}

is_ready() {
    [[ -n "$BINDIR" ]] || return 1
    "$BINDIR/pg_isready" -q -h 127.0.0.1 -p "$PORT" -t 2 >/dev/null 2>&1
}

our_cluster_running() {
    [[ -f "$PGDATA_DIR/postmaster.pid" ]] && as_owner "$BINDIR/pg_ctl" -D "$PGDATA_DIR" status >/dev/null 2>&1
}

print_exports() {
    echo "export LC_POSTGRES_URI=postgresql://${DB_USER}:${DB_PASSWORD}@127.0.0.1:${PORT}/${DB}"
}

psql_admin() {
    # Superuser over the unix socket in the data dir (trust auth for local connections).
    as_owner "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$SOCKDIR" -p "$PORT" -U postgres -d postgres "$@"
}

cmd_start() {
    if [[ -z "$BINDIR" ]]; then
        install_postgres
        BINDIR="$(find_bindir)" || die "PostgreSQL installed but initdb/pg_ctl not found"
    fi
    log "using $BINDIR ($("$BINDIR/postgres" --version))"

    if [[ "$(id -u)" == 0 ]] && ! id postgres >/dev/null 2>&1; then
        die "no 'postgres' user to run the server as (the Debian package creates it)"
    fi

    if our_cluster_running; then
        log "cluster in $PGDATA_DIR already running on port $PORT"
    else
        if is_ready; then
            die "port $PORT on 127.0.0.1 is taken by another server; set LC_PG_PORT"
        fi
        if [[ ! -s "$PGDATA_DIR/PG_VERSION" ]]; then
            log "initdb $PGDATA_DIR"
            rm -rf "$PGDATA_DIR"
            mkdir -p "$PGDATA_DIR"
            chmod 700 "$PGDATA_DIR"
            if [[ "$(id -u)" == 0 ]]; then chown postgres:postgres "$PGDATA_DIR"; fi
            # Local (socket) connections: trust, for the admin steps below.
            # TCP: password (scram), like a real deployment.
            as_owner "$BINDIR/initdb" -D "$PGDATA_DIR" -U postgres -E UTF8 --locale=C.UTF-8 \
                --auth-local=trust --auth-host=scram-sha-256 >&2 2>"$LOGFILE.initdb" ||
                { cat "$LOGFILE.initdb" >&2; die "initdb failed"; }
            # Throwaway cluster: durability off for speed.
            cat >>"$PGDATA_DIR/postgresql.conf" <<EOF
# --- langchain-compact CI (.ci/postgres.sh) ---
listen_addresses = '127.0.0.1'
port = ${PORT}
unix_socket_directories = '${SOCKDIR}'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 100
EOF
        fi
        if [[ "$(id -u)" == 0 ]]; then
            touch "$LOGFILE"
            chown postgres:postgres "$LOGFILE"
        fi
        log "starting on 127.0.0.1:$PORT (log: $LOGFILE)"
        as_owner "$BINDIR/pg_ctl" -D "$PGDATA_DIR" -l "$LOGFILE" -w -t "$TIMEOUT" start >&2 ||
            { tail -n 30 "$LOGFILE" >&2 || true; die "pg_ctl start failed"; }
    fi

    local waited=0
    until is_ready; do
        ((waited >= TIMEOUT)) && { tail -n 30 "$LOGFILE" >&2 || true; die "not ready after ${TIMEOUT}s"; }
        sleep 1
        waited=$((waited + 1))
    done

    # Role and database (idempotent).
    psql_admin <<EOF >&2
SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', '${DB_USER}', '${DB_PASSWORD}')
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '${DB_USER}') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', '${DB}', '${DB_USER}')
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = '${DB}') \gexec
EOF
    log "ready: database ${DB}, user ${DB_USER}, 127.0.0.1:${PORT}"
    print_exports
}

cmd_stop() {
    if [[ -n "$BINDIR" && -f "$PGDATA_DIR/postmaster.pid" ]]; then
        as_owner "$BINDIR/pg_ctl" -D "$PGDATA_DIR" -m fast -w -t "$TIMEOUT" stop >&2 || true
    else
        log "not running ($PGDATA_DIR)"
    fi
}

cmd_status() {
    if our_cluster_running && is_ready; then
        log "running: $PGDATA_DIR on 127.0.0.1:$PORT"
        print_exports
    else
        log "not running ($PGDATA_DIR, port $PORT)"
        return 1
    fi
}

case "${1:-start}" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
purge)
    cmd_stop
    rm -rf "$PGDATA_DIR" "$LOGFILE" "$LOGFILE.initdb"
    log "removed $PGDATA_DIR"
    ;;
*) die "usage: $0 [start|stop|status|purge]" ;;
esac
