"""The Claude Code reader on the real fixture files: ids, turns, subagents, rewinds, and bad input."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

from mnemo_harvest.model import Session
from mnemo_harvest.readers.claude import ClaudeCodeReader
from tests.harvest.agents import all_text, roles, stubs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "claude-code"
PROJECTS = FIXTURES / "claude-code-log" / "projects"
SHOWCASE_ID = "55550000-0000-4000-8000-000000000001"
SHOWCASE = PROJECTS / "-workspace-example-app" / f"{SHOWCASE_ID}.jsonl"
SIDECHAIN = FIXTURES / "claude-code-log" / "sidechain_integrated.jsonl"
REWIND = FIXTURES / "claude-code-log" / "dag_compact_after_rewind.jsonl"
EDGE = FIXTURES / "claude-code-log" / "edge_cases.jsonl"
REPRESENTATIVE = FIXTURES / "claude-code-log" / "representative_messages.jsonl"
SAMPLE = FIXTURES / "claude-code-transcripts" / "sample_session.jsonl"


def read(path: Path, reader: ClaudeCodeReader | None = None) -> Session:
    reader = reader or ClaudeCodeReader([PROJECTS])
    return reader.read(reader.ref_for(path))


def test_showcase_session_has_its_id_cwd_model_turns_and_mcp_stubs() -> None:
    session = read(SHOWCASE)
    assert session.agent == "claude-code"
    assert session.session_id == SHOWCASE_ID
    assert session.cwd == "/workspace/example-app"
    assert session.model == "claude-haiku-4-5-20251001"
    assert session.git_branch is None
    assert session.title is None
    assert roles(session) == (1, 5)
    assert session.first_prompt.startswith("Give me a tour of the repository")
    assert stubs(session) == [
        'mcp__plugin_showcase_example__inspect_repository_structure: {"path": "."}',
        "mcp__plugin_showcase_example__refresh_search_index: {}",
        'ScheduleWakeup: {"delaySeconds": 600, "reason": "re-check the search index once the refresh has settled", '
        '"prompt": "Check that the search index is current."}',
        "Agent: Survey the web module (general-purpose)",
        "Agent: Survey the jobs module (general-purpose)",
    ]
    assert session.started_at is not None and session.started_at.isoformat() == "2026-06-15T10:00:01+00:00"
    assert session.ended_at is not None and session.ended_at.isoformat() == "2026-06-15T10:00:11+00:00"
    assert session.last_turn_closed is True
    # Tool results never enter the transcript: the JSON the MCP tool returned is in the file, not the text.
    assert "total_lines" in SHOWCASE.read_text()
    assert "total_lines" not in all_text(session)
    assert session.malformed == [] and not session.skipped_records


def test_showcase_subagent_file_is_attached_with_its_meta_description_and_dangling_showcol2_is_ignored() -> None:
    session = read(SHOWCASE)
    assert [child.session_id for child in session.subagents] == ["showcol1"]
    child = session.subagents[0]
    assert child.title == "Survey the web module"
    assert child.source_path.endswith("subagents/agent-showcol1.jsonl")
    assert child.cwd == "/workspace/example-app"
    assert roles(child) == (1, 1)
    assert child.first_prompt == "Survey src/web and report its layout, with a screenshot."
    assert child.turns[1].text.startswith("## The web module")
    assert (
        child.content_digest
        and child.size == (SHOWCASE.parent / SHOWCASE_ID / "subagents" / "agent-showcol1.jsonl").stat().st_size
    )
    # The parent does spawn showcol2 (positive control), but its transcript is missing: no child, no crash.
    assert "Agent: Survey the jobs module (general-purpose)" in stubs(session)
    assert "showcol2" not in [child.session_id for child in session.subagents]


def test_inline_sidechain_becomes_a_subagent_with_windows_cwd_and_split_lines_merged() -> None:
    session = read(SIDECHAIN)
    assert session.session_id == "88a8d761-7b9a-4bf1-a8ca-c1febe6bf358"
    assert session.cwd == "e:\\Workspace\\src\\github\\claude-code-log"
    assert session.model == "claude-sonnet-4-5-20250929"
    assert roles(session) == (0, 2)
    assert stubs(session) == ["Task: Research data-border-color usage and CSS class mat... (general-purpose)"]
    # The main thread ends on stop_reason "tool_use": the turn is not closed.
    assert session.last_turn_closed is False
    [child] = session.subagents
    assert child.session_id == "e1c84ba5"
    assert child.title == "Research data-border-color usage and CSS class mat..."
    # Two file lines carry message msg_017zj75dqWUNqVxCUrhqbTkf (text, then tool_use): one turn.
    raw = [json.loads(line) for line in SIDECHAIN.read_text().splitlines()]
    assert sum(r["message"].get("id") == "msg_017zj75dqWUNqVxCUrhqbTkf" for r in raw) == 2
    assert roles(child) == (0, 1)
    assert child.turns[0].text == "I'll research how `data-border-color` is used thro..."
    assert stubs(child) == ['Grep: "data-border-color"']
    # The sidechain lines are not in the parent's turns.
    assert "data-border-color` is used" not in "\n".join(t.text for t in session.turns)


def test_mojibake_in_tool_output_is_tolerated_and_never_kept() -> None:
    assert "â†’" in SIDECHAIN.read_text(encoding="utf-8")
    session = read(SIDECHAIN)
    assert session.malformed == []
    assert "â†’" not in all_text(session)
    assert "Simplified" not in all_text(session)


def test_rewind_keeps_the_active_branch_across_the_compact_boundary() -> None:
    session = read(REWIND)
    assert session.session_id == "s1"
    assert session.cwd == "/tmp"  # noqa: S108 - the cwd the fixture recorded, not a temp file we use
    assert session.model == "claude-sonnet-4-20250514"
    assert [(t.role, t.text) for t in session.turns] == [
        ("user", "Start"),
        ("assistant", "Ready"),
        ("user", "Second attempt"),
        ("assistant", "Second answer"),
        ("user", "Keep going"),
        ("assistant", "Kept going"),
        ("user", "After compaction"),
        ("assistant", "Final answer"),
    ]
    # The abandoned branch is in the file (positive control) but not in the session.
    assert "First attempt" in REWIND.read_text()
    assert "First attempt" not in all_text(session) and "First answer" not in all_text(session)
    # The compaction summary is not a user prompt; the boundary is counted as a skipped record.
    assert "continued from a previous conversation" in REWIND.read_text()
    assert "continued from a previous conversation" not in all_text(session)
    assert session.skipped_records["system"] == 1


def test_plain_string_content_git_branch_and_leading_summary_title() -> None:
    session = read(SAMPLE)
    assert session.session_id == "test-session-id"
    assert session.cwd == "/project"
    assert session.git_branch == "main"
    assert session.title == "Test session for JSONL parsing"
    assert session.model is None
    assert roles(session) == (2, 3)
    assert [t.text for t in session.turns if t.role == "user"] == [
        "Create a hello world function",
        "Now add a goodbye function",
    ]
    assert stubs(session) == ["Write: hello.py", "Bash: git add . && git commit -m 'Add hello function'"]
    assert session.files_touched == ["/project/hello.py"]
    assert session.last_turn_closed is True


def test_representative_messages_use_the_summary_of_their_own_leaf_and_keep_edit_and_bash_stubs() -> None:
    session = read(REPRESENTATIVE)
    assert session.session_id == "test_session"
    assert session.title is not None and session.title.startswith("User learned about Python decorators")
    assert roles(session) == (4, 5)
    assert stubs(session) == ["Edit: decorator_example.py", "Bash: python /tmp/decorator_example.py"]
    assert session.files_touched == ["/tmp/decorator_example.py"]  # noqa: S108 - a path the fixture recorded
    # The session ends on a prompt the model has not answered yet.
    assert session.last_turn_closed is False


def test_edge_cases_reduce_command_markup_and_list_non_record_lines_as_malformed() -> None:
    session = read(EDGE)
    assert session.session_id == "edge_cases"
    user_texts = [t.text for t in session.turns if t.role == "user"]
    assert "test-command --verbose --output /tmp/test.log" in user_texts
    assert not any("local-command-stdout" in t or "Command output here" in t for t in user_texts)
    assert not any(t.startswith("Caveat:") for t in user_texts)
    assert any("中文" in t and "🎉" in t for t in user_texts)
    assert roles(session) == (4, 4)
    assert "MultiEdit: complex_example.py" in stubs(session)
    # Lines 13, 15 and 16 are valid JSON but not records ("massive error", 42, [1]); the rest is read.
    assert session.malformed == [(str(EDGE), 13), (str(EDGE), 15), (str(EDGE), 16)]
    assert session.skipped_records["user:invalid-message"] == 1
    assert session.skipped_records["<none>"] == 1


def test_a_broken_line_and_an_unknown_record_type_are_skipped_and_the_rest_is_parsed(tmp_path: Path) -> None:
    lines = SAMPLE.read_text().splitlines()
    lines.insert(2, '{"type": "user", "message": {"role": "us')
    lines.insert(4, json.dumps({"type": "future-record-type", "sessionId": "test-session-id", "payload": [1, 2]}))
    copy = tmp_path / "sample_session.jsonl"
    copy.write_text("\n".join(lines) + "\n")
    session = read(copy)
    assert session.malformed == [(str(copy), 3)]
    assert session.skipped_records == {"future-record-type": 1}
    original = read(SAMPLE)
    assert original.malformed == [] and not original.skipped_records
    assert [(t.role, t.text, t.tool_calls) for t in session.turns] == [
        (t.role, t.text, t.tool_calls) for t in original.turns
    ]


def test_inline_base64_images_never_reach_the_session(tmp_path: Path) -> None:
    payload = base64.b64encode(bytes(range(256)) * 8).decode()
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": payload}}
    envelope = {"sessionId": "img", "cwd": "/repo", "timestamp": "2026-01-01T00:00:00Z", "isSidechain": False}
    records = [
        {
            **envelope,
            "type": "user",
            "uuid": "u1",
            "parentUuid": None,
            "message": {"role": "user", "content": [{"type": "text", "text": "What is in this screenshot?"}, image]},
        },
        {
            **envelope,
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "model": "claude-opus-4-5",
                "stop_reason": "tool_use",
                "content": [
                    {"type": "text", "text": "Let me upload it."},
                    {"type": "tool_use", "id": "t1", "name": "mcp__img__upload", "input": {"image": payload}},
                ],
            },
        },
        {
            **envelope,
            "type": "user",
            "uuid": "r1",
            "parentUuid": "a1",
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [image]}]},
        },
        {
            **envelope,
            "type": "assistant",
            "uuid": "a2",
            "parentUuid": "r1",
            "message": {
                "id": "msg_2",
                "role": "assistant",
                "stop_reason": "end_turn",
                "content": [{"type": "text", "text": "A login form."}],
            },
        },
    ]
    path = tmp_path / "img.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    session = read(path)
    assert payload in path.read_text()
    assert [t.text for t in session.turns] == ["What is in this screenshot?", "Let me upload it.", "A login form."]
    assert stubs(session) == ['mcp__img__upload: {"image": "<binary>"}']
    assert payload[:40] not in all_text(session)


def test_split_assistant_lines_and_replayed_blocks_make_one_turn(tmp_path: Path) -> None:
    envelope = {"sessionId": "split", "cwd": "/repo", "timestamp": "2026-01-01T00:00:00Z", "isSidechain": False}

    def assistant(uuid: str, parent: str, block: dict[str, object]) -> dict[str, object]:
        message = {"id": "msg_split", "role": "assistant", "model": "m", "stop_reason": None, "content": [block]}
        return {**envelope, "type": "assistant", "uuid": uuid, "parentUuid": parent, "message": message}

    bash = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "git status"}}
    read_call = {"type": "tool_use", "id": "t2", "name": "Read", "input": {"file_path": "/repo/README.md"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "On branch main"}
    records = [
        {
            **envelope,
            "type": "user",
            "uuid": "u1",
            "parentUuid": None,
            "message": {"role": "user", "content": "Status?"},
        },
        assistant("a1", "u1", {"type": "thinking", "thinking": "secret reasoning", "signature": "x"}),
        assistant("a2", "a1", {"type": "text", "text": "Checking."}),
        assistant("a3", "a2", bash),
        {
            **envelope,
            "type": "user",
            "uuid": "r1",
            "parentUuid": "a3",
            "message": {"role": "user", "content": [result]},
        },
        assistant("a4", "r1", read_call),
        assistant("a5", "a4", bash),
        {
            **envelope,
            "type": "user",
            "uuid": "r2",
            "parentUuid": "a5",
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "# hi"}]},
        },
    ]
    path = tmp_path / "split.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    session = read(path)
    assert roles(session) == (1, 1)
    [turn] = [t for t in session.turns if t.role == "assistant"]
    assert turn.text == "Checking."
    assert [c.summary for c in turn.tool_calls] == ["Bash: git status", "Read: README.md"]
    assert turn.tool_calls[1].files == ("/repo/README.md",)
    assert "secret reasoning" not in all_text(session)
    # The last record is a tool result the model has not answered: the turn is still open.
    assert session.last_turn_closed is False


def test_parallel_tool_results_that_fork_the_uuid_tree_are_not_mistaken_for_a_rewind(tmp_path: Path) -> None:
    envelope = {"sessionId": "par", "cwd": "/repo", "timestamp": "2026-01-01T00:00:00Z", "isSidechain": False}

    def line(kind: str, uuid: str, parent: str | None, content: object, **message: object) -> dict[str, object]:
        body = {"role": kind, "content": content, **message}
        return {**envelope, "type": kind, "uuid": uuid, "parentUuid": parent, "message": body}

    def call(call_id: str, path: str) -> list[dict[str, object]]:
        return [{"type": "tool_use", "id": call_id, "name": "Read", "input": {"file_path": path}}]

    def result(call_id: str) -> list[dict[str, object]]:
        return [{"type": "tool_result", "tool_use_id": call_id, "content": "..."}]

    records = [
        line("user", "u1", None, "Read both files"),
        line("assistant", "a1", "u1", call("t1", "/repo/a.py"), id="msg_1"),
        line("assistant", "a2", "a1", call("t2", "/repo/b.py"), id="msg_1"),
        # Each result hangs off its own tool_use line, so a1 has two children; the chain goes on from r1.
        line("user", "r1", "a1", result("t1")),
        line("user", "r2", "a2", result("t2")),
        line("assistant", "a3", "r1", [{"type": "text", "text": "Both read."}], id="msg_2", stop_reason="end_turn"),
    ]
    path = tmp_path / "par.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    session = read(path)
    assert [(t.role, t.text) for t in session.turns] == [
        ("user", "Read both files"),
        ("assistant", ""),
        ("assistant", "Both read."),
    ]
    assert stubs(session) == ["Read: a.py", "Read: b.py"]
    assert session.last_turn_closed is True


def test_discover_finds_exactly_the_root_sessions_and_read_attaches_legacy_agent_files(tmp_path: Path) -> None:
    root = tmp_path / "projects"
    shutil.copytree(PROJECTS, root)
    project = root / "-workspace-example-app"
    legacy = project / "agent-legacy01.jsonl"
    legacy.write_text(
        json.dumps(
            {
                "type": "user",
                "uuid": "l1",
                "parentUuid": None,
                "isSidechain": True,
                "agentId": "legacy01",
                "sessionId": SHOWCASE_ID,
                "cwd": "/workspace/example-app",
                "timestamp": "2026-06-15T10:00:20.000Z",
                "message": {"role": "user", "content": "Legacy subagent prompt"},
            }
        )
        + "\n"
    )
    other = root / "-tmp" / "11111111-2222-4333-8444-555555555555.jsonl"
    other.parent.mkdir()
    shutil.copyfile(SAMPLE, other)
    (root / "stray-file.txt").write_text("not a project")
    reader = ClaudeCodeReader([root, tmp_path / "missing-root"])
    refs = sorted(reader.discover(), key=lambda r: r.key)
    assert [r.key for r in refs] == ["11111111-2222-4333-8444-555555555555", SHOWCASE_ID]
    showcase_ref = refs[1]
    subagent = project / SHOWCASE_ID / "subagents" / "agent-showcol1.jsonl"
    assert showcase_ref.path == str(project / f"{SHOWCASE_ID}.jsonl")
    assert showcase_ref.size == sum(p.stat().st_size for p in (project / f"{SHOWCASE_ID}.jsonl", subagent, legacy))
    session = reader.read(showcase_ref)
    assert [c.session_id for c in session.subagents] == ["showcol1", "legacy01"]
    assert session.size == showcase_ref.size
    assert list(ClaudeCodeReader([tmp_path / "missing-root"]).discover()) == []


def test_a_grown_session_or_subagent_changes_digest_and_size_and_an_identical_reread_does_not(tmp_path: Path) -> None:
    root = tmp_path / "projects"
    shutil.copytree(PROJECTS, root)
    reader = ClaudeCodeReader([root])
    [ref] = reader.discover()
    first, again = reader.read(ref), reader.read(ref)
    assert first.content_digest == again.content_digest and first.size == again.size == ref.size

    subagent = root / "-workspace-example-app" / SHOWCASE_ID / "subagents" / "agent-showcol1.jsonl"
    with subagent.open("a") as fh:
        fh.write(json.dumps({"type": "queue-operation", "sessionId": SHOWCASE_ID}) + "\n")
    [grown_ref] = reader.discover()
    assert grown_ref.size > ref.size and grown_ref.mtime >= ref.mtime
    sub_grown = reader.read(grown_ref)
    assert sub_grown.content_digest != first.content_digest and sub_grown.size == grown_ref.size

    with Path(ref.path).open("a") as fh:
        fh.write(
            json.dumps({"type": "user", "sessionId": SHOWCASE_ID, "message": {"content": "One more thing"}}) + "\n"
        )
    grown = reader.read(reader.ref_for(Path(ref.path)))
    assert grown.content_digest not in (first.content_digest, sub_grown.content_digest)
    assert grown.size > sub_grown.size
    assert grown.turns[-1].text == "One more thing"
