"""deploy/k8s: every overlay renders, every object validates against its schema, and the promises of
docs/operations.md hold (probes, limits, non-root read-only containers, budgets, selectors that select,
no committed secret, real commands and settings). Each check is shown to catch a broken copy."""

from __future__ import annotations

import base64
import copy
import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from mnemo_platform.settings import env_vars
from mnemo_server.serve import SERVICES
from tests.deploy.dockerfile import DOCKERFILE, ROOT, stages
from tests.deploy.manifests import (
    K8S,
    OVERLAYS,
    Obj,
    containers,
    environment,
    named,
    pod_spec,
    pods,
    render,
    render_dir,
    selects,
    workloads,
)
from tests.test_docs import ALL_SETTINGS

# The oldest Kubernetes the manifests are for: native gRPC probes (1.27) and the preStop `sleep` action (1.30).
KUBERNETES_VERSION = "1.30.0"
CRDS = Path(__file__).parent / "crds"
# A setting whose value is a credential: only ever from a Secret, never a literal in a manifest.
SECRET_SETTING = re.compile(r"(SECRET|PASSWORD|TOKEN|_KEY|API_KEY|DATABASE_URL)$")
GRPC_SERVICES = {
    "ingest": "mnemo.ingest.v1.IngestService",
    "search": "mnemo.search.v1.SearchService",
    "harvest": "mnemo.harvest.v1.HarvestService",
}

Check = Callable[[list[Obj]], list[str]]


def name_of(obj: Obj) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


# --- schemas ---------------------------------------------------------------------------------------


def strict(schema: Any) -> Any:
    """A CRD's openAPIV3Schema that also refuses unknown fields, as the API server prunes them: an
    object whose `properties` are listed allows no others unless it says it preserves them."""
    if isinstance(schema, dict):
        schema = {k: strict(v) for k, v in schema.items()}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    return schema


@functools.cache
def crd_schemas() -> dict[tuple[str, str], Any]:
    """(apiVersion, kind) → the vendored CRDs' schema (tests/deploy/crds/PROVENANCE.md)."""
    found = {}
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            api_version = f"{crd['spec']['group']}/{version['name']}"
            found[(api_version, crd["spec"]["names"]["kind"])] = strict(version["schema"]["openAPIV3Schema"])
    return found


def schema_problems(objects: list[Obj]) -> list[str]:
    problems = []
    for obj in objects:
        crd = crd_schemas().get((obj["apiVersion"], obj["kind"]))
        try:
            if crd is not None:
                jsonschema.validate(obj, crd)
            else:
                kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except (jsonschema.ValidationError, kubernetes_validate.ValidationError) as exc:
            problems.append(f"{name_of(obj)}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError:
            problems.append(f"{name_of(obj)}: no schema for {obj['apiVersion']} {obj['kind']}")
    return problems


# --- the policy checks: each returns what is wrong ----------------------------------------------------


def container_problems(objects: list[Obj]) -> list[str]:
    """Probes (long-running workloads; a Job's pod runs to completion), requests and limits, and a
    non-root, read-only, unprivileged context for every container (the `restricted` Pod Security
    Standard the namespaces enforce, and a read-only root filesystem besides)."""
    problems = []
    for workload in workloads(objects):
        pod_context = pod_spec(workload).get("securityContext", {})
        for container in containers(workload):
            where = f"{name_of(workload)} container {container['name']}"
            if workload["kind"] != "Job":
                problems += [f"{where}: no {p}" for p in ("livenessProbe", "readinessProbe") if p not in container]
            resources = container.get("resources", {})
            for bound in ("requests", "limits"):
                problems += [f"{where}: no {bound}.{r}" for r in ("cpu", "memory") if r not in resources.get(bound, {})]
            context = container.get("securityContext", {})
            if not context.get("runAsNonRoot", pod_context.get("runAsNonRoot")):
                problems.append(f"{where}: may run as root")
            if context.get("runAsUser", pod_context.get("runAsUser")) == 0:
                problems.append(f"{where}: runs as user 0")
            if context.get("readOnlyRootFilesystem") is not True:
                problems.append(f"{where}: writable root filesystem")
            if context.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{where}: privilege escalation allowed")
            if "ALL" not in context.get("capabilities", {}).get("drop", []):
                problems.append(f"{where}: capabilities not all dropped")
            seccomp = context.get("seccompProfile", pod_context.get("seccompProfile", {}))
            if seccomp.get("type") not in {"RuntimeDefault", "Localhost"}:
                problems.append(f"{where}: no seccomp profile")
    return problems


def budget_problems(objects: list[Obj]) -> list[str]:
    """Every Deployment has a PodDisruptionBudget over its pods; every budget covers some pods."""
    budgets = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    problems = []
    for deployment in (o for o in objects if o["kind"] == "Deployment"):
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        if not any(selects(b["spec"]["selector"], labels) for b in budgets):
            problems.append(f"{name_of(deployment)}: no PodDisruptionBudget")
    for budget in budgets:
        if not any(selects(budget["spec"]["selector"], labels) for _, labels, _ in pods(objects)):
            problems.append(f"{name_of(budget)}: selects no pod")
    return problems


def selector_problems(objects: list[Obj]) -> list[str]:
    """Every HPA scales a Deployment that exists; every NetworkPolicy, Service and PodMonitor selects
    pods that exist, and the named ports it opens or targets are theirs."""
    problems = []
    everything = pods(objects)
    for hpa in (o for o in objects if o["kind"] == "HorizontalPodAutoscaler"):
        target = hpa["spec"]["scaleTargetRef"]
        if not any(o["kind"] == target["kind"] and o["metadata"]["name"] == target["name"] for o in objects):
            problems.append(f"{name_of(hpa)}: scales {target['kind']}/{target['name']}, which does not exist")

    def check(owner: Obj, selector: Obj | None, port_names: list[str | int], what: str) -> None:
        chosen = [ports for _, labels, ports in everything if selects(selector, labels)]
        if not chosen:
            problems.append(f"{name_of(owner)}: its {what} selects no pod")
        for port in port_names:
            if chosen and not any(port in ports for ports in chosen):
                problems.append(f"{name_of(owner)}: port {port} is on none of the pods its {what} selects")

    for policy in (o for o in objects if o["kind"] == "NetworkPolicy"):
        rules = policy["spec"].get("ingress", [])
        opened = [p["port"] for rule in rules for p in rule.get("ports", [])]
        check(policy, policy["spec"]["podSelector"], opened, "podSelector")
        for rule in rules:
            for peer in rule.get("from", []):
                if "podSelector" in peer and "namespaceSelector" not in peer:
                    check(policy, peer["podSelector"], [], "ingress source")
    for service in (o for o in objects if o["kind"] == "Service"):
        targets = [p.get("targetPort", p["port"]) for p in service["spec"]["ports"]]
        check(service, {"matchLabels": service["spec"]["selector"]}, targets, "selector")
    for monitor in (o for o in objects if o["kind"] == "PodMonitor"):
        check(monitor, monitor["spec"]["selector"], [], "selector")
    return problems


def secret_problems(objects: list[Obj]) -> list[str]:
    """No credential in a ConfigMap or a literal env value; a Secret in the render is a generated
    dev placeholder whose every value says `dev-only`."""
    problems = []
    for obj in objects:
        if obj["kind"] == "Secret":
            for key, value in {**obj.get("data", {}), **obj.get("stringData", {})}.items():
                text = value if "stringData" in obj and key in obj["stringData"] else _decode(value)
                if "dev-only" not in text and key not in {"POSTGRES_USER", "POSTGRES_DB"}:
                    problems.append(f"{name_of(obj)}: {key} holds a value that is not a dev placeholder")
        if obj["kind"] == "ConfigMap":
            problems += [
                f"{name_of(obj)}: {k} is a credential" for k in obj.get("data", {}) if SECRET_SETTING.search(k)
            ]
    for workload in workloads(objects):
        for container in containers(workload):
            for var in container.get("env", []):
                if SECRET_SETTING.search(var["name"]) and "value" in var:
                    problems.append(f"{name_of(workload)}: {var['name']} is a literal, not from a Secret")
    return problems


def external_secrets() -> dict[str, set[str]]:
    """The Secrets the manifests use but do not make, with their keys: the one docs/operations.md has
    the operator create (its `--from-literal=KEY=` options), and CloudNativePG's application Secret."""
    guide = (ROOT / "docs" / "operations.md").read_text()
    command = guide.split("create secret generic mnemo-secrets", 1)[1].split("```", 1)[0]
    return {"mnemo-secrets": set(re.findall(r"--from-literal=([\w.-]+)=", command)), "mnemo-db-app": {"uri"}}


def reference_problems(objects: list[Obj]) -> list[str]:
    """Every Secret and ConfigMap a pod names exists (in the render, or made as docs/operations.md
    says) and holds the keys it reads."""
    available = {("Secret", name): keys for name, keys in external_secrets().items()}
    for obj in objects:
        if obj["kind"] in {"Secret", "ConfigMap"}:
            available[(obj["kind"], obj["metadata"]["name"])] = set(obj.get("data", {}))
    problems = []

    def need(workload: Obj, kind: str, name: str, keys: list[str]) -> None:
        have = available.get((kind, name))
        if have is None:
            problems.append(f"{name_of(workload)}: {kind}/{name} does not exist")
        else:
            problems.extend(f"{name_of(workload)}: {kind}/{name} has no key {k}" for k in keys if k not in have)

    for workload in workloads(objects):
        for volume in pod_spec(workload).get("volumes", []):
            if "secret" in volume:
                keys = [item["key"] for item in volume["secret"].get("items", [])]
                need(workload, "Secret", volume["secret"]["secretName"], keys)
        for container in containers(workload):
            for source in container.get("envFrom", []):
                for kind, field in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
                    if field in source:
                        need(workload, kind, source[field]["name"], [])
            for var in container.get("env", []):
                for kind, field in (("ConfigMap", "configMapKeyRef"), ("Secret", "secretKeyRef")):
                    ref = var.get("valueFrom", {}).get(field)
                    if ref:
                        need(workload, kind, ref["name"], [ref["key"]])
    return problems


def _decode(value: str) -> str:
    return base64.b64decode(value).decode()


def command_problems(objects: list[Obj]) -> list[str]:
    """Each Mnemo Deployment runs `mnemo serve <its name>`, the Job `mnemo migrate`, and every MNEMO_*
    variable they get is a real setting; each gRPC service's probes and port agree with its address."""
    known = {var.name for cls in ALL_SETTINGS for var in env_vars(cls)}
    problems = []
    for workload in workloads(objects):
        name = workload["metadata"]["name"]
        for container in containers(workload):
            command = [*container.get("command", []), *container.get("args", [])]
            if not command or command[0] != "mnemo":
                continue  # not ours (PostgreSQL)
            if workload["kind"] == "Job":
                if command != ["mnemo", "migrate"]:
                    problems.append(f"{name_of(workload)}: runs {command}, not `mnemo migrate`")
            elif command != ["mnemo", "serve", name] or name not in SERVICES:
                problems.append(f"{name_of(workload)}: runs {command}, not `mnemo serve {name}`")
            env = environment(objects, container)
            problems += [
                f"{name_of(workload)}: {v} is no setting" for v in env if v.startswith("MNEMO_") and v not in known
            ]
            if name in GRPC_SERVICES:
                problems += _grpc_problems(workload, container, env)
    return problems


def _grpc_problems(workload: Obj, container: Obj, env: dict[str, str]) -> list[str]:
    name = workload["metadata"]["name"]
    host, _, port = env[f"MNEMO_{name.upper()}_ADDR"].rpartition(":")
    problems = []
    if host != name:
        problems.append(f"{name_of(workload)}: MNEMO_{name.upper()}_ADDR names {host}, not its Service")
    if int(port) not in [p["containerPort"] for p in container["ports"]]:
        problems.append(f"{name_of(workload)}: listens on {port}, which it does not expose")
    live, ready = container["livenessProbe"].get("grpc", {}), container["readinessProbe"].get("grpc", {})
    if live.get("service", "") != "" or live.get("port") != int(port):
        problems.append(f"{name_of(workload)}: liveness is not the overall gRPC health on {port}")
    if ready.get("service") != GRPC_SERVICES[name] or ready.get("port") != int(port):
        problems.append(f"{name_of(workload)}: readiness is not {GRPC_SERVICES[name]}'s health on {port}")
    return problems


CHECKS: dict[str, Check] = {
    "containers": container_problems,
    "budgets": budget_problems,
    "selectors": selector_problems,
    "secrets": secret_problems,
    "references": reference_problems,
    "commands": command_problems,
}


def break_one(objects: list[Obj], check: str) -> list[Obj]:
    """A deliberately broken copy of the render, for the check named `check` to catch."""
    broken = copy.deepcopy(objects)
    search = named(broken, "Deployment", "search")
    container = containers(search)[0]
    if check == "containers":
        del container["readinessProbe"]
        container["securityContext"]["readOnlyRootFilesystem"] = False
    elif check == "budgets":
        broken = [o for o in broken if not (o["kind"] == "PodDisruptionBudget" and o["metadata"]["name"] == "search")]
    elif check == "selectors":
        named(broken, "HorizontalPodAutoscaler", "search")["spec"]["scaleTargetRef"]["name"] = "serch"
        named(broken, "NetworkPolicy", "gateway-ingress")["spec"]["podSelector"]["matchLabels"] = {"x": "y"}
    elif check == "secrets":
        container["env"].append({"name": "MNEMO_INTERNAL_SECRET", "value": "s3cr3t"})
    elif check == "references":
        container["env"].append(
            {"name": "MNEMO_UI_SESSION_KEY", "valueFrom": {"secretKeyRef": {"name": "mnemo-secrets", "key": "ui-key"}}}
        )
    elif check == "commands":
        container["command"] = ["mnemo", "serve", "ingest"]
        container["env"].append({"name": "MNEMO_SEARCH_TYPO", "value": "1"})
    return broken


# --- the tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_the_overlay_renders_and_every_object_validates_against_its_schema(overlay: str) -> None:
    objects = render(overlay)
    kinds = {o["kind"] for o in objects}
    assert {"Deployment", "Service", "ConfigMap", "Job", "NetworkPolicy", "PodDisruptionBudget"} <= kinds
    assert schema_problems(objects) == []


def test_the_schema_check_catches_a_misspelled_field_in_a_builtin_and_in_a_crd() -> None:
    objects = render("production")
    containers(named(objects, "Deployment", "search"))[0]["readinesProbe"] = {}
    named(objects, "Cluster", "mnemo-db")["spec"]["imagename"] = "postgres"
    named(objects, "PodMonitor", "mnemo")["spec"]["podMetricsEndpoints"][0]["prot"] = "metrics"
    problems = schema_problems(objects)
    assert any("Deployment/search" in p for p in problems), problems
    assert any("Cluster/mnemo-db" in p for p in problems), problems
    assert any("PodMonitor/mnemo" in p for p in problems), problems


@pytest.mark.parametrize("check", sorted(CHECKS))
@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_the_policy_holds(overlay: str, check: str) -> None:
    problems = CHECKS[check](render(overlay))
    if overlay == "base" and check == "references":
        # The base leaves one thing to its overlays: the database's Secret (generated in dev, CloudNativePG's
        # in production, where the overlay points the references at it).
        assert problems and all(p.endswith("Secret/mnemo-database does not exist") for p in problems), problems
    else:
        assert problems == []


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_the_policy_check_catches_a_broken_copy(check: str) -> None:
    assert len(CHECKS[check](break_one(render("dev"), check))) >= 1


def test_the_dev_secrets_are_placeholders_and_nothing_else_commits_one() -> None:
    assert not [o for o in render("base") + render("production") if o["kind"] == "Secret"]
    for overlay in ("base", "production"):
        assert "secretGenerator" not in (OVERLAYS[overlay] / "kustomization.yaml").read_text()
    dev = render("dev")
    assert {o["metadata"]["name"].rsplit("-", 1)[0] for o in dev if o["kind"] == "Secret"} == {
        "mnemo-database",
        "mnemo-postgres",
        "mnemo-secrets",
    }
    # Control: a real-looking value in a generated Secret is caught.
    secret = next(o for o in dev if o["kind"] == "Secret" and o["metadata"]["name"].startswith("mnemo-secrets"))
    secret["data"]["internal-secret"] = "c2VjcmV0LWZyb20tcHJvZA=="  # base64 of secret-from-prod
    assert secret_problems(dev) == [
        f"Secret/{secret['metadata']['name']}: internal-secret holds a value that is not a dev placeholder"
    ]


def test_the_migration_job_and_each_service_run_the_images_commands() -> None:
    objects = render("dev")
    assert containers(named(objects, "Job", "mnemo-migrate"))[0]["command"] == ["mnemo", "migrate"]
    served = {d["metadata"]["name"]: containers(d)[0]["command"] for d in objects if d["kind"] == "Deployment"}
    assert served == {s: ["mnemo", "serve", s] for s in SERVICES}
    # The image: its MNEMO_* defaults are settings too, and its default command is one of these.
    _, found = stages(DOCKERFILE.read_text())
    known = {var.name for cls in ALL_SETTINGS for var in env_vars(cls)}
    image_env = found[-1].env()
    assert {k for k in image_env if k.startswith("MNEMO_")} <= known
    assert "MNEMO_DATA_DIR" in image_env  # control: the ENV was read


def test_the_production_database_is_cloudnativepg_with_pgvector_and_the_operators_secret() -> None:
    objects = render("production")
    cluster = named(objects, "Cluster", "mnemo-db")
    assert "standard" in cluster["spec"]["imageName"]  # the operand images that carry pgvector
    initdb = cluster["spec"]["bootstrap"]["initdb"]
    assert "CREATE EXTENSION IF NOT EXISTS vector" in initdb["postInitApplicationSQL"]
    for workload in workloads(objects):
        env = environment(objects, containers(workload)[0])
        if "MNEMO_DATABASE_URL" in env:
            assert env["MNEMO_DATABASE_URL"] == f"<secret {cluster['metadata']['name']}-app/uri>"
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "PodMonitor"] == ["mnemo", "mnemo-db"]


def test_a_kustomization_that_does_not_render_fails_loudly(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: [missing.yaml]\n")
    with pytest.raises(AssertionError, match=r"kubectl kustomize .* failed: .*missing\.yaml"):
        render_dir(tmp_path)
    assert render_dir(K8S / "base")  # control
