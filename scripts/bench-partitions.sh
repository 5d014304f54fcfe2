#!/usr/bin/env bash
# Dispatch capacity against the number of partitioned dispatchers: for each
# count (default 1 2 4), a fresh services stack (scripts/stack.sh) whose
# dispatchers run with KAIROS_DISPATCH_PARTITIONED=true and are each held to
# KAIROS_DISPATCH_MAX_RATE claims a second, and a `kairos bench burst` of
# JOBS × count jobs due at one instant (each run drains for about the same
# time, so the up to 2 s of claims made ahead of a burst weigh the same in
# each): the drain rate from the due time is what the dispatchers together
# sustain. Prints one line per count.
#
#   scripts/bench-partitions.sh [RATE] [JOBS_PER_DISPATCHER] [COUNTS...]
#   scripts/bench-partitions.sh 100 6000 1 2 4
#
# The bench's own output is kept in $KAIROS_STACK_DIR/partitions/.
# Settings as for scripts/stack.sh (KAIROS_BIN, the service URLs); each count
# uses its own database kairos_parts_<count> (dropped first) and namespace.
set -euo pipefail
cd "$(dirname "$0")/.."

rate=${1:-100}
jobs=${2:-6000}
shift $(( $# > 2 ? 2 : $# ))
counts=${*:-1 2 4}
bin=${KAIROS_BIN:-target/release/kairos}
out=${KAIROS_STACK_DIR:-/tmp/kairos-stack}/partitions
mkdir -p "$out"

held() { # total partitions the running dispatchers say they hold
  local total=0 n port v
  for n in $(seq 1 "$1"); do
    port=$((n <= 2 ? 9190 + n : 9198 + n))
    v=$(curl -fsS "http://127.0.0.1:$port/metrics" 2>/dev/null |
      awk '$1 == "kairos_dispatcher_partitions_owned" {print int($2)}')
    total=$((total + ${v:-0}))
  done
  echo "$total"
}

for k in $counts; do
  db=kairos_parts_$k
  mysql --protocol=TCP -h127.0.0.1 -uroot -e "DROP DATABASE IF EXISTS \`$db\`"
  export KAIROS_DATABASE_URL=mysql://root@127.0.0.1:3306/$db
  export KAIROS_NAMESPACE=kparts$k
  export KAIROS_DISPATCH_PARTITIONED=true KAIROS_DISPATCH_MAX_RATE=$rate
  export KAIROS_STACK_DISPATCHERS=$k
  up=$(scripts/stack.sh up)
  url=$(echo "$up" | awk '/^url:/ {print $2}')
  key=$(echo "$up" | awk '/^key:/ {print $2}')
  for _ in $(seq 1 300); do
    [ "$(held "$k")" = 256 ] && break
    sleep 0.1
  done
  n=$((jobs * k))
  "$bin" bench burst -n "$n" -c 16 --batch 1000 --url "$url" --key "$key" \
    --json "$out/burst-$k.json" >"$out/burst-$k.txt" 2>&1 || true
  scripts/stack.sh down
  scripts/stack.sh purge
  rate_seen=$(python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))
print(next((round(f["value"]) for f in r["figures"] if f["name"] == "jobs/s from the due time"), "?"))' "$out/burst-$k.json" 2>/dev/null || echo "?")
  echo "dispatchers=$k max_rate=$rate jobs=$n drain=${rate_seen} jobs/s (ideal $((k * rate)))"
done
