"""basic-memory (basicmachines-co/basic-memory): a folder of Markdown notes with YAML front matter.

Front matter: title (default: the file name), type (default note), tags (a list or comma-separated),
permalink, and any custom fields. The body holds observations (`- [category] text #tag (context)`)
and relations (`- relation_type [[Target]]`); the body is imported whole, the observations' categories
and the relations are kept in the metadata too.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from mnemo_cli.peers.base import PeerError, PeerRecord, Unreadable, kind_of

TOOL = "basic-memory"
OBSERVATION = re.compile(r"^\s*[-*]\s+\[([^\]]+)\]\s+(.+)$", re.MULTILINE)
RELATION = re.compile(r"^\s*[-*]\s+([A-Za-z_][\w-]*)\s+\[\[([^\]]+)\]\]", re.MULTILINE)


def _notes(root: Path) -> list[Path]:
    # Hidden folders (.git, .obsidian, basic-memory's own) hold no notes.
    return sorted(
        p
        for p in root.rglob("*.md")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )


def read_basic_memory(path: Path) -> list[PeerRecord | Unreadable]:
    if not path.is_dir():
        raise PeerError(f"{path} is not a folder; basic-memory keeps its notes as Markdown files in a folder")
    notes = _notes(path)
    if not notes:
        raise PeerError(f"{path} holds no Markdown notes (*.md): not a basic-memory folder")
    return [_record(path, note) for note in notes]


def _split(text: str) -> tuple[dict[str, Any], str]:
    if not text.startswith("---"):
        return {}, text
    end = re.search(r"^---\s*$", text[3:], re.MULTILINE)
    if end is None:
        raise ValueError("front matter opened with --- is never closed")
    head, body = text[3 : 3 + end.start()], text[3 + end.end() :]
    meta = yaml.safe_load(head) or {}
    if not isinstance(meta, dict):
        raise ValueError("front matter is not a mapping of fields")
    return meta, body.lstrip("\n")


def _record(root: Path, note: Path) -> PeerRecord | Unreadable:
    name = str(note.relative_to(root))
    try:
        meta, body = _split(note.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        return Unreadable(name, f"cannot read its front matter: {str(exc).splitlines()[0]}")
    if not body.strip():
        return Unreadable(name, "the note has no text")
    tags = meta.get("tags") or []
    if isinstance(tags, str):
        tags = tags.split(",")
    permalink = str(meta.get("permalink") or note.relative_to(root).with_suffix("").as_posix())
    known = {"title", "type", "tags", "permalink"}
    modified = datetime.fromtimestamp(note.stat().st_mtime, UTC).isoformat()
    return PeerRecord(
        name=name,
        record_id=permalink,
        source_uri=note.resolve().as_uri(),
        content=body,
        title=str(meta.get("title") or note.stem),
        kind=kind_of(str(meta.get("type") or "")),
        tags=[str(t) for t in tags] if isinstance(tags, list) else [],
        metadata={
            "source_id": permalink,
            "source_type": str(meta.get("type") or "note"),
            "observation_categories": sorted({m.group(1).strip() for m in OBSERVATION.finditer(body)}),
            "relations": [{"type": m.group(1), "target": m.group(2)} for m in RELATION.finditer(body)],
            "front_matter": {k: _plain(v) for k, v in meta.items() if k not in known},
            "source_times": {"modified_at": modified},
        },
    )


def _plain(value: Any) -> Any:
    # YAML dates and other types become JSON-ready text.
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)
