"""A remote harvester's token (role harvester) over the real gateway, auth on: it places and writes its own
sessions and their candidates, and is refused everything else, each refusal beside the call that succeeds.
Plus what only a remote harvester has: its local state file, which it may lose without duplicating anything,
`mnemo serve harvest --remote URL --once`, and the gateway's rate limit waited out."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from mnemo.ingest.v1 import ingest_service_pb2 as ipb
from mnemo.search.v1 import search_service_pb2 as spb
from mnemo_embed import HashEmbedder
from mnemo_harvest.remote import Gateway, RemoteSearch
from mnemo_server.stack import Stack
from tests.harvest.agents import conversation
from tests.harvest.harness import REMOTE, RemoteHarvest, create_token, register, source_row, start_harvest
from tests.helpers import MNEMO, Postgres, start_stack

OWN, OTHER = "/work/own-project", "/work/other-project"


@dataclass
class Walls:
    stack: Stack
    own: str
    other: str
    harvester: httpx.AsyncClient
    agent: httpx.AsyncClient
    """agent is a token of the agent role on the same workspace: the positive control of each refusal."""
    admin: httpx.AsyncClient


def session(workspace: str, session_id: str, **changes: Any) -> dict[str, Any]:
    """A harvested session's body, as a remote harvester sends it."""
    return {
        "workspace": workspace,
        "title": f"Session {session_id}",
        "content": f"user: why does the {session_id} job fail?\nassistant: the lock.",
        "tags": ["claude-code", "session"],
        "metadata": {"agent": "claude-code", "session_id": session_id},
        "source_uri": f"claude-code://session/{session_id}",
        "provenance": "harvested_transcript",
        "derivation": {"source_fingerprint": f"10:{session_id}", "summarizer": "transcript"},
        **changes,
    }


def candidates(workspace: str, session_id: str) -> dict[str, Any]:
    uri = f"claude-code://session/{session_id}#decision-0123456789ab"
    item = {"kind": "decision", "content": "DECISION: run it at 02:00.", "source_uri": uri, "idempotency_key": uri}
    return {"workspace": workspace, "items": [item]}


@pytest.fixture(scope="module")
async def walls(postgres: Postgres) -> AsyncIterator[Walls]:
    stack = await start_stack(await postgres.create_database("harvester"), HashEmbedder(64), MNEMO_AUTH="on")
    admin = httpx.AsyncClient(base_url=stack.base_url, headers={"Authorization": f"Bearer {stack.bootstrap_token}"})
    own = (await admin.post("/api/v1/workspaces", json={"path": OWN})).json()["workspace"]["id"]
    other = (await admin.post("/api/v1/workspaces", json={"path": OTHER})).json()["workspace"]["id"]
    clients = {
        role: httpx.AsyncClient(
            base_url=stack.base_url,
            headers={"Authorization": f"Bearer {await create_token(stack, role, [own], f'{role}-walls')}"},
        )
        for role in ("harvester", "agent")
    }
    yield Walls(stack, own, other, clients["harvester"], clients["agent"], admin)
    for client in (*clients.values(), admin):
        await client.aclose()
    await stack.stop()


def refused(answer: httpx.Response, status: int = 403) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["code"] and error["message"] and "Traceback" not in answer.text
    return dict(error)


async def test_a_harvester_places_and_writes_its_own_sessions_and_candidates(walls: Walls) -> None:
    placed = await walls.harvester.get("/api/v1/harvest/placement", params={"path": f"{OWN}/services/api"})
    assert placed.status_code == 200 and placed.json()["workspace"]["id"] == walls.own, placed.text
    written = await walls.harvester.post("/api/v1/harvest/sessions", json=session(walls.own, "s-own"))
    assert written.status_code == 201 and written.json()["outcome"] == "created", written.text
    # What it learns is the identity of what it stored, never text.
    assert set(written.json()["memory"]) == {"id", "version", "workspace_id"}
    again = await walls.harvester.post("/api/v1/harvest/sessions", json=session(walls.own, "s-own"))
    assert again.status_code == 200 and again.json()["outcome"] == "unchanged"
    assert again.json()["memory"]["id"] == written.json()["memory"]["id"]
    lines = await walls.harvester.post("/api/v1/harvest/candidates", json=candidates(walls.own, "s-own"))
    assert lines.status_code == 200, lines.text
    [line] = lines.json()["results"]
    assert line["outcome"] == "created"
    stored = await walls.admin.get(f"/api/v1/memories/{line['memory']['id']}", params={"workspace": walls.own})
    assert (stored.json()["status"], stored.json()["provenance"]) == ("candidate", "extracted"), stored.text


async def test_a_harvester_writes_nowhere_but_its_workspaces(walls: Walls) -> None:
    refused(await walls.harvester.post("/api/v1/harvest/sessions", json=session(walls.other, "s-other")))
    [line] = (await walls.harvester.post("/api/v1/harvest/candidates", json=candidates(walls.other, "s-o"))).json()[
        "results"
    ]
    assert line["error"]["code"] == "PERMISSION_DENIED"
    refused(await walls.harvester.post("/api/v1/harvest/sessions", json=session("global", "s-global")))
    # Another workspace's directory reads as no workspace of its own, in the words an unregistered one gets.
    other = refused(await walls.harvester.get("/api/v1/harvest/placement", params={"path": OTHER}))
    nowhere = refused(await walls.harvester.get("/api/v1/harvest/placement", params={"path": "/work/nobody"}))
    assert other["message"].replace(OTHER, "P") == nowhere["message"].replace("/work/nobody", "P")
    # Positive control: the admin places the other directory, and writes there.
    placed = await walls.admin.get("/api/v1/harvest/placement", params={"path": OTHER})
    assert placed.json()["workspace"]["id"] == walls.other
    assert (await walls.admin.post("/api/v1/harvest/sessions", json=session(walls.other, "s-other"))).status_code == 201


async def test_a_harvester_writes_nothing_but_harvested_sessions(walls: Walls) -> None:
    note = {"workspace": walls.own, "content": "A note a harvester should not write."}
    error = refused(await walls.harvester.post("/api/v1/memories", json=note))
    assert "a harvester token" in error["message"] and "provenance human" in error["message"]
    # Positive control: the agent of the same workspace writes it.
    assert (await walls.agent.post("/api/v1/memories", json=note)).status_code == 201
    # The harvested routes take only harvested shapes: a clear 400 for anything else, nothing written.
    for body in (
        session(walls.own, "s-bad", provenance="human"),
        {k: v for k, v in session(walls.own, "s-bad").items() if k != "derivation"},
        session(walls.own, "s-bad", status="active"),
    ):
        assert refused(await walls.harvester.post("/api/v1/harvest/sessions", json=body), 400)["code"] == (
            "INVALID_ARGUMENT"
        )
    bad = candidates(walls.own, "s-bad")
    bad["items"][0]["kind"] = "note"
    refused(await walls.harvester.post("/api/v1/harvest/candidates", json=bad), 400)
    refused(await walls.harvester.get("/api/v1/harvest/placement", params={"path": "relative/dir"}), 400)
    listed = await walls.admin.get("/api/v1/memories", params={"workspace": walls.own, "limit": 100})
    assert not [m for m in listed.json()["memories"] if "s-bad" in m["source_uri"]]


async def test_a_harvester_reads_corrects_deletes_and_administers_nothing(walls: Walls) -> None:
    written = await walls.agent.post("/api/v1/memories", json={"workspace": walls.own, "content": "The gull job."})
    memory = written.json()["memory"]["id"]
    ws = {"workspace": walls.own}
    calls = [
        ("POST", "/api/v1/search", {"json": {"workspace": walls.own, "query": "gull"}}, 200),
        ("GET", f"/api/v1/memories/{memory}", {"params": ws}, 200),
        ("GET", "/api/v1/memories", {"params": ws}, 200),
        ("GET", f"/api/v1/memories/{memory}/history", {"params": ws}, 200),
        ("GET", "/api/v1/context", {"params": ws}, 200),
        ("GET", "/api/v1/workspaces", {}, 200),
        ("GET", "/api/v1/harvest/sources", {}, 200),
        ("PATCH", f"/api/v1/memories/{memory}", {"params": ws, "json": {"content": "The gull job, fixed."}}, 200),
        ("DELETE", f"/api/v1/memories/{memory}", {"params": {**ws, "reason": "noise"}}, 200),
    ]
    for method, path, kwargs, ok in calls:
        error = refused(await walls.harvester.request(method, path, **kwargs))
        assert "this token is harvester" in error["message"], (path, error)
        # Positive control: the agent of the same workspace may.
        answer = await walls.agent.request(method, path, **kwargs)
        assert answer.status_code == ok, (path, answer.text)
    for method, path, kwargs in (
        ("POST", "/api/v1/harvest/run", {"json": {}}),
        ("POST", "/api/v1/tokens", {"json": {"principal": "x", "role": "agent", "workspaces": [walls.own]}}),
        ("POST", "/api/v1/workspaces", {"json": {"path": "/work/new"}}),
    ):
        refused(await walls.harvester.request(method, path, **kwargs))
        # Positive control: the admin may.
        assert (await walls.admin.request(method, path, **kwargs)).status_code < 300, path


async def test_a_remote_harvester_that_lost_its_state_duplicates_nothing(postgres: Postgres, tmp_path: Path) -> None:
    h = await start_harvest(postgres, tmp_path, where=REMOTE)
    assert isinstance(h, RemoteHarvest)
    try:
        (ws,) = await register(h, "/work/theta")
        # A workspace registered after the token was made: not the harvester's to place sessions in.
        theirs = await h.clients.ingest.AddWorkspace(ipb.AddWorkspaceRequest(root_path="/work/kappa"))
        kept = conversation(h.projects, "/work/theta", "shearwater").write()
        deleted = conversation(h.projects, "/work/theta", "storm-petrel").write()
        elsewhere = conversation(h.projects, "/work/kappa/app", "skua").write()
        first = {p.session_id: p for p in await h.run() if not p.done}
        assert {first[s.session_id].outcome for s in (kept, deleted)} == {"harvested"}
        # Another workspace's directory is no workspace of the harvester's: skipped, unwritten.
        assert (first[elsewhere.session_id].outcome, first[elsewhere.session_id].skip_reason) == (
            "skipped",
            "no-workspace",
        )
        assert await h.sessions_in(theirs.workspace.id) == []
        reason = "not wanted"
        gone = ipb.DeleteMemoryRequest(workspace=ws, id=first[deleted.session_id].memory_id, reason=reason)
        await h.clients.ingest.DeleteMemory(gone)
        state = tmp_path / "data" / "harvest-remote.json"
        assert state.exists()  # positive control: the file the laptop loses below
        state.unlink()
        h = await h.restart()
        again = {p.session_id: p for p in await h.run() if not p.done}
        # Read again, and answered by ingest: the same memory, unchanged; the deleted one stays deleted.
        assert (again[kept.session_id].outcome, again[kept.session_id].memory_id) == (
            "unchanged",
            first[kept.session_id].memory_id,
        )
        assert again[deleted.session_id].skip_reason == "tombstoned"
        assert (await source_row(h, deleted.session_id))["skip_reason"] == "tombstoned"
        [memory] = await h.sessions_in(ws)
        assert (memory.id, memory.version) == (first[kept.session_id].memory_id, 1)
    finally:
        await h.close()
        await h.stack.stop()


async def test_mnemo_serve_harvest_remote_once_prints_the_pass(postgres: Postgres, tmp_path: Path) -> None:
    h = await start_harvest(postgres, tmp_path, where=REMOTE)
    assert isinstance(h, RemoteHarvest)
    try:
        (ws,) = await register(h, "/work/iota")
        written = conversation(h.projects, "/work/iota", "auk").write(age_s=0)
        env = {**os.environ, **h.env, "MNEMO_TOKEN": h.token, "MNEMO_LOG_LEVEL": "warning"}
        command = [MNEMO, "serve", "harvest", "--remote", h.stack.base_url, "--once"]
        # Without --now the session is still active: skipped, nothing written (the control for the next pass).
        code, out = await _run(command, env)
        assert code == 0 and "1 sessions: 0 harvested, 1 skipped, 0 failed" in out, out
        code, out = await _run([*command, "--now"], env)
        assert code == 0 and f"harvested    claude-code  {written.session_id}" in out, out
        assert "1 sessions: 1 harvested, 0 skipped, 0 failed" in out
        assert len(await h.sessions_in(ws)) == 1
        # One session by its id, as a session-end hook names it: harvested at once, though still active.
        ended = conversation(h.projects, "/work/iota", "guillemot").write(age_s=0)
        code, out = await _run([*command, "--session", ended.session_id], env)
        assert code == 0 and "1 sessions: 1 harvested, 0 skipped, 0 failed" in out, out
        assert len(await h.sessions_in(ws)) == 2
        code, out = await _run([*command, "--session", "no-such-session"], env)
        assert code == 1 and "no session 'no-such-session'" in out and "Traceback" not in out, out
        # A token the gateway does not know: the new session fails, named, and the exit code says so.
        conversation(h.projects, "/work/iota", "razorbill").write()
        code, out = await _run([*command, "--now"], {**env, "MNEMO_TOKEN": "mnemo_nope_nope"})
        assert code == 1 and "UNAUTHENTICATED" in out, out
    finally:
        await h.close()
        await h.stack.stop()


async def _run(command: list[str], env: dict[str, str]) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        *command, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode or 0, out.decode()


async def test_a_remote_harvester_waits_out_the_rate_limit(postgres: Postgres) -> None:
    stack = await start_stack(
        await postgres.create_database("harvester_rate"),
        HashEmbedder(64),
        MNEMO_AUTH="on",
        MNEMO_RATE_LIMIT_PER_MIN="60",
    )
    try:
        admin = {"Authorization": f"Bearer {stack.bootstrap_token}"}
        async with httpx.AsyncClient(base_url=stack.base_url, headers=admin) as http:
            own = (await http.post("/api/v1/workspaces", json={"path": OWN})).json()["workspace"]["id"]
        token = await create_token(stack, "harvester", [own], "rate-harvester")
        gateway = Gateway(stack.base_url, token, timeout_s=30)
        try:
            answers = []
            while 429 not in answers and len(answers) < 300:  # the bucket refills while we drain it
                answered = await gateway.http.get("/api/v1/harvest/placement", params={"path": OWN})
                answers.append(answered.status_code)
            # Positive control: the token's bucket is empty (a request past the minute's 60 is refused)...
            assert answers[-1] == 429 and answers[:60] == [200] * 60, answers
            # ...and the harvester's own call waits as Retry-After says, then lands.
            placed = await RemoteSearch(gateway).ResolveWorkspace(spb.ResolveWorkspaceRequest(workspace=OWN))
            assert placed.workspace.id == own
        finally:
            await gateway.aclose()
    finally:
        await stack.stop()
