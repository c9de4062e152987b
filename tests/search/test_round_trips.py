"""What one search costs PostgreSQL, counted on the wire: three statements for a hybrid search, no
transaction, no workspace lookup once resolved; the scan of the vectors waiting for the graph only
while some wait; and the HNSW settings the semantic leg relies on really hold on the search pool's
connections."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import grpc
import pytest
from pgvector.asyncpg import register_vector

from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.search.v1 import search_service_pb2 as pb
from mnemo.search.v1 import search_service_pb2_grpc as pb_grpc
from mnemo_embed import HashEmbedder
from mnemo_embed.settings import EmbeddingSettings
from mnemo_platform import load_all
from mnemo_platform.settings import SettingsError
from mnemo_search.app import SearchApp
from mnemo_search.engine import nearest_chunks, semantic_query
from mnemo_search.settings import SearchSettings
from mnemo_server.stack import Stack
from mnemo_store import GLOBAL_WORKSPACE, Reach, Scope, vector_graph
from mnemo_store.settings import DatabaseSettings
from tests.helpers import Clients, Postgres, eventually, ids, start_stack
from tests.pgwire import RoundTrip, WireTap

MODES = {"hybrid": pb.SEARCH_MODE_HYBRID, "lexical": pb.SEARCH_MODE_LEXICAL, "semantic": pb.SEARCH_MODE_SEMANTIC}
QUERY = "zebra crossing"
# Many notes near the query in one workspace, a few far from it in the other: the HNSW index
# meets the crowd first, so a workspace-filtered scan without the iterative mode comes back short.
CROWD, FEW = 300, 5


@dataclass
class Tapped:
    tap: WireTap
    app: SearchApp
    search: pb_grpc.SearchServiceStub
    mine: str
    crowded: str
    dsn: str
    stack: Stack

    async def find(self, mode: str, query: str = QUERY, workspace: str | None = None) -> pb.SearchResponse:
        request = pb.SearchRequest(workspace=workspace or self.mine, query=query, mode=MODES[mode])
        return await self.search.Search(request)

    async def searched(
        self, mode: str, query: str = QUERY, workspace: str | None = None
    ) -> tuple[pb.SearchResponse, list[RoundTrip]]:
        """A search's answer and the round trips it took."""
        self.tap.take()
        response = await self.find(mode, query, workspace)
        assert response.hits and not response.degraded, response
        return response, self.tap.take()

    async def trips_of(self, mode: str, query: str = QUERY, workspace: str | None = None) -> list[RoundTrip]:
        return (await self.searched(mode, query, workspace))[1]


# What the semantic statement holds when it scans the vectors waiting for the graph.
WAITING_SCAN = "NOT v.graphed"


def _statements(trips: list[RoundTrip]) -> list[str]:
    return [" ".join(t.sql) for t in trips if t.executes]


@pytest.fixture(scope="module")
async def tapped(postgres: Postgres) -> AsyncIterator[Tapped]:
    """A stack to write with, and a second search service whose every connection goes through a wire tap."""
    dsn = await postgres.create_database("rtt")
    embedder = HashEmbedder(64)
    stack = await start_stack(dsn, embedder)
    clients = Clients(stack)
    tap = WireTap(dsn)
    await tap.start()
    # Both connections at start, so no pool growth (and its type set-up statements) lands in a count.
    pool = DatabaseSettings(pool_min=2, pool_max=2)
    app = SearchApp(tap.dsn, "127.0.0.1:0", 1, pool, EmbeddingSettings(), SearchSettings(), embedder)
    channel: grpc.aio.Channel | None = None
    try:
        mine, crowded = await clients.workspace(), await clients.workspace()
        few = [f"The lighthouse keeper's log, page {i}, mentions a zebra crossing." for i in range(FEW)]
        crowd = [f"zebra crossing zebra crossing near the harbour, sighting {i}" for i in range(CROWD)]
        for workspace, texts in ((mine.id, few), (crowded.id, crowd)):
            items = [ingest_pb.WriteMemoryRequest(workspace=workspace, content=text) for text in texts]
            response = await clients.ingest.WriteMemories(ingest_pb.WriteMemoriesRequest(items=items))
            assert not any(r.HasField("error") for r in response.results)

        async def all_embedded() -> bool:
            """Every vector stored and in the HNSW graph (the grapher's, once the model is idle)."""
            conn = await asyncpg.connect(dsn)
            try:
                graphed = "SELECT count(*) FROM chunk_vectors WHERE indexed AND graphed"
                return await conn.fetchval(graphed) == FEW + CROWD
            finally:
                await conn.close()

        await eventually(all_embedded, timeout=60)
        await app.start()
        await app.after_start()
        channel = grpc.aio.insecure_channel(app.target)
        yield Tapped(tap, app, pb_grpc.SearchServiceStub(channel), mine.id, crowded.id, dsn, stack)
    finally:
        if channel is not None:
            await channel.close()
        await app.stop()
        await tap.close()
        await clients.close()
        await stack.stop()


async def test_a_hybrid_search_is_three_statements_without_a_transaction(tapped: Tapped) -> None:
    # The first search in this process looks the workspace up (the positive control that the tap
    # sees it); every later one reuses what it resolved.
    first = _statements(await tapped.trips_of("hybrid"))
    assert sum("FROM workspaces" in s for s in first) == 1, first
    for _ in range(3):  # each connection prepares the statements it has not run yet
        await tapped.trips_of("hybrid")
    trips = await tapped.trips_of("hybrid")
    statements = _statements(trips)
    assert len(statements) == 3, statements
    lexical, semantic, ranked = (
        [s for s in statements if "lexical_postings" in s],
        [s for s in statements if "chunk_vectors" in s and "<=>" in s],
        [s for s in statements if "ts_headline" in s and "FROM candidates" in s],
    )
    assert len(lexical) == len(semantic) == len(ranked) == 1, statements
    # No BEGIN, SET or COMMIT (asyncpg sends those as simple queries), no workspace lookup; a
    # round trip that runs nothing only prepares one of the three statements on its connection.
    assert not [t for t in trips if "Q" in t.types], trips
    assert not [s for s in statements if "FROM workspaces" in s]
    assert all(set(t.types) <= set("PDH") and t.sql[0] in statements for t in trips if not t.executes), trips


async def test_a_single_leg_search_is_two_statements(tapped: Tapped) -> None:
    for mode, marker in (("lexical", "lexical_postings"), ("semantic", "<=>")):
        await tapped.trips_of(mode)
        statements = _statements(await tapped.trips_of(mode))
        assert len(statements) == 2, (mode, statements)
        assert marker in statements[0] and "ts_headline" in statements[1], (mode, statements)


async def test_the_waiting_vectors_are_scanned_only_while_some_wait(tapped: Tapped) -> None:
    async def scans() -> list[bool]:
        """Each semantic statement of a semantic search in the caller's workspace: whether it
        scanned the waiting vectors; and the search found every note of the workspace."""
        response, trips = await tapped.searched("semantic", workspace=tapped.mine)
        assert len(ids(response)) == FEW
        return [WAITING_SCAN in s for s in _statements(trips) if "<=>" in s]

    await scans()  # whatever an earlier test left: the statement has said whether any wait
    # None waits (the fixture waited for the graph): the statement reads the graph alone.
    assert await scans() == [False]
    conn = await asyncpg.connect(tapped.dsn)
    try:
        await register_vector(conn)
        await tapped.stack.ingest.grapher.stop()  # the vector below waits until it starts again
        try:
            # One of the workspace's vectors waits, as the worker stores it: the graph alone misses
            # it (the control, the statement run by hand without the scan, which says some wait)...
            await conn.execute(
                "UPDATE chunk_vectors SET graphed = false WHERE chunk_id = "
                "(SELECT chunk_id FROM chunk_vectors WHERE workspace_id = $1 LIMIT 1)",
                tapped.mine,
            )
            vector = (await tapped.app.embedder.embed([QUERY]))[0]
            scope = Scope(reach=Reach((tapped.mine, GLOBAL_WORKSPACE)))
            sql, values = semantic_query(scope, vector, 10, waiting=False)
            alone, waiting = nearest_chunks(await conn.fetch(sql, *values))
            assert len(alone) == FEW - 1 and waiting
            # ...so the search that finds one waiting sends its statement again with the scan,
            # and finds every note; the next one scans at once.
            assert await scans() == [False, True]
            assert await scans() == [True]
        finally:
            await tapped.stack.ingest.grapher.start()

        async def none_waiting() -> bool:
            return await vector_graph.waiting(conn) == 0

        await eventually(none_waiting)
        # In the graph again: the statement that finds none waiting is the last to scan.
        assert await scans() == [True]
        assert await scans() == [False]
    finally:
        await conn.close()


async def test_the_tap_sees_a_transaction_and_the_settings_it_would_set(tapped: Tapped) -> None:
    """Positive control: the shape the semantic leg had (BEGIN, SET LOCAL x2, SELECT, COMMIT) is
    five round trips on this tap; the search above shows none of them."""
    assert tapped.app.pool is not None
    tapped.tap.take()
    async with tapped.app.pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL hnsw.ef_search = 100")
        await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        await conn.fetchval("SELECT 1 + $1::int", 1)
    trips = tapped.tap.take()
    assert [t.sql[0].split()[0] for t in trips if "Q" in t.types] == ["BEGIN;", "SET", "SET", "COMMIT;"]
    assert sum(t.executes for t in trips) == 5


async def test_the_search_pool_scans_hnsw_iteratively_with_its_ef_search(tapped: Tapped) -> None:
    assert tapped.app.pool is not None
    settings = SearchSettings()
    vector = (await tapped.app.embedder.embed([QUERY]))[0]
    sql, values = semantic_query(Scope(reach=Reach((tapped.mine, GLOBAL_WORKSPACE))), vector, 10)

    async def filtered_scan(conn: asyncpg.Connection) -> list[asyncpg.Record]:
        async with conn.transaction():
            # The HNSW index, as with many workspaces: here the small workspace's own rows are cheaper.
            await conn.execute("SET LOCAL enable_seqscan = off")
            await conn.execute("SET LOCAL enable_sort = off")
            plan = "\n".join(r[0] for r in await conn.fetch(f"EXPLAIN {sql}", *values))
            assert "chunk_vectors_embedding" in plan, plan
            return nearest_chunks(await conn.fetch(sql, *values))[0]

    async with tapped.app.pool.acquire() as conn:
        # Every note of the workspace, though hundreds of nearer vectors of another come first...
        assert len(await filtered_scan(conn)) == FEW
        assert await conn.fetchval("SHOW hnsw.ef_search") == str(settings.hnsw_ef_search)
        assert await conn.fetchval("SHOW hnsw.iterative_scan") == "relaxed_order"
    # ...where a connection without the settings (pgvector's defaults) comes back short.
    plain = await asyncpg.connect(tapped.dsn)
    try:
        await register_vector(plain)
        assert len(await filtered_scan(plain)) < FEW
        assert await plain.fetchval("SHOW hnsw.iterative_scan") == "off"
    finally:
        await plain.close()
    # And through the service: all of them, none of the other workspace's.
    found = ids(await tapped.find("semantic", workspace=tapped.mine))
    assert len(found) == FEW
    crowd = ids(await tapped.find("semantic", workspace=tapped.crowded))
    assert crowd and not set(crowd) & set(found)


def test_an_ef_search_pgvector_would_ignore_is_refused_at_start() -> None:
    # Given at connection start, pgvector would only warn about it and scan with its default (40).
    assert load_all((SearchSettings,), {"MNEMO_HNSW_EF_SEARCH": "1000"})[0].hnsw_ef_search == 1000
    with pytest.raises(SettingsError, match="MNEMO_HNSW_EF_SEARCH must be at most 1000"):
        load_all((SearchSettings,), {"MNEMO_HNSW_EF_SEARCH": "1001"})
