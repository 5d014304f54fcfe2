#!/usr/bin/env bash
# Compares the working tree's performance with a base revision's, on the
# same box in alternating runs, and prints the ratios (docs/performance.md,
# "Comparing with a base revision"). Run it before merging anything on the
# hot path; CI runs a short form (--ci) that fails on a large regression.
#
#   scripts/bench-compare.sh [options] BASE_REF
#
# The base is built in release beside the tree: a git worktree of BASE_REF
# in the cache directory with a target dir of its own, its binary kept per
# commit, so a second comparison with the same base builds nothing. The
# tree's own binary is `cargo build --release --bin kairos` (or --head-bin).
# Both servers are measured by the tree's bench client (`kairos bench
# --url`), so only the server differs between the two sides.
#
# Workloads, each run alternately on base and head, in pairs:
#   burst     embedded: `kairos dev` on a fresh SQLite file, `bench burst`;
#             figure: last job finished after the due time (ms)
#   create    services: scripts/stack.sh (own namespace, database and port)
#             with each binary, `bench create -c 32`; figure: first create →
#             last succeeded (jobs/s). Only with --services, and only when
#             MariaDB, Redis and RabbitMQ answer.
#   reads     HOOK: the 1,000,000-row read benchmark. Runs only when the
#             head's `kairos bench --help` lists a `reads` workload; the
#             command it runs is READS_CMD below (edit it once that mode
#             exists, keeping the figure's name in READS_FIGURE).
#
# Options:
#   --pairs N          alternating pairs per workload (default 5)
#   --burst-jobs N     jobs in each burst (default 30000)
#   --burst-batch N    jobs per create request in the burst (default 1000:
#                      the creates take seconds, the drain is measured)
#   --create-jobs N    jobs per services create run (default 10000)
#   --services         also compare the services create rate
#   --reads            also run the reads hook
#   --max-ratio R      exit 1 when a median is more than R times worse on
#                      head than on base (default: report only)
#   --head-bin PATH    use this binary as head instead of building the tree
#   --ci               the CI form: --pairs 5 --burst-jobs 10000
#                      --max-ratio 1.5, bursts only
# Settings (environment): KAIROS_BENCH_CACHE (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/kairos-bench): where base worktrees,
# their target dir and binaries are kept.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=$(pwd)

pairs=5 burst_jobs=30000 burst_batch=1000 create_jobs=10000
services=0 reads=0 max_ratio="" head_bin="" base_ref=""
while [ $# -gt 0 ]; do
  case $1 in
  --pairs) pairs=$2; shift 2 ;;
  --burst-jobs) burst_jobs=$2; shift 2 ;;
  --burst-batch) burst_batch=$2; shift 2 ;;
  --create-jobs) create_jobs=$2; shift 2 ;;
  --services) services=1; shift ;;
  --reads) reads=1; shift ;;
  --max-ratio) max_ratio=$2; shift 2 ;;
  --head-bin) head_bin=$2; shift 2 ;;
  --ci) pairs=5 burst_jobs=10000 max_ratio=1.5; shift ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  *) base_ref=$1; shift ;;
  esac
done
[ -n "$base_ref" ] || { echo "usage: $0 [options] BASE_REF (see --help)" >&2; exit 2; }

cache=${KAIROS_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kairos-bench}
mkdir -p "$cache/bin"
work=$(mktemp -d)
cleanup() {
  for f in "$work"/*.pid; do
    [ -e "$f" ] || continue
    kill "$(cat "$f")" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

log() { printf '== %s\n' "$*" >&2; }

# --- the two binaries -------------------------------------------------------

base_sha=$(git rev-parse --verify "$base_ref^{commit}") || { echo "no commit $base_ref" >&2; exit 2; }
base_bin=$cache/bin/kairos-$base_sha
if [ ! -x "$base_bin" ]; then
  src=$cache/src-$base_sha
  log "building the base $base_ref ($base_sha) in release (once per commit)"
  [ -d "$src" ] || git worktree add --detach "$src" "$base_sha" >&2
  # One target dir for every base: a new base rebuilds only what changed.
  (cd "$src" && CARGO_TARGET_DIR=$cache/target cargo build --release --bin kairos >&2)
  cp "$cache/target/release/kairos" "$base_bin.tmp" && mv "$base_bin.tmp" "$base_bin"
  git worktree remove --force "$src" >&2 || true
fi
if [ -z "$head_bin" ]; then
  log "building the working tree in release"
  cargo build --release --bin kairos >&2
  target_dir=${CARGO_TARGET_DIR:-target}
  case $target_dir in /*) ;; *) target_dir="$tree/$target_dir" ;; esac
  head_bin=$target_dir/release/kairos
fi
# The head binary is copied: a build during the comparison must not change it.
cp "$head_bin" "$work/kairos-head"
head_bin=$work/kairos-head
client=$head_bin

# --- measuring --------------------------------------------------------------

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# figure FILE NAME: the value of the named figure in a bench JSON report.
figure() {
  python3 - "$1" "$2" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
for f in report["figures"]:
    if f["name"] == sys.argv[2]:
        print(f["value"])
        sys.exit(0)
sys.exit("no figure %r in %s" % (sys.argv[2], sys.argv[1]))
PY
}

# burst BIN: one embedded burst on a fresh `BIN dev`; prints the figure.
burst() {
  local bin=$1 dir port pid key
  dir=$(mktemp -d "$work/dev.XXXX")
  port=$(free_port)
  KAIROS_DATABASE_URL="sqlite://$dir/bench.db" KAIROS_HTTP_ADDR="127.0.0.1:$port" \
    KAIROS_LOG=warn \
    KAIROS_API_CREATE_RATE=1000000000 KAIROS_API_CREATE_BURST=1000000000 \
    KAIROS_API_MAX_LIVE_JOBS=1000000000 \
    "$bin" dev >"$dir/dev.out" 2>"$dir/dev.log" &
  pid=$!
  echo "$pid" >"$work/dev.pid"
  for _ in $(seq 1 300); do
    [ -s "$dir/bench.db.key" ] && break
    sleep 0.1
  done
  key=$(cat "$dir/bench.db.key" 2>/dev/null) || { echo "kairos dev wrote no key; see $dir/dev.log" >&2; return 1; }
  "$client" bench burst -n "$burst_jobs" --batch "$burst_batch" -c 8 \
    --lead-ms $((3000 + burst_jobs / 20)) \
    --url "http://127.0.0.1:$port" --key "$key" --json "$dir/report.json" >"$dir/bench.out" 2>&1 \
    || { cat "$dir/bench.out" >&2; return 1; }
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -f "$work/dev.pid"
  figure "$dir/report.json" "last finished after the due time"
  rm -rf "$dir"
}

# create BIN: one services create run on a fresh stack of BIN; prints jobs/s.
create() {
  local bin=$1 dir port out key db=kairos_bench_compare ns
  dir=$(mktemp -d "$work/stack.XXXX")
  port=$(free_port)
  ns=kbc$$
  mysql --protocol=TCP -h127.0.0.1 -uroot -e "DROP DATABASE IF EXISTS \`$db\`" >&2
  export KAIROS_BIN=$bin KAIROS_STACK_DIR=$dir KAIROS_NAMESPACE=$ns \
    KAIROS_HTTP_ADDR=127.0.0.1:$port KAIROS_STACK_METRICS_PORT=19190 \
    KAIROS_DATABASE_URL=mysql://root@127.0.0.1:3306/$db
  # The tree's stack script runs either binary (it falls back to an admin
  # key for a base without the operator role).
  out=$(scripts/stack.sh up 2>&1) || { echo "$out" >&2; scripts/stack.sh down >/dev/null 2>&1; return 1; }
  key=$(echo "$out" | sed -n 's/^key: //p')
  "$client" bench create -n "$create_jobs" -c 32 --url "http://127.0.0.1:$port" --key "$key" \
    --json "$dir/report.json" >"$dir/bench.out" 2>&1 || { cat "$dir/bench.out" >&2; scripts/stack.sh down >&2; return 1; }
  scripts/stack.sh down >/dev/null 2>&1 || true
  scripts/stack.sh purge >/dev/null 2>&1 || true
  unset KAIROS_BIN KAIROS_STACK_DIR KAIROS_NAMESPACE KAIROS_HTTP_ADDR KAIROS_DATABASE_URL KAIROS_STACK_METRICS_PORT
  figure "$dir/report.json" "jobs/s, first create → last succeeded"
  rm -rf "$dir"
}

# HOOK for the 1,000,000-row read benchmark (issue #43, the reads part):
# once `kairos bench` has that mode, reads BIN runs it once against a
# deployment of BIN and prints its figure, and --reads compares it. Until
# then --reads says it was skipped (see the end of this script).
READS_MODE=reads
reads() {
  echo "the reads hook is not wired to a bench mode yet" >&2
  return 1
}

median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

status=0
# compare NAME UNIT WORSE FN: runs FN alternately on base and head (which
# goes first alternates too), prints both medians and the slowdown ratio
# (head ÷ base for a time, base ÷ head for a rate: above 1 is worse).
compare() {
  local name=$1 unit=$2 worse=$3 fn=$4 i b h
  : >"$work/base.txt"; : >"$work/head.txt"
  for i in $(seq 1 "$pairs"); do
    if [ $((i % 2)) -eq 1 ]; then
      b=$($fn "$base_bin"); h=$($fn "$head_bin")
    else
      h=$($fn "$head_bin"); b=$($fn "$base_bin")
    fi
    echo "$b" >>"$work/base.txt"; echo "$h" >>"$work/head.txt"
    log "$name pair $i: base $b, head $h $unit"
  done
  local mb mh ratio
  mb=$(median <"$work/base.txt"); mh=$(median <"$work/head.txt")
  if [ "$worse" = higher ]; then
    ratio=$(awk -v h="$mh" -v b="$mb" 'BEGIN {printf "%.2f", h / b}')
  else
    ratio=$(awk -v h="$mh" -v b="$mb" 'BEGIN {printf "%.2f", b / h}')
  fi
  printf '%-28s base %-10s head %-10s %-7s slowdown %s  (base: %s; head: %s)\n' \
    "$name" "$mb" "$mh" "$unit" "$ratio" "$(paste -sd' ' "$work/base.txt")" "$(paste -sd' ' "$work/head.txt")"
  if [ -n "$max_ratio" ] && awk -v r="$ratio" -v m="$max_ratio" 'BEGIN {exit !(r > m)}'; then
    echo "REGRESSION: $name is ${ratio}× worse on head than on $base_ref (limit ${max_ratio}×)" >&2
    status=1
  fi
}

echo "base $base_ref ($base_sha), head $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' + changes'); $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
compare "embedded burst -n $burst_jobs" ms higher burst
if [ "$services" = 1 ]; then
  if mysqladmin --protocol=TCP -h127.0.0.1 -uroot status >/dev/null 2>&1 \
    && redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 \
    && (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; then
    compare "services create -n $create_jobs" jobs/s lower create
  else
    echo "services create: skipped (MariaDB, Redis or RabbitMQ not answering)"
  fi
fi
if [ "$reads" = 1 ]; then
  if "$client" bench --help | grep -qw "$READS_MODE"; then
    compare "reads (1,000,000 rows)" ms higher reads
  else
    echo "reads: skipped (this tree's bench has no '$READS_MODE' mode yet)"
  fi
fi
exit $status
