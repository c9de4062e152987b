"""configure_logging: Mnemo's own lines and the libraries' lines come out in one JSON shape on one
stream, below the level nothing is written, and configuring again moves loggers already used."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator

import pytest
import structlog
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext

from mnemo_platform.logging import configure_logging


@pytest.fixture
def stream(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """Logging configured (JSON, info) onto a fresh stream; the default configuration again after."""
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    configure_logging("info", "json")
    yield out
    monkeypatch.undo()
    configure_logging("info", "json")


def lines(out: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_line_carries_its_fields_level_logger_time_and_trace(stream: io.StringIO) -> None:
    log = structlog.get_logger("mnemo.test")
    context = SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=False)
    with trace.use_span(NonRecordingSpan(context)), structlog.contextvars.bound_contextvars(request_id="r-1"):
        log.info("thing_done", count=3)
    log.debug("thing_detail", count=4)  # below the level
    [line] = lines(stream)
    assert line["event"] == "thing_done" and line["count"] == 3 and line["request_id"] == "r-1"
    assert line["level"] == "info" and line["logger"] == "mnemo.test"
    assert line["timestamp"].endswith("Z")
    assert line["trace_id"] == f"{0xABC:032x}" and line["span_id"] == f"{0xDEF:016x}"


def test_a_library_line_takes_the_same_shape_on_the_same_stream(stream: io.StringIO) -> None:
    structlog.get_logger("mnemo.test").warning("ours")
    logging.getLogger("uvicorn.error").warning("theirs %s", "formatted")
    logging.getLogger("uvicorn.error").debug("below the level")
    ours, theirs = lines(stream)
    assert (ours["event"], ours["logger"], ours["level"]) == ("ours", "mnemo.test", "warning")
    assert (theirs["event"], theirs["logger"], theirs["level"]) == ("theirs formatted", "uvicorn.error", "warning")
    assert set(theirs) >= {"timestamp"} and set(ours) >= {"timestamp"}


def test_configuring_again_moves_a_logger_already_used(stream: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    log = structlog.get_logger("mnemo.test")
    log.info("before")
    moved = io.StringIO()
    monkeypatch.setattr(sys, "stdout", moved)
    configure_logging("info", "json")
    log.info("after")
    assert [line["event"] for line in lines(stream)] == ["before"]
    assert [line["event"] for line in lines(moved)] == ["after"]
