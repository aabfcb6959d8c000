#!/usr/bin/env bash
# The stage through Redis against the same stage on standard input, on the
# same snapshot and traffic: each run's last line (pairs/s over the run,
# batch latency p50 and p99).
#
#   deploy/redis/bench.sh FANOUT SNAPSHOT TRAFFIC [THREADS]
#
# The traffic is queued in full first (in the stream, or in a file on
# standard input), so both runs are a backlog drained at full speed; batch
# latency then includes, on standard input, the time a batch's lines wait in
# the stage's queue, and through Redis the read, evaluation and the MULTI/EXEC.
set -euo pipefail
fanout=$1 snapshot=$2 traffic=$3 threads=${4:-2}
. "$(dirname "$0")/server.sh"

work=$(mktemp -d "${TMPDIR:-/tmp}/fanout-redis-bench.XXXXXX")
stage_pid=
trap '[ -n "$stage_pid" ] && kill "$stage_pid" 2>/dev/null; stop_server; rm -rf "$work"' EXIT

echo "== standard input, segment files"
"$fanout" stream --snapshot "$snapshot" --out "$work/segments" --threads "$threads" \
  <"$traffic" 2>"$work/stdin.log"
grep 'stopped' "$work/stdin.log"
rm -rf "$work/segments"

echo "== Redis (appendonly yes, appendfsync always, Unix socket)"
start_server
feed traffic "$traffic"
"$fanout" stream --snapshot "$snapshot" --redis "unix://$socket" --input traffic --group fanout \
  --from-start --threads "$threads" 2>"$work/redis.log" &
stage_pid=$!
wait_idle traffic "$stage_pid"
# CPU seconds of the stage (user + system, from /proc) and of the server.
ticks=$(awk '{ print $14 + $15 }' "/proc/$stage_pid/stat")
echo "CPU: the stage $(awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", t / hz }') s," \
  "redis-server $(cli INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.1f", s }') s"
kill -TERM "$stage_pid"
wait "$stage_pid"
stage_pid=
grep 'stopped' "$work/redis.log"
echo "output streams: $(cli INFO memory | grep '^used_memory_human' | tr -d '\r')"
