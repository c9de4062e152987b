"""A tag's chunks as rows of their own (migration 0022): `chunk_tags` holds exactly each indexed
chunk's tags, through writes, batches, new versions, tags replaced, corrections, deletion, restore
and purge; and a lexical search filtered on one tag, which reads them, finds what it should."""

from __future__ import annotations

import uuid

import asyncpg

from mnemo.common.v1 import common_pb2
from mnemo.ingest.v1 import ingest_service_pb2 as ipb
from tests.helpers import Clients, ids

# The rows as they must be, from the chunks themselves, and as they are; in one snapshot.
_BOTH = """
SELECT
    (SELECT coalesce(array_agg(DISTINCT (t || ' ' || c.workspace_id || ' ' || c.id)), '{}')
     FROM chunks c, unnest(c.tags) t WHERE c.indexed AND c.workspace_id = ANY($1::text[])) AS recount,
    (SELECT coalesce(array_agg(k.tag || ' ' || k.workspace_id || ' ' || k.chunk_id), '{}')
     FROM chunk_tags k WHERE k.workspace_id = ANY($1::text[])) AS maintained
"""


async def tag_rows(dsn: str, workspaces: list[str]) -> tuple[set[str], list[str]]:
    """The recount (a set) and the maintained rows (a list: a row twice would show)."""
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(_BOTH, workspaces)
    finally:
        await conn.close()
    return set(row["recount"]), list(row["maintained"])


async def memory_tags(dsn: str, memory_id: str) -> set[tuple[int, str]]:
    """The memory's rows in chunk_tags: (version of the chunk, tag)."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT c.version, k.tag FROM chunk_tags k JOIN chunks c ON c.id = k.chunk_id WHERE c.memory_id = $1",
            uuid.UUID(memory_id),
        )
    finally:
        await conn.close()
    return {(r["version"], r["tag"]) for r in rows}


async def test_the_tag_rows_follow_every_change_of_what_is_indexed(hash_clients: Clients) -> None:
    dsn = hash_clients.stack.dsn
    one, two = (await hash_clients.workspace()).id, (await hash_clients.workspace()).id
    word = f"wallaby{uuid.uuid4().hex[:6]}"

    async def check() -> list[str]:
        recount, maintained = await tag_rows(dsn, [one, two])
        assert sorted(maintained) == sorted(recount)  # no row missing, none extra, none twice
        return maintained

    notes = {
        name: await hash_clients.write(one, f"The {word} {name} note.", title=name, tags=["ferry", name, "ferry"])
        for name in ("updated", "retagged", "retracted", "superseded", "deleted", "purged", "kept")
    }
    untagged = await hash_clients.write(one, f"The {word} note without tags.")
    batch = await hash_clients.ingest.WriteMemories(
        ipb.WriteMemoriesRequest(
            items=[
                ipb.WriteMemoryRequest(workspace=ws, content=f"Batch note {i}: the {word} ferry.", tags=tags)
                for i, (ws, tags) in enumerate([(one, ["ferry", "batch"]), (two, ["ferry"]), (two, [])])
            ]
        )
    )
    assert all(r.HasField("memory") for r in batch.results), batch
    rows = await check()
    # Positive control: the rows are there, one a tag (the repeated tag once), in their workspace.
    assert len(rows) == 7 * 2 + 2 + 1
    assert await memory_tags(dsn, notes["kept"].id) == {(1, "ferry"), (1, "kept")}
    assert await memory_tags(dsn, untagged.id) == set()

    async def lexical(workspace: str, *tags: str) -> set[str]:
        found = await hash_clients.find(workspace, word, mode="lexical", filter=common_pb2.MemoryFilter(tags=tags))
        return set(ids(found))

    assert await lexical(one, "kept") == {notes["kept"].id}
    assert len(await lexical(one, "ferry")) == 8 and await lexical(two, "ferry") == {batch.results[1].memory.id}
    # Several tags: the GIN index's way, the same answer.
    assert await lexical(one, "ferry", "batch") == {batch.results[0].memory.id}
    assert await lexical(one, "kept", "batch") == set()

    await hash_clients.ingest.UpdateMemory(
        ipb.UpdateMemoryRequest(workspace=one, id=notes["updated"].id, content=f"The {word} updated note, again.")
    )
    await hash_clients.ingest.UpdateMemory(
        ipb.UpdateMemoryRequest(
            workspace=one,
            id=notes["retagged"].id,
            content=f"The {word} retagged note.",
            tags=["pier"],
            replace_tags=True,
        )
    )
    await hash_clients.ingest.RetractMemory(
        ipb.RetractMemoryRequest(workspace=one, id=notes["retracted"].id, reason="x")
    )
    await hash_clients.ingest.SupersedeMemory(
        ipb.SupersedeMemoryRequest(
            workspace=one,
            id=notes["superseded"].id,
            reason="newer",
            successor=ipb.WriteMemoryRequest(content=f"The {word} successor.", tags=["ferry", "successor"]),
        )
    )
    for name in ("deleted", "purged"):
        await hash_clients.ingest.DeleteMemory(ipb.DeleteMemoryRequest(workspace=one, id=notes[name].id, reason="x"))
    await hash_clients.ingest.PurgeMemory(ipb.PurgeMemoryRequest(workspace=one, id=notes["purged"].id, force=True))
    await check()
    # A new version's chunks carry the tags, the old version's none; the rest left.
    assert await memory_tags(dsn, notes["updated"].id) == {(2, "ferry"), (2, "updated")}
    assert await memory_tags(dsn, notes["retagged"].id) == {(2, "pier")}
    for name in ("retracted", "superseded", "deleted", "purged"):
        assert await memory_tags(dsn, notes[name].id) == set(), name
    assert await lexical(one, "retagged") == set() and await lexical(one, "pier") == {notes["retagged"].id}
    assert await lexical(one, "deleted") == set() and await lexical(one, "kept") == {notes["kept"].id}

    await hash_clients.ingest.RestoreMemory(ipb.RestoreMemoryRequest(workspace=one, id=notes["deleted"].id))
    await check()
    assert await memory_tags(dsn, notes["deleted"].id) == {(1, "ferry"), (1, "deleted")}
    assert await lexical(one, "deleted") == {notes["deleted"].id}
