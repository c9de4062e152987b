-- A tag's chunks as rows of their own, read index-only. The lexical leg reads a small tag's chunks
-- first (engine.lexical_query) and took them from the chunks' copy of their memory's tags (0018):
-- its GIN index hands back row addresses, and each id then cost a read of its chunk's wide row, on
-- about as many pages as the tag has chunks. Here an indexed chunk's tags are a row each, keyed by
-- tag, workspace and chunk: the ids of one tag's chunks come from the key alone (at 100,000 notes,
-- 13,144 chunks of one tag in 9 -> 1 ms; at 1,000,000 notes a 1 % tag's lexical search through the
-- gateway, p50 45.5 -> 34.0 ms). A filter on several tags still reads the GIN index, which
-- intersects them.
--
-- The rows mirror the GIN index's: a chunk's tags while it is indexed. The database keeps them from
-- the chunks' own rows, as it keeps the lexical queue (0008), whoever writes those: a chunk inserted
-- indexed, a statement changing a chunk's flag or tags (memories._REINDEX), a purge.
CREATE TABLE chunk_tags (
    tag           text NOT NULL,
    workspace_id  text NOT NULL,
    chunk_id      bigint NOT NULL,
    PRIMARY KEY (tag, workspace_id, chunk_id)
);
-- For a chunk's rows to leave with its flag, its tags or itself.
CREATE INDEX chunk_tags_chunk ON chunk_tags (chunk_id);

INSERT INTO chunk_tags (tag, workspace_id, chunk_id)
SELECT DISTINCT t, c.workspace_id, c.id FROM chunks c, unnest(c.tags) t WHERE c.indexed;
-- Statistics now, not when autovacuum gets to it: the lexical leg plans each statement once per
-- connection (engine.LEXICAL_SESSION), and a plan made on a table without them stays with it.
-- Measured on a 100,000-note database migrated as a stack started: a tag's lexical search took 29 ms
-- on the connections that planned it before autovacuum had analysed the table, 12 ms after.
ANALYZE chunk_tags;

CREATE FUNCTION chunk_tags_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chunk_tags (tag, workspace_id, chunk_id)
    SELECT DISTINCT t, n.workspace_id, n.id FROM new_rows n, unnest(n.tags) t WHERE n.indexed;
    RETURN NULL;
END
$$;

-- A chunk whose flag, tags or workspace changed: its rows go, and come again as it is now.
CREATE FUNCTION chunk_tags_updated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM chunk_tags k USING new_rows n JOIN old_rows o ON o.id = n.id
    WHERE k.chunk_id = n.id AND (n.indexed, n.tags, n.workspace_id) IS DISTINCT FROM (o.indexed, o.tags, o.workspace_id);
    INSERT INTO chunk_tags (tag, workspace_id, chunk_id)
    SELECT DISTINCT t, n.workspace_id, n.id FROM new_rows n JOIN old_rows o ON o.id = n.id, unnest(n.tags) t
    WHERE n.indexed AND (n.indexed, n.tags, n.workspace_id) IS DISTINCT FROM (o.indexed, o.tags, o.workspace_id);
    RETURN NULL;
END
$$;

CREATE FUNCTION chunk_tags_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM chunk_tags k USING old_rows o WHERE k.chunk_id = o.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER chunks_tag_rows_insert AFTER INSERT ON chunks
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION chunk_tags_inserted();
CREATE TRIGGER chunks_tag_rows_update AFTER UPDATE ON chunks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION chunk_tags_updated();
CREATE TRIGGER chunks_tag_rows_delete AFTER DELETE ON chunks
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION chunk_tags_deleted();
