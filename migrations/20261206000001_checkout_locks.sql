-- Checkout (issue 48): an order locks a coupon when it is placed; payment redeems it
-- (locked → used), a cancel releases it (locked → issued), and a lock whose order never
-- paid lapses at `locked_until` and is swept back to issued. A locked coupon names its order
-- exactly as a used one does, so "one live order per coupon" stays a property of one row.

ALTER TABLE user_coupon DROP CONSTRAINT user_coupon_status_check;
ALTER TABLE user_coupon ADD CONSTRAINT user_coupon_status_check
    CHECK (status IN ('issued', 'locked', 'used', 'expired', 'revoked'));

ALTER TABLE user_coupon ADD COLUMN locked_until timestamptz;

ALTER TABLE user_coupon DROP CONSTRAINT user_coupon_order_matches_status;
ALTER TABLE user_coupon ADD CONSTRAINT user_coupon_order_matches_status
    CHECK ((status IN ('used', 'locked')) = (order_id IS NOT NULL));
ALTER TABLE user_coupon ADD CONSTRAINT user_coupon_lock_matches_status
    CHECK ((status = 'locked') = (locked_until IS NOT NULL));

-- The lock sweep reads only live locks, oldest deadline first.
CREATE INDEX user_coupon_lock_expiry_idx ON user_coupon (locked_until) WHERE status = 'locked';
