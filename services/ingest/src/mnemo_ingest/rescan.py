"""Redaction rescan: re-applies the current redaction rules to stored memories, history included."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import asyncpg
import structlog

from mnemo_ingest.steps import Steps, audit_details
from mnemo_ingest.validation import Redactor, content_hash
from mnemo_store import (
    EVERYWHERE,
    AuditEvent,
    Params,
    Reach,
    append_audit_event,
    resolve_for_write,
    tombstones,
    workspace_clause,
)
from mnemo_store import memories as db

log = structlog.get_logger("mnemo.ingest")


@dataclass
class Rescanned:
    """What rescanning one memory found and changed."""

    memory_id: uuid.UUID
    workspace_id: str
    kinds: list[str]
    """kinds are the kinds of secret found, one entry per finding."""
    versions_scrubbed: int = 0
    new_version: int = 0
    """new_version is the version the redacted current text became (0 when the current text was clean)."""


@dataclass
class RescanSummary:
    """The end of a rescan: how many memories were looked at and changed, and the findings by kind."""

    total: int
    changed: int
    findings: Counter[str] = field(default_factory=Counter)


class Rescan:
    """Scrubs secrets the rules of the day find in what is already stored."""

    def __init__(self, pool: asyncpg.Pool, steps: Steps) -> None:
        self.pool = pool
        self.steps = steps

    async def run(self, ref: str, dry_run: bool) -> AsyncIterator[tuple[int, int, Rescanned] | RescanSummary]:
        """Yields (index, total, what one memory gave) for each memory, then the summary."""
        reach: Reach = EVERYWHERE
        if ref:
            async with self.pool.acquire() as conn:
                reach = Reach(((await resolve_for_write(conn, ref)).id,))
        params = Params()
        ids = await db.memory_ids(self.pool, workspace_clause(reach, params, "m.workspace_id"), params.values)
        summary = RescanSummary(total=len(ids), changed=0)
        for index, memory_id in enumerate(ids, start=1):
            # One transaction per memory: a long rescan holds no lock for long and resumes cleanly.
            async with self.pool.acquire() as conn, conn.transaction():
                result = await self._rescan(conn, memory_id, dry_run)
            if result is None:
                continue  # purged while the rescan ran
            summary.findings.update(result.kinds)
            summary.changed += bool(result.kinds)
            yield index, len(ids), result
        log.info("redaction_rescan_completed", scanned=len(ids), changed=summary.changed, dry_run=dry_run)
        yield summary

    async def _rescan(self, conn: asyncpg.Connection, memory_id: uuid.UUID, dry_run: bool) -> Rescanned | None:
        """Redacts one memory with the current rules: the current text becomes a new version, and
        earlier versions, chunks, tombstone snapshots and source keys are rewritten in place,
        because history must not keep a secret either."""
        workspace_id = await db.memory_workspace(conn, memory_id)
        if workspace_id is None:
            return None
        row = await db.lock_memory(conn, memory_id, workspace_id)
        assert row is not None, "locked a moment ago in this transaction"
        redactor = Redactor()
        versions = await db.versions_of(conn, memory_id)
        scrubbed = {}
        for version in versions:
            title, content = redactor.text(version["title"]), redactor.text(version["content"])
            if (title, content) != (version["title"], version["content"]):
                scrubbed[version["version"]] = (title, content)
        title = redactor.text(row["title"])
        tags = [redactor.text(tag) for tag in row["tags"]]
        metadata = redactor.json(row["metadata"])
        source_uri = redactor.text(row["source_uri"]) if row["source_uri"] else row["source_uri"]
        status_reason = redactor.text(row["status_reason"]) if row["status_reason"] else row["status_reason"]
        stones = [
            (t["id"], redactor.json(t["snapshot"]) if t["snapshot"] else None, redactor.text(t["reason"] or ""))
            for t in await tombstones.tombstones_of(conn, memory_id)
        ]
        result = Rescanned(memory_id, workspace_id, [f["kind"] for f in redactor.findings])
        if not redactor.findings or dry_run:
            return result
        for version, (vtitle, vcontent) in scrubbed.items():
            await db.rewrite_version(conn, memory_id, version, vtitle, vcontent, content_hash(vcontent))
            await db.delete_chunks(conn, memory_id, version)
            await db.insert_chunks(
                conn, [db.VersionChunks(memory_id, version, workspace_id, await self.steps.chunks(vtitle, vcontent))]
            )
        current = scrubbed.get(row["version"])
        await db.rewrite_fields(
            conn,
            memory_id,
            title,
            tags,
            metadata,
            source_uri,
            status_reason,
            content_hash(current[1]) if current else None,
        )
        if source_uri != row["source_uri"]:
            await tombstones.rename_source(conn, workspace_id, row["source_uri"], source_uri)
        for tombstone_id, snapshot, reason in stones:
            await tombstones.rewrite_tombstone(conn, tombstone_id, snapshot, reason or None)
        await append_audit_event(
            conn,
            AuditEvent(
                workspace_id,
                "redact",
                str(memory_id),
                row["version"],
                None,
                None,
                {**audit_details(redactor.findings), "versions": sorted(scrubbed)},
            ),
        )
        result.versions_scrubbed = len(scrubbed)
        if current is not None and row["deleted_at"] is None:
            # The redacted current text also becomes a new version, so readers and the audit log
            # see the change like any other; a deleted memory stays frozen until restored.
            row = await db.lock_memory(conn, memory_id, workspace_id)
            assert row is not None
            vtitle, vcontent = current
            result.new_version = await self.steps.new_version(
                conn,
                row,
                vtitle,
                vcontent,
                content_hash(vcontent),
                tags,
                metadata,
                await self.steps.chunks(vtitle, vcontent),
                before_hash=content_hash(versions[-1]["content"]),
            )
        log.info(
            "memory_redacted", memory_id=str(memory_id), findings=len(redactor.findings), version=result.new_version
        )
        return result
