"""The workspace wall, rule by rule, each refusal beside its positive control (mnemo_store.access)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import asyncpg
import pytest

from mnemo_embed import HashEmbedder
from mnemo_platform import NotFound, PermissionDenied
from mnemo_platform.context import ALL_WORKSPACES, CallContext, reset_call, set_call
from mnemo_store import (
    EVERYWHERE,
    GLOBAL_WORKSPACE,
    KnownIds,
    Params,
    Reach,
    WorkspaceCache,
    WorkspaceRow,
    add_workspace,
    caller_reach,
    reach_in,
    require_everywhere,
    resolve_for_read,
    resolve_for_write,
    resolve_registered,
    workspace_clause,
)
from tests.helpers import Postgres, migrate


@dataclass
class World:
    pool: asyncpg.Pool
    mine: WorkspaceRow
    theirs: WorkspaceRow


@pytest.fixture(scope="module")
async def world(postgres: Postgres) -> AsyncIterator[World]:
    dsn = await postgres.create_database("access")
    await migrate(dsn, HashEmbedder(16))
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    async with pool.acquire() as conn:
        mine, _ = await add_workspace(conn, "/srv/mine")
        theirs, _ = await add_workspace(conn, "/srv/theirs")
        await add_workspace(conn, name=GLOBAL_WORKSPACE)
    yield World(pool, mine, theirs)
    await pool.close()


@contextmanager
def acting(role: str, *workspaces: str) -> Iterator[None]:
    token = set_call(CallContext(principal=f"{role}-test", role=role, workspaces=workspaces))
    try:
        yield
    finally:
        reset_call(token)


async def test_a_token_reads_and_writes_its_own_workspace_and_no_other(world: World) -> None:
    with acting("agent", world.mine.id):
        assert (await resolve_for_read(world.pool, world.mine.id)).id == world.mine.id
        assert (await resolve_for_write(world.pool, "/srv/mine/src/deep")).id == world.mine.id  # a path under the root
        for resolve in (resolve_for_read, resolve_for_write):
            with pytest.raises(PermissionDenied, match="may not touch workspace '/srv/theirs'"):
                await resolve(world.pool, "/srv/theirs")


async def test_an_unknown_workspace_is_refused_like_a_foreign_one_but_an_admin_is_told(world: World) -> None:
    with acting("agent", world.mine.id):
        with pytest.raises(PermissionDenied) as foreign:
            await resolve_for_read(world.pool, world.theirs.id)
        with pytest.raises(PermissionDenied) as unknown:
            await resolve_for_read(world.pool, "no-such-workspace")
        # The same sentence, only the caller's own words differ: nothing to probe for.
        assert str(foreign.value).replace(world.theirs.id, "X") == str(unknown.value).replace("no-such-workspace", "X")
    with acting("admin", ALL_WORKSPACES):
        with pytest.raises(NotFound, match="not registered"):
            await resolve_for_read(world.pool, "no-such-workspace")
        assert (await resolve_for_read(world.pool, world.theirs.id)).id == world.theirs.id  # admin: everywhere


async def test_global_is_read_by_every_token_and_written_by_reviewers(world: World) -> None:
    with acting("agent", world.mine.id):
        assert (await resolve_for_read(world.pool, GLOBAL_WORKSPACE)).id == GLOBAL_WORKSPACE
        with pytest.raises(PermissionDenied, match="read-only for agent tokens"):
            await resolve_for_write(world.pool, GLOBAL_WORKSPACE)
    with acting("reviewer", world.mine.id):
        assert (await resolve_for_write(world.pool, GLOBAL_WORKSPACE)).id == GLOBAL_WORKSPACE


async def test_resolve_registered_names_without_entering(world: World) -> None:
    with acting("agent", world.mine.id):
        # Binding a token to a workspace is an admin's act on names; it checks existence, not reach.
        assert (await resolve_registered(world.pool, "/srv/theirs")).id == world.theirs.id
        with pytest.raises(NotFound, match="not registered"):
            await resolve_registered(world.pool, "/srv/nowhere")


async def test_reaches_say_what_a_read_sees(world: World) -> None:
    assert reach_in(world.mine) == Reach((world.mine.id, GLOBAL_WORKSPACE))
    assert reach_in(WorkspaceRow(GLOBAL_WORKSPACE, GLOBAL_WORKSPACE, None, world.mine.created_at)) == Reach(
        (GLOBAL_WORKSPACE,)
    )
    with acting("agent", world.mine.id):
        assert caller_reach() == Reach((world.mine.id, GLOBAL_WORKSPACE))
        with pytest.raises(PermissionDenied, match="needs an admin token"):
            require_everywhere("searching every workspace")
    with acting("admin", ALL_WORKSPACES):
        assert caller_reach() == EVERYWHERE
        assert require_everywhere("searching every workspace") == EVERYWHERE


async def test_the_clause_keeps_rows_inside_the_reach(world: World) -> None:
    async def ids(reach: Reach) -> set[str]:
        params = Params()
        rows = await world.pool.fetch(
            f"SELECT id FROM workspaces WHERE {workspace_clause(reach, params, 'id')}", *params.values
        )
        return {r["id"] for r in rows}

    mine = await ids(reach_in(world.mine))
    assert mine == {world.mine.id, GLOBAL_WORKSPACE}  # positive control: its own and global
    assert world.theirs.id not in mine
    assert {world.mine.id, world.theirs.id, GLOBAL_WORKSPACE} <= await ids(EVERYWHERE)
    with pytest.raises(ValueError, match="at least one workspace"):
        workspace_clause(Reach(()), Params(), "id")


class Clock:
    """A monotonic clock the test moves by hand: expiry is checked without waiting."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_a_cached_workspace_is_still_checked_against_each_caller(world: World) -> None:
    cache = WorkspaceCache(5.0, clock=Clock())
    with acting("admin", ALL_WORKSPACES):
        assert (await resolve_for_read(world.pool, "/srv/theirs", cache)).id == world.theirs.id
    # The admin's lookup is in the cache, and a token bound elsewhere is refused all the same...
    with acting("agent", world.mine.id), pytest.raises(PermissionDenied, match="may not touch workspace"):
        await resolve_for_read(world.pool, "/srv/theirs", cache)
    # ...while the token that reaches it gets it (positive control).
    with acting("agent", world.theirs.id):
        assert (await resolve_for_read(world.pool, "/srv/theirs", cache)).id == world.theirs.id


async def test_the_workspace_cache_keeps_no_miss_and_forgets_after_its_ttl(world: World) -> None:
    clock = Clock()
    cache = WorkspaceCache(5.0, clock=clock)
    with acting("admin", ALL_WORKSPACES):
        with pytest.raises(NotFound, match="not registered"):
            await resolve_for_read(world.pool, "cache-newcomer", cache)
        async with world.pool.acquire() as conn:
            newcomer, _ = await add_workspace(conn, name="cache-newcomer")
        # A miss is not kept: a workspace registered a moment later is found at once.
        assert await resolve_for_read(world.pool, "cache-newcomer", cache) == newcomer
        # A path is the one reference whose meaning a registration changes: until the entry
        # expires it still names the enclosing workspace (which the caller was checked for)...
        assert (await resolve_for_read(world.pool, "/srv/mine/nested/src", cache)).id == world.mine.id
        async with world.pool.acquire() as conn:
            nested, _ = await add_workspace(conn, "/srv/mine/nested")
        clock.now += 4.9
        assert (await resolve_for_read(world.pool, "/srv/mine/nested/src", cache)).id == world.mine.id
        # ...and once it has, the deeper root wins, as it does uncached.
        clock.now += 0.2
        assert (await resolve_for_read(world.pool, "/srv/mine/nested/src", cache)).id == nested.id
        assert (await resolve_for_read(world.pool, "/srv/mine/nested/src")).id == nested.id
        # With no TTL nothing is kept: the same change shows at once.
        off = WorkspaceCache(0.0, clock=clock)
        assert (await resolve_for_read(world.pool, "/srv/theirs/deeper", off)).id == world.theirs.id
        async with world.pool.acquire() as conn:
            deeper, _ = await add_workspace(conn, "/srv/theirs/deeper")
        assert (await resolve_for_read(world.pool, "/srv/theirs/deeper", off)).id == deeper.id


async def test_a_write_keeps_workspaces_by_id_only_and_checks_each_caller(world: World) -> None:
    ids: KnownIds = {}
    with acting("admin", ALL_WORKSPACES):
        assert (await resolve_for_write(world.pool, world.theirs.id, ids)).id == world.theirs.id
        # A name or a path is not kept: what it names can change with a registration.
        assert (await resolve_for_write(world.pool, "/srv/mine/kept/src", ids)).id == world.mine.id
    assert list(ids) == [world.theirs.id]
    # The id is answered from what was kept, even with the database unreachable...
    async with world.pool.acquire() as conn:
        await conn.close()
        assert (await resolve_for_write(conn, world.theirs.id, ids)) == world.theirs
        with pytest.raises(asyncpg.InterfaceError):  # (positive control: the connection is closed)
            await resolve_for_write(conn, world.mine.id, ids)
    # ...and a token bound elsewhere is refused all the same, while the one that reaches it is not.
    with acting("agent", world.mine.id), pytest.raises(PermissionDenied, match="may not touch workspace"):
        await resolve_for_write(world.pool, world.theirs.id, ids)
    with acting("agent", world.theirs.id):
        assert (await resolve_for_write(world.pool, world.theirs.id, ids)).id == world.theirs.id
    # A path under a root registered later names the new workspace at once.
    with acting("admin", ALL_WORKSPACES):
        async with world.pool.acquire() as conn:
            kept, _ = await add_workspace(conn, "/srv/mine/kept")
        assert (await resolve_for_write(world.pool, "/srv/mine/kept/src", ids)).id == kept.id
