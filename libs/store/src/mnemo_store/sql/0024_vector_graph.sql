-- A vector enters the HNSW graph after it is stored, not as it is stored. Each insert into the
-- graph costs PostgreSQL about a millisecond of CPU alone (10,000 of these vectors: 9.4-9.8 s) and
-- more beside the model (12 core-s of a 10,000-note drain on two cores, where the whole drain's
-- work beside the model was 30): while a backlog is being embedded, that work took the model's
-- cores. The worker now stores a vector with `graphed` false; the ingest service's grapher
-- (mnemo_ingest.graphing) sets it once the model is idle, or sooner when too many wait
-- (MNEMO_VECTOR_GRAPH_BACKLOG), and setting it is what inserts the row into the graph. Meanwhile
-- the semantic leg and the consolidation job compare the ungraphed vectors exactly, found through
-- their own partial index (about 0.3 microseconds a vector: 2.7 ms for 10,000).
--
-- Existing rows are in the graph already, and any writer that names no value (the worker of the
-- version before this one, in the pods a rolling upgrade has not replaced yet) inserts into the
-- graph at once, as before: the default is true.
ALTER TABLE chunk_vectors ADD COLUMN graphed boolean NOT NULL DEFAULT true;

-- The graph's index becomes partial on `indexed AND graphed`: dropped here and built again in one
-- go by the ingest service's next start (embedding_space.ensure_embedding_space), as after 0018;
-- until then a semantic search reads the vectors without it.
DROP INDEX IF EXISTS chunk_vectors_embedding;
CREATE INDEX chunk_vectors_ungraphed ON chunk_vectors (workspace_id) WHERE indexed AND NOT graphed;
