-- Undoes 000014: sales lose their price. Late payments recorded because
-- they paid another amount are still payments to refund; the previous
-- release has no name for that, so they are kept as 'duplicate_payment'
-- (a payment the order did not take), still listed until refunded.
UPDATE late_payments SET reason = 'duplicate_payment' WHERE reason = 'amount_mismatch';
ALTER TABLE late_payments
    DROP CONSTRAINT late_payments_reason_valid,
    ADD CONSTRAINT late_payments_reason_valid
        CHECK (reason IN ('hold_expired', 'hold_cancelled', 'hold_voided', 'duplicate_payment'));

ALTER TABLE sales
    DROP CONSTRAINT sales_price_currency_valid,
    DROP CONSTRAINT sales_price_amount_range,
    DROP CONSTRAINT sales_price_pair,
    DROP COLUMN price_currency,
    DROP COLUMN price_amount;
