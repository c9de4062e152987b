"""deploy/k8s rendered by `kubectl kustomize` and read as data: workloads, their pods, containers and environment.

The policy tests use it, and so can a test that runs the rendered Deployments as local processes.
"""

from __future__ import annotations

import copy
import functools
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
OVERLAYS = {"base": K8S / "base", "dev": K8S / "overlays" / "dev", "production": K8S / "overlays" / "production"}
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Job")

Obj = dict[str, Any]


def kubectl() -> str:
    path = shutil.which("kubectl")
    assert path, "kubectl is required (Debian's `kubectl` package; .ci/run installs it)"
    return path


def render_dir(directory: Path) -> list[Obj]:
    """`kubectl kustomize DIRECTORY`, as objects."""
    out = subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True, text=True)
    assert out.returncode == 0, f"kubectl kustomize {directory} failed: {out.stderr.strip()}"
    return [obj for obj in yaml.safe_load_all(out.stdout) if obj]


@functools.cache
def _rendered(overlay: str) -> tuple[Obj, ...]:
    return tuple(render_dir(OVERLAYS[overlay]))


def render(overlay: str) -> list[Obj]:
    """A fresh copy of the overlay's rendered objects (callers may change it)."""
    return copy.deepcopy(list(_rendered(overlay)))


def named(objects: list[Obj], kind: str, name: str) -> Obj:
    [found] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def workloads(objects: list[Obj]) -> Iterator[Obj]:
    return (o for o in objects if o["kind"] in WORKLOAD_KINDS)


def pod_spec(workload: Obj) -> Obj:
    return workload["spec"]["template"]["spec"]


def containers(workload: Obj) -> list[Obj]:
    spec = pod_spec(workload)
    return [*spec.get("initContainers", []), *spec["containers"]]


def pods(objects: list[Obj]) -> list[tuple[str, dict[str, str], set[str | int]]]:
    """Every pod the objects make: (owner name, labels, container ports by name and number). A
    CloudNativePG Cluster makes instance pods labelled `cnpg.io/cluster` (postgres 5432, the instance
    manager's status 8000, the exporter `metrics` 9187), which its operator creates, not these manifests."""
    found: list[tuple[str, dict[str, str], set[str | int]]] = []
    for workload in workloads(objects):
        ports: set[str | int] = set()
        for container in containers(workload):
            for port in container.get("ports", []):
                ports |= {port["containerPort"], *([port["name"]] if "name" in port else [])}
        found.append((workload["metadata"]["name"], workload["spec"]["template"]["metadata"]["labels"], ports))
    for cluster in (o for o in objects if o["kind"] == "Cluster"):
        labels = {"cnpg.io/cluster": cluster["metadata"]["name"]}
        found.append((cluster["metadata"]["name"], labels, {5432, "postgresql", 8000, "status", 9187, "metrics"}))
    return found


def selects(selector: Obj | None, labels: dict[str, str]) -> bool:
    """A label selector (matchLabels and matchExpressions) matches `labels`; an empty one matches all."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def environment(objects: list[Obj], container: Obj) -> dict[str, str]:
    """A container's environment as the kubelet builds it: its envFrom ConfigMaps, then its env. A
    value from a Secret (or another reference) is given as `<secret NAME/KEY>`."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(named(objects, "ConfigMap", source["configMapRef"]["name"]).get("data", {}))
        elif "secretRef" in source:
            secret = named(objects, "Secret", source["secretRef"]["name"])
            env.update({k: f"<secret {secret['metadata']['name']}/{k}>" for k in secret.get("data", {})})
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
        elif "secretKeyRef" in var.get("valueFrom", {}):
            ref = var["valueFrom"]["secretKeyRef"]
            env[var["name"]] = f"<secret {ref['name']}/{ref['key']}>"
        else:
            env[var["name"]] = f"<{next(iter(var.get('valueFrom', {'unknown': 0})))}>"
    return env
