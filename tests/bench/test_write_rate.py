"""The write-rate benchmark's arithmetic on when each note was embedded, and its CPU ledger (bench/write_rate.py)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs

import asyncpg
import psutil
import pytest

from bench.write_rate import CpuLedger, cpu_account, embed_rate, steady_rate
from mnemo_embed.local import BATCH_NICE
from mnemo_store.embedded import server_processes
from tests.helpers import Postgres


def test_steady_rate_leaves_out_the_first_and_last_tenths() -> None:
    # 10 notes a second for 10 s, after 2 s of one note and before a last one 5 s late.
    times = [0.5, 1.5] + [2 + i / 10 for i in range(100)] + [17.0]
    # The middle 80 % of 103 notes lie within the 10-a-second stretch.
    assert steady_rate(times) == pytest.approx(10.0, rel=0.02)
    # Control: over every note, the slow start and the late one pull the rate down.
    assert steady_rate(times, middle=1.0) == pytest.approx(102 / 16.5)


def test_embed_rate_counts_the_notes_of_each_window() -> None:
    times = [0.1, 0.2, 1.1, 1.2, 1.3, 1.4, 3.9]
    rates = dict(embed_rate(times, window=1.0, step=1.0))
    assert rates == {1.0: 2.0, 2.0: 4.0, 3.0: 0.0, 4.0: 1.0}
    assert steady_rate([]) is None and embed_rate([]) == []


def test_cpu_account_holds_the_drain_to_the_work_beside_the_model() -> None:
    spent = {
        "import": {"model": 0.0, "server": 4.0, "postgres": 2.0, "client": 0.5, "elsewhere": 0.2, "idle": 3.0},
        "drain": {"model": 310.0, "server": 4.0, "postgres": 15.5, "client": 0.5, "elsewhere": 1.8, "idle": 2.0},
    }
    account = cpu_account(spent, raw_model_core_s=300.0, raw_time=150.0, cores=2)
    assert account["core_s"]["total"]["postgres"] == 17.5
    assert account["work_beside_model_core_s"] == 26.5  # server, postgres and client; not elsewhere, not idle
    assert account["model_cpu_per_note_vs_raw"] == pytest.approx(310 / 300)
    # The raw model's 300 core-seconds and the 26.5 beside them, on 2 cores, against its 150 s.
    assert account["work_floor_vs_raw_time"] == pytest.approx(326.5 / 2 / 150)


BURNER = """
import os, sys, threading, time
def burn(nice):
    if nice:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    start = time.thread_time()
    while time.thread_time() - start < float(sys.argv[1]):
        pass
    burnt.release()
    time.sleep(3600)  # alive, as the model's threads are: a thread's own line goes when it ends
sys.stdin.readline()
burnt = threading.Semaphore(0)
for nice in (int(sys.argv[2]), 0):
    threading.Thread(target=burn, args=(nice,), daemon=True).start()
burnt.acquire()
burnt.acquire()
print("done", flush=True)
sys.stdin.readline()
"""


async def _scan_in_a_backend_that_ends(uri: str, pgdata: Path) -> tuple[int, float]:
    """A backend scans three million rows, its connection closes, and it is waited out; its pid
    and the CPU time it had used just before the close."""
    conn = await asyncpg.connect(uri)
    backend: int = await conn.fetchval("SELECT pg_backend_pid()")
    await conn.fetchval("SELECT count(*) FROM generate_series(1, 3000000)")
    times = psutil.Process(backend).cpu_times()
    used = times.user + times.system
    await conn.close()
    for _ in range(100):  # the backend exits after the client has closed
        if backend not in {p.pid for p in server_processes(pgdata)}:
            break
        await asyncio.sleep(0.05)
    return backend, used


def test_cpu_ledger_tells_the_model_threads_the_server_and_postgres_apart(postgres: Postgres) -> None:
    """A stand-in server burns 0.4 s of CPU on a thread at the model's priority and 0.4 s on
    another; a PostgreSQL backend scans, then its connection closes before the second reading (its
    time is then the postmaster's, for a finished child)."""
    pgdata = Path(parse_qs(postgres.uri.partition("?")[2])["host"][0])
    burner = subprocess.Popen(
        [sys.executable, "-c", BURNER, "0.4", str(BATCH_NICE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        ledger = CpuLedger(burner.pid, pgdata)
        started, before = time.monotonic(), ledger.read()
        assert burner.stdin is not None and burner.stdout is not None
        burner.stdin.write("go\n")
        burner.stdin.flush()
        backend, backend_s = asyncio.run(_scan_in_a_backend_that_ends(postgres.uri, pgdata))
        assert burner.stdout.readline() == "done\n"
        after, elapsed = ledger.read(), time.monotonic() - started
    finally:
        burner.kill()
        burner.wait()
    spent = CpuLedger.spent(before, after)
    assert 0.35 <= spent["model"] <= 0.6
    assert 0.35 <= spent["server"] <= 0.6  # the other thread alone: the model's is not counted twice
    assert backend_s > 0.1  # the scan did use the CPU
    assert backend not in {p.pid for p in server_processes(pgdata)}  # and the backend has ended
    assert spent["postgres"] >= backend_s - 0.02  # counted through the postmaster once it ended
    # Every core-second of the interval is in one part or another.
    cores = os.cpu_count() or 1
    assert sum(spent.values()) == pytest.approx(elapsed * cores, rel=0.15, abs=0.1)
