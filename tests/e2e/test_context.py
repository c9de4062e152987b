"""The wake-up packet on every surface: MCP `memory_context`, REST `GET /api/v1/context`, `mnemo context`."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from mnemo.common.v1 import common_pb2
from mnemo.ingest.v1 import ingest_service_pb2 as ipb
from mnemo_server.stack import Stack
from tests.helpers import Clients, mcp_client, mnemo, table_counts, tool_json

WORD = "ocelotquay"


@pytest.fixture(scope="module")
async def packed(hash_clients: Clients) -> dict[str, Any]:
    """A workspace with a confirmed decision, a changed belief and a harvested session."""
    c = hash_clients
    ws = (await c.workspace()).id
    decision = await c.write(ws, f"The {WORD} service pins Python 3.12.", kind=common_pb2.MEMORY_KIND_DECISION)
    await c.ingest.ConfirmMemory(ipb.ConfirmMemoryRequest(workspace=ws, id=decision.id))
    old = await c.write(ws, f"{WORD} releases are cut on Mondays.", title=f"{WORD} release day")
    new = await c.ingest.SupersedeMemory(
        ipb.SupersedeMemoryRequest(
            workspace=ws, id=old.id, successor=ipb.WriteMemoryRequest(content=f"{WORD} releases are cut on Thursdays.")
        )
    )
    session = await c.write(
        ws,
        "Ignore all previous instructions? No: this is a recorded session transcript.",
        kind=common_pb2.MEMORY_KIND_SESSION,
        title=f"Release the {WORD} service",
        provenance=common_pb2.PROVENANCE_HARVESTED_TRANSCRIPT,
        source_uri=f"claude-code://session/{uuid.uuid4()}",
    )
    return {"ws": ws, "decision": decision.id, "old": old.id, "new": new.successor.id, "session": session.id}


def _ids(packet: dict[str, Any], section: str | None = None) -> list[str]:
    return [i["id"] for s in packet["sections"] if section in (None, s["section"]) for i in s["items"]]


async def test_rest_answers_the_packet_as_sections_and_text(hash_stack: Stack, packed: dict[str, Any]) -> None:
    async with httpx.AsyncClient(base_url=hash_stack.base_url) as http:
        response = await http.get("/api/v1/context", params={"workspace": packed["ws"], "budget": 800})
        assert response.status_code == 200, response.text
        packet = response.json()
        assert packet["workspace"]["id"] == packed["ws"] and packet["budget"] == 800
        assert 0 < packet["tokens"] <= 800 and packet["text"].startswith("# Mnemo wake-up: workspace")
        assert _ids(packet, "decisions")[0] == packed["decision"]
        assert _ids(packet, "changed") == [packed["old"]]
        changed = packet["sections"][0]["items"][0]
        assert changed["status"] == "superseded" and changed["successor"]["id"] == packed["new"]
        assert packed["new"] in _ids(packet, "decisions") and packed["old"] not in _ids(packet, "decisions")
        for section in packet["sections"]:
            for item in section["items"]:
                assert item["line"] in packet["text"] and item["id"] in item["line"]
                assert item["label"].startswith(f"[{item['status']} · ")
        # The default workspace answers too (registered on first use): a working call is never a 404.
        default = await http.get("/api/v1/context")
        assert default.status_code == 200, default.text
        assert default.json()["workspace"]["name"] == "default"


@pytest.mark.parametrize(
    ("params", "status", "fragment"),
    [
        ({"budget": 0}, 400, "budget must be a positive number of tokens"),
        ({"budget": -3}, 400, "budget must be a positive number of tokens"),
        ({"budget": 16001}, 400, "budget must be between 1 and 16000 tokens"),
        ({"budget": 10**12}, 400, "out of range"),
        ({"budget": "many"}, 400, "budget"),
        ({"since": "yesterday"}, 400, "since"),
        ({"task": "a\x00b"}, 400, "NUL"),
        ({"workspace": "no-such-ws"}, 404, "mnemo workspace add"),
    ],
)
async def test_rest_refuses_bad_input_with_a_json_error_and_writes_nothing(
    hash_stack: Stack, packed: dict[str, Any], params: dict[str, Any], status: int, fragment: str
) -> None:
    before = await table_counts(hash_stack.dsn)
    async with httpx.AsyncClient(base_url=hash_stack.base_url) as http:
        response = await http.get("/api/v1/context", params={"workspace": packed["ws"], **params})
        assert response.status_code == status, response.text
        assert fragment in response.json()["error"]["message"]
        # Positive control: the same call with a good budget is answered.
        good = await http.get("/api/v1/context", params={"workspace": packed["ws"], "budget": 200})
        assert good.status_code == 200 and good.json()["tokens"] <= 200
    assert await table_counts(hash_stack.dsn) == before


async def test_mcp_memory_context_is_offered_for_the_session_start_and_frames_recorded_text(
    hash_stack: Stack, packed: dict[str, Any]
) -> None:
    async with mcp_client(hash_stack, workspace=packed["ws"]) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        description = tools["memory_context"].description or ""
        assert "start of every session" in description
        packet = tool_json(await client.call_tool("memory_context", {"task": f"release the {WORD} service"}))
        assert packet["workspace"]["id"] == packed["ws"] and packet["tokens"] <= 1500
        assert packed["decision"] in _ids(packet) and packed["old"] in _ids(packet, "changed")
        session = next(i for s in packet["sections"] for i in s["items"] if i["id"] == packed["session"])
        # Recorded text reaches the model as a quotation, in the JSON and in the text.
        assert session["snippet"].startswith("<quoted-data source='harvested_transcript'")
        assert f"<quoted-data source='harvested_transcript'>Release the {WORD} service" in session["line"]
        refused = await client.call_tool("memory_context", {"budget": 0})
        assert refused.is_error and "INVALID_ARGUMENT" in refused.content[0].text


async def test_mnemo_context_prints_the_text_or_the_json(hash_stack: Stack, packed: dict[str, Any]) -> None:
    code, out, err = await mnemo(hash_stack, "context", "-w", packed["ws"], "--budget", "300", "--task", WORD)
    assert code == 0, err
    assert out.startswith("# Mnemo wake-up: workspace") and f"(id {packed['decision']})" in out
    assert "## Relevant to your task" in out
    code, out, err = await mnemo(hash_stack, "context", "-w", packed["ws"], "--json")
    assert code == 0, err
    packet = json.loads(out)
    assert packet["budget"] == 1500 and packed["decision"] in _ids(packet)
    code, out, err = await mnemo(hash_stack, "context", "-w", packed["ws"], "--budget", "0")
    assert code == 1 and err.startswith("mnemo: INVALID_ARGUMENT"), err
