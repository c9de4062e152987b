"""The README stays true: its configuration table is the code's, and CI runs its test command."""

from __future__ import annotations

import re
from pathlib import Path

from mnemo_cli.settings import ClientSettings
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


def test_ci_runs_the_readme_test_command() -> None:
    assert "uv run mnemo up" in README and "uv run pytest" in README
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^uv run pytest$", ci, re.MULTILINE)


if __name__ == "__main__":
    print(markdown_table(ALL_SETTINGS))
