-- Each claim of the embedding queue marks what it leased with a token of its own (the worker's,
-- mnemo_ingest.worker). A claim whose answer is lost (the connection ended after the server ran
-- it) can then be handed back by its token at once, where its chunks sat leased for the whole
-- lease (MNEMO_EMBED_LEASE_S, 300 s), unseen by any worker.
ALTER TABLE embed_queue ADD COLUMN lease uuid;
