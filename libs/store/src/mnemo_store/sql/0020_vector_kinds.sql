-- A memory's kind, copied onto its vectors. Under a kind filter the semantic leg's HNSW scan
-- walks until enough vectors pass, and each vector it walked was checked against its memory's row:
-- a kind held by 18 % of the notes (decisions, at 100,000 notes) walked about 270 vectors for the
-- 40 it keeps, 270 lookups of the memory. With the kind on the vector the scan drops the other
-- kinds itself and looks up only the memories of vectors that pass (engine.semantic_query):
-- measured on the same database, the statement went from 6.4 to 5.6 ms, its execution 5.0 -> 3.5 ms,
-- the same 40 rows for each of 80 queries.
--
-- A memory's kind never changes (0019_lexical_kinds.sql), so the copy is set once, when the vector
-- is inserted, and nothing has to keep it. The database sets it, from the memory's row: the worker
-- names no kind, and neither does the worker of the version before this one, which still runs in
-- the pods a rolling upgrade has not replaced yet. The copy only finds candidates: the scope still
-- checks the memory's own kind.
ALTER TABLE chunk_vectors ADD COLUMN kind text;

-- Existing rows: each rewritten once, the HNSW index dropped first and built again in one go by the
-- ingest service's next start, as after 0018 (that file says why and how long).
DROP INDEX IF EXISTS chunk_vectors_embedding;
UPDATE chunk_vectors v SET kind = m.kind FROM memories m WHERE m.id = v.memory_id;
ALTER TABLE chunk_vectors ALTER COLUMN kind SET NOT NULL;

CREATE FUNCTION chunk_vector_kind() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.kind := (SELECT m.kind FROM memories m WHERE m.id = NEW.memory_id);
    RETURN NEW;
END
$$;

CREATE TRIGGER chunk_vectors_kind BEFORE INSERT ON chunk_vectors
    FOR EACH ROW EXECUTE FUNCTION chunk_vector_kind();
