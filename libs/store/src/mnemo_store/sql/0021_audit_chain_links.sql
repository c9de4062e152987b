-- One event after each link of a workspace's chain. A chain is extended under its lock
-- (audit.CHAIN_LOCK), after reading its head; a new note may instead be written in one statement
-- that links its event to the head the ingest process remembers (audit.ChainHeads), checked in that
-- statement's snapshot. That snapshot can predate a writer that committed while the statement waited
-- for the lock: this index is what then refuses the second event after the same head, so the
-- statement fails whole (nothing of the note is kept) and the write is made again the long way,
-- instead of forking the chain.
--
-- A chain written under the lock has no two events after one head, so this builds on any database
-- this project wrote; one that has such a pair is already broken (`mnemo audit verify` names it).
CREATE UNIQUE INDEX audit_events_chain_link ON audit_events (workspace_id, prev_hash);

-- Called where a statement finds a chain's head is not the one it was written against: it fails the
-- statement, whose writer then takes the long way (writes.Writes). VOLATILE, so it is called only
-- when reached, never folded in at planning.
CREATE FUNCTION audit_head_moved(workspace text) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'the audit chain of workspace % has moved on since its head was read', workspace
        USING ERRCODE = 'MN001';
END;
$$;
