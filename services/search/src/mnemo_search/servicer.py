"""SearchService: every read, each scoped by the one predicate builder."""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import asyncpg

from mnemo.common.v1 import common_pb2
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
from mnemo_search.engine import LegHit, SearchEngine
from mnemo_search.settings import SearchSettings
from mnemo_store import (
    CONTENT_JOIN,
    MEMORY_COLUMNS,
    VISIBLE_STATUSES,
    Params,
    Reach,
    Scope,
    WorkspaceRow,
    authenticate,
    build_scope,
    caller_reach,
    list_tokens,
    list_workspaces,
    reach_in,
    read_embedding_space,
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
    timestamp,
    token_message,
    workspace_message,
)

MAX_QUERY_CHARS = 32 * 1024


def _no_nul(value: str, field: str) -> str:
    if "\x00" in value:
        raise InvalidArgument(f"{field} contains NUL bytes (U+0000)")
    return value


def read_scope(message: common_pb2.MemoryFilter | None, options: common_pb2.ReadOptions | None) -> Scope:
    """The request's filter and read options as a scope, checked before anything is read.

    The workspaces come later (in_workspace), once the workspace is resolved.
    """
    scope = Scope(reach=Reach(None))
    if message is not None:
        kinds = []
        for kind in message.kinds:
            try:
                label = enum_label(common_pb2.MemoryKind, kind)
            except ValueError:
                label = ""
            if not label:
                raise InvalidArgument(f"filter kind {kind} is not a known kind")
            kinds.append(label)
        scope = replace(
            scope,
            kinds=kinds,
            tags=[_no_nul(tag, "filter tag") for tag in message.tags],
            created_after=from_timestamp(message.created_after, message.HasField("created_after")),
            created_before=from_timestamp(message.created_before, message.HasField("created_before")),
            updated_after=from_timestamp(message.updated_after, message.HasField("updated_after")),
            updated_before=from_timestamp(message.updated_before, message.HasField("updated_before")),
        )
    if options is not None:
        scope = replace(
            scope,
            include_history=options.include_history,
            as_of=from_timestamp(options.as_of, options.HasField("as_of")),
            valid_at=from_timestamp(options.valid_at, options.HasField("valid_at")),
        )
    return scope


EVERY_WORKSPACE = "every workspace (admin)"


def in_workspace(scope: Scope, ws: WorkspaceRow) -> Scope:
    """Narrows a scope to what a read inside `ws` sees (the access module's rule: the workspace and global)."""
    return replace(scope, reach=reach_in(ws))


def _options(request: Any) -> common_pb2.ReadOptions | None:
    return request.options if request.HasField("options") else None


def _filter(request: Any) -> common_pb2.MemoryFilter | None:
    return request.filter if request.HasField("filter") else None


def _leg_explanation(hit: LegHit | None) -> pb.LegExplanation:
    return pb.LegExplanation(rank=hit.rank, score=hit.score) if hit else pb.LegExplanation()


class SearchServicer(pb_grpc.SearchServiceServicer):
    def __init__(
        self, pool: asyncpg.Pool, embedder: Embedder, settings: SearchSettings, trust: TrustSettings | None = None
    ) -> None:
        self.pool = pool
        self.embedder = embedder
        self.settings = settings
        self.trust = trust or TrustSettings()
        self.engine = SearchEngine(pool, embedder, settings, self.trust)

    def _limit(self, value: int, field: str) -> int:
        if value < 0:
            raise InvalidArgument(f"{field} must not be negative; got {value}")
        return min(value or self.settings.default_limit, self.settings.max_limit)

    async def Search(self, request: pb.SearchRequest, context: Any) -> pb.SearchResponse:
        text = _no_nul(request.query, "query")
        if len(text) > MAX_QUERY_CHARS:
            raise InvalidArgument(f"query is {len(text)} characters; at most {MAX_QUERY_CHARS}")
        limit = self._limit(request.limit, "limit")
        mode = enum_label(pb.SearchMode, request.mode) if request.mode else "hybrid"
        if not mode:
            raise InvalidArgument(f"mode {request.mode} is not a known search mode")
        scope = read_scope(_filter(request), _options(request))
        if request.workspace.strip() == ALL_WORKSPACES:
            outcome = await self.engine.search(
                replace(scope, reach=require_everywhere("searching every workspace")), text, mode, limit
            )
            response = pb.SearchResponse(
                degraded=outcome.degraded, lexical_relaxed=outcome.relaxed, scope=EVERY_WORKSPACE
            )
        else:
            ws = await resolve_for_read(self.pool, request.workspace)
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
                    )
                )
        return response

    async def GetMemory(self, request: pb.GetMemoryRequest, context: Any) -> pb.GetMemoryResponse:
        memory_id = parse_memory_id(request.id)
        scope = read_scope(None, _options(request))
        ws = await resolve_for_read(self.pool, request.workspace)
        params = Params()
        wanted = params.bind(memory_id)
        scoped = build_scope(in_workspace(scope, ws), params, memory="m")
        row = await self.pool.fetchrow(
            f"SELECT {MEMORY_COLUMNS}, v.content FROM {scoped.source} {CONTENT_JOIN} "
            f"WHERE m.id = {wanted} AND {scoped.where}",
            *params.values,
        )
        if row is None:
            raise NotFound(await self._why_not_found(ws, memory_id, scope))
        return pb.GetMemoryResponse(memory=memory_message(row, with_content=True, trust=self.trust))

    async def _why_not_found(self, ws: WorkspaceRow, memory_id: uuid.UUID, scope: Scope) -> str:
        """Within what the caller reads, say why a memory is not readable; elsewhere, nothing."""
        params = Params()
        wanted = params.bind(memory_id)
        row = await self.pool.fetchrow(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = {wanted} "
            f"AND {workspace_clause(reach_in(ws), params, 'm.workspace_id')}",
            *params.values,
        )
        if row is None:
            if await tombstones.purged_at(self.pool, memory_id, ws.id) is not None:
                return f"memory {memory_id} was purged; nothing of it remains"
            return f"memory {memory_id} not found in workspace {ws.name!r}"
        if row["deleted_at"] is not None:
            return f"memory {memory_id} was deleted; restore it to read it (mnemo restore {memory_id})"
        if scope.as_of is not None and row["created_at"] > scope.as_of:
            return f"memory {memory_id} did not exist yet at {scope.as_of.isoformat()}"
        if not scope.include_history and row["status"] not in VISIBLE_STATUSES:
            return f"memory {memory_id} {db.status_phrase(row)}; pass include_history (CLI: --history) to read it"
        if scope.valid_at is not None:
            return f"memory {memory_id} was not valid at {scope.valid_at.isoformat()} (see its valid_from/valid_to)"
        return f"memory {memory_id} is outside the requested time (as_of)"

    async def ListMemories(self, request: pb.ListMemoriesRequest, context: Any) -> pb.ListMemoriesResponse:
        size = self._limit(request.page_size, "page_size")
        scope = read_scope(_filter(request), _options(request))
        cursor = _decode_token(request.page_token) if request.page_token else None
        ws = await resolve_for_read(self.pool, request.workspace)
        params = Params()
        scoped = build_scope(in_workspace(scope, ws), params, memory="m")
        after = ""
        if cursor is not None:
            updated_at, last_id = cursor
            after = f"AND (m.updated_at, m.id) < ({params.bind(updated_at)}, {params.bind(last_id)}::uuid)"
        rows = await self.pool.fetch(
            f"""
            SELECT {MEMORY_COLUMNS} FROM {scoped.source}
            WHERE {scoped.where} {after}
            ORDER BY m.updated_at DESC, m.id DESC
            LIMIT {params.bind(size + 1)}
            """,
            *params.values,
        )
        page, more = rows[:size], len(rows) > size
        token = _encode_token(page[-1]["updated_at"], str(page[-1]["id"])) if more else ""
        return pb.ListMemoriesResponse(
            memories=[memory_message(r, trust=self.trust) for r in page], next_page_token=token
        )

    async def GetHistory(self, request: pb.GetHistoryRequest, context: Any) -> pb.GetHistoryResponse:
        memory_id = parse_memory_id(request.id)
        ws = await resolve_for_read(self.pool, request.workspace)
        params = Params()
        wanted = params.bind(memory_id)
        everything = Scope(reach=reach_in(ws), include_history=True)
        scoped = build_scope(everything, params, memory="m")
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(
                f"SELECT {MEMORY_COLUMNS} FROM {scoped.source} WHERE m.id = {wanted} AND {scoped.where}",
                *params.values,
            )
            if row is None:
                raise NotFound(await self._why_not_found(ws, memory_id, everything))
            versions = await db.versions_of(conn, memory_id)
            states = await db.states_of(conn, memory_id)
            events = await conn.fetch(
                "SELECT * FROM audit_events WHERE workspace_id = $2 AND (memory_id = $1 OR details->>'successor' = $3) "
                "ORDER BY id",
                memory_id,
                row["workspace_id"],
                str(memory_id),
            )
        return pb.GetHistoryResponse(
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
        before = None
        if request.page_token:
            try:
                before = int(request.page_token)
                if not 0 < before < 2**63:
                    raise ValueError("out of range")
            except ValueError:
                raise InvalidArgument("page_token is not valid; pass the next_page_token of a previous page") from None
        ws = await resolve_for_read(self.pool, request.workspace)
        if memory_id is not None and not await tombstones.ever_in(self.pool, memory_id, ws.id):
            # A purged memory keeps its events (and its tombstone); one that never was here has none.
            raise NotFound(f"memory {memory_id} not found in workspace {ws.name!r}")
        params = Params()
        clauses = [workspace_clause(Reach((ws.id,)), params, "workspace_id")]
        if memory_id is not None:
            clauses.append(
                f"(memory_id = {params.bind(memory_id)} OR details->>'successor' = {params.bind(str(memory_id))})"
            )
        if before is not None:
            clauses.append(f"id < {params.bind(before)}")
        if not current_call().all_workspaces:
            # Token events live in global's chain and name other workspaces' principals and ids.
            clauses.append("action NOT LIKE 'token\\_%'")
        rows = await self.pool.fetch(
            f"SELECT * FROM audit_events WHERE {' AND '.join(clauses)} ORDER BY id DESC LIMIT {params.bind(size + 1)}",
            *params.values,
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
            params = Params()
            scoped = build_scope(Scope(reach=reach), params, memory="m")
            where_c = workspace_clause(reach, params, "c.workspace_id")
            row = await conn.fetchrow(
                f"""
                SELECT
                  (SELECT count(*) FROM {scoped.source} WHERE {scoped.where}) AS memories,
                  (SELECT count(*) FILTER (WHERE embed_status = 'pending') FROM chunks c WHERE {where_c}) AS pending,
                  (SELECT count(*) FILTER (WHERE embed_status = 'embedded') FROM chunks c WHERE {where_c}) AS embedded,
                  (SELECT count(*) FILTER (WHERE embed_status = 'failed') FROM chunks c WHERE {where_c}) AS failed,
                  (SELECT min(created_at) FROM chunks c WHERE embed_status = 'pending' AND {where_c}) AS oldest,
                  (SELECT embed_error FROM chunks c WHERE embed_error IS NOT NULL AND {where_c}
                    ORDER BY embed_after DESC LIMIT 1) AS last_error
                """,
                *params.values,
            )
        response.memories = row["memories"]
        response.chunks_pending = row["pending"]
        response.chunks_embedded = row["embedded"]
        response.chunks_failed = row["failed"]
        response.last_error = row["last_error"] or ""
        if row["oldest"] is not None:
            response.oldest_pending_at.CopyFrom(timestamp(row["oldest"]))
        return response


def _encode_token(updated_at: datetime, memory_id: str) -> str:
    raw = json.dumps({"u": updated_at.isoformat(), "i": memory_id}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_token(token: str) -> tuple[datetime, str]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        updated_at = datetime.fromisoformat(data["u"])
        if updated_at.tzinfo is None:
            raise ValueError("naive timestamp")
        # In UTC, inside the try: a crafted offset can push the instant out of PostgreSQL's range.
        return updated_at.astimezone(UTC), str(parse_memory_id(data["i"]))
    except (ValueError, KeyError, TypeError, UnicodeError, OverflowError, InvalidArgument):
        raise InvalidArgument("page_token is not valid; pass the next_page_token of a previous page") from None
