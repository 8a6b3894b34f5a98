-- Tells every flashline instance, through LISTEN/NOTIFY on channel
-- flashline_sale_changed (payload: the sale id), when what it may answer
-- without the database changes: a bucket runs out or gets stock back, or a
-- sale's state or opening time changes. Instances then re-read the sale
-- (salecache). Notifications are sent at commit, and only on those
-- transitions, so the purchase path's ordinary decrement sends nothing.

CREATE FUNCTION flashline_notify_sale_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('flashline_sale_changed', NEW.sale_id);
    RETURN NULL;
END
$$;

CREATE TRIGGER stock_crosses_zero
    AFTER UPDATE OF quantity ON stock
    FOR EACH ROW
    WHEN ((OLD.quantity > 0) IS DISTINCT FROM (NEW.quantity > 0))
    EXECUTE FUNCTION flashline_notify_sale_changed();

CREATE TRIGGER sales_state_changed
    AFTER UPDATE OF state, opens_at ON sales
    FOR EACH ROW
    WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.opens_at IS DISTINCT FROM NEW.opens_at)
    EXECUTE FUNCTION flashline_notify_sale_changed();
