"""Every read's legs use the lexical postings and the partial vector index (their WHERE implies
the index's `indexed`); history and as-of reads, which may also return chunks those leave out,
reach those through the partial indexes on what is not `indexed`, and answer."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import asyncpg
import numpy as np
import pytest

from mnemo_embed import HashEmbedder
from mnemo_search import engine
from mnemo_search.engine import SearchEngine, lexical_query, nearest_chunks, semantic_query
from mnemo_search.settings import SearchSettings
from mnemo_server.stack import Stack
from mnemo_store import GLOBAL_WORKSPACE, Reach, Scope, reads
from mnemo_store import memories as db
from mnemo_wire import TrustSettings
from tests.helpers import Clients, Postgres, embed_queued, ids, insert_note, migrated_pool


async def _plan(conn: asyncpg.Connection, sql: str, values: list[object]) -> str:
    rows = await conn.fetch(f"EXPLAIN {sql}", *values)
    return "\n".join(r[0] for r in rows)


def _nodes(plan: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every node of an `EXPLAIN (FORMAT JSON)` plan."""
    nodes = [plan[0]["Plan"]]
    while nodes:
        node = nodes.pop()
        nodes += node.get("Plans", [])
        yield node


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
        await embed_queued(pool, embedder, len(texts))
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
                assert len(nearest_chunks(await conn.fetch(semantic[0], *semantic[1]))[0]) == engine.semantic_rows(
                    10
                ), name
    finally:
        await pool.close()


async def test_as_of_the_semantic_leg_checks_each_vector_s_memory_by_its_own_lookups(postgres: Postgres) -> None:
    """As of a time, a memory is three relations (the memory, its version and its status span
    then); the statement plans the vectors alone and checks each one's memory in a subquery of its
    own, nearest first, and returns the nearest notes that existed then."""
    embedder = HashEmbedder(64)
    embedder.start()
    pool = await migrated_pool(postgres, embedder)
    try:
        before = {(await insert_note(pool, f"harbour log {i}: the keeper saw {i % 7} ships"))[0] for i in range(120)}
        await embed_queued(pool, embedder, 120)
        then = await pool.fetchval("SELECT clock_timestamp()")
        later = {(await insert_note(pool, f"harbour log {i}: the keeper saw {i % 7} ships"))[0] for i in range(60)}
        await embed_queued(pool, embedder, 60)
        await pool.execute("VACUUM ANALYZE")
        query_vector = (await embedder.embed(["the keeper saw 3 ships"]))[0]
        rows = await pool.fetch(
            "SELECT v.embedding FROM chunk_vectors v WHERE v.memory_id = ANY($1::uuid[])", list(before)
        )
        nearest = sorted((float(np.dot(r["embedding"].to_numpy(), query_vector)) for r in rows), reverse=True)

        async def run(scope: Scope) -> tuple[list[asyncpg.Record], list[dict[str, Any]]]:
            sql, values = semantic_query(scope, query_vector, 10)
            async with pool.acquire() as conn, conn.transaction():
                # The index, as in a large workspace.
                await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                await conn.execute("SET LOCAL hnsw.ef_search = 400")
                await conn.execute("SET LOCAL enable_seqscan = off")
                plan = json.loads(await conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *values))
                return nearest_chunks(await conn.fetch(sql, *values))[0], list(_nodes(plan))

        reach = Reach((GLOBAL_WORKSPACE,))
        found, nodes = await run(Scope(reach=reach, as_of=then))
        assert {r["memory_id"] for r in found} <= before
        assert sorted((r["score"] for r in found), reverse=True) == pytest.approx(nearest[: len(found)])
        assert len(found) == engine.semantic_rows(10)
        # Each vector out of the HNSW scan has its memory checked as a whole: the loop over the
        # scan has all three relations on its inner side, looked up by the vector's keys.
        (loop,) = [n for n in nodes if n.get("Plans", [{}])[0].get("Index Name") == "chunk_vectors_embedding"]
        inside = {m.get("Relation Name") for m in _nodes([{"Plan": loop["Plans"][1]}])}
        assert loop["Node Type"] == "Nested Loop", loop["Node Type"]
        assert {"memories", "memory_versions", "memory_states"} <= inside, inside
        # Control: now, the later notes are found too.
        found, nodes = await run(Scope(reach=reach))
        assert {r["memory_id"] for r in found} & later and len(found) == engine.semantic_rows(10)
    finally:
        await pool.close()


async def test_a_small_tag_s_vectors_are_all_compared_and_a_large_one_walks_the_index(
    postgres: Postgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a tag filter the semantic leg computes every distance of the tag's vectors (found by
    their copy of the tags) when they are at most engine.SEMANTIC_EXACT_MAX (an exact answer, no
    graph walked), and walks the HNSW index otherwise; both give the tag's nearest notes, and
    nothing untagged."""
    embedder = HashEmbedder(64)
    embedder.start()
    pool = await migrated_pool(postgres, embedder)
    try:
        texts = [f"harbour log {i}: the keeper saw {i % 7} ships and {i % 5} gulls" for i in range(300)]
        tagged: set[uuid.UUID] = set()
        for i, text in enumerate(texts):
            memory_id, _ = await insert_note(pool, text, tags=["rare"] if i % 25 == 0 else ["common"])
            if i % 25 == 0:
                tagged.add(memory_id)
        await embed_queued(pool, embedder, len(texts))
        await pool.execute("VACUUM ANALYZE")
        query_vector = (await embedder.embed(["the keeper saw 3 ships"]))[0]
        # The tag's 12 notes' similarities to the query, as computed here, best first.
        rows = await pool.fetch(
            "SELECT v.embedding FROM chunk_vectors v WHERE v.memory_id = ANY($1::uuid[])", list(tagged)
        )
        expected = sorted((float(np.dot(r["embedding"].to_numpy(), query_vector)) for r in rows), reverse=True)
        scope = Scope(reach=Reach((GLOBAL_WORKSPACE,)), tags=["rare"])

        async def run(*disabled: str) -> tuple[list[asyncpg.Record], dict[str, int]]:
            """The rows, and how often each of the two ways ran: `exact` (the tag's vectors) and
            `index` (the HNSW walk, and beside it the vectors waiting for the graph: none here),
            each under its one-time filter on `small`."""
            sql, values = semantic_query(scope, query_vector, 10)
            async with pool.acquire() as conn, conn.transaction():
                await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                for setting in disabled:
                    await conn.execute(f"SET LOCAL {setting} = off")
                plan = json.loads(await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", *values))
                ran = {"exact": 0, "index": 0}
                for node in _nodes(plan):
                    gate = node.get("One-Time Filter", "")
                    if "InitPlan" in gate and not _waiting_branch(node):
                        way = "index" if gate.startswith("(NOT") else "exact"
                        ran[way] += node["Plans"][0]["Actual Loops"]
                        if way == "index" and node["Plans"][0]["Actual Loops"]:
                            ran["walked"] = "chunk_vectors_embedding" in json.dumps(node)
                return nearest_chunks(await conn.fetch(sql, *values))[0], ran

        found, ran = await run()
        assert {r["memory_id"] for r in found} == tagged
        assert sorted((r["score"] for r in found), reverse=True) == pytest.approx(expected)
        assert ran == {"exact": 1, "index": 0}, ran
        # Positive control: with the bound below the tag's 12 memories the index is walked (only
        # it is left to the planner, as in a large workspace), and finds the same notes.
        monkeypatch.setattr(engine, "SEMANTIC_EXACT_MAX", 5)
        found, ran = await run("enable_seqscan", "enable_bitmapscan", "enable_sort")
        assert ran == {"exact": 0, "index": 1, "walked": True}, ran
        assert {r["memory_id"] for r in found} == tagged
    finally:
        await pool.close()


def _waiting_branch(node: dict) -> bool:
    """Whether a plan node reads the vectors waiting for the graph (engine.semantic_query)."""
    text = json.dumps(node)
    return "chunk_vectors_ungraphed" in text or "NOT graphed" in text or "NOT v.graphed" in text


async def test_a_kind_filter_drops_other_kinds_on_the_vector_scan_and_looks_up_only_what_passes(
    postgres: Postgres,
) -> None:
    """Each vector carries its memory's kind (sql/0020_vector_kinds.sql), set as it is stored;
    under a kind filter the HNSW scan drops the other kinds itself, so a memory is looked up only
    for a vector that passed, and the leg returns the kind's nearest notes."""
    embedder = HashEmbedder(64)
    embedder.start()
    pool = await migrated_pool(postgres, embedder)
    try:
        decisions: set[uuid.UUID] = set()
        for i in range(200):
            kind = "decision" if i % 5 == 0 else "note"
            memory_id, _ = await insert_note(pool, f"harbour log {i}: the keeper saw {i % 7} ships", kind=kind)
            if kind == "decision":
                decisions.add(memory_id)
        await embed_queued(pool, embedder, 200)
        await pool.execute("VACUUM ANALYZE")
        copies = await pool.fetch(
            "SELECT v.kind, m.kind AS own FROM chunk_vectors v JOIN memories m ON m.id = v.memory_id"
        )
        assert len(copies) == 200 and all(r["kind"] == r["own"] for r in copies)
        assert sum(r["kind"] == "decision" for r in copies) == len(decisions) == 40
        query_vector = (await embedder.embed(["the keeper saw 3 ships"]))[0]
        rows = await pool.fetch(
            "SELECT v.embedding FROM chunk_vectors v WHERE v.memory_id = ANY($1::uuid[])", list(decisions)
        )
        nearest = sorted((float(np.dot(r["embedding"].to_numpy(), query_vector)) for r in rows), reverse=True)

        async def run(scope: Scope) -> tuple[list[asyncpg.Record], dict[str, int]]:
            """The rows, and the actual rows out of the HNSW scan and the lookups of a memory."""
            sql, values = semantic_query(scope, query_vector, 10)
            async with pool.acquire() as conn, conn.transaction():
                # The index, as in a large workspace, and every node's loops counted.
                await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                await conn.execute("SET LOCAL hnsw.ef_search = 400")
                for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort", "enable_hashjoin"):
                    await conn.execute(f"SET LOCAL {setting} = off")
                plan = json.loads(await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", *values))
                counted = {"vectors": 0, "lookups": 0}
                for node in _nodes(plan):
                    if node.get("Index Name") == "chunk_vectors_embedding":
                        counted["vectors"] += node["Actual Rows"] * node["Actual Loops"]
                    elif node.get("Relation Name") == "memories":
                        counted["lookups"] += node["Actual Loops"]
                return nearest_chunks(await conn.fetch(sql, *values))[0], counted

        everything = Scope(reach=Reach((GLOBAL_WORKSPACE,)))
        found, counted = await run(replace(everything, kinds=["decision"]))
        assert {r["memory_id"] for r in found} <= decisions
        assert sorted((r["score"] for r in found), reverse=True) == pytest.approx(nearest[: len(found)])
        assert len(found) == engine.semantic_rows(10)
        # Every vector out of the scan is a decision: one memory looked up for each.
        assert counted["lookups"] == counted["vectors"] == len(found), counted
        # Control: unfiltered, the nearest vectors are mostly notes, looked up the same way.
        found, counted = await run(everything)
        assert {r["memory_id"] for r in found} - decisions
        assert counted["lookups"] == counted["vectors"] == len(found), counted
    finally:
        await pool.close()


async def test_a_small_tag_s_nearest_vectors_come_back_whichever_join_the_planner_picks(postgres: Postgres) -> None:
    """Under a small tag the semantic leg returns the tag's nearest vectors, not the first it
    finds: with more tagged vectors than the leg returns, and the planner steered away from nested
    loops (a hash join once read the tag's memories in table order and stopped at the limit), the
    rows are exactly the nearest by the similarities computed here."""
    embedder = HashEmbedder(64)
    embedder.start()
    pool = await migrated_pool(postgres, embedder)
    try:
        texts = [f"harbour log {i}: the keeper saw {i % 7} ships and {i % 5} gulls" for i in range(120)]
        for text in texts:
            await insert_note(pool, text, tags=["rare"])
        pairs = await embed_queued(pool, embedder, len(texts))
        await pool.execute("VACUUM ANALYZE")
        query_vector = (await embedder.embed(["the keeper saw 3 ships and 4 gulls"]))[0]
        similarity = {chunk_id: float(np.dot(vector, query_vector)) for chunk_id, vector in pairs}
        sql, values = semantic_query(Scope(reach=Reach((GLOBAL_WORKSPACE,)), tags=["rare"]), query_vector, 10)
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("SET LOCAL enable_nestloop = off")
            found, _ = nearest_chunks(await conn.fetch(sql, *values))
        # Compared by similarity, not id: notes the same distance away may come in either order.
        best = sorted(similarity.values(), reverse=True)[: engine.semantic_rows(10)]
        assert len(found) == engine.semantic_rows(10) < len(texts)
        assert [similarity[r["chunk_id"]] for r in found] == pytest.approx(best, abs=1e-5)
        assert [r["score"] for r in found] == pytest.approx(best, abs=1e-5)
    finally:
        await pool.close()


async def test_candidates_probe_the_postings_by_key_when_the_words_hold_many(
    postgres: Postgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lexical statement scores its candidates by probing each query word's postings at
    (term, chunk) when the words hold many postings per probe (engine.PROBE_RATIO), and by reading
    them all otherwise: at 1M notes a generic plan, which cannot know how many postings the words
    hold, hashed them all (320,916 postings, 85 ms). Here the planner is steered towards that
    join (nested loops and table scans off), as those estimates steered it; both ways score alike."""
    embedder = HashEmbedder(64)
    embedder.start()
    pool = await migrated_pool(postgres, embedder)
    try:
        for i in range(60):
            await insert_note(pool, f"harbour {i} keeper" + (" lighthouse" if i % 10 == 0 else ""))
        assert await pool.fetchval("SELECT lexical_post(10000)") == 60
        await pool.execute("VACUUM ANALYZE")
        reach = Reach((GLOBAL_WORKSPACE,))

        async def run() -> tuple[int, list[asyncpg.Record]]:
            """How many postings scans are keyed by a candidate's chunk (probes), and the rows."""
            sql, values = lexical_query(Scope(reach=reach), "lighthouse harbour keeper", '"lighthouse"', 10, 2, 1000)
            async with pool.acquire() as conn, conn.transaction():
                for setting in ("enable_nestloop", "enable_seqscan"):
                    await conn.execute(f"SET LOCAL {setting} = off")
                plan = json.loads(await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", *values))
                found = await conn.fetch(sql, *values)
            probes, nodes = 0, [plan[0]["Plan"]]
            while nodes:
                node = nodes.pop()
                nodes += node.get("Plans", [])
                keyed = re.search(r"\bchunk_id = \w+\.chunk_id\b", node.get("Index Cond", ""))
                if node.get("Index Name", "").startswith("lexical_postings") and keyed and node["Actual Loops"]:
                    probes += 1
            return probes, found

        # 60 + 60 + 6 postings against 3 words' probes for each of at most 2 candidates (the cap;
        # the rarest word alone exceeds it, so its best are taken, as many as the leg asks): many.
        probes, by_key = await run()
        assert probes == 1
        # Positive control: with the ratio raised, the postings are read and hashed instead.
        monkeypatch.setattr(engine, "PROBE_RATIO", 1000)
        probes, hashed = await run()
        assert probes == 0
        # Either way: the rarest word's six notes, each scored on all three words, alike.
        assert [r["matched"] for r in by_key] == [3] * 6
        assert [(r["chunk_id"], round(r["score"], 9)) for r in by_key] == [
            (r["chunk_id"], round(r["score"], 9)) for r in hashed
        ]
    finally:
        await pool.close()


async def test_status_counts_read_indexes_alone_and_count_as_reads_do(postgres: Postgres) -> None:
    """GetStatus's counts are answered from indexes, not by reading the tables (which grew with every
    row: 90 ms at 100k notes): the visible memories from `memories_visible`, the vectors from the
    two partial indexes, those `indexed` and those not. A deleted memory is not counted; its vector,
    left out of the search indexes, still is."""
    embedder = HashEmbedder(64)
    embedder.start()
    pool = await migrated_pool(postgres, embedder)
    try:
        notes = [await insert_note(pool, f"status {i} of the ferry timetable") for i in range(30)]
        await embed_queued(pool, embedder, len(notes))
        async with pool.acquire() as conn, conn.transaction():
            await db.mark_deleted(conn, notes[0][0], True)
        await pool.execute("VACUUM ANALYZE")
        reach = Reach((GLOBAL_WORKSPACE,))
        sql, values = reads.counts_statement(reach)
        async with pool.acquire() as conn, conn.transaction():
            # Only an index the statement's WHERE allows is left to choose (the tables are small).
            await conn.execute("SET LOCAL enable_seqscan = off")
            await conn.execute("SET LOCAL enable_bitmapscan = off")
            plan = await _plan(conn, sql, values)
        for index in ("memories_visible", "chunk_vectors_embedded", "chunk_vectors_unindexed"):
            assert f"Index Only Scan using {index}" in plan, (index, plan)
        assert "on memories " not in plan.replace("using memories_visible on memories m", ""), plan
        hidden = await pool.fetchval("SELECT count(*) FROM chunk_vectors WHERE NOT indexed")
        assert hidden == 1  # the deleted memory's vector, counted below
        async with pool.acquire() as conn:
            counts = await reads.count_within(conn, reach)
        assert (counts.memories, counts.embedded, counts.pending) == (29, 30, 0)
    finally:
        await pool.close()


async def test_a_semantic_leg_whose_nearest_chunks_hold_too_few_notes_reads_further(
    hash_stack: Stack, hash_clients: Clients
) -> None:
    """The semantic leg first reads engine.semantic_rows(limit) chunks. Twelve notes of eight
    chunks each, every chunk near the query and a note's chunks nearer each other than the next
    note's: those chunks hold only a few of the notes, so the leg reads further
    (engine.SEMANTIC_WIDE_ROWS) and a semantic search returns all twelve."""
    ws = await hash_clients.workspace()
    written = []
    for i in range(12):
        paragraphs = [
            # 150 words: no two paragraphs fit one chunk.
            " ".join(
                ["quokka orbital ledger"] * (6 + 3 * i) + [f"shard{i}"] * (147 - 3 * (6 + 3 * i)) + [f"piece{j}"] * 3
            )
            for j in range(8)
        ]
        memory = await hash_clients.write(ws.id, "\n\n".join(paragraphs), title=f"Ledger {i}")
        written.append(memory.id)
    chunks = await asyncpg.connect(hash_stack.dsn)
    try:
        counts = await chunks.fetch(
            "SELECT count(*) AS n FROM chunks WHERE memory_id = ANY($1::uuid[]) GROUP BY memory_id",
            [uuid.UUID(m) for m in written],
        )
        assert [r["n"] for r in counts] == [8] * 12  # each note is eight chunks
    finally:
        await chunks.close()
    for memory_id in written:
        await hash_clients.wait_embedded(memory_id, ws.id)

    found = await hash_clients.find(ws.id, "quokka orbital ledger", mode="semantic", limit=12)
    assert sorted(ids(found)) == sorted(written), ids(found)
    assert not found.degraded

    # Control: the first read alone (the chunks a search for 30 candidates asks for) holds fewer
    # than the twelve notes, so the answer above needed the second.
    depth = max(12, SearchSettings().candidates)
    embedder = HashEmbedder(64)  # the stack's
    embedder.start()
    vector = (await embedder.embed(["quokka orbital ledger"]))[0]
    scope = Scope(reach=Reach((ws.id, GLOBAL_WORKSPACE)))
    # The search service's own pool: its connections carry the HNSW settings (session_settings).
    search_pool = hash_stack.search.pool
    assert search_pool is not None
    sql, values = semantic_query(scope, vector, depth)
    rows, _ = nearest_chunks(await search_pool.fetch(sql, *values))
    assert len(rows) == engine.semantic_rows(depth)
    first = {r["memory_id"] for r in rows}
    assert len(first) < 12, first

    # When those memories are enough to fill the results asked for, the leg keeps them and reads no
    # further: its candidates are the first read's, fewer than the depth. Control: asked for more
    # results than they hold, the same leg reads further and returns as many as asked.
    leg = SearchEngine(search_pool, embedder, SearchSettings(), TrustSettings())
    kept = await leg.semantic_leg(scope, "quokka orbital ledger", depth, len(first))
    assert {h.memory_id for h in kept.hits} == first
    widened = await leg.semantic_leg(scope, "quokka orbital ledger", depth, 12)
    assert {h.memory_id for h in widened.hits} == {uuid.UUID(m) for m in written}
