#!/usr/bin/env bash
# Python worker SDK: a fresh venv, the package with its test extras, pytest.
# The end-to-end tests need MariaDB, Redis and RabbitMQ (the KAIROS_TEST_*_URL
# variables, defaults as in the repo README) and a built `kairos` binary
# (KAIROS_BIN, default ../../target/debug/kairos). Exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")"

venv=${KAIROS_PY_VENV:-.venv}
python=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -e '.[test]'

out=$(mktemp)
trap 'rm -f "$out"' EXIT
set +e
"$venv/bin/python" -m pytest -q -p no:cacheprovider "$@" 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
set -e
echo "python sdk: $(grep -E '^=* *[0-9]+ (passed|failed|error)|^[0-9]+ (passed|failed)' "$out" | tail -1)"
exit "$status"
