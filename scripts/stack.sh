#!/usr/bin/env bash
# Runs the services stack natively — the API, two dispatchers, two workers and
# the callback relay — against MariaDB (or PostgreSQL), Redis and RabbitMQ on
# this machine, the way docker-compose.yml wires it; used to measure with
# `kairos bench --url`. Each process logs to $KAIROS_STACK_DIR/<name>.log.
#
#   scripts/stack.sh up      # prints the URL and an operator key
#   scripts/stack.sh down
#   scripts/stack.sh purge   # after down: drops the namespace's Redis keys
#                            # (attempt keys live 24 h: a run of benchmarks
#                            # leaves millions behind) and every RabbitMQ
#                            # queue and exchange of the namespace (through
#                            # rabbitmqctl, on the broker's machine)
#
# Settings (environment): KAIROS_BIN (default target/release/kairos),
# KAIROS_DATABASE_URL (default mysql://root@127.0.0.1:3306/kairos_stack; the
# database is created if missing), KAIROS_REDIS_URL, KAIROS_AMQP_URL,
# KAIROS_NAMESPACE (default kstack), KAIROS_STACK_DIR (default /tmp/kairos-stack),
# KAIROS_WORKER_CAPACITY (default 32, the worker's own), KAIROS_HTTP_ADDR (default 127.0.0.1:8080),
# KAIROS_CALLBACK_SECRET (default: random per stack), KAIROS_STACK_DISPATCHERS
# (default 2; the third and later on metrics ports 9201, 9202, …). Other
# KAIROS_* settings in the environment (e.g. KAIROS_DISPATCH_PARTITIONED)
# reach every process.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${KAIROS_BIN:-target/release/kairos}
dir=${KAIROS_STACK_DIR:-/tmp/kairos-stack}
export KAIROS_DATABASE_URL=${KAIROS_DATABASE_URL:-mysql://root@127.0.0.1:3306/kairos_stack}
export KAIROS_REDIS_URL=${KAIROS_REDIS_URL:-redis://127.0.0.1:6379/0}
export KAIROS_AMQP_URL=${KAIROS_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}
export KAIROS_NAMESPACE=${KAIROS_NAMESPACE:-kstack}
export KAIROS_CALLBACK_ALLOW_PRIVATE=true KAIROS_HTTP_ALLOW_PRIVATE=true
# The relay refuses to start without a signing secret: one per stack.
export KAIROS_CALLBACK_SECRET=${KAIROS_CALLBACK_SECRET:-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')}
export KAIROS_LOG=${KAIROS_LOG:-warn}
http=${KAIROS_HTTP_ADDR:-127.0.0.1:8080}

start() { # name, metrics port, command...
  local name=$1 port=$2; shift 2
  KAIROS_METRICS_ADDR=127.0.0.1:$port "$@" >"$dir/$name.log" 2>&1 &
  echo $! >"$dir/$name.pid"
}

case ${1:-} in
up)
  [ -x "$bin" ] || { echo "no kairos binary at $bin (cargo build --release)" >&2; exit 2; }
  mkdir -p "$dir"
  case $KAIROS_DATABASE_URL in
  mysql://*)
    db=${KAIROS_DATABASE_URL##*/}
    mysql --protocol=TCP -h127.0.0.1 -uroot -e "CREATE DATABASE IF NOT EXISTS \`$db\`" ;;
  esac
  "$bin" migrate >"$dir/migrate.log" 2>&1
  key=$("$bin" keys create --tenant default --role operator | grep -Eo 'kai_[A-Za-z0-9_]+' | head -1)
  KAIROS_HTTP_ADDR=$http start api 9190 "$bin" api
  for i in $(seq 1 "${KAIROS_STACK_DISPATCHERS:-2}"); do
    port=$((i <= 2 ? 9190 + i : 9198 + i))
    start "dispatcher-$i" "$port" "$bin" dispatcher
  done
  KAIROS_WORKER_ID=worker-1 KAIROS_WORKER_CAPACITY=${KAIROS_WORKER_CAPACITY:-32} start worker-1 9193 "$bin" worker
  KAIROS_WORKER_ID=worker-2 KAIROS_WORKER_CAPACITY=${KAIROS_WORKER_CAPACITY:-32} start worker-2 9194 "$bin" worker
  start relay 9195 "$bin" callback-relay
  for _ in $(seq 1 100); do
    curl -fsS "http://$http/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -fsS "http://$http/readyz" >/dev/null || { echo "the API did not become ready; see $dir/api.log" >&2; exit 1; }
  # Every process must still be running: one that exited at start (a
  # missing setting) would otherwise leave a smaller stack measured.
  for f in "$dir"/*.pid; do
    kill -0 "$(cat "$f")" 2>/dev/null || { echo "$(basename "$f" .pid) exited; see $dir/$(basename "$f" .pid).log" >&2; exit 1; }
  done
  echo "url: http://$http"
  echo "key: $key"
  ;;
down)
  for f in "$dir"/*.pid; do
    [ -e "$f" ] || continue
    kill "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
  ;;
purge)
  for f in "$dir"/*.pid; do
    [ -e "$f" ] && { echo "the stack is still up: $0 down first" >&2; exit 1; }
  done
  redis-cli -u "$KAIROS_REDIS_URL" --scan --pattern "$KAIROS_NAMESPACE:*" |
    xargs -r -n 5000 redis-cli -u "$KAIROS_REDIS_URL" del >/dev/null
  # The namespace's queues (shared ones and every worker id's two) and its
  # exchanges (dispatch, reroute), all named `<namespace>.…`. AMQP cannot
  # list queues, and rabbitmqctl has no exchange deletion: the broker's own
  # function does it.
  command -v rabbitmqctl >/dev/null 2>&1 ||
    { echo "rabbitmqctl not found: cannot purge the namespace's queues and exchanges" >&2; exit 1; }
  vhost=${KAIROS_AMQP_URL##*/}
  vhost=${vhost%%\?*}
  case $vhost in "" | %2f | %2F) vhost=/ ;; esac
  ours() { awk -v p="$KAIROS_NAMESPACE." 'index($0, p) == 1'; }
  rabbitmqctl -q list_queues --no-table-headers -p "$vhost" name | ours |
    while IFS= read -r q; do rabbitmqctl -q delete_queue -p "$vhost" "$q" </dev/null >/dev/null; done
  rabbitmqctl -q list_exchanges --no-table-headers -p "$vhost" name | ours |
    while IFS= read -r x; do
      rabbitmqctl -q eval "rabbit_exchange:delete(rabbit_misc:r(<<\"$vhost\">>, exchange, <<\"$x\">>), false, <<\"stack.sh\">>)." </dev/null >/dev/null
    done
  left=$( (rabbitmqctl -q list_queues --no-table-headers -p "$vhost" name
           rabbitmqctl -q list_exchanges --no-table-headers -p "$vhost" name) | ours)
  [ -z "$left" ] || { echo "still on the broker: $left" >&2; exit 1; }
  ;;
*)
  echo "usage: $0 up|down|purge" >&2
  exit 2
  ;;
esac
