-- The embedding queue and the vectors leave the chunk row, and the search indexes keep only what
-- a default read may return (docs/architecture.md, "The embedding queue and the search indexes").
--
-- Before: a chunk carried its queue state (embed_status, embed_after, …) and its vector, so every
-- claim, retry and stored vector was an UPDATE of the wide row, which (indexed columns changing)
-- wrote new entries into every index of chunks, the full-text GIN index included. After: a chunk
-- row is written once, at insert; `embed_queue` is the narrow table the workers lease from, and
-- `chunk_vectors` holds one vector per embedded chunk. `indexed` (on chunks and on chunk_vectors)
-- is true exactly for chunks of a memory's current version whose memory is visible (candidate,
-- active, confirmed) and not deleted; the GIN and HNSW indexes are partial on it.

-- A chunk waiting for its vector: queued by the statement that inserts the chunk, deleted by the
-- transaction that stores the vector. `failed` ends the retries (the error stays for status).
CREATE TABLE embed_queue (
    chunk_id     bigint PRIMARY KEY REFERENCES chunks (id) ON DELETE CASCADE,
    embed_after  timestamptz NOT NULL DEFAULT now(),
    attempts     integer NOT NULL DEFAULT 0,
    error        text,
    failed       boolean NOT NULL DEFAULT false,
    queued_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX embed_queue_due ON embed_queue (embed_after, chunk_id) WHERE NOT failed;

INSERT INTO embed_queue (chunk_id, embed_after, attempts, error, failed, queued_at)
SELECT id, embed_after, embed_attempts, embed_error, embed_status = 'failed', created_at
FROM chunks WHERE embed_status <> 'embedded';

-- Set by the statement that inserts the chunk and changed only when the memory's version, status
-- or deletion changes; no default, so no insert can leave it to chance.
ALTER TABLE chunks ADD COLUMN indexed boolean NOT NULL DEFAULT false;
UPDATE chunks c SET indexed = true
FROM memories m
WHERE m.id = c.memory_id AND c.version = m.version AND m.deleted_at IS NULL
  AND m.status IN ('candidate', 'active', 'confirmed');
ALTER TABLE chunks ALTER COLUMN indexed DROP DEFAULT;

-- One vector per embedded chunk. The scope columns are the chunk's, denormalised so the semantic
-- leg filters here (workspace, version) without reading the wide chunk row. The dimension is
-- the configured model's: ensure_embedding_space() types the column when it records the space,
-- and creates the HNSW index (partial, WHERE indexed).
CREATE TABLE chunk_vectors (
    chunk_id      bigint PRIMARY KEY REFERENCES chunks (id) ON DELETE CASCADE,
    memory_id     uuid NOT NULL,
    version       integer NOT NULL,
    workspace_id  text NOT NULL,
    indexed       boolean NOT NULL,
    model         text NOT NULL,
    embedded_at   timestamptz NOT NULL DEFAULT now(),
    embedding     vector NOT NULL
);
CREATE INDEX chunk_vectors_memory ON chunk_vectors (memory_id);

-- A database whose space is recorded has vectors in chunks.embedding: they move over as they are.
DO $$
DECLARE
    dim integer := (SELECT dimension FROM embedding_space);
BEGIN
    IF dim IS NULL THEN
        RETURN;
    END IF;
    EXECUTE format('ALTER TABLE chunk_vectors ALTER COLUMN embedding TYPE vector(%s)', dim);
    EXECUTE $copy$
        INSERT INTO chunk_vectors (chunk_id, memory_id, version, workspace_id, indexed, model, embedded_at, embedding)
        SELECT c.id, c.memory_id, c.version, c.workspace_id, c.indexed,
               coalesce(c.embed_model, s.model), coalesce(c.embedded_at, c.created_at), c.embedding
        FROM chunks c, embedding_space s
        WHERE c.embedding IS NOT NULL
    $copy$;
    DROP INDEX IF EXISTS chunks_embedding;
    ALTER TABLE chunks DROP COLUMN embedding;
END
$$;

DROP INDEX chunks_pending;
ALTER TABLE chunks
    DROP COLUMN embed_status,
    DROP COLUMN embed_model,
    DROP COLUMN embed_attempts,
    DROP COLUMN embed_error,
    DROP COLUMN embed_after,
    DROP COLUMN embedded_at;

DROP INDEX chunks_tsv;
CREATE INDEX chunks_tsv ON chunks USING gin (tsv) WHERE indexed;
