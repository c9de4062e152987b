"""Import batches: starting one, and accepting or rolling back a whole batch (reviewer)."""

from __future__ import annotations

import uuid
from typing import Any

from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo_gateway.errors import CallError
from mnemo_gateway.operations.base import OperationsBase
from mnemo_gateway.operations.convert import check_text, checked, iso
from mnemo_gateway.schemas import ImportDecisionInput, ImportStartInput


def batch_json(batch: ingest_pb.ImportBatch) -> dict[str, Any]:
    return {
        "id": batch.id,
        "workspace_id": batch.workspace_id,
        "source": batch.source,
        "origin": batch.origin,
        "staged": batch.staged,
        "state": batch.state,
        "created_by": batch.created_by,
        "created_at": iso(batch.created_at),
        "decided_by": batch.decided_by or None,
        "decided_at": iso(batch.decided_at) if batch.HasField("decided_at") else None,
        "memories": dict(sorted(batch.memories.items())),
    }


def check_batch_id(value: str) -> str:
    """A batch id is a uuid; anything else is refused here, before a call is made."""
    check_text(value, "batch")
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise CallError.invalid(f"import batch id {value.strip()[:60]!r} is not a uuid") from None


class ImportOperations(OperationsBase):
    """A batch is started by `mnemo import --from`, filled through POST /imports/{batch}/memories:batch,
    then accepted or rolled back as a whole."""

    async def start_import(self, args: ImportStartInput) -> dict[str, Any]:
        checked(args)
        request = ingest_pb.StartImportBatchRequest(
            workspace=self.workspace(args.workspace), source=args.source, origin=args.origin, staged=args.staged
        )
        response = await self._call(self.backends.ingest.StartImportBatch, request)
        return {"batch": batch_json(response.batch)}

    async def accept_import(self, batch_id: str, args: ImportDecisionInput) -> dict[str, Any]:
        checked(args)
        request = ingest_pb.AcceptImportBatchRequest(
            workspace=self.workspace(args.workspace), id=check_batch_id(batch_id), reason=args.reason
        )
        response = await self._call(self.backends.ingest.AcceptImportBatch, request)
        return {"batch": batch_json(response.batch), "accepted": response.accepted, "held": response.held}

    async def rollback_import(self, batch_id: str, args: ImportDecisionInput) -> dict[str, Any]:
        checked(args)
        request = ingest_pb.RollbackImportBatchRequest(
            workspace=self.workspace(args.workspace), id=check_batch_id(batch_id), reason=args.reason
        )
        response = await self._call(self.backends.ingest.RollbackImportBatch, request)
        return {"batch": batch_json(response.batch), "removed": response.removed}
