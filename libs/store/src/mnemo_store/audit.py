"""Appending to the hash-chained, append-only audit log inside the caller's transaction."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

import asyncpg

from mnemo_platform import current_call, current_trace_id

GENESIS_HASH = "0" * 64


@dataclass(frozen=True)
class AuditEvent:
    """One mutation as the audit log records it."""

    workspace_id: str
    action: str
    memory_id: str | None = None
    version: int | None = None
    before_hash: str | None = None
    after_hash: str | None = None


def event_hash(prev_hash: str, fields: dict[str, object]) -> str:
    """sha256 over the previous hash and the event's canonical JSON: the chain's link."""
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256((prev_hash + canonical).encode()).hexdigest()


async def append_audit_event(conn: asyncpg.Connection, event: AuditEvent) -> str:
    """Appends the event in the current transaction and returns its hash."""
    call = current_call()
    # Serialise appends per workspace until commit, so the chain never forks.
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('mnemo.audit:' || $1, 0))", event.workspace_id)
    prev = await conn.fetchval(
        "SELECT hash FROM audit_events WHERE workspace_id = $1 ORDER BY id DESC LIMIT 1",
        event.workspace_id,
    )
    prev_hash = prev or GENESIS_HASH
    at = datetime.now(UTC)
    fields = {
        **asdict(event),
        "at": at.isoformat(),
        "principal": call.principal,
        "request_id": call.request_id,
        "trace_id": current_trace_id(),
    }
    digest = event_hash(prev_hash, fields)
    await conn.execute(
        """
        INSERT INTO audit_events (at, principal, workspace_id, action, memory_id, version,
                                  before_hash, after_hash, request_id, trace_id, prev_hash, hash)
        VALUES ($1, $2, $3, $4, $5::uuid, $6, $7, $8, $9, $10, $11, $12)
        """,
        at,
        call.principal,
        event.workspace_id,
        event.action,
        event.memory_id,
        event.version,
        event.before_hash,
        event.after_hash,
        call.request_id,
        fields["trace_id"],
        prev_hash,
        digest,
    )
    return digest
