"""The `mnemo` CLI's corrections against a running gateway: supersede, retract, confirm, delete, restore,
purge, history, audit log and verify, and the --history/--as-of/--valid-at read options."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx

from mnemo_embed import HashEmbedder
from mnemo_server.stack import Stack
from tests.helpers import Clients, Postgres, mnemo, start_stack, table_counts

MISSING = str(uuid.UUID(int=9))


async def ok(stack: Stack, *args: str, stdin: str | None = None) -> str:
    code, out, err = await mnemo(stack, *args, stdin=stdin)
    assert code == 0, (args, code, out, err)
    assert "Traceback" not in out + err
    return out


async def fails(stack: Stack, *args: str, code: int = 1) -> str:
    """A failing command: the expected exit code, one `mnemo: CODE[ (REASON)]: message` line on stderr, no trace."""
    got, out, err = await mnemo(stack, *args)
    assert got == code, (args, got, out, err)
    assert "Traceback" not in out + err
    if code == 1:
        assert err.startswith("mnemo: ") and err.count("\n") == 1, err
    return err


async def together(stack: Stack, *commands: tuple[str, ...]) -> list[tuple[int, str, str]]:
    """Independent commands at once: each CLI start costs seconds, and reads do not depend on one another."""
    return list(await asyncio.gather(*(mnemo(stack, *command) for command in commands)))


def succeeded(result: tuple[int, str, str]) -> str:
    code, out, err = result
    assert code == 0 and "Traceback" not in out + err, (code, out, err)
    return out


def failed(result: tuple[int, str, str]) -> str:
    code, out, err = result
    assert code == 1 and "Traceback" not in out + err, (code, out, err)
    assert err.startswith("mnemo: ") and err.count("\n") == 1, err
    return err


async def written(stack: Stack, ws: str, content: str, **fields: str) -> dict[str, Any]:
    """A memory written over REST (as the CLI does, but without a process start per note)."""
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
        response = await http.post("/api/v1/memories", json={"workspace": ws, "content": content, **fields})
    assert response.status_code == 201, response.text[:300]
    return response.json()["memory"]


async def moment() -> str:
    """A time strictly between what was recorded before and what is recorded after."""
    await asyncio.sleep(0.05)
    at = datetime.now(UTC)
    await asyncio.sleep(0.05)
    return at.isoformat()


async def test_cli_supersede_history_and_time_travel(hash_stack: Stack, hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    old = await written(hash_stack, ws, "Integration tests run against PostgreSQL 15.", kind="decision")
    before = await moment()
    out = await ok(
        hash_stack,
        "supersede",
        old["id"],
        "Integration tests run against PostgreSQL 18.",
        "--reason",
        "upgraded",
        "-w",
        ws,
    )
    match = re.search(r"^successor : ([0-9a-f-]{36})  ", out, re.M)
    assert match, out
    new_id = match.group(1)
    assert re.search(
        rf"^superseded: {old['id']}  .*\[superseded · human decision · \d{{4}}-\d{{2}}-\d{{2}} · by local in \S+\]$",
        out,
        re.M,
    )
    assert re.search(rf"^successor : {new_id}  .*\[active · human decision · ", out, re.M)

    lexical = ("--mode", "lexical", "-w", ws)
    (
        plain,
        with_history,
        as_of,
        get_old,
        get_old_history,
        get_old_as_of,
        get_new_as_of,
        get_new,
        history_text,
        history_json,
        bad_as_of,
        bad_valid_at,
        supersede_again,
    ) = await together(
        hash_stack,
        ("search", "integration", "tests", "PostgreSQL", *lexical),
        ("search", "integration", "tests", "PostgreSQL", "--history", *lexical),
        ("search", "integration", "tests", "--as-of", before, *lexical),
        ("get", old["id"], "-w", ws),
        ("get", old["id"], "--history", "-w", ws),
        ("get", old["id"], "--as-of", before, "-w", ws),
        ("get", new_id, "--as-of", before, "-w", ws),
        ("get", new_id, "-w", ws),
        ("history", old["id"], "-w", ws),
        ("history", old["id"], "--json", "-w", ws),
        ("get", old["id"], "--as-of", "yesterday", "-w", ws),
        ("search", "tests", "--valid-at", "2026-02-30", "-w", ws),
        ("supersede", old["id"], "again", "-w", ws),
    )
    # Default search: the successor only; --history adds the old one, labelled.
    out = succeeded(plain)
    assert new_id in out and old["id"] not in out
    out = succeeded(with_history)
    assert new_id in out and old["id"] in out and "[superseded · human decision · " in out
    # --as-of before the supersede: the old belief, and only it.
    out = succeeded(as_of)
    assert old["id"] in out and new_id not in out and "[active · human decision · " in out

    # get: refused with the reason; --history and --as-of read it.
    err = failed(get_old)
    # The reason in parentheses comes from gateways whose error bodies carry one.
    assert re.match(rf"mnemo: NOT_FOUND( \(SUPERSEDED\))?: memory {old['id']} is superseded by {new_id}", err), err
    out = succeeded(get_old_history)
    assert "Integration tests run against PostgreSQL 15." in out and "[superseded · human decision · " in out
    out = succeeded(get_old_as_of)
    assert "Integration tests run against PostgreSQL 15." in out and "[active · human decision · " in out
    assert "did not exist yet" in failed(get_new_as_of)
    assert "Integration tests run against PostgreSQL 18." in succeeded(get_new)

    # history: the version, then the two states in order, with who, the pointer and the reason.
    lines = succeeded(history_text).splitlines()
    assert "[superseded · human decision · " in lines[0]
    assert lines[1] == "versions:" and lines[2].startswith("  v1 by local, ")
    assert lines[2].endswith(": Integration tests run against PostgreSQL 15.")
    assert lines[3] == "status:"
    assert re.match(r"^  \S+  active  \[local\]$", lines[4]), lines[4]
    assert re.match(rf"^  \S+  superseded by {new_id} \(upgraded\)  \[local\]$", lines[5]), lines[5]
    assert [e["action"] for e in json.loads(succeeded(history_json))["events"]] == ["write", "supersede"]

    # Bad read options are one-line errors (exit 1), never a trace; a second supersede is refused.
    err = failed(bad_as_of)
    assert "INVALID_ARGUMENT" in err and "as_of" in err
    err = failed(bad_valid_at)
    assert "INVALID_ARGUMENT" in err and "valid_at" in err
    err = failed(supersede_again)
    assert "FAILED_PRECONDITION" in err and f"it is superseded by {new_id}" in err


async def test_cli_tells_how_to_read_a_superseded_memory_in_its_own_terms(
    hash_stack: Stack, hash_clients: Clients
) -> None:
    ws = (await hash_clients.workspace()).id
    old = await written(hash_stack, ws, "The cache lives in Redis.")
    await ok(hash_stack, "supersede", old["id"], "The cache lives in Valkey.", "-w", ws)
    # Positive control: the CLI's own flag reads it.
    await ok(hash_stack, "get", old["id"], "--history", "-w", ws)
    err = await fails(hash_stack, "get", old["id"], "-w", ws)
    # The hint names a flag this command has; `include_history` is the API's name, not the CLI's.
    assert "--history" in err, err


async def test_cli_supersede_reads_stdin_and_valid_time(hash_stack: Stack, hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    berlin = await written(hash_stack, ws, "The on-call rota is kept in Berlin.", valid_from="2020-01-01T00:00:00Z")
    out = await ok(
        hash_stack,
        "supersede",
        berlin["id"],
        "--valid-from",
        "2021-01-01T00:00:00Z",
        "--json",
        "-w",
        ws,
        stdin="The on-call rota is kept in Munich.",
    )
    result = json.loads(out)
    munich = result["successor"]
    assert result["superseded"]["valid_to"] == "2021-01-01T00:00:00Z"
    assert munich["valid_from"] == "2021-01-01T00:00:00Z"
    query = ("search", "on-call", "rota", "--mode", "lexical", "-w", ws)
    later, then_history, then = await together(
        hash_stack,
        (*query, "--valid-at", "2022-01-01T00:00:00Z"),
        (*query, "--valid-at", "2020-06-01T00:00:00Z", "--history"),
        (*query, "--valid-at", "2020-06-01T00:00:00Z"),
    )
    out = succeeded(later)
    assert munich["id"] in out and berlin["id"] not in out
    out = succeeded(then_history)
    assert berlin["id"] in out and munich["id"] not in out and "[superseded · human note · " in out
    # The belief of that time is superseded: only history shows it.
    assert succeeded(then).strip() == "no matches"


async def test_cli_retract_and_confirm(hash_stack: Stack, hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    wrong = await written(hash_stack, ws, "The build needs 32 GB of memory.")
    right = await written(hash_stack, ws, "The build needs 8 GB of memory.")

    before = await table_counts(hash_stack.dsn)
    no_reason, blank, huge, missing = await together(
        hash_stack,
        ("retract", wrong["id"], "-w", ws),
        ("retract", wrong["id"], "--reason", "  ", "-w", ws),
        ("retract", wrong["id"], "--reason", "r" * 2001, "-w", ws),
        ("retract", MISSING, "--reason", "x", "-w", ws),
    )
    assert no_reason[0] == 2 and "--reason" in no_reason[2]  # argparse: the reason is required
    err = failed(blank)
    assert "INVALID_ARGUMENT" in err and "reason is required" in err
    assert "at most 2000" in failed(huge)
    assert re.search(rf"NOT_FOUND( \(MEMORY_NOT_FOUND\))?: memory {MISSING} not found", failed(missing))
    assert await table_counts(hash_stack.dsn) == before

    out = await ok(hash_stack, "retract", wrong["id"], "--reason", "measured: 8 GB", "-w", ws)
    assert re.match(
        rf"^retracted: {wrong['id']}  .*\[retracted · human note · \d{{4}}-\d{{2}}-\d{{2}} · by local in \S+\]$",
        out.strip(),
    )
    plain, with_history, again, confirm_wrong = await together(
        hash_stack,
        ("search", "build", "memory", "--mode", "lexical", "-w", ws),
        ("search", "build", "memory", "--mode", "lexical", "--history", "-w", ws),
        ("retract", wrong["id"], "--reason", "again", "-w", ws),
        ("confirm", wrong["id"], "-w", ws),
    )
    out = succeeded(plain)
    assert right["id"] in out and wrong["id"] not in out
    out = succeeded(with_history)
    assert wrong["id"] in out and "[retracted · human note · " in out
    err = failed(again)
    assert "FAILED_PRECONDITION" in err and "it is retracted" in err
    err = failed(confirm_wrong)
    assert "cannot confirm" in err and "retracted" in err

    out = await ok(hash_stack, "confirm", right["id"], "--reason", "measured", "-w", ws)
    assert re.match(rf"^confirmed: {right['id']}  .*\[confirmed · human note · ", out.strip()), out
    before = await table_counts(hash_stack.dsn)
    out = await ok(hash_stack, "confirm", right["id"], "-w", ws)
    assert out.startswith(f"already confirmed: {right['id']}  ")
    assert await table_counts(hash_stack.dsn) == before
    out = await ok(hash_stack, "search", "build", "memory", "--mode", "lexical", "-w", ws)
    assert "[confirmed · human note · " in out


async def test_cli_delete_restore_purge(hash_stack: Stack, hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    uri = "file:///sessions/2026-11-01.jsonl"
    memory = await written(hash_stack, ws, "Session summary: rotated the deploy key.", source_uri=uri)
    sibling = await written(hash_stack, ws, "Session summary: added a smoke test.")

    code, _, err = await mnemo(hash_stack, "delete", memory["id"], "-w", ws)
    assert code == 2 and "--reason" in err  # argparse: the reason is required
    out = await ok(hash_stack, "delete", memory["id"], "--reason", "noise", "-w", ws)
    lines = out.splitlines()
    assert lines[0].startswith(f"deleted: {memory['id']} (by local, ")
    assert lines[1] == f"  writes from {uri} are refused while the tombstone stands"
    assert lines[2] == f"  undo with: mnemo restore {memory['id']}"
    search, get, rewrite = await together(
        hash_stack,
        ("search", "session", "summary", "--mode", "lexical", "--history", "-w", ws),
        ("get", memory["id"], "-w", ws),
        ("write", "-w", ws, "--source-uri", uri, "Session summary, re-harvested."),
    )
    out = succeeded(search)
    assert sibling["id"] in out and memory["id"] not in out
    err = failed(get)
    assert "was deleted" in err and f"mnemo restore {memory['id']}" in err
    err = failed(rewrite)
    assert "FAILED_PRECONDITION" in err and uri in err and f"restore memory {memory['id']}" in err

    out = await ok(hash_stack, "restore", memory["id"], "-w", ws)
    assert re.match(rf"^restored: {memory['id']}  .*\[active · human note · ", out.strip()), out
    out = await ok(hash_stack, "get", memory["id"], "-w", ws)
    assert "rotated the deploy key" in out
    err = await fails(hash_stack, "restore", memory["id"], "-w", ws)
    assert "is not deleted" in err

    # purge: --force is required and its absence changes nothing.
    before = await table_counts(hash_stack.dsn)
    err = await fails(hash_stack, "purge", memory["id"], "-w", ws)
    assert "FAILED_PRECONDITION" in err and "--force" in err
    assert await table_counts(hash_stack.dsn) == before
    await ok(hash_stack, "get", memory["id"], "-w", ws)
    out = await ok(hash_stack, "purge", memory["id"], "--force", "-w", ws)
    assert out.startswith(f"purged: {memory['id']} (by local, ")
    assert f"writes from {uri} are refused" in out
    get, restore, history, rewrite, log = await together(
        hash_stack,
        ("get", memory["id"], "--history", "-w", ws),
        ("restore", memory["id"], "-w", ws),
        ("history", memory["id"], "-w", ws),
        ("write", "-w", ws, "--source-uri", uri, "Session summary, once more."),
        ("audit", "log", "--memory", memory["id"], "-w", ws),
    )
    assert "purged" in failed(get)
    err = failed(restore)
    assert "purged" in err and "nothing of it remains" in err
    assert "purged" in failed(history)
    err = failed(rewrite)
    assert "purged" in err and "again" in err
    assert [line.split()[2] for line in succeeded(log).splitlines()] == ["purge", "restore", "delete", "write"]


async def test_cli_audit_log_and_verify(hash_stack: Stack, hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    memory = await written(hash_stack, ws, "Lint with ruff.")
    await ok(hash_stack, "update", memory["id"], "Lint and format with ruff.", "-w", ws)
    await ok(
        hash_stack, "supersede", memory["id"], "Lint with ruff, type-check with mypy.", "--reason", "mypy", "-w", ws
    )

    (
        log_all,
        log_memory,
        log_one,
        log_json,
        log_bad,
        log_no_ws,
        verify_ws,
        verify_all,
        verify_json,
        verify_no_ws,
    ) = await together(
        hash_stack,
        ("audit", "log", "-w", ws),
        ("audit", "log", "--memory", memory["id"], "-w", ws),
        ("audit", "log", "--limit", "1", "-w", ws),
        ("audit", "log", "--json", "-w", ws),
        ("audit", "log", "--memory", "not-a-uuid", "-w", ws),
        ("audit", "log", "-w", "no-such-workspace"),
        ("audit", "verify", "-w", ws),
        ("audit", "verify"),
        ("audit", "verify", "--json", "-w", ws),
        ("audit", "verify", "-w", "no-such-workspace"),
    )
    lines = succeeded(log_all).splitlines()
    actions = [line.split()[2] for line in lines]
    assert actions == ["supersede", "update", "write", "workspace_add"]  # newest first
    numbers = [int(line.split()[0].lstrip("#")) for line in lines]
    assert numbers == sorted(numbers, reverse=True)
    assert re.match(rf"^#\d+\s+\S+  supersede\s+local\s+{memory['id']} v2  \(.*reason=mypy.*\)$", lines[0]), lines[0]
    assert "successor=" in lines[0]
    assert [line.split()[2] for line in succeeded(log_memory).splitlines()] == ["supersede", "update", "write"]
    out = succeeded(log_one)
    assert len(out.splitlines()) == 1 and " supersede " in out
    assert [e["action"] for e in json.loads(succeeded(log_json))["events"]] == actions
    assert "not a memory id" in failed(log_bad)
    assert "mnemo workspace add" in failed(log_no_ws)

    assert succeeded(verify_ws).strip() == "ok: 4 events in 1 chains verified; their heads match their signed anchors"
    out = succeeded(verify_all)
    verified_all = r"^ok: \d+ events in \d+ chains verified; their heads match their signed anchors$"
    assert re.match(verified_all, out.strip()), out
    verified = json.loads(succeeded(verify_json))
    assert verified["ok"] is True and verified["events_checked"] == 4 and verified["broken_event_id"] == 0
    assert "mnemo workspace add" in failed(verify_no_ws)


async def test_cli_audit_verify_finds_a_tampered_chain(postgres: Postgres) -> None:
    # A stack of its own on a fresh database: the shared stack's chain must stay intact for other tests.
    stack = await start_stack(await postgres.create_database("tamper"), HashEmbedder(64))
    try:
        for result in await together(
            stack, ("workspace", "add", "--name", "edited"), ("workspace", "add", "--name", "cut")
        ):
            succeeded(result)
        first = await written(stack, "edited", "The first decision.")
        await written(stack, "edited", "The second decision.")
        for text in ("One.", "Two.", "Three."):
            await written(stack, "cut", text)
        out = await ok(stack, "audit", "verify")
        assert out.strip() == "ok: 7 events in 2 chains verified; their heads match their signed anchors"

        conn = await asyncpg.connect(stack.dsn)
        try:
            # Positive control: without superuser tricks, the table refuses the change.
            try:
                await conn.execute("UPDATE audit_events SET principal = 'mallory'")
            except asyncpg.PostgresError as exc:
                assert "append-only" in str(exc)
            else:
                raise AssertionError("audit_events accepted an UPDATE")
            edited_id = await conn.fetchval(
                "SELECT id FROM audit_events WHERE action = 'write' AND memory_id = $1", uuid.UUID(first["id"])
            )
            cut_ids = await conn.fetch(
                "SELECT id FROM audit_events WHERE workspace_id = 'cut' AND action = 'write' ORDER BY id"
            )
            await conn.execute("ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only")
            await conn.execute("UPDATE audit_events SET principal = 'mallory' WHERE id = $1", edited_id)
            await conn.execute("DELETE FROM audit_events WHERE id = $1", cut_ids[1]["id"])
            await conn.execute("ALTER TABLE audit_events ENABLE TRIGGER audit_events_append_only")
        finally:
            await conn.close()

        edited, cut, everything, as_json = await together(
            stack,
            ("audit", "verify", "-w", "edited"),
            ("audit", "verify", "-w", "cut"),
            ("audit", "verify"),
            ("audit", "verify", "--json", "-w", "edited"),
        )
        # Exit 3 (not 1: the command worked, the chain did not) with the first broken link.
        assert edited[0] == 3 and "Traceback" not in edited[1] + edited[2], edited
        assert edited[1].strip() == (
            f"BROKEN: workspace edited, event #{edited_id}: event {edited_id} (write) does not match its hash: "
            "its recorded fields were changed after it was written"
        )
        assert cut[0] == 3, cut
        assert cut[1].startswith(f"BROKEN: workspace cut, event #{cut_ids[2]['id']}: ")
        assert "an event was removed or reordered" in cut[1]
        assert everything[0] == 3 and everything[1].startswith("BROKEN: "), everything
        report = json.loads(as_json[1])
        assert as_json[0] == 3 and report["ok"] is False and report["broken_event_id"] == edited_id
        async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
            response = await http.get("/api/v1/audit/verify", params={"workspace": "cut"})
            assert response.status_code == 200
            assert response.json()["ok"] is False and response.json()["broken_workspace_id"] == "cut"
        # Positive control: an untouched chain in the same database still verifies.
        await ok(stack, "workspace", "add", "--name", "clean")
        await written(stack, "clean", "Nothing to see.")
        out = await ok(stack, "audit", "verify", "-w", "clean")
        assert out.strip() == "ok: 2 events in 1 chains verified; their heads match their signed anchors"
    finally:
        await stack.stop()
