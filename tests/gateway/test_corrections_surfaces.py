"""Corrections through the real gateway: the MCP tools over HTTP and the REST routes, good and bad input."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import asyncpg
import httpx
import pytest
from mcp.client.client import Client

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_platform import reason_name
from mnemo_server.stack import Stack
from tests.helpers import LEAKS, MCP_TOOLS, Clients, mcp_url, table_counts, tool_json

API = "/api/v1"
# Every reason an error body may name: the ErrorReason names of errors.proto.
REASONS = frozenset(reason_name(v) for v in reasons_pb.ErrorReason.values())
# What must never reach a caller: a Python trace, a source file, the installation's paths.
MISSING = str(uuid.UUID(int=7))
LABEL = re.compile(r"^\[(\w+) · ([\w ]+) (\w+) · (\d{4}-\d{2}-\d{2}) · by (\S+) in (\S+)\]$")
CORRECTION_TOOLS = {"memory_supersede", "memory_retract", "memory_delete", "memory_history"}


# -- helpers -------------------------------------------------------------------------------------------------


async def counts(dsn: str) -> dict[str, int]:
    """table_counts plus the tables corrections write: a refused request must leave all of them unchanged."""
    result = await table_counts(dsn)
    conn = await asyncpg.connect(dsn)
    try:
        for table in ("memory_states", "tombstones"):
            result[table] = await conn.fetchval(f"SELECT count(*) FROM {table}")
    finally:
        await conn.close()
    return result


def assert_clear_error(response: httpx.Response, status: int, *fragments: str) -> dict[str, Any]:
    """A 4xx with the one JSON error shape, a message that says something, and no internals."""
    assert response.status_code == status, (response.status_code, response.text[:500])
    assert 400 <= response.status_code < 500
    assert response.headers["content-type"].startswith("application/json"), response.headers["content-type"]
    error = response.json()["error"]
    assert isinstance(error["code"], str) and error["code"]
    assert error["reason"] in REASONS, error
    assert isinstance(error["message"], str) and len(error["message"]) > 5
    for fragment in fragments:
        assert fragment in error["message"], error["message"]
    assert not LEAKS.search(response.text), response.text[:500]
    return error


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, (response.status_code, response.text[:500])
    return response.json()


def assert_tool_error(result: Any, tool: str, *fragments: str) -> str:
    assert result.is_error, result
    text = result.content[0].text
    # The SDK's crash message is exactly "Error executing tool NAME": anything anticipated says more.
    assert text != f"Error executing tool {tool}", f"{tool} crashed"
    assert text.startswith(f"Error executing tool {tool}: ") or text.startswith("Unknown tool"), text
    for fragment in fragments:
        assert fragment in text, text
    assert not LEAKS.search(text), text
    return text


def ids(results: list[dict[str, Any]]) -> list[str]:
    return [r["id"] for r in results]


async def moment() -> datetime:
    """A time strictly between what was recorded before the call and what is recorded after it."""
    await asyncio.sleep(0.05)
    at = datetime.now(UTC)
    await asyncio.sleep(0.05)
    return at


@pytest.fixture(scope="module")
async def http(hash_stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=hash_stack.base_url, timeout=30) as client:
        yield client


async def write(http: httpx.AsyncClient, ws: str, content: str, **fields: Any) -> dict[str, Any]:
    return ok(await http.post(f"{API}/memories", json={"workspace": ws, "content": content, **fields}), 201)["memory"]


# -- MCP: the tool list ------------------------------------------------------------------------------------


async def test_mcp_offers_the_correction_tools_and_none_reserved_for_humans(
    hash_stack: Stack, hash_clients: Clients
) -> None:
    ws = (await hash_clients.workspace()).id
    async with Client(mcp_url(hash_stack, ws)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == MCP_TOOLS
        for name in CORRECTION_TOOLS:
            assert tools[name].description and len(tools[name].description) > 80, name
        assert "reason" in tools["memory_retract"].input_schema["required"]
        assert "reason" in tools["memory_delete"].input_schema["required"]
        for name in ("memory_search", "memory_get"):
            assert {"include_history", "as_of", "valid_at"} <= set(tools[name].input_schema["properties"]), name
        # Purge, confirm and restore are for humans (CLI, REST): an agent cannot call them.
        assert not [n for n in tools if any(word in n for word in ("purge", "confirm", "restore"))]
        memory = tool_json(await client.call_tool("memory_write", {"content": "An agent note to guard."}))["memory"]
        before = await counts(hash_stack.dsn)
        for name in ("memory_purge", "memory_confirm", "memory_restore"):
            assert_tool_error(await client.call_tool(name, {"id": memory["id"], "force": True}), name, name)
        assert await counts(hash_stack.dsn) == before
        # Positive control: the memory is untouched and still active.
        got = tool_json(await client.call_tool("memory_get", {"id": memory["id"]}))
        assert got["status"] == "active" and got["content"] == "An agent note to guard."


# -- MCP: supersede, retract, delete, history end to end -----------------------------------------------------


async def test_mcp_supersede_hides_the_old_belief_and_keeps_it_in_history(
    hash_stack: Stack, hash_clients: Clients
) -> None:
    ws = (await hash_clients.workspace()).id
    async with Client(mcp_url(hash_stack, ws)) as client:
        old = tool_json(
            await client.call_tool(
                "memory_write",
                {"content": "We deploy the staging hosts with Fabric scripts.", "kind": "decision"},
            )
        )["memory"]
        assert old["label"].startswith("[active · agent decision · ")
        await hash_clients.wait_embedded(old["id"], ws)
        before_supersede = await moment()
        result = tool_json(
            await client.call_tool(
                "memory_supersede",
                {
                    "id": old["id"],
                    "content": "We deploy the staging hosts with Ansible playbooks.",
                    "reason": "Fabric was dropped in March",
                },
            )
        )
        new = result["successor"]
        assert result["superseded"]["id"] == old["id"]
        assert result["superseded"]["status"] == "superseded"
        assert result["superseded"]["superseded_by"] == new["id"]
        assert result["superseded"]["valid_to"], "supersede closes the old belief's valid time"
        assert new["status"] == "active" and new["kind"] == "decision" and new["provenance"] == "agent"
        await hash_clients.wait_embedded(new["id"], ws)

        # Default search: the successor, never the old value -- in every mode, and for a query only the
        # old text matches (the relaxed lexical leg would take any of its words).
        for mode in ("lexical", "hybrid", "semantic"):
            found = tool_json(await client.call_tool("memory_search", {"query": "deploy staging hosts", "mode": mode}))
            assert old["id"] not in ids(found["results"]), mode
            assert new["id"] in ids(found["results"]), mode
        only_old = tool_json(
            await client.call_tool("memory_search", {"query": "Fabric scripts staging", "mode": "lexical"})
        )
        assert old["id"] not in ids(only_old["results"])

        # include_history brings it back, labelled, with the pointer to its successor.
        history = tool_json(
            await client.call_tool(
                "memory_search", {"query": "Fabric scripts staging", "mode": "lexical", "include_history": True}
            )
        )
        hit = next(r for r in history["results"] if r["id"] == old["id"])
        assert hit["label"].startswith("[superseded · agent decision · ")
        assert hit["superseded_by"] == new["id"] and hit["status"] == "superseded"

        # memory_get: an error that says why and how to read it; with include_history, the memory.
        text = assert_tool_error(await client.call_tool("memory_get", {"id": old["id"]}), "memory_get", "NOT_FOUND")
        assert old["id"] in text and "superseded" in text and new["id"] in text and "include_history" in text
        got = tool_json(await client.call_tool("memory_get", {"id": old["id"], "include_history": True}))
        assert got["content"] == "We deploy the staging hosts with Fabric scripts."
        assert got["status"] == "superseded" and got["superseded_by"] == new["id"]
        assert got["status_reason"] == "Fabric was dropped in March"
        assert tool_json(await client.call_tool("memory_get", {"id": new["id"]}))["status"] == "active"

        # as_of before the supersede: the old value, as it was then (active); the successor did not exist yet.
        then = tool_json(await client.call_tool("memory_get", {"id": old["id"], "as_of": before_supersede.isoformat()}))
        assert then["content"] == "We deploy the staging hosts with Fabric scripts."
        assert then["status"] == "active" and then["superseded_by"] == "" and then["label"].startswith("[active · ")
        not_yet = await client.call_tool("memory_get", {"id": new["id"], "as_of": before_supersede.isoformat()})
        assert_tool_error(not_yet, "memory_get", "NOT_FOUND", new["id"], "did not exist yet")
        searched_then = tool_json(
            await client.call_tool(
                "memory_search",
                {"query": "deploy staging hosts", "mode": "lexical", "as_of": before_supersede.isoformat()},
            )
        )
        assert ids(searched_then["results"]) == [old["id"]]

        # memory_history: the versions, the status changes and the audit events, in order.
        story = tool_json(await client.call_tool("memory_history", {"id": old["id"]}))
        assert story["memory"]["status"] == "superseded"
        assert [v["version"] for v in story["versions"]] == [1]
        assert story["versions"][0]["content"] == "We deploy the staging hosts with Fabric scripts."
        assert [s["status"] for s in story["states"]] == ["active", "superseded"]
        assert story["states"][0]["recorded_to"] == story["states"][1]["recorded_from"]
        assert story["states"][1]["superseded_by"] == new["id"]
        assert story["states"][1]["reason"] == "Fabric was dropped in March"
        assert [e["action"] for e in story["events"]] == ["write", "supersede"]
        assert story["events"][1]["details"]["successor"] == new["id"]
        assert story["events"][0]["hash"] == story["events"][1]["prev_hash"]
        successor_story = tool_json(await client.call_tool("memory_history", {"id": new["id"]}))
        assert [s["status"] for s in successor_story["states"]] == ["active"]
        assert "supersede" in [e["action"] for e in successor_story["events"]]


async def test_mcp_retract_needs_a_reason_and_hides_the_memory(hash_stack: Stack, hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    async with Client(mcp_url(hash_stack, ws)) as client:
        wrong = tool_json(
            await client.call_tool("memory_write", {"content": "The flaky login test is caused by DNS timeouts."})
        )["memory"]
        sibling = tool_json(
            await client.call_tool("memory_write", {"content": "The flaky login test needs a fresh browser profile."})
        )["memory"]
        before = await counts(hash_stack.dsn)
        assert_tool_error(await client.call_tool("memory_retract", {"id": wrong["id"]}), "memory_retract", "reason")
        for blank in ("", "   "):
            assert_tool_error(
                await client.call_tool("memory_retract", {"id": wrong["id"], "reason": blank}),
                "memory_retract",
                "INVALID_ARGUMENT",
                "reason is required",
            )
        assert await counts(hash_stack.dsn) == before
        assert tool_json(await client.call_tool("memory_get", {"id": wrong["id"]}))["status"] == "active"

        retracted = tool_json(
            await client.call_tool("memory_retract", {"id": wrong["id"], "reason": "the DNS logs were clean"})
        )["memory"]
        assert retracted["status"] == "retracted" and retracted["status_reason"] == "the DNS logs were clean"
        found = tool_json(await client.call_tool("memory_search", {"query": "flaky login test", "mode": "lexical"}))
        assert ids(found["results"]) == [sibling["id"]]
        assert_tool_error(
            await client.call_tool("memory_get", {"id": wrong["id"]}), "memory_get", "retracted", "include_history"
        )
        history = tool_json(
            await client.call_tool(
                "memory_search", {"query": "flaky login test", "mode": "lexical", "include_history": True}
            )
        )
        labels = {r["id"]: r["label"] for r in history["results"]}
        assert labels[wrong["id"]].startswith("[retracted · agent note · ")
        assert labels[sibling["id"]].startswith("[active · agent note · ")
        # Retracting twice is refused with the reason, not repeated.
        again = await client.call_tool("memory_retract", {"id": wrong["id"], "reason": "still wrong"})
        assert_tool_error(again, "memory_retract", "FAILED_PRECONDITION", wrong["id"], "retracted")


async def test_mcp_delete_needs_a_reason_and_takes_the_memory_off_every_read(
    hash_stack: Stack, hash_clients: Clients
) -> None:
    ws = (await hash_clients.workspace()).id
    async with Client(mcp_url(hash_stack, ws)) as client:
        secret = tool_json(
            await client.call_tool("memory_write", {"content": "The staging database password is hunter2 rotate."})
        )["memory"]
        sibling = tool_json(
            await client.call_tool("memory_write", {"content": "The staging database is rebuilt every Monday."})
        )["memory"]
        await hash_clients.wait_embedded(sibling["id"], ws)
        before = await counts(hash_stack.dsn)
        assert_tool_error(await client.call_tool("memory_delete", {"id": secret["id"]}), "memory_delete", "reason")
        assert_tool_error(
            await client.call_tool("memory_delete", {"id": secret["id"], "reason": " "}),
            "memory_delete",
            "reason is required",
        )
        assert await counts(hash_stack.dsn) == before

        stone = tool_json(await client.call_tool("memory_delete", {"id": secret["id"], "reason": "contains a secret"}))
        assert stone["tombstone"]["memory_id"] == secret["id"] and stone["tombstone"]["reason"] == "contains a secret"
        for mode in ("lexical", "hybrid", "semantic"):
            for history in (False, True):
                found = tool_json(
                    await client.call_tool(
                        "memory_search",
                        {"query": "staging database", "mode": mode, "include_history": history},
                    )
                )
                assert secret["id"] not in ids(found["results"]), (mode, history)
                assert sibling["id"] in ids(found["results"]), (mode, history)
        for history in (False, True):
            text = assert_tool_error(
                await client.call_tool("memory_get", {"id": secret["id"], "include_history": history}),
                "memory_get",
                "NOT_FOUND",
                "deleted",
                secret["id"],
            )
            assert "hunter2" not in text
        assert_tool_error(await client.call_tool("memory_history", {"id": secret["id"]}), "memory_history", "deleted")
        again = await client.call_tool("memory_delete", {"id": secret["id"], "reason": "again"})
        assert_tool_error(again, "memory_delete", secret["id"], "deleted")


# -- MCP: bad input on the new tools and options -------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A workspace with one active memory, and another workspace with its own: what bad requests aim at."""

    ws: str
    memory_id: str
    other_ws: str
    other_memory_id: str


@pytest.fixture(scope="module")
async def target(hash_clients: Clients) -> Target:
    ws = await hash_clients.workspace()
    other = await hash_clients.workspace()
    memory = await hash_clients.write(ws.id, "The release branch is cut every second Tuesday.")
    elsewhere = await hash_clients.write(other.id, "Another project's note.")
    return Target(ws.id, memory.id, other.id, elsewhere.id)


HUGE_REASON = "r" * 2001
BAD_DATE = "2026-02-30T00:00:00Z"
OUT_OF_RANGE = "0001-01-01T00:00:00+01:00"

BAD_TOOL_CALLS: list[tuple[str, Callable[[Target], dict[str, Any]], tuple[str, ...]]] = [
    ("memory_supersede", lambda t: {}, ("id",)),
    ("memory_supersede", lambda t: {"id": t.memory_id}, ("content",)),
    ("memory_supersede", lambda t: {"id": t.memory_id, "content": 42}, ("content",)),
    ("memory_supersede", lambda t: {"id": t.memory_id, "content": " \n "}, ("content",)),
    ("memory_supersede", lambda t: {"id": t.memory_id, "content": "a\x00b"}, ("NUL",)),
    ("memory_supersede", lambda t: {"id": t.memory_id, "content": "x", "reason": HUGE_REASON}, ("2000",)),
    ("memory_supersede", lambda t: {"id": t.memory_id, "content": "x", "reason": "r\x00"}, ("NUL",)),
    ("memory_supersede", lambda t: {"id": t.memory_id, "content": "x", "valid_from": "yesterday"}, ("valid_from",)),
    ("memory_supersede", lambda t: {"id": t.memory_id, "content": "x", "valid_from": BAD_DATE}, ("valid_from",)),
    ("memory_supersede", lambda t: {"id": "nope", "content": "x"}, ("not a memory id",)),
    ("memory_supersede", lambda t: {"id": MISSING, "content": "x"}, ("NOT_FOUND", MISSING)),
    ("memory_supersede", lambda t: {"id": t.other_memory_id, "content": "x"}, ("NOT_FOUND", "not found")),
    (
        "memory_supersede",
        lambda t: {"id": t.memory_id, "content": "x", "workspace": "no-such-ws"},
        ("mnemo workspace add",),
    ),
    ("memory_retract", lambda t: {"id": t.memory_id}, ("reason",)),
    ("memory_retract", lambda t: {"id": t.memory_id, "reason": ""}, ("reason is required",)),
    ("memory_retract", lambda t: {"id": t.memory_id, "reason": "\t \n"}, ("reason is required",)),
    ("memory_retract", lambda t: {"id": t.memory_id, "reason": HUGE_REASON}, ("2000",)),
    ("memory_retract", lambda t: {"id": t.memory_id, "reason": "r" * 100_000}, ("2000",)),
    ("memory_retract", lambda t: {"id": t.memory_id, "reason": "a\x00b"}, ("NUL",)),
    ("memory_retract", lambda t: {"id": t.memory_id, "reason": 5}, ("reason",)),
    ("memory_retract", lambda t: {"id": 5, "reason": "x"}, ("id",)),
    ("memory_retract", lambda t: {"id": "", "reason": "x"}, ("not a memory id",)),
    ("memory_retract", lambda t: {"id": MISSING, "reason": "x"}, ("NOT_FOUND", MISSING)),
    ("memory_retract", lambda t: {"id": t.other_memory_id, "reason": "x"}, ("NOT_FOUND", "not found")),
    ("memory_delete", lambda t: {"id": t.memory_id}, ("reason",)),
    ("memory_delete", lambda t: {"id": t.memory_id, "reason": ""}, ("reason is required",)),
    ("memory_delete", lambda t: {"id": t.memory_id, "reason": HUGE_REASON}, ("2000",)),
    ("memory_delete", lambda t: {"id": t.memory_id, "reason": "a\x00b"}, ("NUL",)),
    ("memory_delete", lambda t: {"id": t.memory_id, "reason": ["x"]}, ("reason",)),
    ("memory_delete", lambda t: {"id": "../etc/passwd", "reason": "x"}, ("not a memory id",)),
    ("memory_delete", lambda t: {"id": MISSING, "reason": "x"}, ("NOT_FOUND", MISSING)),
    ("memory_delete", lambda t: {"id": t.other_memory_id, "reason": "x"}, ("NOT_FOUND", "not found")),
    ("memory_history", lambda t: {}, ("id",)),
    ("memory_history", lambda t: {"id": 5}, ("id",)),
    ("memory_history", lambda t: {"id": "nope"}, ("not a memory id",)),
    ("memory_history", lambda t: {"id": "\x00"}, ("id",)),
    ("memory_history", lambda t: {"id": MISSING}, ("NOT_FOUND", MISSING)),
    ("memory_history", lambda t: {"id": t.other_memory_id}, ("NOT_FOUND",)),
    ("memory_history", lambda t: {"id": t.memory_id, "workspace": "w\x00"}, ("NUL",)),
    ("memory_get", lambda t: {"id": t.memory_id, "as_of": "nope"}, ("as_of",)),
    ("memory_get", lambda t: {"id": t.memory_id, "as_of": BAD_DATE}, ("as_of",)),
    ("memory_get", lambda t: {"id": t.memory_id, "as_of": OUT_OF_RANGE}, ("out of range",)),
    ("memory_get", lambda t: {"id": t.memory_id, "valid_at": "soon"}, ("valid_at",)),
    ("memory_get", lambda t: {"id": t.memory_id, "include_history": "maybe"}, ("include_history",)),
    ("memory_search", lambda t: {"query": "release", "as_of": "nope"}, ("as_of",)),
    ("memory_search", lambda t: {"query": "release", "as_of": OUT_OF_RANGE}, ("out of range",)),
    ("memory_search", lambda t: {"query": "release", "valid_at": [2026]}, ("valid_at",)),
    ("memory_search", lambda t: {"query": "release", "include_history": "maybe"}, ("include_history",)),
    ("memory_purge", lambda t: {"id": t.memory_id, "force": True}, ("memory_purge",)),
    ("memory_confirm", lambda t: {"id": t.memory_id}, ("memory_confirm",)),
    ("memory_restore", lambda t: {"id": t.memory_id}, ("memory_restore",)),
]


@pytest.mark.parametrize(
    ("tool", "args", "fragments"),
    BAD_TOOL_CALLS,
    ids=[f"{tool}-{i}" for i, (tool, _, _) in enumerate(BAD_TOOL_CALLS)],
)
async def test_bad_correction_tool_calls_are_clear_errors_and_write_nothing(
    hash_stack: Stack, target: Target, tool: str, args: Callable[[Target], dict[str, Any]], fragments: tuple[str, ...]
) -> None:
    async with Client(mcp_url(hash_stack, target.ws)) as client:
        before = await counts(hash_stack.dsn)
        assert_tool_error(await client.call_tool(tool, args(target)), tool, *fragments)
        assert await counts(hash_stack.dsn) == before


async def test_the_target_answers_good_reads_with_the_new_options(hash_stack: Stack, target: Target) -> None:
    # Positive control for the table above: the same memory, the same tools, good arguments.
    async with Client(mcp_url(hash_stack, target.ws)) as client:
        got = tool_json(
            await client.call_tool(
                "memory_get",
                {
                    "id": target.memory_id,
                    "include_history": True,
                    "as_of": datetime.now(UTC).isoformat(),
                    "valid_at": "2026-01-01T00:00:00Z",
                },
            )
        )
        assert got["status"] == "active"
        found = tool_json(
            await client.call_tool(
                "memory_search",
                {
                    "query": "release branch",
                    "mode": "lexical",
                    "include_history": True,
                    "as_of": "2999-01-01T00:00:00Z",
                },
            )
        )
        assert ids(found["results"]) == [target.memory_id]
        story = tool_json(await client.call_tool("memory_history", {"id": target.memory_id}))
        assert [e["action"] for e in story["events"]] == ["write"]


# -- REST: supersede and the reads that honour it ------------------------------------------------------------


async def test_rest_supersede_and_every_read_option(http: httpx.AsyncClient, hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    old = await write(http, ws, "The API gateway listens on port 8080 behind nginx.", kind="decision")
    await hash_clients.wait_embedded(old["id"], ws)
    before_supersede = await moment()
    response = await http.post(
        f"{API}/memories/{old['id']}/supersede",
        json={"workspace": ws, "content": "The API gateway listens on port 9090 behind envoy.", "reason": "envoy"},
    )
    result = ok(response, 201)
    new = result["successor"]
    assert result["superseded"]["superseded_by"] == new["id"] and result["superseded"]["status_reason"] == "envoy"
    assert new["provenance"] == "human" and new["kind"] == "decision"
    assert new["label"].startswith("[active · human decision · ")
    await hash_clients.wait_embedded(new["id"], ws)

    # get: 404 saying why and how; include_history returns it; as_of returns it as it was.
    error = assert_clear_error(
        await http.get(f"{API}/memories/{old['id']}", params={"workspace": ws}), 404, old["id"], "superseded"
    )
    assert new["id"] in error["message"] and "include_history" in error["message"]
    got = ok(await http.get(f"{API}/memories/{old['id']}", params={"workspace": ws, "include_history": "true"}))
    assert got["status"] == "superseded" and got["content"] == "The API gateway listens on port 8080 behind nginx."
    then = ok(
        await http.get(f"{API}/memories/{old['id']}", params={"workspace": ws, "as_of": before_supersede.isoformat()})
    )
    assert then["status"] == "active" and then["label"].startswith("[active · human decision · ")
    assert then["content"] == "The API gateway listens on port 8080 behind nginx."
    assert ok(await http.get(f"{API}/memories/{new['id']}", params={"workspace": ws}))["status"] == "active"

    # list: default hides the old one; include_history shows both; as_of shows the world before.
    listed = ok(await http.get(f"{API}/memories", params={"workspace": ws}))
    assert ids(listed["memories"]) == [new["id"]]
    listed = ok(await http.get(f"{API}/memories", params={"workspace": ws, "include_history": "true"}))
    assert sorted(ids(listed["memories"])) == sorted([old["id"], new["id"]])
    listed = ok(await http.get(f"{API}/memories", params={"workspace": ws, "as_of": before_supersede.isoformat()}))
    assert ids(listed["memories"]) == [old["id"]] and listed["memories"][0]["status"] == "active"

    # search, in every mode: the successor only; include_history adds the old one, labelled.
    for mode in ("lexical", "semantic", "hybrid"):
        body = {"workspace": ws, "query": "API gateway port", "mode": mode}
        found = ok(await http.post(f"{API}/search", json=body))
        assert ids(found["results"]) == [new["id"]], mode
        found = ok(await http.post(f"{API}/search", json={**body, "include_history": True}))
        labels = {r["id"]: r["label"] for r in found["results"]}
        assert labels[old["id"]].startswith("[superseded · human decision · "), mode
        found = ok(await http.post(f"{API}/search", json={**body, "as_of": before_supersede.isoformat()}))
        assert ids(found["results"]) == [old["id"]], mode

    # history and the audit log tell the same story.
    story = ok(await http.get(f"{API}/memories/{old['id']}/history", params={"workspace": ws}))
    assert [s["status"] for s in story["states"]] == ["active", "superseded"]
    assert [e["action"] for e in story["events"]] == ["write", "supersede"]
    log = ok(await http.get(f"{API}/audit", params={"workspace": ws, "memory": old["id"]}))
    assert [e["action"] for e in log["events"]] == ["supersede", "write"]  # newest first
    assert [e["id"] for e in log["events"]] == sorted((e["id"] for e in log["events"]), reverse=True)
    assert log["events"][0]["details"] == {"successor": new["id"], "reason": "envoy"}
    verified = ok(await http.get(f"{API}/audit/verify", params={"workspace": ws}))
    assert verified["ok"] is True and verified["workspaces_checked"] == 1 and verified["broken_event_id"] == 0
    assert verified["events_checked"] == 3  # workspace_add, write, supersede
    everything = ok(await http.get(f"{API}/audit/verify"))
    assert everything["ok"] is True and everything["workspaces_checked"] >= 2


async def test_rest_supersede_or_retract_a_corrected_memory_is_409_with_the_reason(
    http: httpx.AsyncClient, hash_stack: Stack, hash_clients: Clients
) -> None:
    ws = (await hash_clients.workspace()).id
    old = await write(http, ws, "Caching is disabled in CI.")
    successor = ok(
        await http.post(f"{API}/memories/{old['id']}/supersede", json={"workspace": ws, "content": "Caching is on."}),
        201,
    )["successor"]
    wrong = await write(http, ws, "The CI runner has 16 GB of memory.")
    ok(await http.post(f"{API}/memories/{wrong['id']}/retract", json={"workspace": ws, "reason": "it has 8"}))

    before = await counts(hash_stack.dsn)
    for path, body in (
        (f"{old['id']}/supersede", {"content": "Caching is on, again."}),
        (f"{old['id']}/retract", {"reason": "no"}),
        (f"{old['id']}/confirm", {}),
        (f"{wrong['id']}/retract", {"reason": "still"}),
        (f"{wrong['id']}/supersede", {"content": "The CI runner has 8 GB."}),
        (f"{wrong['id']}/confirm", {}),
    ):
        response = await http.post(f"{API}/memories/{path}", json={"workspace": ws, **body})
        memory_id = path.split("/")[0]
        status = "superseded" if memory_id == old["id"] else "retracted"
        error = assert_clear_error(response, 409, memory_id, f"it is {status}")
        assert error["code"] == "FAILED_PRECONDITION"
        if status == "superseded":
            assert successor["id"] in error["message"]
    assert await counts(hash_stack.dsn) == before
    # Positive control: the successor itself can still be corrected.
    ok(await http.post(f"{API}/memories/{successor['id']}/retract", json={"workspace": ws, "reason": "it is off"}))


async def test_rest_concurrent_supersedes_of_one_memory_let_exactly_one_win(
    http: httpx.AsyncClient, hash_stack: Stack, hash_clients: Clients
) -> None:
    ws = (await hash_clients.workspace()).id
    old = await write(http, ws, "The nightly job starts at 02:00.")
    before = await counts(hash_stack.dsn)
    responses = await asyncio.gather(
        *(
            http.post(
                f"{API}/memories/{old['id']}/supersede", json={"workspace": ws, "content": f"It starts at 0{i}:30."}
            )
            for i in range(4)
        )
    )
    assert sorted(r.status_code for r in responses) == [201, 409, 409, 409], [r.text[:200] for r in responses]
    after = await counts(hash_stack.dsn)
    assert after["memories"] == before["memories"] + 1
    assert after["audit_events"] == before["audit_events"] + 1


async def test_rest_confirm_labels_and_trust(http: httpx.AsyncClient, hash_clients: Clients, hash_stack: Stack) -> None:
    ws = (await hash_clients.workspace()).id
    text = "Use ruff format before every commit in this repository."
    first = await write(http, ws, text)
    second = await write(http, ws, text + " ")  # same words, a different content hash
    assert first["label"] == f"[active · human note · {first['updated_at'][:10]} · by local in {first['workspace_id']}]"
    assert LABEL.match(first["label"]) and first["trust"] == pytest.approx(0.85)

    confirmed = ok(
        await http.post(f"{API}/memories/{first['id']}/confirm", json={"workspace": ws, "reason": "team rule"})
    )
    assert confirmed["outcome"] != "unchanged"
    assert confirmed["memory"]["status"] == "confirmed" and confirmed["memory"]["status_reason"] == "team rule"
    assert (
        confirmed["memory"]["label"]
        == f"[confirmed · human note · {first['updated_at'][:10]} · by local in {first['workspace_id']}]"
    )
    before = await counts(hash_stack.dsn)
    again = ok(await http.post(f"{API}/memories/{first['id']}/confirm", json={"workspace": ws}))
    assert again["outcome"] == "unchanged" and again["memory"]["status"] == "confirmed"
    assert await counts(hash_stack.dsn) == before  # the second confirm wrote nothing, not even an event
    events = ok(await http.get(f"{API}/audit", params={"workspace": ws, "memory": first["id"]}))["events"]
    assert [e["action"] for e in events] == ["confirm", "write"]
    assert events[0]["details"]["from"] == "active"

    # Trust: confirmed above active for the same provenance; with equal words the confirmed (older) one ranks first.
    found = ok(
        await http.post(f"{API}/search", json={"workspace": ws, "query": "ruff format commit", "explain": True})
    )["results"]
    assert ids(found) == [first["id"], second["id"]]
    by_id = {r["id"]: r for r in found}
    assert by_id[first["id"]]["trust"] > by_id[second["id"]]["trust"]
    assert by_id[first["id"]]["explanation"]["trust_factor"] > by_id[second["id"]]["explanation"]["trust_factor"]
    assert by_id[first["id"]]["label"].startswith("[confirmed · human note · ")
    assert by_id[second["id"]]["label"].startswith("[active · human note · ")

    # An agent's note reads as one; a retracted one says so with include_history.
    async with Client(mcp_url(hash_stack, ws)) as client:
        agent = tool_json(
            await client.call_tool("memory_write", {"content": "Ruff is pinned to 0.8.", "kind": "decision"})
        )["memory"]
    assert (
        agent["label"]
        == f"[active · agent decision · {agent['updated_at'][:10]} · by local in {agent['workspace_id']}]"
    )
    ok(await http.post(f"{API}/memories/{agent['id']}/retract", json={"workspace": ws, "reason": "unpinned"}))
    found = ok(
        await http.post(
            f"{API}/search", json={"workspace": ws, "query": "ruff pinned", "mode": "lexical", "include_history": True}
        )
    )["results"]
    retracted = next(r for r in found if r["id"] == agent["id"])
    assert (
        retracted["label"]
        == f"[retracted · agent decision · {agent['updated_at'][:10]} · by local in {agent['workspace_id']}]"
    )
    assert retracted["trust"] < by_id[second["id"]]["trust"]


async def test_rest_valid_at_selects_beliefs_by_world_time(http: httpx.AsyncClient, hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    berlin = await write(
        http, ws, "The team office is in Berlin.", valid_from="2020-01-01T00:00:00Z", valid_to="2021-01-01T00:00:00Z"
    )
    munich = await write(http, ws, "The team office is in Munich.", valid_from="2021-01-01T00:00:00Z")
    timeless = await write(http, ws, "The team office has a quiet room.")
    query = {"workspace": ws, "query": "team office", "mode": "lexical"}
    found = ok(await http.post(f"{API}/search", json=query))
    assert sorted(ids(found["results"])) == sorted([berlin["id"], munich["id"], timeless["id"]])
    found = ok(await http.post(f"{API}/search", json={**query, "valid_at": "2020-06-01T00:00:00Z"}))
    assert sorted(ids(found["results"])) == sorted([berlin["id"], timeless["id"]])
    found = ok(await http.post(f"{API}/search", json={**query, "valid_at": "2022-06-01T00:00:00Z"}))
    assert sorted(ids(found["results"])) == sorted([munich["id"], timeless["id"]])
    listed = ok(await http.get(f"{API}/memories", params={"workspace": ws, "valid_at": "2020-06-01T00:00:00Z"}))
    assert sorted(ids(listed["memories"])) == sorted([berlin["id"], timeless["id"]])
    inside = ok(
        await http.get(f"{API}/memories/{berlin['id']}", params={"workspace": ws, "valid_at": "2020-06-01T00:00:00Z"})
    )
    assert inside["content"] == "The team office is in Berlin."
    # Outside its valid time: a 404 that says so -- not a hint to include_history, which would not help.
    outside = await http.get(
        f"{API}/memories/{berlin['id']}", params={"workspace": ws, "valid_at": "2022-06-01T00:00:00Z"}
    )
    error = assert_clear_error(outside, 404, berlin["id"])
    still = await http.get(
        f"{API}/memories/{berlin['id']}",
        params={"workspace": ws, "valid_at": "2022-06-01T00:00:00Z", "include_history": "true"},
    )
    assert still.status_code == 404, "include_history does not lift valid_at"
    assert "include_history" not in error["message"], error["message"]
    assert "valid" in error["message"], error["message"]


async def test_rest_supersede_cannot_end_a_belief_before_it_began(
    http: httpx.AsyncClient, hash_stack: Stack, hash_clients: Clients
) -> None:
    ws = (await hash_clients.workspace()).id
    old = await write(http, ws, "Releases are signed with key A.", valid_from="2024-01-01T00:00:00Z")
    before = await counts(hash_stack.dsn)
    response = await http.post(
        f"{API}/memories/{old['id']}/supersede",
        json={"workspace": ws, "content": "Releases are signed with key B.", "valid_from": "2023-01-01T00:00:00Z"},
    )
    # A write refuses valid_to <= valid_from; a supersede that would close the old belief before it began must too.
    assert_clear_error(response, 400, "valid_from")
    assert await counts(hash_stack.dsn) == before
    # Positive control: a successor valid from after the old belief began is accepted and closes it there.
    result = ok(
        await http.post(
            f"{API}/memories/{old['id']}/supersede",
            json={"workspace": ws, "content": "Releases are signed with key B.", "valid_from": "2025-01-01T00:00:00Z"},
        ),
        201,
    )
    assert result["superseded"]["valid_to"] == "2025-01-01T00:00:00Z"
    assert result["successor"]["valid_from"] == "2025-01-01T00:00:00Z"


async def test_rest_supersede_onto_a_source_uri_already_taken_is_a_clear_conflict(
    http: httpx.AsyncClient, hash_stack: Stack, hash_clients: Clients
) -> None:
    ws = (await hash_clients.workspace()).id
    old = await write(http, ws, "The runbook says restart the worker.", source_uri="file:///runbook.md")
    other = await write(http, ws, "The FAQ says restart the worker.", source_uri="file:///faq.md")
    before = await counts(hash_stack.dsn)
    for uri, owner in (("file:///runbook.md", old["id"]), ("file:///faq.md", other["id"])):
        response = await http.post(
            f"{API}/memories/{old['id']}/supersede",
            json={"workspace": ws, "content": "The runbook says drain then restart.", "source_uri": uri},
        )
        assert_clear_error(response, 409, uri)
        assert await counts(hash_stack.dsn) == before
        assert ok(await http.get(f"{API}/memories/{owner}", params={"workspace": ws}))["status"] == "active"
    # Positive control: a fresh source_uri is taken by the successor.
    result = ok(
        await http.post(
            f"{API}/memories/{old['id']}/supersede",
            json={"workspace": ws, "content": "The runbook says drain then restart.", "source_uri": "file:///rb2.md"},
        ),
        201,
    )
    assert result["successor"]["source_uri"] == "file:///rb2.md"


# -- REST: delete, restore, purge, tombstones ----------------------------------------------------------------


async def test_rest_delete_restore_and_the_tombstoned_source(
    http: httpx.AsyncClient, hash_stack: Stack, hash_clients: Clients
) -> None:
    ws = (await hash_clients.workspace()).id
    uri = "file:///notes/session-42.md"
    memory = await write(http, ws, "Session 42 summary: the cache key was wrong.", source_uri=uri)
    sibling = await write(http, ws, "Session 43 summary: the cache was rebuilt.")

    # Positive control first: restoring what is not deleted is refused and changes nothing.
    before = await counts(hash_stack.dsn)
    error = assert_clear_error(
        await http.post(f"{API}/memories/{memory['id']}/restore", json={"workspace": ws}), 409, memory["id"]
    )
    assert "not deleted" in error["message"]
    assert await counts(hash_stack.dsn) == before

    deleted = ok(await http.delete(f"{API}/memories/{memory['id']}", params={"workspace": ws, "reason": "noise"}))
    stone = deleted["tombstone"]
    assert stone["memory_id"] == memory["id"] and stone["source_uri"] == uri and stone["reason"] == "noise"
    assert stone["deleted_at"] and not stone["restored_at"] and not stone["purged_at"]
    assert_clear_error(await http.get(f"{API}/memories/{memory['id']}", params={"workspace": ws}), 404, "deleted")
    found = ok(await http.post(f"{API}/search", json={"workspace": ws, "query": "session summary cache"}))
    assert ids(found["results"]) == [sibling["id"]]
    listed = ok(await http.get(f"{API}/memories", params={"workspace": ws, "include_history": "true"}))
    assert ids(listed["memories"]) == [sibling["id"]]

    # A write from the tombstoned source: 409 naming the tombstone and how to lift it; nothing written.
    before = await counts(hash_stack.dsn)
    refused = await http.post(
        f"{API}/memories", json={"workspace": ws, "content": "Session 42, again.", "source_uri": uri}
    )
    error = assert_clear_error(refused, 409, uri, memory["id"], "restore")
    assert error["code"] == "FAILED_PRECONDITION"
    assert await counts(hash_stack.dsn) == before
    # ... while another source is written as usual (positive control).
    await write(http, ws, "Session 44 summary.", source_uri="file:///notes/session-44.md")

    restored = ok(await http.post(f"{API}/memories/{memory['id']}/restore", json={"workspace": ws}))
    assert restored["memory"]["status"] == "active"
    assert ok(await http.get(f"{API}/memories/{memory['id']}", params={"workspace": ws}))["content"].startswith(
        "Session 42 summary"
    )
    found = ok(await http.post(f"{API}/search", json={"workspace": ws, "query": "session summary cache"}))
    assert memory["id"] in ids(found["results"])
    assert_clear_error(
        await http.post(f"{API}/memories/{memory['id']}/restore", json={"workspace": ws}), 409, "not deleted"
    )
    # The source is writable again: a new version of the same memory.
    rewritten = await http.post(
        f"{API}/memories", json={"workspace": ws, "content": "Session 42, grown.", "source_uri": uri}
    )
    assert ok(rewritten, 201)["outcome"] == "new_version"
    events = ok(await http.get(f"{API}/audit", params={"workspace": ws, "memory": memory["id"]}))["events"]
    assert [e["action"] for e in events] == ["update", "restore", "delete", "write"]


async def test_rest_deleting_twice_says_it_is_already_deleted(
    http: httpx.AsyncClient, hash_stack: Stack, hash_clients: Clients
) -> None:
    ws = (await hash_clients.workspace()).id
    memory = await write(http, ws, "A note deleted twice.")
    ok(await http.delete(f"{API}/memories/{memory['id']}", params={"workspace": ws, "reason": "noise"}))
    before = await counts(hash_stack.dsn)
    again = await http.delete(f"{API}/memories/{memory['id']}", params={"workspace": ws, "reason": "noise"})
    # Refused and nothing written -- and the message must not tell the caller to restore it in order to delete it.
    error = assert_clear_error(again, 409, memory["id"], "already deleted")
    assert "restore it first" not in error["message"]
    assert await counts(hash_stack.dsn) == before


async def test_rest_purge_needs_force_and_nothing_comes_back(
    http: httpx.AsyncClient, hash_stack: Stack, hash_clients: Clients
) -> None:
    ws = (await hash_clients.workspace()).id
    uri = "file:///secrets.env"
    memory = await write(http, ws, "API_TOKEN=abc123 for the staging box.", source_uri=uri)
    before = await counts(hash_stack.dsn)
    for body in ({}, {"force": False}, {"reason": "leak"}):
        error = assert_clear_error(
            await http.post(f"{API}/memories/{memory['id']}/purge", json={"workspace": ws, **body}), 409, "force=true"
        )
        assert error["code"] == "FAILED_PRECONDITION" and "delete" in error["message"]
    assert await counts(hash_stack.dsn) == before
    assert ok(await http.get(f"{API}/memories/{memory['id']}", params={"workspace": ws}))["status"] == "active"

    purged = ok(
        await http.post(f"{API}/memories/{memory['id']}/purge", json={"workspace": ws, "force": True, "reason": "leak"})
    )
    stone = purged["tombstone"]
    assert stone["memory_id"] == memory["id"] and stone["source_uri"] == uri and stone["purged_at"]
    assert stone["reason"] == ""  # the reason may itself hold what was purged
    after = await counts(hash_stack.dsn)
    assert after["memories"] == before["memories"] - 1 and after["tombstones"] == before["tombstones"] + 1

    for method, path, kwargs in (
        ("GET", f"{memory['id']}", {"params": {"workspace": ws, "include_history": "true"}}),
        ("GET", f"{memory['id']}/history", {"params": {"workspace": ws}}),
        ("POST", f"{memory['id']}/restore", {"json": {"workspace": ws}}),
        ("POST", f"{memory['id']}/purge", {"json": {"workspace": ws, "force": True}}),
        ("POST", f"{memory['id']}/retract", {"json": {"workspace": ws, "reason": "x"}}),
    ):
        response = await http.request(method, f"{API}/memories/{path}", **kwargs)
        error = assert_clear_error(response, 404, memory["id"], "purged")
        assert "abc123" not in response.text
    refused = await http.post(f"{API}/memories", json={"workspace": ws, "content": "API_TOKEN=new", "source_uri": uri})
    error = assert_clear_error(refused, 409, uri, "purged")
    assert "again" in error["message"]
    assert await counts(hash_stack.dsn) == after
    # The audit log keeps the purge (without content) and its chain still verifies.
    events = ok(await http.get(f"{API}/audit", params={"workspace": ws, "memory": memory["id"]}))["events"]
    assert [e["action"] for e in events] == ["purge", "write"]
    assert "abc123" not in str(events)
    assert ok(await http.get(f"{API}/audit/verify", params={"workspace": ws}))["ok"] is True


# -- REST: naming a memory that is not there ----------------------------------------------------------------


NAMED_ROUTES: list[tuple[str, str, Callable[[str], dict[str, Any]]]] = [
    ("GET", "", lambda ws: {"params": {"workspace": ws}}),
    ("GET", "", lambda ws: {"params": {"workspace": ws, "include_history": "true"}}),
    ("GET", "/history", lambda ws: {"params": {"workspace": ws}}),
    ("PATCH", "", lambda ws: {"json": {"workspace": ws, "content": "changed"}}),
    ("POST", "/supersede", lambda ws: {"json": {"workspace": ws, "content": "successor"}}),
    ("POST", "/retract", lambda ws: {"json": {"workspace": ws, "reason": "wrong"}}),
    ("POST", "/confirm", lambda ws: {"json": {"workspace": ws}}),
    ("DELETE", "", lambda ws: {"params": {"workspace": ws, "reason": "noise"}}),
    ("POST", "/restore", lambda ws: {"json": {"workspace": ws}}),
    ("POST", "/purge", lambda ws: {"json": {"workspace": ws, "force": True}}),
]


@pytest.mark.parametrize("where", ["missing", "other-workspace"])
@pytest.mark.parametrize(
    ("method", "suffix", "kwargs"),
    NAMED_ROUTES,
    ids=[f"{m}{s or '-memory'}-{i}" for i, (m, s, _) in enumerate(NAMED_ROUTES)],
)
async def test_naming_a_memory_that_is_not_there_is_404_naming_it(
    http: httpx.AsyncClient,
    hash_stack: Stack,
    target: Target,
    where: str,
    method: str,
    suffix: str,
    kwargs: Callable[[str], dict[str, Any]],
) -> None:
    memory_id = MISSING if where == "missing" else target.other_memory_id
    before = await counts(hash_stack.dsn)
    response = await http.request(method, f"{API}/memories/{memory_id}{suffix}", **kwargs(target.ws))
    error = assert_clear_error(response, 404, memory_id)
    assert error["code"] == "NOT_FOUND"
    assert await counts(hash_stack.dsn) == before
    if where == "other-workspace":
        # Positive control: the same id in its own workspace is there (and nothing above touched it).
        got = ok(await http.get(f"{API}/memories/{memory_id}", params={"workspace": target.other_ws}))
        assert got["status"] == "active"


async def test_the_audit_log_of_a_memory_that_never_was_is_not_found(
    http: httpx.AsyncClient, hash_clients: Clients
) -> None:
    ws = (await hash_clients.workspace()).id
    other = (await hash_clients.workspace()).id
    gone = await write(http, ws, "Short-lived note.")
    ok(await http.post(f"{API}/memories/{gone['id']}/purge", json={"workspace": ws, "force": True}))
    foreign = await write(http, other, "Another workspace's note.")
    # Positive control: a purged memory's events stay listable (that is what the log is for).
    events = ok(await http.get(f"{API}/audit", params={"workspace": ws, "memory": gone["id"]}))["events"]
    assert [e["action"] for e in events] == ["purge", "write"]
    # A memory this workspace never had: NOT_FOUND naming it, not an empty page that looks like "no changes".
    for memory_id in (MISSING, foreign["id"]):
        response = await http.get(f"{API}/audit", params={"workspace": ws, "memory": memory_id})
        assert_clear_error(response, 404, memory_id)


async def test_a_global_memory_read_from_a_workspace_is_not_called_missing_when_corrected(
    http: httpx.AsyncClient, hash_clients: Clients
) -> None:
    ws = (await hash_clients.workspace()).id
    shared = await write(http, "global", "Global convention: commit messages use the imperative mood.")
    try:
        # Positive control: every workspace reads global memories, by id and in its history.
        assert (
            ok(await http.get(f"{API}/memories/{shared['id']}", params={"workspace": ws}))["workspace_id"] == "global"
        )
        ok(await http.get(f"{API}/memories/{shared['id']}/history", params={"workspace": ws}))
        response = await http.post(f"{API}/memories/{shared['id']}/retract", json={"workspace": ws, "reason": "old"})
        if response.status_code >= 400:
            # Refusing is fine; calling a memory the caller just read "not found in workspace" is not.
            error = assert_clear_error(response, response.status_code, shared["id"])
            assert "global" in error["message"], error["message"]
    finally:
        ok(await http.post(f"{API}/memories/{shared['id']}/purge", json={"workspace": "global", "force": True}))


# -- REST: bad input on the new routes and options -----------------------------------------------------------

WS, OTHER, ID = "<ws>", "<other-ws>", "<memory-id>"
ONE = f"{API}/memories/{ID}"


def fill(value: Any, t: Target) -> Any:
    if isinstance(value, str):
        return value.replace(WS, t.ws).replace(OTHER, t.other_ws).replace(ID, t.memory_id)
    if isinstance(value, dict):
        return {fill(k, t): fill(v, t) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, t) for v in value]
    return value


def body(**fields: Any) -> dict[str, Any]:
    return {"json": {"workspace": WS, **fields}}


def params(**fields: Any) -> dict[str, Any]:
    return {"params": {"workspace": WS, **fields}}


def raw(text: str) -> dict[str, Any]:
    return {"content": text.encode("utf-8", "surrogatepass"), "headers": {"content-type": "application/json"}}


@dataclass(frozen=True)
class Bad:
    name: str
    method: str
    path: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    status: int = 400
    fragment: str = ""


BAD_REQUESTS = [
    # -- supersede --
    Bad("supersede-no-content", "POST", f"{ONE}/supersede", body(), fragment="content"),
    Bad("supersede-number-content", "POST", f"{ONE}/supersede", body(content=42), fragment="content"),
    Bad("supersede-blank-content", "POST", f"{ONE}/supersede", body(content=" \n"), fragment="content"),
    Bad("supersede-nul-content", "POST", f"{ONE}/supersede", body(content="a\x00b"), fragment="NUL"),
    Bad("supersede-nul-reason", "POST", f"{ONE}/supersede", body(content="x", reason="r\x00"), fragment="NUL"),
    Bad("supersede-huge-reason", "POST", f"{ONE}/supersede", body(content="x", reason=HUGE_REASON), fragment="2000"),
    Bad("supersede-number-reason", "POST", f"{ONE}/supersede", body(content="x", reason=7), fragment="reason"),
    Bad(
        "supersede-bad-valid-from",
        "POST",
        f"{ONE}/supersede",
        body(content="x", valid_from="next tuesday"),
        fragment="valid_from",
    ),
    Bad(
        "supersede-impossible-date",
        "POST",
        f"{ONE}/supersede",
        body(content="x", valid_from=BAD_DATE),
        fragment="valid_from",
    ),
    Bad(
        "supersede-out-of-range",
        "POST",
        f"{ONE}/supersede",
        body(content="x", valid_from=OUT_OF_RANGE),
        fragment="range",
    ),
    Bad("supersede-unknown-kind", "POST", f"{ONE}/supersede", body(content="x", kind="rumour"), fragment="kind"),
    Bad(
        "supersede-unknown-provenance",
        "POST",
        f"{ONE}/supersede",
        body(content="x", provenance="robot"),
        fragment="provenance",
    ),
    Bad("supersede-string-tags", "POST", f"{ONE}/supersede", body(content="x", tags="ops"), fragment="tags"),
    Bad("supersede-nul-tag", "POST", f"{ONE}/supersede", body(content="x", tags=["a\x00"]), fragment="NUL"),
    Bad("supersede-unknown-field", "POST", f"{ONE}/supersede", body(content="x", colour="blue"), fragment="colour"),
    Bad(
        "supersede-lone-surrogate",
        "POST",
        f"{ONE}/supersede",
        raw('{"workspace": "<ws>", "content": "x", "reason": "\\ud800"}'),
        fragment="Unicode",
    ),
    Bad("supersede-malformed-json", "POST", f"{ONE}/supersede", raw('{"content": '), fragment="JSON"),
    Bad("supersede-body-list", "POST", f"{ONE}/supersede", {"json": [{"content": "x"}]}),
    Bad(
        "supersede-bad-id",
        "POST",
        f"{API}/memories/not-a-uuid/supersede",
        body(content="x"),
        fragment="not a memory id",
    ),
    Bad("supersede-nul-id", "POST", f"{API}/memories/%00/supersede", body(content="x"), fragment="memory id"),
    Bad(
        "supersede-no-such-ws",
        "POST",
        f"{ONE}/supersede",
        {"json": {"workspace": "no-such-ws", "content": "x"}},
        404,
        "mnemo workspace add",
    ),
    # -- retract --
    Bad("retract-no-reason", "POST", f"{ONE}/retract", body(), fragment="reason"),
    Bad("retract-null-reason", "POST", f"{ONE}/retract", body(reason=None), fragment="reason"),
    Bad("retract-empty-reason", "POST", f"{ONE}/retract", body(reason=""), fragment="reason is required"),
    Bad("retract-blank-reason", "POST", f"{ONE}/retract", body(reason=" \t\n"), fragment="reason is required"),
    Bad("retract-huge-reason", "POST", f"{ONE}/retract", body(reason=HUGE_REASON), fragment="2000"),
    Bad("retract-enormous-reason", "POST", f"{ONE}/retract", body(reason="r" * 1_000_000), fragment="2000"),
    Bad("retract-nul-reason", "POST", f"{ONE}/retract", body(reason="a\x00b"), fragment="NUL"),
    Bad("retract-list-reason", "POST", f"{ONE}/retract", body(reason=["x"]), fragment="reason"),
    Bad("retract-no-body", "POST", f"{ONE}/retract"),
    Bad("retract-bad-id", "POST", f"{API}/memories/12345/retract", body(reason="x"), fragment="not a memory id"),
    # -- confirm --
    Bad("confirm-huge-reason", "POST", f"{ONE}/confirm", body(reason=HUGE_REASON), fragment="2000"),
    Bad("confirm-nul-reason", "POST", f"{ONE}/confirm", body(reason="\x00"), fragment="NUL"),
    Bad("confirm-unknown-field", "POST", f"{ONE}/confirm", body(status="confirmed"), fragment="status"),
    Bad("confirm-bad-id", "POST", f"{API}/memories/x/confirm", body(), fragment="not a memory id"),
    # -- delete --
    Bad("delete-no-reason", "DELETE", ONE, params(), fragment="reason"),
    Bad("delete-empty-reason", "DELETE", ONE, params(reason=""), fragment="reason is required"),
    Bad("delete-huge-reason", "DELETE", ONE, params(reason=HUGE_REASON), fragment="2000"),
    Bad("delete-long-reason", "DELETE", ONE, params(reason="r" * 20_000), fragment="2000"),
    Bad("delete-nul-reason", "DELETE", ONE, params(reason="a\x00b"), fragment="NUL"),
    Bad("delete-bad-id", "DELETE", f"{API}/memories/not-a-uuid", params(reason="x"), fragment="not a memory id"),
    Bad(
        "delete-no-such-ws",
        "DELETE",
        ONE,
        {"params": {"workspace": "no-such-ws", "reason": "x"}},
        404,
        "mnemo workspace add",
    ),
    # -- restore --
    Bad("restore-not-deleted", "POST", f"{ONE}/restore", body(), 409, "not deleted"),
    Bad("restore-unknown-field", "POST", f"{ONE}/restore", body(force=True), fragment="force"),
    Bad("restore-not-json", "POST", f"{ONE}/restore", raw("restore please"), fragment="JSON"),
    Bad("restore-bad-id", "POST", f"{API}/memories/not-a-uuid/restore", body(), fragment="not a memory id"),
    # -- purge --
    Bad("purge-no-force", "POST", f"{ONE}/purge", body(), 409, "force=true"),
    Bad("purge-force-false", "POST", f"{ONE}/purge", body(force=False), 409, "force=true"),
    Bad("purge-force-maybe", "POST", f"{ONE}/purge", body(force="maybe"), fragment="force"),
    Bad("purge-force-list", "POST", f"{ONE}/purge", body(force=[True]), fragment="force"),
    Bad("purge-huge-reason", "POST", f"{ONE}/purge", body(force=True, reason=HUGE_REASON), fragment="2000"),
    Bad("purge-nul-reason", "POST", f"{ONE}/purge", body(force=True, reason="\x00"), fragment="NUL"),
    Bad("purge-bad-id", "POST", f"{API}/memories/not-a-uuid/purge", body(force=True), fragment="not a memory id"),
    Bad(
        "purge-no-such-ws",
        "POST",
        f"{ONE}/purge",
        {"json": {"workspace": "no-such-ws", "force": True}},
        404,
        "mnemo workspace add",
    ),
    # -- history --
    Bad("history-bad-id", "GET", f"{API}/memories/not-a-uuid/history", params(), fragment="not a memory id"),
    Bad("history-nul-workspace", "GET", f"{ONE}/history", {"params": {"workspace": "w\x00"}}, fragment="NUL"),
    Bad(
        "history-no-such-ws",
        "GET",
        f"{ONE}/history",
        {"params": {"workspace": "no-such-ws"}},
        404,
        "mnemo workspace add",
    ),
    # -- audit --
    Bad("audit-bad-memory", "GET", f"{API}/audit", params(memory="not-a-uuid"), fragment="not a memory id"),
    Bad("audit-nul-memory", "GET", f"{API}/audit", params(memory="\x00"), fragment="memory"),
    Bad("audit-bad-page-token", "GET", f"{API}/audit", params(page_token="abc"), fragment="page_token"),
    Bad("audit-huge-page-token", "GET", f"{API}/audit", params(page_token="9" * 25), fragment="page_token"),
    Bad("audit-negative-page-size", "GET", f"{API}/audit", params(page_size=-1), fragment="page_size"),
    Bad("audit-text-page-size", "GET", f"{API}/audit", params(page_size="ten"), fragment="page_size"),
    Bad("audit-no-such-ws", "GET", f"{API}/audit", {"params": {"workspace": "no-such-ws"}}, 404, "mnemo workspace add"),
    Bad(
        "verify-no-such-ws",
        "GET",
        f"{API}/audit/verify",
        {"params": {"workspace": "no-such-ws"}},
        404,
        "mnemo workspace add",
    ),
    Bad("verify-nul-ws", "GET", f"{API}/audit/verify", {"params": {"workspace": "\x00"}}, fragment="NUL"),
    # -- read options on get, list and search --
    Bad("get-as-of-words", "GET", ONE, params(as_of="yesterday"), fragment="as_of"),
    Bad("get-as-of-impossible", "GET", ONE, params(as_of=BAD_DATE), fragment="as_of"),
    Bad("get-as-of-out-of-range", "GET", ONE, params(as_of=OUT_OF_RANGE), fragment="range"),
    Bad("get-valid-at-words", "GET", ONE, params(valid_at="soon"), fragment="valid_at"),
    Bad("get-include-history-maybe", "GET", ONE, params(include_history="maybe"), fragment="include_history"),
    Bad("list-as-of-words", "GET", f"{API}/memories", params(as_of="last week"), fragment="as_of"),
    Bad(
        "list-valid-at-out-of-range",
        "GET",
        f"{API}/memories",
        params(valid_at="9999-12-31T23:59:59-14:00"),
        fragment="range",
    ),
    Bad(
        "list-include-history-maybe", "GET", f"{API}/memories", params(include_history="2"), fragment="include_history"
    ),
    Bad("search-as-of-words", "POST", f"{API}/search", body(query="release", as_of="nope"), fragment="as_of"),
    Bad(
        "search-as-of-out-of-range",
        "POST",
        f"{API}/search",
        body(query="release", as_of=OUT_OF_RANGE),
        fragment="range",
    ),
    Bad("search-valid-at-list", "POST", f"{API}/search", body(query="release", valid_at=[2026]), fragment="valid_at"),
    Bad(
        "search-include-history-text",
        "POST",
        f"{API}/search",
        body(query="release", include_history="maybe"),
        fragment="include_history",
    ),
]


@pytest.mark.parametrize("bad", BAD_REQUESTS, ids=[b.name for b in BAD_REQUESTS])
async def test_bad_requests_on_correction_routes_are_clear_4xx_and_write_nothing(
    http: httpx.AsyncClient, hash_stack: Stack, target: Target, bad: Bad
) -> None:
    before = await counts(hash_stack.dsn)
    response = await http.request(bad.method, fill(bad.path, target), **fill(bad.kwargs, target))
    assert_clear_error(response, bad.status, bad.fragment)
    assert await counts(hash_stack.dsn) == before
    # The target memory is exactly as it was.
    got = ok(await http.get(f"{API}/memories/{target.memory_id}", params={"workspace": target.ws}))
    assert got["status"] == "active" and got["version"] == 1


async def test_good_requests_on_every_correction_route(
    http: httpx.AsyncClient, hash_stack: Stack, target: Target
) -> None:
    # Positive control for the table above: the same routes with good input, on memories of the target workspace.
    ws = target.ws
    a = await write(http, ws, "Positive control A.")
    b = await write(http, ws, "Positive control B.")
    c = await write(http, ws, "Positive control C.")
    long_reason = "r" * 2000  # the limit itself is accepted
    sup = ok(
        await http.post(
            f"{API}/memories/{a['id']}/supersede",
            json={
                "workspace": ws,
                "content": "A2",
                "reason": long_reason,
                "valid_from": "2026-01-01T00:00:00Z",
                "kind": "lesson",
                "tags": ["t"],
            },
        ),
        201,
    )
    assert sup["successor"]["kind"] == "lesson" and sup["successor"]["tags"] == ["t"]
    ok(await http.post(f"{API}/memories/{b['id']}/retract", json={"workspace": ws, "reason": long_reason}))
    ok(
        await http.post(
            f"{API}/memories/{sup['successor']['id']}/confirm", json={"workspace": ws, "reason": long_reason}
        )
    )
    ok(await http.delete(f"{API}/memories/{c['id']}", params={"workspace": ws, "reason": long_reason}))
    ok(await http.post(f"{API}/memories/{c['id']}/restore", json={"workspace": ws}))
    ok(await http.post(f"{API}/memories/{c['id']}/purge", json={"workspace": ws, "force": True, "reason": "control"}))
    ok(await http.get(f"{API}/memories/{a['id']}/history", params={"workspace": ws}))
    page = ok(await http.get(f"{API}/audit", params={"workspace": ws, "page_size": 2}))
    assert len(page["events"]) == 2 and page["next_page_token"]
    rest = ok(await http.get(f"{API}/audit", params={"workspace": ws, "page_token": page["next_page_token"]}))
    assert rest["events"] and rest["events"][0]["id"] < page["events"][-1]["id"]
    assert ok(await http.get(f"{API}/audit/verify", params={"workspace": ws}))["ok"] is True
    for query in (
        {"as_of": datetime.now(UTC).astimezone(timezone(timedelta(hours=2))).isoformat()},
        {"valid_at": "2026-06-01T00:00:00Z"},
        {"include_history": "true"},
    ):
        ok(await http.get(f"{API}/memories/{target.memory_id}", params={"workspace": ws, **query}))
        ok(await http.get(f"{API}/memories", params={"workspace": ws, **query}))
    ok(
        await http.post(
            f"{API}/search",
            json={
                "workspace": ws,
                "query": "control",
                "include_history": True,
                "as_of": "2999-01-01T00:00:00Z",
                "valid_at": "2026-06-01T00:00:00Z",
            },
        )
    )
