"""The `mnemo` CLI against a running gateway: write, search, get, update, status, workspaces."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path

import httpx
import pytest

from mnemo_cli.client import GatewayClient
from mnemo_cli.errors import ClientError
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
    assert code == 1, err
    assert re.match(r"mnemo: INVALID_ARGUMENT( \([A-Z_]+\))?: id 'not-a-uuid' is not a memory id", err), err
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


@pytest.mark.parametrize(
    ("error", "line"),
    [
        # A gateway that sends no reason (as before it had them): the code alone.
        ({"code": "NOT_FOUND", "message": "memory m1 was deleted"}, "NOT_FOUND: memory m1 was deleted"),
        (
            {"code": "FAILED_PRECONDITION", "reason": "TOMBSTONED", "message": "source is tombstoned"},
            "FAILED_PRECONDITION (TOMBSTONED): source is tombstoned",
        ),
        # A reason that only repeats the code, or says nothing, is left out.
        ({"code": "INVALID_ARGUMENT", "reason": "INVALID_ARGUMENT", "message": "bad"}, "INVALID_ARGUMENT: bad"),
        ({"code": "NOT_FOUND", "reason": "UNSPECIFIED", "message": "gone"}, "NOT_FOUND: gone"),
        ({"code": "NOT_FOUND", "reason": "", "message": "gone"}, "NOT_FOUND: gone"),
    ],
)
def test_cli_error_line_names_the_reason_when_the_gateway_sends_one(error: dict[str, str], line: str) -> None:
    client = GatewayClient("http://mnemo.test")
    client._http = httpx.Client(
        base_url="http://mnemo.test",
        transport=httpx.MockTransport(lambda request: httpx.Response(404, json={"error": error})),
    )
    with pytest.raises(ClientError) as raised:
        client.request("GET", "/memories/m1")
    assert str(raised.value) == line
