-- A sale may state its price (issue 28): the unit's amount in minor units
-- and its currency (ISO 4217, upper case). When it does, a payment that
-- confirms a hold must pay quantity x amount in that currency; one that does
-- not confirms nothing and is recorded to refund ('amount_mismatch'). Both
-- columns or neither; the HTTP layer checks first (flashline.Price), the
-- constraints are the backstop. Adding nullable columns and re-adding a
-- CHECK on late_payments (one scan of a small table): no rewrite.
ALTER TABLE sales
    ADD COLUMN price_amount bigint,
    ADD COLUMN price_currency text,
    ADD CONSTRAINT sales_price_pair CHECK ((price_amount IS NULL) = (price_currency IS NULL)),
    ADD CONSTRAINT sales_price_amount_range CHECK (price_amount BETWEEN 0 AND 1000000000000),
    ADD CONSTRAINT sales_price_currency_valid CHECK (price_currency ~ '^[A-Z]{3}$');

ALTER TABLE late_payments
    DROP CONSTRAINT late_payments_reason_valid,
    ADD CONSTRAINT late_payments_reason_valid
        CHECK (reason IN ('hold_expired', 'hold_cancelled', 'hold_voided', 'duplicate_payment', 'amount_mismatch'));
