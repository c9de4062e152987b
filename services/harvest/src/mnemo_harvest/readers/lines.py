"""Session files read as a stream of JSON lines, within caps: the files are untrusted input.

A session file is never held whole in memory. It is read in 1 MiB chunks (a `.zst` file through a
streaming decompressor), hashed as it goes, and cut into lines:

- a file (decompressed, for `.zst`) larger than `Limits.max_session_bytes` stops the read with
  SessionRefused, so a 2 GB log or a decompression bomb costs at most the cap in reading time and
  one chunk plus one line in memory;
- a line longer than `Limits.max_line_bytes` is dropped as it streams past (never buffered whole)
  and reported as refused;
- a line nested deeper than `Limits.max_json_depth` (or deep enough to make Python's json raise
  RecursionError) is refused too: the readers and the redactor walk records recursively.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import zstandard

CHUNK = 1 << 20
# A zstd frame names the window its decoder must hold; a hostile one can ask for gigabytes. Codex
# writes small windows; 32 MiB is far above any zstd level's default.
MAX_ZSTD_WINDOW = 32 << 20


@dataclass(frozen=True)
class Limits:
    """The caps on one session's files (MNEMO_HARVEST_MAX_SESSION_BYTES and friends)."""

    max_session_bytes: int = 256 << 20
    """max_session_bytes caps the bytes of a session's files together, decompressed."""
    max_line_bytes: int = 8 << 20
    """max_line_bytes caps one JSON line; a longer one is refused alone."""
    max_json_depth: int = 200
    """max_json_depth caps how deeply one line nests arrays and objects; a deeper one is refused alone."""


class SessionRefused(Exception):
    """A session not read at all, for the reason given (too large, a decompression bomb)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class Budget:
    """What a session's files have used of the session's cap, and the digest of what was read."""

    limits: Limits
    hasher: Any = field(default_factory=hashlib.sha256)
    read: int = 0
    refused: list[str] = field(default_factory=list)
    """refused names each refused line (`file:line: why`)."""

    def feed(self, chunk: bytes, path: Path) -> None:
        self.read += len(chunk)
        if self.read > self.limits.max_session_bytes:
            compressed = " (decompressed)" if path.name.endswith(".zst") else ""
            raise SessionRefused(
                f"too large: {path.name} holds more than {self.limits.max_session_bytes} bytes{compressed} "
                "(MNEMO_HARVEST_MAX_SESSION_BYTES)"
            )
        self.hasher.update(chunk)

    def separator(self, data: bytes) -> None:
        """Bytes that are part of the digest but not of any file (a subagent file's relative name)."""
        self.hasher.update(data)

    @property
    def digest(self) -> str:
        return str(self.hasher.hexdigest())


def _chunks(stream: BinaryIO) -> Iterator[bytes]:
    while chunk := stream.read(CHUNK):
        yield chunk


def raw_lines(path: Path, budget: Budget) -> Iterator[tuple[int, bytes | None]]:
    """(1-based number, line without its newline) for every line of `path`; None for a line over the
    line cap. Raises SessionRefused past the session cap, OSError when the file cannot be read, and
    zstandard.ZstdError when a `.zst` stream is corrupt (after the lines before the fault)."""
    limit = budget.limits.max_line_bytes
    with path.open("rb") as raw:
        stream: BinaryIO = raw
        if path.name.endswith(".zst"):
            stream = zstandard.ZstdDecompressor(max_window_size=MAX_ZSTD_WINDOW).stream_reader(raw)
        pending = bytearray()
        oversized = False
        number = 1
        for chunk in _chunks(stream):
            budget.feed(chunk, path)
            start = 0
            while (end := chunk.find(b"\n", start)) != -1:
                if oversized or len(pending) + end - start > limit:
                    yield number, None
                else:
                    pending += chunk[start:end]
                    yield number, bytes(pending)
                pending.clear()
                oversized = False
                number += 1
                start = end + 1
            if not oversized:
                pending += chunk[start:]
                if len(pending) > limit:
                    pending.clear()
                    oversized = True
        if oversized:
            yield number, None
        elif pending:
            yield number, bytes(pending)


def json_line(raw: bytes, limits: Limits) -> tuple[Any, str]:
    """The line's JSON value and "", or None and why it was refused ("" when it is merely not JSON)."""
    try:
        value = json.loads(raw.decode("utf-8", errors="replace"))
    except RecursionError:
        return None, f"nested deeper than {limits.max_json_depth} levels"
    except ValueError:
        return None, ""
    # Counting brackets is C-speed; only a line that could be too deep is walked.
    if raw.count(b"[") + raw.count(b"{") > limits.max_json_depth and depth(value) > limits.max_json_depth:
        return None, f"nested deeper than {limits.max_json_depth} levels"
    return value, ""


def depth(value: Any) -> int:
    """How deeply `value` nests lists and dicts, walked without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            node = list(node.values())
        if isinstance(node, list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in node if isinstance(child, (dict, list)))
    return deepest


def refusal(path: Path, number: int, why: str) -> str:
    return f"{path.name}:{number}: {why}"


def read_small_json(path: Path, limits: Limits) -> Any:
    """A small side file (a subagent's meta.json): None when it is too large, deep or not JSON."""
    with path.open("rb") as fh:
        data = fh.read(limits.max_line_bytes + 1)
    if len(data) > limits.max_line_bytes:
        return None
    value, _ = json_line(data, limits)
    return value


def head_lines(path: Path, count: int, limits: Limits) -> Iterator[Any]:
    """The JSON values of the first `count` lines (a header, a session id), each within the line cap."""
    with path.open("rb") as raw:
        stream: Any = raw
        if path.name.endswith(".zst"):
            stream = io.BufferedReader(zstandard.ZstdDecompressor(max_window_size=MAX_ZSTD_WINDOW).stream_reader(raw))
        for _ in range(count):
            line = stream.readline(limits.max_line_bytes + 1)
            if not line:
                return
            if len(line) > limits.max_line_bytes:
                return  # a header this long is no header; the rest is not worth reading for one
            value, _ = json_line(line, limits)
            yield value
