"""The `mnemo` command: run Mnemo and talk to it.

The entry point only: the arguments are in parser.py, the commands in commands/, shared output in output.py.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from mnemo_cli.errors import ClientError
from mnemo_cli.parser import build_parser


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
