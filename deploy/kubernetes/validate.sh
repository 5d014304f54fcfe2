#!/usr/bin/env bash
# Checks every manifest listed in kustomization.yaml against the Kubernetes
# OpenAPI schemas, offline: the PyPI package kubernetes-validate ships the
# schemas of every release it supports, and is installed once into a venv
# in a cache directory. Strict: an unknown field is an error, as is a kind
# with no schema. Validated against the oldest Kubernetes these manifests
# support and the newest the package knows. The examples in examples/ are
# checked the same way. Every Kairos container must name the placeholder
# image that kustomization.yaml's `images:` entry replaces (never
# `kairos:latest`, which would pull an unrelated public image), and every
# example the placeholder of its own. Exits non-zero naming the file, the
# resource and the problem.
#
#   deploy/kubernetes/validate.sh
#   deploy/kubernetes/validate.sh --deployable [DIR]
#
# --deployable: before applying, checks what `kubectl kustomize DIR`
# (default: this directory, or an overlay of yours) renders: no placeholder
# image (registry.invalid) and no CHANGE-ME value may be left.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if [ "${1:-}" = "--deployable" ]; then
  dir=${2:-$here}
  command -v kubectl >/dev/null 2>&1 || { echo "validate.sh --deployable needs kubectl" >&2; exit 2; }
  rendered=$(kubectl kustomize "$dir")
  status=0
  if grep -n 'image: *registry\.invalid/' <<<"$rendered" >&2; then
    echo "$dir: images above still name the placeholder registry.invalid/...: set kustomization.yaml's images: entry" >&2
    status=1
  fi
  # Secret values are rendered base64-encoded under data:.
  if grep -q 'CHANGE-ME' <<<"$rendered" || grep -Eo '^  [A-Z_]+: [A-Za-z0-9+/=]+$' <<<"$rendered" |
      awk '{print $2}' | while read -r v; do base64 -d <<<"$v" 2>/dev/null; echo; done | grep -q 'CHANGE-ME'; then
    echo "$dir: a value still holds the placeholder CHANGE-ME: put the real URLs and secret in kairos-secrets" >&2
    status=1
  fi
  [ "$status" -eq 0 ] && echo "$dir: no placeholder left"
  exit "$status"
fi

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

# The image every Kairos container names, replaced by kustomization.yaml's
# `images:` entry; an example names registry.invalid/<its own>:SET-ME.
IMAGE = "registry.invalid/kairos:SET-ME"
examples_dir = os.path.join(here, "examples")
examples = sorted(
    os.path.join("examples", n)
    for n in (os.listdir(examples_dir) if os.path.isdir(examples_dir) else [])
    if n.endswith((".yaml", ".yml"))
)


def containers(doc):
    pod = ((doc.get("spec") or {}).get("template") or {}).get("spec") or {}
    for key in ("initContainers", "containers"):
        for c in pod.get(key) or []:
            yield c


def check_images(name, what, doc, example):
    for c in containers(doc):
        image = c.get("image", "")
        at = f"{name} {what} container {c.get('name', '?')}"
        if image.endswith(":latest") or ":" not in image.rsplit("/", 1)[-1]:
            fail(at, f"image {image!r} has no pinned tag (`latest` pulls whatever is newest, or another image)")
        if not example and image != IMAGE:
            fail(at, f"image {image!r} is not the placeholder {IMAGE} that kustomization.yaml's images: entry replaces")
        if example and not (image.startswith("registry.invalid/") and image.endswith(":SET-ME")):
            fail(at, f"image {image!r}: an example names a placeholder registry.invalid/<name>:SET-ME")


checked = 0
for name in list(resources) + examples:
    example = name.startswith("examples/")
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
        check_images(name, what, doc, example)
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
