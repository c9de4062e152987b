-- Memory poisoning: text that tries to instruct the model is kept, but flagged with the kinds of
-- instruction found, enters as a candidate and carries a lower own trust factor.
ALTER TABLE memories ADD COLUMN suspicious text[] NOT NULL DEFAULT '{}';
