"""Administration: bearer tokens (create, list, revoke), workspaces (add, list), redaction rescans, failed
embeddings (retry), consolidation."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from mnemo_cli.commands.common import client, workspace_ref
from mnemo_cli.output import print_json, progress_bar


def cmd_token_create(args: argparse.Namespace) -> int:
    workspaces = args.workspace or []
    if not workspaces and args.role == "admin":
        workspaces = ["*"]
    workspaces = [workspace_ref(w) or w for w in workspaces]
    body = {"principal": args.principal or args.role, "role": args.role, "workspaces": workspaces, "label": args.label}
    result = client().request("POST", "/tokens", json=body)
    if args.json:
        print_json(result)
        return 0
    token = result["token"]
    print(
        f"token {token['id']} for {token['principal']} ({token['role']}; workspaces {', '.join(token['workspaces'])})"
    )
    print("It is shown only now; store it where the agent reads it (MNEMO_TOKEN, or the MCP client's headers):")
    print(result["secret"])
    return 0


def cmd_token_list(args: argparse.Namespace) -> int:
    tokens = client().request("GET", "/tokens")["tokens"]
    if args.json:
        print_json(tokens)
        return 0
    for t in tokens:
        state = f"revoked {t['revoked_at']}" if t["revoked_at"] else f"last used {t['last_used_at'] or 'never'}"
        print(f"{t['id']}  {t['principal']:<16} {t['role']:<8} {','.join(t['workspaces']):<30} {state}  {t['label']}")
    return 0


def cmd_token_revoke(args: argparse.Namespace) -> int:
    token = client().request("DELETE", f"/tokens/{args.id}")["token"]
    print(f"revoked {token['id']} ({token['principal']}, {token['role']}) at {token['revoked_at']}")
    return 0


def cmd_workspace_add(args: argparse.Namespace) -> int:
    path = "" if (args.name and args.path is None) else str(Path(args.path or ".").expanduser().resolve())
    result = client().request("POST", "/workspaces", json={"path": path, "name": args.name or ""})
    ws = result["workspace"]
    verb = "registered" if result["created"] else "already registered"
    print(f"{verb}: {ws['name']} (id {ws['id']}){' at ' + ws['root_path'] if ws['root_path'] else ''}")
    return 0


def cmd_workspace_list(args: argparse.Namespace) -> int:
    result = client().request("GET", "/workspaces")
    if args.json:
        print_json(result)
        return 0
    for ws in result["workspaces"]:
        print(f"{ws['id']:<14} {ws['name']:<24} {ws['root_path']}")
    return 0


def cmd_redact(args: argparse.Namespace) -> int:
    if not args.rescan:
        print("mnemo redact: pass --rescan to re-apply the current redaction rules to stored memories", file=sys.stderr)
        return 2
    bar = sys.stderr.isatty() and not args.json
    body = {"workspace": args.workspace, "dry_run": args.dry_run}
    changed: list[dict[str, Any]] = []
    totals: dict[str, Any] = {}
    for line in client().stream_lines("POST", "/redact/rescan", json=body):
        item = json.loads(line)
        if item.get("done"):
            totals = item
            break
        if item["kinds"]:
            changed.append(item)
        if bar:
            counts = {"with secrets": len(changed)}
            print(progress_bar(item["index"], item["total"], "memories", counts), end="", file=sys.stderr, flush=True)
    if bar:
        print(file=sys.stderr)
    if args.json:
        print_json({"memories": changed, **totals})
        return 0
    verb = "would redact" if args.dry_run else "redacted"
    for item in changed:
        kinds = ", ".join(sorted(set(item["kinds"])))
        version = f", new version {item['new_version']}" if item["new_version"] else ""
        scrubbed = f", {item['versions_scrubbed']} stored versions scrubbed" if item["versions_scrubbed"] else ""
        print(f"{verb} {item['memory_id']} (workspace {item['workspace_id']}): {kinds}{version}{scrubbed}")
    findings = ", ".join(f"{kind} {n}" for kind, n in sorted(totals.get("findings", {}).items())) or "none"
    print(f"{totals.get('total', 0)} memories scanned, {totals.get('changed', 0)} with secrets; findings: {findings}")
    if args.dry_run and changed:
        print("dry run: nothing was changed; run without --dry-run to redact")
    return 0


def cmd_embed_retry(args: argparse.Namespace) -> int:
    result = client().request("POST", "/embeddings:retry", json={"workspace": args.workspace})
    if args.json:
        print_json(result)
        return 0
    count = result["requeued"]
    where = f" in {args.workspace}" if args.workspace else ""
    if count:
        print(
            f"{count} failed chunk{'s' if count != 1 else ''}{where} queued for embedding again; "
            "`mnemo status` shows them drain"
        )
    else:
        print(f"no failed chunks{where}")
    return 0


def cmd_consolidate(args: argparse.Namespace) -> int:
    if not args.now:
        print(
            "mnemo consolidate: pass --now to look for near-duplicates now "
            "(the ingest service also runs a pass every MNEMO_CONSOLIDATE_INTERVAL_S)",
            file=sys.stderr,
        )
        return 2
    body = {"workspace": workspace_ref(args.workspace), "dry_run": args.dry_run, "full": args.full}
    # A full pass over a large workspace takes minutes: no client-side timeout.
    result = client().request("POST", "/consolidate", json=body, timeout=None)
    if args.json:
        print_json(result)
        return 0
    verb = "would propose" if args.dry_run else "proposed"
    for one in result["passes"]:
        merges = one["merges"]
        print(
            f"{one['workspace_id']}: {one['compared']} memories compared, {one['pairs']} near-duplicate pairs, "
            f"{len(merges)} merges {verb} ({one['seconds']:.2f} s)"
        )
        for merge in merges:
            keep, *others = merge["memory_ids"]
            proposal = f" proposal {merge['proposal_id']}" if merge["proposal_id"] else ""
            print(f"  keep {keep}, supersede {', '.join(others)}{proposal}")
            print(f"    {merge['reason']}")
    return 0
