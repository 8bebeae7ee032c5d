#!/bin/sh
# with_postgres.sh TEST [ARGS...] — run TEST with a PostgreSQL server of its
# own (the postgresql: backend's TEST_WRAPPER, src/store/postgres/CMakeLists.txt):
# a cluster made with initdb in a temporary directory, started on a free
# loopback port with its unix socket in that directory, no durability
# (fsync=off), and stopped (pg_ctl stop -m immediate) and removed when TEST
# ends, however it ends. initdb and the server refuse to run as root, so as
# root they run as the user nobody (the directory is then nobody's).
# Authentication: trust for the superuser `postgres` (the tests' user), and a
# password (scram-sha-256) for the role `bwpass` (password `bwsecret`), so
# that a test can see a wrong password refused. pg_stat_statements is loaded:
# the server's own count of the statements the store ran (test_postgres
# counts round trips with it).
# TEST sees the port in $BW_TEST_PORT (the %P of a test URL,
# tests/support/store_url.h), the postmaster's pid in $BW_TEST_SERVER_PID
# (test_postgres stops the server, postmaster and backends, with SIGSTOP) and
# the socket directory in $BW_TEST_PG_SOCKDIR, and in $BW_TEST_PG_RESTART a
# command that stops the server as a crash would and starts it again on the
# same port (test_postgres); and for the fault tests $BW_TEST_SIGNAL and
# $BW_TEST_RESTART (below). A missing server FAILS the
# test: it is never skipped.
set -u
bindir=""
for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -n); do
    [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ] && bindir=$d # the newest wins
done
if [ -z "$bindir" ] && command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    bindir=$(dirname "$(command -v initdb)")
fi
missing() {
    echo "with_postgres: the PostgreSQL server ($1) is missing: install it (apt-get install postgresql, or run sh scripts/deps.sh --all as root)" >&2
    exit 1
}
[ -n "$bindir" ] || missing "initdb, pg_ctl and postgres, looked for in /usr/lib/postgresql/*/bin and PATH"
psql=$bindir/psql
[ -x "$psql" ] || psql=$(command -v psql) || missing "psql"
as=""
if [ "$(id -u)" = 0 ]; then
    as="setpriv --reuid=nobody --regid=nogroup --clear-groups --"
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/bwpg-XXXXXX") || exit 1
chmod 755 "$dir"
[ -n "$as" ] && chown nobody:nogroup "$dir"
data=$dir/data
started=0
stop() {
    if [ $started = 1 ]; then
        started=0
        pm=$(head -n 1 "$data/postmaster.pid" 2>/dev/null)
        if [ -n "$pm" ]; then # a test may have stopped it: every process of the server goes on again
            kill -CONT "$pm" 2>/dev/null
            pkill -CONT -P "$pm" 2>/dev/null
        fi
        $as "$bindir/pg_ctl" -D "$data" -m immediate -w -t 10 stop >/dev/null 2>&1
    fi
}
trap 'stop; rm -rf "$dir"' EXIT
trap 'exit 1' HUP INT TERM
# -N: no fsync of the new cluster; trust at first (the role with a password is made below).
if ! $as "$bindir/initdb" -D "$data" -U postgres -A trust -E UTF8 --locale=C -N >"$dir/initdb.log" 2>&1; then
    echo "with_postgres: initdb failed; its output:" >&2
    tail -n 20 "$dir/initdb.log" >&2
    exit 1
fi
cat >"$data/pg_hba.conf" <<EOF
local all all trust
host all bwpass 127.0.0.1/32 scram-sha-256
host all all 127.0.0.1/32 trust
EOF
try=0
while [ $try -lt 20 ]; do
    try=$((try + 1))
    port=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 12000)) # below the kernel's ephemeral range
    opts="-p $port -c listen_addresses=127.0.0.1 -k $dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=100 -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track_utility=off"
    # A port another process holds makes the server exit at once (it cannot bind): pg_ctl -w says so.
    if $as "$bindir/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 10 start -o "$opts" >/dev/null 2>&1; then
        started=1
        pm=$(head -n 1 "$data/postmaster.pid")
        if ! $as "$psql" -h "$dir" -p "$port" -U postgres -d postgres -qAt -v ON_ERROR_STOP=1 \
            -c "SET password_encryption = 'scram-sha-256'; CREATE ROLE bwpass LOGIN PASSWORD 'bwsecret'; GRANT ALL ON SCHEMA public TO bwpass; CREATE EXTENSION pg_stat_statements" \
            >"$dir/psql.log" 2>&1; then
            echo "with_postgres: could not create the test role; psql said:" >&2
            cat "$dir/psql.log" >&2
            exit 1
        fi
        cat >"$dir/restart.sh" <<EOF
#!/bin/sh
# Stop the server at once, as a crash would (no checkpoint: it recovers from its WAL), and start it again on
# port $port. Its new postmaster's pid is then the first line of $data/postmaster.pid.
$as "$bindir/pg_ctl" -D "$data" -m immediate -w -t 10 stop >/dev/null 2>&1 || exit 1
exec $as "$bindir/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 10 start -o "$opts" >/dev/null 2>&1
EOF
        # The fault tests' contract (tests/integration/test_store_faults.c): a server of many processes is
        # signalled whole ($BW_TEST_SIGNAL SIG: the postmaster and every backend), and started again after a
        # SIGKILL on the same port ($BW_TEST_RESTART: waits for the old processes to go, prints the new pid).
        cat >"$dir/signal.sh" <<EOF
#!/bin/sh
pm=\$(head -n 1 "$data/postmaster.pid" 2>/dev/null) || exit 1
[ -n "\$pm" ] || exit 1
pkill -"\$1" -P "\$pm" 2>/dev/null
kill -"\$1" "\$pm"
EOF
        cat >"$dir/fault_restart.sh" <<EOF
#!/bin/sh
# The killed server gone (signal.sh KILL killed its backends with it), at most 5 s.
old=\$(head -n 1 "$data/postmaster.pid" 2>/dev/null)
i=0
while [ -n "\$old" ] && [ \$i -lt 100 ] && kill -0 "\$old" 2>/dev/null; do
    sleep 0.05
    i=\$((i + 1))
done
$as "$bindir/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 10 start -o "$opts" >/dev/null 2>&1 || { echo "with_postgres: the restart failed; its log:" >&2; tail -n 5 "$dir/server.log" >&2; exit 1; }
head -n 1 "$data/postmaster.pid"
EOF
        BW_TEST_PORT=$port BW_TEST_SERVER_PID=$pm BW_TEST_PG_SOCKDIR=$dir BW_TEST_PG_RESTART="sh $dir/restart.sh" \
            BW_TEST_SIGNAL=$dir/signal.sh BW_TEST_RESTART=$dir/fault_restart.sh "$@"
        exit $?
    fi
    stop
done
echo "with_postgres: could not start the server on a free port in 20 tries; its last log:" >&2
tail -n 20 "$dir/server.log" >&2
exit 1
