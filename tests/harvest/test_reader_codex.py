"""The Codex reader over the real and synthetic rollouts in tests/fixtures, plus synthetic edge cases."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import zstandard

from mnemo_harvest.model import Session, SourceRef
from mnemo_harvest.readers.codex import CodexReader

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sessions"
SYNTH = FIXTURES / "codex" / "claude-code-log-synthetic"
REAL = FIXTURES / "codex" / "localpush-real"
DAY = REAL / "sessions" / "2026" / "02" / "23"
T118 = "019c8a4d-8f45-7010-8b5d-7fad920aa6f9"
UNFINISHED = "019c8a70-dda7-7f33-98ea-f30553347322"
COMPLETE = "019c8bfe-ec25-79e0-97d7-bda6a9c575ff"
EXCERPT = "019c8a59-e9dd-71f0-9ae3-4079fe9726a9"
PARENT = "22222222-2222-4222-8222-222222222222"
CHILD = "33333333-3333-4333-8333-333333333333"
PNG = "data:image/png;base64," + "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk" * 8


def fixture(thread_id: str) -> Path:
    return next(p for p in FIXTURES.joinpath("codex").rglob(f"rollout-*{thread_id}*.jsonl"))


def read_file(path: Path) -> Session:
    reader = CodexReader(path.parent)
    return reader.read(reader.source_ref(path))


def read_thread(home: Path, thread_id: str) -> Session:
    reader = CodexReader(home)
    return reader.read(next(ref for ref in reader.discover() if ref.key == thread_id))


def texts(session: Session) -> list[str]:
    return [t.text for t in session.turns]


def everything(session: Session) -> str:
    """All text a transcript could show: turn texts and tool stubs, subagents included."""
    out = []
    for s in (session, *session.subagents):
        for turn in s.turns:
            out.append(turn.text)
            out += [f"{c.name}: {c.summary} {' '.join(c.files)}" for c in turn.tool_calls]
    return "\n".join(out)


def line(kind: str, payload: dict, ts: str = "2026-03-01T10:00:00.000Z") -> str:
    return json.dumps({"timestamp": ts, "type": kind, "payload": payload}) + "\n"


def meta(thread_id: str, **extra: object) -> str:
    return line("session_meta", {"id": thread_id, "timestamp": "2026-03-01T10:00:00.000Z", "cwd": "/w/p", **extra})


def item(**payload: object) -> str:
    return line("response_item", payload)


def event(**payload: object) -> str:
    return line("event_msg", payload)


def message(role: str, *content: str | dict) -> str:
    kind = "output_text" if role == "assistant" else "input_text"
    items = [c if isinstance(c, dict) else {"type": kind, "text": c} for c in content]
    return item(type="message", role=role, content=items)


def call(name: str, arguments: dict, call_id: str) -> str:
    return item(type="function_call", name=name, arguments=json.dumps(arguments), call_id=call_id)


@dataclass(frozen=True)
class Expected:
    thread_id: str
    cwd: str | None
    users: int
    assistants: int
    first_prompt: str
    model: str | None
    branch: str | None
    tool_calls: int
    closed: bool


GPT = "gpt-5.3-codex"
SYN = "/workspace/synthetic-project"
EXPECTED = [
    Expected(
        T118, "/redacted/path/da0ba47443", 1, 17, "[REDACTED_MESSAGE len=115 sha=a83ebe6f]", GPT, "main", 118, True
    ),
    Expected(
        UNFINISHED, "/redacted/path/da0ba47443", 1, 1, "[REDACTED_MESSAGE len=86 sha=2239bcba]", GPT, "main", 1, False
    ),
    Expected(
        COMPLETE, "/redacted/path/ea96e59ed9", 1, 6, "[REDACTED_MESSAGE len=98 sha=c002ff99]", GPT, "main", 5, True
    ),
    # The excerpt starts mid-session: assistant lines only, calls whose outputs were cut off.
    Expected(EXCERPT, "/redacted/path/59b923df4d", 0, 3, "", GPT, "main", 5, False),
    Expected(
        "11111111-1111-4111-8111-111111111111", SYN, 1, 2, "List the synthetic files.", "synthetic-model", None, 3, True
    ),
    Expected(PARENT, SYN, 1, 1, "Spawn a synthetic researcher.", None, None, 1, True),
    Expected(
        "44444444-4444-4444-8444-444444444444", None, 1, 1, "Open the synthetic legacy session.", None, None, 0, True
    ),
    Expected("55555555-5555-4555-8555-555555555555", SYN, 1, 0, "Archived synthetic prompt.", None, None, 0, True),
    Expected(
        "66666666-6666-4666-8666-666666666666", SYN, 1, 0, "Safe line before malformed input.", None, None, 0, True
    ),
]


@pytest.mark.parametrize("expected", EXPECTED, ids=lambda e: e.thread_id[:8])
def test_every_codex_fixture_parses_into_its_thread(expected: Expected) -> None:
    session = read_file(fixture(expected.thread_id))
    assert session.agent == "codex"
    assert session.session_id == expected.thread_id
    assert session.cwd == expected.cwd
    assert sum(t.role == "user" for t in session.turns) == expected.users
    assert sum(t.role == "assistant" for t in session.turns) == expected.assistants
    assert session.first_prompt == expected.first_prompt
    assert session.model == expected.model
    assert session.git_branch == expected.branch
    assert sum(len(t.tool_calls) for t in session.turns) == expected.tool_calls
    assert session.last_turn_closed is expected.closed


def test_the_118_call_rollout_keeps_every_call_as_a_stub_and_no_output() -> None:
    session = read_file(fixture(T118))
    calls = [c for t in session.turns for c in t.tool_calls]
    assert len(calls) == 118
    assert Counter(c.name for c in calls) == {"exec_command": 116, "write_stdin": 2}
    # The redacted arguments are the stub (positive control); outputs and reasoning never are.
    assert all(c.summary.startswith("[REDACTED_ARGUMENTS len=") for c in calls)
    assert "[REDACTED_OUTPUT" not in everything(session)
    assert "[REDACTED_ENCRYPTED_CONTENT" not in everything(session)
    assert session.skipped_records["response_item:function_call_output"] == 118
    assert session.skipped_records["response_item:reasoning"] == 26
    assert session.started_at == datetime(2026, 2, 23, 11, 41, 4, 709000, tzinfo=UTC)
    assert session.ended_at is not None and session.ended_at > session.started_at


def test_tool_stubs_name_the_command_the_patched_file_and_the_mcp_query() -> None:
    session = read_file(fixture("11111111"))
    calls = [c for t in session.turns for c in t.tool_calls]
    assert [(c.name, c.summary, c.files) for c in calls] == [
        ("exec_command", "find . -maxdepth 1 -type f", ()),
        ("apply_patch", "gamma.txt", ("gamma.txt",)),
        ("mcp__synthetic__lookup", "query=fixture", ()),
    ]
    assert session.files_touched == ["gamma.txt"]
    shown = everything(session)
    assert "The synthetic files are alpha.txt and beta.txt." in shown
    for hidden in ("./alpha.txt\n./beta.txt", "Done!", '"status"', "SYNTHETIC_ENCRYPTED", "I will inspect"):
        assert hidden not in shown


def test_shell_and_patch_calls_in_every_shape_become_one_line_stubs(tmp_path: Path) -> None:
    patch = "*** Begin Patch\n*** Update File: src/x.py\n@@\n-a\n+b\n*** Add File: docs/new.md\n+hi\n*** End Patch"
    path = tmp_path / "rollout-2026-03-01T10-00-00-77777777-7777-4777-8777-777777777777.jsonl"
    path.write_text(
        meta("77777777-7777-4777-8777-777777777777")
        + event(type="user_message", message="Tidy up.")
        + call("exec_command", {"cmd": "git status"}, "c1")
        + call("shell", {"command": ["bash", "-lc", "ls -la  src"]}, "c2")
        + item(type="custom_tool_call", name="apply_patch", input=patch, call_id="c3")
        + item(
            type="local_shell_call", call_id="c4", action={"type": "exec", "command": ["pytest", "-q", "tests/a b.py"]}
        )
        + item(type="web_search_call", status="completed", action={"type": "search", "query": "zstd python"})
        + call("exec_command", {"cmd": "x" * 500}, "c5")
    )
    calls = [(c.name, c.summary, c.files) for t in read_file(path).turns for c in t.tool_calls]
    assert calls[:5] == [
        ("exec_command", "git status", ()),
        ("shell", "ls -la src", ()),
        ("apply_patch", "src/x.py, docs/new.md", ("src/x.py", "docs/new.md")),
        ("local_shell", "pytest -q 'tests/a b.py'", ()),
        ("web_search", "zstd python", ()),
    ]
    assert len(calls[5][1]) == 200 and calls[5][1].endswith("…")


def test_user_and_agent_message_mirrors_appear_once() -> None:
    synthetic = read_file(fixture("11111111"))
    assert texts(synthetic) == ["List the synthetic files.", "", "The synthetic files are alpha.txt and beta.txt."]
    # The mirrors were seen and skipped, not missed.
    assert synthetic.skipped_records["response_item:message:user"] == 1
    assert synthetic.skipped_records["event_msg:agent_message"] == 1

    real = read_file(fixture(COMPLETE))
    assistant = [t.text for t in real.turns if t.role == "assistant" and t.text]
    assert len(assistant) == len(set(assistant)) == 6
    assert all(t.startswith("[REDACTED_TEXT") for t in assistant)  # from the ResponseItems, not the events
    assert [t.text for t in real.turns if t.role == "user"] == ["[REDACTED_MESSAGE len=98 sha=c002ff99]"]


def test_injected_context_and_developer_messages_never_become_user_turns() -> None:
    session = read_file(fixture(UNFINISHED))
    # Four user-role ResponseItems (AGENTS.md, environment, IDE context) and four developer ones.
    assert session.skipped_records["response_item:message:user"] == 4
    assert session.skipped_records["response_item:message:developer"] == 4
    assert texts(session)[0] == "[REDACTED_MESSAGE len=86 sha=2239bcba]"
    for injected in ("sha=f3ffd0ed", "sha=fc56d2e9", "sha=00c48df1", "sha=a67043b4"):
        assert injected not in everything(session)


def test_files_with_only_one_of_the_mirrors_still_yield_each_message_once(tmp_path: Path) -> None:
    items_only = tmp_path / "rollout-2026-03-01T10-00-00-88888888-8888-4888-8888-888888888888.jsonl"
    items_only.write_text(
        meta("88888888-8888-4888-8888-888888888888")
        + message("developer", "<permissions instructions>sandbox</permissions instructions>")
        + message("user", "# AGENTS.md instructions for /w/p\n\nbe nice")
        + message("user", "<environment_context>\n  <cwd>/w/p</cwd>\n</environment_context>")
        + message("user", "Rename the module.")
        + message("assistant", "Renamed.")
    )
    session = read_file(items_only)
    assert texts(session) == ["Rename the module.", "Renamed."]
    assert session.skipped_records["response_item:message:injected"] == 2

    events_only = tmp_path / "rollout-2026-03-01T10-00-00-88888888-8888-4888-8888-888888888880.jsonl"
    events_only.write_text(
        meta("88888888-8888-4888-8888-888888888880")
        + event(type="task_started", turn_id="t1")
        + event(type="user_message", message="Rename the module.")
        + event(type="agent_message", message="Renamed.")
        + event(type="task_complete", turn_id="t1", last_agent_message="Renamed.")
    )
    session = read_file(events_only)
    assert texts(session) == ["Rename the module.", "Renamed."]
    assert session.last_turn_closed is True


def test_a_subagent_rollout_is_attached_to_its_parent_and_not_listed_as_a_root() -> None:
    reader = CodexReader(SYNTH)
    keys = [ref.key for ref in reader.discover()]
    assert PARENT in keys
    assert CHILD not in keys
    parent = reader.read(next(ref for ref in reader.discover() if ref.key == PARENT))
    assert [s.session_id for s in parent.subagents] == [CHILD]
    child = parent.subagents[0]
    assert child.parent_session_id is None  # attached, not orphaned
    assert texts(child) == ["Inspect fixtures.", "The fixtures are fully synthetic."]
    # The child replays the parent's prompt and spawn call: they appear once, in the parent.
    assert child.skipped_records["replayed_from_parent"] == 2
    assert everything(parent).count("Spawn a synthetic researcher.") == 1
    assert everything(parent).count("spawn_agent:") == 1
    assert parent.turns[1].tool_calls[0].summary == "task_name=synthetic_researcher message=Inspect fixtures."


def test_a_child_whose_parent_is_missing_is_its_own_root_with_its_parent_id(tmp_path: Path) -> None:
    day = tmp_path / "sessions" / "2026" / "01" / "03"
    day.mkdir(parents=True)
    shutil.copy(fixture(CHILD), day)
    reader = CodexReader(tmp_path)
    refs = list(reader.discover())
    assert [ref.key for ref in refs] == [CHILD]
    orphan = reader.read(refs[0])
    assert orphan.parent_session_id == PARENT
    # Nothing to dedupe against: the replayed lines are the only copy, so they are kept.
    assert texts(orphan) == [
        "Spawn a synthetic researcher.",
        "",
        "Inspect fixtures.",
        "The fixtures are fully synthetic.",
    ]

    shutil.copy(fixture(PARENT), day)
    assert [ref.key for ref in reader.discover()] == [PARENT]


def test_the_legacy_pre_envelope_format_in_the_flat_layout(tmp_path: Path) -> None:
    original = fixture("44444444")
    assert original.parent == SYNTH / "sessions"  # flat: no date folders
    session = read_file(original)
    assert session.session_id == "44444444-4444-4444-8444-444444444444"
    assert texts(session) == ["Open the synthetic legacy session.", "The synthetic legacy session is open."]
    assert session.started_at == datetime(2026, 1, 4, 5, 6, 7, tzinfo=UTC)
    assert [t.timestamp for t in session.turns] == [None, None]

    grown = tmp_path / "sessions" / original.name
    grown.parent.mkdir()
    injected = {"type": "input_text", "text": "<user_instructions>\nbe brief\n</user_instructions>"}
    bare = [
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [injected]},
        {"type": "function_call", "name": "shell", "arguments": '{"command":["git","diff"]}', "call_id": "c1"},
    ]
    grown.write_text(original.read_text() + "".join(json.dumps(b) + "\n" for b in bare))
    again = read_thread(tmp_path, session.session_id)
    assert again.skipped_records["state"] == 1
    assert "be brief" not in everything(again)
    assert texts(again)[:2] == texts(session)
    assert again.turns[-1].tool_calls[0].summary == "git diff"
    assert again.last_turn_closed is False  # no events: the last call has no output


def test_an_archived_rollout_keeps_its_thread_id_when_it_moves(tmp_path: Path) -> None:
    archived = read_thread(SYNTH, "55555555-5555-4555-8555-555555555555")
    assert Path(archived.source_path).parent == SYNTH / "archived_sessions"
    assert texts(archived) == ["Archived synthetic prompt."]

    day = tmp_path / "sessions" / "2026" / "02" / "23"
    day.mkdir(parents=True)
    shutil.copy(fixture(COMPLETE), day)
    reader = CodexReader(tmp_path)
    [before] = reader.discover()
    (tmp_path / "archived_sessions").mkdir()
    moved = tmp_path / "archived_sessions" / Path(before.path).name
    Path(before.path).rename(moved)
    # The stale ref still reads: the thread is found again by id.
    session = reader.read(before)
    assert session.session_id == COMPLETE == before.key
    assert session.source_path == str(moved)
    [after] = reader.discover()
    assert (after.key, after.path) == (before.key, str(moved))


def test_a_malformed_last_line_is_listed_with_its_line_number_and_the_rest_is_parsed() -> None:
    path = fixture("66666666")
    session = read_file(path)
    assert session.malformed == [(str(path), 3)]
    assert texts(session) == ["Safe line before malformed input."]
    assert read_file(fixture("11111111")).malformed == []


def test_an_unknown_future_record_type_is_counted_and_skipped() -> None:
    session = read_file(fixture("11111111"))
    assert session.skipped_records["future_synthetic_record"] == 1
    assert len(session.turns) == 3
    assert "safe" not in everything(session).lower()


def test_compaction_history_is_not_replayed_into_the_transcript() -> None:
    session = read_file(fixture(EXCERPT))
    assert session.skipped_records["compacted"] == 1
    assert session.skipped_records["event_msg:context_compacted"] == 1
    shown = everything(session)
    assert "[REDACTED_TEXT len=246 sha=980b7167]" in shown
    assert "sha=821fd802" not in shown  # the first user message inside replacement_history


def test_an_unfinished_rollout_has_an_open_last_turn_and_a_complete_one_is_closed(tmp_path: Path) -> None:
    assert read_file(fixture(UNFINISHED)).last_turn_closed is False
    assert read_file(fixture(COMPLETE)).last_turn_closed is True
    # Resumed later: a new task_started with no task_complete opens the session again.
    copy = tmp_path / fixture(COMPLETE).name
    shutil.copy(fixture(COMPLETE), copy)
    with copy.open("a") as fh:
        fh.write(line("event_msg", {"type": "task_started", "turn_id": "t2"}, "2026-02-24T08:00:00.000Z"))
    assert read_file(copy).last_turn_closed is False
    with copy.open("a") as fh:
        fh.write(line("event_msg", {"type": "turn_aborted", "turn_id": "t2"}, "2026-02-24T08:00:05.000Z"))
    assert read_file(copy).last_turn_closed is True


def test_an_inline_image_never_reaches_the_text(tmp_path: Path) -> None:
    path = tmp_path / "rollout-2026-03-01T10-00-00-99999999-9999-4999-8999-999999999999.jsonl"
    path.write_text(
        meta("99999999-9999-4999-8999-999999999999")
        + event(type="user_message", message=f"Why is this red? {PNG}", images=[PNG], local_images=[])
        + message("user", "Why is this red?", {"type": "input_image", "image_url": PNG})
        + message("assistant", "The CSS sets it.")
    )
    session = read_file(path)
    assert session.first_prompt.startswith("Why is this red?")
    assert "base64" not in everything(session) and "iVBOR" not in everything(session)
    # Items only (no events): the input_image item is dropped and its text kept.
    items = tmp_path / "rollout-2026-03-01T10-00-00-99999999-9999-4999-8999-999999999990.jsonl"
    items.write_text("".join(ln for ln in path.read_text().splitlines(keepends=True) if "user_message" not in ln))
    only_items = read_file(items)
    assert texts(only_items) == ["Why is this red?", "The CSS sets it."]
    assert "iVBOR" not in everything(only_items)


def _compress(source: Path, target: Path) -> None:
    target.write_bytes(zstandard.ZstdCompressor().compress(source.read_bytes()))


def test_a_zst_copy_reads_identically_to_the_plain_file(tmp_path: Path) -> None:
    plain = read_file(fixture(COMPLETE))
    archived = tmp_path / "archived_sessions"
    archived.mkdir()
    _compress(fixture(COMPLETE), archived / (fixture(COMPLETE).name + ".zst"))
    reader = CodexReader(tmp_path)
    [ref] = reader.discover()
    assert ref.key == COMPLETE and ref.path.endswith(".jsonl.zst")
    compressed = reader.read(ref)
    assert compressed.turns == plain.turns
    assert (compressed.content_digest, compressed.size) == (plain.content_digest, plain.size)
    assert compressed.size == fixture(COMPLETE).stat().st_size  # decompressed bytes
    assert (compressed.model, compressed.cwd, compressed.last_turn_closed) == (plain.model, plain.cwd, True)


def test_the_plain_rollout_wins_over_its_zst_twin(tmp_path: Path) -> None:
    original = fixture("11111111")
    archived = tmp_path / "archived_sessions"
    archived.mkdir()
    shutil.copy(original, archived)
    twin = archived / (original.name + ".zst")
    twin.write_bytes(
        zstandard.ZstdCompressor().compress(
            original.read_bytes().replace(b"List the synthetic", b"Zipped the synthetic")
        )
    )
    reader = CodexReader(tmp_path)
    [ref] = reader.discover()
    assert ref.path == str(archived / original.name)
    assert reader.read(ref).first_prompt == "List the synthetic files."
    (archived / original.name).unlink()
    [ref] = reader.discover()
    assert reader.read(ref).first_prompt == "Zipped the synthetic files."


def test_discover_over_a_copy_of_the_tree_lists_exactly_the_root_threads(tmp_path: Path) -> None:
    shutil.copytree(SYNTH, tmp_path, dirs_exist_ok=True)
    shutil.copytree(REAL, tmp_path, dirs_exist_ok=True)
    refs = {ref.key: ref for ref in CodexReader(tmp_path).discover()}
    assert set(refs) == {
        "11111111-1111-4111-8111-111111111111",
        PARENT,
        "44444444-4444-4444-8444-444444444444",
        "55555555-5555-4555-8555-555555555555",
        T118,
        UNFINISHED,
        COMPLETE,
    }
    # Not roots: the child (attached to its parent), malformed/ and excerpts/ (outside the roots).
    assert CHILD not in refs and EXCERPT not in refs
    assert all(ref.agent == "codex" for ref in refs.values())
    assert refs[PARENT].size == fixture(PARENT).stat().st_size + fixture(CHILD).stat().st_size
    assert list(CodexReader(tmp_path / "missing").discover()) == []


def test_growth_changes_digest_and_size_and_an_identical_reread_does_not(tmp_path: Path) -> None:
    shutil.copytree(SYNTH / "sessions", tmp_path / "sessions")
    shutil.copytree(DAY.parent.parent.parent, tmp_path / "sessions", dirs_exist_ok=True)
    reader = CodexReader(tmp_path)

    def current(key: str) -> tuple[SourceRef, Session]:
        ref = next(r for r in reader.discover() if r.key == key)
        return ref, reader.read(ref)

    ref1, first = current(COMPLETE)
    ref2, second = current(COMPLETE)
    assert (first.content_digest, first.size) == (second.content_digest, second.size)
    assert first.fingerprint == second.fingerprint and ref1 == ref2

    with Path(ref1.path).open("a") as fh:
        fh.write(line("event_msg", {"type": "user_message", "message": "One more thing."}, "2026-02-24T08:00:00.000Z"))
    ref3, grown = current(COMPLETE)
    assert grown.content_digest != first.content_digest
    assert grown.size > first.size and ref3.size > ref1.size
    assert grown.turns[-1].text == "One more thing."

    # A child that grows changes its parent's version too.
    _, parent = current(PARENT)
    child_path = next((tmp_path / "sessions").rglob(f"*{CHILD}.jsonl"))
    with child_path.open("a") as fh:
        fh.write(line("event_msg", {"type": "agent_message", "message": "Also: no secrets."}))
    _, parent_grown = current(PARENT)
    assert parent_grown.content_digest != parent.content_digest and parent_grown.size > parent.size
    assert texts(parent_grown.subagents[0])[-1] == "Also: no secrets."


def test_the_title_comes_from_the_session_index_and_the_newest_line_wins(tmp_path: Path) -> None:
    shutil.copytree(SYNTH / "sessions", tmp_path / "sessions")
    assert read_thread(tmp_path, PARENT).title is None
    (tmp_path / "session_index.jsonl").write_text(
        json.dumps({"id": PARENT, "thread_name": "Old name", "updated_at": "2026-01-03T04:05:06Z"})
        + "\n{not json\n"
        + json.dumps({"id": PARENT, "thread_name": "Researcher spawn", "updated_at": "2026-01-03T05:00:00Z"})
        + "\n"
    )
    assert read_thread(tmp_path, PARENT).title == "Researcher spawn"


def test_a_vanished_rollout_raises_os_error(tmp_path: Path) -> None:
    copy = tmp_path / "sessions" / fixture("44444444").name
    copy.parent.mkdir()
    shutil.copy(fixture("44444444"), copy)
    reader = CodexReader(tmp_path)
    [ref] = reader.discover()
    assert reader.read(ref).session_id == ref.key
    copy.unlink()
    with pytest.raises(OSError):
        reader.read(ref)
