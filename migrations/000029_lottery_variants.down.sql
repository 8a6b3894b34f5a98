-- Lotteries with variants cannot be kept by the version before: it would
-- draw them by rank alone. The down migration refuses while one exists.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM lotteries WHERE draw_version = 3) THEN
        RAISE EXCEPTION 'lotteries with variants exist: the version before cannot draw them';
    END IF;
END $$;
ALTER TABLE lottery_registrations
    DROP CONSTRAINT lottery_registrations_won_variant_named,
    DROP CONSTRAINT lottery_registrations_won_variant_fkey,
    DROP CONSTRAINT lottery_registrations_variant_fkey,
    DROP COLUMN won_variant,
    DROP COLUMN variant;
