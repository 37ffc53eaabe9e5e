-- The claim batch's plan no longer depends on what the statistics say about user_coupon
-- (docs/ARCHITECTURE.md, "Group commit").
--
-- Postgres plans coupon_decide_claims's statement once per connection (a generic plan, see
-- plan_cache_mode) and keeps that plan for the connection's life. Planned while
-- user_coupon was analyzed empty (ANALYZE after the migrations, or autovacuum after every
-- row was deleted), it looked each request id up through the (user_id, template_id) index,
-- on template_id alone, filtering every coupon of the template: each batch then cost what
-- the sale had issued so far (measured: 40 claims in 25 ms after 6,000 rows instead of
-- ~1.5 ms), until autovacuum analyzed the table again, which is a minute or more. Empty,
-- both indexes cost the same to the planner, so which one it took was luck.
--
-- * The per-user index keys on user_id alone: template_id is no longer a key column of any
--   index but the unique (template_id, claim_request_id), so a request-id probe can only
--   use that one. The per-user probe (a user's coupons of the template) walks the user's
--   entries and checks the template on the row; a user holds few coupons, and each was
--   already fetched from the heap for its status.
-- * The function does not consider sequential scans, which an empty table also makes look
--   free: with the index above the only other way, a plan made on an empty table would scan
--   the whole table per probe instead.

DROP INDEX IF EXISTS user_coupon_user_template_idx;
CREATE INDEX user_coupon_user_idx ON user_coupon (user_id);

ALTER FUNCTION coupon_decide_claims(uuid, boolean, bigint, uuid[], text[], text[], bigint[],
                                    timestamptz[], timestamptz[], timestamptz[])
    SET enable_seqscan = off;
