"""What every peer reader yields: one record per memory, named so a refusal points back at it."""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Mnemo's limits on what a write carries (ingest refuses more); a peer's tags are cut to fit
# rather than refusing a whole note for its 33rd tag.
MAX_TAGS = 32
MAX_TAG_CHARS = 64


class PeerError(Exception):
    """The peer's store cannot be read as that tool's format: a clear message, nothing written."""


@dataclass(frozen=True)
class Unreadable:
    """One record the reader could not make sense of: refused alone, by name, like a refused write."""

    name: str
    message: str


@dataclass(frozen=True)
class PeerRecord:
    """One memory of a peer tool, as Mnemo will write it."""

    name: str
    """name says where the record is in the peer's store (a row id, a file), for per-item errors."""
    record_id: str
    """record_id is the peer's own stable id for the record (content hash, permalink, row id)."""
    source_uri: str
    content: str
    title: str = ""
    kind: str = "note"
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    def body(self, tool: str) -> dict[str, Any]:
        """The write body (as POST /memories takes it). The idempotency key covers the record and its
        text: a rerun replays what is in, and a record edited in the peer since becomes a new version
        of its memory (same source_uri) instead of a refused reuse of the key."""
        digest = hashlib.sha256(f"{tool}\0{self.record_id}\0{self.content}".encode()).hexdigest()[:32]
        return {
            "content": self.content,
            "title": self.title,
            "kind": self.kind,
            "tags": clean_tags(self.tags),
            "metadata": {"imported_from": tool, **self.metadata},
            "source_uri": self.source_uri,
            "idempotency_key": f"peer-{digest}",
        }


def kind_of(peer_type: str | None) -> str:
    """Mnemo's kind for a peer's type label: decisions and lessons keep their meaning, the rest are notes."""
    label = (peer_type or "").strip().lower()
    if label in ("decision", "decisions", "adr"):
        return "decision"
    if label in ("lesson", "lessons", "learning", "learnings", "bugfix", "gotcha", "discovery"):
        return "lesson"
    return "note"


def clean_tags(tags: list[str]) -> list[str]:
    seen: list[str] = []
    for tag in tags:
        tag = str(tag).strip().lstrip("#")[:MAX_TAG_CHARS].strip()
        if tag and tag not in seen:
            seen.append(tag)
    return seen[:MAX_TAGS]


def iso_from_epoch(value: Any) -> str | None:
    """A Unix time (seconds, or milliseconds as some tools keep it) as ISO 8601 UTC, or None."""
    if value in (None, ""):
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    if seconds > 1e11:  # milliseconds
        seconds /= 1000
    try:
        return datetime.fromtimestamp(seconds, UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        return None


def open_sqlite(path: Path, tool: str, table: str) -> sqlite3.Connection:
    """The database opened read-only (the tool may be running), with `table` present; else a PeerError."""
    if not path.is_file():
        raise PeerError(f"{path} is not a file; {tool} keeps its memories in one SQLite database file")
    with path.open("rb") as handle:
        if handle.read(16) != b"SQLite format 3\x00":
            raise PeerError(f"{path} is not an SQLite database (expected {tool}'s database file)")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    except sqlite3.DatabaseError as exc:
        raise PeerError(f"{path} cannot be read as an SQLite database: {exc}") from None
    if found is None:
        conn.close()
        raise PeerError(f"{path} has no `{table}` table: it is not a {tool} database")
    return conn


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    """The table's columns: older versions of a tool lack some, and a reader reads what is there."""
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
