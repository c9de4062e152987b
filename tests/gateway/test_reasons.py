"""Every error through the real gateway carries a machine reason: REST bodies, the gateway's own refusals,
auth refusals and MCP tool errors, each beside the same call done right."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from mcp.client.client import Client

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_embed import HashEmbedder
from mnemo_platform import reason_name
from mnemo_server.stack import Stack
from tests.helpers import Clients, Postgres, mcp_client, mcp_url, start_stack, table_counts, tool_json

API = "/api/v1"
MISSING = str(uuid.UUID(int=11))
REASONS = {reason_name(v) for v in reasons_pb.ErrorReason.values()}
# An MCP tool error: the SDK's prefix, then code, message and reason on one line.
TOOL_ERROR = re.compile(r"^Error executing tool \w+: ([A-Z_]+): (.+) \(reason: ([A-Z_]+)\)$", re.DOTALL)


def assert_error(response: httpx.Response, status: int, code: str, reason: str) -> dict[str, Any]:
    """The one JSON error body, exactly: code, reason and message (plus problems for refused input)."""
    assert response.status_code == status, (response.status_code, response.text[:500])
    assert response.headers["content-type"].startswith("application/json"), response.headers["content-type"]
    error = response.json()["error"]
    assert set(error) - {"problems"} == {"code", "reason", "message"}, error
    assert (error["code"], error["reason"]) == (code, reason), error
    assert reason in REASONS
    assert isinstance(error["message"], str) and len(error["message"]) > 5, error
    return error


def assert_tool_error(result: Any, code: str, reason: str) -> str:
    assert result.is_error, result.content[0].text[:500]
    text = result.content[0].text
    match = TOOL_ERROR.match(text)
    assert match is not None, text
    assert (match[1], match[3]) == (code, reason), text
    return match[2]


@dataclass(frozen=True)
class Target:
    ws: str
    memory_id: str


@pytest.fixture(scope="module")
async def http(hash_stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=hash_stack.base_url, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
async def target(hash_clients: Clients) -> Target:
    ws = await hash_clients.workspace()
    memory = await hash_clients.write(ws.id, "Releases are cut from the release branch on Thursdays.")
    return Target(ws.id, memory.id)


# -- REST: reasons the services send --------------------------------------------------------------------------


async def test_an_unknown_workspace_is_workspace_not_found(http: httpx.AsyncClient, target: Target) -> None:
    missing = "no-such-workspace-" + uuid.uuid4().hex[:8]
    error = assert_error(
        await http.get(f"{API}/memories", params={"workspace": missing}), 404, "NOT_FOUND", "WORKSPACE_NOT_FOUND"
    )
    assert missing in error["message"]
    searched = await http.post(f"{API}/search", json={"query": "release", "workspace": missing})
    assert_error(searched, 404, "NOT_FOUND", "WORKSPACE_NOT_FOUND")
    # Positive control: the same calls on a registered workspace succeed.
    listed = await http.get(f"{API}/memories", params={"workspace": target.ws})
    assert listed.status_code == 200 and [m["id"] for m in listed.json()["memories"]] == [target.memory_id]
    found = await http.post(f"{API}/search", json={"query": "release", "workspace": target.ws, "mode": "lexical"})
    assert found.status_code == 200 and target.memory_id in [r["id"] for r in found.json()["results"]]


async def test_an_unknown_memory_is_memory_not_found(http: httpx.AsyncClient, target: Target) -> None:
    missing = await http.get(f"{API}/memories/{MISSING}", params={"workspace": target.ws})
    assert MISSING in assert_error(missing, 404, "NOT_FOUND", "MEMORY_NOT_FOUND")["message"]
    # Positive control: the memory that exists is read.
    found = await http.get(f"{API}/memories/{target.memory_id}", params={"workspace": target.ws})
    assert found.status_code == 200 and found.json()["id"] == target.memory_id


async def test_corrections_refused_by_ingest_name_their_reason(http: httpx.AsyncClient, target: Target) -> None:
    source = f"test://session/{uuid.uuid4().hex[:8]}"
    note = {"content": "A session about the release branch.", "workspace": target.ws, "source_uri": source}
    written = await http.post(f"{API}/memories", json=note)
    assert written.status_code == 201, written.text
    memory_id = written.json()["memory"]["id"]
    deleted = await http.delete(f"{API}/memories/{memory_id}", params={"workspace": target.ws, "reason": "noise"})
    assert deleted.status_code == 200, deleted.text
    # The source stays deleted, and purging wants force.
    assert_error(await http.post(f"{API}/memories", json=note), 409, "FAILED_PRECONDITION", "TOMBSTONED")
    unforced = await http.post(f"{API}/memories/{memory_id}/purge", json={"workspace": target.ws, "reason": "gone"})
    assert_error(unforced, 409, "FAILED_PRECONDITION", "FORCE_REQUIRED")
    read = await http.get(f"{API}/memories/{memory_id}", params={"workspace": target.ws})
    assert_error(read, 404, "NOT_FOUND", "MEMORY_DELETED")
    # Positive controls: another source is written, and purge with force goes through.
    other = await http.post(f"{API}/memories", json={**note, "source_uri": source + "-other"})
    assert other.status_code == 201, other.text
    forced = await http.post(
        f"{API}/memories/{memory_id}/purge", json={"workspace": target.ws, "reason": "gone", "force": True}
    )
    assert forced.status_code == 200, forced.text
    read = await http.get(f"{API}/memories/{memory_id}", params={"workspace": target.ws})
    assert_error(read, 404, "NOT_FOUND", "PURGED")


# -- REST: the gateway's own refusals -------------------------------------------------------------------------


async def test_a_kind_no_enum_has_is_invalid_argument(
    http: httpx.AsyncClient, hash_stack: Stack, target: Target
) -> None:
    before = await table_counts(hash_stack.dsn)
    refused = await http.post(f"{API}/memories", json={"content": "x", "kind": "recipe", "workspace": target.ws})
    error = assert_error(refused, 400, "INVALID_ARGUMENT", "INVALID_ARGUMENT")
    assert [p["field"] for p in error["problems"]] == ["kind"], error
    # The allowed values are the proto's, in the message and in the OpenAPI schema.
    for label in ("note", "decision", "lesson", "session", "import"):
        assert label in error["message"]
    listed = await http.get(f"{API}/memories", params={"workspace": target.ws, "kind": "recipe"})
    assert_error(listed, 400, "INVALID_ARGUMENT", "INVALID_ARGUMENT")
    assert await table_counts(hash_stack.dsn) == before
    schema = (await http.get(f"{API}/openapi.json")).json()["components"]["schemas"]
    assert schema["WriteInput"]["properties"]["kind"]["enum"] == ["note", "decision", "lesson", "session", "import"]
    assert "WORKSPACE_NOT_FOUND" in schema["ErrorDetail"]["properties"]["reason"]["enum"]
    # Positive control: a kind the proto has is written.
    written = await http.post(
        f"{API}/memories",
        json={"content": "We decided on trunk-based development.", "kind": "decision", "workspace": target.ws},
    )
    assert written.status_code == 201 and written.json()["memory"]["kind"] == "decision", written.text


async def test_text_protobuf_cannot_carry_is_invalid_argument(http: httpx.AsyncClient, target: Target) -> None:
    """Refused by the gateway itself, before any service sees it."""
    body = '{"content": "half a pair \\ud800", "workspace": "' + target.ws + '"}'
    refused = await http.post(f"{API}/memories", content=body, headers={"content-type": "application/json"})
    assert "Unicode" in assert_error(refused, 400, "INVALID_ARGUMENT", "INVALID_ARGUMENT")["message"]
    # Positive control: a whole pair (an emoji) is stored.
    body = '{"content": "a whole pair \\ud83d\\ude00", "workspace": "' + target.ws + '"}'
    written = await http.post(f"{API}/memories", content=body, headers={"content-type": "application/json"})
    assert written.status_code == 201, written.text


async def test_unknown_routes_and_methods_get_the_one_body(http: httpx.AsyncClient) -> None:
    assert_error(await http.get(f"{API}/no-such-route"), 404, "NOT_FOUND", "UNSPECIFIED")
    assert_error(await http.get("/no-such-page"), 404, "NOT_FOUND", "UNSPECIFIED")
    wrong = await http.delete(f"{API}/search")
    assert_error(wrong, 405, "UNIMPLEMENTED", "UNSPECIFIED")
    assert "POST" in wrong.headers["allow"]
    # Positive control: the routes and the method that exist answer.
    assert (await http.get(f"{API}/workspaces")).status_code == 200
    assert (await http.post(f"{API}/search", json={"query": "anything"})).status_code == 200


async def test_a_body_over_the_limit_is_too_large(http: httpx.AsyncClient, target: Target) -> None:
    big = {"content": "x" * (4 * 1_048_576 + 1), "workspace": target.ws}  # MNEMO_HTTP_MAX_BODY_BYTES
    assert_error(await http.post(f"{API}/memories", json=big), 413, "RESOURCE_EXHAUSTED", "TOO_LARGE")
    # Positive control: a body under the limit is taken.
    small = await http.post(f"{API}/memories", json={"content": "Small bodies pass.", "workspace": target.ws})
    assert small.status_code == 201, small.text


# -- MCP tool errors ------------------------------------------------------------------------------------------


async def test_mcp_tool_errors_name_their_reason(hash_stack: Stack, target: Target) -> None:
    async with Client(mcp_url(hash_stack, target.ws)) as client:
        missing = await client.call_tool("memory_search", {"query": "release", "workspace": "no-such-ws-for-mcp"})
        assert "no-such-ws-for-mcp" in assert_tool_error(missing, "NOT_FOUND", "WORKSPACE_NOT_FOUND")
        gone = await client.call_tool("memory_get", {"id": MISSING})
        assert assert_tool_error(gone, "NOT_FOUND", "MEMORY_NOT_FOUND").startswith(f"memory {MISSING} not found")
        wildcard = await client.call_tool("memory_search", {"query": "release", "workspace": "*"})
        assert_tool_error(wildcard, "PERMISSION_DENIED", "OUTSIDE_WORKSPACE")
        # Positive control: the same tools, done right, answer.
        found = tool_json(await client.call_tool("memory_search", {"query": "release", "mode": "lexical"}))
        assert target.memory_id in [r["id"] for r in found["results"]]
        assert tool_json(await client.call_tool("memory_get", {"id": target.memory_id}))["id"] == target.memory_id


async def test_mcp_tool_schemas_list_the_proto_labels(hash_stack: Stack) -> None:
    async with Client(mcp_url(hash_stack)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    search = tools["memory_search"].input_schema["properties"]
    assert search["mode"]["enum"] == ["hybrid", "lexical", "semantic"]
    assert search["kinds"]["anyOf"][0]["items"]["enum"] == ["note", "decision", "lesson", "session", "import"]


# -- authentication and authorization -------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def secured(postgres: Postgres) -> AsyncIterator[tuple[Stack, str]]:
    stack = await start_stack(await postgres.create_database("reasons"), HashEmbedder(64), MNEMO_AUTH="on")
    yield stack, stack.bootstrap_token
    await stack.stop()


async def test_auth_refusals_name_their_reason(secured: tuple[Stack, str]) -> None:
    stack, admin = secured

    def bearer(token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
        for name in ("red", "blue"):
            made = await http.post(f"{API}/workspaces", json={"name": name}, headers=bearer(admin))
            assert made.status_code == 201, made.text
        created = await http.post(
            f"{API}/tokens",
            json={"principal": "red-bot", "role": "agent", "workspaces": ["red"]},
            headers=bearer(admin),
        )
        assert created.status_code == 201, created.text
        agent = created.json()["secret"]

        no_token = await http.get(f"{API}/workspaces")
        assert_error(no_token, 401, "UNAUTHENTICATED", "UNAUTHENTICATED")
        assert no_token.headers["www-authenticate"].startswith("Bearer")
        dead = await http.get(f"{API}/workspaces", headers=bearer("mnemo_" + "0" * 40))
        assert_error(dead, 401, "UNAUTHENTICATED", "UNAUTHENTICATED")
        too_low = await http.get(f"{API}/tokens", headers=bearer(agent))
        assert_error(too_low, 403, "PERMISSION_DENIED", "ROLE_TOO_LOW")
        outside = await http.get(f"{API}/memories", params={"workspace": "blue"}, headers=bearer(agent))
        assert_error(outside, 403, "PERMISSION_DENIED", "OUTSIDE_WORKSPACE")
        # Positive controls: each call made with a token that may make it.
        assert (await http.get(f"{API}/workspaces", headers=bearer(agent))).status_code == 200
        assert (await http.get(f"{API}/tokens", headers=bearer(admin))).status_code == 200
        assert (
            await http.get(f"{API}/memories", params={"workspace": "red"}, headers=bearer(agent))
        ).status_code == 200
        assert (
            await http.get(f"{API}/memories", params={"workspace": "blue"}, headers=bearer(admin))
        ).status_code == 200

    async with mcp_client(stack, "blue", token=agent) as client:
        refused = await client.call_tool("memory_search", {"query": "anything"})
        assert_tool_error(refused, "PERMISSION_DENIED", "OUTSIDE_WORKSPACE")
    async with mcp_client(stack, "red", token=agent) as client:
        tool_json(await client.call_tool("memory_search", {"query": "anything"}))
