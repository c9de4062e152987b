"""Feedback: a principal's vote on a memory it can see, the memory's bounded feedback factor, and the
proposal a harmful or outdated vote opens; one transaction with its audit event (docs/feedback.md)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

import asyncpg
import structlog

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_platform import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied, current_call
from mnemo_platform.context import reset_call, set_call
from mnemo_redact import redact
from mnemo_store import (
    GLOBAL_WORKSPACE,
    MEMORY_COLUMNS,
    VISIBLE_STATUSES,
    AuditEvent,
    WorkspaceRow,
    append_audit_event,
    reach_in,
    resolve_for_read,
    tombstones,
)
from mnemo_store import feedback as feedback_db
from mnemo_store import memories as db
from mnemo_store.proposals import NewProposal, open_proposal

log = structlog.get_logger("mnemo.ingest")

MAX_NOTE_CHARS = 2000
# Who proposes for a vote on a global memory: the voter's name is its workspace's to know, not every
# workspace's (global's proposals and audit chain are read from all of them).
SHARED_PROPOSER = "system:feedback"


def check_note(note: str) -> str:
    """The note as stored: stripped, redacted (it lands in the audit log and may become a proposal's
    reason), at most MAX_NOTE_CHARS."""
    if "\x00" in note:
        raise InvalidArgument("note contains NUL bytes (U+0000), which cannot be stored; remove them")
    note = redact(note.strip()).text
    if len(note) > MAX_NOTE_CHARS:
        raise InvalidArgument(f"note is {len(note)} characters; at most {MAX_NOTE_CHARS}")
    return note


@dataclass(frozen=True)
class Voted:
    """What a vote left: the stored vote, the one it replaced, the memory's factor and any proposal."""

    feedback: asyncpg.Record
    replaced: str | None
    factor: float
    voters: int
    memory: asyncpg.Record
    proposal: asyncpg.Record | None
    proposal_created: bool
    unchanged: bool = False
    """unchanged is true when the call repeated the caller's current vote and note: nothing was written."""


async def _lock_within(conn: asyncpg.Connection, ws: WorkspaceRow, memory_id: uuid.UUID) -> asyncpg.Record | None:
    """The memory, locked, if it is in `ws` or global; votes on one memory take turns."""
    return await conn.fetchrow(
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = $1 AND m.workspace_id = ANY($2::text[]) FOR UPDATE OF m",
        memory_id,
        list(reach_in(ws).ids or ()),
    )


async def _visible(conn: asyncpg.Connection, ws: WorkspaceRow, memory_id: uuid.UUID, what: str) -> asyncpg.Record:
    """The memory the caller reads from `ws`, locked; NOT_FOUND as an unknown id when it is anywhere else."""
    row = await _lock_within(conn, ws, memory_id)
    if row is None:
        if await tombstones.purged_at(conn, memory_id, ws.id) is not None:
            raise NotFound(f"{what} {memory_id} was purged; nothing of it remains", reasons_pb.ERROR_REASON_PURGED)
        # The same words for an id that never existed and one in a workspace the caller cannot read.
        raise NotFound(f"{what} {memory_id} not found in workspace {ws.name!r}")
    if row["deleted_at"] is not None:
        raise NotFound(
            f"{what} {memory_id} was deleted; restore it first (mnemo restore {memory_id})",
            reasons_pb.ERROR_REASON_MEMORY_DELETED,
        )
    return row


class Feedback:
    """Votes on memories, each in one transaction with its factor, its audit event and its proposal."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def record(
        self, ref: str, memory_id: uuid.UUID, vote: str, note: str, successor_id: uuid.UUID | None
    ) -> Voted:
        call = current_call()
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_for_read(conn, ref)
            if ws.id == GLOBAL_WORKSPACE and not call.all_workspaces:
                raise PermissionDenied(
                    "vote from your own workspace, not from global: a vote is audited where it is cast, and global "
                    "is read by every workspace (a memory in global is voted on from any workspace that reads it)",
                    reasons_pb.ERROR_REASON_OUTSIDE_WORKSPACE,
                )
            memory = await _visible(conn, ws, memory_id, "memory")
            successor = await self._successor(conn, ws, memory, successor_id)
            shared = memory["workspace_id"] == GLOBAL_WORKSPACE
            # A vote on a memory of the caller's workspace is audited there; on a global memory, in the
            # voter's workspace, so global's chain never names another workspace's principals or notes.
            home = ws.id
            before = float(memory["feedback_factor"])
            previous = await feedback_db.current_vote(conn, memory_id, call.principal)
            replaced = previous["vote"] if previous is not None else None
            same = (vote, note, home)
            if previous is not None and (previous["vote"], previous["note"], previous["workspace_id"]) == same:
                # The caller's current vote, repeated: nothing to write or audit (a retry, or an agent
                # voting again); a proposal it asks for is still opened if the memory changed since.
                proposal, created = await self._propose(conn, memory, vote, note, successor, shared)
                voters = await feedback_db.voters(conn, memory_id)
                memory_now = await db.fetch_memory(conn, memory_id)
                return Voted(previous, replaced, before, voters, memory_now, proposal, created, unchanged=True)
            row = await feedback_db.record_vote(conn, memory_id, call.principal, home, vote, note)
            factor, voters = await feedback_db.recompute_factor(conn, memory_id)
            proposal, created = await self._propose(conn, memory, vote, note, successor, shared)
            details: dict[str, Any] = {
                "vote": vote,
                "replaced": replaced,
                "feedback_factor": {"from": round(before, 4), "to": round(factor, 4)},
                "voters": voters,
            }
            if note:
                details["note"] = note
            if proposal is not None:
                details["proposal_id"] = str(proposal["id"])
            await append_audit_event(
                conn,
                AuditEvent(
                    home,
                    "feedback",
                    str(memory_id),
                    memory["version"],
                    memory["content_hash"],
                    memory["content_hash"],
                    details,
                ),
            )
            log.info(
                "feedback_recorded",
                memory_id=str(memory_id),
                vote=vote,
                replaced=replaced,
                feedback_factor=round(factor, 4),
                voters=voters,
                proposal_id=str(proposal["id"]) if proposal is not None else None,
            )
            return Voted(row, replaced, factor, voters, await db.fetch_memory(conn, memory_id), proposal, created)

    async def _successor(
        self, conn: asyncpg.Connection, ws: WorkspaceRow, memory: asyncpg.Record, successor_id: uuid.UUID | None
    ) -> asyncpg.Record | None:
        """The successor an outdated vote names, if it can replace the memory: visible to the caller,
        current, and in the memory's workspace or global (a global memory is superseded from global)."""
        if successor_id is None:
            return None
        if successor_id == memory["id"]:
            raise InvalidArgument("successor_id names the memory voted on; a memory cannot replace itself")
        row = await _visible(conn, ws, successor_id, "successor")
        if row["workspace_id"] != memory["workspace_id"]:
            # A supersede keeps both ends in one workspace (so a reviewer of that workspace decides it,
            # and a reverse finds them both there).
            raise InvalidArgument(
                f"successor {successor_id} is in workspace {row['workspace_id']!r} and the memory voted on in "
                f"{memory['workspace_id']!r}: a memory is replaced by one of its own workspace"
            )
        if row["status"] not in VISIBLE_STATUSES:
            raise FailedPrecondition(
                f"successor {successor_id} {db.status_phrase(row)}; name a current memory", db.status_reason(row)
            )
        return row

    async def _propose(
        self,
        conn: asyncpg.Connection,
        memory: asyncpg.Record,
        vote: str,
        note: str,
        successor: asyncpg.Record | None,
        shared: bool,
    ) -> tuple[asyncpg.Record | None, bool]:
        """Opens (or joins) the proposal a harmful or outdated vote asks for: retract, or supersede by the
        successor an outdated vote names. A memory already out of the default reads gets none."""
        if vote not in feedback_db.PROPOSING_VOTES or memory["status"] not in VISIBLE_STATUSES:
            return None, False
        kind = "supersede" if successor is not None else "retract"
        change: dict[str, Any] = {"vote": vote}
        key = f"feedback:{kind}:{memory['id']}:v{memory['version']}"
        if successor is not None:
            change["successor_id"] = str(successor["id"])
            key += f":{successor['id']}"
        if shared:
            reason = f"voted {vote} from a workspace reading global (the voter's note stays in its workspace)"
        else:
            reason = note or f"voted {vote} on a search result"
        call = current_call()
        proposer = SHARED_PROPOSER if shared else call.principal
        # The proposal's audit event names the current principal: for a global memory, the job's name.
        token = set_call(replace(call, principal=proposer)) if shared else None
        try:
            return await open_proposal(
                conn,
                NewProposal(
                    workspace_id=memory["workspace_id"],
                    kind=kind,
                    memory_ids=[memory["id"], successor["id"]] if successor is not None else [memory["id"]],
                    reason=reason,
                    proposed_by=proposer,
                    source="feedback",
                    change=change,
                    dedupe_key=key,
                ),
            )
        finally:
            if token is not None:
                reset_call(token)
