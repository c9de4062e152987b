"""`mnemo import --from TOOL PATH` (another memory tool's store, as an import batch) and
`mnemo import accept|rollback BATCH` (decide a staged batch as a whole).

Records are read here, on the client, and written through the import batch endpoint, so each is
redacted and screened by ingest like any write; a record refused (unreadable, or by ingest) is
refused alone, by its name in the peer's store, and leaves nothing behind.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mnemo_cli.commands import imports
from mnemo_cli.commands.common import client, workspace_ref
from mnemo_cli.output import print_json, progress_bar, refusal_line

BATCH_ACTIONS = ("accept", "rollback")
# The tools `--from` reads (mnemo_cli.peers.READERS has one reader each); named here so that building
# the parser does not import the readers (and YAML) on every start of the CLI.
PEER_TOOLS = ("mcp-memory-service", "basic-memory", "claude-mem")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `import` command's options for peer tools and batches, beside its FILE argument."""
    parser.add_argument(
        "batch_id", nargs="?", metavar="BATCH", help="with `import accept|rollback`: the import batch's id"
    )
    parser.add_argument(
        "--from",
        dest="source",
        choices=PEER_TOOLS,
        help="read FILE as this tool's store (a database file, an export, or a folder of notes)",
    )
    parser.add_argument(
        "--stage", action="store_true", help="put the batch in review: candidates until `import accept BATCH`"
    )
    parser.add_argument("--batch", dest="into_batch", metavar="BATCH", help="add to this open batch (resume an import)")
    parser.add_argument("--reason", help="with accept or rollback: why (kept in the audit log)")


def cmd_import_any(args: argparse.Namespace) -> int:
    """One `import` command: a batch decision, a peer tool's store, or (neither) a JSON-lines file."""
    if args.file in BATCH_ACTIONS and not args.source:
        return cmd_decide(args)
    if args.batch_id:
        print(f"mnemo: a second argument is only taken by `import {'|'.join(BATCH_ACTIONS)} BATCH`", file=sys.stderr)
        return 2
    if args.source:
        return cmd_import_peer(args)
    if args.stage or args.into_batch:
        print("mnemo: --stage and --batch go with --from TOOL (an import from another memory tool)", file=sys.stderr)
        return 2
    return imports.cmd_import(args)


def cmd_decide(args: argparse.Namespace) -> int:
    if not args.batch_id:
        print(f"mnemo: `import {args.file}` needs the batch id (printed by `mnemo import --stage`)", file=sys.stderr)
        return 2
    body = {"workspace": workspace_ref(args.workspace), "reason": args.reason or ""}
    answer = client().request("POST", f"/imports/{args.batch_id}/{args.file}", json=body)
    if args.json:
        print_json(answer)
        return 0
    batch = answer["batch"]
    if args.file == "accept":
        print(f"batch {batch['id']} accepted: {answer['accepted']} memories made active")
        if answer["held"]:
            print(f"  {answer['held']} flagged suspicious stay candidates: review each (mnemo confirm ID)")
    else:
        print(f"batch {batch['id']} rolled back: {answer['removed']} memories erased")
    return 0


def cmd_import_peer(args: argparse.Namespace) -> int:
    from mnemo_cli.peers import READERS, PeerError, PeerRecord, Unreadable

    path = Path(args.file).expanduser()
    try:
        records = READERS[args.source](path)
    except PeerError as exc:
        print(f"mnemo: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"mnemo: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    gateway = client()
    workspace = workspace_ref(args.workspace)
    if args.into_batch:
        batch_id = args.into_batch
    else:
        start = {"source": args.source, "origin": str(path.resolve()), "staged": args.stage, "workspace": workspace}
        batch_id = gateway.request("POST", "/imports", json=start)["batch"]["id"]
    counts = {"written": 0, "already in": 0, "refused": 0}
    results: list[dict[str, Any]] = []
    bar = sys.stderr.isatty() and not args.json
    for start_at in range(0, len(records), imports.BATCH):
        chunk = records[start_at : start_at + imports.BATCH]
        sendable = [r for r in chunk if isinstance(r, PeerRecord)]
        answered = iter(
            gateway.request(
                "POST",
                f"/imports/{batch_id}/memories:batch",
                json={"workspace": workspace, "items": [r.body(args.source) for r in sendable]},
            )["results"]
            if sendable
            else []
        )
        for record in chunk:
            if isinstance(record, Unreadable):
                error = {"code": "INVALID_ARGUMENT", "reason": "INVALID_ARGUMENT", "message": record.message}
                result: dict[str, Any] = {"record": record.name, "error": error}
            else:
                result = {"record": record.name, "source_uri": record.source_uri, **next(answered)}
            results.append(result)
            imports.tally(counts, result)
        if bar:
            done = min(start_at + imports.BATCH, len(records))
            print(progress_bar(done, len(records), "records", counts), end="", file=sys.stderr, flush=True)
    if bar:
        print(file=sys.stderr)
    refused = [r for r in results if "error" in r]
    if args.json:
        print_json({"batch": batch_id, "staged": args.stage, "results": results, **_counts(counts)})
    else:
        for failure in refused:
            print(refusal_line(failure["record"], failure["error"]))
        print(
            f"{len(records)} records from {args.source}: {counts['written']} written, "
            f"{counts['already in']} already in, {counts['refused']} refused"
        )
        if args.stage:
            print(
                f"batch {batch_id} staged for review: mnemo import accept {batch_id} | mnemo import rollback {batch_id}"
            )
        else:
            print(f"batch {batch_id} (undo with: mnemo import rollback {batch_id})")
    return 1 if refused else 0


def _counts(counts: dict[str, int]) -> dict[str, int]:
    return {k.replace(" ", "_"): v for k, v in counts.items()}
