"""What the CLI prints that more than one command shares: raw JSON, the progress bar, memory and event lines."""

from __future__ import annotations

import json
from typing import Any


def print_json(data: Any) -> None:
    """The gateway's answer as it came (`--json`): for scripts, so nothing is reworded."""
    print(json.dumps(data, indent=2, ensure_ascii=False))


def refusal_line(where: str, error: dict[str, Any]) -> str:
    """One refused item as the import commands print it: where (unless the message says it), the
    status, the reason when it says more than the status, and the message."""
    reason = error.get("reason")
    said = f" ({reason})" if reason not in (None, "", "UNSPECIFIED", error["code"]) else ""
    line = f"{error['code']}{said}: {error['message']}"
    return f"{where}: {line}" if where else line


def progress_bar(done: int, total: int, unit: str, counts: dict[str, int]) -> str:
    """One carriage-return line, redrawn in place on stderr while a stream is read."""
    width = 30
    filled = int(width * done / total) if total else width
    tally = " · ".join(f"{n} {label}" for label, n in counts.items())
    return f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {unit} · {tally}"


def print_memory_line(prefix: str, memory: dict[str, Any]) -> None:
    print(f"{prefix}: {memory['id']}  {memory['title']}  {memory['label']}")


def print_tombstone(verb: str, stone: dict[str, Any]) -> None:
    print(f"{verb}: {stone['memory_id']} (by {stone['principal']}, {stone['deleted_at']})")
    if stone["source_uri"]:
        print(f"  writes from {stone['source_uri']} are refused while the tombstone stands")


def event_line(event: dict[str, Any]) -> str:
    """One audit event: id, time, action, principal, then what it touched and any details that are set."""
    details = ", ".join(f"{k}={v}" for k, v in event["details"].items() if v)
    memory = f" {event['memory_id']}" if event["memory_id"] else ""
    version = f" v{event['version']}" if event["version"] else ""
    return f"#{event['id']:<6} {event['at']}  {event['action']:<13} {event['principal']:<10}{memory}{version}" + (
        f"  ({details})" if details else ""
    )
