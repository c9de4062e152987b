"""`redact_json`: every string in a JSON-like value redacted, with the key of each value as context."""

from __future__ import annotations

import bisect
import re
from typing import Any

from mnemo_redact.core import apply_findings, redact
from mnemo_redact.model import MARKER_RE, Finding, digest, marker
from mnemo_redact.patterns import is_placeholder, is_secret_key_name

_ENV_KEY = re.compile(r"^[A-Z][A-Z0-9_]*$")
# Strings are redacted in one pass, joined by a line that no pattern crosses: a value-less line
# ends every pattern, and the PEM block pattern never spans a NUL.
_SEPARATOR = "\n\x00\n"


def redact_json(value: Any) -> tuple[Any, tuple[Finding, ...]]:
    """A copy of `value` (dicts, lists, tuples, scalars) with secrets in its strings replaced.

    Keys are redacted like any string. A string under a secret-looking key (`"password"`,
    `"apiKey"`, `"GITHUB_TOKEN"`) is replaced whole as `secret-assignment` even when it has no
    known shape, unless it is a placeholder. A finding's offsets are within the string it came
    from, and findings come in the order of the strings (keys before their values). Two keys
    that redact to the same marker collapse into one (the later value wins): losing an entry is
    better than keeping a secret.
    """
    strings: list[tuple[str, str | None]] = []
    _collect(value, None, strings)
    if not strings:
        return value, ()
    redacted, findings = _redact_strings(strings)
    return _rebuild(value, iter(redacted)), tuple(findings)


def _collect(value: Any, key: str | None, out: list[tuple[str, str | None]]) -> None:
    """Every string in `value` in traversal order, with the key it is the value of."""
    if isinstance(value, str):
        out.append((value, key))
    elif isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str):
                out.append((k, None))
            _collect(v, k if isinstance(k, str) else None, out)
    elif isinstance(value, list | tuple):
        for item in value:
            _collect(item, None, out)


def _rebuild(value: Any, redacted: Any) -> Any:
    if isinstance(value, str):
        return next(redacted)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            new_key = next(redacted) if isinstance(k, str) else k
            out[new_key] = _rebuild(v, redacted)
        return out
    if isinstance(value, list):
        return [_rebuild(item, redacted) for item in value]
    if isinstance(value, tuple):
        return tuple(_rebuild(item, redacted) for item in value)
    return value


def _redact_strings(strings: list[tuple[str, str | None]]) -> tuple[list[str], list[Finding]]:
    texts = [text for text, _ in strings]
    starts: list[int] = []
    pos = 0
    for text in texts:
        starts.append(pos)
        pos += len(text) + len(_SEPARATOR)
    joined = redact(_SEPARATOR.join(texts))
    local: list[list[Finding]] = [[] for _ in texts]
    for finding in joined.findings:
        # Clip each finding to the strings it touches (a truncated PEM block may take the
        # separator's first newline with it).
        i = bisect.bisect_right(starts, finding.start) - 1
        while i < len(texts) and starts[i] < finding.end:
            lo, hi = max(finding.start, starts[i]) - starts[i], min(finding.end, starts[i] + len(texts[i])) - starts[i]
            if lo < hi:
                local[i].append(Finding(finding.kind, lo, hi, digest(texts[i][lo:hi])))
            i += 1
    redacted: list[str] = []
    findings: list[Finding] = []
    for (text, key), found in zip(strings, local, strict=True):
        if not found and key is not None and _secret_under_key(text, key):
            found = [Finding("secret-assignment", 0, len(text), digest(text))]
            redacted.append(marker("secret-assignment"))
        else:
            redacted.append(apply_findings(text, tuple(found)))
        findings.extend(found)
    return redacted, findings


def _secret_under_key(text: str, key: str) -> bool:
    return (
        len(text.strip()) >= 4
        and not is_placeholder(text)
        and not MARKER_RE.fullmatch(text)
        and is_secret_key_name(key, env_style=_ENV_KEY.match(key) is not None)
    )
