"""The export format (docs/export-format.md): store rows as its JSON records, and records read back,
checked field by field, as the rows a restore writes. Search writes it; ingest reads it.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from mnemo_platform import InvalidArgument
from mnemo_store import ALL_STATUSES
from mnemo_store.transfer import RestoredMemory

FORMAT = "mnemo-export"
VERSION = 1
"""VERSION changes only when a reader of the previous version would misread a file (docs/export-format.md)."""
RECORD_TYPES = ("workspace", "memory", "tombstone", "audit_head")
KINDS = ("note", "decision", "lesson", "session", "import")
PROVENANCES = (
    "agent",
    "human",
    "harvested_summary",
    "harvested_transcript",
    "extracted",
    "imported",
    "consolidated",
)


def dumps(record: Mapping[str, Any]) -> str:
    """One record as one line: compact JSON, UTF-8 text as it is."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def digest(record: Mapping[str, Any]) -> str:
    """sha256 of the record's canonical JSON: what a rerun compares to know a record is already in."""
    return hashlib.sha256(json.dumps(record, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _time(value: datetime | None) -> str | None:
    # isoformat keeps the microseconds PostgreSQL stores: times read back compare equal.
    return value.isoformat() if value is not None else None


def _id(value: uuid.UUID | None) -> str | None:
    return str(value) if value is not None else None


# -- writing ---------------------------------------------------------------------------------------


def header_record(exported_at: datetime, workspaces: Sequence[str], scope: str) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": _time(exported_at),
        "workspaces": list(workspaces),
        "scope": scope,
        "vectors": "not exported: the importing instance embeds every chunk again",
    }


def workspace_record(row: Any) -> dict[str, Any]:
    return {
        "type": "workspace",
        "id": row["id"],
        "name": row["name"],
        "root_path": row["root_path"],
        "created_at": _time(row["created_at"]),
    }


def memory_record(row: Any, versions: Sequence[Any], states: Sequence[Any], derivations: Sequence[Any]) -> dict:
    return {
        "type": "memory",
        "id": str(row["id"]),
        "workspace_id": row["workspace_id"],
        "kind": row["kind"],
        "title": row["title"],
        "tags": list(row["tags"]),
        "metadata": row["metadata"],
        "source_uri": row["source_uri"],
        "idempotency_key": row["idempotency_key"],
        "status": row["status"],
        "status_reason": row["status_reason"],
        "trust": row["trust"],
        "suspicious": list(row["suspicious"]),
        "author": row["author"],
        "provenance": row["provenance"],
        "version": row["version"],
        "content_hash": row["content_hash"],
        "valid_from": _time(row["valid_from"]),
        "valid_to": _time(row["valid_to"]),
        "created_at": _time(row["created_at"]),
        "updated_at": _time(row["updated_at"]),
        "superseded_by": _id(row["superseded_by"]),
        "deleted_at": _time(row["deleted_at"]),
        "versions": [
            {
                "version": v["version"],
                "title": v["title"],
                "content": v["content"],
                "content_hash": v["content_hash"],
                "author": v["author"],
                "recorded_from": _time(v["recorded_from"]),
                "recorded_to": _time(v["recorded_to"]),
            }
            for v in versions
        ],
        "states": [
            {
                "status": s["status"],
                "reason": s["reason"],
                "principal": s["principal"],
                "superseded_by": _id(s["superseded_by"]),
                "valid_from": _time(s["valid_from"]),
                "valid_to": _time(s["valid_to"]),
                "recorded_from": _time(s["recorded_from"]),
                "recorded_to": _time(s["recorded_to"]),
            }
            for s in states
        ],
        "derivations": [
            {
                "source_uri": d["source_uri"],
                "source_fingerprint": d["source_fingerprint"],
                "summarizer": d["summarizer"],
                "prompt_version": d["prompt_version"],
                "version": d["version"],
                "created_at": _time(d["created_at"]),
            }
            for d in derivations
        ],
    }


def tombstone_record(row: Any) -> dict[str, Any]:
    return {
        "type": "tombstone",
        "workspace_id": row["workspace_id"],
        "memory_id": str(row["memory_id"]),
        "source_uri": row["source_uri"],
        "source_fingerprint": row["source_fingerprint"],
        # None once purged: the purged content never leaves the instance, not even in an export.
        "snapshot": row["snapshot"],
        "reason": row["reason"],
        "principal": row["principal"],
        "created_at": _time(row["created_at"]),
        "restored_at": _time(row["restored_at"]),
        "purged_at": _time(row["purged_at"]),
    }


def audit_head_record(workspace_id: str, row: Any) -> dict[str, Any]:
    return {
        "type": "audit_head",
        "workspace_id": workspace_id,
        "events": row["events"],
        "last_event_id": row["id"],
        "hash": row["hash"],
        "at": _time(row["at"]),
    }


# -- reading ---------------------------------------------------------------------------------------


class Fields:
    """One record's fields, each taken with its type checked; an error names the record and field."""

    def __init__(self, record: Mapping[str, Any], what: str) -> None:
        self.record = record
        self.what = what

    def _get(self, name: str, check: Callable[[Any], bool], expected: str, nullable: bool) -> Any:
        if name not in self.record:
            raise InvalidArgument(f"{self.what} has no field {name!r}")
        value = self.record[name]
        if value is None and nullable:
            return None
        if not check(value):
            raise InvalidArgument(f"{self.what}: field {name!r} must be {expected}, not {json.dumps(value)[:80]}")
        return value

    def text(self, name: str, nullable: bool = False) -> Any:
        value = self._get(name, lambda v: isinstance(v, str), "a string", nullable)
        if value is not None and "\x00" in value:
            raise InvalidArgument(f"{self.what}: field {name!r} holds a NUL byte")
        return value

    def choice(self, name: str, allowed: Sequence[str]) -> str:
        return self._get(name, lambda v: v in allowed, "one of " + ", ".join(allowed), False)

    def integer(self, name: str, nullable: bool = False) -> Any:
        return self._get(name, lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer", nullable)

    def number(self, name: str) -> float:
        return float(
            self._get(name, lambda v: isinstance(v, int | float) and not isinstance(v, bool), "a number", False)
        )

    def texts(self, name: str) -> list[str]:
        return self._get(name, lambda v: isinstance(v, list) and all(isinstance(t, str) for t in v), "strings", False)

    def mapping(self, name: str, nullable: bool = False) -> Any:
        return self._get(name, lambda v: isinstance(v, dict), "an object", nullable)

    def records(self, name: str) -> list[Mapping[str, Any]]:
        return self._get(name, lambda v: isinstance(v, list) and all(isinstance(r, dict) for r in v), "objects", False)

    def time(self, name: str, nullable: bool = False) -> datetime | None:
        value = self.text(name, nullable)
        if value is None:
            return None
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is None or parsed.tzinfo is None:
            raise InvalidArgument(
                f"{self.what}: field {name!r} must be an ISO 8601 time with its offset, not {value!r}"
            )
        return parsed

    def uuid(self, name: str, nullable: bool = False) -> uuid.UUID | None:
        value = self.text(name, nullable)
        if value is None:
            return None
        try:
            return uuid.UUID(value)
        except ValueError:
            raise InvalidArgument(f"{self.what}: field {name!r} must be a UUID, not {value[:80]!r}") from None


def parse_json(text: str) -> dict[str, Any]:
    """A line's JSON object; INVALID_ARGUMENT saying what is wrong with it otherwise."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidArgument("not a JSON object")
    return value


def check_header(header: Mapping[str, Any]) -> None:
    """A header this reader understands: the format's name and a version it knows."""
    if header.get("format") != FORMAT:
        raise InvalidArgument(f"the first line is not a {FORMAT} header (its format is {header.get('format')!r})")
    if header.get("version") != VERSION:
        raise InvalidArgument(
            f"{FORMAT} version {header.get('version')!r} is not one this Mnemo reads (it reads version {VERSION}); "
            "import it with the Mnemo that wrote it, or a newer one"
        )


def record_type(record: Mapping[str, Any]) -> str:
    kind = record.get("type")
    if kind not in RECORD_TYPES:
        raise InvalidArgument(f"unknown record type {kind!r} (known: {', '.join(RECORD_TYPES)})")
    return str(kind)


def parse_workspace(record: Mapping[str, Any]) -> dict[str, Any]:
    f = Fields(record, "workspace record")
    return {
        "id": f.text("id"),
        "name": f.text("name"),
        "root_path": f.text("root_path", nullable=True),
        "created_at": f.time("created_at"),
    }


def parse_memory(record: Mapping[str, Any]) -> RestoredMemory:
    """A memory record as the rows a restore writes; its history must be whole and consistent."""
    f = Fields(record, "memory record")
    row = {
        "id": f.uuid("id"),
        "workspace_id": f.text("workspace_id"),
        "kind": f.choice("kind", KINDS),
        "title": f.text("title"),
        "tags": f.texts("tags"),
        "metadata": f.mapping("metadata"),
        "source_uri": f.text("source_uri", nullable=True),
        "idempotency_key": f.text("idempotency_key", nullable=True),
        "status": f.choice("status", ALL_STATUSES),
        "status_reason": f.text("status_reason", nullable=True),
        "trust": f.number("trust"),
        "suspicious": f.texts("suspicious"),
        "author": f.text("author"),
        "provenance": f.choice("provenance", PROVENANCES),
        "version": f.integer("version"),
        "content_hash": f.text("content_hash"),
        "valid_from": f.time("valid_from", nullable=True),
        "valid_to": f.time("valid_to", nullable=True),
        "created_at": f.time("created_at"),
        "updated_at": f.time("updated_at"),
        "superseded_by": f.uuid("superseded_by", nullable=True),
        "deleted_at": f.time("deleted_at", nullable=True),
    }
    versions = []
    for n, item in enumerate(f.records("versions"), start=1):
        v = Fields(item, f"memory record, version {n}")
        content = v.text("content")
        version = {
            "version": v.integer("version"),
            "title": v.text("title"),
            "content": content,
            "content_hash": v.text("content_hash"),
            "author": v.text("author"),
            "recorded_from": v.time("recorded_from"),
            "recorded_to": v.time("recorded_to", nullable=True),
        }
        if version["version"] != n:
            raise InvalidArgument(f"memory record: versions must be numbered 1, 2, … in order; entry {n} is not")
        if hashlib.sha256(content.encode("utf-8")).hexdigest() != version["content_hash"]:
            raise InvalidArgument(f"memory record: version {n}'s content does not match its content_hash (damaged?)")
        versions.append(version)
    if not versions or versions[-1]["version"] != row["version"] or versions[-1]["recorded_to"] is not None:
        raise InvalidArgument("memory record: its last version must be its current one (version), still open")
    if any(v["recorded_to"] is None for v in versions[:-1]):
        raise InvalidArgument("memory record: only the last version may be open (recorded_to null)")
    states = []
    for n, item in enumerate(f.records("states"), start=1):
        s = Fields(item, f"memory record, status span {n}")
        states.append(
            {
                "status": s.choice("status", ALL_STATUSES),
                "reason": s.text("reason", nullable=True),
                "principal": s.text("principal"),
                "superseded_by": s.uuid("superseded_by", nullable=True),
                "valid_from": s.time("valid_from", nullable=True),
                "valid_to": s.time("valid_to", nullable=True),
                "recorded_from": s.time("recorded_from"),
                "recorded_to": s.time("recorded_to", nullable=True),
            }
        )
    if not states or states[-1]["recorded_to"] is not None or any(s["recorded_to"] is None for s in states[:-1]):
        raise InvalidArgument("memory record: it needs status spans, of which exactly the last is open")
    derivations = []
    for n, item in enumerate(f.records("derivations"), start=1):
        d = Fields(item, f"memory record, derivation {n}")
        derivations.append(
            {
                "source_uri": d.text("source_uri"),
                "source_fingerprint": d.text("source_fingerprint"),
                "summarizer": d.text("summarizer"),
                "prompt_version": d.text("prompt_version"),
                "version": d.integer("version"),
                "created_at": d.time("created_at"),
            }
        )
    return RestoredMemory(row, versions, states, derivations)


def parse_tombstone(record: Mapping[str, Any]) -> dict[str, Any]:
    f = Fields(record, "tombstone record")
    row = {
        "workspace_id": f.text("workspace_id"),
        "memory_id": f.uuid("memory_id"),
        "source_uri": f.text("source_uri", nullable=True),
        "source_fingerprint": f.text("source_fingerprint", nullable=True),
        "snapshot": f.mapping("snapshot", nullable=True),
        "reason": f.text("reason", nullable=True),
        "principal": f.text("principal"),
        "created_at": f.time("created_at"),
        "restored_at": f.time("restored_at", nullable=True),
        "purged_at": f.time("purged_at", nullable=True),
    }
    if row["purged_at"] is not None and (row["snapshot"] is not None or row["reason"] is not None):
        raise InvalidArgument("tombstone record: a purged tombstone keeps no snapshot and no reason")
    return row


def parse_audit_head(record: Mapping[str, Any]) -> dict[str, Any]:
    f = Fields(record, "audit_head record")
    return {
        "workspace_id": f.text("workspace_id"),
        "events": f.integer("events"),
        "last_event_id": f.integer("last_event_id", nullable=True),
        "hash": f.text("hash", nullable=True),
        "at": f.time("at", nullable=True),
    }
