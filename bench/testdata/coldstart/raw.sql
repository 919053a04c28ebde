-- The bound: a raw single-row UPDATE of an analyzed 2,000-row table.
\set id random(0, 1999)
UPDATE bench_raw SET event_timestamp_ms = :id WHERE id = :id;
