#!/usr/bin/env bash
# Where a services `create` run spends the box: runs `kairos bench create`
# against the stack `scripts/stack.sh up` started, and prints the CPU time
# each process used per job, from /proc/<pid>/stat, between the start of
# the bench and the moment the dispatchers have applied every job's success
# (the bench's own read-back of the results afterwards is not counted).
# The figures of docs/performance.md's per-process tables come from this.
#
#   scripts/stack.sh up                       # prints the URL and a key
#   KAIROS_BENCH_KEY=kai_… scripts/cpu-per-job.sh 10000
#
# Settings (environment): KAIROS_BIN (default target/release/kairos),
# KAIROS_STACK_DIR (default /tmp/kairos-stack), KAIROS_HTTP_ADDR (default
# 127.0.0.1:8080), KAIROS_BENCH_KEY. MariaDB, RabbitMQ and Redis are
# counted when they run on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=${1:?usage: $0 JOBS}
bin=${KAIROS_BIN:-target/release/kairos}
dir=${KAIROS_STACK_DIR:-/tmp/kairos-stack}
url=http://${KAIROS_HTTP_ADDR:-127.0.0.1:8080}
[ -x "$bin" ] || { echo "no kairos binary at $bin (cargo build --release)" >&2; exit 2; }
[ -e "$dir/api.pid" ] || { echo "no stack in $dir (scripts/stack.sh up)" >&2; exit 2; }

# Dispatcher metrics ports, as scripts/stack.sh assigns them.
succeeded() {
  local total=0 port n
  for port in 9191 9192; do
    n=$(curl -fsS "http://127.0.0.1:$port/metrics" 2>/dev/null |
      awk '/^kairos_results_applied_total\{outcome="succeeded"\}/ {print int($2)}')
    total=$((total + ${n:-0}))
  done
  echo "$total"
}
# utime + stime, in clock ticks.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# Context switches (voluntary and not) of every thread of a process: each
# hop of a job between processes wakes one, so they count the hops a change
# saves even when the box's drifting speed hides the CPU time it saves.
switches() {
  cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s + 0}'
}

declare -A pid before cs_before cs_after
for f in "$dir"/*.pid; do pid[$(basename "$f" .pid)]=$(cat "$f"); done
for name in mariadbd mysqld redis-server; do
  p=$(pgrep -x "$name" | head -1 || true)
  [ -n "$p" ] && pid[$name]=$p
done
p=$(pgrep -f beam.smp | head -1 || true)
[ -n "$p" ] && pid[rabbitmq]=$p

start=$(succeeded)
for k in "${!pid[@]}"; do
  before[$k]=$(ticks "${pid[$k]}")
  cs_before[$k]=$(switches "${pid[$k]}")
done
box_before=$(awk '/^ctxt/ {print $2}' /proc/stat)
out=$(mktemp)
"$bin" bench create -n "$jobs" -c 32 --url "$url" >"$out" 2>&1 &
bench=$!
bench_ticks=0
while kill -0 "$bench" 2>/dev/null; do
  t=$(ticks "$bench")
  [ "$t" != 0 ] && bench_ticks=$t
  [ "$(succeeded)" -ge $((start + jobs)) ] && break
  sleep 0.25
done
declare -A after
for k in "${!pid[@]}"; do
  after[$k]=$(ticks "${pid[$k]}")
  cs_after[$k]=$(switches "${pid[$k]}")
done
box_after=$(awk '/^ctxt/ {print $2}' /proc/stat)
wait "$bench" || { cat "$out"; exit 1; }
cat "$out"
rm -f "$out"

hz=$(getconf CLK_TCK)
per_job() { echo $(($1 * 1000000 / hz / jobs)); }
# Hundredths per job, printed as a decimal.
hundredths() { local h=$(($1 * 100 / jobs)); printf '%d.%02d' $((h / 100)) $((h % 100)); }
total=0
echo "CPU per job (µs), and context switches per job:"
for k in $(printf '%s\n' "${!pid[@]}" | sort); do
  us=$(per_job $((after[$k] - before[$k])))
  total=$((total + us))
  printf '  %-16s %6d %8s\n' "$k" "$us" "$(hundredths $((cs_after[$k] - cs_before[$k])))"
done
us=$(per_job "$bench_ticks")
total=$((total + us))
printf '  %-16s %6d\n' bench "$us"
printf '  %-16s %6d %8s  (switches: the whole box)\n' total "$total" "$(hundredths $((box_after - box_before)))"
