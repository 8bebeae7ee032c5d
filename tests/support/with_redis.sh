#!/bin/sh
# with_redis.sh TEST [ARGS...] — run TEST with a redis-server of its own (the
# redis: backend's TEST_WRAPPER, src/store/redis/CMakeLists.txt): started on a
# free loopback port in a temporary directory, no persistence, and stopped
# (and its directory removed) when TEST ends, however it ends. TEST sees the
# port in $BW_TEST_PORT (the %P of a test URL, tests/support/store_url.h) and
# the server's pid in $BW_TEST_SERVER_PID (test_redis stops it with SIGSTOP).
# A missing redis-server FAILS the test: it is never skipped.
set -u
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    echo "with_redis: redis-server and redis-cli are missing: install them (apt-get install redis-server, or run sh scripts/deps.sh --all as root)" >&2
    exit 1
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/bwredis-XXXXXX") || exit 1
pid=""
stop() {
    if [ -n "$pid" ]; then
        kill -CONT "$pid" 2>/dev/null # a test may have stopped it
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        pid=""
    fi
}
trap 'stop; rm -rf "$dir"' EXIT
trap 'exit 1' HUP INT TERM
try=0
while [ $try -lt 20 ]; do
    try=$((try + 1))
    port=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 12000)) # below the kernel's ephemeral range
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
        --daemonize no --logfile "$dir/redis.log" &
    pid=$!
    i=0
    while [ $i -lt 100 ]; do # at most 5 s for the first PONG
        kill -0 "$pid" 2>/dev/null || break
        # Our server, not another test's that already held the port (ours then fails to bind and exits).
        if timeout 2 redis-cli -h 127.0.0.1 -p "$port" info server 2>/dev/null | tr -d '\r' |
            grep -qx "process_id:$pid"; then
            BW_TEST_PORT=$port BW_TEST_SERVER_PID=$pid "$@"
            exit $?
        fi
        sleep 0.05
        i=$((i + 1))
    done
    stop # the port was taken (it exited) or it never answered: another port
done
echo "with_redis: could not start redis-server on a free port in 20 tries; its last log:" >&2
tail -n 20 "$dir/redis.log" >&2
exit 1
