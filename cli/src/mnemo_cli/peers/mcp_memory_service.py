"""mcp-memory-service (doobidoo/mcp-memory-service): its sqlite_vec database, or its JSON export.

The `memories` table: content, content_hash (unique), tags (comma-separated text), memory_type,
metadata (JSON text), created_at/updated_at (Unix seconds), deleted_at (set on a soft delete). The
JSON export holds the same fields under "memories" (tags as a list). Soft-deleted rows are skipped.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from mnemo_cli.peers.base import PeerError, PeerRecord, Unreadable, columns, iso_from_epoch, kind_of, open_sqlite

TOOL = "mcp-memory-service"


def read_mcp_memory_service(path: Path) -> list[PeerRecord | Unreadable]:
    if path.is_file() and path.read_bytes()[:1] in (b"{", b"["):
        return _from_export(path)
    conn = open_sqlite(path, TOOL, "memories")
    try:
        present = columns(conn, "memories")
        if not {"content", "content_hash"} <= present:
            raise PeerError(f"{path}: its `memories` table has no content/content_hash columns: not {TOOL}'s")
        wanted = [c for c in ("tags", "memory_type", "metadata", "created_at", "updated_at") if c in present]
        live = "WHERE deleted_at IS NULL" if "deleted_at" in present else ""
        rows = conn.execute(
            f"SELECT rowid AS row_id, content, content_hash, {', '.join(wanted) or 'NULL AS none'} "
            f"FROM memories {live} ORDER BY rowid"
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        raise PeerError(f"{path} cannot be read as {TOOL}'s database: {exc}") from None
    finally:
        conn.close()
    return [_record(dict(row), f"memories row {row['row_id']}") for row in rows]


def _from_export(path: Path) -> list[PeerRecord | Unreadable]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PeerError(f"{path} is not valid JSON: {exc}") from None
    memories = data.get("memories") if isinstance(data, dict) else data
    if not isinstance(memories, list):
        raise PeerError(f'{path} has no "memories" list: not a {TOOL} JSON export')
    return [
        _record(item, f"memories[{i}]") if isinstance(item, dict) else Unreadable(f"memories[{i}]", "not an object")
        for i, item in enumerate(memories)
    ]


def _record(row: dict[str, Any], name: str) -> PeerRecord | Unreadable:
    content, content_hash = row.get("content"), row.get("content_hash")
    if not isinstance(content, str) or not content.strip():
        return Unreadable(name, "no content")
    if not content_hash:
        return Unreadable(name, "no content_hash")
    tags = _tags(row.get("tags"))
    metadata = row.get("metadata")
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except json.JSONDecodeError:
            metadata = {"text": metadata}
    source_times = {
        "created_at": iso_from_epoch(row.get("created_at")),
        "updated_at": iso_from_epoch(row.get("updated_at")),
    }
    return PeerRecord(
        name=name,
        record_id=str(content_hash),
        source_uri=f"{TOOL}://{content_hash}",
        content=content,
        kind=kind_of(row.get("memory_type")),
        tags=tags,
        metadata={
            "source_id": str(content_hash),
            "source_type": row.get("memory_type"),
            "source_times": {k: v for k, v in source_times.items() if v},
            "source_metadata": metadata if isinstance(metadata, dict) else {},
        },
    )


def _tags(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(t) for t in value]
    if not isinstance(value, str) or not value.strip():
        return []
    # The database keeps tags comma-separated; some versions wrote a JSON list.
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        return value.split(",")
    return [str(t) for t in parsed] if isinstance(parsed, list) else [str(parsed)]
