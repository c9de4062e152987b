"""The `harvest` fixture: a fresh stack harvesting a fake Claude Code home."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.harvest.harness import Harvest, start_harvest
from tests.helpers import Postgres


@pytest.fixture
async def harvest(postgres: Postgres, tmp_path: Path) -> AsyncIterator[Harvest]:
    h = await start_harvest(postgres, tmp_path)
    yield h
    await h.close()
    await h.stack.stop()
