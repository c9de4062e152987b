"""Reading and writing memories: write, update, search, get, list, and the status of a workspace."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import grpc
from google.protobuf import json_format
from pydantic import ValidationError

from mnemo.common.v1 import common_pb2
from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_gateway.backends import call
from mnemo_gateway.errors import CallError, error_body
from mnemo_gateway.operations.base import OperationsBase
from mnemo_gateway.operations.convert import (
    check_text,
    checked,
    context_json,
    iso,
    memory_json,
    read_options,
    struct,
    timestamp,
    workspace_json,
    written_json,
)
from mnemo_gateway.schemas import BatchInput, SearchInput, UpdateInput, WriteInput
from mnemo_platform import MnemoError, enum_value


class MemoryOperations(OperationsBase):
    """Writes go to ingest, reads to search; both name the workspace (or get the default one)."""

    async def write(self, args: WriteInput, url_workspace: str | None, provenance: str) -> dict[str, Any]:
        request = self._write_request(args, url_workspace, provenance)
        # Only a keyed write may be repeated (backends.Backends.keyed retries it on UNAVAILABLE).
        ingest = self.backends.keyed if request.idempotency_key else self.backends.ingest
        response = await self._call(ingest.WriteMemory, request)
        return written_json(response)

    async def write_many(self, args: BatchInput, provenance: str, import_batch: str = "") -> dict[str, Any]:
        """Each item checked here on its own (a bad one is answered alone), the rest written in one call;
        with `import_batch`, every item joins that batch (ingest labels them imported)."""
        results: list[dict[str, Any] | None] = []
        requests: list[tuple[int, ingest_pb.WriteMemoryRequest]] = []
        for index, raw in enumerate(args.items):
            try:
                item = WriteInput.model_validate({"workspace": args.workspace, **raw} if args.workspace else raw)
                request = self._write_request(item, None, provenance)
                request.import_batch = import_batch
                requests.append((index, request))
                results.append(None)
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'item'}: {e['msg']}" for e in exc.errors())
                results.append(CallError.invalid(problems).body())
            except CallError as exc:
                results.append(exc.body())
            except MnemoError as exc:
                results.append(CallError.of(exc).body())
        answered = await self._write_all([request for _, request in requests])
        for (index, _), result in zip(requests, answered, strict=True):
            results[index] = _result_json(result)
        return {"results": results}

    async def _write_all(self, requests: list[ingest_pb.WriteMemoryRequest]) -> list[ingest_pb.WriteResult]:
        """One WriteMemories call; items refused only because their workspace is not yet registered, and
        is one registered on first use, are written again once it is (a call refused outright leaves no trace)."""
        if not requests:
            return []
        batch = ingest_pb.WriteMemoriesRequest(items=requests)
        results = list((await call(self.backends.ingest.WriteMemories, batch)).results)
        waiting = [
            i
            for i, (request, result) in enumerate(zip(requests, results, strict=True))
            if result.error.reason == reasons_pb.ERROR_REASON_WORKSPACE_NOT_FOUND
            and self.registration(request.workspace) is not None
        ]
        if waiting:
            for workspace in dict.fromkeys(requests[i].workspace for i in waiting):
                registration = self.registration(workspace)
                assert registration is not None, "only registrable workspaces wait"
                await self.register(registration)
            again = ingest_pb.WriteMemoriesRequest(items=[requests[i] for i in waiting])
            for i, result in zip(waiting, (await call(self.backends.ingest.WriteMemories, again)).results, strict=True):
                results[i] = result
        return results

    def _write_request(
        self, args: WriteInput, url_workspace: str | None, provenance: str
    ) -> ingest_pb.WriteMemoryRequest:
        checked(args)
        return ingest_pb.WriteMemoryRequest(
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

    async def context(
        self,
        workspace: str | None,
        url_workspace: str | None,
        budget: int | None = None,
        task: str = "",
        since: datetime | None = None,
    ) -> dict[str, Any]:
        """The wake-up packet; the search service checks the budget (it knows the configured maximum)."""
        check_text(workspace, "workspace")
        check_text(task, "task")
        # Over gRPC 0 means the default; here the default is an omitted budget, and 0 is refused like
        # any budget that is not a positive number of tokens.
        if budget is not None and budget <= 0:
            raise CallError.invalid(f"budget must be a positive number of tokens; got {budget}")
        if budget is not None and budget >= 2**31:
            raise CallError.invalid(f"budget {budget} is out of range")
        request = search_pb.GetContextRequest(
            workspace=self.workspace(workspace, url_workspace),
            budget=budget or 0,
            task=task,
            since=timestamp(since),
        )
        response = await self._call(self.backends.search.GetContext, request)
        return context_json(response)

    async def status(self, workspace: str | None, url_workspace: str | None = None) -> dict[str, Any]:
        check_text(workspace, "workspace")
        ref = workspace or url_workspace or ""
        try:
            response = await call(self.backends.search.GetStatus, search_pb.GetStatusRequest(workspace=ref))
        except CallError as exc:
            if exc.code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise
            down = await self.backends.down()
            up = [name for name in self.backends.targets if name not in down]
            raise CallError(
                exc.code,
                f"the status comes from search, which did not answer; down: {', '.join(down) or 'none'}; "
                f"answering: {', '.join(up) or 'none'} ({exc.message})",
                exc.reason,
            ) from None
        data: dict[str, Any] = {
            "memories": response.memories,
            "chunks_pending": response.chunks_pending,
            "chunks_embedded": response.chunks_embedded,
            "chunks_failed": response.chunks_failed,
            "lexical_pending": response.lexical_pending,
            "graph_pending": response.graph_pending,
            "oldest_pending_at": iso(response.oldest_pending_at),
            "last_error": response.last_error,
            "embedding_model": response.embedding_model,
            "embedding_dimension": response.embedding_dimension,
            "embedder_state": response.embedder_state,
            "embedder_ready": response.embedder_ready,
            "services": self.backends.targets,
            "services_down": await self.backends.down(),
        }
        if response.HasField("workspace"):
            data["workspace"] = workspace_json(response.workspace)
        return data


def _result_json(result: ingest_pb.WriteResult) -> dict[str, Any]:
    """One item's answer: a single write's body (a WriteResult has its outcome and memory), or the error body."""
    if result.error.code:
        code = grpc.StatusCode.__members__.get(result.error.code, grpc.StatusCode.UNKNOWN)
        return error_body(code, result.error.reason, result.error.message)
    return written_json(result)
