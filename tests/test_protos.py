"""The committed generated code is exactly what protos/ generates (temporalio's stale-code check), and the
protos follow the house rules: every element documented, every RPC's idempotency declared."""

from __future__ import annotations

import filecmp
import importlib
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.descriptor_pb2 import MethodOptions
from grpc_health.v1 import health_pb2

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "libs" / "protos" / "src"


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / "protos" / "generate.py"), str(tmp_path)], check=True)
    generated = _files(tmp_path)
    committed = _files(COMMITTED)
    assert generated == committed, "regenerate with: uv run python protos/generate.py"
    stale = [name for name in sorted(generated) if not filecmp.cmp(tmp_path / name, COMMITTED / name, shallow=False)]
    assert stale == [], f"stale generated files {stale}; regenerate with: uv run python protos/generate.py"
    # Positive control: the comparison notices a difference.
    (tmp_path / "mnemo" / "__init__.py").write_text("# changed\n")
    assert not filecmp.cmp(tmp_path / "mnemo" / "__init__.py", COMMITTED / "mnemo" / "__init__.py", shallow=False)


def test_every_message_and_field_is_documented() -> None:
    """buf STANDARD house style: each message, enum value, field and RPC has a comment naming it."""
    missing = []
    for proto in (ROOT / "protos").rglob("*.proto"):
        lines = proto.read_text().splitlines()
        for i, line in enumerate(lines):
            stripped = line.strip()
            if stripped.startswith(("message ", "enum ", "service ", "rpc ")) or (
                stripped.endswith(";") and "=" in stripped and not stripped.startswith(("option", "syntax", "package"))
            ):
                name = stripped.split()[1] if stripped.split()[0] in {"message", "enum", "service", "rpc"} else None
                if name is None:
                    tokens = stripped.split("=")[0].split()
                    name = tokens[-1]
                start = i
                while start > 0 and lines[start - 1].strip().startswith("//"):
                    start -= 1
                comment = lines[start].strip() if start < i else ""
                if not comment.startswith(f"// {name.split('(')[0]} "):
                    missing.append(f"{proto.name}:{i + 1}: {stripped}")
    assert missing == []


# The RPCs whose idempotency is declared IDEMPOTENCY_UNKNOWN on purpose: a client channel never retries them.
DELIBERATELY_UNKNOWN = {
    "mnemo.ingest.v1.IngestService.WriteMemory": "without an idempotency_key (or a source_uri) a repeat stores twice",
    "mnemo.ingest.v1.IngestService.WriteMemories": "items without an idempotency_key (or a source_uri) store twice",
    "mnemo.ingest.v1.IngestService.CreateToken": "a repeat mints a second live token whose secret reaches nobody",
    "mnemo.ingest.v1.IngestService.StartImportBatch": "a repeat opens a second, empty batch",
}


def _rpcs() -> dict[str, MethodDescriptor]:
    """Every RPC of every proto under protos/, from the committed generated modules."""
    rpcs = {}
    for proto in sorted((ROOT / "protos").rglob("*.proto")):
        module_name = ".".join(proto.relative_to(ROOT / "protos").with_suffix("").parts) + "_pb2"
        for service in importlib.import_module(module_name).DESCRIPTOR.services_by_name.values():
            rpcs.update({method.full_name: method for method in service.methods})
    return rpcs


def _undeclared(methods: Iterable[MethodDescriptor]) -> list[str]:
    return sorted(m.full_name for m in methods if not m.GetOptions().HasField("idempotency_level"))


def test_every_rpc_declares_its_idempotency_level() -> None:
    rpcs = _rpcs()
    assert len(rpcs) >= 27, sorted(rpcs)  # positive control: every service's RPCs are found
    assert _undeclared(rpcs.values()) == [], "declare `option idempotency_level = …;` on these RPCs"
    level = {name: m.GetOptions().idempotency_level for name, m in rpcs.items()}
    unknown = {name for name, declared in level.items() if declared == MethodOptions.IDEMPOTENCY_UNKNOWN}
    assert unknown == set(DELIBERATELY_UNKNOWN), "an RPC left IDEMPOTENCY_UNKNOWN must be listed here with the reason"
    # Positive control: an RPC that declares nothing (the health check) is caught.
    check = health_pb2.DESCRIPTOR.services_by_name["Health"].methods_by_name["Check"]
    assert _undeclared([check]) == ["grpc.health.v1.Health.Check"]
