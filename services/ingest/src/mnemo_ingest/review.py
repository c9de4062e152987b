"""Review: proposing a change, and deciding it: accept (applied in one transaction through the
corrections' own steps), reject, or reverse an applied one as new audited events (docs/review.md)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
import structlog

from mnemo.common.v1 import common_pb2
from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo.ingest.v1 import ingest_service_pb2 as pb
from mnemo_ingest.corrections import Corrections
from mnemo_ingest.imports import ImportBatches, parse_batch_id
from mnemo_ingest.steps import Steps, audit_details
from mnemo_ingest.validation import check_reason, check_short, check_write
from mnemo_ingest.writes import candidate_proposal
from mnemo_platform import FailedPrecondition, InvalidArgument, NotFound, current_call, enum_label
from mnemo_store import (
    VISIBLE_STATUSES,
    AuditEvent,
    WorkspaceRow,
    append_audit_event,
    caller_reach,
    check_access,
    proposals,
    resolve_for_write,
    resolve_registered,
)
from mnemo_store import imports as batches_db
from mnemo_store import memories as db
from mnemo_wire import struct

log = structlog.get_logger("mnemo.ingest")

# What a caller may say proposed a change; the other sources are the services' own.
CALLER_SOURCES = ("agent", "human")
# The `change` fields each kind takes from a caller (docs/review.md).
CHANGE_FIELDS: dict[str, frozenset[str]] = {
    "confirm": frozenset(),
    "retract": frozenset(),
    "promote": frozenset(),
    "restore": frozenset(),
    "supersede": frozenset({"successor_id"}),
    "merge": frozenset({"merged_text", "merged_title"}),
    "accept_batch": frozenset({"batch_id"}),
}
MAX_MERGED = 50
MAX_DEDUPE_KEY_CHARS = 200


@dataclass(frozen=True)
class Asked:
    """A ProposeChange request as domain values, checked."""

    kind: str
    memory_ids: list[uuid.UUID]
    change: dict[str, Any]
    reason: str
    source: str
    dedupe_key: str | None


@dataclass(frozen=True)
class Decision:
    """A proposal after a decision, and the memories it touched or wrote, as they now are."""

    proposal: asyncpg.Record
    memories: list[asyncpg.Record] = field(default_factory=list)


def parse_proposal_id(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value.strip())
    except (ValueError, AttributeError):
        raise InvalidArgument(f"proposal id {value.strip()[:60]!r} is not a uuid") from None


def _ids(values: list[str], field_name: str) -> list[uuid.UUID]:
    ids: list[uuid.UUID] = []
    for value in values:
        try:
            ids.append(uuid.UUID(value.strip()))
        except ValueError:
            raise InvalidArgument(f"{field_name} {value.strip()[:60]!r} is not a memory id (a uuid)") from None
    if len(set(ids)) != len(ids):
        raise InvalidArgument(f"{field_name} names a memory twice")
    return ids


def check_proposal(request: pb.ProposeChangeRequest, max_content_bytes: int) -> Asked:
    """Validates what a caller proposes: the kind, its memories and its `change` fields, the reason,
    and a source a caller may claim."""
    try:
        kind = enum_label(common_pb2.ProposalKind, request.kind)
    except ValueError:
        kind = ""
    if not kind:
        raise InvalidArgument(f"kind must be one of {', '.join(CHANGE_FIELDS)}")
    try:
        source = enum_label(common_pb2.ProposalSource, request.source) or "agent"
    except ValueError:
        source = ""
    if source not in CALLER_SOURCES:
        raise InvalidArgument(
            f"source must be {' or '.join(CALLER_SOURCES)}; the other sources are set by Mnemo's own jobs"
        )
    reason = check_reason(request.reason, required=True)
    assert reason is not None
    change = dict(request.change) if request.HasField("change") else {}
    unknown = sorted(set(change) - CHANGE_FIELDS[kind])
    if unknown:
        allowed = ", ".join(sorted(CHANGE_FIELDS[kind])) or "none"
        raise InvalidArgument(f"change field(s) {', '.join(unknown)} do not apply to {kind} (it takes: {allowed})")
    ids = _ids(list(request.memory_ids), "memory_ids")
    checked: dict[str, Any] = {}
    if kind in ("confirm", "retract", "promote", "restore"):
        if len(ids) != 1:
            raise InvalidArgument(f"a {kind} proposal names exactly one memory; got {len(ids)}")
    elif kind == "supersede":
        if "successor_id" in change:
            ids += _ids([str(change["successor_id"])], "change.successor_id")
        if len(ids) != 2 or ids[0] == ids[1]:
            raise InvalidArgument(
                "a supersede proposal names the old memory and its successor: memory_ids [old, successor] "
                "(or [old] and change.successor_id)"
            )
        checked["successor_id"] = str(ids[1])
    elif kind == "merge":
        if not 2 <= len(ids) <= MAX_MERGED:
            raise InvalidArgument(
                f"a merge proposal names 2 to {MAX_MERGED} memories, the one to keep first; got {len(ids)}"
            )
        if "merged_text" in change:
            text = change["merged_text"]
            if not isinstance(text, str):
                raise InvalidArgument("change.merged_text must be a string")
            title = change.get("merged_title", "")
            if not isinstance(title, str):
                raise InvalidArgument("change.merged_title must be a string")
            # Checked as the write it becomes (size, redaction): what is stored is what was checked.
            draft = check_write(pb.WriteMemoryRequest(title=title, content=text), max_content_bytes)
            checked["merged_text"] = draft.content
            if title.strip():
                checked["merged_title"] = draft.title
        elif "merged_title" in change:
            raise InvalidArgument("change.merged_title goes with change.merged_text")
    elif kind == "accept_batch":
        if ids:
            raise InvalidArgument("an accept_batch proposal names no memories; its batch is change.batch_id")
        checked["batch_id"] = str(parse_batch_id(str(change.get("batch_id", ""))))
    key = check_short(request.dedupe_key, "dedupe_key", MAX_DEDUPE_KEY_CHARS)
    # A caller's keys live apart from the services' own (`confirm:<id>`, `accept_batch:<id>`).
    return Asked(kind, ids, checked, reason, source, f"caller:{key}" if key else None)


def _stamp(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _describe(row: asyncpg.Record | None, memory_id: str) -> str:
    if row is None:
        return f"memory {memory_id} no longer exists"
    if row["deleted_at"] is not None:
        return f"memory {memory_id} is deleted"
    return f"memory {memory_id} {db.status_phrase(row)} at version {row['version']}"


class Review:
    """Proposals, and the decisions on them."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        steps: Steps,
        corrections: Corrections,
        imports: ImportBatches,
        max_content_bytes: int,
    ) -> None:
        self.pool = pool
        self.steps = steps
        self.corrections = corrections
        self.imports = imports
        self.max_content_bytes = max_content_bytes

    async def propose(self, ref: str, asked: Asked) -> tuple[asyncpg.Record, bool]:
        """Opens the proposal (or answers the earlier one with its dedupe_key), in a workspace the
        caller may write: a proposal's reason is read by that workspace's reviewers, so an agent
        cannot reach beyond its own workspaces through one (global's reviewers included)."""
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_for_write(conn, ref)
            await self._check_targets(conn, ws, asked)
            row, created = await proposals.open_proposal(
                conn,
                proposals.NewProposal(
                    workspace_id=ws.id,
                    kind=asked.kind,
                    memory_ids=asked.memory_ids,
                    reason=asked.reason,
                    proposed_by=current_call().principal,
                    source=asked.source,
                    change=asked.change,
                    dedupe_key=asked.dedupe_key,
                ),
            )
        if created:
            log.info("proposal_opened", proposal_id=str(row["id"]), kind=asked.kind, workspace=ws.id)
        return row, created

    async def _check_targets(self, conn: asyncpg.Connection, ws: WorkspaceRow, asked: Asked) -> None:
        for memory_id in asked.memory_ids:
            row = await conn.fetchrow(
                "SELECT id, status, superseded_by, deleted_at FROM memories WHERE id = $1 AND workspace_id = $2",
                memory_id,
                ws.id,
            )
            if row is None:
                raise NotFound(f"memory {memory_id} not found in workspace {ws.name!r}")
            if asked.kind == "restore":
                if row["deleted_at"] is None:
                    raise FailedPrecondition(f"memory {memory_id} is not deleted; there is nothing to restore")
                continue
            if row["deleted_at"] is not None:
                raise NotFound(
                    f"memory {memory_id} is deleted; propose restoring it first", reasons_pb.ERROR_REASON_MEMORY_DELETED
                )
            if row["status"] not in VISIBLE_STATUSES:
                raise FailedPrecondition(
                    f"cannot propose to {asked.kind} memory {memory_id}: it {db.status_phrase(row)}",
                    db.status_reason(row),
                )
        if asked.kind == "accept_batch":
            batch_id = uuid.UUID(asked.change["batch_id"])
            batch = await batches_db.find_batch(conn, batch_id)
            if batch is None or batch["workspace_id"] != ws.id:
                raise NotFound(
                    f"no import batch {batch_id} in workspace {ws.name!r}",
                    reasons_pb.ERROR_REASON_IMPORT_BATCH_NOT_FOUND,
                )
            if not batch["staged"] or batch["state"] != "open":
                what = "not staged" if not batch["staged"] else batch["state"].replace("_", " ")
                raise FailedPrecondition(f"import batch {batch_id} is {what}: there is nothing to accept")

    async def _locate(
        self, conn: asyncpg.Connection, ref: str, proposal_id: uuid.UUID, lock: bool = True
    ) -> tuple[asyncpg.Record, WorkspaceRow]:
        """The proposal (locked unless `lock` is False) and its workspace. One in a workspace the
        caller cannot reach is answered exactly as an unknown one: its existence is not the caller's to learn."""
        if ref.strip():
            named = await resolve_for_write(conn, ref)
            reach: tuple[str, ...] | None = (named.id,)
            where = f"workspace {named.name!r}"
        else:
            reach = caller_reach().ids
            where = "the workspaces this token reaches"
        row = await conn.fetchrow(f"SELECT * FROM proposals WHERE id = $1{' FOR UPDATE' if lock else ''}", proposal_id)
        if row is None or (reach is not None and row["workspace_id"] not in reach):
            raise NotFound(f"no proposal {proposal_id} in {where}")
        ws = await resolve_registered(conn, row["workspace_id"])
        check_access(ws.id, write=True, named=ws.name)
        return row, ws

    async def _lock_targets(self, conn: asyncpg.Connection, ref: str, proposal_id: uuid.UUID) -> list[uuid.UUID]:
        """Locks what a decision will change before the proposal itself, in the order a direct
        correction takes them (its batch, its memories, then the proposal it settles), so the two
        never wait on each other in a cycle. Returns the memories locked."""
        peeked, _ = await self._locate(conn, ref, proposal_id, lock=False)
        if peeked["kind"] == "accept_batch" and "batch_id" in peeked["change"]:
            await conn.execute(
                "SELECT 1 FROM import_batches WHERE id = $1::uuid FOR UPDATE", str(peeked["change"]["batch_id"])
            )
        ids = list(peeked["memory_ids"])
        ids += [uuid.UUID(e["id"]) for e in (peeked["applied"] or {}).get("memories", [])]
        ids += [uuid.UUID(i) for i in (peeked["applied"] or {}).get("written", [])]
        ids = sorted(set(ids))
        await conn.execute("SELECT 1 FROM memories WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE", ids)
        return ids

    @staticmethod
    def _require(row: asyncpg.Record, state: str, verb: str) -> None:
        if row["state"] != state:
            by = f" by {row['decided_by']}" if row["decided_by"] and row["state"] in ("applied", "rejected") else ""
            raise FailedPrecondition(
                f"cannot {verb} proposal {row['id']}: it is {row['state']}{by}; only an {state} proposal can be"
                f" {'accepted or rejected' if state == 'open' else 'reversed'}"
            )

    async def _refuse_stale(self, conn: asyncpg.Connection, row: asyncpg.Record) -> None:
        """Refuses a proposal whose memories (or batch) changed since it was made, naming what changed."""
        ids = list(row["memory_ids"])
        if row["kind"] == "accept_batch":
            batch = await batches_db.find_batch(conn, uuid.UUID(row["change"]["batch_id"]))
            if batch is None or batch["state"] != "open":
                state = "erased" if batch is None else batch["state"].replace("_", " ")
                raise FailedPrecondition(
                    f"proposal {row['id']} is stale: import batch {row['change']['batch_id']} was {state} since it "
                    "was proposed; reject it",
                    reasons_pb.ERROR_REASON_VERSION_CONFLICT,
                )
        if await proposals.fingerprint(conn, ids) == row["fingerprint"]:
            return
        events = await conn.fetch(
            """
            SELECT memory_id, action, principal FROM audit_events
            WHERE memory_id = ANY($1::uuid[]) AND workspace_id = $3
              AND id > (SELECT coalesce(max(id), 0) FROM audit_events
                        WHERE workspace_id = $3 AND action = 'propose' AND details ->> 'proposal_id' = $2)
              AND action NOT IN ('propose', 'accept', 'reject', 'reverse')
            ORDER BY id
            """,
            ids,
            str(row["id"]),
            row["workspace_id"],
        )
        now = await db.fetch_memories(conn, ids)
        changes = [f"{e['action']} of memory {e['memory_id']} by {e['principal']}" for e in events]
        changes += [_describe(now.get(i), str(i)) + " now" for i in ids]
        raise FailedPrecondition(
            f"proposal {row['id']} is stale: its memories changed since it was proposed ({'; '.join(changes)}). "
            "Reject it, and propose again if the change still makes sense",
            reasons_pb.ERROR_REASON_VERSION_CONFLICT,
        )

    async def accept(self, ref: str, proposal_id: uuid.UUID, reason: str | None) -> Decision:
        """Applies an open proposal in one transaction, through the corrections' steps: either all
        of it holds, with every audit event, or nothing does."""
        principal = current_call().principal
        async with self.pool.acquire() as conn, conn.transaction():
            await self._lock_targets(conn, ref, proposal_id)
            row, ws = await self._locate(conn, ref, proposal_id)
            self._require(row, "open", "accept")
            ids = list(row["memory_ids"])
            await self._refuse_stale(conn, row)
            before = await db.fetch_memories(conn, ids)
            why = f"proposal {proposal_id}: {reason or row['reason']}"
            written, extra = await self._apply(conn, ws, row, why)
            if row["kind"] == "accept_batch":
                touched = [uuid.UUID(i) for i in extra.pop("touched")]
                before = extra.pop("before")
            else:
                touched = ids
            after = await db.fetch_memories(conn, [*touched, *written])
            applied = proposals.applied_record(before, after, written, **extra)
            decided = await proposals.decide(conn, proposal_id, "applied", principal, reason, applied)
            await append_audit_event(
                conn,
                AuditEvent(
                    ws.id,
                    "accept",
                    str(ids[0]) if len(ids) == 1 else None,
                    details={"proposal_id": str(proposal_id), "kind": row["kind"], "reason": reason, **applied},
                ),
            )
        log.info("proposal_accepted", proposal_id=str(proposal_id), kind=row["kind"], written=len(written))
        return Decision(decided, [after[i] for i in after])

    async def _apply(
        self, conn: asyncpg.Connection, ws: WorkspaceRow, row: asyncpg.Record, why: str
    ) -> tuple[list[uuid.UUID], dict[str, Any]]:
        """Carries out the change; returns the memories it wrote and what else `applied` records."""
        kind, ids, change = row["kind"], list(row["memory_ids"]), row["change"]
        if kind == "confirm":
            await self.corrections.confirm_in(conn, ws, ids[0], why)
        elif kind == "retract":
            await self.corrections.retract_in(conn, ws, ids[0], why)
        elif kind == "restore":
            await self.corrections.restore_in(conn, ws, ids[0])
        elif kind == "promote":
            return [await self.corrections.promote_in(conn, ws, ids[0], why)], {}
        elif kind == "supersede":
            old = await self.steps.locate(conn, ws, ids[0], statuses=VISIBLE_STATUSES, verb="supersede")
            successor = await self.steps.locate(conn, ws, ids[1], statuses=VISIBLE_STATUSES, verb="supersede with")
            ended = await conn.fetchval("SELECT now()")
            await self.steps.supersede(conn, old, successor["id"], successor["content_hash"], why, valid_to=ended)
        elif kind == "merge":
            return await self._merge(conn, ws, row, why), {}
        elif kind == "accept_batch":
            batch_id = uuid.UUID(change["batch_id"])
            decided, accepted = await self.imports.accept_in(conn, ws, batch_id, why)
            return [], {
                "batch": {"id": str(batch_id), "state_before": decided.previous_state},
                "touched": [str(r["id"]) for r in accepted],
                "before": {r["id"]: r for r in accepted},
            }
        else:
            raise FailedPrecondition(f"proposal {row['id']} is of kind {kind!r}, which this service cannot apply")
        return [], {}

    async def _merge(
        self, conn: asyncpg.Connection, ws: WorkspaceRow, row: asyncpg.Record, why: str
    ) -> list[uuid.UUID]:
        """Without merged text, keeps the first memory and supersedes the others by it; with it,
        writes the merged memory (provenance consolidated) and supersedes them all by it. The
        merged belief still holds, so valid time stays open."""
        ids = list(row["memory_ids"])
        located = [await self.steps.locate(conn, ws, i, statuses=VISIBLE_STATUSES, verb="merge") for i in ids]
        text = row["change"].get("merged_text")
        if not text:
            keep, others = located[0], located[1:]
            for other in others:
                await self.steps.supersede(
                    conn, other, keep["id"], keep["content_hash"], f"merged into {keep['id']}: {why}"
                )
            return []
        first = located[0]
        request = pb.WriteMemoryRequest(
            title=row["change"].get("merged_title") or first["title"],
            content=text,
            tags=list(dict.fromkeys(tag for r in located for tag in r["tags"])),
            provenance=common_pb2.PROVENANCE_CONSOLIDATED,
        )
        request.kind = common_pb2.MemoryKind.Value(f"MEMORY_KIND_{first['kind'].upper()}")
        request.metadata.CopyFrom(struct({"merged_from": [str(i) for i in ids], "proposal_id": str(row["id"])}))
        draft = check_write(request, self.max_content_bytes)
        chunks = await self.steps.chunks(draft.title, draft.content)
        new, _ = await self.steps.insert(conn, ws, draft, chunks)
        details = {**audit_details(draft.redactions, draft.suspicious), "merged_from": [str(i) for i in ids]}
        await append_audit_event(
            conn,
            AuditEvent(
                ws.id, "write", str(new.id), 1, None, new.content_hash, {**details, "proposal_id": str(row["id"])}
            ),
        )
        flagged = candidate_proposal(new.id, ws.id, draft)
        if flagged is not None:  # merged text the screen flags waits for its own confirmation
            await proposals.open_proposal(conn, flagged)
        for old in located:
            await self.steps.supersede(conn, old, new.id, new.content_hash, f"merged into {new.id}: {why}")
        return [new.id]

    async def reject(self, ref: str, proposal_id: uuid.UUID, reason: str) -> asyncpg.Record:
        async with self.pool.acquire() as conn, conn.transaction():
            row, ws = await self._locate(conn, ref, proposal_id)
            self._require(row, "open", "reject")
            decided = await proposals.decide(conn, proposal_id, "rejected", current_call().principal, reason)
            ids = list(row["memory_ids"])
            await append_audit_event(
                conn,
                AuditEvent(
                    ws.id,
                    "reject",
                    str(ids[0]) if len(ids) == 1 else None,
                    details={"proposal_id": str(proposal_id), "kind": row["kind"], "reason": reason},
                ),
            )
        log.info("proposal_rejected", proposal_id=str(proposal_id), kind=row["kind"])
        return decided

    async def reverse(self, ref: str, proposal_id: uuid.UUID, reason: str) -> Decision:
        """Undoes an applied proposal as new events: each memory it changed goes back to its status
        before (a new status span; history keeps both), a memory it wrote is retracted, a restore is
        deleted again, an accepted batch is back in review. Refused when any of them changed since."""
        principal = current_call().principal
        async with self.pool.acquire() as conn, conn.transaction():
            await self._lock_targets(conn, ref, proposal_id)
            row, ws = await self._locate(conn, ref, proposal_id)
            self._require(row, "applied", "reverse")
            applied = row["applied"] or {}
            entries = applied.get("memories", [])
            ids = [uuid.UUID(e["id"]) for e in entries]
            now = await db.fetch_memories(conn, ids)
            moved = [
                _describe(now.get(uuid.UUID(e["id"])), e["id"])
                for e in entries
                if uuid.UUID(e["id"]) not in now or proposals.snapshot(now[uuid.UUID(e["id"])]) != e["after"]
            ]
            if moved:
                raise FailedPrecondition(
                    f"cannot reverse proposal {proposal_id}: its memories changed since it was applied "
                    f"({'; '.join(moved)}). Correct them directly instead",
                    reasons_pb.ERROR_REASON_VERSION_CONFLICT,
                )
            why = f"proposal {proposal_id} reversed: {reason}"
            for entry in entries:
                await self._put_back(conn, ws, now[uuid.UUID(entry["id"])], entry, proposal_id, why)
            batch = applied.get("batch")
            if batch and batch.get("state_before") == "open":
                await batches_db.reopen_batch(conn, uuid.UUID(batch["id"]))
            reversed_row = await proposals.mark_reversed(conn, proposal_id, principal, reason)
            memory_ids = list(row["memory_ids"])
            await append_audit_event(
                conn,
                AuditEvent(
                    ws.id,
                    "reverse",
                    str(memory_ids[0]) if len(memory_ids) == 1 else None,
                    details={"proposal_id": str(proposal_id), "kind": row["kind"], "reason": reason},
                ),
            )
            after = await db.fetch_memories(conn, ids)
        log.info("proposal_reversed", proposal_id=str(proposal_id), kind=row["kind"])
        return Decision(reversed_row, [after[i] for i in ids if i in after])

    async def _put_back(
        self,
        conn: asyncpg.Connection,
        ws: WorkspaceRow,
        memory: asyncpg.Record,
        entry: dict[str, Any],
        proposal_id: uuid.UUID,
        why: str,
    ) -> None:
        before, after = entry["before"], entry["after"]
        if before == after:
            return
        if before is None:
            # Written by the decision (a merged memory, a promoted copy): it is withdrawn, kept in history.
            target: dict[str, Any] = {"status": "retracted", "status_reason": why, "superseded_by": None}
            valid_to = memory["valid_to"]
        elif before["deleted"] and not after["deleted"]:
            await self.corrections.delete_in(conn, ws, memory["id"], why)
            return
        else:
            target, valid_to = before, _stamp(before["valid_to"])
        successor = uuid.UUID(target["superseded_by"]) if target["superseded_by"] else None
        await db.put_status(
            conn, memory, target["status"], target["status_reason"], current_call().principal, successor, valid_to
        )
        await append_audit_event(
            conn,
            AuditEvent(
                memory["workspace_id"],
                "revert",
                str(memory["id"]),
                memory["version"],
                memory["content_hash"],
                memory["content_hash"],
                {"proposal_id": str(proposal_id), "from": memory["status"], "to": target["status"], "reason": why},
            ),
        )
