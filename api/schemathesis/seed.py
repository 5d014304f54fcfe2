"""Seeds a fresh `kairos dev` with data the generated requests can reach, and
prints the schemathesis config (TOML) that makes them use it.

Generated ids almost never name a real job, execution or workflow, so
without this the routes under /openapi/jobs/{id}, /openapi/executions/{id}
and /openapi/workflows/{id} would only ever answer 404. The config draws `{id}` from the seeded ids half of the time (the
other half stays random, so 404s are still exercised).

Usage: seed.py BASE_URL KEY > schemathesis.toml
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from typing import Any

base, key = sys.argv[1], sys.argv[2]


def call(method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read() or b"null")


def create(body: dict[str, Any]) -> str:
    return str(call("POST", "/openapi/jobs", body)["jobId"])


jobs = [
    # Runs at once and succeeds: an execution with a (refused) callback.
    create({"jobName": "seed-noop", "jobHandler": "noop", "params": {"n": 1},
            "callbackUrl": "http://127.0.0.1:9/hook"}),
    # Fails: the http handler refuses a loopback URL (private not allowed).
    create({"jobName": "seed-http", "jobHandler": "http", "params": {"url": "http://127.0.0.1:9/"},
            "maxAttempts": 1}),
    # Schedules that stay: cron, fixed rate, one paused.
    create({"jobName": "seed-cron", "jobHandler": "noop", "cronExpr": "0 0 * * * *", "timezone": "UTC"}),
    create({"jobName": "seed-rate", "jobHandler": "sleep", "params": {"ms": 1}, "everyMs": 3600000}),
    create({"jobName": "seed-later", "jobHandler": "noop", "triggerAt": "2099-01-01T00:00:00Z"}),
]
call("POST", f"/openapi/jobs/{jobs[3]}/pause")

# Workflows for /openapi/workflows/{id}: one active on a far schedule (PATCH,
# pause, trigger), one paused (resume; its trigger answers 409).
workflows = [
    str(call("POST", "/openapi/workflows", {
        "name": f"seed-wf-{i}", "everyMs": 3600000, "callbackUrl": "http://127.0.0.1:9/runs",
        "nodes": [{"id": "a", "handler": "noop"}, {"id": "b", "handler": "noop"}],
        "edges": [{"from": "a", "to": "b"}]})["workflow"]["id"])
    for i in range(2)
]
call("POST", f"/openapi/workflows/{workflows[1]}/pause")

executions: list[str] = []
deadline = time.monotonic() + 30
for job in jobs[:2]:
    while True:
        detail = call("GET", f"/openapi/jobs/{job}")
        if detail["status"] in ("succeeded", "failed") and detail["lastExecution"]:
            executions.append(detail["lastExecution"]["executionId"])
            break
        if time.monotonic() > deadline:
            sys.exit(f"seed: job {job} did not finish: {detail}")
        time.sleep(0.1)
# The refused callback goes dead (a refusal is not retried): redeliverable.
while not any(c["state"] == "dead" for c in call("GET", f"/openapi/executions/{executions[0]}/callbacks")["items"]):
    if time.monotonic() > deadline:
        sys.exit("seed: the callback did not settle")
    time.sleep(0.1)


def toml_list(values: list[str]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


print(f"""[dictionaries.jobs]
values = {toml_list(jobs)}

[dictionaries.executions]
values = {toml_list(executions)}

[dictionaries.workflows]
values = {toml_list(workflows)}

[[operations]]
include-path-regex = "^/openapi/jobs/\\\\{{id\\\\}}"
parameters = {{ "path.id" = {{ dictionary = "jobs", probability = 0.5 }} }}

[[operations]]
include-path-regex = "^/openapi/executions/\\\\{{id\\\\}}"
parameters = {{ "path.id" = {{ dictionary = "executions", probability = 0.5 }} }}

[[operations]]
include-path-regex = "^/openapi/workflows/\\\\{{id\\\\}}"
parameters = {{ "path.id" = {{ dictionary = "workflows", probability = 0.5 }} }}
""")
