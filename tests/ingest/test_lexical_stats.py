"""The BM25 statistics (migration 0008) equal a recount from the indexed chunks once the lexical
poster has caught up: writes, batches, new versions, corrections, deletion, restore and purge
keep them, per workspace."""

from __future__ import annotations

import uuid

import asyncpg

from mnemo.common.v1 import common_pb2
from mnemo.ingest.v1 import ingest_service_pb2 as ipb
from tests.helpers import Clients, wait_posted

# What the statistics must be, recounted from scratch from the chunks in the search indexes.
_RECOUNT = """
WITH counts AS (
    SELECT c.id AS chunk_id, c.workspace_id, m.kind, l.lexeme, l.tf, l.len
    FROM chunks c JOIN memories m ON m.id = c.memory_id, lexical_counts(c.tsv) l WHERE c.indexed
)
SELECT
    (SELECT coalesce(jsonb_object_agg(workspace_id || ' ' || kind || ' ' || lexeme, n), '{}')
     FROM (SELECT workspace_id, kind, lexeme, count(*) AS n FROM counts GROUP BY 1, 2, 3) d) AS terms,
    (SELECT count(*) FROM counts) AS postings,
    (SELECT coalesce(sum(hashtext(chunk_id || ' ' || lexeme || ' ' || tf || ' ' || len)), 0) FROM counts) AS digest,
    (SELECT coalesce(jsonb_object_agg(workspace_id, jsonb_build_array(n, total)), '{}')
     FROM (SELECT workspace_id, count(*) AS n, sum(len) AS total
           FROM (SELECT DISTINCT chunk_id, workspace_id, len FROM counts) x GROUP BY 1) s) AS sizes
"""

# The same figures read from the maintained tables (a term whose df fell to 0 must be gone).
_MAINTAINED = """
SELECT
    (SELECT coalesce(jsonb_object_agg(workspace_id || ' ' || kind || ' ' || lexeme, df), '{}')
     FROM lexical_terms) AS terms,
    (SELECT count(*) FROM lexical_postings) AS postings,
    (SELECT coalesce(sum(hashtext(p.chunk_id || ' ' || t.lexeme || ' ' || p.tf || ' ' || p.len)), 0)
     FROM lexical_postings p JOIN lexical_terms t ON t.id = p.term_id) AS digest,
    (SELECT coalesce(jsonb_object_agg(workspace_id, jsonb_build_array(chunks, length)), '{}')
     FROM lexical_sizes WHERE chunks > 0) AS sizes
"""


async def statistics(dsn: str) -> tuple[dict, dict]:
    """The recount and the maintained figures, once the stack's poster has emptied the queue."""
    await wait_posted(dsn)
    conn = await asyncpg.connect(dsn)
    try:
        recount, maintained = await conn.fetchrow(_RECOUNT), await conn.fetchrow(_MAINTAINED)
    finally:
        await conn.close()
    return dict(recount), dict(maintained)


async def df(dsn: str, workspace: str, word: str, kind: str | None = None) -> int:
    """The word's document frequency in the workspace: of one kind's notes, or of all (its terms summed)."""
    conn = await asyncpg.connect(dsn)
    try:
        found = await conn.fetchval(
            "SELECT sum(df) FROM lexical_terms WHERE workspace_id = $1 AND lexeme = $2 AND kind = coalesce($3, kind)",
            workspace,
            word,
            kind,
        )
    finally:
        await conn.close()
    return found or 0


async def test_the_statistics_follow_every_change_of_what_is_indexed(hash_clients: Clients) -> None:
    dsn = hash_clients.stack.dsn
    one, two = (await hash_clients.workspace()).id, (await hash_clients.workspace()).id
    word = f"quokka{uuid.uuid4().hex[:6]}"
    notes = {
        name: await hash_clients.write(one, f"The {word} {name} note about the harbour ferry.", title=name)
        for name in ("updated", "retracted", "superseded", "deleted", "purged", "kept")
    }
    batch = await hash_clients.ingest.WriteMemories(
        ipb.WriteMemoriesRequest(
            items=[
                # The first a decision: a word is a term per kind (sql/0019_lexical_kinds.sql).
                ipb.WriteMemoryRequest(workspace=ws, content=f"Batch note {i}: the {word} ferry runs late.", kind=kind)
                for i, (ws, kind) in enumerate(
                    [(one, common_pb2.MEMORY_KIND_DECISION), (two, common_pb2.MEMORY_KIND_NOTE), (two, 0)]
                )
            ]
        )
    )
    assert all(r.HasField("memory") for r in batch.results), batch
    recount, maintained = await statistics(dsn)
    assert maintained == recount
    assert await df(dsn, one, word) == 7 and await df(dsn, two, word) == 2
    assert await df(dsn, one, word, "decision") == 1 and await df(dsn, one, word, "note") == 6

    await hash_clients.ingest.UpdateMemory(
        ipb.UpdateMemoryRequest(workspace=one, id=notes["updated"].id, content="Rewritten without the word.")
    )
    await hash_clients.ingest.RetractMemory(
        ipb.RetractMemoryRequest(workspace=one, id=notes["retracted"].id, reason="x")
    )
    await hash_clients.ingest.SupersedeMemory(
        ipb.SupersedeMemoryRequest(
            workspace=one,
            id=notes["superseded"].id,
            reason="newer",
            successor=ipb.WriteMemoryRequest(content=f"The {word} successor, twice: {word}."),
        )
    )
    await hash_clients.ingest.DeleteMemory(ipb.DeleteMemoryRequest(workspace=one, id=notes["deleted"].id, reason="x"))
    await hash_clients.ingest.DeleteMemory(ipb.DeleteMemoryRequest(workspace=one, id=notes["purged"].id, reason="x"))
    await hash_clients.ingest.PurgeMemory(ipb.PurgeMemoryRequest(workspace=one, id=notes["purged"].id, force=True))
    recount, maintained = await statistics(dsn)
    assert maintained == recount
    # updated, retracted, superseded, deleted and purged left; the successor came in; the other
    # workspace is untouched (the control).
    assert await df(dsn, one, word) == 7 - 5 + 1 and await df(dsn, two, word) == 2

    await hash_clients.ingest.RestoreMemory(ipb.RestoreMemoryRequest(workspace=one, id=notes["deleted"].id))
    recount, maintained = await statistics(dsn)
    assert maintained == recount
    assert await df(dsn, one, word) == 4
