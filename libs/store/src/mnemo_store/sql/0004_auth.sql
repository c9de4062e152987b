-- Authentication: who may call, with which role, on which workspaces. A token is
-- `mnemo_<id>_<secret>`: the id finds the row, the secret is stored only as its sha256 and
-- compared in constant time. Principals are names; a principal may hold several tokens.
CREATE TABLE principals (
    name        text PRIMARY KEY,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tokens (
    id            text PRIMARY KEY,
    principal     text NOT NULL REFERENCES principals (name),
    secret_hash   text NOT NULL,
    role          text NOT NULL CHECK (role IN ('agent', 'reviewer', 'admin')),
    -- workspace ids the token may touch; {'*'} (every workspace) only for admins
    workspaces    text[] NOT NULL,
    label         text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz,
    CHECK (role = 'admin' OR NOT ('*' = ANY (workspaces))),
    CHECK (cardinality(workspaces) > 0)
);
CREATE INDEX tokens_principal ON tokens (principal);
