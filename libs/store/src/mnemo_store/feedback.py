"""Typed SQL of feedback (`feedback`, `memories.feedback_factor`): one vote per memory and principal,
and the bounded factor the votes of distinct principals make (docs/feedback.md).

The formula lives here once, as Python (`feedback_factor`, for tests and docs) and as the SQL that
recomputes a memory's factor in the transaction that changes its votes (`recompute_factor`):

    factor = clamp(1 + sum over distinct principals of STEPS[their vote], FACTOR_MIN, FACTOR_MAX)

Each principal holds one row per memory, so it contributes one step however often it votes, and no
step is larger than MAX_STEP: one principal alone moves a memory's factor by at most MAX_STEP.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import asyncpg

VOTES = ("useful", "not-useful", "outdated", "harmful")
# What one principal's current vote adds to the factor.
STEP = 0.05
STEPS: dict[str, float] = {"useful": STEP, "not-useful": -STEP, "outdated": -2 * STEP, "harmful": -2 * STEP}
MAX_STEP = max(abs(step) for step in STEPS.values())
# The factor's bounds: votes can halve a memory's weight at most, and raise it by a quarter.
FACTOR_MIN, FACTOR_MAX = 0.5, 1.25
# Votes that ask a reviewer to take the memory out of the default reads (a proposal).
PROPOSING_VOTES = ("outdated", "harmful")


def feedback_factor(votes: Iterable[str]) -> float:
    """The factor for the current votes of distinct principals (one vote each)."""
    return min(FACTOR_MAX, max(FACTOR_MIN, 1.0 + sum(STEPS[vote] for vote in votes)))


def _step_sql(column: str) -> str:
    cases = " ".join(f"WHEN '{vote}' THEN {step!r}" for vote, step in STEPS.items())
    return f"CASE {column} {cases} ELSE 0 END"


async def current_vote(conn: asyncpg.Connection, memory_id: uuid.UUID, principal: str) -> asyncpg.Record | None:
    """The principal's current vote on the memory, if any."""
    return await conn.fetchrow("SELECT * FROM feedback WHERE memory_id = $1 AND principal = $2", memory_id, principal)


async def record_vote(
    conn: asyncpg.Connection, memory_id: uuid.UUID, principal: str, workspace_id: str, vote: str, note: str
) -> asyncpg.Record:
    """Stores the principal's vote on the memory, replacing its earlier one; the caller holds the
    memory's row lock (votes on one memory take turns)."""
    return await conn.fetchrow(
        """
        INSERT INTO feedback (memory_id, principal, workspace_id, vote, note)
        VALUES ($1, $2, $3, $4, $5)
        ON CONFLICT (memory_id, principal) DO UPDATE
            SET workspace_id = excluded.workspace_id, vote = excluded.vote, note = excluded.note, updated_at = now()
        RETURNING *
        """,
        memory_id,
        principal,
        workspace_id,
        vote,
        note,
    )


async def voters(conn: asyncpg.Connection, memory_id: uuid.UUID) -> int:
    return int(await conn.fetchval("SELECT count(*) FROM feedback WHERE memory_id = $1", memory_id))


async def recompute_factor(conn: asyncpg.Connection, memory_id: uuid.UUID) -> tuple[float, int]:
    """Sets the memory's feedback_factor from the votes it holds now; returns it and the number of
    distinct principals who voted."""
    row = await conn.fetchrow(
        f"""
        WITH votes AS (
            SELECT least({FACTOR_MAX!r}, greatest({FACTOR_MIN!r}, 1 + coalesce(sum({_step_sql("vote")}), 0))) AS factor,
                   count(*) AS voters
            FROM feedback WHERE memory_id = $1
        )
        UPDATE memories m SET feedback_factor = votes.factor FROM votes WHERE m.id = $1
        RETURNING m.feedback_factor, votes.voters
        """,
        memory_id,
    )
    return float(row["feedback_factor"]), int(row["voters"])
