"""Every REST route fuzzed over HTTP (schemathesis from the OpenAPI document, hypothesis for raw bytes):
never a 5xx, every 4xx the one JSON error shape, and a refused request writes nothing."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import assume, event, given, note, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_platform import reason_name
from mnemo_server.stack import Stack
from tests.gateway.fuzz.strategies import (
    AIMED,
    API,
    DEEP,
    FRESH,
    FUZZ_SETTINGS,
    HOSTILE_INT,
    HOSTILE_TEXT,
    ID_VALUES,
    ODD,
    SHORT_HOSTILE_TEXT,
    WS,
    Deep,
    arguments,
    changes,
    db_state,
    fresh_memory,
    from_json_schema,
    logged_errors,
    nested_object,
    raw_json,
    server_log,
    short,
    start_fuzz_stack,
)
from tests.helpers import LEAKS, Postgres, strings

# Every operation of the OpenAPI document; a route added without joining this list fails the first test.
ROUTES = [
    ("POST", "/memories"),
    ("POST", "/memories:batch"),
    ("GET", "/memories"),
    ("GET", "/memories/{memory_id}"),
    ("PATCH", "/memories/{memory_id}"),
    ("DELETE", "/memories/{memory_id}"),
    ("GET", "/memories/{memory_id}/history"),
    ("POST", "/memories/{memory_id}/supersede"),
    ("POST", "/memories/{memory_id}/promote"),
    ("POST", "/memories/{memory_id}/retract"),
    ("POST", "/memories/{memory_id}/confirm"),
    ("POST", "/memories/{memory_id}/feedback"),
    ("POST", "/memories/{memory_id}/restore"),
    ("POST", "/memories/{memory_id}/purge"),
    ("GET", "/audit"),
    ("GET", "/audit/verify"),
    ("POST", "/search"),
    ("POST", "/harvest/run"),
    ("POST", "/redact/rescan"),
    ("POST", "/consolidate"),
    ("POST", "/embeddings:retry"),
    ("GET", "/harvest/status"),
    ("GET", "/harvest/sources"),
    ("GET", "/harvest/placement"),
    ("POST", "/harvest/sessions"),
    ("POST", "/harvest/candidates"),
    ("POST", "/tokens"),
    ("GET", "/tokens"),
    ("DELETE", "/tokens/{token_id}"),
    ("POST", "/workspaces"),
    ("GET", "/workspaces"),
    ("GET", "/status"),
    ("GET", "/context"),
    ("GET", "/export"),
    ("POST", "/export:restore"),
    ("POST", "/imports"),
    ("POST", "/imports/{batch_id}/memories:batch"),
    ("POST", "/imports/{batch_id}/accept"),
    ("POST", "/imports/{batch_id}/rollback"),
    ("GET", "/proposals"),
    ("GET", "/proposals/{proposal_id}"),
    ("POST", "/proposals"),
    ("POST", "/proposals/{proposal_id}/accept"),
    ("POST", "/proposals/{proposal_id}/reject"),
    ("POST", "/proposals/{proposal_id}/reverse"),
]
# A harvest run, a rescan and an export of every memory are streamed and slow: a few examples each, not dozens.
STREAMING = [("POST", "/harvest/run"), ("POST", "/redact/rescan"), ("GET", "/export")]
ORDINARY = [route for route in ROUTES if route not in STREAMING]
BODY_ROUTES = [route for route in ROUTES if route[0] in ("POST", "PATCH")]
SCHEMATHESIS_EXAMPLES = 20
STREAMING_EXAMPLES = 4
BODY_EXAMPLES = 20
QUERY_EXAMPLES = 15
AUTH_EXAMPLES = 6


def ids(routes: list[tuple[str, str]]) -> list[str]:
    return [f"{method} {path}" for method, path in routes]


async def served_openapi(http: httpx.AsyncClient) -> dict[str, Any]:
    response = await http.get(f"{API}/openapi.json")
    assert response.status_code == 200
    return response.json()


@pytest.fixture(scope="module")
async def openapi(http: httpx.AsyncClient) -> dict[str, Any]:
    return await served_openapi(http)


@pytest.fixture(scope="module")
def schema(openapi: dict[str, Any]) -> schemathesis.BaseSchema:
    # From the document the live gateway served (fetched with httpx: from_url would block its event loop).
    return schemathesis.openapi.from_dict(openapi)


def operations(openapi: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method.upper(), path.removeprefix(API)) for path, item in openapi["paths"].items() for method in item}


def operation_doc(openapi: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    return openapi["paths"][API + path][method.lower()]


def resolve(openapi: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    if "$ref" not in schema:
        return schema
    node: Any = openapi
    for part in schema["$ref"].removeprefix("#/").split("/"):
        node = node[part]
    return node


def body_schema(openapi: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    content = operation_doc(openapi, method, path).get("requestBody", {}).get("content", {})
    return resolve(openapi, content.get("application/json", {}).get("schema", {}))


async def test_every_route_in_the_openapi_document_is_fuzzed(openapi: dict[str, Any]) -> None:
    assert operations(openapi) == set(ROUTES)
    assert len(ROUTES) == len(set(ROUTES))
    assert {route for route in ROUTES if body_schema(openapi, *route)} == set(BODY_ROUTES)


# -- what every answer must be ---------------------------------------------------------------------------------


# Every reason an error body may name: the ErrorReason names of errors.proto.
REASONS = frozenset(reason_name(v) for v in reasons_pb.ErrorReason.values())
# A stretch of an error message in quotes: 'single', or "double" as the JSON body escapes them.
QUOTED = re.compile(r"'([^'\n]+)'|\\\"(.+?)\\\"")


def assert_answer(status: int, content_type: str, body: bytes, log: list[dict[str, Any]], sent: object = None) -> None:
    """No error logged and below 500; a 4xx is the one JSON error shape and leaks nothing. A value
    the request itself `sent` may come back quoted in the message ("got '.py'") and is no leak."""
    text = body.decode("utf-8", "replace")
    errors = logged_errors(log)
    assert status < 500, (status, text[:500], errors)
    assert not errors, errors
    if status < 400:
        return
    echoes = [form for value in strings(sent) for form in (value, json.dumps(value)[1:-1], repr(value)[1:-1])]
    # A quoted stretch of the message (single quotes, or double quotes escaped in the JSON body)
    # found within a value the request sent is that value quoted back, maybe cut or stripped; a
    # stretch the request did not send is still searched.
    unquoted = QUOTED.sub(lambda m: "" if any((m.group(1) or m.group(2)) in e for e in echoes) else m.group(0), text)
    assert not LEAKS.search(unquoted), text[:500]
    assert content_type.startswith("application/json"), (status, content_type, text[:300])
    error = json.loads(body)["error"]
    assert isinstance(error["code"], str) and error["code"], error
    assert error["reason"] in REASONS, error
    assert isinstance(error["message"], str) and len(error["message"]) > 5, error


def test_a_leak_is_caught_unless_the_request_itself_sent_those_words() -> None:
    """The leak check and its one allowance, judged without a server: a message quoting what the
    request sent passes; the same words the request did not send fail."""
    reason = reason_name(reasons_pb.ErrorReason.values()[1])
    body = json.dumps({"error": {"code": "INVALID_ARGUMENT", "reason": reason, "message": "bad path: got 'x.py'"}})
    assert_answer(400, "application/json", body.encode(), [], {"path": "x.py"})
    # Cut, as a message quotes the first characters of a long value.
    assert_answer(400, "application/json", body.encode(), [], {"path": "x.py and more"})
    with pytest.raises(AssertionError):
        assert_answer(400, "application/json", body.encode(), [], {"path": "y"})
    traced = body.replace("bad path", 'File "/work/main/app.py", line 3')
    with pytest.raises(AssertionError):
        assert_answer(400, "application/json", traced.encode(), [], {"path": "x.py"})


# -- schemathesis ----------------------------------------------------------------------------------------------


def json_error_body(ctx: schemathesis.CheckContext, response: schemathesis.Response, case: schemathesis.Case) -> None:
    """A schemathesis check: a 4xx is {"error": {"code", "message"}} as JSON, and leaks nothing."""
    if response.status_code >= 500:
        return  # not_a_server_error's to judge
    headers = {name.lower(): values for name, values in response.headers.items()}
    content_type = ";".join(headers.get("content-type", [""]))
    sent = [case.query, case.path_parameters, case.headers, case.cookies, case.body]
    assert_answer(response.status_code, content_type, response.content, [], sent)


async def run_schemathesis_case(
    stack: Stack,
    http: httpx.AsyncClient,
    openapi: dict[str, Any],
    schema: schemathesis.BaseSchema,
    route: tuple[str, str],
    data: st.DataObject,
    headers: dict[str, str] | None = None,
) -> None:
    method, path = route
    mode = data.draw(st.sampled_from([GenerationMode.POSITIVE, GenerationMode.NEGATIVE]), label="mode")
    # Half the time aim at something real (a memory that exists, the fuzz workspace) so that generated
    # values get past "not found" into the operation itself.
    aim = data.draw(st.booleans(), label="aim at a real memory and workspace")
    fixed: dict[str, Any] = {}
    if aim and "{memory_id}" in path:
        fixed["path_parameters"] = {"memory_id": await fresh_memory(http)}
    if aim and any(p["name"] == "workspace" for p in operation_doc(openapi, method, path).get("parameters", [])):
        fixed["query"] = {"workspace": WS}
    case = data.draw(schema[API + path][method].as_strategy(generation_mode=mode, **fixed), label="case")
    takes_workspace = "workspace" in body_schema(openapi, method, path).get("properties", {})
    if aim and mode.is_positive and isinstance(case.body, dict) and takes_workspace:
        case.body["workspace"] = WS
    before = await db_state(stack.dsn)
    with server_log() as log:
        # case.call is synchronous (requests): off the event loop, which is serving the stack.
        response = await asyncio.to_thread(case.call, base_url=stack.base_url, headers=headers, timeout=60)
    after = await db_state(stack.dsn)
    note(f"{case.as_curl_command(headers=headers)[:1500]}\n-> {response.status_code} {response.content[:500]!r}")
    event(f"{mode.value}: {response.status_code}")
    assert logged_errors(log) == []
    case.validate_response(response, checks=[not_a_server_error, json_error_body])
    if response.status_code >= 400:
        assert changes(before, after) == {}, "a refused request wrote something"


@pytest.mark.parametrize("route", ORDINARY, ids=ids(ORDINARY))
@settings(FUZZ_SETTINGS, max_examples=SCHEMATHESIS_EXAMPLES)
@given(data=st.data())
async def test_schemathesis_finds_no_server_error_and_no_partial_write(
    stack: Stack,
    http: httpx.AsyncClient,
    openapi: dict[str, Any],
    schema: schemathesis.BaseSchema,
    route: tuple[str, str],
    data: st.DataObject,
) -> None:
    await run_schemathesis_case(stack, http, openapi, schema, route, data)


@pytest.mark.parametrize("route", STREAMING, ids=ids(STREAMING))
@settings(FUZZ_SETTINGS, max_examples=STREAMING_EXAMPLES)
@given(data=st.data())
async def test_schemathesis_on_streamed_routes_finds_no_server_error(
    stack: Stack,
    http: httpx.AsyncClient,
    openapi: dict[str, Any],
    schema: schemathesis.BaseSchema,
    route: tuple[str, str],
    data: st.DataObject,
) -> None:
    await run_schemathesis_case(stack, http, openapi, schema, route, data)


# -- hypothesis: raw bodies ------------------------------------------------------------------------------------

INVALID_UTF8 = st.one_of(
    st.sampled_from(
        [
            b'{"content": "caf\xe9"}',
            b'{"query": "\xc3\x28"}',
            b'{"workspace": "\xff\xfe", "content": "x"}',
            b"\xef\xbb\xbf{}",
            b'{"content": "\xed\xa0\x80"}',
            b"\x00\x00\x00{",
        ]
    ),
    st.binary(max_size=200),
    st.builds(lambda a, b: a + b"\xff" + b, st.binary(max_size=20), st.binary(max_size=20)),
)
CONTENT_TYPE = st.one_of(
    st.just("application/json"),
    st.sampled_from(
        [
            "application/json; charset=latin-1",
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "",
        ]
    ),
)


@st.composite
def hostile_body(draw: st.DrawFn, schema: dict[str, Any]) -> bytes:
    """A request body: a valid one with hostile fields, invalid UTF-8, deep JSON, a truncated or a non-object one."""
    fields = draw(arguments(schema.get("properties", {}), schema.get("required", [])))
    kind = draw(st.sampled_from(["fields", "fields", "fields", "utf8", "deep", "truncated", "not-an-object"]))
    if kind == "utf8":
        return draw(INVALID_UTF8)
    if kind == "deep":
        deep = draw(DEEP)
        if draw(st.booleans()):
            return deep.text().encode()
        return raw_json({**fields, draw(st.sampled_from([*fields, "metadata"])): deep})
    text = raw_json(fields)
    if kind == "truncated":
        return text[: draw(st.integers(0, max(0, len(text) - 1)))]
    if kind == "not-an-object":
        return raw_json(draw(st.one_of(HOSTILE_TEXT, HOSTILE_INT, st.lists(st.just(fields), max_size=2), st.none())))
    return text


def encode(value: str) -> str:
    """Percent-encoded byte for byte: a lone surrogate becomes its (invalid UTF-8) surrogatepass bytes."""
    return urllib.parse.quote_from_bytes(value.encode("utf-8", "surrogatepass"), safe="")


async def path_params_for(http: httpx.AsyncClient, path: str, data: st.DataObject) -> dict[str, str]:
    """A memory id (a fresh real one, or a hostile string) or a token id for the route's path."""
    params = {}
    if "{memory_id}" in path:
        memory_id = data.draw(ID_VALUES, label="memory_id")
        params["memory_id"] = await fresh_memory(http) if memory_id == FRESH else memory_id
    if "{token_id}" in path:
        params["token_id"] = data.draw(SHORT_HOSTILE_TEXT, label="token_id")
    return params


def url_for(path: str, params: dict[str, str], query: list[tuple[str, str]] | None = None) -> str:
    for name, value in params.items():
        path = path.replace(f"{{{name}}}", encode(value))
    return API + path + ("?" + "&".join(f"{encode(k)}={encode(v)}" for k, v in query) if query is not None else "")


@pytest.mark.parametrize("route", BODY_ROUTES, ids=ids(BODY_ROUTES))
@settings(FUZZ_SETTINGS, max_examples=BODY_EXAMPLES)
@given(data=st.data())
async def test_any_body_bytes_get_a_clear_answer_and_a_refusal_writes_nothing(
    stack: Stack, http: httpx.AsyncClient, openapi: dict[str, Any], route: tuple[str, str], data: st.DataObject
) -> None:
    method, path = route
    params = await path_params_for(http, path, data)
    body = data.draw(hostile_body(body_schema(openapi, method, path)), label="body")
    content_type = data.draw(CONTENT_TYPE, label="content-type")
    before = await db_state(stack.dsn)
    with server_log() as log:
        response = await http.request(
            method, url_for(path, params), content=body, headers={"content-type": content_type} if content_type else {}
        )
    after = await db_state(stack.dsn)
    note(f"{method} {url_for(path, params)[:200]} {short(body)} -> {response.status_code} {response.text[:500]}")
    event(str(response.status_code))
    assert_answer(response.status_code, response.headers.get("content-type", ""), response.content, log)
    if response.status_code >= 400:
        assert changes(before, after) == {}, "a refused request wrote something"


# -- hypothesis: query strings and paths -----------------------------------------------------------------------

QUERY_VALUE = st.one_of(
    SHORT_HOSTILE_TEXT,
    HOSTILE_INT.map(str),
    st.sampled_from(["1e309", "NaN", "-0", "0x10", "true", "[]", "%00", "%ff%fe", "%", "&&==", "1" * 400]),
    st.just(Deep(500).text()),
)


def as_query_text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return as_query_text(value[0]) if value else ""
    return "" if value is None else str(value)


def valid_query_value(parameter: dict[str, Any]) -> st.SearchStrategy[str]:
    valid = from_json_schema(parameter.get("schema", {}))
    if parameter["name"] in AIMED:
        valid = st.one_of(AIMED[parameter["name"]], valid)
    return valid.map(as_query_text)


@st.composite
def query_pairs(draw: st.DrawFn, parameters: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Each of the route's query parameters absent, once or twice, well-formed or hostile; sometimes an unknown one."""
    pairs = [
        (p["name"], draw(st.one_of(valid_query_value(p), QUERY_VALUE)))
        for p in parameters
        if p["in"] == "query"
        for _ in range(draw(st.sampled_from([1, 1, 0, 2])))
    ]
    if draw(st.integers(0, 3)) == 0:
        pairs.append((draw(st.sampled_from([*ODD, "workspace[]", "page_size[0]", "a" * 1000])), draw(QUERY_VALUE)))
    return pairs


@pytest.mark.parametrize("route", ORDINARY, ids=ids(ORDINARY))
@settings(FUZZ_SETTINGS, max_examples=QUERY_EXAMPLES)
@given(data=st.data())
async def test_any_query_string_and_path_get_a_clear_answer_and_a_refusal_writes_nothing(
    stack: Stack, http: httpx.AsyncClient, openapi: dict[str, Any], route: tuple[str, str], data: st.DataObject
) -> None:
    method, path = route
    params = await path_params_for(http, path, data)
    query = data.draw(query_pairs(operation_doc(openapi, method, path).get("parameters", [])), label="query")
    url = url_for(path, params, query)
    before = await db_state(stack.dsn)
    with server_log() as log:
        # The URL is sent as built: httpx would re-encode a query it was given as a dict.
        response = await http.request(method, url, json={"workspace": WS} if method in ("POST", "PATCH") else None)
    after = await db_state(stack.dsn)
    note(f"{method} {url[:1000]} -> {response.status_code} {response.text[:500]}")
    event(str(response.status_code))
    assert_answer(response.status_code, response.headers.get("content-type", ""), response.content, log)
    if response.status_code >= 400:
        assert changes(before, after) == {}, "a refused request wrote something"


# -- the server errors this suite found, fixed and kept as regression tests ----------------------------------


KNOWN = [
    pytest.param(
        "DELETE",
        "/tokens/{token_id}",
        {"token_id": "a\x00b"},
        [],
        None,
        id="revoke-token-nul-id",
    ),
    pytest.param(
        "POST",
        "/tokens",
        {},
        [],
        {"principal": "fuzz-bot", "role": "agent", "workspaces": [WS], "label": "a\x00b"},
        id="create-token-nul-label",
    ),
    pytest.param(
        "GET",
        "/harvest/sources",
        {},
        [("agent", "a\x00b")],
        None,
        id="harvest-sources-nul-agent",
    ),
]


@pytest.mark.parametrize(("method", "path", "params", "query", "body"), KNOWN)
async def test_a_nul_in_token_and_harvest_fields_is_a_clear_400(
    stack: Stack,
    http: httpx.AsyncClient,
    method: str,
    path: str,
    params: dict[str, str],
    query: list[tuple[str, str]],
    body: Any,
) -> None:
    before = await db_state(stack.dsn)
    response = await http.request(method, url_for(path, params, query or None), json=body)
    assert changes(before, await db_state(stack.dsn)) == {}
    assert response.status_code == 400, response.text[:300]
    assert "NUL" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("method", "path", "params", "query", "body", "status"),
    [
        ("DELETE", "/tokens/{token_id}", {"token_id": "no-such-token"}, [], None, 404),
        ("POST", "/tokens", {}, [], {"principal": "fuzz-bot", "role": "agent", "workspaces": [WS], "label": "l"}, 201),
        ("GET", "/harvest/sources", {}, [("agent", "codex")], None, 200),
    ],
    ids=["revoke-token", "create-token", "harvest-sources"],
)
async def test_the_same_requests_without_the_nul_are_answered(
    http: httpx.AsyncClient,
    method: str,
    path: str,
    params: dict[str, str],
    query: list[tuple[str, str]],
    body: Any,
    status: int,
) -> None:
    # Positive control for the cases above: the routes work, only the NUL is refused.
    response = await http.request(method, url_for(path, params, query or None), json=body)
    assert response.status_code == status, response.text[:300]


METADATA_BODIES = {
    ("POST", "/memories"): {"workspace": WS, "content": "deep metadata"},
    ("PATCH", "/memories/{memory_id}"): {"workspace": WS, "content": "deep metadata"},
    ("POST", "/memories/{memory_id}/supersede"): {"workspace": WS, "content": "deep metadata", "reason": "r"},
}


# Found by this suite: metadata nested ~330-990 levels deep was a 500, because the depth check recursed once per
# level and met Python's recursion limit; the check is iterative now. 32 is the last depth that is accepted.
@pytest.mark.parametrize("depth", [32, 33, 250, 500, 900])
@pytest.mark.parametrize("route", sorted(METADATA_BODIES), ids=ids(sorted(METADATA_BODIES)))
async def test_metadata_nested_too_deep_is_a_clear_400_at_any_depth(
    stack: Stack, http: httpx.AsyncClient, route: tuple[str, str], depth: int
) -> None:
    method, path = route
    params = {"memory_id": await fresh_memory(http)} if "{memory_id}" in path else {}
    body = {**METADATA_BODIES[route], "metadata": nested_object(depth)}
    before = await db_state(stack.dsn)
    # The log kept, not rendered: the console renderer would spend minutes on a deep traceback's locals.
    with server_log() as log:
        response = await http.request(method, url_for(path, params), json=body)
    assert logged_errors(log) == []
    if depth <= 32:  # the positive control: as deep as gRPC can carry is stored
        assert response.status_code in (200, 201), response.text[:300]
        assert changes(before, await db_state(stack.dsn)) != {}
        return
    assert changes(before, await db_state(stack.dsn)) == {}
    assert response.status_code == 400, response.text[:300]
    assert "deeper than 32" in response.json()["error"]["message"]


# -- with authentication on ------------------------------------------------------------------------------------

HEADER_TEXT = SHORT_HOSTILE_TEXT.map(lambda v: v.encode("utf-8", "surrogatepass"))
# What h11 (on both ends) lets through as a header value: visible bytes, inner spaces and tabs only; control
# characters, CR, LF and edge whitespace are refused by the client, or by uvicorn's parser before Mnemo sees them.
SENDABLE_HEADER = re.compile(rb"(?:[\x21-\x7e\x80-\xff]+(?:[ \t]+[\x21-\x7e\x80-\xff]+)*)?")


class TestWithAuthentication:
    """The same schemathesis run as an admin, and hostile credentials; the stack's auth switch is process-wide,
    so this stack lives only for this class (the last in the module)."""

    @pytest.fixture(scope="class")
    async def secured(self, postgres: Postgres) -> AsyncIterator[Stack]:
        stack = await start_fuzz_stack(postgres, "fuzz_auth", MNEMO_AUTH="on", MNEMO_RATE_LIMIT_PER_MIN="1000000")
        yield stack
        await stack.stop()

    @pytest.fixture(scope="class")
    async def admin(self, secured: Stack) -> AsyncIterator[httpx.AsyncClient]:
        headers = {"Authorization": f"Bearer {secured.bootstrap_token}"}
        async with httpx.AsyncClient(base_url=secured.base_url, headers=headers, timeout=60) as client:
            yield client

    @pytest.fixture(scope="class")
    async def secured_openapi(self, admin: httpx.AsyncClient) -> dict[str, Any]:
        return await served_openapi(admin)

    @pytest.fixture(scope="class")
    def secured_schema(self, secured_openapi: dict[str, Any]) -> schemathesis.BaseSchema:
        return schemathesis.openapi.from_dict(secured_openapi)

    @pytest.mark.parametrize("route", ORDINARY, ids=ids(ORDINARY))
    @settings(FUZZ_SETTINGS, max_examples=AUTH_EXAMPLES)
    @given(data=st.data())
    async def test_schemathesis_as_an_admin_finds_no_server_error(
        self,
        secured: Stack,
        admin: httpx.AsyncClient,
        secured_openapi: dict[str, Any],
        secured_schema: schemathesis.BaseSchema,
        route: tuple[str, str],
        data: st.DataObject,
    ) -> None:
        headers = {"Authorization": f"Bearer {secured.bootstrap_token}"}
        await run_schemathesis_case(secured, admin, secured_openapi, secured_schema, route, data, headers=headers)

    @settings(FUZZ_SETTINGS, max_examples=40)
    @given(
        route=st.sampled_from([("GET", "/memories"), ("POST", "/memories"), ("GET", "/tokens"), ("POST", "/mcp")]),
        scheme=st.sampled_from([b"Bearer ", b"bearer ", b"Basic ", b"", b"Bearer  ", b"Bearer\t"]),
        credential=st.one_of(HEADER_TEXT, st.sampled_from([b"mnemo_", b"mnemo_" + b"a" * 12 + b"_" + b"x" * 43])),
    )
    async def test_hostile_credentials_are_a_clear_401_and_write_nothing(
        self, secured: Stack, route: tuple[str, str], scheme: bytes, credential: bytes
    ) -> None:
        method, path = route
        url = path if path == "/mcp" else API + path
        assume(SENDABLE_HEADER.fullmatch(scheme + credential))
        headers = {"authorization": scheme + credential, "content-type": "application/json"}
        body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}' if path == "/mcp" else b'{"content": "x"}'
        before = await db_state(secured.dsn)
        with server_log() as log:
            async with httpx.AsyncClient(base_url=secured.base_url, timeout=60) as client:
                content = body if method == "POST" else None
                response = await client.request(method, url, headers=headers, content=content)
        note(f"{method} {url} {headers} -> {response.status_code} {response.text[:300]}")
        assert response.status_code == 401, (response.status_code, response.text[:300])
        assert response.headers["www-authenticate"].startswith("Bearer")
        content_type = response.headers["content-type"]
        assert_answer(response.status_code, content_type, response.content, log)
        assert changes(before, await db_state(secured.dsn)) == {}

    async def test_the_admin_token_itself_is_accepted(self, admin: httpx.AsyncClient) -> None:
        # Positive control for the refusals above.
        assert (await admin.get(f"{API}/tokens")).status_code == 200
