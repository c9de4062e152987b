"""Corrections: supersede, promote, retract, confirm, delete, restore and purge, each one transaction
with its audit event."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace

import asyncpg
import structlog

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_ingest.steps import Steps
from mnemo_ingest.validation import Draft
from mnemo_platform import AlreadyExists, FailedPrecondition, InvalidArgument, current_call
from mnemo_store import (
    GLOBAL_WORKSPACE,
    VISIBLE_STATUSES,
    AuditEvent,
    WorkspaceRow,
    append_audit_event,
    proposals,
    resolve_for_write,
    tombstones,
)
from mnemo_store import memories as db

log = structlog.get_logger("mnemo.ingest")


@dataclass(frozen=True)
class Pair:
    """The two memories a supersede or promotion leaves: the one changed and the one it points to."""

    old: asyncpg.Record
    new: asyncpg.Record


class Corrections:
    """Every change to what a memory is taken to be, rather than to its text."""

    def __init__(self, pool: asyncpg.Pool, steps: Steps) -> None:
        self.pool = pool
        self.steps = steps

    async def supersede(
        self, ref: str, old_id: uuid.UUID, draft: Draft, reason: str | None, restated: tuple[bool, bool]
    ) -> Pair:
        """Writes the successor and marks the old memory superseded; `restated` says whether the
        caller gave the successor's kind and tags (otherwise it inherits the old ones)."""
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_for_write(conn, ref)
            old = await self.steps.locate(conn, ws, old_id, statuses=VISIBLE_STATUSES, verb="supersede")
            kind_given, tags_given = restated
            draft = replace(
                draft,
                kind=draft.kind if kind_given else old["kind"],
                tags=draft.tags if tags_given else list(old["tags"]),
            )
            if draft.valid_from and old["valid_from"] and draft.valid_from <= old["valid_from"]:
                raise InvalidArgument(
                    f"the successor's valid_from ({draft.valid_from.isoformat()}) must be after the old belief's "
                    f"({old['valid_from'].isoformat()}): a belief cannot end before it began"
                )
            if draft.source_uri:
                await self.steps.refuse_tombstoned_source(conn, ws, draft.source_uri)
                owner = await db.lock_by_source(conn, ws.id, draft.source_uri)
                if owner is not None:
                    raise AlreadyExists(
                        f"source_uri {draft.source_uri!r} already belongs to memory {owner['id']}; a source has one "
                        "memory, so write the successor without it (or update that memory)"
                    )
            chunks = await self.steps.chunks(draft.title, draft.content)
            new_id = (await self.steps.insert(conn, ws, draft, chunks))[0].id
            ended = draft.valid_from or await conn.fetchval("SELECT now()")
            await self.steps.supersede(conn, old, new_id, draft.content_hash, reason, valid_to=ended)
            log.info("memory_superseded", memory_id=str(old_id), successor=str(new_id))
            return Pair(await db.fetch_memory(conn, old_id), await db.fetch_memory(conn, new_id))

    async def promote(self, ref: str, old_id: uuid.UUID, reason: str) -> Pair:
        """Copies a memory into global (the copy is `new`) and supersedes the original (`old`)."""
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_for_write(conn, ref)
            new_id = await self.promote_in(conn, ws, old_id, reason)
            return Pair(await db.fetch_memory(conn, old_id), await db.fetch_memory(conn, new_id))

    async def promote_in(self, conn: asyncpg.Connection, ws: WorkspaceRow, old_id: uuid.UUID, reason: str) -> uuid.UUID:
        """Promotes inside the caller's transaction; returns the global copy's id."""
        if ws.id == GLOBAL_WORKSPACE:
            raise FailedPrecondition(f"memory {old_id} is already in global", reasons_pb.ERROR_REASON_ALREADY_EXISTS)
        shared = await resolve_for_write(conn, GLOBAL_WORKSPACE)
        old = await self.steps.locate(conn, ws, old_id, statuses=VISIBLE_STATUSES, verb="promote")
        if old["suspicious"] and old["status"] != "confirmed":
            raise FailedPrecondition(
                f"memory {old_id} is flagged suspicious ({', '.join(old['suspicious'])}): it tries to instruct "
                "the model. A reviewer must confirm it before it can be promoted to global"
            )
        draft = Draft(
            kind=old["kind"],
            title=old["title"],
            content=await db.version_content(conn, old_id, old["version"]),
            content_hash=old["content_hash"],
            tags=list(old["tags"]),
            # The original's id, never its workspace: every token reads global, and the name of a
            # workspace is not theirs to learn. The original's own audit chain links the copy.
            metadata={**old["metadata"], "promoted_from": str(old_id)},
            source_uri=None,
            idempotency_key=None,
            provenance=old["provenance"],
            valid_from=old["valid_from"],
        )
        chunks = await self.steps.chunks(draft.title, draft.content)
        new_id = (await self.steps.insert(conn, shared, draft, chunks))[0].id
        await append_audit_event(
            conn,
            AuditEvent(
                shared.id,
                "promote",
                str(new_id),
                1,
                None,
                draft.content_hash,
                {"from_memory": str(old_id), "reason": reason},
            ),
        )
        # The belief still holds (its valid time stays open): it has moved, not ended.
        await self.steps.supersede(conn, old, new_id, draft.content_hash, f"promoted to global: {reason}")
        log.info("memory_promoted", memory_id=str(old_id), promoted=str(new_id), workspace=ws.id)
        return new_id

    async def retract(self, ref: str, memory_id: uuid.UUID, reason: str) -> asyncpg.Record:
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_for_write(conn, ref)
            await self.retract_in(conn, ws, memory_id, reason)
            return await db.fetch_memory(conn, memory_id)

    async def retract_in(
        self, conn: asyncpg.Connection, ws: WorkspaceRow, memory_id: uuid.UUID, reason: str
    ) -> asyncpg.Record:
        """Retracts inside the caller's transaction; returns the memory as it was before."""
        row = await self.steps.locate(conn, ws, memory_id, statuses=VISIBLE_STATUSES, verb="retract")
        await self.steps.set_status(conn, row, "retracted", reason=reason)
        await append_audit_event(
            conn,
            AuditEvent(
                ws.id,
                "retract",
                str(memory_id),
                row["version"],
                row["content_hash"],
                row["content_hash"],
                {"reason": reason},
            ),
        )
        return row

    async def confirm(self, ref: str, memory_id: uuid.UUID, reason: str | None) -> tuple[asyncpg.Record, bool]:
        """Confirms a memory; returns it and whether anything changed (confirming twice is a no-op).
        The open proposals to confirm it are settled: the work they wait for is done."""
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_for_write(conn, ref)
            before = await self.confirm_in(conn, ws, memory_id, reason)
            after = await db.fetch_memory(conn, memory_id)
            await proposals.settle_open(
                conn,
                ws.id,
                "confirm",
                [memory_id],
                current_call().principal,
                "confirmed directly (ConfirmMemory)",
                proposals.applied_record({memory_id: before}, {memory_id: after}),
            )
            return after, before["status"] != "confirmed"

    async def confirm_in(
        self, conn: asyncpg.Connection, ws: WorkspaceRow, memory_id: uuid.UUID, reason: str | None
    ) -> asyncpg.Record:
        """Confirms inside the caller's transaction; returns the memory as it was before (a memory
        already confirmed is left as it is)."""
        row = await self.steps.locate(conn, ws, memory_id, statuses=VISIBLE_STATUSES, verb="confirm")
        if row["status"] == "confirmed":
            return row
        await self.steps.set_status(conn, row, "confirmed", reason=reason)
        await append_audit_event(
            conn,
            AuditEvent(
                ws.id,
                "confirm",
                str(memory_id),
                row["version"],
                row["content_hash"],
                row["content_hash"],
                {"reason": reason, "from": row["status"]},
            ),
        )
        return row

    async def delete(self, ref: str, memory_id: uuid.UUID, reason: str) -> asyncpg.Record:
        """Takes the memory off every read path and leaves a tombstone on its source; returns the tombstone."""
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_for_write(conn, ref)
            return await self.delete_in(conn, ws, memory_id, reason)

    async def delete_in(
        self, conn: asyncpg.Connection, ws: WorkspaceRow, memory_id: uuid.UUID, reason: str
    ) -> asyncpg.Record:
        """Deletes inside the caller's transaction; returns the tombstone."""
        row = await self.steps.locate(conn, ws, memory_id, verb="delete", deleted=True)
        tombstone = await self._tombstone(conn, row, reason)
        await append_audit_event(
            conn,
            AuditEvent(ws.id, "delete", str(memory_id), row["version"], row["content_hash"], None, {"reason": reason}),
        )
        log.info("memory_deleted", memory_id=str(memory_id), workspace=ws.id)
        return tombstone

    async def restore(self, ref: str, memory_id: uuid.UUID) -> asyncpg.Record:
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_for_write(conn, ref)
            await self.restore_in(conn, ws, memory_id)
            return await db.fetch_memory(conn, memory_id)

    async def restore_in(self, conn: asyncpg.Connection, ws: WorkspaceRow, memory_id: uuid.UUID) -> asyncpg.Record:
        """Restores inside the caller's transaction; returns the memory as it was before (deleted)."""
        row = await self.steps.locate(conn, ws, memory_id, deleted=True)
        if row["deleted_at"] is None:
            raise FailedPrecondition(f"memory {memory_id} is not deleted; there is nothing to restore")
        tombstone = await tombstones.lift_tombstone(conn, memory_id)
        if tombstone is None:
            raise FailedPrecondition(f"memory {memory_id} has no standing tombstone to restore from")
        await db.mark_deleted(conn, memory_id, deleted=False)
        await append_audit_event(
            conn,
            AuditEvent(
                ws.id,
                "restore",
                str(memory_id),
                row["version"],
                None,
                row["content_hash"],
                {"status": tombstone["snapshot"]["status"]},
            ),
        )
        log.info("memory_restored", memory_id=str(memory_id), workspace=ws.id)
        return row

    async def purge(self, ref: str, memory_id: uuid.UUID, reason: str | None, force: bool) -> asyncpg.Record:
        """Erases the content and every version for good, keeping only the tombstone's key; returns it."""
        if not force:
            raise FailedPrecondition(
                "purge erases the content and every version for good and cannot be undone; pass force=true "
                "(CLI: --force). To hide a memory reversibly, delete it instead",
                reasons_pb.ERROR_REASON_FORCE_REQUIRED,
            )
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_for_write(conn, ref)
            row = await self.steps.locate(conn, ws, memory_id, deleted=True)
            if row["deleted_at"] is None:
                await self._tombstone(conn, row, reason or "purged")
            await db.erase_memory(conn, memory_id)
            tombstone = await tombstones.purge_tombstone(conn, memory_id)
            await append_audit_event(
                conn, AuditEvent(ws.id, "purge", str(memory_id), row["version"], row["content_hash"], None)
            )
            log.info("memory_purged", memory_id=str(memory_id), workspace=ws.id)
            return tombstone

    async def _tombstone(self, conn: asyncpg.Connection, row: asyncpg.Record, reason: str | None) -> asyncpg.Record:
        if row["deleted_at"] is not None:
            raise FailedPrecondition(f"memory {row['id']} is already deleted", reasons_pb.ERROR_REASON_MEMORY_DELETED)
        snapshot = {
            "status": row["status"],
            "status_reason": row["status_reason"],
            "version": row["version"],
            "kind": row["kind"],
            "title": row["title"],
            "tags": list(row["tags"]),
        }
        await db.mark_deleted(conn, row["id"], deleted=True)
        return await tombstones.insert_tombstone(conn, row, snapshot, reason, current_call().principal)
