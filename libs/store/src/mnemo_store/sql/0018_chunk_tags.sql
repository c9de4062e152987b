-- A tag filter's chunks and vectors, found by their own indexes. Both search legs read a small
-- tag's notes first (engine.lexical_query, engine.semantic_query); they found them through
-- `memories_tags` and then each memory's chunks or vectors by key: at 1,000,000 notes a tag on
-- 1 % of them cost each leg about 65 ms before a word was scored or a distance computed (10,000
-- memory rows, then 10,000 lookups of four pages each). The memory's tags are copied onto its
-- chunks and their vectors, as workspace_id is, and a GIN index on each, partial on `indexed`
-- like the search indexes, hands a leg the tag's chunks or vectors directly.
--
-- The copy is the memory's current tags, on every version's chunks: a tag filter reads the
-- current tags even as of an earlier time (mnemo_store.predicates). Writers keep it: a chunk takes
-- them when inserted, and reindexing (memories._REINDEX) copies them when they change, with the
-- vectors following as their `indexed` flag does (embed_queue.SYNC_VECTOR_COPIES). The legs read
-- it only to find candidates; the scope, with the memory's own tags, still decides what returns.
ALTER TABLE chunks ADD COLUMN tags text[] NOT NULL DEFAULT '{}';
ALTER TABLE chunk_vectors ADD COLUMN tags text[] NOT NULL DEFAULT '{}';

-- Existing rows: each rewritten once. Rewriting a vector's row with the HNSW index in place
-- inserts it into the graph again, one at a time: at 1,000,000 vectors the index grew about 15 MB
-- a minute, over two hours in all. So the index goes first, and the ingest service's next start
-- builds it again in one go (embedding_space.ensure_embedding_space, as after 0007; about six
-- minutes at 1M, seconds at a few thousand). Until then a semantic search reads the vectors
-- without it: right, and slower.
DROP INDEX IF EXISTS chunk_vectors_embedding;
UPDATE chunks c SET tags = m.tags FROM memories m WHERE m.id = c.memory_id AND m.tags <> '{}';
UPDATE chunk_vectors v SET tags = c.tags FROM chunks c WHERE c.id = v.chunk_id AND c.tags <> '{}';

CREATE INDEX chunks_tags ON chunks USING gin (tags) WHERE indexed;
CREATE INDEX chunk_vectors_tags ON chunk_vectors USING gin (tags) WHERE indexed;
