# Sourced by demo.sh and bench.sh: a private redis-server on a Unix socket in
# a temporary folder, fed with redis-cli, stopped by its pid.
# After `start_server`: $dir, $socket, and `cli` (redis-cli on that socket).

start_server() {
  dir=$(mktemp -d "${TMPDIR:-/tmp}/fanout-redis.XXXXXX")
  socket=$dir/redis.sock
  # The append-only file, fsynced at every write: what exactly-once needs.
  redis-server --port 0 --unixsocket "$socket" --dir "$dir" --save '' --appendonly yes \
    --appendfsync always --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
  for _ in $(seq 100); do [ "$(cli PING 2>/dev/null)" = PONG ] && return 0; sleep 0.1; done
  echo "redis-server did not start: $(cat "$dir/redis.log")" >&2
  return 1
}

cli() { redis-cli -s "$socket" "$@"; }

stop_server() {
  local pid
  pid=$(cat "$dir/redis.pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || return 0
  # A clean shutdown removes the pid file; a server started with SIGTERM
  # blocked (some supervisors do that) is killed after 5 s.
  for _ in $(seq 50); do
    { [ -f "$dir/redis.pid" ] && kill -0 "$pid" 2>/dev/null; } || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -rf "$dir"
}

# feed STREAM FILE: one XADD per line, field `message`, pipelined (RESP
# lengths are byte counts: LC_ALL=C).
feed() {
  LC_ALL=C awk -v stream="$1" '{
    printf "*5\r\n$4\r\nXADD\r\n$%d\r\n%s\r\n$1\r\n*\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n",
      length(stream), stream, length($0), $0 }' "$2" | cli --pipe >/dev/null
}

# wait_idle STREAM PID: until the group on STREAM has read everything (lag 0)
# and acknowledged it (pending 0); fails if the stage PID stops first.
wait_idle() {
  until cli --raw XINFO GROUPS "$1" 2>/dev/null | paste - - | grep -q $'^lag\t0$' &&
    cli --raw XINFO GROUPS "$1" | paste - - | grep -q $'^pending\t0$'; do
    kill -0 "$2" || { echo "the stage stopped early" >&2; return 1; }
    sleep 0.2
  done
}
