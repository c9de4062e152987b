"""Each workspace member declares exactly what it imports (so the gateway image carries no torch)."""

from __future__ import annotations

import ast
import functools
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MEMBERS = [
    *sorted(p.parent for p in ROOT.glob("libs/*/pyproject.toml")),
    *sorted(p.parent for p in ROOT.glob("services/*/pyproject.toml")),
    ROOT / "cli",
]
# Generated code: its own dependencies are protobuf and grpcio, declared by hand.
GENERATED = {"libs/protos"}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(member: Path) -> set[str]:
    project = tomllib.loads((member / "pyproject.toml").read_text())["project"]
    requirements = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    return {_normalize(re.split(r"[\[<>=~!; ]", r, maxsplit=1)[0]) for r in requirements}


def _imported_modules(member: Path) -> set[str]:
    modules: set[str] = set()
    for path in (member / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules.add(node.module.split(".")[0])
    own = {p.name for p in (member / "src").iterdir() if p.is_dir()}
    # `bench` is the source checkout's benchmark package, which `mnemo bench` runs when present.
    ignored = {"__future__", "bench"}
    return {m for m in modules if m not in sys.stdlib_module_names and m not in own and m not in ignored}


def _distributions(module: str) -> set[str]:
    if module == "mnemo":
        return {"mnemo-protos"}
    if module.startswith("mnemo_"):
        return {"mnemo-" + module.removeprefix("mnemo_")}
    owners = _module_owners().get(module)
    if owners is None:
        # Not installed here: an optional extra left out of this environment (sentence_transformers
        # without `--extra torch`); such modules are named as their distributions.
        return {_normalize(module)}
    return {_normalize(d) for d in owners}


@functools.cache
def _module_owners() -> dict[str, list[str]]:
    return packages_distributions()


@pytest.mark.parametrize(
    "member", [m for m in MEMBERS if str(m.relative_to(ROOT)) not in GENERATED], ids=lambda m: m.name
)
def test_member_declares_what_it_imports_and_nothing_else(member: Path) -> None:
    declared = _declared(member)
    imported = _imported_modules(member)
    assert imported, "positive control: the scan finds imports"
    undeclared = {m for m in imported if not (_distributions(m) & declared)}
    assert undeclared == set(), f"{member.name} imports {sorted(undeclared)} without declaring them"
    providers = set().union(*(_distributions(m) for m in imported))
    unused = {d for d in declared if d not in providers}
    assert unused == set(), f"{member.name} declares {sorted(unused)} but never imports them"


def test_the_gateway_does_not_pull_in_torch() -> None:
    gateway = _declared(ROOT / "services" / "gateway")
    assert not {"torch", "sentence-transformers", "mnemo-embed", "mnemo-store"} & gateway
    assert "mcp" in gateway  # positive control


# What the torch extra brings and the default install must not: a 5.7 GB environment on a CPU machine.
HEAVY = re.compile(r"^(torch|triton|nvidia-[\w-]+|sentence-transformers|transformers)==", re.MULTILINE)


def _exported(*extra: str) -> str:
    """The locked dependency set of every member, as `uv export` resolves it (no install)."""
    import shutil
    import subprocess

    uv = shutil.which("uv")
    assert uv is not None, "uv is needed to read the lock (CI installs it)"
    command = [uv, "export", "--no-dev", "--all-packages", "--frozen", "--no-hashes", *extra]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout


def test_the_default_install_resolves_no_torch_cuda_or_sentence_transformers() -> None:
    assert HEAVY.findall(_exported()) == []
    # Positive control: the torch extra does bring them, so the pattern matches what it should.
    assert {"torch", "sentence-transformers"} <= set(HEAVY.findall(_exported("--extra", "torch")))
