"""Agent-notes retrieval benchmark: notes of three fictional software projects, written by hand the
way coding agents record them (decisions, lessons, error messages, file paths, identifiers), in
one workspace; a later session's questions as MCP searches, scored per mode beside BM25.

The corpus and its judgements: bench/data/agent_notes/README.md. The machinery is the SciFact
benchmark's (bench/scifact.py), run on this collection."""

from __future__ import annotations

import sys

from bench.scifact import Collection
from bench.scifact import main as run_collection

AGENT_NOTES = Collection(
    name="agent-notes",
    title="Agent notes",
    split="test",
    default_data="bench/data/agent_notes",
    results="agent_notes",
    document_word="note",
    query_word="question",
    expected={"documents": 200, "queries": 100, "judgements": 134},
)


def main(argv: list[str] | None = None) -> int:
    return run_collection(argv, AGENT_NOTES)


if __name__ == "__main__":
    sys.exit(main())
