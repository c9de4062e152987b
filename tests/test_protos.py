"""The committed generated code is exactly what protos/ generates (temporalio's stale-code check)."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

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
