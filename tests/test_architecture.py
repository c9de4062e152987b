"""The house rules hold by construction: import-linter's contracts (pyproject.toml) and a clean type check.

Both check the source tree, not a running Mnemo; docs/architecture.md says what each rule means.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Every runtime package's sources: the libraries, the services, the composition root and the CLI.
RUNTIME = sorted(
    str(p.relative_to(ROOT))
    for p in [*ROOT.glob("libs/*/src"), *ROOT.glob("services/*/src"), ROOT / "server" / "src", ROOT / "cli" / "src"]
    if p.parent.name != "protos"  # generated code
)


def lint_imports(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports_command; lint_imports_command()",
            "--config",
            str(config),
            "--no-cache",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_import_linter_contract_is_kept() -> None:
    result = lint_imports(ROOT / "pyproject.toml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout and "kept" in result.stdout, result.stdout


def test_a_broken_contract_is_caught(tmp_path: Path) -> None:
    """Positive control: a rule the code does break (ingest imports the store) fails the linter."""
    config = tmp_path / "contracts.toml"
    config.write_text(
        """
[tool.importlinter]
root_packages = ["mnemo_ingest", "mnemo_store"]

[[tool.importlinter.contracts]]
name = "ingest without the store (false on purpose)"
type = "forbidden"
source_modules = ["mnemo_ingest"]
forbidden_modules = ["mnemo_store"]
"""
    )
    result = lint_imports(config)
    assert result.returncode != 0 and "BROKEN" in result.stdout, result.stdout + result.stderr


def test_the_runtime_packages_type_check_clean() -> None:
    assert len(RUNTIME) >= 10, RUNTIME  # positive control: the scan sees the packages
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", *RUNTIME],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
