"""`mnemo hook session-start|session-end` as an agent runs them: a subprocess fed the agent's JSON on stdin.

A hook must never block or break the agent: with Mnemo down or silent it exits 0 and prints nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mnemo.harvest.v1 import harvest_service_pb2 as hpb
from mnemo_server.stack import Stack
from tests.harvest.harness import Harvest, register, start_harvest
from tests.helpers import MNEMO, Postgres, eventually, ids

SESSIONS = Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "claude-code"
DEAD_URL = "http://127.0.0.1:9"  # nothing listens on the discard port


async def hook(*args: str, payload: dict[str, Any] | None = None, url: str = DEAD_URL) -> tuple[int, str, str]:
    """Runs `mnemo hook …` with the agent's JSON on stdin; generous bound, not a timing assertion."""
    process = await asyncio.create_subprocess_exec(
        MNEMO,
        "hook",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "MNEMO_URL": url, "MNEMO_TOKEN": ""},
    )
    data = json.dumps(payload or {}).encode()
    out, err = await asyncio.wait_for(process.communicate(data), timeout=30)
    return process.returncode or 0, out.decode(), err.decode()


def claude_start(cwd: str) -> dict[str, Any]:
    # Claude Code's SessionStart input (code.claude.com/docs/en/hooks).
    return {
        "session_id": "abc123",
        "transcript_path": "/nowhere/abc123.jsonl",
        "cwd": cwd,
        "hook_event_name": "SessionStart",
        "source": "startup",
    }


async def test_hooks_exit_0_and_say_nothing_when_mnemo_is_down(tmp_path: Path) -> None:
    for event in ("session-start", "session-end"):
        for agent in ("claude-code", "codex", "opencode", "pi"):
            code, out, err = await hook(event, "--agent", agent, payload=claude_start(str(tmp_path)))
            assert (code, out, err) == (0, "", ""), (event, agent)
    # Nothing on stdin at all (a plugin that sent none, a terminal): the same.
    code, out, _ = await hook("session-start", "--agent", "claude-code")
    assert (code, out) == (0, "")


@pytest.fixture
async def silent_server() -> AsyncIterator[str]:
    """Accepts connections and never answers: Mnemo hung."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        while await reader.read(4096):  # read the request, answer nothing, until the client gives up
            pass

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.close()
    for writer in held:
        writer.close()


async def test_a_hook_gives_up_on_a_mnemo_that_never_answers(silent_server: str, tmp_path: Path) -> None:
    payload = claude_start(str(tmp_path))
    code, out, err = await hook("session-start", "--agent", "claude-code", payload=payload, url=silent_server)
    assert (code, out, err) == (0, "", "")


@pytest.fixture
async def packet_server() -> AsyncIterator[tuple[str, list[str]]]:
    """A stand-in for the wake-up endpoint (GET /api/v1/context → {"text": …}) with a fixed answer, so
    each agent's output form can be checked to the byte; the real packet is the next test's."""
    seen: list[str] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = (await reader.readuntil(b"\r\n\r\n")).decode()
        seen.append(request.split("\r\n", 1)[0])
        body = json.dumps({"text": "## Decisions\n- [confirmed] We deploy on Tuesdays."}).encode()
        head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        writer.write(head.encode() + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", seen
    server.close()


async def test_session_start_prints_the_packet_in_each_agents_form(
    packet_server: tuple[str, list[str]], tmp_path: Path
) -> None:
    url, seen = packet_server
    code, out, err = await hook("session-start", "--agent", "claude-code", payload=claude_start(str(tmp_path)), url=url)
    assert code == 0, err
    assert json.loads(out) == {
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": "## Decisions\n- [confirmed] We deploy on Tuesdays.",
        }
    }
    assert seen[-1].startswith("GET /api/v1/context?workspace=") and str(tmp_path).replace("/", "%2F") in seen[-1]
    code, out, err = await hook("session-start", "--agent", "pi", payload={"cwd": str(tmp_path)}, url=url)
    assert code == 0 and out == "## Decisions\n- [confirmed] We deploy on Tuesdays.\n", err


async def test_session_start_prints_the_real_packet_with_a_confirmed_decision_and_not_a_deleted_one(
    hash_stack: Stack, tmp_path: Path
) -> None:
    import httpx

    project = str(tmp_path)
    async with httpx.AsyncClient(base_url=hash_stack.base_url, timeout=30, trust_env=False) as client:

        async def write(content: str) -> str:
            body = {"workspace": project, "content": content, "kind": "decision"}
            response = await client.post("/api/v1/memories", json=body)
            assert response.status_code == 201, response.text
            return str(response.json()["memory"]["id"])

        # The project is registered by its first use (local mode), as the agent's first call would.
        kept = await write("We deploy the quokka service on Tuesdays only.")
        confirmed = await client.post(f"/api/v1/memories/{kept}/confirm", json={"workspace": project})
        assert confirmed.status_code == 200, confirmed.text
        dropped = await write("We deploy the numbat service from the release branch.")
        deleted = await client.delete(
            f"/api/v1/memories/{dropped}", params={"workspace": project, "reason": "wrong branch"}
        )
        assert deleted.status_code == 200, deleted.text

    code, out, err = await hook(
        "session-start", "--agent", "claude-code", payload=claude_start(project), url=hash_stack.base_url
    )
    assert code == 0 and err == ""
    context = json.loads(out)["hookSpecificOutput"]
    assert context["hookEventName"] == "SessionStart"
    packet = context["additionalContext"]
    assert "quokka service on Tuesdays" in packet and kept in packet and "confirmed" in packet
    assert "numbat" not in packet and dropped not in packet


def test_the_hook_path_loads_neither_protobuf_nor_grpc() -> None:
    script = f"""
import sys
from mnemo_cli.parser import build_parser

args = build_parser().parse_args(["hook", "session-start", "--agent", "claude-code", "--url", "{DEAD_URL}"])
args.func(args)
heavy = [m for m in ("grpc", "google.protobuf", "mnemo.harvest.v1.harvest_service_pb2") if m in sys.modules]
assert not heavy, heavy
build_parser().parse_args(["harvest", "run", "--agent", "codex"])
assert "google.protobuf" in sys.modules  # positive control: the same check sees a load
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert result.returncode == 0, result.stderr


@pytest.fixture
async def harvest(postgres: Postgres, tmp_path: Path) -> AsyncIterator[Harvest]:
    h = await start_harvest(postgres, tmp_path)
    yield h
    await h.close()
    await h.stack.stop()


async def test_the_session_end_hook_harvests_that_session_at_once(harvest: Harvest) -> None:
    # Two real-format sessions that changed just now: well inside the idle window.
    ended = harvest.projects / "-project" / "test-session-id.jsonl"
    ended.parent.mkdir(parents=True)
    shutil.copy(SESSIONS / "claude-code-transcripts" / "sample_session.jsonl", ended)
    ongoing = SESSIONS / "claude-code-log" / "projects" / "-workspace-example-app"
    shutil.copytree(ongoing, harvest.projects / "-workspace-example-app")
    now = time.time()
    for path in harvest.projects.rglob("*.jsonl"):
        os.utime(path, (now, now))
    project, _ = await register(harvest, "/project", "/workspace/example-app")
    plain = {p.session_id: p.skip_reason for p in await harvest.run() if not p.done}
    assert plain["test-session-id"] == "still-active"

    # Claude Code's SessionEnd input (code.claude.com/docs/en/hooks).
    payload = {
        "session_id": "test-session-id",
        "transcript_path": str(ended),
        "cwd": "/project",
        "hook_event_name": "SessionEnd",
        "reason": "prompt_input_exit",
    }
    code, out, err = await hook("session-end", "--agent", "claude-code", payload=payload, url=harvest.stack.base_url)
    assert (code, out, err) == (0, "", "")

    async def found() -> bool:
        return bool(ids(await harvest.clients.find(project, "goodbye function", mode="lexical")))

    await eventually(found, timeout=60, interval=0.2)
    # Only that session: the other one, which did not end, still waits for the idle window.
    listed = await harvest.harvest.ListSources(hpb.ListSourcesRequest())
    states = {s.session_id: s.state for s in listed.sources}
    assert states["test-session-id"] == "harvested"
    assert states["55550000-0000-4000-8000-000000000001"] == "active"
