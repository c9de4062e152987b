"""One-line tool-call stubs, shared by every reader: redacted first, then flattened and cut.

The order matters: a secret cut in half, or a PEM block squeezed onto one line, no longer looks
like a secret to the redactor, so the text is redacted while it is still whole.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mnemo_redact import redact

STUB_MAX = 200
ARG_MAX = 60
_BASE64_RE = re.compile(r"^[A-Za-z0-9+/=_-]{64,}$")


def one_line(text: str, limit: int = STUB_MAX) -> str:
    """`text` redacted, on one line, at most `limit` characters."""
    flat = " ".join(redact(text).text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def short_args(args: dict[str, Any]) -> str:
    """Arguments as compact JSON: strings redacted then cut, binary-looking values replaced."""

    def shorten(value: Any) -> Any:
        if isinstance(value, str):
            if value.startswith("data:") or _BASE64_RE.match(value):
                return "<binary>"
            value = redact(value).text
            return value if len(value) <= ARG_MAX else value[: ARG_MAX - 3] + "..."
        if isinstance(value, dict):
            return {k: shorten(v) for k, v in list(value.items())[:6]}
        if isinstance(value, list):
            return [shorten(v) for v in value[:4]]
        return value

    return json.dumps(shorten(args), ensure_ascii=False, separators=(", ", ": "))


def display_path(path: str, cwd: str | None) -> str:
    """`path` relative to the session's directory when it is inside it."""
    if cwd:
        for sep in ("/", "\\"):
            prefix = cwd.rstrip(sep) + sep
            if path.startswith(prefix) and len(path) > len(prefix):
                return path[len(prefix) :]
    return path
