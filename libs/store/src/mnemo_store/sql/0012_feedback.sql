-- Reserved for the feedback work (issue 13), which owns migration 0012; this placeholder only keeps
-- the sequence unbroken on the `consolidate` branch (0013 follows). When the branches meet, the
-- feedback branch's 0012 replaces this file.
SELECT 1;
