"""Consolidation: near-duplicates inside a workspace become merge proposals, with their scores;
near misses, other workspaces and confirmed memories are left alone; reruns propose nothing new.

On the real model (the scores are about meaning); every test makes its own workspaces.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import grpc
import pytest

from mnemo.ingest.v1 import ingest_service_pb2 as pb
from mnemo_embed import HashEmbedder
from mnemo_ingest.consolidate import (
    Consolidator,
    Fact,
    Merge,
    Pair,
    Thresholds,
    jaccard,
    numbers_agree,
    plan_merge,
    word_set,
)
from mnemo_ingest.drafting import Drafter
from mnemo_ingest.settings import IngestSettings
from mnemo_platform.context import CallContext
from mnemo_store import embed_queue
from mnemo_wire import TrustSettings
from tests.harvest.fake_llm import fake_llm
from tests.helpers import Clients, Postgres, eventually, insert_note, migrated_pool, mnemo

DUP_A = "The staging database is reset every night at 02:00 UTC from the anonymised production snapshot."
DUP_B = "Note: the staging database is reset every night at 02:00 UTC from the anonymised production snapshot"
# Reads like the same fact and is not: the number differs.
NEAR_A = "The API rate limit is 600 requests per minute per token; a 429 response carries Retry-After."
NEAR_B = "The API rate limit is 1200 requests per minute per token; a 429 response carries Retry-After."


@pytest.fixture
async def db(model_clients: Clients) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(model_clients.stack.dsn)
    yield conn
    await conn.close()


async def written(clients: Clients, workspace: str, *texts: str, **fields: object) -> list[str]:
    ids = []
    for text in texts:
        memory = await clients.write(workspace, text, **fields)
        await clients.wait_embedded(memory.id, workspace)
        ids.append(memory.id)
    return ids


async def consolidate(clients: Clients, workspace: str, **fields: object) -> pb.ConsolidationPass:
    response = await clients.ingest.Consolidate(pb.ConsolidateRequest(workspace=workspace, **fields))
    (one,) = response.passes
    return one


async def proposals(db: asyncpg.Connection, workspace: str) -> list[asyncpg.Record]:
    return await db.fetch("SELECT * FROM proposals WHERE workspace_id = $1 ORDER BY created_at", workspace)


async def test_a_duplicate_pair_is_proposed_with_its_scores_and_a_near_miss_is_not(
    model_clients: Clients, db: asyncpg.Connection
) -> None:
    ws = (await model_clients.workspace()).id
    dup_a, dup_b, near_a, near_b = await written(model_clients, ws, DUP_A, DUP_B, NEAR_A, NEAR_B)

    one = await consolidate(model_clients, ws)

    assert one.workspace_id == ws and one.compared == 4
    # The positive control: the duplicate pair is proposed, the newer kept (both active agent notes).
    (merge,) = one.merges
    assert merge.created and list(merge.memory_ids) == [dup_b, dup_a]
    (pair,) = merge.pairs
    assert pair.cosine >= 0.85 and pair.jaccard >= 0.4
    assert "cosine" in merge.reason and "(>= 0.85)" in merge.reason and "Jaccard" in merge.reason
    (row,) = await proposals(db, ws)
    assert (row["kind"], row["source"], row["proposed_by"], row["state"]) == (
        "merge",
        "consolidation",
        "system:consolidate",
        "open",
    )
    assert [str(i) for i in row["memory_ids"]] == [dup_b, dup_a]
    change = json.loads(row["change"]) if isinstance(row["change"], str) else row["change"]
    assert change["keep"] == dup_b and change["supersede"] == [dup_a]
    assert change["thresholds"]["min_cosine"] == 0.85 and change["pairs"][0]["cosine"] == pytest.approx(pair.cosine)
    assert "merged_text" not in change  # no drafting endpoint configured
    assert f"{pair.cosine:.3f}" in row["reason"]
    # The near miss is close in meaning (it is why it is hard) but never proposed.
    for merge in one.merges:
        assert not {near_a, near_b} & set(merge.memory_ids)
    assert not await db.fetchval(
        "SELECT count(*) FROM proposals WHERE memory_ids && $1::uuid[]", [uuid.UUID(near_a), uuid.UUID(near_b)]
    )
    # Nothing was applied: every memory is still active.
    statuses = await db.fetch("SELECT status FROM memories WHERE workspace_id = $1", ws)
    assert {r["status"] for r in statuses} == {"active"}


async def test_never_across_workspaces(model_clients: Clients, db: asyncpg.Connection) -> None:
    left, right, together = [(await model_clients.workspace()).id for _ in range(3)]
    (a,) = await written(model_clients, left, DUP_A)
    (b,) = await written(model_clients, right, DUP_B)
    pair = await written(model_clients, together, DUP_A, DUP_B)

    # Workspace by workspace: a pass over every workspace would touch the shared stack's others
    # (and global); the periodic job's test covers that path on a database of its own.
    passes = {ws: await consolidate(model_clients, ws) for ws in (left, right, together)}

    # Each note's nearest neighbour in the database is the other, yet no pair is even scored.
    assert passes[left].compared == passes[right].compared == 1
    assert passes[left].pairs == passes[right].pairs == 0
    assert not passes[left].merges and not passes[right].merges
    assert not await db.fetchval(
        "SELECT count(*) FROM proposals WHERE memory_ids && $1::uuid[]", [uuid.UUID(a), uuid.UUID(b)]
    )
    # The positive control: the same two texts inside one workspace are proposed.
    (merge,) = passes[together].merges
    assert set(merge.memory_ids) == set(pair)


async def test_a_confirmed_memory_is_kept_never_superseded(model_clients: Clients, db: asyncpg.Connection) -> None:
    ws = (await model_clients.workspace()).id
    (confirmed,) = await written(model_clients, ws, DUP_A)
    await model_clients.ingest.ConfirmMemory(pb.ConfirmMemoryRequest(workspace=ws, id=confirmed))
    # Newer and longer, but only active: the confirmed one is kept all the same.
    (newer,) = await written(model_clients, ws, DUP_B + " (recorded again)")

    (merge,) = (await consolidate(model_clients, ws)).merges
    assert list(merge.memory_ids) == [confirmed, newer]

    # Two confirmed duplicates: neither may be superseded, so nothing is proposed for them.
    both = (await model_clients.workspace()).id
    ids = await written(model_clients, both, DUP_A, DUP_B)
    for memory_id in ids:
        await model_clients.ingest.ConfirmMemory(pb.ConfirmMemoryRequest(workspace=both, id=memory_id))
    one = await consolidate(model_clients, both)
    assert one.pairs == 1 and not one.merges  # found, and left alone
    assert await proposals(db, both) == []


async def test_a_rerun_proposes_nothing_new_and_a_changed_memory_is_reconsidered(
    model_clients: Clients, db: asyncpg.Connection
) -> None:
    ws = (await model_clients.workspace()).id
    a, b = await written(model_clients, ws, DUP_A, DUP_B)
    (first,) = (await consolidate(model_clients, ws)).merges
    assert first.created

    assert not (await consolidate(model_clients, ws)).merges
    assert not (await consolidate(model_clients, ws, full=True)).merges  # every memory compared again
    assert len(await proposals(db, ws)) == 1

    # A new version of one note is a new question: it is compared with its neighbours again.
    await model_clients.ingest.UpdateMemory(
        pb.UpdateMemoryRequest(workspace=ws, id=a, content=DUP_A + " Checked again today.")
    )
    await model_clients.wait_embedded(a, ws)
    (second,) = (await consolidate(model_clients, ws)).merges
    assert second.created and second.proposal_id != first.proposal_id and set(second.memory_ids) == {a, b}
    assert len(await proposals(db, ws)) == 2


async def test_only_memories_changed_since_the_last_pass_are_compared(
    model_clients: Clients, db: asyncpg.Connection
) -> None:
    ws = (await model_clients.workspace()).id
    await written(model_clients, ws, DUP_A, NEAR_A)
    await consolidate(model_clients, ws)
    # The pass's mark trails its start by a settle margin; move it past what is stored, as an
    # hour between passes would.
    await db.execute("UPDATE consolidation_marks SET scanned_to = clock_timestamp() WHERE workspace_id = $1", ws)
    assert (await consolidate(model_clients, ws)).compared == 0

    (new,) = await written(model_clients, ws, DUP_B)
    one = await consolidate(model_clients, ws)
    assert one.compared == 1  # only the new note, which finds its older duplicate
    (merge,) = one.merges
    assert new in merge.memory_ids


async def test_a_dry_run_writes_nothing(model_clients: Clients, db: asyncpg.Connection) -> None:
    ws = (await model_clients.workspace()).id
    await written(model_clients, ws, DUP_A, DUP_B)

    async def counts() -> tuple[int, int, int]:
        return (
            await db.fetchval("SELECT count(*) FROM proposals WHERE workspace_id = $1", ws),
            await db.fetchval("SELECT count(*) FROM audit_events WHERE workspace_id = $1", ws),
            await db.fetchval("SELECT count(*) FROM consolidation_marks WHERE workspace_id = $1", ws),
        )

    before = await counts()
    one = await consolidate(model_clients, ws, dry_run=True)
    (merge,) = one.merges
    assert one.dry_run and merge.proposal_id == "" and not merge.created
    assert await counts() == before
    # The positive control: the same call without dry_run writes the proposal, its audit event and the mark.
    (real,) = (await consolidate(model_clients, ws)).merges
    assert real.created and list(real.memory_ids) == list(merge.memory_ids)
    assert await counts() == (before[0] + 1, before[1] + 1, 1)


async def test_bad_input_is_refused_clearly(model_clients: Clients) -> None:
    ws = (await model_clients.workspace()).id
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await model_clients.ingest.Consolidate(pb.ConsolidateRequest(workspace=f"nowhere-{uuid.uuid4().hex[:6]}"))
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    assert "is not registered" in (unknown.value.details() or "")

    agent = CallContext("agent-bot", uuid.uuid4().hex, "agent", (ws,))
    with pytest.raises(grpc.aio.AioRpcError) as low:
        await model_clients.ingest.Consolidate(pb.ConsolidateRequest(workspace=ws), metadata=agent.metadata())
    assert low.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "consolidating near-duplicates needs the reviewer role; this token is agent" in (low.value.details() or "")

    other = (await model_clients.workspace()).id
    reviewer = CallContext("reviewer-bot", uuid.uuid4().hex, "reviewer", (other,))
    with pytest.raises(grpc.aio.AioRpcError) as foreign:
        await model_clients.ingest.Consolidate(pb.ConsolidateRequest(workspace=ws), metadata=reviewer.metadata())
    assert foreign.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "may not touch workspace" in (foreign.value.details() or "")
    # The positive control: the reviewer in its own workspace is served.
    response = await model_clients.ingest.Consolidate(
        pb.ConsolidateRequest(workspace=other), metadata=reviewer.metadata()
    )
    assert [p.workspace_id for p in response.passes] == [other]


async def test_a_drafting_endpoint_writes_the_merged_text(model_clients: Clients) -> None:
    ws = (await model_clients.workspace()).id
    await written(model_clients, ws, DUP_A, DUP_B)
    stack = model_clients.stack
    assert stack.ingest is not None and stack.ingest.pool is not None
    with fake_llm() as llm:
        llm.reply = "The staging database is reset nightly at 02:00 UTC from the anonymised production snapshot."
        settings = IngestSettings(consolidate_llm_url=llm.url, consolidate_llm_model="merge-model")
        drafter = Drafter.from_settings(settings)
        assert drafter is not None
        consolidator = Consolidator(stack.ingest.pool, settings, TrustSettings(), drafter)
        try:
            (merge,) = (await consolidator.run_workspace(ws, dry_run=True)).merges
            assert merge.change["merged_text"] == llm.reply and merge.change["drafted_by"] == "merge-model"
            (request,) = llm.requests
            assert request["path"] == "/v1/chat/completions"
            user = request["body"]["messages"][1]["content"]
            assert DUP_A in user and DUP_B in user
            # An endpoint that fails leaves the merge without merged text (the best-trusted note is kept).
            llm.fail_status = 500
            (plain,) = (await consolidator.run_workspace(ws, dry_run=True)).merges
            assert "merged_text" not in plain.change and plain.memory_ids == merge.memory_ids
        finally:
            await drafter.aclose()


async def test_the_cli_runs_a_pass_through_the_gateway(model_clients: Clients) -> None:
    ws = (await model_clients.workspace()).id
    await written(model_clients, ws, DUP_A, DUP_B)
    code, out, err = await mnemo(model_clients.stack, "consolidate", "--now", "-w", ws, "--dry-run")
    assert code == 0, err
    assert f"{ws}: 2 memories compared, 1 near-duplicate pairs, 1 merges would propose" in out
    assert "cosine" in out
    code, out, err = await mnemo(model_clients.stack, "consolidate", "--now", "-w", ws, "--json")
    assert code == 0, err
    (one,) = json.loads(out)["passes"]
    assert one["merges"][0]["created"] is True
    code, _, err = await mnemo(model_clients.stack, "consolidate")
    assert code == 2 and "--now" in err
    code, _, err = await mnemo(model_clients.stack, "consolidate", "--now", "-w", "no-such-workspace-xyz")
    assert code == 1 and "NOT_FOUND" in err


async def test_the_periodic_job_proposes_on_its_own(postgres: Postgres) -> None:
    """The job in the background, every MNEMO_CONSOLIDATE_INTERVAL_S, on a database of its own
    (so it cannot touch the shared stacks' workspaces)."""
    embedder = HashEmbedder(64)
    embedder.start()
    pool = await migrated_pool(postgres, embedder)
    consolidator = Consolidator(pool, IngestSettings(consolidate_interval_s=0.1), TrustSettings())
    try:
        ids = [(await insert_note(pool, DUP_A))[0] for _ in range(2)]
        rows = await embed_queue.claim(pool, 10, 60.0)
        (vector,) = await embedder.embed([DUP_A])
        await embed_queue.store_vectors(pool, [(r["id"], vector) for r in rows], embedder.model)
        await consolidator.start()

        async def proposed() -> bool:
            return bool(await pool.fetchval("SELECT count(*) FROM proposals"))

        await eventually(proposed, timeout=10)
        row = await pool.fetchrow("SELECT * FROM proposals")
        assert set(row["memory_ids"]) == set(ids) and row["proposed_by"] == "system:consolidate"
        principal = await pool.fetchval("SELECT principal FROM audit_events WHERE action = 'propose'")
        assert principal == "system:consolidate"
        # It keeps running, and proposes the same group only once.
        await asyncio.sleep(0.5)
        assert await pool.fetchval("SELECT count(*) FROM proposals") == 1
        assert await pool.fetchval("SELECT count(*) FROM consolidation_marks") >= 1
    finally:
        await consolidator.stop()
        await pool.close()


def _fact(status: str, provenance: str = "agent", age_s: int = 0, content: str = DUP_A) -> Fact:
    return Fact(
        id=uuid.uuid4(),
        status=status,
        provenance=provenance,
        version=1,
        content_hash=uuid.uuid4().hex,
        updated_at=datetime(2026, 12, 1, tzinfo=UTC) - timedelta(seconds=age_s),
        title="t",
        content=content,
    )


def test_the_kept_memory_is_the_best_trusted_and_a_confirmed_one_is_only_ever_kept() -> None:
    thresholds = Thresholds(0.85, 0.4, 10)
    trust = TrustSettings()

    def plan(*facts: Fact) -> Merge | None:
        pairs = [Pair(a.id, b.id, 0.95, 0.8) for a, b in itertools.pairwise(facts)]
        return plan_merge(pairs, {f.id: f for f in facts}, thresholds, trust)

    transcript_confirmed, agent_active = _fact("confirmed", "harvested_transcript", 100), _fact("active")
    merge = plan(transcript_confirmed, agent_active)
    assert merge is not None and merge.memory_ids == [transcript_confirmed.id, agent_active.id]  # status first
    human_candidate, transcript_candidate = _fact("candidate", "human", 100), _fact("candidate", "harvested_transcript")
    merge = plan(transcript_candidate, human_candidate)
    assert merge is not None and merge.keep == human_candidate  # then provenance, over the newer
    old, new = _fact("active", age_s=100), _fact("active")
    merge = plan(old, new)
    assert merge is not None and merge.keep == new  # then the newest
    short_, long_ = _fact("active", content=DUP_A), _fact("active", content=DUP_A + " More words.")
    merge = plan(short_, long_)
    assert merge is not None and merge.keep == long_  # then the longest

    # A chain through a second confirmed memory: it is left out, named, and its pairs shown.
    keep, held, other = _fact("confirmed", age_s=10), _fact("confirmed", age_s=20), _fact("active")
    merge = plan(keep, held, other)
    assert merge is not None and merge.memory_ids == [keep.id, other.id]
    assert f"Left out (confirmed): {str(held.id)[:8]}" in merge.reason and len(merge.pairs) == 2
    assert plan(_fact("confirmed"), _fact("confirmed")) is None  # nothing may be superseded


def test_numbers_must_agree_and_words_are_compared_as_sets() -> None:
    assert numbers_agree(DUP_A, DUP_B)
    assert not numbers_agree(NEAR_A, NEAR_B)
    assert numbers_agree("pin numpy below 2", "numpy stays under 2")
    assert jaccard(word_set("a b c"), word_set("C B a a")) == 1.0
    assert jaccard(word_set("a b"), word_set("b c")) == pytest.approx(1 / 3)


async def test_a_caller_that_leaves_does_not_stop_the_pass_and_a_repeat_joins_it(model_clients: Clients) -> None:
    """What a channel's retry of an RPC cut by the server's connection age gets: the pass it started."""
    ws = (await model_clients.workspace()).id
    await written(model_clients, ws, DUP_A, DUP_B)
    stack = model_clients.stack
    assert stack.ingest is not None and stack.ingest.pool is not None
    consolidator = Consolidator(stack.ingest.pool, IngestSettings(), TrustSettings())
    first = asyncio.create_task(consolidator.run_workspace(ws, dry_run=True))
    await asyncio.sleep(0)  # the pass has started
    (running,) = consolidator._running.values()
    first.cancel()
    second = await consolidator.run_workspace(ws, dry_run=True)
    assert first.cancelled() and not running.cancelled()
    assert second is running.result() and len(second.merges) == 1
    # Once it is over, the same call runs a new pass.
    assert await consolidator.run_workspace(ws, dry_run=True) is not second
    await consolidator.stop()
