"""claude-mem (thedotmack/claude-mem): the observations of its SQLite database (~/.claude-mem/claude-mem.db).

An observation has a type (decision, bugfix, feature, refactor, discovery, change), a title, a
subtitle, a narrative, facts and concepts (JSON lists of strings), the files read and modified, its
project and session, and created_at (ISO) / created_at_epoch. Older databases keep the text in `text`.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from mnemo_cli.peers.base import PeerError, PeerRecord, Unreadable, columns, kind_of, open_sqlite

TOOL = "claude-mem"


def _strings(value: Any) -> list[str]:
    if not value:
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return [value]
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def read_claude_mem(path: Path) -> list[PeerRecord | Unreadable]:
    conn = open_sqlite(path, TOOL, "observations")
    try:
        present = columns(conn, "observations")
        wanted = [
            c
            for c in (
                "memory_session_id",
                "project",
                "text",
                "type",
                "title",
                "subtitle",
                "facts",
                "narrative",
                "concepts",
                "files_read",
                "files_modified",
                "created_at",
            )
            if c in present
        ]
        if "type" not in wanted:
            raise PeerError(f"{path}: its `observations` table has no type column: not {TOOL}'s")
        rows = conn.execute(f"SELECT id, {', '.join(wanted)} FROM observations ORDER BY id").fetchall()
    except sqlite3.DatabaseError as exc:
        raise PeerError(f"{path} cannot be read as {TOOL}'s database: {exc}") from None
    finally:
        conn.close()
    return [_record(dict(row)) for row in rows]


def _record(row: dict[str, Any]) -> PeerRecord | Unreadable:
    name = f"observation {row['id']}"
    facts = _strings(row.get("facts"))
    parts = [row.get("subtitle") or "", row.get("narrative") or row.get("text") or ""]
    parts += [f"- {fact}" for fact in facts]
    content = "\n\n".join(p for p in parts if p.strip())
    if not content.strip():
        return Unreadable(name, "no narrative, text or facts")
    return PeerRecord(
        name=name,
        record_id=str(row["id"]),
        source_uri=f"{TOOL}://observation/{row['id']}",
        content=content,
        title=row.get("title") or "",
        kind=kind_of(row.get("type")),
        tags=[*_strings(row.get("concepts")), *([row["type"]] if row.get("type") else [])],
        metadata={
            "source_id": str(row["id"]),
            "source_type": row.get("type"),
            "project": row.get("project"),
            "session": row.get("memory_session_id"),
            "files_read": _strings(row.get("files_read")),
            "files_modified": _strings(row.get("files_modified")),
            "source_times": {"created_at": row["created_at"]} if row.get("created_at") else {},
        },
    )
