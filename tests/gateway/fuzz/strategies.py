"""Hostile inputs for the gateway fuzz suites, and the database snapshot that proves a refusal wrote nothing."""

from __future__ import annotations

import contextlib
import json
import operator
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import structlog
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from mnemo_embed import HashEmbedder
from mnemo_server.stack import Stack
from tests.helpers import Postgres, start_stack

API = "/api/v1"
# The fuzzed workspace (registered by name, so its id is the same word) and one that does not exist.
WS = "fuzz"
NO_SUCH_WS = "no-such-ws"
MIB = 1_048_576

# What must never reach a caller: a Python trace, a source file, the installation's paths.

FUZZ_SETTINGS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=False,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
        HealthCheck.filter_too_much,
    ],
)

SQL = [
    "'; DROP TABLE memories; --",
    "' OR '1'='1",
    "1; SELECT pg_sleep(5); --",
    "x'); TRUNCATE audit_events CASCADE; --",
    "$$; DELETE FROM workspaces; $$",
    "%' AND 1=1 --",
    "\\'; COPY memories TO '/tmp/x'; --",
    "' UNION SELECT secret_hash FROM tokens --",
    "::text[]",
    "E'\\x00'",
]
TSQUERY = [
    "a & !b | (c",
    "!(",
    "foo:*",
    "a <-> b",
    "a <2> b",
    "!!!",
    "& | !",
    "a:B*",
    "'quoted' & ",
    "(((((",
    "\\",
    ":*",
    "<->",
    "a | | b",
    "-",
    '"unterminated',
]
TRAVERSAL = [
    "../../etc/passwd",
    "/etc/passwd",
    "file:///../../etc/shadow",
    "..\\..\\windows\\system32\\config\\sam",
    "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "file:///proc/self/environ",
    "....//....//etc/passwd",
    "/dev/zero",
    "~/.ssh/id_rsa",
    "../" * 100 + "etc/passwd",
]
ODD = [
    "",
    " ",
    " \n\t ",
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfff y",
    "\ud83d",
    "\u202eevil",
    "\ufeff",
    "\U0001f600" * 10,
    "null",
    "true",
    "[]",
    "{}",
    "0",
    "-1",
    "NaN",
    "\x1b[31mred",
    "\r\n\r\nHTTP/1.1 200 OK",
]
HUGE_INTS = [-1, -(2**31) - 1, 2**31 - 1, 2**31, 2**32, 2**53 + 1, 2**63 - 1, 2**63, 2**64, 10**30, -(10**30)]
BAD_DATES = [
    "last tuesday",
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
    "0000-00-00T00:00:00Z",
    "2024-02-30T00:00:00Z",
    "99999-01-01T00:00:00Z",
    "2024-01-01T25:61:61Z",
    "1e309",
    "-1",
]
GOOD_DATES = ["2024-01-01T00:00:00Z", "2030-06-15T12:30:00+02:00", "1970-01-01T00:00:00Z", "2024-01-01"]

WORDS = ["deploy", "postgres", "flaky", "test", "the", "and", "or", "not", "cache", "script", "ops", "why", "fix"]
PLAIN_TEXT = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)
# Sizes around every limit: the 32 KiB query, the 1 MiB content and (with wide characters) the 4 MiB body.
HUGE_TEXT = st.builds(
    operator.mul,
    st.sampled_from(["x", "é", "\U0001f600", "deploy ", "\x00", "\ud800", "a & !b | ("]),
    st.sampled_from([32 * 1024 + 1, MIB - 1, MIB, MIB + 1]),
)
# Everything hostile that fits in a URL.
SHORT_HOSTILE_TEXT = st.one_of(
    st.sampled_from(SQL),
    st.sampled_from(TSQUERY),
    st.sampled_from(TRAVERSAL),
    st.sampled_from(ODD),
    st.text(max_size=40),
    st.text(st.characters(categories=["Cs", "Cc", "Zl", "Zp", "Mn"]), max_size=20),
    st.builds(operator.add, PLAIN_TEXT, st.sampled_from(["\x00", "\ud800", "' --", " & !"])),
    st.sampled_from(["x" * 5_000, "é" * 2_000]),
)
HOSTILE_TEXT = st.one_of(SHORT_HOSTILE_TEXT, HUGE_TEXT)
HOSTILE_INT = st.one_of(st.sampled_from(HUGE_INTS), st.integers())


@dataclass(frozen=True)
class Deep:
    """JSON nested `depth` levels, written out as text: Python's own encoder gives up near 1,000."""

    depth: int
    array: bool = False

    def text(self) -> str:
        if self.array:
            return "[" * self.depth + "]" * self.depth
        return '{"k":' * (self.depth - 1) + "{}" + "}" * (self.depth - 1)


def nested(depth: int) -> Any:
    """Lists and objects in turn, `depth` levels deep."""
    value: Any = {}
    for i in range(depth - 1):
        value = {"k": value} if i % 2 else [value]
    return value


def nested_object(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


DEEP = st.builds(Deep, st.sampled_from([33, 101, 1_000, 10_000]), st.booleans())
WRONG_TYPE = st.one_of(
    st.none(),
    st.booleans(),
    HOSTILE_INT,
    st.floats(),
    st.lists(st.one_of(st.integers(), PLAIN_TEXT), max_size=3),
    st.dictionaries(PLAIN_TEXT, st.one_of(st.integers(), PLAIN_TEXT), max_size=3),
    st.sampled_from([nested(40), nested(200)]),
    DEEP,
)
ANY_VALUE = st.one_of(HOSTILE_TEXT, WRONG_TYPE)


def from_json_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Well-typed, ordinary values for one JSON-schema property (as pydantic writes them)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([from_json_schema(option) for option in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "string":
        return st.sampled_from(GOOD_DATES) if schema.get("format") == "date-time" else PLAIN_TEXT
    if kind == "integer":
        return st.integers(min_value=0, max_value=200)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(from_json_schema(schema.get("items", {})), max_size=4)
    if kind == "object":
        return st.dictionaries(PLAIN_TEXT, PLAIN_TEXT, max_size=3)
    return ANY_VALUE


def hostile_of(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Hostile values that still pass for the property's type, so they get past the schema to the code."""
    if "anyOf" in schema:
        options = [option for option in schema["anyOf"] if option.get("type") != "null"]
        return st.one_of([hostile_of(option) for option in options])
    if "enum" in schema:
        return st.one_of(HOSTILE_TEXT, st.sampled_from([str(value).upper() for value in schema["enum"]]))
    kind = schema.get("type")
    if kind == "string":
        return st.sampled_from(BAD_DATES) if schema.get("format") == "date-time" else HOSTILE_TEXT
    if kind == "integer":
        return HOSTILE_INT
    if kind == "boolean":
        return st.sampled_from(["true", "yes", 1, 0, "0", "on"])
    if kind == "array":
        items = hostile_of(schema.get("items", {"type": "string"}))
        return st.one_of(st.lists(items, min_size=1, max_size=4), st.lists(PLAIN_TEXT, min_size=33, max_size=40))
    if kind == "object":
        return st.one_of(st.dictionaries(HOSTILE_TEXT, st.one_of(HOSTILE_TEXT, HOSTILE_INT), max_size=3), DEEP)
    return ANY_VALUE


# Arguments named alike mean alike on every surface: these get aimed values, beside the ordinary ones.
FRESH = "<fresh-memory-id>"
ID_VALUES = st.one_of(
    st.just(FRESH),
    st.just(FRESH),
    st.uuids().map(str),
    st.sampled_from(["not-a-uuid", "", str(uuid.UUID(int=0)), "../../etc/passwd", "%00", "a" * 10_000]),
)
WORKSPACE_VALUES = st.one_of(
    st.none(),
    st.just(WS),
    st.sampled_from([NO_SUCH_WS, "default", "global", "/", "/etc/../", "FUZZ", " fuzz "]),
)
AIMED: dict[str, st.SearchStrategy[Any]] = {
    "id": ID_VALUES,
    "memory_id": ID_VALUES,
    "workspace": WORKSPACE_VALUES,
    "source_uri": st.sampled_from(TRAVERSAL),
    "expected_version": st.integers(0, 3),
    "metadata": st.one_of(st.dictionaries(PLAIN_TEXT, PLAIN_TEXT, max_size=3), st.just(nested_object(32))),
    "path": st.sampled_from(["/srv/fuzz", "/srv/fuzz/../other", "/", "/etc/passwd", "/srv/" + "p" * 300]),
    "principal": st.sampled_from(["fuzz-bot", "agent@host:1", "a" * 100]),
    "workspaces": st.sampled_from([[WS], ["*"], [WS, "default"], [NO_SUCH_WS]]),
}
# How wild one example is: 0 is all well-formed (the success paths), 1 slips in hostile values of the right
# type (they get past the schema to the operations), 2 is anything.
CHOICES = {
    0: ["valid"],
    1: ["valid", "valid", "valid", "valid", "valid", "hostile"],
    2: ["valid", "hostile", "omit", "wrong"],
}


@st.composite
def arguments(draw: st.DrawFn, properties: dict[str, dict[str, Any]], required: list[str]) -> dict[str, Any]:
    """An argument dict for these properties: each well-typed, aimed, hostile, omitted or of a wrong type."""
    level = draw(st.sampled_from([0, 1, 1, 2]))
    args: dict[str, Any] = {}
    for name, schema in properties.items():
        choice = draw(st.sampled_from(CHOICES[level]))
        if choice == "valid":
            valid = from_json_schema(schema)
            args[name] = draw(st.one_of(AIMED[name], valid) if name in AIMED else valid)
        elif choice == "hostile":
            args[name] = draw(hostile_of(schema))
        elif choice == "wrong":
            args[name] = draw(WRONG_TYPE)
        elif name in required and level == 0:
            args[name] = draw(from_json_schema(schema))
    if level and draw(st.integers(0, 4)) == 0:
        args[draw(st.one_of(PLAIN_TEXT, st.sampled_from(ODD)))] = draw(ANY_VALUE)
    return args


def fill(value: Any, fresh_id: str) -> Any:
    if value == FRESH:
        return fresh_id
    if isinstance(value, dict):
        return {fill(k, fresh_id): fill(v, fresh_id) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, fresh_id) for v in value]
    return value


def uses(value: Any, marker: Any) -> bool:
    if value == marker:
        return True
    if isinstance(value, dict):
        return any(uses(k, marker) or uses(v, marker) for k, v in value.items())
    if isinstance(value, list):
        return any(uses(v, marker) for v in value)
    return False


def has_deep(value: Any) -> bool:
    if isinstance(value, Deep):
        return True
    if isinstance(value, dict):
        return any(has_deep(v) for v in value.values())
    if isinstance(value, list):
        return any(has_deep(v) for v in value)
    return False


def encodable(value: Any) -> bool:
    """Whether an ordinary JSON client (httpx, the MCP SDK) can send this value at all."""
    if has_deep(value):
        return False
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (ValueError, UnicodeEncodeError, RecursionError):
        return False
    return True


def raw_json(value: Any) -> bytes:
    """JSON text for anything, byte for byte: lone surrogates as \\u escapes, NaN as NaN, Deep as deep text."""
    placeholders: dict[str, str] = {}

    def swap(item: Any) -> Any:
        if isinstance(item, Deep):
            key = f"__deep_{len(placeholders)}__"
            placeholders[f'"{key}"'] = item.text()
            return key
        if isinstance(item, dict):
            return {k: swap(v) for k, v in item.items()}
        if isinstance(item, list):
            return [swap(v) for v in item]
        return item

    text = json.dumps(swap(value))
    for key, deep in placeholders.items():
        text = text.replace(key, deep, 1)
    return text.encode("ascii")


def short(value: Any, limit: int = 300) -> str:
    """A value's repr cut to a readable length, for failure messages."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} chars)"


# -- the database ----------------------------------------------------------------------------------------------

# Tables that background work updates on its own (authentication stamps tokens): their row counts must
# still hold still, their newest xmin need not. The embedding workers never write `chunks`, so a call
# that updates chunks in place (a correction moving them out of the search indexes) must say so.
BUSY_TABLES = frozenset({"tokens"})
# Not compared: bookkeeping written once at start-up; the embedding queue and the vectors are the
# embedder's own state of the chunks (compared above): the workers insert and delete their rows at
# any moment, and a correction flips their `indexed` flag with the chunks'; likewise the lexical
# queue and the BM25 statistics, which the poster rewrites from the chunks whenever writes pause; and
# a tag's chunks (chunk_tags), which the database keeps from the chunks in the statement that writes
# them: compared through the chunks (tests/ingest/test_chunk_tag_rows.py recounts them).
UNCOMPARED_TABLES = (
    "schema_migrations",
    "chunk_tags",
    "embedding_space",
    "embed_queue",
    "chunk_vectors",
    "lexical_queue",
    "lexical_terms",
    "lexical_postings",
    "lexical_posted",
    "lexical_sizes",
)


async def db_state(dsn: str) -> dict[str, tuple[int, int]]:
    """Per table: (rows, newest xmin). Equal before and after means nothing was inserted, deleted or updated.

    A superset of `table_counts`: every table of the schema (a new one included), and an UPDATE moves
    a table's newest xmin.
    """
    conn = await asyncpg.connect(dsn)
    try:
        tables = [
            row["tablename"]
            for row in await conn.fetch(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND NOT tablename = ANY($1::text[]) "
                "ORDER BY tablename",
                list(UNCOMPARED_TABLES),
            )
        ]
        parts = ", ".join(
            f'(SELECT count(*) FROM "{t}"), (SELECT coalesce(max(xmin::text::bigint), 0) FROM "{t}")' for t in tables
        )
        row = await conn.fetchrow(f"SELECT {parts}")
    finally:
        await conn.close()
    assert row is not None
    return {t: (row[2 * i], 0 if t in BUSY_TABLES else row[2 * i + 1]) for i, t in enumerate(tables)}


def changes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> dict[str, int]:
    """Rows added per table that changed at all (0 for a table only updated).

    A workspace's audit anchor (audit_anchors, one row per workspace) moves in the transaction that
    appends to its chain: with audit events added it is part of them, not a change of its own; alone
    it is a change like any other (a refused call must not move it)."""
    changed = {t: after[t][0] - before[t][0] for t in sorted(after) if before.get(t) != after[t]}
    if "audit_events" in changed:
        changed.pop("audit_anchors", None)
    return changed


async def chunk_count(dsn: str, memory_id: str, version: int) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(
            "SELECT count(*) FROM chunks WHERE memory_id = $1 AND version = $2", uuid.UUID(memory_id), version
        )
    finally:
        await conn.close()


# -- the stack -------------------------------------------------------------------------------------------------


async def start_fuzz_stack(postgres: Postgres, prefix: str, token: str = "", **overrides: str) -> Stack:
    """A stack of its own (fuzzing writes junk no other test should see) with the fuzz workspace registered."""
    stack = await start_stack(await postgres.create_database(prefix), HashEmbedder(64), **overrides)
    headers = {"Authorization": f"Bearer {token or stack.bootstrap_token}"} if stack.bootstrap_token else {}
    async with httpx.AsyncClient(base_url=stack.base_url, headers=headers, timeout=30) as http:
        made = await http.post(f"{API}/workspaces", json={"name": WS})
        assert made.status_code == 201 and made.json()["workspace"]["id"] == WS, made.text
        # The default workspace registers on first use; do that now, not inside a fuzzed call.
        assert (await http.get(f"{API}/memories")).status_code == 200
    return stack


async def fresh_memory(http: httpx.AsyncClient, content: str = "The deploy script lives in ops/deploy.sh.") -> str:
    """A new memory in the fuzz workspace: something real for an id to point at."""
    written = await http.post(f"{API}/memories", json={"workspace": WS, "content": content, "tags": ["fuzz"]})
    assert written.status_code == 201, written.text[:300]
    return written.json()["memory"]["id"]


# -- the server's log ------------------------------------------------------------------------------------------


def _name_exception(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    # Runs inside the logging call, hence inside the except block that logged it.
    if event.get("exc_info"):
        event["exception"] = short(sys.exc_info()[1], 200)
    return event


@contextlib.contextmanager
def server_log() -> Iterator[list[dict[str, Any]]]:
    """The in-process stack's log events while a request runs, kept instead of rendered.

    Rendering is what the test session's default console renderer would do, with every local of every
    frame: for a RecursionError under deep JSON that is minutes of CPU and tens of megabytes per event.
    """
    with structlog.testing.capture_logs(processors=[_name_exception]) as entries:
        yield entries


def logged_errors(entries: list[dict[str, Any]]) -> list[str]:
    """Error-level events: an unhandled exception somewhere in the stack, whatever the caller was told."""
    return [
        f"{e.get('event')}: {short({k: v for k, v in e.items() if k not in ('event', 'log_level', 'exc_info')})}"
        for e in entries
        if e.get("log_level") in ("error", "critical")
    ]
