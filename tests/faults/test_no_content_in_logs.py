"""Logs and client-visible errors never carry stored content or credentials: a database error's
DETAIL (which quotes the row) is cut from every log line and note, a pretty traceback shows no local
variables, and an embedding endpoint's URL is shown without its user, password or query."""

from __future__ import annotations

import io
import logging
import sys
import uuid

import asyncpg
import pytest
import structlog

from mnemo_embed import EmbedderUnavailable, OpenAIEmbedder
from mnemo_platform.errors import describe_error
from mnemo_platform.logging import configure_logging
from tests.helpers import Postgres

SECRET_ROW = "row-content-that-must-not-leak"


async def unique_violation(postgres: Postgres) -> asyncpg.PostgresError:
    """A real error whose DETAIL quotes a row: a duplicate key, as PostgreSQL reports it."""
    conn = await asyncpg.connect(await postgres.create_database())
    try:
        await conn.execute("CREATE TABLE t (v text PRIMARY KEY)")
        await conn.execute("INSERT INTO t VALUES ($1)", SECRET_ROW)
        with pytest.raises(asyncpg.UniqueViolationError) as caught:
            await conn.execute("INSERT INTO t VALUES ($1)", SECRET_ROW)
    finally:
        await conn.close()
    assert SECRET_ROW in str(caught.value)  # the control: the error itself quotes the row
    return caught.value


@pytest.mark.parametrize("fmt", ["json", "console"])
async def test_a_logged_database_error_keeps_its_class_and_loses_its_row(
    postgres: Postgres, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    error = await unique_violation(postgres)
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    configure_logging("info", fmt)
    try:
        try:
            raise RuntimeError("writing failed") from error
        except RuntimeError:
            structlog.get_logger("mnemo.test").exception("rpc_failed", request_id=uuid.uuid4().hex)
        text = out.getvalue()
    finally:
        monkeypatch.undo()
        configure_logging("info", "json")
        logging.getLogger().handlers[0].flush()
    assert "rpc_failed" in text and "UniqueViolationError" in text  # the line and the error's class stay
    assert SECRET_ROW not in text


async def test_notes_for_callers_carry_the_first_line_only(postgres: Postgres) -> None:
    error = await unique_violation(postgres)
    note = describe_error(error)
    assert note.startswith("UniqueViolationError: duplicate key value violates unique constraint")
    assert SECRET_ROW not in note


async def test_an_endpoint_url_is_shown_without_its_credentials() -> None:
    embedder = OpenAIEmbedder(
        url="http://mnemo:hunter2@127.0.0.1:9/v1?api_key=sk-live-123", model="m", dimension=4, timeout_s=0.2
    )
    embedder.start()
    with pytest.raises(EmbedderUnavailable) as caught:
        await embedder.embed(["text"])
    message = str(caught.value)
    assert "127.0.0.1:9/v1" in message  # which endpoint failed is still said
    assert "hunter2" not in message and "sk-live-123" not in message and "mnemo:" not in message
    await embedder.aclose()
