-- GetStatus counts the visible memories of a reach (mnemo_store.reads.count_within). Without this
-- index that count read every row of memories: 48 ms at 100,000 notes, growing with them. The
-- index holds exactly the columns the count tests, so it is answered from the index alone (10.6
-- ms there, measured on the scale benchmark's database).
CREATE INDEX memories_visible ON memories (workspace_id, status) WHERE deleted_at IS NULL;
