"""The session archive: compressed, redacted copies of harvested sessions, bounded in size and age."""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog
import zstandard

from mnemo_harvest.model import Session, SourceRef, ToolCall, Turn
from mnemo_redact import redact_json

log = structlog.get_logger("mnemo.harvest.archive")


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot archive {type(value).__name__}")


def session_to_json(session: Session) -> dict[str, Any]:
    data = dataclasses.asdict(session)
    data["skipped_records"] = dict(session.skipped_records)
    return data


def session_from_json(data: dict[str, Any]) -> Session:
    """Reads an archived copy back: a deleted source can still be re-derived from it."""

    def turns(raw: list[dict[str, Any]]) -> list[Turn]:
        return [
            Turn(
                role=t["role"],
                text=t["text"],
                tool_calls=[ToolCall(c["name"], c["summary"], tuple(c["files"])) for c in t["tool_calls"]],
                timestamp=datetime.fromisoformat(t["timestamp"]) if t["timestamp"] else None,
            )
            for t in raw
        ]

    def build(raw: dict[str, Any]) -> Session:
        fields = {k: v for k, v in raw.items() if k not in ("turns", "subagents", "malformed", "skipped_records")}
        for key in ("started_at", "ended_at"):
            if fields.get(key):
                fields[key] = datetime.fromisoformat(fields[key])
        return Session(**fields, turns=turns(raw["turns"]), subagents=[build(c) for c in raw["subagents"]])

    return build(data)


class Archive:
    """One `.json.zst` file per session under `<data_dir>/archive/<agent>/`."""

    def __init__(self, root: Path, max_bytes: int, retention_days: float) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.retention_s = retention_days * 86400

    def path(self, agent: str, session_id: str) -> Path:
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in session_id)
        return self.root / agent / f"{safe}.json.zst"

    def write(self, session: Session) -> tuple[Path, int]:
        """Redacts (again: the archive must hold no secret) and compresses the session."""
        data, _ = redact_json(session_to_json(session))
        raw = json.dumps(data, default=_encode, ensure_ascii=False).encode()
        target = self.path(session.agent, session.session_id)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(zstandard.ZstdCompressor(level=10).compress(raw))
        tmp.replace(target)  # atomic: a reader never sees half a file
        return target, target.stat().st_size

    def read(self, path: Path) -> Session:
        raw = zstandard.ZstdDecompressor().decompress(path.read_bytes())
        return session_from_json(json.loads(raw))

    def total_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.root.rglob("*.json.zst")) if self.root.exists() else 0

    def evict(self) -> list[Path]:
        """Removes copies past retention, then the oldest until the archive fits; returns them."""
        if not self.root.exists():
            return []
        files = sorted(self.root.rglob("*.json.zst"), key=lambda p: p.stat().st_mtime)
        now = time.time()
        evicted = [p for p in files if now - p.stat().st_mtime > self.retention_s]
        kept = [p for p in files if p not in evicted]
        total = sum(p.stat().st_size for p in kept)
        while kept and total > self.max_bytes:
            oldest = kept.pop(0)
            total -= oldest.stat().st_size
            evicted.append(oldest)
        for path in evicted:
            path.unlink(missing_ok=True)
            log.info("archive_evicted", path=str(path))
        return evicted


class ArchivedSessions:
    """A reader over archived copies, for sessions whose files the agent has since deleted."""

    def __init__(self, agent: str, archive: Archive, copies: dict[str, Path]) -> None:
        self.agent = agent
        self.archive = archive
        self.copies = copies

    def discover(self) -> Iterator[SourceRef]:
        return iter(())

    def read(self, ref: SourceRef) -> Session:
        return self.archive.read(self.copies[ref.key])


def free_disk_bytes(path: Path) -> int:
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free
