"""`mnemo import --from TOOL PATH` against a running gateway: each peer tool's store imports as an
import batch (redacted, screened, labelled imported, quoted to agents), reruns write nothing twice,
a staged batch is accepted or rolled back as a whole, audited, and bad input leaves nothing behind."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from mnemo_embed import HashEmbedder
from mnemo_server.stack import Stack
from tests.fixtures.peers.build import FAKE_TOKEN
from tests.helpers import Clients, Postgres, mcp_client, mnemo, start_stack, table_counts, tool_json

PEERS = Path(__file__).parent.parent / "fixtures" / "peers"
MCP_DB = PEERS / "mcp-memory-service" / "sqlite_vec.db"
MCP_EXPORT = PEERS / "mcp-memory-service" / "export.json"
BASIC = PEERS / "basic-memory"
CLAUDE_DB = PEERS / "claude-mem" / "claude-mem.db"

# Per tool: its store, how many records it holds, a query and the title words of a note it finds,
# and the words of its poisoning attempt.
CASES = {
    "mcp-memory-service": (MCP_DB, 4, "ZooKeeper advisory locks migration runner", "We chose PostgreSQL", "wombat"),
    "basic-memory": (BASIC, 4, "pelican key service JWTs", "Authentication Design", "osprey"),
    "claude-mem": (CLAUDE_DB, 3, "kingfisher polling loop Redis streams", "Cache moved to Redis streams", "vendored"),
}


async def _import(stack: Stack, tool: str, path: Path, ws: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = await mnemo(stack, "import", "--from", tool, str(path), "-w", ws, "--json", *extra)
    assert "Traceback" not in err, err
    return code, json.loads(out) if out.strip() else {}, err


async def _search(stack: Stack, ws: str, query: str, **options: Any) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=stack.base_url + "/api/v1") as http:
        got = await http.post("/search", json={"workspace": ws, "query": query, **options})
        assert got.status_code == 200, got.text
        return got.json()["results"]


async def _get(stack: Stack, ws: str, memory_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=stack.base_url + "/api/v1") as http:
        got = await http.get(f"/memories/{memory_id}", params={"workspace": ws})
        assert got.status_code == 200, got.text
        return got.json()


def _memories(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [r["memory"] for r in summary["results"] if "memory" in r]


@pytest.mark.parametrize("tool", sorted(CASES))
async def test_each_peer_store_imports_redacted_screened_labelled_and_reruns_write_nothing(
    hash_stack: Stack, hash_clients: Clients, tool: str
) -> None:
    path, records, query, title, poison_word = CASES[tool]
    ws = (await hash_clients.workspace()).id
    code, summary, err = await _import(hash_stack, tool, path, ws)
    assert code == 0, err
    assert (summary["written"], summary["already_in"], summary["refused"]) == (records, 0, 0)
    memories = _memories(summary)
    assert {m["provenance"] for m in memories} == {"imported"}
    assert all(m["source_uri"] for m in memories)

    # A search finds the known note, labelled imported.
    hits = await _search(hash_stack, ws, query, mode="lexical")
    assert hits and hits[0]["title"].startswith(title), hits
    assert hits[0]["provenance"] == "imported" and " imported " in hits[0]["label"]
    full = await _get(hash_stack, ws, hits[0]["id"])
    assert full["metadata"]["imported_from"] == tool and full["metadata"]["source_id"]

    # The secret is redacted before it is stored; the rest of its note is kept (positive control).
    stored = [(await _get(hash_stack, ws, m["id"]))["content"] for m in memories]
    assert not any(FAKE_TOKEN in text for text in stored)
    assert any("[REDACTED:github-token]" in text for text in stored), stored

    # The poisoning attempt is screened as any write is: flagged, held as a candidate.
    flagged = [m for m in memories if m["suspicious"]]
    assert len(flagged) == 1 and flagged[0]["status"] == "candidate"
    assert poison_word in (await _get(hash_stack, ws, flagged[0]["id"]))["content"]
    assert all(m["status"] == "active" for m in memories if not m["suspicious"])  # positive control

    # A rerun (an interrupted import resumed, or the same store again) writes nothing twice.
    code, again, err = await _import(hash_stack, tool, path, ws)
    assert code == 0, err
    assert (again["written"], again["already_in"], again["refused"]) == (0, records, 0)
    assert {m["id"] for m in _memories(again)} == {m["id"] for m in memories}


async def test_skipped_and_refused_records_are_reported_by_name(hash_stack: Stack, hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    # The soft-deleted row of the database is not imported; the live ones are (positive control).
    await _import(hash_stack, "mcp-memory-service", MCP_DB, ws)
    assert await _search(hash_stack, ws, "quokka soft-deleted", mode="lexical") == []
    assert await _search(hash_stack, ws, "flaky upload test tmpfs", mode="lexical")

    # The JSON export: the item without content is refused alone, by its place in the file.
    code, out, err = await mnemo(hash_stack, "import", "--from", "mcp-memory-service", str(MCP_EXPORT), "-w", ws)
    assert code == 1, err
    assert "memories[1]: INVALID_ARGUMENT: no content" in out
    assert "3 records from mcp-memory-service: 2 written, 0 already in, 1 refused" in out
    hits = await _search(hash_stack, ws, "heron billing schema", mode="lexical")
    assert hits and hits[0]["kind"] == "decision" and hits[0]["tags"] == ["billing", "ownership"]


async def test_imported_text_reaches_an_agent_quoted(hash_stack: Stack, hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    await _import(hash_stack, "claude-mem", CLAUDE_DB, ws)
    await hash_clients.write(ws, "Our own note: the kingfisher worker has an owner, the platform team.")
    async with mcp_client(hash_stack, ws) as client:
        found = tool_json(await client.call_tool("memory_search", {"query": "kingfisher worker", "mode": "lexical"}))
    by_provenance = {r["provenance"]: r for r in found["results"]}
    assert by_provenance["imported"]["snippet"].startswith("<quoted-data source='imported'")
    # Positive control: the agent's own note is not framed.
    assert not by_provenance["agent"]["snippet"].startswith("<quoted-data")


async def _audit(stack: Stack, ws: str, action: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(stack.dsn)
    try:
        return await conn.fetch(
            "SELECT memory_id, details FROM audit_events WHERE workspace_id = $1 AND action = $2", ws, action
        )
    finally:
        await conn.close()


async def test_a_staged_batch_waits_for_review_and_accept_makes_it_active(
    hash_stack: Stack, hash_clients: Clients
) -> None:
    ws = (await hash_clients.workspace()).id
    code, out, err = await mnemo(hash_stack, "import", "--from", "basic-memory", str(BASIC), "-w", ws, "--stage")
    assert code == 0, err
    assert "4 records from basic-memory: 4 written" in out and "staged for review" in out
    batch = out.split("batch ", 1)[1].split()[0]
    uuid.UUID(batch)

    # In review: candidates, found by search with their status shown (the design's visibility of a
    # candidate: searchable, trusted less than an active memory).
    hits = await _search(hash_stack, ws, "pelican key service JWTs", mode="lexical")
    assert hits[0]["status"] == "candidate" and hits[0]["label"].startswith("[candidate · imported decision")

    code, out, err = await mnemo(hash_stack, "import", "accept", batch, "-w", ws, "--json")
    assert code == 0, err
    accepted = json.loads(out)
    # Accepting vouches for the source, not for text that tries to instruct the model: it stays held.
    assert (accepted["accepted"], accepted["held"]) == (3, 1)
    assert accepted["batch"]["state"] == "accepted" and accepted["batch"]["memories"] == {"active": 3, "candidate": 1}
    hits = await _search(hash_stack, ws, "pelican key service JWTs", mode="lexical")
    assert hits[0]["status"] == "active"
    held = await _search(hash_stack, ws, "osprey forum post", mode="lexical")
    assert held[0]["status"] == "candidate" and held[0]["suspicious"]

    events = await _audit(hash_stack, ws, "import_accept")
    assert len(events) == 3 and all(json.loads(e["details"])["batch"] == batch for e in events)
    writes = await _audit(hash_stack, ws, "write")
    assert sum(json.loads(e["details"]).get("import_batch") == batch for e in writes) == 4

    # Accepting again changes nothing and says so.
    code, out, err = await mnemo(hash_stack, "import", "accept", batch, "-w", ws)
    assert code == 0, err
    assert f"batch {batch} accepted: 0 memories made active" in out
    assert len(await _audit(hash_stack, ws, "import_accept")) == 3


async def test_rollback_removes_the_whole_batch_and_nothing_else(hash_stack: Stack, hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    own = await hash_clients.write(ws, "Our own decision: the ZooKeeper cluster is retired next quarter.")
    code, summary, err = await _import(hash_stack, "mcp-memory-service", MCP_DB, ws, "--stage")
    assert code == 0, err
    batch = summary["batch"]
    ids = {m["id"] for m in _memories(summary)}
    assert len(ids) == 4
    found = {h["id"] for h in await _search(hash_stack, ws, "ZooKeeper", mode="lexical")}
    assert own.id in found and found & ids  # both found before the rollback

    code, out, err = await mnemo(hash_stack, "import", "rollback", batch, "-w", ws, "--reason", "wrong project")
    assert code == 0, err
    assert f"batch {batch} rolled back: 4 memories erased" in out
    for mode in ("lexical", "semantic", "hybrid"):
        hits = {
            h["id"] for h in await _search(hash_stack, ws, "ZooKeeper advisory locks", mode=mode, include_history=True)
        }
        assert not hits & ids, mode
        assert own.id in hits, mode  # positive control: the note outside the batch is still found
    async with httpx.AsyncClient(base_url=hash_stack.base_url + "/api/v1") as http:
        gone = await http.get(f"/memories/{next(iter(ids))}", params={"workspace": ws})
        assert gone.status_code == 404
    events = await _audit(hash_stack, ws, "import_rollback")
    assert {str(e["memory_id"]) for e in events} == ids
    assert all(json.loads(e["details"]) == {"batch": batch, "reason": "wrong project"} for e in events)

    # Rolling back again is a no-op; accepting a rolled-back batch is refused.
    code, out, err = await mnemo(hash_stack, "import", "rollback", batch, "-w", ws)
    assert code == 0 and f"batch {batch} rolled back: 0 memories erased" in out, err
    code, out, err = await mnemo(hash_stack, "import", "accept", batch, "-w", ws)
    assert code == 1 and "FAILED_PRECONDITION" in err and "rolled back" in err, err

    # No tombstone is left: the same store imports again once fixed (a new batch).
    code, again, err = await _import(hash_stack, "mcp-memory-service", MCP_DB, ws)
    assert code == 0 and again["written"] == 4 and again["batch"] != batch, err


async def test_an_unknown_or_foreign_batch_is_a_clear_error(hash_stack: Stack, hash_clients: Clients) -> None:
    ws, other = (await hash_clients.workspace()).id, (await hash_clients.workspace()).id
    code, summary, err = await _import(hash_stack, "claude-mem", CLAUDE_DB, other, "--stage")
    assert code == 0, err
    foreign = summary["batch"]
    for action in ("accept", "rollback"):
        for batch in (str(uuid.uuid4()), foreign):
            code, out, err = await mnemo(hash_stack, "import", action, batch, "-w", ws)
            assert code == 1, out
            assert f"mnemo: NOT_FOUND (IMPORT_BATCH_NOT_FOUND): no import batch {batch} in workspace" in err
            assert "Traceback" not in err
        code, out, err = await mnemo(hash_stack, "import", action, "not-a-batch", "-w", ws)
        assert code == 1 and "INVALID_ARGUMENT" in err and "not a uuid" in err, err
    # Positive control: in its own workspace the batch is found, untouched by the refusals.
    code, out, err = await mnemo(hash_stack, "import", "accept", foreign, "-w", other)
    assert code == 0 and "2 memories made active" in out, err
    code, out, err = await mnemo(hash_stack, "import", "accept", "-w", other)
    assert code == 2 and "needs the batch id" in err


async def test_bad_peer_input_is_a_clear_error_and_writes_nothing(
    hash_stack: Stack, hash_clients: Clients, tmp_path: Path
) -> None:
    ws = (await hash_clients.workspace()).id
    text = tmp_path / "notes.db"
    text.write_text("not a database at all\n")
    empty = tmp_path / "empty-folder"
    (empty / "sub").mkdir(parents=True)
    (empty / "sub" / "readme.txt").write_text("no markdown here")
    broken = tmp_path / "export.json"
    broken.write_text('{"memories": [{"content": "unterminated"')
    cases = [
        ("mcp-memory-service", text, "is not an SQLite database"),
        ("claude-mem", MCP_DB, "has no `observations` table: it is not a claude-mem database"),
        ("mcp-memory-service", CLAUDE_DB, "has no `memories` table: it is not a mcp-memory-service database"),
        ("basic-memory", empty, "holds no Markdown notes"),
        ("basic-memory", MCP_DB, "is not a folder"),
        ("mcp-memory-service", broken, "is not valid JSON"),
        ("claude-mem", tmp_path / "missing.db", "is not a file"),
    ]
    before = await table_counts(hash_stack.dsn)
    batches = await _batches(hash_stack)
    for tool, path, message in cases:
        code, out, err = await mnemo(hash_stack, "import", "--from", tool, str(path), "-w", ws)
        assert code == 2, (tool, path, out, err)
        assert message in err and "Traceback" not in err, err
    assert await table_counts(hash_stack.dsn) == before
    assert await _batches(hash_stack) == batches  # not even an empty batch was started
    # Positive control: a good store changes the counts.
    code, _, err = await _import(hash_stack, "claude-mem", CLAUDE_DB, ws)
    assert code == 0, err
    assert (await table_counts(hash_stack.dsn))["memories"] == before["memories"] + 3
    assert await _batches(hash_stack) == batches + 1


async def _batches(stack: Stack) -> int:
    conn = await asyncpg.connect(stack.dsn)
    try:
        return await conn.fetchval("SELECT count(*) FROM import_batches")
    finally:
        await conn.close()


async def test_only_a_reviewer_of_the_workspace_decides_a_batch(postgres: Postgres) -> None:
    # Its own stack: tokens are on here.
    stack = await start_stack(await postgres.create_database("peer_auth"), HashEmbedder(64), MNEMO_AUTH="on")
    try:
        admin = {"Authorization": f"Bearer {stack.bootstrap_token}"}
        async with httpx.AsyncClient(base_url=stack.base_url + "/api/v1", headers=admin) as http:
            for name in ("alpha", "beta"):
                assert (await http.post("/workspaces", json={"name": name})).status_code == 201

            async def token(role: str, workspace: str) -> str:
                body = {"principal": f"{role}-{workspace}", "role": role, "workspaces": [workspace]}
                made = await http.post("/tokens", json=body)
                assert made.status_code == 201, made.text
                return made.json()["secret"]

            agent, reviewer, other = (
                await token("agent", "alpha"),
                await token("reviewer", "alpha"),
                await token("reviewer", "beta"),
            )
        # An agent may import (a write like any other) but not decide the batch.
        code, out, err = await mnemo(
            stack, "import", "--from", "claude-mem", str(CLAUDE_DB), "-w", "alpha", "--stage", "--json", token=agent
        )
        assert code == 0, err
        batch = json.loads(out)["batch"]
        for action in ("accept", "rollback"):
            code, out, err = await mnemo(stack, "import", action, batch, "-w", "alpha", token=agent)
            assert code == 1 and "PERMISSION_DENIED" in err and "reviewer" in err, err
            # A reviewer of another workspace does not reach this one.
            code, out, err = await mnemo(stack, "import", action, batch, "-w", "alpha", token=other)
            assert code == 1 and "PERMISSION_DENIED" in err, err
        # Positive control: the workspace's reviewer decides it, and is recorded as having done so.
        code, out, err = await mnemo(stack, "import", "accept", batch, "-w", "alpha", "--json", token=reviewer)
        assert code == 0, err
        decided = json.loads(out)["batch"]
        assert decided["state"] == "accepted" and decided["decided_by"] == "reviewer-alpha"
        assert decided["created_by"] == "agent-alpha"
    finally:
        await stack.stop()


async def test_an_interrupted_import_resumes_into_its_own_open_batch(hash_stack: Stack, hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    code, first, err = await _import(hash_stack, "claude-mem", CLAUDE_DB, ws, "--stage")
    assert code == 0, err
    batch = first["batch"]
    # The rest of the run (here, another store) joins the same batch, staged as it is.
    code, rest, err = await _import(hash_stack, "mcp-memory-service", MCP_DB, ws, "--batch", batch)
    assert code == 0 and rest["batch"] == batch and rest["written"] == 4, err
    assert {m["status"] for m in _memories(rest)} == {"candidate"}
    code, out, err = await mnemo(hash_stack, "import", "accept", batch, "-w", ws, "--json")
    assert code == 0, err
    assert json.loads(out)["batch"]["memories"] == {"active": 5, "candidate": 2}
    # A decided batch takes nothing more: each record is refused, and nothing is written.
    before = await table_counts(hash_stack.dsn)
    code, late, err = await _import(hash_stack, "mcp-memory-service", MCP_EXPORT, ws, "--batch", batch)
    assert code == 1 and late["written"] == 0 and late["refused"] == 3, err
    assert all("was accepted; start a new import" in r["error"]["message"] for r in late["results"][::2])
    assert await table_counts(hash_stack.dsn) == before
