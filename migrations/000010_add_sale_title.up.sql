-- What is on sale, as the waiting-room page shows it: a title (NULL: the
-- page shows the SKU) and an optional product image (an https URL the
-- shopper's browser loads; the service never fetches it). Both are checked
-- by the HTTP layer first (flashline.NewSale.Validate); the constraints are
-- the backstop.
ALTER TABLE sales
    ADD COLUMN title text,
    ADD COLUMN image_url text,
    ADD CONSTRAINT sales_title_length CHECK (char_length(title) BETWEEN 1 AND 120),
    ADD CONSTRAINT sales_image_url_https CHECK (image_url LIKE 'https://%' AND octet_length(image_url) <= 2048);
