"""Session fixtures: one embedded PostgreSQL, stacks on the hash and the real embedder."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from mnemo_embed import HashEmbedder
from mnemo_embed.local import LocalEmbedder
from mnemo_server.stack import Stack
from tests.helpers import Clients, Postgres, start_stack

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """The real embedded PostgreSQL with pgvector; if it cannot start, every test using it fails."""
    from mnemo_store.embedded import open_server

    # A short path: the server's Unix socket lives in its data directory.
    root = Path(tempfile.mkdtemp(prefix="mnemo-pg-"))
    server = open_server(root / "pg", cleanup_mode="delete")
    try:
        yield Postgres(server.get_uri())
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
async def hash_stack(postgres: Postgres) -> AsyncIterator[Stack]:
    """A whole Mnemo on the deterministic embedder: fast, for everything that is not about meaning."""
    stack = await start_stack(await postgres.create_database("hash"), HashEmbedder(64))
    yield stack
    await stack.stop()


@pytest.fixture(scope="session")
async def model_stack(postgres: Postgres) -> AsyncIterator[Stack]:
    """A whole Mnemo on the real bundled model, loaded once per session."""
    embedder = LocalEmbedder()
    stack = await start_stack(await postgres.create_database("model"), embedder, MNEMO_EMBEDDER="local")
    await embedder.wait_ready()
    yield stack
    await stack.stop()


@pytest.fixture(scope="session")
async def hash_clients(hash_stack: Stack) -> AsyncIterator[Clients]:
    clients = Clients(hash_stack)
    yield clients
    await clients.close()


@pytest.fixture(scope="session")
async def model_clients(model_stack: Stack) -> AsyncIterator[Clients]:
    clients = Clients(model_stack)
    yield clients
    await clients.close()
