-- Who opened, paused, resumed or closed a sale (the admin API's state
-- actions, `flashline sale open|pause|resume|close`, the console): one
-- operator_actions row each, written by the statement that moves the sale
-- (SaleSetState), as extend, void, repair and the queue controls already
-- are. The console's report reads its timeline from these rows.
--
-- Re-adding the CHECK constraint scans operator_actions once under an
-- ACCESS EXCLUSIVE lock (a small table: one row per operator's action).
ALTER TABLE operator_actions
    DROP CONSTRAINT operator_actions_action_valid,
    ADD CONSTRAINT operator_actions_action_valid
        CHECK (action IN ('extend_sale', 'extend_reservation', 'void', 'repair',
                          'hold_queue', 'release_queue', 'broadcast',
                          'open', 'pause', 'resume', 'close'));
