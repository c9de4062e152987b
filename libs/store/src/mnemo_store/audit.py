"""The hash-chained, append-only audit log: appending inside the caller's transaction, and verifying."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

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
    details: dict[str, Any] = field(default_factory=dict)


def _hashed_fields(row: Any) -> dict[str, Any]:
    """Exactly the fields the hash covers, from an event being written or a row being verified."""
    return {
        "workspace_id": row["workspace_id"],
        "action": row["action"],
        "memory_id": str(row["memory_id"]) if row["memory_id"] is not None else None,
        "version": row["version"],
        "before_hash": row["before_hash"],
        "after_hash": row["after_hash"],
        "details": row["details"],
        "at": row["at"].astimezone(UTC).isoformat(),
        "principal": row["principal"],
        "request_id": row["request_id"],
        "trace_id": row["trace_id"],
    }


def event_hash(prev_hash: str, fields: dict[str, Any]) -> str:
    """sha256 over the previous hash and the event's canonical JSON: the chain's link."""
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256((prev_hash + canonical).encode()).hexdigest()


# Takes the lock that serialises appends to a workspace's chain until commit, so a chain never
# forks: {workspace} is an SQL expression of the workspace id. It is taken in a statement before
# the one reading the chain's head: a statement that waited for the lock would read the head from
# a snapshot taken before the holder committed. Statements taking several lock them in order, so
# two transactions cannot deadlock.
CHAIN_LOCK = "pg_advisory_xact_lock(hashtextextended('mnemo.audit:' || {workspace}, 0))"


async def _lock_chains(conn: asyncpg.Connection, workspace_ids: Sequence[str]) -> None:
    await conn.execute(
        f"SELECT {CHAIN_LOCK.format(workspace='w')} FROM (SELECT DISTINCT unnest($1::text[]) AS w ORDER BY 1) AS ws",
        list(workspace_ids),
    )


async def append_audit_event(conn: asyncpg.Connection, event: AuditEvent) -> str:
    """Appends the event in the current transaction and returns its hash."""
    return (await append_audit_events(conn, [event]))[0]


async def append_audit_events(
    conn: asyncpg.Connection, events: Sequence[AuditEvent], locked: bool = False
) -> list[str]:
    """Appends the events, in order, in the current transaction and returns their hashes: the
    chains are extended once (one lock, one head read, one multi-row insert), however many events.

    `locked` says an earlier statement of this transaction took the chains' locks (CHAIN_LOCK).
    """
    if not events:
        return []
    call = current_call()
    workspaces = sorted({e.workspace_id for e in events})
    if not locked:
        await _lock_chains(conn, workspaces)
    heads = {
        r["w"]: r["hash"] or GENESIS_HASH
        for r in await conn.fetch(
            "SELECT w, (SELECT hash FROM audit_events WHERE workspace_id = w ORDER BY id DESC LIMIT 1) AS hash "
            "FROM unnest($1::text[]) AS w",
            workspaces,
        )
    }
    trace_id = current_trace_id()
    rows: list[dict[str, Any]] = []
    hashes: list[str] = []
    for event in events:
        row: dict[str, Any] = {
            "workspace_id": event.workspace_id,
            "action": event.action,
            "memory_id": event.memory_id,
            "version": event.version,
            "before_hash": event.before_hash,
            "after_hash": event.after_hash,
            "details": event.details,
            # Microseconds, as PostgreSQL stores them: the hash must survive the round trip.
            "at": datetime.now(UTC),
            "principal": call.principal,
            "request_id": call.request_id,
            "trace_id": trace_id,
        }
        prev_hash = heads[event.workspace_id]
        row["prev_hash"] = prev_hash
        row["hash"] = heads[event.workspace_id] = event_hash(prev_hash, _hashed_fields(row))
        rows.append(row)
        hashes.append(row["hash"])
    columns = [
        ("at", "timestamptz"),
        ("principal", "text"),
        ("workspace_id", "text"),
        ("action", "text"),
        ("memory_id", "uuid"),
        ("version", "int"),
        ("before_hash", "text"),
        ("after_hash", "text"),
        ("request_id", "text"),
        ("trace_id", "text"),
        ("prev_hash", "text"),
        ("hash", "text"),
        ("details", "jsonb"),
    ]
    names = ", ".join(name for name, _ in columns)
    arrays = ", ".join(f"${i}::{kind}[]" for i, (_, kind) in enumerate(columns, 1))
    # Ids are taken in the order given (WITH ORDINALITY): a chain is walked by id.
    await conn.execute(
        f"INSERT INTO audit_events ({names}) SELECT {names} FROM unnest({arrays}) WITH ORDINALITY "
        f"AS u({names}, n) ORDER BY n",
        *[[row[name] for row in rows] for name, _ in columns],
    )
    return hashes


@dataclass(frozen=True)
class ChainCheck:
    """The result of walking hash chains: how much was checked and the first broken link."""

    events_checked: int
    workspaces_checked: int
    broken_event_id: int | None = None
    broken_workspace_id: str | None = None
    problem: str = ""

    @property
    def ok(self) -> bool:
        return self.broken_event_id is None


async def verify_chains(conn: asyncpg.Connection, workspace_id: str | None = None) -> ChainCheck:
    """Recomputes every event's hash and link, in order, per workspace; stops at the first break."""
    checked = 0
    workspaces = (
        [workspace_id]
        if workspace_id is not None
        else [r["workspace_id"] for r in await conn.fetch("SELECT DISTINCT workspace_id FROM audit_events")]
    )
    for ws in sorted(workspaces):
        expected_prev = GENESIS_HASH
        # A cursor keeps memory flat however long the chain is.
        async with conn.transaction():
            async for row in conn.cursor("SELECT * FROM audit_events WHERE workspace_id = $1 ORDER BY id", ws):
                checked += 1
                if row["prev_hash"] != expected_prev:
                    return ChainCheck(
                        checked,
                        len(workspaces),
                        row["id"],
                        ws,
                        f"event {row['id']} links to {row['prev_hash'][:12]}…, but the event before it "
                        f"has hash {expected_prev[:12]}… (an event was removed or reordered)",
                    )
                recomputed = event_hash(row["prev_hash"], _hashed_fields(row))
                if recomputed != row["hash"]:
                    return ChainCheck(
                        checked,
                        len(workspaces),
                        row["id"],
                        ws,
                        f"event {row['id']} ({row['action']}) does not match its hash: "
                        "its recorded fields were changed after it was written",
                    )
                expected_prev = row["hash"]
    return ChainCheck(checked, len(workspaces))
