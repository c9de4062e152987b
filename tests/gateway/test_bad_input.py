"""Bad input through the real gateway (REST and MCP over HTTP): a clear 4xx error, never a trace, nothing written."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from mcp.client.client import Client

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_embed import HashEmbedder
from mnemo_platform import reason_name
from mnemo_server.stack import Stack
from tests.helpers import (
    LEAKS,
    MCP_HEADERS,
    MCP_TOOLS,
    Clients,
    Postgres,
    mcp_url,
    start_stack,
    table_counts,
    tool_json,
)

API = "/api/v1"
# Every reason an error body may name: the ErrorReason names of errors.proto.
REASONS = frozenset(reason_name(v) for v in reasons_pb.ErrorReason.values())
# What must never reach a caller: a Python trace, a source file, the installation's paths.


def assert_clear_error(response: httpx.Response, status: int, fragment: str = "") -> dict[str, Any]:
    """A 4xx with the one JSON error shape, a message that says something, and no internals."""
    assert response.status_code == status, (response.status_code, response.text[:500])
    assert 400 <= response.status_code < 500
    assert response.headers["content-type"].startswith("application/json"), response.headers["content-type"]
    body = response.json()
    error = body["error"]
    assert isinstance(error["code"], str) and error["code"]
    assert error["reason"] in REASONS, error
    assert isinstance(error["message"], str) and len(error["message"]) > 5
    assert fragment in error["message"], error["message"]
    assert not LEAKS.search(response.text), response.text[:500]
    return error


@dataclass(frozen=True)
class Target:
    """A workspace with one memory in it, and another workspace: what the bad requests aim at."""

    ws: str
    memory_id: str
    other_ws: str


@pytest.fixture(scope="module")
async def http(hash_stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=hash_stack.base_url, timeout=30) as client:
        # The default workspace is registered on first use: do that now, so that it is not
        # counted against the bad requests below (a fresh stack is tested separately).
        assert (await client.get(f"{API}/memories")).status_code == 200
        yield client


@pytest.fixture(scope="module")
async def target(hash_clients: Clients) -> Target:
    ws = await hash_clients.workspace()
    other = await hash_clients.workspace()
    memory = await hash_clients.write(ws.id, "The deploy script lives in ops/deploy.sh.", tags=["ops"])
    return Target(ws.id, memory.id, other.id)


def page_token(data: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def deep(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


def deep_json(depth: int) -> str:
    """Nested JSON text as deep as asked (json.dumps itself gives up near Python's recursion limit)."""
    return '{"k": ' * (depth - 1) + "{}" + "}" * (depth - 1)


# Placeholders in the tables below, filled from the target when a test runs.
WS, OTHER, ID = "<ws>", "<other-ws>", "<memory-id>"
MISSING = str(uuid.UUID(int=1))
BIG = 1_048_576 + 1
MEMORIES, ONE = f"{API}/memories", f"{API}/memories/{ID}"
SEARCH, WORKSPACES, STATUS = f"{API}/search", f"{API}/workspaces", f"{API}/status"


def fill(value: Any, t: Target) -> Any:
    if isinstance(value, str):
        return value.replace(WS, t.ws).replace(OTHER, t.other_ws).replace(ID, t.memory_id)
    if isinstance(value, dict):
        return {fill(k, t): fill(v, t) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, t) for v in value]
    return value


def body(**fields: Any) -> dict[str, Any]:
    """A JSON body naming the target workspace (unless it names one itself)."""
    return {"json": {"workspace": WS, **fields}}


def params(**fields: Any) -> dict[str, Any]:
    return {"params": {"workspace": WS, **fields}}


def raw(text: str | bytes) -> dict[str, Any]:
    """A body sent byte for byte: escapes and bytes a JSON encoder would never produce."""
    return {"content": text, "headers": {"content-type": "application/json"}}


@dataclass(frozen=True)
class Bad:
    """One bad request and the clear error it must get."""

    name: str
    method: str
    path: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    status: int = 400
    fragment: str = ""

    def request(self, t: Target) -> tuple[str, str, dict[str, Any]]:
        kwargs = fill(self.kwargs, t)
        if isinstance(kwargs.get("content"), str):
            kwargs["content"] = kwargs["content"].encode("utf-8", "surrogatepass")
        return self.method, fill(self.path, t), kwargs


def no_such_ws(**fields: Any) -> dict[str, Any]:
    return {"json": {**fields, "workspace": "no-such-ws"}}


REGISTER = "mnemo workspace add"

BAD_REQUESTS = [
    # -- POST /memories --------------------------------------------------------------------------
    Bad("write-malformed-json", "POST", MEMORIES, raw('{"content": "x",'), fragment="JSON"),
    Bad("write-invalid-utf8", "POST", MEMORIES, raw(b'{"content": "caf\xe9 \xff"}')),
    Bad("write-lone-surrogate", "POST", MEMORIES, raw('{"workspace": "<ws>", "content": "x \\ud800"}'), 400, "Unicode"),
    Bad("write-surrogate-tag", "POST", MEMORIES, raw('{"workspace": "<ws>", "content": "x", "tags": ["\\udfff"]}')),
    Bad(
        "write-surrogate-key",
        "POST",
        MEMORIES,
        raw('{"workspace": "<ws>", "content": "x", "metadata": {"\\ud800": 1}}'),
    ),
    Bad("write-nul-content", "POST", MEMORIES, body(content="a\x00b"), fragment="NUL"),
    Bad("write-nul-title", "POST", MEMORIES, body(content="x", title="t\x00"), fragment="NUL"),
    Bad("write-nul-tag", "POST", MEMORIES, body(content="x", tags=["a\x00"]), fragment="NUL"),
    Bad("write-nul-metadata-value", "POST", MEMORIES, body(content="x", metadata={"k": "v\x00"}), fragment="NUL"),
    Bad("write-nul-metadata-key", "POST", MEMORIES, body(content="x", metadata={"k\x00": "v"}), fragment="NUL"),
    Bad("write-nul-source-uri", "POST", MEMORIES, body(content="x", source_uri="file:///a\x00"), fragment="NUL"),
    Bad("write-nul-idempotency-key", "POST", MEMORIES, body(content="x", idempotency_key="k\x00"), fragment="NUL"),
    Bad("write-nul-workspace", "POST", MEMORIES, {"json": {"content": "x", "workspace": "w\x00"}}, fragment="NUL"),
    Bad("write-number-content", "POST", MEMORIES, body(content=42), fragment="content"),
    Bad("write-object-tags", "POST", MEMORIES, body(content="x", tags={"a": 1}), fragment="tags"),
    Bad("write-list-metadata", "POST", MEMORIES, body(content="x", metadata=[1, 2]), fragment="metadata"),
    Bad("write-unknown-kind", "POST", MEMORIES, body(content="x", kind="rumour"), fragment="kind"),
    Bad("write-unknown-provenance", "POST", MEMORIES, body(content="x", provenance="robot"), fragment="provenance"),
    Bad("write-unknown-field", "POST", MEMORIES, body(content="x", colour="blue"), fragment="colour"),
    Bad("write-missing-content", "POST", MEMORIES, body(), fragment="content"),
    Bad("write-blank-content", "POST", MEMORIES, body(content=" \n\t "), fragment="content"),
    Bad("write-body-is-a-list", "POST", MEMORIES, {"json": [{"content": "x"}]}),
    Bad("write-body-is-a-string", "POST", MEMORIES, {"json": "x"}),
    Bad("write-empty-body", "POST", MEMORIES, raw(b"")),
    Bad("write-text-plain", "POST", MEMORIES, {"content": b"remember this"}),
    Bad("write-metadata-depth-33", "POST", MEMORIES, body(content="x", metadata=deep(33)), fragment="deeper"),
    Bad("write-metadata-depth-1000", "POST", MEMORIES, raw(f'{{"content": "x", "metadata": {deep_json(1000)}}}')),
    Bad("write-metadata-depth-1e5", "POST", MEMORIES, raw(f'{{"content": "x", "metadata": {deep_json(100_000)}}}')),
    Bad("write-content-1-mib-plus-1", "POST", MEMORIES, body(content="x" * BIG), fragment="limit is 1048576"),
    Bad("write-title-too-long", "POST", MEMORIES, body(content="x", title="t" * 501), fragment="500"),
    Bad("write-too-many-tags", "POST", MEMORIES, body(content="x", tags=[f"t{i}" for i in range(33)]), fragment="32"),
    Bad("write-body-over-4-mib", "POST", MEMORIES, body(content="x" * (4 * 1_048_576 + 1)), 413, "exceeds"),
    Bad("write-unknown-workspace", "POST", MEMORIES, no_such_ws(content="x"), 404, REGISTER),
    # -- PATCH /memories/{id} ----------------------------------------------------------------------
    Bad("update-not-a-uuid", "PATCH", f"{API}/memories/not-a-uuid", body(content="x"), fragment="uuid"),
    Bad("update-missing-memory", "PATCH", f"{API}/memories/{MISSING}", body(content="x"), 404),
    Bad("update-memory-of-another-workspace", "PATCH", ONE, {"json": {"content": "x", "workspace": OTHER}}, 404),
    Bad("update-malformed-json", "PATCH", ONE, raw('{"content": '), fragment="JSON"),
    Bad("update-lone-surrogate", "PATCH", ONE, raw('{"workspace": "<ws>", "content": "\\ud83d"}'), 400, "Unicode"),
    Bad("update-nul-content", "PATCH", ONE, body(content="new\x00"), fragment="NUL"),
    Bad("update-nul-title", "PATCH", ONE, body(content="new", title="\x00"), fragment="NUL"),
    Bad("update-number-content", "PATCH", ONE, body(content=1.5), fragment="content"),
    Bad("update-string-tags", "PATCH", ONE, body(content="new", tags="ops"), fragment="tags"),
    Bad("update-negative-version", "PATCH", ONE, body(content="new", expected_version=-1), 400, "expected_version"),
    Bad("update-huge-version", "PATCH", ONE, body(content="new", expected_version=2**40), 400, "expected_version"),
    Bad("update-stale-version", "PATCH", ONE, body(content="new", expected_version=7), 409, "version"),
    Bad("update-unknown-field", "PATCH", ONE, body(content="new", id="x"), fragment="id"),
    Bad("update-metadata-depth-1000", "PATCH", ONE, raw(f'{{"content": "n", "metadata": {deep_json(1000)}}}')),
    Bad("update-unknown-workspace", "PATCH", ONE, no_such_ws(content="x"), 404, REGISTER),
    # -- GET /memories/{id} --------------------------------------------------------------------------
    Bad("get-not-a-uuid", "GET", f"{API}/memories/12345", fragment="uuid"),
    Bad("get-nul-id", "GET", f"{API}/memories/%00"),
    Bad("get-invalid-utf8-id", "GET", f"{API}/memories/%ff%fe"),
    Bad("get-long-id", "GET", f"{API}/memories/{'a' * 10_000}"),
    Bad("get-missing-memory", "GET", f"{API}/memories/{MISSING}", params(), 404),
    Bad("get-memory-of-another-workspace", "GET", ONE, {"params": {"workspace": OTHER}}, 404),
    Bad("get-unknown-workspace", "GET", ONE, {"params": {"workspace": "no-such-ws"}}, 404, REGISTER),
    Bad("get-nul-workspace", "GET", ONE, {"params": {"workspace": "w\x00"}}, fragment="NUL"),
    # -- GET /memories -------------------------------------------------------------------------------
    Bad("list-negative-page-size", "GET", MEMORIES, params(page_size=-1), fragment="page_size"),
    Bad("list-huge-page-size", "GET", MEMORIES, params(page_size=2**40), fragment="page_size"),
    Bad("list-string-page-size", "GET", MEMORIES, params(page_size="ten"), fragment="page_size"),
    Bad("list-garbage-page-token", "GET", MEMORIES, params(page_token="garbage!"), fragment="page_token"),
    Bad("list-nul-page-token", "GET", MEMORIES, params(page_token="\x00"), fragment="page_token"),
    Bad("list-list-page-token", "GET", MEMORIES, params(page_token=page_token([1, 2])), fragment="page_token"),
    Bad(
        "list-page-token-bad-id",
        "GET",
        MEMORIES,
        params(page_token=page_token({"u": "2024-01-01T00:00:00+00:00", "i": "x"})),
        fragment="page_token",
    ),
    Bad(
        "list-page-token-year-1-east-of-utc",
        "GET",
        MEMORIES,
        params(page_token=page_token({"u": "0001-01-01T00:00:00+14:00", "i": MISSING})),
        fragment="page_token",
    ),
    Bad(
        "list-page-token-year-9999-west-of-utc",
        "GET",
        MEMORIES,
        params(page_token=page_token({"u": "9999-12-31T23:59:59-14:00", "i": MISSING})),
        fragment="page_token",
    ),
    Bad("list-unknown-kind", "GET", MEMORIES, params(kind="rumour"), fragment="kind"),
    Bad("list-nul-tag", "GET", MEMORIES, params(tag="a\x00"), fragment="NUL"),
    Bad("list-unknown-workspace", "GET", MEMORIES, {"params": {"workspace": "no-such-ws"}}, 404, REGISTER),
    # -- POST /search ----------------------------------------------------------------------------------
    Bad("search-malformed-json", "POST", SEARCH, raw("{'query': 'x'}"), fragment="JSON"),
    Bad("search-invalid-utf8", "POST", SEARCH, raw(b'{"query": "\xc3\x28"}')),
    Bad("search-lone-surrogate", "POST", SEARCH, raw('{"workspace": "<ws>", "query": "a \\udc00"}'), 400, "Unicode"),
    Bad("search-nul-query", "POST", SEARCH, body(query="deploy\x00"), fragment="NUL"),
    Bad("search-nul-tag", "POST", SEARCH, body(query="deploy", tags=["\x00"]), fragment="NUL"),
    Bad("search-number-query", "POST", SEARCH, body(query=7), fragment="query"),
    Bad("search-missing-query", "POST", SEARCH, body(), fragment="query"),
    Bad("search-string-limit", "POST", SEARCH, body(query="deploy", limit="ten"), fragment="limit"),
    Bad("search-fractional-limit", "POST", SEARCH, body(query="deploy", limit=2.5), fragment="limit"),
    Bad("search-negative-limit", "POST", SEARCH, body(query="deploy", limit=-1), fragment="limit"),
    Bad("search-huge-limit", "POST", SEARCH, body(query="deploy", limit=2**40), fragment="limit"),
    Bad("search-unknown-mode", "POST", SEARCH, body(query="deploy", mode="fuzzy"), fragment="mode"),
    Bad("search-unknown-kind", "POST", SEARCH, body(query="deploy", kinds=["rumour"]), fragment="kinds"),
    Bad("search-bad-date", "POST", SEARCH, body(query="deploy", created_after="last tuesday"), 400, "created_after"),
    Bad("search-string-explain", "POST", SEARCH, body(query="deploy", explain="perhaps"), fragment="explain"),
    Bad("search-unknown-field", "POST", SEARCH, body(query="deploy", top_k=5), fragment="top_k"),
    Bad("search-query-over-32-kib", "POST", SEARCH, body(query="x" * (32 * 1024 + 1)), fragment="32768"),
    Bad("search-unknown-workspace", "POST", SEARCH, no_such_ws(query="deploy"), 404, REGISTER),
    # -- POST /workspaces --------------------------------------------------------------------------------
    Bad("workspace-relative-path", "POST", WORKSPACES, {"json": {"path": "rel/path"}}, fragment="absolute"),
    Bad("workspace-nul-path", "POST", WORKSPACES, {"json": {"path": "/srv/a\x00"}}, fragment="NUL"),
    Bad("workspace-nul-name", "POST", WORKSPACES, {"json": {"name": "n\x00"}}, fragment="NUL"),
    Bad("workspace-surrogate-name", "POST", WORKSPACES, raw('{"name": "\\ud800"}'), fragment="Unicode"),
    Bad("workspace-number-path", "POST", WORKSPACES, {"json": {"path": 42}}, fragment="path"),
    Bad("workspace-neither-path-nor-name", "POST", WORKSPACES, {"json": {}}, fragment="root path or a name"),
    Bad("workspace-name-too-long", "POST", WORKSPACES, {"json": {"name": "n" * 101}}),
    Bad("workspace-path-too-long", "POST", WORKSPACES, {"json": {"path": "/" + "p" * 5000}}),
    Bad("workspace-unknown-field", "POST", WORKSPACES, {"json": {"name": "n", "root": "/x"}}, fragment="root"),
    Bad("workspace-malformed-json", "POST", WORKSPACES, raw("{"), fragment="JSON"),
    # -- GET /status -----------------------------------------------------------------------------------------
    Bad("status-unknown-workspace", "GET", STATUS, {"params": {"workspace": "no-such"}}, 404, REGISTER),
    Bad("status-nul-workspace", "GET", STATUS, {"params": {"workspace": "\x00"}}, fragment="NUL"),
    Bad("status-long-workspace", "GET", STATUS, {"params": {"workspace": "/" * 5000}}),
    # -- routes and methods ------------------------------------------------------------------------------------
    Bad("unknown-api-route", "GET", f"{API}/memorys", status=404),
    Bad("unknown-root-route", "GET", "/etc/passwd", status=404),
    Bad("path-traversal-route", "GET", f"{API}/%2e%2e/%2e%2e/etc/passwd", status=404),
    Bad("method-not-allowed", "PUT", ONE, status=405),
    Bad("put-not-allowed", "PUT", MEMORIES, body(content="x"), status=405),
]


@pytest.mark.parametrize("bad", BAD_REQUESTS, ids=[b.name for b in BAD_REQUESTS])
async def test_bad_rest_requests_get_a_clear_4xx_json_error_and_write_nothing(
    http: httpx.AsyncClient, hash_stack: Stack, target: Target, bad: Bad
) -> None:
    before = await table_counts(hash_stack.dsn)
    method, path, kwargs = bad.request(target)
    response = await http.request(method, path, **kwargs)
    assert_clear_error(response, bad.status, bad.fragment)
    assert await table_counts(hash_stack.dsn) == before


GOOD_REQUESTS = [
    Bad("write", "POST", MEMORIES, body(content="a good note"), 201),
    Bad("update", "PATCH", ONE, body(content="<other-ws> is the other workspace"), 200),
    Bad("get", "GET", ONE, params(), 200),
    Bad("list", "GET", MEMORIES, params(page_size=1), 200),
    Bad("search", "POST", SEARCH, body(query="deploy"), 200),
    Bad("workspace", "POST", WORKSPACES, {"json": {"path": "/srv/<other-ws>"}}, 201),
    Bad("status", "GET", STATUS, params(), 200),
    Bad("list-workspaces", "GET", WORKSPACES, {}, 200),
]


@pytest.mark.parametrize("good", GOOD_REQUESTS, ids=[g.name for g in GOOD_REQUESTS])
async def test_the_same_routes_succeed_with_good_input(http: httpx.AsyncClient, target: Target, good: Bad) -> None:
    # Positive control for the table above: every route it probes works.
    method, path, kwargs = good.request(target)
    response = await http.request(method, path, **kwargs)
    assert response.status_code == good.status, response.text[:500]
    assert isinstance(response.json(), dict)


async def test_a_good_write_changes_the_counts_and_a_refused_one_does_not(
    http: httpx.AsyncClient, hash_stack: Stack, target: Target
) -> None:
    before = await table_counts(hash_stack.dsn)
    refused = await http.post(f"{API}/memories", json={"workspace": target.ws, "content": "x" * BIG})
    assert_clear_error(refused, 400, "limit is 1048576")
    assert await table_counts(hash_stack.dsn) == before
    written = await http.post(f"{API}/memories", json={"workspace": target.ws, "content": "x" * (BIG - 1)})
    assert written.status_code == 201, written.text[:300]
    after = await table_counts(hash_stack.dsn)
    assert after["memories"] == before["memories"] + 1
    assert after["memory_versions"] == before["memory_versions"] + 1
    assert after["chunks"] > before["chunks"]
    assert after["audit_events"] == before["audit_events"] + 1


async def test_a_path_traversal_source_uri_is_an_opaque_string(http: httpx.AsyncClient, target: Target) -> None:
    response = await http.post(
        f"{API}/memories", json={"workspace": target.ws, "content": "imported", "source_uri": "../../etc/passwd"}
    )
    assert response.status_code == 201, response.text[:300]
    memory_id = response.json()["memory"]["id"]
    got = await http.get(f"{API}/memories/{memory_id}", params={"workspace": target.ws})
    assert got.json()["source_uri"] == "../../etc/passwd"
    assert got.json()["content"] == "imported"


async def test_a_4_mib_body_limit_applies_to_mcp_too(http: httpx.AsyncClient, hash_stack: Stack) -> None:
    before = await table_counts(hash_stack.dsn)
    response = await http.post(
        "/mcp",
        content=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "memory_write", '
        b'"arguments": {"content": "' + b"x" * (4 * 1_048_576) + b'"}}}',
        headers=MCP_HEADERS,
    )
    assert_clear_error(response, 413, "exceeds")
    assert await table_counts(hash_stack.dsn) == before


@pytest.fixture(scope="module")
async def fresh_stack(postgres: Postgres) -> AsyncIterator[Stack]:
    """A stack whose default workspace has never been used."""
    stack = await start_stack(
        await postgres.create_database("fresh"), HashEmbedder(64), MNEMO_DEFAULT_WORKSPACE="fresh-default"
    )
    yield stack
    await stack.stop()


async def test_a_refused_request_does_not_register_the_default_workspace(fresh_stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=fresh_stack.base_url, timeout=30) as client:
        before = await table_counts(fresh_stack.dsn)
        refused = await client.post(f"{API}/memories", json={"content": "a\x00b"})
        assert_clear_error(refused, 400, "NUL")
        refused = await client.get(f"{API}/memories", params={"page_token": "garbage!"})
        assert_clear_error(refused, 400, "page_token")
        assert await table_counts(fresh_stack.dsn) == before
        # Positive control: a good write without a workspace registers the default one and lands there.
        written = await client.post(f"{API}/memories", json={"content": "first note"})
        assert written.status_code == 201, written.text[:300]
        assert written.json()["memory"]["workspace_id"] == "fresh-default"


# -- MCP ----------------------------------------------------------------------------------------------------


def crash_text(tool: str) -> str:
    return f"Error executing tool {tool}"


def assert_tool_error(result: Any, tool: str, fragment: str) -> str:
    assert result.is_error, result
    text = result.content[0].text
    # The SDK's crash message is exactly "Error executing tool NAME": anything anticipated says more.
    assert text != crash_text(tool), f"{tool} crashed"
    assert text.startswith(crash_text(tool) + ": ") or text.startswith("Unknown tool"), text
    assert fragment in text, text
    assert not LEAKS.search(text), text
    return text


async def test_mcp_lists_exactly_the_five_tools_each_with_a_real_description(hash_stack: Stack) -> None:
    async with Client(mcp_url(hash_stack)) as client:
        tools = (await client.list_tools()).tools
    assert {tool.name for tool in tools} == MCP_TOOLS
    assert len(tools) == len(MCP_TOOLS)
    for tool in tools:
        assert tool.description and len(tool.description) > 80, tool.name
        assert "properties" in tool.input_schema, tool.name


BAD_TOOL_CALLS = [
    ("memory_write", lambda t: {}, "content"),
    ("memory_write", lambda t: {"content": 42}, "content"),
    ("memory_write", lambda t: {"content": None}, "content"),
    ("memory_write", lambda t: {"content": "a\x00b"}, "NUL"),
    ("memory_write", lambda t: {"content": "x", "title": "\x00"}, "NUL"),
    ("memory_write", lambda t: {"content": "x", "tags": ["\x00"]}, "NUL"),
    ("memory_write", lambda t: {"content": "x", "tags": "ops"}, "tags"),
    ("memory_write", lambda t: {"content": "x", "kind": "rumour"}, "kind"),
    ("memory_write", lambda t: {"content": " "}, "content"),
    ("memory_write", lambda t: {"content": "x" * BIG}, "limit is 1048576"),
    ("memory_write", lambda t: {"content": "x", "workspace": "no-such-ws"}, "mnemo workspace add"),
    ("memory_write", lambda t: {"content": "x", "workspace": "w\x00"}, "NUL"),
    ("memory_search", lambda t: {}, "query"),
    ("memory_search", lambda t: {"query": ["deploy"]}, "query"),
    ("memory_search", lambda t: {"query": "deploy\x00"}, "NUL"),
    ("memory_search", lambda t: {"query": "deploy", "limit": "ten"}, "limit"),
    ("memory_search", lambda t: {"query": "deploy", "limit": -1}, "limit"),
    ("memory_search", lambda t: {"query": "deploy", "limit": 2**40}, "limit"),
    ("memory_search", lambda t: {"query": "deploy", "mode": "fuzzy"}, "mode"),
    ("memory_search", lambda t: {"query": "deploy", "kinds": ["rumour"]}, "kinds"),
    ("memory_search", lambda t: {"query": "x" * (32 * 1024 + 1)}, "32768"),
    ("memory_search", lambda t: {"query": "deploy", "workspace": "no-such-ws"}, "mnemo workspace add"),
    ("memory_get", lambda t: {}, "id"),
    ("memory_get", lambda t: {"id": 5}, "id"),
    ("memory_get", lambda t: {"id": "not-a-uuid"}, "uuid"),
    ("memory_get", lambda t: {"id": "\x00"}, "id"),
    ("memory_get", lambda t: {"id": MISSING}, "NOT_FOUND"),
    ("memory_get", lambda t: {"id": t.memory_id, "workspace": t.other_ws}, "NOT_FOUND"),
    ("memory_get", lambda t: {"id": t.memory_id, "workspace": "no-such-ws"}, "mnemo workspace add"),
    ("memory_update", lambda t: {"id": t.memory_id}, "content"),
    ("memory_update", lambda t: {"content": "x"}, "id"),
    ("memory_update", lambda t: {"id": "nope", "content": "x"}, "uuid"),
    ("memory_update", lambda t: {"id": MISSING, "content": "x"}, "NOT_FOUND"),
    ("memory_update", lambda t: {"id": t.memory_id, "content": "x\x00"}, "NUL"),
    ("memory_update", lambda t: {"id": t.memory_id, "content": "x", "expected_version": -1}, "expected_version"),
    ("memory_update", lambda t: {"id": t.memory_id, "content": "x", "expected_version": 2**40}, "expected_version"),
    ("memory_update", lambda t: {"id": t.memory_id, "content": "x", "expected_version": 99}, "FAILED_PRECONDITION"),
    ("memory_update", lambda t: {"id": t.memory_id, "content": "x", "tags": [1, 2]}, "tags"),
    ("memory_update", lambda t: {"id": t.memory_id, "content": "x", "workspace": t.other_ws}, "NOT_FOUND"),
    ("memory_status", lambda t: {"workspace": "no-such-ws"}, "mnemo workspace add"),
    ("memory_status", lambda t: {"workspace": "\x00"}, "NUL"),
    ("memory_status", lambda t: {"workspace": 5}, "workspace"),
    ("memory_context", lambda t: {"budget": 0}, "budget must be a positive number of tokens"),
    ("memory_context", lambda t: {"budget": -5}, "budget must be a positive number of tokens"),
    ("memory_context", lambda t: {"budget": 16001}, "budget must be between 1 and 16000 tokens"),
    ("memory_context", lambda t: {"budget": 2**40}, "out of range"),
    ("memory_context", lambda t: {"budget": "lots"}, "budget"),
    ("memory_context", lambda t: {"task": "a\x00b"}, "NUL"),
    ("memory_context", lambda t: {"workspace": "no-such-ws"}, "mnemo workspace add"),
    ("memory_context", lambda t: {"workspace": "*"}, "not offered over MCP"),
    ("memory_feedback", lambda t: {"id": t.memory_id}, "vote"),
    ("memory_feedback", lambda t: {"id": t.memory_id, "vote": "meh"}, "vote"),
    ("memory_feedback", lambda t: {"id": "nope", "vote": "useful"}, "uuid"),
    ("memory_feedback", lambda t: {"id": MISSING, "vote": "useful"}, "NOT_FOUND"),
    ("memory_feedback", lambda t: {"id": t.memory_id, "vote": "useful", "note": "n" * 2001}, "at most 2000"),
    ("memory_feedback", lambda t: {"id": t.memory_id, "vote": "useful", "workspace": t.other_ws}, "NOT_FOUND"),
    ("memory_forget", lambda t: {"id": t.memory_id}, "memory_forget"),
]


@pytest.mark.parametrize(
    ("tool", "args", "fragment"),
    BAD_TOOL_CALLS,
    ids=[f"{tool}-{i}-{fragment.split()[0]}" for i, (tool, _, fragment) in enumerate(BAD_TOOL_CALLS)],
)
async def test_bad_tool_calls_are_clear_tool_errors_and_write_nothing(
    hash_stack: Stack, target: Target, tool: str, args: Callable[[Target], dict[str, Any]], fragment: str
) -> None:
    async with Client(mcp_url(hash_stack, target.ws)) as client:
        before = await table_counts(hash_stack.dsn)
        result = await client.call_tool(tool, args(target))
        assert_tool_error(result, tool, fragment)
        assert await table_counts(hash_stack.dsn) == before


async def test_each_tool_succeeds_with_good_arguments(hash_stack: Stack, target: Target) -> None:
    # Positive control for the table above.
    async with Client(mcp_url(hash_stack, target.ws)) as client:
        before = await table_counts(hash_stack.dsn)
        written = tool_json(await client.call_tool("memory_write", {"content": "MCP writes are agent notes."}))
        assert written["outcome"] == "created" and written["memory"]["provenance"] == "agent"
        assert (await table_counts(hash_stack.dsn))["memories"] == before["memories"] + 1
        memory_id = written["memory"]["id"]
        found = tool_json(await client.call_tool("memory_search", {"query": "agent notes", "mode": "lexical"}))
        assert memory_id in [r["id"] for r in found["results"]]
        got = tool_json(await client.call_tool("memory_get", {"id": memory_id}))
        assert got["content"] == "MCP writes are agent notes."
        updated = tool_json(await client.call_tool("memory_update", {"id": memory_id, "content": "Changed."}))
        assert updated["memory"]["version"] == 2
        status = tool_json(await client.call_tool("memory_status", {}))
        assert status["workspace"]["id"] == target.ws and int(status["memories"]) >= 2
        voted = tool_json(await client.call_tool("memory_feedback", {"id": memory_id, "vote": "useful"}))
        assert (voted["feedback"]["memory_id"], voted["feedback_factor"]) == (memory_id, 1.05)


async def test_the_url_workspace_selects_the_workspace_and_an_argument_overrides_it(
    hash_stack: Stack, hash_clients: Clients
) -> None:
    a = (await hash_clients.workspace()).id
    b = (await hash_clients.workspace()).id
    async with Client(mcp_url(hash_stack, a)) as client:
        in_a = tool_json(await client.call_tool("memory_write", {"content": "written via the URL workspace"}))
        in_b = tool_json(
            await client.call_tool("memory_write", {"content": "written via the argument", "workspace": b})
        )
        assert in_a["memory"]["workspace_id"] == a
        assert in_b["memory"]["workspace_id"] == b
        # Reads follow the same rule: the URL's workspace, unless an argument names another.
        assert_tool_error(await client.call_tool("memory_get", {"id": in_b["memory"]["id"]}), "memory_get", "NOT_FOUND")
        got = tool_json(await client.call_tool("memory_get", {"id": in_b["memory"]["id"], "workspace": b}))
        assert got["workspace_id"] == b
        found = tool_json(await client.call_tool("memory_search", {"query": "written via", "mode": "lexical"}))
        assert [r["id"] for r in found["results"]] == [in_a["memory"]["id"]]
        assert tool_json(await client.call_tool("memory_status", {}))["workspace"]["id"] == a
        assert tool_json(await client.call_tool("memory_status", {"workspace": b}))["workspace"]["id"] == b


async def test_an_unknown_url_workspace_is_a_clear_error_and_writes_nothing(hash_stack: Stack) -> None:
    before = await table_counts(hash_stack.dsn)
    async with Client(mcp_url(hash_stack, "no-such-ws")) as client:
        result = await client.call_tool("memory_write", {"content": "lost?"})
        assert_tool_error(result, "memory_write", "mnemo workspace add")
        assert_tool_error(await client.call_tool("memory_search", {"query": "x"}), "memory_search", "NOT_FOUND")
    assert await table_counts(hash_stack.dsn) == before


TOOL_CALL = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "memory_write", "arguments": '
RAW_MCP = [
    (TOOL_CALL + b'{"content": "x \\ud800"}}}', "lone-surrogate"),
    (TOOL_CALL + b'{"content": "caf\xe9"}}}', "invalid-utf8"),
    (TOOL_CALL + b'{"content": ', "malformed-json"),
    (b"[1, 2]", "not-a-message"),
    (b"", "empty"),
]


@pytest.mark.parametrize("raw", [r for r, _ in RAW_MCP], ids=[i for _, i in RAW_MCP])
async def test_undecodable_mcp_requests_get_a_json_rpc_error_and_write_nothing(
    http: httpx.AsyncClient, hash_stack: Stack, target: Target, raw: bytes
) -> None:
    before = await table_counts(hash_stack.dsn)
    response = await http.post(f"/mcp?workspace={target.ws}", content=raw, headers=MCP_HEADERS)
    assert response.status_code == 400, response.text[:300]
    error = response.json()["error"]
    assert isinstance(error["code"], int) and len(error["message"]) > 5
    assert not LEAKS.search(response.text), response.text[:500]
    assert await table_counts(hash_stack.dsn) == before
    # Positive control: a well-formed message on the same endpoint is answered.
    listed = await http.post(
        f"/mcp?workspace={target.ws}",
        content=b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}',
        headers=MCP_HEADERS,
    )
    assert listed.status_code == 200 and {t["name"] for t in listed.json()["result"]["tools"]} == MCP_TOOLS
