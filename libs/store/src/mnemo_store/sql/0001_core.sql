-- Core schema: workspaces, memories with versions, chunks for search, and the audit log.
-- The embedding column is added by ensure_embedding_space(), because its dimension is the
-- configured model's and must be recorded and checked, not assumed.

CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE workspaces (
    id          text PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    name        text NOT NULL UNIQUE,
    root_path   text UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- The user-wide scope every workspace also reads.
INSERT INTO workspaces (id, name) VALUES ('global', 'global');

CREATE TABLE memories (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id     text NOT NULL REFERENCES workspaces (id),
    kind             text NOT NULL CHECK (kind IN ('note', 'decision', 'lesson', 'session', 'import')),
    title            text NOT NULL,
    tags             text[] NOT NULL DEFAULT '{}',
    metadata         jsonb NOT NULL DEFAULT '{}',
    source_uri       text,
    idempotency_key  text,
    status           text NOT NULL DEFAULT 'active' CHECK (status IN
                         ('candidate', 'active', 'confirmed', 'superseded', 'contradicted', 'retracted', 'archived')),
    trust            real NOT NULL DEFAULT 1.0,
    author           text NOT NULL,
    provenance       text NOT NULL CHECK (provenance IN
                         ('agent', 'human', 'harvested_summary', 'harvested_transcript', 'extracted', 'imported', 'consolidated')),
    version          integer NOT NULL DEFAULT 1,
    content_hash     text NOT NULL,
    valid_from       timestamptz,
    valid_to         timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    superseded_by    uuid REFERENCES memories (id)
);

CREATE UNIQUE INDEX memories_source_uri_key ON memories (workspace_id, source_uri) WHERE source_uri IS NOT NULL;
CREATE UNIQUE INDEX memories_idempotency_key ON memories (workspace_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX memories_recent ON memories (workspace_id, updated_at DESC, id DESC);
CREATE INDEX memories_tags ON memories USING gin (tags);

CREATE TABLE memory_versions (
    memory_id      uuid NOT NULL REFERENCES memories (id),
    version        integer NOT NULL,
    workspace_id   text NOT NULL REFERENCES workspaces (id),
    title          text NOT NULL,
    content        text NOT NULL,
    content_hash   text NOT NULL,
    author         text NOT NULL,
    recorded_from  timestamptz NOT NULL DEFAULT now(),
    recorded_to    timestamptz,
    PRIMARY KEY (memory_id, version)
);

CREATE TABLE chunks (
    id               bigserial PRIMARY KEY,
    memory_id        uuid NOT NULL REFERENCES memories (id),
    version          integer NOT NULL,
    workspace_id     text NOT NULL REFERENCES workspaces (id),
    ordinal          integer NOT NULL,
    context          text NOT NULL,
    text             text NOT NULL,
    -- The words inside compound tokens of the text (docs/release.md -> docs release md), which
    -- PostgreSQL's parser indexes only whole, so that `release.md` finds `docs/release.md`.
    parts            text NOT NULL DEFAULT '',
    -- The memory's title is weighted above the body so a title match ranks first; the parts
    -- carry the lowest weight because they repeat what the body already says.
    tsv              tsvector GENERATED ALWAYS AS (
                         setweight(to_tsvector('english', context), 'A') ||
                         setweight(to_tsvector('english', text), 'B') ||
                         setweight(to_tsvector('english', parts), 'D')) STORED,
    embed_status     text NOT NULL DEFAULT 'pending' CHECK (embed_status IN ('pending', 'embedded', 'failed')),
    embed_model      text,
    embed_attempts   integer NOT NULL DEFAULT 0,
    embed_error      text,
    embed_after      timestamptz NOT NULL DEFAULT now(),
    created_at       timestamptz NOT NULL DEFAULT now(),
    embedded_at      timestamptz,
    UNIQUE (memory_id, version, ordinal)
);

CREATE INDEX chunks_tsv ON chunks USING gin (tsv);
CREATE INDEX chunks_memory ON chunks (memory_id, version);
CREATE INDEX chunks_workspace ON chunks (workspace_id);
CREATE INDEX chunks_pending ON chunks (embed_after, id) WHERE embed_status = 'pending';

-- What model the vectors come from; one row, written when the embedding column is created.
CREATE TABLE embedding_space (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    model       text NOT NULL,
    dimension   integer NOT NULL CHECK (dimension > 0),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE audit_events (
    id            bigserial PRIMARY KEY,
    at            timestamptz NOT NULL,
    principal     text NOT NULL,
    workspace_id  text NOT NULL REFERENCES workspaces (id),
    action        text NOT NULL,
    memory_id     uuid,
    version       integer,
    before_hash   text,
    after_hash    text,
    request_id    text NOT NULL,
    trace_id      text NOT NULL,
    prev_hash     text NOT NULL,
    hash          text NOT NULL UNIQUE
);

CREATE INDEX audit_events_workspace ON audit_events (workspace_id, id);
CREATE INDEX audit_events_memory ON audit_events (memory_id, id);

CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER audit_events_append_only
    BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();

CREATE TRIGGER audit_events_no_truncate
    BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();
