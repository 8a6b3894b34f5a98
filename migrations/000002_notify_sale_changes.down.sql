DROP TRIGGER IF EXISTS sales_state_changed ON sales;
DROP TRIGGER IF EXISTS stock_crosses_zero ON stock;
DROP FUNCTION IF EXISTS flashline_notify_sale_changed();
