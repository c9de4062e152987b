"""Feedback over real gRPC on the shared hash stack: votes recorded and replaced, the bounded factor
in ranking and `explain`, one principal capped at one step, proposals opened once, bad input refused
with nothing written. Each test works in workspaces of its own (never `global`)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg
import grpc
import pytest

from mnemo.common.v1 import common_pb2
from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo.ingest.v1 import ingest_service_pb2 as pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_platform import CallContext, reason_of
from mnemo_store.feedback import FACTOR_MAX, FACTOR_MIN, MAX_STEP, STEP, feedback_factor
from tests.helpers import Clients, wait_posted

USEFUL, NOT_USEFUL, OUTDATED, HARMFUL = (
    pb.FEEDBACK_VOTE_USEFUL,
    pb.FEEDBACK_VOTE_NOT_USEFUL,
    pb.FEEDBACK_VOTE_OUTDATED,
    pb.FEEDBACK_VOTE_HARMFUL,
)


def as_agent(principal: str, workspace_id: str) -> list[tuple[str, str]]:
    """The metadata a gateway forwards for an agent token (unsigned: the stack runs without auth)."""
    return CallContext(principal, uuid.uuid4().hex, "agent", (workspace_id,), "").metadata()


async def vote(
    clients: Clients, principal: str, ws: str, memory_id: str, value: int, **fields: Any
) -> pb.RecordFeedbackResponse:
    request = pb.RecordFeedbackRequest(workspace=ws, id=memory_id, vote=value, **fields)
    return await clients.ingest.RecordFeedback(request, metadata=as_agent(principal, ws))


async def refused(clients: Clients, principal: str, ws: str, request: pb.RecordFeedbackRequest) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await clients.ingest.RecordFeedback(request, metadata=as_agent(principal, ws))
    return caught.value


async def db_rows(clients: Clients, sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(clients.stack.dsn)
    try:
        await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


async def explained(clients: Clients, ws: str, query: str) -> list[search_pb.SearchHit]:
    response = await clients.find(ws, query, mode="lexical", explain=True)
    return list(response.hits)


def test_the_formula_caps_one_principal_and_holds_the_bounds() -> None:
    assert feedback_factor([]) == 1.0
    assert feedback_factor(["useful"]) == pytest.approx(1 + STEP)
    assert feedback_factor(["harmful"]) == pytest.approx(1 - 2 * STEP) == pytest.approx(1 - MAX_STEP)
    assert feedback_factor(["useful"] * 100) == FACTOR_MAX
    assert feedback_factor(["harmful"] * 100) == FACTOR_MIN
    assert feedback_factor(["useful", "not-useful"]) == pytest.approx(1.0)


async def test_a_vote_is_recorded_and_a_later_one_replaces_it(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace(f"fb-votes-{uuid.uuid4().hex[:8]}")
    memory = await hash_clients.write(ws.id, "The release branch is cut on Thursdays.")
    first = await vote(hash_clients, "agent-a", ws.id, memory.id, USEFUL, note="saved me a question")
    assert (first.feedback.vote, first.replaced, first.voters) == (USEFUL, pb.FEEDBACK_VOTE_UNSPECIFIED, 1)
    assert first.feedback_factor == pytest.approx(1 + STEP)
    assert (first.feedback.principal, first.feedback.workspace_id, first.feedback.note) == (
        "agent-a",
        ws.id,
        "saved me a question",
    )
    assert first.memory.trust == pytest.approx(0.85 * (1 + STEP), rel=1e-6)  # active x agent (1.0) x feedback
    second = await vote(hash_clients, "agent-a", ws.id, memory.id, NOT_USEFUL)
    assert (second.replaced, second.voters) == (USEFUL, 1)
    assert second.feedback_factor == pytest.approx(1 - STEP)
    rows = await db_rows(hash_clients, "SELECT principal, vote, note FROM feedback WHERE memory_id = $1", memory.id)
    assert [(r["principal"], r["vote"], r["note"]) for r in rows] == [("agent-a", "not-useful", "")]
    # A note lands in the audit log and may become a proposal's reason: a pasted secret is redacted first.
    secret = "ghp_Fk7abcdefghijklmnopqrstuvwxyz0123456"
    noted = await vote(hash_clients, "agent-c", ws.id, memory.id, NOT_USEFUL, note=f"the token {secret} failed")
    assert noted.feedback.note == "the token [REDACTED:github-token] failed"
    # Positive control: another principal's vote is a row of its own and counts beside the first.
    third = await vote(hash_clients, "agent-b", ws.id, memory.id, USEFUL)
    assert (third.voters, third.feedback_factor) == (3, pytest.approx(1 - STEP))
    events = await db_rows(
        hash_clients,
        "SELECT principal, details FROM audit_events WHERE action = 'feedback' AND memory_id = $1 ORDER BY id",
        memory.id,
    )
    assert [(e["principal"], e["details"]["vote"], e["details"]["replaced"]) for e in events] == [
        ("agent-a", "useful", None),
        ("agent-a", "not-useful", "useful"),
        ("agent-c", "not-useful", None),
        ("agent-b", "useful", None),
    ]
    # The vote does not make the memory newer: recency and the version are untouched.
    read = await hash_clients.search.GetMemory(search_pb.GetMemoryRequest(workspace=ws.id, id=memory.id))
    assert (read.memory.version, read.memory.updated_at) == (1, memory.updated_at)


async def test_one_principal_voting_fifty_times_moves_the_factor_one_step(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace(f"fb-cap-{uuid.uuid4().hex[:8]}")
    up = await hash_clients.write(ws.id, "Pin the linter version in CI.")
    down = await hash_clients.write(ws.id, "Run the linter only on changed files.")
    for _ in range(50):
        last_up = await vote(hash_clients, "eager-agent", ws.id, up.id, USEFUL)
        last_down = await vote(hash_clients, "eager-agent", ws.id, down.id, HARMFUL)
    assert (last_up.voters, last_up.feedback_factor, last_up.unchanged) == (1, pytest.approx(1 + STEP), True)
    # Audited once: the repeats changed nothing, so they wrote nothing.
    audited = await db_rows(
        hash_clients, "SELECT count(*) AS n FROM audit_events WHERE action = 'feedback' AND memory_id = $1", up.id
    )
    assert audited[0]["n"] == 1
    assert (last_down.voters, last_down.feedback_factor) == (1, pytest.approx(1 - MAX_STEP))
    count = await db_rows(
        hash_clients, "SELECT count(*) AS n FROM feedback WHERE memory_id = ANY($1::uuid[])", [up.id, down.id]
    )
    assert count[0]["n"] == 2
    # Positive control: the same votes from four distinct principals move it four steps.
    for n in range(4):
        many = await vote(hash_clients, f"agent-{n}", ws.id, up.id, USEFUL)
    assert (many.voters, many.feedback_factor) == (5, pytest.approx(min(FACTOR_MAX, 1 + 5 * STEP)))


async def test_ranking_rises_with_several_principals_and_not_with_one_alone(hash_clients: Clients) -> None:
    """Two memories that match a query equally; the confirmed one outranks the active one by the status
    weights (1.0 against 0.85). One agent voting the active one useful 50 times moves it one step (1.05:
    still behind); four principals (1.20) lift it above."""
    ws = await hash_clients.workspace(f"fb-rank-{uuid.uuid4().hex[:8]}")
    word = f"quasar{uuid.uuid4().hex[:6]}"
    lower = await hash_clients.write(ws.id, f"The {word} job retries three times before paging.")
    upper = await hash_clients.write(ws.id, f"The {word} job retries seven times before paging.")
    await hash_clients.ingest.ConfirmMemory(pb.ConfirmMemoryRequest(workspace=ws.id, id=upper.id))
    await wait_posted(hash_clients.stack.dsn)
    before = await explained(hash_clients, ws.id, word)
    assert [h.memory.id for h in before] == [upper.id, lower.id]  # positive control: the status weights rank
    assert before[0].explanation.fused_score == before[1].explanation.fused_score  # an equal match
    assert [h.explanation.feedback_factor for h in before] == [1.0, 1.0]

    for _ in range(50):
        await vote(hash_clients, "lone-agent", ws.id, lower.id, USEFUL)
    alone = await explained(hash_clients, ws.id, word)
    assert [h.memory.id for h in alone] == [upper.id, lower.id]
    assert alone[1].explanation.feedback_factor == pytest.approx(1 + STEP)
    assert alone[1].score / before[1].score == pytest.approx(1 + STEP, rel=1e-3)  # no more than one vote's step
    assert alone[1].explanation.trust_factor == pytest.approx(0.85 * (1 + STEP), rel=1e-6)

    for n in range(3):
        await vote(hash_clients, f"peer-{n}", ws.id, lower.id, USEFUL)
    after = await explained(hash_clients, ws.id, word)
    assert [h.memory.id for h in after] == [lower.id, upper.id]
    assert after[0].explanation.feedback_factor == pytest.approx(1 + 4 * STEP)


async def test_harmful_votes_sink_a_memory_and_open_one_retract_proposal(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace(f"fb-harm-{uuid.uuid4().hex[:8]}")
    word = f"nebula{uuid.uuid4().hex[:6]}"
    bad = await hash_clients.write(ws.id, f"To reset {word} state, delete the data directory.")
    good = await hash_clients.write(ws.id, f"To reset {word} state, run the reset command.")
    await hash_clients.ingest.ConfirmMemory(pb.ConfirmMemoryRequest(workspace=ws.id, id=bad.id))
    await wait_posted(hash_clients.stack.dsn)
    before = await explained(hash_clients, ws.id, word)
    assert [h.memory.id for h in before] == [bad.id, good.id]  # positive control: confirmed first
    first = await vote(hash_clients, "agent-x", ws.id, bad.id, HARMFUL, note="this deletes production data")
    assert first.proposal_created and first.proposal_id
    for principal in ("agent-x", "agent-y", "agent-z", "agent-y"):
        again = await vote(hash_clients, principal, ws.id, bad.id, HARMFUL, note="still harmful")
        assert (again.proposal_id, again.proposal_created) == (first.proposal_id, False)
    after = await explained(hash_clients, ws.id, word)
    assert [h.memory.id for h in after] == [good.id, bad.id]
    assert after[1].explanation.feedback_factor == pytest.approx(1 - 3 * MAX_STEP)
    proposals = await db_rows(
        hash_clients, "SELECT * FROM proposals WHERE $1::uuid = ANY(memory_ids) ORDER BY created_at", bad.id
    )
    assert len(proposals) == 1
    opened = proposals[0]
    assert (opened["kind"], opened["source"], opened["state"], opened["workspace_id"]) == (
        "retract",
        "feedback",
        "open",
        ws.id,
    )
    assert (str(opened["id"]), opened["reason"], opened["proposed_by"]) == (
        first.proposal_id,
        "this deletes production data",
        "agent-x",
    )
    # Positive control: a useful vote on the other memory opens nothing.
    plain = await vote(hash_clients, "agent-x", ws.id, good.id, USEFUL)
    assert (plain.proposal_id, plain.proposal_created) == ("", False)
    assert not await db_rows(hash_clients, "SELECT 1 FROM proposals WHERE $1::uuid = ANY(memory_ids)", good.id)


async def test_outdated_opens_a_supersede_with_a_successor_else_a_retract(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace(f"fb-outdated-{uuid.uuid4().hex[:8]}")
    old = await hash_clients.write(ws.id, "Deploys go through Jenkins.")
    new = await hash_clients.write(ws.id, "Deploys go through GitHub Actions since March.")
    stale = await hash_clients.write(ws.id, "The staging database is on version 13.")
    for principal in ("agent-a", "agent-b", "agent-a"):
        named = await vote(hash_clients, principal, ws.id, old.id, OUTDATED, successor_id=new.id, note="moved")
        bare = await vote(hash_clients, principal, ws.id, stale.id, OUTDATED, note="it is on 16 now")
    rows = await db_rows(
        hash_clients,
        "SELECT kind, memory_ids, change, reason, source FROM proposals WHERE memory_ids && $1::uuid[] ORDER BY kind",
        [uuid.UUID(old.id), uuid.UUID(stale.id)],
    )
    assert [(r["kind"], [str(i) for i in r["memory_ids"]], r["source"]) for r in rows] == [
        ("retract", [stale.id], "feedback"),
        ("supersede", [old.id, new.id], "feedback"),
    ]
    assert rows[1]["change"] == {"vote": "outdated", "successor_id": new.id}
    assert rows[0]["reason"] == "it is on 16 now"
    assert named.proposal_id and bare.proposal_id and named.proposal_id != bare.proposal_id
    # The vote itself counts like any other: two principals, two steps each.
    assert named.feedback_factor == pytest.approx(1 - 2 * MAX_STEP)
    # A reviewer accepting the supersede applies it: the old belief is superseded by the one named.
    await hash_clients.ingest.AcceptProposal(
        pb.AcceptProposalRequest(workspace=ws.id, id=named.proposal_id, reason="agreed")
    )
    after = await hash_clients.search.GetMemory(
        search_pb.GetMemoryRequest(workspace=ws.id, id=old.id, options=common_pb2.ReadOptions(include_history=True))
    )
    assert after.memory.superseded_by == new.id


async def test_bad_input_is_refused_clearly_and_writes_nothing(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace(f"fb-bad-{uuid.uuid4().hex[:8]}")
    other = await hash_clients.workspace(f"fb-other-{uuid.uuid4().hex[:8]}")
    memory = await hash_clients.write(ws.id, "Use UTC in every log line.")
    foreign = await hash_clients.write(other.id, "The other team's secret plan.")
    unknown = str(uuid.uuid4())

    def request(**fields: Any) -> pb.RecordFeedbackRequest:
        return pb.RecordFeedbackRequest(**{"workspace": ws.id, "id": memory.id, "vote": USEFUL, **fields})

    async def counts() -> tuple[int, int, int]:
        rows = await db_rows(
            hash_clients,
            "SELECT (SELECT count(*) FROM feedback) AS f, (SELECT count(*) FROM audit_events) AS a, "
            "(SELECT count(*) FROM proposals) AS p",
        )
        return rows[0]["f"], rows[0]["a"], rows[0]["p"]

    cases: list[tuple[pb.RecordFeedbackRequest, grpc.StatusCode, str, pb.RecordFeedbackRequest]] = [
        (request(vote=0), grpc.StatusCode.INVALID_ARGUMENT, "vote is required", request()),
        (request(vote=99), grpc.StatusCode.INVALID_ARGUMENT, "vote must be one of useful, not-useful", request()),
        (request(id="not-a-uuid"), grpc.StatusCode.INVALID_ARGUMENT, "not-a-uuid", request()),
        (request(id=unknown), grpc.StatusCode.NOT_FOUND, f"memory {unknown} not found in workspace", request()),
        (
            request(note="x" * 2001),
            grpc.StatusCode.INVALID_ARGUMENT,
            "note is 2001 characters",
            request(note="x" * 2000),
        ),
        (request(note="bad\x00note"), grpc.StatusCode.INVALID_ARGUMENT, "NUL", request(note="good note")),
        (
            request(vote=HARMFUL, successor_id=memory.id),
            grpc.StatusCode.INVALID_ARGUMENT,
            "outdated vote only",
            request(vote=OUTDATED),
        ),
        (
            request(vote=OUTDATED, successor_id=memory.id),
            grpc.StatusCode.INVALID_ARGUMENT,
            "cannot replace itself",
            request(vote=OUTDATED),
        ),
        (
            request(vote=OUTDATED, successor_id=foreign.id),
            grpc.StatusCode.NOT_FOUND,
            f"successor {foreign.id} not found in workspace",
            request(vote=OUTDATED),
        ),
    ]
    for bad, code, words, good in cases:
        before = await counts()
        error = await refused(hash_clients, "agent-bad", ws.id, bad)
        assert error.code() == code and words in (error.details() or ""), (bad, error.details())
        assert await counts() == before, bad
        # Positive control beside each: the request done right is recorded.
        done = await hash_clients.ingest.RecordFeedback(good, metadata=as_agent("agent-bad", ws.id))
        assert done.feedback.memory_id == memory.id

    # Another workspace's memory answers exactly as an id that never existed, and is left untouched.
    before = await counts()
    alien = await refused(hash_clients, "agent-bad", ws.id, request(id=foreign.id))
    never = await refused(hash_clients, "agent-bad", ws.id, request(id=unknown))
    assert alien.code() == never.code() == grpc.StatusCode.NOT_FOUND
    assert reason_of(alien) == reason_of(never) == reasons_pb.ERROR_REASON_MEMORY_NOT_FOUND
    assert alien.details().replace(foreign.id, "<id>") == never.details().replace(unknown, "<id>")
    assert await counts() == before
    untouched = await db_rows(hash_clients, "SELECT feedback_factor FROM memories WHERE id = $1", foreign.id)
    assert untouched[0]["feedback_factor"] == 1.0
    # Naming the other workspace outright is refused before anything is looked up.
    walled = await refused(hash_clients, "agent-bad", ws.id, request(workspace=other.id, id=foreign.id))
    assert walled.code() == grpc.StatusCode.PERMISSION_DENIED
    # Positive control: the other workspace's own agent votes on it.
    own = await vote(hash_clients, "agent-other", other.id, foreign.id, USEFUL)
    assert own.feedback_factor == pytest.approx(1 + STEP)


async def test_a_deleted_memory_takes_no_vote_and_a_purged_one_loses_its_votes(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace(f"fb-gone-{uuid.uuid4().hex[:8]}")
    memory = await hash_clients.write(ws.id, "Rotate the signing key yearly.")
    await vote(hash_clients, "agent-a", ws.id, memory.id, USEFUL, note="a note quoting it")
    await hash_clients.ingest.DeleteMemory(pb.DeleteMemoryRequest(workspace=ws.id, id=memory.id, reason="junk"))
    error = await refused(
        hash_clients, "agent-a", ws.id, pb.RecordFeedbackRequest(workspace=ws.id, id=memory.id, vote=USEFUL)
    )
    assert error.code() == grpc.StatusCode.NOT_FOUND and reason_of(error) == reasons_pb.ERROR_REASON_MEMORY_DELETED
    assert len(await db_rows(hash_clients, "SELECT 1 FROM feedback WHERE memory_id = $1", memory.id)) == 1
    await hash_clients.ingest.PurgeMemory(pb.PurgeMemoryRequest(workspace=ws.id, id=memory.id, force=True))
    assert not await db_rows(hash_clients, "SELECT 1 FROM feedback WHERE memory_id = $1", memory.id)
