"""JSON in and out of the protos: checks on caller text, and each message as the JSON callers read."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from google.protobuf import json_format, struct_pb2, timestamp_pb2

from mnemo.common.v1 import common_pb2
from mnemo.harvest.v1 import harvest_service_pb2 as harvest_pb
from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_gateway.errors import CallError
from mnemo_platform import enum_label
from mnemo_platform.labels import memory_label


def check_text(value: Any, field: str) -> None:
    """Lone surrogates (invalid UTF-8 once encoded) cannot cross protobuf: refuse them by name."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise CallError.invalid(f"{field} is not valid Unicode text (at character {exc.start})") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            check_text(key, field)
            check_text(item, field)
    elif isinstance(value, list):
        for item in value:
            check_text(item, field)


def checked(model: Any) -> None:
    for name in type(model).model_fields:
        check_text(getattr(model, name), name)


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    try:
        message.update(value)
    except (ValueError, TypeError, RecursionError) as exc:
        raise CallError.invalid(f"metadata is not storable JSON: {exc}") from None
    return message


def timestamp(value: datetime | None) -> timestamp_pb2.Timestamp | None:
    if value is None:
        return None
    ts = timestamp_pb2.Timestamp()
    try:
        ts.FromDatetime(value)
    except (ValueError, OverflowError) as exc:
        raise CallError.invalid(f"timestamp {value} is out of range: {exc}") from None
    return ts


def iso(ts: timestamp_pb2.Timestamp) -> str:
    return ts.ToJsonString() if ts.seconds or ts.nanos else ""


def memory_json(memory: common_pb2.Memory, with_content: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": memory.id,
        "workspace_id": memory.workspace_id,
        "label": memory_label(memory),
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
        "created_at": iso(memory.created_at),
        "updated_at": iso(memory.updated_at),
        "embedding_state": enum_label(common_pb2.EmbeddingState, memory.embedding_state),
        "trust": round(memory.trust, 4),
        "suspicious": list(memory.suspicious),
        "superseded_by": memory.superseded_by,
        "status_reason": memory.status_reason,
        "valid_from": iso(memory.valid_from),
        "valid_to": iso(memory.valid_to),
    }
    if with_content:
        data["content"] = memory.content
    return data


def _context_item_json(item: search_pb.ContextItem) -> dict[str, Any]:
    memory = item.memory
    data: dict[str, Any] = {
        "id": memory.id,
        "workspace_id": memory.workspace_id,
        "label": memory_label(memory),
        "kind": enum_label(common_pb2.MemoryKind, memory.kind),
        "status": enum_label(common_pb2.MemoryStatus, memory.status),
        "provenance": enum_label(common_pb2.Provenance, memory.provenance),
        "title": memory.title,
        "updated_at": iso(memory.updated_at),
        # "snippet", as search results call it: the MCP surface frames it as quoted data when it was recorded text.
        "snippet": item.text,
        "truncated": item.truncated,
        "status_reason": memory.status_reason,
        "line": item.line,
    }
    if item.HasField("successor"):
        successor = item.successor
        data["successor"] = {
            "id": successor.id,
            "label": memory_label(successor),
            "title": successor.title,
            "status": enum_label(common_pb2.MemoryStatus, successor.status),
        }
    return data


def context_json(response: search_pb.GetContextResponse) -> dict[str, Any]:
    """The wake-up packet: its sections as data, and `text`, the packet as an agent reads it."""
    return {
        "workspace": workspace_json(response.workspace),
        "budget": response.budget,
        "tokens": response.tokens,
        "candidates": response.candidates,
        "since": iso(response.since) or None,
        "sections": [
            {
                "section": enum_label(search_pb.ContextSection, part.section),
                "heading": part.heading,
                "omitted": part.omitted,
                "items": [_context_item_json(item) for item in part.items],
            }
            for part in response.sections
        ],
        "degraded": list(response.degraded),
        "text": response.text,
    }


def written_json(response: Any) -> dict[str, Any]:
    """A Write, Update or ConfirmMemoryResponse: what happened, and the memory as it now stands."""
    return {
        "outcome": enum_label(ingest_pb.WriteOutcome, response.outcome),
        "memory": memory_json(response.memory, with_content=False),
    }


def workspace_json(ws: common_pb2.Workspace) -> dict[str, Any]:
    return {"id": ws.id, "name": ws.name, "root_path": ws.root_path, "created_at": iso(ws.created_at)}


def plain(message: Any) -> dict[str, Any]:
    """A message as JSON with its own field names, every field present."""
    return json_format.MessageToDict(
        message, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
    )


def source_json(source: harvest_pb.Source) -> dict[str, Any]:
    item = plain(source)
    item["size"] = source.size  # int64 would otherwise be a string
    item["updated_at"] = iso(source.updated_at)
    item["harvested_at"] = iso(source.harvested_at)
    return item


def token_json(token: common_pb2.Token) -> dict[str, Any]:
    return {
        "id": token.id,
        "principal": token.principal,
        "role": token.role,
        "workspaces": list(token.workspaces),
        "label": token.label,
        "created_at": iso(token.created_at),
        "last_used_at": iso(token.last_used_at) if token.HasField("last_used_at") else None,
        "revoked_at": iso(token.revoked_at) if token.HasField("revoked_at") else None,
    }


def event_json(event: common_pb2.AuditEvent) -> dict[str, Any]:
    data = plain(event)
    data["id"] = event.id  # int64 would otherwise be a string
    data["at"] = iso(event.at)
    return data


def tombstone_json(stone: ingest_pb.Tombstone) -> dict[str, Any]:
    return {
        "workspace_id": stone.workspace_id,
        "memory_id": stone.memory_id,
        "source_uri": stone.source_uri,
        "source_fingerprint": stone.source_fingerprint,
        "reason": stone.reason,
        "principal": stone.principal,
        "deleted_at": iso(stone.deleted_at),
        "restored_at": iso(stone.restored_at),
        "purged_at": iso(stone.purged_at),
    }


def read_options(include_history: bool, as_of: datetime | None, valid_at: datetime | None) -> common_pb2.ReadOptions:
    return common_pb2.ReadOptions(include_history=include_history, as_of=timestamp(as_of), valid_at=timestamp(valid_at))
