"""SearchService: every read, each scoped by the one predicate builder."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import asyncpg

from mnemo.common.v1 import common_pb2
from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo.search.v1 import search_service_pb2 as pb
from mnemo.search.v1 import search_service_pb2_grpc as pb_grpc
from mnemo_embed import Embedder
from mnemo_platform import (
    ALL_WORKSPACES,
    InvalidArgument,
    NotFound,
    Unauthenticated,
    current_call,
    enum_label,
    enum_value,
)
from mnemo_search import context as wake_up
from mnemo_search.engine import LegHit, SearchEngine
from mnemo_search.export import export_records
from mnemo_search.requests import (
    MAX_QUERY_CHARS,
    event_cursor,
    in_workspace,
    limit,
    memory_cursor,
    memory_token,
    no_nul,
    read_scope,
)
from mnemo_search.settings import SearchSettings
from mnemo_store import (
    VISIBLE_STATUSES,
    Params,
    Reach,
    Scope,
    WorkspaceCache,
    WorkspaceRow,
    authenticate,
    caller_reach,
    list_tokens,
    list_workspaces,
    proposals,
    reach_in,
    read_embedding_space,
    reads,
    require_everywhere,
    resolve_for_read,
    tombstones,
    verify_chains,
    workspace_clause,
)
from mnemo_store import memories as db
from mnemo_wire import (
    TrustSettings,
    audit_message,
    from_timestamp,
    memory_message,
    parse_memory_id,
    proposal_message,
    timestamp,
    token_message,
    workspace_message,
)

EVERY_WORKSPACE = "every workspace (admin)"
DEFAULT_PROPOSALS = 50
MAX_PROPOSALS = 500


def _label(enum: Any, value: int, field: str) -> str:
    """A filter's enum as its label; "" (unspecified) keeps every value."""
    try:
        return enum_label(enum, value)
    except ValueError:
        raise InvalidArgument(f"{field} {value} is not a known value") from None


def _leg_explanation(hit: LegHit | None) -> pb.LegExplanation:
    return pb.LegExplanation(rank=hit.rank, score=hit.score) if hit else pb.LegExplanation()


# A history page: versions by count and by the bytes of their text, so any page fits well inside
# gRPC's 16 MiB message limit (one version holds at most MNEMO_MAX_CONTENT_BYTES, 1 MiB by default).
HISTORY_DEFAULT_PAGE = 100
HISTORY_MAX_PAGE = 1000
HISTORY_PAGE_BYTES = 4 * 1024 * 1024


def history_cursor(page_token: str) -> int:
    """The version a history page continues after (0: the first page)."""
    if not page_token:
        return 0
    if not page_token.isascii() or not page_token.isdigit() or len(page_token) > 9:
        raise InvalidArgument("page_token is not one this service gave out")
    return int(page_token)


class SearchServicer(pb_grpc.SearchServiceServicer):
    def __init__(
        self,
        pool: asyncpg.Pool,
        embedder: Embedder,
        settings: SearchSettings,
        trust: TrustSettings | None = None,
        lexical_pool: asyncpg.Pool | None = None,
    ) -> None:
        self.pool = pool
        self.embedder = embedder
        self.settings = settings
        self.trust = trust or TrustSettings()
        self.engine = SearchEngine(pool, embedder, settings, self.trust, lexical_pool)
        # Reads resolve their workspace through it (see WorkspaceCache for why a hit is safe);
        # ResolveWorkspace does not, because harvest writes where it answers.
        self.workspaces = WorkspaceCache(settings.workspace_cache_s)

    def _limit(self, value: int, field: str) -> int:
        return limit(value, field, self.settings.default_limit, self.settings.max_limit)

    async def Search(self, request: pb.SearchRequest, context: Any) -> pb.SearchResponse:
        text = no_nul(request.query, "query")
        if len(text) > MAX_QUERY_CHARS:
            raise InvalidArgument(f"query is {len(text)} characters; at most {MAX_QUERY_CHARS}")
        limit = self._limit(request.limit, "limit")
        mode = enum_label(pb.SearchMode, request.mode) if request.mode else "hybrid"
        if not mode:
            raise InvalidArgument(f"mode {request.mode} is not a known search mode")
        scope = read_scope(request)
        if request.workspace.strip() == ALL_WORKSPACES:
            outcome = await self.engine.search(
                replace(scope, reach=require_everywhere("searching every workspace")), text, mode, limit
            )
            response = pb.SearchResponse(
                degraded=outcome.degraded, lexical_relaxed=outcome.relaxed, scope=EVERY_WORKSPACE
            )
        else:
            ws = await resolve_for_read(self.pool, request.workspace, self.workspaces)
            outcome = await self.engine.search(in_workspace(scope, ws), text, mode, limit)
            response = pb.SearchResponse(
                degraded=outcome.degraded,
                lexical_relaxed=outcome.relaxed,
                workspace=workspace_message(ws),
                scope=" + ".join(reach_in(ws).ids or ()),
            )
        for hit in outcome.hits:
            result = response.hits.add(
                memory=memory_message(hit.row, trust=self.trust), snippet=hit.snippet, score=hit.score
            )
            if request.explain:
                result.explanation.CopyFrom(
                    pb.Explanation(
                        lexical=_leg_explanation(hit.lexical),
                        semantic=_leg_explanation(hit.semantic),
                        fused_score=hit.fused,
                        recency_factor=hit.recency,
                        lexical_relaxed=outcome.relaxed and hit.lexical is not None,
                        trust_factor=hit.trust,
                        feedback_factor=hit.feedback,
                    )
                )
        return response

    async def GetContext(self, request: pb.GetContextRequest, context: Any) -> pb.GetContextResponse:
        budget = request.budget or self.settings.context_default_tokens
        if not 0 < budget <= self.settings.context_max_tokens:
            raise InvalidArgument(
                f"budget must be between 1 and {self.settings.context_max_tokens} tokens "
                f"(MNEMO_CONTEXT_MAX_TOKENS); got {request.budget}"
            )
        task = no_nul(request.task, "task")
        if len(task) > MAX_QUERY_CHARS:
            raise InvalidArgument(f"task is {len(task)} characters; at most {MAX_QUERY_CHARS}")
        since = from_timestamp(request.since, request.HasField("since"))
        ws = await resolve_for_read(self.pool, request.workspace, self.workspaces)
        material = await wake_up.gather(self.pool, self.engine, self.trust, ws, task, since)
        packed = wake_up.pack(self.embedder.count_tokens, budget, wake_up.header_lines(material), material)
        return pb.GetContextResponse(
            workspace=workspace_message(ws),
            sections=packed.parts,
            candidates=material.candidates,
            since=timestamp(material.since),
            text=packed.text,
            tokens=packed.tokens,
            budget=budget,
            degraded=material.degraded,
        )

    async def GetMemory(self, request: pb.GetMemoryRequest, context: Any) -> pb.GetMemoryResponse:
        memory_id = parse_memory_id(request.id)
        scope = read_scope(request)
        ws = await resolve_for_read(self.pool, request.workspace, self.workspaces)
        row = await reads.read_memory(self.pool, in_workspace(scope, ws), memory_id, with_content=True)
        if row is None:
            raise await self._not_found(ws, memory_id, scope)
        return pb.GetMemoryResponse(memory=memory_message(row, with_content=True, trust=self.trust))

    async def _not_found(self, ws: WorkspaceRow, memory_id: uuid.UUID, scope: Scope) -> NotFound:
        """Within what the caller reads, say why a memory is not readable; elsewhere, nothing."""
        row = await reads.memory_within(self.pool, reach_in(ws), memory_id)
        if row is None:
            if await tombstones.purged_at(self.pool, memory_id, ws.id) is not None:
                return NotFound(f"memory {memory_id} was purged; nothing of it remains", reasons_pb.ERROR_REASON_PURGED)
            return NotFound(f"memory {memory_id} not found in workspace {ws.name!r}")
        if row["deleted_at"] is not None:
            return NotFound(
                f"memory {memory_id} was deleted; restore it to read it (mnemo restore {memory_id})",
                reasons_pb.ERROR_REASON_MEMORY_DELETED,
            )
        if scope.as_of is not None and row["created_at"] > scope.as_of:
            return NotFound(f"memory {memory_id} did not exist yet at {scope.as_of.isoformat()}")
        if not scope.include_history and row["status"] not in VISIBLE_STATUSES:
            return NotFound(
                f"memory {memory_id} {db.status_phrase(row)}; pass include_history (CLI: --history) to read it",
                db.status_reason(row),
            )
        if scope.valid_at is not None:
            return NotFound(
                f"memory {memory_id} was not valid at {scope.valid_at.isoformat()} (see its valid_from/valid_to)"
            )
        return NotFound(f"memory {memory_id} is outside the requested time (as_of)")

    async def ListMemories(self, request: pb.ListMemoriesRequest, context: Any) -> pb.ListMemoriesResponse:
        size = self._limit(request.page_size, "page_size")
        scope = read_scope(request)
        cursor = memory_cursor(request.page_token)
        ws = await resolve_for_read(self.pool, request.workspace, self.workspaces)
        rows = await reads.list_memories(self.pool, in_workspace(scope, ws), size + 1, cursor)
        page, more = rows[:size], len(rows) > size
        token = memory_token(page[-1]["updated_at"], str(page[-1]["id"])) if more else ""
        return pb.ListMemoriesResponse(
            memories=[memory_message(r, trust=self.trust) for r in page], next_page_token=token
        )

    async def GetHistory(self, request: pb.GetHistoryRequest, context: Any) -> pb.GetHistoryResponse:
        memory_id = parse_memory_id(request.id)
        after = history_cursor(request.page_token)
        size = min(request.page_size, HISTORY_MAX_PAGE) if request.page_size > 0 else HISTORY_DEFAULT_PAGE
        ws = await resolve_for_read(self.pool, request.workspace)
        everything = Scope(reach=reach_in(ws), include_history=True)
        async with self.pool.acquire() as conn:
            row = await reads.read_memory(conn, everything, memory_id, with_content=False)
            if row is None:
                raise await self._not_found(ws, memory_id, everything)
            versions, more = await db.versions_page(conn, memory_id, after, size, HISTORY_PAGE_BYTES)
            first = after == 0
            states = await db.states_of(conn, memory_id) if first else []
            events = (
                await reads.audit_events(conn, Reach((row["workspace_id"],)), memory_id=memory_id, newest_first=False)
                if first
                else []
            )
        return pb.GetHistoryResponse(
            next_page_token=str(versions[-1]["version"]) if more else "",
            memory=memory_message(row, trust=self.trust),
            versions=[
                pb.VersionRecord(
                    version=v["version"],
                    title=v["title"],
                    content=v["content"],
                    content_hash=v["content_hash"],
                    author=v["author"],
                    recorded_from=timestamp(v["recorded_from"]),
                    recorded_to=timestamp(v["recorded_to"]),
                )
                for v in versions
            ],
            states=[
                pb.StateRecord(
                    status=enum_value(common_pb2.MemoryStatus, s["status"], "status"),
                    reason=s["reason"] or "",
                    principal=s["principal"],
                    superseded_by=str(s["superseded_by"]) if s["superseded_by"] else "",
                    valid_from=timestamp(s["valid_from"]),
                    valid_to=timestamp(s["valid_to"]),
                    recorded_from=timestamp(s["recorded_from"]),
                    recorded_to=timestamp(s["recorded_to"]),
                )
                for s in states
            ],
            events=[audit_message(e) for e in events],
        )

    async def ListAuditEvents(self, request: pb.ListAuditEventsRequest, context: Any) -> pb.ListAuditEventsResponse:
        size = self._limit(request.page_size, "page_size")
        memory_id = parse_memory_id(request.memory_id) if request.memory_id else None
        before = event_cursor(request.page_token)
        ws = await resolve_for_read(self.pool, request.workspace)
        if memory_id is not None and not await tombstones.ever_in(self.pool, memory_id, ws.id):
            # A purged memory keeps its events (and its tombstone); one that never was here has none.
            raise NotFound(f"memory {memory_id} not found in workspace {ws.name!r}")
        rows = await reads.audit_events(
            self.pool,
            Reach((ws.id,)),
            size + 1,
            memory_id=memory_id,
            before=before,
            token_events=current_call().all_workspaces,
        )
        page, more = rows[:size], len(rows) > size
        return pb.ListAuditEventsResponse(
            events=[audit_message(r) for r in page], next_page_token=str(page[-1]["id"]) if more else ""
        )

    async def VerifyAudit(self, request: pb.VerifyAuditRequest, context: Any) -> pb.VerifyAuditResponse:
        if request.workspace:
            workspace_id: str | None = (await resolve_for_read(self.pool, request.workspace)).id
        else:
            require_everywhere("verifying every chain")
            workspace_id = None
        async with self.pool.acquire() as conn:
            check = await verify_chains(conn, workspace_id)
        return pb.VerifyAuditResponse(
            ok=check.ok,
            events_checked=check.events_checked,
            workspaces_checked=check.workspaces_checked,
            broken_event_id=check.broken_event_id or 0,
            broken_workspace_id=check.broken_workspace_id or "",
            problem=check.problem,
            anchored=check.anchored,
        )

    async def ExportMemories(
        self, request: pb.ExportMemoriesRequest, context: Any
    ) -> AsyncIterator[pb.ExportMemoriesResponse]:
        if request.workspace:
            ws = await resolve_for_read(self.pool, request.workspace)
            workspace_ids: list[str] | None = [ws.id]
            scope = ws.id
        else:
            require_everywhere("exporting every workspace")
            workspace_ids, scope = None, "*"
        async for record in export_records(self.pool, workspace_ids, scope):
            yield pb.ExportMemoriesResponse(record=record)

    async def ListProposals(self, request: pb.ListProposalsRequest, context: Any) -> pb.ListProposalsResponse:
        size = limit(request.limit, "limit", DEFAULT_PROPOSALS, MAX_PROPOSALS)
        state = _label(common_pb2.ProposalState, request.state, "state")
        kind = _label(common_pb2.ProposalKind, request.kind, "kind")
        memory_id = parse_memory_id(request.memory_id) if request.memory_id.strip() else None
        cursor = memory_cursor(request.page_token)
        if request.workspace.strip():
            reach = Reach(((await resolve_for_read(self.pool, request.workspace, self.workspaces)).id,))
        else:
            reach = caller_reach()
        params = Params()
        where = [workspace_clause(reach, params, "workspace_id")]
        if state:
            where.append(f"state = {params.bind(state)}")
        if kind:
            where.append(f"kind = {params.bind(kind)}")
        if memory_id is not None:
            where.append(f"memory_ids @> ARRAY[{params.bind(memory_id)}::uuid]")
        async with self.pool.acquire() as conn:
            rows = await proposals.list_proposals(conn, " AND ".join(where), params.values, size + 1, cursor)
            page, more = rows[:size], len(rows) > size
            answers = [proposal_message(r, await proposals.is_stale(conn, r)) for r in page]
        token = memory_token(page[-1]["created_at"], str(page[-1]["id"])) if more else ""
        return pb.ListProposalsResponse(proposals=answers, next_page_token=token)

    async def GetProposal(self, request: pb.GetProposalRequest, context: Any) -> pb.GetProposalResponse:
        try:
            proposal_id = uuid.UUID(request.id.strip())
        except ValueError:
            raise InvalidArgument(f"proposal id {request.id.strip()[:60]!r} is not a uuid") from None
        if request.workspace.strip():
            ws = await resolve_for_read(self.pool, request.workspace, self.workspaces)
            reach, where = Reach((ws.id,)), f"workspace {ws.name!r}"
        else:
            reach, where = caller_reach(), "the workspaces this token reaches"
        async with self.pool.acquire() as conn:
            row = await proposals.find_proposal(conn, proposal_id)
            # One in a workspace out of reach is answered as an unknown one: no probing for ids.
            if row is None or (reach.ids is not None and row["workspace_id"] not in reach.ids):
                raise NotFound(f"no proposal {proposal_id} in {where}")
            written = [uuid.UUID(i) for i in (row["applied"] or {}).get("written", [])]
            ids = list(dict.fromkeys([*row["memory_ids"], *written]))
            found = await db.fetch_memories(conn, ids)
            stale = await proposals.is_stale(conn, row)
        memories = [found[i] for i in ids if i in found and found[i]["deleted_at"] is None]
        return pb.GetProposalResponse(
            proposal=proposal_message(row, stale),
            memories=[memory_message(m, with_content=True, trust=self.trust) for m in memories],
        )

    async def Authenticate(self, request: pb.AuthenticateRequest, context: Any) -> pb.AuthenticateResponse:
        # Its least role is admin: only a service holding the internal secret (the gateway) acts as
        # admin without a token.
        row = await authenticate(self.pool, request.token.strip())
        if row is None:
            raise Unauthenticated("the bearer token is unknown, malformed or revoked")
        return pb.AuthenticateResponse(token=token_message(row))

    async def ListTokens(self, request: pb.ListTokensRequest, context: Any) -> pb.ListTokensResponse:
        return pb.ListTokensResponse(tokens=[token_message(row) for row in await list_tokens(self.pool)])

    async def ListWorkspaces(self, request: pb.ListWorkspacesRequest, context: Any) -> pb.ListWorkspacesResponse:
        params = Params()
        rows = await list_workspaces(self.pool, workspace_clause(caller_reach(), params, "id"), params.values)
        return pb.ListWorkspacesResponse(workspaces=[workspace_message(r) for r in rows])

    async def ResolveWorkspace(self, request: pb.ResolveWorkspaceRequest, context: Any) -> pb.ResolveWorkspaceResponse:
        ws = await resolve_for_read(self.pool, request.workspace)
        return pb.ResolveWorkspaceResponse(workspace=workspace_message(ws))

    async def GetStatus(self, request: pb.GetStatusRequest, context: Any) -> pb.GetStatusResponse:
        response = pb.GetStatusResponse(
            embedder_state=self.embedder.state, embedder_ready=self.embedder.state == "ready"
        )
        # What the caller reads, as every other read counts it: a workspace with global, or all it reaches.
        if request.workspace:
            ws = await resolve_for_read(self.pool, request.workspace)
            response.workspace.CopyFrom(workspace_message(ws))
            reach = reach_in(ws)
        else:
            reach = caller_reach()
        async with self.pool.acquire() as conn:
            space = await read_embedding_space(conn)
            if space:
                response.embedding_model, response.embedding_dimension = space
            counts = await reads.count_within(conn, reach)
        response.memories = counts.memories
        response.chunks_pending = counts.pending
        response.chunks_embedded = counts.embedded
        response.chunks_failed = counts.failed
        response.last_error = counts.last_error
        response.lexical_pending = counts.lexical_pending
        response.graph_pending = counts.graph_pending
        if counts.oldest_pending is not None:
            response.oldest_pending_at.CopyFrom(timestamp(counts.oldest_pending))
        return response
