-- What the lexical leg's BM25 needs (docs/lexical-bm25.md): per workspace, each lexeme's document
-- frequency over the indexed chunks, their count and total length; per indexed chunk, each
-- distinct lexeme's term frequency and the chunk's length. "Indexed" is the flag the HNSW index
-- is partial on (a chunk a default read may return), so a superseded, retracted or deleted
-- memory leaves the statistics as it leaves the index.
--
-- A write only queues: triggers on `chunks` add a row to `lexical_queue` for every chunk that is
-- inserted indexed or changes its flag. (Deleting a chunk is erasing it, a purge: its words
-- leave the statistics in the deleting transaction, so none of them outlives the purge.)
-- Keeping the statistics in the writing transaction cut the batch write rate by a third
-- (docs/lexical-bm25.md, "Upkeep"); instead the ingest
-- service's poster (lexical_post, below) brings them in line when writes pause, and the lexical
-- leg scores queued chunks from their tsvector, so a note is found lexically the moment its
-- write returns, and a chunk that left the indexes is filtered out by the leg's predicate before
-- its postings are gone.

CREATE TABLE lexical_terms (
    id            integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace_id  text NOT NULL,
    lexeme        text NOT NULL,
    df            integer NOT NULL CHECK (df >= 0),
    UNIQUE (workspace_id, lexeme)
);

-- Read index-only: the key finds a lexeme's postings (or probes one chunk's), tf and len come along.
CREATE TABLE lexical_postings (
    term_id   integer NOT NULL,
    chunk_id  bigint NOT NULL,
    tf        smallint NOT NULL,
    len       smallint NOT NULL,
    PRIMARY KEY (term_id, chunk_id) INCLUDE (tf, len)
);
-- Only the poster reads it: a chunk leaving the statistics takes its postings along.
CREATE INDEX lexical_postings_chunk ON lexical_postings (chunk_id);

CREATE TABLE lexical_sizes (
    workspace_id  text PRIMARY KEY,
    chunks        integer NOT NULL CHECK (chunks >= 0),
    length        bigint NOT NULL CHECK (length >= 0)
);

-- The chunks counted in the statistics, with what they added, so a chunk can leave them after its
-- row is gone (a purge).
CREATE TABLE lexical_posted (
    chunk_id      bigint PRIMARY KEY,
    workspace_id  text NOT NULL,
    len           smallint NOT NULL
);

-- Chunks whose place in the statistics may be out of date. A row per change, never updated: the
-- poster deletes exactly the rows it read, so a change queued while it runs stays for its next pass.
CREATE TABLE lexical_queue (
    seq       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chunk_id  bigint NOT NULL
);
CREATE INDEX lexical_queue_chunk ON lexical_queue (chunk_id);

-- A chunk's lexemes with their term frequency and the chunk's length (the sum of them), capped to
-- what smallint holds. A position counts once, twice in the title and context (weight A, see
-- chunks.tsv): a word that names the note weighs more than one it mentions, measured on LoCoMo
-- (the speaker) and SciFact (the paper's title), docs/lexical-bm25.md. A lexeme without
-- positions counts once.
CREATE FUNCTION lexical_counts(tsv tsvector)
RETURNS TABLE (lexeme text, tf smallint, len smallint)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    WITH u AS (
        SELECT u.lexeme, coalesce((SELECT sum(CASE w WHEN 'A' THEN 2 ELSE 1 END) FROM unnest(u.weights) w), 1) AS tf
        FROM unnest(tsv) u
    )
    SELECT u.lexeme, least(u.tf, 32767)::smallint, least(sum(u.tf) OVER (), 32767)::smallint FROM u
$$;

CREATE FUNCTION lexical_chunks_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lexical_queue (chunk_id) SELECT id FROM new_rows WHERE indexed;
    RETURN NULL;
END
$$;

-- A chunk row is written once; only its `indexed` flag changes afterwards (0007).
CREATE FUNCTION lexical_chunks_updated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lexical_queue (chunk_id)
    SELECT n.id FROM new_rows n JOIN old_rows o ON o.id = n.id WHERE n.indexed <> o.indexed;
    RETURN NULL;
END
$$;

-- Takes chunks out of the statistics (those in them; any others are ignored). A lexeme whose
-- last chunk left is forgotten: the statistics hold no word that no indexed chunk holds.
-- Callers hold the poster's lock (lexical_lock).
CREATE FUNCTION lexical_leave(ids bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    emptied integer[];
BEGIN
    WITH gone AS (
        DELETE FROM lexical_posted WHERE chunk_id = ANY(ids) RETURNING chunk_id, workspace_id, len
    ),
    sized AS (
        UPDATE lexical_sizes s SET chunks = s.chunks - g.n, length = s.length - g.total
        FROM (SELECT workspace_id, count(*) AS n, sum(len) AS total FROM gone GROUP BY 1) AS g
        WHERE s.workspace_id = g.workspace_id
    ),
    unposted AS (
        DELETE FROM lexical_postings WHERE chunk_id IN (SELECT chunk_id FROM gone) RETURNING term_id
    ),
    counted AS (
        UPDATE lexical_terms t SET df = t.df - u.n
        FROM (SELECT term_id, count(*) AS n FROM unposted GROUP BY 1) AS u
        WHERE t.id = u.term_id
        RETURNING t.id, t.df
    )
    SELECT array_agg(id) INTO emptied FROM counted WHERE df = 0;
    DELETE FROM lexical_terms WHERE id = ANY(emptied);
END
$$;

-- One transaction at a time changes the statistics: the poster, or a purge.
CREATE FUNCTION lexical_lock(wait boolean) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF wait THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('mnemo.lexical', 0));
        RETURN true;
    END IF;
    RETURN pg_try_advisory_xact_lock(hashtextextended('mnemo.lexical', 0));
END
$$;

-- A purge waits for a poster's pass (a short transaction that waits for nobody, so this cannot
-- deadlock), then takes the chunks' words out.
CREATE FUNCTION lexical_chunks_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lexical_lock(true);
    PERFORM lexical_leave(array_agg(id)) FROM old_rows;
    RETURN NULL;
END
$$;

CREATE TRIGGER chunks_lexical_insert AFTER INSERT ON chunks
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION lexical_chunks_inserted();
CREATE TRIGGER chunks_lexical_update AFTER UPDATE ON chunks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION lexical_chunks_updated();
CREATE TRIGGER chunks_lexical_delete AFTER DELETE ON chunks
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION lexical_chunks_deleted();

-- Brings the statistics in line for the oldest `batch` queue rows; returns how many rows it took
-- (0: nothing queued, or another poster is at work). Each queued chunk leaves the statistics if it
-- is in them and enters them again if it is indexed now: the same answer however many times a
-- chunk was queued. One poster at a time (lexical_lock), so no two change a term's df at
-- once; writers never touch these tables beyond the queue, so a poster never waits for a write.
-- Each statement reads the chunks as committed when it starts: a change committed later is in
-- the queue under a row this pass did not read.
CREATE FUNCTION lexical_post(batch integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    taken bigint[];
    ids bigint[];
BEGIN
    IF NOT lexical_lock(false) THEN
        RETURN 0;
    END IF;
    SELECT array_agg(seq), array_agg(DISTINCT chunk_id) INTO taken, ids
    FROM (SELECT seq, chunk_id FROM lexical_queue ORDER BY seq LIMIT batch) AS q;
    IF taken IS NULL THEN
        RETURN 0;
    END IF;

    PERFORM lexical_leave(ids);
    WITH counts AS (
        SELECT c.id AS chunk_id, c.workspace_id, l.lexeme, l.tf, l.len
        FROM chunks c, lexical_counts(c.tsv) l
        WHERE c.id = ANY(ids) AND c.indexed
    ),
    terms AS (
        INSERT INTO lexical_terms (workspace_id, lexeme, df)
        SELECT workspace_id, lexeme, count(*) FROM counts GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (workspace_id, lexeme) DO UPDATE SET df = lexical_terms.df + excluded.df
        RETURNING id, workspace_id, lexeme
    ),
    posted AS (
        INSERT INTO lexical_postings (term_id, chunk_id, tf, len)
        SELECT t.id, c.chunk_id, c.tf, c.len FROM counts c JOIN terms t USING (workspace_id, lexeme)
    ),
    chunks_in AS (
        INSERT INTO lexical_posted (chunk_id, workspace_id, len)
        SELECT DISTINCT chunk_id, workspace_id, len FROM counts
        RETURNING workspace_id, len
    )
    INSERT INTO lexical_sizes (workspace_id, chunks, length)
    SELECT workspace_id, count(*), sum(len) FROM chunks_in GROUP BY 1 ORDER BY 1
    ON CONFLICT (workspace_id) DO UPDATE
    SET chunks = lexical_sizes.chunks + excluded.chunks, length = lexical_sizes.length + excluded.length;

    DELETE FROM lexical_queue WHERE seq = ANY(taken);
    RETURN cardinality(taken);
END
$$;

-- Nothing reads the full-text GIN index any more: a default read's lexical leg reads the postings
-- (and the few queued chunks by the queue), history and as-of reads scan the versions they read
-- (they never could use an index partial on `indexed`), and keeping it up cost every write.
DROP INDEX chunks_tsv;

-- What is indexed already waits for the first poster.
INSERT INTO lexical_queue (chunk_id) SELECT id FROM chunks WHERE indexed ORDER BY id;
