-- Feedback: votes on memories (useful, not-useful, outdated, harmful) and the per-memory factor they
-- make, which search multiplies into the trust factor (docs/feedback.md). One row per memory and
-- principal: a principal's later vote replaces its earlier one, so repeating a vote counts once.
-- The factor is recomputed from the rows in the transaction that changes them (mnemo_store.feedback).

CREATE TABLE feedback (
    -- Purging a memory erases its votes (their notes may quote it) with it.
    memory_id     uuid NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    principal     text NOT NULL,
    -- The workspace the vote was cast from: the memory's own, or the voter's for a memory in global
    -- (so a vote on a shared memory is audited in the voter's chain, never in global's).
    workspace_id  text NOT NULL REFERENCES workspaces (id),
    vote          text NOT NULL CHECK (vote IN ('useful', 'not-useful', 'outdated', 'harmful')),
    note          text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (memory_id, principal)
);

CREATE INDEX feedback_workspace ON feedback (workspace_id, updated_at DESC);

-- 1 with no votes; always within [0.5, 1.25] (the CHECK holds the bound whatever computes it).
ALTER TABLE memories ADD COLUMN feedback_factor real NOT NULL DEFAULT 1.0
    CHECK (feedback_factor BETWEEN 0.5 AND 1.25);
