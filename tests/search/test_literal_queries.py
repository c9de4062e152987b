"""User text is always literal: operators, quotes, SQL-ish text, emoji, blanks and huge queries, property-tested."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemo.common.v1 import common_pb2
from mnemo.search.v1 import search_service_pb2 as search_pb
from tests.helpers import Clients, ids, table_counts

MODES = ["hybrid", "lexical", "semantic"]
GLOBAL_WORKSPACE = "global"
# A word no note contains: a literal all-words query that includes it can never match strictly.
ABSENT = "qqzxabsentword"

NOTES = {
    "nano": "The nano-brain module keeps its embeddings in a ring buffer.",
    "brain": "The brain service restarts every night at two.",
    "ops": "The legacy filter language combines clauses with AND OR NOT operators.",
    "phrase": "This is the exact phrase the release notes quote.",
    "reversed": "A phrase that is exact only when reversed.",
    "foo": "The foo flag controls how many retries a sync makes.",
    "sql": "Never run DROP TABLE memories against production; the workspace_id column is indexed.",
    "emoji": "Ship it 🚀 only after the canary deploy is green.",
    "zebra": "The zebracorn cache is warmed at start-up.",
}


@dataclass(frozen=True)
class Corpus:
    ws: common_pb2.Workspace
    other: common_pb2.Workspace
    notes: dict[str, str]  # key -> memory id in `ws`
    other_ids: frozenset[str]


@pytest.fixture(scope="module")
async def corpus(hash_clients: Clients) -> Corpus:
    """One workspace with the notes above, and another holding the same text (it must never leak in)."""
    ws = await hash_clients.workspace()
    other = await hash_clients.workspace()
    notes = {key: (await hash_clients.write(ws.id, text)).id for key, text in NOTES.items()}
    other_ids = frozenset([(await hash_clients.write(other.id, text)).id for text in NOTES.values()])
    for memory_id in notes.values():
        await hash_clients.wait_embedded(memory_id, ws.id)
    for memory_id in other_ids:
        await hash_clients.wait_embedded(memory_id, other.id)
    return Corpus(ws, other, notes, other_ids)


async def search(clients: Clients, corpus: Corpus, query: str, mode: str) -> search_pb.SearchResponse:
    return await clients.find(corpus.ws.id, query, mode=mode, limit=100)


def assert_sound(response: search_pb.SearchResponse, corpus: Corpus) -> None:
    """No leg failed quietly and every hit belongs to the searched workspace (or the global one)."""
    assert list(response.degraded) == []
    assert response.workspace.id == corpus.ws.id
    for hit in response.hits:
        assert hit.memory.workspace_id in (corpus.ws.id, GLOBAL_WORKSPACE)
        assert hit.memory.id not in corpus.other_ids


# -- concrete cases ------------------------------------------------------------------------------------


async def test_the_corpus_is_searchable_in_every_mode(hash_clients: Clients, corpus: Corpus) -> None:
    # Positive control for everything below: plain words find their note in each mode.
    for mode in MODES:
        found = await search(hash_clients, corpus, "zebracorn cache warmed", mode)
        assert_sound(found, corpus)
        assert corpus.notes["zebra"] in ids(found), mode


async def test_a_hyphenated_word_is_found_and_is_not_a_not_operator(hash_clients: Clients, corpus: Corpus) -> None:
    found = await search(hash_clients, corpus, "nano-brain", "lexical")
    # Were `-brain` a NOT, the note containing "brain" could not match. The note holding the whole
    # word ranks first; the one holding only "brain" comes after it (BM25 takes any word).
    assert ids(found) == [corpus.notes["nano"], corpus.notes["brain"]]
    assert not found.lexical_relaxed
    # Positive control: "brain" on its own finds both notes that contain it.
    assert set(ids(await search(hash_clients, corpus, "brain", "lexical"))) == {
        corpus.notes["nano"],
        corpus.notes["brain"],
    }


async def test_a_leading_minus_does_not_exclude_the_word(hash_clients: Clients, corpus: Corpus) -> None:
    found = await search(hash_clients, corpus, "-foo", "lexical")
    assert ids(found) == [corpus.notes["foo"]]
    both = await search(hash_clients, corpus, "brain -nano", "lexical")
    assert corpus.notes["nano"] in ids(both)
    assert not both.lexical_relaxed


async def test_and_or_not_are_words_not_operators(hash_clients: Clients, corpus: Corpus) -> None:
    # Stop words only: nothing to look for, and no error.
    for mode in MODES:
        assert_sound(await search(hash_clients, corpus, "AND OR NOT", mode), corpus)
    assert ids(await search(hash_clients, corpus, "AND OR NOT", "lexical")) == []
    # Positive control: with a real word beside them, the note that has it is found; `OR` did not
    # turn the all-words query into an any-word one.
    found = await search(hash_clients, corpus, "AND OR NOT operators", "lexical")
    assert ids(found) == [corpus.notes["ops"]]
    assert not found.lexical_relaxed


@pytest.mark.parametrize(
    "query",
    ["foo or'nothere", "foo or’nothere", "foo_or'nothere", "foo OR'nothere"],
    ids=["or-apostrophe", "or-right-quote", "underscore-or-apostrophe", "upper-or-apostrophe"],
)
async def test_an_or_glued_to_a_word_by_an_apostrophe_is_not_an_or_operator(
    hash_clients: Clients, corpus: Corpus, query: str
) -> None:
    # Literally this asks for notes with "foo" and the word "or'nothere" (or the one word
    # "foo_or'nothere"): none has them, so the strict leg finds nothing and the search relaxes or comes
    # back empty. Were "or'" read as OR, the note with "foo" alone would match strictly.
    found = await search(hash_clients, corpus, query, "lexical")
    assert_sound(found, corpus)
    assert not found.hits or found.lexical_relaxed, f"{query!r} matched {ids(found)} strictly: an operator acted"
    # Positive control: a word really present in the same note matches strictly.
    control = await search(hash_clients, corpus, "foo retries", "lexical")
    assert ids(control) == [corpus.notes["foo"]] and not control.lexical_relaxed


QUOTED = [
    ('"exact phrase"', {"phrase", "reversed"}),
    ('"exact phrase', {"phrase", "reversed"}),
    ('exact" phrase"', {"phrase", "reversed"}),
    ("'exact' 'phrase", {"phrase", "reversed"}),
]


@pytest.mark.parametrize(("query", "expected"), QUOTED, ids=["balanced", "open", "unbalanced-middle", "single"])
async def test_quotes_are_not_phrase_operators_and_unbalanced_quotes_are_fine(
    hash_clients: Clients, corpus: Corpus, query: str, expected: set[str]
) -> None:
    for mode in MODES:
        assert_sound(await search(hash_clients, corpus, query, mode), corpus)
    found = await search(hash_clients, corpus, query, "lexical")
    assert set(ids(found)) == {corpus.notes[k] for k in expected}
    assert not found.lexical_relaxed


OPERATORISH = [
    ("m.workspace_id = 'x' OR 1=1; DROP TABLE memories; --", "sql-injection"),
    ("title:foo", "column-prefix"),
    ("a & b | !c <-> d", "tsquery-operators"),
    (":*", "prefix-operator"),
    ("foo:* & !brain", "prefix-and-not"),
    ("\\ \\\\ foo\\bar \\'", "backslashes"),
    ("$1 $2::text", "placeholders"),
    ("'; SELECT pg_sleep(10); --", "statement-break"),
    ("<2> <-> ( ) ((( )))", "phrase-distance"),
    ("%_%", "like-wildcards"),
    ("🚀", "emoji-only"),
    ("🚀🔥💾", "emojis-only"),
    ("👩‍💻 🏳️‍🌈", "zwj-sequences"),
]


@pytest.mark.parametrize("query", [q for q, _ in OPERATORISH], ids=[i for _, i in OPERATORISH])
async def test_operator_and_sql_like_text_is_searched_literally(
    hash_clients: Clients, corpus: Corpus, query: str
) -> None:
    before = await table_counts(hash_clients.stack.dsn)
    for mode in MODES:
        assert_sound(await search(hash_clients, corpus, query, mode), corpus)
    # Nothing in the text can change the all-words meaning: with a word no note has, the strict
    # leg never matches (it relaxes or finds nothing) ...
    strict = await search(hash_clients, corpus, f"{ABSENT} {query}", "lexical")
    assert not strict.hits or strict.lexical_relaxed
    # ... and with a word one note has, that note is found (positive control).
    found = await search(hash_clients, corpus, f"zebracorn {query}", "lexical")
    assert corpus.notes["zebra"] in ids(found)
    assert await table_counts(hash_clients.stack.dsn) == before


@pytest.mark.parametrize(
    ("query", "key"),
    [("title:foo", "foo"), ("DROP TABLE memories", "sql"), ("workspace_id", "sql"), ("-foo:*", "foo")],
    ids=["column-prefix", "sql-words", "column-name", "minus-prefix"],
)
async def test_column_and_sql_words_find_the_note_that_contains_them(
    hash_clients: Clients, corpus: Corpus, query: str, key: str
) -> None:
    assert corpus.notes[key] in ids(await search(hash_clients, corpus, query, "lexical"))


async def test_emoji_queries_never_fail_and_a_word_beside_an_emoji_still_matches(
    hash_clients: Clients, corpus: Corpus
) -> None:
    for mode in MODES:
        assert_sound(await search(hash_clients, corpus, "🚀", mode), corpus)
    # An emoji is not a word: on its own it gives the lexical leg nothing to look for.
    assert ids(await search(hash_clients, corpus, "🚀", "lexical")) == []
    found = await search(hash_clients, corpus, "🚀 canary", "lexical")
    assert ids(found) == [corpus.notes["emoji"]]
    assert ids(await search(hash_clients, corpus, "canary🚀deploy", "lexical")) == [corpus.notes["emoji"]]


BLANK = ["", " ", "   ", "\t\n\r", "\u3000", "\u00a0\u2003"]


@pytest.mark.parametrize("query", BLANK, ids=["empty", "space", "spaces", "tab-newline", "ideographic", "nbsp-em"])
@pytest.mark.parametrize("mode", MODES)
async def test_blank_queries_return_no_hits_and_no_error(
    hash_clients: Clients, corpus: Corpus, query: str, mode: str
) -> None:
    found = await search(hash_clients, corpus, query, mode)
    assert list(found.hits) == [] and list(found.degraded) == [] and not found.lexical_relaxed
    assert found.workspace.id == corpus.ws.id
    # Positive control: the same mode finds something for a real word.
    assert ids(await search(hash_clients, corpus, "zebracorn", mode))


def long_query(chars: int, first: str = "zebracorn") -> str:
    words = [first]
    while sum(len(w) + 1 for w in words) < chars:
        words.append(f"filler{len(words)}")
    return " ".join(words)[:chars]


@pytest.mark.parametrize("mode", MODES)
async def test_a_10_kb_query_works_and_the_relaxed_leg_finds_a_note_with_one_of_its_words(
    hash_clients: Clients, corpus: Corpus, mode: str
) -> None:
    query = long_query(10_000)
    assert len(query) == 10_000
    found = await search(hash_clients, corpus, query, mode)
    assert_sound(found, corpus)
    if mode == "lexical":
        assert found.lexical_relaxed
        assert ids(found) == [corpus.notes["zebra"]]
    else:
        assert found.hits


async def test_a_query_at_the_size_limit_works_and_one_character_more_is_refused(
    hash_clients: Clients, corpus: Corpus
) -> None:
    limit = 32 * 1024
    at_limit = await search(hash_clients, corpus, long_query(limit), "lexical")
    assert ids(at_limit) == [corpus.notes["zebra"]]
    for query in (long_query(limit + 1), "x" * (limit + 1), "🚀" * (limit + 1)):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await search(hash_clients, corpus, query, "hybrid")
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert f"at most {limit}" in err.value.details()


@pytest.mark.parametrize("query", ["\x00", "foo\x00bar", "\x00 zebracorn"], ids=["nul", "inner-nul", "leading-nul"])
@pytest.mark.parametrize("mode", MODES)
async def test_a_nul_in_the_query_is_invalid_argument_with_a_clear_message(
    hash_clients: Clients, corpus: Corpus, query: str, mode: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await search(hash_clients, corpus, query, mode)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "query contains NUL" in err.value.details()
    # Positive control: the same text without the NUL is searched.
    assert_sound(await search(hash_clients, corpus, query.replace("\x00", " "), mode), corpus)


COPIED = [
    ("The checklist lives in docs/release.md and is mandatory.", "docs/release.md", "file-path"),
    ("The checklist lives in docs/release.md and is mandatory.", "release.md", "file-name"),
    ("Staging runs on api.staging.example.com behind the VPN.", "api.staging.example.com", "host"),
    ("Ask ops@example.com before any failover.", "ops@example.com", "email"),
    ("Pin grpcio to 1.85.3 until the fix lands.", "1.85.3", "version"),
    ("Set MNEMO_HTTP_PORT in the unit file.", "MNEMO_HTTP_PORT", "env-var"),
    ("Call store.build_predicate for every read.", "store.build_predicate", "dotted-name"),
    ("The nano-brain module is experimental.", "nano-brain module", "hyphenated"),
]


@pytest.mark.parametrize(("content", "query"), [(c, q) for c, q, _ in COPIED], ids=[i for *_, i in COPIED])
async def test_text_copied_from_a_note_finds_that_note(hash_clients: Clients, content: str, query: str) -> None:
    ws = await hash_clients.workspace()
    memory = await hash_clients.write(ws.id, content)
    await hash_clients.write(ws.id, "An unrelated note about lunch.")
    found = await hash_clients.find(ws.id, query, mode="lexical")
    assert ids(found) == [memory.id], f"{query!r} did not find {content!r}"


# -- properties ------------------------------------------------------------------------------------------

# Everything except surrogates (they cannot cross protobuf as UTF-8); NUL is included on purpose.
ANY_TEXT = st.text(max_size=300)
ODD_CATEGORIES = ["Mn", "Mc", "Me", "Cf", "Cc", "Co", "Cn", "Zs", "Zl", "Zp", "So", "Sk", "Sm", "Lo", "Lm", "Nl", "No"]
ODD_UNICODE = st.text(alphabet=st.characters(categories=ODD_CATEGORIES), max_size=120)
PUNCTUATION = st.text(alphabet=st.sampled_from(list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ ’“”‘\t\n")), max_size=120)
# Operator-ish text: compounds of words glued by the characters a term keeps inside it (so they reach the
# text-search parser), between the characters that split terms. Keywords come first in the word list.
WORDS = ["or", "OR", "not", "and", "foo", "brain", "nano", "zebracorn", "exact", "phrase", "x", "1"]
INNER = ["'", "’", "-", "_"]
SEPARATORS = ["", " ", '"', ":", ":*", "&", "|", "!", "<->", "<2>", "(", ")", "\\", ";", "--", "=", " -", " !", "\t"]


@st.composite
def operatorish_text(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEPARATORS))
    for words in draw(st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), min_size=1, max_size=4)):
        text += words[0] + "".join(draw(st.sampled_from(INNER)) + word for word in words[1:])
        text += draw(st.sampled_from(SEPARATORS))
    return text


OPERATORISH_TEXT = operatorish_text()
REGEX_TEXT = st.from_regex(
    r"\A(?:[ \-'\"!&|():*<>\\]{0,3}(?:or|and|not|OR|foo|brain|nano-brain|\w{1,6}|<\d>|<->|:\*|\$\d|--)){1,12}\Z"
)
QUERIES = st.one_of(ANY_TEXT, ODD_UNICODE, PUNCTUATION, OPERATORISH_TEXT, REGEX_TEXT)

PROPERTY_SETTINGS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize("mode", MODES)
@PROPERTY_SETTINGS
@given(text=QUERIES)
async def test_any_text_is_searched_without_error_and_only_in_the_workspace(
    hash_clients: Clients, corpus: Corpus, mode: str, text: str
) -> None:
    if "\x00" in text:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await search(hash_clients, corpus, text, mode)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "NUL" in err.value.details()
        return
    found = await search(hash_clients, corpus, text, mode)
    assert_sound(found, corpus)
    if not text.strip():
        assert list(found.hits) == []


@pytest.fixture(scope="module")
async def vocabulary(hash_clients: Clients) -> tuple[str, str]:
    """A workspace whose one note has every word the strategy uses: a sneaked-in OR has something to match."""
    ws = await hash_clients.workspace()
    memory = await hash_clients.write(ws.id, "Every word we query with: " + " ".join(WORDS) + ".")
    return ws.id, memory.id


@settings(PROPERTY_SETTINGS, max_examples=200)
@given(text=OPERATORISH_TEXT)
async def test_no_text_turns_the_all_words_query_into_something_else(
    hash_clients: Clients, vocabulary: tuple[str, str], text: str
) -> None:
    ws, note = vocabulary
    # Literal all-words semantics: with a word no note has, the strict leg can never match, whatever
    # follows; the search relaxes to any word (or finds nothing when there is nothing else to look for).
    strict = await hash_clients.find(ws, f"{ABSENT} {text}", mode="lexical", limit=100)
    assert list(strict.degraded) == []
    assert not strict.hits or strict.lexical_relaxed, f"strict match for {text!r}: an operator acted"
    # Positive control: a word the note has is always found, whatever follows it.
    found = await hash_clients.find(ws, f"zebracorn {text}", mode="lexical", limit=100)
    assert ids(found) == [note]
