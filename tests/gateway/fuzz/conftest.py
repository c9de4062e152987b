"""The fuzz modules' stack: one per module (fuzzing writes junk no other test should see)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from mnemo_server.stack import Stack
from tests.gateway.fuzz.strategies import start_fuzz_stack
from tests.helpers import Postgres


@pytest.fixture(scope="module")
async def stack(postgres: Postgres, request: pytest.FixtureRequest) -> AsyncIterator[Stack]:
    stack = await start_fuzz_stack(postgres, request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_"))
    yield stack
    await stack.stop()


@pytest.fixture(scope="module")
async def http(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=60) as client:
        yield client
