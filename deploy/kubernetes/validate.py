#!/usr/bin/env python3
"""Renders every kustomization under deploy/kubernetes and validates it offline.

    python3 deploy/kubernetes/validate.py      # in a venv with kubernetes-validate

1. `kubectl kustomize DIR` for the overlays and the agent-sandbox example;
2. each rendered object is checked with kubernetes-validate (the Kubernetes OpenAPI schemas
   it ships; no cluster), strictly: an unknown or misspelt field fails;
3. custom resources have no schema there: they are reported as SKIPPED, by name. The
   SandboxTemplate's embedded pod spec and network policy are standard types, so they are
   checked as a Pod and a NetworkPolicy of their own.
Exits 1 on any failure.
"""

import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import yaml

HERE = Path(__file__).resolve().parent
KUSTOMIZATIONS = ["overlays/dev", "overlays/prod", "agent-sandbox"]
# Groups of custom resources (no schema in kubernetes-validate).
CRD_GROUPS = ("agents.x-k8s.io", "extensions.agents.x-k8s.io")


def check(where, obj):
    kind, name = obj.get("kind"), obj.get("metadata", {}).get("name")
    try:
        version = kubernetes_validate.validate(
            obj, kubernetes_validate.latest_version(), strict=True
        )
    except kubernetes_validate.ValidationError as e:
        print(f"FAIL  {where}: {kind}/{name}: {e.message} at {'.'.join(map(str, e.path))}")
        return False
    print(f"ok    {where}: {kind}/{name} (Kubernetes {version})")
    return True


def embedded(obj):
    """The standard objects inside a SandboxTemplate, checked on their own."""
    spec = obj.get("spec", {})
    name = obj["metadata"]["name"]
    pod = spec.get("podTemplate", {})
    yield {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"{name}-pod-template", **pod.get("metadata", {})},
           "spec": pod.get("spec", {})}
    if "networkPolicy" in spec:
        yield {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
               "metadata": {"name": f"{name}-network-policy"},
               "spec": {"podSelector": {}, **spec["networkPolicy"]}}


def main():
    ok = True
    for rel in KUSTOMIZATIONS:
        rendered = subprocess.run(
            ["kubectl", "kustomize", str(HERE / rel)], capture_output=True, text=True
        )
        if rendered.returncode != 0:
            print(f"FAIL  {rel}: kubectl kustomize: {rendered.stderr.strip()}")
            ok = False
            continue
        for obj in yaml.safe_load_all(rendered.stdout):
            if not obj:
                continue
            group = obj.get("apiVersion", "").rpartition("/")[0]
            if group in CRD_GROUPS:
                kind, name = obj["kind"], obj["metadata"]["name"]
                print(f"SKIP  {rel}: {kind}/{name}: custom resource ({obj['apiVersion']}), "
                      "no schema in kubernetes-validate; its standard parts follow")
                for part in embedded(obj) if kind == "SandboxTemplate" else []:
                    ok &= check(f"{rel} ({kind}/{name})", part)
                continue
            ok &= check(rel, obj)
    if not ok:
        sys.exit(1)
    print("manifests: all rendered and valid")


if __name__ == "__main__":
    main()
