"""Harvest end to end: fake agent homes → the real harvest service → ingest → searchable memory."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import grpc
import pytest
import zstandard

from mnemo.common.v1 import common_pb2
from mnemo.harvest.v1 import harvest_service_pb2 as hpb
from mnemo.harvest.v1 import harvest_service_pb2_grpc as hgrpc
from mnemo.ingest.v1 import ingest_service_pb2 as ipb
from mnemo.search.v1 import search_service_pb2 as spb
from mnemo_cli.stack import Stack
from mnemo_embed import HashEmbedder
from mnemo_harvest.summarize import PROMPT_VERSION
from tests.harvest.agents import ClaudeSession, conversation
from tests.harvest.fake_llm import fake_llm
from tests.helpers import Clients, Postgres, ids, start_stack


class Harvest:
    """A stack whose harvest service reads a fake Claude Code home, with clients to drive it."""

    def __init__(self, stack: Stack, home: Path) -> None:
        self.stack = stack
        self.home = home
        self.clients = Clients(stack)
        self._channel = grpc.aio.insecure_channel(stack.harvest.target)
        self.harvest = hgrpc.HarvestServiceStub(self._channel)

    @property
    def projects(self) -> Path:
        return self.home / "projects"

    async def run(self, ignore_idle: bool = False) -> list[hpb.RunProgress]:
        return [p async for p in self.harvest.Run(hpb.RunRequest(ignore_idle=ignore_idle))]

    async def outcome(self, session_id: str, ignore_idle: bool = False) -> hpb.RunProgress:
        for progress in await self.run(ignore_idle):
            if progress.session_id == session_id:
                return progress
        raise AssertionError(f"session {session_id} was not seen by the run")

    async def sessions_in(self, workspace: str) -> list[common_pb2.Memory]:
        listed = await self.clients.search.ListMemories(
            spb.ListMemoriesRequest(
                workspace=workspace, filter=common_pb2.MemoryFilter(kinds=[common_pb2.MEMORY_KIND_SESSION])
            )
        )
        return list(listed.memories)

    async def session_in(self, workspace: str) -> common_pb2.Memory:
        """The workspace's only session memory, with its content."""
        (listed,) = await self.sessions_in(workspace)
        return (await self.clients.search.GetMemory(spb.GetMemoryRequest(workspace=workspace, id=listed.id))).memory

    async def close(self) -> None:
        await self._channel.close()
        await self.clients.close()


async def _start(postgres: Postgres, tmp: Path, **env: str) -> Harvest:
    home = tmp / "claude"
    (home / "projects").mkdir(parents=True, exist_ok=True)
    stack = await start_stack(
        await postgres.create_database("harvest"),
        HashEmbedder(64),
        MNEMO_HARVEST_AGENTS="claude-code",
        MNEMO_HARVEST_CLAUDE_DIR=str(home / "projects"),
        MNEMO_HARVEST_IDLE_S="600",
        MNEMO_HARVEST_INTERVAL_S="3600",
        MNEMO_DATA_DIR=str(tmp / "data"),
        **env,
    )
    harvest = Harvest(stack, home)
    # The poller's first tick starts with the stack; wait it out (runs are serialised), so the
    # tests' own runs see the sessions they write.
    await harvest.run()
    return harvest


@pytest.fixture
async def harvest(postgres: Postgres, tmp_path: Path) -> AsyncIterator[Harvest]:
    h = await _start(postgres, tmp_path)
    yield h
    await h.close()
    await h.stack.stop()


async def _register(h: Harvest, *roots: str) -> list[str]:
    out = []
    for root in roots:
        out.append((await h.clients.ingest.AddWorkspace(ipb.AddWorkspaceRequest(root_path=root))).workspace.id)
    return out


async def test_sessions_land_in_their_own_workspace_and_nowhere_else(harvest: Harvest) -> None:
    alpha, beta = await _register(harvest, "/work/alpha", "/work/beta")
    a = conversation(harvest.projects, "/work/alpha/services/api", "walrus").write()
    b = conversation(harvest.projects, "/work/beta", "narwhal").write()
    outcomes = {p.session_id: p.outcome for p in await harvest.run() if not p.done}
    assert outcomes == {a.session_id: "harvested", b.session_id: "harvested"}
    for workspace, own, other in ((alpha, "walrus", "narwhal"), (beta, "narwhal", "walrus")):
        found = await harvest.clients.find(workspace, f"{own} job mondays", mode="lexical")
        assert len(found.hits) == 1 and found.hits[0].memory.kind == common_pb2.MEMORY_KIND_SESSION
        assert found.hits[0].memory.provenance == common_pb2.PROVENANCE_HARVESTED_TRANSCRIPT
        assert found.hits[0].memory.status == common_pb2.MEMORY_STATUS_ACTIVE
        assert ids(await harvest.clients.find(workspace, other, mode="lexical")) == []
    memory = (await harvest.sessions_in(alpha))[0]
    got = await harvest.clients.search.GetMemory(spb.GetMemoryRequest(workspace=alpha, id=memory.id))
    content = got.memory.content
    # Title from the first prompt; tool calls as one-line stubs; tool output never kept.
    assert got.memory.title == "Why does the walrus job keep failing on Mondays?"
    assert "- tool: Bash: grep -rn walrus jobs/" in content
    assert "cron = '0 0 * * 1'" not in content
    assert got.memory.source_uri == f"claude-code://session/{a.session_id}"
    metadata = dict(got.memory.metadata)
    assert metadata["agent"] == "claude-code" and metadata["cwd"] == "/work/alpha/services/api"
    assert metadata["git_branch"] == "main" and metadata["model"] == "claude-sonnet-4-5"


async def test_decision_and_lesson_lines_become_candidates_linked_to_the_session(harvest: Harvest) -> None:
    (ws,) = await _register(harvest, "/work/gamma")
    session = conversation(harvest.projects, "/work/gamma", "puffin").write()
    first = await harvest.outcome(session.session_id)
    listed = await harvest.clients.search.ListMemories(
        spb.ListMemoriesRequest(
            workspace=ws,
            filter=common_pb2.MemoryFilter(kinds=[common_pb2.MEMORY_KIND_DECISION, common_pb2.MEMORY_KIND_LESSON]),
        )
    )
    extracted = {m.kind: m for m in listed.memories}
    assert set(extracted) == {common_pb2.MEMORY_KIND_DECISION, common_pb2.MEMORY_KIND_LESSON}
    for memory in extracted.values():
        assert memory.status == common_pb2.MEMORY_STATUS_CANDIDATE
        assert memory.provenance == common_pb2.PROVENANCE_EXTRACTED
        assert dict(memory.metadata)["session_memory_id"] == first.memory_id
    assert "02:00" in extracted[common_pb2.MEMORY_KIND_DECISION].title
    # Re-deriving a grown session does not duplicate them.
    session.user("Thanks, that fixed it.").assistant("Glad to help.").write()
    assert (await harvest.outcome(session.session_id)).outcome == "new_version"
    again = await harvest.clients.search.ListMemories(
        spb.ListMemoriesRequest(
            workspace=ws,
            filter=common_pb2.MemoryFilter(kinds=[common_pb2.MEMORY_KIND_DECISION, common_pb2.MEMORY_KIND_LESSON]),
        )
    )
    assert sorted(m.id for m in again.memories) == sorted(m.id for m in listed.memories)


async def test_a_grown_session_is_a_new_version_of_the_same_memory(harvest: Harvest) -> None:
    (ws,) = await _register(harvest, "/work/delta")
    session = conversation(harvest.projects, "/work/delta", "gannet").write()
    first = await harvest.outcome(session.session_id)
    assert first.outcome == "harvested"
    same = await harvest.outcome(session.session_id)
    assert same.outcome == "unchanged" and same.memory_id == first.memory_id
    session.user("Also, the kittiwake report is late.").assistant(
        "The kittiwake export waits on the same lock."
    ).write()
    grown = await harvest.outcome(session.session_id)
    assert grown.outcome == "new_version" and grown.memory_id == first.memory_id
    memories = await harvest.sessions_in(ws)
    assert [m.id for m in memories] == [first.memory_id] and memories[0].version == 2
    assert ids(await harvest.clients.find(ws, "kittiwake export", mode="lexical")) == [first.memory_id]


async def test_an_active_session_waits_until_it_is_idle(harvest: Harvest) -> None:
    (ws,) = await _register(harvest, "/work/epsilon")
    session = conversation(harvest.projects, "/work/epsilon", "skua").write(age_s=0)
    waiting = await harvest.outcome(session.session_id)
    assert waiting.outcome == "skipped" and waiting.detail == "still active"
    assert await harvest.sessions_in(ws) == []
    stamp = time.time() - 3600
    os.utime(session.path, (stamp, stamp))
    done = await harvest.outcome(session.session_id)
    assert done.outcome == "harvested" and len(await harvest.sessions_in(ws)) == 1


async def test_a_deleted_session_is_never_derived_again(postgres: Postgres, tmp_path: Path) -> None:
    h = await _start(postgres, tmp_path)
    try:
        (ws,) = await _register(h, "/work/zeta")
        session = conversation(h.projects, "/work/zeta", "petrel").write()
        first = await h.outcome(session.session_id)
        await h.clients.ingest.DeleteMemory(ipb.DeleteMemoryRequest(workspace=ws, id=first.memory_id, reason="noise"))
        for _ in range(3):
            again = await h.outcome(session.session_id)
            assert again.outcome in ("skipped", "unchanged") and "tombstoned" in again.detail + "tombstoned"
        session.user("more petrel talk").assistant("more petrel answers").write()  # it grows: still deleted
        grown = await h.outcome(session.session_id)
        assert grown.outcome == "skipped" and grown.detail == "tombstoned"
        # A restart of the harvest service changes nothing: the rule lives in ingest.
        await h.stack.harvest.stop()
        await h.stack.harvest.start()
        await h.close()
        h = Harvest(h.stack, h.home)
        restarted = await h.outcome(session.session_id)
        assert restarted.outcome in ("skipped", "unchanged")
        assert await h.sessions_in(ws) == []
        # Positive control: another session of the same workspace is harvested normally.
        other = conversation(h.projects, "/work/zeta", "fulmar").write()
        assert (await h.outcome(other.session_id)).outcome == "harvested"
    finally:
        await h.close()
        await h.stack.stop()


async def test_unregistered_directories_are_skipped_and_listed(harvest: Harvest) -> None:
    session = conversation(harvest.projects, "/work/unregistered/app", "tern").write()
    skipped = await harvest.outcome(session.session_id)
    assert skipped.outcome == "skipped" and skipped.detail == "no-workspace: /work/unregistered/app"
    status = await harvest.harvest.Status(hpb.StatusRequest())
    assert "/work/unregistered/app" in status.unregistered
    claude = next(a for a in status.agents if a.agent == "claude-code")
    assert claude.enabled and claude.skipped["no-workspace"] >= 1
    # Registering the project lets the next run harvest it.
    await _register(harvest, "/work/unregistered")
    assert (await harvest.outcome(session.session_id)).outcome == "harvested"


async def test_auto_register_creates_the_workspace(postgres: Postgres, tmp_path: Path) -> None:
    h = await _start(postgres, tmp_path, MNEMO_HARVEST_AUTO_REGISTER="true")
    try:
        session = conversation(h.projects, "/work/brand-new", "eider").write()
        assert (await h.outcome(session.session_id)).outcome == "harvested"
        resolved = await h.clients.search.ResolveWorkspace(spb.ResolveWorkspaceRequest(workspace="/work/brand-new"))
        assert resolved.workspace.root_path == "/work/brand-new"
    finally:
        await h.close()
        await h.stack.stop()


async def test_a_worktree_maps_to_its_main_repository(harvest: Harvest, tmp_path: Path) -> None:
    main = tmp_path / "repo"
    (main / ".git" / "worktrees" / "feature").mkdir(parents=True)
    worktree = tmp_path / "repo-feature"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {main}/.git/worktrees/feature\n")
    (ws,) = await _register(harvest, str(main))
    session = conversation(harvest.projects, str(worktree), "shag").write()
    assert (await harvest.outcome(session.session_id)).outcome == "harvested"
    assert len(await harvest.sessions_in(ws)) == 1


async def test_mnemos_own_sessions_are_not_captured(harvest: Harvest, tmp_path: Path) -> None:
    internal = tmp_path / "scratch"
    internal.mkdir()
    (internal / ".mnemo-internal").write_text("")
    await _register(harvest, str(internal))
    own = conversation(harvest.projects, str(internal), "booby").write()
    prompt = (
        ClaudeSession(harvest.projects, "/work/elsewhere").user("[mnemo-internal] summarise").assistant("ok").write()
    )
    outcomes = {p.session_id: (p.outcome, p.detail) for p in await harvest.run() if not p.done}
    assert outcomes[own.session_id] == ("skipped", "self-capture")
    assert outcomes[prompt.session_id] == ("skipped", "self-capture")


PLANTED = {
    "anthropic-key": "sk-ant-api03-" + "Zx9Qw" * 18 + "AA",
    "openai-key": "sk-proj-" + "Ab3Cd4Ef5Gh6" * 6,
    "github-token": "ghp_" + "Rt5Yu7Io9Pa2Sd4Fg6Hj8Kl0Zx1Cv3Bn5Mq",
    "aws-access-key": "AKIA" + "QWERTYUIOPASDFGH",
    "slack-token": "xoxb-" + "1234567890-1234567890-" + "aBcDeFgHiJkLmNoPqRsTuVwX",
    "google-api-key": "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "stripe-key": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
}


async def test_planted_secrets_never_reach_the_store_or_the_archive(harvest: Harvest, tmp_path: Path) -> None:
    await _register(harvest, "/work/secrets")
    session = ClaudeSession(harvest.projects, "/work/secrets").user(
        "Here is my config: " + " ".join(f"{k}={v}" for k, v in PLANTED.items())
    )
    session.assistant("I will not repeat " + PLANTED["openai-key"] + ".", ("Bash", {"command": "printenv"}))
    session.tool_result("\n".join(f"SECRET_{i}={v}" for i, v in enumerate(PLANTED.values())))
    session.assistant("DECISION: rotate " + PLANTED["github-token"] + " today.").write()
    result = await harvest.outcome(session.session_id)
    assert result.outcome == "harvested"
    conn = await asyncpg.connect(harvest.stack.dsn)
    try:
        for table in ("memories", "memory_versions", "chunks", "audit_events", "derivations", "harvest_sources"):
            dump = "\n".join(str(tuple(r)) for r in await conn.fetch(f"SELECT * FROM {table}"))
            for kind, secret in PLANTED.items():
                assert secret not in dump, (table, kind)
        content = await conn.fetchval(
            "SELECT content FROM memory_versions WHERE memory_id = $1", uuid.UUID(result.memory_id)
        )
        # Positive control: the text around the secrets survived, with markers in their place.
        assert "Here is my config" in content and "[REDACTED:" in content
        events = await conn.fetch("SELECT details FROM audit_events WHERE memory_id = $1", uuid.UUID(result.memory_id))
        assert any(json.loads(e["details"]).get("redactions") for e in events)
    finally:
        await conn.close()
    archived = list((tmp_path / "data" / "archive").rglob("*.json.zst"))
    assert archived, "the session should be archived"
    raw = zstandard.ZstdDecompressor().decompress(archived[0].read_bytes()).decode()
    assert json.loads(raw)["session_id"] == session.session_id
    for secret in PLANTED.values():
        assert secret not in raw


async def test_a_failed_summary_keeps_the_transcript_and_is_retried(postgres: Postgres, tmp_path: Path) -> None:
    with fake_llm() as llm:
        llm.fail_status = 503
        h = await _start(
            postgres,
            tmp_path,
            MNEMO_SUMMARIZER_URL=llm.url,
            MNEMO_SUMMARIZER_MODEL="fake-summarizer",
            MNEMO_SUMMARIZER_API_KEY="fake-llm-key",
        )
        try:
            (ws,) = await _register(h, "/work/eta")
            session = conversation(h.projects, "/work/eta", "murre").write()
            first = await h.outcome(session.session_id)
            assert first.outcome == "harvested" and "summary failed" in first.detail
            memory = await h.session_in(ws)
            assert memory.provenance == common_pb2.PROVENANCE_HARVESTED_TRANSCRIPT
            assert "- tool: Bash: grep -rn murre jobs/" in memory.content
            conn = await asyncpg.connect(h.stack.dsn)
            try:
                source = "SELECT state, final, detail FROM harvest_sources WHERE session_id = $1"
                row = await conn.fetchrow(source, session.session_id)
                assert (row["state"], row["final"]) == ("harvested", False) and "HTTPStatusError" in row["detail"]
                # The summarizer was asked with the model, the key and the transcript.
                asked = llm.requests[-1]
                assert asked["path"] == "/v1/chat/completions" and asked["auth"] == "Bearer fake-llm-key"
                assert asked["body"]["model"] == "fake-summarizer"
                assert "murre scheduler" in asked["body"]["messages"][-1]["content"]

                # The file has not changed, but the next run retries the summary: a new version.
                llm.fail_status = None
                llm.reply = "The murre job collided with the backup.\nDECISION: run murre after the backup window."
                second = await h.outcome(session.session_id)
                assert second.outcome == "new_version" and second.memory_id == first.memory_id
                memory = await h.session_in(ws)
                assert memory.version == 2 and memory.provenance == common_pb2.PROVENANCE_HARVESTED_SUMMARY
                assert "collided with the backup" in memory.content and "- tool: Bash" not in memory.content
                row = await conn.fetchrow(source, session.session_id)
                assert (row["state"], row["final"]) == ("harvested", True)
                derivations = await conn.fetch(
                    "SELECT summarizer, prompt_version FROM derivations WHERE memory_id = $1 ORDER BY id",
                    uuid.UUID(first.memory_id),
                )
                assert [(d["summarizer"], d["prompt_version"]) for d in derivations] == [
                    ("transcript", ""),
                    ("fake-summarizer", PROMPT_VERSION),
                ]
            finally:
                await conn.close()
            # The summary's own DECISION line is a candidate too.
            decisions = await h.clients.search.ListMemories(
                spb.ListMemoriesRequest(
                    workspace=ws, filter=common_pb2.MemoryFilter(kinds=[common_pb2.MEMORY_KIND_DECISION])
                )
            )
            assert any("after the backup window" in m.title for m in decisions.memories)
            # Now final: the summarizer is not asked again for an unchanged session.
            asked = len(llm.requests)
            assert (await h.outcome(session.session_id)).outcome == "unchanged"
            assert len(llm.requests) == asked
        finally:
            await h.close()
            await h.stack.stop()
