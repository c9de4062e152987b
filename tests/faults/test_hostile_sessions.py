"""Drill 8: hostile session files (a 2 GB file, a zstd bomb, deeply nested and over-long JSON lines)
are skipped or cut with a reason shown in the status, in bounded memory, while the service stays up
and harvests the normal session beside them in the same run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import grpc
import pytest
import zstandard
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mnemo.harvest.v1 import harvest_service_pb2 as hpb
from mnemo_embed import HashEmbedder
from mnemo_harvest.readers.claude import ClaudeCodeReader
from mnemo_harvest.readers.codex import CodexReader
from mnemo_harvest.readers.lines import Limits, SessionRefused
from mnemo_harvest.readers.pi import PiReader
from tests.harvest.agents import ClaudeSession, claude_dir_name, conversation
from tests.harvest.harness import Harvest, register
from tests.helpers import Postgres, ids, start_stack

MIB = 1 << 20
GIB = 1 << 30
DEFAULTS = Limits()


def _backdate(path: Path) -> None:
    stamp = time.time() - 7200
    os.utime(path, (stamp, stamp))


def sparse_claude_file(projects: Path, cwd: str, size: int) -> str:
    """A Claude Code session file of `size` bytes that takes no disk: a hole, read back as zeros."""
    session_id = str(uuid.uuid4())
    path = projects / claude_dir_name(cwd) / f"{session_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        fh.truncate(size)
    _backdate(path)
    return session_id


def nested_line(depth: int) -> str:
    return "[" * depth + "]" * depth


def nested_claude_file(projects: Path, cwd: str, depth: int) -> str:
    """A session file whose one line is a list nested `depth` deep."""
    session_id = str(uuid.uuid4())
    path = projects / claude_dir_name(cwd) / f"{session_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nested_line(depth) + "\n")
    _backdate(path)
    return session_id


def codex_bomb(codex_home: Path, cwd: str, decompressed: int) -> tuple[str, Path]:
    """A Codex rollout `.jsonl.zst`: a real session_meta line, then `decompressed` bytes of zeros
    (a few tens of kilobytes on disk)."""
    thread_id = str(uuid.uuid4())
    path = codex_home / "sessions" / "2026" / "11" / "20" / f"rollout-2026-11-20T10-00-00-{thread_id}.jsonl.zst"
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"timestamp": "2026-11-20T10:00:00.000Z", "type": "session_meta", "payload": {"id": thread_id, "cwd": cwd}}
    zeros = bytes(MIB)
    with path.open("wb") as fh, zstandard.ZstdCompressor(level=1).stream_writer(fh) as out:
        out.write((json.dumps(meta) + "\n").encode())
        for _ in range(decompressed // MIB):
            out.write(zeros)
    _backdate(path)
    return thread_id, path


async def test_hostile_files_are_skipped_with_a_reason_while_a_normal_session_is_harvested(
    postgres: Postgres, tmp_path: Path
) -> None:
    home, codex_home = tmp_path / "claude", tmp_path / "codex"
    (home / "projects").mkdir(parents=True)
    codex_home.mkdir()
    stack = await start_stack(
        await postgres.create_database("hostile"),
        HashEmbedder(64),
        MNEMO_HARVEST_AGENTS="claude-code,codex",
        MNEMO_HARVEST_CLAUDE_DIR=str(home / "projects"),
        MNEMO_HARVEST_CODEX_HOME=str(codex_home),
        MNEMO_HARVEST_IDLE_S="600",
        MNEMO_HARVEST_INTERVAL_S="3600",
        MNEMO_DATA_DIR=str(tmp_path / "data"),
    )
    h = Harvest(stack, home)
    try:
        await h.run()  # the poller's first tick, on empty homes
        root = "/work/hostile-drill"
        (ws,) = await register(h, root)
        normal = conversation(h.projects, root, "ptarmigan").write()
        # A normal conversation with one 9 MiB line and one nested line in the middle.
        mixed = conversation(h.projects, f"{root}/mixed", "capercaillie")
        mixed.lines.insert(1, {"type": "user", "message": {"role": "user", "content": "x" * (9 * MIB)}})
        mixed.write()
        with mixed.path.open("a") as fh:
            fh.write(nested_line(100_000) + "\n")
        _backdate(mixed.path)
        huge = sparse_claude_file(h.projects, root, 2 * GIB)
        nested = nested_claude_file(h.projects, root, 100_000)
        bomb, _ = codex_bomb(codex_home, root, GIB)

        progress = {p.session_id: p for p in await h.run() if not p.done}
        assert progress[normal.session_id].outcome == "harvested"
        assert progress[mixed.session_id].outcome == "harvested"
        assert (progress[huge].outcome, progress[huge].skip_reason) == ("skipped", "too-large")
        assert "2147483648 bytes on disk" in progress[huge].detail
        assert "MNEMO_HARVEST_MAX_SESSION_BYTES" in progress[huge].detail
        assert (progress[bomb].outcome, progress[bomb].skip_reason) == ("skipped", "too-large")
        assert f"more than {DEFAULTS.max_session_bytes} bytes (decompressed)" in progress[bomb].detail
        assert (progress[nested].outcome, progress[nested].skip_reason) == ("skipped", "empty")
        assert (
            "1 lines refused" in progress[nested].detail and "nested deeper than 200 levels" in progress[nested].detail
        )

        # The status names every refusal, with why.
        status = await h.harvest.Status(hpb.StatusRequest())
        refused = {s.session_id: s.detail for agent in status.agents for s in agent.refused}
        assert set(refused) == {huge, bomb, nested, mixed.session_id}
        assert f"{mixed.session_id}.jsonl:2: longer than {DEFAULTS.max_line_bytes} bytes" in refused[mixed.session_id]
        assert f"{mixed.session_id}.jsonl:6: nested deeper than 200 levels" in refused[mixed.session_id]
        skipped = {agent.agent: dict(agent.skipped) for agent in status.agents}
        assert skipped["claude-code"] == {"too-large": 1, "empty": 1} and skipped["codex"] == {"too-large": 1}

        # The service is up; the normal sessions are memories (the mixed one without its hostile lines).
        async with grpc.aio.insecure_channel(stack.harvest.target) as channel:
            health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""))
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        assert ids(await h.clients.find(ws, "ptarmigan job mondays", mode="lexical"))
        assert ids(await h.clients.find(ws, "capercaillie job mondays", mode="lexical"))
        # Refused files are not read again until they change: the next run answers from the record.
        again = {p.session_id: p for p in await h.run() if not p.done}
        assert again[huge].outcome == again[bomb].outcome == "unchanged"
        assert again[huge].detail == progress[huge].detail
        assert again[normal.session_id].outcome == "unchanged"
    finally:
        await h.close()
        await stack.stop()


_PEAK = """
import json, sys, tracemalloc
from pathlib import Path
from mnemo_harvest.readers.claude import ClaudeCodeReader
from mnemo_harvest.readers.codex import CodexReader
from mnemo_harvest.readers.lines import SessionRefused

def status(key):
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(key + ":"))

warm_up, kind, target = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
# A normal read first: the redactor and the parsers set themselves up once per process.
ClaudeCodeReader([warm_up.parent.parent]).read(ClaudeCodeReader([warm_up.parent.parent]).ref_for(warm_up))
if kind == "codex":
    reader = CodexReader(target)
    (ref,) = list(reader.discover())
else:
    reader = ClaudeCodeReader([target.parent.parent])
    ref = reader.ref_for(target)
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # resets the peak (VmHWM) to the current resident size
before = status("VmRSS")
tracemalloc.start()
try:
    reader.read(ref)
    outcome = "read"
except SessionRefused as exc:
    outcome = exc.reason
_, traced = tracemalloc.get_traced_memory()
print(json.dumps({"rss_kib": before, "peak_kib": status("VmHWM"), "traced": traced, "outcome": outcome}))
"""


def _peak(warm_up: Path, kind: str, target: Path) -> dict:
    """Reads one session in a fresh interpreter at the default limits: the resident size's peak during
    the read (VmHWM after resetting it), and the peak of Python's own allocations (tracemalloc)."""
    out = subprocess.run(
        [sys.executable, "-c", _PEAK, str(warm_up), kind, str(target)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout)


def test_reading_hostile_files_stays_within_a_bounded_memory(tmp_path: Path) -> None:
    """The readers' own caps, not the engine's size check, bound memory: reading each hostile file
    raises the process's resident size by less than 64 MiB (one chunk, one line within the line cap,
    its parse), where reading the bomb or the 2 GB file whole would take a gigabyte or more."""
    projects = tmp_path / "projects"
    normal = conversation(projects, "/work/rss", "fulmar").write()
    huge = projects / claude_dir_name("/work/rss") / f"{sparse_claude_file(projects, '/work/rss', 2 * GIB)}.jsonl"
    nested = projects / claude_dir_name("/work/rss") / f"{nested_claude_file(projects, '/work/rss', 1_000_000)}.jsonl"
    long_line = ClaudeSession(projects, "/work/rss").user("y" * (7 * MIB)).assistant("ok").write()
    codex_home = tmp_path / "codex"
    codex_bomb(codex_home, "/work/rss", GIB)

    figures = {
        "a normal session (control)": _peak(normal.path, "claude", normal.path),
        "2 GiB sparse file": _peak(normal.path, "claude", huge),
        "1 GiB zstd bomb": _peak(normal.path, "codex", codex_home),
        "1,000,000-deep line": _peak(normal.path, "claude", nested),
        "7 MiB line (under the cap)": _peak(normal.path, "claude", long_line.path),
    }
    for name, figure in figures.items():
        grown = (figure["peak_kib"] - figure["rss_kib"]) / 1024
        traced = figure["traced"] / MIB
        print(f"{name}: resident +{grown:.1f} MiB, Python allocations peak {traced:.1f} MiB — {figure['outcome']}")
        assert grown < 64 and traced < 64, (name, figure)
    assert figures["2 GiB sparse file"]["outcome"].startswith("too large")
    assert figures["1 GiB zstd bomb"]["outcome"].startswith("too large")
    assert figures["1,000,000-deep line"]["outcome"] == "read"
    # Control of the measure itself: a 7 MiB line is held (and parsed) whole, and that shows.
    assert figures["7 MiB line (under the cap)"]["traced"] > 7 * MIB


# -- the readers' caps, each with its control --------------------------------------------------------


def test_a_plain_file_over_the_session_cap_is_refused_while_streaming(tmp_path: Path) -> None:
    """The engine refuses a file over the cap by its size; a file that grew past it after discovery
    (its ref says less) is refused by the reader after reading no more than the cap and a chunk."""
    session = conversation(tmp_path, "/work/cap", "shag")
    for n in range(400):
        session.user(f"line {n} of a long shag conversation").assistant("noted")
    session.write()
    size = session.path.stat().st_size
    assert 64 * 1024 < size < 1 * MIB
    reader = ClaudeCodeReader([tmp_path], Limits(max_session_bytes=64 * 1024))
    ref = reader.ref_for(session.path)
    with pytest.raises(SessionRefused, match=r"too large: .* holds more than 65536 bytes"):
        reader.read(ref)
    # Control: a cap just above the file's size reads it all.
    whole = ClaudeCodeReader([tmp_path], Limits(max_session_bytes=size + 1)).read(ref)
    assert whole.size == size and len(whole.turns) == 803 and whole.refused == []


def test_a_line_over_the_line_cap_is_left_out_and_named(tmp_path: Path) -> None:
    session = conversation(tmp_path, "/work/line", "eider")
    session.lines.insert(1, {"type": "user", "message": {"role": "user", "content": "z" * 4096}})
    session.write()
    capped = ClaudeCodeReader([tmp_path], Limits(max_line_bytes=2048)).read(
        ClaudeCodeReader([tmp_path]).ref_for(session.path)
    )
    assert capped.refused == [f"{session.path.name}:2: longer than 2048 bytes"]
    assert not any("zzzz" in t.text for t in capped.turns)
    assert any("eider" in t.text for t in capped.turns)
    # Control: under the default cap the line is a turn, and both reads digest the same bytes.
    whole = ClaudeCodeReader([tmp_path]).read(ClaudeCodeReader([tmp_path]).ref_for(session.path))
    assert whole.refused == [] and any("z" * 4096 in t.text for t in whole.turns)
    assert whole.fingerprint == capped.fingerprint


@pytest.mark.parametrize(
    ("depth", "refused"),
    [(150, False), (250, True), (100_000, True)],
    ids=["under-the-cap", "over-the-cap", "past-pythons-recursion-limit"],
)
def test_nesting_deeper_than_the_cap_is_refused_per_line(tmp_path: Path, depth: int, refused: bool) -> None:
    """Both ways a line can be too deep: parsed but deeper than the cap (walked), and deep enough that
    Python's json raises RecursionError. The session's other lines are read either way (pi's reader)."""
    folder = tmp_path / "--work-pi--"
    folder.mkdir()
    path = folder / f"2026-11-20T10-00-00_{uuid.uuid4()}.jsonl"
    header = {"type": "session", "version": 3, "id": str(uuid.uuid4()), "cwd": "/work/pi"}
    message = {
        "type": "message",
        "id": "a1",
        "parentId": None,
        "message": {"role": "user", "content": [{"type": "text", "text": "hello tern"}]},
    }
    nested = {"type": "custom", "data": json.loads(nested_line(150)) if depth == 150 else None}
    lines = [json.dumps(header), json.dumps(message), json.dumps(nested) if depth == 150 else nested_line(depth)]
    path.write_text("\n".join(lines) + "\n")
    reader = PiReader(tmp_path)
    session = reader.read(reader.ref_for(path))
    assert [t.text for t in session.turns] == ["hello tern"]
    if refused:
        assert session.refused == [f"{path.name}:3: nested deeper than 200 levels"]
    else:
        assert session.refused == []


def test_a_zstd_bomb_is_refused_after_the_cap_and_a_normal_zst_is_read(tmp_path: Path) -> None:
    thread, _ = codex_bomb(tmp_path, "/work/zst", 64 * MIB)
    reader = CodexReader(tmp_path, Limits(max_session_bytes=16 * MIB))
    (ref,) = [r for r in reader.discover() if r.key == thread]
    with pytest.raises(SessionRefused, match=r"more than 16777216 bytes \(decompressed\)"):
        reader.read(ref)
    # Control: the same file under a cap above its decompressed size is read (its zeros are one
    # line over the line cap, refused alone).
    roomy = CodexReader(tmp_path, Limits(max_session_bytes=128 * MIB))
    session = roomy.read(ref)
    assert session.size == 64 * MIB + len(
        json.dumps(
            {
                "timestamp": "2026-11-20T10:00:00.000Z",
                "type": "session_meta",
                "payload": {"id": thread, "cwd": "/work/zst"},
            }
        )
        + "\n"
    )
    assert session.refused == [f"{ref.path.rsplit('/', 1)[-1]}:2: longer than {DEFAULTS.max_line_bytes} bytes"]
