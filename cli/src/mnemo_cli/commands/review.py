"""`mnemo review list|show|accept|reject|reverse` and `mnemo propose`: the proposals queue (docs/review.md)."""

from __future__ import annotations

import argparse
from typing import Any

from mnemo_cli.commands.common import client, params, workspace_ref
from mnemo_cli.output import print_json, print_memory_line


def proposal_line(proposal: dict[str, Any]) -> str:
    stale = " STALE" if proposal.get("stale") else ""
    memories = ", ".join(proposal["memory_ids"]) or proposal["change"].get("batch_id", "")
    return (
        f"{proposal['id']}  {proposal['state']}{stale}  {proposal['kind']}  {memories}\n"
        f"    by {proposal['proposed_by']} ({proposal['source']}) at {proposal['created_at']}: {proposal['reason']}"
    )


def cmd_review_list(args: argparse.Namespace) -> int:
    query = params(args, state=args.state, kind=args.kind, memory_id=args.memory, limit=args.limit)
    result = client().request("GET", "/proposals", params=query)
    if args.json:
        print_json(result)
        return 0
    if not result["proposals"]:
        print("no proposals")
    for proposal in result["proposals"]:
        print(proposal_line(proposal))
    if result["next_page_token"]:
        print("(more: raise --limit; at most 500 a page)")
    return 0


def cmd_review_show(args: argparse.Namespace) -> int:
    result = client().request("GET", f"/proposals/{args.id}", params=params(args))
    if args.json:
        print_json(result)
        return 0
    proposal = result["proposal"]
    print(proposal_line(proposal))
    if proposal["change"]:
        print(f"    change: {proposal['change']}")
    if proposal["decided_by"]:
        print(
            f"    {proposal['state']} by {proposal['decided_by']} at {proposal['decided_at']}: "
            f"{proposal['decision_reason'] or ''}"
        )
    if proposal["reversed_by"]:
        print(f"    reversed by {proposal['reversed_by']} at {proposal['reversed_at']}: {proposal['reverse_reason']}")
    for memory in result["memories"]:
        print_memory_line("  memory", memory)
    return 0


def _decide(args: argparse.Namespace, verb: str) -> int:
    body = {"reason": args.reason, "workspace": workspace_ref(args.workspace)}
    result = client().request("POST", f"/proposals/{args.id}/{verb}", json=body)
    if args.json:
        print_json(result)
        return 0
    print(f"{result['proposal']['state']}: proposal {result['proposal']['id']} ({result['proposal']['kind']})")
    for memory in result.get("memories", []):
        print_memory_line("  now", memory)
    return 0


def cmd_review_accept(args: argparse.Namespace) -> int:
    return _decide(args, "accept")


def cmd_review_reject(args: argparse.Namespace) -> int:
    return _decide(args, "reject")


def cmd_review_reverse(args: argparse.Namespace) -> int:
    return _decide(args, "reverse")


def cmd_propose(args: argparse.Namespace) -> int:
    change: dict[str, Any] = {}
    if args.successor:
        change["successor_id"] = args.successor
    if args.merged_text:
        change["merged_text"] = args.merged_text
    body = {
        "kind": args.kind,
        "memory_ids": args.ids,
        "reason": args.reason,
        "change": change,
        "workspace": workspace_ref(args.workspace),
    }
    if args.batch:
        body["change"] = {"batch_id": args.batch}
    result = client().request("POST", "/proposals", json=body)
    if args.json:
        print_json(result)
    else:
        verb = "proposed" if result["created"] else "already proposed"
        print(f"{verb}: {proposal_line(result['proposal'])}")
    return 0
