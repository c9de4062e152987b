"""Every read's legs use the lexical postings and the partial vector index (their WHERE implies
the index's `indexed`); history and as-of reads, which may also return chunks those leave out,
reach those through the partial indexes on what is not `indexed`, and answer."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg

from mnemo_embed import HashEmbedder
from mnemo_search.engine import lexical_query, semantic_query
from mnemo_store import GLOBAL_WORKSPACE, Reach, Scope, embed_queue
from tests.helpers import Postgres, insert_note, migrated_pool


async def _plan(conn: asyncpg.Connection, sql: str, values: list[object]) -> str:
    rows = await conn.fetch(f"EXPLAIN {sql}", *values)
    return "\n".join(r[0] for r in rows)


async def test_every_read_can_use_the_indexes_and_history_reads_scan_only_what_they_leave_out(
    postgres: Postgres,
) -> None:
    embedder = HashEmbedder(64)
    embedder.start()
    pool = await migrated_pool(postgres, embedder)
    try:
        # The words asked for are in few chunks, so the full-text index is the cheap way to them.
        texts = [f"note {i} on the zebra crossing near the harbour" for i in range(40)]
        texts += [f"filler {i} about the lighthouse keeper's log" for i in range(400)]
        for text in texts:
            await insert_note(pool, text)
        claimed = await embed_queue.claim(pool, len(texts), 300)
        vectors = await embedder.embed([r["text"] for r in claimed])
        pairs = [(r["id"], v) for r, v in zip(claimed, vectors, strict=True)]
        assert (await embed_queue.store_vectors(pool, pairs, embedder.model)).stored == len(texts)
        assert await pool.fetchval("SELECT lexical_post(10000)") == len(texts)
        await pool.execute("VACUUM ANALYZE")
        reach = Reach((GLOBAL_WORKSPACE,))
        scopes = {
            "default": Scope(reach=reach),
            "history": Scope(reach=reach, include_history=True),
            "as_of": Scope(reach=reach, as_of=datetime.now(UTC)),
        }
        query_vector = (await embedder.embed(["zebra crossing"]))[0]
        async with pool.acquire() as conn, conn.transaction():
            # Only an index that the query's WHERE allows is left to choose.
            await conn.execute("SET LOCAL enable_seqscan = off")
            await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            for name, scope in scopes.items():
                lexical = lexical_query(scope, "zebra & crossing", '"zebra" or "crossing"', 10, 1000, 1000)
                semantic = semantic_query(scope, query_vector, 10)
                lexical_plan, semantic_plan = await _plan(conn, *lexical), await _plan(conn, *semantic)
                assert "lexical_postings_pkey" in lexical_plan, (name, lexical_plan)
                assert "chunk_vectors_embedding" in semantic_plan, (name, semantic_plan)
                if name == "default":
                    assert "unindexed" not in lexical_plan + semantic_plan, (lexical_plan, semantic_plan)
                else:
                    assert "chunks_unindexed" in lexical_plan, (name, lexical_plan)
                    assert "chunk_vectors_unindexed" in semantic_plan, (name, semantic_plan)
                # Every mode answers, index or not.
                assert len(await conn.fetch(lexical[0], *lexical[1])) == 40, name
                assert len(await conn.fetch(semantic[0], *semantic[1])) == 30, name
    finally:
        await pool.close()
