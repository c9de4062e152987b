"""The `harvest` fixture: a fresh stack harvesting a fake Claude Code home."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.harvest.harness import IN_CLUSTER, Harvest, start_harvest
from tests.helpers import Postgres


@pytest.fixture
async def harvest(request: pytest.FixtureRequest, postgres: Postgres, tmp_path: Path) -> AsyncIterator[Harvest]:
    """In-cluster; or where a test's `harvest` parameter says (`WHERE`: in-cluster and remote)."""
    h = await start_harvest(postgres, tmp_path, where=getattr(request, "param", IN_CLUSTER))
    yield h
    await h.close()
    await h.stack.stop()
