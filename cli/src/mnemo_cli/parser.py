"""The `mnemo` command line: every subcommand, its arguments and the function that runs it.

Options with a fixed set of values take their choices from the proto enums (choices.py). Loading
the generated code (protobuf) costs more than the rest of the start-up, so the subcommands that have such an
option add their arguments only when they are the one being parsed: `mnemo status`, `mnemo up`
and `mnemo --help` never load it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from mnemo_cli.agents import AGENTS as HOOK_AGENTS
from mnemo_cli.commands import admin, harvest, memory, operations, peer_import, review, running, transfer


def _init(args: argparse.Namespace) -> int:
    from mnemo_cli.commands.init import cmd_init

    return cmd_init(args)


def _hook(args: argparse.Namespace) -> int:
    from mnemo_cli.agents.hooks import cmd_hook

    return cmd_hook(args)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose arguments may be added on first use (`deferred`), before it parses."""

    def __init__(self, *args: Any, deferred: Callable[[Parser], None] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deferred = deferred

    def complete(self) -> Parser:
        """Add the deferred arguments, once; afterwards the parser is whole (its help, its choices)."""
        if self._deferred is not None:
            add, self._deferred = self._deferred, None
            add(self)
        return self

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # A subcommand's parser is handed its arguments by the parent's subparsers action through
        # here, so this is where a subcommand that was chosen becomes whole.
        self.complete()
        return super().parse_known_args(args, namespace)


def _with_common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--workspace", "-w", help="workspace id, name or path (default: the server's default)")
    p.add_argument("--json", action="store_true", help="print the raw JSON response")
    return p


def _with_time(p: argparse.ArgumentParser) -> None:
    p.add_argument("--history", action="store_true", help="include superseded, retracted... memories")
    p.add_argument("--as-of", help="read as recorded at this time (ISO 8601)")
    p.add_argument("--valid-at", help="only beliefs that held at this time (ISO 8601)")


# -- the subcommands with enum choices, added when parsed ------------------------------------


def _write_arguments(write: Parser) -> None:
    from mnemo_cli.choices import KINDS

    _with_common(write)
    write.add_argument("content", nargs="?", help="the text; `-` or nothing reads stdin")
    write.add_argument("--title", default="")
    write.add_argument("--kind", choices=KINDS, default="note")
    write.add_argument("--tag", action="append", help="a tag (repeatable)")
    write.add_argument("--source-uri", default="")
    write.add_argument("--valid-from", help="when the belief starts to hold (ISO 8601)")
    write.add_argument(
        "--idempotency-key",
        help="the write's key: a repeat with it answers the first write (default: a fresh one per run, "
        "so the run's own retries never store the note twice)",
    )


def _search_arguments(search: Parser) -> None:
    from mnemo_cli.choices import KINDS, SEARCH_MODES

    _with_common(search)
    search.add_argument("query", nargs="+")
    search.add_argument("--mode", choices=SEARCH_MODES, default="hybrid")
    search.add_argument("--limit", type=int, default=10)
    search.add_argument("--kind", action="append", choices=KINDS)
    search.add_argument("--tag", action="append")
    search.add_argument("--explain", action="store_true", help="show per-leg ranks and scores")
    _with_time(search)


def _feedback_arguments(feedback: Parser) -> None:
    from mnemo_cli.choices import VOTES

    _with_common(feedback)
    feedback.add_argument("id", help="the memory, as a search returned it")
    feedback.add_argument("vote", choices=VOTES, help="outdated and harmful also open a proposal for a reviewer")
    feedback.add_argument("--note", default="", help="why (optional; a proposal's reason)")
    feedback.add_argument(
        "--successor", default="", help="with outdated: the memory that replaces it (a supersede proposal)"
    )


def _token_create_arguments(token_create: Parser) -> None:
    from mnemo_cli.choices import ROLES

    token_create.add_argument("--role", choices=ROLES, required=True)
    token_create.add_argument(
        "--workspace", "-w", action="append", help="a workspace it may touch (repeat for more; * for admins)"
    )
    token_create.add_argument("--principal", help="who holds it (default: the role's name)")
    token_create.add_argument("--label", default="", help="a note: which machine or agent")
    token_create.add_argument("--json", action="store_true")


def _harvest_run_arguments(harvest_run: Parser) -> None:
    from mnemo_cli.choices import AGENTS

    harvest_run.add_argument("--agent", choices=AGENTS)
    harvest_run.add_argument("--once", action="store_true", help="one pass, then exit (the default)")
    harvest_run.add_argument("--now", action="store_true", help="do not wait for sessions to be idle")
    harvest_run.add_argument(
        "--session",
        help="only this session, by its id or the path of its file; harvested at once (what a session-end hook runs)",
    )
    harvest_run.add_argument("--verbose", "-v", action="store_true", help="list skipped and unchanged sessions too")
    harvest_run.add_argument("--json", action="store_true")


def _review_list_arguments(review_list: Parser) -> None:
    from mnemo_cli.choices import PROPOSAL_KINDS, PROPOSAL_STATES

    _with_common(review_list)
    review_list.add_argument("--state", choices=PROPOSAL_STATES, help="only this state (open: the queue)")
    review_list.add_argument("--kind", choices=PROPOSAL_KINDS, help="only this kind")
    review_list.add_argument("--memory", default="", help="only proposals touching this memory")
    review_list.add_argument("--limit", type=int, default=50)


def _propose_arguments(propose: Parser) -> None:
    from mnemo_cli.choices import PROPOSAL_KINDS

    _with_common(propose)
    propose.add_argument("kind", choices=PROPOSAL_KINDS)
    propose.add_argument("ids", nargs="*", help="the memories it touches (merge: the one to keep first)")
    propose.add_argument("--reason", required=True)
    propose.add_argument("--successor", help="supersede: the memory that replaces the first")
    propose.add_argument("--merged-text", help="merge: write this merged text instead of keeping the first")
    propose.add_argument("--batch", help="accept_batch: the staged import batch")


def installed_version() -> str:
    """The version of the installed `mnemo-cli` distribution, from its metadata (no second copy to forget)."""
    try:
        return version("mnemo-cli")
    except PackageNotFoundError:
        return "unknown (not installed as a package)"


def _init_arguments(init: Parser) -> None:
    from mnemo_cli.choices import AGENTS

    init.add_argument("path", nargs="?", help="the project directory (default: the current directory)")
    init.add_argument(
        "--agent", action="append", choices=AGENTS, help="wire this agent (repeatable; default: every agent found)"
    )
    init.add_argument("--dry-run", action="store_true", help="show the changes as diffs and write nothing")
    init.add_argument("--remove", action="store_true", help="take out exactly what init added (every agent by default)")


def build_parser() -> Parser:
    parser = Parser(prog="mnemo", description="Long-term memory for AI coding agents.")
    parser.add_argument("--version", action="version", version=f"mnemo {installed_version()}")
    # Every parser below is a Parser: add_subparsers makes them of the parent's class.
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="run everything: embedded PostgreSQL, ingest, search, harvest, gateway")
    up.add_argument(
        "--unsafe-no-auth",
        action="store_true",
        help="serve beyond loopback without tokens (MNEMO_UNSAFE_NO_AUTH): only behind something that authenticates",
    )
    up.set_defaults(func=running.cmd_up)
    backup = sub.add_parser(
        "backup",
        help="back up the database to FILE (pg_dump custom format), also while Mnemo runs",
        description="A consistent snapshot of the embedded database (or of MNEMO_DATABASE_URL's) in pg_dump's "
        "custom format, written with the bundled pg_dump. Restore it with `mnemo restore FILE`.",
    )
    backup.add_argument("file", nargs="?", help="where to write it (default: mnemo-backup-<UTC time>.dump here)")
    backup.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    backup.set_defaults(func=operations.cmd_backup)
    serve = sub.add_parser("serve", help="run one service alone (what Kubernetes runs)")
    # The services of mnemo_server.serve; no proto enum lists them.
    serve.add_argument("service", choices=["ingest", "search", "harvest", "gateway"])
    serve.add_argument(
        "--remote",
        metavar="URL",
        default="",
        help="harvest only: run on this machine's sessions and write through the gateway at URL with the harvester "
        "token in MNEMO_TOKEN (default: MNEMO_HARVEST_REMOTE_URL; docs/harvest.md)",
    )
    serve.add_argument("--once", action="store_true", help="remote harvest: one pass, its outcomes printed, then exit")
    serve.add_argument("--now", action="store_true", help="remote harvest, --once: do not wait for sessions to idle")
    serve.add_argument(
        "--session",
        default="",
        help="remote harvest with --once: only this session, by its id or the path of its file, at once (a "
        "session-end hook's call on a laptop)",
    )
    serve.add_argument("--verbose", "-v", action="store_true", help="remote harvest with --once: list every session")
    serve.set_defaults(func=running.cmd_serve)
    migrate = sub.add_parser(
        "migrate",
        help="apply the database migrations to MNEMO_DATABASE_URL and exit (a Kubernetes Job runs this)",
        description="Does to MNEMO_DATABASE_URL's database what a starting ingest does (migrations, the audit "
        "anchor key, the embedding space), then exits: 0 when it is at this version's schema, 1 when PostgreSQL "
        "cannot be reached within MNEMO_DB_WAIT_S or refuses, 2 for bad settings.",
    )
    migrate.add_argument(
        "--admin-token",
        action="store_true",
        help="then create the first admin token if no live one exists and print it, once (MNEMO_AUTH=on)",
    )
    migrate.set_defaults(func=running.cmd_migrate)

    write = sub.add_parser(
        "write", help="write a memory (content from the argument or stdin)", deferred=_write_arguments
    )
    write.set_defaults(func=memory.cmd_write)

    imports_ = _with_common(
        sub.add_parser(
            "import",
            help="write every memory of a JSON-lines file (one write body a line), restore a `mnemo export` file "
            "whole, or import another memory tool's store (--from); resumable; `import accept|rollback BATCH` "
            "decides a staged import",
        )
    )
    imports_.add_argument("file", help="the .jsonl file (`-` reads stdin); with --from, the tool's store")
    peer_import.add_arguments(imports_)
    imports_.set_defaults(func=peer_import.cmd_import_any)

    export = sub.add_parser(
        "export", help="write memories with their whole history as an export file (admin; docs/export-format.md)"
    )
    export.add_argument("-w", "--workspace", help="only this workspace (id, name or path); every workspace by default")
    export.add_argument("-o", "--output", help="the file to write; stdout by default")
    export.set_defaults(func=transfer.cmd_export)

    update = _with_common(sub.add_parser("update", help="store a new version of a memory"))
    update.add_argument("id")
    update.add_argument("content", nargs="?", help="the new text; `-` or nothing reads stdin")
    update.add_argument("--title")
    update.set_defaults(func=memory.cmd_update)

    search = sub.add_parser("search", help="search memories", deferred=_search_arguments)
    search.set_defaults(func=memory.cmd_search)

    get = _with_common(sub.add_parser("get", help="show one memory in full"))
    get.add_argument("id")
    _with_time(get)
    get.set_defaults(func=memory.cmd_get)

    supersede = _with_common(sub.add_parser("supersede", help="replace a belief with a successor"))
    supersede.add_argument("id", help="the memory that no longer holds")
    supersede.add_argument("content", nargs="?", help="the new belief; `-` or nothing reads stdin")
    supersede.add_argument("--title", default="")
    supersede.add_argument("--reason", default="", help="why the old belief no longer holds")
    supersede.add_argument("--valid-from", help="when the new belief starts to hold (ISO 8601; default now)")
    supersede.set_defaults(func=memory.cmd_supersede)

    retract = _with_common(sub.add_parser("retract", help="mark a belief wrong, with no successor"))
    retract.add_argument("id")
    retract.add_argument("--reason", required=True)
    retract.set_defaults(func=memory.cmd_retract)
    feedback = sub.add_parser(
        "feedback", help="vote on a memory: useful, not-useful, outdated or harmful", deferred=_feedback_arguments
    )
    feedback.set_defaults(func=memory.cmd_feedback)

    promote = _with_common(sub.add_parser("promote", help="share a memory with every workspace via global (reviewer)"))
    promote.add_argument("id")
    promote.add_argument("--reason", required=True)
    promote.set_defaults(func=memory.cmd_promote)

    confirm = _with_common(sub.add_parser("confirm", help="confirm an active or candidate memory"))
    confirm.add_argument("id")
    confirm.add_argument("--reason", default="")
    confirm.set_defaults(func=memory.cmd_confirm)

    delete = _with_common(sub.add_parser("delete", help="delete: hidden everywhere, restorable, source tombstoned"))
    delete.add_argument("id")
    delete.add_argument("--reason", required=True)
    delete.set_defaults(func=memory.cmd_delete)

    restore = _with_common(
        sub.add_parser(
            "restore",
            help="undo a memory's deletion (ID), or restore the embedded database from a backup (FILE)",
            description="mnemo restore ID undoes the deletion of a memory (not purged). mnemo restore FILE "
            "replaces the embedded database with a backup made by `mnemo backup`: Mnemo must be stopped, and a "
            "database that holds anything is replaced only with --force (it is kept as pg.previous).",
        )
    )
    restore.add_argument("target", metavar="ID|FILE", help="a memory id (a UUID), or a backup file")
    restore.add_argument("--force", action="store_true", help="FILE: replace a database that is not empty")
    restore.set_defaults(func=operations.cmd_restore)

    purge = _with_common(sub.add_parser("purge", help="erase content and versions for good (needs --force)"))
    purge.add_argument("id")
    purge.add_argument("--force", action="store_true", help="required: a purge cannot be undone")
    purge.add_argument("--reason", default="")
    purge.set_defaults(func=memory.cmd_purge)

    history = _with_common(sub.add_parser("history", help="a memory's versions and status changes"))
    history.add_argument("id")
    history.set_defaults(func=memory.cmd_history)

    audit = sub.add_parser("audit", help="the audit log")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True)
    audit_log = _with_common(audit_sub.add_parser("log", help="show events, newest first"))
    audit_log.add_argument("--memory", default="", help="only this memory's events")
    audit_log.add_argument("--limit", type=int, default=50)
    audit_log.set_defaults(func=memory.cmd_audit_log)
    audit_verify = _with_common(audit_sub.add_parser("verify", help="walk the hash chains (all, or --workspace)"))
    audit_verify.set_defaults(func=memory.cmd_audit_verify)

    context = _with_common(
        sub.add_parser("context", help="the wake-up packet: a trust-labelled briefing for a new session")
    )
    context.add_argument("--budget", type=int, help="most tokens it may take (default 1500)")
    context.add_argument("--task", default="", help="what the session is about to do: adds what a search finds")
    context.add_argument("--since", help="report changes from this time (ISO 8601; default: the last session's start)")
    context.set_defaults(func=memory.cmd_context)

    review_ = sub.add_parser("review", help="the review queue: list, show, accept, reject, reverse (reviewer)")
    review_sub = review_.add_subparsers(dest="review_command", required=True)
    review_list = review_sub.add_parser(
        "list", help="proposals, newest first (every workspace the token reaches)", deferred=_review_list_arguments
    )
    review_list.set_defaults(func=review.cmd_review_list)
    review_show = _with_common(review_sub.add_parser("show", help="one proposal and its memories as they are now"))
    review_show.add_argument("id")
    review_show.set_defaults(func=review.cmd_review_show)
    for verb, func, text, needs_reason in (
        ("accept", review.cmd_review_accept, "apply a proposal's change atomically", False),
        ("reject", review.cmd_review_reject, "close a proposal without applying it (--reason required)", True),
        ("reverse", review.cmd_review_reverse, "undo an applied proposal (--reason required)", True),
    ):
        decide = _with_common(review_sub.add_parser(verb, help=text))
        decide.add_argument("id")
        decide.add_argument("--reason", required=needs_reason, default="")
        decide.set_defaults(func=func)
    propose = sub.add_parser(
        "propose", help="propose a change for a reviewer to decide (docs/review.md)", deferred=_propose_arguments
    )
    propose.set_defaults(func=review.cmd_propose)

    status = _with_common(sub.add_parser("status", help="counts, embedding queue, embedder state"))
    status.set_defaults(func=memory.cmd_status)

    init = sub.add_parser(
        "init",
        help="register this project and wire the coding agents found here (MCP server, session hooks)",
        deferred=_init_arguments,
    )
    init.set_defaults(func=_init)
    hook = sub.add_parser("hook", help="what an agent's session hooks run (never fails, prints nothing on trouble)")
    hook_sub = hook.add_subparsers(dest="hook_event", required=True)
    for event, text in (
        ("session-start", "print this project's wake-up packet in the form the agent injects"),
        ("session-end", "harvest the session that ended, at once"),
    ):
        hook_event = hook_sub.add_parser(event, help=text)
        # Not the proto enum: a hook runs with every session and must not load the generated code.
        hook_event.add_argument("--agent", choices=HOOK_AGENTS, required=True)
        hook_event.add_argument("--url", help="the gateway's base URL (default: MNEMO_URL, or the local gateway)")
        hook_event.set_defaults(func=_hook)

    workspace = sub.add_parser("workspace", help="register and list workspaces")
    ws_sub = workspace.add_subparsers(dest="workspace_command", required=True)
    ws_add = ws_sub.add_parser("add", help="register a project directory (or a named scope with --name)")
    ws_add.add_argument("path", nargs="?", help="project root (default: the current directory)")
    ws_add.add_argument("--name", help="display name; alone, registers a named scope without a path")
    ws_add.set_defaults(func=admin.cmd_workspace_add)
    ws_list = ws_sub.add_parser("list", help="list workspaces")
    ws_list.add_argument("--json", action="store_true")
    ws_list.set_defaults(func=admin.cmd_workspace_list)

    token = sub.add_parser("token", help="bearer tokens: create, list, revoke (admin)")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    token_create = token_sub.add_parser(
        "create", help="issue a token; it is printed once", deferred=_token_create_arguments
    )
    token_create.set_defaults(func=admin.cmd_token_create)
    token_list = token_sub.add_parser("list", help="every token, live and revoked")
    token_list.add_argument("--json", action="store_true")
    token_list.set_defaults(func=admin.cmd_token_list)
    token_revoke = token_sub.add_parser("revoke", help="end a token at once")
    token_revoke.add_argument("id")
    token_revoke.set_defaults(func=admin.cmd_token_revoke)
    redact = sub.add_parser("redact", help="re-apply the current redaction rules to stored memories (--rescan)")
    redact.add_argument("--rescan", action="store_true", help="scan every stored memory (or one workspace's)")
    redact.add_argument("--workspace", help="only this workspace (id, name or path); every workspace by default")
    redact.add_argument("--dry-run", action="store_true", help="report what would be redacted, change nothing")
    redact.add_argument("--json", action="store_true")
    redact.set_defaults(func=admin.cmd_redact)
    embed = sub.add_parser("embed", help="the embedding queue: retry chunks that failed (admin)")
    embed_sub = embed.add_subparsers(dest="embed_command", required=True)
    embed_retry = embed_sub.add_parser("retry", help="queue every failed chunk for embedding again")
    embed_retry.add_argument("--workspace", help="only this workspace (id, name or path); every workspace by default")
    embed_retry.add_argument("--json", action="store_true")
    embed_retry.set_defaults(func=admin.cmd_embed_retry)
    consolidate = sub.add_parser(
        "consolidate", help="look for near-duplicates and open merge proposals for review (reviewer; --now)"
    )
    consolidate.add_argument(
        "--now", action="store_true", help="run a pass now (the service also runs one periodically)"
    )
    consolidate.add_argument(
        "--workspace", "-w", help="only this workspace (id, name or path); every one the token may write by default"
    )
    consolidate.add_argument("--dry-run", action="store_true", help="report what would be proposed, write nothing")
    consolidate.add_argument("--full", action="store_true", help="compare every memory, not only the changed ones")
    consolidate.add_argument("--json", action="store_true")
    consolidate.set_defaults(func=admin.cmd_consolidate)
    harvest_ = sub.add_parser("harvest", help="harvest coding-agent sessions into memory")
    harvest_sub = harvest_.add_subparsers(dest="harvest_command", required=True)
    harvest_run = harvest_sub.add_parser(
        "run", help="harvest now (one pass), with a progress bar", deferred=_harvest_run_arguments
    )
    harvest_run.set_defaults(func=harvest.cmd_harvest_run)
    harvest_status = harvest_sub.add_parser("status", help="per agent: seen, harvested, skipped (why), failed")
    harvest_status.add_argument("--json", action="store_true")
    harvest_status.set_defaults(func=harvest.cmd_harvest_status)

    service = sub.add_parser("service", help="run `mnemo up` as a user service (systemd on Linux, launchd on macOS)")
    service_sub = service.add_subparsers(dest="service_command", required=True)
    for name, func, text in (
        ("install", operations.cmd_service_install, "write the unit (or agent) and enable and start it"),
        ("status", operations.cmd_service_status, "is it installed, running, answering"),
        ("uninstall", operations.cmd_service_uninstall, "stop it and remove exactly the file install wrote"),
    ):
        action = service_sub.add_parser(name, help=text)
        # The platforms the service module renders for; no proto enum lists them.
        action.add_argument("--platform", choices=["linux", "macos"], help="default: this machine's")
        if name == "install":
            action.add_argument("--dry-run", action="store_true", help="print the unit, write nothing")
            action.add_argument("--no-start", action="store_true", help="write the unit, do not enable or start it")
        action.set_defaults(func=func)

    bench = sub.add_parser("bench", help="run a benchmark from the source checkout")
    # The modules of the checkout's bench/ package; no proto enum lists them.
    bench.add_argument(
        "benchmark",
        choices=["locomo", "scifact", "agent_notes", "latency", "harvest", "guard", "auth", "scale", "consolidation"],
    )
    bench.add_argument("bench_args", nargs=argparse.REMAINDER)
    bench.set_defaults(func=running.cmd_bench)
    return parser
