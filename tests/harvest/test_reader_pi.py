"""The pi reader on the real fixture files: v1 and migrated v3, trees, bash runs, and bad input."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

from mnemo_harvest.model import Session
from mnemo_harvest.readers.pi import PiReader
from tests.harvest.agents import all_text, roles, stubs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "pi"
V1 = FIXTURES / "v1-real" / "sessions"
V3 = FIXTURES / "v3-derived" / "sessions"
FOLDER = "--Users-badlogic-workspaces-pi-mono--"
LARGE_ID = "d703a1a9-1b7b-4fb1-b512-c9738b1fe617"
COMPACTED_ID = "ffae836b-9420-4060-ac13-7745215f90ff"
LARGE_V1 = V1 / FOLDER / f"2025-11-20T23-33-50-805Z_{LARGE_ID}.jsonl"
COMPACTED_V1 = V1 / FOLDER / f"2025-12-09T00-53-29-825Z_{COMPACTED_ID}.jsonl"
LARGE_V3 = V3 / FOLDER / f"2025-11-20T23-33-50-805Z_{LARGE_ID}.jsonl"


def read(path: Path) -> Session:
    reader = PiReader(path.parent.parent)
    return reader.read(reader.ref_for(path))


def write_session(path: Path, header: dict[str, object], entries: list[dict[str, object]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in [header, *entries]))
    return path


def message(entry_id: str, parent: str | None, body: dict[str, object]) -> dict[str, object]:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-05-14T21:47:43.000Z",
        "message": body,
    }


def test_v1_session_has_its_header_id_cwd_model_turns_and_tool_stubs() -> None:
    session = read(LARGE_V1)
    assert session.agent == "pi"
    assert session.session_id == LARGE_ID
    assert session.cwd == "/Users/badlogic/workspaces/pi-mono"
    # The aborted gpt-5.1-codex reply has no content; every reply with content came from Sonnet.
    assert session.model == "claude-sonnet-4-5"
    assert session.git_branch is None
    assert roles(session) == (4, 7)
    assert session.first_prompt == "/mode"
    assert session.turns[1].text.startswith("read packages/coding-agent/docs/theme.md in full")
    assert stubs(session)[:3] == [
        "read: packages/coding-agent/docs/theme.md",
        "read: packages/coding-agent/src/theme/theme.ts",
        'bash: find packages/coding-agent/src -name "*selector.ts" -type f',
    ]
    assert "edit: packages/coding-agent/src/tui/user-message-selector.ts" in stubs(session)
    assert "packages/coding-agent/src/tui/oauth-selector.ts" in session.files_touched
    assert session.started_at is not None and session.started_at.isoformat() == "2025-11-20T23:33:01.550000+00:00"
    # Tool results are in the file (positive control) but never in the session.
    assert "Themes allow you to customize the colors" in LARGE_V1.read_text()
    assert "Themes allow you to customize the colors" not in all_text(session)
    # The excerpt ends on a prompt the model has not answered.
    assert session.last_turn_closed is False
    assert session.malformed == [] and not session.skipped_records


def test_v1_compaction_bash_runs_huge_output_and_fork_header() -> None:
    session = read(COMPACTED_V1)
    raw = COMPACTED_V1.read_text()
    assert session.session_id == COMPACTED_ID
    assert session.model == "claude-opus-4-5"
    assert roles(session) == (10, 13)
    assert session.first_prompt == "alright, where were we?"
    # The compaction summary is not a prompt, and is counted as a skipped record.
    assert "# Context Checkpoint: Coding Agent Refactoring" in raw
    assert "Context Checkpoint" not in all_text(session)
    assert session.skipped_records == {"compaction": 1, "thinking_level_change": 1}
    # The user's own `!ls` / `!find .` runs are user turns with a stub; their (52 KB) output is dropped.
    bash_turns = [t for t in session.turns if t.role == "user" and t.tool_calls]
    assert [(t.text, [c.summary for c in t.tool_calls]) for t in bash_turns] == [
        ("", ["bash: ls"]),
        ("", ["bash: ls"]),
        ("", ["bash: find ."]),
    ]
    assert "./.git/objects/12/4abf0b10332deed53ad78c796d790f72732268" in raw
    assert ".git/objects" not in all_text(session)
    # Thinking blocks are dropped.
    assert "The user seems impressed" in raw
    assert "The user seems impressed" not in all_text(session)
    # The fork lineage (branchedFrom) is not a subagent parent.
    assert '"branchedFrom"' in raw
    assert session.parent_session_id is None
    # Last reply stopped with "stop"; the trailing `!find .` owes the model nothing.
    assert session.last_turn_closed is True


def test_migrated_v3_file_keeps_the_key_and_conversation_of_its_v1_original() -> None:
    v1, v3 = read(LARGE_V1), read(LARGE_V3)
    assert v3.session_id == v1.session_id == LARGE_ID
    assert v3.cwd == v1.cwd
    assert v3.model == "claude-sonnet-4-5"
    assert roles(v3) == (2, 2)
    assert [(t.role, t.text, t.tool_calls) for t in v3.turns] == [
        (t.role, t.text, t.tool_calls) for t in v1.turns[: len(v3.turns)]
    ]
    assert v3.content_digest != v1.content_digest
    # It ends on tool results the model has not answered yet.
    assert v3.last_turn_closed is False


def test_v3_tree_keeps_the_active_branch_from_the_last_entry(tmp_path: Path) -> None:
    header = {"type": "session", "version": 3, "id": "tree-1", "timestamp": "2026-05-14T21:47:42.304Z", "cwd": "/p"}
    stop = {"stopReason": "stop", "model": "claude-opus-4-5"}
    entries = [
        {"type": "model_change", "id": "m0", "parentId": None, "provider": "anthropic", "modelId": "claude-opus-4-5"},
        message("u1", "m0", {"role": "user", "content": "Start"}),
        message("a1", "u1", {"role": "assistant", "content": [{"type": "text", "text": "Ready"}], **stop}),
        message("u2", "a1", {"role": "user", "content": "Abandoned question"}),
        message("a2", "u2", {"role": "assistant", "content": [{"type": "text", "text": "Abandoned answer"}], **stop}),
        {"type": "branch_summary", "id": "b1", "parentId": "a1", "fromId": "a2", "summary": "Tried something"},
        message("u3", "b1", {"role": "user", "content": "Kept question"}),
        message("a3", "u3", {"role": "assistant", "content": [{"type": "text", "text": "Kept answer"}], **stop}),
        {"type": "session_info", "id": "i1", "parentId": "a3", "name": "Tree demo"},
    ]
    session = read(write_session(tmp_path / "--p--" / "2026_tree-1.jsonl", header, entries))
    assert session.session_id == "tree-1"
    assert session.title == "Tree demo"
    assert [t.text for t in session.turns] == ["Start", "Ready", "Kept question", "Kept answer"]
    # The abandoned branch is in the file (positive control) but not in the session.
    assert "Abandoned question" in Path(session.source_path).read_text()
    assert "Abandoned" not in all_text(session)
    assert session.skipped_records == {"branch_summary": 1}
    assert session.last_turn_closed is True


def test_a_broken_line_and_an_unknown_entry_type_are_skipped_and_the_rest_is_parsed(tmp_path: Path) -> None:
    lines = LARGE_V1.read_text().splitlines()
    lines.insert(3, '{"type":"message","message":{"role":"us')
    lines.insert(5, json.dumps({"type": "future_entry", "timestamp": "2025-11-20T23:33:03.000Z", "data": {}}))
    copy = tmp_path / FOLDER / LARGE_V1.name
    copy.parent.mkdir()
    copy.write_text("\n".join(lines) + "\n")
    session = read(copy)
    assert session.malformed == [(str(copy), 4)]
    assert session.skipped_records == {"future_entry": 1}
    original = read(LARGE_V1)
    assert [(t.role, t.text, t.tool_calls) for t in session.turns] == [
        (t.role, t.text, t.tool_calls) for t in original.turns
    ]


def test_inline_base64_images_never_reach_the_session(tmp_path: Path) -> None:
    payload = base64.b64encode(bytes(range(256)) * 8).decode()
    image = {"type": "image", "data": payload, "mimeType": "image/png"}
    header = {"type": "session", "version": 3, "id": "img-1", "timestamp": "2026-05-14T21:47:42.304Z", "cwd": "/p"}
    entries = [
        message("u1", None, {"role": "user", "content": [{"type": "text", "text": "What is this?"}, image]}),
        message(
            "a1",
            "u1",
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me look closer."},
                    {"type": "toolCall", "id": "c1", "name": "inspect", "arguments": {"image": payload}},
                ],
                "stopReason": "toolUse",
            },
        ),
        message("r1", "a1", {"role": "toolResult", "toolCallId": "c1", "toolName": "inspect", "content": [image]}),
        message(
            "a2",
            "r1",
            {"role": "assistant", "content": [image, {"type": "text", "text": "A cat."}], "stopReason": "stop"},
        ),
    ]
    path = write_session(tmp_path / "--p--" / "2026_img-1.jsonl", header, entries)
    session = read(path)
    assert payload in path.read_text()
    assert [t.text for t in session.turns] == ["What is this?", "Let me look closer.", "A cat."]
    assert stubs(session) == ['inspect: {"image": "<binary>"}']
    assert payload[:40] not in all_text(session)


def test_discover_keys_sessions_by_header_id_under_a_copy_of_the_fixture_tree(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    shutil.copytree(V1, root)
    titled = root / "--tmp-fork--" / "2026-01-01T00-00-00-000Z_aaaaaaaa-0000-4000-8000-000000000000.jsonl"
    titled.parent.mkdir()
    title_line = json.dumps({"type": "title", "v": 1, "title": "A fork writes its title first"})
    titled.write_text(title_line + "\n" + LARGE_V3.read_text())
    headerless = root / "--tmp-fork--" / "2026-01-02T00-00-00-000Z_bbbbbbbb-0000-4000-8000-000000000000.jsonl"
    headerless.write_text("{broken\n")
    refs = sorted(PiReader(root).discover(), key=lambda r: r.path)
    assert [(Path(r.path).name, r.key) for r in refs] == [
        (LARGE_V1.name, LARGE_ID),
        (COMPACTED_V1.name, COMPACTED_ID),
        (titled.name, LARGE_ID),
        (headerless.name, "bbbbbbbb-0000-4000-8000-000000000000"),
    ]
    assert refs[0].size == LARGE_V1.stat().st_size
    assert list(PiReader(tmp_path / "missing").discover()) == []


def test_a_grown_or_rewritten_file_changes_digest_and_size_and_an_identical_reread_does_not(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    shutil.copytree(V1, root)
    reader = PiReader(root)
    ref = next(r for r in reader.discover() if r.key == LARGE_ID)
    first, again = reader.read(ref), reader.read(ref)
    assert first.content_digest == again.content_digest and first.size == again.size == ref.size
    path = Path(ref.path)
    reply = {"role": "assistant", "content": [{"type": "text", "text": "Reading it now."}], "stopReason": "stop"}
    with path.open("a") as fh:
        fh.write(json.dumps({"type": "message", "timestamp": "2025-11-20T23:47:20.000Z", "message": reply}) + "\n")
    grown = reader.read(reader.ref_for(path))
    assert grown.size > first.size and grown.content_digest != first.content_digest
    assert grown.turns[-1].text == "Reading it now." and grown.last_turn_closed is True
    # pi migrates a file by rewriting it whole, and it may shrink: same key, new digest.
    shutil.copyfile(LARGE_V3, path)
    rewritten_ref = reader.ref_for(path)
    rewritten = reader.read(rewritten_ref)
    assert rewritten_ref.key == LARGE_ID
    assert rewritten.size < grown.size and rewritten.content_digest not in (first.content_digest, grown.content_digest)
