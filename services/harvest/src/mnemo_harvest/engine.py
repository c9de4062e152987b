"""One harvest run: discover sessions, wait for idle, read, place, render, hand to ingest, record."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import grpc
import structlog
from google.protobuf import struct_pb2

from mnemo.common.v1 import common_pb2
from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo.harvest.v1 import harvest_service_pb2 as pb
from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_harvest import sources
from mnemo_harvest.archive import Archive, ArchivedSessions, free_disk_bytes
from mnemo_harvest.model import Reader, Session, SourceRef, Turn
from mnemo_harvest.placement import is_internal, lookup_paths
from mnemo_harvest.readers import reader_roots
from mnemo_harvest.readers.lines import SessionRefused
from mnemo_harvest.render import (
    extract_marked,
    header,
    render_transcript,
    session_metadata,
    session_outcome,
    session_title,
)
from mnemo_harvest.settings import HarvestSettings
from mnemo_harvest.sources import Record, Row, SourceBook, skip_label
from mnemo_harvest.summarize import PROMPT_VERSION, Summarizer, SummaryFailed
from mnemo_platform import ALL_WORKSPACES, CallContext, InvalidArgument, NotFound, current_call, enum_label, reason_of
from mnemo_platform.metrics import harvest_sessions
from mnemo_redact import redact, redact_json

log = structlog.get_logger("mnemo.harvest")

TRANSCRIPT = "transcript"


HARVEST_PRINCIPAL = "harvest"


def harvest_principal(workspaces: tuple[str, ...], role: str = "harvester") -> CallContext:
    """Harvest acts as itself, whoever asked for the run (the memories are the sessions' own), and
    with the least it needs: the harvester role (write harvested sessions and their candidates, whose
    review proposals ingest opens for them, and place a session; never search, read content, confirm,
    purge, administer tokens or write `global`) bound to `workspaces` — the role a remote harvester's
    token holds, so both run under the same rules."""
    return CallContext(
        principal=HARVEST_PRINCIPAL, request_id=current_call().request_id, role=role, workspaces=workspaces
    )


def _as_writer(workspace: str) -> list[tuple[str, str]]:
    """A session's writes: bound to the one workspace the session was placed in."""
    return harvest_principal((workspace,)).metadata()


def _as_placer() -> list[tuple[str, str]]:
    """Placement looks a session's directory up among every registered workspace: the harvester role
    over all of them (still no admin action, no read of content, and `global` stays read-only to it)."""
    return harvest_principal((ALL_WORKSPACES,)).metadata()


def _as_registrar() -> list[tuple[str, str]]:
    """Registering a workspace is an admin action: only with MNEMO_HARVEST_AUTO_REGISTER, for that call alone."""
    return harvest_principal((ALL_WORKSPACES,), role="admin").metadata()


def source_uri(agent: str, session_id: str) -> str:
    """The session's identity for ingest: tombstones and derivations are keyed on it."""
    return f"{agent}://session/{session_id}"


class IngestCalls(Protocol):
    """The ingest calls harvest makes: a gRPC stub beside the services, the gateway for a remote harvester."""

    def WriteMemory(
        self, request: ingest_pb.WriteMemoryRequest, *, metadata: Any
    ) -> Awaitable[ingest_pb.WriteMemoryResponse]: ...

    def WriteMemories(
        self, request: ingest_pb.WriteMemoriesRequest, *, metadata: Any
    ) -> Awaitable[ingest_pb.WriteMemoriesResponse]: ...

    def AddWorkspace(
        self, request: ingest_pb.AddWorkspaceRequest, *, metadata: Any
    ) -> Awaitable[ingest_pb.AddWorkspaceResponse]: ...


class SearchCalls(Protocol):
    """The search call harvest makes (placement)."""

    def ResolveWorkspace(
        self, request: search_pb.ResolveWorkspaceRequest, *, metadata: Any
    ) -> Awaitable[search_pb.ResolveWorkspaceResponse]: ...


@dataclass
class Outcome:
    outcome: int
    """outcome is a RunOutcome."""
    detail: str = ""
    memory_id: str = ""
    skip: int = pb.SKIP_REASON_UNSPECIFIED
    """skip is the SkipReason when the outcome is skipped."""


def _failed(detail: str) -> Outcome:
    return Outcome(pb.RUN_OUTCOME_FAILED, detail)


# The run's totals: a new version counts as harvested.
_TOTALS = {
    pb.RUN_OUTCOME_HARVESTED: "harvested",
    pb.RUN_OUTCOME_NEW_VERSION: "harvested",
    pb.RUN_OUTCOME_SKIPPED: "skipped",
    pb.RUN_OUTCOME_FAILED: "failed",
}


class HarvestEngine:
    """Runs are serialised in a process; across replicas ingest's derivations make them idempotent."""

    def __init__(
        self,
        book: SourceBook,
        readers: dict[str, Reader],
        ingest: IngestCalls,
        search: SearchCalls,
        settings: HarvestSettings,
        data_dir: Path,
        max_content_bytes: int,
        summarizer: Summarizer | None = None,
        archive: Archive | None = None,
    ) -> None:
        self.book = book
        """book is where what harvest knows of each session is kept: harvest_sources in-cluster, a file on a
        laptop that harvests through a gateway (mnemo_harvest.remote)."""
        self.readers = readers
        self.ingest = ingest
        self.search = search
        self.settings = settings
        self.data_dir = data_dir
        self.max_content_bytes = max_content_bytes
        self.summarizer = summarizer
        self.archive = archive
        self.lock = asyncio.Lock()
        self.last_run_at: datetime | None = None
        self.paused = ""

    @property
    def derived_with(self) -> str:
        """How memories are derived now; a change re-derives every session once."""
        if self.summarizer is None:
            return TRANSCRIPT
        return f"{self.summarizer.name}/{PROMPT_VERSION}"

    # -- the run ------------------------------------------------------------------------------

    async def run(self, agent: str = "", ignore_idle: bool = False, session: str = "") -> AsyncIterator[pb.RunProgress]:
        """One run over every session (of `agent`, when given), or over the one `session` names."""
        async with self.lock:
            refs: list[tuple[Reader, SourceRef]] = []
            for name, reader in self.readers.items():
                if agent and name != agent:
                    continue
                try:
                    found = await asyncio.to_thread(_discovered, reader)
                except Exception:
                    # A reader bug must not stop the other agents' harvest.
                    log.exception("harvest_discover_failed", agent=name)
                    continue
                refs += [(reader, ref) for ref in found]
            if session:
                refs = self._the_session(refs, session, agent)
                # The agent said the session ended: the idle window exists only to guess that.
                ignore_idle = True
                log.info("harvest_session_requested", session=session, agent=refs[0][1].agent)
            else:
                refs += await self._vanished_but_archived(agent, {(ref.agent, ref.key) for _, ref in refs})
            self.paused = self._low_disk()
            counts = {"harvested": 0, "skipped": 0, "failed": 0}
            places: dict[str, str | None] = {}
            # One read of what is known, so an unchanged session costs no query and no write.
            known = await self.book.known()
            for index, (reader, ref) in enumerate(refs, start=1):
                try:
                    result = await self._harvest(reader, ref, ignore_idle, places, known.get((ref.agent, ref.key)))
                except Exception as exc:
                    log.exception("harvest_session_failed", agent=ref.agent, session_id=ref.key)
                    result = _failed(f"{type(exc).__name__}: {exc}")
                    await self._record(ref, Record(pb.SOURCE_STATE_FAILED, result.detail), attempts=True)
                if result.outcome in _TOTALS:
                    counts[_TOTALS[result.outcome]] += 1
                harvest_sessions.add(1, {"outcome": enum_label(pb.RunOutcome, result.outcome)})
                yield pb.RunProgress(
                    agent=ref.agent,
                    session_id=ref.key,
                    outcome=enum_label(pb.RunOutcome, result.outcome),
                    detail=result.detail,
                    memory_id=result.memory_id,
                    skip_reason=skip_label(result.skip),
                    index=index,
                    total=len(refs),
                )
            await self._evict_archive()
            self.last_run_at = datetime.now(UTC)
            log.info("harvest_run_completed", sessions=len(refs), **counts)
            yield pb.RunProgress(done=True, total=len(refs), **counts)

    def _the_session(
        self, refs: list[tuple[Reader, SourceRef]], session: str, agent: str
    ) -> list[tuple[Reader, SourceRef]]:
        """The one source `session` names: by the agent's id, else by a file that holds only that session
        (OpenCode keeps every session in one database, so its path names none of them)."""
        chosen = [(reader, ref) for reader, ref in refs if ref.key == session]
        if not chosen and session.startswith("/"):
            wanted = os.path.realpath(session)
            chosen = [(reader, ref) for reader, ref in refs if ref.path and os.path.realpath(ref.path) == wanted]
            if len(chosen) > 1:
                raise InvalidArgument(f"{session} holds {len(chosen)} sessions; name one by its session id")
        if not chosen:
            roots = {name: reader_roots(name, self.settings) for name in self.readers if not agent or name == agent}
            raise NotFound(
                f"no session {session!r} among the agent sessions harvest reads ({_listed(roots)})",
                reasons_pb.ERROR_REASON_SESSION_NOT_FOUND,
            )
        return chosen[:1]

    async def _vanished_but_archived(
        self, agent: str, discovered: set[tuple[str, str]]
    ) -> list[tuple[Reader, SourceRef]]:
        """Sessions whose files are gone (Claude Code deletes them after 30 days) but whose
        memory should be derived again (new summarizer or prompt, or a summary still owed):
        their archived copies stand in for the files."""
        if self.archive is None:
            return []
        rows = await self.book.owed_from_archive(self.derived_with, agent)
        readers: dict[str, ArchivedSessions] = {}
        refs: list[tuple[Reader, SourceRef]] = []
        for row in rows:
            if (row["agent"], row["session_id"]) in discovered:
                continue
            reader = readers.setdefault(row["agent"], ArchivedSessions(row["agent"], self.archive, {}))
            # Eviction clears archive_path; a copy removed by hand fails as unreadable, named.
            reader.copies[row["session_id"]] = Path(row["archive_path"])
            ref = SourceRef(
                row["agent"], row["session_id"], row["path"], row["harvested_mtime"].timestamp(), row["harvested_size"]
            )
            refs.append((reader, ref))
        return refs

    def _low_disk(self) -> str:
        try:
            free = free_disk_bytes(self.data_dir)
        except OSError:
            return ""
        if free < self.settings.min_free_disk_bytes:
            message = (
                f"free disk {free} bytes is below MNEMO_MIN_FREE_DISK_BYTES ({self.settings.min_free_disk_bytes}); "
                "harvest writes are paused"
            )
            log.warning("harvest_paused_low_disk", free=free, minimum=self.settings.min_free_disk_bytes)
            return message
        return ""

    async def _harvest(
        self,
        reader: Reader,
        ref: SourceRef,
        ignore_idle: bool,
        places: dict[str, str | None],
        row: Row | None,
    ) -> Outcome:
        mtime = datetime.fromtimestamp(ref.mtime, UTC)
        if row is None or (row["path"], row["size"], row["mtime"]) != (ref.path, ref.size, mtime):
            row = await self.book.seen(ref)
        if not ignore_idle and time.time() - ref.mtime < self.settings.idle_s:
            await self._record(ref, Record(pb.SOURCE_STATE_ACTIVE, "still active: changed within MNEMO_HARVEST_IDLE_S"))
            return Outcome(pb.RUN_OUTCOME_SKIPPED, "still active", skip=pb.SKIP_REASON_STILL_ACTIVE)
        unchanged_since_last = (
            row is not None
            and row["harvested_size"] == ref.size
            and row["harvested_mtime"] == mtime
            and (
                (
                    row["state"] == sources.state_label(pb.SOURCE_STATE_HARVESTED)
                    and row["final"]
                    and row["derived_with"] == self.derived_with
                )
                # A deleted session stays deleted; a hostile file is not read again until it changes.
                or row["skip_reason"] in (skip_label(pb.SKIP_REASON_TOMBSTONED), skip_label(pb.SKIP_REASON_TOO_LARGE))
            )
        )
        if unchanged_since_last and row is not None:
            return Outcome(pb.RUN_OUTCOME_UNCHANGED, row["detail"] or "", str(row["memory_id"] or ""))
        if self.paused:
            return await self._skip(ref, pb.SKIP_REASON_PAUSED, f"paused: {self.paused}", "paused: low disk")
        limit = self.settings.max_session_bytes
        if ref.size > limit:
            # Refused on its size alone: a 2 GB file costs a stat, not a read.
            return await self._too_large(
                ref, mtime, f"too large: {ref.size} bytes on disk, over MNEMO_HARVEST_MAX_SESSION_BYTES ({limit})"
            )
        try:
            session = await asyncio.to_thread(reader.read, ref)
        except SessionRefused as exc:
            return await self._too_large(ref, mtime, exc.reason)
        except OSError as exc:
            await self._record(ref, Record(pb.SOURCE_STATE_FAILED, f"unreadable: {exc}"), attempts=True)
            return _failed(f"unreadable: {exc}")
        for path, line in session.malformed:
            log.warning("session_line_malformed", agent=ref.agent, file=path, line=line)
        if session.skipped_records:
            log.info(
                "session_records_skipped", agent=ref.agent, session_id=ref.key, by_type=dict(session.skipped_records)
            )
        if session.refused:
            log.warning("session_lines_refused", agent=ref.agent, session_id=ref.key, lines=session.refused[:10])
        if is_internal(session.cwd, session.first_prompt, self.data_dir):
            detail = "self-capture: a session of Mnemo's own"
            return await self._skip(ref, pb.SKIP_REASON_SELF_CAPTURE, detail, "self-capture", cwd=session.cwd)
        if not session.turns:
            detail = "empty: no conversation in the session" + _refused_note(session)
            shown = "empty" + _refused_note(session)
            return await self._skip(ref, pb.SKIP_REASON_EMPTY, detail, shown, cwd=session.cwd)
        workspace = await self._place(session.cwd, places)
        if workspace is None:
            detail = f"no-workspace: {session.cwd or 'no working directory recorded'}"
            return await self._skip(ref, pb.SKIP_REASON_NO_WORKSPACE, detail, detail, cwd=session.cwd)
        return await self._derive(ref, session, workspace, mtime, from_archive=isinstance(reader, ArchivedSessions))

    async def _derive(
        self, ref: SourceRef, session: Session, workspace: str, mtime: datetime, from_archive: bool = False
    ) -> Outcome:
        uri = source_uri(session.agent, session.session_id)
        # Redacted before anything leaves this process: the summarizer must not see secrets either.
        transcript = redact(render_transcript(session, self.max_content_bytes)).text
        content, summarizer, prompt_version, final, detail = transcript, TRANSCRIPT, "", True, ""
        provenance = common_pb2.PROVENANCE_HARVESTED_TRANSCRIPT
        # Redacted here like the transcript it is part of (ingest redacts metadata again).
        outcome = redact(session_outcome(session)).text
        if self.summarizer is not None:
            try:
                summary = await self.summarizer.summarize(transcript)
                summary = redact(summary).text
                # The header names the session (its title, often the first prompt): redacted with the rest.
                content = redact("\n".join(header(session))).text + "\n" + summary
                outcome = session_outcome(session, summary)
                summarizer, prompt_version = self.summarizer.name, PROMPT_VERSION
                provenance = common_pb2.PROVENANCE_HARVESTED_SUMMARY
            except SummaryFailed as exc:
                final, detail = False, f"summary failed ({exc}); transcript kept, summary retried next run"
                log.warning("session_summary_failed", agent=ref.agent, session_id=ref.key, error=str(exc))
        metadata = struct_pb2.Struct()
        # The title (the first prompt, often) and the metadata too: nothing unredacted leaves the harvester,
        # which for a remote one means the laptop.
        metadata.update(redact_json({**session_metadata(session), "outcome": outcome})[0])
        request = ingest_pb.WriteMemoryRequest(
            workspace=workspace,
            kind=common_pb2.MEMORY_KIND_SESSION,
            title=redact(session_title(session)).text,
            content=content,
            tags=[session.agent, "session"],
            metadata=metadata,
            source_uri=uri,
            provenance=provenance,
            derivation=ingest_pb.Derivation(
                source_fingerprint=session.fingerprint, summarizer=summarizer, prompt_version=prompt_version
            ),
        )
        try:
            response = await self.ingest.WriteMemory(request, metadata=_as_writer(workspace))
        except grpc.aio.AioRpcError as exc:
            if reason_of(exc) == reasons_pb.ERROR_REASON_TOMBSTONED:
                # A deleted session stays deleted: ingest refuses its source while the tombstone stands.
                return await self._skip(
                    ref,
                    pb.SKIP_REASON_TOMBSTONED,
                    f"tombstoned: {exc.details()}",
                    "tombstoned",
                    cwd=session.cwd,
                    workspace=workspace,
                    harvested=(ref, mtime),
                    fingerprint=session.fingerprint,
                )
            failure = f"ingest: {exc.code().name}: {exc.details()}"
            await self._record(ref, Record(pb.SOURCE_STATE_FAILED, failure), attempts=True)
            return _failed(failure)
        memory = response.memory
        outcome = {
            ingest_pb.WRITE_OUTCOME_CREATED: pb.RUN_OUTCOME_HARVESTED,
            ingest_pb.WRITE_OUTCOME_NEW_VERSION: pb.RUN_OUTCOME_NEW_VERSION,
        }.get(response.outcome, pb.RUN_OUTCOME_UNCHANGED)
        unwritten = await self._write_extracted(
            session, workspace, uri, memory.id, content if summarizer != TRANSCRIPT else ""
        )
        if unwritten:
            # Not final until its candidates land: the next run derives it again (ingest answers
            # `unchanged` for the session) and writes them with the same keys, so none is doubled.
            final = False
            detail = "; ".join(filter(None, [detail, f"{unwritten}; retried next run"]))
        # A copy read back from the archive stays as it is (its age decides its retention).
        archive = None if from_archive else await self._archive(session)
        if from_archive:
            detail = detail or f"re-derived from the archive ({self.derived_with})"
        await self._record(
            ref,
            Record(pb.SOURCE_STATE_HARVESTED, (detail or f"version {memory.version}") + _refused_note(session)),
            cwd=session.cwd,
            workspace=workspace,
            memory_id=memory.id,
            final=final,
            derived_with=self.derived_with,
            harvested=(ref, mtime),
            archive=archive,
            fingerprint=session.fingerprint,
        )
        log.info(
            "session_harvested",
            agent=ref.agent,
            session_id=ref.key,
            outcome=enum_label(pb.RunOutcome, outcome),
            memory_id=memory.id,
        )
        return Outcome(outcome, detail, memory.id)

    async def _write_extracted(self, session: Session, workspace: str, uri: str, memory_id: str, summary: str) -> str:
        """DECISION:/LESSON: lines become candidate memories awaiting review, linked to the session.

        Returns "" when every line landed (or was refused for good: a retry would be refused again),
        else what failed for a reason that may pass (ingest unavailable, a deadline)."""
        items = extract_marked(session)
        if summary:
            items += [i for i in extract_marked(_summary_session(session, summary)) if i not in items]
        requests = []
        for item in items:
            text = redact(item.text).text
            digest = hashlib.sha256(f"{item.kind}:{text}".encode()).hexdigest()[:12]
            metadata = struct_pb2.Struct()
            metadata.update({"session_memory_id": memory_id, "session_id": session.session_id, "said_by": item.role})
            requests.append(
                ingest_pb.WriteMemoryRequest(
                    workspace=workspace,
                    kind=common_pb2.MEMORY_KIND_DECISION if item.kind == "decision" else common_pb2.MEMORY_KIND_LESSON,
                    title=text[:80],
                    content=text,
                    tags=[session.agent, item.kind],
                    metadata=metadata,
                    # One identity per line: re-deriving a grown session does not duplicate it, and
                    # the key makes a retry after a lost answer return the first write.
                    source_uri=f"{uri}#{item.kind}-{digest}",
                    idempotency_key=f"harvest:{uri}#{item.kind}-{digest}",
                    provenance=common_pb2.PROVENANCE_EXTRACTED,
                    status=common_pb2.MEMORY_STATUS_CANDIDATE,
                )
            )
        if not requests:
            return ""
        # One call for the session's lines: each is answered alone, so a refused one costs only itself.
        try:
            response = await self.ingest.WriteMemories(
                ingest_pb.WriteMemoriesRequest(items=requests), metadata=_as_writer(workspace)
            )
        except grpc.aio.AioRpcError as exc:
            log.warning("extracted_memories_not_written", code=exc.code().name, count=len(requests))
            if exc.code() in _TRANSIENT:
                return f"{len(requests)} candidate writes failed ({exc.code().name})"
            return ""
        failed = []
        for result in response.results:
            if result.error.code:
                log.warning("extracted_memory_not_written", code=result.error.code, detail=result.error.message)
                if result.error.code in _TRANSIENT_NAMES:
                    failed.append(result.error.code)
        if failed:
            return f"{len(failed)} of {len(requests)} candidate writes failed ({', '.join(sorted(set(failed)))})"
        return ""

    async def _archive(self, session: Session) -> tuple[str, int] | None:
        if self.archive is None or self.paused:
            return None
        try:
            # Redacting and compressing a large session takes a while: off the event loop.
            path, size = await asyncio.to_thread(self.archive.write, session)
        except OSError as exc:
            log.warning("archive_write_failed", session_id=session.session_id, error=str(exc))
            return None
        return str(path), size

    async def _evict_archive(self) -> None:
        if self.archive is None:
            return
        evicted = await asyncio.to_thread(self.archive.evict)
        if evicted:
            await self.book.archive_evicted([str(p) for p in evicted])

    # -- placement --------------------------------------------------------------------------

    async def _place(self, cwd: str | None, places: dict[str, str | None]) -> str | None:
        """The workspace of a session's directory: the longest registered root containing it."""
        if not cwd or not cwd.startswith("/"):
            return None
        if cwd in places:
            return places[cwd]
        workspace = None
        candidates = lookup_paths(cwd)
        for path in candidates:
            try:
                response = await self.search.ResolveWorkspace(
                    search_pb.ResolveWorkspaceRequest(workspace=path), metadata=_as_placer()
                )
            except grpc.aio.AioRpcError as exc:
                if reason_of(exc) not in _NOT_A_WORKSPACE and not _not_among_its_own(exc):
                    raise
                continue
            workspace = response.workspace.id
            break
        if workspace is None and self.settings.auto_register:
            response = await self.ingest.AddWorkspace(
                ingest_pb.AddWorkspaceRequest(root_path=candidates[0]), metadata=_as_registrar()
            )
            workspace = response.workspace.id
            log.info("workspace_auto_registered", root=candidates[0], workspace=workspace)
        places[cwd] = workspace
        return workspace

    # -- harvest's own state --------------------------------------------------------------------

    async def _record(self, ref: SourceRef, outcome: Record, **fields: Any) -> None:
        await self.book.record(ref, outcome, **fields)

    async def _too_large(self, ref: SourceRef, mtime: datetime, detail: str) -> Outcome:
        """Skips a session over the size cap; it is not looked at again until its files change."""
        log.warning("session_too_large", agent=ref.agent, session_id=ref.key, detail=detail)
        return await self._skip(ref, pb.SKIP_REASON_TOO_LARGE, detail, detail, harvested=(ref, mtime))

    async def _skip(self, ref: SourceRef, skip: int, detail: str, shown: str, **fields: Any) -> Outcome:
        """Records a deliberate skip (`detail` for the status) and reports it (`shown` for the run)."""
        await self._record(ref, Record(pb.SOURCE_STATE_SKIPPED, detail, skip), **fields)
        return Outcome(pb.RUN_OUTCOME_SKIPPED, shown, skip=skip)


# Failures that may pass by themselves: a candidate write refused with one of these is tried again.
_TRANSIENT = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.CANCELLED,
    }
)
_TRANSIENT_NAMES = frozenset(code.name for code in _TRANSIENT)

# What a path that is no registered workspace's answers when resolved: the session stays unplaced.
_NOT_A_WORKSPACE = (reasons_pb.ERROR_REASON_WORKSPACE_NOT_FOUND, reasons_pb.ERROR_REASON_INVALID_ARGUMENT)


def _not_among_its_own(exc: grpc.aio.AioRpcError) -> bool:
    """A harvester bound to some workspaces hears of any other path only that it may not touch it (the same
    words whether or not it is registered): for placement, not one of its workspaces. A refusal of the role
    itself is no such answer."""
    return exc.code() == grpc.StatusCode.PERMISSION_DENIED and reason_of(exc) != reasons_pb.ERROR_REASON_ROLE_TOO_LOW


def _refused_note(session: Session) -> str:
    """The lines left out as hostile, for the session's status: the first three and a count."""
    if not session.refused:
        return ""
    more = f" and {len(session.refused) - 3} more" if len(session.refused) > 3 else ""
    return f" ({len(session.refused)} lines refused: {'; '.join(session.refused[:3])}{more})"


def _summary_session(session: Session, summary: str) -> Session:
    return Session(
        agent=session.agent, session_id=session.session_id, source_path="", turns=[Turn("assistant", summary)]
    )


def _listed(roots: dict[str, list[str]]) -> str:
    if not roots:
        return "no agent is enabled: MNEMO_HARVEST_AGENTS"
    return "; ".join(f"{name}: {', '.join(paths) or 'no root'}" for name, paths in roots.items())


def _discovered(reader: Reader) -> list[SourceRef]:
    """Every source a reader finds, listed in a worker thread (discovery walks the disk)."""
    return list(reader.discover())
