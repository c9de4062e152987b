"""Running Mnemo: `up` (everything in one process), `serve` (one service), `migrate`, `bench` (source checkout)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path
from typing import Any

from mnemo_cli.errors import ClientError


def require_server() -> Any:
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
    require_server()
    from mnemo_server.up import run_up

    if args.unsafe_no_auth:
        os.environ["MNEMO_UNSAFE_NO_AUTH"] = "true"

    return run_up()


def cmd_serve(args: argparse.Namespace) -> int:
    require_server()
    from mnemo_server.serve import remote_harvest_url, serve

    url = remote_harvest_url(args.remote) if args.service == "harvest" else ""
    if url:
        return _serve_remote_harvest(url, args)
    if args.remote or args.once or args.now or args.session:
        raise ClientError("--remote, --once, --now and --session are for `mnemo serve harvest --remote URL`")
    serve(args.service)
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    require_server()
    from mnemo_server.migrate import run_migrate

    return run_migrate(admin_token=args.admin_token)


def _serve_remote_harvest(url: str, args: argparse.Namespace) -> int:
    """A harvester on this machine writing through the gateway at `url` with MNEMO_TOKEN (a harvester token)."""
    from mnemo_cli.commands.common import session_ref
    from mnemo_cli.commands.harvest import print_run
    from mnemo_cli.settings import ClientSettings
    from mnemo_platform import MnemoError, SettingsError, configure_logging, load
    from mnemo_server.serve import run_remote_harvest

    configure_logging()
    try:
        if args.session and not args.once:
            raise ClientError("--session harvests one session once: add --once")
        session = session_ref(args.session)
        progress = run_remote_harvest(url, load(ClientSettings).token, args.once, args.now, session)
    except (SettingsError, MnemoError) as exc:
        # Bad settings, or a --session no reader finds (NOT_FOUND, naming the roots it looked in).
        raise ClientError(str(exc)) from None
    return print_run(progress, args.verbose) if args.once else 0


def cmd_bench(args: argparse.Namespace) -> int:
    # The source checkout's root, where bench/ lives: this file is cli/src/mnemo_cli/commands/running.py.
    root = Path(__file__).resolve().parents[4]
    if not (root / "bench" / "locomo.py").exists():
        print("mnemo bench: the benchmarks live in a source checkout (bench/)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(root))
    return importlib.import_module(f"bench.{args.benchmark}").main(args.bench_args)
