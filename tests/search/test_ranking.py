"""After fusion, one statement ranks: its recency and trust factors are the documented ones, it
returns the best `limit`, and each snippet comes from the leg that found the memory."""

from __future__ import annotations

import pytest

from mnemo.common.v1 import common_pb2
from mnemo_wire import TrustSettings
from tests.helpers import Clients

TEXT = "The walrus ledger rotates its keys every quarter, by hand, with two people present."


async def test_the_ranking_statement_applies_recency_and_trust_as_documented(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    kinds = [
        (common_pb2.MEMORY_STATUS_UNSPECIFIED, common_pb2.PROVENANCE_UNSPECIFIED),
        (common_pb2.MEMORY_STATUS_CANDIDATE, common_pb2.PROVENANCE_HARVESTED_TRANSCRIPT),
        (common_pb2.MEMORY_STATUS_UNSPECIFIED, common_pb2.PROVENANCE_IMPORTED),
    ]
    written = [
        await hash_clients.write(ws.id, f"{TEXT} Copy {i}.", status=status, provenance=provenance)
        for i, (status, provenance) in enumerate(kinds)
    ]
    for memory in written:
        await hash_clients.wait_embedded(memory.id, ws.id)
    trust = TrustSettings()
    response = await hash_clients.find(ws.id, "walrus ledger keys", mode="hybrid", explain=True)
    assert {hit.memory.id for hit in response.hits} == {m.id for m in written}
    factors = set()
    for hit in response.hits:
        memory, why = hit.memory, hit.explanation
        # The trust factor ranked by is the one every memory message reports (TrustSettings.factor).
        expected_trust = trust.factor(
            common_pb2.MemoryStatus.Name(memory.status).removeprefix("MEMORY_STATUS_").lower(),
            common_pb2.Provenance.Name(memory.provenance).removeprefix("PROVENANCE_").lower(),
        )
        assert why.trust_factor == pytest.approx(memory.trust) == pytest.approx(expected_trust)
        factors.add(round(why.trust_factor, 6))
        # Written a moment ago: the recency factor is all but 1 (it falls towards 1 - weight), never above.
        assert 1 - 1e-4 < why.recency_factor <= 1
        assert hit.score == pytest.approx(why.fused_score * why.recency_factor * why.trust_factor)
        assert "«" in hit.snippet  # every one was found by the lexical leg: its words highlighted
    assert len(factors) == 3  # positive control: the statuses and provenances differ in weight
    scores = [hit.score for hit in response.hits]
    assert scores == sorted(scores, reverse=True)


async def test_the_ranking_statement_returns_the_best_limit_with_each_legs_snippet(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    notes = [await hash_clients.write(ws.id, f"{TEXT} Note number {i} of the set.") for i in range(6)]
    for memory in notes:
        await hash_clients.wait_embedded(memory.id, ws.id)
    everything = await hash_clients.find(ws.id, "walrus ledger", mode="hybrid")
    top = await hash_clients.find(ws.id, "walrus ledger", mode="hybrid", limit=2)
    assert len(everything.hits) == 6
    assert [h.memory.id for h in top.hits] == [h.memory.id for h in everything.hits[:2]]
    # The lexical leg's snippet highlights the words; the semantic leg's is the chunk's opening.
    lexical = await hash_clients.find(ws.id, "walrus ledger", mode="lexical", limit=1)
    semantic = await hash_clients.find(ws.id, "walrus ledger", mode="semantic", limit=1)
    assert "«walrus»" in lexical.hits[0].snippet.lower()
    assert "«" not in semantic.hits[0].snippet and semantic.hits[0].snippet.startswith("The walrus ledger")
