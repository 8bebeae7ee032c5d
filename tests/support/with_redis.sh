#!/bin/sh
# with_redis.sh TEST [ARGS...] — run TEST with a redis-server of its own (the
# redis: backend's TEST_WRAPPER, src/store/redis/CMakeLists.txt): started on a
# free loopback port in a temporary directory, no persistence, and stopped
# (and its directory removed) when TEST ends, however it ends. TEST sees:
#   $BW_TEST_PORT        the port (the %P of a test URL, tests/support/store_url.h)
#   $BW_TEST_SERVER_PID  the server's pid (test_redis and the fault tests stop
#                        it with SIGSTOP, or kill it)
#   $BW_TEST_RESTART     a script to run with sh after killing the server: it
#                        starts the server again on the same port (same
#                        options, empty: no persistence), waits until it
#                        answers (at most 5 s), prints its pid and exits 0
#                        (1, saying why on stderr, when it could not); the
#                        wrapper stops that server too when TEST ends
# (the contract of every backend's wrapper that the fault tests run under,
# tests/integration/test_store_faults.c). A missing redis-server FAILS the
# test: it is never skipped.
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
    # Servers the test restarted ($BW_TEST_RESTART) are not our children: signal them and wait (at most 5 s).
    if [ -f "$dir/restarted" ]; then
        for p in $(cat "$dir/restarted"); do
            kill -CONT "$p" 2>/dev/null
            kill "$p" 2>/dev/null
            i=0
            while kill -0 "$p" 2>/dev/null && [ $i -lt 100 ]; do
                sleep 0.05
                i=$((i + 1))
            done
            kill -KILL "$p" 2>/dev/null
        done
        rm -f "$dir/restarted"
    fi
}
trap 'stop; rm -rf "$dir"' EXIT
trap 'exit 1' HUP INT TERM
# answers PORT PID: the server answering on PORT is PID (not another test's that held the port first).
answers() {
    timeout 2 redis-cli -h 127.0.0.1 -p "$1" info server 2>/dev/null | tr -d '\r' | grep -qx "process_id:$2"
}
# The restart script: the same server, on the same port, started from a shell that exits at once.
write_restart() {
    cat >"$dir/restart.sh" <<EOS
#!/bin/sh
set -u
redis-server --port $1 --bind 127.0.0.1 --save '' --appendonly no --dir '$dir' \\
    --daemonize no --logfile '$dir/redis.log' </dev/null >/dev/null 2>&1 &
p=\$!
echo "\$p" >>'$dir/restarted'
i=0
while [ \$i -lt 100 ]; do
    kill -0 "\$p" 2>/dev/null || break
    if timeout 2 redis-cli -h 127.0.0.1 -p $1 info server 2>/dev/null | tr -d '\r' | grep -qx "process_id:\$p"; then
        echo "\$p"
        exit 0
    fi
    sleep 0.05
    i=\$((i + 1))
done
echo "with_redis: restart: redis-server did not answer on port $1 within 5 s (is the port taken?); its log:" >&2
tail -n 5 '$dir/redis.log' >&2
exit 1
EOS
}
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
        if answers "$port" "$pid"; then
            write_restart "$port"
            BW_TEST_PORT=$port BW_TEST_SERVER_PID=$pid BW_TEST_RESTART=$dir/restart.sh "$@"
            exit $?
        fi
        sleep 0.05
        i=$((i + 1))
    done
    stop # the port was taken (it exited) or it never answered: another port
done
echo "with_redis: could not start redis-server on a free port in 20 tries; its log:" >&2
tail -n 20 "$dir/redis.log" >&2
exit 1
