-- The claim decision as the migrations leave it: every function a claim batch runs, in the
-- form Postgres itself prints them (pg_get_functiondef), in name order. The migrations
-- redefine these functions one change at a time (docs/ARCHITECTURE.md, "Names in applied
-- migrations"); this file is where to read the current one. The test
-- `claim_decision_sql::the_canonical_file_is_what_the_migrations_define` fails when a
-- migration changes them and this file is not updated (COUPON_BLESS_CLAIM_SQL=1 rewrites it).
CREATE OR REPLACE FUNCTION public.coupon_claims_durable()
 RETURNS void
 LANGUAGE sql
AS $function$
    SELECT pg_logical_emit_message(true, 'coupon-claims-durable', '');
$function$

CREATE OR REPLACE FUNCTION public.coupon_decide_claims(p_template uuid, p_enforce boolean, p_limit bigint, p_ids uuid[], p_users text[], p_rids text[], p_epochs bigint[], p_at timestamp with time zone[], p_from timestamp with time zone[], p_until timestamp with time zone[])
 RETURNS TABLE(verdict text, coupon_id uuid, owner text)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
AS $function$
BEGIN
    BEGIN
        INSERT INTO user_coupon (id, template_id, user_id, status, claim_request_id,
                                 claimed_at, valid_from, valid_until)
        SELECT t.id, p_template, t.uid, 'issued', t.rid, t.at, t.vfrom, t.vuntil
          FROM unnest(p_ids, p_users, p_rids, p_at, p_from, p_until)
               AS t(id, uid, rid, at, vfrom, vuntil)
         ORDER BY t.rid;
    EXCEPTION WHEN unique_violation THEN
        -- A request id (or coupon id) is stored or being stored: none of the batch's rows
        -- are now. The previous function waits for any in flight before the counter lock.
        RETURN QUERY SELECT * FROM coupon_decide_claims_on_conflict(
            p_template, p_enforce, p_limit, p_ids, p_users, p_rids, p_epochs, p_at, p_from,
        p_until);
        RETURN;
    END;
    RETURN QUERY SELECT * FROM coupon_decide_inserted_claims(
        p_template, p_enforce, p_limit, p_ids, p_users, p_rids, p_epochs, p_at, p_from,
        p_until, p_ids);
END
$function$

CREATE OR REPLACE FUNCTION public.coupon_decide_claims_across(p_templates uuid[], p_limits bigint[], p_ids uuid[], p_users text[], p_rids text[], p_epochs bigint[], p_at timestamp with time zone[], p_from timestamp with time zone[], p_until timestamp with time zone[])
 RETURNS TABLE(ord bigint, verdict text, coupon_id uuid, owner text)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
AS $function$
DECLARE
    v_parts  uuid[];
    v_locked bigint;
    v_misfit uuid[];
    v_over   uuid[];
BEGIN
    SELECT array_agg(DISTINCT t ORDER BY t) INTO v_parts FROM unnest(p_templates) AS t;
    BEGIN
        INSERT INTO user_coupon (id, template_id, user_id, status, claim_request_id,
                                 claimed_at, valid_from, valid_until)
        SELECT x.id, x.tpl, x.uid, 'issued', x.rid, x.at, x.vfrom, x.vuntil
          FROM unnest(p_templates, p_ids, p_users, p_rids, p_at, p_from, p_until)
               AS x(tpl, id, uid, rid, at, vfrom, vuntil)
         ORDER BY x.tpl, x.rid;
    EXCEPTION WHEN unique_violation THEN
        RETURN QUERY SELECT * FROM coupon_decide_claims_each_template(
            v_parts, false, p_templates, p_limits, p_ids, p_users, p_rids, p_epochs, p_at,
            p_from, p_until);
        RETURN;
    END;

    SELECT count(*) INTO v_locked
      FROM (SELECT FROM template_stock s WHERE s.template_id = ANY (v_parts)
             ORDER BY s.template_id FOR UPDATE) AS l;
    IF v_locked <> cardinality(v_parts) THEN
        RAISE EXCEPTION 'a template of the batch has no stock row' USING ERRCODE = 'no_data_found';
    END IF;

    SELECT array_agg(p.tpl) INTO v_misfit
      FROM (SELECT x.tpl, count(*) AS n, bool_and(x.epoch = s.epoch) AS same_epoch,
                   min(s.counted) AS counted, min(s.total_stock) AS total
              FROM unnest(p_templates, p_epochs) AS x(tpl, epoch)
              JOIN template_stock s ON s.template_id = x.tpl
             GROUP BY x.tpl) AS p
     WHERE NOT p.same_epoch OR p.counted + p.n > p.total;
    -- One probe per (template, user), by the index only this probe can use (migration ..06).
    SELECT array_agg(DISTINCT q.tpl) INTO v_over
      FROM (SELECT DISTINCT x.tpl, x.uid, x.lim
              FROM unnest(p_templates, p_users, p_limits) AS x(tpl, uid, lim)) AS q
      JOIN LATERAL (SELECT count(*) AS n
                      FROM (SELECT FROM user_coupon c
                             WHERE c.user_id = q.uid
                               AND uuid_send(c.template_id) = uuid_send(q.tpl)
                               AND c.status <> 'revoked'
                             LIMIT q.lim + 1) AS counted) AS h ON true
     WHERE h.n > q.lim;
    v_misfit := coalesce(v_misfit, '{}') || coalesce(v_over, '{}');

    UPDATE template_stock s SET counted = s.counted + p.n
      FROM (SELECT x.tpl, count(*) AS n FROM unnest(p_templates) AS x(tpl)
             WHERE x.tpl <> ALL (v_misfit) GROUP BY x.tpl) AS p
     WHERE s.template_id = p.tpl;
    RETURN QUERY
        SELECT x.i, 'stored'::text, NULL::uuid, NULL::text
          FROM unnest(p_templates) WITH ORDINALITY AS x(tpl, i)
         WHERE x.tpl <> ALL (v_misfit);

    IF cardinality(v_misfit) = 0 THEN
        RETURN;
    END IF;
    DELETE FROM user_coupon c USING unnest(p_templates, p_ids) AS x(tpl, id)
     WHERE c.id = x.id AND x.tpl = ANY (v_misfit);
    RETURN QUERY SELECT * FROM coupon_decide_claims_each_template(
        (SELECT array_agg(DISTINCT m ORDER BY m) FROM unnest(v_misfit) AS m), true,
        p_templates, p_limits, p_ids, p_users, p_rids, p_epochs, p_at, p_from, p_until);
END
$function$

CREATE OR REPLACE FUNCTION public.coupon_decide_claims_each_template(p_parts uuid[], p_counters_held boolean, p_templates uuid[], p_limits bigint[], p_ids uuid[], p_users text[], p_rids text[], p_epochs bigint[], p_at timestamp with time zone[], p_from timestamp with time zone[], p_until timestamp with time zone[])
 RETURNS TABLE(ord bigint, verdict text, coupon_id uuid, owner text)
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_t       uuid;
    v_ords    bigint[];
    v_lim     bigint;
    v_ids     uuid[];
    v_uids    text[];
    v_rids    text[];
    v_epochs  bigint[];
    v_ats     timestamptz[];
    v_vfroms  timestamptz[];
    v_vuntils timestamptz[];
BEGIN
    -- In template id order, the order every batch takes counter rows in (no deadlock).
    FOREACH v_t IN ARRAY p_parts LOOP
        SELECT array_agg(x.i ORDER BY x.i), max(x.lim), array_agg(x.id ORDER BY x.i),
               array_agg(x.uid ORDER BY x.i), array_agg(x.rid ORDER BY x.i),
               array_agg(x.epoch ORDER BY x.i), array_agg(x.at ORDER BY x.i),
               array_agg(x.vfrom ORDER BY x.i), array_agg(x.vuntil ORDER BY x.i)
          INTO v_ords, v_lim, v_ids, v_uids, v_rids, v_epochs, v_ats, v_vfroms, v_vuntils
          FROM unnest(p_templates, p_limits, p_ids, p_users, p_rids, p_epochs, p_at, p_from,
                      p_until)
               WITH ORDINALITY AS x(tpl, lim, id, uid, rid, epoch, at, vfrom, vuntil, i)
         WHERE x.tpl = v_t;
        IF p_counters_held THEN
            RETURN QUERY SELECT v_ords[d.n::int], d.verdict, d.coupon_id, d.owner
              FROM coupon_decide_claims_locked(v_t, true, v_lim, v_ids, v_uids, v_rids,
                       v_epochs, v_ats, v_vfroms, v_vuntils)
                   WITH ORDINALITY AS d(verdict, coupon_id, owner, n);
        ELSE
            RETURN QUERY SELECT v_ords[d.n::int], d.verdict, d.coupon_id, d.owner
              FROM coupon_decide_claims(v_t, true, v_lim, v_ids, v_uids, v_rids, v_epochs,
                       v_ats, v_vfroms, v_vuntils)
                   WITH ORDINALITY AS d(verdict, coupon_id, owner, n);
        END IF;
    END LOOP;
END
$function$

CREATE OR REPLACE FUNCTION public.coupon_decide_claims_in_window(p_template uuid, p_enforce boolean, p_limit bigint, p_ids uuid[], p_users text[], p_rids text[], p_epochs bigint[], p_at timestamp with time zone[], p_from timestamp with time zone[], p_until timestamp with time zone[])
 RETURNS TABLE(verdict text, coupon_id uuid, owner text)
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_starts timestamptz;
    v_ends   timestamptz;
    v_now    timestamptz := now();
BEGIN
    SELECT t.claim_starts_at, t.claim_ends_at INTO v_starts, v_ends
      FROM coupon_template t WHERE t.id = p_template;
    IF (v_starts IS NULL OR v_now >= v_starts) AND (v_ends IS NULL OR v_now < v_ends) THEN
        RETURN QUERY SELECT * FROM coupon_decide_claims(
            p_template, p_enforce, p_limit, p_ids, p_users, p_rids, p_epochs, p_at, p_from,
            p_until);
        RETURN;
    END IF;
    RETURN QUERY
        SELECT CASE WHEN c.id IS NULL THEN
                        CASE WHEN v_starts IS NOT NULL AND v_now < v_starts
                             THEN 'not_open' ELSE 'closed' END
                    WHEN c.id = i.id THEN 'stored'
                    ELSE 'duplicate' END,
               CASE WHEN c.id IS NOT NULL AND c.id <> i.id THEN c.id END,
               CASE WHEN c.id IS NOT NULL AND c.id <> i.id THEN c.user_id END
          FROM unnest(p_ids, p_rids) WITH ORDINALITY AS i(id, rid, n)
          LEFT JOIN user_coupon c
                 ON c.template_id = p_template AND c.claim_request_id = i.rid
         ORDER BY i.n;
END
$function$

CREATE OR REPLACE FUNCTION public.coupon_decide_claims_locked(p_template uuid, p_enforce boolean, p_limit bigint, p_ids uuid[], p_users text[], p_rids text[], p_epochs bigint[], p_at timestamp with time zone[], p_from timestamp with time zone[], p_until timestamp with time zone[])
 RETURNS TABLE(verdict text, coupon_id uuid, owner text)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
AS $function$
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
$function$

CREATE OR REPLACE FUNCTION public.coupon_decide_claims_on_conflict(p_template uuid, p_enforce boolean, p_limit bigint, p_ids uuid[], p_users text[], p_rids text[], p_epochs bigint[], p_at timestamp with time zone[], p_from timestamp with time zone[], p_until timestamp with time zone[])
 RETURNS TABLE(verdict text, coupon_id uuid, owner text)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
AS $function$
DECLARE
    v_mine uuid[];
BEGIN
    WITH ins AS (
        INSERT INTO user_coupon (id, template_id, user_id, status, claim_request_id,
                                 claimed_at, valid_from, valid_until)
        SELECT t.id, p_template, t.uid, 'issued', t.rid, t.at, t.vfrom, t.vuntil
          FROM unnest(p_ids, p_users, p_rids, p_at, p_from, p_until)
               AS t(id, uid, rid, at, vfrom, vuntil)
         ORDER BY t.rid
        ON CONFLICT (template_id, claim_request_id) DO NOTHING
        RETURNING id
    )
    SELECT array_agg(ins.id) INTO v_mine FROM ins;
    RETURN QUERY SELECT * FROM coupon_decide_inserted_claims(
        p_template, p_enforce, p_limit, p_ids, p_users, p_rids, p_epochs, p_at, p_from,
        p_until, v_mine);
END
$function$

CREATE OR REPLACE FUNCTION public.coupon_decide_inserted_claims(p_template uuid, p_enforce boolean, p_limit bigint, p_ids uuid[], p_users text[], p_rids text[], p_epochs bigint[], p_at timestamp with time zone[], p_from timestamp with time zone[], p_until timestamp with time zone[], p_mine uuid[])
 RETURNS TABLE(verdict text, coupon_id uuid, owner text)
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_counted bigint;
    v_total   bigint;
    v_epoch   bigint;
    v_n       bigint := cardinality(p_ids);
    v_fits    boolean;
BEGIN
    SELECT s.counted, s.total_stock, s.epoch INTO v_counted, v_total, v_epoch
      FROM template_stock s WHERE s.template_id = p_template FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'template % has no stock row', p_template USING ERRCODE = 'no_data_found';
    END IF;

    v_fits := coalesce(cardinality(p_mine), 0) = v_n
              AND v_epoch = ALL (p_epochs)
              AND (NOT p_enforce OR v_counted + v_n <= v_total);
    IF v_fits AND p_enforce THEN
        -- One probe per user, by the index only this probe can use (migration ..06).
        SELECT NOT EXISTS (
                 SELECT FROM (SELECT DISTINCT u FROM unnest(p_users) AS u) AS q
                   JOIN LATERAL (SELECT count(*) AS n
                                   FROM (SELECT FROM user_coupon c
                                          WHERE c.user_id = q.u
                                            AND uuid_send(c.template_id) = uuid_send(p_template)
                                            AND c.status <> 'revoked'
                                          LIMIT p_limit + 1) AS counted) AS h ON true
                  WHERE h.n > p_limit)
          INTO v_fits;
    END IF;

    IF v_fits THEN
        IF p_enforce THEN
            UPDATE template_stock SET counted = counted + v_n WHERE template_id = p_template;
        END IF;
        RETURN QUERY SELECT 'stored'::text, NULL::uuid, NULL::text FROM generate_series(1, v_n);
        RETURN;
    END IF;

    IF p_mine IS NOT NULL THEN
        DELETE FROM user_coupon c USING unnest(p_mine) AS m(id) WHERE c.id = m.id;
    END IF;
    RETURN QUERY SELECT * FROM coupon_decide_claims_locked(
        p_template, p_enforce, p_limit, p_ids, p_users, p_rids, p_epochs, p_at, p_from,
        p_until);
END
$function$

