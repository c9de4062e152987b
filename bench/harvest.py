"""Harvest throughput: a generated corpus of Claude Code sessions through the real, in-process harvest service."""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
import warnings
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import BenchError, embedded_postgres, git_info, machine_info, percentile, print_run_footer, stack_env

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = "bench/results"
DEFAULT_SESSIONS = 1000
DEFAULT_SEED = 20261120
GROWN_FRACTION = 0.10
# The production model's dimension, so pgvector stores and indexes vectors of the real size.
EMBED_DIMENSION = 384
IDLE_S = 600
MB = 1_000_000

# Registered workspace roots and the directories under them that sessions run in; none exists on
# disk, which placement does not need (tests/harvest does the same).
ROOTS: dict[str, tuple[str, ...]] = {
    "/home/dev/src/acme-api": ("", "services/billing", "services/auth", "migrations"),
    "/home/dev/src/acme-web": ("", "packages/ui", "packages/checkout"),
    "/home/dev/src/infra": ("", "terraform/prod"),
}
CLI_VERSION = "2.1.173"
MODEL = "claude-sonnet-4-5-20250929"
VOCABULARY = (
    "the a to of and in for is on that with this it as be by from at we are not should can will "
    "cache request handler queue worker retry timeout config schema migration index query column table "
    "service client server token session build test fixture deploy rollout canary lock backup cron job "
    "error exception stack trace log level metric latency throughput budget limit page cursor offset "
    "function method class module package import export type interface field value default flag option "
    "branch commit merge rebase diff patch review release version tag pipeline runner image container "
    "pod node cluster ingress secret volume mount path file directory parser encoder decoder payload "
    "invoice customer account payment refund ledger balance currency webhook event subscriber stream "
    "async await thread pool connection transaction rollback commit isolation deadlock vacuum analyze "
    "renders component state props hook effect router layout style theme button form input validation"
)
WORDS = VOCABULARY.split()
TOOLS = ("Bash", "Read", "Edit", "Grep", "Glob", "Write", "TodoWrite")
TOOL_WEIGHTS = (30, 30, 18, 10, 4, 4, 4)


# -- corpus -----------------------------------------------------------------------------------


class TextPools:
    """Sentences and code-ish lines drawn once from a seeded RNG; sessions sample from them (fast)."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        self.sentences = [self._sentence(rng) for _ in range(4000)]
        self.code = [self._code_line(rng) for _ in range(6000)]
        self.idents = [self._ident(rng) for _ in range(800)]

    @staticmethod
    def _ident(rng: random.Random) -> str:
        return "_".join(rng.choice(WORDS[20:]) for _ in range(rng.randint(1, 3)))

    def _sentence(self, rng: random.Random) -> str:
        words = [rng.choice(WORDS) for _ in range(rng.randint(6, 22))]
        return " ".join(words).capitalize() + rng.choice((".", ".", ".", "?", ":"))

    def _code_line(self, rng: random.Random) -> str:
        a, b, c = (self._ident(rng) for _ in range(3))
        n = rng.randint(0, 999)
        return rng.choice(
            (
                f"    {a} = {b}({c}, {n})",
                f"def {a}(self, {b}: str, {c}: int = {n}) -> dict[str, Any]:",
                f"        if {a} is None or {b} > {n}:",
                f"            raise {b.title().replace('_', '')}Error(f'{a} {{{c}}}')",
                f"2026-11-20 10:{n % 60:02d}:{n % 57:02d},{n:03d} INFO {a}: {b} took {n} ms",
                f"tests/test_{a}.py::test_{b}_{c} PASSED [{n % 100:3d}%]",
                f"src/{a}/{b}.py:{n}:    return {c}.{a}()",
                f"from {a}.{b} import {c}",
                f"  {a}: {n}  # {b}",
                f"SELECT {a}, {b} FROM {c} WHERE id = {n};",
            )
        )


@dataclass
class Generated:
    """What was written for one session: enough to append to it later and to relate timings to size."""

    session_id: str
    cwd: str
    path: Path
    parent: str | None
    clock: datetime
    subagent: bool = False
    images: int = 0
    marked: int = 0
    secrets: int = 0
    prompts: int = 0
    tool_calls: int = 0

    def size(self) -> int:
        """Bytes of every file the session consists of (main transcript and subagent transcripts)."""
        total = self.path.stat().st_size
        folder = self.path.with_suffix("") / "subagents"
        if folder.exists():
            total += sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        return total


def claude_dir_name(cwd: str) -> str:
    # Claude Code's own lossy encoding of the working directory (docs/session-formats.md §1.1).
    return "".join(ch if ch.isalnum() else "-" for ch in cwd)


class ClaudeTranscript:
    """Writes the lines of one Claude Code 2.1.x session: split assistant messages, tool results
    with their structured `toolUseResult`, thinking, bookkeeping lines, images and subagents."""

    def __init__(self, pools: TextPools, rng: random.Random, state: Generated, sidechain: str = "") -> None:
        self.pools = pools
        self.rng = rng
        self.state = state
        self.sidechain = sidechain
        self.lines: list[dict[str, Any]] = []

    # -- small pieces

    def _id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def _tick(self, low: float = 1.0, high: float = 40.0) -> str:
        self.state.clock += timedelta(seconds=self.rng.uniform(low, high))
        return self.state.clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.state.clock.microsecond // 1000:03d}Z"

    def _prose(self, low: int, high: int) -> str:
        return " ".join(self.rng.choices(self.pools.sentences, k=self.rng.randint(low, high)))

    def _code(self, lines: int) -> str:
        return "\n".join(self.rng.choices(self.pools.code, k=lines))

    def _output_lines(self) -> int:
        # Heavy-tailed like real tool output: mostly a screenful, now and then a whole file or log.
        return max(1, min(1200, int(self.rng.lognormvariate(3.0, 1.3))))

    def _path(self) -> str:
        return f"{self.state.cwd}/src/{self.rng.choice(self.pools.idents)}/{self.rng.choice(self.pools.idents)}.py"

    def _envelope(self, kind: str, message: dict[str, Any], **extra: Any) -> dict[str, Any]:
        line_id = self._id()
        line: dict[str, Any] = {
            "parentUuid": self.state.parent,
            "isSidechain": bool(self.sidechain),
            "userType": "external",
            "cwd": self.state.cwd,
            "sessionId": self.state.session_id,
            "version": CLI_VERSION,
            "gitBranch": "main",
            "type": kind,
            "message": message,
            "uuid": line_id,
            "timestamp": self._tick(),
            **extra,
        }
        if self.sidechain:
            line["agentId"] = self.sidechain
        self.state.parent = line_id
        self.lines.append(line)
        return line

    # -- turns

    def prompt(self, text: str, image: bytes | None = None) -> None:
        if not self.sidechain:
            self.lines.append(
                {
                    "type": "file-history-snapshot",
                    "messageId": self._id(),
                    "snapshot": {"messageId": self._id(), "trackedFileBackups": {}, "timestamp": self._tick(0, 1)},
                    "isSnapshotUpdate": False,
                }
            )
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        if image is not None:
            data = base64.b64encode(image).decode()
            content.append({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}})
            self.state.images += 1
        self._envelope("user", {"role": "user", "content": content})
        self.state.prompts += 1

    def _assistant_lines(self, blocks: list[dict[str, Any]], stop_reason: str | None) -> None:
        """One API response, written the way Claude Code does: one line per content block."""
        message_id, request_id = f"msg_{self._id().replace('-', '')[:24]}", f"req_{self._id().replace('-', '')[:24]}"
        usage = {
            "input_tokens": self.rng.randint(3, 30),
            "cache_creation_input_tokens": self.rng.randint(0, 4000),
            "cache_read_input_tokens": self.rng.randint(10_000, 150_000),
            "output_tokens": self.rng.randint(20, 2000),
            "service_tier": "standard",
        }
        for i, block in enumerate(blocks):
            last = i == len(blocks) - 1
            message = {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [block],
                "stop_reason": stop_reason if last else None,
                "stop_sequence": None,
                "usage": usage,
            }
            self._envelope("assistant", message, requestId=request_id)

    def _tool_call(self) -> tuple[dict[str, Any], str | list[dict[str, Any]], dict[str, Any]]:
        """A tool_use block, the tool_result content and the structured toolUseResult Claude Code stores."""
        name = self.rng.choices(TOOLS, TOOL_WEIGHTS)[0]
        call_id = f"toolu_{self._id().replace('-', '')[:24]}"
        n = self._output_lines()
        if name == "Bash":
            command = self.rng.choice(
                (
                    f"uv run pytest tests/{self.rng.choice(self.pools.idents)} -x -q",
                    f"git diff --stat HEAD~{self.rng.randint(1, 5)}",
                    f"rg -n {self.rng.choice(self.pools.idents)} src/",
                    "docker compose logs --tail 200 api",
                    f"uv run ruff check {self.rng.choice(self.pools.idents)}",
                )
            )
            out = self._code(n)
            block_input: dict[str, Any] = {"command": command, "description": self._prose(1, 1)[:60]}
            structured: dict[str, Any] = {"stdout": out, "stderr": "", "interrupted": False, "isImage": False}
            result: str | list[dict[str, Any]] = out
        elif name == "Read":
            path = self._path()
            body = self._code(n)
            numbered = "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(body.split("\n"), 1))
            block_input = {"file_path": path}
            file_info = {"filePath": path, "content": body, "numLines": n, "startLine": 1, "totalLines": n}
            structured = {"type": "text", "file": file_info}
            result = numbered
        elif name in ("Edit", "Write"):
            path = self._path()
            old, new = self._code(self.rng.randint(1, 12)), self._code(self.rng.randint(1, 20))
            if name == "Edit":
                block_input = {"file_path": path, "old_string": old, "new_string": new}
                original = self._code(n)
                structured = {"filePath": path, "oldString": old, "newString": new, "originalFile": original}
                result = f"The file {path} has been updated. Here's the result of running `cat -n`:\n{new}"
            else:
                content = self._code(n)
                block_input = {"file_path": path, "content": content}
                structured = {"type": "create", "filePath": path, "content": content}
                result = f"File created successfully at: {path}"
        elif name in ("Grep", "Glob"):
            pattern = self.rng.choice(self.pools.idents)
            block_input = {"pattern": pattern, "path": f"{self.state.cwd}/src"}
            hits = self._code(min(n, 200))
            structured = {"mode": "content", "numFiles": min(n, 200), "content": hits}
            result = hits
        else:
            todos = [
                {"content": self._prose(1, 1)[:80], "status": "pending", "activeForm": "Working"}
                for _ in range(self.rng.randint(2, 7))
            ]
            block_input = {"todos": todos}
            structured = {"oldTodos": [], "newTodos": todos}
            result = "Todos have been modified successfully."
        self.state.tool_calls += 1
        return {"type": "tool_use", "id": call_id, "name": name, "input": block_input}, result, structured

    def tool_round(self) -> None:
        """Thinking and text, then one or a few parallel tool calls, then their results."""
        blocks: list[dict[str, Any]] = []
        if self.rng.random() < 0.3:
            signature = base64.b64encode(self.rng.randbytes(self.rng.randint(200, 600))).decode()
            blocks.append({"type": "thinking", "thinking": self._prose(2, 10), "signature": signature})
        if self.rng.random() < 0.7:
            blocks.append({"type": "text", "text": self._prose(1, 3)})
        calls = [self._tool_call() for _ in range(1 if self.rng.random() < 0.8 else self.rng.randint(2, 3))]
        self._assistant_lines(blocks + [c[0] for c in calls], "tool_use")
        for use, result, structured in calls:
            block = {"type": "tool_result", "tool_use_id": use["id"], "content": result, "is_error": False}
            self._envelope("user", {"role": "user", "content": [block]}, toolUseResult=structured)

    def subagent_round(self, agent_id: str, description: str, report: str) -> dict[str, Any]:
        """A Task call whose subagent wrote its own transcript; returns the call (for the meta file)."""
        call_id = f"toolu_{self._id().replace('-', '')[:24]}"
        use = {
            "type": "tool_use",
            "id": call_id,
            "name": "Task",
            "input": {"description": description, "prompt": self._prose(2, 6), "subagent_type": "general-purpose"},
        }
        self._assistant_lines([{"type": "text", "text": self._prose(1, 2)}, use], "tool_use")
        block = {"type": "tool_result", "tool_use_id": call_id, "content": [{"type": "text", "text": report}]}
        structured = {"agentId": agent_id, "status": "completed", "content": [{"type": "text", "text": report}]}
        self._envelope("user", {"role": "user", "content": [block]}, toolUseResult=structured)
        self.state.tool_calls += 1
        return use

    def answer(self, marked: list[str]) -> None:
        text = self._prose(2, 8)
        if self.rng.random() < 0.25:
            text += "\n\n```python\n" + self._code(self.rng.randint(3, 25)) + "\n```\n\n" + self._prose(1, 3)
        if marked:
            text += "\n\n" + "\n".join(marked)
            self.state.marked += len(marked)
        self._assistant_lines([{"type": "text", "text": text}], "end_turn")
        if not self.sidechain and self.rng.random() < 0.5:
            self.lines.append(
                {
                    "parentUuid": self.state.parent,
                    "isSidechain": False,
                    "cwd": self.state.cwd,
                    "sessionId": self.state.session_id,
                    "version": CLI_VERSION,
                    "type": "system",
                    "subtype": "turn_duration",
                    "durationMs": self.rng.randint(2000, 600_000),
                    "uuid": self._id(),
                    "timestamp": self._tick(0, 1),
                    "isMeta": False,
                }
            )

    def exchange(self, rounds: int, index: int) -> None:
        """One prompt and everything the agent did about it."""
        text = self._prose(1, 5)
        image = None
        if not self.sidechain and self.rng.random() < 0.007:
            # A pasted screenshot (about one session in twenty): base64 of incompressible bytes.
            image = self.rng.randbytes(self.rng.randint(30_000, 300_000))
        if not self.sidechain and self.rng.random() < 0.01:
            # A pasted credential, for redaction to find (a well-formed but invented key).
            text += f" The staging key is sk-ant-api03-{self._token(93)}AA if you need it."
            self.state.secrets += 1
        self.prompt(text, image)
        for _ in range(rounds):
            self.tool_round()
        marked = []
        if self.rng.random() < 0.04:
            marked.append(f"DECISION: {self._prose(1, 1)} (session {self.state.session_id[:8]}, prompt {index})")
        if self.rng.random() < 0.03:
            marked.append(f"LESSON: {self._prose(1, 1)} (session {self.state.session_id[:8]}, prompt {index})")
        self.answer(marked)

    def _token(self, n: int) -> str:
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        return "".join(self.rng.choices(alphabet, k=n))

    def rounds(self) -> int:
        return self.rng.choices((0, 1, 2, 3, 4, 6, 9, 14), (14, 18, 18, 14, 12, 10, 8, 6))[0]

    def dump(self) -> str:
        return "".join(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n" for line in self.lines)


def session_rng(seed: int, index: int, phase: str) -> random.Random:
    return random.Random(f"{seed}:{phase}:{index}")


def write_session(projects: Path, pools: TextPools, seed: int, index: int, cwds: list[str]) -> Generated:
    rng = session_rng(seed, index, "create")
    cwd = rng.choice(cwds)
    state = Generated(
        session_id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        cwd=cwd,
        path=Path(),
        parent=None,
        clock=datetime(2026, 9, 1, 8, tzinfo=UTC) + timedelta(minutes=rng.randint(0, 60 * 24 * 80)),
    )
    state.path = projects / claude_dir_name(cwd) / f"{state.session_id}.jsonl"
    transcript = ClaudeTranscript(pools, rng, state)
    # Prompts per session: heavy-tailed, from a quick question to a day-long session.
    prompts = max(1, min(150, int(rng.lognormvariate(1.5, 1.0))))
    if rng.random() < 0.1:
        transcript.lines.append({"type": "summary", "summary": transcript._prose(1, 1)[:70], "leafUuid": "x"})
    subagent_at = rng.randrange(prompts) if rng.random() < 0.05 else -1
    for i in range(prompts):
        if i == subagent_at:
            transcript.prompt(transcript._prose(1, 3))
            write_subagent(transcript, pools, rng, state)
            transcript.answer([])
        else:
            transcript.exchange(transcript.rounds(), i)
    state.path.parent.mkdir(parents=True, exist_ok=True)
    state.path.write_text(transcript.dump(), encoding="utf-8")
    return state


def write_subagent(parent: ClaudeTranscript, pools: TextPools, rng: random.Random, state: Generated) -> None:
    agent_id = rng.getrandbits(64).to_bytes(8, "big").hex()[:17]
    description = f"Survey {rng.choice(pools.idents)} usages"
    # The subagent's lines chain among themselves, then the parent resumes where it was.
    resume_at = state.parent
    state.parent = None
    child = ClaudeTranscript(pools, rng, state, sidechain=agent_id)
    child.prompt(child._prose(2, 6))
    for _ in range(rng.randint(2, 8)):
        child.tool_round()
    child.answer([])
    state.parent = resume_at
    report = child._prose(2, 6)
    use = parent.subagent_round(agent_id, description, report)
    folder = state.path.with_suffix("") / "subagents"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"agent-{agent_id}.jsonl").write_text(child.dump(), encoding="utf-8")
    meta = {"agentType": "general-purpose", "description": description, "toolUseId": use["id"]}
    (folder / f"agent-{agent_id}.meta.json").write_text(json.dumps(meta), encoding="utf-8")
    state.subagent = True


def grow_session(pools: TextPools, seed: int, index: int, state: Generated) -> None:
    """The user resumed the session: a few more prompts appended to the same file."""
    rng = session_rng(seed, index, "grow")
    transcript = ClaudeTranscript(pools, rng, state)
    for i in range(rng.randint(1, 4)):
        transcript.exchange(transcript.rounds(), 1000 + i)
    with state.path.open("a", encoding="utf-8") as fh:
        fh.write(transcript.dump())


def backdate(state: Generated, age_s: float) -> None:
    """Makes every file of the session look untouched for age_s seconds (idle, so harvestable)."""
    stamp = time.time() - age_s
    files = [state.path]
    folder = state.path.with_suffix("") / "subagents"
    if folder.exists():
        files += [p for p in folder.rglob("*") if p.is_file()]
    for path in files:
        os.utime(path, (stamp, stamp))


def all_cwds() -> list[str]:
    return [f"{root}/{sub}".rstrip("/") for root, subs in ROOTS.items() for sub in subs]


def generate_corpus(projects: Path, sessions: int, seed: int) -> tuple[list[Generated], float]:
    started = time.perf_counter()
    pools = TextPools(seed)
    cwds = all_cwds()
    corpus = []
    written = 0
    for index in range(sessions):
        state = write_session(projects, pools, seed, index, cwds)
        # Idle for one hour to a week: well past MNEMO_HARVEST_IDLE_S.
        backdate(state, session_rng(seed, index, "age").uniform(3600, 7 * 86400))
        corpus.append(state)
        written += state.size()
        if (index + 1) % 100 == 0 or index + 1 == sessions:
            print(f"  {index + 1}/{sessions} sessions written ({written / MB:.1f} MB)", flush=True)
    return corpus, time.perf_counter() - started


def corpus_stats(corpus: list[Generated], sizes: dict[str, int]) -> dict[str, Any]:
    values = sorted(sizes.values())
    return {
        "sessions": len(corpus),
        "bytes": sum(values),
        "mb": sum(values) / MB,
        "size_bytes": {
            "min": values[0],
            "p50": percentile(values, 50),
            "p90": percentile(values, 90),
            "p99": percentile(values, 99),
            "max": values[-1],
            "mean": statistics.fmean(values),
        },
        "prompts": sum(s.prompts for s in corpus),
        "tool_calls": sum(s.tool_calls for s in corpus),
        "sessions_with_images": sum(1 for s in corpus if s.images),
        "images": sum(s.images for s in corpus),
        "sessions_with_subagents": sum(1 for s in corpus if s.subagent),
        "decision_lesson_lines": sum(s.marked for s in corpus),
        "planted_secrets": sum(s.secrets for s in corpus),
        "sessions_per_cwd": dict(sorted(Counter(s.cwd for s in corpus).items())),
    }


# -- offline phases ---------------------------------------------------------------------------


def offline_phases(projects: Path, scratch: Path, max_content_bytes: int) -> dict[str, Any]:
    """The CPU-bound steps of a harvest, timed one by one on the corpus without the stack: what is
    left of the cold run's wall time is ingest's write (SQL, chunk rows, audit), gRPC and the
    embedding worker competing for the same cores."""
    from mnemo_embed import HashEmbedder, chunk_text
    from mnemo_harvest.archive import Archive
    from mnemo_harvest.readers.claude import ClaudeCodeReader
    from mnemo_harvest.render import render_transcript, session_title
    from mnemo_redact import redact

    reader = ClaudeCodeReader([projects])
    embedder = HashEmbedder(EMBED_DIMENSION)
    archive = Archive(scratch, 1 << 40, 3650.0)
    seconds: Counter[str] = Counter()
    started = time.perf_counter()
    refs = list(reader.discover())
    seconds["discover"] = time.perf_counter() - started
    transcript_bytes = 0
    # The first session pays for imports and compiled patterns: handled once, untimed.
    for ref in refs[:1]:
        session = reader.read(ref)
        redact(render_transcript(session, max_content_bytes))
        archive.write(session)
    for i, ref in enumerate(refs, start=1):
        t0 = time.perf_counter()
        session = reader.read(ref)
        t1 = time.perf_counter()
        rendered = render_transcript(session, max_content_bytes)
        t2 = time.perf_counter()
        content = redact(rendered).text
        t3 = time.perf_counter()
        archive.write(session)
        t4 = time.perf_counter()
        # What ingest does to the same content before its SQL: redact again, then chunk.
        redact(content)
        t5 = time.perf_counter()
        chunk_text(session_title(session), content, embedder.count_tokens, embedder.max_tokens)
        t6 = time.perf_counter()
        for phase, spent in (
            ("read", t1 - t0),
            ("render", t2 - t1),
            ("redact", t3 - t2),
            ("archive", t4 - t3),
            ("ingest_redact", t5 - t4),
            ("ingest_chunk", t6 - t5),
        ):
            seconds[phase] += spent
        transcript_bytes += len(content.encode())
        if i % 250 == 0:
            print(f"  {i}/{len(refs)} sessions ({time.perf_counter() - started:.0f} s)", flush=True)
    shutil.rmtree(scratch, ignore_errors=True)
    return {
        "sessions": len(refs),
        "transcript_bytes": transcript_bytes,
        "seconds": dict(seconds),
        "total_s": sum(seconds.values()),
    }


# -- the stack and the timed runs -------------------------------------------------------------


@dataclass
class RunResult:
    """One `Run` RPC, as the client saw it, and what it left in the database."""

    name: str
    wall_s: float
    first_progress_s: float
    after_last_s: float
    progress: list[tuple[str, str, str, float]] = field(default_factory=list)  # id, outcome, detail, gap
    totals: dict[str, int] = field(default_factory=dict)
    stored_bytes: int = 0
    versions_written: int = 0
    extracted_written: int = 0
    chunks_pending_at_end: int = 0
    embed_drain_s: float = 0.0


async def database_counts(conn: Any) -> dict[str, int]:
    row = await conn.fetchrow(
        """
        SELECT count(*) AS versions, coalesce(sum(octet_length(v.content)), 0) AS bytes
        FROM memory_versions v JOIN memories m ON m.id = v.memory_id
        WHERE m.kind = 'session'
        """
    )
    extracted = await conn.fetchval("SELECT count(*) FROM memories WHERE kind IN ('decision', 'lesson')")
    pending = await conn.fetchval("SELECT count(*) FROM embed_queue WHERE NOT failed")
    return {"versions": row["versions"], "bytes": row["bytes"], "extracted": extracted, "pending": pending}


async def drain_embeddings(conn: Any, timeout_s: float = 1800.0) -> float:
    """Waits until the embedding worker has caught up, so the next run does not compete with it."""
    started = time.perf_counter()
    last_print = started
    while (pending := await conn.fetchval("SELECT count(*) FROM embed_queue WHERE NOT failed")) > 0:
        now = time.perf_counter()
        if now - started > timeout_s:
            raise BenchError(f"{pending} chunks still pending after {timeout_s:.0f} s")
        if now - last_print > 5:
            print(f"  … waiting for the embedding worker: {pending} chunks pending", flush=True)
            last_print = now
        await asyncio.sleep(0.2)
    return time.perf_counter() - started


async def timed_run(stub: Any, conn: Any, name: str) -> RunResult:
    from mnemo.harvest.v1 import harvest_service_pb2 as hpb

    before = await database_counts(conn)
    print(f"{name} run …", flush=True)
    started = time.perf_counter()
    last = started
    first: float | None = None
    result = RunResult(name, 0.0, 0.0, 0.0)
    async for progress in stub.Run(hpb.RunRequest(), timeout=3600):
        now = time.perf_counter()
        if progress.done:
            result.totals = {
                "total": progress.total,
                "harvested": progress.harvested,
                "skipped": progress.skipped,
                "failed": progress.failed,
            }
            result.after_last_s = now - last
            continue
        if first is None:
            first = now - started
        result.progress.append((progress.session_id, progress.outcome, progress.detail, now - last))
        last = now
        if progress.index % 100 == 0:
            rate = progress.index / (now - started)
            print(f"  {progress.index}/{progress.total} sessions ({rate:.1f}/s)", flush=True)
    result.wall_s = time.perf_counter() - started
    result.first_progress_s = first or 0.0
    after = await database_counts(conn)
    result.stored_bytes = after["bytes"] - before["bytes"]
    result.versions_written = after["versions"] - before["versions"]
    result.extracted_written = after["extracted"] - before["extracted"]
    result.chunks_pending_at_end = after["pending"]
    print(f"  {len(result.progress)} sessions in {result.wall_s:.1f} s", flush=True)
    result.embed_drain_s = await drain_embeddings(conn)
    return result


def move_into(staging: Path, projects: Path, corpus: list[Generated]) -> None:
    """Renames the corpus into the watched directory in one go; rename keeps the backdated mtimes."""
    for project in sorted(staging.iterdir()):
        project.rename(projects / project.name)
    for state in corpus:
        state.path = projects / state.path.relative_to(staging)


async def run_stack(
    home: Path, staging: Path, corpus: list[Generated], seed: int, grown_fraction: float
) -> dict[str, Any]:
    import asyncpg
    import grpc

    from mnemo.harvest.v1 import harvest_service_pb2 as hpb
    from mnemo.harvest.v1 import harvest_service_pb2_grpc as hgrpc
    from mnemo.ingest.v1 import ingest_service_pb2 as ipb
    from mnemo.ingest.v1 import ingest_service_pb2_grpc as igrpc
    from mnemo_embed import HashEmbedder
    from mnemo_server.stack import Stack, StackConfig

    projects = home / "projects"
    projects.mkdir(parents=True)
    print("Starting embedded PostgreSQL …", flush=True)
    with embedded_postgres() as dsn:
        env = stack_env(dsn)
        env.update(
            {
                "MNEMO_EMBEDDER": "hash",
                "MNEMO_HARVEST_AGENTS": "claude-code",
                "MNEMO_HARVEST_CLAUDE_DIR": str(projects),
                "MNEMO_HARVEST_IDLE_S": str(IDLE_S),
                # The poller ticks once at start-up, then never again during the benchmark.
                "MNEMO_HARVEST_INTERVAL_S": "86400",
                "MNEMO_DATA_DIR": str(home / "data"),
            }
        )
        embedder = HashEmbedder(EMBED_DIMENSION)
        stack = Stack(StackConfig.from_env(env), embedder=embedder)
        print(f"Starting ingest, search, harvest and gateway (embedder {embedder.model}: no model inference) …")
        await stack.start()
        channel = None
        try:
            await stack.after_start()
            channel = grpc.aio.insecure_channel(stack.harvest.target)
            stub = hgrpc.HarvestServiceStub(channel)
            async with grpc.aio.insecure_channel(stack.ingest.target) as ingest_channel:
                ingest = igrpc.IngestServiceStub(ingest_channel)
                for root in ROOTS:
                    await ingest.AddWorkspace(ipb.AddWorkspaceRequest(root_path=root), timeout=30)
            # The poller's first tick began with the stack, on an empty directory; runs are
            # serialised, so this one returns only after that tick is over.
            async for _ in stub.Run(hpb.RunRequest(), timeout=600):
                pass
            move_into(staging, projects, corpus)
            conn = await asyncpg.connect(stack.dsn)
            try:
                cold = await timed_run(stub, conn, "cold")
                unchanged = await timed_run(stub, conn, "unchanged")
                picked = sorted(
                    random.Random(f"{seed}:grow-pick").sample(range(len(corpus)), k=grown_count(corpus, grown_fraction))
                )
                print(f"Appending turns to {len(picked)} sessions …", flush=True)
                grown_sizes_before = {corpus[i].session_id: corpus[i].size() for i in picked}
                pools = TextPools(seed)
                for i in picked:
                    grow_session(pools, seed, i, corpus[i])
                    backdate(corpus[i], 1800)
                grown = await timed_run(stub, conn, "grown")
                status = await stub.Status(hpb.StatusRequest(), timeout=30)
            finally:
                await conn.close()
        finally:
            if channel is not None:
                await channel.close()
            print("Stopping the stack …", flush=True)
            await stack.stop()
    return {
        "runs": [cold, unchanged, grown],
        "grown_sessions": len(picked),
        "grown_bytes_appended": sum(corpus[i].size() for i in picked) - sum(grown_sizes_before.values()),
        "archive_bytes": status.archive_bytes,
        "stack_env": {k: v for k, v in env.items() if k != "MNEMO_DATABASE_URL"},
        "embedder": embedder.model,
        "max_content_bytes": stack.config.ingest.max_content_bytes,
    }


def grown_count(corpus: list[Generated], fraction: float) -> int:
    return max(1, round(len(corpus) * fraction))


# -- reporting --------------------------------------------------------------------------------

DERIVED = ("harvested", "new_version")


def latency_summary(gaps_s: list[float]) -> dict[str, Any] | None:
    if not gaps_s:
        return None
    ms = [gap * 1000 for gap in gaps_s]
    return {
        "sessions": len(ms),
        "p50": percentile(ms, 50),
        "p95": percentile(ms, 95),
        "max": max(ms),
        "mean": statistics.fmean(ms),
    }


def summarise_run(run: RunResult, sizes: dict[str, int]) -> dict[str, Any]:
    outcomes = Counter(outcome for _, outcome, _, _ in run.progress)
    derived = [(sid, gap) for sid, outcome, _, gap in run.progress if outcome in DERIVED]
    # The first message also carries discovery; every later gap is one session's own time.
    later = run.progress[1:]
    read_bytes = sum(sizes[sid] for sid, _ in derived)
    sessions = len(run.progress)
    return {
        "sessions": sessions,
        "outcomes": dict(outcomes),
        "totals_reported": run.totals,
        "derived": len(derived),
        "wall_s": run.wall_s,
        "sessions_per_s": sessions / run.wall_s,
        "derived_per_s": len(derived) / run.wall_s,
        "source_bytes_read": read_bytes,
        "source_mb_per_s": read_bytes / MB / run.wall_s,
        "stored_transcript_bytes": run.stored_bytes,
        "stored_mb_per_s": run.stored_bytes / MB / run.wall_s,
        "session_versions_written": run.versions_written,
        "extracted_memories_written": run.extracted_written,
        "first_progress_s": run.first_progress_s,
        "after_last_session_s": run.after_last_s,
        "latency_ms": latency_summary([gap for _, outcome, _, gap in later if outcome in DERIVED]),
        "unchanged_latency_ms": latency_summary([gap for _, outcome, _, gap in later if outcome == "unchanged"]),
        "chunks_pending_at_end": run.chunks_pending_at_end,
        "embedding_drain_after_run_s": run.embed_drain_s,
        "skipped_or_failed": [
            {"session_id": sid, "outcome": outcome, "detail": detail}
            for sid, outcome, detail, _ in run.progress
            if outcome in ("failed", "skipped")
        ][:20],
    }


def expectation_warnings(report: dict[str, Any]) -> list[str]:
    n = report["corpus"]["sessions"]
    grown = report["config"]["grown_sessions"]
    expected = {
        "cold": {"harvested": n},
        "unchanged": {"unchanged": n},
        "grown": {"new_version": grown, "unchanged": n - grown},
    }
    return [
        f"{name} run: outcomes {report['runs'][name]['outcomes']}, expected {want}"
        for name, want in expected.items()
        if {k: v for k, v in report["runs"][name]["outcomes"].items() if v} != {k: v for k, v in want.items() if v}
    ]


def print_report(report: dict[str, Any]) -> None:
    corpus = report["corpus"]
    runs = report["runs"]
    line = "-" * 100
    print()
    print(
        f"Harvest throughput: {corpus['sessions']} generated Claude Code sessions, {corpus['mb']:.1f} MB "
        f"(median {corpus['size_bytes']['p50'] / 1000:.0f} KB, max {corpus['size_bytes']['max'] / 1000:.0f} KB)"
    )
    print(f"embedder: {report['config']['embedder']} (hashing, no model inference); one Run RPC per row")
    print(line)
    header = (
        f"{'run':<11}{'sessions':>9}{'derived':>9}{'wall s':>9}{'sessions/s':>12}{'source MB/s':>13}"
        f"{'stored MB/s':>13}{'p50 ms':>9}{'p95 ms':>9}"
    )
    print(header)
    for name, r in runs.items():
        # Latency of the sessions the run was about: the derived ones, else the unchanged ones.
        latency = r["latency_ms"] or r["unchanged_latency_ms"] or {"p50": float("nan"), "p95": float("nan")}
        print(
            f"{name:<11}{r['sessions']:>9}{r['derived']:>9}{r['wall_s']:>9.1f}{r['sessions_per_s']:>12.1f}"
            f"{r['source_mb_per_s']:>13.2f}{r['stored_mb_per_s']:>13.3f}"
            f"{latency['p50']:>9.1f}{latency['p95']:>9.1f}"
        )
    print(line)
    print(
        "source MB/s: session file bytes read (derived sessions only) per wall second; stored MB/s: rendered "
        "transcript bytes stored; p50/p95: per derived session (per unchanged session in the unchanged run)"
    )
    cold = runs["cold"]
    print(
        f"cold: read {cold['source_bytes_read'] / MB:.1f} MB of session files, stored "
        f"{cold['stored_transcript_bytes'] / MB:.2f} MB of rendered transcript "
        f"({cold['stored_transcript_bytes'] / max(1, cold['source_bytes_read']):.1%} of the source) and "
        f"{cold['extracted_memories_written']} DECISION/LESSON candidates; discovery + first session "
        f"{cold['first_progress_s']:.2f} s; embedding worker caught up {cold['embedding_drain_after_run_s']:.1f} s "
        "after the run"
    )
    grown = runs["grown"]
    print(
        f"grown: {report['config']['grown_sessions']} sessions grew by "
        f"{report['grown_bytes_appended'] / MB:.1f} MB; {grown['derived']} new versions, "
        f"{grown['outcomes'].get('unchanged', 0)} sessions unchanged"
    )
    phases = report.get("offline_phases")
    if phases:
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in sorted(phases["seconds"].items(), key=lambda kv: -kv[1]))
        share = phases["total_s"] / cold["wall_s"]
        print(f"offline CPU phases (no stack, one thread): {parts}")
        print(
            f"  = {phases['total_s']:.1f} s, {share:.0%} of the cold run's wall time; the rest is ingest's "
            "SQL, gRPC and the embedding worker"
        )
    print_run_footer(report)
    for warning in report["warnings"]:
        print(f"WARNING: {warning}")


def plot(report: dict[str, Any], latencies: dict[str, list[tuple[int, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    for name, color in (("cold", "tab:blue"), ("grown", "tab:orange")):
        points = latencies.get(name, [])
        if points:
            left.scatter(
                [s / 1000 for s, _ in points], [ms for _, ms in points], s=6, alpha=0.5, color=color, label=name
            )
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("session size on disk (KB)")
    left.set_ylabel("time for the session (ms, gap between progress messages)")
    left.set_title("Per-session harvest time vs size")
    left.legend()
    cold = report["runs"]["cold"]
    elapsed = latencies.get("cold_elapsed", [])
    right.plot([t for _, t in elapsed], [i for i, _ in elapsed], color="tab:blue")
    right.set_xlabel("seconds since the Run call")
    right.set_ylabel("sessions done")
    right.set_title(f"Cold run: {cold['sessions_per_s']:.1f} sessions/s, {cold['source_mb_per_s']:.1f} MB/s source")
    commit = (report["git"]["commit"] or "")[:12]
    fig.suptitle(
        f"Mnemo {commit} · {report['corpus']['sessions']} sessions, {report['corpus']['mb']:.0f} MB · "
        f"embedder {report['config']['embedder']}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- entry point ------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench.harvest",
        description="Harvest throughput on generated Claude Code sessions (in-process stack, hash embedder).",
    )
    parser.add_argument("--sessions", type=int, default=DEFAULT_SESSIONS, metavar="N", help="sessions to generate")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"corpus seed (default {DEFAULT_SEED})")
    parser.add_argument(
        "--grow", type=float, default=GROWN_FRACTION, metavar="F", help="fraction of sessions grown (default 0.1)"
    )
    parser.add_argument(
        "--out", default=DEFAULT_OUT, help=f"results directory; relative paths are from the repo root ({DEFAULT_OUT})"
    )
    parser.add_argument("--no-phases", action="store_true", help="skip the offline timing of read/render/redact")
    parser.add_argument("--keep", action="store_true", help="keep the generated home directory (its path is printed)")
    parser.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    if args.sessions < 1:
        parser.error("--sessions must be at least 1")
    if not 0 < args.grow <= 1:
        parser.error("--grow must be in (0, 1]")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else list(argv))
    started = time.perf_counter()
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    load_before = os.getloadavg()
    git = git_info()
    out = (REPO_ROOT / args.out).resolve()
    # A short path: the embedded PostgreSQL's socket lives under the temp dir too.
    home = Path(tempfile.mkdtemp(prefix="mnemo-hb-"))
    try:
        from mnemo_ingest.settings import IngestSettings
        from mnemo_platform import configure_logging, load

        configure_logging(args.log_level, "auto")
        staging = home / "staging"
        print(f"Generating {args.sessions} Claude Code sessions in {home} (seed {args.seed}) …", flush=True)
        corpus, generation_s = generate_corpus(staging, args.sessions, args.seed)
        sizes = {s.session_id: s.size() for s in corpus}
        phases = None
        if not args.no_phases:
            print("Timing read, render, redact, archive and chunking offline …", flush=True)
            phases = offline_phases(staging, home / "scratch", load(IngestSettings, os.environ).max_content_bytes)
        run = asyncio.run(run_stack(home, staging, corpus, args.seed, args.grow))
        grown_sizes = {s.session_id: s.size() for s in corpus}
        cold, unchanged, grown = run["runs"]
        report: dict[str, Any] = {
            "benchmark": "harvest-throughput",
            "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
            "git": git,
            "machine": machine_info(),
            "config": {
                "sessions": args.sessions,
                "seed": args.seed,
                "grown_fraction": args.grow,
                "grown_sessions": run["grown_sessions"],
                "agents": ["claude-code"],
                "embedder": run["embedder"],
                "idle_s": IDLE_S,
                "max_content_bytes": run["max_content_bytes"],
                "roots": {root: [f"{root}/{sub}".rstrip("/") for sub in subs] for root, subs in ROOTS.items()},
                "stack_env": run["stack_env"],
            },
            "corpus": {**corpus_stats(corpus, sizes), "generation_s": generation_s},
            "grown_bytes_appended": run["grown_bytes_appended"],
            "archive_bytes": run["archive_bytes"],
            "runs": {
                "cold": summarise_run(cold, sizes),
                "unchanged": summarise_run(unchanged, sizes),
                "grown": summarise_run(grown, grown_sizes),
            },
            "offline_phases": phases,
            "definitions": {
                "sessions_per_s": "sessions the run reported on (every session discovered) / wall time of the Run RPC",
                "source_mb_per_s": "bytes of the session files (main + subagent transcripts) of the sessions "
                "written as a new memory or version / wall time; 1 MB = 10^6 bytes",
                "stored_mb_per_s": "UTF-8 bytes of session memory versions the run added (rendered, redacted "
                "transcripts, from PostgreSQL) / wall time",
                "latency_ms": "time between consecutive progress messages, for sessions written; the first "
                "session is left out because its gap also holds discovery",
                "embedding_drain_after_run_s": "time after the run until no chunk was pending; the next run "
                "starts only then",
                "offline_phases": "the harvest's CPU-bound steps timed one by one on the same corpus before "
                "the stack starts, one thread, files in the page cache",
            },
        }
        report["warnings"] = expectation_warnings(report)
        report["duration_s"] = time.perf_counter() - started
        report["machine"]["load_average_before"] = [round(x, 2) for x in load_before]
        report["machine"]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
        out.mkdir(parents=True, exist_ok=True)
        (out / "harvest.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        latencies = {
            name: [(table[sid], gap * 1000) for sid, outcome, _, gap in r.progress[1:] if outcome in DERIVED]
            for name, r, table in (("cold", cold, sizes), ("grown", grown, grown_sizes))
        }
        elapsed, clock = [], cold.first_progress_s - (cold.progress[0][3] if cold.progress else 0.0)
        for i, (_, _, _, gap) in enumerate(cold.progress, start=1):
            clock += gap
            elapsed.append((i, clock))
        plot(report, {**latencies, "cold_elapsed": elapsed}, out / "harvest.png")
        print_report(report)
        print(f"results: {out / 'harvest.json'}, {out / 'harvest.png'}")
        return 1 if report["warnings"] else 0
    except BenchError as exc:
        print(f"harvest: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("harvest: interrupted", file=sys.stderr)
        return 130
    finally:
        if args.keep:
            print(f"kept: {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
