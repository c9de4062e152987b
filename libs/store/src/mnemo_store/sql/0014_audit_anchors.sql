-- The signed head of each workspace's audit chain: how many events it holds and the last one's
-- hash, with an HMAC under a key kept outside the database (MNEMO_AUDIT_KEY_FILE). Updated in the
-- transaction that appends, so it always matches the chain; a chain cut short, or an anchor rolled
-- forward or back without the key, no longer matches (docs/security.md, "The audit chain's anchor").
CREATE TABLE audit_anchors (
    workspace_id  text PRIMARY KEY REFERENCES workspaces (id),
    events        bigint NOT NULL CHECK (events > 0),
    head_hash     text NOT NULL,
    signature     text NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now()
);
