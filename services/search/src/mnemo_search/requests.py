"""A read request's fields as domain values, checked before anything is read: scope, limits, page tokens."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from mnemo.common.v1 import common_pb2
from mnemo_platform import InvalidArgument, enum_label
from mnemo_store import Reach, Scope, WorkspaceRow, reach_in
from mnemo_wire import from_timestamp, parse_memory_id

MAX_QUERY_CHARS = 32 * 1024


def no_nul(value: str, field: str) -> str:
    if "\x00" in value:
        raise InvalidArgument(f"{field} contains NUL bytes (U+0000)")
    return value


def limit(value: int, field: str, default: int, most: int) -> int:
    """0 means the default; more than `most` is cut to it; negative is refused."""
    if value < 0:
        raise InvalidArgument(f"{field} must not be negative; got {value}")
    return min(value or default, most)


def read_scope(request: Any) -> Scope:
    """The request's filter and read options (where it has them) as a scope.

    The workspaces come later (in_workspace), once the workspace is resolved.
    """
    scope = Scope(reach=Reach(None))
    if "filter" in request.DESCRIPTOR.fields_by_name and request.HasField("filter"):
        message: common_pb2.MemoryFilter = request.filter
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
            tags=[no_nul(tag, "filter tag") for tag in message.tags],
            created_after=from_timestamp(message.created_after, message.HasField("created_after")),
            created_before=from_timestamp(message.created_before, message.HasField("created_before")),
            updated_after=from_timestamp(message.updated_after, message.HasField("updated_after")),
            updated_before=from_timestamp(message.updated_before, message.HasField("updated_before")),
        )
    if "options" in request.DESCRIPTOR.fields_by_name and request.HasField("options"):
        options: common_pb2.ReadOptions = request.options
        scope = replace(
            scope,
            include_history=options.include_history,
            as_of=from_timestamp(options.as_of, options.HasField("as_of")),
            valid_at=from_timestamp(options.valid_at, options.HasField("valid_at")),
        )
    return scope


def in_workspace(scope: Scope, ws: WorkspaceRow) -> Scope:
    """Narrows a scope to what a read inside `ws` sees (the access module's rule: the workspace and global)."""
    return replace(scope, reach=reach_in(ws))


def memory_cursor(token: str) -> tuple[datetime, str] | None:
    """ListMemories' page token as its (updated_at, id) cursor; None for the first page."""
    if not token:
        return None
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


def memory_token(updated_at: datetime, memory_id: str) -> str:
    raw = json.dumps({"u": updated_at.isoformat(), "i": memory_id}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def event_cursor(token: str) -> int | None:
    """ListAuditEvents' page token: the id of the last event shown; None for the first page."""
    if not token:
        return None
    try:
        before = int(token)
        if not 0 < before < 2**63:
            raise ValueError("out of range")
    except ValueError:
        raise InvalidArgument("page_token is not valid; pass the next_page_token of a previous page") from None
    return before
