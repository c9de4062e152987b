"""Reading and writing memories: write, update, search, get, list, and the status of a workspace."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from google.protobuf import json_format

from mnemo.common.v1 import common_pb2
from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_gateway.backends import call
from mnemo_gateway.errors import CallError
from mnemo_gateway.operations.base import OperationsBase
from mnemo_gateway.operations.convert import (
    check_text,
    checked,
    iso,
    memory_json,
    read_options,
    struct,
    timestamp,
    workspace_json,
    written_json,
)
from mnemo_gateway.schemas import SearchInput, UpdateInput, WriteInput
from mnemo_platform import enum_value


class MemoryOperations(OperationsBase):
    """Writes go to ingest, reads to search; both name the workspace (or get the default one)."""

    async def write(self, args: WriteInput, url_workspace: str | None, provenance: str) -> dict[str, Any]:
        checked(args)
        request = ingest_pb.WriteMemoryRequest(
            workspace=self.workspace(args.workspace, url_workspace),
            kind=enum_value(common_pb2.MemoryKind, args.kind, "kind"),
            title=args.title,
            content=args.content,
            tags=args.tags,
            metadata=struct(args.metadata),
            source_uri=args.source_uri,
            idempotency_key=args.idempotency_key,
            provenance=enum_value(common_pb2.Provenance, args.provenance or provenance, "provenance"),
            valid_from=timestamp(args.valid_from),
            valid_to=timestamp(args.valid_to),
        )
        response = await self._call(self.backends.ingest.WriteMemory, request)
        return written_json(response)

    async def update(self, memory_id: str, args: UpdateInput, url_workspace: str | None) -> dict[str, Any]:
        checked(args)
        check_text(memory_id, "id")
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
            request.metadata.CopyFrom(struct(args.metadata))
        response = await self._call(self.backends.ingest.UpdateMemory, request)
        return written_json(response)

    async def search(self, args: SearchInput, url_workspace: str | None) -> dict[str, Any]:
        checked(args)
        request = search_pb.SearchRequest(
            workspace=self.workspace(args.workspace, url_workspace),
            query=args.query,
            mode=enum_value(search_pb.SearchMode, args.mode, "mode"),
            limit=args.limit,
            explain=args.explain,
            filter=common_pb2.MemoryFilter(
                kinds=[enum_value(common_pb2.MemoryKind, k, "kinds") for k in args.kinds],
                tags=args.tags,
                created_after=timestamp(args.created_after),
                created_before=timestamp(args.created_before),
                updated_after=timestamp(args.updated_after),
                updated_before=timestamp(args.updated_before),
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
        check_text(memory_id, "id")
        check_text(workspace, "workspace")
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
            check_text(value, field)
        if not 0 <= page_size < 2**31:
            raise CallError.invalid(f"page_size {page_size} is out of range")
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
        check_text(workspace, "workspace")
        ref = workspace or url_workspace or ""
        response = await call(self.backends.search.GetStatus, search_pb.GetStatusRequest(workspace=ref))
        data: dict[str, Any] = {
            "memories": response.memories,
            "chunks_pending": response.chunks_pending,
            "chunks_embedded": response.chunks_embedded,
            "chunks_failed": response.chunks_failed,
            "oldest_pending_at": iso(response.oldest_pending_at),
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
