"""The `mnemo` command: run Mnemo and talk to it."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemo_cli.errors import ClientError
from mnemo_cli.settings import ClientSettings
from mnemo_platform import load

if TYPE_CHECKING:
    from mnemo_cli.client import GatewayClient

KINDS = ["note", "decision", "lesson", "session", "import"]


def _workspace_ref(value: str | None) -> str | None:
    """Paths are made absolute here: the server cannot know this shell's directory."""
    if not value:
        return None
    if value.startswith(("~", ".", "/")):
        return str(Path(value).expanduser().resolve())
    return value


def _client() -> GatewayClient:
    # httpx is imported only by the commands that talk to a running Mnemo: `up` and `serve`
    # start faster without it, and the gateway's first MCP answer comes sooner.
    from mnemo_cli.client import GatewayClient

    settings = load(ClientSettings)
    return GatewayClient(settings.resolved_url(), token=settings.token)


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


# -- running ------------------------------------------------------------------------------


def _server() -> Any:
    """The composition root, when installed: the CLI alone is a client and carries no service."""
    try:
        import mnemo_server
    except ImportError:
        raise ClientError(
            "this `mnemo` is the client only; running Mnemo needs the server: install `mnemo-cli[server]` "
            "(in the source checkout, `uv run mnemo up` has it)"
        ) from None
    return mnemo_server


def cmd_up(args: argparse.Namespace) -> int:
    _server()
    from mnemo_server.up import run_up

    if args.unsafe_no_auth:
        os.environ["MNEMO_UNSAFE_NO_AUTH"] = "true"

    return run_up()


def cmd_serve(args: argparse.Namespace) -> int:
    _server()
    from mnemo_server.serve import serve

    serve(args.service)
    return 0


# -- talking to a running Mnemo --------------------------------------------------------------


def cmd_write(args: argparse.Namespace) -> int:
    content = args.content if args.content not in (None, "-") else sys.stdin.read()
    body: dict[str, Any] = {
        "content": content,
        "title": args.title,
        "kind": args.kind,
        "tags": args.tag or [],
        "source_uri": args.source_uri,
        "valid_from": args.valid_from,
        "workspace": _workspace_ref(args.workspace),
    }
    result = _client().request("POST", "/memories", json=body)
    if args.json:
        _print_json(result)
    else:
        memory = result["memory"]
        print(f"{result['outcome']}: {memory['id']} (version {memory['version']}) in {memory['workspace_id']}")
    return 0


def cmd_update(args: argparse.Namespace) -> int:
    content = args.content if args.content not in (None, "-") else sys.stdin.read()
    body: dict[str, Any] = {"content": content, "workspace": _workspace_ref(args.workspace)}
    if args.title is not None:
        body["title"] = args.title
    result = _client().request("PATCH", f"/memories/{args.id}", json=body)
    if args.json:
        _print_json(result)
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
        "workspace": _workspace_ref(args.workspace),
    }
    result = _client().request("POST", "/search", json=body)
    if args.json:
        _print_json(result)
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


def _params(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """Query parameters, leaving out what the user did not give."""
    params = {"workspace": _workspace_ref(args.workspace), **extra}
    return {key: value for key, value in params.items() if value not in (None, "", False)}


def cmd_get(args: argparse.Namespace) -> int:
    params = _params(args, include_history=args.history, as_of=args.as_of, valid_at=args.valid_at)
    memory = _client().request("GET", f"/memories/{args.id}", params=params)
    if args.json:
        _print_json(memory)
    else:
        print(f"{memory['title']}  {memory['label']}")
        print(f"id {memory['id']} · version {memory['version']} · workspace {memory['workspace_id']}")
        if memory["tags"]:
            print("tags: " + ", ".join(memory["tags"]))
        print()
        print(memory["content"])
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    params = _params(args)
    status = _client().request("GET", "/status", params=params)
    if args.json:
        _print_json(status)
        return 0
    scope = f" in {status['workspace']['name']}" if "workspace" in status else ""
    print(f"memories{scope}: {status['memories']}")
    print(
        f"chunks: {status['chunks_embedded']} embedded, {status['chunks_pending']} pending, "
        f"{status['chunks_failed']} failed"
    )
    model = f"{status['embedding_model']} ({status['embedding_dimension']} dims)"
    print(f"embedding model: {model}, {status['embedder_state']}")
    if status.get("last_error"):
        print(f"last embedding error: {status['last_error']}")
    return 0


def _print_memory_line(prefix: str, memory: dict[str, Any]) -> None:
    print(f"{prefix}: {memory['id']}  {memory['title']}  {memory['label']}")


def cmd_supersede(args: argparse.Namespace) -> int:
    content = args.content if args.content not in (None, "-") else sys.stdin.read()
    body: dict[str, Any] = {
        "content": content,
        "title": args.title,
        "reason": args.reason,
        "valid_from": args.valid_from,
        "workspace": _workspace_ref(args.workspace),
    }
    result = _client().request("POST", f"/memories/{args.id}/supersede", json=body)
    if args.json:
        _print_json(result)
    else:
        _print_memory_line("superseded", result["superseded"])
        _print_memory_line("successor ", result["successor"])
    return 0


def cmd_retract(args: argparse.Namespace) -> int:
    body = {"reason": args.reason, "workspace": _workspace_ref(args.workspace)}
    result = _client().request("POST", f"/memories/{args.id}/retract", json=body)
    _print_json(result) if args.json else _print_memory_line("retracted", result["memory"])
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    body = {"reason": args.reason, "workspace": _workspace_ref(args.workspace)}
    result = _client().request("POST", f"/memories/{args.id}/promote", json=body)
    if args.json:
        _print_json(result)
    else:
        _print_memory_line("promoted to global as", result["promoted"])
    return 0


def cmd_confirm(args: argparse.Namespace) -> int:
    body = {"reason": args.reason, "workspace": _workspace_ref(args.workspace)}
    result = _client().request("POST", f"/memories/{args.id}/confirm", json=body)
    verb = "confirmed" if result["outcome"] != "unchanged" else "already confirmed"
    _print_json(result) if args.json else _print_memory_line(verb, result["memory"])
    return 0


def _print_tombstone(verb: str, stone: dict[str, Any]) -> None:
    print(f"{verb}: {stone['memory_id']} (by {stone['principal']}, {stone['deleted_at']})")
    if stone["source_uri"]:
        print(f"  writes from {stone['source_uri']} are refused while the tombstone stands")


def cmd_delete(args: argparse.Namespace) -> int:
    result = _client().request("DELETE", f"/memories/{args.id}", params=_params(args, reason=args.reason))
    if args.json:
        _print_json(result)
    else:
        _print_tombstone("deleted", result["tombstone"])
        print(f"  undo with: mnemo restore {args.id}")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    result = _client().request(
        "POST", f"/memories/{args.id}/restore", json={"workspace": _workspace_ref(args.workspace)}
    )
    _print_json(result) if args.json else _print_memory_line("restored", result["memory"])
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    body = {"force": args.force, "reason": args.reason, "workspace": _workspace_ref(args.workspace)}
    result = _client().request("POST", f"/memories/{args.id}/purge", json=body)
    _print_json(result) if args.json else _print_tombstone("purged", result["tombstone"])
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    result = _client().request("GET", f"/memories/{args.id}/history", params=_params(args))
    if args.json:
        _print_json(result)
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


def _event_line(event: dict[str, Any]) -> str:
    details = ", ".join(f"{k}={v}" for k, v in event["details"].items() if v)
    memory = f" {event['memory_id']}" if event["memory_id"] else ""
    version = f" v{event['version']}" if event["version"] else ""
    return f"#{event['id']:<6} {event['at']}  {event['action']:<13} {event['principal']:<10}{memory}{version}" + (
        f"  ({details})" if details else ""
    )


def cmd_audit_log(args: argparse.Namespace) -> int:
    params = _params(args, memory=args.memory, page_size=args.limit)
    result = _client().request("GET", "/audit", params=params)
    if args.json:
        _print_json(result)
        return 0
    for event in result["events"]:
        print(_event_line(event))
    if not result["events"]:
        print("no events")
    return 0


def cmd_audit_verify(args: argparse.Namespace) -> int:
    result = _client().request("GET", "/audit/verify", params=_params(args))
    if args.json:
        _print_json(result)
    elif result["ok"]:
        print(f"ok: {result['events_checked']} events in {result['workspaces_checked']} chains verified")
    else:
        print(
            f"BROKEN: workspace {result['broken_workspace_id']}, event #{result['broken_event_id']}: "
            f"{result['problem']}"
        )
    return 0 if result["ok"] else 3


def _progress_bar(done: int, total: int, unit: str, counts: dict[str, int]) -> str:
    width = 30
    filled = int(width * done / total) if total else width
    tally = " · ".join(f"{n} {label}" for label, n in counts.items())
    return f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {unit} · {tally}"


def cmd_harvest_run(args: argparse.Namespace) -> int:
    import json as jsonlib

    client = _client()
    counts = {"harvested": 0, "skipped": 0, "failed": 0}
    outcomes: list[dict[str, Any]] = []
    bar = sys.stderr.isatty() and not args.json
    body = {"agent": args.agent or "", "ignore_idle": args.now}
    for line in client.stream_lines("POST", "/harvest/run", json=body):
        item = jsonlib.loads(line)
        if item.get("done"):
            counts = {k: item.get(k, 0) for k in counts}
            break
        outcomes.append(item)
        bucket = {"new_version": "harvested"}.get(item["outcome"], item["outcome"])
        if bucket in counts:
            counts[bucket] += 1
        if bar:
            print(_progress_bar(item["index"], item["total"], "sessions", counts), end="", file=sys.stderr, flush=True)
    if bar:
        print(file=sys.stderr)
    if args.json:
        _print_json({"sessions": outcomes, **counts})
        return 0
    for item in outcomes:
        if item["outcome"] in ("harvested", "new_version", "failed") or args.verbose:
            detail = f" ({item['detail']})" if item.get("detail") else ""
            print(f"{item['outcome']:<12} {item['agent']:<12} {item['session_id']}{detail}")
    harvested, skipped, failed = counts["harvested"], counts["skipped"], counts["failed"]
    print(f"{len(outcomes)} sessions: {harvested} harvested, {skipped} skipped, {failed} failed")
    return 1 if counts["failed"] else 0


def cmd_redact(args: argparse.Namespace) -> int:
    import json as jsonlib

    if not args.rescan:
        print("mnemo redact: pass --rescan to re-apply the current redaction rules to stored memories", file=sys.stderr)
        return 2
    bar = sys.stderr.isatty() and not args.json
    body = {"workspace": args.workspace, "dry_run": args.dry_run}
    changed: list[dict[str, Any]] = []
    totals: dict[str, Any] = {}
    for line in _client().stream_lines("POST", "/redact/rescan", json=body):
        item = jsonlib.loads(line)
        if item.get("done"):
            totals = item
            break
        if item["kinds"]:
            changed.append(item)
        if bar:
            counts = {"with secrets": len(changed)}
            print(_progress_bar(item["index"], item["total"], "memories", counts), end="", file=sys.stderr, flush=True)
    if bar:
        print(file=sys.stderr)
    if args.json:
        _print_json({"memories": changed, **totals})
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


def cmd_token_create(args: argparse.Namespace) -> int:
    workspaces = args.workspace or []
    if not workspaces and args.role == "admin":
        workspaces = ["*"]
    workspaces = [_workspace_ref(w) or w for w in workspaces]
    body = {"principal": args.principal or args.role, "role": args.role, "workspaces": workspaces, "label": args.label}
    result = _client().request("POST", "/tokens", json=body)
    if args.json:
        _print_json(result)
        return 0
    token = result["token"]
    print(
        f"token {token['id']} for {token['principal']} ({token['role']}; workspaces {', '.join(token['workspaces'])})"
    )
    print("It is shown only now; store it where the agent reads it (MNEMO_TOKEN, or the MCP client's headers):")
    print(result["secret"])
    return 0


def cmd_token_list(args: argparse.Namespace) -> int:
    tokens = _client().request("GET", "/tokens")["tokens"]
    if args.json:
        _print_json(tokens)
        return 0
    for t in tokens:
        state = f"revoked {t['revoked_at']}" if t["revoked_at"] else f"last used {t['last_used_at'] or 'never'}"
        print(f"{t['id']}  {t['principal']:<16} {t['role']:<8} {','.join(t['workspaces']):<30} {state}  {t['label']}")
    return 0


def cmd_token_revoke(args: argparse.Namespace) -> int:
    token = _client().request("DELETE", f"/tokens/{args.id}")["token"]
    print(f"revoked {token['id']} ({token['principal']}, {token['role']}) at {token['revoked_at']}")
    return 0


def cmd_harvest_status(args: argparse.Namespace) -> int:
    status = _client().request("GET", "/harvest/status")
    if args.json:
        _print_json(status)
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
    if status["unregistered"]:
        print("sessions skipped because no workspace is registered for their directory:")
        for cwd in status["unregistered"]:
            print(f"  {cwd}    (register: mnemo workspace add {cwd})")
    return 0


def cmd_workspace_add(args: argparse.Namespace) -> int:
    path = "" if (args.name and args.path is None) else str(Path(args.path or ".").expanduser().resolve())
    result = _client().request("POST", "/workspaces", json={"path": path, "name": args.name or ""})
    ws = result["workspace"]
    verb = "registered" if result["created"] else "already registered"
    print(f"{verb}: {ws['name']} (id {ws['id']}){' at ' + ws['root_path'] if ws['root_path'] else ''}")
    return 0


def cmd_workspace_list(args: argparse.Namespace) -> int:
    result = _client().request("GET", "/workspaces")
    if args.json:
        _print_json(result)
        return 0
    for ws in result["workspaces"]:
        print(f"{ws['id']:<14} {ws['name']:<24} {ws['root_path']}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    root = Path(__file__).resolve().parents[3]
    if not (root / "bench" / "locomo.py").exists():
        print("mnemo bench: the benchmarks live in a source checkout (bench/)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(root))
    import importlib

    return importlib.import_module(f"bench.{args.benchmark}").main(args.bench_args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mnemo", description="Long-term memory for AI coding agents.")
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="run everything: embedded PostgreSQL, ingest, search, harvest, gateway")
    up.add_argument(
        "--unsafe-no-auth",
        action="store_true",
        help="serve beyond loopback without tokens (MNEMO_UNSAFE_NO_AUTH): only behind something that authenticates",
    )
    up.set_defaults(func=cmd_up)
    serve = sub.add_parser("serve", help="run one service alone (what Kubernetes runs)")
    serve.add_argument("service", choices=["ingest", "search", "harvest", "gateway"])
    serve.set_defaults(func=cmd_serve)

    def with_common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--workspace", "-w", help="workspace id, name or path (default: the server's default)")
        p.add_argument("--json", action="store_true", help="print the raw JSON response")
        return p

    def with_time(p: argparse.ArgumentParser) -> None:
        p.add_argument("--history", action="store_true", help="include superseded, retracted... memories")
        p.add_argument("--as-of", help="read as recorded at this time (ISO 8601)")
        p.add_argument("--valid-at", help="only beliefs that held at this time (ISO 8601)")

    write = with_common(sub.add_parser("write", help="write a memory (content from the argument or stdin)"))
    write.add_argument("content", nargs="?", help="the text; `-` or nothing reads stdin")
    write.add_argument("--title", default="")
    write.add_argument("--kind", choices=KINDS, default="note")
    write.add_argument("--tag", action="append", help="a tag (repeatable)")
    write.add_argument("--source-uri", default="")
    write.add_argument("--valid-from", help="when the belief starts to hold (ISO 8601)")
    write.set_defaults(func=cmd_write)

    update = with_common(sub.add_parser("update", help="store a new version of a memory"))
    update.add_argument("id")
    update.add_argument("content", nargs="?", help="the new text; `-` or nothing reads stdin")
    update.add_argument("--title")
    update.set_defaults(func=cmd_update)

    search = with_common(sub.add_parser("search", help="search memories"))
    search.add_argument("query", nargs="+")
    search.add_argument("--mode", choices=["hybrid", "lexical", "semantic"], default="hybrid")
    search.add_argument("--limit", type=int, default=10)
    search.add_argument("--kind", action="append", choices=KINDS)
    search.add_argument("--tag", action="append")
    search.add_argument("--explain", action="store_true", help="show per-leg ranks and scores")
    with_time(search)
    search.set_defaults(func=cmd_search)

    get = with_common(sub.add_parser("get", help="show one memory in full"))
    get.add_argument("id")
    with_time(get)
    get.set_defaults(func=cmd_get)

    supersede = with_common(sub.add_parser("supersede", help="replace a belief with a successor"))
    supersede.add_argument("id", help="the memory that no longer holds")
    supersede.add_argument("content", nargs="?", help="the new belief; `-` or nothing reads stdin")
    supersede.add_argument("--title", default="")
    supersede.add_argument("--reason", default="", help="why the old belief no longer holds")
    supersede.add_argument("--valid-from", help="when the new belief starts to hold (ISO 8601; default now)")
    supersede.set_defaults(func=cmd_supersede)

    retract = with_common(sub.add_parser("retract", help="mark a belief wrong, with no successor"))
    retract.add_argument("id")
    retract.add_argument("--reason", required=True)
    retract.set_defaults(func=cmd_retract)
    promote = with_common(sub.add_parser("promote", help="share a memory with every workspace via global (reviewer)"))
    promote.add_argument("id")
    promote.add_argument("--reason", required=True)
    promote.set_defaults(func=cmd_promote)

    confirm = with_common(sub.add_parser("confirm", help="confirm an active or candidate memory"))
    confirm.add_argument("id")
    confirm.add_argument("--reason", default="")
    confirm.set_defaults(func=cmd_confirm)

    delete = with_common(sub.add_parser("delete", help="delete: hidden everywhere, restorable, source tombstoned"))
    delete.add_argument("id")
    delete.add_argument("--reason", required=True)
    delete.set_defaults(func=cmd_delete)

    restore = with_common(sub.add_parser("restore", help="undo a deletion that was not purged"))
    restore.add_argument("id")
    restore.set_defaults(func=cmd_restore)

    purge = with_common(sub.add_parser("purge", help="erase content and versions for good (needs --force)"))
    purge.add_argument("id")
    purge.add_argument("--force", action="store_true", help="required: a purge cannot be undone")
    purge.add_argument("--reason", default="")
    purge.set_defaults(func=cmd_purge)

    history = with_common(sub.add_parser("history", help="a memory's versions and status changes"))
    history.add_argument("id")
    history.set_defaults(func=cmd_history)

    audit = sub.add_parser("audit", help="the audit log")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True)
    audit_log = with_common(audit_sub.add_parser("log", help="show events, newest first"))
    audit_log.add_argument("--memory", default="", help="only this memory's events")
    audit_log.add_argument("--limit", type=int, default=50)
    audit_log.set_defaults(func=cmd_audit_log)
    audit_verify = with_common(audit_sub.add_parser("verify", help="walk the hash chains (all, or --workspace)"))
    audit_verify.set_defaults(func=cmd_audit_verify)

    status = with_common(sub.add_parser("status", help="counts, embedding queue, embedder state"))
    status.set_defaults(func=cmd_status)

    workspace = sub.add_parser("workspace", help="register and list workspaces")
    ws_sub = workspace.add_subparsers(dest="workspace_command", required=True)
    ws_add = ws_sub.add_parser("add", help="register a project directory (or a named scope with --name)")
    ws_add.add_argument("path", nargs="?", help="project root (default: the current directory)")
    ws_add.add_argument("--name", help="display name; alone, registers a named scope without a path")
    ws_add.set_defaults(func=cmd_workspace_add)
    ws_list = ws_sub.add_parser("list", help="list workspaces")
    ws_list.add_argument("--json", action="store_true")
    ws_list.set_defaults(func=cmd_workspace_list)

    token = sub.add_parser("token", help="bearer tokens: create, list, revoke (admin)")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    token_create = token_sub.add_parser("create", help="issue a token; it is printed once")
    token_create.add_argument("--role", choices=["agent", "reviewer", "admin"], required=True)
    token_create.add_argument(
        "--workspace", "-w", action="append", help="a workspace it may touch (repeat for more; * for admins)"
    )
    token_create.add_argument("--principal", help="who holds it (default: the role's name)")
    token_create.add_argument("--label", default="", help="a note: which machine or agent")
    token_create.add_argument("--json", action="store_true")
    token_create.set_defaults(func=cmd_token_create)
    token_list = token_sub.add_parser("list", help="every token, live and revoked")
    token_list.add_argument("--json", action="store_true")
    token_list.set_defaults(func=cmd_token_list)
    token_revoke = token_sub.add_parser("revoke", help="end a token at once")
    token_revoke.add_argument("id")
    token_revoke.set_defaults(func=cmd_token_revoke)
    redact = sub.add_parser("redact", help="re-apply the current redaction rules to stored memories (--rescan)")
    redact.add_argument("--rescan", action="store_true", help="scan every stored memory (or one workspace's)")
    redact.add_argument("--workspace", help="only this workspace (id, name or path); every workspace by default")
    redact.add_argument("--dry-run", action="store_true", help="report what would be redacted, change nothing")
    redact.add_argument("--json", action="store_true")
    redact.set_defaults(func=cmd_redact)
    harvest = sub.add_parser("harvest", help="harvest coding-agent sessions into memory")
    harvest_sub = harvest.add_subparsers(dest="harvest_command", required=True)
    harvest_run = harvest_sub.add_parser("run", help="harvest now (one pass), with a progress bar")
    harvest_run.add_argument("--agent", choices=["claude-code", "codex", "opencode", "pi"])
    harvest_run.add_argument("--once", action="store_true", help="one pass, then exit (the default)")
    harvest_run.add_argument("--now", action="store_true", help="do not wait for sessions to be idle")
    harvest_run.add_argument("--verbose", "-v", action="store_true", help="list skipped and unchanged sessions too")
    harvest_run.add_argument("--json", action="store_true")
    harvest_run.set_defaults(func=cmd_harvest_run)
    harvest_status = harvest_sub.add_parser("status", help="per agent: seen, harvested, skipped (why), failed")
    harvest_status.add_argument("--json", action="store_true")
    harvest_status.set_defaults(func=cmd_harvest_status)

    bench = sub.add_parser("bench", help="run a benchmark from the source checkout")
    bench.add_argument("benchmark", choices=["locomo", "latency", "harvest", "guard", "auth"])
    bench.add_argument("bench_args", nargs=argparse.REMAINDER)
    bench.set_defaults(func=cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
    except ClientError as exc:
        print(f"mnemo: {exc}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
