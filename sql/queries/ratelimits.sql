-- Fixed-window rate limits shared by every instance (postgres.Store.RateLimit).

-- name: RateLimitHit :one
-- Counts one hit for (@scope, @subject) in the current window of
-- @window_seconds and says whether it is within @max_hits. One statement: the
-- upsert takes the row lock, so concurrent hits from any instance are each
-- counted once. Windows are aligned to the epoch, so every instance agrees on
-- where one starts.
INSERT INTO rate_limits AS rl (scope, subject, window_start, hits)
VALUES (@scope::text, @subject::text,
        to_timestamp(floor(extract(epoch FROM now()) / @window_seconds::int) * @window_seconds::int),
        1)
ON CONFLICT (scope, subject, window_start) DO UPDATE SET hits = rl.hits + 1
RETURNING (rl.hits <= @max_hits::int)::boolean AS allowed;

-- name: RateLimitsPrune :execrows
-- Deletes a batch of windows that ended over an hour ago (no limit uses a
-- longer window). Called until it deletes fewer than @batch_size rows.
DELETE FROM rate_limits
 WHERE (scope, subject, window_start) IN (
       SELECT r.scope, r.subject, r.window_start
         FROM rate_limits r
        WHERE r.window_start < now() - interval '1 hour'
        LIMIT @batch_size::int);
