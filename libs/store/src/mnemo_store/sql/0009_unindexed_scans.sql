-- History and as-of reads find the chunks in the search indexes through the postings and the HNSW
-- index like any read, and scan only the chunks those leave out (older versions, hidden statuses).
-- These partial indexes keep that scan to what is left out instead of a whole workspace's chunks.
CREATE INDEX chunks_unindexed ON chunks (workspace_id) WHERE NOT indexed;
CREATE INDEX chunk_vectors_unindexed ON chunk_vectors (workspace_id) WHERE NOT indexed;
