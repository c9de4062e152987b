"""Feedback through the real gateway on the shared hash stack: REST, the MCP tool over HTTP and the
`mnemo feedback` CLI; good and bad input, `explain`, proposals. Each test uses workspaces of its own.
(In local mode every call is the one principal `local`; several principals: tests/e2e/test_feedback_walls.py.)"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
from mcp.client.client import Client

from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo_platform import enum_labels
from mnemo_server.stack import Stack
from tests.gateway.test_corrections_surfaces import assert_clear_error, assert_tool_error, ok
from tests.helpers import Clients, mcp_url, mnemo, tool_json, wait_posted

API = "/api/v1"
MISSING = str(uuid.UUID(int=11))


@pytest.fixture(scope="module")
async def http(hash_stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=hash_stack.base_url, timeout=30) as client:
        yield client


async def write(http: httpx.AsyncClient, ws: str, content: str) -> dict[str, Any]:
    return ok(await http.post(f"{API}/memories", json={"workspace": ws, "content": content}), 201)["memory"]


async def state(dsn: str) -> tuple[int, int, int, list[float]]:
    """Votes, audit events, proposals and every memory's factor: a refused vote changes none of them."""
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM feedback) AS f, (SELECT count(*) FROM audit_events) AS a, "
            "(SELECT count(*) FROM proposals) AS p"
        )
        factors = [r["feedback_factor"] for r in await conn.fetch("SELECT feedback_factor FROM memories ORDER BY id")]
        return row["f"], row["a"], row["p"], factors
    finally:
        await conn.close()


async def test_rest_records_replaces_and_explains_a_vote(
    http: httpx.AsyncClient, hash_clients: Clients, hash_stack: Stack
) -> None:
    ws = (await hash_clients.workspace(f"fb-rest-{uuid.uuid4().hex[:8]}")).id
    word = f"zephyr{uuid.uuid4().hex[:6]}"
    memory = await write(http, ws, f"The {word} cache is warmed at deploy time.")
    first = ok(await http.post(f"{API}/memories/{memory['id']}/feedback", json={"workspace": ws, "vote": "useful"}))
    assert (first["feedback"]["vote"], first["feedback"]["principal"], first["replaced"]) == ("useful", "local", None)
    assert (first["feedback_factor"], first["voters"], first["proposal"]) == (1.05, 1, None)
    assert first["memory"]["trust"] == pytest.approx(0.85 * 1.05, abs=1e-4)
    second = ok(
        await http.post(
            f"{API}/memories/{memory['id']}/feedback",
            json={"workspace": ws, "vote": "not-useful", "note": "stale after the cache rewrite"},
        )
    )
    assert (second["replaced"], second["feedback_factor"], second["voters"]) == ("useful", 0.95, 1)
    assert second["feedback"]["note"] == "stale after the cache rewrite"
    await wait_posted(hash_stack.dsn)
    found = ok(await http.post(f"{API}/search", json={"workspace": ws, "query": word, "explain": True}))
    hit = found["results"][0]
    assert hit["id"] == memory["id"]
    assert hit["explanation"]["feedback_factor"] == pytest.approx(0.95)
    assert hit["explanation"]["trust_factor"] == pytest.approx(0.85 * 0.95, rel=1e-5)
    # The vote is in the memory's history, as an audit event with the note.
    history = ok(await http.get(f"{API}/memories/{memory['id']}/history", params={"workspace": ws}))
    votes = [e for e in history["events"] if e["action"] == "feedback"]
    assert [e["details"]["vote"] for e in votes] == ["useful", "not-useful"]


async def test_rest_harmful_and_outdated_open_one_proposal_each(
    http: httpx.AsyncClient, hash_clients: Clients, hash_stack: Stack
) -> None:
    dsn = hash_stack.dsn
    ws = (await hash_clients.workspace(f"fb-prop-{uuid.uuid4().hex[:8]}")).id
    harmful = await write(http, ws, "Force-push to main to fix a bad merge.")
    old = await write(http, ws, "The API listens on port 8000.")
    new = await write(http, ws, "The API listens on port 8420.")
    route = f"{API}/memories/{harmful['id']}/feedback"
    opened = ok(await http.post(route, json={"workspace": ws, "vote": "harmful", "note": "rewrites shared history"}))
    assert opened["proposal"]["created"] and opened["feedback_factor"] == 0.9
    again = ok(await http.post(route, json={"workspace": ws, "vote": "harmful"}))
    assert again["proposal"] == {"id": opened["proposal"]["id"], "created": False}
    superseding = ok(
        await http.post(
            f"{API}/memories/{old['id']}/feedback",
            json={"workspace": ws, "vote": "outdated", "successor_id": new["id"]},
        )
    )
    assert superseding["proposal"]["created"]
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT id, kind, memory_ids, change::text, reason, source, state FROM proposals "
            "WHERE workspace_id = $1 ORDER BY kind",
            ws,
        )
    finally:
        await conn.close()
    assert [(r["kind"], [str(i) for i in r["memory_ids"]], r["source"], r["state"]) for r in rows] == [
        ("retract", [harmful["id"]], "feedback", "open"),
        ("supersede", [old["id"], new["id"]], "feedback", "open"),
    ]
    assert str(rows[0]["id"]) == opened["proposal"]["id"] and rows[0]["reason"] == "rewrites shared history"
    assert json.loads(rows[1]["change"]) == {"vote": "outdated", "successor_id": new["id"]}
    # Positive control: the successor itself, voted useful, opens nothing.
    plain = ok(await http.post(f"{API}/memories/{new['id']}/feedback", json={"workspace": ws, "vote": "useful"}))
    assert plain["proposal"] is None


async def test_rest_bad_votes_are_clear_errors_and_write_nothing(
    http: httpx.AsyncClient, hash_clients: Clients, hash_stack: Stack
) -> None:
    ws = (await hash_clients.workspace(f"fb-rbad-{uuid.uuid4().hex[:8]}")).id
    other = (await hash_clients.workspace(f"fb-rother-{uuid.uuid4().hex[:8]}")).id
    memory = await write(http, ws, "Tests run in random order.")
    foreign = await write(http, other, "Another workspace's note on ordering.")
    route = f"{API}/memories/{memory['id']}/feedback"
    cases: list[tuple[str, dict[str, Any], int, str, dict[str, Any]]] = [
        (route, {"workspace": ws, "vote": "great"}, 400, "vote", {"workspace": ws, "vote": "useful"}),
        (route, {"workspace": ws}, 400, "vote", {"workspace": ws, "vote": "useful"}),
        (f"{API}/memories/not-a-uuid/feedback", {"workspace": ws, "vote": "useful"}, 400, "not-a-uuid", {}),
        (f"{API}/memories/{MISSING}/feedback", {"workspace": ws, "vote": "useful"}, 404, MISSING, {}),
        (f"{API}/memories/{foreign['id']}/feedback", {"workspace": ws, "vote": "useful"}, 404, foreign["id"], {}),
        (route, {"workspace": ws, "vote": "useful", "note": "n" * 2001}, 400, "at most 2000", {"note": "n" * 2000}),
        (route, {"workspace": ws, "vote": "useful", "extra": 1}, 400, "extra", {}),
        (route, {"workspace": ws, "vote": "useful", "successor_id": foreign["id"]}, 400, "outdated vote only", {}),
    ]
    for path, body, status, fragment, fix in cases:
        before = await state(hash_stack.dsn)
        error = assert_clear_error(await http.post(path, json=body), status)
        assert fragment in json.dumps(error) or fragment in error["message"], (body, error)
        assert await state(hash_stack.dsn) == before, body
        # Positive control beside each: the vote done right on this workspace's memory is recorded.
        good = {"workspace": ws, "vote": "useful", **fix}
        assert ok(await http.post(route, json=good))["feedback"]["memory_id"] == memory["id"]
    # Another workspace's memory answers as one that never existed, word for word.
    alien = (
        await http.post(f"{API}/memories/{foreign['id']}/feedback", json={"workspace": ws, "vote": "useful"})
    ).json()
    never = (await http.post(f"{API}/memories/{MISSING}/feedback", json={"workspace": ws, "vote": "useful"})).json()
    assert alien["error"]["message"].replace(foreign["id"], "<id>") == never["error"]["message"].replace(
        MISSING, "<id>"
    )
    assert alien["error"]["reason"] == never["error"]["reason"] == "MEMORY_NOT_FOUND"


async def test_mcp_memory_feedback(hash_stack: Stack, hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace(f"fb-mcp-{uuid.uuid4().hex[:8]}")).id
    async with Client(mcp_url(hash_stack, ws)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        schema = tools["memory_feedback"].input_schema
        assert set(schema["required"]) == {"id", "vote"}
        assert schema["properties"]["vote"]["enum"] == enum_labels(ingest_pb.FeedbackVote)
        memory = tool_json(await client.call_tool("memory_write", {"content": "Never log request bodies."}))["memory"]
        voted = tool_json(
            await client.call_tool("memory_feedback", {"id": memory["id"], "vote": "harmful", "note": "they hold PII"})
        )
        assert (voted["feedback"]["vote"], voted["feedback_factor"]) == ("harmful", 0.9)
        assert voted["proposal"]["created"]
        before = await state(hash_stack.dsn)
        assert_tool_error(
            await client.call_tool("memory_feedback", {"id": memory["id"], "vote": "meh"}), "memory_feedback"
        )
        assert_tool_error(
            await client.call_tool("memory_feedback", {"id": MISSING, "vote": "useful"}), "memory_feedback", "NOT_FOUND"
        )
        assert await state(hash_stack.dsn) == before
        # Positive control: the same call with a known vote is answered, replacing the agent's vote.
        again = tool_json(await client.call_tool("memory_feedback", {"id": memory["id"], "vote": "useful"}))
        assert (again["replaced"], again["feedback_factor"], again["proposal"]) == ("harmful", 1.05, None)


async def test_cli_feedback(hash_stack: Stack, hash_clients: Clients, http: httpx.AsyncClient) -> None:
    ws = (await hash_clients.workspace(f"fb-cli-{uuid.uuid4().hex[:8]}")).id
    memory = await write(http, ws, "Migrations run before the new code starts.")
    code, out, err = await mnemo(
        hash_stack, "feedback", memory["id"], "outdated", "--note", "we run them after", "-w", ws
    )
    assert code == 0, err
    assert "voted outdated: feedback factor 0.9 from 1 voter" in out and "opened for a reviewer" in out
    code, out, err = await mnemo(hash_stack, "feedback", memory["id"], "useful", "-w", ws, "--json")
    assert code == 0, err
    assert json.loads(out)["replaced"] == "outdated"
    code, out, err = await mnemo(hash_stack, "feedback", memory["id"], "useful", "-w", ws)
    assert code == 0 and "voted useful (already your vote: nothing changed): feedback factor 1.05" in out, out
    before = await state(hash_stack.dsn)
    code, out, err = await mnemo(hash_stack, "feedback", memory["id"], "great", "-w", ws)
    assert code == 2 and "invalid choice: 'great'" in err
    code, out, err = await mnemo(hash_stack, "feedback", MISSING, "useful", "-w", ws)
    assert code == 1 and err.startswith("mnemo: NOT_FOUND") and MISSING in err
    assert await state(hash_stack.dsn) == before
