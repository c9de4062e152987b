"""Memory commands: write, update, search, get, context, status, the corrections (supersede, retract, promote,
confirm, delete, restore, purge), history and the audit log."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from typing import Any

from mnemo_cli.commands.common import client, content, params, workspace_ref
from mnemo_cli.output import event_line, print_json, print_memory_line, print_tombstone


def cmd_write(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {
        "content": content(args),
        "title": args.title,
        "kind": args.kind,
        "tags": args.tag or [],
        "source_uri": args.source_uri,
        "valid_from": args.valid_from,
        "workspace": workspace_ref(args.workspace),
        # Every write carries a key, so the client may retry it after a lost answer or a 503.
        "idempotency_key": args.idempotency_key or f"cli-{uuid.uuid4()}",
    }
    result = client().request("POST", "/memories", json=body, retry=True)
    if args.json:
        print_json(result)
    else:
        memory = result["memory"]
        print(f"{result['outcome']}: {memory['id']} (version {memory['version']}) in {memory['workspace_id']}")
    return 0


def cmd_update(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"content": content(args), "workspace": workspace_ref(args.workspace)}
    if args.title is not None:
        body["title"] = args.title
    result = client().request("PATCH", f"/memories/{args.id}", json=body)
    if args.json:
        print_json(result)
    else:
        print(f"{result['outcome']}: {result['memory']['id']} now at version {result['memory']['version']}")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    body = {
        "query": " ".join(args.query),
        "mode": args.mode,
        "limit": args.limit,
        "kinds": args.kind or [],
        "tags": args.tag or [],
        "explain": args.explain,
        "include_history": args.history,
        "as_of": args.as_of,
        "valid_at": args.valid_at,
        "workspace": workspace_ref(args.workspace),
    }
    result = client().request("POST", "/search", json=body)
    if args.json:
        print_json(result)
        return 0
    for line in result["degraded"]:
        print(f"(degraded) {line}", file=sys.stderr)
    if not result["results"]:
        print("no matches")
    for i, hit in enumerate(result["results"], 1):
        print(f"{i:>2}. {hit['title']}  {hit['label']}  score {hit['score']:.4f}")
        print(f"    id {hit['id']}")
        snippet = " ".join(hit["snippet"].split())
        if snippet:
            print(f"    {snippet}")
        if args.explain:
            print(f"    {json.dumps(hit['explanation'])}")
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    query = params(args, include_history=args.history, as_of=args.as_of, valid_at=args.valid_at)
    memory = client().request("GET", f"/memories/{args.id}", params=query)
    if args.json:
        print_json(memory)
    else:
        print(f"{memory['title']}  {memory['label']}")
        print(f"id {memory['id']} · version {memory['version']} · workspace {memory['workspace_id']}")
        if memory["tags"]:
            print("tags: " + ", ".join(memory["tags"]))
        print()
        print(memory["content"])
    return 0


def cmd_context(args: argparse.Namespace) -> int:
    query = params(args, task=args.task, since=args.since)
    if args.budget is not None:
        # Set even when 0 (params() leaves falsy values out): the gateway refuses it, it is not the default.
        query["budget"] = args.budget
    packet = client().request("GET", "/context", params=query)
    if args.json:
        print_json(packet)
        return 0
    for line in packet["degraded"]:
        print(f"(degraded) {line}", file=sys.stderr)
    print(packet["text"])
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    status = client().request("GET", "/status", params=params(args))
    if args.json:
        print_json(status)
        return 0
    scope = f" in {status['workspace']['name']}" if "workspace" in status else ""
    print(f"memories{scope}: {status['memories']}")
    print(
        f"chunks: {status['chunks_embedded']} embedded, {status['chunks_pending']} pending, "
        f"{status['chunks_failed']} failed; {status['lexical_pending']} waiting for the lexical statistics, "
        f"{status['graph_pending']} for the vector graph"
    )
    model = f"{status['embedding_model']} ({status['embedding_dimension']} dims)"
    print(f"embedding model: {model}, {status['embedder_state']}")
    if status.get("last_error"):
        print(f"last embedding error: {status['last_error']}")
    if status.get("services_down"):
        print(f"services down: {', '.join(status['services_down'])}")
    return 0


# -- corrections -----------------------------------------------------------------------------


def cmd_supersede(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {
        "content": content(args),
        "title": args.title,
        "reason": args.reason,
        "valid_from": args.valid_from,
        "workspace": workspace_ref(args.workspace),
    }
    result = client().request("POST", f"/memories/{args.id}/supersede", json=body)
    if args.json:
        print_json(result)
    else:
        print_memory_line("superseded", result["superseded"])
        print_memory_line("successor ", result["successor"])
    return 0


def cmd_retract(args: argparse.Namespace) -> int:
    body = {"reason": args.reason, "workspace": workspace_ref(args.workspace)}
    result = client().request("POST", f"/memories/{args.id}/retract", json=body)
    print_json(result) if args.json else print_memory_line("retracted", result["memory"])
    return 0


def cmd_feedback(args: argparse.Namespace) -> int:
    body = {
        "vote": args.vote,
        "note": args.note,
        "successor_id": args.successor,
        "workspace": workspace_ref(args.workspace),
    }
    result = client().request("POST", f"/memories/{args.id}/feedback", json=body)
    if args.json:
        print_json(result)
        return 0
    if result["unchanged"]:
        replaced = " (already your vote: nothing changed)"
    else:
        replaced = f" (replacing your {result['replaced']} vote)" if result["replaced"] else ""
    print(
        f"voted {args.vote}{replaced}: feedback factor {result['feedback_factor']:g} "
        f"from {result['voters']} voter{'s' if result['voters'] != 1 else ''}"
    )
    proposal = result["proposal"]
    if proposal:
        print(f"proposal {proposal['id']} {'opened' if proposal['created'] else 'already proposed'} for a reviewer")
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    body = {"reason": args.reason, "workspace": workspace_ref(args.workspace)}
    result = client().request("POST", f"/memories/{args.id}/promote", json=body)
    if args.json:
        print_json(result)
    else:
        print_memory_line("promoted to global as", result["promoted"])
    return 0


def cmd_confirm(args: argparse.Namespace) -> int:
    body = {"reason": args.reason, "workspace": workspace_ref(args.workspace)}
    result = client().request("POST", f"/memories/{args.id}/confirm", json=body)
    verb = "confirmed" if result["outcome"] != "unchanged" else "already confirmed"
    print_json(result) if args.json else print_memory_line(verb, result["memory"])
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    result = client().request("DELETE", f"/memories/{args.id}", params=params(args, reason=args.reason))
    if args.json:
        print_json(result)
    else:
        print_tombstone("deleted", result["tombstone"])
        print(f"  undo with: mnemo restore {args.id}")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    result = client().request("POST", f"/memories/{args.id}/restore", json={"workspace": workspace_ref(args.workspace)})
    print_json(result) if args.json else print_memory_line("restored", result["memory"])
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    body = {"force": args.force, "reason": args.reason, "workspace": workspace_ref(args.workspace)}
    result = client().request("POST", f"/memories/{args.id}/purge", json=body)
    print_json(result) if args.json else print_tombstone("purged", result["tombstone"])
    return 0


# -- history and audit -----------------------------------------------------------------------


def cmd_history(args: argparse.Namespace) -> int:
    result = client().request("GET", f"/memories/{args.id}/history", params=params(args))
    # A long history comes in pages of versions; the CLI shows it whole.
    token = result.pop("next_page_token", "")
    while token:
        page = client().request("GET", f"/memories/{args.id}/history", params=params(args, page_token=token))
        result["versions"].extend(page["versions"])
        token = page.get("next_page_token", "")
    if args.json:
        print_json(result)
        return 0
    memory = result["memory"]
    print(f"{memory['title']}  {memory['label']}")
    print("versions:")
    for v in result["versions"]:
        until = f" until {v['recorded_to']}" if v["recorded_to"] else " (current)"
        first = " ".join(v["content"].split())[:100]
        print(f"  v{v['version']} by {v['author']}, {v['recorded_from']}{until}: {first}")
    print("status:")
    for st in result["states"]:
        extra = f" by {st['superseded_by']}" if st["superseded_by"] else ""
        why = f" ({st['reason']})" if st["reason"] else ""
        print(f"  {st['recorded_from']}  {st['status']}{extra}{why}  [{st['principal']}]")
    return 0


def cmd_audit_log(args: argparse.Namespace) -> int:
    result = client().request("GET", "/audit", params=params(args, memory=args.memory, page_size=args.limit))
    if args.json:
        print_json(result)
        return 0
    for event in result["events"]:
        print(event_line(event))
    if not result["events"]:
        print("no events")
    return 0


def cmd_audit_verify(args: argparse.Namespace) -> int:
    result = client().request("GET", "/audit/verify", params=params(args))
    if args.json:
        print_json(result)
    elif result["ok"]:
        anchors = (
            "their heads match their signed anchors"
            if result.get("anchored")
            else "not checked against anchors (no MNEMO_AUDIT_KEY_FILE here): a cut-off tail would go unnoticed"
        )
        print(f"ok: {result['events_checked']} events in {result['workspaces_checked']} chains verified; {anchors}")
    else:
        print(
            f"BROKEN: workspace {result['broken_workspace_id']}, event #{result['broken_event_id']}: "
            f"{result['problem']}"
        )
    # 3 sets a broken chain apart from a request that failed (1) and a usage error (2).
    return 0 if result["ok"] else 3
