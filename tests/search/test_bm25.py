"""The lexical leg ranks by BM25 (docs/lexical-bm25.md): rare words weigh more, each workspace's
statistics are its own, a note is found before the poster has written its postings, a chunk that
left the indexes is not returned while its postings linger, and a selective filter does not
come back short."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from mnemo.common.v1 import common_pb2
from mnemo.ingest.v1 import ingest_service_pb2 as ipb
from mnemo.search.v1 import search_service_pb2 as spb
from mnemo_embed import HashEmbedder
from mnemo_search import engine
from mnemo_store import Scope
from tests.helpers import Clients, Postgres, ids, long_note, start_stack, wait_posted

# The poster's transaction lock (sql/0008_lexical_postings.sql, lexical_post): a session holding
# it keeps every poster out, so the test decides what is posted when.
POSTER_LOCK = "SELECT pg_advisory_lock(hashtextextended('mnemo.lexical', 0))"
POSTER_UNLOCK = "SELECT pg_advisory_unlock(hashtextextended('mnemo.lexical', 0))"


def word() -> str:
    return f"w{uuid.uuid4().hex[:8]}"


async def lexical(clients: Clients, workspace: str, query: str, **fields: object) -> list[str]:
    return ids(await clients.find(workspace, query, mode="lexical", limit=50, **fields))


async def test_a_rare_word_outweighs_common_ones(hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    common = [
        (await hash_clients.write(ws, f"Note {i}: the deploy pipeline runs the deploy checks.")).id for i in range(20)
    ]
    rare = (await hash_clients.write(ws, "The deploy uses the kestrel signing key.")).id
    await wait_posted(hash_clients.stack.dsn)
    # Twenty notes hold "deploy" and "pipeline" (twice "deploy"); one holds "kestrel". Counting
    # words, the common notes match more of the query; by BM25 the rare word decides.
    found = await lexical(hash_clients, ws, "deploy pipeline kestrel")
    assert found[0] == rare, found
    assert set(found[1:]) == set(common)
    # Positive control: without the rare word, the pipeline notes come first and the kestrel note last.
    control = await lexical(hash_clients, ws, "deploy pipeline")
    assert set(control[:20]) == set(common) and control[20] == rare


async def test_another_workspace_does_not_move_a_workspace_s_scores(hash_clients: Clients) -> None:
    one, two = (await hash_clients.workspace()).id, (await hash_clients.workspace()).id
    term = word()
    note = await hash_clients.write(one, f"The {term} cache is warmed at start-up by the loader.")
    await hash_clients.write(one, "The loader reads the manifest first.")
    await wait_posted(hash_clients.stack.dsn)

    async def score() -> float:
        hits = (await hash_clients.find(one, term, mode="lexical", limit=50, explain=True)).hits
        [score] = [hit.explanation.lexical.score for hit in hits if hit.memory.id == note.id]
        return score

    before = await score()
    for i in range(30):
        await hash_clients.write(two, f"Another team's {term} note {i}.")
    await wait_posted(hash_clients.stack.dsn)
    # The other workspace made the word common there; here it is as rare as before.
    assert await score() == before
    # Positive control: the same notes in this workspace make the word common here (its idf falls
    # from ln(3 / 1.5) to ln(33 / 31.5)).
    for i in range(30):
        await hash_clients.write(one, f"Our own {term} note {i}.")
    await wait_posted(hash_clients.stack.dsn)
    assert await score() < before


async def test_a_long_note_s_chunks_count_once_in_a_word_s_rarity(hash_clients: Clients) -> None:
    """The idf counts memories, not chunks (sql/0023_memory_df.sql)."""
    ws = (await hash_clients.workspace()).id
    titled, spread = word(), word()
    # One long note that names `titled` in its title and each of its six chunks (the hash
    # embedder's window cuts it). Four short notes hold `spread`, one as long `titled`.
    await hash_clients.write(ws, long_note(titled, 6), title=f"The {titled} journal")
    once = (await hash_clients.write(ws, f"The {titled} was seen at dawn, 9.")).id
    spread_ids = [(await hash_clients.write(ws, f"The {spread} was seen at dawn, {i}.")).id for i in range(4)]
    await wait_posted(hash_clients.stack.dsn)
    conn = await asyncpg.connect(hash_clients.stack.dsn)
    try:
        postings = await conn.fetchval(
            "SELECT sum(df) FROM lexical_terms WHERE workspace_id = $1 AND lexeme = $2", ws, titled
        )
    finally:
        await conn.close()
    # Positive control: counted in chunks, `titled` is the commoner word (7 postings against 4).
    assert postings == 7
    # In memories it is the rarer (2 against 4): the note holding it outranks those holding `spread`.
    found = await lexical(hash_clients, ws, f"{titled} {spread} dawn")
    assert once in found and set(spread_ids) <= set(found), found
    assert found.index(once) < min(found.index(i) for i in spread_ids), found


async def test_a_note_is_found_before_its_postings_and_leaves_before_they_do(hash_clients: Clients) -> None:
    dsn = hash_clients.stack.dsn
    ws = (await hash_clients.workspace()).id
    term = word()
    lock = await asyncpg.connect(dsn)
    try:
        await lock.execute(POSTER_LOCK)
        old = await hash_clients.write(ws, f"The {term} flag is read at start-up.")
        # Not posted yet: scored from its own text.
        assert (
            await lock.fetchval(
                "SELECT count(*) FROM lexical_queue q JOIN chunks c ON c.id = q.chunk_id WHERE c.workspace_id = $1", ws
            )
            == 1
        )
        assert await lexical(hash_clients, ws, term) == [old.id]
        status = await hash_clients.search.GetStatus(spb.GetStatusRequest(workspace=ws))
        assert status.lexical_pending == 1
    finally:
        await lock.execute(POSTER_UNLOCK)
    await wait_posted(dsn)
    assert await lexical(hash_clients, ws, term) == [old.id]
    await lock.execute(POSTER_LOCK)
    try:
        response = await hash_clients.ingest.SupersedeMemory(
            ipb.SupersedeMemoryRequest(
                workspace=ws,
                id=old.id,
                reason="renamed",
                successor=ipb.WriteMemoryRequest(content=f"The {term} flag is read on every request."),
            )
        )
        successor = response.successor.id
        # The superseded note's postings are still there; the predicate keeps it out.
        assert (
            await lock.fetchval(
                "SELECT count(*) FROM lexical_postings p JOIN lexical_posted d USING (chunk_id) "
                "JOIN chunks c ON c.id = p.chunk_id WHERE c.memory_id = $1",
                uuid.UUID(old.id),
            )
            > 0
        )
        assert await lexical(hash_clients, ws, term) == [successor]
    finally:
        await lock.execute(POSTER_UNLOCK)
        await lock.close()
    await wait_posted(dsn)
    assert await lexical(hash_clients, ws, term) == [successor]


@contextlib.asynccontextmanager
async def stack_clients(postgres: Postgres, database: str, **env: str) -> AsyncIterator[Clients]:
    """Clients of a stack of its own, on the hash embedder, with `env` for its settings."""
    stack = await start_stack(await postgres.create_database(database), HashEmbedder(64), **env)
    clients = Clients(stack)
    try:
        yield clients
    finally:
        await clients.close()
        await stack.stop()


@pytest.fixture(scope="module")
async def narrow_clients(postgres: Postgres) -> AsyncIterator[Clients]:
    """A stack taking candidates from at most 10 postings, so a test corpus can outgrow it."""
    async with stack_clients(postgres, "bm25", MNEMO_LEXICAL_CANDIDATES="10") as clients:
        yield clients


def counting(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """The lexical statements each search runs from now on: its candidate budget, None when widened."""
    statements: list[int | None] = []
    match = engine.SearchEngine._lexical_match

    async def counted(
        self: engine.SearchEngine, scope: Scope, terms: list[str], limit: int, candidates: int | None
    ) -> tuple[list[engine.LegHit], bool, bool]:
        statements.append(candidates)
        return await match(self, scope, terms, limit, candidates)

    monkeypatch.setattr(engine.SearchEngine, "_lexical_match", counted)
    return statements


async def test_a_selective_filter_does_not_come_back_short(
    narrow_clients: Clients, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = (await narrow_clients.workspace()).id
    rare, common = word(), word()
    rare_written = [await narrow_clients.write(ws, f"The {rare} and {common} note {i}.") for i in range(5)]
    rare_notes = {m.id for m in rare_written}
    # More than the candidates hold, each shorter than a kept note, so they outscore them.
    items = [ipb.WriteMemoryRequest(workspace=ws, content=f"A {common} note {i}.") for i in range(150)]
    written = await narrow_clients.ingest.WriteMemories(ipb.WriteMemoriesRequest(items=items))
    plain = {r.memory.id for r in written.results}
    decision = common_pb2.MEMORY_KIND_DECISION
    kept = [await narrow_clients.write(ws, f"A {common} note, kept {i}.", kind=decision) for i in range(12)]
    await wait_posted(narrow_clients.stack.dsn)
    query = f"{rare} {common}"
    statements = counting(monkeypatch)
    # Unfiltered, the rare word's five postings are the candidates (within the cap of 10).
    assert set(await lexical(narrow_clients, ws, query)) == rare_notes
    # Written after the rest, the kept notes are all a time filter keeps. None of the candidates
    # is among them: the leg widens to every posting and returns ten of the twelve.
    since = common_pb2.MemoryFilter(created_after=kept[0].created_at)
    statements.clear()
    filtered = await narrow_clients.find(ws, query, mode="lexical", limit=10, filter=since)
    assert len(filtered.hits) == 10 and set(ids(filtered)) <= {m.id for m in kept}
    assert not set(ids(filtered)) & plain
    assert statements == [10, None]
    # Positive control: a time filter that keeps the plain notes too is met by the candidates the
    # common word's best postings made up (engine.lexical_query, `cut`), in one statement.
    statements.clear()
    since_rare = common_pb2.MemoryFilter(created_after=rare_written[0].created_at)
    made_up = await narrow_clients.find(ws, query, mode="lexical", limit=10, filter=since_rare)
    assert set(ids(made_up)[:5]) == rare_notes and set(ids(made_up)[5:]) <= plain and len(made_up.hits) == 10
    assert statements == [10]
    # A kind filter reads its kind's postings only (sql/0019_lexical_kinds.sql): its candidates
    # are the kept notes, and one statement returns ten of them.
    statements.clear()
    decisions = await narrow_clients.find(
        ws, query, mode="lexical", limit=10, filter=common_pb2.MemoryFilter(kinds=[decision])
    )
    assert ids(decisions) == ids(filtered)
    assert statements == [10]


async def test_a_tag_filter_ranks_alike_reading_the_scope_or_the_postings(
    narrow_clients: Clients, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a tag filter the leg reads the tag's chunks when they are few enough
    (engine.SCOPE_FIRST_RATIO and the bound in lexical_query) and then scores every one that holds
    a query word, in one statement; otherwise it checks the postings against the filter and,
    short, widens to every posting: the same results, with the same scores, either way."""
    ws = (await narrow_clients.workspace()).id
    rare, common = word(), word()
    for i in range(5):
        await narrow_clients.write(ws, f"The {rare} and {common} note {i}.")
    # More than the candidates take from the common word (see `cut` in engine.lexical_query), all
    # scoring above the tagged notes.
    items = [ipb.WriteMemoryRequest(workspace=ws, content=f"A {common} note {i}.") for i in range(150)]
    plain = {
        r.memory.id for r in (await narrow_clients.ingest.WriteMemories(ipb.WriteMemoriesRequest(items=items))).results
    }
    # Different term frequencies and lengths, so the scores differ from note to note.
    tagged = {
        (
            await narrow_clients.write(
                ws, f"A {' '.join([common] * (i % 3 + 1))} note, kept {i}{' and more' * i}.", tags=["keep"]
            )
        ).id
        for i in range(8)
    }
    await wait_posted(narrow_clients.stack.dsn)
    keep = common_pb2.MemoryFilter(tags=["keep"])
    statements = counting(monkeypatch)

    async def ranked() -> list[tuple[str, float]]:
        statements.clear()
        hits = (
            await narrow_clients.find(ws, f"{rare} {common}", mode="lexical", limit=20, filter=keep, explain=True)
        ).hits
        return [(hit.memory.id, round(hit.explanation.lexical.score, 9)) for hit in hits]

    # 8 chunks in the filter against 168 postings: the scope is read first, and is all there is.
    scope_first = await ranked()
    assert {memory for memory, _ in scope_first} == tagged
    assert len({score for _, score in scope_first}) > 1
    assert statements == [10]
    # With the ratio at 0 no scope is small enough: the candidates (the rare word's postings and
    # the common word's best) are checked against the filter, none passes, and the leg widens to
    # every posting.
    monkeypatch.setattr(engine, "SCOPE_FIRST_RATIO", 0)
    postings_first = await ranked()
    assert statements == [10, None]
    assert postings_first == scope_first
    assert not {memory for memory, _ in postings_first} & plain


async def test_a_kind_filter_widens_when_its_candidates_are_too_few(
    narrow_clients: Clients, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a kind filter alone the candidates can still be too few (the rare word's one posting
    and the next word's, with a third word beyond the budget): the leg widens to every posting of
    its kind and returns every decision holding a query word."""
    ws = (await narrow_clients.workspace()).id
    rare, second, third = word(), word(), word()
    decision = common_pb2.MEMORY_KIND_DECISION
    decided = {(await narrow_clients.write(ws, f"We chose {rare} for it.", kind=decision)).id}
    for w in (second, third):
        decided |= {(await narrow_clients.write(ws, f"We chose {w} plan {i}.", kind=decision)).id for i in range(12)}
    notes = {(await narrow_clients.write(ws, f"A {second} and {third} note {i}.")).id for i in range(5)}
    await wait_posted(narrow_clients.stack.dsn)
    statements = counting(monkeypatch)
    decisions = common_pb2.MemoryFilter(kinds=[decision])
    found = await lexical(narrow_clients, ws, f"{rare} {second} {third}", filter=decisions)
    assert set(found) == decided and statements == [10, None]
    # Positive control: unfiltered, the notes of the other kind hold the words too.
    assert notes <= set(await lexical(narrow_clients, ws, second))


async def test_a_widened_filter_without_a_tag_checks_the_best_first(narrow_clients: Clients) -> None:
    """Widened under a filter with no tag, the postings are scored first and the filter checked
    best first until enough pass: higher-scoring notes outside the filter are skipped, and the
    best notes inside it come back, all of them."""
    ws = (await narrow_clients.workspace()).id
    rare, common = word(), word()
    for i in range(5):
        await narrow_clients.write(ws, f"The {rare} and {common} note {i}.")
    # Outside the filter and first by score (four times the word), more of them than the leg keeps
    # (four times its 30 candidates): a filter applied after the cut would leave nothing.
    outside = {(await narrow_clients.write(ws, f"{common} {common} {common} {common} {i}.")).id for i in range(130)}
    first = await narrow_clients.write(ws, f"{common} {common} {common}, decided 0.")
    best = {first.id} | {
        (await narrow_clients.write(ws, f"{common} {common} {common}, decided {i}.")).id for i in range(1, 20)
    }
    rest = {(await narrow_clients.write(ws, f"A {common} decided, number {i}.")).id for i in range(130)}
    await wait_posted(narrow_clients.stack.dsn)
    since = common_pb2.MemoryFilter(created_after=first.created_at)
    found = ids(await narrow_clients.find(ws, f"{rare} {common}", mode="lexical", limit=20, filter=since))
    assert set(found) == best
    assert not set(found) & (outside | rest)
    # Positive control: unfiltered, the notes outside the filter come first.
    unfiltered = ids(await narrow_clients.find(ws, common, mode="lexical", limit=20))
    assert set(unfiltered) <= outside and len(unfiltered) == 20


@pytest.fixture(scope="module")
async def tight_clients(postgres: Postgres) -> AsyncIterator[Clients]:
    """A stack whose leg asks for 4 chunks (one candidate a leg) from at most 5 postings."""
    async with stack_clients(
        postgres, "bm25_tight", MNEMO_LEXICAL_CANDIDATES="5", MNEMO_SEARCH_CANDIDATES="1"
    ) as clients:
        yield clients


async def test_a_common_rarest_word_gives_its_best_postings_not_the_first_found(tight_clients: Clients) -> None:
    ws = (await tight_clients.workspace()).id
    common = word()
    early = [(await tight_clients.write(ws, f"A {common} note, written early, number {i}.")).id for i in range(30)]
    best = (await tight_clients.write(ws, f"{common} {common} {common}.")).id
    await wait_posted(tight_clients.stack.dsn)
    # 31 postings against a budget of 5: the best of them are the candidates, and the note written
    # last (its posting last in the index) is the best.
    found = ids(await tight_clients.find(ws, common, mode="lexical", limit=1))
    assert found == [best]
    # Positive control: asked for 30, the leg keeps 120 candidates, and every early note is found.
    assert set(ids(await tight_clients.find(ws, "early", mode="lexical", limit=30))) == set(early)
