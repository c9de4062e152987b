"""`mnemo import FILE.jsonl` against a running gateway: written in batches, a bad line refused
alone by number, and a rerun writes nothing twice."""

from __future__ import annotations

import json
from pathlib import Path

from mnemo_server.stack import Stack
from tests.helpers import Clients, mnemo, table_counts


async def test_import_writes_refuses_bad_lines_and_resumes(
    hash_stack: Stack, hash_clients: Clients, tmp_path: Path
) -> None:
    ws = await hash_clients.workspace()
    good = [
        {"content": f"Imported decision {i}: the service {i} owns its own schema.", "kind": "decision"}
        for i in range(450)
    ]
    lines = [json.dumps(item) for item in good]
    lines.insert(3, "{not json")
    lines.insert(10, json.dumps({"content": "   "}))
    # The first note again, in the second batch of 200: sent while the first is still being
    # written, so the two race for the same idempotency key; it is stored once either way.
    lines.insert(250, lines[0])
    path = tmp_path / "notes.jsonl"
    path.write_text("\n".join(lines) + "\n")
    before = await table_counts(hash_stack.dsn)

    code, out, err = await mnemo(hash_stack, "import", str(path), "-w", ws.id)
    assert code == 1, err  # some lines were refused
    assert "453 lines: 450 written, 1 already in, 2 refused" in out
    assert "line 4: INVALID_ARGUMENT" in out and "not a write body" in out
    assert "line 11: INVALID_ARGUMENT" in out
    assert (await table_counts(hash_stack.dsn))["memories"] - before["memories"] == 450

    # A rerun (an interrupted import resumed, or the same file again) writes nothing twice.
    code, out, err = await mnemo(hash_stack, "import", str(path), "-w", ws.id, "--json")
    assert code == 1, err
    summary = json.loads(out)
    assert (summary["written"], summary["already_in"], summary["refused"]) == (0, 451, 2)
    # Every line answered, in file order; the repeated line by the memory of the first.
    assert [r["line"] for r in summary["results"]] == list(range(1, 454))
    memories = [r["memory"]["id"] for r in summary["results"] if "memory" in r]
    assert len(memories) == 451 and len(set(memories)) == 450
    assert summary["results"][0]["memory"]["id"] == summary["results"][250]["memory"]["id"]
    assert (await table_counts(hash_stack.dsn))["memories"] - before["memories"] == 450

    # Positive control: a file of good lines only imports cleanly, exit 0.
    clean = tmp_path / "more.jsonl"
    clean.write_text(json.dumps({"content": "One more imported note about the schema owners."}) + "\n")
    code, out, err = await mnemo(hash_stack, "import", str(clean), "-w", ws.id)
    assert code == 0, err
    assert "1 lines: 1 written, 0 already in, 0 refused" in out
