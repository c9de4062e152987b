"""Every MCP tool fuzzed over HTTP: any arguments get a result or a clear tool error, never a crash or partial write."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import event, given, note, settings
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError

from mnemo_server.stack import Stack
from tests.gateway.fuzz.strategies import (
    FRESH,
    FUZZ_SETTINGS,
    MIB,
    WS,
    arguments,
    changes,
    chunk_count,
    db_state,
    encodable,
    fill,
    fresh_memory,
    logged_errors,
    raw_json,
    server_log,
    short,
    uses,
)
from tests.helpers import LEAKS, MCP_HEADERS, MCP_TOOLS, mcp_client

EXAMPLES = 40
MAX_BODY = 4 * MIB  # MNEMO_HTTP_MAX_BODY_BYTES' default
# gRPC codes that mean a service failed rather than refused: the MCP face of a 5xx.
SERVER_FAULTS = ("INTERNAL:", "UNKNOWN:", "DATA_LOSS:", "UNAVAILABLE:", "DEADLINE_EXCEEDED:")
JSONRPC_INTERNAL_ERROR = -32603


@pytest.fixture(scope="module")
async def input_schemas(stack: Stack) -> dict[str, dict[str, Any]]:
    async with mcp_client(stack, WS) as client:
        return {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}


@dataclass(frozen=True)
class Outcome:
    """What one tool call came back with, by either road."""

    via: str
    status: int
    is_error: bool
    text: str
    rpc_code: int | None = None


def rpc(tool: str, args: dict[str, Any]) -> bytes:
    return raw_json({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": args}})


async def call_tool(stack: Stack, http: httpx.AsyncClient, tool: str, args: dict[str, Any]) -> Outcome:
    """Through the real MCP client when it can send the arguments; as raw JSON-RPC when only bytes can
    (lone surrogates, NaN, JSON nested past Python's encoder) or when the body is over the limit (the
    client reports any HTTP error, the expected 413 included, as its own -32603)."""
    body = rpc(tool, args)
    if encodable(args) and len(body) < MAX_BODY:
        async with mcp_client(stack, WS) as client:
            try:
                result = await client.call_tool(tool, args)
            except MCPError as exc:
                return Outcome("client", 200, True, exc.message, exc.code)
        return Outcome("client", 200, result.is_error, result.content[0].text if result.content else "")
    response = await http.post(f"/mcp?workspace={WS}", content=body, headers=MCP_HEADERS)
    assert response.status_code < 500, (response.status_code, response.text[:500])
    reply = response.json()
    if "error" in reply:
        return Outcome("raw", response.status_code, True, reply["error"]["message"], reply["error"]["code"])
    result = reply["result"]
    return Outcome("raw", response.status_code, result.get("isError", False), result["content"][0]["text"])


def assert_no_crash(tool: str, outcome: Outcome) -> None:
    assert outcome.status < 500, outcome
    assert outcome.rpc_code != JSONRPC_INTERNAL_ERROR, outcome
    if not outcome.is_error:
        return
    # The SDK's crash message is exactly "Error executing tool NAME": an anticipated failure says more.
    assert outcome.text != f"Error executing tool {tool}", f"{tool} crashed"
    assert not any(fault in outcome.text for fault in SERVER_FAULTS), outcome.text[:500]
    assert not LEAKS.search(outcome.text), outcome.text[:500]
    assert len(outcome.text) > 10, outcome.text


async def expected_rows(dsn: str, tool: str, payload: dict[str, Any]) -> dict[str, int]:
    """The rows a successful call adds, per changed table (0: a row updated in place)."""
    if tool in ("memory_write", "memory_update"):
        memory = payload["memory"]
        if payload["outcome"] in ("replayed", "unchanged"):
            return {}
        chunks = {"chunks": await chunk_count(dsn, memory["id"], memory["version"])}
        if payload["outcome"] == "created":
            if memory["suspicious"]:
                # Flagged text is a candidate with its proposal (and that proposal's audit event).
                return {
                    "memories": 1,
                    "memory_versions": 1,
                    "audit_events": 2,
                    "memory_states": 1,
                    "proposals": 1,
                    **chunks,
                }
            return {"memories": 1, "memory_versions": 1, "audit_events": 1, "memory_states": 1, **chunks}
        assert payload["outcome"] == "new_version", payload["outcome"]
        return {"memories": 0, "memory_versions": 1, "audit_events": 1, **chunks}
    if tool == "memory_supersede":
        successor = payload["successor"]
        chunks = await chunk_count(dsn, successor["id"], successor["version"])
        return {"memories": 1, "memory_versions": 1, "audit_events": 1, "memory_states": 2, "chunks": chunks}
    # Retracted or deleted, its chunks leave the search indexes (updated in place).
    if tool == "memory_retract":
        return {"memories": 0, "audit_events": 1, "memory_states": 1, "chunks": 0}
    if tool == "memory_delete":
        return {"memories": 0, "audit_events": 1, "tombstones": 1, "chunks": 0}
    # The vote is a row of its own (updated in place when it replaces the caller's earlier one); the
    # memory's factor is updated; a harmful or outdated vote may open a proposal.
    # The caller's current vote repeated writes nothing; a proposal opened is audited too.
    if tool == "memory_feedback":
        opened = bool(payload["proposal"] and payload["proposal"]["created"])
        rows = {} if payload["unchanged"] else {"memories": 0, "feedback": 0 if payload["replaced"] else 1}
        if opened or not payload["unchanged"]:
            rows["audit_events"] = int(not payload["unchanged"]) + int(opened)
        if opened:
            rows["proposals"] = 1
        return rows
    if tool == "memory_propose":
        return {"proposals": 1, "audit_events": 1} if payload["created"] else {}
    assert tool in READ_ONLY, f"{tool} has no expectation here: say what a successful call writes"
    return {}


def kind_of(tool: str, outcome: Outcome) -> str:
    """A short class for `--hypothesis-show-statistics`: which outcomes the fuzzing reached."""
    if not outcome.is_error:
        return "result"
    if outcome.rpc_code is not None:
        return f"JSON-RPC error {outcome.rpc_code}"
    return "tool error " + outcome.text.removeprefix(f"Error executing tool {tool}: ").split(":")[0][:40]


READ_ONLY = frozenset(
    {"memory_search", "memory_get", "memory_history", "memory_status", "memory_harvest_status", "memory_context"}
)


async def test_every_offered_tool_is_fuzzed(input_schemas: dict[str, dict[str, Any]]) -> None:
    # The parametrization below is MCP_TOOLS: a tool the server offers beyond it would go unfuzzed.
    assert set(input_schemas) == MCP_TOOLS
    for tool in MCP_TOOLS:
        assert input_schemas[tool]["type"] == "object", tool


@pytest.mark.parametrize("tool", sorted(MCP_TOOLS))
@settings(FUZZ_SETTINGS, max_examples=EXAMPLES)
@given(data=st.data())
async def test_any_arguments_get_a_result_or_a_clear_tool_error_and_a_refusal_writes_nothing(
    stack: Stack, http: httpx.AsyncClient, input_schemas: dict[str, dict[str, Any]], tool: str, data: st.DataObject
) -> None:
    schema = input_schemas[tool]
    args = data.draw(arguments(schema.get("properties", {}), schema.get("required", [])), label="arguments")
    if uses(args, FRESH):
        args = fill(args, await fresh_memory(http))
    before = await db_state(stack.dsn)
    with server_log() as log:
        outcome = await call_tool(stack, http, tool, args)
    after = await db_state(stack.dsn)
    note(f"{tool}({short(args)}) via {outcome.via}: {short(outcome.text, 500)}")
    assert_no_crash(tool, outcome)
    assert logged_errors(log) == [], "the call was answered, but something in the stack failed unhandled"
    event(f"{outcome.via}: {kind_of(tool, outcome)}")
    if outcome.is_error:
        assert changes(before, after) == {}, "a refused call wrote something"
        return
    payload = json.loads(outcome.text)
    assert changes(before, after) == await expected_rows(stack.dsn, tool, payload)
