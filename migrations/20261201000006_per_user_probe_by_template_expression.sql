-- The per-user probe of the claim batch reaches only the user's coupons of the template
-- again, with a plan that still cannot depend on what the statistics say
-- (docs/ARCHITECTURE.md, "Data model").
--
-- Migration ..05 keyed the per-user index on user_id alone, so that no index but the unique
-- (template_id, claim_request_id) had template_id as a key column and a plan made while
-- user_coupon was analyzed empty could not probe request ids through the wrong one. But
-- then each claim fetched every coupon its user ever held, of any template, to check the
-- template on the row. Measured by a PL/pgSQL loop of 100 batches of 20 claims on one
-- backend, 200 users each holding 500 coupons of other templates: ~350-470 µs a claim
-- against ~28-37 with a (user_id, template_id) index, and 142-155 µs even for users who
-- held none (the index then sits over 100,000 rows of other users' history).
--
-- The index keys on (user_id, uuid_send(template_id)): an expression, so only a query that
-- names uuid_send(template_id) can use its second column. The request-id probe names
-- template_id itself, which this index does not hold as a column, and claim_request_id,
-- which it lacks; with no qualifier on its leading column either, the index is no path for
-- that probe at all, whatever the statistics. The per-user probe names uuid_send(template_id)
-- and nothing the unique index holds, so it has this index alone. uuid_send is immutable
-- and its bytea compares bytewise, like the other keys (migration ..03). A query by user_id
-- alone (a user's coupons) uses the leading column as before.

DROP INDEX IF EXISTS user_coupon_user_idx;
CREATE INDEX user_coupon_user_template_idx ON user_coupon (user_id, uuid_send(template_id));

CREATE OR REPLACE FUNCTION coupon_decide_claims(
    p_template uuid,
    p_enforce  boolean,
    p_limit    bigint,
    p_ids      uuid[],
    p_users    text[],
    p_rids     text[],
    p_epochs   bigint[],
    p_at       timestamptz[],
    p_from     timestamptz[],
    p_until    timestamptz[]
) RETURNS TABLE (verdict text, coupon_id uuid, owner text)
LANGUAGE plpgsql
-- A custom plan per call re-plans the whole statement for every batch (~1.5 ms).
SET plan_cache_mode = force_generic_plan
-- An empty table makes a sequential scan look free (migration ..05).
SET enable_seqscan = off
AS $$
DECLARE
    v_counted bigint;
    v_total   bigint;
    v_epoch   bigint;
BEGIN
    SELECT s.counted, s.total_stock, s.epoch INTO v_counted, v_total, v_epoch
    FROM template_stock s WHERE s.template_id = p_template FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'template % has no stock row', p_template USING ERRCODE = 'no_data_found';
    END IF;
    RETURN QUERY
    WITH intent AS (
        SELECT t.*
          FROM unnest(p_ids, p_users, p_rids, p_epochs, p_at, p_from, p_until)
               WITH ORDINALITY AS t(id, uid, rid, epoch, at, vfrom, vuntil, i)
    ),
    -- One index probe per request id and per user, by equality on both key columns of an
    -- index that no other probe can use (see the top of this file).
    known AS (
        SELECT q.rid, c.id, c.user_id
          FROM (SELECT DISTINCT rid FROM intent) AS q
          JOIN LATERAL (SELECT c.id, c.user_id FROM user_coupon c
                         WHERE c.template_id = p_template AND c.claim_request_id = q.rid
                         LIMIT 1) AS c
            ON true
    ),
    held AS (
        SELECT q.uid, n.n
          FROM (SELECT DISTINCT uid FROM intent) AS q
          JOIN LATERAL (SELECT count(*) AS n
                          FROM (SELECT FROM user_coupon c
                                 WHERE c.user_id = q.uid
                                   AND uuid_send(c.template_id) = uuid_send(p_template)
                                   AND c.status <> 'revoked'
                                 LIMIT p_limit) AS counted) AS n ON true
    ),
    kind AS (
        SELECT intent.*, k.id AS prior_id, k.user_id AS prior_owner, h.n AS held,
               CASE WHEN intent.epoch < v_epoch THEN 'fenced'
                    WHEN intent.epoch > v_epoch THEN 'epoch_ahead'
                    WHEN k.id IS NOT NULL THEN 'known'
                    ELSE 'new' END AS kind
          FROM intent
          LEFT JOIN known k ON k.rid = intent.rid
          JOIN held h ON h.uid = intent.uid
    ),
    -- The first new intent of each request id is judged; later ones follow it.
    fresh AS (
        SELECT kind.*,
               row_number() OVER (PARTITION BY rid ORDER BY i) AS rid_rank
          FROM kind WHERE kind = 'new'
    ),
    judged_user AS (
        SELECT fresh.*,
               (NOT p_enforce
                OR held + row_number() OVER (PARTITION BY uid ORDER BY i) <= p_limit) AS user_ok
          FROM fresh WHERE rid_rank = 1
    ),
    judged AS (
        SELECT judged_user.*,
               CASE
                 WHEN NOT p_enforce THEN 'stored'
                 WHEN user_ok THEN
                   CASE WHEN v_counted + count(*) FILTER (WHERE user_ok)
                                  OVER (ORDER BY i ROWS UNBOUNDED PRECEDING) <= v_total
                        THEN 'stored' ELSE 'stock_empty' END
                 WHEN v_counted + coalesce(count(*) FILTER (WHERE user_ok)
                                  OVER (ORDER BY i ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
                      >= v_total THEN 'stock_empty'
                 ELSE 'user_limit' END AS outcome
          FROM judged_user
    ),
    ins AS (
        INSERT INTO user_coupon (id, template_id, user_id, status, claim_request_id,
                                 claimed_at, valid_from, valid_until)
        SELECT j.id, p_template, j.uid, 'issued', j.rid, j.at, j.vfrom, j.vuntil
          FROM judged j WHERE j.outcome = 'stored'
        RETURNING 1
    ),
    -- The round-1 behaviour (p_enforce false) kept no counter. Postgres runs a
    -- data-modifying WITH to completion whether or not the query reads it.
    bump AS (
        UPDATE template_stock SET counted = counted + (SELECT count(*) FROM ins)
         WHERE template_id = p_template AND p_enforce
    )
    SELECT CASE
             WHEN k.kind IN ('fenced', 'epoch_ahead') THEN k.kind
             WHEN k.kind = 'known' THEN
               CASE WHEN k.prior_id = k.id THEN 'stored' ELSE 'duplicate' END
             WHEN first.outcome = 'stored' THEN
               CASE WHEN first.id = k.id THEN 'stored' ELSE 'duplicate' END
             -- A repeat of a refused request id: still refused, for the stock if it ran
             -- out in between (rare: Redis admits a request id once per epoch).
             WHEN k.i > first.i AND p_enforce
                  AND v_counted + (SELECT count(*) FROM judged a
                                    WHERE a.outcome = 'stored' AND a.i < k.i) >= v_total
               THEN 'stock_empty'
             ELSE first.outcome END,
           CASE
             WHEN k.kind = 'known' AND k.prior_id <> k.id THEN k.prior_id
             WHEN k.kind = 'new' AND first.outcome = 'stored' AND first.id <> k.id THEN first.id
           END,
           CASE
             WHEN k.kind = 'known' AND k.prior_id <> k.id THEN k.prior_owner
             WHEN k.kind = 'new' AND first.outcome = 'stored' AND first.id <> k.id THEN first.uid
           END
      FROM kind k
      LEFT JOIN judged first ON first.rid = k.rid AND k.kind = 'new'
     ORDER BY k.i;
END
$$;
