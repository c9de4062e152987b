-- Harvest: which source version produced which memory version (derivations, written by ingest in
-- the write's transaction), and harvest's own record of the sessions it has seen.

CREATE TABLE derivations (
    id                  bigserial PRIMARY KEY,
    workspace_id        text NOT NULL REFERENCES workspaces (id),
    source_uri          text NOT NULL,
    source_fingerprint  text NOT NULL,
    summarizer          text NOT NULL,
    prompt_version      text NOT NULL DEFAULT '',
    memory_id           uuid NOT NULL,
    version             integer NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    -- Two harvest replicas deriving the same source version race here: one insert wins.
    UNIQUE (workspace_id, source_uri, source_fingerprint, summarizer, prompt_version)
);
CREATE INDEX derivations_memory ON derivations (memory_id);

CREATE TABLE harvest_sources (
    agent                  text NOT NULL,
    session_id             text NOT NULL,
    path                   text NOT NULL,
    cwd                    text,
    workspace_id           text,
    size                   bigint NOT NULL DEFAULT 0,
    mtime                  timestamptz,
    content_hash           text,
    state                  text NOT NULL CHECK (state IN ('active', 'idle', 'harvested', 'skipped', 'failed')),
    detail                 text,
    -- false when the memory is a fallback transcript whose summary should be retried
    final                  boolean NOT NULL DEFAULT true,
    -- how the memory was derived (`transcript`, or summarizer model/prompt version): a new
    -- summarizer or prompt re-derives every session once, even when its file has not changed
    derived_with           text,
    memory_id              uuid,
    harvested_size         bigint,
    harvested_mtime        timestamptz,
    harvested_at           timestamptz,
    attempts               integer NOT NULL DEFAULT 0,
    archive_path           text,
    archive_bytes          bigint,
    archived_at            timestamptz,
    archive_evicted_at     timestamptz,
    first_seen_at          timestamptz NOT NULL DEFAULT now(),
    last_seen_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent, session_id)
);
CREATE INDEX harvest_sources_state ON harvest_sources (state);
