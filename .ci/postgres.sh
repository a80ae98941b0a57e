# Sourced by `make test`: a throwaway PostgreSQL server on 127.0.0.1 for the storage tests
# (tests/search/test_storage.py reads MI_TUNE_TEST_POSTGRES_URL; they fail without it).
# Installs Debian's postgresql when no server binaries are found; initdb refuses root, so as root the
# cluster belongs to the 'postgres' user (created by the package). The server stops when the sourcing shell exits.

_pg_bindir() {
    local found
    found="$(command -v pg_ctl 2>/dev/null || true)"
    if [ -n "$found" ] && [ -x "$(dirname "$(readlink -f "$found")")/postgres" ]; then
        dirname "$(readlink -f "$found")"
        return
    fi
    found="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    [ -n "$found" ] && [ -x "$found/postgres" ] && echo "$found"
}

PG_BIN="$(_pg_bindir || true)"
if [ -z "$PG_BIN" ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
    PG_BIN="$(_pg_bindir)"
fi

PG_DIR="$(mktemp -d /tmp/mi-tune-pg.XXXXXX)"
if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    chown postgres "$PG_DIR"
    _pg() { runuser -u postgres -- "$@"; }
else
    _pg() { "$@"; }
fi
PG_PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"

_pg_stop() {
    _pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$PG_DIR"
}
trap _pg_stop EXIT

_pg "$PG_BIN/initdb" -D "$PG_DIR/data" -U mitune --auth=trust -E UTF8 >/dev/null
# One role logs in with a password (the first matching pg_hba.conf line wins): the storage test that logs in with
# postgresql://mitune_pw:PASSWORD@... creates the role and proves the password is read, yet written nowhere.
_pg sed -i "1i host all mitune_pw 127.0.0.1/32 scram-sha-256" "$PG_DIR/data/pg_hba.conf"
_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PG_DIR" start >/dev/null
_pg "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U mitune mitune
export MI_TUNE_TEST_POSTGRES_URL="postgresql://mitune@127.0.0.1:$PG_PORT/mitune"
export MI_TUNE_TEST_POSTGRES_PASSWORD_ROLE=mitune_pw
echo "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') for the storage tests: $MI_TUNE_TEST_POSTGRES_URL"
