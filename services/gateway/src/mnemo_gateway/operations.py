"""One function per operation: input model -> gRPC request -> JSON-ready dict. MCP and REST share them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import grpc
from google.protobuf import json_format, struct_pb2, timestamp_pb2

from mnemo.common.v1 import common_pb2
from mnemo.harvest.v1 import harvest_service_pb2 as harvest_pb
from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_gateway.backends import Backends, call
from mnemo_gateway.errors import CallError
from mnemo_gateway.schemas import (
    ConfirmInput,
    PurgeInput,
    ReasonInput,
    SearchInput,
    SupersedeInput,
    TokenInput,
    UpdateInput,
    WorkspaceInput,
    WorkspaceOnlyInput,
    WriteInput,
)
from mnemo_platform import CallContext, current_call, enum_label, enum_value

T = TypeVar("T")


def _check_text(value: Any, field: str) -> None:
    """Lone surrogates (invalid UTF-8 once encoded) cannot cross protobuf: refuse them by name."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise CallError(
                grpc.StatusCode.INVALID_ARGUMENT, f"{field} is not valid Unicode text (at character {exc.start})"
            ) from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_text(key, field)
            _check_text(item, field)
    elif isinstance(value, list):
        for item in value:
            _check_text(item, field)


def _checked(model: Any) -> None:
    for name in type(model).model_fields:
        _check_text(getattr(model, name), name)


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    try:
        message.update(value)
    except (ValueError, TypeError, RecursionError) as exc:
        raise CallError(grpc.StatusCode.INVALID_ARGUMENT, f"metadata is not storable JSON: {exc}") from None
    return message


def _timestamp(value: datetime | None) -> timestamp_pb2.Timestamp | None:
    if value is None:
        return None
    ts = timestamp_pb2.Timestamp()
    try:
        ts.FromDatetime(value)
    except (ValueError, OverflowError) as exc:
        raise CallError(grpc.StatusCode.INVALID_ARGUMENT, f"timestamp {value} is out of range: {exc}") from None
    return ts


def _iso(ts: timestamp_pb2.Timestamp) -> str:
    return ts.ToJsonString() if ts.seconds or ts.nanos else ""


def label(memory: common_pb2.Memory) -> str:
    """What an agent reads first: status, how it was made and what it is, when, who wrote it, where."""
    status = enum_label(common_pb2.MemoryStatus, memory.status)
    provenance = enum_label(common_pb2.Provenance, memory.provenance).replace("_", " ")
    kind = enum_label(common_pb2.MemoryKind, memory.kind)
    day = _iso(memory.updated_at)[:10]
    # Shown first, so no reader takes flagged text at face value.
    flag = f"suspicious: {', '.join(memory.suspicious)} · " if memory.suspicious else ""
    return f"[{flag}{status} · {provenance} {kind} · {day} · by {memory.author} in {memory.workspace_id}]"


def memory_json(memory: common_pb2.Memory, with_content: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": memory.id,
        "workspace_id": memory.workspace_id,
        "label": label(memory),
        "kind": enum_label(common_pb2.MemoryKind, memory.kind),
        "title": memory.title,
        "tags": list(memory.tags),
        "metadata": json_format.MessageToDict(memory.metadata),
        "source_uri": memory.source_uri,
        "status": enum_label(common_pb2.MemoryStatus, memory.status),
        "provenance": enum_label(common_pb2.Provenance, memory.provenance),
        "author": memory.author,
        "version": memory.version,
        "content_hash": memory.content_hash,
        "created_at": _iso(memory.created_at),
        "updated_at": _iso(memory.updated_at),
        "embedding_state": enum_label(common_pb2.EmbeddingState, memory.embedding_state),
        "trust": round(memory.trust, 4),
        "suspicious": list(memory.suspicious),
        "superseded_by": memory.superseded_by,
        "status_reason": memory.status_reason,
        "valid_from": _iso(memory.valid_from),
        "valid_to": _iso(memory.valid_to),
    }
    if with_content:
        data["content"] = memory.content
    return data


def workspace_json(ws: common_pb2.Workspace) -> dict[str, Any]:
    return {"id": ws.id, "name": ws.name, "root_path": ws.root_path, "created_at": _iso(ws.created_at)}


def _plain(message: Any) -> dict[str, Any]:
    """A message as JSON with its own field names, every field present."""
    return json_format.MessageToDict(
        message, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
    )


def _source_json(source: harvest_pb.Source) -> dict[str, Any]:
    item = _plain(source)
    item["size"] = source.size  # int64 would otherwise be a string
    item["updated_at"] = _iso(source.updated_at)
    item["harvested_at"] = _iso(source.harvested_at)
    return item


async def _streamed(stream: Any) -> AsyncIterator[dict[str, Any]]:
    """A server-streaming call's messages as JSON, its failure as a CallError."""
    try:
        async for message in stream:
            yield _plain(message)
    except grpc.aio.AioRpcError as exc:
        raise CallError(exc.code(), exc.details() or exc.code().name) from None


def token_json(token: common_pb2.Token) -> dict[str, Any]:
    return {
        "id": token.id,
        "principal": token.principal,
        "role": token.role,
        "workspaces": list(token.workspaces),
        "label": token.label,
        "created_at": _iso(token.created_at),
        "last_used_at": _iso(token.last_used_at) if token.HasField("last_used_at") else None,
        "revoked_at": _iso(token.revoked_at) if token.HasField("revoked_at") else None,
    }


def event_json(event: common_pb2.AuditEvent) -> dict[str, Any]:
    data = _plain(event)
    data["id"] = event.id  # int64 would otherwise be a string
    data["at"] = _iso(event.at)
    return data


def tombstone_json(stone: ingest_pb.Tombstone) -> dict[str, Any]:
    return {
        "workspace_id": stone.workspace_id,
        "memory_id": stone.memory_id,
        "source_uri": stone.source_uri,
        "source_fingerprint": stone.source_fingerprint,
        "reason": stone.reason,
        "principal": stone.principal,
        "deleted_at": _iso(stone.deleted_at),
        "restored_at": _iso(stone.restored_at),
        "purged_at": _iso(stone.purged_at),
    }


def read_options(include_history: bool, as_of: datetime | None, valid_at: datetime | None) -> common_pb2.ReadOptions:
    return common_pb2.ReadOptions(
        include_history=include_history, as_of=_timestamp(as_of), valid_at=_timestamp(valid_at)
    )


class Operations:
    """The gateway's operations; each is exactly one gRPC call (plus the default-workspace check)."""

    def __init__(self, backends: Backends, default_workspace: str) -> None:
        self.backends = backends
        self.default_workspace = default_workspace

    def workspace(self, *candidates: str | None) -> str:
        """The first workspace named, else the token's only workspace, else the default one."""
        for candidate in candidates:
            if candidate and candidate.strip():
                return candidate.strip()
        caller = current_call()
        if not caller.all_workspaces and len(caller.workspaces) == 1:
            return caller.workspaces[0]
        return self.default_workspace

    async def authenticate(self, token: str, request_id: str) -> CallContext:
        """The principal a bearer token stands for; UNAUTHENTICATED when it is not a live token."""
        _check_text(token, "token")
        response = await call(self.backends.search.Authenticate, search_pb.AuthenticateRequest(token=token))
        record = response.token
        return CallContext(
            principal=record.principal,
            request_id=request_id,
            role=record.role,
            workspaces=tuple(record.workspaces),
            token_id=record.id,
        )

    async def _call(self, method: Callable[[Any], Awaitable[T]], request: Any) -> T:
        """One call; the default workspace is registered on first use and the call retried once.

        Registering only when a call reports it missing (rather than before every first call)
        means a request refused for bad input leaves no trace, not even the default workspace.
        """
        try:
            return await call(method, request)
        except CallError as exc:
            if exc.code != grpc.StatusCode.NOT_FOUND or getattr(request, "workspace", None) != self.default_workspace:
                raise
            try:
                await call(
                    self.backends.search.ResolveWorkspace,
                    search_pb.ResolveWorkspaceRequest(workspace=self.default_workspace),
                )
            except CallError as missing:
                if missing.code != grpc.StatusCode.NOT_FOUND:
                    raise exc from None
            else:
                raise  # the workspace exists: the NOT_FOUND was about something else
            await call(self.backends.ingest.AddWorkspace, ingest_pb.AddWorkspaceRequest(name=self.default_workspace))
            return await call(method, request)

    async def write(self, args: WriteInput, url_workspace: str | None, provenance: str) -> dict[str, Any]:
        _checked(args)
        request = ingest_pb.WriteMemoryRequest(
            workspace=self.workspace(args.workspace, url_workspace),
            kind=enum_value(common_pb2.MemoryKind, args.kind, "kind"),
            title=args.title,
            content=args.content,
            tags=args.tags,
            metadata=_struct(args.metadata),
            source_uri=args.source_uri,
            idempotency_key=args.idempotency_key,
            provenance=enum_value(common_pb2.Provenance, args.provenance or provenance, "provenance"),
            valid_from=_timestamp(args.valid_from),
            valid_to=_timestamp(args.valid_to),
        )
        response = await self._call(self.backends.ingest.WriteMemory, request)
        return {
            "outcome": enum_label(ingest_pb.WriteOutcome, response.outcome),
            "memory": memory_json(response.memory, with_content=False),
        }

    async def update(self, memory_id: str, args: UpdateInput, url_workspace: str | None) -> dict[str, Any]:
        _checked(args)
        _check_text(memory_id, "id")
        request = ingest_pb.UpdateMemoryRequest(
            workspace=self.workspace(args.workspace, url_workspace),
            id=memory_id,
            content=args.content,
            tags=args.tags or [],
            replace_tags=args.tags is not None,
            expected_version=args.expected_version,
        )
        if args.title is not None:
            request.title = args.title
        if args.metadata is not None:
            request.metadata.CopyFrom(_struct(args.metadata))
        response = await self._call(self.backends.ingest.UpdateMemory, request)
        return {
            "outcome": enum_label(ingest_pb.WriteOutcome, response.outcome),
            "memory": memory_json(response.memory, with_content=False),
        }

    async def search(self, args: SearchInput, url_workspace: str | None) -> dict[str, Any]:
        _checked(args)
        request = search_pb.SearchRequest(
            workspace=self.workspace(args.workspace, url_workspace),
            query=args.query,
            mode=enum_value(search_pb.SearchMode, args.mode, "mode"),
            limit=args.limit,
            explain=args.explain,
            filter=common_pb2.MemoryFilter(
                kinds=[enum_value(common_pb2.MemoryKind, k, "kinds") for k in args.kinds],
                tags=args.tags,
                created_after=_timestamp(args.created_after),
                created_before=_timestamp(args.created_before),
                updated_after=_timestamp(args.updated_after),
                updated_before=_timestamp(args.updated_before),
            ),
            options=read_options(args.include_history, args.as_of, args.valid_at),
        )
        response = await self._call(self.backends.search.Search, request)
        results = []
        for hit in response.hits:
            item = memory_json(hit.memory, with_content=False)
            item["snippet"] = hit.snippet
            item["score"] = round(hit.score, 6)
            if args.explain:
                item["explanation"] = json_format.MessageToDict(
                    hit.explanation, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
                )
            results.append(item)
        return {
            "workspace": workspace_json(response.workspace) if response.HasField("workspace") else None,
            "scope": response.scope,
            "results": results,
            "degraded": list(response.degraded),
            "lexical_relaxed": response.lexical_relaxed,
        }

    async def get(
        self,
        memory_id: str,
        workspace: str | None,
        url_workspace: str | None,
        include_history: bool = False,
        as_of: datetime | None = None,
        valid_at: datetime | None = None,
    ) -> dict[str, Any]:
        _check_text(memory_id, "id")
        _check_text(workspace, "workspace")
        request = search_pb.GetMemoryRequest(
            workspace=self.workspace(workspace, url_workspace),
            id=memory_id,
            options=read_options(include_history, as_of, valid_at),
        )
        response = await self._call(self.backends.search.GetMemory, request)
        return memory_json(response.memory)

    async def list(
        self,
        workspace: str | None,
        page_size: int,
        page_token: str,
        kinds: Sequence[str],
        tags: Sequence[str],
        include_history: bool = False,
        as_of: datetime | None = None,
        valid_at: datetime | None = None,
    ) -> dict[str, Any]:
        for value, field in ((workspace, "workspace"), (page_token, "page_token"), (tags, "tag")):
            _check_text(value, field)
        if not 0 <= page_size < 2**31:
            raise CallError(grpc.StatusCode.INVALID_ARGUMENT, f"page_size {page_size} is out of range")
        request = search_pb.ListMemoriesRequest(
            workspace=self.workspace(workspace),
            page_size=page_size,
            page_token=page_token,
            filter=common_pb2.MemoryFilter(
                kinds=[enum_value(common_pb2.MemoryKind, k, "kind") for k in kinds], tags=tags
            ),
            options=read_options(include_history, as_of, valid_at),
        )
        response = await self._call(self.backends.search.ListMemories, request)
        return {
            "memories": [memory_json(m, with_content=False) for m in response.memories],
            "next_page_token": response.next_page_token,
        }

    async def status(self, workspace: str | None, url_workspace: str | None = None) -> dict[str, Any]:
        _check_text(workspace, "workspace")
        ref = workspace or url_workspace or ""
        response = await call(self.backends.search.GetStatus, search_pb.GetStatusRequest(workspace=ref))
        data: dict[str, Any] = {
            "memories": response.memories,
            "chunks_pending": response.chunks_pending,
            "chunks_embedded": response.chunks_embedded,
            "chunks_failed": response.chunks_failed,
            "oldest_pending_at": _iso(response.oldest_pending_at),
            "last_error": response.last_error,
            "embedding_model": response.embedding_model,
            "embedding_dimension": response.embedding_dimension,
            "embedder_state": response.embedder_state,
            "embedder_ready": response.embedder_ready,
            "services": self.backends.targets,
        }
        if response.HasField("workspace"):
            data["workspace"] = workspace_json(response.workspace)
        return data

    async def add_workspace(self, args: WorkspaceInput) -> dict[str, Any]:
        _checked(args)
        response = await call(
            self.backends.ingest.AddWorkspace, ingest_pb.AddWorkspaceRequest(root_path=args.path, name=args.name)
        )
        return {"workspace": workspace_json(response.workspace), "created": response.created}

    # -- corrections ------------------------------------------------------------------------

    async def supersede(
        self, memory_id: str, args: SupersedeInput, url_workspace: str | None, provenance: str
    ) -> dict[str, Any]:
        _checked(args)
        _check_text(memory_id, "id")
        successor = ingest_pb.WriteMemoryRequest(
            kind=enum_value(common_pb2.MemoryKind, args.kind or "", "kind"),
            title=args.title,
            content=args.content,
            tags=args.tags or [],
            metadata=_struct(args.metadata),
            source_uri=args.source_uri,
            provenance=enum_value(common_pb2.Provenance, args.provenance or provenance, "provenance"),
            valid_from=_timestamp(args.valid_from),
        )
        request = ingest_pb.SupersedeMemoryRequest(
            workspace=self.workspace(args.workspace, url_workspace),
            id=memory_id,
            successor=successor,
            reason=args.reason,
        )
        response = await self._call(self.backends.ingest.SupersedeMemory, request)
        return {
            "superseded": memory_json(response.superseded, with_content=False),
            "successor": memory_json(response.successor, with_content=False),
        }

    async def retract(self, memory_id: str, args: ReasonInput, url_workspace: str | None) -> dict[str, Any]:
        _checked(args)
        _check_text(memory_id, "id")
        request = ingest_pb.RetractMemoryRequest(
            workspace=self.workspace(args.workspace, url_workspace), id=memory_id, reason=args.reason
        )
        response = await self._call(self.backends.ingest.RetractMemory, request)
        return {"memory": memory_json(response.memory, with_content=False)}

    async def confirm(self, memory_id: str, args: ConfirmInput) -> dict[str, Any]:
        _checked(args)
        _check_text(memory_id, "id")
        request = ingest_pb.ConfirmMemoryRequest(
            workspace=self.workspace(args.workspace), id=memory_id, reason=args.reason
        )
        response = await self._call(self.backends.ingest.ConfirmMemory, request)
        return {
            "outcome": enum_label(ingest_pb.WriteOutcome, response.outcome),
            "memory": memory_json(response.memory, with_content=False),
        }

    async def delete(self, memory_id: str, args: ReasonInput, url_workspace: str | None) -> dict[str, Any]:
        _checked(args)
        _check_text(memory_id, "id")
        request = ingest_pb.DeleteMemoryRequest(
            workspace=self.workspace(args.workspace, url_workspace), id=memory_id, reason=args.reason
        )
        response = await self._call(self.backends.ingest.DeleteMemory, request)
        return {"tombstone": tombstone_json(response.tombstone)}

    async def promote(self, memory_id: str, args: ReasonInput) -> dict[str, Any]:
        _checked(args)
        _check_text(memory_id, "id")
        request = ingest_pb.PromoteMemoryRequest(
            workspace=self.workspace(args.workspace), id=memory_id, reason=args.reason
        )
        response = await self._call(self.backends.ingest.PromoteMemory, request)
        return {
            "promoted": memory_json(response.promoted, with_content=False),
            "original": memory_json(response.original, with_content=False),
        }

    async def restore(self, memory_id: str, args: WorkspaceOnlyInput) -> dict[str, Any]:
        _checked(args)
        _check_text(memory_id, "id")
        request = ingest_pb.RestoreMemoryRequest(workspace=self.workspace(args.workspace), id=memory_id)
        response = await self._call(self.backends.ingest.RestoreMemory, request)
        return {"memory": memory_json(response.memory, with_content=False)}

    async def purge(self, memory_id: str, args: PurgeInput) -> dict[str, Any]:
        _checked(args)
        _check_text(memory_id, "id")
        request = ingest_pb.PurgeMemoryRequest(
            workspace=self.workspace(args.workspace), id=memory_id, reason=args.reason, force=args.force
        )
        response = await self._call(self.backends.ingest.PurgeMemory, request)
        return {"tombstone": tombstone_json(response.tombstone)}

    async def history(self, memory_id: str, workspace: str | None, url_workspace: str | None) -> dict[str, Any]:
        _check_text(memory_id, "id")
        _check_text(workspace, "workspace")
        request = search_pb.GetHistoryRequest(workspace=self.workspace(workspace, url_workspace), id=memory_id)
        response = await self._call(self.backends.search.GetHistory, request)
        return {
            "memory": memory_json(response.memory, with_content=False),
            "versions": [
                {**_plain(v), "recorded_from": _iso(v.recorded_from), "recorded_to": _iso(v.recorded_to)}
                for v in response.versions
            ],
            "states": [
                {
                    **_plain(st),
                    "status": enum_label(common_pb2.MemoryStatus, st.status),
                    "valid_from": _iso(st.valid_from),
                    "valid_to": _iso(st.valid_to),
                    "recorded_from": _iso(st.recorded_from),
                    "recorded_to": _iso(st.recorded_to),
                }
                for st in response.states
            ],
            "events": [event_json(e) for e in response.events],
        }

    async def audit_log(self, workspace: str | None, memory_id: str, page_size: int, page_token: str) -> dict[str, Any]:
        for value, field in ((workspace, "workspace"), (memory_id, "memory"), (page_token, "page_token")):
            _check_text(value, field)
        request = search_pb.ListAuditEventsRequest(
            workspace=self.workspace(workspace), memory_id=memory_id, page_size=page_size, page_token=page_token
        )
        response = await self._call(self.backends.search.ListAuditEvents, request)
        return {"events": [event_json(e) for e in response.events], "next_page_token": response.next_page_token}

    async def audit_verify(self, workspace: str | None) -> dict[str, Any]:
        _check_text(workspace, "workspace")
        response = await call(self.backends.search.VerifyAudit, search_pb.VerifyAuditRequest(workspace=workspace or ""))
        data = _plain(response)
        data["events_checked"] = response.events_checked
        data["broken_event_id"] = response.broken_event_id
        return data

    # -- harvest ------------------------------------------------------------------------------

    def _harvest(self) -> Any:
        if self.backends.harvest is None:
            raise CallError(
                grpc.StatusCode.UNAVAILABLE,
                "the harvest service is not configured for this gateway (MNEMO_HARVEST_ADDR)",
            )
        return self.backends.harvest

    async def harvest_run(self, agent: str, ignore_idle: bool) -> AsyncIterator[dict[str, Any]]:
        """Streams one JSON object per session, then the totals (done=true)."""
        _check_text(agent, "agent")
        async for item in _streamed(self._harvest().Run(harvest_pb.RunRequest(agent=agent, ignore_idle=ignore_idle))):
            yield item

    async def redact_rescan(self, workspace: str | None, dry_run: bool) -> AsyncIterator[dict[str, Any]]:
        """Streams one JSON object per memory scanned, then the totals (done=true)."""
        _check_text(workspace, "workspace")
        request = ingest_pb.RescanRedactionsRequest(workspace=workspace or "", dry_run=dry_run)
        async for item in _streamed(self.backends.ingest.RescanRedactions(request)):
            yield item

    async def harvest_status(self) -> dict[str, Any]:
        response = await call(self._harvest().Status, harvest_pb.StatusRequest())
        data = _plain(response)
        data["archive_bytes"] = response.archive_bytes
        data["last_run_at"] = _iso(response.last_run_at)
        for agent, status in zip(data["agents"], response.agents, strict=True):
            agent["failures"] = [_source_json(f) for f in status.failures]
        return data

    async def harvest_sources(self, agent: str, state: str, page_size: int, page_token: str) -> dict[str, Any]:
        for value, field in ((agent, "agent"), (state, "state"), (page_token, "page_token")):
            _check_text(value, field)
        response = await call(
            self._harvest().ListSources,
            harvest_pb.ListSourcesRequest(agent=agent, state=state, page_size=page_size, page_token=page_token),
        )
        return {"sources": [_source_json(s) for s in response.sources], "next_page_token": response.next_page_token}

    # -- tokens -------------------------------------------------------------------------------

    async def create_token(self, args: TokenInput) -> dict[str, Any]:
        _checked(args)
        response = await call(
            self.backends.ingest.CreateToken,
            ingest_pb.CreateTokenRequest(
                principal=args.principal, role=args.role, workspaces=args.workspaces, label=args.label
            ),
        )
        return {"token": token_json(response.token), "secret": response.secret}

    async def list_tokens(self) -> dict[str, Any]:
        response = await call(self.backends.search.ListTokens, search_pb.ListTokensRequest())
        return {"tokens": [token_json(t) for t in response.tokens]}

    async def revoke_token(self, token_id: str) -> dict[str, Any]:
        _check_text(token_id, "id")
        response = await call(self.backends.ingest.RevokeToken, ingest_pb.RevokeTokenRequest(id=token_id))
        return {"token": token_json(response.token)}

    async def list_workspaces(self) -> dict[str, Any]:
        response = await call(self.backends.search.ListWorkspaces, search_pb.ListWorkspacesRequest())
        return {"workspaces": [workspace_json(ws) for ws in response.workspaces]}
