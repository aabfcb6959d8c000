#!/usr/bin/env bash
# `make redis-demo`: a private redis-server on a Unix socket in a temporary
# folder, the traffic fed to a stream with redis-cli, `fanout stream --redis`
# run until the group has nothing left to read or acknowledge, the delivery
# streams printed, and the server stopped by its pid.
#
#   deploy/redis/demo.sh FANOUT SNAPSHOT TRAFFIC
set -euo pipefail
fanout=$1 snapshot=$2 traffic=$3

dir=$(mktemp -d "${TMPDIR:-/tmp}/fanout-redis-demo.XXXXXX")
socket=$dir/redis.sock
stage_pid=
stop_server() {
  local pid
  pid=$(cat "$dir/redis.pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || return 0
  # A clean shutdown removes the pid file; a server started with SIGTERM
  # blocked (some supervisors do that) is killed after 5 s.
  for _ in $(seq 50); do
    { [ -f "$dir/redis.pid" ] && kill -0 "$pid" 2>/dev/null; } || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}
cleanup() {
  [ -n "$stage_pid" ] && kill "$stage_pid" 2>/dev/null || true
  stop_server
  rm -rf "$dir"
}
trap cleanup EXIT

redis-server --port 0 --unixsocket "$socket" --dir "$dir" --save '' --appendonly yes \
  --appendfsync always --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
cli() { redis-cli -s "$socket" "$@"; }
for _ in $(seq 100); do [ "$(cli PING 2>/dev/null)" = PONG ] && break; sleep 0.1; done
echo "redis-server $(cat "$dir/redis.pid") on $socket"

# One XADD per traffic line, pipelined (RESP lengths are byte counts: LC_ALL=C).
LC_ALL=C awk '{ printf "*5\r\n$4\r\nXADD\r\n$7\r\ntraffic\r\n$1\r\n*\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n", length($0), $0 }' \
  "$traffic" | cli --pipe >/dev/null
echo "fed $(cli XLEN traffic) entries to the stream 'traffic'"

"$fanout" stream --snapshot "$snapshot" --redis "unix://$socket" --input traffic --group fanout \
  --from-start --status-seconds 1 &
stage_pid=$!
# Idle: the group has read everything (lag 0) and acknowledged it (pending 0).
until cli --raw XINFO GROUPS traffic 2>/dev/null | paste - - | grep -q $'^lag\t0$' &&
  cli --raw XINFO GROUPS traffic | paste - - | grep -q $'^pending\t0$'; do
  kill -0 "$stage_pid" || { echo "the stage stopped early" >&2; exit 1; }
  sleep 0.2
done
kill -TERM "$stage_pid"
wait "$stage_pid"
stage_pid=

echo
for key in $(cli --raw KEYS 'fanout:*' | sort); do
  echo "== $key: $(cli XLEN "$key") entries, the first two or fewer:"
  # An entry's id, then its field and value lines (batches have one field, the others two).
  columns=$([ "$key" = fanout:batches ] && echo '- - -' || echo '- - - - -')
  cli --raw XRANGE "$key" - + COUNT 2 | paste $columns
done
