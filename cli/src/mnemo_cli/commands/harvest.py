"""Harvesting coding-agent sessions: run a pass now (streamed, with a progress bar), or show the harvester's state."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mnemo_cli.commands.common import client, session_ref
from mnemo_cli.output import print_json, progress_bar


def cmd_harvest_run(args: argparse.Namespace) -> int:
    counts = {"harvested": 0, "skipped": 0, "failed": 0}
    outcomes: list[dict[str, Any]] = []
    bar = sys.stderr.isatty() and not args.json
    body = {"agent": args.agent or "", "ignore_idle": args.now, "session": session_ref(args.session)}
    for line in client().stream_lines("POST", "/harvest/run", json=body):
        item = json.loads(line)
        if item.get("done"):
            counts = {k: item.get(k, 0) for k in counts}
            break
        outcomes.append(item)
        # A new version of an already harvested session counts as harvested.
        bucket = {"new_version": "harvested"}.get(item["outcome"], item["outcome"])
        if bucket in counts:
            counts[bucket] += 1
        if bar:
            print(progress_bar(item["index"], item["total"], "sessions", counts), end="", file=sys.stderr, flush=True)
    if bar:
        print(file=sys.stderr)
    if args.json:
        print_json({"sessions": outcomes, **counts})
        return 0
    return _print_outcomes(outcomes, counts, args.verbose)


def _print_outcomes(outcomes: list[dict[str, Any]], counts: dict[str, int], verbose: bool) -> int:
    for item in outcomes:
        if item["outcome"] in ("harvested", "new_version", "failed") or verbose:
            detail = f" ({item['detail']})" if item.get("detail") else ""
            print(f"{item['outcome']:<12} {item['agent']:<12} {item['session_id']}{detail}")
    harvested, skipped, failed = counts["harvested"], counts["skipped"], counts["failed"]
    print(f"{len(outcomes)} sessions: {harvested} harvested, {skipped} skipped, {failed} failed")
    return 1 if counts["failed"] else 0


def print_run(progress: list[Any], verbose: bool) -> int:
    """A remote harvester's pass (RunProgress messages, the totals last), printed as `mnemo harvest run` prints."""
    outcomes = [
        {"outcome": p.outcome, "agent": p.agent, "session_id": p.session_id, "detail": p.detail}
        for p in progress
        if not p.done
    ]
    done = [p for p in progress if p.done]
    counts = {"harvested": 0, "skipped": 0, "failed": 0}
    if done:
        counts = {"harvested": done[-1].harvested, "skipped": done[-1].skipped, "failed": done[-1].failed}
    return _print_outcomes(outcomes, counts, verbose)


def cmd_harvest_status(args: argparse.Namespace) -> int:
    status = client().request("GET", "/harvest/status")
    if args.json:
        print_json(status)
        return 0
    print(f"every {status['interval_s']:g} s; a session is harvested after {status['idle_s']:g} s idle")
    if status.get("paused"):
        print(f"PAUSED: {status['paused']}")
    for agent in status["agents"]:
        state = "on " if agent["enabled"] else "off"
        skipped = ", ".join(f"{k} {v}" for k, v in agent["skipped"].items()) or "none"
        print(
            f"{agent['agent']:<12} {state} seen {agent['sources_seen']:<5} harvested {agent['harvested']:<5} "
            f"active {agent['active']:<4} failed {agent['failed']:<4} skipped: {skipped}"
        )
        print(f"{'':<16}roots: {', '.join(agent['roots'])}")
        for failure in agent["failures"]:
            print(f"{'':<16}failed {failure['session_id']}: {failure['detail']}")
        for refused in agent.get("refused", []):
            print(f"{'':<16}refused {refused['session_id']}: {refused['detail']}")
    if status["unregistered"]:
        print("sessions skipped because no workspace is registered for their directory:")
        for cwd in status["unregistered"]:
            print(f"  {cwd}    (register: mnemo workspace add {cwd})")
    return 0
