"""`mnemo export` and the import of an export file (docs/export-format.md): memory out and back in, whole.

`mnemo import FILE` hands a file whose first line is an export header here; each record is written
back with its history by the admin-only restore endpoint, in file order, and a rerun skips what is in.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from mnemo_cli.commands.common import client, workspace_ref
from mnemo_cli.output import print_json, progress_bar, refusal_line

FORMAT = "mnemo-export"
# Records a call: well under the server's 1,000, and a memory record carries its whole history.
BATCH = 200


def is_export(first_line: str) -> bool:
    """Whether a file's first line is an export header (any version: the server says which it reads)."""
    try:
        header = json.loads(first_line)
    except ValueError:
        return False
    return isinstance(header, dict) and header.get("format") == FORMAT


@contextlib.contextmanager
def _output(path: str | None) -> Iterator[TextIO]:
    """stdout, or FILE written beside itself and renamed when complete: a failed export leaves no half file."""
    if not path or path == "-":
        yield sys.stdout
        return
    target = Path(path)
    partial = target.with_name(target.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8") as out:
            yield out
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def cmd_export(args: argparse.Namespace) -> int:
    workspace = workspace_ref(args.workspace)
    params = {"workspace": workspace} if workspace else {}
    counts = {"workspace": 0, "memory": 0, "tombstone": 0}
    bar = sys.stderr.isatty()
    with _output(args.output) as out:
        for n, line in enumerate(client().stream_lines("GET", "/export", params=params), start=1):
            out.write(line + "\n")
            kind = json.loads(line).get("type", "") if n > 1 else ""
            if kind in counts:
                counts[kind] += 1
            if bar and n % 100 == 0:
                print(
                    f"\rexporting: {counts['memory']} memories, {counts['tombstone']} tombstones",
                    end="",
                    file=sys.stderr,
                )
    if bar:
        print(file=sys.stderr)
    where = f" to {args.output}" if args.output and args.output != "-" else ""
    tally = f"{counts['workspace']} workspaces, {counts['memory']} memories, {counts['tombstone']} tombstones"
    print(f"exported {tally}{where}", file=sys.stderr)
    return 0


def cmd_restore(args: argparse.Namespace, lines: list[tuple[int, str]]) -> int:
    """Writes an export file's records back; `lines` are the file's non-blank lines, the header first."""
    if args.workspace:
        print(
            "mnemo: an export file names its own workspaces; import it without --workspace "
            "(into a fresh instance, or one without those workspaces' memories)",
            file=sys.stderr,
        )
        return 2
    (_, header), records = lines[0], lines[1:]
    gateway = client()
    counts = {"restored": 0, "already in": 0, "refused": 0}
    results: list[dict[str, Any]] = []
    bar = sys.stderr.isatty() and not args.json
    # The header alone is still sent once: the server says whether it reads the format's version.
    for start in range(0, max(len(records), 1), BATCH):
        batch = [{"line": n, "record": text} for n, text in records[start : start + BATCH]]
        answered = gateway.request("POST", "/export:restore", json={"header": header, "records": batch})["results"]
        for result in answered:
            results.append(result)
            if "error" in result:
                counts["refused"] += 1
            else:
                counts["restored" if result["outcome"] == "restored" else "already in"] += 1
        if bar:
            done = min(start + BATCH, len(records))
            print(progress_bar(done, len(records), "records", counts), end="", file=sys.stderr, flush=True)
    if bar:
        print(file=sys.stderr)
    refused = [r for r in results if "error" in r]
    if args.json:
        print_json({"results": results, **{k.replace(" ", "_"): v for k, v in counts.items()}})
    else:
        for failure in refused:
            # The server's message names the line already.
            print(refusal_line("", failure["error"]))
        print(
            f"{len(records)} records: {counts['restored']} restored, {counts['already in']} already in, "
            f"{counts['refused']} refused; vectors are rebuilt in the background (`mnemo status`)"
        )
    return 1 if refused else 0
