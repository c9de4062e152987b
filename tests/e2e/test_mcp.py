"""End to end with the official MCP client over HTTP, on the real model: write, search, get, update."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import asyncpg
import pytest
from mcp.client.client import Client

from mnemo_server.stack import Stack
from tests.helpers import MCP_TOOLS, eventually


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


@pytest.fixture
async def project(model_stack: Stack) -> str:
    """A registered project workspace, named in the MCP URL by its root path as an agent would."""
    root = f"/work/projects/demo-{uuid.uuid4().hex[:6]}"
    async with Client(f"{model_stack.base_url}/mcp") as client:
        await client.list_tools()
    import httpx

    async with httpx.AsyncClient(base_url=model_stack.base_url) as http:
        response = await http.post("/api/v1/workspaces", json={"path": root})
        assert response.status_code == 201
    return root


async def test_the_tools_are_listed_with_guidance_for_agents(model_stack: Stack) -> None:
    async with Client(f"{model_stack.base_url}/mcp") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == MCP_TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 60, tool.name
    assert "start of a task" in tools["memory_search"].description
    assert "content" in tools["memory_write"].input_schema["required"]


async def test_write_search_get_update_end_to_end(model_stack: Stack, project: str) -> None:
    url = f"{model_stack.base_url}/mcp?workspace={project}/services/api"
    async with Client(url) as client:
        written = _data(
            await client.call_tool(
                "memory_write",
                {
                    "content": "We retry webhook deliveries with exponential backoff, up to six attempts, "
                    "because the payment provider drops requests during its nightly maintenance.",
                    "title": "Webhook retry policy",
                    "kind": "decision",
                    "tags": ["webhooks"],
                },
            )
        )
        memory_id = written["memory"]["id"]
        assert written["outcome"] == "created"
        assert written["memory"]["kind"] == "decision" and written["memory"]["provenance"] == "agent"

        # Lexical: found as soon as the write returned.
        lexical = _data(await client.call_tool("memory_search", {"query": "webhook backoff", "mode": "lexical"}))
        assert [r["id"] for r in lexical["results"]] == [memory_id]
        assert lexical["results"][0]["label"].startswith("[active · agent decision · ")

        # Semantic: found by meaning (no shared keyword) once the embedding lands.
        question = {"query": "how many times do we resend failed callbacks to the payments vendor?", "mode": "semantic"}
        started = time.perf_counter()

        async def semantic_finds_it() -> bool:
            result = _data(await client.call_tool("memory_search", question))
            return bool(result["results"]) and result["results"][0]["id"] == memory_id

        await eventually(semantic_finds_it, timeout=30, interval=0.05)
        print(f"semantic search found the note {time.perf_counter() - started:.2f} s after the write returned")

        hybrid = _data(await client.call_tool("memory_search", {**question, "mode": "hybrid", "explain": True}))
        assert hybrid["results"][0]["id"] == memory_id and hybrid["degraded"] == []
        assert hybrid["results"][0]["explanation"]["semantic"]["rank"] == 1

        got = _data(await client.call_tool("memory_get", {"id": memory_id}))
        assert got["content"].startswith("We retry webhook deliveries") and got["version"] == 1

        updated = _data(
            await client.call_tool(
                "memory_update",
                {
                    "id": memory_id,
                    "content": "We retry webhook deliveries with a fixed 30 second delay, up to ten attempts, "
                    "since the provider asked us to avoid bursts.",
                },
            )
        )
        assert updated["outcome"] == "new_version" and updated["memory"]["version"] == 2
        fresh = _data(await client.call_tool("memory_search", {"query": "fixed 30 second delay", "mode": "lexical"}))
        assert [r["id"] for r in fresh["results"]] == [memory_id]
        stale = _data(await client.call_tool("memory_search", {"query": "exponential backoff six", "mode": "lexical"}))
        assert stale["results"] == []

        status = _data(await client.call_tool("memory_status", {}))
        assert status["embedder_state"] == "ready" and status["embedding_dimension"] == 384

    # History keeps the old version (the history RPC comes with corrections; the table has it now).
    conn = await asyncpg.connect(model_stack.dsn)
    try:
        versions = await conn.fetch(
            "SELECT version, content FROM memory_versions WHERE memory_id = $1 ORDER BY version", memory_id
        )
    finally:
        await conn.close()
    assert [v["version"] for v in versions] == [1, 2]
    assert "exponential backoff" in versions[0]["content"] and "fixed 30 second" in versions[1]["content"]


async def test_the_url_workspace_and_the_argument_select_the_same_walls(model_stack: Stack, project: str) -> None:
    other = f"/work/projects/other-{uuid.uuid4().hex[:6]}"
    import httpx

    async with httpx.AsyncClient(base_url=model_stack.base_url) as http:
        assert (await http.post("/api/v1/workspaces", json={"path": other})).status_code == 201
    async with Client(f"{model_stack.base_url}/mcp?workspace={project}") as client:
        mine = _data(await client.call_tool("memory_write", {"content": "kiwifruit build cache lives in /tmp/kc"}))
        theirs = _data(
            await client.call_tool(
                "memory_write", {"content": "kiwifruit build cache lives in /var/kc", "workspace": other}
            )
        )
        in_url = _data(await client.call_tool("memory_search", {"query": "kiwifruit cache", "mode": "lexical"}))
        by_arg = _data(
            await client.call_tool("memory_search", {"query": "kiwifruit cache", "mode": "lexical", "workspace": other})
        )
        assert [r["id"] for r in in_url["results"]] == [mine["memory"]["id"]]
        assert [r["id"] for r in by_arg["results"]] == [theirs["memory"]["id"]]
        # Reading another workspace's memory by id through this one is NOT_FOUND, as a tool error.
        crossed = await client.call_tool("memory_get", {"id": theirs["memory"]["id"]})
        assert crossed.is_error and "NOT_FOUND: memory " in crossed.content[0].text
