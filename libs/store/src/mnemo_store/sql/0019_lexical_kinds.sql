-- A lexeme's postings, per kind of memory too. The lexical leg takes its candidates from the
-- postings of the query's rarest words; under a kind filter most of those may be other kinds' (a
-- claim's rare words are in imported abstracts, never in decisions), the leg then came back short
-- and widened to every posting of every word, checking the filter on the best chunks one by one:
-- at 1,000,000 notes one such query read 320,916 postings and checked 36,011 chunks before 120
-- decisions passed, 1.2 s. A term is now a lexeme in a workspace *and a kind*, so a kind filter
-- reads only its kind's postings and plans its candidates from that kind's document frequencies.
-- A memory's kind never changes, so neither does the term a chunk's words are posted under. The
-- inverse document frequency stays the workspace's, summed over the kinds: a filter narrows what a
-- search returns, never how it scores (engine._statistics).
--
-- The postings are rebuilt once under the poster's lock: each under its kind's term. Set-based,
-- in this transaction (at 28 million postings, 1M notes, about seven minutes; a few seconds at
-- a few thousand notes).
SELECT lexical_lock(true);

-- Each posting with its term's workspace and lexeme and its memory's kind, while the old tables stand.
CREATE TEMPORARY TABLE lexical_split ON COMMIT DROP AS
SELECT o.workspace_id, o.lexeme, m.kind, p.chunk_id, p.tf, p.len
FROM lexical_postings p
JOIN lexical_terms o ON o.id = p.term_id
JOIN chunks c ON c.id = p.chunk_id
JOIN memories m ON m.id = c.memory_id;
DROP TABLE lexical_postings, lexical_terms;

CREATE TABLE lexical_terms (
    id            integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace_id  text NOT NULL,
    lexeme        text NOT NULL,
    kind          text NOT NULL,
    df            integer NOT NULL CHECK (df >= 0),
    UNIQUE (workspace_id, lexeme, kind)
);

CREATE TABLE lexical_postings (
    term_id   integer NOT NULL,
    chunk_id  bigint NOT NULL,
    tf        smallint NOT NULL,
    len       smallint NOT NULL
);

INSERT INTO lexical_terms (workspace_id, lexeme, kind, df)
SELECT workspace_id, lexeme, kind, count(*) FROM lexical_split GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;

INSERT INTO lexical_postings (term_id, chunk_id, tf, len)
SELECT t.id, s.chunk_id, s.tf, s.len
FROM lexical_split s JOIN lexical_terms t USING (workspace_id, lexeme, kind)
ORDER BY t.id, s.chunk_id;

ALTER TABLE lexical_postings ADD PRIMARY KEY (term_id, chunk_id) INCLUDE (tf, len);
CREATE INDEX lexical_postings_chunk ON lexical_postings (chunk_id);

-- The poster, posting each chunk's words under its memory's kind (0008, where the rest is said).
CREATE OR REPLACE FUNCTION lexical_post(batch integer) RETURNS integer
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
        SELECT c.id AS chunk_id, c.workspace_id, m.kind, l.lexeme, l.tf, l.len
        FROM chunks c JOIN memories m ON m.id = c.memory_id, lexical_counts(c.tsv) l
        WHERE c.id = ANY(ids) AND c.indexed
    ),
    terms AS (
        INSERT INTO lexical_terms (workspace_id, lexeme, kind, df)
        SELECT workspace_id, lexeme, kind, count(*) FROM counts GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (workspace_id, lexeme, kind) DO UPDATE SET df = lexical_terms.df + excluded.df
        RETURNING id, workspace_id, lexeme, kind
    ),
    posted AS (
        INSERT INTO lexical_postings (term_id, chunk_id, tf, len)
        SELECT t.id, c.chunk_id, c.tf, c.len FROM counts c JOIN terms t USING (workspace_id, lexeme, kind)
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
