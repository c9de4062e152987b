-- Import batches: what one `mnemo import --from TOOL` run brought in, so a reviewer can accept the
-- whole batch (its candidates become active) or roll it back (its memories are erased) in one step.
-- The batch is a column with an index, not a metadata key: accept and rollback find a batch's
-- memories by it, and only the services set it (metadata is the writer's to fill).

CREATE TABLE import_batches (
    id            uuid PRIMARY KEY,
    workspace_id  text NOT NULL REFERENCES workspaces (id),
    -- The tool the memories came from (mcp-memory-service, basic-memory, claude-mem) and what was read.
    source        text NOT NULL,
    origin        text NOT NULL DEFAULT '',
    -- A staged batch's memories start as candidates, waiting for accept or rollback.
    staged        boolean NOT NULL,
    state         text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'accepted', 'rolled_back')),
    created_by    text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    decided_by    text,
    decided_at    timestamptz
);

CREATE INDEX import_batches_workspace ON import_batches (workspace_id, created_at DESC);

ALTER TABLE memories ADD COLUMN import_batch uuid REFERENCES import_batches (id);
CREATE INDEX memories_import_batch ON memories (import_batch) WHERE import_batch IS NOT NULL;
