"""`mnemo import FILE.jsonl`: many memories through the batch endpoint, with progress, resumable.

Each line is one write body (as `POST /api/v1/memories` takes). A line without an idempotency key
gets one made from its own text, so a rerun (after an interruption, or of the same file) replays
what is already in instead of storing it twice, and only what is new is written.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mnemo_cli.commands.common import client, workspace_ref
from mnemo_cli.commands.transfer import cmd_restore, is_export
from mnemo_cli.output import print_json, progress_bar, refusal_line

# Well under the server's 1,000: a batch is one transaction, and the bar moves per batch.
BATCH = 200
# Batches sent before the first is answered: while the database commits one, the server checks,
# redacts and chunks the next (a quarter more notes a second on 2 cores than one at a time).
# Answers are still taken, counted and shown in file order.
IN_FLIGHT = 2


def tally(counts: dict[str, int], result: dict[str, Any]) -> None:
    """Counts one answered item of a batch write: refused, written, or already in (a replay)."""
    if "error" in result:
        counts["refused"] += 1
    elif result["outcome"] in ("created", "new_version"):
        counts["written"] += 1
    else:
        counts["already in"] += 1


def _lines(path: str) -> list[tuple[int, str]]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    return [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]


def _body(line: str) -> dict[str, Any]:
    item = json.loads(line)
    if not isinstance(item, dict):
        raise ValueError("a line must be a JSON object (a write body)")
    if not item.get("idempotency_key"):
        digest = hashlib.sha256(line.strip().encode()).hexdigest()[:32]
        item["idempotency_key"] = f"import-{digest}"
    return item


def _answer(
    sent: tuple[list[tuple[int, dict[str, Any]]], Future[list[dict[str, Any]]], int],
) -> tuple[list[tuple[int, dict[str, Any]]], list[dict[str, Any]], int]:
    batch, future, done = sent
    return batch, future.result(), done


def cmd_import(args: argparse.Namespace) -> int:
    try:
        lines = _lines(args.file)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"mnemo: cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    if lines and is_export(lines[0][1]):
        # A file `mnemo export` wrote: restored whole, with its history (docs/export-format.md).
        return cmd_restore(args, lines)
    counts = {"written": 0, "already in": 0, "refused": 0}
    refused: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    bar = sys.stderr.isatty() and not args.json
    gateway = client()
    workspace = workspace_ref(args.workspace)

    def send(batch: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
        if not batch:
            return []
        body = {"workspace": workspace, "items": [item for _, item in batch]}
        return gateway.request("POST", "/memories:batch", json=body)["results"]

    def take(batch: list[tuple[int, dict[str, Any]]], answered: list[dict[str, Any]], done: int) -> None:
        for (number, _), result in zip(batch, answered, strict=True):
            results.append({"line": number, **result})
            if "error" in result:
                refused.append({"line": number, **result})
            tally(counts, result)
        if bar:
            print(progress_bar(done, len(lines), "lines", counts), end="", file=sys.stderr, flush=True)

    pending: deque[tuple[list[tuple[int, dict[str, Any]]], Future[list[dict[str, Any]]], int]] = deque()
    with ThreadPoolExecutor(IN_FLIGHT) as senders:
        try:
            for start in range(0, len(lines), BATCH):
                batch: list[tuple[int, dict[str, Any]]] = []
                for number, line in lines[start : start + BATCH]:
                    try:
                        batch.append((number, _body(line)))
                    except ValueError as exc:  # json.JSONDecodeError is a ValueError
                        error = {
                            "code": "INVALID_ARGUMENT",
                            "reason": "INVALID_ARGUMENT",
                            "message": f"not a write body: {exc}",
                        }
                        failure: dict[str, Any] = {"line": number, "error": error}
                        refused.append(failure)
                        results.append(failure)
                        counts["refused"] += 1
                if len(pending) == IN_FLIGHT:
                    take(*_answer(pending.popleft()))
                pending.append((batch, senders.submit(send, batch), min(start + BATCH, len(lines))))
            while pending:
                take(*_answer(pending.popleft()))
        finally:
            # An error (the gateway gone, an interrupt) sends nothing more; what was sent is answered.
            for _, future, _ in pending:
                future.cancel()
    if bar:
        print(file=sys.stderr)
    # Lines refused here (not JSON) were noted before their batch's answers: back in file order.
    results.sort(key=lambda r: int(r["line"]))
    refused.sort(key=lambda r: int(r["line"]))
    if args.json:
        print_json({"results": results, **{k.replace(" ", "_"): v for k, v in counts.items()}})
    else:
        for failure in refused:
            print(refusal_line(f"line {failure['line']}", failure["error"]))
        print(
            f"{len(lines)} lines: {counts['written']} written, {counts['already in']} already in, "
            f"{counts['refused']} refused"
        )
    return 1 if refused else 0
