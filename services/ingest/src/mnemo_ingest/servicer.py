"""IngestService: every write, each in one transaction with its chunks, audit event and NOTIFY."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import structlog

from mnemo.ingest.v1 import ingest_service_pb2 as pb
from mnemo.ingest.v1 import ingest_service_pb2_grpc as pb_grpc
from mnemo_embed import Embedder, chunk_text
from mnemo_ingest.indexing import compound_parts
from mnemo_ingest.validation import (
    Draft,
    check_content,
    check_metadata,
    check_tags,
    check_title,
    check_write,
    content_hash,
)
from mnemo_platform import AlreadyExists, FailedPrecondition, NotFound, current_call
from mnemo_platform.config import IngestSettings
from mnemo_store import (
    MEMORY_COLUMNS,
    MEMORY_WITH_CONTENT,
    VISIBLE_STATUSES,
    AuditEvent,
    WorkspaceRow,
    add_workspace,
    append_audit_event,
    memory_message,
    parse_memory_id,
    resolve_workspace,
    workspace_message,
)

log = structlog.get_logger("mnemo.ingest")

EMBED_CHANNEL = "mnemo_embed"


class IngestServicer(pb_grpc.IngestServiceServicer):
    def __init__(self, pool: asyncpg.Pool, embedder: Embedder, settings: IngestSettings) -> None:
        self.pool = pool
        self.embedder = embedder
        self.settings = settings

    # -- writes ---------------------------------------------------------------------------

    async def WriteMemory(self, request: pb.WriteMemoryRequest, context: Any) -> pb.WriteMemoryResponse:
        draft = check_write(request, self.settings.max_content_bytes)
        chunks = await self._chunks(draft.title, draft.content)
        # A concurrent writer with the same source_uri or idempotency key can win the insert;
        # the second attempt then finds its row and answers as a replay or a new version.
        for attempt in range(3):
            try:
                async with self.pool.acquire() as conn, conn.transaction():
                    return await self._write(conn, request.workspace, draft, chunks)
            except asyncpg.UniqueViolationError:
                if attempt == 2:
                    raise AlreadyExists("a concurrent write with the same source_uri or idempotency key won") from None
        raise AssertionError("unreachable")

    async def _write(self, conn: asyncpg.Connection, ref: str, draft: Draft, chunks: list) -> pb.WriteMemoryResponse:
        ws = await resolve_workspace(conn, ref)
        if draft.idempotency_key:
            row = await conn.fetchrow(
                "SELECT id, content_hash FROM memories WHERE workspace_id = $1 AND idempotency_key = $2",
                ws.id,
                draft.idempotency_key,
            )
            if row is not None:
                if row["content_hash"] != draft.content_hash:
                    raise AlreadyExists(
                        f"idempotency key {draft.idempotency_key!r} was already used for memory {row['id']} "
                        "with different content; use a new key for a new write"
                    )
                return pb.WriteMemoryResponse(
                    memory=await self._fetch(conn, row["id"]), outcome=pb.WRITE_OUTCOME_REPLAYED
                )
        if draft.source_uri:
            row = await conn.fetchrow(
                """
                SELECT id, version, content_hash, title, tags, metadata FROM memories
                WHERE workspace_id = $1 AND source_uri = $2 FOR UPDATE
                """,
                ws.id,
                draft.source_uri,
            )
            if row is not None:
                if row["content_hash"] == draft.content_hash:
                    return pb.WriteMemoryResponse(
                        memory=await self._fetch(conn, row["id"]), outcome=pb.WRITE_OUTCOME_UNCHANGED
                    )
                await self._new_version(
                    conn, ws, row, draft.title, draft.content, draft.content_hash, draft.tags, draft.metadata, chunks
                )
                return pb.WriteMemoryResponse(
                    memory=await self._fetch(conn, row["id"]), outcome=pb.WRITE_OUTCOME_NEW_VERSION
                )
        memory_id = uuid.uuid4()
        author = current_call().principal
        await conn.execute(
            """
            INSERT INTO memories (id, workspace_id, kind, title, tags, metadata, source_uri, idempotency_key,
                                  status, author, provenance, version, content_hash)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'active', $9, $10, 1, $11)
            """,
            memory_id,
            ws.id,
            draft.kind,
            draft.title,
            draft.tags,
            draft.metadata,
            draft.source_uri,
            draft.idempotency_key,
            author,
            draft.provenance,
            draft.content_hash,
        )
        await conn.execute(
            """
            INSERT INTO memory_versions (memory_id, version, workspace_id, title, content, content_hash, author)
            VALUES ($1, 1, $2, $3, $4, $5, $6)
            """,
            memory_id,
            ws.id,
            draft.title,
            draft.content,
            draft.content_hash,
            author,
        )
        await self._insert_chunks(conn, memory_id, 1, ws.id, chunks)
        await append_audit_event(conn, AuditEvent(ws.id, "write", str(memory_id), 1, None, draft.content_hash))
        log.info("memory_written", memory_id=str(memory_id), workspace=ws.id, chunks=len(chunks))
        return pb.WriteMemoryResponse(memory=await self._fetch(conn, memory_id), outcome=pb.WRITE_OUTCOME_CREATED)

    async def UpdateMemory(self, request: pb.UpdateMemoryRequest, context: Any) -> pb.UpdateMemoryResponse:
        memory_id = parse_memory_id(request.id)
        content = check_content(request.content, self.settings.max_content_bytes)
        tags = check_tags(list(request.tags)) if request.replace_tags else None
        metadata = check_metadata(request.metadata) if request.HasField("metadata") else None
        new_title = check_title(request.title, content) if request.HasField("title") else None
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_workspace(conn, request.workspace)
            row = await conn.fetchrow(
                """
                SELECT id, version, content_hash, title, tags, metadata FROM memories
                WHERE id = $1 AND workspace_id = $2 AND status = ANY($3::text[]) FOR UPDATE
                """,
                memory_id,
                ws.id,
                list(VISIBLE_STATUSES),
            )
            if row is None:
                raise NotFound(f"memory {memory_id} not found in workspace {ws.name!r}")
            if request.expected_version and request.expected_version != row["version"]:
                raise FailedPrecondition(
                    f"memory {memory_id} is at version {row['version']}, not {request.expected_version}; "
                    "read it again before updating"
                )
            title = row["title"] if new_title is None else new_title
            tags = list(row["tags"]) if tags is None else tags
            metadata = row["metadata"] if metadata is None else metadata
            new_hash = content_hash(content)
            if (new_hash, title, tags, metadata) == (
                row["content_hash"],
                row["title"],
                list(row["tags"]),
                row["metadata"],
            ):
                return pb.UpdateMemoryResponse(
                    memory=await self._fetch(conn, memory_id), outcome=pb.WRITE_OUTCOME_UNCHANGED
                )
            chunks = await self._chunks(title, content)
            await self._new_version(conn, ws, row, title, content, new_hash, tags, metadata, chunks)
            return pb.UpdateMemoryResponse(
                memory=await self._fetch(conn, memory_id), outcome=pb.WRITE_OUTCOME_NEW_VERSION
            )

    async def AddWorkspace(self, request: pb.AddWorkspaceRequest, context: Any) -> pb.AddWorkspaceResponse:
        async with self.pool.acquire() as conn, conn.transaction():
            row, created = await add_workspace(conn, request.root_path, request.name)
            if created:
                await append_audit_event(conn, AuditEvent(row.id, "workspace_add"))
                log.info("workspace_added", workspace=row.id, name=row.name, root=row.root_path)
        return pb.AddWorkspaceResponse(workspace=workspace_message(row), created=created)

    # -- shared steps -------------------------------------------------------------------

    async def _chunks(self, title: str, content: str) -> list:
        # Tokenizing a 1 MiB note takes seconds: keep it off the event loop serving other calls.
        return await asyncio.to_thread(chunk_text, title, content, self.embedder.count_tokens, self.embedder.max_tokens)

    async def _new_version(
        self,
        conn: asyncpg.Connection,
        ws: WorkspaceRow,
        row: asyncpg.Record,
        title: str,
        content: str,
        new_hash: str,
        tags: list[str],
        metadata: dict,
        chunks: list,
    ) -> None:
        """Closes the open version, opens the next one with its chunks, and audits the change."""
        memory_id, old_version = row["id"], row["version"]
        version = old_version + 1
        author = current_call().principal
        await conn.execute(
            "UPDATE memory_versions SET recorded_to = now() WHERE memory_id = $1 AND version = $2",
            memory_id,
            old_version,
        )
        await conn.execute(
            """
            INSERT INTO memory_versions (memory_id, version, workspace_id, title, content, content_hash, author)
            VALUES ($1, $2, $3, $4, $5, $6, $7)
            """,
            memory_id,
            version,
            ws.id,
            title,
            content,
            new_hash,
            author,
        )
        await conn.execute(
            """
            UPDATE memories SET version = $2, title = $3, tags = $4, metadata = $5, content_hash = $6,
                                updated_at = now()
            WHERE id = $1
            """,
            memory_id,
            version,
            title,
            tags,
            metadata,
            new_hash,
        )
        await self._insert_chunks(conn, memory_id, version, ws.id, chunks)
        await append_audit_event(
            conn, AuditEvent(ws.id, "update", str(memory_id), version, row["content_hash"], new_hash)
        )
        log.info("memory_updated", memory_id=str(memory_id), version=version, chunks=len(chunks))

    async def _insert_chunks(
        self, conn: asyncpg.Connection, memory_id: uuid.UUID, version: int, workspace_id: str, chunks: list
    ) -> None:
        await conn.execute(
            """
            INSERT INTO chunks (memory_id, version, workspace_id, ordinal, context, text, parts)
            SELECT $1, $2, $3, u.ordinal, u.context, u.text, u.parts
            FROM unnest($4::int[], $5::text[], $6::text[], $7::text[]) AS u(ordinal, context, text, parts)
            """,
            memory_id,
            version,
            workspace_id,
            [c.ordinal for c in chunks],
            [c.context for c in chunks],
            [c.text for c in chunks],
            [compound_parts(c.text) for c in chunks],
        )
        # Delivered on commit: wakes the embedding workers of every ingest replica.
        await conn.execute("SELECT pg_notify($1, $2)", EMBED_CHANNEL, str(memory_id))

    async def _fetch(self, conn: asyncpg.Connection, memory_id: uuid.UUID) -> Any:
        row = await conn.fetchrow(
            f"SELECT {MEMORY_COLUMNS}, v.content FROM {MEMORY_WITH_CONTENT} WHERE m.id = $1", memory_id
        )
        return memory_message(row, with_content=True)
