-- Why a session is skipped becomes a column (a SkipReason label of harvest_service.proto), no
-- longer the prefix of a message that code had to parse; detail keeps the words for people.

ALTER TABLE harvest_sources ADD COLUMN skip_reason text;

UPDATE harvest_sources SET skip_reason = split_part(detail, ':', 1)
WHERE state = 'skipped' AND split_part(detail, ':', 1) IN ('paused', 'self-capture', 'empty', 'no-workspace', 'tombstoned');
