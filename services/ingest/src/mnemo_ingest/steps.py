"""The steps every write-side operation is made of: locate a memory, insert one, version it, change
its status, chunk its text. Each runs inside the caller's transaction; the SQL is mnemo_store's."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import datetime

import asyncpg
import structlog

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_embed import Embedder, chunk_text
from mnemo_ingest.indexing import compound_parts
from mnemo_ingest.validation import Draft, screened
from mnemo_platform import FailedPrecondition, NotFound, current_call
from mnemo_store import GLOBAL_WORKSPACE, AuditEvent, WorkspaceRow, append_audit_event, tombstones
from mnemo_store import memories as db
from mnemo_wire import TrustSettings

log = structlog.get_logger("mnemo.ingest")

Redactions = Sequence[dict[str, str]]

# Text up to this size is chunked on the event loop (well under a millisecond); more goes to a thread.
_CHUNK_IN_PLACE_CHARS = 4096


def audit_details(redactions: Redactions, suspicious: tuple[str, ...] = ()) -> dict[str, object]:
    """Audit details of a write: what redaction removed (kind and digest, never the secret), and
    the kinds of memory poisoning the text was flagged for."""
    details: dict[str, object] = {"redactions": list(redactions)} if redactions else {}
    if suspicious:
        details["suspicious"] = list(suspicious)
    return details


class Steps:
    """The write side's building blocks, bound to the embedder (for chunking) and the trust settings."""

    def __init__(self, embedder: Embedder, trust: TrustSettings) -> None:
        self.embedder = embedder
        self.trust = trust

    def own_trust(self, suspicious: tuple[str, ...]) -> float:
        """A memory's own trust factor: lowered while its text looks like an attempt to instruct the model."""
        return self.trust.suspicious_weight if suspicious else 1.0

    async def chunks(self, title: str, content: str) -> list[db.ChunkRow]:
        return (await self.chunks_of([(title, content)]))[0]

    async def chunks_of(self, texts: list[tuple[str, str]]) -> list[list[db.ChunkRow]]:
        """The chunks of each (title, content). Tokenizing a 1 MiB note takes seconds: more than a
        few pages go to a thread, off the event loop serving other calls; a short note is chunked
        in place (a thread hop costs more than its tokenizing)."""

        def chunk_all() -> list[list[db.ChunkRow]]:
            return [
                [
                    db.ChunkRow(c.ordinal, c.context, c.text, compound_parts(c.text))
                    for c in chunk_text(title, content, self.embedder.count_tokens, self.embedder.max_tokens)
                ]
                for title, content in texts
            ]

        if sum(len(title) + len(content) for title, content in texts) <= _CHUNK_IN_PLACE_CHARS:
            return chunk_all()
        return await asyncio.to_thread(chunk_all)

    async def locate(
        self,
        conn: asyncpg.Connection,
        ws: WorkspaceRow,
        memory_id: uuid.UUID,
        statuses: tuple[str, ...] | None = None,
        verb: str = "change",
        deleted: bool = False,
    ) -> asyncpg.Record:
        """The memory, locked; NOT_FOUND (saying why) or FAILED_PRECONDITION when it cannot take `verb`."""
        row = await db.lock_memory(conn, memory_id, ws.id)
        if row is None:
            purged = await tombstones.purged_at(conn, memory_id, ws.id)
            if purged is not None:
                raise NotFound(
                    f"memory {memory_id} was purged at {purged:%Y-%m-%d %H:%M} UTC; nothing of it remains",
                    reasons_pb.ERROR_REASON_PURGED,
                )
            if ws.id != GLOBAL_WORKSPACE and await db.memory_is_in(conn, memory_id, GLOBAL_WORKSPACE):
                raise NotFound(
                    f"memory {memory_id} is not in workspace {ws.name!r} but in the shared global scope, which "
                    "every workspace reads; to change it, name workspace 'global'"
                )
            raise NotFound(f"memory {memory_id} not found in workspace {ws.name!r}")
        if row["deleted_at"] is not None and not deleted:
            raise NotFound(
                f"memory {memory_id} was deleted at {row['deleted_at']:%Y-%m-%d %H:%M} UTC; "
                f"restore it first (mnemo restore {memory_id})",
                reasons_pb.ERROR_REASON_MEMORY_DELETED,
            )
        if statuses is not None and row["status"] not in statuses:
            raise FailedPrecondition(
                f"cannot {verb} memory {memory_id}: it {db.status_phrase(row)}", db.status_reason(row)
            )
        return row

    async def refuse_tombstoned_source(self, conn: asyncpg.Connection, ws: WorkspaceRow, source_uri: str) -> None:
        """A deleted source stays deleted: no write may bring it back while its tombstone stands."""
        stone = await tombstones.standing_tombstone(conn, ws.id, source_uri)
        if stone is None:
            return
        when = f"{stone['created_at']:%Y-%m-%d %H:%M} UTC"
        if stone["purged_at"] is not None:
            raise FailedPrecondition(
                f"source {source_uri!r} was deleted by {stone['principal']} at {when} and purged: nothing from it "
                "may be written to this workspace again (write it under another source_uri if it is truly wanted)",
                reasons_pb.ERROR_REASON_TOMBSTONED,
            )
        raise FailedPrecondition(
            f"source {source_uri!r} was deleted by {stone['principal']} at {when}: writes from it are refused "
            f"while its tombstone stands; restore memory {stone['memory_id']} to bring it back",
            reasons_pb.ERROR_REASON_TOMBSTONED,
        )

    def new_memory(self, ws: WorkspaceRow, draft: Draft, chunks: list[db.ChunkRow]) -> db.NewMemory:
        """The rows a new memory is inserted as (db.insert_memories)."""
        return db.NewMemory(
            id=uuid.uuid4(),
            workspace_id=ws.id,
            kind=draft.kind,
            title=draft.title,
            content=draft.content,
            content_hash=draft.content_hash,
            tags=draft.tags,
            metadata=draft.metadata,
            source_uri=draft.source_uri,
            idempotency_key=draft.idempotency_key,
            status=draft.status,
            author=current_call().principal,
            provenance=draft.provenance,
            valid_from=draft.valid_from,
            valid_to=draft.valid_to,
            suspicious=draft.suspicious,
            trust=self.own_trust(draft.suspicious),
            chunks=chunks,
            import_batch=draft.import_batch,
        )

    async def insert(
        self, conn: asyncpg.Connection, ws: WorkspaceRow, draft: Draft, chunks: list[db.ChunkRow]
    ) -> tuple[db.NewMemory, asyncpg.Record]:
        """The memory, its first version, its first status span and its chunks; no audit event.
        Returns what was inserted and the memory as a read returns it."""
        new = self.new_memory(ws, draft, chunks)
        rows = await db.insert_memories(conn, [new])
        return new, rows[new.id]

    async def new_version(
        self,
        conn: asyncpg.Connection,
        row: asyncpg.Record,
        title: str,
        content: str,
        content_hash: str,
        tags: list[str],
        metadata: dict,
        chunks: list[db.ChunkRow],
        redactions: Redactions = (),
        before_hash: str | None = None,
    ) -> int:
        """Closes the open version, opens the next one with its chunks, and audits the change; returns it."""
        memory_id, version = row["id"], row["version"] + 1
        suspicious = screened(title, content)
        await db.insert_version(
            conn,
            memory_id,
            row["workspace_id"],
            version,
            db.NewVersion(
                title=title,
                content=content,
                content_hash=content_hash,
                tags=tags,
                metadata=metadata,
                author=current_call().principal,
                suspicious=suspicious,
                trust=self.own_trust(suspicious),
            ),
        )
        await db.insert_chunks(conn, [db.VersionChunks(memory_id, version, row["workspace_id"], chunks)])
        await append_audit_event(
            conn,
            AuditEvent(
                row["workspace_id"],
                "update",
                str(memory_id),
                version,
                before_hash or row["content_hash"],
                content_hash,
                audit_details(redactions, suspicious),
            ),
        )
        log.info("memory_updated", memory_id=str(memory_id), version=version, chunks=len(chunks))
        return version

    async def set_status(
        self,
        conn: asyncpg.Connection,
        row: asyncpg.Record,
        status: str,
        reason: str | None = None,
        superseded_by: uuid.UUID | None = None,
        valid_to: datetime | None = None,
    ) -> None:
        await db.set_status(conn, row, status, reason, current_call().principal, superseded_by, valid_to)

    async def supersede(
        self,
        conn: asyncpg.Connection,
        old: asyncpg.Record,
        successor: uuid.UUID,
        successor_hash: str,
        reason: str | None,
        valid_to: datetime | None = None,
    ) -> None:
        """Marks `old` superseded by `successor` and records it in the workspace's audit chain."""
        await self.set_status(conn, old, "superseded", reason=reason, superseded_by=successor, valid_to=valid_to)
        await append_audit_event(
            conn,
            AuditEvent(
                old["workspace_id"],
                "supersede",
                str(old["id"]),
                old["version"],
                old["content_hash"],
                successor_hash,
                {"successor": str(successor), "reason": reason},
            ),
        )
