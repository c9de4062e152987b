"""The write-rate benchmark's arithmetic on when each note was embedded (bench/write_rate.py)."""

from __future__ import annotations

import pytest

from bench.write_rate import embed_rate, steady_rate


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
