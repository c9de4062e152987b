"""Import batches: opening one, binding the writes that name it, and accepting or rolling back the whole batch."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace

import asyncpg
import structlog

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_ingest.steps import Steps
from mnemo_ingest.validation import Draft, check_short
from mnemo_platform import FailedPrecondition, InvalidArgument, NotFound, current_call
from mnemo_store import AuditEvent, WorkspaceRow, append_audit_event, proposals, resolve_for_write, tombstones
from mnemo_store import imports as batches_db
from mnemo_store import memories as db

log = structlog.get_logger("mnemo.ingest")

MAX_SOURCE_CHARS = 64
MAX_ORIGIN_CHARS = 2048


@dataclass(frozen=True)
class Decided:
    """A batch after accept or rollback, and how many memories this call changed (and left alone)."""

    batch: asyncpg.Record
    changed: int
    held: int = 0
    previous_state: str = "open"
    """previous_state is the batch's state before the call (what a reversed accept puts back)."""


def parse_batch_id(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value.strip())
    except ValueError as exc:
        raise InvalidArgument(f"import batch id {value.strip()[:60]!r} is not a uuid") from exc


async def bind_to_batch(
    conn: asyncpg.Connection, ws: WorkspaceRow, draft: Draft, batches: dict[uuid.UUID, asyncpg.Record | None]
) -> Draft:
    """The draft as a member of its import batch: labelled imported and, when the batch is staged, a
    candidate. The batch must be open and of the draft's workspace; `batches` caches the rows a call read."""
    assert draft.import_batch is not None
    if draft.import_batch not in batches:
        batches[draft.import_batch] = await batches_db.find_batch(conn, draft.import_batch)
    batch = batches[draft.import_batch]
    if batch is None or batch["workspace_id"] != ws.id:
        raise _not_found(draft.import_batch, ws)
    if batch["state"] != "open":
        raise FailedPrecondition(
            f"import batch {batch['id']} was {batch['state'].replace('_', ' ')}; start a new import to add to it",
            reasons_pb.ERROR_REASON_STATUS_FORBIDS,
        )
    # Suspicious text is already a candidate; a staged batch holds the rest for review too.
    status = "candidate" if batch["staged"] else draft.status
    return replace(draft, provenance="imported", status=status)


def _not_found(batch_id: uuid.UUID, ws: WorkspaceRow) -> NotFound:
    # Another workspace's batch is answered as an unknown one: its existence is not this caller's to learn.
    return NotFound(
        f"no import batch {batch_id} in workspace {ws.name!r}", reasons_pb.ERROR_REASON_IMPORT_BATCH_NOT_FOUND
    )


def batch_proposal(batch: asyncpg.Record) -> proposals.NewProposal:
    """The proposal a staged import batch opens: accept it as a whole."""
    origin = f" ({batch['origin']})" if batch["origin"] else ""
    return proposals.NewProposal(
        workspace_id=batch["workspace_id"],
        kind="accept_batch",
        memory_ids=[],
        reason=f"staged import from {batch['source']}{origin}: accept to make its memories active",
        proposed_by="system:import",
        source="import",
        change={"batch_id": str(batch["id"])},
        dedupe_key=f"accept_batch:{batch['id']}",
    )


class ImportBatches:
    """Opening, accepting and rolling back import batches, each change audited per memory."""

    def __init__(self, pool: asyncpg.Pool, steps: Steps) -> None:
        self.pool = pool
        self.steps = steps

    async def start(self, ref: str, source: str, origin: str, staged: bool) -> asyncpg.Record:
        source_name = check_short(source, "source", MAX_SOURCE_CHARS)
        if not source_name:
            raise InvalidArgument("source is required: the tool the memories come from")
        origin_name = check_short(origin, "origin", MAX_ORIGIN_CHARS) or ""
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_for_write(conn, ref)
            row = await batches_db.insert_batch(conn, ws.id, source_name, origin_name, staged, current_call().principal)
            await append_audit_event(
                conn,
                AuditEvent(
                    ws.id,
                    "import_start",
                    details={"batch": str(row["id"]), "source": source_name, "origin": origin_name, "staged": staged},
                ),
            )
            if staged:
                await proposals.open_proposal(conn, batch_proposal(row))
        log.info("import_batch_started", batch=str(row["id"]), workspace=ws.id, source=source_name, staged=staged)
        return row

    async def _locate(self, conn: asyncpg.Connection, ws: WorkspaceRow, batch_id: uuid.UUID) -> asyncpg.Record:
        row = await batches_db.lock_batch(conn, batch_id, ws.id)
        if row is None:
            raise _not_found(batch_id, ws)
        return row

    async def _decide(self, conn: asyncpg.Connection, batch_id: uuid.UUID, state: str) -> asyncpg.Record:
        return await batches_db.decide_batch(conn, batch_id, state, current_call().principal)

    async def accept(self, ref: str, batch_id: uuid.UUID, reason: str | None) -> Decided:
        """Every candidate of the batch becomes active, except those flagged suspicious, which stay
        candidates: accepting a batch vouches for where it came from, not for text that tries to
        instruct the model (a reviewer confirms those one by one). The batch's open accept_batch
        proposal is settled: the work it waits for is done."""
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_for_write(conn, ref)
            decided, before = await self.accept_in(conn, ws, batch_id, reason)
            after = await db.fetch_memories(conn, [r["id"] for r in before])
            await proposals.settle_open(
                conn,
                ws.id,
                "accept_batch",
                [],
                current_call().principal,
                "accepted directly (AcceptImportBatch)",
                proposals.applied_record(
                    {r["id"]: r for r in before},
                    after,
                    batch={"id": str(batch_id), "state_before": decided.previous_state},
                ),
                batch_id=batch_id,
            )
        return decided

    async def accept_in(
        self, conn: asyncpg.Connection, ws: WorkspaceRow, batch_id: uuid.UUID, reason: str | None
    ) -> tuple[Decided, list[asyncpg.Record]]:
        """Accepts inside the caller's transaction; returns the decision and the memories it made
        active, as they were before."""
        batch = await self._locate(conn, ws, batch_id)
        if batch["state"] == "rolled_back":
            raise FailedPrecondition(
                f"import batch {batch_id} was rolled back; nothing of it is left to accept",
                reasons_pb.ERROR_REASON_STATUS_FORBIDS,
            )
        rows = await batches_db.batch_candidates(conn, batch_id)
        accepted = [r for r in rows if not r["suspicious"]]
        why = reason or f"import batch {batch_id} accepted"
        for row in accepted:
            await self.steps.set_status(conn, row, "active", reason=why)
            await append_audit_event(
                conn,
                AuditEvent(
                    ws.id,
                    "import_accept",
                    str(row["id"]),
                    row["version"],
                    row["content_hash"],
                    row["content_hash"],
                    {"batch": str(batch_id), "from": "candidate", "to": "active", "reason": reason},
                ),
            )
        previous_state = batch["state"]
        if batch["state"] == "open":
            batch = await self._decide(conn, batch_id, "accepted")
        log.info("import_batch_accepted", batch=str(batch_id), accepted=len(accepted), held=len(rows) - len(accepted))
        return Decided(batch, len(accepted), len(rows) - len(accepted), previous_state), accepted

    async def rollback(self, ref: str, batch_id: uuid.UUID, reason: str | None) -> Decided:
        """Erases every memory of the batch: content, versions and chunks, so no read or search finds
        them. No tombstone is left (the files they came from may be imported again once fixed); a
        memory deleted before the rollback keeps its tombstone, as a purge would keep it."""
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_for_write(conn, ref)
            batch = await self._locate(conn, ws, batch_id)
            rows = await batches_db.batch_memories(conn, batch_id)
            for row in rows:
                await db.erase_memory(conn, row["id"])
                if row["deleted_at"] is not None:
                    await tombstones.purge_tombstone(conn, row["id"])
                await append_audit_event(
                    conn,
                    AuditEvent(
                        ws.id,
                        "import_rollback",
                        str(row["id"]),
                        row["version"],
                        row["content_hash"],
                        None,
                        {"batch": str(batch_id), "reason": reason},
                    ),
                )
            if batch["state"] != "rolled_back":
                batch = await self._decide(conn, batch_id, "rolled_back")
            await proposals.settle_open(
                conn,
                ws.id,
                "accept_batch",
                [],
                current_call().principal,
                "rolled back directly (RollbackImportBatch)",
                None,
                batch_id=batch_id,
                state="rejected",
            )
        log.info("import_batch_rolled_back", batch=str(batch_id), removed=len(rows))
        return Decided(batch, len(rows))
