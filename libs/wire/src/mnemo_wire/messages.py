"""Store rows to the protobuf messages the services answer with; store rows know nothing of the wire."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from google.protobuf import struct_pb2, timestamp_pb2

from mnemo.common.v1 import common_pb2
from mnemo.ingest.v1 import ingest_service_pb2
from mnemo_platform import InvalidArgument
from mnemo_platform.enums import enum_value
from mnemo_store import TokenRow, WorkspaceRow
from mnemo_wire.trust import TrustSettings


def timestamp(value: datetime | None) -> timestamp_pb2.Timestamp | None:
    if value is None:
        return None
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(value)
    return ts


def from_timestamp(value: timestamp_pb2.Timestamp, present: bool) -> datetime | None:
    """A protobuf Timestamp as an aware datetime, or None when the field was not set."""
    return value.ToDatetime(tzinfo=UTC) if present else None


def struct(value: dict[str, Any] | None) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    if value:
        message.update(value)
    return message


def own_feedback(row: Any) -> float:
    """The memory's feedback factor (docs/feedback.md); 1 for a row read without it."""
    return float(row.get("feedback_factor", 1.0))


def memory_message(row: Any, with_content: bool = False, trust: TrustSettings | None = None) -> common_pb2.Memory:
    message = common_pb2.Memory(
        id=str(row["id"]),
        workspace_id=row["workspace_id"],
        kind=enum_value(common_pb2.MemoryKind, row["kind"], "kind"),
        title=row["title"],
        content=row["content"] if with_content else "",
        tags=list(row["tags"]),
        metadata=struct(row["metadata"]),
        source_uri=row["source_uri"] or "",
        status=enum_value(common_pb2.MemoryStatus, row["status"], "status"),
        provenance=enum_value(common_pb2.Provenance, row["provenance"], "provenance"),
        author=row["author"],
        version=row["version"],
        content_hash=row["content_hash"],
        created_at=timestamp(row["created_at"]),
        updated_at=timestamp(row["updated_at"]),
        superseded_by=str(row["superseded_by"]) if row["superseded_by"] else "",
        valid_from=timestamp(row["valid_from"]),
        valid_to=timestamp(row["valid_to"]),
        status_reason=row["status_reason"] or "",
        suspicious=list(row["suspicious"]),
    )
    if trust is not None:
        message.trust = trust.factor(row["status"], row["provenance"], row["trust"] * own_feedback(row))
    state = row["embedding_state"]
    if state:
        message.embedding_state = enum_value(common_pb2.EmbeddingState, state, "embedding_state")
    return message


def workspace_message(row: WorkspaceRow) -> common_pb2.Workspace:
    return common_pb2.Workspace(
        id=row.id, name=row.name, root_path=row.root_path or "", created_at=timestamp(row.created_at)
    )


def token_message(row: TokenRow) -> common_pb2.Token:
    message = common_pb2.Token(
        id=row.id,
        principal=row.principal,
        role=row.role,
        workspaces=list(row.workspaces),
        label=row.label,
        created_at=timestamp(row.created_at),
    )
    if row.last_used_at:
        message.last_used_at.CopyFrom(timestamp(row.last_used_at))
    if row.revoked_at:
        message.revoked_at.CopyFrom(timestamp(row.revoked_at))
    return message


def tombstone_message(row: Any) -> ingest_service_pb2.Tombstone:
    return ingest_service_pb2.Tombstone(
        workspace_id=row["workspace_id"],
        memory_id=str(row["memory_id"]),
        source_uri=row["source_uri"] or "",
        source_fingerprint=row["source_fingerprint"] or "",
        reason=row["reason"] or "",
        principal=row["principal"],
        deleted_at=timestamp(row["created_at"]),
        restored_at=timestamp(row["restored_at"]),
        purged_at=timestamp(row["purged_at"]),
    )


def audit_message(row: Any) -> common_pb2.AuditEvent:
    return common_pb2.AuditEvent(
        id=row["id"],
        at=timestamp(row["at"]),
        principal=row["principal"],
        workspace_id=row["workspace_id"],
        action=row["action"],
        memory_id=str(row["memory_id"]) if row["memory_id"] else "",
        version=row["version"] or 0,
        before_hash=row["before_hash"] or "",
        after_hash=row["after_hash"] or "",
        request_id=row["request_id"],
        trace_id=row["trace_id"],
        prev_hash=row["prev_hash"],
        hash=row["hash"],
        details=struct({k: v for k, v in row["details"].items() if v is not None}),
    )


def parse_memory_id(value: str) -> uuid.UUID:
    """A memory id from a request; anything but a uuid is a clear INVALID_ARGUMENT."""
    try:
        return uuid.UUID(value.strip())
    except (ValueError, AttributeError):
        shown = value[:60] + ("…" if len(value) > 60 else "")
        raise InvalidArgument(f"id {shown!r} is not a memory id (a uuid)") from None


def proposal_message(row: Any, stale: bool = False) -> common_pb2.Proposal:
    """A proposal row as the wire carries it; `stale` is computed by the caller (only an open one can be)."""
    return common_pb2.Proposal(
        id=str(row["id"]),
        workspace_id=row["workspace_id"],
        kind=enum_value(common_pb2.ProposalKind, row["kind"], "kind"),
        memory_ids=[str(i) for i in row["memory_ids"]],
        change=struct(row["change"]),
        reason=row["reason"],
        proposed_by=row["proposed_by"],
        source=enum_value(common_pb2.ProposalSource, row["source"], "source"),
        state=enum_value(common_pb2.ProposalState, row["state"], "state"),
        created_at=timestamp(row["created_at"]),
        decided_by=row["decided_by"] or "",
        decided_at=timestamp(row["decided_at"]),
        decision_reason=row["decision_reason"] or "",
        applied=struct(row["applied"]),
        reversed_by=row["reversed_by"] or "",
        reversed_at=timestamp(row["reversed_at"]),
        reverse_reason=row["reverse_reason"] or "",
        stale=stale,
    )
