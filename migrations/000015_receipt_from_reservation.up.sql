-- A key no longer stores its 201 body (issue 26): the receipt is made again
-- from the reservation's row, which holds all of it (id, sale, quantity) but
-- the expiry it was first given, which an extension moves: that is kept in
-- the key's row, eight bytes instead of a hundred and thirty. A replay is
-- still byte for byte the first answer: the receipt is the same function of
-- the same values (flashline.NewReceipt). Keys stored before keep their body
-- and replay it. Dropping NOT NULL and adding a nullable column: no rewrite.
ALTER TABLE idempotency_keys
    ALTER COLUMN response_body DROP NOT NULL,
    ADD COLUMN receipt_expires_at timestamptz,
    ADD CONSTRAINT idempotency_keys_receipt CHECK (response_body IS NOT NULL OR receipt_expires_at IS NOT NULL);
