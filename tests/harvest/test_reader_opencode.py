"""The OpenCode reader over both storage generations, built from the documented schema."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mnemo_harvest.model import Session
from mnemo_harvest.readers.opencode import OpenCodeReader
from tests.harvest.opencode_fixtures import (
    T0,
    Corpus,
    assistant,
    build_data_dir,
    corpus,
    insert_message,
    text,
    user,
    write_db,
    write_json_tree,
)

ROOTS = {"ses_01root", "ses_03open", "ses_04both", "ses_05json"}


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    build_data_dir(tmp_path / "opencode")
    return tmp_path / "opencode"


def read(reader: OpenCodeReader, key: str) -> Session:
    return reader.read(next(ref for ref in reader.discover() if ref.key == key))


def everything(session: Session) -> str:
    out = []
    for s in (session, *session.subagents):
        for turn in s.turns:
            out.append(turn.text)
            out += [f"{c.name}: {c.summary} {' '.join(c.files)}" for c in turn.tool_calls]
    return "\n".join(out)


def test_discover_lists_the_root_sessions_of_both_generations_once(data_dir: Path) -> None:
    refs = {ref.key: ref for ref in OpenCodeReader(data_dir).discover()}
    assert set(refs) == ROOTS
    assert "ses_02child" not in refs and "ses_06jchild" not in refs  # attached to their roots
    assert refs["ses_01root"].path == str(data_dir / "opencode.db")
    assert refs["ses_04both"].path == str(data_dir / "opencode.db")  # the database wins
    assert Path(refs["ses_05json"].path).parent.parent == data_dir / "storage" / "session"
    # size counts message and part rows of the whole family: root 4 + 16, child 2 + 3.
    assert refs["ses_01root"].size == 25
    assert refs["ses_03open"].size == 2 + 3
    c = corpus()
    assert refs["ses_01root"].mtime == max(c.root.updated, c.child.updated) / 1000
    assert all(ref.agent == "opencode" for ref in refs.values())
    assert list(OpenCodeReader(data_dir / "missing").discover()) == []


def test_the_root_session_reads_its_prompts_replies_and_tool_stubs(data_dir: Path) -> None:
    session = read(OpenCodeReader(data_dir), "ses_01root")
    assert session.agent == "opencode" and session.session_id == "ses_01root"
    assert session.cwd == "/home/dev/cli-tool"
    assert session.title == "Add a --verbose flag"
    assert session.model == "anthropic/claude-sonnet-4-5"
    assert session.started_at == datetime.fromtimestamp(T0 / 1000, tz=UTC)
    assert [(t.role, t.text) for t in session.turns] == [
        ("user", "Add a --verbose flag to the CLI."),
        ("assistant", "I'll look at the CLI entry point first."),
        ("user", "Now run the tests."),
        ("assistant", "Added the flag; the tests pass."),
    ]
    assert [(c.name, c.summary) for c in session.turns[1].tool_calls] == [
        ("read", "/home/dev/cli-tool/src/cli.py"),
        ("bash", "git status"),
        ("task", "Find flag parsing"),
    ]
    assert [(c.name, c.summary) for c in session.turns[3].tool_calls] == [
        ("edit", "/home/dev/cli-tool/src/cli.py"),
        ("bash", "uv run pytest -q"),
    ]
    assert session.turns[0].timestamp == datetime.fromtimestamp((T0 + 1_000) / 1000, tz=UTC)
    assert session.files_touched == ["/home/dev/cli-tool/src/cli.py"]
    assert session.malformed == []


def test_reasoning_tool_output_synthetic_text_and_data_urls_never_reach_the_text(data_dir: Path) -> None:
    session = read(OpenCodeReader(data_dir), "ses_01root")
    shown = everything(session)
    assert "Add a --verbose flag to the CLI." in shown and "git status" in shown  # positive controls
    for hidden in ("REASONING_MUST_NOT_RENDER", "TOOL_OUTPUT_MUST_NOT_RENDER", "SYNTHETIC_REMINDER", "base64", "iVBOR"):
        assert hidden not in shown
    assert session.skipped_records == {
        "part:text:synthetic": 1,
        "part:file": 1,
        "part:reasoning": 1,
        "part:step-start": 1,
        "part:step-finish": 1,
        "part:snapshot": 1,
        "part:patch": 1,
    }


def test_child_sessions_are_attached_to_their_root_in_both_generations(data_dir: Path) -> None:
    reader = OpenCodeReader(data_dir)
    root = read(reader, "ses_01root")
    assert [s.session_id for s in root.subagents] == ["ses_02child"]
    child = root.subagents[0]
    assert [t.text for t in child.turns] == ["Where are flags parsed?", "Flag parsing is in src/cli.py."]
    assert child.turns[1].tool_calls[0].summary == "argparse"
    assert root.parent_session_id is None and child.parent_session_id is None

    from_json = read(reader, "ses_05json")
    assert [s.session_id for s in from_json.subagents] == ["ses_06jchild"]
    assert [t.text for t in from_json.subagents[0].turns] == ["List the build backends.", "Only hatchling."]
    # The placeholder titles OpenCode gives new sessions are not titles.
    assert from_json.title is None and from_json.first_prompt == "Explain the build system."
    assert from_json.files_touched == ["pyproject.toml"]


def test_a_child_whose_root_is_missing_is_its_own_root_with_its_parent_id(tmp_path: Path) -> None:
    write_db(tmp_path / "opencode.db", [corpus().child])
    reader = OpenCodeReader(tmp_path)
    [ref] = reader.discover()
    orphan = reader.read(ref)
    assert (ref.key, orphan.parent_session_id) == ("ses_02child", "ses_01root")
    assert orphan.first_prompt == "Where are flags parsed?"


def test_a_session_in_both_generations_is_read_once_from_the_database(data_dir: Path) -> None:
    reader = OpenCodeReader(data_dir)
    assert [ref.key for ref in reader.discover()].count("ses_04both") == 1
    both = read(reader, "ses_04both")
    assert both.title == "Refactor config loading (database copy)"
    assert [t.text for t in both.turns] == ["Refactor config loading.", "Done, from the database."]
    # Positive control: without the database the JSON copy is there to be read.
    for name in ("opencode.db", "opencode.db-wal", "opencode.db-shm"):
        (data_dir / name).unlink(missing_ok=True)
    json_copy = read(OpenCodeReader(data_dir), "ses_04both")
    assert [t.text for t in json_copy.turns] == ["Refactor config loading.", "Done, from the JSON tree."]


def test_the_same_session_reads_the_same_from_either_generation(tmp_path: Path) -> None:
    sessions: Corpus = corpus()
    (tmp_path / "c").mkdir()
    write_db(tmp_path / "c" / "opencode.db", [sessions.root, sessions.child])
    write_json_tree(tmp_path / "b", [sessions.root, sessions.child])
    from_db = read(OpenCodeReader(tmp_path / "c"), "ses_01root")
    from_json = read(OpenCodeReader(tmp_path / "b"), "ses_01root")
    assert from_db.turns == from_json.turns
    assert (from_db.content_digest, from_db.size) == (from_json.content_digest, from_json.size)
    assert from_db.source_path != from_json.source_path


def test_an_unfinished_session_has_an_open_last_turn_and_a_finished_one_is_closed(data_dir: Path) -> None:
    reader = OpenCodeReader(data_dir)
    assert read(reader, "ses_03open").last_turn_closed is False
    assert read(reader, "ses_01root").last_turn_closed is True
    # A completed message with a tool part still running is open too.
    conn = sqlite3.connect(data_dir / "opencode.db")
    data = json.loads(conn.execute("SELECT data FROM message WHERE id = 'msg_03a1'").fetchone()[0])
    data["time"]["completed"] = T0 + 21_000
    conn.execute("UPDATE message SET data = ? WHERE id = 'msg_03a1'", (json.dumps(data),))
    conn.commit()
    assert read(reader, "ses_03open").last_turn_closed is False
    conn.execute("DELETE FROM part WHERE id = 'prt_03a1b'")
    conn.commit()
    conn.close()
    assert read(reader, "ses_03open").last_turn_closed is True


def test_the_database_is_read_while_a_writer_holds_it_open_in_wal_mode(data_dir: Path) -> None:
    db = data_dir / "opencode.db"
    reader = OpenCodeReader(data_dir)
    before = read(reader, "ses_01root")
    writer = sqlite3.connect(db, isolation_level=None)
    try:
        assert writer.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        writer.execute("BEGIN IMMEDIATE")
        insert_message(writer, "ses_01root", user("msg_01u3", T0 + 50_000, text("prt_01u3a", "Also update the docs.")))
        files_before = sorted(p.name for p in data_dir.iterdir())
        main_before = hashlib.sha256(db.read_bytes()).hexdigest()
        during = read(reader, "ses_01root")  # the writer's lock does not block a WAL reader
        assert during.turns == before.turns  # nor does it see uncommitted rows
        assert during.content_digest == before.content_digest
        # Read-only: no copy of the database, no checkpoint into the main file.
        assert sorted(p.name for p in data_dir.iterdir()) == files_before
        assert hashlib.sha256(db.read_bytes()).hexdigest() == main_before
        writer.execute("COMMIT")
        after = read(reader, "ses_01root")
    finally:
        writer.close()
    assert after.turns[-1].text == "Also update the docs."
    assert after.content_digest != before.content_digest and after.size == before.size + 2


def test_a_busy_database_is_retried_until_the_writer_lets_go(tmp_path: Path) -> None:
    write_db(tmp_path / "opencode.db", [corpus().root], wal=False)  # rollback journal: readers can be locked out
    writer = sqlite3.connect(tmp_path / "opencode.db", isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(1.2, lambda: writer.execute("COMMIT"))
    release.start()
    try:
        started = time.monotonic()
        [ref] = OpenCodeReader(tmp_path).discover()
        assert time.monotonic() - started > 1.0  # it waited past one busy timeout, then retried
        assert OpenCodeReader(tmp_path).read(ref).first_prompt == "Add a --verbose flag to the CLI."
    finally:
        release.join()
        writer.close()


def test_a_database_that_stays_locked_is_an_os_error_not_a_hang(tmp_path: Path) -> None:
    sessions = corpus()
    write_db(tmp_path / "opencode.db", [sessions.root, sessions.both_db], wal=False)
    write_json_tree(tmp_path, [sessions.both_json])
    reader = OpenCodeReader(tmp_path)
    refs = {ref.key: ref for ref in reader.discover()}
    assert set(refs) == {"ses_01root", "ses_04both"}
    writer = sqlite3.connect(tmp_path / "opencode.db", isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    try:
        # Nothing is listed, not even the JSON tree's older copy of ses_04both...
        assert list(reader.discover()) == []
        with pytest.raises(OSError, match="locked"):
            reader.read(refs["ses_04both"])
    finally:
        writer.close()
    # ...which would otherwise be read in place of the database's.
    assert read(reader, "ses_04both").turns[-1].text == "Done, from the database."


def test_an_older_schema_without_the_newer_columns_reads_the_same(tmp_path: Path) -> None:
    build_data_dir(tmp_path / "new")
    build_data_dir(tmp_path / "old", legacy_schema=True)
    columns = {r[1] for r in sqlite3.connect(tmp_path / "old" / "opencode.db").execute("PRAGMA table_info(session)")}
    assert "model" not in columns and "workspace_id" not in columns
    old = read(OpenCodeReader(tmp_path / "old"), "ses_01root")
    new = read(OpenCodeReader(tmp_path / "new"), "ses_01root")
    assert old.turns == new.turns and old.content_digest == new.content_digest
    assert [s.session_id for s in old.subagents] == ["ses_02child"]


def test_an_explicit_db_path_and_channel_databases_are_found(tmp_path: Path) -> None:
    elsewhere = tmp_path / "custom" / "my.db"
    elsewhere.parent.mkdir()
    write_db(elsewhere, [corpus().unfinished])
    assert list(OpenCodeReader(tmp_path / "data").discover()) == []
    [ref] = OpenCodeReader(tmp_path / "data", db_path=elsewhere).discover()
    assert (ref.key, ref.path) == ("ses_03open", str(elsewhere))

    channel = tmp_path / "data"
    channel.mkdir()
    write_db(channel / "opencode-dev.db", [corpus().both_db])
    assert [ref.key for ref in OpenCodeReader(channel).discover()] == ["ses_04both"]


def test_growth_changes_digest_and_size_and_an_identical_reread_does_not(data_dir: Path) -> None:
    reader = OpenCodeReader(data_dir)
    first, second = read(reader, "ses_01root"), read(reader, "ses_01root")
    assert first.fingerprint == second.fingerprint
    [ref1] = [r for r in reader.discover() if r.key == "ses_01root"]

    conn = sqlite3.connect(data_dir / "opencode.db")
    insert_message(
        conn,
        "ses_02child",
        assistant("msg_02a2", T0 + 60_000, "msg_02u1", text("prt_02a2a", "Also see src/flags.py.")),
    )
    conn.commit()
    conn.close()
    [ref2] = [r for r in reader.discover() if r.key == "ses_01root"]
    grown = reader.read(ref2)
    assert grown.content_digest != first.content_digest and grown.size == first.size + 2
    assert (ref2.size, ref2.mtime) > (ref1.size, ref1.mtime)

    # The JSON tree grows by files.
    json_first = read(reader, "ses_05json")
    new_part = {"id": "prt_05a1c", "sessionID": "ses_05json", "messageID": "msg_05a1", "type": "text", "text": "More."}
    (data_dir / "storage" / "part" / "msg_05a1" / "prt_05a1c.json").write_text(json.dumps(new_part))
    json_grown = read(reader, "ses_05json")
    assert json_grown.content_digest != json_first.content_digest and json_grown.size == json_first.size + 1
    assert json_grown.turns[1].text == "It builds with hatchling.\n\nMore."


def test_malformed_rows_and_files_are_listed_and_the_rest_is_read(data_dir: Path) -> None:
    conn = sqlite3.connect(data_dir / "opencode.db")
    conn.execute("UPDATE part SET data = '{truncated' WHERE id = 'prt_01a2c'")
    conn.commit()
    conn.close()
    bad_file = data_dir / "storage" / "part" / "msg_05a1" / "prt_05a1b.json"
    bad_file.write_text('{"id": "prt_05a1b",\n  "type": ')
    reader = OpenCodeReader(data_dir)
    root = read(reader, "ses_01root")
    assert root.malformed == [(f"{data_dir / 'opencode.db'}:part/prt_01a2c", 1)]
    assert root.turns[3].text == "" and len(root.turns[3].tool_calls) == 2  # the rest of the message survives
    json_session = read(reader, "ses_05json")
    assert json_session.malformed == [(str(bad_file), 2)]
    assert json_session.turns[1].tool_calls[0].files == ("pyproject.toml",)


def test_a_session_that_was_deleted_raises_os_error(data_dir: Path) -> None:
    reader = OpenCodeReader(data_dir)
    [ref] = [r for r in reader.discover() if r.key == "ses_03open"]
    assert reader.read(ref).session_id == "ses_03open"
    conn = sqlite3.connect(data_dir / "opencode.db")
    conn.execute("DELETE FROM part WHERE session_id = 'ses_03open'")
    conn.execute("DELETE FROM message WHERE session_id = 'ses_03open'")
    conn.execute("DELETE FROM session WHERE id = 'ses_03open'")
    conn.commit()
    conn.close()
    with pytest.raises(OSError):
        reader.read(ref)
    shutil.rmtree(data_dir / "storage")
    assert {r.key for r in reader.discover()} == {"ses_01root", "ses_04both"}
