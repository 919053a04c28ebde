-- The connect alone.
SELECT 1;
