"""SearchService: every read, each scoped by the one predicate builder."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import asyncpg

from mnemo.common.v1 import common_pb2
from mnemo.search.v1 import search_service_pb2 as pb
from mnemo.search.v1 import search_service_pb2_grpc as pb_grpc
from mnemo_embed import Embedder
from mnemo_platform import InvalidArgument, NotFound, enum_label
from mnemo_platform.config import SearchSettings
from mnemo_search.engine import LegHit, SearchEngine
from mnemo_store import (
    GLOBAL_WORKSPACE,
    MEMORY_COLUMNS,
    MEMORY_WITH_CONTENT,
    Params,
    Scope,
    WorkspaceRow,
    build_predicate,
    from_timestamp,
    memory_message,
    parse_memory_id,
    read_embedding_space,
    resolve_workspace,
    timestamp,
    workspace_message,
)

MAX_QUERY_CHARS = 32 * 1024


def _no_nul(value: str, field: str) -> str:
    if "\x00" in value:
        raise InvalidArgument(f"{field} contains NUL bytes (U+0000)")
    return value


def filter_scope(message: common_pb2.MemoryFilter | None) -> Scope:
    """The request's filter as a scope, checked before anything is read; workspaces come later."""
    if message is None:
        return Scope(workspace_ids=None)
    kinds = []
    for kind in message.kinds:
        try:
            label = enum_label(common_pb2.MemoryKind, kind)
        except ValueError:
            label = ""
        if not label:
            raise InvalidArgument(f"filter kind {kind} is not a known kind")
        kinds.append(label)
    return Scope(
        workspace_ids=None,
        kinds=kinds,
        tags=[_no_nul(tag, "filter tag") for tag in message.tags],
        created_after=from_timestamp(message.created_after, message.HasField("created_after")),
        created_before=from_timestamp(message.created_before, message.HasField("created_before")),
        updated_after=from_timestamp(message.updated_after, message.HasField("updated_after")),
        updated_before=from_timestamp(message.updated_before, message.HasField("updated_before")),
    )


def in_workspace(scope: Scope, ws: WorkspaceRow) -> Scope:
    """Narrows a scope to the caller's workspace plus global, which every workspace reads."""
    workspace_ids = [ws.id] if ws.id == GLOBAL_WORKSPACE else [ws.id, GLOBAL_WORKSPACE]
    return replace(scope, workspace_ids=workspace_ids)


def _leg_explanation(hit: LegHit | None) -> pb.LegExplanation:
    return pb.LegExplanation(rank=hit.rank, score=hit.score) if hit else pb.LegExplanation()


class SearchServicer(pb_grpc.SearchServiceServicer):
    def __init__(self, pool: asyncpg.Pool, embedder: Embedder, settings: SearchSettings) -> None:
        self.pool = pool
        self.embedder = embedder
        self.settings = settings
        self.engine = SearchEngine(pool, embedder, settings)

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
        scope = filter_scope(request.filter if request.HasField("filter") else None)
        ws = await resolve_workspace(self.pool, request.workspace)
        scope = in_workspace(scope, ws)
        outcome = await self.engine.search(scope, text, mode, limit)
        response = pb.SearchResponse(
            degraded=outcome.degraded, lexical_relaxed=outcome.relaxed, workspace=workspace_message(ws)
        )
        for hit in outcome.hits:
            result = response.hits.add(memory=memory_message(hit.row), snippet=hit.snippet, score=hit.score)
            if request.explain:
                result.explanation.CopyFrom(
                    pb.Explanation(
                        lexical=_leg_explanation(hit.lexical),
                        semantic=_leg_explanation(hit.semantic),
                        fused_score=hit.fused,
                        recency_factor=hit.recency,
                        lexical_relaxed=outcome.relaxed and hit.lexical is not None,
                    )
                )
        return response

    async def GetMemory(self, request: pb.GetMemoryRequest, context: Any) -> pb.GetMemoryResponse:
        memory_id = parse_memory_id(request.id)
        ws = await resolve_workspace(self.pool, request.workspace)
        params = Params()
        wanted = params.bind(memory_id)
        predicate = build_predicate(in_workspace(filter_scope(None), ws), params, memory="m")
        row = await self.pool.fetchrow(
            f"SELECT {MEMORY_COLUMNS}, v.content FROM {MEMORY_WITH_CONTENT} WHERE m.id = {wanted} AND {predicate}",
            *params.values,
        )
        if row is None:
            raise NotFound(f"memory {memory_id} not found in workspace {ws.name!r}")
        return pb.GetMemoryResponse(memory=memory_message(row, with_content=True))

    async def ListMemories(self, request: pb.ListMemoriesRequest, context: Any) -> pb.ListMemoriesResponse:
        size = self._limit(request.page_size, "page_size")
        scope = filter_scope(request.filter if request.HasField("filter") else None)
        cursor = _decode_token(request.page_token) if request.page_token else None
        ws = await resolve_workspace(self.pool, request.workspace)
        params = Params()
        predicate = build_predicate(in_workspace(scope, ws), params, memory="m")
        after = ""
        if cursor is not None:
            updated_at, last_id = cursor
            after = f"AND (m.updated_at, m.id) < ({params.bind(updated_at)}, {params.bind(last_id)}::uuid)"
        rows = await self.pool.fetch(
            f"""
            SELECT {MEMORY_COLUMNS} FROM memories m
            WHERE {predicate} {after}
            ORDER BY m.updated_at DESC, m.id DESC
            LIMIT {params.bind(size + 1)}
            """,
            *params.values,
        )
        page, more = rows[:size], len(rows) > size
        token = _encode_token(page[-1]["updated_at"], str(page[-1]["id"])) if more else ""
        return pb.ListMemoriesResponse(memories=[memory_message(r) for r in page], next_page_token=token)

    async def ListWorkspaces(self, request: pb.ListWorkspacesRequest, context: Any) -> pb.ListWorkspacesResponse:
        rows = await self.pool.fetch("SELECT id, name, root_path, created_at FROM workspaces ORDER BY name")
        return pb.ListWorkspacesResponse(
            workspaces=[
                common_pb2.Workspace(
                    id=r["id"], name=r["name"], root_path=r["root_path"] or "", created_at=timestamp(r["created_at"])
                )
                for r in rows
            ]
        )

    async def ResolveWorkspace(self, request: pb.ResolveWorkspaceRequest, context: Any) -> pb.ResolveWorkspaceResponse:
        ws = await resolve_workspace(self.pool, request.workspace)
        return pb.ResolveWorkspaceResponse(workspace=workspace_message(ws))

    async def GetStatus(self, request: pb.GetStatusRequest, context: Any) -> pb.GetStatusResponse:
        response = pb.GetStatusResponse(
            embedder_state=self.embedder.state, embedder_ready=self.embedder.state == "ready"
        )
        workspace_ids: list[str] | None = None
        if request.workspace:
            ws = await resolve_workspace(self.pool, request.workspace)
            response.workspace.CopyFrom(workspace_message(ws))
            workspace_ids = [ws.id]
        async with self.pool.acquire() as conn:
            space = await read_embedding_space(conn)
            if space:
                response.embedding_model, response.embedding_dimension = space
            params = Params()
            where_m = build_predicate(Scope(workspace_ids=workspace_ids), params, memory="m")
            where_c = "TRUE" if workspace_ids is None else f"c.workspace_id = ANY({params.bind(workspace_ids)}::text[])"
            row = await conn.fetchrow(
                f"""
                SELECT
                  (SELECT count(*) FROM memories m WHERE {where_m}) AS memories,
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
