-- Inverse document frequency counted in memories, not chunks (docs/lexical-bm25.md, "Document
-- frequency in memories"). BM25's document is what a user wrote: a long note is cut into chunks,
-- each carrying the note's title, so counted per chunk a word of one long note's title, or one a
-- harvested transcript repeats throughout, looked as common as a word of that many notes. A
-- chunk is still the unit scored (its tf and length) and the postings are still per chunk; a
-- term now also says in how many memories it is (`mdf`), a workspace how many memories its
-- postings hold (`memories`), and the idf is computed from those. `df`, the term's postings,
-- stays what the lexical leg plans its candidates from (how many postings it reads).
--
-- A memory's posted chunks are normally all of one version and enter and leave together; the
-- poster still counts a memory once when its chunks are posted in two passes, or one version's
-- chunks enter before the last one's leave (a new version): a memory counts for a word while any
-- of its posted chunks holds it.
SELECT lexical_lock(true);

ALTER TABLE lexical_posted ADD COLUMN memory_id uuid;
UPDATE lexical_posted p SET memory_id = c.memory_id FROM chunks c WHERE c.id = p.chunk_id;
ALTER TABLE lexical_posted ALTER COLUMN memory_id SET NOT NULL;
-- The poster's sibling lookups: whether a memory has other chunks posted, and which.
CREATE INDEX lexical_posted_memory ON lexical_posted (memory_id);

ALTER TABLE lexical_terms ADD COLUMN mdf integer NOT NULL DEFAULT 0 CHECK (mdf >= 0);
UPDATE lexical_terms t SET mdf = x.n
FROM (
    SELECT p.term_id, count(DISTINCT s.memory_id) AS n
    FROM lexical_postings p JOIN lexical_posted s USING (chunk_id) GROUP BY 1
) AS x
WHERE x.term_id = t.id;

ALTER TABLE lexical_sizes ADD COLUMN memories integer NOT NULL DEFAULT 0 CHECK (memories >= 0);
UPDATE lexical_sizes z SET memories = x.n
FROM (SELECT workspace_id, count(DISTINCT memory_id) AS n FROM lexical_posted GROUP BY 1) AS x
WHERE x.workspace_id = z.workspace_id;

-- Takes chunks out of the statistics (0008, where the rest is said). A memory leaves a word's
-- count when none of its chunks still posted holds the word, and the workspace's count when none
-- is still posted.
CREATE OR REPLACE FUNCTION lexical_leave(ids bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    emptied integer[];
    staying uuid[];
BEGIN
    -- The memories of these chunks that keep others posted: rare (see above), so their words
    -- are read only for them.
    SELECT coalesce(array_agg(DISTINCT s.memory_id), '{}') INTO staying
    FROM lexical_posted s
    WHERE s.memory_id IN (SELECT memory_id FROM lexical_posted WHERE chunk_id = ANY(ids))
      AND NOT s.chunk_id = ANY(ids);
    WITH gone AS (
        DELETE FROM lexical_posted WHERE chunk_id = ANY(ids) RETURNING chunk_id, workspace_id, memory_id, len
    ),
    sized AS (
        UPDATE lexical_sizes s
        SET chunks = s.chunks - g.n, length = s.length - g.total, memories = s.memories - g.memories
        FROM (
            SELECT workspace_id, count(*) AS n, sum(len) AS total,
                   count(DISTINCT memory_id) FILTER (WHERE NOT memory_id = ANY(staying)) AS memories
            FROM gone GROUP BY 1
        ) AS g
        WHERE s.workspace_id = g.workspace_id
    ),
    unposted AS (
        DELETE FROM lexical_postings WHERE chunk_id IN (SELECT chunk_id FROM gone) RETURNING term_id, chunk_id
    ),
    -- The terms the staying memories' other chunks hold (this statement still sees the rows it deletes).
    held AS (
        SELECT DISTINCT s.memory_id, p.term_id
        FROM lexical_posted s JOIN lexical_postings p ON p.chunk_id = s.chunk_id
        WHERE s.memory_id = ANY(staying) AND NOT s.chunk_id = ANY(ids)
    ),
    counted AS (
        UPDATE lexical_terms t SET df = t.df - u.n, mdf = t.mdf - u.m
        FROM (
            SELECT u.term_id, count(*) AS n, count(DISTINCT g.memory_id) FILTER (WHERE h.memory_id IS NULL) AS m
            FROM unposted u JOIN gone g USING (chunk_id)
            LEFT JOIN held h ON h.memory_id = g.memory_id AND h.term_id = u.term_id
            GROUP BY 1
        ) AS u
        WHERE t.id = u.term_id
        RETURNING t.id, t.df
    )
    SELECT array_agg(id) INTO emptied FROM counted WHERE df = 0;
    DELETE FROM lexical_terms WHERE id = ANY(emptied);
END
$$;

-- The poster (0019, where the rest is said), counting memories beside chunks.
CREATE OR REPLACE FUNCTION lexical_post(batch integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    taken bigint[];
    ids bigint[];
    known uuid[];
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
    -- The memories of the entering chunks that already have chunks posted: rare, so their words
    -- are read only for them.
    SELECT coalesce(array_agg(DISTINCT s.memory_id), '{}') INTO known
    FROM lexical_posted s
    WHERE s.memory_id IN (SELECT memory_id FROM chunks WHERE id = ANY(ids) AND indexed);
    WITH counts AS (
        SELECT c.id AS chunk_id, c.memory_id, c.workspace_id, m.kind, l.lexeme, l.tf, l.len
        FROM chunks c JOIN memories m ON m.id = c.memory_id, lexical_counts(c.tsv) l
        WHERE c.id = ANY(ids) AND c.indexed
    ),
    -- The words those memories' posted chunks hold (a memory's terms are all of its workspace and kind).
    held AS (
        SELECT DISTINCT s.memory_id, t.lexeme
        FROM lexical_posted s JOIN lexical_postings p ON p.chunk_id = s.chunk_id JOIN lexical_terms t ON t.id = p.term_id
        WHERE s.memory_id = ANY(known)
    ),
    marked AS (
        SELECT c.*, h.memory_id IS NULL AS fresh
        FROM counts c LEFT JOIN held h ON h.memory_id = c.memory_id AND h.lexeme = c.lexeme
    ),
    terms AS (
        INSERT INTO lexical_terms (workspace_id, lexeme, kind, df, mdf)
        SELECT workspace_id, lexeme, kind, count(*), count(DISTINCT memory_id) FILTER (WHERE fresh)
        FROM marked GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (workspace_id, lexeme, kind) DO UPDATE
        SET df = lexical_terms.df + excluded.df, mdf = lexical_terms.mdf + excluded.mdf
        RETURNING id, workspace_id, lexeme, kind
    ),
    posted AS (
        INSERT INTO lexical_postings (term_id, chunk_id, tf, len)
        SELECT t.id, c.chunk_id, c.tf, c.len FROM counts c JOIN terms t USING (workspace_id, lexeme, kind)
    ),
    chunks_in AS (
        INSERT INTO lexical_posted (chunk_id, workspace_id, memory_id, len)
        SELECT DISTINCT chunk_id, workspace_id, memory_id, len FROM counts
        RETURNING workspace_id, memory_id, len
    )
    INSERT INTO lexical_sizes (workspace_id, chunks, length, memories)
    SELECT workspace_id, count(*), sum(len), count(DISTINCT memory_id) FILTER (WHERE NOT memory_id = ANY(known))
    FROM chunks_in GROUP BY 1 ORDER BY 1
    ON CONFLICT (workspace_id) DO UPDATE
    SET chunks = lexical_sizes.chunks + excluded.chunks, length = lexical_sizes.length + excluded.length,
        memories = lexical_sizes.memories + excluded.memories;

    DELETE FROM lexical_queue WHERE seq = ANY(taken);
    RETURN cardinality(taken);
END
$$;
