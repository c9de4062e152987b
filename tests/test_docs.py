"""The README stays true: its configuration and error-reason tables are the code's, and CI runs its test command."""

from __future__ import annotations

import re
from pathlib import Path

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_cli.settings import ClientSettings
from mnemo_platform import reason_name
from mnemo_platform.config import LogSettings
from mnemo_platform.settings import env_vars, markdown_table
from mnemo_server.settings import SERVER_SETTINGS

# Every settings class of every process, in the README's order: the server's, then the CLI's.
ALL_SETTINGS = (*[c for c in SERVER_SETTINGS if c is not LogSettings], ClientSettings, LogSettings)

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_the_configuration_table_is_generated_from_the_settings() -> None:
    block = README.split("<!-- config-table:start -->\n", 1)[1].split("<!-- config-table:end -->", 1)[0]
    expected = markdown_table(ALL_SETTINGS)
    assert block.strip() == expected, "README config table is stale; regenerate with: uv run python -m tests.test_docs"


def test_every_mnemo_variable_in_the_code_is_a_documented_setting() -> None:
    documented = {var.name for cls in ALL_SETTINGS for var in env_vars(cls)}
    used: set[str] = set()
    for path in ROOT.glob("*/**/*.py"):
        if ".venv" in path.parts or "tests" in path.parts:
            continue
        used |= set(re.findall(r"\bMNEMO_[A-Z_]+[A-Z]\b", path.read_text()))
    assert used - documented == set()
    assert "MNEMO_DATABASE_URL" in used  # positive control: the scan sees the code


def readme_reasons(readme: str) -> list[str]:
    """The first column of the README's error-reason table, in order."""
    block = readme.split("<!-- error-reasons:start -->\n", 1)[1].split("<!-- error-reasons:end -->", 1)[0]
    return re.findall(r"^\| `([A-Z_]+)` \|", block, re.MULTILINE)


def test_the_error_reason_table_lists_exactly_the_error_reasons() -> None:
    expected = [reason_name(v) for v in reasons_pb.ErrorReason.values() if v != reasons_pb.ERROR_REASON_UNSPECIFIED]
    assert len(expected) >= 20 and "WORKSPACE_NOT_FOUND" in expected  # positive control: the enum is read
    assert readme_reasons(README) == expected, "README error-reason table differs from errors.proto's ErrorReason"
    # Positive control: a table missing a reason, or naming one the proto lacks, is caught.
    assert readme_reasons(README.replace("| `TOMBSTONED` |", "| `TOMBSTONE` |")) != expected


def test_ci_runs_the_readme_test_command() -> None:
    assert "uv run mnemo up" in README and "uv run pytest" in README
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^uv run pytest$", ci, re.MULTILINE)


if __name__ == "__main__":
    print(markdown_table(ALL_SETTINGS))
