-- Number 002 belongs to the worker's claim lease (issue 7), developed on
-- another branch. tern needs consecutive numbers, so this empty stand-in
-- keeps 003 loadable until then; the real 002 replaces it when they meet.
SELECT 1;
