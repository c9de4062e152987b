-- Proposals: a change that automation or an agent suggests and a reviewer decides (docs/review.md).
-- A proposal names the memories it touches and a fingerprint of their state when it was made, so
-- accepting one whose memories changed since is refused as stale; accepting applies the change
-- through the same write paths as a direct correction, and records in `applied` what it did, so a
-- reverse can undo exactly that (as new audited events: history is never rewritten).

CREATE TABLE proposals (
    id               uuid PRIMARY KEY,
    workspace_id     text NOT NULL REFERENCES workspaces (id),
    kind             text NOT NULL CHECK (kind IN
                         ('confirm', 'merge', 'supersede', 'retract', 'promote', 'restore', 'accept_batch')),
    -- The memories the change touches (for accept_batch: none; the batch is in `change`).
    memory_ids       uuid[] NOT NULL DEFAULT '{}',
    -- What accepting would do, per kind (docs/review.md lists the fields).
    change           jsonb NOT NULL DEFAULT '{}',
    -- Why it was proposed: the proposer's words, or the job's explanation (scores, thresholds).
    reason           text NOT NULL,
    -- Who proposed it: a principal's name, or `system:<job>` for automation.
    proposed_by      text NOT NULL,
    -- What proposed it.
    source           text NOT NULL CHECK (source IN
                         ('agent', 'human', 'harvest', 'screening', 'consolidation', 'feedback', 'import')),
    -- sha256 over the touched memories' (id, version, status, superseded_by, deleted_at) when proposed.
    fingerprint      text NOT NULL,
    state            text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'applied', 'rejected', 'reversed')),
    created_at       timestamptz NOT NULL DEFAULT now(),
    decided_by       text,
    decided_at       timestamptz,
    decision_reason  text,
    -- What accepting did (memories written, statuses before), so reverse can undo exactly that.
    applied          jsonb,
    reversed_by      text,
    reversed_at      timestamptz,
    reverse_reason   text,
    -- A proposer's key for "the same suggestion": a rerun of a job over unchanged data proposes
    -- nothing new, whatever became of the first proposal (open, applied, rejected or reversed).
    dedupe_key       text
);

CREATE INDEX proposals_queue ON proposals (workspace_id, created_at DESC) WHERE state = 'open';
CREATE INDEX proposals_recent ON proposals (workspace_id, created_at DESC);
CREATE INDEX proposals_memories ON proposals USING gin (memory_ids);
CREATE UNIQUE INDEX proposals_dedupe ON proposals (workspace_id, dedupe_key) WHERE dedupe_key IS NOT NULL;
