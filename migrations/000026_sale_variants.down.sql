-- Sales with variants cannot be kept by the version before: their stock rows
-- would be sold as one. The down migration refuses while one exists (delete
-- or close-and-archive them first).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM sales WHERE variant_count > 0) THEN
        RAISE EXCEPTION 'sales with variants exist: the version before cannot sell them';
    END IF;
END $$;
DROP VIEW sale_variant_invariant;
ALTER TABLE stock DROP CONSTRAINT stock_variant_fkey;
ALTER TABLE stock DROP COLUMN variant;
ALTER TABLE sales DROP CONSTRAINT sales_variant_count_range;
ALTER TABLE sales DROP COLUMN variant_count;
DROP TABLE sale_variants;
