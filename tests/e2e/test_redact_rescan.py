"""`mnemo redact --rescan`: memories stored before a rule existed are redacted, history included.

The secrets are planted with SQL, standing in for text stored under older rules (today's write
path would redact them on the way in, which is what the rescan exists to catch up with).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from mnemo.ingest.v1 import ingest_service_pb2 as ipb
from mnemo.search.v1 import search_service_pb2 as spb
from mnemo_embed import HashEmbedder
from mnemo_server.stack import Stack
from tests.corpora.redact import planted_secrets
from tests.helpers import Clients, Postgres, ids, mnemo, start_stack

SECRETS = {p.kind: p.secret for p in planted_secrets()}
PLANTED = {
    "GITHUB_PLACEHOLDER": SECRETS["github-token"],
    "OPENAI_PLACEHOLDER": SECRETS["openai-key"],
    "AWS_PLACEHOLDER": SECRETS["aws-access-key"],
    "SLACK_PLACEHOLDER": SECRETS["slack-token"],
    "STRIPE_PLACEHOLDER": SECRETS["stripe-key"],
}
TABLES = ("memories", "memory_versions", "chunks", "tombstones", "derivations", "audit_events", "memory_states")


async def dump(conn: asyncpg.Connection) -> str:
    rows = []
    for table in TABLES:
        rows += [str(tuple(r)) for r in await conn.fetch(f"SELECT * FROM {table}")]
    return "\n".join(rows)


async def plant(conn: asyncpg.Connection) -> None:
    """Puts the secrets where the placeholders are, in every table that holds memory text."""
    for placeholder, secret in PLANTED.items():
        for table, column in (
            ("memory_versions", "content"),
            ("memory_versions", "title"),
            ("memories", "title"),
            ("chunks", "text"),
            ("chunks", "context"),
        ):
            await conn.execute(f"UPDATE {table} SET {column} = replace({column}, $1, $2)", placeholder, secret)
        await conn.execute("UPDATE memories SET metadata = replace(metadata::text, $1, $2)::jsonb", placeholder, secret)
        await conn.execute("UPDATE memories SET tags = array_replace(tags, $1, $2)", placeholder, secret)
        await conn.execute(
            "UPDATE tombstones SET snapshot = replace(snapshot::text, $1, $2)::jsonb", placeholder, secret
        )


class Planted:
    def __init__(self, stack: Stack, clients: Clients, ws: str, notes: str, deleted: str, clean: str) -> None:
        self.stack, self.clients, self.ws = stack, clients, ws
        self.notes, self.deleted, self.clean = notes, deleted, clean


@pytest.fixture
async def planted(postgres: Postgres) -> AsyncIterator[Planted]:
    stack = await start_stack(await postgres.create_database("rescan"), HashEmbedder(64))
    clients = Clients(stack)
    ws = (await clients.workspace("rescan")).id
    notes = await clients.write(
        ws,
        "Deploy notes: the CI token is GITHUB_PLACEHOLDER for the release job.",
        title="Deploy notes OPENAI_PLACEHOLDER",
        tags=["deploy", "SLACK_PLACEHOLDER"],
    )
    await clients.ingest.UpdateMemory(
        ipb.UpdateMemoryRequest(
            workspace=ws,
            id=notes.id,
            content="Deploy notes v2: GITHUB_PLACEHOLDER is still valid; rotate it monthly. AWS AWS_PLACEHOLDER.",
        )
    )
    deleted = await clients.write(ws, "Billing used STRIPE_PLACEHOLDER in the sandbox.", source_uri="note://billing")
    await clients.ingest.DeleteMemory(ipb.DeleteMemoryRequest(workspace=ws, id=deleted.id, reason="stale"))
    clean = await clients.write(ws, "The walrus cron job runs at 02:00 after the backup.")
    conn = await asyncpg.connect(stack.dsn)
    try:
        await plant(conn)
        # Positive control: the secrets really are stored before the rescan.
        stored = await dump(conn)
        assert all(secret in stored for secret in PLANTED.values())
    finally:
        await conn.close()
    yield Planted(stack, clients, ws, notes.id, deleted.id, clean.id)
    await clients.close()
    await stack.stop()


async def rescan(p: Planted, **request: object) -> list[ipb.RescanProgress]:
    return [m async for m in p.clients.ingest.RescanRedactions(ipb.RescanRedactionsRequest(**request))]


async def test_rescan_redacts_every_version_chunk_and_snapshot(planted: Planted) -> None:
    p = planted
    dry = await rescan(p, dry_run=True)
    by_id = {m.memory_id: m for m in dry if not m.done}
    assert set(by_id[p.notes].kinds) >= {"github-token", "openai-key", "aws-access-key", "slack-token"}
    assert set(by_id[p.deleted].kinds) == {"stripe-key"} and list(by_id[p.clean].kinds) == []
    assert dry[-1].done and dry[-1].total == 3 and dry[-1].changed == 2
    conn = await asyncpg.connect(p.stack.dsn)
    try:
        # A dry run changes nothing.
        stored = await dump(conn)
        assert all(secret in stored for secret in PLANTED.values())

        done = await rescan(p)
        by_id = {m.memory_id: m for m in done if not m.done}
        assert (by_id[p.notes].new_version, by_id[p.notes].versions_scrubbed) == (3, 2)
        assert (by_id[p.deleted].new_version, by_id[p.deleted].versions_scrubbed) == (0, 1)
        assert done[-1].findings["github-token"] == 2 and done[-1].findings["stripe-key"] >= 1

        stored = await dump(conn)
        for kind, secret in PLANTED.items():
            assert secret not in stored, kind
        # Positive controls: the text around the secrets survived, with markers in their place.
        got = (await p.clients.search.GetMemory(spb.GetMemoryRequest(workspace=p.ws, id=p.notes))).memory
        assert got.version == 3 and "rotate it monthly" in got.content
        assert "[REDACTED:github-token]" in got.content and got.title == "Deploy notes [REDACTED:openai-key]"
        assert list(got.tags) == ["deploy", "[REDACTED:slack-token]"]
        versions = await conn.fetch(
            "SELECT version, content FROM memory_versions WHERE memory_id = $1 ORDER BY version", uuid.UUID(p.notes)
        )
        assert [v["version"] for v in versions] == [1, 2, 3]
        assert "for the release job" in versions[0]["content"] and "[REDACTED:github-token]" in versions[0]["content"]
        # Every version is searchable again from its redacted chunks (once embedded, for hybrid).
        chunk_versions = await conn.fetch(
            "SELECT DISTINCT version FROM chunks WHERE memory_id = $1 ORDER BY version", uuid.UUID(p.notes)
        )
        assert [c["version"] for c in chunk_versions] == [1, 2, 3]
        assert ids(await p.clients.find(p.ws, "rotate monthly", mode="lexical")) == [p.notes]
        # The change is audited, and the chains still verify.
        events = await conn.fetch(
            "SELECT action, details FROM audit_events WHERE memory_id = $1 ORDER BY id", uuid.UUID(p.notes)
        )
        redact_event = json.loads(next(e["details"] for e in events if e["action"] == "redact"))
        assert redact_event["versions"] == [1, 2] and {r["kind"] for r in redact_event["redactions"]} >= {
            "github-token"
        }
        assert [e["action"] for e in events][-2:] == ["redact", "update"]
        assert (await p.clients.search.VerifyAudit(spb.VerifyAuditRequest())).ok
    finally:
        await conn.close()
    # The deleted memory stayed deleted, and restoring it brings back the redacted text.
    restored = await p.clients.ingest.RestoreMemory(ipb.RestoreMemoryRequest(workspace=p.ws, id=p.deleted))
    assert "Billing used [REDACTED:stripe-key] in the sandbox." in restored.memory.content
    # A second rescan finds nothing left.
    again = await rescan(p)
    assert again[-1].done and again[-1].changed == 0 and again[-1].total == 3


async def test_rescan_of_one_workspace_leaves_the_others(planted: Planted) -> None:
    p = planted
    other = (await p.clients.workspace("other")).id
    await p.clients.write(other, "A note of another workspace with OTHER_PLACEHOLDER.")
    conn = await asyncpg.connect(p.stack.dsn)
    try:
        await conn.execute(
            "UPDATE memory_versions SET content = replace(content, 'OTHER_PLACEHOLDER', $1)", SECRETS["npm-token"]
        )
        done = await rescan(p, workspace="rescan")
        assert done[-1].total == 3 and done[-1].changed == 2
        stored = await dump(conn)
        assert SECRETS["npm-token"] in stored and PLANTED["GITHUB_PLACEHOLDER"] not in stored
    finally:
        await conn.close()
    unknown = p.clients.ingest.RescanRedactions(ipb.RescanRedactionsRequest(workspace="no-such-workspace"))
    with pytest.raises(Exception, match="no-such-workspace"):
        [m async for m in unknown]


async def test_cli_and_rest_rescan(planted: Planted, tmp_path: Path) -> None:
    p = planted
    url = p.stack.base_url
    async with httpx.AsyncClient(base_url=url) as http:
        bad = await http.post("/api/v1/redact/rescan", json={"dry_run": "maybe"})
        assert bad.status_code == 400 and "dry_run" in bad.text
        missing = await http.post("/api/v1/redact/rescan", json={"workspace": "nowhere"})
        assert missing.status_code == 404 and "nowhere" in missing.json()["error"]["message"]
        response = await http.post("/api/v1/redact/rescan", json={"dry_run": True})
        lines = [json.loads(line) for line in response.text.splitlines()]
        assert response.status_code == 200 and lines[-1]["done"] and lines[-1]["changed"] == 2
    code, out, err = await mnemo(p.stack, "redact", "--rescan", "--dry-run")
    assert code == 0, err
    assert f"would redact {p.notes}" in out and "dry run: nothing was changed" in out
    code, out, err = await mnemo(p.stack, "redact", "--rescan")
    assert code == 0, err
    assert f"redacted {p.deleted}" in out and "3 memories scanned, 2 with secrets" in out and "stripe-key" in out
    code, out, err = await mnemo(p.stack, "redact")
    assert code == 2 and "--rescan" in err
