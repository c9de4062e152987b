"""Harvest: run it now, its status per agent, the sessions it knows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from mnemo.common.v1 import common_pb2
from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo.harvest.v1 import harvest_service_pb2 as harvest_pb
from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_gateway.backends import call, streamed
from mnemo_gateway.errors import CallError, error_body
from mnemo_gateway.operations.base import OperationsBase
from mnemo_gateway.operations.convert import check_text, checked, iso, plain, source_json, struct
from mnemo_gateway.schemas import HarvestedCandidatesInput, HarvestedSessionInput
from mnemo_platform import enum_label, enum_value


class HarvestOperations(OperationsBase):
    """Calls to the harvest service, which a gateway in front of ingest and search only may lack."""

    def _harvest(self) -> Any:
        if self.backends.harvest is None:
            raise CallError(
                grpc.StatusCode.UNAVAILABLE,
                "the harvest service is not configured for this gateway (MNEMO_HARVEST_ADDR)",
                reasons_pb.ERROR_REASON_UNAVAILABLE,
            )
        return self.backends.harvest

    async def harvest_run(self, agent: str, ignore_idle: bool, session: str = "") -> AsyncIterator[dict[str, Any]]:
        """Streams one JSON object per session (or the one `session` names), then the totals (done=true)."""
        check_text(agent, "agent")
        check_text(session, "session")
        request = harvest_pb.RunRequest(agent=agent, ignore_idle=ignore_idle, session=session)
        async for message in streamed(self._harvest().Run(request)):
            yield plain(message)

    async def harvest_status(self) -> dict[str, Any]:
        response = await call(self._harvest().Status, harvest_pb.StatusRequest())
        data = plain(response)
        data["archive_bytes"] = response.archive_bytes
        data["last_run_at"] = iso(response.last_run_at)
        for agent, status in zip(data["agents"], response.agents, strict=True):
            agent["failures"] = [source_json(f) for f in status.failures]
            agent["refused"] = [source_json(f) for f in status.refused]
        return data

    async def harvest_sources(self, agent: str, state: str, page_size: int, page_token: str) -> dict[str, Any]:
        for value, field in ((agent, "agent"), (state, "state"), (page_token, "page_token")):
            check_text(value, field)
        response = await call(
            self._harvest().ListSources,
            harvest_pb.ListSourcesRequest(agent=agent, state=state, page_size=page_size, page_token=page_token),
        )
        return {"sources": [source_json(s) for s in response.sources], "next_page_token": response.next_page_token}

    # -- a remote harvester's writes (docs/harvest.md, "Remote harvest") --------------------------------------
    # The services judge the caller: a harvester token may place a session and write these, nothing else. The
    # answers name what was stored (id, version, outcome), never its text: a harvester reads no content.

    async def harvest_place(self, path: str) -> dict[str, Any]:
        """The workspace a session's directory belongs to, among the caller's (403 for any other path)."""
        check_text(path, "path")
        if not path.startswith("/"):
            raise CallError.invalid(f"path must be absolute, not {path[:200]!r}")
        response = await call(self.backends.search.ResolveWorkspace, search_pb.ResolveWorkspaceRequest(workspace=path))
        return {"workspace": {"id": response.workspace.id, "name": response.workspace.name}}

    async def harvest_write_session(self, args: HarvestedSessionInput) -> dict[str, Any]:
        checked(args)
        checked(args.derivation)
        request = ingest_pb.WriteMemoryRequest(
            workspace=args.workspace,
            kind=common_pb2.MEMORY_KIND_SESSION,
            title=args.title,
            content=args.content,
            tags=args.tags,
            metadata=struct(args.metadata),
            source_uri=args.source_uri,
            provenance=enum_value(common_pb2.Provenance, args.provenance, "provenance"),
            derivation=ingest_pb.Derivation(
                source_fingerprint=args.derivation.source_fingerprint,
                summarizer=args.derivation.summarizer,
                prompt_version=args.derivation.prompt_version,
            ),
        )
        return _stored(await call(self.backends.ingest.WriteMemory, request))

    async def harvest_write_candidates(self, args: HarvestedCandidatesInput) -> dict[str, Any]:
        checked(args)
        requests = []
        for item in args.items:
            checked(item)
            requests.append(
                ingest_pb.WriteMemoryRequest(
                    workspace=args.workspace,
                    kind=enum_value(common_pb2.MemoryKind, item.kind, "kind"),
                    title=item.title,
                    content=item.content,
                    tags=item.tags,
                    metadata=struct(item.metadata),
                    source_uri=item.source_uri,
                    idempotency_key=item.idempotency_key,
                    provenance=common_pb2.PROVENANCE_EXTRACTED,
                    status=common_pb2.MEMORY_STATUS_CANDIDATE,
                )
            )
        if not requests:
            return {"results": []}
        response = await call(self.backends.ingest.WriteMemories, ingest_pb.WriteMemoriesRequest(items=requests))
        results = []
        for result in response.results:
            if result.error.code:
                code = grpc.StatusCode.__members__.get(result.error.code, grpc.StatusCode.UNKNOWN)
                results.append(error_body(code, result.error.reason, result.error.message))
            else:
                results.append(_stored(result))
        return {"results": results}


def _stored(response: Any) -> dict[str, Any]:
    """What a harvester learns of a write: the outcome and the memory's identity, no text."""
    memory = response.memory
    return {
        "outcome": enum_label(ingest_pb.WriteOutcome, response.outcome),
        "memory": {"id": memory.id, "version": memory.version, "workspace_id": memory.workspace_id},
    }
