-- Corrections: recorded status spans (the system-time axis of status and valid time), deletion
-- with tombstones keyed on the source, and details on audit events.

ALTER TABLE memories ADD COLUMN status_reason text;
ALTER TABLE memories ADD COLUMN deleted_at timestamptz;

-- Every status or valid-time change closes the open span and opens the next, so a read
-- `as_of` a past time sees the status the memory had then.
CREATE TABLE memory_states (
    memory_id      uuid NOT NULL REFERENCES memories (id),
    workspace_id   text NOT NULL REFERENCES workspaces (id),
    status         text NOT NULL CHECK (status IN
                       ('candidate', 'active', 'confirmed', 'superseded', 'contradicted', 'retracted', 'archived')),
    reason         text,
    principal      text NOT NULL,
    superseded_by  uuid,
    valid_from     timestamptz,
    valid_to       timestamptz,
    recorded_from  timestamptz NOT NULL DEFAULT now(),
    recorded_to    timestamptz,
    PRIMARY KEY (memory_id, recorded_from)
);
CREATE UNIQUE INDEX memory_states_open ON memory_states (memory_id) WHERE recorded_to IS NULL;

INSERT INTO memory_states (memory_id, workspace_id, status, principal, superseded_by, valid_from, valid_to, recorded_from)
SELECT id, workspace_id, status, author, superseded_by, valid_from, valid_to, created_at FROM memories;

CREATE INDEX memory_versions_open ON memory_versions (memory_id) WHERE recorded_to IS NULL;

-- A deletion, keyed on the memory's source so nothing derived from it comes back. The
-- snapshot is the memory's state when deleted (what restore returns to); purge clears it and
-- the reason, keeping only the key, who and when.
CREATE TABLE tombstones (
    id                  bigserial PRIMARY KEY,
    workspace_id        text NOT NULL REFERENCES workspaces (id),
    memory_id           uuid NOT NULL,
    source_uri          text,
    source_fingerprint  text,
    snapshot            jsonb,
    reason              text,
    principal           text NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    restored_at         timestamptz,
    purged_at           timestamptz
);
CREATE INDEX tombstones_memory ON tombstones (memory_id);
-- While a tombstone stands (not restored), no write may bring its source back.
CREATE UNIQUE INDEX tombstones_standing_source ON tombstones (workspace_id, source_uri)
    WHERE source_uri IS NOT NULL AND restored_at IS NULL;

ALTER TABLE audit_events ADD COLUMN details jsonb NOT NULL DEFAULT '{}';
