"""Restoring an export (docs/export-format.md): each record written with its recorded history, ids and
times, into workspaces that hold nothing but what earlier restores wrote; each with its audit event.

A record is written in its own transaction, so a refused one leaves nothing and the others stand.
Text is not redacted or screened again: it was on its way into the exporting Mnemo, and doing it
again would rewrite recorded history (`mnemo redact --rescan` applies newer rules afterwards).
Chunks are made again by this instance's chunker and queued for its embedder: vectors never travel.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import asyncpg
import structlog

import mnemo_store.transfer as transfer
import mnemo_wire.export_format as fmt
from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_ingest.steps import Steps
from mnemo_platform import AlreadyExists, FailedPrecondition, InvalidArgument, MnemoError, NotFound
from mnemo_platform.errors import INVALID_INPUT_ERRORS, invalid_input
from mnemo_store import AuditEvent, append_audit_event
from mnemo_store import memories as db

log = structlog.get_logger("mnemo.ingest")

Outcome = Literal["restored", "already_in"]

# The most records one call takes, as for a batch write.
MAX_RECORDS = 1000


@dataclass(frozen=True)
class Restored:
    """What became of one record: its outcome, or the error that refused it."""

    line: int
    type: str = ""
    id: str = ""
    outcome: Outcome | None = None
    error: MnemoError | None = None


@dataclass
class _Call:
    """What one call learns as it goes: the header, and the workspaces found fit for a restore."""

    header: Mapping[str, Any]
    fit: set[str] = field(default_factory=set)

    def details(self, record_digest: str, **more: Any) -> dict[str, Any]:
        """An import event's details: the record's digest (how a rerun knows it is in) and where it came from."""
        return {"record_sha256": record_digest, "exported_at": self.header.get("exported_at"), **more}


def check_header(text: str) -> Mapping[str, Any]:
    """The export's header, when this Mnemo reads its format and version; INVALID_ARGUMENT naming line 1 otherwise."""
    try:
        header = fmt.parse_json(text)
        fmt.check_header(header)
    except InvalidArgument as exc:
        raise InvalidArgument(f"line 1: {exc.message}") from None
    return header


class Restores:
    """Writes an export's records back."""

    def __init__(self, pool: asyncpg.Pool, steps: Steps) -> None:
        self.pool = pool
        self.steps = steps

    async def restore(self, header: Mapping[str, Any], records: list[tuple[int, str]]) -> list[Restored]:
        call = _Call(header)
        results = []
        for line, text in records:
            kind, record_id = "", ""
            try:
                record = fmt.parse_json(text)
                kind = fmt.record_type(record)
                record_id = str(record.get("id") or record.get("memory_id") or record.get("workspace_id") or "")
                outcome = await self._one(call, kind, record)
                results.append(Restored(line, kind, record_id, outcome))
            except MnemoError as exc:
                results.append(Restored(line, kind, record_id, error=exc))
            except asyncpg.UniqueViolationError as exc:
                # A unique key the checks above do not repeat (a source or idempotency key another memory holds).
                results.append(Restored(line, kind, record_id, error=AlreadyExists(f"the store refused it: {exc}")))
            except (asyncpg.IntegrityConstraintViolationError, asyncpg.DataError) as exc:
                # A value the store's constraints refuse (a malformed workspace id, say): the record's fault.
                results.append(Restored(line, kind, record_id, error=InvalidArgument(f"the store refused it: {exc}")))
            except tuple(INVALID_INPUT_ERRORS):
                results.append(Restored(line, kind, record_id, error=invalid_input()))
        written = sum(r.outcome == "restored" for r in results)
        log.info(
            "export_restored", records=len(results), restored=written, refused=sum(r.error is not None for r in results)
        )
        return results

    async def _one(self, call: _Call, kind: str, record: Mapping[str, Any]) -> Outcome:
        record_digest = fmt.digest(record)
        if kind == "workspace":
            return await self._workspace(call, fmt.parse_workspace(record), record_digest)
        if kind == "memory":
            return await self._memory(call, fmt.parse_memory(record), record_digest)
        if kind == "tombstone":
            return await self._tombstone(call, fmt.parse_tombstone(record), record_digest)
        return await self._audit_head(call, fmt.parse_audit_head(record), record_digest)

    async def _workspace(self, call: _Call, ws: dict[str, Any], record_digest: str) -> Outcome:
        async with self.pool.acquire() as conn, conn.transaction():
            existing = await transfer.workspace_row(conn, ws["id"])
            if existing is not None:
                if (existing["name"], existing["root_path"]) != (ws["name"], ws["root_path"]):
                    raise FailedPrecondition(
                        f"workspace id {ws['id']!r} is already here as {existing['name']!r} "
                        f"(root {existing['root_path']!r}), not {ws['name']!r} (root {ws['root_path']!r})"
                    )
                return "already_in"
            if not await transfer.insert_workspace(conn, ws):
                raise FailedPrecondition(
                    f"workspace {ws['id']!r}: its name {ws['name']!r} or root {ws['root_path']!r} "
                    "belongs to another workspace here"
                )
            await append_audit_event(
                conn, AuditEvent(ws["id"], transfer.IMPORT_ACTIONS["workspace"], details=call.details(record_digest))
            )
        log.info("workspace_restored", workspace=ws["id"], name=ws["name"])
        return "restored"

    async def _memory(self, call: _Call, memory: transfer.RestoredMemory, record_digest: str) -> Outcome:
        row = memory.row
        memory_id, ws_id = row["id"], row["workspace_id"]
        # Chunked before the transaction: a long text's chunking goes to a thread.
        pieces = await self.steps.chunks_of([(v["title"], v["content"]) for v in memory.versions])
        async with self.pool.acquire() as conn, conn.transaction():
            await self._workspace_here(conn, ws_id)
            place = await transfer.memory_place(conn, memory_id)
            if place is not None:
                if place == ws_id and await transfer.restored_digest(
                    conn, ws_id, transfer.IMPORT_ACTIONS["memory"], memory_id, record_digest
                ):
                    return "already_in"
                raise AlreadyExists(
                    f"memory {memory_id} is already here (workspace {place!r}) and is not this record: "
                    "an export is imported into an empty workspace"
                )
            await self._fit(conn, call, ws_id)
            await transfer.insert_restored(conn, memory)
            await db.insert_chunks(
                conn,
                [
                    db.VersionChunks(memory_id, v["version"], ws_id, chunks)
                    for v, chunks in zip(memory.versions, pieces, strict=True)
                ],
            )
            await append_audit_event(
                conn,
                AuditEvent(
                    ws_id,
                    transfer.IMPORT_ACTIONS["memory"],
                    str(memory_id),
                    row["version"],
                    None,
                    row["content_hash"],
                    call.details(record_digest, versions=len(memory.versions), states=len(memory.states)),
                ),
            )
        return "restored"

    async def _tombstone(self, call: _Call, stone: dict[str, Any], record_digest: str) -> Outcome:
        ws_id, memory_id = stone["workspace_id"], stone["memory_id"]
        action = transfer.IMPORT_ACTIONS["tombstone"]
        async with self.pool.acquire() as conn, conn.transaction():
            await self._workspace_here(conn, ws_id)
            if await transfer.restored_digest(conn, ws_id, action, memory_id, record_digest):
                return "already_in"
            await self._fit(conn, call, ws_id)
            await transfer.insert_tombstone(conn, stone)
            details = call.details(record_digest, purged=stone["purged_at"] is not None)
            await append_audit_event(conn, AuditEvent(ws_id, action, str(memory_id), details=details))
        return "restored"

    async def _audit_head(self, call: _Call, head: dict[str, Any], record_digest: str) -> Outcome:
        ws_id = head["workspace_id"]
        async with self.pool.acquire() as conn, conn.transaction():
            await self._workspace_here(conn, ws_id)
            if await transfer.restored_digest(conn, ws_id, transfer.IMPORT_HEAD_ACTION, None, record_digest):
                return "already_in"
            exported = {name: value for name, value in head.items() if name != "workspace_id"}
            exported["at"] = exported["at"].isoformat() if exported["at"] is not None else None
            details = call.details(record_digest, exported_head=exported)
            await append_audit_event(conn, AuditEvent(ws_id, transfer.IMPORT_HEAD_ACTION, details=details))
        return "restored"

    async def _workspace_here(self, conn: asyncpg.Connection, ws_id: str) -> None:
        if await transfer.workspace_row(conn, ws_id) is None:
            raise NotFound(
                f"workspace {ws_id!r} is not here: the file's workspace record for it must come before its records",
                reasons_pb.ERROR_REASON_WORKSPACE_NOT_FOUND,
            )

    async def _fit(self, conn: asyncpg.Connection, call: _Call, ws_id: str) -> None:
        """Refuses a workspace holding memories no restore wrote: an export goes into an empty workspace."""
        if ws_id in call.fit:
            return
        others = await transfer.memories_not_restored(conn, ws_id)
        if others:
            raise FailedPrecondition(
                f"workspace {ws_id!r} already holds {others} memories that no import wrote; an export is imported "
                "into an empty workspace (a fresh instance, or a workspace with nothing in it yet)"
            )
        call.fit.add(ws_id)
