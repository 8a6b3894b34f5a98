-- Lotteries with variants (issue 49; docs/lottery.md, lotterydraw.go). A
-- registration names the variant it wants (variant, its SKU) or any (NULL);
-- the draw awards each winner a unit of one variant (won_variant), up to each
-- variant's stock in draw order. A lottery with variants draws with formula
-- v3 (draw_version 3): its registrants' leaves commit to each choice. A
-- lottery without variants is unchanged: variant and won_variant NULL,
-- draw_version 2.
--
-- Rolling upgrade: the migration only adds (two nullable columns, a CHECK
-- that holds for every existing row), so instances of the version before
-- keep working on every lottery they know. They do not know variants: until
-- every instance runs this version, do not create a lottery with variants
-- (the version before would draw it by rank alone, without the awards).
--
-- The constraints are added NOT VALID: every existing row has both columns
-- NULL, so there is nothing to check, and a validating scan would hold the
-- table's lock (ADD COLUMN's, kept to the migration's commit) while it reads
-- every registration, with a live lottery's registrations queued behind it.
-- New and updated rows are checked as always.
ALTER TABLE lottery_registrations
    ADD COLUMN variant     text,
    ADD COLUMN won_variant text,
    ADD CONSTRAINT lottery_registrations_variant_fkey
        FOREIGN KEY (sale_id, variant) REFERENCES sale_variants (sale_id, sku) NOT VALID,
    ADD CONSTRAINT lottery_registrations_won_variant_fkey
        FOREIGN KEY (sale_id, won_variant) REFERENCES sale_variants (sale_id, sku) NOT VALID,
    ADD CONSTRAINT lottery_registrations_won_variant_named
        CHECK (won_variant IS NULL OR variant IS NULL OR won_variant = variant) NOT VALID;
