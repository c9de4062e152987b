"""The result types of redaction and the marker that replaces each secret."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

MARKER_PREFIX = "[REDACTED:"
# A marker is recognised by this shape; text that already carries one is never redacted again.
MARKER_RE = re.compile(r"\[REDACTED:[a-z0-9-]+\]")


def marker(kind: str) -> str:
    """`marker` is the text that stands in for one secret of `kind`."""
    return f"{MARKER_PREFIX}{kind}]"


def digest(secret: str) -> str:
    """`digest` identifies a secret in audit records without keeping it: 12 hex digits of its sha256."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class Finding:
    """One secret that was removed.

    `start` and `end` are offsets in the text given to `redact` (for `redact_json`, in the string
    the secret was found in); `digest` is `digest(secret)`, never the secret itself.
    """

    kind: str
    start: int
    end: int
    digest: str


@dataclass(frozen=True, slots=True)
class Redaction:
    """The redacted `text` and the `findings` that were replaced in it, in order of position."""

    text: str
    findings: tuple[Finding, ...] = ()

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kind of each finding, in order (convenient for logs and tests)."""
        return tuple(f.kind for f in self.findings)
