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
    from mnemo_server.serve import serve

    serve(args.service)
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    require_server()
    from mnemo_server.migrate import run_migrate

    return run_migrate(admin_token=args.admin_token)


def cmd_bench(args: argparse.Namespace) -> int:
    # The source checkout's root, where bench/ lives: this file is cli/src/mnemo_cli/commands/running.py.
    root = Path(__file__).resolve().parents[4]
    if not (root / "bench" / "locomo.py").exists():
        print("mnemo bench: the benchmarks live in a source checkout (bench/)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(root))
    return importlib.import_module(f"bench.{args.benchmark}").main(args.bench_args)
