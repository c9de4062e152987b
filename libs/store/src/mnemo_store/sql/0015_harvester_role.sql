-- The harvester role (docs/security.md): a laptop's remote harvester writes its harvested sessions and
-- their candidates through the gateway, and nothing else. The inline CHECK of 0004 is named by
-- PostgreSQL's default, tokens_role_check.
ALTER TABLE tokens DROP CONSTRAINT tokens_role_check;
ALTER TABLE tokens ADD CONSTRAINT tokens_role_check CHECK (role IN ('harvester', 'agent', 'reviewer', 'admin'));
