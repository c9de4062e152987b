"""Shared test helpers: real PostgreSQL databases, real stacks, real clients."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc
from mcp.client.client import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from mnemo.common.v1 import common_pb2
from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.ingest.v1 import ingest_service_pb2_grpc as ingest_grpc
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo.search.v1 import search_service_pb2_grpc as search_grpc
from mnemo_embed import Embedder, HashEmbedder
from mnemo_server.stack import Stack, StackConfig
from mnemo_store import GLOBAL_WORKSPACE, embed_queue, open_pool, prepare_database, vector_graph
from mnemo_store import memories as db
from mnemo_store.settings import DatabaseSettings

# What an error answer must never show: a traceback, a source file, a path of this machine.
LEAKS = re.compile(r"Traceback|File \"|site-packages|\.py\b|/work/|/usr/lib|/root/")


class Postgres:
    """The test session's embedded PostgreSQL: hands out a fresh database per stack or test."""

    def __init__(self, uri: str) -> None:
        self.uri = uri

    def dsn(self, database: str) -> str:
        # The embedded server's URI is postgresql://postgres:@/postgres?host=SOCKET_DIR
        base, _, query = self.uri.partition("?")
        return f"{base.rsplit('/', 1)[0]}/{database}?{query}"

    async def create_database(self, prefix: str = "t") -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        conn = await asyncpg.connect(self.uri)
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
        return self.dsn(name)


# One directory per test process for what tests leave on disk (stacks' data directories, the
# drills' PostgreSQL data directories, keys), removed when the process exits: left behind, they
# piled up in /tmp across runs (1,066 of them after a day).
_SCRATCH = tempfile.TemporaryDirectory(prefix="mnemo-tests-", ignore_cleanup_errors=True)


def scratch_dir(prefix: str) -> Path:
    """A new directory, removed with the rest when this test process exits."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=_SCRATCH.name))


def stack_env(dsn: str, **overrides: str) -> dict[str, str]:
    env = {
        "MNEMO_DATABASE_URL": dsn,
        "MNEMO_HTTP_PORT": "0",
        "MNEMO_EMBEDDER": "hash",
        "MNEMO_EMBED_RESCAN_S": "1",
        "MNEMO_GRPC_GRACE_S": "1",
        # Never the real ~/.claude or ~/.codex of the machine running the tests: harvest tests
        # point the readers at fake agent homes and turn them on explicitly.
        "MNEMO_HARVEST_AGENTS": "",
        "MNEMO_DATA_DIR": str(scratch_dir("data-")),
    }
    env.update(overrides)
    return env


async def migrate(dsn: str, embedder: Embedder) -> None:
    """Does to `dsn` what a starting ingest does: applies the migrations and records the embedding space."""
    pool = await prepare_database(dsn, DatabaseSettings(), embedder.model, embedder.dimension, migrate=True)
    await pool.close()


async def migrated_pool(postgres: Postgres, embedder: Embedder) -> asyncpg.Pool:
    """A pool on a new database migrated as a starting ingest leaves it (the caller closes it)."""
    dsn = await postgres.create_database()
    await migrate(dsn, embedder)
    return await open_pool(dsn)


async def embed_queued(
    pool: asyncpg.Pool, embedder: Embedder, count: int, graph: bool = True
) -> list[tuple[int, np.ndarray]]:
    """Claims, embeds and stores the `count` queued chunks with the worker's own functions:
    (chunk id, vector) each. With `graph`, lets every waiting vector into the HNSW graph after, as
    the grapher does once the model is idle (mnemo_ingest.graphing)."""
    claimed = await embed_queue.claim(pool, count, 300)
    vectors = await embedder.embed([r["text"] for r in claimed])
    pairs = [(r["id"], v) for r, v in zip(claimed, vectors, strict=True)]
    assert (await embed_queue.store_vectors(pool, pairs, embedder.model)).stored == count
    if graph:
        while await vector_graph.graph(pool, 10_000):
            pass
    return pairs


async def insert_note(
    pool: asyncpg.Pool, text: str, tags: Sequence[str] = (), kind: str = "note", more: Sequence[str] = ()
) -> tuple[uuid.UUID, list[int]]:
    """A memory in `global` with one chunk (`text`), and one more for each of `more`, queued, as a
    write leaves it (through the store's own functions, for tests below the services); its id and
    its chunks' ids."""
    memory_id = uuid.uuid4()
    content = "\n\n".join([text, *more])
    async with pool.acquire() as conn, conn.transaction():
        await db.insert_memories(
            conn,
            [
                db.NewMemory(
                    id=memory_id,
                    workspace_id=GLOBAL_WORKSPACE,
                    kind=kind,
                    title="Note",
                    content=content,
                    content_hash=hashlib.sha256(content.encode()).hexdigest(),
                    tags=list(tags),
                    metadata={},
                    source_uri=None,
                    idempotency_key=None,
                    status="active",
                    author="test",
                    provenance="agent",
                    valid_from=None,
                    valid_to=None,
                    suspicious=(),
                    trust=1.0,
                    chunks=[db.ChunkRow(i, "Note", piece, "") for i, piece in enumerate([text, *more])],
                )
            ],
        )
        rows = await conn.fetch("SELECT id FROM chunks WHERE memory_id = $1 ORDER BY id", memory_id)
    return memory_id, [r["id"] for r in rows]


def long_note(word: str, parts: int) -> str:
    """A note the hash embedder's window (256 words) cuts into `parts` chunks, `word` in each."""
    steps = (" ".join(f"step{i}n{j}" for j in range(200)) for i in range(parts))
    return "\n\n".join(f"Part {i} of the {word} log: {words}" for i, words in enumerate(steps))


# What the BM25 statistics must be, recounted from scratch from the chunks in the search indexes:
# per term its chunks and its memories, the postings, per workspace its chunks, their length and
# its memories.
_LEXICAL_RECOUNT = """
WITH counts AS (
    SELECT c.id AS chunk_id, c.memory_id, c.workspace_id, m.kind, l.lexeme, l.tf, l.len
    FROM chunks c JOIN memories m ON m.id = c.memory_id, lexical_counts(c.tsv) l WHERE c.indexed
)
SELECT
    (SELECT coalesce(jsonb_object_agg(workspace_id || ' ' || kind || ' ' || lexeme, jsonb_build_array(n, d)), '{}')
     FROM (SELECT workspace_id, kind, lexeme, count(*) AS n, count(DISTINCT memory_id) AS d
           FROM counts GROUP BY 1, 2, 3) x) AS terms,
    (SELECT count(*) FROM counts) AS postings,
    (SELECT coalesce(sum(hashtext(chunk_id || ' ' || lexeme || ' ' || tf || ' ' || len)), 0) FROM counts) AS digest,
    (SELECT coalesce(jsonb_object_agg(workspace_id, jsonb_build_array(n, total, d)), '{}')
     FROM (SELECT workspace_id, count(*) AS n, sum(len) AS total, count(DISTINCT memory_id) AS d
           FROM (SELECT DISTINCT chunk_id, memory_id, workspace_id, len FROM counts) x GROUP BY 1) s) AS sizes
"""

# The same figures read from the maintained tables (a term whose df fell to 0 must be gone).
_LEXICAL_MAINTAINED = """
SELECT
    (SELECT coalesce(jsonb_object_agg(workspace_id || ' ' || kind || ' ' || lexeme, jsonb_build_array(df, mdf)), '{}')
     FROM lexical_terms) AS terms,
    (SELECT count(*) FROM lexical_postings) AS postings,
    (SELECT coalesce(sum(hashtext(p.chunk_id || ' ' || t.lexeme || ' ' || p.tf || ' ' || p.len)), 0)
     FROM lexical_postings p JOIN lexical_terms t ON t.id = p.term_id) AS digest,
    (SELECT coalesce(jsonb_object_agg(workspace_id, jsonb_build_array(chunks, length, memories)), '{}')
     FROM lexical_sizes WHERE chunks > 0) AS sizes
"""


async def lexical_statistics(conn: asyncpg.Connection) -> tuple[dict, dict]:
    """The BM25 statistics recounted from the indexed chunks, and as the poster keeps them: equal
    once it has caught up."""
    return dict(await conn.fetchrow(_LEXICAL_RECOUNT)), dict(await conn.fetchrow(_LEXICAL_MAINTAINED))


async def start_stack(dsn: str, embedder: Embedder, **overrides: str) -> Stack:
    """Ingest, search and gateway (the services on Unix sockets, the gateway on a free port) against
    `dsn`, with background work started."""
    stack = Stack(StackConfig.from_env(stack_env(dsn, **overrides)), embedder=embedder)
    await stack.start()
    await stack.after_start()
    return stack


class GatedEmbedder(HashEmbedder):
    """The hash embedder, ready when the test says and holding each batch until it opens the gate
    (a slow model's stand-in)."""

    def __init__(self) -> None:
        super().__init__(64)
        self.loaded = asyncio.Event()
        self.gate = asyncio.Event()
        self.started = asyncio.Event()
        self.entered: list[int] = []
        """entered holds the size of each batch handed to the embedder, in order."""

    async def wait_ready(self) -> None:
        await self.loaded.wait()
        await super().wait_ready()

    async def embed(self, texts: list[str]) -> list[np.ndarray]:
        self.entered.append(len(texts))
        self.started.set()
        await self.gate.wait()
        return await super().embed(texts)

    async def embed_query(self, text: str) -> np.ndarray:
        # Never held: the bundled model runs a query in its own session, beside the batches.
        return (await super().embed([text]))[0]


class Clients:
    """Real gRPC channels to a stack's services (no retries, no interceptors: the raw surface)."""

    def __init__(self, stack: Stack) -> None:
        assert stack.ingest is not None and stack.search is not None
        self.stack = stack
        self._channels = [
            grpc.aio.insecure_channel(stack.ingest.target),
            grpc.aio.insecure_channel(stack.search.target),
        ]
        self.ingest = ingest_grpc.IngestServiceStub(self._channels[0])
        self.search = search_grpc.SearchServiceStub(self._channels[1])

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()

    async def workspace(self, name: str | None = None, root: str = "") -> common_pb2.Workspace:
        name = name or f"ws-{uuid.uuid4().hex[:8]}"
        response = await self.ingest.AddWorkspace(ingest_pb.AddWorkspaceRequest(name=name, root_path=root))
        return response.workspace

    async def write(self, workspace: str, content: str, **fields: Any) -> common_pb2.Memory:
        response = await self.ingest.WriteMemory(
            ingest_pb.WriteMemoryRequest(workspace=workspace, content=content, **fields)
        )
        return response.memory

    async def find(self, workspace: str, query: str, mode: str = "hybrid", **fields: Any) -> search_pb.SearchResponse:
        modes = {"hybrid": 1, "lexical": 2, "semantic": 3}
        return await self.search.Search(
            search_pb.SearchRequest(workspace=workspace, query=query, mode=modes[mode], **fields)
        )

    async def wait_embedded(self, memory_id: str, workspace: str, timeout: float = 30.0) -> float:
        """Seconds until every chunk of the memory's current version is embedded."""
        started = time.perf_counter()
        while True:
            memory = (await self.search.GetMemory(search_pb.GetMemoryRequest(workspace=workspace, id=memory_id))).memory
            if memory.embedding_state == common_pb2.EMBEDDING_STATE_EMBEDDED:
                return time.perf_counter() - started
            if time.perf_counter() - started > timeout:
                raise AssertionError(f"memory {memory_id} not embedded after {timeout} s")
            await asyncio.sleep(0.05)


def ids(response: search_pb.SearchResponse) -> list[str]:
    return [hit.memory.id for hit in response.hits]


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 20.0, interval: float = 0.1) -> None:
    deadline = time.perf_counter() + timeout
    while not await check():
        if time.perf_counter() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval)


async def wait_posted(dsn: str, embedded: bool = False) -> None:
    """Waits until the stack's lexical poster has emptied its queue (the BM25 statistics are in line)
    and, with `embedded`, until no chunk waits for its vector either."""
    conn = await asyncpg.connect(dsn)
    try:

        async def empty() -> bool:
            if embedded and await conn.fetchval("SELECT EXISTS (SELECT 1 FROM embed_queue WHERE NOT failed)"):
                return False
            return not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM lexical_queue)")

        await eventually(empty)
    finally:
        await conn.close()


async def table_counts(dsn: str) -> dict[str, int]:
    """Rows per table: a bad request must leave every count unchanged."""
    conn = await asyncpg.connect(dsn)
    try:
        counts = {}
        for table in ("workspaces", "memories", "memory_versions", "chunks", "audit_events"):
            counts[table] = await conn.fetchval(f"SELECT count(*) FROM {table}")
        return counts
    finally:
        await conn.close()


# Every MCP tool the gateway offers, for the tests that check the listing.
MCP_TOOLS = frozenset(
    {
        "memory_write",
        "memory_search",
        "memory_get",
        "memory_update",
        "memory_status",
        "memory_supersede",
        "memory_retract",
        "memory_delete",
        "memory_history",
        "memory_harvest_status",
        "memory_context",
        "memory_feedback",
        "memory_propose",
    }
)


MNEMO = str(Path(sys.executable).parent / "mnemo")


async def mnemo(
    stack: Stack, *args: str, stdin: str | None = None, cwd: str | None = None, token: str = ""
) -> tuple[int, str, str]:
    """Runs the `mnemo` CLI against the stack's gateway (as `token`, if given): (exit code, stdout, stderr)."""
    # An asyncio subprocess: the stack under test runs on this same event loop.
    process = await asyncio.create_subprocess_exec(
        MNEMO,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "MNEMO_URL": stack.base_url, "MNEMO_TOKEN": token},
        cwd=cwd,
    )
    out, err = await process.communicate(stdin.encode() if stdin is not None else None)
    return process.returncode or 0, out.decode(), err.decode()


# What a raw JSON-RPC POST to /mcp sends, for the tests that go beneath the MCP client.
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def mcp_url(stack: Stack, workspace: str | None = None) -> str:
    return f"{stack.base_url}/mcp" + (f"?workspace={workspace}" if workspace else "")


def mcp_client(stack: Stack, workspace: str | None = None, token: str = "") -> Client:
    """The real MCP client over HTTP, sending `Authorization: Bearer <token>` when given."""
    if not token:
        return Client(mcp_url(stack, workspace))
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(mcp_url(stack, workspace), http_client=http))


def tool_json(result: Any) -> Any:
    """A successful MCP tool result's JSON payload (fails the test, showing the error, otherwise)."""
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


async def readiness(channel: grpc.aio.Channel, service: str) -> str:
    """The gRPC health of `service` ("" for liveness, a service's full name for its readiness)."""
    stub = health_pb2_grpc.HealthStub(channel)
    response = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=2)
    return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)


async def health_is(channel: grpc.aio.Channel, service: str, status: str) -> bool:
    return await readiness(channel, service) == status


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON-like value, keys included (lists and tuples alike)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)
