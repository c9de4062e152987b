"""Review through the real gateway: the REST routes of the proposals queue and the MCP tool
memory_propose, with a positive control beside every refusal."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from mnemo_server.stack import Stack
from tests.gateway.test_corrections_surfaces import assert_clear_error, ok
from tests.gateway.test_corrections_surfaces import counts as correction_counts
from tests.helpers import mcp_client, tool_json, wait_posted

pytestmark = pytest.mark.asyncio(loop_scope="session")

API = "/api/v1"


@pytest.fixture(scope="module")
async def http(hash_stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=hash_stack.base_url, timeout=30) as client:
        yield client


async def counts(dsn: str) -> dict[str, int]:
    """Every table a decision writes, proposals included: a refusal leaves each unchanged."""
    result = await correction_counts(dsn)
    conn = await asyncpg.connect(dsn)
    try:
        result["proposals"] = await conn.fetchval("SELECT count(*) FROM proposals")
        result["undecided"] = await conn.fetchval("SELECT count(*) FROM proposals WHERE state = 'open'")
    finally:
        await conn.close()
    return result


async def workspace(http: httpx.AsyncClient) -> str:
    name = f"review-{uuid.uuid4().hex[:8]}"
    ok(await http.post(f"{API}/workspaces", json={"name": name}), 201)
    return name


async def write(http: httpx.AsyncClient, ws: str, content: str, **fields: Any) -> dict[str, Any]:
    return ok(await http.post(f"{API}/memories", json={"workspace": ws, "content": content, **fields}), 201)["memory"]


async def propose(http: httpx.AsyncClient, ws: str, kind: str, memory_ids: list[str], **fields: Any) -> dict[str, Any]:
    body = {"workspace": ws, "kind": kind, "memory_ids": memory_ids, "reason": "worth a look", **fields}
    return ok(await http.post(f"{API}/proposals", json=body), 201)["proposal"]


async def test_rest_propose_list_get_accept_reverse(http: httpx.AsyncClient) -> None:
    ws = await workspace(http)
    memory = await write(http, ws, "Releases are cut from the main branch every Tuesday.")
    proposal = await propose(http, ws, "confirm", [memory["id"]])
    assert proposal["state"] == "open" and proposal["source"] == "human" and proposal["kind"] == "confirm"

    listed = ok(await http.get(f"{API}/proposals", params={"workspace": ws, "state": "open"}))
    assert [p["id"] for p in listed["proposals"]] == [proposal["id"]]
    assert ok(await http.get(f"{API}/proposals", params={"workspace": ws, "state": "applied"}))["proposals"] == []
    got = ok(await http.get(f"{API}/proposals/{proposal['id']}", params={"workspace": ws}))
    assert got["proposal"]["stale"] is False
    assert [m["id"] for m in got["memories"]] == [memory["id"]] and got["memories"][0]["status"] == "active"

    accepted = ok(await http.post(f"{API}/proposals/{proposal['id']}/accept", json={"workspace": ws}))
    assert accepted["proposal"]["state"] == "applied" and accepted["memories"][0]["status"] == "confirmed"
    assert accepted["proposal"]["applied"]["memories"][0]["before"]["status"] == "active"
    again = await http.post(f"{API}/proposals/{proposal['id']}/accept", json={"workspace": ws})
    assert_clear_error(again, 409, "applied")

    no_reason = await http.post(f"{API}/proposals/{proposal['id']}/reverse", json={"workspace": ws})
    assert_clear_error(no_reason, 400, "reason")
    reversed_ = ok(await http.post(f"{API}/proposals/{proposal['id']}/reverse", json={"reason": "too early"}))
    assert reversed_["proposal"]["state"] == "reversed" and reversed_["memories"][0]["status"] == "active"
    got = ok(await http.get(f"{API}/memories/{memory['id']}", params={"workspace": ws}))
    assert got["status"] == "active"


async def test_rest_reject_and_bad_input(http: httpx.AsyncClient, hash_stack: Stack) -> None:
    ws = await workspace(http)
    memory = await write(http, ws, "The staging database is reset every night at 02:00.")
    proposal = await propose(http, ws, "retract", [memory["id"]])
    before = await counts(hash_stack.config.database.url)
    # Refusals: unknown id, bad id, bad kind, missing reason, a merge of one memory; nothing written.
    assert_clear_error(
        await http.post(f"{API}/proposals/{uuid.uuid4()}/accept", json={"workspace": ws}), 404, "no proposal"
    )
    assert_clear_error(await http.post(f"{API}/proposals/nope/accept", json={}), 400, "not a uuid")
    assert_clear_error(await http.get(f"{API}/proposals/nope"), 400, "not a uuid")
    bad_kind = {"workspace": ws, "kind": "explode", "memory_ids": [memory["id"]], "reason": "x"}
    assert (await http.post(f"{API}/proposals", json=bad_kind)).status_code in (400, 422)
    no_reason = {"workspace": ws, "kind": "retract", "memory_ids": [memory["id"]], "reason": " "}
    assert_clear_error(await http.post(f"{API}/proposals", json=no_reason), 400, "reason")
    lone_merge = {"workspace": ws, "kind": "merge", "memory_ids": [memory["id"]], "reason": "dupes"}
    assert_clear_error(await http.post(f"{API}/proposals", json=lone_merge), 400, "merge")
    assert_clear_error(await http.post(f"{API}/proposals/{proposal['id']}/reject", json={"workspace": ws}), 400)
    assert await counts(hash_stack.config.database.url) == before
    # The positive control: the same proposal rejected with a reason.
    rejected = ok(await http.post(f"{API}/proposals/{proposal['id']}/reject", json={"reason": "it still holds"}))
    assert rejected["proposal"]["state"] == "rejected" and rejected["proposal"]["decision_reason"] == "it still holds"
    got = ok(await http.get(f"{API}/memories/{memory['id']}", params={"workspace": ws}))
    assert got["status"] == "active"


async def test_rest_dedupe_answers_the_first(http: httpx.AsyncClient) -> None:
    ws = await workspace(http)
    memory = await write(http, ws, "Feature flags live in LaunchDarkly, not in env vars.")
    body = {"workspace": ws, "kind": "confirm", "memory_ids": [memory["id"]], "reason": "x", "dedupe_key": "k1"}
    first = ok(await http.post(f"{API}/proposals", json=body), 201)
    second = ok(await http.post(f"{API}/proposals", json=body), 200)
    assert second["created"] is False and second["proposal"]["id"] == first["proposal"]["id"]
    third = ok(await http.post(f"{API}/proposals", json={**body, "dedupe_key": "k2"}), 201)
    assert third["proposal"]["id"] != first["proposal"]["id"]


async def test_openapi_lists_the_routes(http: httpx.AsyncClient) -> None:
    paths = ok(await http.get(f"{API}/openapi.json"))["paths"]
    for path in (
        "/api/v1/proposals",
        "/api/v1/proposals/{proposal_id}",
        "/api/v1/proposals/{proposal_id}/accept",
        "/api/v1/proposals/{proposal_id}/reject",
        "/api/v1/proposals/{proposal_id}/reverse",
    ):
        assert path in paths, path


async def test_mcp_memory_propose_opens_an_agent_proposal_a_reviewer_decides(
    http: httpx.AsyncClient, hash_stack: Stack
) -> None:
    ws = await workspace(http)
    keep = await write(http, ws, "Use ruff for linting and formatting; black is not used.")
    dupe = await write(http, ws, "We lint and format with ruff (no black).")
    async with mcp_client(hash_stack, ws) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert "memory_propose" in tools and "reviewer" in (tools["memory_propose"].description or "")
        # No MCP tool decides: agents propose, a reviewer accepts over REST, the CLI or the web UI.
        assert not {name for name in tools if "accept" in name or "reject" in name}
        result = tool_json(
            await client.call_tool(
                "memory_propose",
                {"kind": "merge", "memory_ids": [keep["id"], dupe["id"]], "reason": "the same convention twice"},
            )
        )
        refused = await client.call_tool("memory_propose", {"kind": "merge", "memory_ids": [keep["id"]], "reason": "x"})
        assert refused.is_error and "merge" in refused.content[0].text
    proposal = result["proposal"]
    assert result["created"] and proposal["source"] == "agent" and proposal["state"] == "open"
    assert proposal["workspace_id"] == ws
    # The memories are untouched until a reviewer decides; then the duplicate leaves search.
    await wait_posted(hash_stack.config.database.url)

    async def found() -> list[str]:
        body = {"workspace": ws, "query": "ruff", "mode": "lexical"}
        return sorted(r["id"] for r in ok(await http.post(f"{API}/search", json=body))["results"])

    assert await found() == sorted([keep["id"], dupe["id"]])
    ok(await http.post(f"{API}/proposals/{proposal['id']}/accept", json={"workspace": ws}))
    assert await found() == [keep["id"]]
    ok(await http.post(f"{API}/proposals/{proposal['id']}/reverse", json={"workspace": ws, "reason": "not the same"}))
    assert await found() == sorted([keep["id"], dupe["id"]])
