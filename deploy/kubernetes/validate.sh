#!/usr/bin/env bash
# Checks every manifest listed in kustomization.yaml against the Kubernetes
# OpenAPI schemas, offline: the PyPI package kubernetes-validate ships the
# schemas of every release it supports, and is installed once into a venv
# in a cache directory. Strict: an unknown field is an error, as is a kind
# with no schema. Validated against the oldest Kubernetes these manifests
# support and the newest the package knows. Exits non-zero naming the file,
# the resource and the problem.
#
#   deploy/kubernetes/validate.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

version=1.37.0
cache=${KAIROS_CI_CACHE:-$HOME/.cache/kairos-ci}
venv=$cache/kubernetes-validate-$version
if ! "$venv/bin/python" -c 'import kubernetes_validate' >/dev/null 2>&1; then
  echo "installing kubernetes-validate $version (PyPI) into $venv"
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$version"
fi

"$venv/bin/python" - "$here" <<'PY'
import os
import sys

import kubernetes_validate as kv
import yaml

# The oldest release the manifests are meant for, and the newest known.
VERSIONS = ["1.30.0", kv.latest_version()]

here = sys.argv[1]
failures = []


def fail(where, problem):
    failures.append(f"{where}: {problem}")


kustomization = os.path.join(here, "kustomization.yaml")
with open(kustomization) as f:
    resources = (yaml.safe_load(f) or {}).get("resources") or []
if not resources:
    fail("kustomization.yaml", "lists no resources")

# A manifest left out of kustomization.yaml would be neither applied nor
# checked.
listed = set(resources)
for name in sorted(os.listdir(here)):
    if name.endswith((".yaml", ".yml")) and name != "kustomization.yaml" and name not in listed:
        fail(name, "is not listed in kustomization.yaml's resources")

checked = 0
for name in resources:
    path = os.path.join(here, name)
    if not os.path.isfile(path):
        fail("kustomization.yaml", f"resource {name} does not exist")
        continue
    try:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
    except yaml.YAMLError as e:
        fail(name, f"is not valid YAML: {e}")
        continue
    if not docs:
        fail(name, "holds no resource")
    for doc in docs:
        if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
            fail(name, "a document without apiVersion and kind")
            continue
        what = f"{doc['kind']}/{(doc.get('metadata') or {}).get('name', '?')}"
        for version in VERSIONS:
            try:
                kv.validate(doc, version, strict=True)
            except kv.ValidationError as e:
                path_ = ".".join(str(p) for p in e.path) or "(top level)"
                fail(f"{name} {what}", f"{path_}: {e.message} (Kubernetes {version})")
            except kv.SchemaNotFoundError:
                fail(f"{name} {what}", f"no schema for {doc['apiVersion']} {doc['kind']} in Kubernetes {version}")
        checked += 1

if failures:
    for line in failures:
        print(f"deploy/kubernetes/{line}", file=sys.stderr)
    sys.exit(1)
print(f"{checked} Kubernetes resources valid against {', '.join(VERSIONS)}")
PY
