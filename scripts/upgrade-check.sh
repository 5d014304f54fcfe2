#!/usr/bin/env bash
# Upgrade check: a MariaDB database made and used by an earlier release is
# converted by this release's `kairos migrate`, reads back the same through
# the API, and its jobs (a pending one-shot, a fixed-rate job) still run.
#
#   KAIROS_PREV_BIN=/path/to/old/kairos scripts/upgrade-check.sh
#
# Build the earlier release with e.g. `git worktree add /tmp/prev <tag>` and
# `cargo build --bin kairos` there; this release is target/release/kairos.
# Uses the database kairos_upgrade (dropped first), Redis, RabbitMQ and
# 127.0.0.1:18090; needs curl, python3 and the mysql client.
set -euo pipefail
cd "$(dirname "$0")/.."
prev=${KAIROS_PREV_BIN:?set KAIROS_PREV_BIN to the earlier release binary}
export KAIROS_DATABASE_URL=mysql://root@127.0.0.1:3306/kairos_upgrade
export KAIROS_NAMESPACE=kupg KAIROS_HTTP_ADDR=127.0.0.1:18090 KAIROS_STACK_DIR=/tmp/kupg
mysql -h127.0.0.1 -uroot -e "DROP DATABASE IF EXISTS kairos_upgrade"
api=http://127.0.0.1:18090
echo "== earlier release up"
out=$(KAIROS_BIN="$prev" scripts/stack.sh up); echo "$out"
key=$(echo "$out" | sed -n 's/^key: //p')
# create BODY: the new job's id.
create() { curl -fsS -X POST $api/openapi/jobs -H "Authorization: Bearer $key" -H 'Content-Type: application/json' -d "$1" | python3 -c 'import sys,json;print(json.load(sys.stdin)["jobId"])'; }
# settle JOB TRIES: the job's status once it succeeded, or after TRIES polls 0.2 s apart.
settle() {
  local s
  for _ in $(seq 1 "$2"); do
    s=$(curl -fsS $api/openapi/jobs/$1 -H "Authorization: Bearer $key" | python3 -c 'import sys,json;print(json.load(sys.stdin)["status"])')
    [ "$s" = succeeded ] && break; sleep 0.2
  done
  echo "$s"
}
due=$(date -u -d '+75 seconds' +%Y-%m-%dT%H:%M:%S.000Z)
now_job=$(create '{"jobName":"before","jobHandler":"noop","params":{"n":[1,2,3]}}')
later_job=$(create "{\"jobName\":\"later\",\"jobHandler\":\"noop\",\"params\":{\"k\":\"v\"},\"triggerAt\":\"$due\"}")
every_job=$(create '{"jobName":"every","jobHandler":"noop","everyMs":5000}')
echo "before upgrade: immediate job $(settle "$now_job" 100)"
before=$(curl -fsS $api/openapi/jobs/$now_job -H "Authorization: Bearer $key")
echo "$before"
scripts/stack.sh down; sleep 1
echo "== stored by the earlier release:"
mysql -h127.0.0.1 -uroot kairos_upgrade -e "SELECT id, next_trigger_at, created_at FROM jobs; SELECT COUNT(*) AS executions FROM executions"
echo "== new release: kairos migrate"
target/release/kairos migrate
mysql -h127.0.0.1 -uroot kairos_upgrade -e "SELECT name, next_trigger_at, created_at, JSON_EXTRACT(params, '\$.n[2]') AS n2 FROM jobs; SELECT column_name, column_type FROM information_schema.columns WHERE table_schema='kairos_upgrade' AND table_name='jobs' AND column_name IN ('created_at','next_trigger_at','params')"
echo "== new release up"
out=$(KAIROS_BIN=target/release/kairos scripts/stack.sh up); echo "$out"
after=$(curl -fsS $api/openapi/jobs/$now_job -H "Authorization: Bearer $key")
echo "$after"
python3 - "$before" "$after" <<'PY'
import json,sys
b,a=json.loads(sys.argv[1]),json.loads(sys.argv[2])
for k in ("createdAt","updatedAt","status","params"):
    assert b.get(k)==a.get(k),(k,b.get(k),a.get(k))
print("the job reads back the same after the upgrade:", {k:a.get(k) for k in ("createdAt","status","params")})
PY
echo "waiting for the one-shot due at $due and the fixed-rate job"
echo "one-shot created before the upgrade: $(settle "$later_job" 600)"
curl -fsS "$api/openapi/jobs/$every_job/executions?limit=100" -H "Authorization: Bearer $key" | python3 -c 'import sys,json;d=json.load(sys.stdin);items=d.get("items",d);print("fixed-rate executions:",len(items),"statuses:",sorted({i["status"] for i in items}))'
new_job=$(create '{"jobName":"after","jobHandler":"noop"}')
echo "job created after the upgrade: $(settle "$new_job" 100)"
scripts/stack.sh down
