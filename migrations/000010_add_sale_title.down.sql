-- Undoes 000010: the sales' titles and images are dropped (the previous
-- release shows the SKU).
ALTER TABLE sales
    DROP CONSTRAINT sales_image_url_https,
    DROP CONSTRAINT sales_title_length,
    DROP COLUMN image_url,
    DROP COLUMN title;
