-- Undoes 000014 (roll the service back to the release before it first: it
-- calls the function).
DROP FUNCTION reserve_batch_whole(int, int, int, int, boolean);
