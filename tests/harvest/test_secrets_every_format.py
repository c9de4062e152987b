"""Planted secrets of every kind, in every agent's format and every place a session holds them, are never stored.

Each (format, location) cell is one session holding its own corpus from
`tests.corpora.redact.planted_secrets` (one seed per cell), so a secret found anywhere names the
format and the place it came from. After one harvest of all five homes, every table of the database
and every file under MNEMO_DATA_DIR (the zstd archive decompressed) are searched for each secret,
whole and in any 12-character piece holding 7 characters of its random part. Beside that: each
session is harvested into its format's workspace, the ordinary text around each secret is kept, and
a `[REDACTED:` marker stands where the secret was.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest
import zstandard

from mnemo.common.v1 import common_pb2
from mnemo.harvest.v1 import harvest_service_pb2 as hpb
from mnemo.harvest.v1 import harvest_service_pb2_grpc as hgrpc
from mnemo.ingest.v1 import ingest_service_pb2 as ipb
from mnemo.search.v1 import search_service_pb2 as spb
from mnemo_embed import HashEmbedder
from tests.corpora.redact import Planted, planted_secrets
from tests.harvest import opencode_fixtures as oc
from tests.harvest.formats import Call, Say, Script, opencode_session, write_claude, write_codex, write_pi
from tests.helpers import Clients, Postgres, start_stack, strings

FORMATS = ("claude-code", "codex", "opencode-db", "opencode-json", "pi")
LOCATIONS = ("title", "user", "assistant", "tool-input", "tool-args", "tool-output", "decision")
ROOT = "/work/planted/"
# The agent's own title holds one secret (a title is one line); each format gets a different kind.
TITLE_LABELS = {
    "claude-code": "curl-bearer-anthropic",
    "codex": "env-openai-proj",
    "opencode-db": "git-remote-ghp",
    "opencode-json": "aws-credentials-id",
    "pi": "slack-bot-yaml",
}
# Commands whose whole output is secret (docs/session-formats.md §6): the output must be dropped, not redacted.
DUMPS = ("env", "printenv", "cat .env", "cat ~/.aws/credentials", "docker inspect api")
# Kinds with no shape of their own: bare, such a secret is just a word, so a decision line names it
# in its context (`DB_PASSWORD=…`, `Authorization: Bearer …`) as a model would quote it.
CONTEXTUAL = frozenset(
    {"aws-secret-key", "bearer-token", "basic-auth", "secret-assignment", "url-credentials", "azure-storage-key"}
)
STORED_TABLES = ("memories", "memory_versions", "chunks", "audit_events", "derivations", "harvest_sources")
GRAM = 12
RANDOM_MIN = 7
MARKER = "[REDACTED:"

# Leaks production code still has, as cell id -> {label: why}. Such a cell xfails; it fails when a
# listed secret stops leaking (take it out of the list) and when any other secret leaks. Empty: the
# leaks this test found (stubs cut before redaction, CamelCase hf_ tokens, `%r` in passwords)
# are fixed; keep it for the next finding rather than weakening the scan.
KNOWN_LEAKS: dict[str, dict[str, str]] = {}


@dataclass(frozen=True)
class Cell:
    """One format and one place in a session: one session holding the secrets planted there."""

    format: str
    location: str

    @property
    def id(self) -> str:
        return f"{self.format}/{self.location}"

    @property
    def agent(self) -> str:
        return "opencode" if self.format.startswith("opencode") else self.format

    def planted(self) -> list[Planted]:
        corpus = planted_secrets(1 + FORMATS.index(self.format) * len(LOCATIONS) + LOCATIONS.index(self.location))
        if self.location == "title":
            return [p for p in corpus if p.label == TITLE_LABELS[self.format]]
        return corpus


CELLS = [Cell(f, loc) for f in FORMATS for loc in LOCATIONS]


def one_line(text: str) -> str:
    return " ".join(text.split())


def decision_form(planted: Planted) -> str:
    return one_line(planted.text) if planted.kind in CONTEXTUAL else one_line(planted.secret)


def plant(location: str, i: int, planted: Planted) -> list[Say | Call]:
    """The events that put one secret in `location`, each beside an ordinary control naming round `i`."""
    if location == "user":
        return [
            Say("user", f"user-note-{i:02d}: this is what the deploy printed:\n{planted.text}"),
            Say("assistant", f"Noted, round {i:02d}."),
        ]
    if location == "assistant":
        return [
            Say("assistant", f"assistant-note-{i:02d}: the config I found holds this:\n{planted.text}\nI keep it out.")
        ]
    if location == "tool-input":
        return [Call("shell", {"command": f"echo tool-input-{i:02d} && {planted.text.removeprefix('$ ')}"}, "ok")]
    if location == "tool-args":
        # No argument a reader knows (command, url, path...): each shows the arguments themselves.
        args = {"method": "POST", "endpoint": f"https://api.example.com/v1/tool-args-{i:02d}", "body": planted.text}
        return [Call("http", args, '{"status": 201}')]
    if location == "tool-output":
        command = f"{DUMPS[i % len(DUMPS)]} # tool-output-{i:02d}"
        output = f"HOSTNAME=devbox-sentinel-{i:02d}\n{planted.text}\nSHELL=/bin/bash"
        return [Call("shell", {"command": command}, output, by_user=i % 2 == 1)]
    if location == "decision":
        line = f"DECISION: rotate the credential from round {i:02d}: {decision_form(planted)}"
        return [Say("assistant", f"Round {i:02d} is done.\n{line}\nNothing else changes.")]
    return []


def script(cell: Cell) -> Script:
    planted = cell.planted()
    events: list[Say | Call] = [Say("user", "Please tidy up the deploy configuration.")]
    for i, p in enumerate(planted):
        events += plant(cell.location, i, p)
    events.append(Say("assistant", "All done: the deploy configuration is tidy."))
    title = f"Fix the deploy: {one_line(planted[0].text)}" if cell.location == "title" else f"Tidy ({cell.location})"
    return Script(cwd=ROOT + cell.format, title=title, events=events)


# -- the scan ---------------------------------------------------------------------------------------


def credential(planted_secret: str, kind: str) -> str:
    """The part of a secret that is a credential: anyone can read a JWT's header and claims, not forge its signature."""
    return planted_secret.rsplit(".", 1)[-1] if kind == "jwt" else planted_secret


def secret_grams(secret: str, references: list[str]) -> set[str]:
    """The secret's 12-character pieces that hold at least 7 characters of its random part.

    What every secret of a generator has at the same place (prefixes such as `sk-ant-api03-`, PEM
    armour and line breaks) is its shape, not the secret: `references` are the same generator's
    secrets from other seeds (those of the same length, when there are enough).
    """
    same = [r for r in references if len(r) == len(secret)]
    others = same if len(same) >= 2 else references
    random = [any(r[i] != char for r in others if len(r) > i) for i, char in enumerate(secret)]
    return {secret[i : i + GRAM] for i in range(len(secret) - GRAM + 1) if sum(random[i : i + GRAM]) >= RANDOM_MIN}


@dataclass(frozen=True)
class Leak:
    stores: frozenset[str]
    whole: bool


def find_leaks(stores: dict[str, str], cells: list[Cell]) -> dict[tuple[str, str], Leak]:
    """(cell id, label) -> where a planted secret, whole or a piece of `secret_grams`, was found."""
    references: dict[str, list[str]] = defaultdict(list)
    for seed in range(10_001, 10_017):
        for planted in planted_secrets(seed):
            references[planted.label].append(credential(planted.secret, planted.kind))
    index: dict[str, list[tuple[Cell, Planted]]] = defaultdict(list)
    for cell in cells:
        for planted in cell.planted():
            pieces = secret_grams(credential(planted.secret, planted.kind), references[planted.label])
            assert pieces, (cell.id, planted.label)
            for gram in pieces:
                index[gram].append((cell, planted))
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    whole: set[tuple[str, str]] = set()
    for store, text in stores.items():
        for i in range(len(text) - GRAM + 1):
            for cell, planted in index.get(text[i : i + GRAM], ()):
                key = (cell.id, planted.label)
                found[key].add(store)
                if planted.secret in text or one_line(planted.secret) in text:
                    whole.add(key)
    return {key: Leak(frozenset(where), key in whole) for key, where in found.items()}


async def database_stores(dsn: str) -> tuple[dict[str, str], dict[str, int]]:
    """Every table's rows as text (JSON decoded, so escaped newlines and quotes are real again), and row counts."""
    conn = await asyncpg.connect(dsn)
    try:
        tables = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        stores, counts = {}, {}
        for (table,) in tables:
            rows = await conn.fetch(f'SELECT to_jsonb(t)::text AS row FROM "{table}" t')
            stores[f"table {table}"] = "\n".join(s for r in rows for s in strings(json.loads(r["row"])))
            counts[table] = len(rows)
        return stores, counts
    finally:
        await conn.close()


def data_dir_stores(data: Path) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """Every file under MNEMO_DATA_DIR as text (the archive decompressed and decoded), and the archived sessions."""
    stores, archived = {}, {}
    for path in sorted(p for p in data.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        if path.name.endswith(".json.zst"):
            session = json.loads(zstandard.ZstdDecompressor().decompress(raw))
            archived[session["session_id"]] = session
            text = "\n".join(strings(session))
        else:
            text = raw.decode("utf-8", "replace")
        stores[f"file {path.relative_to(data)}"] = text
    return stores, archived


# -- one harvest of every cell ----------------------------------------------------------------------


@dataclass
class Harvested:
    workspaces: dict[str, str]
    """workspaces maps each format to the workspace registered for its directory."""
    sessions: dict[str, str]
    """sessions maps each cell id to the agent's id of the session written for it."""
    progress: dict[str, hpb.RunProgress]
    """progress maps each session id to its outcome in the harvest run."""
    listed: dict[str, set[str]]
    """listed maps each format to the session memories ListMemories shows in its workspace."""
    memories: dict[str, asyncpg.Record | None]
    """memories maps each cell id to its session memory's row, with the current content."""
    decisions: dict[str, list[asyncpg.Record]]
    sources: dict[str, asyncpg.Record | None]
    derivations: dict[str, list[asyncpg.Record]]
    audit: dict[str, list[asyncpg.Record]]
    chunks: dict[str, list[str]]
    archived: dict[str, dict[str, Any]]
    stores: dict[str, str]
    counts: dict[str, int]
    leaks: dict[tuple[str, str], Leak]


def write_homes(root: Path) -> tuple[dict[str, str], dict[str, Path]]:
    """Every cell's session in its agent's home; returns the session ids and the homes."""
    homes = {
        "claude": root / "claude" / "projects",
        "codex": root / "codex",
        "opencode": root / "opencode",
        "pi": root / "pi" / "agent" / "sessions",
    }
    for home in homes.values():
        home.mkdir(parents=True)
    sessions: dict[str, str] = {}
    opencode: dict[str, list[oc.OcSession]] = {"opencode-db": [], "opencode-json": []}
    for cell in CELLS:
        if cell.format == "claude-code":
            sessions[cell.id] = write_claude(homes["claude"], script(cell))
        elif cell.format == "codex":
            sessions[cell.id] = write_codex(homes["codex"], script(cell))
        elif cell.format == "pi":
            sessions[cell.id] = write_pi(homes["pi"], script(cell))
        else:
            sessions[cell.id] = f"ses_{cell.format}_{cell.location}".replace("-", "_")
            opencode[cell.format].append(opencode_session(sessions[cell.id], script(cell)))
    oc.write_db(homes["opencode"] / "opencode.db", opencode["opencode-db"])
    oc.write_json_tree(homes["opencode"], opencode["opencode-json"])
    # Finished sessions: nothing changed for an hour (OpenCode's database rows carry their own old times).
    stamp = time.time() - 3600
    for home in homes.values():
        for path in home.rglob("*"):
            os.utime(path, (stamp, stamp))
    return sessions, homes


async def run(harvest: hgrpc.HarvestServiceStub) -> dict[str, hpb.RunProgress]:
    return {p.session_id: p async for p in harvest.Run(hpb.RunRequest()) if not p.done}


@pytest.fixture(scope="module")
async def harvested(postgres: Postgres, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Harvested]:
    tmp = tmp_path_factory.mktemp("planted")
    sessions, homes = write_homes(tmp / "homes")
    dsn = await postgres.create_database("secrets")
    stack = await start_stack(
        dsn,
        HashEmbedder(64),
        MNEMO_HARVEST_AGENTS="claude-code,codex,opencode,pi",
        MNEMO_HARVEST_CLAUDE_DIR=str(homes["claude"]),
        MNEMO_HARVEST_CODEX_HOME=str(homes["codex"]),
        MNEMO_HARVEST_OPENCODE_DIR=str(homes["opencode"]),
        MNEMO_HARVEST_PI_DIR=str(homes["pi"]),
        MNEMO_HARVEST_IDLE_S="600",
        MNEMO_HARVEST_INTERVAL_S="3600",
        MNEMO_DATA_DIR=str(tmp / "data"),
    )
    clients = Clients(stack)
    channel = grpc.aio.insecure_channel(stack.harvest.target)
    try:
        harvest = hgrpc.HarvestServiceStub(channel)
        # The poller's first tick ran at start-up with no workspace registered (runs are serialised):
        # this run waits it out, and skips every session for want of a workspace.
        await run(harvest)
        workspaces = {}
        for fmt in FORMATS:
            added = await clients.ingest.AddWorkspace(ipb.AddWorkspaceRequest(root_path=ROOT + fmt))
            workspaces[fmt] = added.workspace.id
        progress = await run(harvest)
        yield await collect(dsn, clients, tmp / "data", workspaces, sessions, progress)
    finally:
        await channel.close()
        await clients.close()
        await stack.stop()


async def collect(
    dsn: str,
    clients: Clients,
    data: Path,
    workspaces: dict[str, str],
    sessions: dict[str, str],
    progress: dict[str, hpb.RunProgress],
) -> Harvested:
    listed = {}
    for fmt, ws in workspaces.items():
        request = spb.ListMemoriesRequest(
            workspace=ws, page_size=100, filter=common_pb2.MemoryFilter(kinds=[common_pb2.MEMORY_KIND_SESSION])
        )
        listed[fmt] = {m.id for m in (await clients.search.ListMemories(request)).memories}
    current = (
        "SELECT m.*, v.content FROM memories m JOIN memory_versions v ON v.memory_id = m.id AND v.version = m.version"
    )
    memories, decisions, sources, derivations, audit, chunks = {}, {}, {}, {}, {}, {}
    conn = await asyncpg.connect(dsn)
    try:
        for cell_id, sid in sessions.items():
            found = progress.get(sid)
            memory_id = uuid.UUID(found.memory_id) if found is not None and found.memory_id else None
            memories[cell_id] = await conn.fetchrow(f"{current} WHERE m.id = $1", memory_id)
            decisions[cell_id] = await conn.fetch(
                f"{current} WHERE m.kind = 'decision' AND m.metadata->>'session_id' = $1", sid
            )
            sources[cell_id] = await conn.fetchrow("SELECT * FROM harvest_sources WHERE session_id = $1", sid)
            derivations[cell_id] = await conn.fetch("SELECT * FROM derivations WHERE memory_id = $1", memory_id)
            audit[cell_id] = await conn.fetch(
                "SELECT action, details FROM audit_events WHERE memory_id = $1", memory_id
            )
            rows = await conn.fetch("SELECT text FROM chunks WHERE memory_id = $1 ORDER BY ordinal", memory_id)
            chunks[cell_id] = [r["text"] for r in rows]
    finally:
        await conn.close()
    stores, counts = await database_stores(dsn)
    files, archived = data_dir_stores(data)
    stores |= files
    return Harvested(
        workspaces=workspaces,
        sessions=sessions,
        progress=progress,
        listed=listed,
        memories=memories,
        decisions=decisions,
        sources=sources,
        derivations=derivations,
        audit=audit,
        chunks=chunks,
        archived=archived,
        stores=stores,
        counts=counts,
        leaks=find_leaks(stores, CELLS),
    )


# -- positive controls ------------------------------------------------------------------------------


def section(content: str, control: str) -> str:
    """The transcript from `control` to the next turn heading."""
    start = content.index(control)
    end = content.find("\n### ", start)
    return content[start : end if end >= 0 else len(content)]


def line_with(content: str, control: str) -> str:
    lines = [line for line in content.splitlines() if control in line]
    assert len(lines) == 1, (control, lines)
    return lines[0]


def assert_harvested(h: Harvested, cell: Cell) -> None:
    """The cell's session became one memory in its format's workspace, recorded, derived, audited and archived."""
    session_id = h.sessions[cell.id]
    progress = h.progress[session_id]
    assert progress.outcome == "harvested", progress.detail
    memory = h.memories[cell.id]
    assert memory is not None and memory["kind"] == "session"
    assert memory["workspace_id"] == h.workspaces[cell.format] and progress.memory_id in h.listed[cell.format]
    assert memory["content"].startswith(f"{cell.agent} session {session_id}\nDirectory: {ROOT}{cell.format} ")
    source = h.sources[cell.id]
    assert source is not None and source["state"] == "harvested" and str(source["memory_id"]) == progress.memory_id
    assert source["workspace_id"] == h.workspaces[cell.format] and source["archive_path"]
    assert [d["source_uri"] for d in h.derivations[cell.id]] == [f"{cell.agent}://session/{session_id}"]
    assert [e["action"] for e in h.audit[cell.id]] == ["write"]
    assert h.chunks[cell.id] and "Please tidy up the deploy configuration." in "".join(h.chunks[cell.id])
    archived = h.archived[session_id]
    assert (
        archived["agent"] == cell.agent and archived["turns"][0]["text"] == "Please tidy up the deploy configuration."
    )


def assert_kept(h: Harvested, cell: Cell, exempt: set[str]) -> None:
    """Where the cell's secrets were planted, the ordinary text is stored, with a marker in each secret's place
    (`exempt` are the labels of known leaks, which have none)."""
    memory = h.memories[cell.id]
    assert memory is not None
    content, planted = memory["content"], cell.planted()
    archived = "\n".join(strings(h.archived[h.sessions[cell.id]]))
    for i, p in enumerate(planted):
        marked = p.label not in exempt
        if cell.location == "title":
            assert memory["title"].startswith("Fix the deploy: ") and (MARKER in memory["title"] or not marked)
            assert archived.count("Fix the deploy: ") == 1
            # Redacted by the harvester before it sent the write (the marker above is the positive control), so no
            # secret reaches ingest, nor crosses the network from a laptop: the write's audit event has none to record.
            (event,) = h.audit[cell.id]
            assert not json.loads(event["details"]).get("redactions"), event["details"]
        elif cell.location in ("user", "assistant"):
            control = f"{cell.location}-note-{i:02d}: "
            assert MARKER in section(content, control) or not marked, (cell.id, i)
            assert control in archived
        elif cell.location == "tool-input":
            stub = line_with(content, f"echo tool-input-{i:02d} && ")
            # The secret is replaced, or the one-line stub was cut before it ended.
            assert stub.startswith("- tool: ") and (MARKER in stub or stub.endswith("…") or not marked), stub
            assert f"tool-input-{i:02d}" in archived
        elif cell.location == "tool-args":
            assert line_with(content, f"tool-args-{i:02d}").startswith("- tool: ")
            assert f"tool-args-{i:02d}" in archived
        elif cell.location == "tool-output":
            command = f"{DUMPS[i % len(DUMPS)]} # tool-output-{i:02d}"
            assert line_with(content, command).startswith("- tool: ") and command in archived
            # Dropped whole, not redacted: the harmless lines of the output are gone too.
            assert not [store for store, text in h.stores.items() if f"devbox-sentinel-{i:02d}" in text]
        else:
            start = f"rotate the credential from round {i:02d}: "
            (decision,) = [d for d in h.decisions[cell.id] if d["content"].startswith(start)]
            assert decision["status"] == "candidate" and decision["workspace_id"] == h.workspaces[cell.format]
            assert MARKER in decision["content"] or not marked, decision["content"]
            metadata = json.loads(decision["metadata"])
            assert metadata["session_memory_id"] == str(memory["id"])
            assert f"DECISION: rotate the credential from round {i:02d}: " in content
    if cell.location != "decision":
        assert h.decisions[cell.id] == []


# -- the tests --------------------------------------------------------------------------------------


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: c.id)
async def test_no_planted_secret_survives_anywhere(harvested: Harvested, cell: Cell) -> None:
    assert_harvested(harvested, cell)
    known = KNOWN_LEAKS.get(cell.id, {})
    assert_kept(harvested, cell, exempt=set(known))
    leaks = {label: leak for (cell_id, label), leak in harvested.leaks.items() if cell_id == cell.id}
    unexpected = {
        label: ("whole" if leak.whole else "fragment", sorted(leak.stores))
        for label, leak in leaks.items()
        if label not in known
    }
    assert not unexpected, f"{len(unexpected)} of {len(cell.planted())} planted secrets leaked: {unexpected}"
    if known:
        fixed = sorted(set(known) - set(leaks))
        assert not fixed, f"these no longer leak, take them out of KNOWN_LEAKS: {fixed}"
        pytest.xfail("; ".join(sorted(set(known.values()))))


@pytest.mark.parametrize("fmt", FORMATS)
async def test_each_format_lands_in_its_own_workspace_only(harvested: Harvested, fmt: str) -> None:
    h = harvested
    own = {h.progress[h.sessions[cell.id]].memory_id for cell in CELLS if cell.format == fmt}
    assert len(own) == len(LOCATIONS) and h.listed[fmt] == own
    assert not [f for f in FORMATS if f != fmt and h.listed[f] & own]


async def test_the_scan_covers_every_store_and_finds_what_is_there(harvested: Harvested) -> None:
    h = harvested
    for table in STORED_TABLES:
        assert h.counts[table] > 0 and f"table {table}" in h.stores, table
    archives = [s for s in h.stores if s.startswith("file archive/") and s.endswith(".json.zst")]
    assert len(archives) == len(CELLS) == len(h.archived)
    assert sum(len(cell.planted()) for cell in CELLS) == len(FORMATS) * (
        1 + (len(LOCATIONS) - 1) * len(planted_secrets())
    )
    # The scan itself: a whole secret and a piece of another are found; a third seed's secret, the
    # shape all secrets of a kind share and a JWT without its signature are not.
    whole, cut = Cell("pi", "user").planted()[0], Cell("codex", "tool-args").planted()[-1]
    jwt = next(p for p in Cell("claude-code", "decision").planted() if p.kind == "jwt")
    stranger = planted_secrets(99)[0]
    probe = f"{whole.secret} … {cut.secret[5 : 5 + GRAM + 3]} {stranger.secret} sk-ant-api03-Fk7 {jwt.secret[:-43]}"
    assert find_leaks({"probe": probe}, CELLS) == {
        ("pi/user", whole.label): Leak(frozenset({"probe"}), True),
        ("codex/tool-args", cut.label): Leak(frozenset({"probe"}), False),
    }
