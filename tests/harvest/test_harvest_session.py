"""Harvesting one session now (what an agent's session-end hook asks for), over real gRPC."""

from __future__ import annotations

import grpc
import pytest

from mnemo.harvest.v1 import harvest_service_pb2 as hpb
from mnemo_platform import reason_name, reason_of
from tests.harvest.agents import conversation
from tests.harvest.harness import Harvest, register
from tests.helpers import ids, table_counts


async def _run_session(h: Harvest, session: str, agent: str = "") -> list[hpb.RunProgress]:
    return [p async for p in h.harvest.Run(hpb.RunRequest(session=session, agent=agent))]


async def test_one_named_session_is_harvested_at_once_and_no_other(harvest: Harvest) -> None:
    (ws,) = await register(harvest, "/work/delta")
    # Both sessions changed just now: a plain run leaves them for the idle window.
    first = conversation(harvest.projects, "/work/delta", "quokka").write(age_s=0)
    second = conversation(harvest.projects, "/work/delta", "axolotl").write(age_s=0)
    plain = {p.session_id: p.skip_reason for p in await harvest.run() if not p.done}
    assert plain == {first.session_id: "still-active", second.session_id: "still-active"}

    progress = await _run_session(harvest, first.session_id)
    assert [(p.session_id, p.outcome) for p in progress if not p.done] == [(first.session_id, "harvested")]
    assert progress[-1].done and progress[-1].harvested == 1 and progress[-1].total == 1
    assert ids(await harvest.clients.find(ws, "quokka", mode="lexical"))  # positive control: the named one is in
    assert ids(await harvest.clients.find(ws, "axolotl", mode="lexical")) == []  # the other still waits

    # By the path of its file, as Claude Code's SessionEnd hook reports it.
    by_path = await _run_session(harvest, str(second.path), agent="claude-code")
    assert [(p.session_id, p.outcome) for p in by_path if not p.done] == [(second.session_id, "harvested")]
    assert ids(await harvest.clients.find(ws, "axolotl", mode="lexical"))
    # Asked again, nothing new: the same memory, unchanged.
    again = await _run_session(harvest, first.session_id)
    assert [p.outcome for p in again if not p.done] == ["unchanged"]


async def test_a_session_no_agent_has_is_not_found_and_writes_nothing(harvest: Harvest) -> None:
    await register(harvest, "/work/epsilon")
    known = conversation(harvest.projects, "/work/epsilon", "pangolin").write(age_s=0)
    before = await table_counts(harvest.stack.dsn)
    for missing in ("no-such-session", str(harvest.projects / "nowhere.jsonl")):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await _run_session(harvest, missing)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert reason_name(reason_of(caught.value)) == "SESSION_NOT_FOUND"
        assert str(harvest.projects) in (caught.value.details() or "")  # it says where it looked
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _run_session(harvest, "./relative.jsonl")
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert await table_counts(harvest.stack.dsn) == before
    # Positive control: the session that exists is harvested by the same call.
    assert [p.outcome for p in await _run_session(harvest, known.session_id) if not p.done] == ["harvested"]
