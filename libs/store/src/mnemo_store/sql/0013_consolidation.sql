-- Consolidation of near-duplicates (docs/consolidation.md): the job compares only what changed
-- since its last pass in a workspace. "Changed" is read from the vectors: a memory whose current
-- version got a vector after the mark (a new memory, a new version, or one embedded late) is
-- compared against its nearest neighbours; everything else was compared before.

CREATE TABLE consolidation_marks (
    workspace_id  text PRIMARY KEY REFERENCES workspaces (id),
    -- Vectors embedded after this were not yet compared. It trails the pass's start by a margin,
    -- so a vector whose transaction committed late is compared again rather than never.
    scanned_to    timestamptz NOT NULL,
    last_run_at   timestamptz NOT NULL DEFAULT now(),
    -- What the last pass did: memories compared, pairs over both thresholds, proposals opened.
    compared      integer NOT NULL DEFAULT 0,
    pairs         integer NOT NULL DEFAULT 0,
    proposed      integer NOT NULL DEFAULT 0
);

-- Finds a workspace's vectors embedded since the mark without reading every vector.
CREATE INDEX chunk_vectors_embedded ON chunk_vectors (workspace_id, embedded_at) WHERE indexed;
