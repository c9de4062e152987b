"""HarvestService: run now (streaming progress), status per agent, and the sources harvest knows."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from mnemo.harvest.v1 import harvest_service_pb2 as pb
from mnemo.harvest.v1 import harvest_service_pb2_grpc as pb_grpc
from mnemo_harvest import sources
from mnemo_harvest.engine import HarvestEngine
from mnemo_harvest.model import AGENTS
from mnemo_harvest.readers import reader_roots
from mnemo_platform import InvalidArgument, current_call, enum_value
from mnemo_store import caller_reach
from mnemo_wire import timestamp


class HarvestServicer(pb_grpc.HarvestServiceServicer):
    def __init__(self, engine: HarvestEngine, pool: asyncpg.Pool) -> None:
        self.engine = engine
        self.pool = pool

    async def Run(self, request: pb.RunRequest, context: Any) -> AsyncIterator[pb.RunProgress]:
        if request.agent and request.agent not in self.engine.readers:
            enabled = ", ".join(self.engine.readers) or "none"
            raise InvalidArgument(f"agent {request.agent!r} is not harvested here (enabled: {enabled})")
        check_session(request.session)
        async for progress in self.engine.run(request.agent, request.ignore_idle, request.session.strip()):
            yield progress

    async def Status(self, request: pb.StatusRequest, context: Any) -> pb.StatusResponse:
        caller = current_call()
        # A token sees the sessions of its own workspaces; the unplaced ones only an all-workspace caller.
        rows = await sources.within(self.pool, caller_reach())
        unregistered = await sources.unregistered_dirs(self.pool) if caller.all_workspaces else []
        response = pb.StatusResponse(
            interval_s=self.engine.settings.interval_s,
            idle_s=self.engine.settings.idle_s,
            unregistered=unregistered,
            archive_bytes=self._archive_bytes(caller.all_workspaces, rows),
            paused=self.engine.paused,
        )
        if self.engine.last_run_at:
            response.last_run_at.CopyFrom(timestamp(self.engine.last_run_at))
        for agent in AGENTS:
            mine = [r for r in rows if r["agent"] == agent]
            states = Counter(r["state"] for r in mine)
            skipped = sources.state_label(pb.SOURCE_STATE_SKIPPED)
            reasons = Counter(r["skip_reason"] or "other" for r in mine if r["state"] == skipped)
            failed = sources.state_label(pb.SOURCE_STATE_FAILED)
            response.agents.add(
                agent=agent,
                enabled=agent in self.engine.readers,
                roots=reader_roots(agent, self.engine.settings),
                sources_seen=len(mine),
                harvested=states[sources.state_label(pb.SOURCE_STATE_HARVESTED)],
                active=states[sources.state_label(pb.SOURCE_STATE_ACTIVE)],
                failed=states[failed],
                skipped=dict(reasons),
                failures=[_source(r) for r in mine if r["state"] == failed][:10],
                refused=[_source(r) for r in mine if _refused(r)][:10],
            )
        return response

    def _archive_bytes(self, everything: bool, rows: list[Any]) -> int:
        if self.engine.archive is None:
            return 0
        if everything:
            return self.engine.archive.total_bytes()  # what is on disk, the copies of unplaced sessions too
        # A token bound to workspaces learns the size of its own sessions' copies, not the machine's.
        return sum(r["archive_bytes"] or 0 for r in rows)

    async def ListSources(self, request: pb.ListSourcesRequest, context: Any) -> pb.ListSourcesResponse:
        enum_value(pb.SourceState, request.state, "state")  # a clear INVALID_ARGUMENT for an unknown state
        if request.agent:
            enum_value(pb.Agent, request.agent, "agent")
        if request.page_size < 0:
            raise InvalidArgument("page_size must not be negative")
        size = min(request.page_size or 50, 500)
        try:
            offset = int(request.page_token or 0)
            if not 0 <= offset < 2**31:
                raise ValueError
        except ValueError:
            raise InvalidArgument("page_token is not valid; pass the next_page_token of a previous page") from None
        rows = await sources.page(self.pool, caller_reach(), request.agent, request.state, size + 1, offset)
        page = rows[:size]
        return pb.ListSourcesResponse(
            sources=[_source(r) for r in page], next_page_token=str(offset + size) if len(rows) > size else ""
        )


def check_session(session: str) -> None:
    """A session reference is an id or an absolute path: never a pattern, never control characters."""
    if len(session) > 4096 or any(ord(ch) < 32 for ch in session):
        raise InvalidArgument("session must be a session id or an absolute file path (at most 4096 characters)")
    if session.strip().startswith((".", "~")):
        raise InvalidArgument(f"session {session!r} is a relative path; send it absolute (the CLI does)")


def _source(r: asyncpg.Record) -> pb.Source:
    return pb.Source(
        agent=r["agent"],
        session_id=r["session_id"],
        path=r["path"],
        workspace_id=r["workspace_id"] or "",
        state=r["state"],
        detail=r["detail"] or "",
        memory_id=str(r["memory_id"]) if r["memory_id"] else "",
        size=r["size"],
        updated_at=timestamp(r["mtime"]),
        harvested_at=timestamp(r["harvested_at"]),
        skip_reason=r["skip_reason"] or "",
    )


def _refused(row: Any) -> bool:
    """A session harvest would not read whole: too large, or with lines refused (named in its detail)."""
    return row["skip_reason"] == sources.skip_label(pb.SKIP_REASON_TOO_LARGE) or " lines refused: " in (
        row["detail"] or ""
    )
