"""Checking a write request before anything touches the database: clear errors, nothing partial."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format

from mnemo.common.v1 import common_pb2
from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_guard import screen
from mnemo_platform import InvalidArgument
from mnemo_platform.enums import enum_label
from mnemo_redact import redact, redact_json
from mnemo_store import check_writer
from mnemo_store.tombstones import Derivation

MAX_TITLE_CHARS = 500
MAX_TAGS = 32
MAX_TAG_CHARS = 64
MAX_METADATA_BYTES = 64 * 1024
MAX_SOURCE_URI_CHARS = 2048
MAX_IDEMPOTENCY_KEY_CHARS = 200
MAX_REASON_CHARS = 2000
DERIVED_TITLE_CHARS = 80


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def _no_nul(value: str, field: str) -> str:
    if "\x00" in value:
        raise InvalidArgument(f"{field} contains NUL bytes (U+0000), which cannot be stored; remove them")
    return value


def check_content(content: str, max_bytes: int) -> str:
    if not content.strip():
        raise InvalidArgument("content is required and must not be blank")
    size = len(content.encode("utf-8", errors="surrogatepass"))
    if size > max_bytes:
        raise InvalidArgument(
            f"content is {size} bytes; the limit is {max_bytes} (MNEMO_MAX_CONTENT_BYTES)",
            reasons_pb.ERROR_REASON_TOO_LARGE,
        )
    try:
        content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(f"content is not valid UTF-8 (at character {exc.start})") from exc
    return _no_nul(content, "content")


def check_title(title: str, content: str) -> str:
    title = _no_nul(title.strip(), "title")
    if len(title) > MAX_TITLE_CHARS:
        raise InvalidArgument(f"title is {len(title)} characters; at most {MAX_TITLE_CHARS}")
    if title:
        return title
    first_line = next((line.strip() for line in content.splitlines() if line.strip()), "")
    if len(first_line) > DERIVED_TITLE_CHARS:
        first_line = first_line[: DERIVED_TITLE_CHARS - 1].rstrip() + "…"
    return first_line


def check_tags(tags: list[str]) -> list[str]:
    cleaned: list[str] = []
    for tag in tags:
        tag = _no_nul(tag.strip(), "tag")
        if not tag:
            raise InvalidArgument("tags must not be blank")
        if len(tag) > MAX_TAG_CHARS:
            raise InvalidArgument(f"tag {tag[:20]!r}… is longer than {MAX_TAG_CHARS} characters")
        if tag not in cleaned:
            cleaned.append(tag)
    if len(cleaned) > MAX_TAGS:
        raise InvalidArgument(f"{len(cleaned)} tags given; at most {MAX_TAGS}")
    return cleaned


def check_metadata(message: Any) -> dict[str, Any]:
    metadata = json_format.MessageToDict(message) if message is not None else {}
    encoded = json.dumps(metadata, ensure_ascii=True)
    if "\\u0000" in encoded:
        raise InvalidArgument("metadata contains NUL characters (U+0000), which cannot be stored")
    if len(encoded) > MAX_METADATA_BYTES:
        raise InvalidArgument(
            f"metadata is {len(encoded)} bytes as JSON; at most {MAX_METADATA_BYTES}", reasons_pb.ERROR_REASON_TOO_LARGE
        )
    return metadata


def check_short(value: str, field: str, limit: int) -> str | None:
    value = _no_nul(value.strip(), field)
    if len(value) > limit:
        raise InvalidArgument(f"{field} is {len(value)} characters; at most {limit}")
    return value or None


def check_enum(enum: Any, value: int, field: str, default: str) -> str:
    if value == 0:
        return default
    try:
        return enum_label(enum, value)
    except ValueError as exc:
        raise InvalidArgument(f"{field} {value} is not a known value") from exc


@dataclass(frozen=True)
class Draft:
    """A validated write: everything the transaction needs, nothing left to check."""

    kind: str
    title: str
    content: str
    content_hash: str
    tags: list[str]
    metadata: dict[str, Any]
    source_uri: str | None
    idempotency_key: str | None
    provenance: str
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    status: str = "active"
    derivation: Derivation | None = None
    redactions: tuple[dict[str, str], ...] = ()
    """redactions are the secrets removed (kind and digest, never the secret), for the audit log."""
    suspicious: tuple[str, ...] = ()
    """suspicious are the kinds of instruction-like text found (memory poisoning); empty when clean."""
    import_batch: uuid.UUID | None = None
    """import_batch is the import batch the write joins (checked against the database when written)."""


def check_reason(reason: str, required: bool) -> str | None:
    # Reasons land in the history and the audit log: a pasted secret must not.
    reason = redact(_no_nul(reason.strip(), "reason")).text
    if required and not reason:
        raise InvalidArgument("reason is required: say why, for whoever reads the history later")
    if len(reason) > MAX_REASON_CHARS:
        raise InvalidArgument(f"reason is {len(reason)} characters; at most {MAX_REASON_CHARS}")
    return reason or None


def check_valid_time(request: Any) -> tuple[datetime | None, datetime | None]:
    valid_from = request.valid_from.ToDatetime(tzinfo=UTC) if request.HasField("valid_from") else None
    valid_to = request.valid_to.ToDatetime(tzinfo=UTC) if request.HasField("valid_to") else None
    if valid_from and valid_to and valid_to <= valid_from:
        raise InvalidArgument("valid_to must be after valid_from")
    return valid_from, valid_to


class Redactor:
    """Collects what redaction removed across the fields of one request."""

    def __init__(self) -> None:
        self.findings: list[dict[str, str]] = []

    def text(self, value: str) -> str:
        result = redact(value)
        self.findings += [{"kind": f.kind, "digest": f.digest} for f in result.findings]
        return result.text

    def json(self, value: dict[str, Any]) -> dict[str, Any]:
        cleaned, findings = redact_json(value)
        self.findings += [{"kind": f.kind, "digest": f.digest} for f in findings]
        return cleaned


WRITABLE_STATUSES = ("active", "candidate")


def check_derivation(request: Any, source_uri: str | None) -> Derivation | None:
    if not request.HasField("derivation"):
        return None
    derivation = request.derivation
    fingerprint = check_short(derivation.source_fingerprint, "derivation.source_fingerprint", 200)
    if not fingerprint:
        raise InvalidArgument("derivation.source_fingerprint is required when a derivation is given")
    if not source_uri:
        raise InvalidArgument("a derived memory needs the source_uri it was derived from")
    return Derivation(
        source_fingerprint=fingerprint,
        summarizer=check_short(derivation.summarizer, "derivation.summarizer", 200) or "transcript",
        prompt_version=check_short(derivation.prompt_version, "derivation.prompt_version", 100) or "",
    )


def check_write(request: Any, max_content_bytes: int) -> Draft:
    """Validates a write and redacts secrets from everything that will be stored."""
    content = check_content(request.content, max_content_bytes)
    valid_from, valid_to = check_valid_time(request)
    status = check_enum(common_pb2.MemoryStatus, request.status, "status", "active")
    if status not in WRITABLE_STATUSES:
        raise InvalidArgument(f"a new memory starts {' or '.join(WRITABLE_STATUSES)}, not {status}")
    redactor = Redactor()
    content = redactor.text(content)
    source_uri = check_short(request.source_uri, "source_uri", MAX_SOURCE_URI_CHARS)
    source_uri = redactor.text(source_uri) if source_uri else None
    # A title taken from the (redacted) content has nothing left to redact.
    title = redactor.text(check_title(request.title, content)) if request.title.strip() else check_title("", content)
    kind = check_enum(common_pb2.MemoryKind, request.kind, "kind", "note")
    provenance = check_enum(common_pb2.Provenance, request.provenance, "provenance", "agent")
    derivation = check_derivation(request, source_uri)
    import_batch = check_import_batch(request.import_batch)
    # Before screening may turn the write into a candidate: what the caller asked for is what is checked.
    check_writer(kind, provenance, status, derivation is not None, import_batch is not None)
    suspicious = screened(title, content)
    if suspicious and status == "active":
        status = "candidate"  # text that tries to instruct the model waits for a reviewer
    return Draft(
        kind=kind,
        title=title,
        content=content,
        content_hash=content_hash(content),
        tags=[redactor.text(tag) for tag in check_tags(list(request.tags))],
        metadata=redactor.json(check_metadata(request.metadata if request.HasField("metadata") else None)),
        source_uri=source_uri,
        idempotency_key=check_short(request.idempotency_key, "idempotency_key", MAX_IDEMPOTENCY_KEY_CHARS),
        provenance=provenance,
        valid_from=valid_from,
        valid_to=valid_to,
        status=status,
        derivation=derivation,
        redactions=tuple(redactor.findings),
        suspicious=suspicious,
        import_batch=import_batch,
    )


def check_import_batch(value: str) -> uuid.UUID | None:
    if not value.strip():
        return None
    try:
        return uuid.UUID(value.strip())
    except ValueError as exc:
        raise InvalidArgument(f"import_batch {value.strip()[:60]!r} is not a uuid") from exc


def screened(title: str, content: str) -> tuple[str, ...]:
    """The kinds of memory poisoning in a memory's text (after redaction), or () when clean."""
    return screen(f"{title}\n{content}").kinds


def redacted_text(value: str) -> tuple[str, list[dict[str, str]]]:
    """One field redacted, with what was removed (for updates and reasons)."""
    redactor = Redactor()
    return redactor.text(value), redactor.findings
