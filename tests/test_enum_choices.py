"""Every `mnemo` option with a fixed set of values takes them from the proto enum the server checks against.

The parser is walked, not read: an option added later with hand-written choices fails the inventory
below until it is given its enum (or said to have none).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any

import pytest

from mnemo.common.v1 import common_pb2, options_pb2
from mnemo.harvest.v1 import harvest_service_pb2
from mnemo.ingest.v1 import ingest_service_pb2
from mnemo.search.v1 import search_service_pb2
from mnemo_cli.parser import Parser, build_parser
from mnemo_platform import enum_labels

# (subcommand, option) -> the enum its choices come from.
ENUM_OPTIONS: dict[tuple[str, str], Any] = {
    ("write", "--kind"): common_pb2.MemoryKind,
    ("search", "--kind"): common_pb2.MemoryKind,
    ("search", "--mode"): search_service_pb2.SearchMode,
    ("token create", "--role"): options_pb2.Role,
    ("harvest run", "--agent"): harvest_service_pb2.Agent,
    ("init", "--agent"): harvest_service_pb2.Agent,
    ("feedback", "vote"): ingest_service_pb2.FeedbackVote,
    # Written out in mnemo_cli.agents (a hook must not load the generated code); held equal to the enum here.
    ("hook session-start", "--agent"): harvest_service_pb2.Agent,
    ("hook session-end", "--agent"): harvest_service_pb2.Agent,
    ("review list", "--state"): common_pb2.ProposalState,
    ("review list", "--kind"): common_pb2.ProposalKind,
    ("propose", "kind"): common_pb2.ProposalKind,
}
# Choices no proto enum lists: the services `serve` starts, the checkout's benchmarks, the
# platforms `service` renders a unit for and the tools `import --from` reads.
OTHER_CHOICES = {
    ("serve", "service"),
    ("bench", "benchmark"),
    ("service install", "--platform"),
    ("service status", "--platform"),
    ("service uninstall", "--platform"),
    ("import", "--from"),
}

# How each option is given on a command line that is otherwise valid, and where its value lands.
COMMAND_LINES: dict[tuple[str, str], tuple[list[str], str]] = {
    ("write", "--kind"): (["write", "some text", "--kind"], "kind"),
    ("search", "--kind"): (["search", "query", "--kind"], "kind"),
    ("search", "--mode"): (["search", "query", "--mode"], "mode"),
    ("token create", "--role"): (["token", "create", "--role"], "role"),
    ("harvest run", "--agent"): (["harvest", "run", "--agent"], "agent"),
    ("init", "--agent"): (["init", "--agent"], "agent"),
    ("feedback", "vote"): (["feedback", "0b0e5f8e-6a4e-4c52-9d5e-3f1a2b3c4d5e"], "vote"),
    ("hook session-start", "--agent"): (["hook", "session-start", "--agent"], "agent"),
    ("hook session-end", "--agent"): (["hook", "session-end", "--agent"], "agent"),
    ("review list", "--state"): (["review", "list", "--state"], "state"),
    ("review list", "--kind"): (["review", "list", "--kind"], "kind"),
    ("propose", "kind"): (["propose", "--reason", "r"], "kind"),
}


def _choices(parser: argparse.ArgumentParser, command: tuple[str, ...] = ()) -> dict[tuple[str, str], argparse.Action]:
    """Every action with choices, by (subcommand path, option or positional), each subparser made whole first."""
    if isinstance(parser, Parser):
        parser.complete()
    found: dict[tuple[str, str], argparse.Action] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, subparser in action.choices.items():
                found |= _choices(subparser, (*command, name))
        elif action.choices is not None:
            found[(" ".join(command), max(action.option_strings, key=len, default=action.dest))] = action
    return found


def test_every_option_with_choices_is_accounted_for() -> None:
    found = _choices(build_parser())
    assert ("write", "--kind") in found  # positive control: the walk reaches deferred subcommands
    assert set(found) == set(ENUM_OPTIONS) | OTHER_CHOICES


@pytest.mark.parametrize("option", ENUM_OPTIONS, ids=" ".join)
def test_the_choices_are_the_enum_labels(option: tuple[str, str]) -> None:
    action = _choices(build_parser())[option]
    labels = enum_labels(ENUM_OPTIONS[option])
    assert labels, "positive control: the enum has labels"
    assert list(action.choices or []) == labels
    assert action.default is None or action.default in labels


@pytest.mark.parametrize("option", ENUM_OPTIONS, ids=" ".join)
def test_every_label_parses(option: tuple[str, str]) -> None:
    argv, dest = COMMAND_LINES[option]
    for label in enum_labels(ENUM_OPTIONS[option]):
        value = getattr(build_parser().parse_args([*argv, label]), dest)
        assert value in (label, [label])


@pytest.mark.parametrize("option", ENUM_OPTIONS, ids=" ".join)
def test_a_label_not_in_the_enum_is_refused(option: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    argv, _ = COMMAND_LINES[option]
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*argv, "not-a-label"])
    assert exited.value.code == 2
    assert "invalid choice: 'not-a-label'" in capsys.readouterr().err


def test_the_generated_code_loads_only_for_a_subcommand_with_enum_choices() -> None:
    """`mnemo status`, `up` and `--help` do not pay for protobuf and grpc; `write` loads them to parse --kind."""
    script = """
import sys
from mnemo_cli.parser import build_parser

heavy = ("grpc", "google.protobuf", "mnemo.common.v1.common_pb2", "httpx", "mnemo_server")
build_parser().parse_args(["status"])
assert not [m for m in heavy if m in sys.modules], [m for m in heavy if m in sys.modules]
build_parser().parse_args(["write", "--kind", "lesson", "text"])
assert "mnemo.common.v1.common_pb2" in sys.modules  # positive control: the same check sees a load
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
