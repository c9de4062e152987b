"""Writes and versions: a new memory (with replays, source versions and derivations) and an update."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

import asyncpg
import structlog

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_ingest.imports import bind_to_batch
from mnemo_ingest.steps import Steps, audit_details
from mnemo_ingest.validation import Draft, check_content, check_metadata, check_tags, check_title, content_hash
from mnemo_ingest.validation import redacted_text as redact_field
from mnemo_platform import AlreadyExists, FailedPrecondition, MnemoError
from mnemo_platform.errors import INVALID_INPUT_ERRORS, invalid_input
from mnemo_redact import redact, redact_json
from mnemo_store import (
    VISIBLE_STATUSES,
    AuditEvent,
    ChainHeads,
    KnownIds,
    WorkspaceRow,
    append_audit_event,
    append_audit_events,
    chain_moved,
    prepare_append,
    proposals,
    resolve_for_write,
    tombstones,
)
from mnemo_store import memories as db

log = structlog.get_logger("mnemo.ingest")

# What every connection of the write path's pool starts with (mnemo_ingest.app). A new memory is
# one statement of a dozen CTEs whose plan does not turn on its values (it inserts what it is given,
# and looks keys up by index), and PostgreSQL planned it at every call: 0.58 ms of planning before
# 0.58 ms of running it, for a single write through the gateway whose whole server side took 2.9 ms
# (pg log, 600 writes, 2026-12-05). Its generic plan, made once per connection: 0.06 ms to bind,
# 0.67 to run; the write's server side 2.5 ms. The search service does the same for the lexical leg
# (mnemo_search.engine.LEXICAL_SESSION); the rest of ingest (consolidation's HNSW scans above all)
# plans per call on the main pool.
WRITE_SESSION = {"plan_cache_mode": "force_generic_plan"}

Outcome = Literal["created", "new_version", "unchanged", "replayed"]

# The most items one batch write takes: a batch is one transaction, held while every item is written.
MAX_BATCH = 1000


@dataclass(frozen=True)
class Written:
    """What a write did: the memory as it now is (with its content) and how it got there."""

    memory: asyncpg.Record
    outcome: Outcome


@dataclass(frozen=True)
class Edit:
    """A checked, redacted update: the new content and, where given, the fields it replaces."""

    content: str
    redactions: list[dict[str, str]]
    title: str | None
    tags: list[str] | None
    metadata: dict | None
    expected_version: int


def check_edit(
    content: str,
    max_bytes: int,
    title: str | None,
    tags: list[str] | None,
    metadata: object | None,
    expected_version: int,
) -> Edit:
    """Validates and redacts an update before anything touches the database."""
    text, redactions = redact_field(check_content(content, max_bytes))
    return Edit(
        content=text,
        redactions=redactions,
        title=redact(check_title(title, text)).text if title is not None else None,
        tags=[redact(t).text for t in check_tags(tags)] if tags is not None else None,
        metadata=redact_json(check_metadata(metadata))[0] if metadata is not None else None,
        expected_version=expected_version,
    )


class Writes:
    """Every write that adds text: new memories and new versions."""

    def __init__(self, pool: asyncpg.Pool, steps: Steps) -> None:
        self.pool = pool
        self.steps = steps
        # Workspaces by id, looked up once (resolve_for_write): one statement less per write.
        self.workspace_ids: KnownIds = {}
        # The audit chains' heads as this process's writes left them, and a turn at each chain.
        self.heads = ChainHeads()
        self._linking: dict[str, asyncio.Lock] = {}

    async def write(self, ref: str, draft: Draft) -> Written:
        [result] = await self.write_many([(ref, draft)])
        if isinstance(result, MnemoError):
            raise result
        return result

    async def write_many(self, items: list[tuple[str, Draft | MnemoError]]) -> list[Written | MnemoError]:
        """Writes in one transaction, answered in order; a single write is a batch of one.

        New memories go in together: one multi-row insert of them all (which returns their rows),
        one of their chunks (with one NOTIFY), one extension of each audit chain. An item that needs a
        decision of its own (a replay of a key used earlier in the batch, a source the workspace
        already has or has tombstoned, a derivation) is written alone in a savepoint, so that if
        it is refused it is rolled back alone and the rest commit. Should the multi-row insert
        fail (a concurrent writer took a key or a source since it was looked up), the batch is
        run again with every item alone.
        """
        drafts = [draft for _, draft in items if isinstance(draft, Draft)]
        pieces = iter(await self.steps.chunks_of([(d.title, d.content) for d in drafts]))
        chunked = [(ref, draft, next(pieces) if isinstance(draft, Draft) else []) for ref, draft in items]
        try:
            return await self._batch(chunked, together=True)
        except (asyncpg.UniqueViolationError, *INVALID_INPUT_ERRORS) as exc:
            log.info("batch_written_alone", cause=type(exc).__name__, items=len(chunked))
            return await self._batch(chunked, together=False)

    async def _batch(
        self, chunked: list[tuple[str, Draft | MnemoError, list[db.ChunkRow]]], together: bool
    ) -> list[Written | MnemoError]:
        async with self.pool.acquire() as conn:
            if together and not any(isinstance(d, Draft) and _needs_decision(d) for _, d, _ in chunked):
                done = await self._in_one_statement(conn, chunked)
                if done is not None:
                    return done
            return await self._in_transaction(conn, chunked, together)

    async def _in_one_statement(
        self, conn: asyncpg.Connection, chunked: list[tuple[str, Draft | MnemoError, list[db.ChunkRow]]]
    ) -> list[Written | MnemoError] | None:
        """New memories that need no decision of their own, in chains whose heads this process
        knows: one statement, outside any transaction, inserts them and links their audit events
        to those heads, checking in the same statement that the heads have not moved (nothing else
        of the write costs a round trip). None if a head is not known or had moved on, or a key was
        already taken: then the caller writes the batch in a transaction, which reads the heads and
        looks the keys up."""
        results: list[Written | MnemoError | None] = [None] * len(chunked)
        placed = await self._place(conn, chunked, results)
        workspaces = sorted({ws.id for ws, _, _ in placed.values()})
        async with contextlib.AsyncExitStack() as held:
            # This process's writes to a chain take turns here rather than race for its head and
            # fail: another process's are caught by the statement's check.
            for w in workspaces:
                await held.enter_async_context(self._linking.setdefault(w, asyncio.Lock()))
            heads = self.heads.known(workspaces)
            if heads is None:
                return None
            fresh = {i: self.steps.new_memory(ws, draft, chunks) for i, (ws, draft, chunks) in placed.items()}
            if fresh:
                append = prepare_append([_write_event(new, placed[i][1]) for i, new in fresh.items()], heads)
                try:
                    rows = await db.insert_memories(conn, list(fresh.values()), audit=append)
                except asyncpg.PostgresError as exc:
                    if db.key_taken(exc):
                        return None  # a key already used (a retry): the long way answers it as a replay
                    if not chain_moved(exc):
                        raise
                    self.heads.forget(workspaces)
                    log.info("audit_head_moved", workspaces=workspaces)
                    return None
                self.heads.remember(append.after)
                for i, new in fresh.items():
                    results[i] = Written(rows[new.id], "created")
                _log_written(list(fresh.values()))
        return _answered(results)

    async def _in_transaction(
        self,
        conn: asyncpg.Connection,
        chunked: list[tuple[str, Draft | MnemoError, list[db.ChunkRow]]],
        together: bool,
    ) -> list[Written | MnemoError]:
        results: list[Written | MnemoError | None] = [None] * len(chunked)
        async with conn.transaction():
            placed = await self._place(conn, chunked, results)
            taken = db.Taken({}, set())
            if together:
                taken = await db.find_taken(
                    conn,
                    [(ws.id, d.idempotency_key) for ws, d, _ in placed.values() if d.idempotency_key],
                    [(ws.id, d.source_uri) for ws, d, _ in placed.values() if d.source_uri],
                )
            fresh: dict[int, db.NewMemory] = {}
            replayed: dict[int, uuid.UUID] = {}
            alone: list[int] = []
            seen: set[tuple[str, str, str]] = set()
            for i, (ws, draft, chunks) in placed.items():
                key = ("key", ws.id, draft.idempotency_key) if draft.idempotency_key else None
                source = ("source", ws.id, draft.source_uri) if draft.source_uri else None
                hit = taken.keys.get((ws.id, draft.idempotency_key)) if draft.idempotency_key else None
                if not together or key in seen or source in seen or draft.derivation is not None:
                    alone.append(i)
                elif hit is not None:
                    if hit["content_hash"] != draft.content_hash:
                        results[i] = _key_reused(draft, hit["id"])
                    else:
                        replayed[i] = hit["id"]
                elif source is not None and source[1:] in taken.sources:
                    alone.append(i)
                else:
                    fresh[i] = self.steps.new_memory(ws, draft, chunks)
                seen.update(k for k in (key, source) if k is not None)
            rows = await db.insert_memories(conn, list(fresh.values()))
            for i in alone:
                results[i] = await self._alone(conn, *placed[i])
            # The insert took the chains' locks.
            await append_audit_events(
                conn, [_write_event(new, placed[i][1]) for i, new in fresh.items()], locked=True, known=self.heads
            )
            for i, new in fresh.items():
                await _propose_review(conn, new.id, new.workspace_id, placed[i][1])
            rows |= await db.fetch_memories(conn, list(replayed.values()))
            for i, new in fresh.items():
                results[i] = Written(rows[new.id], "created")
            _log_written(list(fresh.values()))
            for i, memory_id in replayed.items():
                results[i] = Written(rows[memory_id], "replayed")
        return _answered(results)

    async def _place(
        self,
        conn: asyncpg.Connection,
        chunked: list[tuple[str, Draft | MnemoError, list[db.ChunkRow]]],
        results: list[Written | MnemoError | None],
    ) -> dict[int, tuple[WorkspaceRow, Draft, list[db.ChunkRow]]]:
        """The items that can be written, by position, with their workspace; the refused ones answered
        in `results`. Each workspace a batch names is resolved (and its wall checked) once, not per item."""
        places: dict[str, WorkspaceRow | MnemoError] = {}
        batches: dict[uuid.UUID, asyncpg.Record | None] = {}
        placed: dict[int, tuple[WorkspaceRow, Draft, list[db.ChunkRow]]] = {}
        for i, (ref, draft, chunks) in enumerate(chunked):
            if not isinstance(draft, Draft):
                results[i] = draft
                continue
            if ref not in places:
                try:
                    places[ref] = await resolve_for_write(conn, ref, self.workspace_ids)
                except MnemoError as exc:
                    places[ref] = exc
            ws = places[ref]
            if not isinstance(ws, WorkspaceRow):
                results[i] = ws
                continue
            if draft.import_batch is not None:
                try:
                    draft = await bind_to_batch(conn, ws, draft, batches)
                except MnemoError as exc:
                    results[i] = exc
                    continue
            placed[i] = (ws, draft, chunks)
        return placed

    async def _alone(
        self, conn: asyncpg.Connection, ws: WorkspaceRow, draft: Draft, chunks: list[db.ChunkRow]
    ) -> Written | MnemoError:
        """One item written in its own savepoint; its refusal is its answer."""

        async def attempt() -> Written:
            async with conn.transaction():
                return await self._write(conn, ws, draft, chunks)

        try:
            return await _retrying(attempt)
        except MnemoError as exc:
            return exc
        except tuple(INVALID_INPUT_ERRORS):
            return invalid_input()

    async def _write(
        self, conn: asyncpg.Connection, ws: WorkspaceRow, draft: Draft, chunks: list[db.ChunkRow]
    ) -> Written:
        if draft.idempotency_key:
            row = await db.find_by_idempotency_key(conn, ws.id, draft.idempotency_key)
            if row is not None:
                if row["content_hash"] != draft.content_hash:
                    raise _key_reused(draft, row["id"])
                return Written(await db.fetch_memory(conn, row["id"]), "replayed")
        if draft.source_uri:
            existing = await self._from_source(conn, ws, draft, chunks)
            if existing is not None:
                return existing
        new, row = await self.steps.insert(conn, ws, draft, chunks)
        await self._record_derivation(conn, ws, draft, new.id)
        await append_audit_event(conn, _write_event(new, draft))
        await _propose_review(conn, new.id, ws.id, draft)
        _log_written([new])
        return Written(row, "created")

    async def _from_source(
        self, conn: asyncpg.Connection, ws: WorkspaceRow, draft: Draft, chunks: list[db.ChunkRow]
    ) -> Written | None:
        """A write naming a source the workspace already has: unchanged, or the source's next version."""
        assert draft.source_uri is not None
        await self.steps.refuse_tombstoned_source(conn, ws, draft.source_uri)
        if draft.derivation is not None:
            derived = await tombstones.derived_memory(conn, ws.id, draft.source_uri, draft.derivation)
            if derived is not None:
                # This exact source version was already derived this way (a replica's race, a
                # restart, a re-run): nothing new.
                return Written(await db.fetch_memory(conn, derived), "unchanged")
        row = await db.lock_by_source(conn, ws.id, draft.source_uri)
        if row is None:
            return None
        outcome: Outcome = "unchanged"
        if row["content_hash"] != draft.content_hash:
            await self.steps.new_version(
                conn,
                row,
                draft.title,
                draft.content,
                draft.content_hash,
                draft.tags,
                draft.metadata,
                chunks,
                draft.redactions,
            )
            # A re-derivation may change how the text was made (a transcript becomes a summary
            # once the summarizer answers); trust follows the current text.
            await db.set_provenance(conn, row["id"], draft.provenance)
            outcome = "new_version"
        await self._record_derivation(conn, ws, draft, row["id"])
        return Written(await db.fetch_memory(conn, row["id"]), outcome)

    async def _record_derivation(
        self, conn: asyncpg.Connection, ws: WorkspaceRow, draft: Draft, memory_id: uuid.UUID
    ) -> None:
        if draft.derivation is not None and draft.source_uri:
            await tombstones.record_derivation(conn, ws.id, draft.source_uri, draft.derivation, memory_id)

    async def update(self, ref: str, memory_id: uuid.UUID, edit: Edit) -> Written:
        async with self.pool.acquire() as conn, conn.transaction():
            ws = await resolve_for_write(conn, ref)
            row = await self.steps.locate(conn, ws, memory_id, statuses=VISIBLE_STATUSES)
            if edit.expected_version and edit.expected_version != row["version"]:
                raise FailedPrecondition(
                    f"memory {memory_id} is at version {row['version']}, not {edit.expected_version}; "
                    "read it again before updating",
                    reasons_pb.ERROR_REASON_VERSION_CONFLICT,
                )
            title = row["title"] if edit.title is None else edit.title
            tags = list(row["tags"]) if edit.tags is None else edit.tags
            metadata = row["metadata"] if edit.metadata is None else edit.metadata
            new_hash = content_hash(edit.content)
            if (new_hash, title, tags, metadata) == (
                row["content_hash"],
                row["title"],
                list(row["tags"]),
                row["metadata"],
            ):
                return Written(await db.fetch_memory(conn, memory_id), "unchanged")
            chunks = await self.steps.chunks(title, edit.content)
            await self.steps.new_version(
                conn, row, title, edit.content, new_hash, tags, metadata, chunks, edit.redactions
            )
            return Written(await db.fetch_memory(conn, memory_id), "new_version")


def _log_written(news: list[db.NewMemory]) -> None:
    """A line per new memory of a single write; one per batch otherwise (a line each costs a fifth
    of a batch's time at the default log level; the audit log names every memory)."""
    if len(news) == 1:
        new = news[0]
        log.info("memory_written", memory_id=str(new.id), workspace=new.workspace_id, chunks=len(new.chunks))
    elif news:
        workspaces = sorted({n.workspace_id for n in news})
        log.info("memories_written", count=len(news), workspaces=workspaces, chunks=sum(len(n.chunks) for n in news))


def _answered(results: list[Written | MnemoError | None]) -> list[Written | MnemoError]:
    """The results of a batch, every item answered."""
    assert all(r is not None for r in results)
    return [r for r in results if r is not None]


def _needs_decision(draft: Draft) -> bool:
    """Whether writing the draft takes more than inserting it: a source to look up (the workspace
    may hold it, or have tombstoned it), a derivation to record, an import batch to join, or a
    review to open. An idempotency key does not: a new one is inserted with the note, and one
    already used fails the insert on its unique index (memories.key_taken), the write then
    answered the long way."""
    return bool(
        draft.source_uri or draft.derivation is not None or draft.import_batch is not None or _review_reason(draft)
    )


def _review_reason(draft: Draft) -> tuple[str, str] | None:
    """Why a new candidate waits for a reviewer (its proposal's source and reason), if it does:
    flagged text (screening) and a harvested DECISION:/LESSON: line (harvest). A staged import's
    candidates wait for their batch's proposal."""
    if draft.status != "candidate":
        return None
    if draft.suspicious:
        return (
            "screening",
            f"flagged by the poisoning screen ({', '.join(draft.suspicious)}): text that tries to instruct the "
            "model waits for a reviewer to confirm it",
        )
    if draft.provenance == "extracted" and draft.import_batch is None:
        return "harvest", "a DECISION:/LESSON: line harvested from a session; confirm it to trust it"
    return None


def candidate_proposal(memory_id: uuid.UUID, workspace_id: str, draft: Draft) -> proposals.NewProposal | None:
    """The proposal a new candidate memory opens, if any (_review_reason)."""
    why = _review_reason(draft)
    if why is None:
        return None
    source, reason = why
    return proposals.NewProposal(
        workspace_id=workspace_id,
        kind="confirm",
        memory_ids=[memory_id],
        reason=reason,
        proposed_by=f"system:{source}",
        source=source,
        dedupe_key=f"confirm:{memory_id}",
    )


async def _propose_review(conn: asyncpg.Connection, memory_id: uuid.UUID, workspace_id: str, draft: Draft) -> None:
    """A new candidate that waits for a reviewer (flagged text, a harvested line) opens its
    proposal in the write's own transaction: no candidate is written without its place in the queue."""
    proposal = candidate_proposal(memory_id, workspace_id, draft)
    if proposal is not None:
        await proposals.open_proposal(conn, proposal)


def _write_event(new: db.NewMemory, draft: Draft) -> AuditEvent:
    """The audit event of a new memory."""
    details = audit_details(draft.redactions, draft.suspicious)
    if draft.import_batch is not None:
        details = {**details, "import_batch": str(draft.import_batch)}
    return AuditEvent(new.workspace_id, "write", str(new.id), 1, None, new.content_hash, details)


def _key_reused(draft: Draft, memory_id: uuid.UUID) -> AlreadyExists:
    return AlreadyExists(
        f"idempotency key {draft.idempotency_key!r} was already used for memory {memory_id} "
        "with different content; use a new key for a new write",
        reasons_pb.ERROR_REASON_IDEMPOTENCY_KEY_REUSED,
    )


async def _retrying(attempt: Callable[[], Awaitable[Written]]) -> Written:
    """Runs a write, again when a concurrent writer with the same source_uri or idempotency key won
    the insert: the next attempt finds its row and answers as a replay or a new version."""
    for n in range(3):
        try:
            return await attempt()
        except asyncpg.UniqueViolationError:
            if n == 2:
                raise AlreadyExists("a concurrent write with the same source_uri or idempotency key won") from None
    raise AssertionError("unreachable")
