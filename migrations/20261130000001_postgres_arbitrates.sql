-- Round 2 (docs/ARCHITECTURE.md, "Postgres decides"): Redis admits, Postgres decides.

-- One row per template: how many of its coupons count against stock (status <> 'revoked')
-- and the fencing epoch of its Redis state. Every claim batch takes this row's lock once,
-- checks the stock inside Postgres and bumps `counted`; a return_to_stock refund decrements
-- it in its own transaction; a rebuild takes the same lock to bump the epoch, so none of
-- them can cross another.
CREATE TABLE template_stock (
    template_id uuid   PRIMARY KEY REFERENCES coupon_template (id),
    total_stock bigint NOT NULL,
    counted     bigint NOT NULL DEFAULT 0,
    epoch       bigint NOT NULL DEFAULT 0
);
INSERT INTO template_stock (template_id, total_stock, counted, epoch)
SELECT t.id, t.total_stock,
       (SELECT count(*) FROM user_coupon c WHERE c.template_id = t.id AND c.status <> 'revoked'),
       t.epoch
FROM coupon_template t;
-- The structural backstop: whatever any code path believes, Postgres refuses an oversell.
-- NOT VALID: a database oversold before this migration still migrates (its audit reports it).
ALTER TABLE template_stock
    ADD CONSTRAINT template_stock_within_total CHECK (counted >= 0 AND counted <= total_stock) NOT VALID;

-- Fencing epochs come from a sequence: a rebuild whose transaction aborts after it wrote
-- Redis has still consumed its number, so the next rebuild can never hand it out again.
CREATE SEQUENCE coupon_epoch_seq;
SELECT setval('coupon_epoch_seq', GREATEST((SELECT max(epoch) FROM coupon_template), 1));
ALTER TABLE coupon_template DROP COLUMN epoch;

-- The identity (`run_id`) of the Redis each key namespace was last rebuilt against: a
-- restarted or promoted Redis has another one, and its templates are rebuilt before they
-- are trusted again (a restart from an old snapshot comes back with stale but present keys).
CREATE TABLE redis_identity (
    namespace text        PRIMARY KEY,
    run_id    text        NOT NULL,
    seen_at   timestamptz NOT NULL DEFAULT now()
);
