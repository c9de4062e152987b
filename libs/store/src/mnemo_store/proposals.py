"""Typed SQL of proposals (`proposals`): opening one in the caller's transaction, with its audit
event and the fingerprint of the memories it touches, and reading them back.

Everything that proposes (harvest candidates, flagged writes, consolidation, feedback, staged
imports, agents through `memory_propose`) opens its proposal with `open_proposal`, so every
proposal is audited and fingerprinted the same way; deciding one is the ingest service's
(services/ingest/src/mnemo_ingest/review.py).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from mnemo_store.audit import AuditEvent, append_audit_event

KINDS = ("confirm", "merge", "supersede", "retract", "promote", "restore", "accept_batch")
SOURCES = ("agent", "human", "harvest", "screening", "consolidation", "feedback", "import")
STATES = ("open", "applied", "rejected", "reversed")


@dataclass(frozen=True)
class NewProposal:
    """A proposal as its proposer states it; `change` holds the kind's fields (docs/review.md)."""

    workspace_id: str
    kind: str
    memory_ids: Sequence[uuid.UUID]
    reason: str
    proposed_by: str
    source: str
    change: dict[str, Any] = field(default_factory=dict)
    # The proposer's key for "the same suggestion": a second proposal with it is not opened.
    dedupe_key: str | None = None


async def fingerprint(conn: asyncpg.Connection, memory_ids: Sequence[uuid.UUID]) -> str:
    """sha256 over the memories' state that a decision depends on, in id order; a memory that no
    longer exists counts as gone. Equal fingerprints mean nothing a proposal rests on has changed."""
    rows = await conn.fetch(
        """
        SELECT i.id, m.version, m.status, m.superseded_by, m.deleted_at
        FROM unnest($1::uuid[]) AS i (id) LEFT JOIN memories m ON m.id = i.id
        ORDER BY i.id
        """,
        list(memory_ids),
    )
    state = [
        [
            str(r["id"]),
            r["version"],
            r["status"],
            str(r["superseded_by"]) if r["superseded_by"] else None,
            r["deleted_at"].isoformat() if r["deleted_at"] else None,
        ]
        for r in rows
    ]
    return hashlib.sha256(json.dumps(state, separators=(",", ":")).encode()).hexdigest()


async def open_proposal(conn: asyncpg.Connection, proposal: NewProposal) -> tuple[asyncpg.Record, bool]:
    """Opens the proposal in the caller's transaction with its `propose` audit event; returns the
    row and True, or, when the workspace already holds a proposal with the same dedupe_key (in
    any state), that one and False (nothing written)."""
    if proposal.kind not in KINDS:
        raise ValueError(f"unknown proposal kind {proposal.kind!r}")
    if proposal.source not in SOURCES:
        raise ValueError(f"unknown proposal source {proposal.source!r}")
    ids = list(dict.fromkeys(proposal.memory_ids))
    row = await conn.fetchrow(
        """
        INSERT INTO proposals
            (id, workspace_id, kind, memory_ids, change, reason, proposed_by, source, fingerprint, dedupe_key)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
        ON CONFLICT (workspace_id, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
        RETURNING *
        """,
        uuid.uuid4(),
        proposal.workspace_id,
        proposal.kind,
        ids,
        proposal.change,
        proposal.reason,
        proposal.proposed_by,
        proposal.source,
        await fingerprint(conn, ids),
        proposal.dedupe_key,
    )
    if row is None:
        existing = await conn.fetchrow(
            "SELECT * FROM proposals WHERE workspace_id = $1 AND dedupe_key = $2",
            proposal.workspace_id,
            proposal.dedupe_key,
        )
        return existing, False
    await append_audit_event(
        conn,
        AuditEvent(
            proposal.workspace_id,
            "propose",
            str(ids[0]) if len(ids) == 1 else None,
            details={
                "proposal_id": str(row["id"]),
                "kind": proposal.kind,
                "memory_ids": [str(i) for i in ids],
                "source": proposal.source,
                "reason": proposal.reason,
            },
        ),
    )
    return row, True


async def lock_proposal(
    conn: asyncpg.Connection, proposal_id: uuid.UUID, workspace_ids: Sequence[str]
) -> asyncpg.Record | None:
    """The proposal, locked until commit, if it is in one of the workspaces: two decisions on one
    proposal take turns."""
    return await conn.fetchrow(
        "SELECT * FROM proposals WHERE id = $1 AND workspace_id = ANY($2::text[]) FOR UPDATE",
        proposal_id,
        list(workspace_ids),
    )


async def find_proposal(conn: asyncpg.Connection | asyncpg.Pool, proposal_id: uuid.UUID) -> asyncpg.Record | None:
    return await conn.fetchrow("SELECT * FROM proposals WHERE id = $1", proposal_id)


async def open_proposals_for(conn: asyncpg.Connection, memory_ids: Sequence[uuid.UUID]) -> list[asyncpg.Record]:
    """The open proposals touching any of the memories, oldest first."""
    return await conn.fetch(
        "SELECT * FROM proposals WHERE state = 'open' AND memory_ids && $1::uuid[] ORDER BY created_at, id",
        list(memory_ids),
    )


def snapshot(row: Any) -> dict[str, Any]:
    """The part of a memory's state that a decision changes and a reverse puts back."""
    return {
        "status": row["status"],
        "status_reason": row["status_reason"],
        "superseded_by": str(row["superseded_by"]) if row["superseded_by"] else None,
        "valid_to": row["valid_to"].isoformat() if row["valid_to"] else None,
        "version": row["version"],
        "deleted": row["deleted_at"] is not None,
    }


def applied_record(
    before: dict[uuid.UUID, Any], after: dict[uuid.UUID, Any], written: Sequence[uuid.UUID] = (), **extra: Any
) -> dict[str, Any]:
    """What a decision did, as `proposals.applied` keeps it: each touched memory's state before and
    after (a memory the decision wrote has no `before`), and the memories it wrote."""
    return {
        "memories": [
            {
                "id": str(memory_id),
                "before": snapshot(before[memory_id]) if memory_id in before else None,
                "after": snapshot(row),
            }
            for memory_id, row in after.items()
        ],
        "written": [str(i) for i in written],
        **extra,
    }


async def decide(
    conn: asyncpg.Connection,
    proposal_id: uuid.UUID,
    state: str,
    principal: str,
    reason: str | None,
    applied: dict[str, Any] | None = None,
) -> asyncpg.Record:
    """Records a decision on an open proposal: applied (with what it did) or rejected."""
    return await conn.fetchrow(
        """
        UPDATE proposals SET state = $2, decided_by = $3, decided_at = now(), decision_reason = $4, applied = $5
        WHERE id = $1 RETURNING *
        """,
        proposal_id,
        state,
        principal,
        reason,
        applied,
    )


async def mark_reversed(
    conn: asyncpg.Connection, proposal_id: uuid.UUID, principal: str, reason: str
) -> asyncpg.Record:
    return await conn.fetchrow(
        """
        UPDATE proposals SET state = 'reversed', reversed_by = $2, reversed_at = now(), reverse_reason = $3
        WHERE id = $1 RETURNING *
        """,
        proposal_id,
        principal,
        reason,
    )


async def settle_open(
    conn: asyncpg.Connection,
    workspace_id: str,
    kind: str,
    memory_ids: Sequence[uuid.UUID],
    principal: str,
    reason: str,
    applied: dict[str, Any] | None,
    batch_id: uuid.UUID | None = None,
    state: str = "applied",
) -> list[asyncpg.Record]:
    """Closes, as decided by `principal`, the open proposals of `kind` that a direct call has just
    settled: applied when it carried them out (a ConfirmMemory of their memory, an AcceptImportBatch
    of their batch), rejected when it made them moot (a RollbackImportBatch), so the queue does not
    show done work; each gets an `accept` or `reject` audit event saying so. Returns them."""
    rows = await conn.fetch(
        """
        UPDATE proposals SET state = $8, decided_by = $4, decided_at = now(), decision_reason = $5,
                             applied = $6
        WHERE workspace_id = $1 AND kind = $2 AND state = 'open'
          AND CASE WHEN $7::text IS NULL THEN memory_ids @> $3::uuid[] ELSE change ->> 'batch_id' = $7::text END
        RETURNING *
        """,
        workspace_id,
        kind,
        list(memory_ids),
        principal,
        reason,
        applied,
        str(batch_id) if batch_id else None,
        state,
    )
    for row in rows:
        ids = list(row["memory_ids"])
        await append_audit_event(
            conn,
            AuditEvent(
                workspace_id,
                "accept" if state == "applied" else "reject",
                str(ids[0]) if len(ids) == 1 else None,
                details={"proposal_id": str(row["id"]), "kind": kind, "reason": reason},
            ),
        )
    return rows


async def is_stale(conn: asyncpg.Connection | asyncpg.Pool, row: Any) -> bool:
    """Whether an open proposal rests on memories (or a batch) that changed since it was made."""
    if row["state"] != "open":
        return False
    if row["kind"] == "accept_batch":
        state = await conn.fetchval(
            "SELECT state FROM import_batches WHERE id = $1::uuid", str(row["change"].get("batch_id", ""))
        )
        if state != "open":
            return True
    return await fingerprint(conn, list(row["memory_ids"])) != row["fingerprint"]


async def list_proposals(
    conn: asyncpg.Connection | asyncpg.Pool,
    where: str,
    values: list[Any],
    limit: int,
    before: tuple[datetime, str] | None,
) -> list[asyncpg.Record]:
    """Proposals matching `where` (built with Params, the workspace condition from the access
    module), newest first, after the (created_at, id) cursor of the previous page."""
    if before is not None:
        values = [*values, before[0], uuid.UUID(before[1])]
        n = len(values)
        where = f"({where}) AND (created_at, id) < (${n - 1}, ${n})"
    return await conn.fetch(
        f"SELECT * FROM proposals WHERE {where} ORDER BY created_at DESC, id DESC LIMIT {int(limit)}", *values
    )
