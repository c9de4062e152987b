"""Consolidation: finds near-duplicate memories inside a workspace and opens a merge proposal per
group of them. It only proposes; a reviewer decides (docs/consolidation.md).

A pair is a near-duplicate when the cosine similarity of the memories' embeddings (their best
pair of chunks, found through the HNSW index) and the Jaccard overlap of their word sets both
reach the configured thresholds. Pairs are joined into groups (connected components); each group
keeps its best-trusted memory and proposes superseding the others, never a confirmed one.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
import structlog

from mnemo_ingest.drafting import Drafter, DraftFailed
from mnemo_ingest.settings import IngestSettings
from mnemo_platform import CallContext, current_call, new_request_id, reset_call, set_call
from mnemo_platform.telemetry import background_span
from mnemo_store import GLOBAL_WORKSPACE, resolve_for_write
from mnemo_store import consolidation as db
from mnemo_store.proposals import NewProposal, open_proposal
from mnemo_wire import TrustSettings

log = structlog.get_logger("mnemo.ingest.consolidate")

PROPOSER = "system:consolidate"
# Which memory a group keeps: the highest status first (a confirmed memory is never superseded),
# then the provenance's trust weight, then the newest, then the longest.
STATUS_RANK = {"confirmed": 2, "active": 1, "candidate": 0}
# How many changed chunks one neighbour statement takes.
BATCH_CHUNKS = 500
_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")


def word_set(text: str) -> frozenset[str]:
    """The lower-cased words of a text: what the lexical overlap compares."""
    return frozenset(_WORD.findall(text.lower()))


def numbers(text: str) -> frozenset[str]:
    """The numbers a text states (versions, ports, limits, counts, times)."""
    return frozenset(_NUMBER.findall(text))


def numbers_agree(a: str, b: str) -> bool:
    """Whether two texts state the same numbers: notes that read alike but differ in a number
    ("600 requests a minute" / "1200 requests a minute") state different facts."""
    return numbers(a) == numbers(b)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


@dataclass(frozen=True)
class Thresholds:
    """What makes a pair near-duplicates: both scores at least these."""

    min_cosine: float
    min_jaccard: float
    neighbours: int
    numbers_must_agree: bool = True

    def as_json(self) -> dict[str, Any]:
        return {
            "min_cosine": self.min_cosine,
            "min_jaccard": self.min_jaccard,
            "neighbours": self.neighbours,
            "numbers_must_agree": self.numbers_must_agree,
        }


@dataclass(frozen=True)
class Pair:
    """Two memories with both of their scores."""

    a: uuid.UUID
    b: uuid.UUID
    cosine: float
    jaccard: float


@dataclass(frozen=True)
class Fact:
    """What a pass knows of one memory."""

    id: uuid.UUID
    status: str
    provenance: str
    version: int
    content_hash: str
    updated_at: datetime
    title: str
    content: str


@dataclass
class Merge:
    """A group of near-duplicates as proposed (or, in a dry run, as it would be)."""

    keep: Fact
    others: list[Fact]
    pairs: list[Pair]
    reason: str
    change: dict[str, Any]
    dedupe_key: str
    proposal_id: uuid.UUID | None = None
    created: bool = False

    @property
    def memory_ids(self) -> list[uuid.UUID]:
        return [self.keep.id, *(o.id for o in self.others)]


@dataclass
class Pass:
    """One workspace's pass: what was compared, the pairs over both thresholds, the merges."""

    workspace_id: str
    compared: int = 0
    pairs: int = 0
    merges: list[Merge] = field(default_factory=list)
    full: bool = False
    dry_run: bool = False
    seconds: float = 0.0


def scored_pairs(
    neighbours: Sequence[db.Neighbour], facts: dict[uuid.UUID, Fact], thresholds: Thresholds
) -> list[Pair]:
    """The neighbour pairs of visible memories that reach both thresholds, each pair once."""
    best: dict[tuple[uuid.UUID, uuid.UUID], float] = {}
    for n in neighbours:
        if n.cosine < thresholds.min_cosine or n.a not in facts or n.b not in facts:
            continue
        key = (n.a, n.b) if str(n.a) < str(n.b) else (n.b, n.a)
        best[key] = max(best.get(key, 0.0), n.cosine)
    words: dict[uuid.UUID, frozenset[str]] = {}
    pairs = []
    for (a, b), cosine in sorted(best.items(), key=lambda item: (str(item[0][0]), str(item[0][1]))):
        for one in (a, b):
            if one not in words:
                words[one] = word_set(facts[one].content)
        overlap = jaccard(words[a], words[b])
        if thresholds.numbers_must_agree and not numbers_agree(facts[a].content, facts[b].content):
            continue
        if overlap >= thresholds.min_jaccard:
            pairs.append(Pair(a, b, round(cosine, 4), round(overlap, 4)))
    return pairs


def groups_of(pairs: Sequence[Pair]) -> list[list[Pair]]:
    """The pairs joined into groups of memories (connected components), each with its pairs."""
    parent: dict[uuid.UUID, uuid.UUID] = {}

    def root(x: uuid.UUID) -> uuid.UUID:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for p in pairs:
        parent[root(p.a)] = root(p.b)
    grouped: dict[uuid.UUID, list[Pair]] = {}
    for p in pairs:
        grouped.setdefault(root(p.a), []).append(p)
    return sorted(grouped.values(), key=lambda g: min(str(m) for p in g for m in (p.a, p.b)))


def keep_rank(fact: Fact, trust: TrustSettings) -> tuple[int, float, datetime, int, str]:
    """Higher is kept: status, then the provenance's trust weight (human and agent above
    harvested transcripts), then the newest, then the longest (then the id, for a stable choice)."""
    return (
        STATUS_RANK.get(fact.status, -1),
        dict(trust.provenance_weights).get(fact.provenance, 0.0),
        fact.updated_at,
        len(fact.content),
        str(fact.id),
    )


def dedupe_key(members: Sequence[Fact]) -> str:
    """The same group of the same texts gives the same key, whatever became of its first proposal."""
    state = "|".join(f"{f.id}:{f.version}:{f.content_hash}" for f in sorted(members, key=lambda f: str(f.id)))
    return "consolidation:" + hashlib.sha256(state.encode()).hexdigest()


def short(memory_id: uuid.UUID) -> str:
    return str(memory_id)[:8]


def plan_merge(
    group: Sequence[Pair], facts: dict[uuid.UUID, Fact], thresholds: Thresholds, trust: TrustSettings
) -> Merge | None:
    """The merge a group proposes, or None when it has nothing to supersede (every other member is
    confirmed: a confirmed memory is only ever the one kept)."""
    members = {m for p in group for m in (p.a, p.b)}
    ranked = sorted((facts[m] for m in members), key=lambda f: keep_rank(f, trust), reverse=True)
    keep = ranked[0]
    others = [f for f in ranked[1:] if f.status != "confirmed"]
    if not others:
        return None
    # Every pair of the group, those through a confirmed member left out too: they are how the
    # others joined it.
    pairs = list(group)
    lines = [
        f"{short(p.a)} ~ {short(p.b)}: cosine {p.cosine:.3f} (>= {thresholds.min_cosine}), "
        f"word Jaccard {p.jaccard:.3f} (>= {thresholds.min_jaccard})"
        for p in pairs
    ]
    held = [f for f in ranked[1:] if f.status == "confirmed"]
    reason = (
        f"Near-duplicates: keep {short(keep.id)} ({keep.status}, {keep.provenance}) and supersede "
        + ", ".join(f"{short(o.id)} ({o.status}, {o.provenance})" for o in others)
        + ". "
        + "; ".join(lines)
        + (", the same numbers in each" if thresholds.numbers_must_agree else "")
        + ". Kept: highest status, then provenance trust, then newest, then longest."
        + (f" Left out (confirmed): {', '.join(short(h.id) for h in held)}." if held else "")
    )
    change = {
        "keep": str(keep.id),
        "supersede": [str(o.id) for o in others],
        "pairs": [{"a": str(p.a), "b": str(p.b), "cosine": p.cosine, "jaccard": p.jaccard} for p in pairs],
        "thresholds": thresholds.as_json(),
        "versions": {str(f.id): {"version": f.version, "content_hash": f.content_hash} for f in (keep, *others)},
    }
    return Merge(keep, others, pairs, reason, change, dedupe_key([keep, *others]))


class Consolidator:
    """Runs passes: on demand (the Consolidate RPC) and every MNEMO_CONSOLIDATE_INTERVAL_S."""

    def __init__(
        self, pool: asyncpg.Pool, settings: IngestSettings, trust: TrustSettings, drafter: Drafter | None = None
    ) -> None:
        self.pool = pool
        self.settings = settings
        self.trust = trust
        self.drafter = drafter
        self.thresholds = Thresholds(
            settings.consolidate_min_cosine,
            settings.consolidate_min_jaccard,
            settings.consolidate_neighbours,
            settings.consolidate_numbers_must_agree,
        )
        self._task: asyncio.Task[None] | None = None
        self._running: dict[tuple[str, bool, bool], asyncio.Task[Pass]] = {}

    async def run(self, ref: str, dry_run: bool, full: bool) -> list[Pass]:
        """A pass over the workspace `ref` names, or over every workspace the caller may write
        (every one for an admin) when it is empty."""
        async with self.pool.acquire() as conn:
            if ref.strip():
                workspaces = [(await resolve_for_write(conn, ref)).id]
            else:
                workspaces = await self._callers_workspaces(conn)
        return [await self.run_workspace(ws, dry_run, full) for ws in workspaces]

    async def _callers_workspaces(self, conn: asyncpg.Connection) -> list[str]:
        call = current_call()
        rows = await conn.fetch("SELECT id FROM workspaces ORDER BY id")
        every = [r["id"] for r in rows]
        if call.all_workspaces:
            return every
        # A reviewer (the least role that may consolidate) may write global too.
        return [ws for ws in every if ws in call.workspaces or ws == GLOBAL_WORKSPACE]

    async def run_workspace(self, workspace_id: str, dry_run: bool = False, full: bool = False) -> Pass:
        """One workspace's pass. A caller that goes away does not stop it, and a caller asking for the
        same pass while it runs waits for it: a server closing a connection at its maximum age cuts
        a long RPC, and the channel's retry of it then joins the pass instead of starting over."""
        key = (workspace_id, dry_run, full)
        task = self._running.get(key)
        if task is None:
            task = asyncio.create_task(self._run_workspace(workspace_id, dry_run, full), name="consolidation-pass")
            self._running[key] = task
            task.add_done_callback(lambda done: self._finished(key, done))
        return await asyncio.shield(task)

    def _finished(self, key: tuple[str, bool, bool], task: asyncio.Task[Pass]) -> None:
        self._running.pop(key, None)
        if not task.cancelled() and task.exception() is not None:
            # Its callers (if any is still waiting) get the exception; this notes it for the one that left.
            log.warning("consolidation_pass_failed", workspace=key[0], error=str(task.exception())[:300])

    async def _run_workspace(self, workspace_id: str, dry_run: bool, full: bool) -> Pass:
        started = time.perf_counter()
        result = Pass(workspace_id, full=full, dry_run=dry_run)
        async with self.pool.acquire() as conn:
            await db.lock_workspace(conn, workspace_id)
            try:
                await self._pass(conn, result)
            finally:
                await db.unlock_workspace(conn, workspace_id)
        result.seconds = time.perf_counter() - started
        log.info(
            "consolidation_pass_completed",
            workspace=workspace_id,
            compared=result.compared,
            pairs=result.pairs,
            proposed=sum(m.created for m in result.merges),
            merges=len(result.merges),
            dry_run=dry_run,
            full=full,
            seconds=round(result.seconds, 3),
        )
        return result

    async def _pass(self, conn: asyncpg.Connection, result: Pass) -> None:
        ws = result.workspace_id
        mark = await db.pass_start(conn)
        since = None if result.full else await db.read_mark(conn, ws)
        changed = await db.changed_chunks(conn, ws, since)
        result.compared = len({r["memory_id"] for r in changed})
        neighbours: list[db.Neighbour] = []
        chunk_ids = [r["chunk_id"] for r in changed]
        for start in range(0, len(chunk_ids), BATCH_CHUNKS):
            async with conn.transaction(readonly=True):
                neighbours += await db.nearest_neighbours(
                    conn,
                    ws,
                    chunk_ids[start : start + BATCH_CHUNKS],
                    self.thresholds.neighbours,
                    self.thresholds.min_cosine,
                )
        ids = list({m for n in neighbours for m in (n.a, n.b)})
        facts = {r["id"]: Fact(**dict(r)) for r in await db.memory_facts(conn, ws, ids)} if ids else {}
        pairs = scored_pairs(neighbours, facts, self.thresholds)
        result.pairs = len(pairs)
        merges = [m for g in groups_of(pairs) if (m := plan_merge(g, facts, self.thresholds, self.trust))]
        known = await db.known_dedupe_keys(conn, ws, [m.dedupe_key for m in merges])
        for merge in merges:
            if merge.dedupe_key in known:
                continue  # proposed before (open, applied, rejected or reversed): nothing new
            if self.drafter is not None:
                await self._draft(merge)
            result.merges.append(merge)
            if result.dry_run:
                continue
            async with conn.transaction():
                row, created = await open_proposal(
                    conn,
                    NewProposal(
                        workspace_id=ws,
                        kind="merge",
                        memory_ids=merge.memory_ids,
                        reason=merge.reason,
                        proposed_by=PROPOSER,
                        source="consolidation",
                        change=merge.change,
                        dedupe_key=merge.dedupe_key,
                    ),
                )
            merge.proposal_id, merge.created = row["id"], created
        if not result.dry_run:
            async with conn.transaction():
                await db.write_mark(
                    conn, ws, mark, result.compared, result.pairs, sum(m.created for m in result.merges)
                )

    async def _draft(self, merge: Merge) -> None:
        """Asks the drafting endpoint for one text holding every note's facts; without an answer
        the merge keeps the best-trusted note (no merged_text)."""
        assert self.drafter is not None
        try:
            text = await self.drafter.draft([merge.keep.content, *(o.content for o in merge.others)])
        except DraftFailed as exc:
            log.warning("merge_draft_failed", keep=str(merge.keep.id), error=str(exc)[:300])
            return
        merge.change["merged_text"] = text
        merge.change["drafted_by"] = self.drafter.name
        merge.reason += f" Merged text drafted by {self.drafter.name}."

    async def start(self) -> None:
        if self.settings.consolidate_interval_s > 0:
            self._task = asyncio.create_task(self._loop(), name="consolidation")

    async def stop(self) -> None:
        tasks = [*self._running.values(), *([self._task] if self._task else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None
        if self.drafter is not None:
            await self.drafter.aclose()

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.consolidate_interval_s)
            token = set_call(CallContext(principal=PROPOSER, request_id=new_request_id()))
            try:
                with background_span("consolidation.round"):
                    async with self.pool.acquire() as conn:
                        workspaces = [r["id"] for r in await conn.fetch("SELECT id FROM workspaces ORDER BY id")]
                    for ws in workspaces:
                        await self.run_workspace(ws)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # The next pass starts from the same marks: nothing is lost but time.
                log.warning("consolidation_failed", error=f"{type(exc).__name__}: {exc}"[:300])
            finally:
                reset_call(token)
