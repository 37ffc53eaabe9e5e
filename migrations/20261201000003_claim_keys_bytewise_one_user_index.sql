-- Cheaper index work per claimed coupon (docs/ARCHITECTURE.md, "Group commit"). Measured
-- with `perf` on the backend running coupon_decide_claims: btree comparisons of text keys
-- (bttextcmp → strcoll) and the inserts into five indexes were the largest parts of a
-- claim's cost inside its batch.
--
-- * user_id and claim_request_id compare bytewise (COLLATE "C"). Postgres 15 takes its
--   memcmp fast path only for the "C"/"POSIX" collations, so under a C.UTF-8 or ICU default
--   every key comparison went through strcoll. Nothing orders these ids for people: they
--   are matched for equality, and ordered only to make output deterministic (C.UTF-8
--   orders by code point too, so that order is unchanged there).
-- * One index on (user_id, template_id) serves both lookups that had one each: a user's
--   coupons of one template (the per-user limit, in every claim batch) and a user's
--   coupons across templates (`GET /v1/users/me/coupons`, which now sorts one user's rows
--   by claimed_at instead of reading them in index order). A claimed coupon now writes
--   four index entries, not five.

ALTER TABLE user_coupon
    ALTER COLUMN user_id TYPE text COLLATE "C",
    ALTER COLUMN claim_request_id TYPE text COLLATE "C";

DROP INDEX IF EXISTS user_coupon_template_user_idx;
DROP INDEX IF EXISTS user_coupon_user_idx;
CREATE INDEX user_coupon_user_template_idx ON user_coupon (user_id, template_id);
