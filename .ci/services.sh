#!/usr/bin/env bash
# Throwaway PostgreSQL 15 and Redis for running the suite against the team-server back ends.
#
#   .ci/services.sh install   # apt-get install postgresql-15 redis-server (Debian, as root)
#   .ci/services.sh start     # start both on 127.0.0.1; prints DATABASE_URL= and REDIS_URL=
#   .ci/services.sh env       # print the two variables again (for: eval "$(.ci/services.sh env)")
#   .ci/services.sh status
#   .ci/services.sh stop      # stop both and delete their data folder
#
# Both listen on 127.0.0.1 only, on non-default ports (PG_PORT, REDIS_PORT), with their data
# in SERVICES_DIR, so they never meet a system PostgreSQL/Redis or another checkout's copy.
# The data is disposable: PostgreSQL runs without fsync, Redis without persistence.
# PostgreSQL refuses to run as root, so as root its folder is owned by and run as `postgres`.
set -euo pipefail

SERVICES_DIR=${SERVICES_DIR:-/tmp/session-explorer-services}
PG_DIR=$SERVICES_DIR/pg
REDIS_DIR=$SERVICES_DIR/redis
ENV_FILE=$SERVICES_DIR/env
PORTS_FILE=$SERVICES_DIR/ports
# Once started, the folder remembers its ports: stop/status/env need only SERVICES_DIR.
if [ -f "$PORTS_FILE" ]; then
    # shellcheck source=/dev/null
    . "$PORTS_FILE"
fi
PG_PORT=${PG_PORT:-55432}
REDIS_PORT=${REDIS_PORT:-56379}

die() { echo "services.sh: $*" >&2; exit 1; }

pg_bin() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -n "$dir" ] || dir=$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/x)")
    [ -x "$dir/initdb" ] || die "PostgreSQL server binaries not found (run: $0 install)"
    echo "$dir"
}

# Run a command as the PostgreSQL owner: `postgres` when we are root, else ourselves.
as_pg() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

pg_running() { [ -f "$PG_DIR/data/postmaster.pid" ] && as_pg "$(pg_bin)/pg_ctl" -D "$PG_DIR/data" status >/dev/null 2>&1; }
redis_running() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1; }

cmd_install() {
    [ "$(id -u)" = 0 ] || die "install needs root (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql-15 redis-server
}

cmd_start() {
    command -v redis-server >/dev/null || die "redis-server not found (run: $0 install)"
    local bin
    bin=$(pg_bin)
    mkdir -p "$SERVICES_DIR"
    chmod 755 "$SERVICES_DIR"
    printf 'PG_PORT=%s\nREDIS_PORT=%s\n' "$PG_PORT" "$REDIS_PORT" >"$PORTS_FILE"
    if ! pg_running; then
        if [ ! -f "$PG_DIR/data/PG_VERSION" ]; then
            rm -rf "$PG_DIR"
            mkdir -p "$PG_DIR"
            local password
            password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
            printf '%s\n' "$password" >"$PG_DIR/password"
            chmod 600 "$PG_DIR/password"
            [ "$(id -u)" = 0 ] && chown -R postgres:postgres "$PG_DIR"
            # Local socket connections (the bootstrap below) trust the owner; TCP needs the
            # password, as it would on a server.
            as_pg "$bin/initdb" -D "$PG_DIR/data" -U postgres --auth-local=trust \
                --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$PG_DIR/initdb.log"
        fi
        as_pg "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 start -o \
            "-c listen_addresses=127.0.0.1 -p $PG_PORT -c unix_socket_directories=$PG_DIR -c max_connections=200 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
            >/dev/null || { cat "$PG_DIR/server.log" >&2; die "PostgreSQL did not start"; }
        local password
        password=$(as_pg cat "$PG_DIR/password")
        # The app's role may create databases: the test runner makes its test database and the
        # live-server helper one of its own.
        as_pg "$bin/psql" -h "$PG_DIR" -p "$PG_PORT" -U postgres -d postgres -q -v ON_ERROR_STOP=1 <<SQL >/dev/null
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'explorer') THEN
    CREATE ROLE explorer LOGIN CREATEDB PASSWORD '$password';
  END IF;
END \$\$;
SELECT 'CREATE DATABASE explorer OWNER explorer'
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'explorer') \gexec
SQL
    fi
    if ! redis_running; then
        mkdir -p "$REDIS_DIR"
        redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$REDIS_DIR" \
            --daemonize yes --pidfile "$REDIS_DIR/redis.pid" --logfile "$REDIS_DIR/redis.log" \
            --save "" --appendonly no --protected-mode yes
        for _ in $(seq 1 100); do redis_running && break; sleep 0.1; done
        redis_running || { cat "$REDIS_DIR/redis.log" >&2; die "Redis did not start"; }
    fi
    {
        echo "DATABASE_URL=postgres://explorer:$(as_pg cat "$PG_DIR/password")@127.0.0.1:$PG_PORT/explorer"
        echo "REDIS_URL=redis://127.0.0.1:$REDIS_PORT/0"
    } >"$ENV_FILE"
    chmod 600 "$ENV_FILE"
    cmd_env
}

cmd_env() {
    [ -f "$ENV_FILE" ] || die "not started (run: $0 start)"
    sed 's/^/export /' "$ENV_FILE"
}

cmd_status() {
    local rc=0
    if pg_running; then echo "PostgreSQL: running on 127.0.0.1:$PG_PORT ($PG_DIR)"; else echo "PostgreSQL: stopped"; rc=1; fi
    if redis_running; then echo "Redis: running on 127.0.0.1:$REDIS_PORT ($REDIS_DIR)"; else echo "Redis: stopped"; rc=1; fi
    return $rc
}

cmd_stop() {
    if [ -f "$PG_DIR/data/postmaster.pid" ]; then
        as_pg "$(pg_bin)/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null || true
    fi
    if redis_running; then
        redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
    fi
    # Only ever delete what this script created.
    case "$SERVICES_DIR" in
        /|"") die "refusing to delete SERVICES_DIR=$SERVICES_DIR" ;;
    esac
    rm -rf "$PG_DIR" "$REDIS_DIR" "$ENV_FILE" "$PORTS_FILE"
    rmdir "$SERVICES_DIR" 2>/dev/null || true
}

case "${1:-}" in
    install) cmd_install ;;
    start) cmd_start ;;
    env) cmd_env ;;
    status) cmd_status ;;
    stop) cmd_stop ;;
    *) echo "usage: $0 install|start|env|status|stop" >&2; exit 2 ;;
esac
