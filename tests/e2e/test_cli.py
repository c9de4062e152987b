"""The `mnemo` CLI against a running gateway: write, search, get, update, status, workspaces."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from mnemo_server.stack import Stack
from tests.helpers import MNEMO, mnemo


async def test_the_cli_round_trip(hash_stack: Stack, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "sub").mkdir(parents=True)
    code, out, err = await mnemo(hash_stack, "workspace", "add", cwd=str(project))
    assert code == 0, err
    assert "registered: proj (id " in out and str(project) in out

    code, out, err = await mnemo(
        hash_stack,
        "write",
        "--json",
        "-w",
        ".",
        "--kind",
        "lesson",
        "--tag",
        "ci",
        "Never run the migration tests in parallel: they share one advisory lock.",
        cwd=str(project / "sub"),
    )
    assert code == 0, err
    written = json.loads(out)
    memory_id = written["memory"]["id"]
    assert written["outcome"] == "created" and written["memory"]["provenance"] == "human"

    code, out, err = await mnemo(hash_stack, "search", "migration", "tests", "--mode", "lexical", "-w", str(project))
    assert code == 0, err
    assert memory_id in out and "[active · human lesson · " in out and "«migration»" in out

    code, out, err = await mnemo(
        hash_stack, "update", memory_id, "-w", str(project), stdin="They may run in parallel now."
    )
    assert code == 0, err
    assert "now at version 2" in out

    code, out, err = await mnemo(hash_stack, "get", memory_id, "-w", str(project))
    assert code == 0, err
    assert "They may run in parallel now." in out and "version 2" in out

    code, out, err = await mnemo(hash_stack, "status", "-w", str(project))
    assert code == 0, err
    assert "memories in proj: 1" in out

    code, out, err = await mnemo(hash_stack, "workspace", "list")
    assert code == 0 and "proj" in out and "global" in out


async def test_cli_errors_are_one_line_with_the_reason(hash_stack: Stack) -> None:
    code, _, err = await mnemo(hash_stack, "get", "not-a-uuid")
    assert code == 1 and err.startswith("mnemo: INVALID_ARGUMENT: id 'not-a-uuid' is not a memory id")
    assert "Traceback" not in err
    code, _, err = await mnemo(hash_stack, "search", "x", "-w", "no-such-workspace")
    assert code == 1 and "mnemo workspace add" in err
    # Nothing listening: the message says how to start Mnemo.
    process = await asyncio.create_subprocess_exec(
        MNEMO,
        "status",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "MNEMO_URL": "http://127.0.0.1:9"},
    )
    _, err_bytes = await process.communicate()
    assert process.returncode == 1 and "uv run mnemo up" in err_bytes.decode()
