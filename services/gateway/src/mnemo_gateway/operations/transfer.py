"""Export and restore (docs/export-format.md): a workspace out as the export's lines, an export's records back in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_gateway.backends import call, streamed
from mnemo_gateway.errors import error_body
from mnemo_gateway.operations.base import OperationsBase
from mnemo_gateway.operations.convert import check_text, checked
from mnemo_gateway.schemas import RestoreInput
from mnemo_platform import enum_label


class TransferOperations(OperationsBase):
    """Whole workspaces out and back in; the services check that the caller is an admin."""

    async def export(self, workspace: str | None) -> AsyncIterator[str]:
        """The export's lines (JSON objects), in file order; `workspace` None exports every workspace."""
        check_text(workspace, "workspace")
        request = search_pb.ExportMemoriesRequest(workspace=(workspace or "").strip())
        async for message in streamed(self.backends.search.ExportMemories(request)):
            yield message.record

    async def restore_export(self, args: RestoreInput) -> dict[str, Any]:
        """Records of an export written back, each answered in order (refused alone, naming its line)."""
        checked(args)
        for record in args.records:
            check_text(record.record, f"line {record.line}")
        request = ingest_pb.RestoreMemoriesRequest(
            header=args.header,
            records=[ingest_pb.ExportRecord(line=r.line, record=r.record) for r in args.records],
        )
        response = await call(self.backends.ingest.RestoreMemories, request)
        return {"results": [_restored_json(r) for r in response.results]}


def _restored_json(result: ingest_pb.RestoreResult) -> dict[str, Any]:
    answer: dict[str, Any] = {"line": result.line, "type": result.type, "id": result.id}
    if result.error.code:
        code = grpc.StatusCode.__members__.get(result.error.code, grpc.StatusCode.UNKNOWN)
        return {**answer, **error_body(code, result.error.reason, result.error.message)}
    return {**answer, "outcome": enum_label(ingest_pb.RestoreOutcome, result.outcome)}
