"""IngestService: every write, each in one transaction with its audit event (and NOTIFY for chunks)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import asyncpg
import structlog

from mnemo.common.v1 import common_pb2
from mnemo.ingest.v1 import ingest_service_pb2 as pb
from mnemo.ingest.v1 import ingest_service_pb2_grpc as pb_grpc
from mnemo_embed import Chunk, Embedder, chunk_text
from mnemo_ingest.indexing import compound_parts
from mnemo_ingest.validation import (
    Draft,
    Redactor,
    check_content,
    check_metadata,
    check_reason,
    check_tags,
    check_title,
    check_write,
    content_hash,
    redacted_text,
    screened,
)
from mnemo_platform import ALL_WORKSPACES, AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, current_call
from mnemo_platform.config import IngestSettings, TrustSettings
from mnemo_redact import redact, redact_json
from mnemo_store import (
    CONTENT_JOIN,
    GLOBAL_WORKSPACE,
    MEMORY_COLUMNS,
    VISIBLE_STATUSES,
    AuditEvent,
    WorkspaceRow,
    add_workspace,
    append_audit_event,
    create_token,
    memory_message,
    parse_memory_id,
    resolve_workspace,
    revoke_token,
    timestamp,
    token_message,
    workspace_message,
)

log = structlog.get_logger("mnemo.ingest")

EMBED_CHANNEL = "mnemo_embed"

_MEMORY_FOR_UPDATE = """
SELECT id, workspace_id, kind, version, content_hash, title, tags, metadata, status, status_reason,
       source_uri, superseded_by, valid_from, valid_to, deleted_at
FROM memories WHERE id = $1 AND workspace_id = $2 FOR UPDATE
"""


# Closes a memory's open span ($1 is the memory id) at now(), or just after its start if that is later.
_CLOSE_SPAN = """
    UPDATE {table} SET recorded_to = greatest(now(), recorded_from + interval '1 microsecond')
    WHERE memory_id = $1 AND recorded_to IS NULL
    RETURNING recorded_to
"""


def _details(
    redactions: list[dict[str, str]] | tuple[dict[str, str], ...], suspicious: tuple[str, ...] = ()
) -> dict[str, object]:
    """Audit details of a write: what redaction removed (kind and digest, never the secret), and
    the kinds of memory poisoning the text was flagged for."""
    details: dict[str, object] = {"redactions": list(redactions)} if redactions else {}
    if suspicious:
        details["suspicious"] = list(suspicious)
    return details


def _tombstone_message(row: asyncpg.Record) -> pb.Tombstone:
    return pb.Tombstone(
        workspace_id=row["workspace_id"],
        memory_id=str(row["memory_id"]),
        source_uri=row["source_uri"] or "",
        source_fingerprint=row["source_fingerprint"] or "",
        reason=row["reason"] or "",
        principal=row["principal"],
        deleted_at=timestamp(row["created_at"]),
        restored_at=timestamp(row["restored_at"]),
        purged_at=timestamp(row["purged_at"]),
    )


class IngestServicer(pb_grpc.IngestServiceServicer):
    def __init__(
        self, pool: asyncpg.Pool, embedder: Embedder, settings: IngestSettings, trust: TrustSettings | None = None
    ) -> None:
        self.pool = pool
        self.embedder = embedder
        self.settings = settings
        self.trust = trust or TrustSettings()

    # -- writes ---------------------------------------------------------------------------

    async def WriteMemory(self, request: pb.WriteMemoryRequest, context: Any) -> pb.WriteMemoryResponse:
        draft = check_write(request, self.settings.max_content_bytes)
        chunks = await self._chunks(draft.title, draft.content)
        # A concurrent writer with the same source_uri or idempotency key can win the insert;
        # the second attempt then finds its row and answers as a replay or a new version.
        for attempt in range(3):
            try:
                async with self.pool.acquire() as conn, conn.transaction():
                    return await self._write(conn, request.workspace, draft, chunks)
            except asyncpg.UniqueViolationError:
                if attempt == 2:
                    raise AlreadyExists("a concurrent write with the same source_uri or idempotency key won") from None
        raise AssertionError("unreachable")

    async def _write(
        self, conn: asyncpg.Connection, ref: str, draft: Draft, chunks: list[Chunk]
    ) -> pb.WriteMemoryResponse:
        ws = await resolve_workspace(conn, ref, access="write")
        if draft.idempotency_key:
            row = await conn.fetchrow(
                "SELECT id, content_hash FROM memories WHERE workspace_id = $1 AND idempotency_key = $2",
                ws.id,
                draft.idempotency_key,
            )
            if row is not None:
                if row["content_hash"] != draft.content_hash:
                    raise AlreadyExists(
                        f"idempotency key {draft.idempotency_key!r} was already used for memory {row['id']} "
                        "with different content; use a new key for a new write"
                    )
                return pb.WriteMemoryResponse(
                    memory=await self._fetch(conn, row["id"]), outcome=pb.WRITE_OUTCOME_REPLAYED
                )
        if draft.source_uri:
            await self._refuse_tombstoned_source(conn, ws, draft.source_uri)
            if draft.derivation is not None:
                derived = await conn.fetchval(
                    """
                    SELECT memory_id FROM derivations
                    WHERE workspace_id = $1 AND source_uri = $2 AND source_fingerprint = $3
                      AND summarizer = $4 AND prompt_version = $5
                    """,
                    ws.id,
                    draft.source_uri,
                    draft.derivation.source_fingerprint,
                    draft.derivation.summarizer,
                    draft.derivation.prompt_version,
                )
                if derived is not None:
                    # This exact source version was already derived this way (a replica's race,
                    # a restart, a re-run): nothing new.
                    return pb.WriteMemoryResponse(
                        memory=await self._fetch(conn, derived), outcome=pb.WRITE_OUTCOME_UNCHANGED
                    )
            row = await conn.fetchrow(
                "SELECT id, version, content_hash FROM memories WHERE workspace_id = $1 AND source_uri = $2 FOR UPDATE",
                ws.id,
                draft.source_uri,
            )
            if row is not None:
                outcome = pb.WRITE_OUTCOME_UNCHANGED
                if row["content_hash"] != draft.content_hash:
                    await self._new_version(
                        conn,
                        ws,
                        row,
                        draft.title,
                        draft.content,
                        draft.content_hash,
                        draft.tags,
                        draft.metadata,
                        chunks,
                        draft.redactions,
                    )
                    # A re-derivation may change how the text was made (a transcript becomes a
                    # summary once the summarizer answers); trust follows the current text.
                    await conn.execute(
                        "UPDATE memories SET provenance = $2 WHERE id = $1 AND provenance <> $2",
                        row["id"],
                        draft.provenance,
                    )
                    outcome = pb.WRITE_OUTCOME_NEW_VERSION
                await self._record_derivation(conn, ws, draft, row["id"])
                return pb.WriteMemoryResponse(memory=await self._fetch(conn, row["id"]), outcome=outcome)
        memory_id = await self._insert_memory(conn, ws, draft, chunks)
        await self._record_derivation(conn, ws, draft, memory_id)
        await append_audit_event(
            conn,
            AuditEvent(
                ws.id,
                "write",
                str(memory_id),
                1,
                None,
                draft.content_hash,
                _details(draft.redactions, draft.suspicious),
            ),
        )
        log.info("memory_written", memory_id=str(memory_id), workspace=ws.id, chunks=len(chunks))
        return pb.WriteMemoryResponse(memory=await self._fetch(conn, memory_id), outcome=pb.WRITE_OUTCOME_CREATED)

    async def UpdateMemory(self, request: pb.UpdateMemoryRequest, context: Any) -> pb.UpdateMemoryResponse:
        memory_id = parse_memory_id(request.id)
        content, redactions = redacted_text(check_content(request.content, self.settings.max_content_bytes))
        tags = [redact(t).text for t in check_tags(list(request.tags))] if request.replace_tags else None
        metadata = redact_json(check_metadata(request.metadata))[0] if request.HasField("metadata") else None
        new_title = redact(check_title(request.title, content)).text if request.HasField("title") else None
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_workspace(conn, request.workspace, access="write")
            row = await self._locate(conn, ws, memory_id, statuses=VISIBLE_STATUSES)
            if request.expected_version and request.expected_version != row["version"]:
                raise FailedPrecondition(
                    f"memory {memory_id} is at version {row['version']}, not {request.expected_version}; "
                    "read it again before updating"
                )
            title = row["title"] if new_title is None else new_title
            tags = list(row["tags"]) if tags is None else tags
            metadata = row["metadata"] if metadata is None else metadata
            new_hash = content_hash(content)
            if (new_hash, title, tags, metadata) == (
                row["content_hash"],
                row["title"],
                list(row["tags"]),
                row["metadata"],
            ):
                return pb.UpdateMemoryResponse(
                    memory=await self._fetch(conn, memory_id), outcome=pb.WRITE_OUTCOME_UNCHANGED
                )
            chunks = await self._chunks(title, content)
            await self._new_version(conn, ws, row, title, content, new_hash, tags, metadata, chunks, redactions)
            return pb.UpdateMemoryResponse(
                memory=await self._fetch(conn, memory_id), outcome=pb.WRITE_OUTCOME_NEW_VERSION
            )

    async def AddWorkspace(self, request: pb.AddWorkspaceRequest, context: Any) -> pb.AddWorkspaceResponse:
        current_call().require("admin", "registering a workspace")
        async with self.pool.acquire() as conn, conn.transaction():
            row, created = await add_workspace(conn, request.root_path, request.name)
            if created:
                await append_audit_event(conn, AuditEvent(row.id, "workspace_add"))
                log.info("workspace_added", workspace=row.id, name=row.name, root=row.root_path)
        return pb.AddWorkspaceResponse(workspace=workspace_message(row), created=created)

    # -- corrections ------------------------------------------------------------------------

    async def SupersedeMemory(self, request: pb.SupersedeMemoryRequest, context: Any) -> pb.SupersedeMemoryResponse:
        old_id = parse_memory_id(request.id)
        reason = check_reason(request.reason, required=False)
        draft = check_write(request.successor, self.settings.max_content_bytes)
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_workspace(conn, request.workspace, access="write")
            old = await self._locate(conn, ws, old_id, statuses=VISIBLE_STATUSES, verb="supersede")
            # The successor inherits what the caller did not restate.
            kind = draft.kind if request.successor.kind else old["kind"]
            tags = draft.tags if request.successor.tags else list(old["tags"])
            draft = Draft(**{**draft.__dict__, "kind": kind, "tags": tags})
            if draft.valid_from and old["valid_from"] and draft.valid_from <= old["valid_from"]:
                raise InvalidArgument(
                    f"the successor's valid_from ({draft.valid_from.isoformat()}) must be after the old belief's "
                    f"({old['valid_from'].isoformat()}): a belief cannot end before it began"
                )
            if draft.source_uri:
                await self._refuse_tombstoned_source(conn, ws, draft.source_uri)
                owner = await conn.fetchval(
                    "SELECT id FROM memories WHERE workspace_id = $1 AND source_uri = $2", ws.id, draft.source_uri
                )
                if owner is not None:
                    raise AlreadyExists(
                        f"source_uri {draft.source_uri!r} already belongs to memory {owner}; a source has one "
                        "memory, so write the successor without it (or update that memory)"
                    )
            chunks = await self._chunks(draft.title, draft.content)
            new_id = await self._insert_memory(conn, ws, draft, chunks)
            ended = draft.valid_from or await conn.fetchval("SELECT now()")
            await self._supersede(conn, ws, old, new_id, draft.content_hash, reason, valid_to=ended)
            log.info("memory_superseded", memory_id=str(old_id), successor=str(new_id))
            return pb.SupersedeMemoryResponse(
                superseded=await self._fetch(conn, old_id), successor=await self._fetch(conn, new_id)
            )

    async def PromoteMemory(self, request: pb.PromoteMemoryRequest, context: Any) -> pb.PromoteMemoryResponse:
        current_call().require("reviewer", "promoting a memory to global")
        old_id = parse_memory_id(request.id)
        reason = check_reason(request.reason, required=True)
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_workspace(conn, request.workspace, access="write")
            if ws.id == GLOBAL_WORKSPACE:
                raise FailedPrecondition(f"memory {old_id} is already in global")
            shared = await resolve_workspace(conn, GLOBAL_WORKSPACE, access="write")
            old = await self._locate(conn, ws, old_id, statuses=VISIBLE_STATUSES, verb="promote")
            flagged = await conn.fetchval("SELECT suspicious FROM memories WHERE id = $1", old_id)
            if flagged and old["status"] != "confirmed":
                raise FailedPrecondition(
                    f"memory {old_id} is flagged suspicious ({', '.join(flagged)}): it tries to instruct the model. "
                    "A reviewer must confirm it before it can be promoted to global"
                )
            content = await conn.fetchval(
                "SELECT content FROM memory_versions WHERE memory_id = $1 AND version = $2", old_id, old["version"]
            )
            draft = Draft(
                kind=old["kind"],
                title=old["title"],
                content=content,
                content_hash=old["content_hash"],
                tags=list(old["tags"]),
                # The original's id, never its workspace: every token reads global, and the name of a
                # workspace is not theirs to learn. The original's own audit chain links the copy.
                metadata={**old["metadata"], "promoted_from": str(old_id)},
                source_uri=None,
                idempotency_key=None,
                provenance=await conn.fetchval("SELECT provenance FROM memories WHERE id = $1", old_id),
                valid_from=old["valid_from"],
            )
            chunks = await self._chunks(draft.title, draft.content)
            new_id = await self._insert_memory(conn, shared, draft, chunks)
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
            await self._supersede(conn, ws, old, new_id, draft.content_hash, f"promoted to global: {reason}")
            log.info("memory_promoted", memory_id=str(old_id), promoted=str(new_id), workspace=ws.id)
            return pb.PromoteMemoryResponse(
                promoted=await self._fetch(conn, new_id), original=await self._fetch(conn, old_id)
            )

    async def RetractMemory(self, request: pb.RetractMemoryRequest, context: Any) -> pb.RetractMemoryResponse:
        memory_id = parse_memory_id(request.id)
        reason = check_reason(request.reason, required=True)
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_workspace(conn, request.workspace, access="write")
            row = await self._locate(conn, ws, memory_id, statuses=VISIBLE_STATUSES, verb="retract")
            await self._set_state(conn, ws, row, "retracted", reason=reason)
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
            return pb.RetractMemoryResponse(memory=await self._fetch(conn, memory_id))

    async def ConfirmMemory(self, request: pb.ConfirmMemoryRequest, context: Any) -> pb.ConfirmMemoryResponse:
        current_call().require("reviewer", "confirming a memory")
        memory_id = parse_memory_id(request.id)
        reason = check_reason(request.reason, required=False)
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_workspace(conn, request.workspace, access="write")
            row = await self._locate(conn, ws, memory_id, statuses=VISIBLE_STATUSES, verb="confirm")
            if row["status"] == "confirmed":
                return pb.ConfirmMemoryResponse(
                    memory=await self._fetch(conn, memory_id), outcome=pb.WRITE_OUTCOME_UNCHANGED
                )
            await self._set_state(conn, ws, row, "confirmed", reason=reason)
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
            return pb.ConfirmMemoryResponse(
                memory=await self._fetch(conn, memory_id), outcome=pb.WRITE_OUTCOME_NEW_VERSION
            )

    async def DeleteMemory(self, request: pb.DeleteMemoryRequest, context: Any) -> pb.DeleteMemoryResponse:
        memory_id = parse_memory_id(request.id)
        reason = check_reason(request.reason, required=True)
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_workspace(conn, request.workspace, access="write")
            row = await self._locate(conn, ws, memory_id, verb="delete", deleted=True)
            tombstone = await self._tombstone(conn, ws, row, reason)
            await append_audit_event(
                conn,
                AuditEvent(
                    ws.id, "delete", str(memory_id), row["version"], row["content_hash"], None, {"reason": reason}
                ),
            )
            log.info("memory_deleted", memory_id=str(memory_id), workspace=ws.id)
            return pb.DeleteMemoryResponse(tombstone=_tombstone_message(tombstone))

    async def RestoreMemory(self, request: pb.RestoreMemoryRequest, context: Any) -> pb.RestoreMemoryResponse:
        current_call().require("reviewer", "restoring a deleted memory")
        memory_id = parse_memory_id(request.id)
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_workspace(conn, request.workspace, access="write")
            row = await self._locate(conn, ws, memory_id, deleted=True)
            if row["deleted_at"] is None:
                raise FailedPrecondition(f"memory {memory_id} is not deleted; there is nothing to restore")
            tombstone = await conn.fetchrow(
                "UPDATE tombstones SET restored_at = now() WHERE memory_id = $1 AND restored_at IS NULL "
                "AND purged_at IS NULL RETURNING snapshot",
                memory_id,
            )
            if tombstone is None:
                raise FailedPrecondition(f"memory {memory_id} has no standing tombstone to restore from")
            await conn.execute("UPDATE memories SET deleted_at = NULL WHERE id = $1", memory_id)
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
            return pb.RestoreMemoryResponse(memory=await self._fetch(conn, memory_id))

    async def PurgeMemory(self, request: pb.PurgeMemoryRequest, context: Any) -> pb.PurgeMemoryResponse:
        current_call().require("admin", "purging a memory")
        memory_id = parse_memory_id(request.id)
        reason = check_reason(request.reason, required=False)
        if not request.force:
            raise FailedPrecondition(
                "purge erases the content and every version for good and cannot be undone; pass force=true "
                "(CLI: --force). To hide a memory reversibly, delete it instead"
            )
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_workspace(conn, request.workspace, access="write")
            row = await self._locate(conn, ws, memory_id, deleted=True)
            if row["deleted_at"] is None:
                await self._tombstone(conn, ws, row, reason or "purged")
            # Derived rows first (foreign keys), then the memory; other memories keep their own
            # status but lose the pointer to this one.
            await conn.execute("DELETE FROM chunks WHERE memory_id = $1", memory_id)
            await conn.execute("DELETE FROM memory_versions WHERE memory_id = $1", memory_id)
            await conn.execute("DELETE FROM memory_states WHERE memory_id = $1", memory_id)
            await conn.execute("DELETE FROM derivations WHERE memory_id = $1", memory_id)
            await conn.execute("UPDATE memories SET superseded_by = NULL WHERE superseded_by = $1", memory_id)
            await conn.execute("DELETE FROM memories WHERE id = $1", memory_id)
            tombstone = await conn.fetchrow(
                """
                UPDATE tombstones SET snapshot = NULL, reason = NULL, purged_at = now()
                WHERE memory_id = $1 AND restored_at IS NULL AND purged_at IS NULL
                RETURNING *
                """,
                memory_id,
            )
            await append_audit_event(
                conn, AuditEvent(ws.id, "purge", str(memory_id), row["version"], row["content_hash"], None)
            )
            log.info("memory_purged", memory_id=str(memory_id), workspace=ws.id)
            return pb.PurgeMemoryResponse(tombstone=_tombstone_message(tombstone))

    async def RescanRedactions(
        self, request: pb.RescanRedactionsRequest, context: Any
    ) -> AsyncIterator[pb.RescanProgress]:
        current_call().require("admin", "rescanning stored memories")
        workspace = ""
        if request.workspace:
            async with self.pool.acquire() as conn:
                workspace = (await resolve_workspace(conn, request.workspace, access="write")).id
        ids = await self.pool.fetch(
            "SELECT id FROM memories WHERE ($1 = '' OR workspace_id = $1) ORDER BY created_at, id", workspace
        )
        findings: Counter[str] = Counter()
        changed = 0
        for index, row in enumerate(ids, start=1):
            # One transaction per memory: a long rescan holds no lock for long and resumes cleanly.
            async with self.pool.acquire() as conn, conn.transaction():
                progress = await self._rescan(conn, row["id"], request.dry_run)
            if progress is None:
                continue  # purged while the rescan ran
            findings.update(progress.kinds)
            changed += bool(progress.kinds)
            progress.index, progress.total = index, len(ids)
            yield progress
        log.info("redaction_rescan_completed", scanned=len(ids), changed=changed, dry_run=request.dry_run)
        yield pb.RescanProgress(done=True, total=len(ids), changed=changed, findings=dict(findings))

    async def CreateToken(self, request: pb.CreateTokenRequest, context: Any) -> pb.CreateTokenResponse:
        current_call().require("admin", "creating a token")
        async with self.pool.acquire() as conn, conn.transaction():
            workspaces = []
            for ref in request.workspaces:
                # Names and paths become ids now: a token keeps its reach if a workspace is renamed.
                workspaces.append(ref if ref == ALL_WORKSPACES else (await resolve_workspace(conn, ref, "none")).id)
            row, secret = await create_token(conn, request.principal, request.role, workspaces, request.label)
            await append_audit_event(
                conn,
                AuditEvent(
                    GLOBAL_WORKSPACE,
                    "token_create",
                    details={"token": row.id, "principal": row.principal, "role": row.role, "workspaces": workspaces},
                ),
            )
        log.info("token_created", token=row.id, principal=row.principal, role=row.role, workspaces=workspaces)
        return pb.CreateTokenResponse(token=token_message(row), secret=secret)

    async def RevokeToken(self, request: pb.RevokeTokenRequest, context: Any) -> pb.RevokeTokenResponse:
        current_call().require("admin", "revoking a token")
        async with self.pool.acquire() as conn, conn.transaction():
            row = await revoke_token(conn, request.id.strip())
            await append_audit_event(
                conn,
                AuditEvent(GLOBAL_WORKSPACE, "token_revoke", details={"token": row.id, "principal": row.principal}),
            )
        log.info("token_revoked", token=row.id, principal=row.principal)
        return pb.RevokeTokenResponse(token=token_message(row))

    async def _rescan(self, conn: asyncpg.Connection, memory_id: uuid.UUID, dry_run: bool) -> pb.RescanProgress | None:
        """Redacts one memory with the current rules: the current text becomes a new version, and
        earlier versions, chunks, tombstone snapshots and source keys are rewritten in place,
        because history must not keep a secret either."""
        row = await conn.fetchrow("SELECT workspace_id FROM memories WHERE id = $1 FOR UPDATE", memory_id)
        if row is None:
            return None
        row = await conn.fetchrow(_MEMORY_FOR_UPDATE, memory_id, row["workspace_id"])
        redactor = Redactor()
        versions = await conn.fetch(
            "SELECT version, title, content FROM memory_versions WHERE memory_id = $1 ORDER BY version", memory_id
        )
        scrubbed = {}
        for version in versions:
            title, content = redactor.text(version["title"]), redactor.text(version["content"])
            if (title, content) != (version["title"], version["content"]):
                scrubbed[version["version"]] = (title, content)
        fields = {
            "title": redactor.text(row["title"]),
            "tags": [redactor.text(tag) for tag in row["tags"]],
            "metadata": redactor.json(row["metadata"]),
            "source_uri": redactor.text(row["source_uri"]) if row["source_uri"] else row["source_uri"],
            "status_reason": redactor.text(row["status_reason"]) if row["status_reason"] else row["status_reason"],
        }
        tombstones = [
            (t["id"], redactor.json(t["snapshot"]) if t["snapshot"] else None, redactor.text(t["reason"] or ""))
            for t in await conn.fetch("SELECT id, snapshot, reason FROM tombstones WHERE memory_id = $1", memory_id)
        ]
        progress = pb.RescanProgress(
            memory_id=str(memory_id), workspace_id=row["workspace_id"], kinds=[f["kind"] for f in redactor.findings]
        )
        if not redactor.findings or dry_run:
            return progress
        ws = await resolve_workspace(conn, row["workspace_id"], access="none")
        for version, (title, content) in scrubbed.items():
            await conn.execute(
                "UPDATE memory_versions SET title = $3, content = $4, content_hash = $5 "
                "WHERE memory_id = $1 AND version = $2",
                memory_id,
                version,
                title,
                content,
                content_hash(content),
            )
            await conn.execute("DELETE FROM chunks WHERE memory_id = $1 AND version = $2", memory_id, version)
            await self._insert_chunks(conn, memory_id, version, ws.id, await self._chunks(title, content))
        await conn.execute(
            """
            UPDATE memories SET title = $2, tags = $3, metadata = $4, source_uri = $5, status_reason = $6,
                                content_hash = coalesce($7, content_hash)
            WHERE id = $1
            """,
            memory_id,
            *fields.values(),
            content_hash(scrubbed[row["version"]][1]) if row["version"] in scrubbed else None,
        )
        if fields["source_uri"] != row["source_uri"]:
            for table in ("derivations", "tombstones"):
                await conn.execute(
                    f"UPDATE {table} SET source_uri = $3 WHERE workspace_id = $1 AND source_uri = $2",
                    ws.id,
                    row["source_uri"],
                    fields["source_uri"],
                )
        for tombstone_id, snapshot, reason in tombstones:
            await conn.execute(
                "UPDATE tombstones SET snapshot = $2, reason = nullif($3, '') WHERE id = $1",
                tombstone_id,
                snapshot,
                reason,
            )
        await append_audit_event(
            conn,
            AuditEvent(
                ws.id,
                "redact",
                str(memory_id),
                row["version"],
                None,
                None,
                {**_details(redactor.findings), "versions": sorted(scrubbed)},
            ),
        )
        progress.versions_scrubbed = len(scrubbed)
        if row["version"] in scrubbed and row["deleted_at"] is None:
            # The redacted current text also becomes a new version, so readers and the audit log
            # see the change like any other; a deleted memory stays frozen until restored.
            title, content = scrubbed[row["version"]]
            row = await conn.fetchrow(_MEMORY_FOR_UPDATE, memory_id, ws.id)
            await self._new_version(
                conn,
                ws,
                {**row, "content_hash": content_hash(versions[-1]["content"])},
                title,
                content,
                content_hash(content),
                fields["tags"],
                fields["metadata"],
                await self._chunks(title, content),
            )
            progress.new_version = row["version"] + 1
        log.info(
            "memory_redacted", memory_id=str(memory_id), findings=len(redactor.findings), version=progress.new_version
        )
        return progress

    # -- shared steps -------------------------------------------------------------------

    async def _locate(
        self,
        conn: asyncpg.Connection,
        ws: WorkspaceRow,
        memory_id: uuid.UUID,
        statuses: tuple[str, ...] | None = None,
        verb: str = "change",
        deleted: bool = False,
    ) -> asyncpg.Record:
        """The memory, locked; NOT_FOUND (saying why) or FAILED_PRECONDITION when it cannot take `verb`."""
        row = await conn.fetchrow(_MEMORY_FOR_UPDATE, memory_id, ws.id)
        if row is None:
            purged = await conn.fetchval(
                "SELECT purged_at FROM tombstones WHERE memory_id = $1 AND workspace_id = $2 AND purged_at IS NOT NULL",
                memory_id,
                ws.id,
            )
            if purged is not None:
                raise NotFound(f"memory {memory_id} was purged at {purged:%Y-%m-%d %H:%M} UTC; nothing of it remains")
            if ws.id != GLOBAL_WORKSPACE and await conn.fetchval(
                "SELECT 1 FROM memories WHERE id = $1 AND workspace_id = $2", memory_id, GLOBAL_WORKSPACE
            ):
                raise NotFound(
                    f"memory {memory_id} is not in workspace {ws.name!r} but in the shared global scope, which "
                    "every workspace reads; to change it, name workspace 'global'"
                )
            raise NotFound(f"memory {memory_id} not found in workspace {ws.name!r}")
        if row["deleted_at"] is not None and not deleted:
            raise NotFound(
                f"memory {memory_id} was deleted at {row['deleted_at']:%Y-%m-%d %H:%M} UTC; "
                f"restore it first (mnemo restore {memory_id})"
            )
        if statuses is not None and row["status"] not in statuses:
            detail = f" by {row['superseded_by']}" if row["superseded_by"] else ""
            raise FailedPrecondition(f"cannot {verb} memory {memory_id}: it is {row['status']}{detail}")
        return row

    async def _record_derivation(
        self, conn: asyncpg.Connection, ws: WorkspaceRow, draft: Draft, memory_id: uuid.UUID
    ) -> None:
        if draft.derivation is None:
            return
        await conn.execute(
            """
            INSERT INTO derivations (workspace_id, source_uri, source_fingerprint, summarizer, prompt_version,
                                     memory_id, version)
            VALUES ($1, $2, $3, $4, $5, $6, (SELECT version FROM memories WHERE id = $6))
            """,
            ws.id,
            draft.source_uri,
            draft.derivation.source_fingerprint,
            draft.derivation.summarizer,
            draft.derivation.prompt_version,
            memory_id,
        )

    async def _refuse_tombstoned_source(self, conn: asyncpg.Connection, ws: WorkspaceRow, source_uri: str) -> None:
        """A deleted source stays deleted: no write may bring it back while its tombstone stands."""
        stone = await conn.fetchrow(
            "SELECT memory_id, principal, created_at, purged_at FROM tombstones "
            "WHERE workspace_id = $1 AND source_uri = $2 AND restored_at IS NULL",
            ws.id,
            source_uri,
        )
        if stone is None:
            return
        when = f"{stone['created_at']:%Y-%m-%d %H:%M} UTC"
        if stone["purged_at"] is not None:
            raise FailedPrecondition(
                f"source {source_uri!r} was deleted by {stone['principal']} at {when} and purged: nothing from it "
                "may be written to this workspace again (write it under another source_uri if it is truly wanted)"
            )
        raise FailedPrecondition(
            f"source {source_uri!r} was deleted by {stone['principal']} at {when}: writes from it are refused "
            f"while its tombstone stands; restore memory {stone['memory_id']} to bring it back"
        )

    async def _tombstone(
        self, conn: asyncpg.Connection, ws: WorkspaceRow, row: asyncpg.Record, reason: str | None
    ) -> asyncpg.Record:
        if row["deleted_at"] is not None:
            raise FailedPrecondition(f"memory {row['id']} is already deleted")
        snapshot = {
            "status": row["status"],
            "status_reason": row["status_reason"],
            "version": row["version"],
            "kind": row["kind"],
            "title": row["title"],
            "tags": list(row["tags"]),
        }
        await conn.execute("UPDATE memories SET deleted_at = now() WHERE id = $1", row["id"])
        return await conn.fetchrow(
            """
            INSERT INTO tombstones (workspace_id, memory_id, source_uri, source_fingerprint, snapshot,
                                    reason, principal)
            VALUES ($1, $2, $3, $4, $5, $6, $7)
            RETURNING *
            """,
            ws.id,
            row["id"],
            row["source_uri"],
            row["content_hash"],
            snapshot,
            reason,
            current_call().principal,
        )

    async def _supersede(
        self,
        conn: asyncpg.Connection,
        ws: WorkspaceRow,
        old: asyncpg.Record,
        successor: uuid.UUID,
        successor_hash: str,
        reason: str,
        valid_to: datetime | None = None,
    ) -> None:
        """Marks `old` superseded by `successor` and records it in the workspace's audit chain."""
        await self._set_state(conn, ws, old, "superseded", reason=reason, superseded_by=successor, valid_to=valid_to)
        await append_audit_event(
            conn,
            AuditEvent(
                ws.id,
                "supersede",
                str(old["id"]),
                old["version"],
                old["content_hash"],
                successor_hash,
                {"successor": str(successor), "reason": reason},
            ),
        )

    async def _set_state(
        self,
        conn: asyncpg.Connection,
        ws: WorkspaceRow,
        row: asyncpg.Record,
        status: str,
        reason: str | None = None,
        superseded_by: uuid.UUID | None = None,
        valid_to: datetime | None = None,
    ) -> None:
        """Changes the status (and valid time), closing the open span so as-of reads see the old one."""
        valid_to = valid_to if valid_to is not None else row["valid_to"]
        await conn.execute(
            """
            UPDATE memories SET status = $2, status_reason = $3, superseded_by = $4, valid_to = $5 WHERE id = $1
            """,
            row["id"],
            status,
            reason,
            superseded_by,
            valid_to,
        )
        await self._open_state(conn, row["id"], ws.id, status, reason, superseded_by, row["valid_from"], valid_to)

    async def _open_state(
        self,
        conn: asyncpg.Connection,
        memory_id: uuid.UUID,
        workspace_id: str,
        status: str,
        reason: str | None,
        superseded_by: uuid.UUID | None,
        valid_from: datetime | None,
        valid_to: datetime | None,
    ) -> None:
        # Spans stay contiguous and ordered even when a transaction that started earlier (an
        # earlier now()) commits its change after another one: the new span starts where the
        # closed one ends, never before it.
        await conn.execute(
            f"""
            WITH closed AS ({_CLOSE_SPAN.format(table="memory_states")})
            INSERT INTO memory_states (memory_id, workspace_id, status, reason, principal, superseded_by,
                                       valid_from, valid_to, recorded_from)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, coalesce((SELECT recorded_to FROM closed), now()))
            """,
            memory_id,
            workspace_id,
            status,
            reason,
            current_call().principal,
            superseded_by,
            valid_from,
            valid_to,
        )

    async def _insert_memory(
        self, conn: asyncpg.Connection, ws: WorkspaceRow, draft: Draft, chunks: list[Chunk]
    ) -> uuid.UUID:
        """The memory, its first version, its first status span and its chunks; no audit event."""
        memory_id = uuid.uuid4()
        author = current_call().principal
        await conn.execute(
            """
            INSERT INTO memories (id, workspace_id, kind, title, tags, metadata, source_uri, idempotency_key,
                                  status, author, provenance, version, content_hash, valid_from, valid_to,
                                  suspicious, trust)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $14, $9, $10, 1, $11, $12, $13, $15, $16)
            """,
            memory_id,
            ws.id,
            draft.kind,
            draft.title,
            draft.tags,
            draft.metadata,
            draft.source_uri,
            draft.idempotency_key,
            author,
            draft.provenance,
            draft.content_hash,
            draft.valid_from,
            draft.valid_to,
            draft.status,
            list(draft.suspicious),
            self._own_trust(draft.suspicious),
        )
        await conn.execute(
            """
            INSERT INTO memory_versions (memory_id, version, workspace_id, title, content, content_hash, author)
            VALUES ($1, 1, $2, $3, $4, $5, $6)
            """,
            memory_id,
            ws.id,
            draft.title,
            draft.content,
            draft.content_hash,
            author,
        )
        await self._open_state(conn, memory_id, ws.id, draft.status, None, None, draft.valid_from, draft.valid_to)
        await self._insert_chunks(conn, memory_id, 1, ws.id, chunks)
        return memory_id

    def _own_trust(self, suspicious: tuple[str, ...]) -> float:
        """A memory's own trust factor: lowered while its text looks like an attempt to instruct the model."""
        return self.trust.suspicious_weight if suspicious else 1.0

    async def _chunks(self, title: str, content: str) -> list[Chunk]:
        # Tokenizing a 1 MiB note takes seconds: keep it off the event loop serving other calls.
        return await asyncio.to_thread(chunk_text, title, content, self.embedder.count_tokens, self.embedder.max_tokens)

    async def _new_version(
        self,
        conn: asyncpg.Connection,
        ws: WorkspaceRow,
        row: asyncpg.Record,
        title: str,
        content: str,
        new_hash: str,
        tags: list[str],
        metadata: dict,
        chunks: list[Chunk],
        redactions: list[dict[str, str]] | tuple[dict[str, str], ...] = (),
    ) -> None:
        """Closes the open version, opens the next one with its chunks, and audits the change."""
        memory_id, old_version = row["id"], row["version"]
        version = old_version + 1
        author = current_call().principal
        suspicious = screened(title, content)
        await conn.execute(
            f"""
            WITH closed AS ({_CLOSE_SPAN.format(table="memory_versions")})
            INSERT INTO memory_versions (memory_id, version, workspace_id, title, content, content_hash, author,
                                         recorded_from)
            VALUES ($1, $2, $3, $4, $5, $6, $7, coalesce((SELECT recorded_to FROM closed), now()))
            """,
            memory_id,
            version,
            ws.id,
            title,
            content,
            new_hash,
            author,
        )
        await conn.execute(
            """
            UPDATE memories SET version = $2, title = $3, tags = $4, metadata = $5, content_hash = $6,
                                updated_at = now(), suspicious = $7, trust = $8
            WHERE id = $1
            """,
            memory_id,
            version,
            title,
            tags,
            metadata,
            new_hash,
            list(suspicious),
            self._own_trust(suspicious),
        )
        await self._insert_chunks(conn, memory_id, version, ws.id, chunks)
        await append_audit_event(
            conn,
            AuditEvent(
                ws.id,
                "update",
                str(memory_id),
                version,
                row["content_hash"],
                new_hash,
                _details(redactions, suspicious),
            ),
        )
        log.info("memory_updated", memory_id=str(memory_id), version=version, chunks=len(chunks))

    async def _insert_chunks(
        self, conn: asyncpg.Connection, memory_id: uuid.UUID, version: int, workspace_id: str, chunks: list[Chunk]
    ) -> None:
        await conn.execute(
            """
            INSERT INTO chunks (memory_id, version, workspace_id, ordinal, context, text, parts)
            SELECT $1, $2, $3, u.ordinal, u.context, u.text, u.parts
            FROM unnest($4::int[], $5::text[], $6::text[], $7::text[]) AS u(ordinal, context, text, parts)
            """,
            memory_id,
            version,
            workspace_id,
            [c.ordinal for c in chunks],
            [c.context for c in chunks],
            [c.text for c in chunks],
            [compound_parts(c.text) for c in chunks],
        )
        # Delivered on commit: wakes the embedding workers of every ingest replica.
        await conn.execute("SELECT pg_notify($1, $2)", EMBED_CHANNEL, str(memory_id))

    async def _fetch(self, conn: asyncpg.Connection, memory_id: uuid.UUID) -> common_pb2.Memory:
        row = await conn.fetchrow(
            f"SELECT {MEMORY_COLUMNS}, v.content FROM memories m {CONTENT_JOIN} WHERE m.id = $1", memory_id
        )
        return memory_message(row, with_content=True, trust=self.trust)
