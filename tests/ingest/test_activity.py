"""Background work gives way to writes: WriteActivity.pause waits for a pause in the writes, and
not longer than its patience."""

from __future__ import annotations

import asyncio

from mnemo_ingest.activity import WriteActivity
from tests.helpers import eventually


async def test_pause_waits_while_a_write_is_in_flight_and_returns_after_it() -> None:
    activity = WriteActivity()
    # Nothing written yet: no wait.
    assert await activity.pause(settle=0.01, patience=60)
    with activity.writing():
        waiting = asyncio.create_task(activity.pause(settle=0.01, patience=60))
        await asyncio.sleep(0.1)
        assert not waiting.done()  # the write is still in flight
    # Positive control: once it ends (and the settle time passes), the pause is found.

    async def done() -> bool:
        return waiting.done()

    await eventually(done, timeout=30)
    assert waiting.result() is True


async def test_a_steady_stream_of_writes_delays_background_work_but_never_stops_it() -> None:
    activity = WriteActivity()
    stop = asyncio.Event()

    async def writer() -> None:
        while not stop.is_set():
            with activity.writing():
                await asyncio.sleep(0.01)

    stream = asyncio.create_task(writer())
    try:
        # Writes never pause for 0.5 s, yet the wait ends, and says it ran out of patience.
        assert await asyncio.wait_for(activity.pause(settle=0.5, patience=0.2), timeout=30) is False
    finally:
        stop.set()
        await stream
    assert await asyncio.wait_for(activity.pause(settle=0.01, patience=60), timeout=30) is True


async def test_a_batch_of_writes_holds_the_lexical_poster_back_but_not_the_model() -> None:
    activity = WriteActivity()
    with activity.writing(batch=True):
        # The model (batches=False) runs beside an import ...
        assert await asyncio.wait_for(activity.pause(settle=0.01, patience=60, batches=False), timeout=30) is True
        # ... the rest of background work waits for it (control: the same call counting batches).
        poster = asyncio.create_task(activity.pause(settle=0.01, patience=60))
        with activity.writing():
            # A single write holds the model back too.
            model = asyncio.create_task(activity.pause(settle=0.01, patience=60, batches=False))
            await asyncio.sleep(0.1)
            assert not model.done() and not poster.done()

        async def model_done() -> bool:
            return model.done()

        await eventually(model_done, timeout=30)
        assert model.result() is True
        assert not poster.done()  # the batch is still in flight

    async def poster_done() -> bool:
        return poster.done()

    await eventually(poster_done, timeout=30)
    assert poster.result() is True
