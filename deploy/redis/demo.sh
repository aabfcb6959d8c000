#!/usr/bin/env bash
# `make redis-demo`: a private redis-server on a Unix socket in a temporary
# folder, the traffic fed to a stream with redis-cli, `fanout stream --redis`
# run until the group has nothing left to read or acknowledge, the delivery
# streams printed, and the server stopped by its pid.
#
#   deploy/redis/demo.sh FANOUT SNAPSHOT TRAFFIC
set -euo pipefail
fanout=$1 snapshot=$2 traffic=$3
. "$(dirname "$0")/server.sh"

stage_pid=
trap '[ -n "$stage_pid" ] && kill "$stage_pid" 2>/dev/null; stop_server' EXIT
start_server
echo "redis-server $(cat "$dir/redis.pid") on $socket"
feed traffic "$traffic"
echo "fed $(cli XLEN traffic) entries to the stream 'traffic'"

"$fanout" stream --snapshot "$snapshot" --redis "unix://$socket" --input traffic --group fanout \
  --from-start --status-seconds 1 &
stage_pid=$!
wait_idle traffic "$stage_pid"
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
