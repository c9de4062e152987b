"""The BM25 statistics (migration 0008) equal a recount from the indexed chunks once the lexical
poster has caught up: writes, batches, new versions, corrections, deletion, restore and purge
keep them, per workspace."""

from __future__ import annotations

import uuid

import asyncpg

from mnemo.common.v1 import common_pb2
from mnemo.ingest.v1 import ingest_service_pb2 as ipb
from tests.helpers import Clients, lexical_statistics, long_note, wait_posted


async def statistics(dsn: str) -> tuple[dict, dict]:
    """The recount and the maintained figures, once the stack's poster has emptied the queue."""
    await wait_posted(dsn)
    conn = await asyncpg.connect(dsn)
    try:
        return await lexical_statistics(conn)
    finally:
        await conn.close()


async def df(dsn: str, workspace: str, word: str, kind: str | None = None, memories: bool = False) -> int:
    """The word's document frequency in the workspace: of one kind's notes, or of all (its terms
    summed); in chunks (its postings), or with `memories` in memories (what the idf counts)."""
    column = "mdf" if memories else "df"
    conn = await asyncpg.connect(dsn)
    try:
        found = await conn.fetchval(
            f"SELECT sum({column}) FROM lexical_terms "
            "WHERE workspace_id = $1 AND lexeme = $2 AND kind = coalesce($3, kind)",
            workspace,
            word,
            kind,
        )
    finally:
        await conn.close()
    return found or 0


async def sizes(dsn: str, workspace: str) -> tuple[int, int]:
    """The workspace's chunks and memories in the statistics."""
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow("SELECT chunks, memories FROM lexical_sizes WHERE workspace_id = $1", workspace)
    finally:
        await conn.close()
    return (row["chunks"], row["memories"]) if row else (0, 0)


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


async def test_a_long_note_is_one_document_of_its_words(hash_clients: Clients) -> None:
    """The idf counts memories (sql/0023_memory_df.sql): a long note's chunks, each carrying its
    title, are one document of the title's words, while the postings stay per chunk."""
    dsn = hash_clients.stack.dsn
    workspace = (await hash_clients.workspace()).id
    word = f"wombat{uuid.uuid4().hex[:6]}"
    long = await hash_clients.write(workspace, long_note(word, 3), title=f"The {word} journal")
    await hash_clients.write(workspace, f"One {word} sighting.", title="short")
    recount, maintained = await statistics(dsn)
    assert maintained == recount
    conn = await asyncpg.connect(dsn)
    try:
        chunks = await conn.fetchval("SELECT count(*) FROM chunks WHERE memory_id = $1 AND indexed", uuid.UUID(long.id))
    finally:
        await conn.close()
    assert chunks == 3
    # Positive control: the postings count the long note's three chunks; the idf counts it once.
    assert await df(dsn, workspace, word) == 4
    assert await df(dsn, workspace, word, memories=True) == 2
    assert await sizes(dsn, workspace) == (4, 2)

    # A new version, longer: one memory still, in the word's count and the workspace's.
    await hash_clients.ingest.UpdateMemory(
        ipb.UpdateMemoryRequest(workspace=workspace, id=long.id, content=long_note(word, 4))
    )
    recount, maintained = await statistics(dsn)
    assert maintained == recount
    assert await df(dsn, workspace, word) == 5 and await df(dsn, workspace, word, memories=True) == 2
    assert await sizes(dsn, workspace) == (5, 2)

    # A version without the word, title included: the note leaves the word's count, not the workspace's.
    await hash_clients.ingest.UpdateMemory(
        ipb.UpdateMemoryRequest(workspace=workspace, id=long.id, title="Plain", content=long_note("koala", 2))
    )
    recount, maintained = await statistics(dsn)
    assert maintained == recount
    assert await df(dsn, workspace, word) == 1 and await df(dsn, workspace, word, memories=True) == 1
    assert await sizes(dsn, workspace) == (3, 2)

    # Retracted, the long note leaves the workspace's count too.
    await hash_clients.ingest.RetractMemory(ipb.RetractMemoryRequest(workspace=workspace, id=long.id, reason="x"))
    recount, maintained = await statistics(dsn)
    assert maintained == recount
    assert await sizes(dsn, workspace) == (1, 1)
    assert await df(dsn, workspace, word, memories=True) == 1
